/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fcgi_req.c: one request on one backend connection.
 *
 *   to the backend    BEGIN_REQUEST (FCGI_KEEP_CONN), PARAMS (the gateway
 *                     core's meta-variables), then STDIN: the request body
 *                     as it arrives (api->body_stream), through a buffer
 *                     bounded by the body window: when the backend does not
 *                     read, the window closes and the server stops reading
 *                     the client;
 *   from the backend  STDOUT: the header block (the request waits suspended
 *                     or its body still streams), then the body, streamed to
 *                     the client; when the client's queue is at its
 *                     high-water mark the connection is not read until it
 *                     drains (what one read held waits in a small spill
 *                     buffer), so memory stays bounded however large the
 *                     answer; STDERR: logged line by line; END_REQUEST: the
 *                     end (its protocol status honoured).
 *
 * Errors: a backend that refuses the connection is passed over for the
 * next one (fcgi_move); one that breaks the protocol before the head gives
 * 502, as do all backends refusing; silence for Timeout 504 (both with the
 * site's error page, the client's connection staying usable); after the
 * head the response can only be cut short (api->stream_abort). When the
 * server gives a suspended request up first (its own Timeout, the client
 * gone, the server stopping: fcgi_cancel), the backend connection is
 * dropped and the request freed at once, answered 504 (503 while it was
 * still queued for a connection). A
 * connection goes back to its pool only when its request ended cleanly
 * (END_REQUEST read, nothing pending); otherwise it is closed. A request is
 * freed as soon as it is over for the client; it lives on its worker's list
 * until then.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fastcgi.h"

enum fcgi_state {
    FR_SPOOL,    /* a body of unknown length is kept whole first */
    FR_QUEUED,   /* suspended: waiting for a connection */
    FR_BODY,     /* the request body streams to the backend */
    FR_HEAD,     /* suspended: waiting for the header block */
    FR_RESUMING, /* resume() called: the continuation comes */
    FR_STREAM,   /* the response body streams to the client */
};

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
/* fcgi_stream_write(): the request went away inside the call */
#define FR_GONE (-100)

struct fcgi_req {
    struct fcgi_req *next, **pprev; /* the worker's list */
    struct fcgi_req *q_next;        /* the pool's queue */
    struct fcgi_self *self;
    const struct fcgi_site *site;
    unsigned slot;
    uint64_t tried; /* the backends tried (bit N: self->backends[N]), each once */
    enum fcgi_state state;
    struct mk_request *r; /* while the body or the response streams */
    struct mk_suspended *susp;
    struct fcgi_conn *conn;
    struct mk_loop_timer *timer;
    uint64_t start_ms, last_io_ms;
    struct mk_gw_script script;
    struct fcgi_parser parser;
    uint8_t *wbuf; /* records waiting to go to the backend */
    size_t wlen, woff, wcap;
    size_t owed; /* body bytes kept, given back when wbuf drains */
    char *head;  /* STDOUT until the response starts */
    size_t head_len;
    char *spill; /* STDOUT the client's queue did not take */
    size_t spill_len;
    int fail; /* the status to answer instead (502, 503, 504) */
    bool has_body, body_done, head_ready, ended, paused, aborting;
    bool wdead;  /* the backend stopped reading: the body is dropped */
    bool replay; /* wbuf holds every record from the first: the request can be sent again */
    bool heard;  /* a byte came from the backend */
    bool retried;
    bool orphan; /* its worker exited while its continuation was pending */
    /* inside stream_write(): proceed() calls are noted, not acted on */
    bool in_write, drained, gone;
    /* a body of unknown length (chunked, HTTP/2), kept whole before the
       request goes out, so that the backend gets CONTENT_LENGTH */
    struct mk_gw_spool spool;
    bool spooled, stdin_sent;
    char content_length[24];
    /* Not zeroed at the start (fcgi_req_start): filled before use. */
    struct mk_gw_head h;  /* filled by mk_gw_head_parse */
    struct mk_gw_log log; /* STDERR records; mk_gw_log_init */
};

static __thread struct fcgi_req *fcgi_reqs;
/* This worker's read buffer and the STDOUT of one read: FR_RECV bytes each. */
static __thread uint8_t *fcgi_rbuf;

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
    uint32_t mask = req->paused ? 0 : MK_LOOP_READ;
    bool more = req->woff < req->wlen || (req->spooled && !req->stdin_sent);
    if ((more && !req->wdead) || fcgi_conn_connecting(req->conn)) {
        mask |= MK_LOOP_WRITE;
    }
    fcgi_conn_want(req->conn, mask);
}

