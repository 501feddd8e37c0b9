/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * body.c: a request body streamed to its content handler (see body.h for
 * the protocol's side and mk_plugin.h, api->body_stream, for the plugin's).
 *
 * Invariants: the handler's callback runs only on the request's worker;
 * after MK_BODY_END, MK_BODY_ABORT or a result that stopped the body it is
 * never called again (bs.cb is NULL from then on); `held` counts the bytes
 * the handler kept (MK_AGAIN) and did not give back with body_consume().
 * Delivery never resumes inside a plugin's call: body_consume() queues a
 * zero-delay timer whose callback asks the protocol to go on.
 */
#include <string.h>

#include "../../core/log.h"
#include "../http/http.h"
#include "../conn/conn.h"
#include "../conn/loop.h"
#include "../proto/proto.h"
#include "request.h"
#include "../process/server.h"
#include "../runtime/worker.h"

int mk_body_stream_start(struct mk_request *r, size_t window, mk_body_cb cb, void *arg)
{
    struct mk_body_stream *bs = &r->bs;

    if (!cb || bs->cb || !(r->flags & MK_REQ_ACTIVE) || (r->flags & MK_REQ_BODY_READ) ||
        mk_loop_worker() != r->conn->worker) {
        return MK_ERR;
    }
    bs->cb = cb;
    bs->arg = arg;
    bs->window = window ? window : MK_BODY_WINDOW_DEFAULT;
    bs->held = 0;
    bs->waiting = false;
    return MK_OK;
}

static void mk_body_stream_unwake(struct mk_body_stream *bs)
{
    if (bs->wake) {
        mk_loop_timer_stop(bs->wake);
        bs->wake = NULL;
    }
}

/* The handler made room: let the protocol read and deliver again. */
static void mk_body_stream_wake(struct mk_loop_timer *t, void *arg)
{
    struct mk_request *r = arg;
    struct mk_conn *c = r->conn;

    (void) t;
    r->bs.wake = NULL; /* a one-shot timer is freed when this returns */
    c->proto->proceed(c);
}

int mk_body_stream_consume(struct mk_request *r, size_t n)
{
    struct mk_body_stream *bs = &r->bs;

    if (!bs->cb || mk_loop_worker() != r->conn->worker) {
        return MK_ERR;
    }
    bs->held -= n < bs->held ? n : bs->held;
    if (bs->waiting && mk_body_stream_window_open(bs) && !bs->wake) {
        bs->wake = mk_loop_timer_start(0, 0, mk_body_stream_wake, r);
        if (!bs->wake) {
            /* Out of memory: the connection's Timeout ends the request. */
            mk_err("cannot resume reading a request body: out of memory");
            return MK_ERR;
        }
    }
    return MK_OK;
}

int mk_body_stream_data(struct mk_request *r, const char *data, size_t len)
{
    struct mk_body_stream *bs = &r->bs;

    if (!bs->cb) {
        return MK_ERR; /* nobody to take it: cannot happen while streaming */
    }
    int rc = bs->cb(r, MK_BODY_DATA, data, len, bs->arg);
    if (rc == MK_OK) {
        return MK_OK;
    }
    if (rc == MK_AGAIN) {
        bs->held += len;
        return MK_OK;
    }
    /* The handler stopped the body: it is not called again. */
    bs->cb = NULL;
    mk_body_stream_unwake(bs);
    if ((rc >= 100 && rc <= 599) || rc == MK_ERR) {
        return rc;
    }
    mk_err("plugin %s: body callback returned %d for data", r->handler ? r->handler->name : "?",
           rc);
    return 500;
}

int mk_body_stream_end(struct mk_request *r)
{
    struct mk_body_stream *bs = &r->bs;
    mk_body_cb cb = bs->cb;

    bs->cb = NULL;
    mk_body_stream_unwake(bs);
    return cb(r, MK_BODY_END, NULL, 0, bs->arg);
}

