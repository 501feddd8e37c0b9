/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fcgi_pool.c: backends and their connections. A backend's health (down
 * until when), its connection limit and its counters live in the server's
 * struct fcgi_self, shared by the workers through atomics. Connections
 * live on one worker's loop, so each worker keeps its own pool per
 * backend: idle connections kept alive (FCGI_KEEP_CONN) for the next
 * request, and a FIFO of the requests waiting for one. An idle connection
 * stays watched, so that one the backend closes (php-fpm's request limit,
 * a restart) is noticed and dropped before a request picks it.
 *
 * The limit. php-fpm ties one of its workers (a child) to a connection for
 * as long as the connection lasts, idle or not; a connection beyond its
 * workers is completed by the kernel but waits in the listen queue, unread,
 * until one of them closes, which a kept-alive connection never does. So
 * the connections to a backend are counted for all workers together
 * (active) and kept within a limit (fcgi_limit): MaxConnections, and never
 * more than the backend says it takes (the least of FCGI_MAX_CONNS and
 * FCGI_MAX_REQS in its answer to FCGI_GET_VALUES: one request per
 * connection, never multiplexed); with MaxConnections 0 (auto), what it
 * says, else FCGI_AUTO_CHECKED for a backend whose connections are checked
 * (php-fpm answers FCGI_MPXS_CONNS alone), else FCGI_AUTO_SILENT.
 *
 * The check. A new connection first carries FCGI_GET_VALUES alone, which
 * the backend answers only once one of its workers took the connection;
 * until a backend answered once, one connection at a time is made (what it
 * says bounds the next ones). The request goes out on a checked connection
 * only once it was taken, so a connection can be given up
 * with nothing of a request in it (the backend will never run it). One not
 * answered within AcceptTimeout was not taken: it is closed, the limit is
 * lowered to the connections the backend did take (taken), and the
 * requests wait in the queue for one of those instead of for Timeout (and
 * a 504). While requests queue, a lowered limit grows back by one at most
 * every FCGI_GROW_MS (a php-fpm with pm = dynamic starts more workers
 * under load). A backend that does not answer (its first connection silent
 * for AcceptTimeout with nothing else open) or closes the connection after
 * answering is not checked any more (FCGI_GV_SILENT): its requests go out
 * at once, as they always did, within FCGI_AUTO_SILENT connections unless
 * MaxConnections says more. A backend marked down is asked again.
 *
 * The workers. A connection given back on a worker without requests
 * waiting for its backend goes to a worker that has some (the waiting
 * mask): its loop watches it from then on (api->worker_call), so the
 * backend's worker it holds serves that request with no new connection
 * and no check. When a worker queues a request because the backend is at
 * its limit while other workers hold idle connections to it, it asks them
 * (the holding mask) to pass one on. A connection closed anywhere is room:
 * the workers with requests waiting are told, and each tries to take it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <monkey/mk_util.h>

#include "fastcgi.h"

/* A lowered limit grows back by one at most this often while requests queue. */
#define FCGI_GROW_MS 10000
/* What a checked connection reads of its answer: one small record. */
#define FCGI_CHECK_BUF 512

struct fcgi_conn {
    struct fcgi_conn *next; /* the idle list, or the list of those being checked */
    unsigned slot;
    int fd;
    struct mk_loop_fd *w;
    struct fcgi_req *req; /* NULL while idle or checked */
    uint32_t mask;        /* the interest registered, to skip needless epoll_ctl */
    bool connecting;
    bool reused; /* it served a request before: the backend may have closed it meanwhile */
    /* the check (FCGI_GET_VALUES before any request), while `checking` */
    bool checking, asked;
    struct mk_loop_timer *check_timer; /* AcceptTimeout */
    uint8_t *check_buf;                /* FCGI_CHECK_BUF bytes of the answer */
    size_t check_len;
    uint64_t down_ms; /* DownTime of the site that made it: a failed check marks it down */
    unsigned hops;    /* passed from worker to worker since it last served a request */
};

struct fcgi_pool {
    struct fcgi_conn *idle, *checking;
    unsigned n_idle;   /* connections of this worker's kept idle */
    unsigned n_check;  /* connections of this worker's being checked */
    unsigned n_queued; /* requests of this worker waiting */
    struct fcgi_req *q_head, *q_tail;
};

static __thread struct fcgi_pool fcgi_pools[FCGI_BACKENDS_MAX];
static __thread unsigned fcgi_rr;   /* round-robin position of this worker */
static __thread bool fcgi_stopping; /* the worker exits: its requests go, none is served */

static void fcgi_room(unsigned slot, bool tell);

int fcgi_conn_fd(const struct fcgi_conn *c)
{
    return c->fd;
}

struct fcgi_backend *fcgi_conn_backend(const struct fcgi_conn *c)
{
    return &fcgi_self()->backends[c->slot];
}

bool fcgi_conn_reused(const struct fcgi_conn *c)
{
    return c->reused;
}

