/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * loopback.h: a server driven without sockets or threads, for unit tests of
 * handlers (like h2o's h2o_loopback_conn_t).
 *
 * mk_loopback_open() loads a configuration directory, loads and starts its
 * plugins (built-in ones, such as the skeleton), builds its sites and sets
 * up one worker that the calling thread then acts as (mk_worker_bind): no
 * socket is bound and no thread started. mk_loopback_run() feeds request
 * bytes to a new connection whose transport reads them from memory and
 * collects everything the server writes (writev and sendfile alike), then
 * closes it; the request goes through the same stages as on a socket: the
 * HTTP/1 codec, the plugins' hooks, the static file handler.
 *
 *     struct mk_loopback lb;
 *     mk_loopback_dir(dir, "Load skeleton\n", NULL);   a configuration
 *     mk_loopback_open(&lb, dir, err, sizeof(err));
 *     char *out = mk_loopback_run(&lb, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", &len);
 *     ...                                              check the bytes
 *     free(out);
 *     mk_loopback_close(&lb);
 *
 * Everything runs on the calling thread, one test at a time. Work a hook
 * moves elsewhere (api->task, timers) does not complete within run().
 */
#ifndef MK_TESTS_LOOPBACK_H
#define MK_TESTS_LOOPBACK_H

#include <limits.h>
#include <stddef.h>

#include "server/process/server.h"

struct mk_loopback {
    struct mk_server *srv;
    struct mk_worker worker;
};

/*
 * Make a configuration directory under /tmp into `dir` (PATH_MAX bytes):
 * monkey.conf ([SERVER] with Listen 2001 and `server_keys`, lines of
 * "    Key value\n", or NULL), plugins.load ([PLUGINS] with `load`, lines of
 * "    Load name\n", or NULL), sites/default (ServerName localhost,
 * DocumentRoot htdocs) and htdocs/index.html ("<p>hello</p>\n").
 * mk_loopback_file() adds a file to it; mk_loopback_dir_free() removes it.
 */
void mk_loopback_dir(char *dir, const char *load, const char *server_keys);
void mk_loopback_file(const char *dir, const char *rel, const char *text);
void mk_loopback_dir_free(const char *dir);

/* MK_OK, or MK_ERR with "file:line: reason" in err (nothing is left open). */
int mk_loopback_open(struct mk_loopback *lb, const char *confdir, char *err, size_t errlen);

/*
 * Send `input` (NUL-terminated) on a new connection, let the server answer
 * everything it can, close the connection and return what the server
 * wrote: malloc'ed, NUL-terminated, its length in *len.
 */
char *mk_loopback_run(struct mk_loopback *lb, const char *input, size_t *len);

/*
 * The same with `in_len` bytes of binary input, on a transport whose
 * handshake negotiated `alpn` ("h2": the bytes are HTTP/2), or none (NULL).
 */
char *mk_loopback_run_bytes(struct mk_loopback *lb, const void *input, size_t in_len,
                            const char *alpn, size_t *len);

/* Stop the plugins (exit), free the worker, the configuration and the server. */
void mk_loopback_close(struct mk_loopback *lb);

#endif
