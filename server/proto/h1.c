/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * h1.c: HTTP/1.x on a connection, behind the protocol table (proto.h).
 *
 *            start
 *              │
 *              ▼         head complete          response sent, keep-alive
 *   ┌──▶ READ_HEAD ──────────────────▶ (request) ──────────────┐
 *   │        │ ▲                      │    │                   │
 *   │        │ └── body skipped ── DISCARD ◀┘ body left        │
 *   │        │                      │  │                       │
 *   │        │ handler wants body   │  READ_BODY ──▶ (request) │
 *   │        ▼                      ▼                          │
 *   │      WRITE (socket full) ─────┴──────────────────────────┘
 *   │        │ not keep-alive, unread input: LINGER ──▶ CLOSED
 *   └────────┘
 *
 * The codec's state machine: scanning and parsing a head, body framing
 * (Content-Length, chunked, discard), 100-continue, the keep-alive decision
 * and what follows a response; what is written (the response head and
 * body, the write loop) is h1_out.c's. One request at a time (c->h1.req),
 * created when its head is complete and freed once its response is sent.
 * Everything runs on the connection's worker.
 *
 * The input buffer is attached only while there are unprocessed bytes: an
 * idle keep-alive connection holds no buffer at all. A request head stays at
 * the start of the buffer until its response has been sent (the parsed head
 * points into it); body bytes that follow are consumed in place.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <monkey/mk_util.h>

#include "../../core/log.h"
#include "../request/file_cache.h"
#include "h1_internal.h"
#include "h2.h"
#include "../process/server.h"
#include "takeover.h"
#include "../conn/conn_count.h"
#include "../conn/transport.h"

/*
 * Eager reads. After a keep-alive response the connection usually goes back
 * to epoll_wait and, once the next request has come, reads it: three system
 * calls a request (read, the answer, epoll_wait). A client that sends its
 * next request as soon as it has the answer (a benchmark, a proxy, a fast
 * local client) has often done so by the time the answer is written, and a
 * read right away then finds it and skips the epoll_wait; for a client
 * across a network it finds nothing (EAGAIN) and costs one system call more.
 * So each connection keeps a credit: a read that found a request adds one
 * (up to MK_H1_EAGER_MAX), one that found nothing takes one away, and a
 * connection reads eagerly while it has credit. Without credit, every
 * MK_H1_EAGER_PROBE-th response tries once more, so a client that becomes
 * quick is noticed: a slow client pays one read in MK_H1_EAGER_PROBE
 * requests, and a connection that makes fewer requests never pays.
 *
 * Turns. Only a connection alone in its event batch reads eagerly: when
 * others are ready too, they go first (a read would not save the
 * epoll_wait then anyway), and the worker's round over them is one request
 * each. Alone, a connection still serves at most MK_H1_TURN requests in a
 * turn, eager or already in its buffer (pipelined): past that, the rest
 * waits for its next turn (mk_conn_next_turn: after the other events of the
 * worker's batch), so no connection holds the worker for long.
 */
#define MK_H1_EAGER_MAX 7
#define MK_H1_EAGER_PROBE 16u
#define MK_H1_TURN 16u

static void mk_h1_process(struct mk_conn *c);
static void mk_h1_watch_input(struct mk_conn *c);

/* ---- buffers ------------------------------------------------------------- */

/* Make room for reading: attach a chunk, or grow up to the head limit. */
static bool mk_h1_in_reserve(struct mk_conn *c)
{
    struct mk_h1 *h = &c->h1;
    struct mk_worker *w = c->worker;
    const struct mk_http_limits *lim = &w->use.cfg->limits;

    if (!h->in) {
        h->in = mk_pool_get(&w->pool);
        if (!h->in) {
            return false;
        }
        h->in_size = MK_CHUNK_SIZE;
        h->in_len = 0;
        return true;
    }
    if (h->in_len < h->in_size) {
        return true;
    }
    size_t cap = lim->max_head + lim->max_line + 64;
    if (h->in_size >= cap) {
        return false;
    }
    size_t size = (size_t) h->in_size * 2 < cap ? (size_t) h->in_size * 2 : cap;
    char *p;
    if (h->in_size == MK_CHUNK_SIZE) {
        p = mk_try_alloc(size);
        if (!p) {
            return false;
        }
        memcpy(p, h->in, h->in_len);
        mk_pool_put(&w->pool, h->in);
    }
    else {
        p = mk_try_realloc(h->in, size);
        if (!p) {
            return false;
        }
    }
    h->in = p;
    h->in_size = (uint32_t) size;
    return true;
}

static void mk_h1_in_release(struct mk_conn *c)
{
    struct mk_h1 *h = &c->h1;

    if (!h->in) {
        return;
    }
    if (h->in_size == MK_CHUNK_SIZE) {
        mk_pool_put(&c->worker->pool, h->in);
    }
    else {
        mk_free(h->in);
    }
    h->in = NULL;
    h->in_size = h->in_len = 0;
}