bool fcgi_conn_connecting(const struct fcgi_conn *c)
{
    return c->connecting;
}

void fcgi_conn_connected(struct fcgi_conn *c)
{
    c->connecting = false;
}

/* ---- the limit -------------------------------------------------------------- */

/* What MaxConnections and the backend's own word allow. */
static unsigned fcgi_ceiling(struct fcgi_backend *b)
{
    unsigned said = atomic_load_explicit(&b->said, memory_order_relaxed);
    int conf = atomic_load_explicit(&b->conf_max, memory_order_relaxed);
    unsigned cap = conf > 0 ? (unsigned) conf
                   : said   ? said
                   : atomic_load_explicit(&b->gv, memory_order_relaxed) == FCGI_GV_SILENT
                       ? FCGI_AUTO_SILENT
                       : FCGI_AUTO_CHECKED;
    return said && said < cap ? said : cap;
}

unsigned fcgi_limit(struct fcgi_backend *b)
{
    unsigned cap = fcgi_ceiling(b);
    unsigned taken = atomic_load_explicit(&b->taken, memory_order_relaxed);
    return taken && taken < cap ? taken : cap;
}

/* A limit lowered to what the backend took grows by one, once per FCGI_GROW_MS. */
static bool fcgi_grow(struct fcgi_backend *b, unsigned limit)
{
    unsigned taken = atomic_load(&b->taken);
    uint64_t now = fcgi_api->now_ms(), at = atomic_load(&b->taken_ms);
    if (!taken || taken != limit || taken >= fcgi_ceiling(b) || now - at < FCGI_GROW_MS ||
        !atomic_compare_exchange_strong(&b->taken_ms, &at, now)) {
        return false;
    }
    if (!atomic_compare_exchange_strong(&b->taken, &taken, taken + 1)) {
        return false;
    }
    atomic_store(&b->probing, true); /* a check that fails now only takes the step back */
    return true;
}

/* Room for one more connection to b, all workers together: taken (active counts it) or not. */
static bool fcgi_reserve(struct fcgi_backend *b)
{
    unsigned n = atomic_load(&b->active);
    for (;;) {
        unsigned limit = fcgi_limit(b);
        if (n < limit) {
            if (atomic_compare_exchange_weak(&b->active, &n, n + 1)) {
                return true;
            }
            continue;
        }
        if (!fcgi_grow(b, limit)) {
            return false;
        }
    }
}

static void fcgi_unreserve(struct fcgi_backend *b)
{
    atomic_fetch_sub_explicit(&b->active, 1, memory_order_relaxed);
}

/* Whether a new connection may be made now: not while the first one asks (what it says first). */
static bool fcgi_may_open(struct fcgi_backend *b)
{
    return atomic_load(&b->gv) != FCGI_GV_UNKNOWN || atomic_load(&b->checking) == 0;
}

/* ---- the workers' masks ------------------------------------------------------- */

static void fcgi_mask(atomic_uint_fast64_t *mask, bool on)
{
    int w = fcgi_api->worker_id();
    if (w < 0 || w >= FCGI_WORKERS_MAX) {
        return;
    }
    uint_fast64_t bit = (uint_fast64_t) 1 << (w % 64);
    if (on) {
        atomic_fetch_or(&mask[w / 64], bit);
    }
    else {
        atomic_fetch_and(&mask[w / 64], ~bit);
    }
}

/* fn(slot) on every other worker of mask (api->worker_call). */
static void fcgi_tell(atomic_uint_fast64_t *mask, void (*fn)(void *arg), unsigned slot)
{
    int self = fcgi_api->worker_id();
    for (int word = 0; word < FCGI_WORKER_WORDS; word++) {
        uint_fast64_t bits = atomic_load(&mask[word]);
        while (bits) {
            int w = word * 64 + __builtin_ctzll(bits);
            bits &= bits - 1;
            if (w != self) {
                fcgi_api->worker_call(w, fn, (void *) (uintptr_t) slot);
            }
        }
    }
}

/* ---- lists -------------------------------------------------------------------- */

static void fcgi_idle_push(struct fcgi_conn *c)
{
    struct fcgi_pool *pool = &fcgi_pools[c->slot];
    c->next = pool->idle;
    pool->idle = c;
    if (pool->n_idle++ == 0) {
        fcgi_mask(fcgi_conn_backend(c)->holding, true);
    }
    atomic_fetch_add_explicit(&fcgi_conn_backend(c)->idle, 1, memory_order_relaxed);
}

/* Take c (idle) off its pool's idle list. */
static void fcgi_idle_remove(struct fcgi_conn *c)
{
    struct fcgi_pool *pool = &fcgi_pools[c->slot];
    for (struct fcgi_conn **p = &pool->idle; *p; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            c->next = NULL;
            if (--pool->n_idle == 0) {
                fcgi_mask(fcgi_conn_backend(c)->holding, false);
            }
            atomic_fetch_sub_explicit(&fcgi_conn_backend(c)->idle, 1, memory_order_relaxed);
            return;
        }
    }
}

