/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fcgi_pool.c: backends and their connections. A backend's health (down
 * until when) and counters live in the server's struct fcgi_self, shared
 * by the workers through atomics. Connections live on one worker's loop,
 * so each worker keeps its own pool per backend: idle connections kept
 * alive (FCGI_KEEP_CONN) for the next request, at most MaxConnections open,
 * and a FIFO of the requests waiting for one. An idle connection stays
 * watched, so that one the backend closes (php-fpm's request limit, a
 * restart) is noticed and dropped before a request picks it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fastcgi.h"

struct fcgi_conn {
    struct fcgi_conn *next; /* the idle list */
    unsigned slot;
    int fd;
    struct mk_loop_fd *w;
    struct fcgi_req *req; /* NULL while idle */
    uint32_t mask;        /* the interest registered, to skip needless epoll_ctl */
    bool connecting;
    bool reused; /* it served a request before: the backend may have closed it meanwhile */
};

struct fcgi_pool {
    struct fcgi_conn *idle;
    unsigned open; /* this worker's connections to the backend */
    struct fcgi_req *q_head, *q_tail;
};

static __thread struct fcgi_pool fcgi_pools[FCGI_BACKENDS_MAX];
static __thread unsigned fcgi_rr; /* round-robin position of this worker */

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

static void fcgi_conn_close(struct fcgi_conn *c)
{
    struct fcgi_backend *b = fcgi_conn_backend(c);

    if (c->w) {
        fcgi_api->fd_unwatch(c->w);
    }
    close(c->fd);
    fcgi_pools[c->slot].open--;
    atomic_fetch_sub_explicit(&b->active, 1, memory_order_relaxed);
    free(c);
}

/* Remove c from its pool's idle list. */
static void fcgi_idle_remove(struct fcgi_conn *c)
{
    for (struct fcgi_conn **p = &fcgi_pools[c->slot].idle; *p; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            c->next = NULL;
            return;
        }
    }
}

static void fcgi_conn_cb(struct mk_loop_fd *h, int fd, uint32_t ready, void *arg)
{
    struct fcgi_conn *c = arg;
    (void) h;
    if (c->req) {
        fcgi_req_io(c->req, ready);
        return;
    }
    /* Idle: anything but silence (EOF, an error, stray bytes) ends it. */
    char b[64];
    ssize_t n = read(fd, b, sizeof(b));
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return;
    }
    fcgi_idle_remove(c);
    fcgi_conn_close(c);
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

/* Mark backend `slot` down for down_ms, `why` its connection failed. */
static void fcgi_backend_down(unsigned slot, uint64_t down_ms, const char *why)
{
    struct fcgi_backend *b = &fcgi_self()->backends[slot];
    atomic_store_explicit(&b->down_until, fcgi_api->now_ms() + down_ms, memory_order_relaxed);
    atomic_fetch_add_explicit(&b->failures, 1, memory_order_relaxed);
    fcgi_api->log(MK_PLUGIN_LOG_ERROR, "fastcgi: backend %s: %s: marked down for %llu ms", b->text,
                  why, (unsigned long long) down_ms);
}

