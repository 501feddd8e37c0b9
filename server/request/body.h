/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * body.h: a request body streamed to its content handler (api->body_stream,
 * api->body_consume), whatever protocol carries it.
 *
 * The protocol decodes the body and hands each piece to
 * mk_body_stream_data() while mk_body_stream_window_open() says the handler
 * has room; when it has none the protocol stops reading (HTTP/1: the socket;
 * HTTP/2 would withhold WINDOW_UPDATE), sets `waiting`, and is called back
 * through proto->proceed once the handler consumed bytes (from the worker's
 * loop, never inside the plugin's call). The body's end goes through
 * mk_request_body_ready() as for a buffered body. A request that ends
 * before its body did tells the handler (MK_BODY_ABORT) exactly once.
 *
 * Threads: everything here runs on the request's worker, and the handler
 * is called there only; body_stream and body_consume from another thread
 * are refused (MK_ERR).
 */
#ifndef MK_SERVER_BODY_H
#define MK_SERVER_BODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <monkey/mk_plugin.h>

#define MK_BODY_WINDOW_DEFAULT (64u * 1024u)

/* The state of a streamed request body, in struct mk_request. */
struct mk_body_stream {
    mk_body_cb cb; /* NULL: the body is not streamed (or no longer) */
    void *arg;
    size_t window;              /* bytes delivered and not consumed, at most */
    size_t held;                /* bytes delivered and not consumed, now */
    bool waiting;               /* the protocol stopped reading for the window */
    struct mk_loop_timer *wake; /* a queued call of proto->proceed */
};

struct mk_request;

/*
 * Append len bytes to the body buffered for r's handler (r->body, grown by
 * doubling, never past MaxBodySize when that bound suffices): MK_OK, or
 * 503 when memory is short. Both protocols buffer bodies through it.
 */
int mk_body_append(struct mk_request *r, const char *data, size_t len);

/* api->body_stream and api->body_consume (contracts in mk_plugin.h). */
int mk_body_stream_start(struct mk_request *r, size_t window, mk_body_cb cb, void *arg);
int mk_body_stream_consume(struct mk_request *r, size_t n);

/* Whether r's body is streamed to its handler (not buffered). */
static inline bool mk_body_streaming(const struct mk_body_stream *bs)
{
    return bs->cb != NULL;
}

/* Whether the handler has room for more body bytes. */
static inline bool mk_body_stream_window_open(const struct mk_body_stream *bs)
{
    return bs->held < bs->window;
}

/*
 * Hand `len` decoded body bytes to the handler. MK_OK: go on; otherwise the
 * handler stopped the body with this result (a status or MK_ERR, for
 * mk_request_body_result()) and is not called again. `data` need only live
 * during the call.
 */
int mk_body_stream_data(struct mk_request *r, const char *data, size_t len);

/* The body is complete: MK_BODY_END, whose result counts as the content hook's. */
int mk_body_stream_end(struct mk_request *r);

/*
 * The request ends (or answers an error) before its body did: the handler
 * gets MK_BODY_ABORT once, and nothing is delivered any more. No effect
 * when r streams no body.
 */
void mk_body_stream_abort(struct mk_request *r);

/*
 * HTTP/1: len bytes of a chunked body's trailer section as the decoder took
 * them (struct mk_chunked's trailer_off), the section complete when `end`:
 * then its fields become r's trailers. MK_OK, or 503 when memory is short.
 */
int mk_body_trailer_raw(struct mk_request *r, const char *p, size_t len, bool end);

/*
 * HTTP/2: one field of a request's trailing HEADERS, its name a lower-case
 * token and its value field characters (the caller checked). MK_OK, 503
 * when memory is short, or 400 past MK_CHUNK_TRAILER_MAX bytes of them.
 */
int mk_body_trailer_field(struct mk_request *r, const char *name, size_t nlen, const char *value,
                          size_t vlen);

/* api->request_trailers (contract in mk_plugin.h). */
const char *mk_body_trailers(struct mk_request *r, size_t *len);

#endif
