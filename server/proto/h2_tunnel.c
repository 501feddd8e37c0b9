/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * h2_tunnel.c: one HTTP/2 stream handed to a plugin after the 200 of an
 * extended CONNECT (RFC 8441: WebSocket over HTTP/2), behind the same
 * handle as a connection taken over after 101 (takeover.h): the plugin's
 * takeover_ops see no difference.
 *
 *   HEADERS :method CONNECT, :protocol websocket (h2_stream.c) ──▶ a GET
 *       of :path through the stages; the handler calls api->takeover
 *       (mk_h2_takeover: only on such a stream, not ended by the client)
 *   respond (h2_response.c) ──▶ :status 200 without END_STREAM, the DATA
 *       source this file's; mk_h2_tunnel_open: on_open, then what the
 *       client sent early
 *   DATA from the client ──▶ on_read, the stream's window given back as
 *       the plugin takes the bytes; takeover_write ──▶ our queue ──▶ DATA
 *       frames (mk_h2_tunnel_read), as the client's window allows
 *   END_STREAM either way, RST_STREAM either way, the idle timeout, the
 *       server's stop, the connection's close ──▶ on_close once
 *
 * Back-pressure, as in takeover.c: while more than MK_H2_TUNNEL_HIGH bytes
 * wait in our queue (the client reads slowly: its window for the stream is
 * shut), takeover_write answers MK_AGAIN and the client's DATA is kept
 * without being consumed, so its window for the stream shuts too (at most
 * MK_H2_STREAM_WINDOW bytes kept); once the queue is out, on_writable runs
 * and the kept bytes go to on_read. A tunnel holds about MK_H2_TUNNEL_HIGH
 * plus one window however slowly its client reads, and a client that
 * sends without reading is stopped by its window.
 *
 * Callbacks that come from nghttp2 (the stream closed, an END_STREAM
 * either way, the queue drained) only mark the tunnel due; the work is
 * done by mk_h2_tunnel_settle outside nghttp2 (mk_h2_after), so the
 * plugin's callbacks never run inside a takeover_* call and never send
 * from inside nghttp2. A write from the plugin asks for a flush (and for
 * the socket's writability from the loop when called from elsewhere).
 *
 * Ownership: the tunnel belongs to its stream and is freed with it
 * (mk_h2_stream_free); the stream's request lives as long (its head, its
 * response fields, request_done when the stream ends). The configuration
 * of the request that asked is held until on_close has returned. On the
 * connection's worker.
 */
#include <string.h>

#include "../../core/memory.h"
#include "../config/config_use.h"
#include "../request/request.h"
#include "../request/upgrade.h"
#include "h2_internal.h"
#include "takeover.h"
#include "../runtime/worker.h"

#define MK_H2_TUNNEL_HIGH (64u << 10) /* queued bytes past which input pauses */

struct mk_h2_tpiece {
    struct mk_h2_tpiece *next;
    size_t len, off;
    char data[];
};

struct mk_h2_tunnel {
    struct mk_takeover base; /* first: the plugin's handle */
    struct mk_conn *conn;
    struct mk_h2_stream *s;
    struct mk_config *cfg; /* held until on_close has returned */
    const struct mk_takeover_ops *ops;
    void *arg;
    uint32_t idle_ms;
    uint64_t active_at; /* worker ms: the last byte either way */
    struct mk_h2_tpiece *q_head, *q_tail;
    size_t queued;
    bool open;     /* the plugin's side: on_open ran, on_close not yet */
    bool closing;  /* takeover_close(): END_STREAM once the queue is out */
    bool notify;   /* takeover_write said MK_AGAIN: on_writable once the queue is out */
    bool peer_end; /* the client's END_STREAM came */
    bool end_sent; /* our END_STREAM went out */
    bool due;      /* counted in h2->tunnel_due: mk_h2_tunnel_settle has work */
    bool held;     /* takeover_hold(): the plugin takes no input now (kept, not consumed) */
};

/* Whether the client's input waits: our queue is full, or the plugin holds it. */
static bool mk_h2_tunnel_paused(const struct mk_h2_tunnel *t)
{
    return t->queued >= MK_H2_TUNNEL_HIGH || t->held;
}