void fcgi_pool_down(const struct fcgi_conn *c, uint64_t down_ms, const char *why)
{
    fcgi_backend_down(c->slot, down_ms, why);
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

/* A new connection to backend `slot`: the connection, or NULL with errno. */
static struct fcgi_conn *fcgi_connect(unsigned slot)
{
    bool connecting;
    int fd = fcgi_socket(slot, &connecting);
    if (fd < 0) {
        return NULL;
    }
    struct fcgi_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    c->slot = slot;
    c->fd = fd;
    c->connecting = connecting;
    if (!(c->w = fcgi_api->fd_watch(fd, 0, fcgi_conn_cb, c))) {
        close(fd);
        free(c);
        errno = ENOMEM;
        return NULL;
    }
    fcgi_pools[slot].open++;
    atomic_fetch_add_explicit(&fcgi_self()->backends[slot].active, 1, memory_order_relaxed);
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

/*
 * The first backend of the site in turn that is neither in *tried nor
 * marked down and has an idle connection or room for a new one: MK_OK
 * (*out set), 503 (out of descriptors or memory), or MK_AGAIN (none; *full
 * is the first one at MaxConnections, or -1). A backend that refuses a new
 * connection is marked down and passed over; each one tried gets its bit.
 */
static int fcgi_pool_pick(const struct fcgi_site *site, uint64_t *tried, struct fcgi_conn **out,
                          int *full)
{
    struct fcgi_self *self = fcgi_self();
    uint64_t now = fcgi_api->now_ms();
    unsigned start = fcgi_rr++;

    *full = -1;
    for (unsigned i = 0; i < site->n_slots; i++) {
        unsigned slot = site->slots[(start + i) % site->n_slots];
        struct fcgi_pool *pool = &fcgi_pools[slot];
        if ((*tried & (UINT64_C(1) << slot)) ||
            atomic_load_explicit(&self->backends[slot].down_until, memory_order_relaxed) > now) {
            continue;
        }
        if (pool->idle) {
            *tried |= UINT64_C(1) << slot;
            *out = pool->idle;
            pool->idle = pool->idle->next;
            (*out)->next = NULL;
            return MK_OK;
        }
        if (pool->open >= (unsigned) site->conf->max_conns) {
            if (*full < 0) {
                *full = (int) slot;
            }
            continue;
        }
        *tried |= UINT64_C(1) << slot;
        if ((*out = fcgi_connect(slot))) {
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
    int rc = fcgi_pool_pick(site, tried, out, &full);
    if (rc != MK_AGAIN) {
        return rc;
    }
    if (full < 0) {
        return 502;
    }
    struct fcgi_pool *pool = &fcgi_pools[full];
    fcgi_req_set_slot(req, (unsigned) full);
    *fcgi_req_queue_next(req) = NULL;
    if (pool->q_tail) {
        *fcgi_req_queue_next(pool->q_tail) = req;
    }
    else {
        pool->q_head = req;
    }
    pool->q_tail = req;
    atomic_fetch_add_explicit(&fcgi_self()->backends[full].queued, 1, memory_order_relaxed);
    return MK_AGAIN;
}

int fcgi_pool_next(const struct fcgi_site *site, uint64_t *tried, struct fcgi_conn **out)
{
    int full;
    return fcgi_pool_pick(site, tried, out, &full) == MK_OK ? MK_OK : MK_ERR;
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

/*
 * A connection to backend `slot` was closed: the first request waiting for
 * one gets a new connection in its place. When the backend refuses it at
 * once, it is marked down, and every request waiting for it moves on to
 * the next backend of its site (fcgi_req_connected with NULL: each backend
 * once per request) instead of failing or waiting for its QueueTimeout.
 */
static void fcgi_pool_replace(unsigned slot)
{
    struct fcgi_req *next = fcgi_dequeue(slot);
    if (!next) {
        return;
    }
    struct fcgi_conn *nc = fcgi_connect(slot);
    if (nc) {
        fcgi_req_connected(next, nc);
        return;
    }
    if (errno == ENOMEM || errno == EMFILE || errno == ENFILE) {
        fcgi_req_connected(next, NULL); /* the server is short, not the backend */
        return;
    }
    fcgi_backend_down(slot, fcgi_req_site(next)->conf->down_ms, strerror(errno));
    do {
        fcgi_req_connected(next, NULL);
    } while ((next = fcgi_dequeue(slot)));
}

void fcgi_pool_release(struct fcgi_conn *c, bool keep)
{
    unsigned slot = c->slot;

    c->req = NULL;
    if (!keep) {
        fcgi_conn_close(c);
        fcgi_pool_replace(slot);
        return;
    }
    struct fcgi_req *next = fcgi_dequeue(slot);
    if (next) {
        c->reused = true;
        fcgi_req_connected(next, c);
        return;
    }
    fcgi_conn_want(c, MK_LOOP_READ);
    c->reused = true;
    c->next = fcgi_pools[slot].idle;
    fcgi_pools[slot].idle = c;
}

void fcgi_pool_worker_exit(void)
{
    for (unsigned slot = 0; slot < FCGI_BACKENDS_MAX; slot++) {
        struct fcgi_pool *pool = &fcgi_pools[slot];
        while (pool->idle) {
            struct fcgi_conn *c = pool->idle;
            pool->idle = c->next;
            fcgi_conn_close(c);
        }
        pool->q_head = pool->q_tail = NULL;
    }
}