/* Give the output buffer back: the response is sent or given up (h1_out.c attached it). */
static void mk_h1_out_release(struct mk_conn *c)
{
    struct mk_h1 *h = &c->h1;

    if (!h->out) {
        return;
    }
    if (h->out_size == MK_CHUNK_SIZE) {
        mk_pool_put(&c->worker->pool, h->out);
    }
    else {
        mk_free(h->out);
    }
    h->out = NULL;
    h->out_size = h->out_len = h->out_pos = 0;
}

/* Remove in[at, at + n). */
static void mk_h1_in_cut(struct mk_conn *c, size_t at, size_t n)
{
    struct mk_h1 *h = &c->h1;

    if (h->in_len > at + n) {
        memmove(h->in + at, h->in + at + n, h->in_len - at - n);
    }
    h->in_len -= (uint32_t) n;
}

/* ---- the connection's protocol state ------------------------------------- */

static void mk_h1_release(struct mk_conn *c)
{
    if (c->h1.req) {
        mk_request_free(c->h1.req);
        c->h1.req = NULL;
    }
    mk_h1_in_release(c);
    mk_h1_out_release(c);
    c->h1.body_mode = MK_BODY_NONE;
}

static void mk_h1_expire(struct mk_conn *c)
{
    struct mk_h1 *h = &c->h1;

    if (c->state == MK_CONN_SUSPENDED) {
        /* A plugin did not resume in time: answer for it, then close. */
        mk_conn_state(c, h->prev_state);
        c->flags |= MK_CONN_CLOSE;
        mk_request_expire_held(h->req);
        mk_h1_process(c);
        mk_h1_watch_input(c);
        return;
    }
    if (c->timer == MK_TIMER_READ && c->state == MK_CONN_READ_HEAD && h->in_len > 0 && !h->req) {
        mk_h1_send_raw(c, 408);
    }
    if (c->state == MK_CONN_DISCARD) {
        mk_conn_linger(c); /* the response went out: do not reset it away */
        return;
    }
    mk_conn_close(c);
}

static void mk_h1_go_away(struct mk_conn *c)
{
    if ((c->timer == MK_TIMER_KEEPALIVE || c->timer == MK_TIMER_READ) &&
        c->state == MK_CONN_READ_HEAD && c->h1.in_len == 0) {
        mk_conn_close(c);
    }
}

/* ---- requests ------------------------------------------------------------ */

bool mk_h1_keepalive(const struct mk_http_head *h, bool allowed, uint32_t max_requests,
                     uint32_t served)
{
    if (!allowed) {
        return false;
    }
    if (max_requests && served + 1 >= max_requests) {
        return false;
    }
    if (h->version == 11) {
        return !(h->flags & MK_HEAD_CONN_CLOSE);
    }
    return (h->flags & MK_HEAD_CONN_KEEPALIVE) && !(h->flags & MK_HEAD_CONN_CLOSE);
}

/*
 * Set up body framing for the request just parsed. The body is consumed
 * later: skipped after the response (DISCARD) or collected for a content
 * handler (BUFFER).
 */
static void mk_h1_begin_body(struct mk_conn *c, const struct mk_http_head *head)
{
    struct mk_h1 *h = &c->h1;

    h->body_seen = 0;
    h->body_in = 0;
    h->body_start = c->worker->now_ms;
    h->body_remaining = 0;
    h->chunked_body = head->flags & MK_HEAD_CHUNKED;
    if (h->chunked_body) {
        mk_chunked_init(&h->chunked);
        h->body_mode = MK_BODY_DISCARD;
    }
    else if (head->content_length > 0) {
        h->body_remaining = head->content_length;
        h->body_mode = MK_BODY_DISCARD;
    }
    else {
        h->body_mode = MK_BODY_NONE;
    }
}

/* A new request on c, the one in progress. */
static struct mk_request *mk_h1_new_request(struct mk_conn *c)
{
    struct mk_request *r = mk_request_new(c);

    c->h1.req = r;
    c->h1.body_mode = MK_BODY_NONE;
    return r;
}

/* Run r, whose head of `head_len` bytes at the start of `in` is parsed. */
static void mk_h1_run_request(struct mk_conn *c, struct mk_request *r, size_t head_len)
{
    c->h1.head_len = (uint32_t) head_len;
    if (mk_h1_keepalive(&r->head,
                        r->cfg->keepalive && !c->worker->stopping && !(c->flags & MK_CONN_CLOSE),
                        r->cfg->max_keepalive_requests, c->requests)) {
        r->flags |= MK_REQ_KEEPALIVE;
    }
    mk_h1_begin_body(c, &r->head);
    mk_request_run(r);
}

/*
 * A head of `head_len` bytes is at the start of `in` (MK_ERR: scan failed):
 * parse it into r (NULL: a new request) and run it.
 */