static void fcgi_checking_remove(struct fcgi_conn *c)
{
    struct fcgi_pool *pool = &fcgi_pools[c->slot];
    for (struct fcgi_conn **p = &pool->checking; *p; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            c->next = NULL;
            break;
        }
    }
    pool->n_check--;
    c->checking = false;
    atomic_fetch_sub_explicit(&fcgi_conn_backend(c)->checking, 1, memory_order_relaxed);
    if (c->check_timer) {
        fcgi_api->timer_stop(c->check_timer);
        c->check_timer = NULL;
    }
    free(c->check_buf);
    c->check_buf = NULL;
}

static void fcgi_queue_push(unsigned slot, struct fcgi_req *req)
{
    struct fcgi_pool *pool = &fcgi_pools[slot];
    fcgi_req_set_slot(req, slot);
    *fcgi_req_queue_next(req) = NULL;
    if (pool->q_tail) {
        *fcgi_req_queue_next(pool->q_tail) = req;
    }
    else {
        pool->q_head = req;
    }
    pool->q_tail = req;
    if (pool->n_queued++ == 0) {
        fcgi_mask(fcgi_self()->backends[slot].waiting, true);
    }
    atomic_fetch_add_explicit(&fcgi_self()->backends[slot].queued, 1, memory_order_relaxed);
}

void fcgi_pool_unqueue(struct fcgi_req *req)
{
    unsigned slot = fcgi_req_slot(req);
    struct fcgi_pool *pool = &fcgi_pools[slot];
    struct fcgi_req *prev = NULL;

    for (struct fcgi_req *q = pool->q_head; q; prev = q, q = *fcgi_req_queue_next(q)) {
        if (q != req) {
            continue;
        }
        if (prev) {
            *fcgi_req_queue_next(prev) = *fcgi_req_queue_next(q);
        }
        else {
            pool->q_head = *fcgi_req_queue_next(q);
        }
        if (pool->q_tail == q) {
            pool->q_tail = prev;
        }
        if (--pool->n_queued == 0) {
            fcgi_mask(fcgi_self()->backends[slot].waiting, false);
        }
        atomic_fetch_sub_explicit(&fcgi_self()->backends[slot].queued, 1, memory_order_relaxed);
        return;
    }
}

/* The first request waiting for backend `slot`, taken off the queue. */
static struct fcgi_req *fcgi_dequeue(unsigned slot)
{
    struct fcgi_req *req = fcgi_pools[slot].q_head;
    if (req) {
        fcgi_pool_unqueue(req);
    }
    return req;
}

/* ---- connections ---------------------------------------------------------------- */

/* Close c, which is on no list (nor being checked): its room is given back. */
static void fcgi_conn_close(struct fcgi_conn *c)
{
    struct fcgi_backend *b = fcgi_conn_backend(c);

    if (c->w) {
        fcgi_api->fd_unwatch(c->w);
    }
    close(c->fd);
    fcgi_unreserve(b);
    free(c);
}

void fcgi_conn_want(struct fcgi_conn *c, uint32_t mask)
{
    if (c->mask != mask) {
        fcgi_api->fd_modify(c->w, mask);
        c->mask = mask;
    }
}

void fcgi_conn_attach(struct fcgi_conn *c, struct fcgi_req *req)
{
    c->req = req;
}

/* Mark backend `slot` down for down_ms, `why` its connection failed: logged, counted,
   asked again (FCGI_GET_VALUES) when it is back; the workers waiting for it move on. */
static void fcgi_backend_down(unsigned slot, uint64_t down_ms, const char *why)
{
    struct fcgi_backend *b = &fcgi_self()->backends[slot];
    atomic_store_explicit(&b->down_until, fcgi_api->now_ms() + down_ms, memory_order_relaxed);
    fcgi_api->metric_add(b->m.fail[MK_GW_FAIL_CONNECT], 1);
    atomic_store(&b->gv, FCGI_GV_UNKNOWN);
    atomic_store(&b->said, 0);
    atomic_store(&b->taken, 0);
    atomic_store(&b->peak, 0);
    fcgi_api->log(MK_PLUGIN_LOG_ERROR, "fastcgi: backend %s: %s: marked down for %llu ms", b->text,
                  why, (unsigned long long) down_ms);
}

void fcgi_pool_down(const struct fcgi_conn *c, uint64_t down_ms, const char *why)
{
    fcgi_backend_down(c->slot, down_ms, why);
}

static bool fcgi_is_down(unsigned slot)
{
    return atomic_load_explicit(&fcgi_self()->backends[slot].down_until, memory_order_relaxed) >
           fcgi_api->now_ms();
}

