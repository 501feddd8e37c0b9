/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * px_req.c: the proxy backend of the gateway job (gw_job.h), one request
 * on one upstream connection, and the keep-alive pool of each worker.
 *
 * acquire() picks a server (px_pick.c) and takes an idle connection of
 * this worker's pool or starts a new one (a connect refused at once moves
 * to the next server); begin() writes the request's head into a buffer of
 * its own: HTTP/1.1, its framing decided here (Content-Length: the
 * client's, or the spool's for a body whose length came at its end),
 * hop-by-hop fields dropped, Host, X-Forwarded-*, Forwarded and the
 * RequestHeader lines as the site's field settings say (by default Host
 * as the client sent it, X-Forwarded-For appended, X-Forwarded-Proto and
 * X-Forwarded-Host set). The body follows through the job's window. An
 * attempt that fails before any byte of the answer came (refused, closed,
 * reset, silent past ConnectTimeout or Timeout, a TLS handshake that
 * failed) takes the request to another server of the group, within Tries
 * and TryTimeout, when it can be sent again whole (nothing of it went
 * out, or an idempotent method without a body); a kept-alive connection
 * the upstream had closed takes a new connection to the same server. All
 * of it inside this file: the job sees one request.
 *
 * A server with a max= takes that many requests at once, all workers
 * together (its `active`, taken by compare-and-swap); a request that finds
 * every server it may go to full waits in its worker's queue (the job's
 * wait: QueueTimeout, 503), and a request that lets a place go wakes the
 * waiting requests of its worker and tells the other workers with some
 * (the `waiting` masks, api->worker_call).
 *
 * The response is read into rbuf, its head parsed strictly (px_http.c)
 * and given to the job as a status line and the end-to-end fields (with
 * the site's ResponseHeader lines and its Redirect, CookiePath and
 * CookieDomain rewriting, px_fields.c, applied), its body decoded
 * (Content-Length, chunked, or up to the close) and given to the job
 * piece by piece, read only while the job does not hold it back
 * (j->paused: the client's queue is at its mark), so that a slow client
 * slows the upstream and memory stays bounded (rbuf, the job's spill of
 * the same size, the client's queue). With Buffering on, the body goes on
 * being read while the job holds it back, into the request's buffer
 * (px_buf.c: memory, then a temporary file), up to its bounds; the
 * upstream's end then frees its connection at once, and the job's end
 * waits until the buffer went out to the client. A response that ended
 * cleanly on a connection that may be kept gives it back to the pool.
 *
 * Upgrades: an HTTP/1.1 client's `Connection: upgrade` and `Upgrade` (a
 * request without a body) go upstream; the upstream's 101 to such a
 * request (to any other: 502) becomes the client's 101 in the
 * continuation, which takes the client's connection over (api->takeover)
 * and joins it to the upstream connection as a tunnel (struct px_tun):
 * bytes pumped both ways with back-pressure each way, the proxy's Timeout
 * as its idle timeout, both closed when either closes. The connection of
 * a tunnel never goes back to the pool. An HTTP/2 extended CONNECT of
 * websocket (RFC 8441) goes upstream as the HTTP/1.1 handshake, with a
 * key of the proxy's whose accept the 101 must carry, and its stream is
 * taken over the same way (its answer a 200).
 *
 * Everything runs on the request's worker.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy.h"

/* A connection to a server, in a request's hands or idle in the pool. */
struct px_conn {
    int fd;
    unsigned slot;        /* self->servers[slot] */
    struct mk_loop_fd *h; /* one watch for the connection's life */
    uint32_t mask;        /* its interest now (fd_modify only on a change) */
    struct px_req *req;   /* the request it serves; NULL: idle in the pool */
    struct px_conn *next; /* the pool's list */
    uint64_t idle_since, idle_ms;
    bool reused;        /* it served a request before */
    void *ssl;          /* tls:// (px_tls.c): its SSL, made with the connection */
    bool hs;            /* the TLS handshake is not done yet */
    uint32_t hs_want;   /* what the handshake waits for: MK_LOOP_READ or _WRITE */
    struct px_tun *tun; /* the tunnel it carries after a 101; never back to the pool */
    int m_open;         /* its server's gauge of open connections (px_metrics.c) */
    struct px_idle_counts *idle_counts; /* its worker's, counted in while pooled */
    bool pooled;                        /* counted idle: in px_idle */
};

/*
 * A tunnel: the client's connection taken over after the upstream's 101
 * (api->takeover), and the upstream connection that answered it, bytes
 * pumped both ways. Each direction holds one source back while its
 * destination is full: the upstream is not read while takeover_write
 * says MK_AGAIN (until on_writable), and the client's input is held
 * (takeover_hold) while bytes of it wait for the upstream's socket. It
 * ends when either side closes or fails, or at the takeover's idle
 * timeout (the proxy's Timeout): on_close closes the upstream connection
 * and lets go of the server's place, which the tunnel holds as a request
 * does.
 */
struct px_tun {
    struct px_conn *c;
    struct mk_takeover *t; /* NULL until on_open */
    unsigned active;       /* slot + 1 whose `active` it holds, 0: none */
    char *early;           /* upstream bytes that came after the 101's head */
    size_t early_len;
    char *out; /* client bytes the upstream's socket has not taken yet */
    size_t out_len, out_off, out_cap;
    bool down_held; /* takeover_write said MK_AGAIN: the upstream is not read */
    bool up_done;   /* the upstream closed or failed: the client's side closes */
};

struct px_req {
    struct mk_gw_job j; /* first: the job */
    const struct px_site *site;
    const struct px_route *route;
    char *dto; /* Redirect default: the client's scheme://host and the route's prefix */
    struct px_rgroup *g;
    struct px_self *self;
    struct px_conn *c;
    int member;      /* of g, or -1 */
    unsigned active; /* slot + 1 whose `active` this request holds, 0: none */
    uint64_t tried;
    unsigned attempts; /* servers tried (Tries) */
    int reserved;      /* the member whose place px_wake took for it; -1: none */
    bool queued;       /* in this worker's queue, waiting for a server at its max */
    struct px_req *wnext;
    int failed_slot;   /* the server whose attempt failed and is retried; -1: none */
    uint64_t first_ms; /* the first attempt's start (TryTimeout) */
    bool idempotent;   /* GET, HEAD, OPTIONS, TRACE, PUT, DELETE */
    bool connecting, sent_any, head_in, done, head_request, req_out;
    bool body_ended; /* body_end() came: a spooled body may be read */
    bool chunked;    /* the body goes with the chunked coding (its length unknown) */
    bool in_io;      /* inside px_io: the interest is set once at its end */
    bool upgrade;    /* an HTTP/1.1 client asked for an upgrade: Upgrade goes upstream */
    bool tunnel;     /* the upstream's 101 came: the continuation takes the client over */
    char *up_proto;  /* then the 101's Upgrade value (NUL terminated) */
    bool ws_h2;      /* an HTTP/2 extended CONNECT of websocket (RFC 8441): an HTTP/1.1
                        WebSocket handshake upstream, with the proxy's own key */
#ifdef PX_TLS
    char ws_key[PX_WS_KEY_LEN + 1];
#endif
    bool in_body; /* inside px_body or px_buf_out: the job's want() only sets the interest */
    char *hdr;    /* the request's head */
    size_t hdr_len, hdr_off, hdr_cap;
    char *w; /* body bytes kept (MK_AGAIN) or read from the spool */
    size_t w_len, w_off;
    struct mk_loop_timer *ctimer; /* ConnectTimeout */
    struct px_chunked ch;
    uint64_t left; /* PX_BODY_LENGTH: bytes to come */
    size_t rlen;
    /* the time to first byte: from the attempt's first byte sent (sent_ms) to the
       answer's first byte (got_any: it came, its time counted) */
    uint64_t sent_ms;
    bool got_any;
    /* the client takes trailers (HTTP/2, or HTTP/1.1 with TE: trailers): a chunked
       answer's trailer section is kept (tkeep) and passed on (tout) */
    bool trailers_ok;
    char *tkeep, *tout;
    struct px_rbuf buf; /* Buffering on: what the client's queue did not take yet (px_buf.c) */
    /* not zeroed by mk_gw_job_new (px_backend.cleared): px_resp_parse fills resp
       (2 KiB) before anything reads it, and rbuf is read up to rlen */
    struct px_resp resp;
    char rbuf[PX_RBUF];
};

/* This worker's idle connections, and its timer that closes the old ones. */
static __thread struct px_conn *px_idle;
static __thread struct mk_loop_timer *px_idle_timer;
/* This worker's requests waiting for a server at its max, first come first. */
static __thread struct px_req *px_waitq;
static __thread unsigned px_waitq_n;
/* The head buffer of this worker's last request (at most PX_HDR_SPARE_MAX bytes), kept for
   the next one's (px_begin); freed, and no more kept, at the worker's exit. */
static __thread char *px_hdr_spare;
static __thread size_t px_hdr_spare_cap;
static __thread bool px_hdr_spare_off;
#define PX_HDR_SPARE_MAX 8192

/* Body bytes kept: the window, one more piece the server may deliver past it, framing. */
#define PX_WBUF (3 * PX_WINDOW)

static const struct mk_gw_backend px_backend;

static struct px_req *px_of(struct mk_gw_job *j)
{
    return (struct px_req *) j;
}

/* Server `slot` of self (the request's q->self, the group's g->self: no api->self per call). */
static struct px_server *px_srv(struct px_self *self, unsigned slot)
{
    return &self->servers[slot];
}

static void px_log(struct px_req *q, const char *what, int err)
{
    const char *addr = q->c             ? px_srv(q->self, q->c->slot)->a.text
                       : q->member >= 0 ? px_srv(q->self, q->g->slot[q->member])->a.text
                                        : "-";
    if (err) {
        mk_gw_job_log(&q->j, "%s: %s: %s", addr, what, strerror(err));
    }
    else {
        mk_gw_job_log(&q->j, "%s: %s", addr, what);
    }
}

/* ---- connections ------------------------------------------------------------- */

static void px_conn_close(struct px_conn *c)
{
    if (c->pooled) {
        px_metrics_idle(c->idle_counts, c->slot, -1);
    }
    px_api->metric_add(c->m_open, -1);
    if (c->h) {
        px_api->fd_unwatch(c->h);
    }
#ifdef PX_TLS
    if (c->ssl) {
        px_tls_free(c->ssl, !c->hs);
    }
#endif
    close(c->fd);
    free(c);
}

/* The connection's bytes: TLS or not, as send() and recv(). */
static ssize_t px_conn_send(struct px_conn *c, const void *p, size_t n)
{
#ifdef PX_TLS
    if (c->ssl) {
        return px_tls_send(c->ssl, p, n);
    }
#endif
    return send(c->fd, p, n, MSG_NOSIGNAL);
}

static ssize_t px_conn_recv(struct px_conn *c, void *p, size_t n)
{
#ifdef PX_TLS
    if (c->ssl) {
        return px_tls_recv(c->ssl, p, n);
    }
#endif
    return recv(c->fd, p, n, 0);
}

/* Decrypted bytes TLS holds for c: no event of the socket will tell of them. */
static bool px_conn_pending(const struct px_conn *c)
{
#ifdef PX_TLS
    return c->ssl && !c->hs && px_tls_pending(c->ssl);
#else
    (void) c;
    return false;
#endif
}

static void px_io(struct px_req *q, int fd, uint32_t ready);
static void px_tun_io(struct px_tun *u, uint32_t ready);

/* The interest of c: MK_OK, or MK_ERR (the watch failed). */
static int px_conn_mask(struct px_conn *c, uint32_t mask)
{
    if (c->mask == mask) {
        return MK_OK;
    }
    c->mask = mask;
    return px_api->fd_modify(c->h, mask);
}

static void px_idle_unlink(struct px_conn *c)
{
    for (struct px_conn **pp = &px_idle; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            return;
        }
    }
}

/*
 * An event of c: its request's, or, idle, the upstream closed it or sent
 * what nobody asked for: closed.
 */