static void mk_h1_begin_request(struct mk_conn *c, ssize_t head_len, struct mk_request *r)
{
    struct mk_h1 *h = &c->h1;
    struct mk_http_header *headers;
    unsigned cap;

    if (!r) {
        r = mk_h1_new_request(c);
    }
    if (head_len < 0) {
        h->head_len = 0;
        c->flags |= MK_CONN_CLOSE;
        mk_request_error(r, h->scan.status);
        return;
    }
    h->head_len = (uint32_t) head_len;
    cap = h->scan.lines > 1 ? h->scan.lines - 1 : 1;
    headers = mk_arena_alloc(&r->arena, cap * sizeof(*headers));
    if (!headers) {
        c->flags |= MK_CONN_CLOSE;
        mk_request_error(r, 503);
        return;
    }
    if (mk_http_parse(&r->head, h->in, (size_t) head_len, headers, cap) < 0) {
        c->flags |= MK_CONN_CLOSE;
        mk_request_error(r, r->head.status);
        return;
    }
    mk_h1_run_request(c, r, (size_t) head_len);
}

/*
 * Whether `in` may hold a whole head: it ends with an empty line and does
 * not start with one. The scan then finds the head or refuses it, it never
 * waits for more: a request is needed either way.
 */
static bool mk_h1_head_whole(const struct mk_h1 *h)
{
    const char *in = h->in;
    uint32_t n = h->in_len;

    return n >= 4 && in[0] != '\r' && in[0] != '\n' && in[n - 1] == '\n' &&
           (in[n - 2] == '\n' || (in[n - 2] == '\r' && in[n - 3] == '\n'));
}

#define MK_H1_WHOLE_FIELDS 24u /* fields a head read in one pass may have */

/*
 * A head that arrived whole: read in one pass (mk_http_read_head), or,
 * when that declines, with the scan and the parser as any other.
 */
static void mk_h1_begin_whole(struct mk_conn *c)
{
    struct mk_h1 *h = &c->h1;
    const struct mk_http_limits *lim = &c->worker->use.cfg->limits;
    struct mk_request *r = mk_h1_new_request(c);
    unsigned cap = lim->max_headers < MK_H1_WHOLE_FIELDS ? lim->max_headers : MK_H1_WHOLE_FIELDS;
    struct mk_http_header *headers = mk_arena_alloc(&r->arena, (cap ? cap : 1) * sizeof(*headers));
    unsigned lines;

    if (headers) {
        ssize_t n = mk_http_read_head(&r->head, h->in, h->in_len, lim, headers, cap, &lines);
        if (n > 0) {
            h->scan.pos = (size_t) n;
            h->scan.lines = lines;
            mk_h1_run_request(c, r, (size_t) n);
            return;
        }
        memset(&r->head, 0, sizeof(r->head)); /* as the two steps would find it */
    }
    mk_h1_begin_request(c, mk_http_scan(&h->scan, h->in, h->in_len, lim), r);
}

/*
 * Arm the timer of `kind` (MK_TIMER_READ for a body or a plugin's hold,
 * MK_TIMER_SEND) for the connection's request: its rule's Timeout or
 * SendTimeout when it has one, else the server's.
 */
static void mk_h1_request_timer(struct mk_conn *c, enum mk_timer_kind kind)
{
    uint32_t ms = c->h1.req ? mk_request_timeout(c->h1.req, kind == MK_TIMER_SEND) : 0;

    if (ms) {
        mk_conn_timer_arm(c, kind, ms);
    }
    else {
        mk_conn_timer_set(c, kind);
    }
}

static void mk_h1_wait_write(struct mk_conn *c)
{
    if (!(c->ev.mask & MK_EV_WRITE) && c->h1.req) { /* SendMinRate: the wait for the client */
        mk_send_rate_start(&c->h1.send_rate, c->h1.req->bytes_sent, c->worker->now_ms);
    }
    mk_conn_state(c, MK_CONN_WRITE);
    mk_h1_request_timer(c, MK_TIMER_SEND);
    if (mk_event_mod(&c->worker->loop, &c->ev, mk_conn_want_mask(c, MK_EV_WRITE)) != MK_OK) {
        mk_conn_close(c);
    }
}

static void mk_h1_request_finished(struct mk_conn *c, bool ok);

/*
 * Act on the result of a write: wait for writability (MK_AGAIN; `watch`:
 * the connection is not yet watched for it), wait for a stream's handler
 * (MK_DECLINED: SendTimeout applies, and only a hang-up is acted on, so a
 * client that leaves ends the stream at once: see MK_CONN_HANDLER_WAIT), or
 * finish the request. Returns true when the request finished.
 */
