/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * conn.c: the life of a client connection, as one explicit state machine.
 *
 *            accept
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
 * The input buffer is attached only while there are unprocessed bytes: an
 * idle keep-alive connection holds no buffer at all. A request head stays at
 * the start of the buffer until its response has been sent (the parsed head
 * points into it); body bytes that follow are consumed in place.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../core/log.h"
#include "server.h"

#define MK_LINGER_READS 8

/* ---- the built-in transport: plain sockets -------------------------------- */

static ssize_t mk_plain_read(struct mk_conn *c, void *buf, size_t len)
{
    ssize_t n;
    do {
        n = read(c->ev.fd, buf, len);
    } while (n < 0 && errno == EINTR);
    return n;
}

static ssize_t mk_plain_writev(struct mk_conn *c, const struct iovec *iov, int iovcnt, int flags)
{
    struct msghdr msg = {.msg_iov = (struct iovec *) iov, .msg_iovlen = (size_t) iovcnt};
    ssize_t n;
    do {
        n = sendmsg(c->ev.fd, &msg, MSG_NOSIGNAL | ((flags & MK_IO_MORE) ? MSG_MORE : 0));
    } while (n < 0 && errno == EINTR);
    return n;
}

static ssize_t mk_plain_sendfile(struct mk_conn *c, int fd, off_t *offset, size_t len)
{
    ssize_t n;
    do {
        n = sendfile(c->ev.fd, fd, offset, len);
    } while (n < 0 && errno == EINTR);
    return n;
}

const struct mk_transport mk_transport_plain = {
    .name = "plain",
    .read = mk_plain_read,
    .writev = mk_plain_writev,
    .sendfile = mk_plain_sendfile,
};

/* ---- buffers ------------------------------------------------------------- */

/* Make room for reading: attach a chunk, or grow up to the head limit. */
static bool mk_conn_in_reserve(struct mk_conn *c)
{
    struct mk_worker *w = c->worker;
    const struct mk_http_limits *lim = &w->cfg->limits;

    if (!c->in) {
        c->in = mk_pool_get(&w->pool);
        if (!c->in) {
            return false;
        }
        c->in_size = MK_CHUNK_SIZE;
        c->in_len = 0;
        return true;
    }
    if (c->in_len < c->in_size) {
        return true;
    }
    size_t cap = lim->max_head + lim->max_line + 64;
    if (c->in_size >= cap) {
        return false;
    }
    size_t size = (size_t) c->in_size * 2 < cap ? (size_t) c->in_size * 2 : cap;
    char *p;
    if (c->in_size == MK_CHUNK_SIZE) {
        p = mk_try_alloc(size);
        if (!p) {
            return false;
        }
        memcpy(p, c->in, c->in_len);
        mk_pool_put(&w->pool, c->in);
    }
    else {
        p = mk_try_realloc(c->in, size);
        if (!p) {
            return false;
        }
    }
    c->in = p;
    c->in_size = (uint32_t) size;
    return true;
}

static void mk_conn_in_release(struct mk_conn *c)
{
    if (!c->in) {
        return;
    }
    if (c->in_size == MK_CHUNK_SIZE) {
        mk_pool_put(&c->worker->pool, c->in);
    }
    else {
        mk_free(c->in);
    }
    c->in = NULL;
    c->in_size = c->in_len = 0;
}

void mk_conn_out_release(struct mk_conn *c)
{
    if (!c->out) {
        return;
    }
    if (c->out_size == MK_CHUNK_SIZE) {
        mk_pool_put(&c->worker->pool, c->out);
    }
    else {
        mk_free(c->out);
    }
    c->out = NULL;
    c->out_size = c->out_len = c->out_pos = 0;
}

/* Remove in[at, at + n). */
static void mk_conn_in_cut(struct mk_conn *c, size_t at, size_t n)
{
    memmove(c->in + at, c->in + at + n, c->in_len - at - n);
    c->in_len -= (uint32_t) n;
}

/* ---- small raw responses (no request object) ----------------------------- */

/*
 * Write a complete minimal response in one attempt, for answers that are not
 * part of a request: 503 when over the connection limit, 408 on a head
 * timeout. Best effort: a full socket buffer just loses the courtesy.
 */