static void px_conn_cb(struct mk_loop_fd *h, int fd, uint32_t ready, void *arg)
{
    struct px_conn *c = arg;
    (void) h;
    if (c->req) {
        px_io(c->req, fd, ready);
        return;
    }
    if (c->tun) {
        px_tun_io(c->tun, ready);
        return;
    }
    px_idle_unlink(c);
    px_conn_close(c);
}

static void px_idle_sweep(struct mk_loop_timer *t, void *arg)
{
    uint64_t now = px_api->now_ms();
    (void) arg;
    for (struct px_conn **pp = &px_idle; *pp;) {
        struct px_conn *c = *pp;
        if (now - c->idle_since >= c->idle_ms) {
            *pp = c->next;
            px_conn_close(c);
        }
        else {
            pp = &c->next;
        }
    }
    if (!px_idle) {
        px_api->timer_stop(t);
        px_idle_timer = NULL;
    }
}

/* Give c back: kept in the pool (within KeepAlive per server), else closed. */
static void px_conn_release(struct px_conn *c, bool keep, const struct px_conf *conf)
{
    unsigned n = 0;
    for (struct px_conn *i = px_idle; i && keep; i = i->next) {
        n += i->slot == c->slot;
    }
    c->req = NULL;
    if (!keep || n >= (unsigned) conf->idle_max || px_conn_mask(c, MK_LOOP_READ) != MK_OK) {
        px_conn_close(c);
        return;
    }
    c->reused = true;
    c->pooled = true;
    px_metrics_idle(c->idle_counts, c->slot, 1);
    c->idle_since = px_api->now_ms();
    c->idle_ms = conf->idle_ms;
    c->next = px_idle;
    px_idle = c;
    if (!px_idle_timer) {
        uint32_t period = (uint32_t) (conf->idle_ms / 2 + 1);
        px_idle_timer = px_api->timer_start(period, 1, px_idle_sweep, NULL);
    }
}

/*
 * An idle connection to slot, or NULL. One the upstream closed, or wrote
 * to unasked (bytes after a response: never read as the next one's), is
 * closed here even when its event has not been handled yet.
 */
static struct px_conn *px_conn_take(unsigned slot)
{
    uint64_t now = px_api->now_ms();
    for (struct px_conn **pp = &px_idle; *pp;) {
        struct px_conn *c = *pp;
        if (c->slot != slot || now - c->idle_since >= c->idle_ms) {
            pp = &c->next;
            continue;
        }
        *pp = c->next;
        char b;
        if (px_conn_pending(c) || recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0 ||
            errno != EAGAIN) {
            px_conn_close(c);
            continue;
        }
        c->pooled = false;
        px_metrics_idle(c->idle_counts, c->slot, -1);
        return c;
    }
    return NULL;
}

/* A new connection to slot, connecting (a tls:// one with its SSL, over conf's context): c, or NULL
 * with errno. */
static struct px_conn *px_conn_open(struct px_self *self, unsigned slot, const struct px_conf *conf,
                                    bool *connecting)
{
    const struct px_server *s = px_srv(self, slot);
    int fd = socket(s->a.sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return NULL;
    }
    if (s->a.sa.ss_family != AF_UNIX) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    int rc = connect(fd, (const struct sockaddr *) &s->a.sa, s->a.len);
    if (rc != 0 && errno != EINPROGRESS && errno != EAGAIN) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    struct px_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    c->fd = fd;
    c->slot = slot;
#ifdef PX_TLS
    if (s->a.tls) {
        if (!conf->tls_ctx || !(c->ssl = px_tls_new(conf->tls_ctx, fd, &s->a, slot))) {
            close(fd);
            free(c);
            errno = ENOMEM;
            return NULL;
        }
        c->hs = true;
        c->hs_want = MK_LOOP_WRITE;
    }
#else
    (void) conf;
#endif
    *connecting = rc != 0;
    atomic_fetch_add_explicit(&px_srv(self, slot)->connects, 1, memory_order_relaxed);
    c->m_open = s->m_open;
    c->idle_counts = px_metrics_idle_counts();
    px_api->metric_add(c->m_open, 1);
    return c;
}

/* ---- the request's connection ------------------------------------------------ */

/* The attempt of q on server slot failed by `kind`: counted, and the server's passive health. */
static void px_failed(struct px_req *q, unsigned slot, enum px_fail kind)
{
    if (q->member >= 0) {
        px_api->metric_add(q->g->ms[q->member]->fail[kind], 1);
    }
    px_server_failed(px_srv(q->self, slot), q->site->conf);
}

static void px_ctimer_stop(struct px_req *q)
{
    if (q->ctimer) {
        px_api->timer_stop(q->ctimer);
        q->ctimer = NULL;
    }
}

/* ---- places on servers with a max=, and the queue ---------------------------------- */

/* Take a place on slot, whose limit is max (0: none): false when it is full. */
static bool px_take(struct px_self *self, unsigned slot, unsigned max)
{
    atomic_uint *a = &px_srv(self, slot)->active;
    unsigned n = atomic_load_explicit(a, memory_order_relaxed);
    do {
        if (max && n >= max) {
            return false;
        }
    } while (!atomic_compare_exchange_weak_explicit(a, &n, n + 1, memory_order_relaxed,
                                                    memory_order_relaxed));
    return true;
}

/* Whether a request of this worker's queue may take a place on slot. */
static bool px_waiting_for(unsigned slot)
{
    for (const struct px_req *w = px_waitq; w; w = w->wnext) {
        for (unsigned i = 0; i < w->g->n; i++) {
            if (w->g->slot[i] == slot && w->g->max[i]) {
                return true;
            }
        }
    }
    return false;
}

/* This worker's bit in the `waiting` masks of g's limited servers, as its queue says. */
static void px_mask_refresh(struct px_self *self, const struct px_rgroup *g)
{
    int w = px_api->worker_id();
    if (w < 0 || w >= PX_WORKERS_MAX) {
        return;
    }
    uint_fast64_t bit = (uint_fast64_t) 1 << (w % 64);
    for (unsigned i = 0; i < g->n; i++) {
        if (!g->max[i]) {
            continue;
        }
        struct px_server *s = px_srv(self, g->slot[i]);
        atomic_uint_fast64_t *mask = &s->waiting[w / 64];
        /* only this worker writes its bit; the count is raised before the bit is set
           and lowered after it is cleared, so that it is never below the bits set */
        bool had = atomic_load(mask) & bit;
        bool wants = px_waiting_for(g->slot[i]);
        if (wants && !had) {
            atomic_fetch_add(&s->waiting_n, 1);
            atomic_fetch_or(mask, bit);
        }
        else if (!wants && had) {
            atomic_fetch_and(mask, ~bit);
            atomic_fetch_sub(&s->waiting_n, 1);
        }
    }
}

/* Into this worker's queue: MK_AGAIN (the job waits, QueueTimeout), or 503 when it is full. */
static int px_enqueue(struct px_req *q)
{
    if (px_waitq_n >= (unsigned) q->site->conf->queue) {
        atomic_fetch_add_explicit(&q->self->queue_full, 1, memory_order_relaxed);
        mk_gw_job_log(&q->j, "every server of the group is at its max, and the queue is full");
        return 503;
    }
    struct px_req **pp = &px_waitq;
    while (*pp) {
        pp = &(*pp)->wnext;
    }
    q->wnext = NULL;
    *pp = q;
    q->queued = true;
    px_waitq_n++;
    px_mask_refresh(q->self, q->g);
    return MK_AGAIN;
}

static void px_unqueue(struct px_req *q)
{
    if (!q->queued) {
        return;
    }
    for (struct px_req **pp = &px_waitq; *pp; pp = &(*pp)->wnext) {
        if (*pp == q) {
            *pp = q->wnext;
            break;
        }
    }
    q->queued = false;
    px_waitq_n--;
    px_mask_refresh(q->self, q->g);
}

/*
 * Room may have come on a server: each request of this worker's queue
 * whose group has a member with room now takes the place and goes on
 * (its continuation connects there: px_connect), and so does one whose
 * group has no server up any more (to its 502).
 */
static void px_wake(void)
{
    for (struct px_req **pp = &px_waitq; *pp;) {
        struct px_req *q = *pp;
        bool full;
        int m = px_pick(q->g, NULL, q->tried, &full);
        if (m >= 0 && !px_take(q->self, q->g->slot[m], q->g->max[m])) {
            m = -1;
            full = true;
        }
        if (m < 0 && full) {
            pp = &q->wnext;
            continue;
        }
        *pp = q->wnext;
        q->queued = false;
        px_waitq_n--;
        q->reserved = m;
        q->active = m >= 0 ? q->g->slot[m] + 1 : 0;
        px_mask_refresh(q->self, q->g);
        mk_gw_job_ready(&q->j);
    }
}

static void px_wake_cb(void *arg)
{
    (void) arg;
    px_wake();
}

/*
 * Let go of a place on a server (`active`: its slot + 1, 0: none): a
 * request waiting for one (on this worker, or another: api->worker_call)
 * may take it.
 */
static void px_let_go_place(struct px_self *self, unsigned active)
{
    if (!active) {
        return;
    }
    struct px_server *s = px_srv(self, active - 1);
    atomic_fetch_sub_explicit(&s->active, 1, memory_order_relaxed);
    if (atomic_load_explicit(&s->waiting_n, memory_order_relaxed) == 0) {
        return; /* no worker waits for room on it */
    }
    int me = px_api->worker_id();
    for (int word = 0; word < PX_WORKER_WORDS; word++) {
        uint_fast64_t bits = atomic_load_explicit(&s->waiting[word], memory_order_relaxed);
        while (bits) {
            int w = word * 64 + __builtin_ctzll(bits);
            bits &= bits - 1;
            if (w == me) {
                px_wake();
            }
            else {
                px_api->worker_call(w, px_wake_cb, NULL);
            }
        }
    }
}

/* Let go of the place the request holds, if any. */
static void px_let_go(struct px_req *q)
{
    unsigned active = q->active;
    q->active = 0;
    px_let_go_place(q->self, active);
}

/* Let go of the request's connection: to the pool when keep, else closed. */
static void px_drop_conn(struct px_req *q, bool keep)
{
    px_ctimer_stop(q);
    q->j.reads_paused = false; /* nothing more is read: a slow client is the client's */
    if (q->c) {
        px_conn_release(q->c, keep, q->site->conf);
        q->c = NULL;
    }
}

static void px_ctimer_cb(struct mk_loop_timer *t, void *arg);

/*
 * Whether the answer is to be read now: the job does not hold it back, or
 * it does but the response buffer has room (Buffering on, the body
 * streaming).
 */
static bool px_reading(const struct px_req *q)
{
    return !q->j.paused || (q->j.state == MK_GW_STREAM && px_rbuf_room(&q->buf) > 0);
}

/* The first n bytes of rbuf are used: what follows them moves to its start. */
static void px_read_drop(struct px_req *q, size_t n)
{
    memmove(q->rbuf, q->rbuf + n, q->rlen - n);
    q->rlen -= n;
}

/* The request bytes already sent (w_off) leave w: what waits moves to its start. */
static void px_w_compact(struct px_req *q)
{
    if (q->w_off > 0) {
        memmove(q->w, q->w + q->w_off, q->w_len - q->w_off);
        q->w_len -= q->w_off;
        q->w_off = 0;
    }
}

/* The interest of the connection: write while bytes wait, read unless held back. */
static void px_want(struct px_req *q)
{
    if (!q->c) {
        return;
    }
    uint32_t mask = 0;
    if (!q->connecting && q->c->hs) {
        mask = q->c->hs_want;
    }
    else if (q->connecting || q->hdr_off < q->hdr_len || q->w_off < q->w_len) {
        mask |= MK_LOOP_WRITE;
    }
    if (!q->connecting && !q->c->hs && px_reading(q) && !q->done && !q->tunnel) {
        mask |= MK_LOOP_READ;
    }
    /* read into the response buffer while the client is slow: the upstream's silence counts */
    q->j.reads_paused = q->j.paused && (mask & MK_LOOP_READ);
    if (!q->in_io) {
        px_conn_mask(q->c, mask);
    }
}

/*
 * Whether the request can be sent again whole: nothing of it went out, or
 * an idempotent method without a body (a body streams through the window
 * and is not kept: once any of it was sent, it cannot be replayed).
 */