static bool mk_h1_after_write(struct mk_conn *c, int rc, bool watch)
{
    c->flags &= (uint8_t) ~MK_CONN_HANDLER_WAIT;
    if (rc == MK_AGAIN) {
        if (watch || c->state != MK_CONN_WRITE) {
            mk_h1_wait_write(c);
        }
        else if (mk_event_mod(&c->worker->loop, &c->ev, mk_conn_want_mask(c, MK_EV_WRITE)) !=
                 MK_OK) {
            mk_conn_close(c); /* the transport now waits for the other direction */
        }
        return false;
    }
    if (rc == MK_DECLINED) {
        /*
         * An interest that reports hang-ups (reading does) stays: input that
         * comes meanwhile narrows it to hang-ups (conn.c). Otherwise read
         * interest once the body is in, as the next request will want it.
         */
        uint32_t want = c->h1.body_mode == MK_BODY_NONE ? MK_EV_READ : MK_EV_HANGUP;
        mk_conn_state(c, MK_CONN_WRITE);
        c->flags |= MK_CONN_HANDLER_WAIT;
        mk_h1_request_timer(c, MK_TIMER_SEND);
        if ((!(c->ev.mask & (MK_EV_READ | MK_EV_HANGUP)) || (c->ev.mask & MK_EV_WRITE)) &&
            mk_event_mod(&c->worker->loop, &c->ev, want) != MK_OK) {
            mk_conn_close(c);
        }
        return false;
    }
    mk_h1_request_finished(c, rc == MK_OK);
    return true;
}

/*
 * The 101 of r went out: free r and give the connection, with the bytes
 * that followed the request head, to the plugin that asked for it.
 */
static void mk_h1_switch(struct mk_conn *c, struct mk_request *r)
{
    struct mk_h1 *h = &c->h1;
    struct mk_upgrade up = *r->upgrade;

    r->upgrade = NULL;
    h->req = NULL;
    mk_request_free(r);
    c->requests++;
    mk_h1_out_release(c);
    if (h->head_len) {
        mk_h1_in_cut(c, 0, h->head_len);
        h->head_len = 0;
    }
    mk_takeover_start(c, &up, h->in, h->in_len);
}

/* The request finished writing its response (or failed): free it, go on. */
static void mk_h1_request_finished(struct mk_conn *c, bool ok)
{
    struct mk_h1 *h = &c->h1;
    struct mk_request *r = h->req;
    bool keep =
        ok && (r->flags & MK_REQ_KEEPALIVE) && !(c->flags & MK_CONN_CLOSE) && !c->worker->stopping;

    if (ok && r->upgrade && r->status == 101) {
        mk_h1_switch(c, r);
        return;
    }
    h->req = NULL;
    mk_request_free(r);
    c->requests++;
    mk_h1_out_release(c);
    if (!ok) {
        mk_conn_close(c);
        return;
    }
    if (h->head_len) {
        mk_h1_in_cut(c, 0, h->head_len);
        h->head_len = 0;
    }
    memset(&h->scan, 0, sizeof(h->scan));
    if (!keep) {
        if (h->body_mode != MK_BODY_NONE || h->in_len > 0) {
            mk_conn_linger(c);
        }
        else {
            mk_conn_close(c);
        }
        return;
    }
    if (h->body_mode == MK_BODY_DISCARD) {
        /* The rest of the body has Timeout from now, trickled or not. */
        mk_conn_state(c, MK_CONN_DISCARD);
        mk_conn_timer_set(c, MK_TIMER_READ);
    }
    else {
        mk_conn_state(c, MK_CONN_READ_HEAD);
        mk_conn_timer_set(c, h->in_len ? MK_TIMER_READ : MK_TIMER_KEEPALIVE);
    }
}

/* ---- the response (h1_out.c writes it) ----------------------------------- */

static void mk_h1_respond(struct mk_request *r, bool error)
{
    struct mk_conn *c = r->conn;
    int s = r->status;

    /* Errors that leave the stream in doubt end the connection. */
    if (error && (s == 400 || s == 408 || s == 413 || s == 414 || s == 431 || s == 501 ||
                  s == 505 || s == 503)) {
        c->flags |= MK_CONN_CLOSE;
    }
    if (r->body_type == MK_RESP_STREAM && !r->stream_sized) {
        /* Unknown length: chunked for HTTP/1.1, the close ends it for 1.0. */
        r->chunked = r->head.version == 11;
        if (!r->chunked) {
            c->flags |= MK_CONN_CLOSE;
        }
    }
    if (c->flags & MK_CONN_CLOSE) {
        r->flags &= (uint16_t) ~MK_REQ_KEEPALIVE;
    }
    /*
     * A client that asked "Expect: 100-continue" and gets a final answer
     * instead may or may not send its body: the connection cannot be reused.
     */
    if (c->h1.body_mode != MK_BODY_NONE && (r->head.flags & MK_HEAD_EXPECT_CONTINUE) &&
        !(r->flags & MK_REQ_CONTINUE_SENT)) {
        r->flags &= (uint16_t) ~MK_REQ_KEEPALIVE;
    }
    mk_h1_after_write(c, mk_h1_start(r), true);
}

/* ---- body ---------------------------------------------------------------- */

/*
 * A streamed body: whether its handler has room. When it has none, note
 * the moment (BodyMinRate does not count the client's forced pause) and
 * ask to be called back (proto->proceed) once it made room.
 */
