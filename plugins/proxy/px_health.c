/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * px_health.c: active health checks. A group's Health line asks for a
 * periodic request to a path on each of its servers; a server whose
 * checks fail `fall` times in a row is out of every group until `rise`
 * checks in a row pass. The checks run on one thread of the plugin per
 * server process, off the workers: it sleeps in poll() between rounds and
 * runs the checks due at once, each with its own deadline, so that a
 * black-holed server delays no other.
 *
 * Registration follows the groups' lives: site_init resolves a route to a
 * group and registers its servers' checks (px_health_holds), site_free
 * drops them (px_health_release). A server is checked while a configuration
 * holds it; with several groups asking, the last registration's settings
 * are used. The workers read only the result, px_server.hc_down.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proxy.h"

/* A check in flight. */
enum px_probe_state { PX_PROBE_CONNECT, PX_PROBE_HANDSHAKE, PX_PROBE_SEND, PX_PROBE_READ };
struct px_probe {
    int fd;
    unsigned slot;
    enum px_probe_state state;
    short events; /* what poll() waits for */
    void *ssl;    /* a tls:// server's (px_tls.c) */
    size_t got;
    char buf[64]; /* enough for the status line's first bytes */
    uint64_t deadline;
};

static uint64_t px_hc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

static void px_wake(struct px_self *self)
{
    if (self->hc_pipe[1] >= 0 && write(self->hc_pipe[1], "x", 1) < 0) {
        /* full: the thread wakes anyway */
    }
}

void px_health_holds(struct px_self *self, const unsigned *slot, unsigned n,
                     const struct px_health *h, void *tls_ctx)
{
    pthread_mutex_lock(&self->hc_lock);
    self->refs++;
    for (unsigned i = 0; i < n; i++) {
        struct px_hc *c = &self->hc[slot[i]];
        c->set = *h; /* its numbers; the strings are copied: */
        snprintf(c->path, sizeof(c->path), "%s", h->path);
        snprintf(c->host, sizeof(c->host), "%s", h->host ? h->host : "");
        if (c->holds++ == 0) {
            c->next = 0; /* checked in the next round */
            c->ok_run = c->fail_run = 0;
        }
#ifdef PX_TLS
        if (tls_ctx && self->servers[slot[i]].a.tls && c->tls_ctx != tls_ctx) {
            px_tls_ctx_ref(tls_ctx); /* the configuration's, kept while it checks */
            px_tls_ctx_unref(c->tls_ctx);
            c->tls_ctx = tls_ctx;
        }
#else
        (void) tls_ctx;
#endif
    }
    pthread_cond_signal(&self->hc_wake);
    pthread_mutex_unlock(&self->hc_lock);
    px_wake(self);
}

/* Free self once nothing refers to it: the lock is not held. */
static void px_self_free(struct px_self *self)
{
#ifdef PX_TLS
    for (unsigned i = 0; i < PX_SERVERS_MAX; i++) {
        px_tls_ctx_unref(self->hc[i].tls_ctx);
    }
#endif
    if (self->hc_pipe[0] >= 0) {
        close(self->hc_pipe[0]);
        close(self->hc_pipe[1]);
    }
    pthread_cond_destroy(&self->hc_wake);
    pthread_mutex_destroy(&self->hc_lock);
    px_metrics_free(self);
    free(self);
}

void px_health_release(struct px_self *self, const unsigned *slot, unsigned n)
{
    pthread_mutex_lock(&self->hc_lock);
    for (unsigned i = 0; i < n; i++) {
        struct px_hc *c = &self->hc[slot[i]];
        if (c->holds > 0 && --c->holds == 0) {
            /* no configuration checks it now: passive health alone decides */
            atomic_store_explicit(&self->servers[slot[i]].hc_down, false, memory_order_relaxed);
#ifdef PX_TLS
            px_tls_ctx_unref(c->tls_ctx);
            c->tls_ctx = NULL;
#endif
        }
    }
    bool last = --self->refs == 0;
    pthread_mutex_unlock(&self->hc_lock);
    if (last) {
        px_self_free(self);
    }
}