/* ---- the end of a request -------------------------------------------------- */

static void fcgi_req_free(struct fcgi_req *req)
{
    if (req->timer) {
        fcgi_api->timer_stop(req->timer);
    }
    if (req->next) {
        req->next->pprev = req->pprev;
    }
    *req->pprev = req->next;
    free(req->wbuf);
    free(req->head);
    free(req->spill);
    mk_gw_spool_free(&req->spool);
    free(req);
}

/*
 * The request is over for the client: give the connection back (kept
 * alive only after a clean END_REQUEST) and free req.
 */
static void fcgi_over(struct fcgi_req *req)
{
    if (req->state == FR_QUEUED) {
        fcgi_pool_unqueue(req);
    }
    struct fcgi_conn *c = req->conn;
    req->conn = NULL;
    if (c) {
        bool keep =
            req->ended && !req->wdead && fcgi_parser_idle(&req->parser) && req->woff == req->wlen;
        fcgi_pool_release(c, keep);
    }
    uint64_t ms = fcgi_api->now_ms() - req->start_ms;
    atomic_fetch_add_explicit(&req->self->upstream_ms, ms, memory_order_relaxed);
    mk_gw_log_flush(fcgi_api, &req->log, NULL); /* the request is over: the server log */
    fcgi_req_free(req);
}

static int fcgi_resumed(struct mk_request *r, void *arg);
static int fcgi_req_begin_on(struct fcgi_req *req, struct mk_request *r);

/* Drop the connection of a request that failed, and count it. */
static void fcgi_drop_conn(struct fcgi_req *req, int status)
{
    if (req->conn) {
        if (status == 502) {
            atomic_fetch_add_explicit(&fcgi_conn_backend(req->conn)->failures, 1,
                                      memory_order_relaxed);
        }
        fcgi_pool_release(req->conn, false);
        req->conn = NULL;
    }
    if (status == 504) {
        atomic_fetch_add_explicit(&req->self->timeouts, 1, memory_order_relaxed);
    }
    else if (status == 502) {
        atomic_fetch_add_explicit(&req->self->bad_gateway, 1, memory_order_relaxed);
    }
}

/*
 * The backend failed (status: 502, 504): answer with the status while the
 * response has not started, cut the response short once it has.
 */
static void fcgi_fail(struct fcgi_req *req, int status)
{
    fcgi_drop_conn(req, status);
    if (!req->fail) {
        req->fail = status;
    }
    switch (req->state) {
    case FR_BODY:
        /* answered from the next body callback; let the body flow */
        if (req->owed && req->r) {
            size_t owed = req->owed;
            req->owed = 0;
            fcgi_api->body_consume(req->r, owed);
        }
        break;
    case FR_QUEUED:
        fcgi_pool_unqueue(req);
        /* fall through */
    case FR_HEAD:
        req->state = FR_RESUMING;
        fcgi_api->resume(req->susp, fcgi_resumed, req);
        break;
    case FR_SPOOL:    /* no connection yet: nothing can fail */
    case FR_RESUMING: /* answered by the continuation */
        break;
    case FR_STREAM:
        fcgi_api->log(MK_PLUGIN_LOG_ERROR, "fastcgi: %.*s: the backend failed mid-response (%d)",
                      (int) req->script.name_len, req->script.name, status);
        req->aborting = true;
        fcgi_api->stream_abort(req->r);
        fcgi_over(req);
        break;
    }
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
        rc = mk_gw_params(fcgi_api, r, &req->script, fcgi_param_cb, &pp);
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
    ssize_t n = mk_gw_spool_read(&req->spool, req->wbuf + req->wlen + FCGI_HEADER_LEN, 32768);
    if (n < 0) {
        fcgi_api->log(MK_PLUGIN_LOG_ERROR, "fastcgi: %.*s: the spooled body: %s",
                      (int) req->script.name_len, req->script.name, strerror(errno));
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
    while (req->woff < req->wlen || (req->spooled && !req->stdin_sent)) {
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
        req->last_io_ms = fcgi_api->now_ms();
    }
    if (req->owed > 0 && req->state == FR_BODY && req->r) {
        size_t owed = req->owed;
        req->owed = 0;
        fcgi_api->body_consume(req->r, owed);
    }
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
            fcgi_api->log(MK_PLUGIN_LOG_ERROR, "fastcgi: %.*s: no backend is up",
                          (int) req->script.name_len, req->script.name);
            fcgi_fail(req, 502);
        }
        return true;
    }
    req->retried = true;
    atomic_fetch_add_explicit(&req->self->retries, 1, memory_order_relaxed);
    fcgi_api->log(MK_PLUGIN_LOG_INFO,
                  "fastcgi: %.*s: the backend closed a kept-alive connection; sent again",
                  (int) req->script.name_len, req->script.name);
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