static bool mk_h1_body_room(struct mk_conn *c)
{
    struct mk_h1 *h = &c->h1;
    struct mk_body_stream *bs = &h->req->bs;

    if (mk_body_stream_window_open(bs)) {
        if (bs->waiting) {
            bs->waiting = false;
            h->body_start += c->worker->now_ms - h->body_paused;
        }
        return true;
    }
    if (!bs->waiting) {
        bs->waiting = true;
        h->body_paused = c->worker->now_ms;
    }
    return false;
}

/*
 * Consume body bytes found at in[start, in_len): decode, hand to the request
 * (BUFFER), to its handler (STREAM, while its window is open) or drop
 * (DISCARD), and remove them from the buffer. Returns MK_OK when the body is
 * complete, MK_AGAIN when more input (or handler room) is needed, an HTTP
 * status (400 bad framing, 413 too large, 503 out of memory), or
 * MK_DECLINED when a streaming handler stopped the body with *stopped.
 */
static int mk_h1_body_consume(struct mk_conn *c, size_t start, bool *progress, int *stopped)
{
    struct mk_h1 *h = &c->h1;
#ifdef MK_HAVE_RULES
    /* the request's rule may set its own (MaxRequestBody in a [RULE]) */
    uint64_t max = h->req ? mk_request_max_body(h->req) : c->worker->use.cfg->max_body;
#else
    uint64_t max = c->worker->use.cfg->max_body;
#endif
    bool chunked = h->chunked_body;

    *progress = false;
    while (start < h->in_len) {
        size_t avail = h->in_len - start, data_len, used;
        if (h->body_mode == MK_BODY_STREAM && !mk_h1_body_room(c)) {
            return MK_AGAIN;
        }
        if (chunked) {
            ssize_t n = mk_chunked_decode(&h->chunked, h->in + start, avail, &data_len);
            if (n < 0) {
                return 400;
            }
            used = (size_t) n;
            size_t t = h->chunked.trailer_off;
            if (t < used && (h->body_mode == MK_BODY_BUFFER || h->body_mode == MK_BODY_STREAM)) {
                int rc = mk_body_trailer_raw(h->req, h->in + start + t, used - t,
                                             mk_chunked_done(&h->chunked));
                if (rc != MK_OK) {
                    return rc;
                }
            }
        }
        else {
            data_len = used = avail < h->body_remaining ? avail : (size_t) h->body_remaining;
            h->body_remaining -= used;
        }
        h->body_seen += data_len;
        h->body_in += used;
        if (h->body_seen > max) {
            return 413;
        }
        if (h->body_mode == MK_BODY_BUFFER) {
            int rc = mk_body_append(h->req, h->in + start, data_len);
            if (rc != MK_OK) {
                return rc;
            }
        }
        int rc = MK_OK;
        if (h->body_mode == MK_BODY_STREAM && data_len > 0) {
            rc = mk_body_stream_data(h->req, h->in + start, data_len);
        }
        mk_h1_in_cut(c, start, used);
        if (rc != MK_OK) {
            *stopped = rc;
            return MK_DECLINED;
        }
        *progress = *progress || used > 0;
        if (used == 0) {
            break;
        }
        if (chunked ? mk_chunked_done(&h->chunked) : h->body_remaining == 0) {
            return MK_OK;
        }
    }
    if (chunked ? mk_chunked_done(&h->chunked) : h->body_remaining == 0) {
        return MK_OK;
    }
    return MK_AGAIN;
}

/* ---- the state machine --------------------------------------------------- */

#ifdef MK_HAVE_H2
/* Cleartext HTTP/2 with prior knowledge: the bytes read so far go to HTTP/2. */
static bool mk_h1_switch_h2(struct mk_conn *c)
{
    struct mk_h1 *h = &c->h1;
    char *in = h->in;
    size_t len = h->in_len;

    h->in = NULL; /* handed over; released after HTTP/2 took the bytes */
    h->in_len = 0;
    mk_h2_start(c, in, len);
    h->in = in;
    h->in_len = 0;
    mk_h1_in_release(c);
    return false;
}

/*
 * The first request's head (head_len bytes) asks for `Upgrade: h2c`
 * (mk_h2_upgrade_wanted): answer 101 and continue in HTTP/2, this request
 * being stream 1. False when it does not (or cannot be parsed here): it is
 * then an ordinary HTTP/1 request.
 */
static bool mk_h1_upgrade_h2(struct mk_conn *c, size_t head_len)
{
    struct mk_h1 *h = &c->h1;
    unsigned cap = h->scan.lines > 1 ? h->scan.lines - 1 : 1;
    struct mk_http_header *headers = mk_try_alloc(cap * sizeof(*headers));
    uint8_t settings[MK_H2_UPGRADE_SETTINGS_MAX];
    struct mk_http_head head;
    size_t settings_len = 0;
    bool upgrade = false;

    if (!headers) {
        return false;
    }
    memset(&head, 0, sizeof(head));
    if (mk_http_parse(&head, h->in, head_len, headers, cap) >= 0 &&
        mk_h2_upgrade_wanted(&head, settings, sizeof(settings), &settings_len)) {
        char *in = h->in;
        size_t len = h->in_len;

        upgrade = true;
        h->in = NULL; /* handed over; released after HTTP/2 took the bytes */
        h->in_len = 0;
        mk_h2_start_upgrade(c, &head, settings, settings_len, in + head_len, len - head_len);
        h->in = in;
        h->in_len = 0;
        mk_h1_in_release(c);
    }
    mk_free(headers);
    return upgrade;
}
#endif