static void mk_h2_tunnel_due(struct mk_conn *c, struct mk_h2_tunnel *t)
{
    if (!t->due) {
        t->due = true;
        c->h2->tunnel_due++;
    }
}

/*
 * Something for the connection to write: flushed at the end of the entry
 * in progress, or, from outside one (the plugin's own timer), once the
 * loop finds the socket writable.
 */
static void mk_h2_tunnel_kick(struct mk_conn *c)
{
    c->h2->flush_wanted = true;
    if (!(c->ev.mask & MK_EV_WRITE)) {
        (void) mk_event_mod(&c->worker->loop, &c->ev, c->ev.mask | MK_EV_WRITE);
    }
}

/* The plugin's side ends: on_close once, the configuration let go. */
static void mk_h2_tunnel_end(struct mk_conn *c, struct mk_h2_tunnel *t)
{
    if (!t->open) {
        return;
    }
    t->open = false;
    t->ops->on_close(&t->base, t->arg);
    mk_config_use_release(&c->worker->use, t->cfg);
    t->cfg = NULL;
    if (t->s && !t->s->closed && !t->end_sent) {
        /* what the plugin wrote goes out, then END_STREAM (mk_h2_tunnel_read) */
        nghttp2_session_resume_data(c->h2->ng, t->s->id);
        mk_h2_tunnel_kick(c);
    }
}

/* Hand the bytes the stream kept to on_read while the plugin takes input. */
static void mk_h2_tunnel_deliver(struct mk_conn *c, struct mk_h2_stream *s, struct mk_h2_tunnel *t)
{
    while (t->open && !t->closing && !mk_h2_tunnel_paused(t) && s->kept_len && !s->closed) {
        size_t n = s->kept_len;
        s->kept_len = 0;
        t->active_at = c->worker->now_ms;
        t->ops->on_read(&t->base, s->kept, n, t->arg);
        mk_h2_consume(c, s, n);
    }
}

/* ---- the plugin's handle ------------------------------------------------- */

static int mk_h2_tunnel_write(struct mk_takeover *base, const void *data, size_t len)
{
    struct mk_h2_tunnel *t = (struct mk_h2_tunnel *) base;
    struct mk_conn *c = t->conn;
    struct mk_h2_stream *s = t->s;
    struct mk_h2_tpiece *p;

    if (!t->open || t->closing || !s || s->closed || s->we_reset || s->peer_reset) {
        return MK_ERR;
    }
    if (len == 0) {
        return MK_OK;
    }
    p = mk_try_alloc(sizeof(*p) + len);
    if (!p) {
        return MK_ERR;
    }
    p->next = NULL;
    p->len = len;
    p->off = 0;
    memcpy(p->data, data, len);
    if (t->q_tail) {
        t->q_tail->next = p;
    }
    else {
        t->q_head = p;
    }
    t->q_tail = p;
    t->queued += len;
    t->active_at = c->worker->now_ms;
    nghttp2_session_resume_data(c->h2->ng, s->id);
    mk_h2_tunnel_kick(c);
    if (t->queued >= MK_H2_TUNNEL_HIGH) {
        t->notify = true;
        return MK_AGAIN;
    }
    return MK_OK;
}

static void mk_h2_tunnel_close(struct mk_takeover *base)
{
    struct mk_h2_tunnel *t = (struct mk_h2_tunnel *) base;

    if (t->closing || !t->open) {
        return;
    }
    t->closing = true;
    if (t->s && !t->s->closed) {
        nghttp2_session_resume_data(t->conn->h2->ng, t->s->id);
        mk_h2_tunnel_kick(t->conn);
    }
}

static struct mk_conn *mk_h2_tunnel_conn(struct mk_takeover *base)
{
    return ((struct mk_h2_tunnel *) base)->conn;
}

/* Held, the client's DATA is kept unconsumed; released, what was kept goes to on_read
   from mk_h2_tunnel_settle (the loop), never inside this call. */