/* ---- the response --------------------------------------------------------------- */

static void fcgi_proceed(struct mk_request *r, void *arg);

/*
 * api->stream_write() for req, or api->stream_commit() of the first len
 * bytes of its stream buffer when data is NULL. The server may write at
 * once and, inside the call, run proceed(r) (the queue drained) or
 * proceed(NULL) (the client is gone): fcgi_proceed only notes them then.
 * MK_OK, MK_AGAIN (the queue is at its mark and was not drained meanwhile:
 * wait for proceed), MK_ERR, or FR_GONE (the request is over: the caller
 * calls fcgi_over).
 */
static int fcgi_stream_write(struct fcgi_req *req, const void *data, size_t len)
{
    req->in_write = true;
    req->drained = false;
    int rc =
        data ? fcgi_api->stream_write(req->r, data, len) : fcgi_api->stream_commit(req->r, len);
    req->in_write = false;
    if (req->gone) {
        req->r = NULL;
        return FR_GONE;
    }
    return rc == MK_AGAIN && req->drained ? MK_OK : rc;
}

/*
 * STDOUT body bytes to the client; what the queue does not take waits in
 * spill. `in_buffer`: data is the request's stream buffer
 * (api->stream_buffer), queued as it is, without a copy.
 */
static int fcgi_out(struct fcgi_req *req, const void *data, size_t len, bool in_buffer)
{
    if (req->paused || req->spill_len > 0) {
        if (req->spill_len + len > FR_SPILL) {
            return MK_ERR; /* cannot happen: reading stops while paused */
        }
        if (!req->spill && !(req->spill = malloc(FR_SPILL))) {
            return MK_ERR;
        }
        memcpy(req->spill + req->spill_len, data, len);
        req->spill_len += len;
        if (in_buffer) {
            fcgi_api->stream_commit(req->r, 0); /* copied: released */
        }
        return MK_OK;
    }
    int rc = fcgi_stream_write(req, in_buffer ? NULL : data, len);
    if (rc == MK_AGAIN) {
        req->paused = true;
        fcgi_want(req);
        return MK_OK;
    }
    return rc;
}

/* END_REQUEST came and everything is out: end the body, keep the connection. */
static void fcgi_finish(struct fcgi_req *req)
{
    mk_gw_note_upstream(fcgi_api, req->r, req->start_ms);
    mk_gw_log_flush(fcgi_api, &req->log, req->r);
    fcgi_api->stream_end(req->r, NULL);
    req->r = NULL;
    fcgi_over(req);
}

/*
 * The continuation once the header block is in (or failed): status and
 * headers, then the stream. What the content hook would return.
 */
static int fcgi_respond(struct fcgi_req *req, struct mk_request *r)
{
    mk_gw_note_upstream(fcgi_api, r, req->start_ms); /* the head's time; the end's replaces it */
    mk_gw_log_feed(fcgi_api, &req->log, r, NULL, 0); /* what came while suspended */
    if (req->fail) {
        mk_gw_log_flush(fcgi_api, &req->log, r);
        int status = req->fail;
        fcgi_over(req);
        return status;
    }
    if (req->site->sc->xsendfile) {
        int src = mk_gw_sendfile(fcgi_api, r, &req->h);
        if (src != MK_DECLINED) {
            mk_gw_log_flush(fcgi_api, &req->log, r);
            fcgi_over(req); /* the rest of the answer is not wanted */
            return src;
        }
    }
    int rc = mk_gw_head_apply(fcgi_api, r, &req->h, 0);
    if (rc == MK_DECLINED) {
        struct mk_gw_head h = req->h; /* a local Location: a client redirect, as nginx does */
        h.status = 302;
        rc = mk_gw_head_apply(fcgi_api, r, &h, 0);
    }
    if (rc != MK_ERR && req->ended) {
        /* The whole answer is in (END_REQUEST came with it, as for most
           pages): a body of known length, sent with the head in one write,
           keep-alive even for HTTP/1.0. The head buffer becomes the body. */
        size_t len = req->head_len - req->h.head_len;
        memmove(req->head, req->head + req->h.head_len, len);
        fcgi_api->set_body_owned(r, req->head, len);
        req->head = NULL;
        mk_gw_log_flush(fcgi_api, &req->log, r);
        fcgi_over(req);
        return MK_OK;
    }
    if (rc == MK_ERR || fcgi_api->stream_start(r, fcgi_proceed, req) != MK_OK) {
        fcgi_drop_conn(req, 502);
        fcgi_over(req);
        return 502;
    }
    req->r = r;
    req->state = FR_STREAM;
    req->paused = false; /* the queue takes the body now: what came with the head goes there */
    size_t rest = req->head_len - req->h.head_len;
    if (rest > 0 && fcgi_out(req, req->head + req->h.head_len, rest, false) != MK_OK) {
        fcgi_over(req); /* gone, or not taken */
        return MK_OK;
    }
    free(req->head);
    req->head = NULL;
    if (req->ended && !req->paused) {
        fcgi_finish(req);
        return MK_OK;
    }
    fcgi_want(req);
    return MK_OK;
}