static bool px_replayable(const struct px_req *q)
{
    return !q->sent_any || (q->idempotent && !q->j.has_body);
}

/*
 * Whether a failed attempt may be followed by another: no byte of the
 * answer came, the request is replayable, and Tries and TryTimeout allow
 * one more.
 */
static bool px_may_retry(const struct px_req *q)
{
    const struct px_conf *conf = q->site->conf;
    if (q->head_in || q->rlen > 0 || !px_replayable(q) || q->attempts >= (unsigned) conf->tries) {
        return false;
    }
    return conf->try_ms == 0 || px_api->now_ms() - q->first_ms < conf->try_ms;
}

/*
 * Connect the request to a server of its group, skipping those tried: an
 * idle connection first, else a new one (refused at once: the server's
 * failure, then the next while px_may_retry allows). MK_OK; 503 when
 * memory or descriptors are short; 502 when no server is up or the last
 * connect was refused; `status` (the failure of the attempt before) when
 * no other server is left to try.
 */
static int px_connect(struct px_req *q, struct mk_request *r, int status)
{
    const struct px_conf *conf = q->site->conf;
    uint64_t lost = 0; /* members whose last place another request took first */
    for (;;) {
        bool full = false;
        int m = q->reserved;
        if (m >= 0) {
            q->reserved = -1; /* its place is held already (px_wake) */
        }
        else if ((m = px_pick(q->g, r, q->tried | lost, &full)) >= 0) {
            if (!px_take(q->self, q->g->slot[m], q->g->max[m])) {
                lost |= (uint64_t) 1 << m;
                continue;
            }
            px_let_go(q); /* the place of the attempt before */
            q->active = q->g->slot[m] + 1;
        }
        else {
            q->member = -1;
            px_let_go(q);
            if (full && q->attempts == 0) {
                /* the first attempt waits, once: after the wait, room or 503 */
                return q->j.waited ? 503 : px_enqueue(q);
            }
            if (q->attempts == 0) {
                mk_gw_job_log(&q->j, "no server of the group is up");
                return 502;
            }
            mk_gw_job_log(&q->j, "no other server of the group to try (%u tried%s)", q->attempts,
                          full ? ", the others at their max" : "");
            return status;
        }
        if (q->failed_slot >= 0) {
            /* the request goes on: a retry of the failed server's */
            atomic_fetch_add_explicit(&q->self->retries, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&px_srv(q->self, (unsigned) q->failed_slot)->retries, 1,
                                      memory_order_relaxed);
            q->failed_slot = -1;
        }
        q->member = m;
        q->tried |= (uint64_t) 1 << m;
        if (q->attempts++ == 0) {
            q->first_ms = px_api->now_ms();
        }
        unsigned slot = q->g->slot[m];
        px_api->metric_add(q->g->ms[m]->requests, 1); /* an attempt, whatever comes of it */
        struct px_conn *c = px_conn_take(slot);
        if (c) {
            atomic_fetch_add_explicit(&px_srv(q->self, slot)->reuses, 1, memory_order_relaxed);
            q->connecting = false;
        }
        else if (!(c = px_conn_open(q->self, slot, conf, &q->connecting))) {
            int e = errno;
            px_log(q, "connect", e);
            px_let_go(q);
            if (e == ENOMEM || e == EMFILE || e == ENFILE) {
                return 503;
            }
            px_failed(q, slot, PX_FAIL_CONNECT);
            if (!px_may_retry(q)) {
                return 502;
            }
            q->failed_slot = (int) slot;
            status = 502;
            continue;
        }
        if (!c->h && !(c->h = px_api->fd_watch(c->fd, 0, px_conn_cb, c))) {
            px_conn_close(c);
            px_let_go(q);
            return 503;
        }
        c->req = q;
        q->c = c;
        if (q->connecting || c->hs) {
            q->ctimer = px_api->timer_start((uint32_t) conf->connect_ms, 0, px_ctimer_cb, q);
        }
        q->j.last_io_ms = px_api->now_ms();
        px_want(q);
        return MK_OK;
    }
}

/*
 * The attempt on q->c failed before any byte of the answer: the request
 * again, from its first byte, on a new connection to the same server
 * (`fresh`: a kept-alive connection the upstream had closed, not counted
 * in Tries), or on another server. MK_OK, or the status to fail with
 * (`status`: the failed attempt's, when no other server is left).
 */
static int px_again(struct px_req *q, bool fresh, int status)
{
    unsigned slot = q->c->slot;
    px_drop_conn(q, false);
    q->hdr_off = 0;
    q->sent_any = false;
    q->req_out = false;
    q->j.last_io_ms = px_api->now_ms();
    if (!fresh) {
        q->failed_slot = (int) slot;
        return px_connect(q, NULL, status);
    }
    atomic_fetch_add_explicit(&q->self->retries, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&px_srv(q->self, slot)->retries, 1, memory_order_relaxed);
    px_api->metric_add(q->g->ms[q->member]->requests, 1);
    bool connecting;
    struct px_conn *c = px_conn_open(q->self, slot, q->site->conf, &connecting);
    if (c && (c->h = px_api->fd_watch(c->fd, 0, px_conn_cb, c))) {
        c->req = q;
        q->c = c;
        q->connecting = connecting;
        if (connecting || c->hs) {
            q->ctimer =
                px_api->timer_start((uint32_t) q->site->conf->connect_ms, 0, px_ctimer_cb, q);
        }
        px_want(q);
        return MK_OK;
    }
    if (c) {
        px_conn_close(c);
    }
    return status;
}

/* px_again, or the request failed with what it returns: false then. */
static bool px_retry(struct px_req *q, bool fresh, int status)
{
    int rc = px_again(q, fresh, status);
    if (rc != MK_OK) {
        mk_gw_job_fail(&q->j, rc);
        return false;
    }
    return true;
}

/*
 * The attempt on q->c failed before the answer's head (`what` and `err`
 * for the log; `status`, 502 or 504, the answer when no attempt follows):
 * the server's failure counted, then another server when px_may_retry
 * allows, else the request failed. false when it failed.
 */
static bool px_attempt_failed(struct px_req *q, const char *what, int err, int status,
                              enum px_fail kind)
{
    px_log(q, what, err);
    px_failed(q, q->c->slot, kind);
    if (!px_may_retry(q)) {
        mk_gw_job_fail(&q->j, status);
        return false;
    }
    return px_retry(q, false, status);
}

/*
 * Writing the request failed (errno e) before the answer's head: a kept
 * connection the upstream had closed takes a new one, else the attempt
 * failed. false when the request failed.
 */
static bool px_send_failed(struct px_req *q, int e)
{
    if (q->c->reused && px_replayable(q)) {
        return px_retry(q, true, 502);
    }
    return px_attempt_failed(q, "sending the request", e, 502, PX_FAIL_RESET);
}

static void px_ctimer_cb(struct mk_loop_timer *t, void *arg)
{
    struct px_req *q = arg;
    (void) t;
    q->ctimer = NULL; /* a one-shot timer is freed when this returns */
    px_attempt_failed(q, "no connection within ConnectTimeout", 0, 504, PX_FAIL_CONNECT);
}

/* ---- writing ------------------------------------------------------------------- */

/*
 * Write what waits: the head, then the body's bytes, then the next piece
 * of a spooled body. MK_OK (all out, or the socket is full: px_want), or
 * MK_ERR with errno.
 */
static int px_flush(struct px_req *q)
{
    for (;;) {
        const char *p;
        size_t n;
        if (q->hdr_off < q->hdr_len) {
            p = q->hdr + q->hdr_off;
            n = q->hdr_len - q->hdr_off;
        }
        else if (q->w_off < q->w_len) {
            p = q->w + q->w_off;
            n = q->w_len - q->w_off;
        }
        else {
            if (q->w_len) {
                q->w_len = q->w_off = 0;
                mk_gw_job_body_drained(&q->j);
            }
            if (!q->j.spooled || !q->body_ended || mk_gw_spool_left(&q->j.spool) == 0) {
                q->req_out = q->body_ended || !q->j.has_body;
                return MK_OK;
            }
            if (!q->w && !(q->w = malloc(PX_WBUF))) {
                errno = ENOMEM;
                return MK_ERR;
            }
            ssize_t got = mk_gw_spool_read(&q->j.spool, q->w, PX_WINDOW);
            if (got <= 0) {
                if (got == 0) {
                    errno = EIO;
                }
                return MK_ERR;
            }
            q->w_len = (size_t) got;
            q->w_off = 0;
            continue;
        }
        ssize_t k = px_conn_send(q->c, p, n);
        if (k < 0) {
            return errno == EAGAIN || errno == EINTR ? MK_OK : MK_ERR;
        }
        q->j.last_io_ms = px_api->now_ms();
        if (!q->sent_any) {
            q->sent_ms = q->j.last_io_ms;
        }
        q->sent_any = true;
        if (q->hdr_off < q->hdr_len) {
            q->hdr_off += (size_t) k;
        }
        else {
            q->w_off += (size_t) k;
        }
    }
}

/* ---- reading --------------------------------------------------------------------- */

/* The response ended cleanly: the connection to the pool (or closed), the job told. */
static void px_finish(struct px_req *q)
{
    bool keep = !q->resp.close && q->rlen == 0 && q->req_out && q->hdr_off == q->hdr_len &&
                !px_conn_pending(q->c);
    q->done = true;
    q->in_body = false; /* q may outlive px_body now: its buffer goes out from want() */
    px_server_ok(px_srv(q->self, q->c->slot));
    px_drop_conn(q, keep);
    px_let_go(q);
    if (q->tkeep && q->ch.done && !q->ch.keep_over && q->ch.keep_len > 0 &&
        (q->tout = malloc(PX_TRAILER_KEEP + 1)) &&
        px_trailers_filter(q->tkeep, q->ch.keep_len, q->tout, PX_TRAILER_KEEP + 1) > 0) {
        q->j.trailers = q->tout;
    }
    if (!px_rbuf_empty(&q->buf)) {
        q->j.ended_ms = px_api->now_ms(); /* the upstream's time ends here, not the client's */
        mk_gw_job_upstream(&q->j, NULL, false);
        return; /* the job ends once the buffer is out (px_buf_out) */
    }
    mk_gw_job_end(&q->j); /* may free q */
}

/* The RequestHeader or ResponseHeader line that sets or removes `name` (not an add), or NULL. */
static const struct px_hdr_op *px_op_of(const struct px_hdr_op *ops, size_t n, const char *name,
                                        size_t len)
{
    for (size_t i = 0; i < n; i++) {
        if (ops[i].verb != PX_HDR_ADD && ops[i].name_len == len &&
            strncasecmp(ops[i].name, name, len) == 0) {
            return &ops[i];
        }
    }
    return NULL;
}

enum px_rewrite { PX_RW_NONE, PX_RW_LOCATION, PX_RW_REFRESH, PX_RW_COOKIE };

/*
 * The Redirect maps of q's answer into m (room for 2 * PX_MAPS_MAX), in
 * file order, `Redirect default` as the answering server's
 * http://HOST:PORT (and http://NAME of `Host NAME`) with the route's
 * prefix, to the client's scheme://host with it (q->dto, made by begin).
 * text: room for the default's from texts. Returns the maps' count.
 */
static size_t px_redirect_maps(const struct px_req *q, struct px_map *m, char *text,
                               size_t text_len)
{
    const struct px_fields_conf *fc = &q->site->sc->fields;
    const struct px_route *rt = q->route;
    const char *prefix = rt->prefix ? rt->prefix : "/";
    int plen = rt->prefix ? (int) rt->prefix_len : 1;
    size_t n = 0, used = 0;

    for (size_t i = 0; i < fc->n_redirect; i++) {
        if (fc->redirect[i].from) {
            m[n++] = fc->redirect[i];
            continue;
        }
        const char *hosts[2] = {px_srv(q->self, q->c->slot)->a.text, fc->host};
        for (int h = 0; h < 2 && q->dto; h++) {
            if (!hosts[h] || strncmp(hosts[h], "unix:", 5) == 0) {
                continue;
            }
            int k = snprintf(text + used, text_len - used, "http://%s%.*s", hosts[h], plen, prefix);
            if (k < 0 || (size_t) k >= text_len - used) {
                continue;
            }
            m[n++] = (struct px_map){text + used, q->dto, (size_t) k, strlen(q->dto)};
            used += (size_t) k + 1;
        }
    }
    return n;
}