/* A non-blocking socket connecting to backend `slot`: the descriptor, or -1 with errno. */
static int fcgi_socket(unsigned slot, bool *connecting)
{
    const struct fcgi_backend *b = &fcgi_self()->backends[slot];
    int fd = socket(b->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    *connecting = false;
    if (connect(fd, (const struct sockaddr *) &b->sa, b->len) != 0) {
        if (errno != EINPROGRESS) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        *connecting = true;
    }
    return fd;
}

static void fcgi_conn_cb(struct mk_loop_fd *h, int fd, uint32_t ready, void *arg);
static void fcgi_check_timeout(struct mk_loop_timer *t, void *arg);

/*
 * A new connection to backend `slot`, whose room was reserved (given back
 * on failure): the connection, or NULL with errno. `site` gives its
 * settings; `checked`: FCGI_GET_VALUES goes first, and the connection is
 * this worker's to give once the backend answers.
 */
static struct fcgi_conn *fcgi_connect(unsigned slot, const struct fcgi_site *site, bool checked)
{
    struct fcgi_backend *b = &fcgi_self()->backends[slot];
    bool connecting;
    int fd = fcgi_socket(slot, &connecting);
    struct fcgi_conn *c = fd >= 0 ? calloc(1, sizeof(*c)) : NULL;

    if (c) {
        c->slot = slot;
        c->fd = fd;
        c->connecting = connecting;
        c->down_ms = site->conf->down_ms;
        c->w = fcgi_api->fd_watch(fd, 0, fcgi_conn_cb, c);
    }
    if (c && c->w && checked) {
        c->checking = true;
        c->check_buf = malloc(FCGI_CHECK_BUF);
        c->check_timer =
            fcgi_api->timer_start((uint32_t) site->conf->accept_ms, 0, fcgi_check_timeout, c);
    }
    if (!c || !c->w || (checked && (!c->check_buf || !c->check_timer))) {
        int e = fd < 0 ? errno : ENOMEM;
        if (c) {
            if (c->check_timer) {
                fcgi_api->timer_stop(c->check_timer);
            }
            free(c->check_buf);
            if (c->w) {
                fcgi_api->fd_unwatch(c->w);
            }
            free(c);
        }
        if (fd >= 0) {
            close(fd);
        }
        fcgi_unreserve(b);
        errno = e;
        return NULL;
    }
    if (checked) {
        struct fcgi_pool *pool = &fcgi_pools[slot];
        c->next = pool->checking;
        pool->checking = c;
        pool->n_check++;
        atomic_fetch_add_explicit(&b->checking, 1, memory_order_relaxed);
        fcgi_conn_want(c, MK_LOOP_WRITE); /* connected (or at once): ask */
    }
    return c;
}

int fcgi_conn_renew(struct fcgi_conn *c)
{
    bool connecting;
    int fd = fcgi_socket(c->slot, &connecting);
    if (fd < 0) {
        return MK_ERR;
    }
    struct mk_loop_fd *w = fcgi_api->fd_watch(fd, 0, fcgi_conn_cb, c);
    if (!w) {
        close(fd);
        errno = ENOMEM;
        return MK_ERR;
    }
    fcgi_api->fd_unwatch(c->w);
    close(c->fd);
    c->fd = fd;
    c->w = w;
    c->mask = 0;
    c->connecting = connecting;
    c->reused = false;
    return MK_OK;
}

static void fcgi_conn_give(struct fcgi_conn *c);

/* worker_call: a connection another worker passed on (fcgi_conn_pass), for this one. */
static void fcgi_adopt_cb(void *arg)
{
    struct fcgi_conn *c = arg;
    unsigned slot = c->slot;

    if (fcgi_api->worker_id() < 0 || fcgi_stopping ||
        !(c->w = fcgi_api->fd_watch(c->fd, 0, fcgi_conn_cb, c))) {
        /* the server stops (or no watch): closed, from whatever thread */
        close(c->fd);
        fcgi_unreserve(fcgi_conn_backend(c));
        free(c);
        if (fcgi_api->worker_id() >= 0) {
            fcgi_room(slot, true);
        }
        return;
    }
    fcgi_conn_give(c);
}

/*
 * Pass c, free, to another worker that has requests waiting for its
 * backend (its loop watches it from then on): whether it went (else the
 * caller keeps or closes it). A connection hops between workers a few
 * times at most before it stays idle somewhere.
 */
static bool fcgi_conn_pass(struct fcgi_conn *c)
{
    struct fcgi_backend *b = fcgi_conn_backend(c);
    int self = fcgi_api->worker_id();

    if (c->hops >= 3) {
        return false;
    }
    for (int word = 0; word < FCGI_WORKER_WORDS; word++) {
        uint_fast64_t bits = atomic_load(&b->waiting[word]);
        while (bits) {
            int w = word * 64 + __builtin_ctzll(bits);
            bits &= bits - 1;
            if (w == self) {
                continue;
            }
            fcgi_api->fd_unwatch(c->w);
            c->w = NULL;
            c->mask = 0;
            c->hops++;
            if (fcgi_api->worker_call(w, fcgi_adopt_cb, c) != MK_OK) {
                close(c->fd);
                fcgi_unreserve(b);
                unsigned slot = c->slot;
                free(c);
                fcgi_room(slot, true);
            }
            return true;
        }
    }
    return false;
}

/*
 * A connection free for a request (given back kept alive, just checked,
 * or passed on): the first request of this worker waiting for its backend
 * takes it; with none, it goes to another worker with requests waiting
 * for the backend (no new connection, no check: the backend's worker it
 * holds stays with it), else it is kept idle; it is closed when the
 * backend is over its limit.
 */
static void fcgi_conn_give(struct fcgi_conn *c)
{
    unsigned slot = c->slot;
    struct fcgi_backend *b = fcgi_conn_backend(c);
    struct fcgi_req *next = fcgi_stopping ? NULL : fcgi_dequeue(slot);

    if (next) {
        c->hops = 0;
        fcgi_req_connected(next, c);
        return;
    }
    if (fcgi_stopping || atomic_load(&b->active) > fcgi_limit(b)) {
        fcgi_conn_close(c);
        fcgi_room(slot, true);
        return;
    }
    if (atomic_load(&b->queued) > 0 && fcgi_conn_pass(c)) {
        return;
    }
    fcgi_conn_want(c, MK_LOOP_READ);
    fcgi_idle_push(c);
}

/* ---- the check ------------------------------------------------------------------ */

/* The connections the backend took that are open now (each holds one of its workers). */
static unsigned fcgi_taken_now(struct fcgi_backend *b)
{
    unsigned open = atomic_load(&b->active), checking = atomic_load(&b->checking);
    return open > checking ? open - checking : 0;
}

/* The backend answered the check of c: it took the connection. */
static void fcgi_check_taken(struct fcgi_conn *c, const struct fcgi_values *v)
{
    struct fcgi_backend *b = fcgi_conn_backend(c);

    if (v) {
        long least = v->max_conns > 0 && (v->max_reqs <= 0 || v->max_conns <= v->max_reqs)
                         ? v->max_conns
                         : v->max_reqs;
        unsigned said = least > 0 ? (unsigned) (least > 65535 ? 65535 : least) : 0;
        int was = FCGI_GV_UNKNOWN;
        bool first = atomic_compare_exchange_strong(&b->gv, &was, FCGI_GV_ANSWERS);
        if (atomic_exchange(&b->said, said) != said || first) {
            char conns[24] = "-", reqs[24] = "-", mpxs[24] = "-";
            if (v->max_conns >= 0) {
                conns[mk_u64_dec((uint64_t) v->max_conns, conns)] = '\0';
            }
            if (v->max_reqs >= 0) {
                reqs[mk_u64_dec((uint64_t) v->max_reqs, reqs)] = '\0';
            }
            if (v->mpxs_conns >= 0) {
                mpxs[mk_u64_dec((uint64_t) v->mpxs_conns, mpxs)] = '\0';
            }
            fcgi_api->log(MK_PLUGIN_LOG_INFO,
                          "fastcgi: backend %s: FCGI_GET_VALUES: FCGI_MAX_CONNS %s, "
                          "FCGI_MAX_REQS %s, FCGI_MPXS_CONNS %s: at most %u %s, all "
                          "workers together, each new one checked",
                          b->text, conns, reqs, mpxs, fcgi_limit(b),
                          mk_plural(fcgi_limit(b), "connection", "connections"));
        }
    }
    unsigned slot = c->slot;
    fcgi_checking_remove(c);
    atomic_store(&b->probing, false); /* a grown limit, if it was one, held */
    /* the most it was seen to hold at once: what a lowered limit keeps */
    unsigned now = fcgi_taken_now(b), peak = atomic_load(&b->peak);
    while (now > peak && !atomic_compare_exchange_weak(&b->peak, &peak, now)) {
    }
    fcgi_conn_give(c);     /* not `reused`: its first request is never sent twice */
    fcgi_room(slot, true); /* what it said may let more requests have connections */
}

/* The check of c failed at the connection (refused late, not connected in time). */
static void fcgi_check_refused(struct fcgi_conn *c, const char *why)
{
    unsigned slot = c->slot;
    fcgi_checking_remove(c);
    fcgi_backend_down(slot, c->down_ms, why);
    fcgi_conn_close(c);
    fcgi_room(slot, true); /* the waiting requests move on (the backend is down) */
}

/* The backend closed c or broke the protocol answering its check: no more checks. */
static void fcgi_check_declined(struct fcgi_conn *c, const char *why)
{
    unsigned slot = c->slot;
    struct fcgi_backend *b = fcgi_conn_backend(c);

    if (atomic_exchange(&b->gv, FCGI_GV_SILENT) != FCGI_GV_SILENT) {
        fcgi_api->log(MK_PLUGIN_LOG_INFO,
                      "fastcgi: backend %s %s FCGI_GET_VALUES: new connections go unchecked, "
                      "at most %u",
                      b->text, why, fcgi_limit(b));
    }
    atomic_store(&b->taken, 0);
    fcgi_checking_remove(c);
    fcgi_conn_close(c);
    fcgi_room(slot, true); /* its requests get unchecked connections */
}

/* Bytes of the answer to the check: one record, GET_VALUES_RESULT or UNKNOWN_TYPE. */
static void fcgi_check_read(struct fcgi_conn *c)
{
    ssize_t n = recv(c->fd, c->check_buf + c->check_len, FCGI_CHECK_BUF - c->check_len, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return;
    }
    if (n < 0) {
        fcgi_check_refused(c, strerror(errno));
        return;
    }
    if (n == 0) {
        fcgi_check_declined(c, "closes the connection at");
        return;
    }
    c->check_len += (size_t) n;
    if (c->check_len < FCGI_HEADER_LEN) {
        return;
    }
    const uint8_t *h = c->check_buf;
    size_t clen = (size_t) (h[4] << 8 | h[5]), need = FCGI_HEADER_LEN + clen + h[6];
    if (h[0] != FCGI_VERSION_1 || need > FCGI_CHECK_BUF || c->check_len > need ||
        (h[1] != FCGI_GET_VALUES_RESULT && h[1] != FCGI_UNKNOWN_TYPE)) {
        fcgi_check_declined(c, "breaks the protocol answering");
        return;
    }
    if (c->check_len < need) {
        return;
    }
    char b;
    if (recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
        /* it answered and closed at once (a php-fpm that ends a connection
           after a management record): asking costs every connection */
        fcgi_check_declined(c, "closes the connection after answering");
        return;
    }
    struct fcgi_values v;
    if (h[1] == FCGI_GET_VALUES_RESULT &&
        fcgi_values_parse(h + FCGI_HEADER_LEN, clen, &v) == MK_OK) {
        fcgi_check_taken(c, &v);
        return;
    }
    fcgi_check_taken(c, NULL); /* FCGI_UNKNOWN_TYPE: taken all the same, nothing learned */
}

static void fcgi_check_io(struct fcgi_conn *c, uint32_t ready)
{
    if (c->connecting) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err) {
            fcgi_check_refused(c, strerror(err));
            return;
        }
        if (!(ready & MK_LOOP_WRITE)) {
            return;
        }
        c->connecting = false;
    }
    if (!c->asked) {
        uint8_t gv[FCGI_GET_VALUES_LEN];
        fcgi_get_values(gv);
        if (send(c->fd, gv, sizeof(gv), MSG_NOSIGNAL) != (ssize_t) sizeof(gv)) {
            fcgi_check_refused(c, errno ? strerror(errno) : "a short write");
            return;
        }
        c->asked = true;
        fcgi_conn_want(c, MK_LOOP_READ);
        return;
    }
    if (ready & (MK_LOOP_READ | MK_LOOP_ERROR)) {
        fcgi_check_read(c);
    }
}

