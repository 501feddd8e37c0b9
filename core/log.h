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

enum mk_log_level { MK_LOG_ERROR = 0, MK_LOG_WARN, MK_LOG_INFO, MK_LOG_DEBUG };

struct mk_log_sink {
    atomic_int fd;    /* STDERR_FILENO until a file is opened */
    atomic_int level; /* enum mk_log_level */
    char *path;       /* NULL: standard error */
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

/* Send lines to `path` (NULL: standard error). Returns MK_OK or MK_ERR. */
int mk_log_open(const char *path);
int mk_log_reopen(void);
void mk_log_set_level(enum mk_log_level level);
enum mk_log_level mk_log_get_level(void);

void mk_log(enum mk_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

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