/*
 * One field of the answer into the job's head (j->h, mk_gw_head_field),
 * its bytes in the head buffer (name, then value), its value rewritten as
 * `rw` says. MK_OK, or MK_ERR (the job failed: no memory, the head does
 * not fit, or the field is one the head refuses, 502).
 */
static int px_head_field(struct px_req *q, const char *name, size_t nlen, const char *v,
                         size_t vlen, enum px_rewrite rw, const struct px_map *redir, size_t nr)
{
    const struct px_fields_conf *fc = &q->site->sc->fields;
    size_t room;
    char *dst = mk_gw_job_head_room(&q->j, &room);
    if (!dst) {
        return MK_ERR;
    }
    if (nlen > room) {
        goto too_large;
    }
    memcpy(dst, name, nlen);
    char *out = dst + nlen;
    size_t cap = room - nlen;
    long k;
    switch (rw) {
    case PX_RW_LOCATION:
        k = px_location_rewrite(v, vlen, redir, nr, out, cap);
        break;
    case PX_RW_REFRESH:
        k = px_refresh_rewrite(v, vlen, redir, nr, out, cap);
        break;
    case PX_RW_COOKIE:
        k = px_cookie_rewrite(v, vlen, fc->cpath, fc->n_cpath, fc->cdomain, fc->n_cdomain, out,
                              cap);
        break;
    default:
        k = vlen <= cap ? (long) vlen : -1;
        if (k >= 0) {
            memcpy(out, v, vlen);
        }
    }
    if (k < 0) {
        goto too_large;
    }
    /* values are trimmed and free of control bytes: the upstream's (px_resp_parse), the
       configuration's (px_fconf.c), and the rewrites of both */
    struct mk_gw_slice n = {dst, nlen}, val = {out, (size_t) k};
    while (val.len && (val.p[0] == ' ' || val.p[0] == '\t')) {
        val.p++;
        val.len--;
    }
    while (val.len && (val.p[val.len - 1] == ' ' || val.p[val.len - 1] == '\t')) {
        val.len--;
    }
    q->j.head_len += nlen + (size_t) k;
    if (mk_gw_head_field(&q->j.h, n, val) != MK_OK) {
        px_log(q, q->j.h.why, 0);
        mk_gw_job_fail(&q->j, 502);
        return MK_ERR;
    }
    return MK_OK;
too_large:
    px_log(q, "the response head is too large", 0);
    mk_gw_job_fail(&q->j, 502);
    return MK_ERR;
}

static bool px_named(const char *name, size_t len, const char *lit)
{
    /* the first letter before the call: most names that differ differ there */
    return len == strlen(lit) && (len == 0 || (name[0] | 0x20) == (lit[0] | 0x20)) &&
           strncasecmp(name, lit, len) == 0;
}

/* Whether the method m[0, len) is lit, byte for byte. */
static inline bool px_method_is(const char *m, size_t len, const char *lit)
{
    return len == strlen(lit) && memcmp(m, lit, len) == 0;
}

/*
 * Give the job the head, parsed (j->h, mk_gw_job_head_given: the job
 * parses no text): the status and the end-to-end fields (hop-by-hop ones
 * and those the upstream's Connection names dropped), with the site's
 * ResponseHeader lines and its Redirect, CookiePath and CookieDomain
 * rewriting applied. MK_OK, or MK_ERR (the job failed).
 */
static int px_give_head(struct px_req *q)
{
    const struct px_resp *p = &q->resp;
    const struct px_fields_conf *fc = &q->site->sc->fields;
    struct px_map redir[2 * PX_MAPS_MAX];
    char text[2 * PX_MAPS_MAX * 64];
    size_t nr = fc->n_redirect ? px_redirect_maps(q, redir, text, sizeof(text)) : 0;
    struct mk_gw_head *h = &q->j.h;
    /* The upstream's Content-Length goes on when it frames the body, or
       answers a HEAD: the client is told what the upstream said. */
    if (!q->tunnel && p->has_length && p->status != 204 && p->status != 304 &&
        (p->framing == PX_BODY_LENGTH || q->head_request)) {
        q->j.length_is = MK_GW_LENGTH_KNOWN;
        q->j.length = p->length;
    }
    else if (q->head_request && !q->tunnel) {
        q->j.length_is = MK_GW_LENGTH_UNKNOWN;
    }
    /* the scalars only, as mk_gw_head_parse does: fields[] is written up to n_fields */
    memset(h, 0, offsetof(struct mk_gw_head, fields));
    h->n_fields = 0;
    h->why = NULL;
    /* A 101's head is the tunnel's (px_tun_start), whose takeover makes the 101 itself
       (HTTP/2: the stream's 200): the status put on the response before it is 200. */
    h->status = q->tunnel ? 200 : p->status;
    size_t room;
    if (!mk_gw_job_head_room(&q->j, &room)) {
        return MK_ERR; /* the buffer, made even for a head without a field */
    }
    for (unsigned i = 0; i < p->n_fields && !q->j.fail; i++) {
        const struct px_field *f = &p->fields[i];
        const char *fn = f->name.p;
        size_t fl = f->name.len;
        unsigned kind = p->kind[i]; /* the parser's reading of the name */
        /* hop-by-hop (px_hop_by_hop), and the framing and status the server writes */
        if (kind == PX_K_HOP || kind == PX_K_CONNECTION || kind == PX_K_TRANSFER ||
            kind == PX_K_LENGTH || kind == PX_K_STATUS ||
            (p->has_connection && px_resp_conn_names(p, fn, fl)) ||
            (q->ws_h2 && px_named(fn, fl, "sec-websocket-accept")) ||
            px_op_of(fc->resp, fc->n_resp, fn, fl)) {
            continue;
        }
        enum px_rewrite rw = PX_RW_NONE;
        if (nr && kind == PX_K_LOCATION) {
            rw = PX_RW_LOCATION;
        }
        else if (nr && kind == PX_K_REFRESH) {
            rw = PX_RW_REFRESH;
        }
        else if ((fc->n_cpath || fc->n_cdomain) && kind == PX_K_SET_COOKIE) {
            rw = PX_RW_COOKIE;
        }
        if (px_head_field(q, fn, fl, f->value.p, f->value.len, rw, redir, nr) != MK_OK) {
            return MK_ERR;
        }
    }
    for (size_t i = 0; i < fc->n_resp && !q->j.fail; i++) {
        const struct px_hdr_op *o = &fc->resp[i];
        if (o->verb != PX_HDR_REMOVE && px_head_field(q, o->name, o->name_len, o->value,
                                                      o->value_len, PX_RW_NONE, NULL, 0) != MK_OK) {
            return MK_ERR;
        }
    }
    if (q->j.fail) {
        return MK_ERR;
    }
    h->head_len = q->j.head_len;
    mk_gw_job_head_given(&q->j);
    return q->j.fail || !q->j.head_ready ? MK_ERR : MK_OK;
}

/* The next run of body bytes in rbuf: its start and length; consumed bytes into *used. */
static int px_body_run(struct px_req *q, const char **data, size_t *dlen, size_t *used)
{
    if (q->resp.framing == PX_BODY_CHUNKED) {
        const char *why;
        long k = px_chunked_step(&q->ch, q->rbuf, q->rlen, data, dlen, &why);
        if (k < 0) {
            px_log(q, why, 0);
            return MK_ERR;
        }
        *used = (size_t) k;
        return MK_OK;
    }
    size_t n = q->rlen;
    if (q->resp.framing == PX_BODY_LENGTH && n > q->left) {
        n = (size_t) q->left;
    }
    *data = q->rbuf;
    *dlen = n;
    *used = n;
    q->left -= q->resp.framing == PX_BODY_LENGTH ? n : 0;
    return MK_OK;
}

static bool px_body_over(const struct px_req *q)
{
    switch (q->resp.framing) {
    case PX_BODY_NONE:
        return true;
    case PX_BODY_LENGTH:
        return q->left == 0;
    case PX_BODY_CHUNKED:
        return q->ch.done;
    default:
        return false;
    }
}

/* Of the run px_body_run gave, the last n bytes were not taken: they are read again later. */
static void px_body_unread(struct px_req *q, size_t n, size_t *used)
{
    if (q->resp.framing == PX_BODY_CHUNKED) {
        px_chunked_unread(&q->ch, n);
    }
    else if (q->resp.framing == PX_BODY_LENGTH) {
        q->left += n;
    }
    *used -= n;
}

/*
 * A run of the body into the response buffer, where it goes while the
 * job holds the answer back or the buffer holds bytes before it: how many
 * bytes it took (what did not fit is left to the caller). A ring or file
 * that failed is logged here, once: from then on the buffer is smaller.
 */
static size_t px_buf_keep(struct px_req *q, const char *data, size_t len)
{
    int err;
    size_t took = px_rbuf_put(&q->buf, data, len, &err);
    if (err) {
        px_log(q,
               q->buf.mem_bad ? "the response buffer: no memory, the upstream is held back"
                              : "the response buffer's temporary file: memory only from here",
               err);
    }
    return took;
}

/* Whether body bytes go to the response buffer rather than to the client's queue. */
static bool px_buf_wanted(const struct px_req *q)
{
    return q->buf.on && (q->j.paused || q->j.spill_len > 0 || !px_rbuf_empty(&q->buf));
}

/*
 * The response buffer to the client while its queue takes it; the job's
 * end once it is out and the upstream's answer ended. false when q is
 * gone (ended, failed or freed).
 */
static bool px_buf_out(struct px_req *q)
{
    q->in_body = true;
    int rc = px_rbuf_drain(&q->buf, &q->j); /* never frees q */
    q->in_body = false;
    switch (rc) {
    case MK_AGAIN:
        return true;
    case MK_OK:
        if (q->done) {
            mk_gw_job_end(&q->j); /* may free q */
            return false;
        }
        return true;
    case MK_GW_GONE:
        mk_gw_job_over(&q->j, false);
        return false;
    default:
        px_log(q,
               q->buf.read_err ? "reading the response buffer's temporary file"
                               : "the client's queue refused the response buffer",
               q->buf.read_err);
        mk_gw_job_fail(&q->j, 502); /* the response is cut, never completed wrongly */
        return false;
    }
}

/*
 * The body bytes in rbuf to the job: into its head buffer until the
 * response starts (what does not fit waits), then to the client's queue,
 * or to the response buffer (Buffering on) while the queue is at its mark.
 * false when q is gone (ended, failed or freed).
 */
static bool px_body_run_all(struct px_req *q)
{
    while (q->rlen > 0 && !px_body_over(q)) {
        const char *data;
        size_t dlen, used;
        if (px_body_run(q, &data, &dlen, &used) != MK_OK) {
            mk_gw_job_fail(&q->j, 502);
            return false;
        }
        if (q->j.state == MK_GW_STREAM && dlen && px_buf_wanted(q)) {
            size_t took = px_buf_keep(q, data, dlen);
            if (took < dlen) {
                px_body_unread(q, dlen - took, &used); /* past the bounds: back-pressure */
                px_read_drop(q, used);
                return true;
            }
        }
        else if (q->j.state == MK_GW_STREAM) {
            int rc = dlen ? mk_gw_job_out(&q->j, data, dlen, false) : MK_OK;
            if (rc == MK_GW_GONE) {
                mk_gw_job_over(&q->j, false);
                return false;
            }
            if (rc != MK_OK) {
                mk_gw_job_fail(&q->j, 502);
                return false;
            }
        }
        else if (dlen) {
            size_t room;
            if (!mk_gw_job_head_room(&q->j, &room)) {
                return false;
            }
            if (room < dlen) {
                /* give back what does not fit; it waits for the response to start */
                px_body_unread(q, dlen - room, &used);
                dlen = room;
            }
            if (dlen) {
                mk_gw_job_head_data(&q->j, data, dlen);
            }
            if (used == 0) {
                break;
            }
        }
        px_read_drop(q, used);
    }
    if (px_body_over(q)) {
        px_finish(q);
        return false;
    }
    return true;
}