/* AcceptTimeout passed without an answer to c's check. */
static void fcgi_check_timeout(struct mk_loop_timer *t, void *arg)
{
    struct fcgi_conn *c = arg;
    struct fcgi_backend *b = fcgi_conn_backend(c);
    unsigned slot = c->slot;

    (void) t;
    c->check_timer = NULL; /* a one-shot timer: freed when this returns */
    if (c->connecting) {
        fcgi_check_refused(c, "not connected within AcceptTimeout");
        return;
    }
    if (atomic_load(&b->gv) == FCGI_GV_UNKNOWN && atomic_load(&b->active) == 1) {
        /* nothing else open, so nothing keeps the backend's workers busy: it
           does not answer management records. The request goes on this one. */
        if (atomic_exchange(&b->gv, FCGI_GV_SILENT) != FCGI_GV_SILENT) {
            fcgi_api->log(MK_PLUGIN_LOG_INFO,
                          "fastcgi: backend %s does not answer FCGI_GET_VALUES: new "
                          "connections go unchecked, at most %u",
                          b->text, fcgi_limit(b));
        }
        atomic_store(&b->taken, 0);
        fcgi_checking_remove(c);
        fcgi_conn_give(c);
        fcgi_room(slot, true);
        return;
    }
    /* Not taken: every worker of the backend is held by another connection.
       Closed with nothing of a request in it; the limit becomes what it took:
       the most it held at once (connections come and go between the workers,
       so those open now may be fewer), at least one. */
    atomic_fetch_add_explicit(&b->not_accepted, 1, memory_order_relaxed);
    fcgi_checking_remove(c);
    fcgi_conn_close(c);
    unsigned open = atomic_load(&b->active), took = fcgi_taken_now(b);
    unsigned peak = atomic_exchange(&b->peak, 0);
    took = took > peak ? took : peak;
    if (took < 1) {
        took = 1;
    }
    atomic_store(&b->peak, took);
    unsigned was = atomic_exchange(&b->taken, took);
    atomic_store(&b->taken_ms, fcgi_api->now_ms());
    bool probe = atomic_exchange(&b->probing, false) && was == took + 1;
    if (was != took) {
        fcgi_api->log(probe ? MK_PLUGIN_LOG_DEBUG : MK_PLUGIN_LOG_WARN,
                      "fastcgi: backend %s did not take a new connection within AcceptTimeout "
                      "while %u of its connections were open: at most %u from now on",
                      b->text, open, fcgi_limit(b));
    }
    fcgi_room(slot, true);
}