static int fcgi_resumed(struct mk_request *r, void *arg)
{
    struct fcgi_req *req = arg;
    if (req->orphan) {
        free(req); /* its worker is gone: everything else was released then */
        return r ? 503 : MK_OK;
    }
    req->susp = NULL;
    if (!r) {
        fcgi_over(req);
        return MK_OK;
    }
    if (!req->conn && !req->fail && !req->head_ready &&
        fcgi_pool_next(req->site, &req->tried, &req->conn) != MK_OK) {
        /* queued, and its backend could not take it: nor can any other now */
        fcgi_api->log(MK_PLUGIN_LOG_ERROR, "fastcgi: %.*s: no backend is up",
                      (int) req->script.name_len, req->script.name);
        atomic_fetch_add_explicit(&req->self->bad_gateway, 1, memory_order_relaxed);
        req->fail = 502;
    }
    if (req->fail || req->head_ready) {
        return fcgi_respond(req, r);
    }
    return fcgi_req_begin_on(req, r);
}

static void fcgi_proceed(struct mk_request *r, void *arg)
{
    struct fcgi_req *req = arg;
    if (req->aborting) {
        return; /* inside stream_abort: fcgi_fail frees req */
    }
    if (req->in_write) {
        /* inside fcgi_stream_write: noted, acted on when it returns */
        req->gone |= !r;
        req->drained |= r != NULL;
        return;
    }
    if (!r) {
        fcgi_over(req); /* the client went away (or HEAD) */
        return;
    }
    req->paused = false;
    if (req->spill_len > 0) {
        int rc = fcgi_stream_write(req, req->spill, req->spill_len);
        req->spill_len = 0;
        if (rc == FR_GONE) {
            fcgi_over(req);
            return;
        }
        if (rc == MK_ERR) {
            req->aborting = true;
            fcgi_api->stream_abort(r);
            fcgi_over(req);
            return;
        }
        req->paused = rc == MK_AGAIN;
    }
    if (req->ended && !req->paused) {
        fcgi_finish(req);
        return;
    }
    fcgi_want(req);
}

/* The head is in (or failed) before the response started. */
static void fcgi_head_done(struct fcgi_req *req, int fail)
{
    if (fail) {
        fcgi_fail(req, fail);
        return;
    }
    req->head_ready = true;
    req->paused = true; /* until the response starts */
    if (req->state != FR_HEAD) {
        fcgi_want(req); /* the body may take long: stop reading meanwhile */
    }
    /* Waiting for the resume, which the worker runs next: the interest stays
       (no epoll_ctl each way), the handler reads nothing while paused. */
    if (req->state == FR_HEAD) {
        req->state = FR_RESUMING;
        fcgi_api->resume(req->susp, fcgi_resumed, req);
    }
}

static void fcgi_stdout_head(struct fcgi_req *req, const uint8_t *data, size_t len)
{
    if (!req->head && !(req->head = malloc(FR_HEAD_BUF))) {
        fcgi_head_done(req, 502);
        return;
    }
    if (req->head_len + len > FR_HEAD_BUF) {
        fcgi_head_done(req, 502);
        return;
    }
    memcpy(req->head + req->head_len, data, len);
    req->head_len += len;
    if (req->head_ready) {
        return; /* body bytes after the head, read in the same piece */
    }
    int rc = mk_gw_head_parse(req->head, req->head_len, 0, &req->h);
    if (rc == MK_OK) {
        fcgi_head_done(req, 0);
    }
    else if (rc == MK_ERR) {
        fcgi_api->log(MK_PLUGIN_LOG_ERROR, "fastcgi: %.*s: malformed header block: %s",
                      (int) req->script.name_len, req->script.name, req->h.why ? req->h.why : "?");
        fcgi_head_done(req, 502);
    }
}

