/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * log.h: the server's diagnostic log (not the access log, which is a plugin).
 *
 * Lines go to standard error or to a file named by the `Log` key, one write(2)
 * each, so lines from several threads never interleave. Any thread may log.
 * mk_log_reopen() is called on SIGUSR1 so logrotate works.
 *
 * Sinks: each server (two may run in one process) has its own file and
 * level, a `struct mk_log_sink`. A thread logs to the sink it was bound to
 * (mk_log_bind: a server's workers, task threads, acceptor and controlling
 * thread; a plugin's own thread through api->thread_serve), else to the
 * sink of the server that started last (mk_log_fallback: threads of a
 * plugin's own that did not say), else to the process's
 * (standard error, info). The
 * functions below without a sink argument act on that same sink.
 */
#ifndef MK_CORE_LOG_H
#define MK_CORE_LOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum mk_log_level { MK_LOG_ERROR = 0, MK_LOG_WARN, MK_LOG_INFO, MK_LOG_DEBUG };

struct mk_log_sink {
    atomic_int fd;    /* STDERR_FILENO until a file is opened */
    atomic_int level; /* enum mk_log_level */
    char *path;       /* NULL: standard error */
    uid_t owner;      /* who a file root opens is given to ((uid_t) -1: nobody) */
};

/* A sink writing to standard error at level info. */
void mk_log_sink_init(struct mk_log_sink *s);
/*
 * Release s (its file, its path) once no thread logs to it any more; the
 * threads bound to it and the fallback are unbound first (see above).
 */
void mk_log_sink_release(struct mk_log_sink *s);
/* Log to `s` on the calling thread from now on (NULL: unbind). */
void mk_log_bind(struct mk_log_sink *s);
/* Make `s` the sink of threads bound to none (a server that starts). */
void mk_log_fallback(struct mk_log_sink *s);

/*
 * Send lines to `path` (NULL: standard error). Returns MK_OK or MK_ERR
 * with errno. The file is opened (created 0640 if missing) without
 * following a symbolic link at its path (ELOOP), since its directory may
 * be writable by the User the server switches to; see mk_log_set_owner.
 */
int mk_log_open(const char *path);
/* Open the path again (SIGUSR1, after a rotation), as mk_log_open does. */
int mk_log_reopen(void);
/*
 * A process running as root that will switch to `uid` (the User), or that
 * shares its Log with one that did (the supervisor): each log file it opens
 * from now on that root owns (it just created it, or an earlier start as
 * root did) is given to `uid`, so that the server can open it again after
 * switching (a failed fchown is a warning). A regular file with more than
 * one link is refused (EMLINK)
 * rather than written as root: it could be a hard link, planted in the
 * User's directory, to a file of root's. (uid_t) -1: none (the default).
 */
void mk_log_set_owner(uid_t uid);
/*
 * The same for a descriptor just opened by a caller with its own log files
 * (the logger plugin): MK_OK (given, or nothing to do: this process is not
 * root, uid is -1, the file is not a regular one or not root's), MK_ERR
 * with EMLINK (refuse the file, as above), or MK_DECLINED with errno when
 * fchown failed (root without CAP_CHOWN: warn, the file stays usable).
 */
int mk_log_file_give(int fd, uid_t uid);
/*
 * Open a log file of the caller's own as this process opens its Log:
 * `flags` with O_CLOEXEC, O_NOCTTY and O_NOFOLLOW (a link at the path is
 * refused, ELOOP), created with `mode`, and given to the owner set with
 * mk_log_set_owner (mk_log_file_give; a failed fchown is a warning). The
 * descriptor, or -1 with errno. (api->log_file_open.)
 */
int mk_log_file_open(const char *path, int flags, mode_t mode);
void mk_log_set_level(enum mk_log_level level);
enum mk_log_level mk_log_get_level(void);

void mk_log(enum mk_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * A message that may come in a flood (one per failed accept) limited to
 * one per period, shared by the threads that may log it: zero-initialised.
 */
struct mk_log_gate {
    _Atomic uint64_t next_ms; /* when the next message may go out */
    atomic_uint skipped;      /* calls refused since the last one passed */
};
/*
 * Whether the message may be logged at now_ms (monotonic): true at most
 * once per `every_ms`, with *skipped the calls refused since the last one
 * that passed; false otherwise (the call is counted). Any thread.
 */
bool mk_log_gate_pass(struct mk_log_gate *g, uint64_t now_ms, uint32_t every_ms, unsigned *skipped);

#define mk_err(...) mk_log(MK_LOG_ERROR, __VA_ARGS__)
#define mk_warn(...) mk_log(MK_LOG_WARN, __VA_ARGS__)
#define mk_info(...) mk_log(MK_LOG_INFO, __VA_ARGS__)
#define mk_debug(...)                                                                              \
    do {                                                                                           \
        if (mk_log_get_level() >= MK_LOG_DEBUG) {                                                  \
            mk_log(MK_LOG_DEBUG, __VA_ARGS__);                                                     \
        }                                                                                          \
    } while (0)

#endif