static void fcgi_conn_cb(struct mk_loop_fd *h, int fd, uint32_t ready, void *arg)
{
    struct fcgi_conn *c = arg;
    (void) h;
    if (c->req) {
        fcgi_req_io(c->req, ready);
        return;
    }
    if (c->checking) {
        fcgi_check_io(c, ready);
        return;
    }
    /* Idle: anything but silence (EOF, an error, stray bytes) ends it. */
    char b[64];
    ssize_t n = read(fd, b, sizeof(b));
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return;
    }
    unsigned slot = c->slot;
    fcgi_idle_remove(c);
    fcgi_conn_close(c);
    fcgi_room(slot, true);
}

/* ---- room: the queue served as the limit allows ------------------------------------ */

/*
 * The requests of this worker waiting for backend `slot` (the first one's
 * site gives the settings): with the backend down, they move on to the
 * next backend of their site (fcgi_req_connected with NULL); else new
 * connections for them as far as the limit allows: checked ones (the
 * request waits on), or unchecked ones, which the first request takes at
 * once.
 */
static void fcgi_serve_queue(unsigned slot)
{
    struct fcgi_pool *pool = &fcgi_pools[slot];
    struct fcgi_backend *b = &fcgi_self()->backends[slot];

    while (pool->q_head && !fcgi_is_down(slot) && pool->n_queued > pool->n_check &&
           fcgi_may_open(b) && fcgi_reserve(b)) {
        bool checked = atomic_load(&b->gv) != FCGI_GV_SILENT;
        const struct fcgi_site *site = fcgi_req_site(pool->q_head);
        struct fcgi_conn *nc = fcgi_connect(slot, site, checked);
        if (!nc) {
            if (errno == ENOMEM || errno == EMFILE || errno == ENFILE) {
                /* the server is short, not the backend: the first moves on */
                fcgi_req_connected(fcgi_dequeue(slot), NULL);
                continue;
            }
            fcgi_backend_down(slot, site->conf->down_ms, strerror(errno));
            break;
        }
        if (!checked) {
            fcgi_req_connected(fcgi_dequeue(slot), nc);
        }
    }
    if (fcgi_is_down(slot)) {
        struct fcgi_req *req;
        while ((req = fcgi_dequeue(slot))) {
            fcgi_req_connected(req, NULL);
        }
    }
}

