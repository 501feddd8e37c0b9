/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * supervisor.h: the supervisor (Supervisor On, monkey -S), a small parent
 * process that owns the listening sockets and runs the server as its child,
 * restarting it after a crash (supervisor.c); what the child learns from it
 * (supervisor.c, the child side); and the pure pieces both use
 * (supervisor_msg.c: crash window, back-off, reasons, the messages between
 * them), which the unit tests and the fuzz target call directly. A server
 * built without the supervisor (MK_SUPERVISOR=OFF) has neither file: the
 * child's side below becomes stubs of a process never supervised.
 *
 * Threads: the supervisor is one thread (its poll loop); it starts no
 * worker and loads no plugin. In the child, what it learns is read once
 * at start on the controlling thread (the MK_SUPERVISOR_* variables) and
 * only read afterwards (api->supervisor_stats, any thread).
 */
#ifndef MK_SERVER_SUPERVISOR_H
#define MK_SERVER_SUPERVISOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <monkey/mk_common.h>
#include <monkey/mk_plugin.h>

struct mk_server;

#ifdef MK_HAVE_SUPERVISOR
/* ---- the supervisor process (supervisor.c) ------------------------------- */

struct mk_supervisor_opts {
    bool force;        /* monkey -S: supervise whatever the configuration says */
    char *const *argv; /* the command line, run again for each child */
    /* Called once: the first child serves (err NULL), or none ever will (err
       says why). monkey -D reports it to the terminal. May be NULL. */
    void (*ready)(void *arg, const char *err);
    void *ready_arg;
    int status; /* out: the exit status for the process, after MK_OK */
};

/*
 * Supervise `srv` when o->force is set or its configuration says Supervisor
 * On: bind the listening sockets, start the server as a child process (this
 * binary again, with the sockets as LISTEN_FDS), start a new child at once
 * after one dies from a signal (backing off in a crash loop, giving up after
 * SupervisorCrashLimit crashes in SupervisorCrashWindow), forward HUP, USR1,
 * TERM, INT and QUIT, and return when the child exited or the supervisor
 * gave up: MK_OK with o->status set. MK_DECLINED: not supervised (without
 * force, no Supervisor On or a configuration that does not load; the caller
 * starts the server itself and reports its errors). MK_ERR with the reason
 * in err: nothing could start (a bad configuration with -S, a socket that
 * cannot be bound). Call from a single-threaded process.
 */
int mk_supervisor_run(struct mk_server *srv, struct mk_supervisor_opts *o, char *err,
                      size_t errlen);

/* ---- the child's side (supervisor.c) ------------------------------------- */

/*
 * In a server started by a supervisor, take what it passed (the
 * MK_SUPERVISOR_* variables, removed from the environment) and return true;
 * false in any other process. The child takes the name of argv0 (ps shows
 * it, not "exe"). Call once, at the start of main.
 */
bool mk_supervisor_child_init(const char *argv0);
/* Whether mk_supervisor_child_init() found a supervisor. */
bool mk_supervisor_is_child(void);
/*
 * A supervised server that cannot start tells its supervisor why, before
 * it exits (the supervisor logs it to the Log: the child's standard error
 * may go nowhere). Nothing when not supervised.
 */
void mk_supervisor_child_failed(const char *err);
/* api->supervisor_stats: MK_OK with *out, or MK_DECLINED when not supervised. */
int mk_supervisor_stats_get(struct mk_supervisor_stats *out);

#else /* built without the supervisor (MK_SUPERVISOR=OFF): never supervised */

static inline bool mk_supervisor_child_init(const char *argv0)
{
    (void) argv0;
    return false;
}

static inline bool mk_supervisor_is_child(void)
{
    return false;
}

static inline void mk_supervisor_child_failed(const char *err)
{
    (void) err;
}

static inline int mk_supervisor_stats_get(struct mk_supervisor_stats *out)
{
    (void) out;
    return MK_DECLINED;
}
#endif

/* ---- pure pieces (supervisor_msg.c) -------------------------------------- */

/* The names of the variables the supervisor sets for its child. */
#define MK_SUPERVISOR_ENV_PID "MK_SUPERVISOR_PID"
#define MK_SUPERVISOR_ENV_RESTARTS "MK_SUPERVISOR_RESTARTS"
#define MK_SUPERVISOR_ENV_CRASH "MK_SUPERVISOR_CRASH" /* "EPOCH REASON" */