/*
 * A head has started arriving and is not complete: it has Timeout from its
 * first byte. A head that is complete at once needs no timer: whatever the
 * request then waits for arms its own (a body, a plugin, a full socket), and
 * its end arms the next one.
 */
static void mk_h1_head_timer(struct mk_conn *c)
{
    if (c->timer != MK_TIMER_READ) {
        mk_conn_timer_set(c, MK_TIMER_READ);
    }
}

/* READ_HEAD: returns true when the state changed and processing goes on. */
static bool mk_h1_step_head(struct mk_conn *c)
{
    struct mk_h1 *h = &c->h1;
    struct mk_worker *w = c->worker;

    if (h->in_len == 0) {
        mk_h1_in_release(c);
        if (w->stopping && c->requests > 0) {
            mk_conn_close(c);
        }
        return false;
    }
#ifdef MK_HAVE_H2
    bool h2c_first = (c->flags & MK_CONN_H2C) && c->requests == 0;
#else
    bool h2c_first = false; /* no h2c listener without HTTP/2 */
#endif
    if (h->scan.pos == 0 && !h2c_first && mk_h1_head_whole(h)) {
        mk_h1_begin_whole(c);
        return true;
    }
#ifdef MK_HAVE_H2
    if ((c->flags & MK_CONN_H2C) && c->requests == 0 && h->scan.pos == 0 &&
        memcmp(h->in, MK_H2_PREFACE,
               h->in_len < MK_H2_PREFACE_LEN ? h->in_len : MK_H2_PREFACE_LEN) == 0) {
        if (h->in_len < MK_H2_PREFACE_LEN) {
            mk_h1_head_timer(c);
            return false; /* maybe the HTTP/2 preface: wait for all of it */
        }
        return mk_h1_switch_h2(c);
    }
    if ((c->flags & MK_CONN_H2C) && c->requests == 0 && h->scan.pos == 0) {
        /* Neither HTTP/1 nor the preface: maybe a broken HTTP/2 client, which
           would misread an HTTP/1 answer. Close (RFC 9113 section 3.4). */
        const char *nl = memchr(h->in, '\n', h->in_len);
        if (nl && !memmem(h->in, (size_t) (nl - h->in), " HTTP/1.", 8)) {
            mk_conn_close(c);
            return false;
        }
    }
#endif
    ssize_t n = mk_http_scan(&h->scan, h->in, h->in_len, &w->use.cfg->limits);
    if (n == MK_AGAIN) {
        mk_h1_head_timer(c);
        return false;
    }
#ifdef MK_HAVE_H2
    if ((c->flags & MK_CONN_H2C) && c->requests == 0 && n > 0 && mk_h1_upgrade_h2(c, (size_t) n)) {
        return false;
    }
#endif
    mk_h1_begin_request(c, n, NULL);
    return true;
}

/*
 * BodyMinRate: once Timeout seconds have passed since the head, a body must
 * have come at an average of at least BodyMinRate bytes a second. Checked as
 * bytes arrive; a client that stops sending meets the Timeout timer instead.
 */
static bool mk_h1_body_too_slow(const struct mk_conn *c)
{
    const struct mk_config *cfg = c->worker->use.cfg;
    uint32_t rule_ms = c->h1.req ? mk_request_timeout(c->h1.req, false) : 0;
    uint64_t grace_end = c->h1.body_start + (rule_ms ? rule_ms : cfg->timeout_ms);
    uint64_t now = c->worker->now_ms;

    return cfg->body_min_rate > 0 && now > grace_end &&
           (now - grace_end) * cfg->body_min_rate / 1000 > c->h1.body_in;
}

