/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * mk_lib.h: answering requests from the embedding program (included by
 * monkey.h; docs/library.md has the whole story and the threading rules).
 *
 *     static void hello(struct mk_http *h, void *data)
 *     {
 *         mk_http_status(h, 200);
 *         mk_http_header(h, "Content-Type", "text/plain");
 *         mk_http_send(h, "hello\n", 6);
 *         mk_http_done(h);
 *     }
 *     ...
 *     mk_server_route(srv, NULL, MK_ROUTE_GET, "/hello", hello, NULL);
 *     mk_server_start(srv, err, sizeof(err));
 *
 * Sites and routes are set before mk_server_start() (or before a
 * mk_server_reload(), which applies them to the new configuration), on the
 * program's controlling thread.
 *
 * A handler runs on one of the server's worker threads, several at once on
 * different workers: it must not block. It answers with the mk_http_*
 * calls below and ends with mk_http_done(), exactly once, now or later.
 * Every mk_http_* call except mk_http_post() and mk_http_gone() is made on
 * the request's worker: inside the handler, inside a function given to
 * mk_http_post(), or inside a body or writable callback. From any other
 * thread they return MK_ERR.
 *
 * A handler that returns without mk_http_done() and without having sent
 * anything parks the request: the connection waits (within the server's
 * Timeout; a request parked longer gets 503) until a function posted with
 * mk_http_post() from any thread answers it on the worker. A handler that
 * sent more than fits in one response buffer (64 KiB), or returns after
 * sending, streams: the body goes out chunked (HTTP/1.1) as it is sent,
 * and mk_http_send() returns MK_AGAIN when the queue is full: wait for the
 * writable callback (mk_http_on_writable) before sending more. A body
 * sent whole before mk_http_done() in the same call goes out with a
 * Content-Length.
 *
 * The handle `h` stays valid until mk_http_done() (even after the client
 * went away: the calls then return MK_ERR and mk_http_gone() is true).
 */
#ifndef MONKEY_MK_LIB_H
#define MONKEY_MK_LIB_H

#include <stddef.h>
#include <stdint.h>

#include "mk_common.h"

#pragma GCC visibility push(default)

struct mk_server;
struct mk_http; /* one request answered by the program */

/* Method sets of mk_server_route() (the same bits as MK_ROUTE_* of mk_plugin.h). */
#ifndef MK_ROUTE_GET
#define MK_ROUTE_GET 0x0002u /* answers HEAD too */
#define MK_ROUTE_HEAD 0x0004u
#define MK_ROUTE_POST 0x0008u
#define MK_ROUTE_PUT 0x0010u
#define MK_ROUTE_DELETE 0x0020u
#define MK_ROUTE_OPTIONS 0x0040u
#define MK_ROUTE_PATCH 0x0080u
#define MK_ROUTE_TRACE 0x0100u
#define MK_ROUTE_ANY 0xffffffffu
#endif

/* A route's handler, with the `data` given to mk_server_route(). */
typedef void (*mk_http_cb)(struct mk_http *h, void *data);

/* Events of a streamed request body (mk_http_read_body). */
#define MK_HTTP_BODY_DATA 0  /* `data`, `len`: the next bytes, valid during the call */
#define MK_HTTP_BODY_END 1   /* the whole body was delivered: answer now (or park) */
#define MK_HTTP_BODY_ABORT 2 /* the request ended first: mk_http_gone() is true */

/*
 * A streamed request body's callback, on the request's worker. DATA:
 * return MK_OK (consumed) or MK_AGAIN (kept: the bytes count against the
 * window until mk_http_body_consume()); an HTTP status (>= 400) stops
 * reading and answers with it. END: answer as a handler does (the return
 * value is ignored). ABORT: called once, the request is gone; the program
 * still calls mk_http_done().
 */
typedef int (*mk_http_body_cb)(struct mk_http *h, int event, const void *data, size_t len,
                               void *arg);
/* The stream's queue drained (or, with mk_http_gone() true, the request ended). */
typedef void (*mk_http_writable_cb)(struct mk_http *h, void *arg);
/* A function posted to a request's worker; `h` may be gone (mk_http_gone). */
typedef void (*mk_http_post_cb)(struct mk_http *h, void *arg);

/* The library's version ("0.1.0"): with libmonkey.so, the one loaded at run
   time, which may be newer than the MK_VERSION_STR of the headers. */
const char *mk_server_version(void);

/* ---- sites and routes (controlling thread, before start or reload) ---- */