static void fcgi_stderr(struct fcgi_req *req, const uint8_t *data, size_t len)
{
    mk_gw_log_feed(fcgi_api, &req->log, req->r, data, len);
}

static void fcgi_end_request(struct fcgi_req *req, const struct fcgi_event *ev)
{
    req->ended = true;
    if (ev->protocol_status != FCGI_REQUEST_COMPLETE) {
        fcgi_api->log(MK_PLUGIN_LOG_ERROR, "fastcgi: %.*s: the backend refused the request (%u)",
                      (int) req->script.name_len, req->script.name, ev->protocol_status);
        if (req->state != FR_STREAM && !req->head_ready) {
            fcgi_fail(req, ev->protocol_status == FCGI_OVERLOADED ? 503 : 502);
            return;
        }
    }
    if (req->state == FR_STREAM) {
        if (!req->paused && req->spill_len == 0) {
            fcgi_finish(req);
        }
        return;
    }
    if (!req->head_ready) {
        fcgi_api->log(MK_PLUGIN_LOG_ERROR, "fastcgi: %.*s: %s", (int) req->script.name_len,
                      req->script.name, req->head_len ? "incomplete header block" : "no output");
        fcgi_head_done(req, 502);
        return;
    }
    /* The answer is complete before the response started (the body may
       still be arriving: it is dropped): the connection is free now. */
    if (req->owed && req->r) {
        size_t owed = req->owed; /* let the rest of the body flow, to be dropped */
        req->owed = 0;
        fcgi_api->body_consume(req->r, owed);
    }
    struct fcgi_conn *c = req->conn;
    req->conn = NULL;
    fcgi_pool_release(c, !req->wdead && fcgi_parser_idle(&req->parser) && req->woff == req->wlen);
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
            fcgi_api->stream_commit(req->r, 0); /* unused: released */
        }
        return MK_OK;
    }
    int rc = fcgi_out(req, batch, len, in_buffer);
    if (rc == MK_OK) {
        return MK_OK;
    }
    ctx->outcome = FO_DONE;
    if (rc == FR_GONE) {
        fcgi_over(req); /* the client went away */
    }
    else {
        fcgi_fail(req, 502);
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
        fcgi_stderr(req, ev->data, ev->len);
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
    if (req->state == FR_STREAM) {
        /* a read holds at most FR_RECV bytes: its STDOUT fits the batch */
        memcpy(ctx->batch + ctx->batch_len, ev->data, ev->len);
        ctx->batch_len += ev->len;
        return MK_OK;
    }
    fcgi_stdout_head(req, ev->data, ev->len);
    if (req->fail) {
        ctx->outcome = FO_DONE; /* failed and answered (or to be) */
        return MK_ERR;
    }
    return MK_OK;
}

/* Read and parse once. */
static void fcgi_read(struct fcgi_req *req)
{
    if (!fcgi_rbuf && !(fcgi_rbuf = malloc(2 * FR_RECV))) {
        fcgi_fail(req, 502);
        return;
    }
    /* Before the response starts, what a read brings goes into the head
       buffer: FR_READ at a time; then FR_RECV. */
    uint8_t *buf = fcgi_rbuf;
    size_t cap = req->state == FR_STREAM ? FR_RECV : FR_READ;
    ssize_t n = recv(fcgi_conn_fd(req->conn), buf, cap, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return;
    }
    if (n <= 0 && fcgi_retry(req)) {
        return;
    }
    if (n <= 0) {
        fcgi_api->log(MK_PLUGIN_LOG_ERROR, "fastcgi: %.*s: the backend closed the connection",
                      (int) req->script.name_len, req->script.name);
        fcgi_fail(req, 502);
        return;
    }
    req->last_io_ms = fcgi_api->now_ms();
    req->heard = true;
    req->replay = false;
    struct fcgi_read_ctx ctx = {req, FO_GOING, fcgi_rbuf + FR_RECV, 0, false};
    if (req->state == FR_STREAM && MK_API_HAS(fcgi_api, stream_buffer)) {
        /* The STDOUT of this read is gathered straight into a piece of the
           client's queue, which takes it without another copy. */
        uint8_t *piece = fcgi_api->stream_buffer(req->r, (size_t) n);
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
        fcgi_api->log(MK_PLUGIN_LOG_ERROR, "fastcgi: %.*s: the backend broke the protocol",
                      (int) req->script.name_len, req->script.name);
        fcgi_fail(req, 502);
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
    req->last_io_ms = fcgi_api->now_ms();
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
                fcgi_api->log(MK_PLUGIN_LOG_ERROR, "fastcgi: %.*s: no backend is up",
                              (int) req->script.name_len, req->script.name);
                fcgi_fail(req, 502);
            }
            return;
        }
        fcgi_conn_connected(req->conn);
    }
    /* Read first: an answer that came before the backend stopped reading
       the body is complete, and must not be lost to a failed write. */
    if ((ready & (MK_LOOP_READ | MK_LOOP_ERROR)) && !req->paused) {
        fcgi_read(req); /* may free req */
        return;
    }
    if ((ready & MK_LOOP_WRITE) && fcgi_flush(req) != MK_OK && !fcgi_retry(req)) {
        /* The backend stopped reading: what it answered is read next, and
           the rest of the body is dropped; EOF without an answer is a 502. */
        req->woff = req->wlen = 0;
        req->wdead = true;
        if (req->owed && req->r) {
            size_t owed = req->owed;
            req->owed = 0;
            fcgi_api->body_consume(req->r, owed);
        }
    }
    fcgi_want(req);
}