static bool mk_h1_step_body(struct mk_conn *c)
{
    struct mk_h1 *h = &c->h1;
    bool progress;
    bool buffering = c->state == MK_CONN_READ_BODY;
    int stopped = MK_OK;
    int rc = mk_h1_body_consume(c, h->head_len, &progress, &stopped);

    if (rc == MK_DECLINED) {
        /* The handler answered mid-body: the rest is unread, so close after it. */
        h->body_mode = MK_BODY_DISCARD;
        c->flags |= MK_CONN_CLOSE;
        mk_request_body_result(h->req, stopped);
        return true;
    }
    if (rc == MK_AGAIN && h->req && h->req->bs.waiting) {
        return false; /* the handler's window is closed: not the client's fault */
    }

    if (rc == MK_AGAIN && mk_h1_body_too_slow(c)) {
        rc = 408;
    }
    if (rc == MK_AGAIN) {
        /* Discarding has a total deadline (set when the response ended). */
        if (progress && buffering) {
            mk_h1_request_timer(c, MK_TIMER_READ);
        }
        if (h->in_len == 0) {
            mk_h1_in_release(c);
        }
        return false;
    }
    if (rc != MK_OK) {
        if (!buffering) {
            mk_conn_linger(c); /* the response was already sent: do not reset it */
            return false;
        }
        /*
         * Close after the error response. body_mode stays set, so the close
         * is a lingering one: a client still sending its body does not reset
         * the response away.
         */
        c->flags |= MK_CONN_CLOSE;
        mk_request_error(h->req, rc);
        return true;
    }
    h->body_mode = MK_BODY_NONE;
    if (buffering) {
        mk_request_body_ready(h->req);
        return true;
    }
    mk_conn_state(c, MK_CONN_READ_HEAD);
    mk_conn_timer_set(c, h->in_len ? MK_TIMER_READ : MK_TIMER_KEEPALIVE);
    return true;
}

/* A connection waiting for input must be registered for it. */
static void mk_h1_watch_input(struct mk_conn *c)
{
    if (c->proto != &mk_proto_h1) {
        return; /* it speaks HTTP/2 now (h2c) */
    }
    if (c->state == MK_CONN_WRITE || c->state == MK_CONN_CLOSED || c->state == MK_CONN_SUSPENDED ||
        c->state == MK_CONN_TAKEOVER) {
        return;
    }
    if (c->state == MK_CONN_READ_BODY && c->h1.req->bs.waiting) {
        /* A streaming handler's window is closed: leave the bytes in the
           socket, so that TCP flow control holds the client back. */
        if (mk_event_unwatch(&c->worker->loop, &c->ev) != MK_OK) {
            mk_conn_close(c);
        }
        return;
    }
    if (mk_event_mod(&c->worker->loop, &c->ev, mk_conn_want_mask(c, MK_EV_READ)) != MK_OK) {
        mk_conn_close(c);
    }
}

/* The machine waits for input (and may read what the transport holds). */
static bool mk_h1_wants_input(const struct mk_conn *c)
{
    return c->state == MK_CONN_READ_HEAD || c->state == MK_CONN_READ_BODY ||
           c->state == MK_CONN_DISCARD;
}

/* Run the machine until it needs I/O, or its turn is over. */
static void mk_h1_process(struct mk_conn *c)
{
    uint32_t turn_start = c->requests;

    for (;;) {
        bool go_on;
        if (c->requests - turn_start >= MK_H1_TURN && c->state == MK_CONN_READ_HEAD &&
            c->h1.in_len > 0 && c->proto == &mk_proto_h1) {
            mk_conn_next_turn(c); /* pipelined requests left: the next turn serves them */
            return;
        }
        switch (c->state) {
        case MK_CONN_READ_HEAD:
            go_on = mk_h1_step_head(c);
            break;
        case MK_CONN_READ_BODY:
        case MK_CONN_DISCARD:
            go_on = mk_h1_step_body(c);
            break;
        default:
            go_on = false;
            break;
        }
        if (!go_on) {
            return;
        }
    }
}

static void mk_h1_on_input(struct mk_conn *c);

static void mk_h1_proceed(struct mk_conn *c)
{
    mk_h1_process(c);
    if (mk_h1_wants_input(c) && mk_conn_pending(c) > 0) {
        mk_h1_on_input(c); /* the transport holds bytes the socket will not signal */
        return;
    }
    mk_h1_watch_input(c);
}

/* After a response completed in this turn: read again at once? */
static bool mk_h1_read_eagerly(const struct mk_conn *c, uint32_t turn_start)
{
    return c->state == MK_CONN_READ_HEAD && c->h1.in_len == 0 && c->requests != turn_start &&
           c->requests - turn_start < MK_H1_TURN && c->worker->batch_n <= 1 &&
           (c->h1.eager || c->requests % MK_H1_EAGER_PROBE == 0);
}

/*
 * Readable: read and process. One read per event for a plain socket (the
 * loop is level triggered), then an eager read after a response (above);
 * while the transport holds more bytes (pending), read again, since no
 * event will come for them.
 */
static void mk_h1_on_input(struct mk_conn *c)
{
    struct mk_h1 *h = &c->h1;
    uint32_t turn_start = c->requests;
    bool eager = false;

    do {
        if (!mk_h1_in_reserve(c)) {
            if (c->state == MK_CONN_READ_HEAD && h->in) {
                h->scan.status = 431;
                mk_h1_begin_request(c, MK_ERR, NULL);
                mk_h1_process(c);
            }
            else {
                mk_conn_close(c);
            }
            return;
        }
        ssize_t n = mk_conn_read(c, h->in + h->in_len, h->in_size - h->in_len);
        if (n > 0) {
            if (eager && h->eager < MK_H1_EAGER_MAX) {
                h->eager++;
            }
            h->in_len += (uint32_t) n;
            mk_h1_process(c);
            if (c->proto != &mk_proto_h1) {
                return; /* it speaks HTTP/2 now (h2c) */
            }
            eager = mk_h1_read_eagerly(c, turn_start);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (eager && h->eager) {
                h->eager--;
            }
            if (h->in_len == 0) {
                mk_h1_in_release(c);
            }
            break;
        }
        mk_conn_close(c); /* end of stream or error */
        return;
    } while (mk_h1_wants_input(c) && (eager || mk_conn_pending(c) > 0));
    mk_h1_watch_input(c);
}