/* worker_call: a connection to backend `slot` closed elsewhere (or it went down). */
static void fcgi_room_cb(void *arg)
{
    unsigned slot = (unsigned) (uintptr_t) arg;
    if (fcgi_api->worker_id() >= 0 && slot < atomic_load(&fcgi_self()->n_backends)) {
        fcgi_serve_queue(slot);
    }
}

/* worker_call: another worker waits for backend `slot`: one idle connection goes to it. */
static void fcgi_trim_cb(void *arg)
{
    unsigned slot = (unsigned) (uintptr_t) arg;
    if (fcgi_api->worker_id() < 0 || fcgi_stopping ||
        slot >= atomic_load(&fcgi_self()->n_backends)) {
        return;
    }
    struct fcgi_pool *pool = &fcgi_pools[slot];
    struct fcgi_backend *b = &fcgi_self()->backends[slot];
    if (pool->idle && pool->n_queued == 0 && atomic_load(&b->queued) > 0) {
        struct fcgi_conn *c = pool->idle;
        fcgi_idle_remove(c);
        c->hops = 0;
        if (!fcgi_conn_pass(c)) {
            fcgi_conn_close(c); /* nobody waits any more: room all the same */
            fcgi_room(slot, true);
        }
    }
}

/*
 * A connection to backend `slot` was closed (or the limit changed): this
 * worker's waiting requests get what room there is; `tell`: the other
 * workers waiting for it are told too (they try in turn).
 */
static void fcgi_room(unsigned slot, bool tell)
{
    struct fcgi_backend *b = &fcgi_self()->backends[slot];

    if (fcgi_stopping) {
        return; /* the queue holds requests being freed */
    }
    fcgi_serve_queue(slot);
    if (tell && atomic_load(&b->queued) > fcgi_pools[slot].n_queued) {
        fcgi_tell(b->waiting, fcgi_room_cb, slot);
    }
}