/* The longest a crash loop waits before the next start. */
#define MK_SUPERVISOR_BACKOFF_MAX_MS 5000u
/* The longest the supervisor waits before trying again a start that failed. */
#define MK_SUPERVISOR_RETRY_MAX_MS 30000u
/*
 * The key of the readiness message in which a child that cannot start
 * tells its supervisor why ("MONKEY_START_ERROR=reason"): the supervisor
 * logs it and does not pass it on to the service manager.
 */
#define MK_SUPERVISOR_NOTIFY_ERROR "MONKEY_START_ERROR"
/* The most crashes SupervisorCrashLimit may name (the window's capacity). */
#define MK_SUPERVISOR_CRASH_LIMIT_MAX 1000u

/* The times of the last crashes, to tell a crash loop from rare crashes. */
struct mk_crash_window {
    uint64_t at_ms[MK_SUPERVISOR_CRASH_LIMIT_MAX]; /* a ring, oldest at `first` */
    unsigned first, n;
    unsigned limit; /* crashes within window_ms that mean a crash loop */
    uint32_t window_ms;
};

void mk_supervisor_crash_window_init(struct mk_crash_window *w, unsigned limit, uint32_t window_ms);
/*
 * Record a crash at now_ms (monotonic, never decreasing) and return how
 * many crashes, this one included, fell within the window ending now. The
 * caller gives up when that reaches w->limit.
 */
unsigned mk_supervisor_crash_window_add(struct mk_crash_window *w, uint64_t now_ms);
/*
 * How long to wait before starting the server again after the n-th crash
 * within the window (n >= 1): 0 for the first, then 100 ms doubling each
 * time, at most MK_SUPERVISOR_BACKOFF_MAX_MS.
 */
uint32_t mk_supervisor_backoff_ms(unsigned n);
/*
 * How long to wait before starting the server again after the n-th start
 * in a row that failed (n >= 1: a child that exited before it was ready,
 * after an earlier one had served): 100 ms doubling each time, at most
 * MK_SUPERVISOR_RETRY_MAX_MS.
 */
uint32_t mk_supervisor_retry_ms(unsigned n);
/*
 * Why a child ended, from its wait status: "signal 11 (SIGSEGV), core
 * dumped", "signal 9 (SIGKILL)", "exit status 3". Always NUL terminated.
 */
void mk_supervisor_reason(int wstatus, char *out, size_t len);

/*
 * A readiness message of the child (sd_notify(3): "KEY=VALUE" lines) as the
 * supervisor passes it on to its own service manager: every line but
 * MAINPID and MK_SUPERVISOR_NOTIFY_ERROR, and after READY=1
 * "MAINPID=<mainpid>", so the manager keeps
 * watching the supervisor. Returns the length written to out (NUL
 * terminated; 0: nothing to pass on) and sets *ready when the message holds
 * READY=1. Lines without '=' and empty lines are dropped; a message that
 * does not fit in out is dropped whole.
 */
size_t mk_supervisor_notify_rewrite(const char *in, size_t len, long mainpid, char *out,
                                    size_t outlen, bool *ready);
/*
 * The value of the MK_SUPERVISOR_NOTIFY_ERROR line of a readiness message
 * (the last one, when there are several) into out, cut to fit and NUL
 * terminated: true, or false when the message has none or outlen is 0
 * (out untouched).
 */
bool mk_supervisor_notify_error(const char *in, size_t len, char *out, size_t outlen);
/*
 * The MK_SUPERVISOR_NOTIFY_ERROR message for `reason` into out (NUL
 * terminated, cut to fit): its line breaks and other control characters
 * become spaces, so the message stays one line. Returns its length.
 */
size_t mk_supervisor_notify_error_format(const char *reason, char *out, size_t outlen);

/*
 * Read the supervisor's variables (values NULL when unset): MK_OK with *out
 * filled (pid from pid_text, restarts, last crash time and reason), or
 * MK_ERR when pid_text is missing or not a positive number; a bad restarts
 * or crash value counts as none.
 */
int mk_supervisor_env_parse(const char *pid_text, const char *restarts_text, const char *crash_text,
                            struct mk_supervisor_stats *out);

#endif