static void mk_h1_on_writable(struct mk_conn *c)
{
    struct mk_request *r = c->h1.req;
    uint64_t before = r->bytes_sent;
    int rc = mk_h1_write(r);

    if (rc == MK_AGAIN && r->bytes_sent != before) {
        const struct mk_config *cfg = c->worker->use.cfg;
        uint32_t rule_ms = mk_request_timeout(r, true);
        if (mk_send_rate_short(&c->h1.send_rate, r->bytes_sent, c->worker->now_ms,
                               rule_ms ? rule_ms : cfg->send_timeout_ms, cfg->send_min_rate)) {
            mk_conn_close(c); /* SendMinRate: as SendTimeout does */
            return;
        }
        mk_h1_request_timer(c, MK_TIMER_SEND);
    }
    if (mk_h1_after_write(c, rc, false)) {
        mk_h1_proceed(c);
    }
}

/* A streamed request's handler queued bytes: write them as if writable. */
static void mk_h1_wake(struct mk_request *r)
{
    struct mk_conn *c = r->conn;

    if (mk_h1_after_write(c, mk_h1_write(r), true)) {
        mk_h1_proceed(c);
    }
}

/* ---- request-level entries ----------------------------------------------- */

/* The handler wants the body: read it, then call the handler again. */
static void mk_h1_read_body(struct mk_request *r)
{
    struct mk_conn *c = r->conn;
    struct mk_h1 *h = &c->h1;

    if (h->body_mode == MK_BODY_NONE) {
        mk_request_body_ready(r); /* no body: nothing to wait for */
        return;
    }
    h->body_mode = mk_body_streaming(&r->bs) ? MK_BODY_STREAM : MK_BODY_BUFFER;
    if ((r->head.flags & MK_HEAD_EXPECT_CONTINUE) && h->in_len == h->head_len) {
        if (mk_h1_send_continue(c) != MK_OK) {
            mk_conn_close(c);
            return;
        }
        r->flags |= MK_REQ_CONTINUE_SENT;
    }
    mk_conn_state(c, MK_CONN_READ_BODY);
    h->body_start = c->worker->now_ms; /* BodyMinRate: the body may only start now (100) */
    mk_h1_request_timer(c, MK_TIMER_READ);
}

static void mk_h1_park(struct mk_request *r)
{
    struct mk_conn *c = r->conn;

    c->h1.prev_state = c->state;
    mk_conn_state(c, MK_CONN_SUSPENDED);
    /* No I/O until the resume, but a hang-up gives the request up (see
       conn.c). An interest that reports hang-ups (reading does) stays: it is
       narrowed only when another event comes (mk_conn_on_event), and most
       requests resume before any does, so they cost no epoll_ctl either way. */
    if (!(c->ev.mask & (MK_EV_HANGUP | MK_EV_READ)) &&
        mk_event_mod(&c->worker->loop, &c->ev, MK_EV_HANGUP) != MK_OK) {
        mk_event_unwatch(&c->worker->loop, &c->ev);
    }
    mk_h1_request_timer(c, MK_TIMER_READ);
}

static void mk_h1_unpark(struct mk_request *r)
{
    struct mk_conn *c = r->conn;

    mk_conn_state(c, c->h1.prev_state);
}

static void mk_h1_abort(struct mk_request *r)
{
    mk_conn_close(r->conn);
}

/* Upgrade (101) only from HTTP/1.1, with no request body left to frame. */
static int mk_h1_takeover(struct mk_request *r)
{
    struct mk_conn *c = r->conn;

    if (r->head.version != 11 || c->h1.req != r || c->h1.body_mode != MK_BODY_NONE ||
        r->body_type == MK_RESP_STREAM || (c->flags & MK_CONN_CLOSE)) {
        return MK_ERR;
    }
    return MK_OK;
}

const struct mk_proto mk_proto_h1 = {
    .name = "http/1.1",
    .on_input = mk_h1_on_input,
    .on_writable = mk_h1_on_writable,
    .expire = mk_h1_expire,
    .go_away = mk_h1_go_away,
    .release = mk_h1_release,
    .respond = mk_h1_respond,
    .read_body = mk_h1_read_body,
    .park = mk_h1_park,
    .unpark = mk_h1_unpark,
    .proceed = mk_h1_proceed,
    .abort = mk_h1_abort,
    .wake = mk_h1_wake,
    .takeover = mk_h1_takeover,
    .interim = mk_h1_interim,
};