/* ---- picking a connection ------------------------------------------------------------ */

/*
 * The first backend of the site in turn that is neither in *tried nor
 * marked down and has an idle connection or room for a new one: MK_OK
 * (*out set: idle, or new and unchecked), MK_SUSPENDED (`queue`: a checked
 * connection is being made for req, queued on that backend), 503 (out of
 * descriptors or memory), or MK_AGAIN (none; *full is the first one at its
 * limit, or -1). A backend that refuses a new connection is marked down
 * and passed over; each one tried gets its bit.
 */
static int fcgi_pool_pick(struct fcgi_req *req, const struct fcgi_site *site, uint64_t *tried,
                          struct fcgi_conn **out, int *full)
{
    struct fcgi_self *self = fcgi_self();
    unsigned start = fcgi_rr++;

    *full = -1;
    for (unsigned i = 0; i < site->n_slots; i++) {
        unsigned slot = site->slots[(start + i) % site->n_slots];
        struct fcgi_pool *pool = &fcgi_pools[slot];
        struct fcgi_backend *b = &self->backends[slot];
        if ((*tried & (UINT64_C(1) << slot)) || fcgi_is_down(slot)) {
            continue;
        }
        if (pool->idle) {
            *tried |= UINT64_C(1) << slot;
            *out = pool->idle;
            fcgi_idle_remove(*out);
            return MK_OK;
        }
        if (req && pool->n_check > pool->n_queued) {
            /* a connection being checked has no request waiting yet: this one */
            *tried |= UINT64_C(1) << slot;
            fcgi_queue_push(slot, req);
            return MK_SUSPENDED;
        }
        if ((req && !fcgi_may_open(b)) || !fcgi_reserve(b)) {
            if (*full < 0) {
                *full = (int) slot;
            }
            continue;
        }
        *tried |= UINT64_C(1) << slot;
        bool checked = req && atomic_load(&b->gv) != FCGI_GV_SILENT;
        struct fcgi_conn *c = fcgi_connect(slot, site, checked);
        if (c && checked) {
            fcgi_queue_push(slot, req); /* the connection, once taken, serves the queue */
            return MK_SUSPENDED;
        }
        if ((*out = c)) {
            return MK_OK;
        }
        if (errno == ENOMEM || errno == EMFILE || errno == ENFILE) {
            return 503;
        }
        fcgi_backend_down(slot, site->conf->down_ms, strerror(errno));
    }
    return MK_AGAIN;
}

int fcgi_pool_acquire(struct fcgi_req *req, const struct fcgi_site *site, uint64_t *tried,
                      struct fcgi_conn **out)
{
    int full;
    int rc = fcgi_pool_pick(req, site, tried, out, &full);
    if (rc == MK_SUSPENDED) {
        return MK_AGAIN;
    }
    if (rc != MK_AGAIN) {
        return rc;
    }
    if (full < 0) {
        return 502;
    }
    unsigned slot = (unsigned) full;
    struct fcgi_backend *b = &fcgi_self()->backends[slot];
    fcgi_queue_push(slot, req);
    if (atomic_load(&b->idle) > fcgi_pools[slot].n_idle) {
        fcgi_tell(b->holding, fcgi_trim_cb, slot); /* idle elsewhere: one of them is room */
    }
    return MK_AGAIN;
}

int fcgi_pool_next(const struct fcgi_site *site, uint64_t *tried, struct fcgi_conn **out)
{
    int full;
    return fcgi_pool_pick(NULL, site, tried, out, &full) == MK_OK ? MK_OK : MK_ERR;
}

void fcgi_pool_release(struct fcgi_conn *c, bool keep)
{
    unsigned slot = c->slot;

    c->req = NULL;
    if (!keep) {
        fcgi_conn_close(c);
        fcgi_room(slot, true);
        return;
    }
    c->reused = true;
    fcgi_conn_give(c);
}

void fcgi_pool_worker_stopping(void)
{
    fcgi_stopping = true;
}

void fcgi_pool_worker_exit(void)
{
    for (unsigned slot = 0; slot < FCGI_BACKENDS_MAX; slot++) {
        struct fcgi_pool *pool = &fcgi_pools[slot];
        while (pool->idle) {
            struct fcgi_conn *c = pool->idle;
            fcgi_idle_remove(c);
            fcgi_conn_close(c);
        }
        while (pool->checking) {
            struct fcgi_conn *c = pool->checking;
            fcgi_checking_remove(c);
            fcgi_conn_close(c);
        }
        /* the requests are gone already (fcgi_req_worker_exit) */
        pool->q_head = pool->q_tail = NULL;
        if (pool->n_queued) {
            fcgi_mask(fcgi_self()->backends[slot].waiting, false);
            atomic_fetch_sub(&fcgi_self()->backends[slot].queued, pool->n_queued);
            pool->n_queued = 0;
        }
    }
}
