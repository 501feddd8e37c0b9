/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * process.h: between server.c (start, reload, stop) and process.c (process
 * setup and the control loop), and what the supervisor and the binary
 * (tools/monkey.c) share with that loop. Controlling thread only.
 */
#ifndef MK_SERVER_PROCESS_H
#define MK_SERVER_PROCESS_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

struct mk_config;
struct mk_server;

/* ---- process.c ----------------------------------------------------------- */

/* Raise the descriptor limit and derive the connection limit from it. */
void mk_process_limits(struct mk_server *srv, const struct mk_config *cfg);
/*
 * The uid of cfg's User when this process is root and will switch to it
 * (the log files it opens are given to it); (uid_t) -1 otherwise.
 */
uid_t mk_process_user_uid(const struct mk_config *cfg);
/*
 * Become the User of cfg when started as root (else nothing, said once).
 * MK_OK, or MK_ERR with the reason in err.
 */
int mk_process_drop_privileges(const struct mk_config *cfg, char *err, size_t errlen);
/* Write the PidFile of the running configuration, if any. MK_OK, or MK_ERR with the reason in err.
 */
int mk_process_pidfile(struct mk_server *srv, char *err, size_t errlen);
/*
 * Write this process's id to `path`: into a new file beside it (O_EXCL,
 * O_NOFOLLOW, mode 0644), then renamed over it, so that a link planted at
 * the path is replaced rather than followed. MK_OK, or MK_ERR with
 * "PidFile PATH: reason" in err (no file left behind).
 */
int mk_process_pidfile_write(const char *path, char *err, size_t errlen);
/*
 * The signals the control loop reads from its signalfd (TERM, INT, QUIT,
 * HUP, USR1, PIPE): the set a process blocks before it starts threads.
 */
void mk_process_signal_set(sigset_t *set);
/*
 * mk_server_run(), telling started(arg, err) once mk_server_start() has
 * returned: err NULL when the server serves, else the reason (the run then
 * returns MK_ERR). monkey -D uses it to release its waiting parent.
 */
int mk_process_run_notify(struct mk_server *srv, void (*started)(void *arg, const char *err),
                          void *arg, char *err, size_t errlen);

/* ---- server.c ------------------------------------------------------------ */

/*
 * A new configuration from the server's directory (or -o) and overrides,
 * without plugins: the caller owns the reference. NULL with the reason in err.
 */
struct mk_config *mk_server_load_config(struct mk_server *srv, char *err, size_t errlen);

/* Send `flags` (MK_WCTL_STOP or MK_WCTL_HALT) to every worker; the acceptor stops first. */
void mk_server_signal_workers(struct mk_server *srv, unsigned flags);
/*
 * After the workers: stop the task threads, run the plugins' exit(),
 * release the workers, the configuration and the plugins.
 */
void mk_server_finish(struct mk_server *srv);

#endif