/*
 * The upstream's 101 is in rbuf: to a request that asked for an upgrade,
 * with an Upgrade of its own, the head goes to the job (its end-to-end
 * fields; px_gw_head takes the client over) and the bytes after it stay
 * in rbuf as the tunnel's first; else 502. 1, or -1 when q failed.
 */
static int px_switch(struct px_req *q)
{
    const struct px_resp *p = &q->resp;
    const struct px_field *up = NULL;
    for (unsigned i = 0; i < p->n_fields && !up; i++) {
        if (px_named(p->fields[i].name.p, p->fields[i].name.len, "upgrade")) {
            up = &p->fields[i];
        }
    }
    if (!q->upgrade || !up || up->value.len == 0) {
        px_log(q,
               q->upgrade ? "a 101 without Upgrade" : "101 to a request that asked for no upgrade",
               0);
        mk_gw_job_fail(&q->j, 502);
        return -1;
    }
#ifdef PX_TLS
    const struct px_field *acc = NULL;
    for (unsigned i = 0; i < p->n_fields && q->ws_h2 && !acc; i++) {
        if (px_named(p->fields[i].name.p, p->fields[i].name.len, "sec-websocket-accept")) {
            acc = &p->fields[i];
        }
    }
    if (q->ws_h2 && (!px_named(up->value.p, up->value.len, "websocket") || !acc ||
                     !px_ws_accept_ok(q->ws_key, acc->value.p, acc->value.len))) {
        px_log(q, "a 101 whose Sec-WebSocket-Accept does not answer the key", 0);
        mk_gw_job_fail(&q->j, 502);
        return -1;
    }
#endif
    if (!(q->up_proto = strndup(up->value.p, up->value.len))) {
        mk_gw_job_fail(&q->j, 503);
        return -1;
    }
    q->tunnel = true;
    size_t hl = p->head_len;
    if (px_give_head(q) != MK_OK) {
        return -1;
    }
    q->head_in = true;
    px_read_drop(q, hl);
    q->resp.n_fields = 0;
    return 1;
}

/*
 * The upstream's 103 in q->resp: its Link fields to the client as a 103 of
 * its own before the answer (HTTP/1.1 and HTTP/2; an HTTP/1.0 client gets
 * none), unless a ResponseHeader line sets or removes Link. Best effort:
 * a hint the client cannot take now is dropped, the answer unharmed.
 */
static void px_early_hints(struct px_req *q)
{
    const struct px_fields_conf *fc = &q->site->sc->fields;
    char lines[MK_INTERIM_MAX + 1];
    size_t len = 0;

    if (px_op_of(fc->resp, fc->n_resp, "Link", 4)) {
        return;
    }
    for (unsigned i = 0; i < q->resp.n_fields; i++) {
        const struct px_field *f = &q->resp.fields[i];
        if (!px_named(f->name.p, f->name.len, "link") || f->value.len == 0) {
            continue;
        }
        if (len + 6 + f->value.len + 2 > MK_INTERIM_MAX) {
            break; /* the hints that fit */
        }
        memcpy(lines + len, "Link: ", 6);
        memcpy(lines + len + 6, f->value.p, f->value.len);
        memcpy(lines + len + 6 + f->value.len, "\r\n", 2);
        len += 6 + f->value.len + 2;
    }
    if (len == 0) {
        return;
    }
    lines[len] = '\0';
    if (mk_gw_job_interim(&q->j, 103, lines) == MK_OK) {
        atomic_fetch_add_explicit(&q->self->early_hints, 1, memory_order_relaxed);
    }
}

/*
 * px_body_run_all, with the job's want() calls it causes (the client's
 * queue at its mark) kept from running it again inside itself.
 */
static bool px_body(struct px_req *q)
{
    q->in_body = true;
    if (!px_body_run_all(q)) {
        return false; /* gone, or ended: px_finish cleared in_body */
    }
    q->in_body = false;
    return true;
}

/* Parse the head in rbuf: 1 in, 0 not complete yet, -1 failed (q is not to be touched). */
static int px_head(struct px_req *q)
{
    for (;;) {
        int rc = px_resp_parse(q->rbuf, q->rlen, q->head_request, &q->resp);
        if (rc == MK_AGAIN) {
            return 0;
        }
        if (rc == MK_ERR) {
            px_log(q, q->resp.why, 0);
            px_api->metric_add(q->g->ms[q->member]->fail[PX_FAIL_RESPONSE], 1);
            mk_gw_job_fail(&q->j, 502);
            return -1;
        }
        if (q->resp.status == 101) {
            return px_switch(q);
        }
        size_t hl = q->resp.head_len;
        if (q->resp.status < 200) {
            /* 103 Early Hints: its Link fields passed on; 100 Continue (the
               server answers the client's itself) and the others dropped */
            if (q->resp.status == 103) {
                px_early_hints(q);
            }
            px_read_drop(q, hl);
            continue;
        }
        if (px_give_head(q) != MK_OK) {
            return -1;
        }
        /* the fields' slices pointed into rbuf: only the framing is used from here */
        q->head_in = true;
        q->left = q->resp.length;
        if (q->trailers_ok && q->resp.framing == PX_BODY_CHUNKED &&
            (q->tkeep = malloc(PX_TRAILER_KEEP))) {
            q->ch.keep = q->tkeep; /* no memory: the trailers are dropped */
            q->ch.keep_cap = PX_TRAILER_KEEP;
        }
        px_read_drop(q, hl);
        q->resp.n_fields = 0;
        return 1;
    }
}

/* Readable: the response's bytes. false when q is gone, failed or ended (not to be touched). */
static bool px_read(struct px_req *q)
{
    if (q->rlen == sizeof(q->rbuf)) {
        /* held back: the job takes rbuf first (the response buffer may have room for it) */
        return q->buf.on && q->head_in && q->j.state == MK_GW_STREAM ? px_body(q) : true;
    }
    ssize_t n = px_conn_recv(q->c, q->rbuf + q->rlen, sizeof(q->rbuf) - q->rlen);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return true;
    }
    if (n <= 0) {
        int e = n < 0 ? errno : 0;
        if (!q->head_in && q->rlen == 0) {
            if (q->c->reused && px_replayable(q)) {
                return px_retry(q, true, 502); /* a kept connection the upstream had closed */
            }
            return px_attempt_failed(q, "closed before a response", e, 502, PX_FAIL_RESET);
        }
        if (q->head_in && q->resp.framing == PX_BODY_CLOSE) {
            q->resp.close = true;
            px_finish(q);
            return false;
        }
        px_log(q, q->head_in ? "the response was cut short" : "closed within the response's head",
               e);
        px_failed(q, q->c->slot, PX_FAIL_RESET);
        mk_gw_job_fail(&q->j, 502);
        return false;
    }
    q->rlen += (size_t) n;
    q->j.last_io_ms = px_api->now_ms();
    if (!q->got_any && q->sent_any) {
        /* the answer's first byte (an interim 1xx's included): its server's time to it */
        q->got_any = true;
        px_api->metric_observe(q->g->ms[q->member]->ttfb, (q->j.last_io_ms - q->sent_ms) * 1000);
    }
    if (!q->head_in) {
        int h = px_head(q);
        if (h < 0) {
            return false;
        }
        if (h == 0) {
            if (q->rlen < PX_HEAD_MAX) {
                return true;
            }
            px_log(q, "a head longer than 16 KiB", 0);
            mk_gw_job_fail(&q->j, 502);
            return false;
        }
        if (q->tunnel) {
            return true; /* not read again here: the continuation takes the connection */
        }
        if (px_body_over(q)) {
            px_finish(q);
            return false;
        }
    }
    return px_body(q);
}

static void px_io(struct px_req *q, int fd, uint32_t ready)
{
    if (q->connecting) {
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
            err = errno;
        }
        if (err == 0 && !(ready & MK_LOOP_WRITE)) {
            return;
        }
        if (err != 0) {
            px_attempt_failed(q, "connect", err, 502, PX_FAIL_CONNECT); /* nothing was sent */
            return;
        }
        q->connecting = false;
        if (!q->c->hs) {
            px_ctimer_stop(q);
        }
    }
#ifdef PX_TLS
    if (q->c->hs) {
        char why[256];
        int rc = px_tls_handshake(q->c->ssl, &q->c->hs_want, why, sizeof(why));
        if (rc == MK_AGAIN) {
            px_want(q);
            return;
        }
        if (rc != MK_OK) {
            px_attempt_failed(q, why, 0, 502,
                              PX_FAIL_CONNECT); /* nothing of the request was sent */
            return;
        }
        q->c->hs = false;
        px_ctimer_stop(q);
        atomic_fetch_add_explicit(&px_srv(q->self, q->c->slot)->tls_handshakes, 1,
                                  memory_order_relaxed);
        if (px_tls_resumed(q->c->ssl)) {
            atomic_fetch_add_explicit(&px_srv(q->self, q->c->slot)->tls_resumed, 1,
                                      memory_order_relaxed);
        }
        ready |= MK_LOOP_WRITE; /* the request may go now */
    }
#endif
    if (q->hdr_off < q->hdr_len || q->w_off < q->w_len || (q->j.spooled && !q->req_out)) {
        if (px_flush(q) != MK_OK) {
            int e = errno;
            if (!q->head_in) {
                px_send_failed(q, e);
                return;
            }
            q->resp.close = true; /* the upstream answered and stopped reading */
            q->req_out = true;
            q->hdr_off = q->hdr_len;
            q->w_off = q->w_len;
        }
    }
    if (((ready & (MK_LOOP_READ | MK_LOOP_ERROR)) || px_conn_pending(q->c)) && px_reading(q) &&
        !q->done) {
        /* the interest is set once below, not at each turn of the job's
           (a response read whole gives its connection back as it was) */
        q->in_io = true;
        do {
            if (!px_read(q)) {
                return; /* ended, failed or freed: its connection went with it */
            }
            /* what TLS decrypted past rbuf's room: read while there is room for it */
        } while (px_conn_pending(q->c) && px_reading(q) && q->rlen < sizeof(q->rbuf));
        q->in_io = false;
    }
    px_want(q);
}

/* ---- the tunnel (101 Switching Protocols) ------------------------------------------ */

/* The upstream's interest: read unless the client's queue holds it back, write while bytes wait. */
static void px_tun_want(struct px_tun *u)
{
    uint32_t mask = 0;
    if (u->t && !u->up_done) {
        mask |= u->down_held ? 0 : MK_LOOP_READ;
        mask |= u->out_off < u->out_len ? MK_LOOP_WRITE : 0;
    }
    if (px_conn_mask(u->c, mask) != MK_OK && u->t && !u->up_done) {
        u->up_done = true;
        px_api->takeover_close(u->t);
    }
}

/* The upstream closed or failed: the client's side closes once what it was sent is out. */
static void px_tun_end(struct px_tun *u)
{
    if (u->up_done) {
        return;
    }
    u->up_done = true;
    px_conn_mask(u->c, 0);
    px_api->takeover_close(u->t); /* on_close follows, from the loop */
}

/* Write the client's bytes that wait: MK_OK (all out: the client's input is released, or the
 * socket is full), MK_ERR (the upstream failed). */
static int px_tun_flush(struct px_tun *u)
{
    while (u->out_off < u->out_len) {
        ssize_t n = px_conn_send(u->c, u->out + u->out_off, u->out_len - u->out_off);
        if (n < 0) {
            return errno == EAGAIN || errno == EINTR ? MK_OK : MK_ERR;
        }
        u->out_off += (size_t) n;
    }
    u->out_len = u->out_off = 0;
    px_api->takeover_hold(u->t, 0);
    return MK_OK;
}

/*
 * Upstream bytes to the client while its queue takes them: a few reads a
 * turn (the loop is level triggered), and whatever TLS decrypted, which
 * no event would announce.
 */