/* A non-blocking connection to slot's server: the descriptor, or -1. */
static int px_probe_open(struct px_self *self, unsigned slot)
{
    const struct px_addr *a = &self->servers[slot].a;
    int fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    if (connect(fd, (const struct sockaddr *) &a->sa, a->len) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Count one check's outcome: ok, or failed with why. Under hc_lock. */
static void px_probe_done(struct px_self *self, unsigned slot, bool ok, const char *why)
{
    struct px_hc *c = &self->hc[slot];
    struct px_server *s = &self->servers[slot];
    bool down = atomic_load_explicit(&s->hc_down, memory_order_relaxed);

    atomic_fetch_add_explicit(&s->checks, 1, memory_order_relaxed);
    if (c->holds == 0) {
        return; /* dropped while it ran */
    }
    if (ok) {
        c->fail_run = 0;
        if (down && ++c->ok_run >= c->set.rise) {
            atomic_store_explicit(&s->hc_down, false, memory_order_relaxed);
            px_api->log(MK_PLUGIN_LOG_INFO, "proxy: %s is up again (%d checks of %s passed)",
                        s->a.text, c->ok_run, c->path);
        }
        return;
    }
    atomic_fetch_add_explicit(&s->check_failures, 1, memory_order_relaxed);
    c->ok_run = 0;
    if (!down && ++c->fail_run >= c->set.fall) {
        atomic_store_explicit(&s->hc_down, true, memory_order_relaxed);
        px_api->log(MK_PLUGIN_LOG_WARN, "proxy: %s is down: %d checks of %s failed, the last: %s",
                    s->a.text, c->fail_run, c->path, why);
    }
}

/* A failed check: counted (p->slot's state), false for the caller to return. */
static bool px_probe_fail(struct px_self *self, const struct px_probe *p, const char *why)
{
    pthread_mutex_lock(&self->hc_lock);
    px_probe_done(self, p->slot, false, why);
    pthread_mutex_unlock(&self->hc_lock);
    return false;
}

/* Advance probe p after poll said `ev`: true while it goes on (p->events set). */
static bool px_probe_step(struct px_self *self, struct px_probe *p, short ev)
{
    const struct px_hc *c = &self->hc[p->slot];

    if (p->state == PX_PROBE_CONNECT) {
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0) {
            return px_probe_fail(self, p, strerror(err ? err : errno));
        }
        if (!(ev & POLLOUT)) {
            return true;
        }
        p->state = p->ssl ? PX_PROBE_HANDSHAKE : PX_PROBE_SEND;
    }
#ifdef PX_TLS
    if (p->state == PX_PROBE_HANDSHAKE) {
        char why[256];
        uint32_t want = MK_LOOP_WRITE;
        int rc = px_tls_handshake(p->ssl, &want, why, sizeof(why));
        if (rc == MK_AGAIN) {
            p->events = want == MK_LOOP_READ ? POLLIN : POLLOUT;
            return true;
        }
        if (rc != MK_OK) {
            return px_probe_fail(self, p, why);
        }
        p->state = PX_PROBE_SEND;
    }
#endif
    if (p->state == PX_PROBE_SEND) {
        /* Host: the line's host=, else the server's address (localhost for a socket) */
        const char *text = self->servers[p->slot].a.text;
        const char *host = c->host[0]                     ? c->host
                           : self->servers[p->slot].a.tls ? self->servers[p->slot].a.name
                           : strncmp(text, "unix:", 5)    ? text
                                                          : "localhost";
        char req[768];
        int n = snprintf(req, sizeof(req),
                         "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: monkey-health-check\r\n"
                         "Connection: close\r\n\r\n",
                         c->path, host);
        /* a few hundred bytes into a fresh connection's empty buffer: all or nothing */
        ssize_t k = -1;
#ifdef PX_TLS
        if (p->ssl) {
            k = n < 0 ? -1 : px_tls_send(p->ssl, req, (size_t) n);
        }
        else
#endif
            if (n >= 0) {
            k = send(p->fd, req, (size_t) n, MSG_NOSIGNAL);
        }
        if (k != n) {
            return px_probe_fail(self, p, "the request could not be sent");
        }
        p->state = PX_PROBE_READ;
        p->events = POLLIN;
        return true;
    }
    ssize_t n;
#ifdef PX_TLS
    if (p->ssl) {
        n = px_tls_recv(p->ssl, p->buf + p->got, sizeof(p->buf) - p->got);
    }
    else
#endif
        n = recv(p->fd, p->buf + p->got, sizeof(p->buf) - p->got, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return true;
    }
    if (n > 0) {
        p->got += (size_t) n;
        if (p->got < 12) {
            return true;
        }
    }
    int status = px_resp_status(p->buf, p->got);
    char why[64];
    if (n <= 0 && p->got < 12) {
        snprintf(why, sizeof(why), "%s", n == 0 ? "closed before an answer" : strerror(errno));
    }
    else if (status == 0) {
        snprintf(why, sizeof(why), "not an HTTP/1 answer");
    }
    else {
        snprintf(why, sizeof(why), "status %d", status);
    }
    pthread_mutex_lock(&self->hc_lock);
    px_probe_done(self, p->slot, status >= 200 && status < 400, why);
    pthread_mutex_unlock(&self->hc_lock);
    return false;
}

/* Close probe p's connection. */
static void px_probe_close(struct px_probe *p)
{
#ifdef PX_TLS
    if (p->ssl) {
        px_tls_free(p->ssl, false);
    }
#endif
    close(p->fd);
}

/* Start the checks that are due (under hc_lock): how many probes run now. */
static size_t px_probes_start(struct px_self *self, struct px_probe *probes, size_t running,
                              uint64_t now)
{
    unsigned n = atomic_load(&self->n_servers);
    for (unsigned i = 0; i < n; i++) {
        struct px_hc *c = &self->hc[i];
        if (c->holds == 0 || c->busy || c->next > now) {
            continue;
        }
        c->next = now + c->set.interval_ms;
        int fd = px_probe_open(self, i);
        if (fd < 0) {
            px_probe_done(self, i, false, strerror(errno));
            continue;
        }
        void *ssl = NULL;
#ifdef PX_TLS
        if (self->servers[i].a.tls &&
            (!c->tls_ctx || !(ssl = px_tls_new(c->tls_ctx, fd, &self->servers[i].a, UINT_MAX)))) {
            close(fd);
            px_probe_done(self, i, false, "no TLS context");
            continue;
        }
#endif
        c->busy = true;
        probes[running++] = (struct px_probe){.fd = fd,
                                              .slot = i,
                                              .events = POLLOUT,
                                              .ssl = ssl,
                                              .deadline = now + c->set.timeout_ms};
    }
    return running;
}

/* The time to the next due check, in ms (under hc_lock); -1: none is held. */
static int px_probes_wait(struct px_self *self, uint64_t now)
{
    unsigned n = atomic_load(&self->n_servers);
    uint64_t next = UINT64_MAX;
    for (unsigned i = 0; i < n; i++) {
        if (self->hc[i].holds > 0 && !self->hc[i].busy && self->hc[i].next < next) {
            next = self->hc[i].next;
        }
    }
    if (next == UINT64_MAX) {
        return -1;
    }
    return next <= now ? 0 : (int) (next - now < 60000 ? next - now : 60000);
}

static void *px_health_run(void *arg)
{
    struct px_self *self = arg;
    struct px_probe probes[PX_SERVERS_MAX];
    struct pollfd pfd[PX_SERVERS_MAX + 1];
    size_t running = 0;

    pthread_mutex_lock(&self->hc_lock);
    while (!self->hc_stop) {
        uint64_t now = px_hc_now();
        running = px_probes_start(self, probes, running, now);
        int wait = px_probes_wait(self, now);
        if (running == 0) {
            if (wait < 0) {
                pthread_cond_wait(&self->hc_wake, &self->hc_lock);
            }
            else if (wait > 0) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_sec += wait / 1000;
                ts.tv_nsec += (long) (wait % 1000) * 1000000;
                if (ts.tv_nsec >= 1000000000) {
                    ts.tv_sec++;
                    ts.tv_nsec -= 1000000000;
                }
                pthread_cond_timedwait(&self->hc_wake, &self->hc_lock, &ts);
            }
            continue;
        }
        pthread_mutex_unlock(&self->hc_lock);
        uint64_t soonest = UINT64_MAX;
        for (size_t i = 0; i < running; i++) {
            pfd[i] = (struct pollfd){.fd = probes[i].fd, .events = probes[i].events};
            soonest = probes[i].deadline < soonest ? probes[i].deadline : soonest;
        }
        /* the wake pipe: a stop, or a new hold, ends the wait */
        pfd[running] = (struct pollfd){.fd = self->hc_pipe[0], .events = POLLIN};
        int ms = soonest <= now ? 0 : (int) (soonest - now);
        if (wait >= 0 && wait < ms) {
            ms = wait;
        }
        poll(pfd, running + 1, ms);
        if (pfd[running].revents & POLLIN) {
            char drain[16];
            while (read(self->hc_pipe[0], drain, sizeof(drain)) > 0) {
            }
        }
        now = px_hc_now();
        size_t kept = 0;
        for (size_t i = 0; i < running; i++) {
            struct px_probe *p = &probes[i];
            bool more;
            if (pfd[i].revents) {
                more = px_probe_step(self, p, pfd[i].revents);
            }
            else {
                more = true;
            }
            if (more && now >= p->deadline) {
                pthread_mutex_lock(&self->hc_lock);
                px_probe_done(self, p->slot, false, "timed out");
                pthread_mutex_unlock(&self->hc_lock);
                more = false;
            }
            if (more) {
                probes[kept++] = *p;
                continue;
            }
            px_probe_close(p);
            pthread_mutex_lock(&self->hc_lock);
            self->hc[p->slot].busy = false;
            pthread_mutex_unlock(&self->hc_lock);
        }
        running = kept;
        pthread_mutex_lock(&self->hc_lock);
    }
    pthread_mutex_unlock(&self->hc_lock);
    for (size_t i = 0; i < running; i++) {
        px_probe_close(&probes[i]);
    }
    return NULL;
}