static void mk_conn_send_raw(struct mk_conn *c, int status)
{
    struct mk_worker *w = c->worker;
    char buf[512];
    const char *reason = mk_http_reason(status);
    int body_len, n;
    char body[160];

    body_len = snprintf(body, sizeof(body),
                        "<!DOCTYPE html>\n<html><head><title>%d %s</title></head>"
                        "<body><h1>%d %s</h1></body></html>\n",
                        status, reason, status, reason);
    n = snprintf(buf, sizeof(buf),
                 "HTTP/1.1 %d %s\r\n%.*s%.*sContent-Type: text/html; charset=utf-8\r\n"
                 "Content-Length: %d\r\n%sConnection: close\r\n\r\n%s",
                 status, reason, (int) w->cfg->server_header_len, w->cfg->server_header,
                 (int) w->date_len, w->date, body_len, status == 503 ? "Retry-After: 1\r\n" : "",
                 body);
    if (n <= 0 || (size_t) n >= sizeof(buf)) {
        return;
    }
    struct iovec iov = {buf, (size_t) n};
    ssize_t ignored = c->transport->writev(c, &iov, 1, 0);
    (void) ignored;
}

/* ---- closing ------------------------------------------------------------- */

void mk_conn_close(struct mk_conn *c)
{
    struct mk_worker *w = c->worker;
    struct mk_plugin_set *ps = &w->server->plugins;
    int fd = c->ev.fd;

    if (c->state == MK_CONN_CLOSED) {
        return;
    }
    if (c->state == MK_CONN_SUSPENDED) {
        mk_request_drop_task(&c->req);
    }
    if (c->req.flags & MK_REQ_ACTIVE) {
        mk_request_end(&c->req);
    }
    if (c->flags & MK_CONN_STARTED) {
        for (size_t i = 0; i < ps->n_close; i++) {
            ps->close[i]->conn_close(c);
        }
        if (c->transport->close) {
            c->transport->close(c);
        }
    }
    mk_event_forget(&c->ev);
    if (fd >= 0) {
        close(fd);
    }
    mk_conn_in_release(c);
    mk_conn_out_release(c);
    c->state = MK_CONN_CLOSED;
    mk_conn_timer_set(c, MK_TIMER_NONE);
    /* A suspension handle may still point here: keep the struct until then. */
    mk_list_move_tail(&c->node, c->handles ? &w->zombies : &w->closing);
    atomic_fetch_sub_explicit(&w->n_conns, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit((c->flags & MK_CONN_REFUSED) ? &w->server->n_refused
                                                           : &w->server->n_conns,
                              1, memory_order_relaxed);
}

/*
 * Close without losing the response: shut the write side, then read and
 * drop whatever the client still sends until it closes or LINGER expires.
 * Closing a socket with unread input would reset the connection and could
 * destroy the response before the client reads it.
 */
static void mk_conn_linger(struct mk_conn *c)
{
    int rc;

    mk_conn_out_release(c);
    mk_conn_in_release(c);
    if (c->transport->shutdown) {
        rc = c->transport->shutdown(c);
    }
    else {
        rc = shutdown(c->ev.fd, SHUT_WR);
    }
    if (rc != 0) {
        mk_conn_close(c);
        return;
    }
    c->state = MK_CONN_LINGER;
    c->body_mode = MK_BODY_NONE;
    mk_event_mod(&c->worker->loop, &c->ev, MK_EV_READ);
    mk_conn_timer_set(c, MK_TIMER_LINGER);
}

static void mk_conn_linger_read(struct mk_conn *c)
{
    char buf[4096];

    for (int i = 0; i < MK_LINGER_READS; i++) {
        ssize_t n = c->transport->read(c, buf, sizeof(buf));
        if (n > 0) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return;
        }
        break;
    }
    mk_conn_close(c);
}

void mk_conn_expire(struct mk_conn *c)
{
    if (c->state == MK_CONN_SUSPENDED) {
        /* A plugin did not resume in time: answer for it, then close. */
        mk_warn("a request held by a plugin timed out");
        mk_request_drop_task(&c->req);
        c->state = c->req.prev_state;
        c->flags |= MK_CONN_CLOSE;
        mk_request_error(&c->req, 503);
        mk_conn_continue(c);
        return;
    }
    if (c->timer == MK_TIMER_READ && c->state == MK_CONN_READ_HEAD && c->in_len > 0 &&
        !(c->req.flags & MK_REQ_ACTIVE)) {
        mk_conn_send_raw(c, 408);
    }
    if (c->state == MK_CONN_DISCARD) {
        mk_conn_linger(c); /* the response went out: do not reset it away */
        return;
    }
    mk_conn_close(c);
}

/* ---- starting ------------------------------------------------------------ */

static void mk_conn_read(struct mk_conn *c);
static void mk_conn_watch_input(struct mk_conn *c);

