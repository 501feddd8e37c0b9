/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fcgi_req.c: one request on one backend connection, the fastcgi backend
 * of the gateway job (plugins/gateway/gw_job.h), which does the request's
 * side: the body kept whole when its length is unknown, its window, the
 * header block and the wait for it, the response stream with its
 * back-pressure and spill, Timeout and the server's cancel. What is
 * FastCGI's is here:
 *
 *   to the backend    BEGIN_REQUEST (FCGI_KEEP_CONN), PARAMS (the gateway
 *                     core's meta-variables), then STDIN: the request body
 *                     as it arrives, in a buffer of records (wbuf) that the
 *                     job's window bounds: when the backend does not read,
 *                     the window closes and the server stops reading the
 *                     client;
 *   from the backend  STDOUT: the header block, then the body, the payloads
 *                     of one read gathered straight into a piece of the
 *                     client's queue (api->stream_buffer); STDERR: logged
 *                     line by line; END_REQUEST: the end (its protocol
 *                     status honoured).
 *
 * Errors: a backend that refuses the connection is passed over for the
 * next one (fcgi_move); a kept-alive connection the backend closed before
 * answering is renewed and the request sent again from wbuf (fcgi_retry);
 * one that breaks the protocol before the head gives 502, as do all
 * backends refusing (the job answers, with the site's error page; after
 * the head it cuts the response short). A connection goes back to its pool
 * only when its request ended cleanly (END_REQUEST read, nothing pending);
 * otherwise it is closed.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fastcgi.h"

#define FR_READ 16384
#define FR_HEAD_BUF (MK_GW_HEAD_MAX + 2 * FR_READ)
/* A read once the response streams: a 100 KB page in two reads, its
   STDOUT records written to the client in one piece per read. */
#define FR_RECV 65536
#define FR_SPILL FR_RECV
/* What wbuf keeps of a request's records, from the first byte, while it
   may still be sent again on a new connection (fcgi_retry). */
#define FR_REPLAY_MAX (FCGI_WINDOW + 2 * FR_READ)
#define FR_REQUEST_ID 1

struct fcgi_req {
    struct mk_gw_job job;    /* first: the gateway job */
    struct fcgi_req *q_next; /* the pool's queue */
    struct fcgi_self *self;
    const struct fcgi_site *site;
    unsigned slot;
    uint64_t tried; /* the backends tried (bit N: self->backends[N]), each once */
    struct fcgi_conn *conn;
    struct fcgi_parser parser;
    uint8_t *wbuf; /* records waiting to go to the backend */
    size_t wlen, woff, wcap;
    bool wdead;      /* the backend stopped reading: the body is dropped */
    bool replay;     /* wbuf holds every record from the first: the request can be sent again */
    bool heard;      /* a byte came from the backend */
    bool retried;    /* sent again once on this backend */
    bool stdin_sent; /* a spooled body's last STDIN record is in wbuf */
};

/* This worker's read buffer and the STDOUT of one read: FR_RECV bytes each. */
static __thread uint8_t *fcgi_rbuf;

static struct fcgi_req *fcgi_of(struct mk_gw_job *j)
{
    return (struct fcgi_req *) j;
}

void fcgi_req_set_slot(struct fcgi_req *req, unsigned slot)
{
    req->slot = slot;
}

struct fcgi_req **fcgi_req_queue_next(struct fcgi_req *req)
{
    return &req->q_next;
}

unsigned fcgi_req_slot(const struct fcgi_req *req)
{
    return req->slot;
}

const struct fcgi_site *fcgi_req_site(const struct fcgi_req *req)
{
    return req->site;
}

static void fcgi_want(struct fcgi_req *req)
{
    if (!req->conn) {
        return;
    }
    uint32_t mask = req->job.paused ? 0 : MK_LOOP_READ;
    bool more = req->woff < req->wlen || (req->job.spooled && !req->stdin_sent);
    if ((more && !req->wdead) || fcgi_conn_connecting(req->conn)) {
        mask |= MK_LOOP_WRITE;
    }
    fcgi_conn_want(req->conn, mask);
}

/* Whether the connection may serve another request: END_REQUEST read, nothing pending. */
static bool fcgi_clean(const struct fcgi_req *req)
{
    return !req->wdead && fcgi_parser_idle(&req->parser) && req->woff == req->wlen;
}

/* ---- writing records ---------------------------------------------------------- */

static int fcgi_wreserve(struct fcgi_req *req, size_t more)
{
    if (req->replay && req->wlen + more > FR_REPLAY_MAX) {
        req->replay = false; /* too much to keep: sent bytes may go */
    }
    if (!req->replay && req->woff == req->wlen) {
        req->woff = req->wlen = 0;
    }
    if (req->wlen + more <= req->wcap) {
        return MK_OK;
    }
    if (req->woff > 0 && !req->replay) {
        memmove(req->wbuf, req->wbuf + req->woff, req->wlen - req->woff);
        req->wlen -= req->woff;
        req->woff = 0;
        if (req->wlen + more <= req->wcap) {
            return MK_OK;
        }
    }
    size_t cap = req->wcap ? req->wcap : 4096;
    while (cap < req->wlen + more) {
        cap *= 2;
    }
    uint8_t *p = realloc(req->wbuf, cap);
    if (!p) {
        return MK_ERR;
    }
    req->wbuf = p;
    req->wcap = cap;
    return MK_OK;
}

/* Append records of `type` carrying data (an empty record when len is 0). */
static int fcgi_append(struct fcgi_req *req, enum fcgi_type type, const void *data, size_t len)
{
    const uint8_t *p = data;
    do {
        size_t n = len > 32768 ? 32768 : len;
        if (fcgi_wreserve(req, FCGI_HEADER_LEN + n) != MK_OK) {
            return MK_ERR;
        }
        fcgi_header(req->wbuf + req->wlen, type, FR_REQUEST_ID, (uint16_t) n);
        if (n) {
            memcpy(req->wbuf + req->wlen + FCGI_HEADER_LEN, p, n);
        }
        req->wlen += FCGI_HEADER_LEN + n;
        p += n;
        len -= n;
    } while (len > 0);
    return MK_OK;
}

struct fcgi_params {
    uint8_t *buf;
    size_t len, cap;
};

static int fcgi_param_cb(void *arg, const char *name, size_t name_len, const char *value,
                         size_t value_len)
{
    struct fcgi_params *pp = arg;
    size_t need = 8 + name_len + value_len;
    if (pp->len + need > pp->cap) {
        size_t cap = pp->cap ? pp->cap * 2 : 4096;
        while (cap < pp->len + need) {
            cap *= 2;
        }
        uint8_t *b = realloc(pp->buf, cap);
        if (!b) {
            return MK_ERR;
        }
        pp->buf = b;
        pp->cap = cap;
    }
    pp->len += fcgi_param(pp->buf + pp->len, pp->cap - pp->len, name, name_len, value, value_len);
    return MK_OK;
}

/* BEGIN_REQUEST and the PARAMS stream for r. */
static int fcgi_write_begin(struct fcgi_req *req, struct mk_request *r)
{
    struct fcgi_params pp = {0};
    uint8_t begin[16];

    fcgi_begin_request(begin, FR_REQUEST_ID, 1);
    int rc = fcgi_wreserve(req, sizeof(begin));
    if (rc == MK_OK) {
        memcpy(req->wbuf + req->wlen, begin, sizeof(begin));
        req->wlen += sizeof(begin);
        rc = mk_gw_params(fcgi_api, r, &req->job.script, fcgi_param_cb, &pp);
    }
    if (rc == MK_OK && pp.len > 0) {
        rc = fcgi_append(req, FCGI_PARAMS, pp.buf, pp.len);
    }
    if (rc == MK_OK) {
        rc = fcgi_append(req, FCGI_PARAMS, NULL, 0);
    }
    free(pp.buf);
    return rc;
}

/*
 * The next STDIN record of a spooled body into wbuf (the empty one that
 * ends the stream once the spool is read): MK_OK, or MK_ERR (memory, the
 * temporary file).
 */
static int fcgi_spool_refill(struct fcgi_req *req)
{
    if (fcgi_wreserve(req, FCGI_HEADER_LEN + 32768) != MK_OK) {
        return MK_ERR;
    }
    ssize_t n = mk_gw_spool_read(&req->job.spool, req->wbuf + req->wlen + FCGI_HEADER_LEN, 32768);
    if (n < 0) {
        mk_gw_job_log(&req->job, "the spooled body: %s", strerror(errno));
        return MK_ERR;
    }
    fcgi_header(req->wbuf + req->wlen, FCGI_STDIN, FR_REQUEST_ID, (uint16_t) n);
    req->wlen += FCGI_HEADER_LEN + (size_t) n;
    req->stdin_sent = n == 0;
    return MK_OK;
}

/* Write what wbuf holds: MK_OK (all out or EAGAIN), MK_ERR (the backend is gone). */
static int fcgi_flush(struct fcgi_req *req)
{
    while (req->woff < req->wlen || (req->job.spooled && !req->stdin_sent)) {
        if (req->woff == req->wlen && fcgi_spool_refill(req) != MK_OK) {
            return MK_ERR;
        }
        ssize_t n = send(fcgi_conn_fd(req->conn), req->wbuf + req->woff, req->wlen - req->woff,
                         MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno == EAGAIN) {
            return MK_OK;
        }
        if (n < 0) {
            return MK_ERR;
        }
        req->woff += (size_t) n;
        req->job.last_io_ms = fcgi_api->now_ms();
    }
    mk_gw_job_body_drained(&req->job);
    return MK_OK;
}

static bool fcgi_move(struct fcgi_req *req);

/*
 * The kept-alive connection of req failed before the backend said a word
 * (php-fpm closes idle connections when it likes: pm.max_requests, its
 * process manager): send the request again, once, on a new connection to
 * the same backend, if wbuf still holds every record of it (the body not
 * streamed past what it keeps). When that backend refuses the new
 * connection at once (it was stopped), it is marked down and the request
 * moves to the next backend, as after a connect refused late (fcgi_move:
 * each backend tried once per request), or fails with 502 when none is
 * left. Whether the failure was handled so (the request goes on, or was
 * failed); if not, it stands and the caller deals with it.
 */
static bool fcgi_retry(struct fcgi_req *req)
{
    char b;
    if (req->retried || !req->replay || req->heard || !fcgi_conn_reused(req->conn)) {
        return false;
    }
    if (recv(fcgi_conn_fd(req->conn), &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0) {
        return false; /* an answer waits: read it */
    }
    /* From the first record again, whichever connection takes it. */
    req->woff = 0;
    req->wdead = false;
    memset(&req->parser, 0, sizeof(req->parser));
    if (fcgi_conn_renew(req->conn) != MK_OK) {
        if (errno != ENOMEM && errno != EMFILE && errno != ENFILE) {
            fcgi_pool_down(req->conn, req->site->conf->down_ms, strerror(errno));
        }
        if (!fcgi_move(req)) {
            mk_gw_job_log(&req->job, "no backend is up");
            mk_gw_job_fail(&req->job, 502);
        }
        return true;
    }
    req->retried = true;
    atomic_fetch_add_explicit(&req->self->retries, 1, memory_order_relaxed);
    fcgi_api->log(MK_PLUGIN_LOG_INFO,
                  "fastcgi: %.*s: the backend closed a kept-alive connection; sent again",
                  (int) req->job.script.name_len, req->job.script.name);
    fcgi_want(req);
    return true;
}

/*
 * Send what wbuf holds now when the connection is up (a pooled one is
 * writable): most requests then need no change of interest at all. What
 * does not go now, or an error, is left to the connection's events.
 */
static void fcgi_flush_now(struct fcgi_req *req)
{
    if (!fcgi_conn_connecting(req->conn) && fcgi_flush(req) != MK_OK && !fcgi_retry(req)) {
        req->woff = req->wlen = 0;
        req->wdead = true; /* the answer (or EOF: 502) is read next */
    }
    fcgi_want(req);
}

/* ---- reading records ---------------------------------------------------------- */

static void fcgi_end_request(struct fcgi_req *req, const struct fcgi_event *ev)
{
    struct mk_gw_job *j = &req->job;

    if (ev->protocol_status != FCGI_REQUEST_COMPLETE) {
        mk_gw_job_log(j, "the backend refused the request (%u)", ev->protocol_status);
        if (j->state != MK_GW_STREAM && !j->head_ready) {
            mk_gw_job_fail(j, ev->protocol_status == FCGI_OVERLOADED ? 503 : 502);
            return;
        }
    }
    bool waiting = j->state != MK_GW_STREAM && j->head_ready;
    mk_gw_job_end(j); /* may free req, unless the response is still to start */
    if (!waiting) {
        return;
    }
    /* The answer is complete before the response started (the body may
       still be arriving: it is dropped): the connection is free now. */
    mk_gw_job_body_drained(j); /* let the rest of the body flow, to be dropped */
    struct fcgi_conn *c = req->conn;
    req->conn = NULL;
    fcgi_pool_release(c, fcgi_clean(req));
}

/* What the record events of one read did: whether req is still to be touched. */
enum fcgi_outcome { FO_GOING, FO_DONE };

struct fcgi_read_ctx {
    struct fcgi_req *req;
    enum fcgi_outcome outcome;
    uint8_t *batch; /* STDOUT body bytes of this read, not yet written */
    size_t batch_len;
    bool in_buffer; /* batch is the request's stream buffer (api->stream_buffer) */
};

/* The STDOUT of this read so far to the client, in one piece: MK_OK, or MK_ERR (req handled). */
static int fcgi_batch_flush(struct fcgi_read_ctx *ctx)
{
    struct fcgi_req *req = ctx->req;
    size_t len = ctx->batch_len;
    uint8_t *batch = ctx->batch;
    bool in_buffer = ctx->in_buffer;
    /* what follows (nothing, as a rule: END_REQUEST flushes) goes by copy */
    ctx->in_buffer = false;
    ctx->batch = fcgi_rbuf + FR_RECV;
    ctx->batch_len = 0;
    if (len == 0) {
        if (in_buffer) {
            fcgi_api->stream_commit(req->job.r, 0); /* unused: released */
        }
        return MK_OK;
    }
    int rc = mk_gw_job_out(&req->job, batch, len, in_buffer);
    if (rc == MK_OK) {
        return MK_OK;
    }
    ctx->outcome = FO_DONE;
    if (rc == MK_GW_GONE) {
        mk_gw_job_over(&req->job, false); /* the client went away */
    }
    else {
        mk_gw_job_fail(&req->job, 502);
    }
    return MK_ERR;
}

/* Per record event; MK_ERR stops parsing (FO_DONE: req may be gone). */
static int fcgi_on_event(void *arg, const struct fcgi_event *ev)
{
    struct fcgi_read_ctx *ctx = arg;
    struct fcgi_req *req = ctx->req;

    if (ev->id != FR_REQUEST_ID) {
        return MK_ERR; /* no other request is open on the connection: broken */
    }
    if (ev->type == FCGI_STDERR) {
        mk_gw_log_feed(fcgi_api, &req->job.log, req->job.r, ev->data, ev->len);
        return MK_OK;
    }
    if (ev->type == FCGI_END_REQUEST) {
        if (fcgi_batch_flush(ctx) != MK_OK) {
            return MK_ERR;
        }
        ctx->outcome = FO_DONE;
        fcgi_end_request(req, ev);
        return MK_ERR; /* nothing follows for this request */
    }
    if (ev->len == 0) {
        return MK_OK; /* the end of STDOUT; END_REQUEST follows */
    }
    if (req->job.state == MK_GW_STREAM) {
        /* a read holds at most FR_RECV bytes: its STDOUT fits the batch */
        memcpy(ctx->batch + ctx->batch_len, ev->data, ev->len);
        ctx->batch_len += ev->len;
        return MK_OK;
    }
    mk_gw_job_head_data(&req->job, ev->data, ev->len);
    if (req->job.fail) {
        ctx->outcome = FO_DONE; /* failed and answered (or to be) */
        return MK_ERR;
    }
    return MK_OK;
}

/* Read and parse once. */
static void fcgi_read(struct fcgi_req *req)
{
    if (!fcgi_rbuf && !(fcgi_rbuf = malloc(2 * FR_RECV))) {
        mk_gw_job_fail(&req->job, 502);
        return;
    }
    /* Before the response starts, what a read brings goes into the head
       buffer: FR_READ at a time; then FR_RECV. */
    uint8_t *buf = fcgi_rbuf;
    size_t cap = req->job.state == MK_GW_STREAM ? FR_RECV : FR_READ;
    ssize_t n = recv(fcgi_conn_fd(req->conn), buf, cap, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return;
    }
    if (n <= 0 && fcgi_retry(req)) {
        return;
    }
    if (n <= 0) {
        mk_gw_job_log(&req->job, "the backend closed the connection");
        mk_gw_job_fail(&req->job, 502);
        return;
    }
    req->job.last_io_ms = fcgi_api->now_ms();
    req->heard = true;
    req->replay = false;
    struct fcgi_read_ctx ctx = {req, FO_GOING, fcgi_rbuf + FR_RECV, 0, false};
    if (req->job.state == MK_GW_STREAM && MK_API_HAS(fcgi_api, stream_buffer)) {
        /* The STDOUT of this read is gathered straight into a piece of the
           client's queue, which takes it without another copy. */
        uint8_t *piece = fcgi_api->stream_buffer(req->job.r, (size_t) n);
        if (piece) {
            ctx.batch = piece;
            ctx.in_buffer = true;
        }
    }
    int rc = fcgi_parse(&req->parser, buf, (size_t) n, fcgi_on_event, &ctx);
    if (ctx.outcome == FO_GOING && fcgi_batch_flush(&ctx) != MK_OK) {
        return; /* req was handled */
    }
    if (rc != MK_OK && ctx.outcome == FO_GOING) {
        mk_gw_job_log(&req->job, "the backend broke the protocol");
        mk_gw_job_fail(&req->job, 502);
    }
}

/*
 * The connection of req could not be made (the backend refused it, late
 * or, for a kept-alive connection being renewed, at once): every record of
 * req is in wbuf from the first (woff 0), none was answered, so they go to
 * the next backend of the site that can take them now (each backend tried
 * once per request), as fcgi_pool_acquire passes over a backend that
 * refuses at once. That backend's kept-alive connection may be sent the
 * request again once in its turn (fcgi_retry). Whether req moved (its
 * connection then the new one); if not, req has no connection and the
 * caller fails it.
 */
static bool fcgi_move(struct fcgi_req *req)
{
    struct fcgi_conn *c;

    fcgi_pool_release(req->conn, false);
    req->conn = NULL;
    if (fcgi_pool_next(req->site, &req->tried, &c) != MK_OK) {
        return false;
    }
    req->conn = c;
    req->retried = false;
    atomic_fetch_add_explicit(&fcgi_conn_backend(c)->requests, 1, memory_order_relaxed);
    fcgi_conn_attach(c, req);
    req->job.last_io_ms = fcgi_api->now_ms();
    fcgi_flush_now(req);
    return true;
}

void fcgi_req_io(struct fcgi_req *req, uint32_t ready)
{
    if (fcgi_conn_connecting(req->conn)) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(fcgi_conn_fd(req->conn), SOL_SOCKET, SO_ERROR, &err, &len);
        if (err) {
            fcgi_pool_down(req->conn, req->site->conf->down_ms, strerror(err));
            if (!fcgi_move(req)) {
                mk_gw_job_log(&req->job, "no backend is up");
                mk_gw_job_fail(&req->job, 502);
            }
            return;
        }
        fcgi_conn_connected(req->conn);
    }
    /* Read first: an answer that came before the backend stopped reading
       the body is complete, and must not be lost to a failed write. */
    if ((ready & (MK_LOOP_READ | MK_LOOP_ERROR)) && !req->job.paused) {
        fcgi_read(req); /* may free req */
        return;
    }
    if ((ready & MK_LOOP_WRITE) && fcgi_flush(req) != MK_OK && !fcgi_retry(req)) {
        /* The backend stopped reading: what it answered is read next, and
           the rest of the body is dropped; EOF without an answer is a 502. */
        req->woff = req->wlen = 0;
        req->wdead = true;
        mk_gw_job_body_drained(&req->job);
    }
    fcgi_want(req);
}

void fcgi_req_connected(struct fcgi_req *req, struct fcgi_conn *c)
{
    if (!c) {
        req->tried |= UINT64_C(1) << req->slot; /* the continuation moves on (fcgi_acquire) */
    }
    req->conn = c;
    mk_gw_job_ready(&req->job);
}

/* ---- the backend table (gw_job.h) -------------------------------------------- */

/*
 * A connection to a backend of the site, or the pool's queue. After the
 * wait: the connection the pool gave, or, when the one made for it was
 * refused, the next backend that can take it now.
 */
static int fcgi_acquire(struct mk_gw_job *j, struct mk_request *r)
{
    struct fcgi_req *req = fcgi_of(j);
    int rc;

    (void) r;
    if (j->waited) {
        rc = req->conn || fcgi_pool_next(req->site, &req->tried, &req->conn) == MK_OK ? MK_OK : 502;
    }
    else {
        rc = fcgi_pool_acquire(req, req->site, &req->tried, &req->conn);
    }
    if (rc == 502) {
        mk_gw_job_log(j, "no backend is up");
    }
    return rc;
}

/* The request has its connection: its head records, sent now when a body follows. */
static int fcgi_begin(struct mk_gw_job *j, struct mk_request *r)
{
    struct fcgi_req *req = fcgi_of(j);

    j->last_io_ms = fcgi_api->now_ms();
    struct fcgi_backend *b = fcgi_conn_backend(req->conn);
    req->tried |= UINT64_C(1) << (b - req->self->backends);
    atomic_fetch_add_explicit(&b->requests, 1, memory_order_relaxed);
    fcgi_conn_attach(req->conn, req);
    if (fcgi_write_begin(req, r) != MK_OK) {
        return 500;
    }
    if (j->has_body && !j->spooled) {
        fcgi_flush_now(req); /* the body's records follow as they come */
    }
    return MK_OK;
}

static int fcgi_body(struct mk_gw_job *j, const char *data, size_t len)
{
    struct fcgi_req *req = fcgi_of(j);

    if (j->ended || req->wdead) {
        return MK_OK; /* the backend answered (or stopped reading) without the whole body: dropped
                       */
    }
    if (fcgi_append(req, FCGI_STDIN, data, len) != MK_OK) {
        return 500;
    }
    fcgi_want(req);
    return MK_AGAIN; /* kept until wbuf drains (fcgi_flush) */
}

/* The end of STDIN: with the head records (no body), from the spool, or after the streamed body. */
static int fcgi_body_end(struct mk_gw_job *j, struct mk_request *r)
{
    struct fcgi_req *req = fcgi_of(j);

    (void) r; /* FastCGI's stdin has no trailers */
    if (j->spooled) {
        /* the body is whole: its STDIN records go as the connection takes them */
        if (fcgi_spool_refill(req) != MK_OK) {
            return 500;
        }
        fcgi_flush_now(req);
        return MK_OK;
    }
    if (!j->has_body) {
        if (fcgi_append(req, FCGI_STDIN, NULL, 0) != MK_OK) {
            return 500;
        }
        fcgi_flush_now(req);
        return MK_OK;
    }
    if (!j->ended && !req->wdead) {
        if (fcgi_append(req, FCGI_STDIN, NULL, 0) != MK_OK) {
            return 500;
        }
        fcgi_want(req);
    }
    return MK_OK;
}

static void fcgi_gw_want(struct mk_gw_job *j)
{
    if (j->state == MK_GW_HEAD) {
        /* the head is in, and the resume the worker runs next starts the
           response: the interest stays (no epoll_ctl each way), the
           connection's handler reads nothing while paused */
        return;
    }
    fcgi_want(fcgi_of(j));
}

static int fcgi_head(struct mk_gw_job *j, struct mk_request *r)
{
    struct fcgi_req *req = fcgi_of(j);

    if (req->site->sc->xsendfile) {
        int src = mk_gw_sendfile(fcgi_api, r, &j->h);
        if (src != MK_DECLINED) {
            return src; /* the file instead of the rest of the answer */
        }
    }
    int rc = mk_gw_head_apply(fcgi_api, r, &j->h, 0);
    if (rc == MK_DECLINED) {
        struct mk_gw_head h = j->h; /* a local Location: a client redirect, as nginx does */
        h.status = 302;
        rc = mk_gw_head_apply(fcgi_api, r, &h, 0);
    }
    return rc == MK_ERR ? MK_ERR : MK_AGAIN;
}

/* The backend is still at work on the request, or broke: its connection cannot be reused. */
static void fcgi_drop(struct mk_gw_job *j, int status)
{
    struct fcgi_req *req = fcgi_of(j);

    if (req->conn) {
        if (status == 502) {
            atomic_fetch_add_explicit(&fcgi_conn_backend(req->conn)->failures, 1,
                                      memory_order_relaxed);
        }
        fcgi_pool_release(req->conn, false);
        req->conn = NULL;
    }
    mk_gw_job_body_drained(j); /* the connection is gone: what the body kept is done with */
}

/* Give the connection back: kept alive only after a clean END_REQUEST. */
static bool fcgi_over(struct mk_gw_job *j, bool done)
{
    struct fcgi_req *req = fcgi_of(j);
    struct fcgi_conn *c = req->conn;

    (void) done;
    req->conn = NULL;
    if (c) {
        fcgi_pool_release(c, j->ended && fcgi_clean(req));
    }
    return true;
}

static void fcgi_release(struct mk_gw_job *j)
{
    struct fcgi_req *req = fcgi_of(j);

    if (req->conn) {
        fcgi_pool_release(req->conn, false);
        req->conn = NULL;
    }
    free(req->wbuf);
    req->wbuf = NULL;
}

static void fcgi_unqueue(struct mk_gw_job *j)
{
    fcgi_pool_unqueue(fcgi_of(j));
}

static const struct mk_gw_backend fcgi_backend = {
    .who = "fastcgi",
    .size = sizeof(struct fcgi_req),
    .window = FCGI_WINDOW,
    .head_cap = FR_HEAD_BUF,
    .spill_cap = FR_SPILL,
    .timeout = MK_GW_TIMEOUT_IDLE,
    .acquire = fcgi_acquire,
    .begin = fcgi_begin,
    .body = fcgi_body,
    .body_end = fcgi_body_end,
    .want = fcgi_gw_want,
    .head = fcgi_head,
    .drop = fcgi_drop,
    .over = fcgi_over,
    .release = fcgi_release,
    .unqueue = fcgi_unqueue,
};

int fcgi_req_start(struct mk_request *r, const struct fcgi_site *site, const struct mk_gw_script *s)
{
    struct fcgi_self *self = fcgi_self();
    struct mk_gw_job *j = mk_gw_job_new(&fcgi_backend, fcgi_api, r, s, &self->gw);
    if (!j) {
        return 503;
    }
    struct fcgi_req *req = fcgi_of(j);
    req->self = self;
    req->site = site;
    req->replay = true;
    j->timeout_ms = site->conf->timeout_ms;
    j->queue_ms = site->conf->queue_timeout_ms;
    atomic_fetch_add_explicit(&self->requests, 1, memory_order_relaxed);
    return mk_gw_job_start(j, r);
}

void fcgi_req_worker_exit(void)
{
    free(fcgi_rbuf);
    fcgi_rbuf = NULL;
    mk_gw_job_worker_exit(&fcgi_backend);
}