int px_health_init(struct px_self *self)
{
    pthread_mutex_init(&self->hc_lock, NULL);
    pthread_cond_init(&self->hc_wake, NULL);
    self->refs = 1;
    if (pipe2(self->hc_pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
        self->hc_pipe[0] = self->hc_pipe[1] = -1;
        return MK_ERR;
    }
    return MK_OK;
}

void px_health_start(struct px_self *self)
{
    pthread_mutex_lock(&self->hc_lock);
    if (!self->hc_running && !self->hc_stop) {
        self->hc_running = pthread_create(&self->hc_thread, NULL, px_health_run, self) == 0;
        if (!self->hc_running) {
            px_api->log(MK_PLUGIN_LOG_ERROR,
                        "proxy: the health check thread cannot start: checks are off");
        }
    }
    pthread_mutex_unlock(&self->hc_lock);
}

void px_health_exit(struct px_self *self)
{
    pthread_mutex_lock(&self->hc_lock);
    self->hc_stop = true;
    bool running = self->hc_running;
    self->hc_running = false;
    pthread_cond_signal(&self->hc_wake);
    pthread_mutex_unlock(&self->hc_lock);
    px_wake(self);
    if (running) {
        pthread_join(self->hc_thread, NULL);
    }
    pthread_mutex_lock(&self->hc_lock);
    bool last = --self->refs == 0;
    pthread_mutex_unlock(&self->hc_lock);
    if (last) {
        px_self_free(self);
    }
}