void mk_conn_start(struct mk_conn *c)
{
    struct mk_worker *w = c->worker;
    struct mk_plugin_set *ps = &w->server->plugins;

    c->state = MK_CONN_READ_HEAD;
    if (c->transport->open && c->transport->open(c) != MK_OK) {
        mk_conn_close(c);
        return;
    }
    c->flags |= MK_CONN_STARTED;
    for (size_t i = 0; i < ps->n_accept; i++) {
        if (ps->accept[i]->conn_accept(c) != MK_OK) {
            mk_conn_close(c);
            return;
        }
    }
    /*
     * Read before registering: the request has usually arrived with the
     * connection, and a connection answered at once (Connection: close)
     * then never costs an epoll_ctl. mk_conn_read() registers it when it
     * has to wait.
     */
    mk_event_init(&c->ev, c->ev.fd, mk_conn_on_event);
    mk_conn_timer_set(c, MK_TIMER_READ);
    mk_conn_read(c);
}

void mk_conn_refuse(struct mk_conn *c)
{
    int fd = c->ev.fd;

    c->flags |= MK_CONN_REFUSED;
    c->state = MK_CONN_READ_HEAD;
    /* A transport with a handshake (TLS) cannot answer without its state. */
    if (c->transport != &mk_transport_plain ||
        mk_event_add(&c->worker->loop, &c->ev, fd, MK_EV_READ, mk_conn_on_event) != MK_OK) {
        c->ev.fd = fd;
        mk_conn_close(c);
        return;
    }
    mk_conn_send_raw(c, 503);
    mk_conn_linger(c);
}

/* ---- requests ------------------------------------------------------------ */

static void mk_request_init(struct mk_request *r, struct mk_conn *c)
{
    struct mk_worker *w = c->worker;

    memset(r, 0, sizeof(*r));
    r->conn = c;
    r->fd = -1;
    mk_arena_init(&r->arena, &w->pool);
    r->cfg = w->cfg;
    r->vhost = w->cfg->default_vhost; /* until the Host is known, for early errors */
    w->cfg_users++;
    r->flags = MK_REQ_ACTIVE | MK_REQ_CFG_REF;
    r->status = 200;
}

/* A head of `head_len` bytes is at the start of `in` (MK_ERR: scan failed). */
static void mk_conn_begin_request(struct mk_conn *c, ssize_t head_len)
{
    struct mk_request *r = &c->req;
    struct mk_http_header *headers;
    unsigned cap;

    mk_request_init(r, c);
    c->body_mode = MK_BODY_NONE;
    if (head_len < 0) {
        c->head_len = 0;
        c->flags |= MK_CONN_CLOSE;
        mk_request_error(r, c->scan.status);
        return;
    }
    c->head_len = (uint32_t) head_len;
    cap = c->scan.lines > 1 ? c->scan.lines - 1 : 1;
    headers = mk_arena_alloc(&r->arena, cap * sizeof(*headers));
    if (!headers) {
        c->flags |= MK_CONN_CLOSE;
        mk_request_error(r, 503);
        return;
    }
    if (mk_http_parse(&r->head, c->in, (size_t) head_len, headers, cap) < 0) {
        c->flags |= MK_CONN_CLOSE;
        mk_request_error(r, r->head.status);
        return;
    }
    mk_request_run(r);
}

/*
 * Set up body framing for the request just parsed. The body is consumed
 * later: skipped after the response (DISCARD) or collected for a content
 * handler (BUFFER).
 */
void mk_conn_begin_body(struct mk_conn *c)
{
    const struct mk_http_head *h = &c->req.head;

    c->body_seen = 0;
    c->body_in = 0;
    c->body_start = c->worker->now_ms;
    c->body_remaining = 0;
    if (h->flags & MK_HEAD_CHUNKED) {
        mk_chunked_init(&c->chunked);
        c->body_mode = MK_BODY_DISCARD;
    }
    else if (h->content_length > 0) {
        c->body_remaining = h->content_length;
        c->body_mode = MK_BODY_DISCARD;
    }
    else {
        c->body_mode = MK_BODY_NONE;
    }
}

int mk_conn_send_continue(struct mk_conn *c)
{
    static const char msg[] = "HTTP/1.1 100 Continue\r\n\r\n";
    struct iovec iov = {(void *) msg, sizeof(msg) - 1};
    ssize_t n = c->transport->writev(c, &iov, 1, 0);
    return n == (ssize_t) (sizeof(msg) - 1) ? MK_OK : MK_ERR;
}

void mk_conn_wait_write(struct mk_conn *c)
{
    c->state = MK_CONN_WRITE;
    mk_conn_timer_set(c, MK_TIMER_SEND);
    if (mk_event_mod(&c->worker->loop, &c->ev, MK_EV_WRITE) != MK_OK) {
        mk_conn_close(c);
    }
}