static void px_tun_pump(struct px_tun *u)
{
    char buf[16384];
    for (int i = 0; !u->down_held && !u->up_done && (i < 8 || px_conn_pending(u->c)); i++) {
        ssize_t n = px_conn_recv(u->c, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            return;
        }
        if (n <= 0) {
            px_tun_end(u);
            return;
        }
        int rc = px_api->takeover_write(u->t, buf, (size_t) n);
        if (rc == MK_ERR) {
            px_tun_end(u);
            return;
        }
        u->down_held = rc == MK_AGAIN;
        if ((size_t) n < sizeof(buf) && !px_conn_pending(u->c)) {
            return;
        }
    }
}

/* An event of the tunnel's upstream connection. */
static void px_tun_io(struct px_tun *u, uint32_t ready)
{
    if (!u->t || u->up_done) {
        px_conn_mask(u->c, 0);
        return;
    }
    if (u->out_off < u->out_len && px_tun_flush(u) != MK_OK) {
        px_tun_end(u);
        return;
    }
    if ((ready & (MK_LOOP_READ | MK_LOOP_ERROR)) || px_conn_pending(u->c)) {
        px_tun_pump(u);
    }
    px_tun_want(u);
}

/* The 101 went out: the upstream's first bytes to the client, then both ways. */
static void px_tun_open(struct mk_takeover *t, void *arg)
{
    struct px_tun *u = arg;
    u->t = t;
    atomic_fetch_add_explicit(&px_self()->tunnels, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&px_self()->tunnels_open, 1, memory_order_relaxed);
    if (u->early) {
        int rc = px_api->takeover_write(t, u->early, u->early_len);
        free(u->early);
        u->early = NULL;
        if (rc == MK_ERR) {
            px_tun_end(u);
            return;
        }
        u->down_held = rc == MK_AGAIN;
    }
    if (px_conn_pending(u->c)) {
        px_tun_pump(u);
    }
    px_tun_want(u);
}

/* The client's bytes: to the upstream; what its socket does not take waits, and holds the client
 * back. */
static void px_tun_read(struct mk_takeover *t, const void *data, size_t len, void *arg)
{
    struct px_tun *u = arg;
    const char *p = data;
    if (u->up_done) {
        return;
    }
    if (u->out_off == u->out_len) {
        ssize_t n = px_conn_send(u->c, p, len);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            px_tun_end(u);
            return;
        }
        n = n < 0 ? 0 : n;
        p += n;
        len -= (size_t) n;
        u->out_len = u->out_off = 0;
    }
    if (len > 0) {
        if (u->out_off > 0) {
            memmove(u->out, u->out + u->out_off, u->out_len - u->out_off);
            u->out_len -= u->out_off;
            u->out_off = 0;
        }
        if (u->out_len + len > u->out_cap) {
            size_t cap = u->out_len + len;
            char *b = realloc(u->out, cap);
            if (!b) {
                px_tun_end(u);
                return;
            }
            u->out = b;
            u->out_cap = cap;
        }
        memcpy(u->out + u->out_len, p, len);
        u->out_len += len;
        px_api->takeover_hold(t, 1);
    }
    px_tun_want(u);
}

/* The client's queue is out: the upstream is read again. */
static void px_tun_writable(struct mk_takeover *t, void *arg)
{
    struct px_tun *u = arg;
    (void) t;
    if (u->up_done) {
        return;
    }
    u->down_held = false;
    px_tun_pump(u);
    px_tun_want(u);
}

/* Either side closed, the idle timeout, the server's stop (t NULL: the 101 never went out): the
 * upstream connection closed, never pooled, and the server's place let go. */
static void px_tun_close(struct mk_takeover *t, void *arg)
{
    struct px_tun *u = arg;
    (void) t;
    if (u->t && !u->up_done && u->out_off < u->out_len) {
        (void) px_conn_send(u->c, u->out + u->out_off, u->out_len - u->out_off);
    }
    if (u->t) {
        atomic_fetch_sub_explicit(&px_self()->tunnels_open, 1, memory_order_relaxed);
    }
    px_conn_close(u->c);
    px_let_go_place(px_self(), u->active);
    free(u->early);
    free(u->out);
    free(u);
}

static const struct mk_takeover_ops px_tun_ops = {
    .on_read = px_tun_read,
    .on_writable = px_tun_writable,
    .on_close = px_tun_close,
};

/*
 * The continuation of a request whose upstream answered 101: the 101's
 * end-to-end fields, its Upgrade and Connection: upgrade on r's answer,
 * the client's connection taken over with the proxy's Timeout as its idle
 * timeout, and the upstream connection (with the bytes after the 101) the
 * tunnel's. MK_OK; MK_ERR when it cannot be (502: the connection is
 * closed with the job).
 */
static int px_tun_start(struct px_req *q, struct mk_request *r)
{
    struct mk_gw_job *j = &q->j;
    int rc = mk_gw_head_apply(px_api, r, &j->h, 1);
    if (rc == MK_ERR || rc == MK_DECLINED) {
        return MK_ERR;
    }
    /* HTTP/2 (RFC 8441): the stream's 200, no Upgrade or Connection */
    if (!q->ws_h2 && (px_api->add_header(r, "Upgrade", q->up_proto) != MK_OK ||
                      px_api->add_header(r, "Connection", "upgrade") != MK_OK)) {
        return MK_ERR;
    }
    struct px_tun *u = calloc(1, sizeof(*u));
    if (!u) {
        return MK_ERR;
    }
    if (q->rlen > 0) {
        if (!(u->early = malloc(q->rlen))) {
            free(u);
            return MK_ERR;
        }
        memcpy(u->early, q->rbuf, q->rlen);
        u->early_len = q->rlen;
    }
    if (px_api->takeover(r, &px_tun_ops, u, (uint32_t) q->site->conf->timeout_ms) != MK_OK) {
        px_log(q, "the client's connection cannot be taken over", 0);
        free(u->early);
        free(u);
        return MK_ERR;
    }
    px_api->takeover_on_open(r, px_tun_open);
    px_server_ok(px_srv(q->self, q->c->slot));
    u->c = q->c;
    u->c->req = NULL;
    u->c->tun = u;
    q->c = NULL;
    u->active = q->active;
    q->active = 0;
    q->rlen = 0;
    px_conn_mask(u->c, 0); /* until on_open */
    return MK_OK;
}

/* ---- the table ------------------------------------------------------------------- */

static int px_acquire(struct mk_gw_job *j, struct mk_request *r)
{
    return px_connect(px_of(j), r, 502);
}

/* The request's head buffer: grows as needed (client-controlled, bounded by its headers). */
struct px_buf {
    char *p;
    size_t len, cap;
    bool bad;
};

/* px_room's slow side: b grown to hold n more bytes (doubling, from 1 KiB). */
static __attribute__((noinline)) char *px_grow(struct px_buf *b, size_t n)
{
    if (b->bad) {
        return NULL;
    }
    size_t cap = b->cap ? b->cap * 2 : 1024;
    while (cap < b->len + n) {
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) {
        b->bad = true;
        return NULL;
    }
    b->p = p;
    b->cap = cap;
    char *at = b->p + b->len;
    b->len += n;
    return at;
}

/* Room for n more bytes at the end of b: where they go, or NULL (b->bad: no memory). In line:
   a head's dozen pieces all fit in the kept buffer. */
static inline char *px_room(struct px_buf *b, size_t n)
{
    if (__builtin_expect(!b->bad && n <= b->cap - b->len, 1)) {
        char *at = b->p + b->len;
        b->len += n;
        return at;
    }
    return px_grow(b, n);
}

static inline void px_put(struct px_buf *b, const char *s, size_t n)
{
    char *at = px_room(b, n);
    if (at) {
        memcpy(at, s, n);
    }
}

/* A string literal into b, its length known at compile time. */
#define px_put_lit(b, lit) px_put((b), (lit), sizeof(lit) - 1)

static inline void px_puts(struct px_buf *b, const char *s)
{
    px_put(b, s, strlen(s));
}

/* "name: v\r\n" into b (nlen bytes of name). */
static inline void px_field_n(struct px_buf *b, const char *name, size_t nlen, const char *v,
                              size_t vlen)
{
    char *at = px_room(b, nlen + 2 + vlen + 2);
    if (at) {
        memcpy(at, name, nlen);
        memcpy(at + nlen, ": ", 2);
        memcpy(at + nlen + 2, v, vlen);
        memcpy(at + nlen + 2 + vlen, "\r\n", 2);
    }
}

/* The same for a name that is a string literal. */
#define px_field_lit(b, lit, v, vlen) px_field_n((b), (lit), sizeof(lit) - 1, (v), (vlen))

/* Whether v[0..len) holds CR, LF or NUL, byte by byte. */
static bool px_unsafe_bytes(const char *v, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) v[i];
        if (c <= '\r' && (c == '\r' || c == '\n' || c == '\0')) {
            return true;
        }
    }
    return false;
}

/*
 * Whether a value carries a byte HTTP/1 cannot (CR, LF, NUL): eight bytes
 * at a time (the last eight overlapping the word before them), a word
 * with a byte below 0x0e (CR, LF and NUL all are) looked at byte by byte.
 */
static bool px_unsafe(const char *v, size_t len)
{
    if (len < 8) {
        return px_unsafe_bytes(v, len);
    }
    for (size_t i = 0;; i += 8) {
        if (i + 8 > len) {
            i = len - 8;
        }
        uint64_t x;
        memcpy(&x, v + i, sizeof(x));
        if (((x - 0x0e0e0e0e0e0e0e0eull) & ~x & 0x8080808080808080ull) &&
            px_unsafe_bytes(v + i, 8)) {
            return true;
        }
        if (i + 8 == len) {
            return false;
        }
    }
}

/*
 * Whether a field of the client's is one begin() writes itself, or drops:
 * Host, Content-Length, Expect, X-Forwarded-For, -Proto and -Host, Cookie
 * (joined), HTTP2-Settings. By length first: most fields are none of these.
 */
static bool px_own_field(const char *n, size_t len)
{
    switch (len) {
    case 4:
        return px_named(n, len, "host");
    case 6:
        return px_named(n, len, "expect") || px_named(n, len, "cookie");
    case 14:
        return px_named(n, len, "content-length") || px_named(n, len, "http2-settings");
    case 15:
        return px_named(n, len, "x-forwarded-for");
    case 16:
        return px_named(n, len, "x-forwarded-host");
    case 17:
        return px_named(n, len, "x-forwarded-proto");
    default:
        return false;
    }
}

/*
 * What begin() looks up among the client's fields, found in one pass:
 * the first Host, Cookie and Upgrade (as api->header gives them), and
 * whether a Connection, TE, Content-Length, X-Forwarded-For or Forwarded
 * field came at all (none: the lookups and joins for it are skipped).
 */
struct px_seen {
    const char *host, *cookie, *upgrade;
    size_t host_len, cookie_len, upgrade_len;
    bool conn, te, length, xff, forwarded;
};

static void px_client_scan(struct mk_request *r, struct px_seen *v)
{
    unsigned n = px_api->header_count(r);
    memset(v, 0, sizeof(*v));
    for (unsigned i = 0; i < n; i++) {
        const char *hn, *hv;
        size_t hnl, hvl;
        if (px_api->header_at(r, i, &hn, &hnl, &hv, &hvl) != MK_OK) {
            continue;
        }
        switch (hnl) {
        case 2:
            v->te |= px_named(hn, hnl, "te");
            break;
        case 4:
            if (!v->host && px_named(hn, hnl, "host")) {
                v->host = hv;
                v->host_len = hvl;
            }
            break;
        case 6:
            if (!v->cookie && px_named(hn, hnl, "cookie")) {
                v->cookie = hv;
                v->cookie_len = hvl;
            }
            break;
        case 7:
            if (!v->upgrade && px_named(hn, hnl, "upgrade")) {
                v->upgrade = hv;
                v->upgrade_len = hvl;
            }
            break;
        case 9:
            v->forwarded |= px_named(hn, hnl, "forwarded");
            break;
        case 10:
            v->conn |= px_named(hn, hnl, "connection");
            break;
        case 14:
            v->length |= px_named(hn, hnl, "content-length");
            break;
        case 15:
            v->xff |= px_named(hn, hnl, "x-forwarded-for");
            break;
        default:
            break;
        }
    }
}