void mk_body_stream_abort(struct mk_request *r)
{
    struct mk_body_stream *bs = &r->bs;
    mk_body_cb cb = bs->cb;

    mk_body_stream_unwake(bs);
    if (!cb) {
        return;
    }
    bs->cb = NULL;
    cb(NULL, MK_BODY_ABORT, NULL, 0, bs->arg);
}

/* r's trailers, with room for `more` bytes after theirs (arena, doubled from 256). */
static struct mk_req_trailers *mk_body_trailer_room(struct mk_request *r, size_t more)
{
    struct mk_req_trailers *t = r->trailers;

    if (!t) {
        if (!(t = mk_arena_alloc(&r->arena, sizeof(*t)))) {
            return NULL;
        }
        memset(t, 0, sizeof(*t));
        r->trailers = t;
    }
    if (t->len + more <= t->cap) {
        return t;
    }
    size_t cap = t->cap ? t->cap : 256;
    while (cap < t->len + more) {
        cap *= 2;
    }
    char *p = mk_arena_alloc(&r->arena, cap);
    if (!p) {
        return NULL;
    }
    if (t->len) {
        memcpy(p, t->p, t->len);
    }
    t->p = p;
    t->cap = cap;
    return t;
}

int mk_body_trailer_raw(struct mk_request *r, const char *p, size_t len, bool end)
{
    struct mk_req_trailers *t = r->trailers;

    if (!t && end && ((len == 2 && p[0] == '\r') || len == 1)) {
        return MK_OK; /* the final empty line alone: no trailer (almost every body) */
    }
    if (len) {
        if (!(t = mk_body_trailer_room(r, len))) {
            return 503;
        }
        memcpy(t->p + t->len, p, len);
        t->len += len;
        t->raw = true;
    }
    if (!end || !t || !t->raw) {
        return MK_OK;
    }
    char *lines = mk_arena_alloc(&r->arena, 2 * t->len);
    if (!lines) {
        return 503;
    }
    t->len = mk_chunked_trailer_lines(t->p, t->len, lines);
    t->p = lines;
    t->cap = t->len;
    t->raw = false;
    return MK_OK;
}

int mk_body_trailer_field(struct mk_request *r, const char *name, size_t nlen, const char *value,
                          size_t vlen)
{
    struct mk_req_trailers *t = r->trailers;

    while (vlen && (value[0] == ' ' || value[0] == '\t')) {
        value++;
        vlen--;
    }
    while (vlen && (value[vlen - 1] == ' ' || value[vlen - 1] == '\t')) {
        vlen--;
    }
    if ((t ? t->len : 0) + nlen + vlen + 4 > MK_CHUNK_TRAILER_MAX) {
        return 400;
    }
    if (!(t = mk_body_trailer_room(r, nlen + vlen + 4))) {
        return 503;
    }
    char *o = t->p + t->len;
    memcpy(o, name, nlen);
    memcpy(o + nlen, ": ", 2);
    memcpy(o + nlen + 2, value, vlen);
    memcpy(o + nlen + 2 + vlen, "\r\n", 2);
    t->len += nlen + vlen + 4;
    return MK_OK;
}

const char *mk_body_trailers(struct mk_request *r, size_t *len)
{
    const struct mk_req_trailers *t = r ? r->trailers : NULL;

    if (!t || t->raw || t->len == 0) {
        *len = 0;
        return NULL;
    }
    *len = t->len;
    return t->p;
}

int mk_body_append(struct mk_request *r, const char *data, size_t len)
{
    if (len == 0) {
        return MK_OK;
    }
    if (r->body_len + len > r->body_cap) {
        size_t cap = r->body_cap ? r->body_cap : 4096;
        while (cap < r->body_len + len) {
            cap *= 2;
        }
        uint64_t max = mk_request_max_body(r);
        if (cap > max && max >= r->body_len + len) {
            cap = (size_t) max;
        }
        char *p = mk_try_realloc(r->body, cap);
        if (!p) {
            return 503;
        }
        r->body = p;
        r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, data, len);
    r->body_len += len;
    return MK_OK;
}