/*
 * A site answering for `names` (one or more host names, space separated;
 * "*.example.com" is a wildcard) with static files from `docroot`. Without
 * a configuration directory or docroot (mk_server_set_confdir/_docroot),
 * the first site created is the default site. MK_OK, or MK_ERR (empty
 * names or docroot, a name already used).
 */
int mk_server_site(struct mk_server *srv, const char *names, const char *docroot);
/*
 * Register `cb` for requests of site `site` (one of its names, or NULL:
 * every site) whose method is in `methods` and whose decoded path matches
 * `pattern`: "/status" (exactly), "/users/:id" (":name": one segment,
 * mk_http_param), "/files/" + "*" (a prefix). Exact patterns win over
 * ":name" ones, which win over prefixes. MK_OK, or MK_ERR (no callback,
 * no method); a bad pattern or a site no configuration has fails the
 * start with the reason.
 */
int mk_server_route(struct mk_server *srv, const char *site, uint32_t methods, const char *pattern,
                    mk_http_cb cb, void *data);
/*
 * Run fn(arg) on worker `worker` of a running server (0 .. workers-1, or
 * -1: the next one in turn), from any thread: work that touches no
 * request. MK_OK, or MK_ERR (not running, no such worker).
 */
int mk_server_post(struct mk_server *srv, int worker, void (*fn)(void *arg), void *arg);

/* ---- the request (on its worker) ---- */

/* "GET", the decoded normalised path, the query (NULL: none); *len set when len is not NULL. */
const char *mk_http_method(const struct mk_http *h, size_t *len);
const char *mk_http_path(const struct mk_http *h, size_t *len);
const char *mk_http_query(const struct mk_http *h, size_t *len);
/* The value of request header `name` (the first one; any case), NULL if absent. */
const char *mk_http_request_header(const struct mk_http *h, const char *name, size_t *len);
/* The i-th request header (0 ..): MK_OK with its name and value set, MK_ERR past the last. */
int mk_http_request_header_at(const struct mk_http *h, unsigned i, const char **name,
                              size_t *name_len, const char **value, size_t *value_len);
/* Parameter `name` of the route's ":name" segment (not NUL terminated), NULL if none. */
const char *mk_http_param(const struct mk_http *h, const char *name, size_t *len);
/* The whole body, after mk_http_read_body(h, NULL, ...) ("" with len 0: none); else NULL. */
const char *mk_http_body(const struct mk_http *h, size_t *len);
/*
 * Ask for the request body, from the handler. With `cb` NULL the body is
 * read whole (up to MaxRequestBody) and the handler is called a second
 * time, with mk_http_body() set. With `cb`, the body is handed over as it
 * arrives (see mk_http_body_cb), `window` bytes at most unconsumed (0:
 * 64 KiB): the client is held back by TCP meanwhile. MK_OK, or MK_ERR
 * (outside the handler, asked twice).
 */
int mk_http_read_body(struct mk_http *h, mk_http_body_cb cb, void *arg, size_t window);
/* `n` bytes a body callback kept (MK_AGAIN) are consumed: delivery goes on. */
int mk_http_body_consume(struct mk_http *h, size_t n);

/* ---- the answer (on its worker) ---- */

/* The status (default 200); before anything was sent. */
int mk_http_status(struct mk_http *h, int status);
/* Add a response header (copied); before anything was sent. */
int mk_http_header(struct mk_http *h, const char *name, const char *value);
/*
 * Send `len` bytes of the body (copied). MK_OK: send more; MK_AGAIN:
 * taken, but the queue is full: wait for the writable callback; MK_ERR:
 * not taken (the request is gone, the queue was already full, or
 * mk_http_done() was called).
 */
int mk_http_send(struct mk_http *h, const void *data, size_t len);
/* Call cb(h, arg) on the worker each time the streamed body's queue drained. */
int mk_http_on_writable(struct mk_http *h, mk_http_writable_cb cb, void *arg);
/*
 * End the response (the rest is sent out) and give up h, which is invalid
 * afterwards. Also for a request that is gone (then from any thread).
 * MK_OK, or MK_ERR and nothing was done: off the request's worker while it
 * lives, in a body callback's DATA, or after mk_http_read_body() before
 * the body came.
 */
int mk_http_done(struct mk_http *h);

/* ---- any thread ---- */

/*
 * Run fn(h, arg) on the request's worker, in order with other posts: the
 * way to answer a parked request (or feed a stream) from another thread.
 * MK_OK, or MK_ERR (the server is not running: fn is not called).
 */
int mk_http_post(struct mk_http *h, mk_http_post_cb fn, void *arg);
/* True once the request has ended (client gone, timeout, server stop). */
int mk_http_gone(const struct mk_http *h);

#pragma GCC visibility pop

#endif