void mk_conn_request_finished(struct mk_conn *c, bool ok)
{
    struct mk_worker *w = c->worker;
    struct mk_request *r = &c->req;
    bool keep = ok && (r->flags & MK_REQ_KEEPALIVE) && !(c->flags & MK_CONN_CLOSE) && !w->stopping;

    mk_request_end(r);
    c->requests++;
    mk_conn_out_release(c);
    if (!ok) {
        mk_conn_close(c);
        return;
    }
    if (c->head_len) {
        mk_conn_in_cut(c, 0, c->head_len);
        c->head_len = 0;
    }
    memset(&c->scan, 0, sizeof(c->scan));
    if (!keep) {
        if (c->body_mode != MK_BODY_NONE || c->in_len > 0) {
            mk_conn_linger(c);
        }
        else {
            mk_conn_close(c);
        }
        return;
    }
    if (c->body_mode == MK_BODY_DISCARD) {
        /* The rest of the body has Timeout from now, trickled or not. */
        c->state = MK_CONN_DISCARD;
        mk_conn_timer_set(c, MK_TIMER_READ);
    }
    else {
        c->state = MK_CONN_READ_HEAD;
        mk_conn_timer_set(c, c->in_len ? MK_TIMER_READ : MK_TIMER_KEEPALIVE);
    }
}

/* ---- body ---------------------------------------------------------------- */