/* Whether the client's Connection fields name `name`. */
static bool px_client_conn_names(struct mk_request *r, const char *name, size_t len)
{
    unsigned n = px_api->header_count(r);
    struct px_resp fake;
    fake.n_fields = 0;
    for (unsigned i = 0; i < n && fake.n_fields < PX_FIELDS_MAX; i++) {
        const char *hn, *hv;
        size_t hnl, hvl;
        if (px_api->header_at(r, i, &hn, &hnl, &hv, &hvl) == MK_OK &&
            px_named(hn, hnl, "connection")) {
            fake.fields[fake.n_fields].name.p = hn;
            fake.fields[fake.n_fields].name.len = hnl;
            fake.fields[fake.n_fields].value.p = hv;
            fake.fields[fake.n_fields].value.len = hvl;
            fake.n_fields++;
        }
    }
    return fake.n_fields && px_resp_conn_names(&fake, name, len);
}

/*
 * Every value of the client's fields named `name` that HTTP/1 can carry,
 * joined with ", ", into b: whether one was.
 */
static bool px_put_joined(struct px_buf *b, struct mk_request *r, const char *name)
{
    unsigned n = px_api->header_count(r);
    bool any = false;
    for (unsigned i = 0; i < n; i++) {
        const char *hn, *hv;
        size_t hnl, hvl;
        if (px_api->header_at(r, i, &hn, &hnl, &hv, &hvl) != MK_OK || !px_named(hn, hnl, name) ||
            hvl == 0 || px_unsafe(hv, hvl)) {
            continue;
        }
        if (any) {
            px_put(b, ", ", 2);
        }
        px_put(b, hv, hvl);
        any = true;
    }
    return any;
}

/*
 * This worker's last client address and its text (api->remote_addr): the
 * text depends on the address alone (its family and bytes, not the port),
 * which a connection's requests share. Made at the first request, freed at
 * the worker's exit.
 */
struct px_addr_cache {
    bool ok;
    sa_family_t family;
    unsigned char key[16]; /* the address's bytes (IPv4: 4 of them) */
    char text[64];
    size_t len;
};
static __thread struct px_addr_cache *px_addr_cache;

/*
 * The client's address as text (remote_addr's: "-" for one that is not
 * IP), and its length: the cache's, or written into buf (64 bytes) when it
 * cannot be used.
 */
static const char *px_client_addr(struct mk_request *r, char *buf, size_t *len)
{
    struct px_addr_cache *c = px_addr_cache;
    socklen_t sl;
    const struct sockaddr *sa =
        MK_API_HAS(px_api, remote_sockaddr) ? px_api->remote_sockaddr(r, &sl) : NULL;
    const void *key = NULL;
    size_t klen = 0;

    if (!c && !px_hdr_spare_off && (c = calloc(1, sizeof(*c)))) { /* none after the exit */
        px_addr_cache = c;
    }
    if (sa && sa->sa_family == AF_INET) {
        key = &((const struct sockaddr_in *) (const void *) sa)->sin_addr;
        klen = 4;
    }
    else if (sa && sa->sa_family == AF_INET6) {
        key = &((const struct sockaddr_in6 *) (const void *) sa)->sin6_addr;
        klen = 16;
    }
    if (!c || !key) {
        px_api->remote_addr(r, buf, 64); /* off the cache (no memory, not IP): as it comes */
        *len = strlen(buf);
        return buf;
    }
    if (!c->ok || c->family != sa->sa_family || memcmp(c->key, key, klen) != 0) {
        px_api->remote_addr(r, c->text, sizeof(c->text));
        c->len = strlen(c->text);
        c->family = sa->sa_family;
        memcpy(c->key, key, klen);
        c->ok = true;
    }
    *len = c->len;
    return c->text;
}

/*
 * The proxy's own fields, after the client's: X-Forwarded-For,
 * X-Forwarded-Proto, X-Forwarded-Host and Forwarded as the site's keys
 * say (a RequestHeader line that names one takes its place), then the
 * RequestHeader set lines. host: the client's Host (NULL: none).
 */
static void px_forward_fields(struct px_buf *b, struct mk_request *r,
                              const struct px_fields_conf *fc, const struct px_seen *seen,
                              const char *host, size_t hlen, bool tls)
{
    char buf[64];
    size_t alen;
    const char *addr = px_client_addr(r, buf, &alen);
    if (fc->xff != PX_XFF_OFF && !px_op_of(fc->req, fc->n_req, "X-Forwarded-For", 15)) {
        px_put_lit(b, "X-Forwarded-For: ");
        if (fc->xff == PX_XFF_APPEND && seen->xff && px_put_joined(b, r, "X-Forwarded-For")) {
            px_put(b, ", ", 2);
        }
        px_put(b, addr, alen);
        px_put(b, "\r\n", 2);
    }
    if (fc->xfproto && !px_op_of(fc->req, fc->n_req, "X-Forwarded-Proto", 17)) {
        if (tls) {
            px_put_lit(b, "X-Forwarded-Proto: https\r\n");
        }
        else {
            px_put_lit(b, "X-Forwarded-Proto: http\r\n");
        }
    }
    if (fc->xfhost && host && !px_op_of(fc->req, fc->n_req, "X-Forwarded-Host", 16)) {
        px_field_lit(b, "X-Forwarded-Host", host, hlen);
    }
    if (fc->forwarded && !px_op_of(fc->req, fc->n_req, "Forwarded", 9)) {
        char el[1024];
        const char *proto = tls ? "https" : "http";
        long k = px_forwarded_element(addr, proto, host, host ? hlen : 0, el, sizeof(el));
        if (k < 0) {
            k = px_forwarded_element(addr, proto, NULL, 0, el, sizeof(el)); /* a host too long */
        }
        px_put_lit(b, "Forwarded: ");
        if (fc->xff == PX_XFF_APPEND && seen->forwarded && px_put_joined(b, r, "Forwarded")) {
            px_put(b, ", ", 2);
        }
        px_put(b, el, (size_t) k);
        px_put(b, "\r\n", 2);
    }
    for (size_t i = 0; i < fc->n_req; i++) {
        if (fc->req[i].verb == PX_HDR_SET) {
            px_field_n(b, fc->req[i].name, fc->req[i].name_len, fc->req[i].value,
                       fc->req[i].value_len);
        }
    }
}

/* Whether the client's TE fields name `trailers` (a member of the list, any case, any q). */
static bool px_te_trailers(struct mk_request *r)
{
    unsigned n = px_api->header_count(r);
    for (unsigned i = 0; i < n; i++) {
        const char *hn, *hv;
        size_t hnl, hvl;
        if (px_api->header_at(r, i, &hn, &hnl, &hv, &hvl) != MK_OK || !px_named(hn, hnl, "te")) {
            continue;
        }
        for (size_t k = 0; k < hvl;) {
            while (k < hvl && (hv[k] == ' ' || hv[k] == '\t' || hv[k] == ',')) {
                k++;
            }
            size_t s = k;
            while (k < hvl && hv[k] != ',' && hv[k] != ';' && hv[k] != ' ' && hv[k] != '\t') {
                k++;
            }
            if (px_named(hv + s, k - s, "trailers")) {
                return true;
            }
            while (k < hvl && hv[k] != ',') {
                k++;
            }
        }
    }
    return false;
}

/* Redirect default's TO: scheme://host and the route's prefix ("/" for Match), or NULL. */
static char *px_default_to(const struct px_req *q, const char *host, size_t hlen, bool tls)
{
    const struct px_route *rt = q->route;
    size_t plen = rt->prefix ? rt->prefix_len : 1;
    if (!host || hlen > 1024) {
        return NULL;
    }
    char *to = malloc(8 + hlen + plen + 1);
    if (to) {
        snprintf(to, 8 + hlen + plen + 1, "%s://%.*s%.*s", tls ? "https" : "http", (int) hlen, host,
                 (int) plen, rt->prefix ? rt->prefix : "/");
    }
    return to;
}