static void mk_h2_tunnel_hold(struct mk_takeover *base, int hold)
{
    struct mk_h2_tunnel *t = (struct mk_h2_tunnel *) base;

    if (t->held == (hold != 0)) {
        return;
    }
    t->held = hold != 0;
    if (!t->held && t->open && t->s && !t->s->closed) {
        mk_h2_tunnel_due(t->conn, t);
        mk_h2_tunnel_kick(t->conn);
    }
}

static const struct mk_takeover_carrier mk_h2_tunnel_carrier = {
    .write = mk_h2_tunnel_write,
    .close = mk_h2_tunnel_close,
    .conn = mk_h2_tunnel_conn,
    .hold = mk_h2_tunnel_hold,
};

/* ---- the stream's side --------------------------------------------------- */

int mk_h2_takeover(struct mk_request *r)
{
    struct mk_h2_stream *s = r->proto_data;

    if (!s || !s->protocol.set || s->closed || s->body_end || s->tunnel ||
        r->body_type == MK_RESP_STREAM) {
        return MK_ERR;
    }
    return MK_OK;
}

bool mk_h2_tunnel_live(const struct mk_h2_stream *s)
{
    return s->tunnel && s->tunnel->open;
}

void mk_h2_tunnel_open(struct mk_conn *c, struct mk_h2_stream *s, struct mk_request *r)
{
    struct mk_upgrade up = *r->upgrade;
    struct mk_h2_tunnel *t = mk_try_alloc(sizeof(*t));

    r->upgrade = NULL;
    if (!t) {
        mk_upgrade_cancel(c, &up);
        mk_h2_reset(c, s, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    memset(t, 0, sizeof(*t));
    t->base.carrier = &mk_h2_tunnel_carrier;
    t->conn = c;
    t->s = s;
    t->cfg = up.cfg;
    t->ops = up.ops;
    t->arg = up.arg;
    t->idle_ms = up.idle_ms;
    t->active_at = c->worker->now_ms;
    t->open = true;
    s->tunnel = t;
    mk_h2_timer_within(c, t->idle_ms); /* the checks come at Timeout otherwise */
    if (up.on_open) {
        up.on_open(&t->base, t->arg);
    }
    mk_h2_tunnel_deliver(c, s, t);
}

int mk_h2_tunnel_data(struct mk_conn *c, struct mk_h2_stream *s, const uint8_t *data, size_t len)
{
    struct mk_h2_tunnel *t = s->tunnel;

    if (!t->open || t->closing) {
        mk_h2_consume(c, s, len); /* nobody reads it: the client may send on */
        return 0;
    }
    t->active_at = c->worker->now_ms;
    if (s->kept_len || mk_h2_tunnel_paused(t)) {
        /* the window of the stream bounds what is kept: it is not consumed */
        return mk_h2_body_keep(s, data, len) ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    t->ops->on_read(&t->base, data, len, t->arg);
    mk_h2_consume(c, s, len);
    return 0;
}

void mk_h2_tunnel_peer_end(struct mk_conn *c, struct mk_h2_stream *s)
{
    s->tunnel->peer_end = true;
    mk_h2_tunnel_due(c, s->tunnel);
}

void mk_h2_tunnel_sent_end(struct mk_conn *c, struct mk_h2_stream *s)
{
    s->tunnel->end_sent = true;
    mk_h2_tunnel_due(c, s->tunnel);
}

ssize_t mk_h2_tunnel_read(struct mk_conn *c, struct mk_h2_stream *s, uint8_t *buf, size_t length,
                          uint32_t *flags)
{
    struct mk_h2_tunnel *t = s->tunnel;
    size_t n = 0;

    while (n < length && t->q_head) {
        struct mk_h2_tpiece *p = t->q_head;
        size_t take = p->len - p->off < length - n ? p->len - p->off : length - n;
        memcpy(buf + n, p->data + p->off, take);
        p->off += take;
        n += take;
        if (p->off == p->len) {
            t->q_head = p->next;
            if (!t->q_head) {
                t->q_tail = NULL;
            }
            mk_free(p);
        }
    }
    t->queued -= n;
    if (n) {
        t->active_at = c->worker->now_ms;
        s->r->bytes_sent += n; /* the stream's request lives as long as the tunnel */
    }
    if (t->open && ((t->notify && t->queued == 0) || (s->kept_len && !mk_h2_tunnel_paused(t)))) {
        mk_h2_tunnel_due(c, t); /* on_writable, or the input kept goes on */
    }
    if (t->queued == 0 && (t->closing || !t->open)) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        return (ssize_t) n;
    }
    return n ? (ssize_t) n : NGHTTP2_ERR_DEFERRED;
}

uint64_t mk_h2_tunnel_expire(struct mk_conn *c, struct mk_h2_stream *s, uint64_t now)
{
    struct mk_h2_tunnel *t = s->tunnel;
    uint64_t due = t->active_at + t->idle_ms;

    if (now < due) {
        return due;
    }
    mk_h2_reset(c, s, NGHTTP2_CANCEL);
    mk_h2_tunnel_end(c, t);
    return UINT64_MAX;
}

void mk_h2_tunnel_stop_all(struct mk_conn *c)
{
    struct mk_list *it, *tmp;

    mk_list_foreach_safe (it, tmp, &c->h2->streams) {
        struct mk_h2_stream *s = mk_list_entry(it, struct mk_h2_stream, node);
        if (mk_h2_tunnel_live(s) && !s->closed) {
            mk_h2_reset(c, s, NGHTTP2_CANCEL);
            mk_h2_tunnel_end(c, s->tunnel);
        }
    }
}

/* One due tunnel: on_writable, the input kept, or its end. */
static void mk_h2_tunnel_run(struct mk_conn *c, struct mk_h2_stream *s, struct mk_h2_tunnel *t)
{
    if (!t->open) {
        return;
    }
    if (s->closed) {
        mk_h2_tunnel_end(c, t); /* reset either way, or closed: nothing more moves */
        return;
    }
    if (t->notify && t->queued == 0) {
        t->notify = false;
        if (t->ops->on_writable) {
            t->ops->on_writable(&t->base, t->arg);
        }
    }
    mk_h2_tunnel_deliver(c, s, t);
    if (t->end_sent || (t->peer_end && s->kept_len == 0)) {
        mk_h2_tunnel_end(c, t);
    }
}

/* The due tunnels of one list of streams. */
static void mk_h2_tunnel_settle_list(struct mk_conn *c, struct mk_list *list)
{
    struct mk_list *it, *tmp;

    mk_list_foreach_safe (it, tmp, list) {
        struct mk_h2_stream *s = mk_list_entry(it, struct mk_h2_stream, node);
        struct mk_h2_tunnel *t = s->tunnel;
        if (t && t->due) {
            t->due = false;
            c->h2->tunnel_due--;
            mk_h2_tunnel_run(c, s, t);
        }
    }
}

void mk_h2_tunnel_settle(struct mk_conn *c)
{
    mk_h2_tunnel_settle_list(c, &c->h2->streams);
    mk_h2_tunnel_settle_list(c, &c->h2->dead);
}

void mk_h2_tunnel_release_all(struct mk_conn *c)
{
    struct mk_list *lists[] = {&c->h2->streams, &c->h2->dead}, *it;

    for (int i = 0; i < 2; i++) {
        mk_list_foreach (it, lists[i]) {
            struct mk_h2_stream *s = mk_list_entry(it, struct mk_h2_stream, node);
            if (s->tunnel) {
                s->tunnel->closing = true;
            }
        }
    }
}

void mk_h2_tunnel_free(struct mk_conn *c, struct mk_h2_stream *s)
{
    struct mk_h2_tunnel *t = s->tunnel;

    if (!t) {
        return;
    }
    s->tunnel = NULL;
    t->s = NULL;
    if (t->due) {
        c->h2->tunnel_due--;
    }
    t->closing = true; /* on_close may not write to it any more */
    mk_h2_tunnel_end(c, t);
    while (t->q_head) {
        struct mk_h2_tpiece *p = t->q_head;
        t->q_head = p->next;
        mk_free(p);
    }
    mk_free(t);
}