static int mk_body_append(struct mk_request *r, const char *data, size_t len)
{
    if (len == 0) {
        return MK_OK;
    }
    if (r->body_len + len > r->body_cap) {
        size_t cap = r->body_cap ? r->body_cap : 4096;
        while (cap < r->body_len + len) {
            cap *= 2;
        }
        if (cap > r->cfg->max_body && r->cfg->max_body >= r->body_len + len) {
            cap = (size_t) r->cfg->max_body;
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

/*
 * Consume body bytes found at in[start, in_len): decode, hand to the request
 * (BUFFER) or drop (DISCARD), and remove them from the buffer. Returns MK_OK
 * when the body is complete, MK_AGAIN when more input is needed, or an HTTP
 * status (400 bad framing, 413 too large, 503 out of memory).
 */
static int mk_conn_body_consume(struct mk_conn *c, size_t start, bool *progress)
{
    struct mk_request *r = &c->req;
    uint64_t max = c->worker->cfg->max_body;
    bool chunked = r->head.flags & MK_HEAD_CHUNKED;

    *progress = false;
    while (start < c->in_len) {
        size_t avail = c->in_len - start, data_len, used;
        if (chunked) {
            ssize_t n = mk_chunked_decode(&c->chunked, c->in + start, avail, &data_len);
            if (n < 0) {
                return 400;
            }
            used = (size_t) n;
        }
        else {
            data_len = used = avail < c->body_remaining ? avail : (size_t) c->body_remaining;
            c->body_remaining -= used;
        }
        c->body_seen += data_len;
        c->body_in += used;
        if (c->body_seen > max) {
            return 413;
        }
        if (c->body_mode == MK_BODY_BUFFER) {
            int rc = mk_body_append(r, c->in + start, data_len);
            if (rc != MK_OK) {
                return rc;
            }
        }
        mk_conn_in_cut(c, start, used);
        *progress = *progress || used > 0;
        if (used == 0) {
            break;
        }
        if (chunked ? mk_chunked_done(&c->chunked) : c->body_remaining == 0) {
            return MK_OK;
        }
    }
    if (chunked ? mk_chunked_done(&c->chunked) : c->body_remaining == 0) {
        return MK_OK;
    }
    return MK_AGAIN;
}

/* ---- the state machine --------------------------------------------------- */

/* READ_HEAD: returns true when the state changed and processing goes on. */
static bool mk_conn_step_head(struct mk_conn *c)
{
    struct mk_worker *w = c->worker;

    if (c->in_len == 0) {
        mk_conn_in_release(c);
        if (w->stopping && c->requests > 0) {
            mk_conn_close(c);
        }
        return false;
    }
    if (c->timer != MK_TIMER_READ) {
        mk_conn_timer_set(c, MK_TIMER_READ); /* a new request started arriving */
    }
    ssize_t n = mk_http_scan(&c->scan, c->in, c->in_len, &w->cfg->limits);
    if (n == MK_AGAIN) {
        return false;
    }
    mk_conn_begin_request(c, n);
    return true;
}

/*
 * BodyMinRate: once Timeout seconds have passed since the head, a body must
 * have come at an average of at least BodyMinRate bytes a second. Checked as
 * bytes arrive; a client that stops sending meets the Timeout timer instead.
 */
static bool mk_conn_body_too_slow(const struct mk_conn *c)
{
    const struct mk_config *cfg = c->worker->cfg;
    uint64_t grace_end = c->body_start + cfg->timeout_ms;
    uint64_t now = c->worker->now_ms;

    return cfg->body_min_rate > 0 && now > grace_end &&
           (now - grace_end) * cfg->body_min_rate / 1000 > c->body_in;
}

static bool mk_conn_step_body(struct mk_conn *c)
{
    bool progress;
    bool buffering = c->state == MK_CONN_READ_BODY;
    int rc = mk_conn_body_consume(c, c->head_len, &progress);

    if (rc == MK_AGAIN && mk_conn_body_too_slow(c)) {
        rc = 408;
    }
    if (rc == MK_AGAIN) {
        /* Discarding has a total deadline (set when the response ended). */
        if (progress && buffering) {
            mk_conn_timer_set(c, MK_TIMER_READ);
        }
        if (c->in_len == 0) {
            mk_conn_in_release(c);
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
        mk_request_error(&c->req, rc);
        return true;
    }
    c->body_mode = MK_BODY_NONE;
    if (buffering) {
        mk_request_body_ready(&c->req);
        return true;
    }
    c->state = MK_CONN_READ_HEAD;
    mk_conn_timer_set(c, c->in_len ? MK_TIMER_READ : MK_TIMER_KEEPALIVE);
    return true;
}

/* A connection waiting for input must be registered for it. */
static void mk_conn_watch_input(struct mk_conn *c)
{
    if (c->state == MK_CONN_WRITE || c->state == MK_CONN_CLOSED || c->state == MK_CONN_SUSPENDED) {
        return;
    }
    if (mk_event_mod(&c->worker->loop, &c->ev, MK_EV_READ) != MK_OK) {
        mk_conn_close(c);
    }
}

/* Run the machine until it needs I/O. */
static void mk_conn_process(struct mk_conn *c)
{
    for (;;) {
        bool go_on;
        switch (c->state) {
        case MK_CONN_READ_HEAD:
            go_on = mk_conn_step_head(c);
            break;
        case MK_CONN_READ_BODY:
        case MK_CONN_DISCARD:
            go_on = mk_conn_step_body(c);
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

void mk_conn_continue(struct mk_conn *c)
{
    mk_conn_process(c);
    mk_conn_watch_input(c);
}

static void mk_conn_read(struct mk_conn *c)
{
    if (!mk_conn_in_reserve(c)) {
        if (c->state == MK_CONN_READ_HEAD && c->in) {
            c->scan.status = 431;
            mk_conn_begin_request(c, MK_ERR);
            mk_conn_process(c);
        }
        else {
            mk_conn_close(c);
        }
        return;
    }
    ssize_t n = c->transport->read(c, c->in + c->in_len, c->in_size - c->in_len);
    if (n > 0) {
        c->in_len += (uint32_t) n;
        mk_conn_process(c);
        mk_conn_watch_input(c);
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (c->in_len == 0) {
            mk_conn_in_release(c);
        }
        mk_conn_watch_input(c);
        return;
    }
    mk_conn_close(c); /* end of stream or error */
}

void mk_conn_on_event(struct mk_event *ev, uint32_t ready)
{
    struct mk_conn *c = (struct mk_conn *) ev;

    switch (c->state) {
    case MK_CONN_WRITE: {
        uint64_t before = c->req.bytes_sent;
        int rc = mk_response_write(&c->req);
        if (rc == MK_AGAIN) {
            if (c->req.bytes_sent != before) {
                mk_conn_timer_set(c, MK_TIMER_SEND);
            }
            return;
        }
        mk_conn_request_finished(c, rc == MK_OK);
        mk_conn_process(c);
        mk_conn_watch_input(c);
        return;
    }
    case MK_CONN_LINGER:
        mk_conn_linger_read(c);
        return;
    case MK_CONN_SUSPENDED:
        /*
         * The client hung up while a plugin holds its request: nobody is
         * left to answer, so give the request up at once and drop its task
         * if that has not started (nginx does the same with a closed
         * client). A half-close counts too: it cannot be told apart from a
         * close until a write fails.
         */
        if (ready & (MK_EV_HANGUP | MK_EV_ERROR)) {
            mk_conn_close(c);
        }
        return;
    case MK_CONN_CLOSED:
        return;
    default:
        mk_conn_read(c);
        return;
    }
}