static int px_begin(struct mk_gw_job *j, struct mk_request *r)
{
    struct px_req *q = px_of(j);
    const struct px_fields_conf *fc = &q->site->sc->fields;
    struct px_buf b = {.p = px_hdr_spare, .cap = px_hdr_spare ? px_hdr_spare_cap : 0};
    px_hdr_spare = NULL;
    px_hdr_spare_cap = 0;
    size_t len, tlen;
    const char *method = px_api->method(r, &len);
    const char *target = px_api->target(r, &tlen);
    struct mk_gw_slice auth, rest;

#ifdef PX_TLS
    size_t plen = 0;
    const char *proto =
        MK_API_HAS(px_api, request_protocol) ? px_api->request_protocol(r, &plen) : NULL;
    q->ws_h2 = proto && px_named(proto, plen, "websocket") && MK_API_HAS(px_api, takeover_hold) &&
               !j->has_body && px_ws_key(q->ws_key) == MK_OK;
    if (q->ws_h2) {
        method = "GET"; /* the extended CONNECT's HTTP/1.1 form: a WebSocket handshake */
        len = 3;
    }
#endif
    /* methods are case-sensitive (RFC 9110 section 9.1): "get" is no GET, and not replayed */
    q->head_request = px_method_is(method, len, "HEAD");
    q->idempotent = q->head_request || px_method_is(method, len, "GET") ||
                    px_method_is(method, len, "OPTIONS") || px_method_is(method, len, "TRACE") ||
                    px_method_is(method, len, "PUT") || px_method_is(method, len, "DELETE");
    bool slash = false;
    if (mk_gw_target_absolute(target, tlen, &auth, &rest)) {
        slash = rest.len == 0 || rest.p[0] != '/';
        target = rest.p;
        tlen = rest.len;
    }
    char *line = px_room(&b, len + 1 + slash + tlen + 11);
    if (line) {
        memcpy(line, method, len);
        line[len] = ' ';
        line[len + 1] = '/'; /* overwritten by the target when no slash is added */
        memcpy(line + len + 1 + slash, target, tlen);
        memcpy(line + len + 1 + slash + tlen, " HTTP/1.1\r\n", 11);
    }
    /* An upgrade (WebSocket and the like) passes on from an HTTP/1.1
       client whose request has no body, the one kind the server can take
       over once the upstream answers 101. */
    struct px_seen seen;
    px_client_scan(r, &seen);
    q->upgrade = q->ws_h2 || (seen.upgrade && seen.upgrade_len && seen.conn &&
                              MK_API_HAS(px_api, takeover_hold) && px_api->version(r) == 11 &&
                              !j->has_body && px_client_conn_names(r, "upgrade", 7));
    size_t hlen = seen.host_len;
    const char *host = seen.host;
    if (!host) {
        host = px_api->host(r, &hlen);
    }
    if (host && px_unsafe(host, hlen)) {
        free(b.p);
        return 400;
    }
    if (fc->host) {
        px_field_lit(&b, "Host", fc->host, strlen(fc->host));
    }
    else if (host) {
        px_field_lit(&b, "Host", host, hlen);
    }
    unsigned n = px_api->header_count(r);
    for (unsigned i = 0; i < n; i++) {
        const char *hn, *hv;
        size_t hnl, hvl;
        if (px_api->header_at(r, i, &hn, &hnl, &hv, &hvl) != MK_OK || hnl == 0 || hn[0] == ':') {
            continue;
        }
        bool skip = px_own_field(hn, hnl);
        skip |= fc->forwarded && px_named(hn, hnl, "forwarded");
        skip |= q->ws_h2 && (px_named(hn, hnl, "sec-websocket-key") ||
                             px_named(hn, hnl, "sec-websocket-version"));
        if (skip || px_hop_by_hop(hn, hnl) || (seen.conn && px_client_conn_names(r, hn, hnl)) ||
            px_op_of(fc->req, fc->n_req, hn, hnl)) {
            continue;
        }
        if (px_unsafe(hn, hnl) || px_unsafe(hv, hvl)) {
            free(b.p);
            return 400;
        }
        px_field_n(&b, hn, hnl, hv, hvl);
    }
    const char *cookie = seen.cookie;
    len = seen.cookie_len;
    if (cookie && !px_op_of(fc->req, fc->n_req, "Cookie", 6)) {
        if (px_unsafe(cookie, len)) {
            free(b.p);
            return 400;
        }
        px_field_lit(&b, "Cookie", cookie, len); /* HTTP/2 crumbs come joined with "; " */
    }
#ifdef PX_TLS
    if (q->ws_h2) {
        px_puts(&b, "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                    "Sec-WebSocket-Key: ");
        px_puts(&b, q->ws_key);
        px_put(&b, "\r\n", 2);
    }
    else
#endif
        if (q->upgrade) {
        px_put_lit(&b, "Upgrade: ");
        if (!px_put_joined(&b, r, "Upgrade")) {
            free(b.p);
            return 400;
        }
        px_put_lit(&b, "\r\nConnection: upgrade\r\n");
    }
    int version = px_api->version(r);
    q->trailers_ok = version == 20 || (version == 11 && seen.te && px_te_trailers(r));
    if (q->trailers_ok) {
        px_put_lit(&b, "TE: trailers\r\n"); /* the answer's trailers go on to the client */
    }
    bool tls = MK_API_HAS(px_api, conn_transport_var) &&
               px_api->conn_transport_var(px_api->conn(r), "protocol", &len) != NULL;
    px_forward_fields(&b, r, fc, &seen, host, hlen, tls);
    for (size_t i = 0; i < fc->n_redirect && !q->dto; i++) {
        if (!fc->redirect[i].from && !(q->dto = px_default_to(q, host, hlen, tls))) {
            break; /* no host, or no memory: the default maps nothing */
        }
    }
    if (j->spooled) {
        px_field_lit(&b, "Content-Length", j->content_length, strlen(j->content_length));
    }
    else {
        /* api->header: it hides the body's fields of a redirected request */
        const char *cl = seen.length ? px_api->header(r, "Content-Length", &len) : NULL;
        char dec[MK_GW_DEC_MAX];
        if (cl) {
            size_t dl = mk_gw_content_length(cl, len, dec);
            if (dl == 0) {
                free(b.p);
                return 400;
            }
            px_field_lit(&b, "Content-Length", dec, dl);
        }
        else if (j->has_body) {
            /* a length known only at its end: chunked, the proxy's framing */
            px_put_lit(&b, "Transfer-Encoding: chunked\r\n");
            q->chunked = true;
        }
    }
    px_put(&b, "\r\n", 2);
    if (b.bad) {
        free(b.p);
        return 503;
    }
    q->hdr = b.p;
    q->hdr_cap = b.cap;
    q->hdr_len = b.len;
    q->hdr_off = 0;
    j->last_io_ms = px_api->now_ms();
    return MK_OK; /* sent with the body's first bytes, or at its end */
}

static int px_gw_body(struct mk_gw_job *j, const char *data, size_t len)
{
    struct px_req *q = px_of(j);
    if (!q->c || q->done) {
        return MK_OK; /* the answer came (or failed): the rest is not wanted */
    }
    if (!q->w && !(q->w = malloc(PX_WBUF))) {
        return 503;
    }
    px_w_compact(q);
    if (q->w_len + len + 32 > PX_WBUF) {
        return 503; /* cannot happen: the window holds the client back */
    }
    if (q->chunked) {
        if (len == 0) {
            return MK_OK; /* an empty chunk would end the body */
        }
        q->w_len += (size_t) snprintf(q->w + q->w_len, 24, "%zx\r\n", len);
    }
    memcpy(q->w + q->w_len, data, len);
    q->w_len += len;
    if (q->chunked) {
        memcpy(q->w + q->w_len, "\r\n", 2);
        q->w_len += 2;
    }
    if (!q->connecting && px_flush(q) != MK_OK) {
        px_log(q, "sending the request body", errno);
        return 502;
    }
    px_want(q);
    if (q->w_len == 0) {
        return MK_OK;
    }
    return MK_AGAIN;
}

/*
 * The client's trailers that may go upstream, after the last chunk, into
 * out (cap bytes): px_trailers_filter's, less the fields the client's
 * Connection names. The bytes written.
 */
static size_t px_req_trailers(struct mk_request *r, char *out, size_t cap)
{
    size_t tlen, n, o = 0;
    const char *t =
        MK_API_HAS(px_api, request_trailers) ? px_api->request_trailers(r, &tlen) : NULL;
    if (!t || cap == 0) {
        return 0;
    }
    n = px_trailers_filter(t, tlen, out, cap);
    bool conn = px_api->header(r, "Connection", &tlen) != NULL;
    for (size_t i = 0; conn && i < n;) {
        char *eol = memchr(out + i, '\n', n - i); /* every line ends with CRLF */
        size_t line = (size_t) (eol - (out + i)) + 1;
        size_t name = (size_t) ((char *) memchr(out + i, ':', line) - (out + i));
        if (!px_client_conn_names(r, out + i, name)) {
            memmove(out + o, out + i, line);
            o += line;
        }
        i += line;
    }
    return conn ? o : n;
}

static int px_body_end(struct mk_gw_job *j, struct mk_request *r)
{
    struct px_req *q = px_of(j);
    q->body_ended = true;
    if (q->chunked && q->c) {
        /* the last chunk and the client's trailers: after what waits */
        if (!q->w && !(q->w = malloc(PX_WBUF))) {
            return 503;
        }
        px_w_compact(q);
        memcpy(q->w + q->w_len, "0\r\n", 3);
        q->w_len += 3;
        q->w_len += px_req_trailers(r, q->w + q->w_len, PX_WBUF - q->w_len - 2);
        memcpy(q->w + q->w_len, "\r\n", 2);
        q->w_len += 2;
    }
    if (q->c && !q->connecting && px_flush(q) != MK_OK && !q->head_in) {
        px_send_failed(q, errno); /* a failure is the job's j->fail: answered from there */
        return MK_OK;
    }
    px_want(q);
    return MK_OK;
}

static void px_gw_want(struct mk_gw_job *j)
{
    struct px_req *q = px_of(j);
    if (q->in_body) {
        px_want(q); /* inside px_body or px_buf_out, which go on themselves */
        return;
    }
    if (!j->paused && j->state == MK_GW_STREAM && !px_rbuf_empty(&q->buf) && !px_buf_out(q)) {
        return; /* the buffer first: its bytes came before rbuf's */
    }
    if (!q->c || q->tunnel) {
        return; /* a tunnel's connection is not read until the takeover (px_want) */
    }
    if (px_reading(q) && j->state == MK_GW_STREAM && q->rlen > 0 && !q->done) {
        if (!px_body(q)) {
            return;
        }
    }
    if (px_reading(q) && !q->done && !q->in_io && !q->connecting && px_conn_pending(q->c)) {
        px_io(q, q->c->fd, 0); /* TLS holds bytes no event will announce */
        return;
    }
    px_want(q);
}

static int px_tun_start(struct px_req *q, struct mk_request *r);

static int px_gw_head(struct mk_gw_job *j, struct mk_request *r)
{
    if (px_of(j)->tunnel) {
        return px_tun_start(px_of(j), r);
    }
    int rc = mk_gw_head_apply(px_api, r, &j->h, 1);
    return rc == MK_ERR || rc == MK_DECLINED ? MK_ERR : MK_AGAIN;
}

/*
 * The job's Timeout passed in silence: another attempt when px_may_retry
 * allows (the request was sent and no byte of the answer came: an
 * idempotent method without a body). false: the job answers 504.
 */
static bool px_timed_out(struct mk_gw_job *j)
{
    struct px_req *q = px_of(j);
    if (!q->c || q->done || !px_may_retry(q)) {
        return false; /* px_drop logs it and counts the server's failure */
    }
    px_log(q, q->connecting ? "no connection within Timeout" : "no answer within Timeout", 0);
    px_failed(q, q->c->slot, q->connecting ? PX_FAIL_CONNECT : PX_FAIL_TIMEOUT);
    return px_again(q, false, 504) == MK_OK;
}

static void px_drop(struct mk_gw_job *j, int status)
{
    struct px_req *q = px_of(j);
    if (status == 504 && q->c && !q->connecting) {
        px_log(q, "no answer within Timeout", 0);
        px_failed(q, q->c->slot, PX_FAIL_TIMEOUT);
    }
    px_drop_conn(q, false);
    px_let_go(q);
    if (q->w_len > q->w_off) {
        /* body bytes kept for a connection that is gone: the window opens
           again, so that the job answers from the next body callback */
        q->w_len = q->w_off = 0;
        mk_gw_job_body_drained(j);
    }
}

static bool px_over(struct mk_gw_job *j, bool done)
{
    struct px_req *q = px_of(j);
    (void) done;
    px_drop_conn(q, false); /* a clean end gave it back already (px_finish) */
    px_let_go(q);
    return true;
}

static void px_gw_unqueue(struct mk_gw_job *j)
{
    px_unqueue(px_of(j));
}

static void px_release(struct mk_gw_job *j)
{
    struct px_req *q = px_of(j);
    px_unqueue(q);
    px_drop_conn(q, false);
    px_let_go(q);
    if (q->hdr && !px_hdr_spare && !px_hdr_spare_off && q->hdr_cap <= PX_HDR_SPARE_MAX) {
        px_hdr_spare = q->hdr; /* the next request's head buffer */
        px_hdr_spare_cap = q->hdr_cap;
    }
    else {
        free(q->hdr);
    }
    free(q->w);
    free(q->dto);
    free(q->up_proto);
    free(q->tkeep);
    free(q->tout);
    q->hdr = q->w = q->dto = q->up_proto = q->tkeep = q->tout = NULL;
    px_rbuf_free(&q->buf);
}

static const struct mk_gw_backend px_backend = {
    .who = "proxy",
    .size = sizeof(struct px_req),
    .cleared = offsetof(struct px_req, resp), /* resp and rbuf are written before they are read */
    .window = PX_WINDOW,
    .head_cap = PX_HEAD_MAX + PX_RBUF,
    .spill_cap = PX_RBUF,
    .timeout = MK_GW_TIMEOUT_IDLE,
    .stream_unsized = true,
    .acquire = px_acquire,
    .begin = px_begin,
    .body = px_gw_body,
    .body_end = px_body_end,
    .want = px_gw_want,
    .head = px_gw_head,
    .drop = px_drop,
    .over = px_over,
    .release = px_release,
    .unqueue = px_gw_unqueue,
    .timed_out = px_timed_out,
};

int px_req_start(struct mk_request *r, const struct px_site *site, size_t i)
{
    struct px_self *self = site->groups[i]->self;
    struct mk_gw_script s;
    size_t len;

    memset(&s, 0, sizeof(s));
    s.name = px_api->path(r, &len);
    s.name_len = len;
    s.path_info = "";
    s.filename = "";
    s.docroot = "";
    struct mk_gw_job *j = mk_gw_job_new(&px_backend, px_api, r, &s, &self->gw);
    if (!j) {
        return 503;
    }
    struct px_req *q = px_of(j);
    q->site = site;
    q->route = &site->sc->routes[i];
    q->g = site->groups[i];
    q->self = self;
    q->member = -1;
    q->failed_slot = -1;
    q->reserved = -1;
    px_rbuf_init(&q->buf, site->conf, site->buffering);
    j->nph = true;
    j->timeout_ms = site->conf->timeout_ms;
    j->queue_ms = site->conf->queue_ms;
    j->last_io_ms = px_api->now_ms();
    atomic_fetch_add_explicit(&self->requests, 1, memory_order_relaxed);
    return mk_gw_job_start(j, r);
}

void px_req_worker_exit(void)
{
    mk_gw_job_worker_exit(&px_backend);
    px_hdr_spare_off = true;
    free(px_hdr_spare);
    px_hdr_spare = NULL;
    free(px_addr_cache);
    px_addr_cache = NULL;
    while (px_idle) {
        struct px_conn *c = px_idle;
        px_idle = c->next;
        px_conn_close(c);
    }
    if (px_idle_timer) {
        px_api->timer_stop(px_idle_timer);
        px_idle_timer = NULL;
    }
#ifdef PX_TLS
    px_tls_worker_exit();
#endif
}