static void fcgi_timer_cb(struct mk_loop_timer *t, void *arg)
{
    struct fcgi_req *req = arg;
    (void) t;
    uint64_t now = fcgi_api->now_ms();

    if (req->state == FR_QUEUED) {
        fcgi_api->timer_stop(req->timer);
        req->timer = NULL;
        fcgi_pool_unqueue(req);
        atomic_fetch_add_explicit(&req->self->queue_timeouts, 1, memory_order_relaxed);
        req->fail = 503;
        req->state = FR_RESUMING;
        fcgi_api->resume(req->susp, fcgi_resumed, req);
        return;
    }
    if (req->paused && req->state == FR_STREAM) {
        req->last_io_ms = now; /* the client is slow, not the backend */
        return;
    }
    if (req->state == FR_RESUMING || now - req->last_io_ms < req->site->conf->timeout_ms) {
        return;
    }
    fcgi_api->log(MK_PLUGIN_LOG_ERROR, "fastcgi: %.*s: no answer from the backend within Timeout",
                  (int) req->script.name_len, req->script.name);
    fcgi_api->timer_stop(req->timer);
    req->timer = NULL;
    fcgi_fail(req, 504);
}

/*
 * The server gave the suspended request up (its own Timeout, the client
 * gone, the server stopping): let go of the backend connection and the
 * timer now, not at this plugin's Timeout. A request still queued for a
 * connection is answered 503 (the backends are busy, not silent), one
 * waiting for its header block 504.
 */
static int fcgi_cancel(struct mk_suspended *s, int why, void *arg)
{
    struct fcgi_req *req = arg;
    bool queued = req->state == FR_QUEUED;

    (void) s;
    if (req->timer) {
        fcgi_api->timer_stop(req->timer);
        req->timer = NULL;
    }
    if (queued) {
        fcgi_pool_unqueue(req);
        if (why == MK_CANCEL_TIMEOUT) {
            atomic_fetch_add_explicit(&req->self->queue_timeouts, 1, memory_order_relaxed);
        }
    }
    else if (why == MK_CANCEL_TIMEOUT) {
        fcgi_api->log(MK_PLUGIN_LOG_ERROR,
                      "fastcgi: %.*s: no answer from the backend within the server's Timeout",
                      (int) req->script.name_len, req->script.name);
    }
    /* The backend is still at work on this request: its connection cannot be reused. */
    fcgi_drop_conn(req, why == MK_CANCEL_TIMEOUT && !queued ? 504 : 0);
    req->state = FR_RESUMING;
    fcgi_api->resume(req->susp, fcgi_resumed, req); /* with r NULL: fcgi_over */
    return queued ? 503 : 504;
}

/* Suspend r for req, to be told when the server gives it up: the handle, or NULL. */
static struct mk_suspended *fcgi_suspend(struct fcgi_req *req, struct mk_request *r)
{
    struct mk_suspended *s = fcgi_api->suspend(r);

    if (s && MK_API_HAS(fcgi_api, suspend_cancel)) {
        fcgi_api->suspend_cancel(s, fcgi_cancel, req);
    }
    return s;
}

/* ---- the request body ------------------------------------------------------------ */

/* The body is in: wait for the head, or answer. */
static int fcgi_body_end(struct fcgi_req *req, struct mk_request *r)
{
    req->body_done = true;
    if (req->fail || req->head_ready) {
        return fcgi_respond(req, r);
    }
    if (!(req->susp = fcgi_suspend(req, r))) {
        fcgi_drop_conn(req, 0);
        fcgi_over(req);
        return 500;
    }
    req->state = FR_HEAD;
    req->r = NULL;
    return MK_SUSPENDED;
}

