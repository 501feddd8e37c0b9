/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * monkey.h: the library API, to embed the server in another program.
 *
 *     struct mk_server *srv = mk_server_create();
 *     mk_server_set_docroot(srv, "/srv/www");
 *     mk_server_set(srv, "Listen", "127.0.0.1:8080");
 *     if (mk_server_start(srv, err, sizeof(err)) != MK_OK) { ... }
 *     ...                        the program goes on; workers serve
 *     mk_server_stop(srv);       graceful: in-flight responses finish
 *     mk_server_destroy(srv);
 *
 * mk_server_run() is what the `monkey` binary does: start, then handle
 * SIGTERM/SIGINT (graceful stop; a second one stops at once), SIGHUP
 * (reload) and SIGUSR1 (reopen logs) until the server has stopped.
 *
 * Functions that fail return MK_ERR and write a message naming the file and
 * line at fault into err. All functions are called from one thread (the
 * embedding program's); the server runs on threads of its own, created with
 * every signal blocked.
 */
#ifndef MONKEY_MONKEY_H
#define MONKEY_MONKEY_H

#include <stddef.h>
#include <stdio.h>

#include "mk_common.h"
#include "mk_lib.h"

#pragma GCC visibility push(default)

struct mk_server;

struct mk_server *mk_server_create(void);
void mk_server_destroy(struct mk_server *srv);

/* Serve the configuration directory `dir` (monkey.conf, sites/, ...). */
int mk_server_set_confdir(struct mk_server *srv, const char *dir);
/* Serve one directory with built-in defaults, no configuration files. */
int mk_server_set_docroot(struct mk_server *srv, const char *dir);
/* A [SERVER] key that overrides the file ("Listen", "Workers", ...). */
int mk_server_set(struct mk_server *srv, const char *key, const char *value);

/* Read and validate the configuration without serving. */
int mk_server_check(struct mk_server *srv, char *err, size_t errlen);
/*
 * Check as mk_server_check(), then write every file the configuration read
 * (monkey.conf, monkey.mime, sites, plugins.load, plugins/NAME.conf) to
 * `out`, after Include and variables, in the indented format (`monkey -T`).
 */
int mk_server_dump(struct mk_server *srv, FILE *out, char *err, size_t errlen);
/* Bind, start the workers and return once the server accepts connections. */
int mk_server_start(struct mk_server *srv, char *err, size_t errlen);
/* Re-read the configuration; on error the running one stays in force. */
int mk_server_reload(struct mk_server *srv, char *err, size_t errlen);
void mk_server_reopen_logs(struct mk_server *srv);
/* Stop accepting, finish in-flight responses (GracefulTimeout), return. */
void mk_server_stop(struct mk_server *srv);
/* Start, then serve until SIGTERM/SIGINT; see above. */
int mk_server_run(struct mk_server *srv, char *err, size_t errlen);
/* The signal loop of mk_server_run(), for a server already started. */
int mk_server_loop(struct mk_server *srv);

/* The workers that will be or are started (after check/start). */
int mk_server_workers(const struct mk_server *srv);

#pragma GCC visibility pop

#endif