static int fcgi_body_cb(struct mk_request *r, int event, const char *data, size_t len, void *arg)
{
    struct fcgi_req *req = arg;

    if (event == MK_BODY_ABORT) {
        fcgi_drop_conn(req, 0);
        fcgi_over(req);
        return MK_OK;
    }
    if (req->fail) {
        int status = req->fail;
        fcgi_over(req);
        return status;
    }
    if (req->ended || req->wdead) {
        /* the backend answered (or stopped reading) without the whole body: drop the rest */
        return event == MK_BODY_END ? fcgi_body_end(req, r) : MK_OK;
    }
    if (event == MK_BODY_END) {
        if (fcgi_append(req, FCGI_STDIN, NULL, 0) != MK_OK) {
            fcgi_drop_conn(req, 0);
            fcgi_over(req);
            return 500;
        }
        fcgi_want(req);
        return fcgi_body_end(req, r);
    }
    if (fcgi_append(req, FCGI_STDIN, data, len) != MK_OK) {
        fcgi_drop_conn(req, 0);
        fcgi_over(req);
        return 500;
    }
    req->last_io_ms = fcgi_api->now_ms(); /* a slow upload is the client's, not the backend's */
    req->owed += len;
    fcgi_want(req);
    return MK_AGAIN;
}

/* ---- starting -------------------------------------------------------------------- */

static bool fcgi_has_body(struct mk_request *r)
{
    return mk_gw_has_body(fcgi_api, r);
}

/* The request has its connection: send the head records, then the body. */
static int fcgi_req_begin_on(struct fcgi_req *req, struct mk_request *r)
{
    req->last_io_ms = fcgi_api->now_ms();
    struct fcgi_backend *b = fcgi_conn_backend(req->conn);
    req->tried |= UINT64_C(1) << (b - req->self->backends);
    atomic_fetch_add_explicit(&b->requests, 1, memory_order_relaxed);
    fcgi_conn_attach(req->conn, req);
    if (fcgi_write_begin(req, r) != MK_OK) {
        fcgi_drop_conn(req, 0);
        fcgi_over(req);
        return 500;
    }
    if (!req->timer) {
        uint32_t period = (uint32_t) (req->site->conf->timeout_ms / 4 + 1);
        req->timer = fcgi_api->timer_start(period, 1, fcgi_timer_cb, req);
    }
    if (req->spooled) {
        /* the body is whole: its STDIN records go as the connection takes them */
        if (fcgi_spool_refill(req) != MK_OK) {
            fcgi_drop_conn(req, 0);
            fcgi_over(req);
            return 500;
        }
        fcgi_flush_now(req);
        return fcgi_body_end(req, r);
    }
    if (req->has_body) {
        if (fcgi_api->body_stream(r, FCGI_WINDOW, fcgi_body_cb, req) != MK_OK) {
            fcgi_drop_conn(req, 0);
            fcgi_over(req);
            return 500;
        }
        req->state = FR_BODY;
        req->r = r;
        fcgi_flush_now(req);
        return MK_AGAIN;
    }
    if (fcgi_append(req, FCGI_STDIN, NULL, 0) != MK_OK) {
        fcgi_drop_conn(req, 0);
        fcgi_over(req);
        return 500;
    }
    fcgi_flush_now(req);
    return fcgi_body_end(req, r);
}

void fcgi_req_connected(struct fcgi_req *req, struct fcgi_conn *c)
{
    if (req->timer) {
        fcgi_api->timer_stop(req->timer); /* the queue's: the backend's starts with the request */
        req->timer = NULL;
    }
    if (!c) {
        req->tried |= UINT64_C(1) << req->slot; /* the continuation moves on (fcgi_resumed) */
    }
    req->conn = c;
    req->state = FR_RESUMING;
    fcgi_api->resume(req->susp, fcgi_resumed, req);
}

/* A connection for req, then the request on it: as the content hook returns. */
static int fcgi_req_acquire(struct fcgi_req *req, struct mk_request *r)
{
    const struct fcgi_site *site = req->site;
    int rc = fcgi_pool_acquire(req, site, &req->tried, &req->conn);
    if (rc == MK_OK) {
        return fcgi_req_begin_on(req, r);
    }
    if (rc != MK_AGAIN) {
        if (rc == 502) {
            atomic_fetch_add_explicit(&req->self->bad_gateway, 1, memory_order_relaxed);
            fcgi_api->log(MK_PLUGIN_LOG_ERROR, "fastcgi: %.*s: no backend is up",
                          (int) req->script.name_len, req->script.name);
        }
        fcgi_req_free(req);
        return rc;
    }
    req->state = FR_QUEUED;
    req->timer =
        fcgi_api->timer_start((uint32_t) site->conf->queue_timeout_ms, 1, fcgi_timer_cb, req);
    if (!(req->susp = fcgi_suspend(req, r)) || !req->timer) {
        if (req->susp) {
            fcgi_pool_unqueue(req);
            req->fail = 503;
            req->state = FR_RESUMING;
            fcgi_api->resume(req->susp, fcgi_resumed, req);
            return MK_SUSPENDED;
        }
        fcgi_pool_unqueue(req);
        fcgi_req_free(req);
        return 503;
    }
    return MK_SUSPENDED;
}

/* A body of unknown length arrives: keep it; send the request at its end. */
static int fcgi_spool_cb(struct mk_request *r, int event, const char *data, size_t len, void *arg)
{
    struct fcgi_req *req = arg;

    if (event == MK_BODY_ABORT) {
        fcgi_over(req);
        return MK_OK;
    }
    if (event == MK_BODY_DATA) {
        if (mk_gw_spool_add(&req->spool, data, len) != MK_OK) {
            fcgi_api->log(MK_PLUGIN_LOG_ERROR, "fastcgi: %.*s: cannot keep the request body: %s",
                          (int) req->script.name_len, req->script.name, strerror(errno));
            fcgi_over(req);
            return 500;
        }
        return MK_OK;
    }
    snprintf(req->content_length, sizeof(req->content_length), "%llu",
             (unsigned long long) req->spool.size);
    req->script.content_length = req->content_length;
    req->spooled = true;
    req->r = NULL;
    req->start_ms = fcgi_api->now_ms();
    return fcgi_req_acquire(req, r);
}

int fcgi_req_start(struct mk_request *r, const struct fcgi_site *site, const struct mk_gw_script *s)
{
    struct fcgi_req *req = malloc(sizeof(*req));
    if (!req) {
        return 503;
    }
    memset(req, 0, offsetof(struct fcgi_req, h)); /* h and log (5 KB) need no zeroes */
    req->self = fcgi_self();
    req->site = site;
    req->script = *s;
    mk_gw_log_init(&req->log, "fastcgi", s->name, s->name_len);
    req->has_body = fcgi_has_body(r);
    req->replay = true;
    req->start_ms = fcgi_api->now_ms();
    req->next = fcgi_reqs;
    if (fcgi_reqs) {
        fcgi_reqs->pprev = &req->next;
    }
    req->pprev = &fcgi_reqs;
    fcgi_reqs = req;
    atomic_fetch_add_explicit(&req->self->requests, 1, memory_order_relaxed);

    if (mk_gw_body_unsized(fcgi_api, r)) {
        /* Chunked, or HTTP/2 without content-length: php-fpm reads no body
           without CONTENT_LENGTH, so it is kept whole first (as nginx does). */
        if (fcgi_api->body_stream(r, FCGI_WINDOW, fcgi_spool_cb, req) != MK_OK) {
            fcgi_req_free(req);
            return 500;
        }
        req->state = FR_SPOOL;
        req->r = r;
        return MK_AGAIN;
    }
    return fcgi_req_acquire(req, r);
}

/* The continuation of a request whose job went with its worker. */
static int fcgi_resumed_orphan(struct mk_request *r, void *arg)
{
    (void) arg;
    return r ? 503 : MK_OK;
}

void fcgi_req_worker_exit(void)
{
    free(fcgi_rbuf);
    fcgi_rbuf = NULL;
    while (fcgi_reqs) {
        struct fcgi_req *req = fcgi_reqs;
        if ((req->state == FR_HEAD || req->state == FR_QUEUED) && req->susp) {
            fcgi_api->resume(req->susp, fcgi_resumed_orphan, NULL);
        }
        if (req->conn) {
            fcgi_pool_release(req->conn, false);
            req->conn = NULL;
        }
        if (req->state == FR_RESUMING) {
            /* its continuation is still to run (with r NULL, at the worker's
               teardown): release all but req itself, which it frees */
            struct fcgi_req *keep = req;
            if (req->timer) {
                fcgi_api->timer_stop(req->timer);
                req->timer = NULL;
            }
            *req->pprev = req->next;
            if (req->next) {
                req->next->pprev = req->pprev;
            }
            free(keep->wbuf);
            free(keep->head);
            free(keep->spill);
            keep->wbuf = NULL;
            keep->head = keep->spill = NULL;
            keep->orphan = true;
            continue;
        }
        fcgi_req_free(req);
    }
}
