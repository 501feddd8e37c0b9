/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * px_metrics.c: the proxy's metrics, declared through the server's API
 * (api->metric_family, ABI 3.20) and counted per worker by px_req.c:
 *   monkey_proxy_upstream_requests_total{upstream,server}  attempts sent to a server
 *   monkey_proxy_upstream_failures_total{upstream,server,kind}  failed attempts
 *   monkey_proxy_upstream_time_to_first_byte_seconds{upstream,server}
 *   monkey_proxy_upstream_up{server}  1 in service, 0 out (failures, checks)
 *   monkey_proxy_upstream_connections{server,state}  open (idle included), idle
 * `upstream` is the group's name (or the address a route names alone),
 * `server` the address as proxy.conf writes it: labels from the
 * configuration only. The connections are the server's, shared by its
 * groups. The stats hook's per-server figures are these counters summed.
 *
 * The series records live in px_self: made on the controlling thread
 * (site_init), read by any (the stats hook), each complete before the count
 * that publishes it.
 */
#include <stdlib.h>
#include <string.h>

#include "proxy.h"

static const char *const px_fail_names[PX_FAILS] = {"connect", "timeout", "reset", "bad_response"};

/* A series record for a full table: counts nowhere. */
static struct px_mseries px_ms_none = {.requests = -1, .fail = {-1, -1, -1, -1}, .ttfb = -1};

void px_metrics_init(struct px_self *self)
{
    static const char *const by_server[] = {"upstream", "server", NULL};
    static const char *const by_kind[] = {"upstream", "server", "kind", NULL};
    static const char *const server_only[] = {"server", NULL};
    static const char *const by_state[] = {"server", "state", NULL};
    struct px_mfamilies *f = &self->mf;

    if (!MK_API_HAS(px_api, metric_family)) {
        *f = (struct px_mfamilies){-1, -1, -1, -1, -1};
        return;
    }
    f->requests = px_api->metric_family("monkey_proxy_upstream_requests_total", MK_METRIC_COUNTER,
                                        "Requests sent to an upstream server (each attempt), by "
                                        "upstream group and server.",
                                        by_server, NULL, 0);
    f->failures = px_api->metric_family(
        "monkey_proxy_upstream_failures_total", MK_METRIC_COUNTER,
        "Failed attempts on an upstream server, by kind: connect (refused, unreachable, "
        "ConnectTimeout, TLS handshake), timeout (no answer within Timeout), reset (closed or "
        "broken), bad_response (not HTTP as it should be).",
        by_kind, NULL, 0);
    f->ttfb = px_api->metric_family("monkey_proxy_upstream_time_to_first_byte_seconds",
                                    MK_METRIC_HISTOGRAM,
                                    "From the request's first byte sent upstream to the answer's "
                                    "first byte, by upstream group and server, in seconds.",
                                    by_server, NULL, 0);
    f->up = px_api->metric_family("monkey_proxy_upstream_up", MK_METRIC_GAUGE,
                                  "Whether an upstream server is in service: 1, or 0 while out "
                                  "after failures or failed health checks.",
                                  server_only, NULL, 0);
    f->conns = px_api->metric_family("monkey_proxy_upstream_connections", MK_METRIC_GAUGE,
                                     "Connections to an upstream server, by state: open (in use "
                                     "or idle), idle (kept alive in a worker's pool).",
                                     by_state, NULL, 0);
}

static int64_t px_up_read(void *arg)
{
    const struct px_server *s = arg;
    uint64_t now = px_api->now_ms();

    return atomic_load_explicit(&s->down_until, memory_order_relaxed) <= now &&
           !atomic_load_explicit(&s->hc_down, memory_order_relaxed);
}

static __thread struct px_idle_counts *px_idle_mine;

void px_metrics_worker_init(struct px_self *self, int id)
{
    struct px_idle_counts *c = NULL;

    if (self && id >= 0 && id < PX_WORKERS_MAX) {
        c = atomic_load_explicit(&self->idle[id], memory_order_acquire);
        if (!c && (c = aligned_alloc(64, sizeof(*c)))) {
            memset(c, 0, sizeof(*c));
            atomic_store_explicit(&self->idle[id], c, memory_order_release);
        }
    }
    px_idle_mine = c;
}

struct px_idle_counts *px_metrics_idle_counts(void)
{
    return px_idle_mine;
}

/* The idle connections to a server, all workers. */
static int64_t px_idle_read(void *arg)
{
    const struct px_server *s = arg;
    int64_t n = 0;

    for (unsigned w = 0; w < PX_WORKERS_MAX; w++) {
        const struct px_idle_counts *c =
            atomic_load_explicit(&s->owner->idle[w], memory_order_acquire);
        if (c) {
            n += (int) atomic_load_explicit(&c->n[s->slot], memory_order_relaxed);
        }
    }
    return n;
}

void px_metrics_server(struct px_self *self, unsigned slot)
{
    struct px_server *s = &self->servers[slot];
    const char *text = s->a.text;

    if (s->m_up >= 0 || !MK_API_HAS(px_api, metric_family)) {
        return; /* declared (or never: an older server) */
    }
    const char *up[] = {text};
    const char *open[] = {text, "open"};
    const char *idle[] = {text, "idle"};
    s->m_up = px_api->metric_gauge_cb(self->mf.up, up, px_up_read, s);
    s->m_open = px_api->metric_series(self->mf.conns, open);
    s->m_idle = px_api->metric_gauge_cb(self->mf.conns, idle, px_idle_read, s);
}

struct px_mseries *px_metrics_series(struct px_self *self, const char *group, unsigned slot)
{
    unsigned n = atomic_load_explicit(&self->n_ms, memory_order_relaxed);
    struct px_mseries *m = NULL;

    for (unsigned i = 0; i < n && !m; i++) {
        if (self->ms[i].slot == slot && strcmp(self->ms[i].group, group) == 0) {
            m = &self->ms[i];
        }
    }
    if (!m) {
        char *copy = n < PX_MSERIES_MAX ? strdup(group) : NULL;
        if (!copy) {
            return &px_ms_none;
        }
        m = &self->ms[n];
        m->group = copy;
        m->slot = slot;
        m->requests = m->ttfb = -1;
        for (unsigned k = 0; k < PX_FAILS; k++) {
            m->fail[k] = -1;
        }
        atomic_store_explicit(&self->n_ms, n + 1, memory_order_release);
    }
    if (m->requests >= 0 || !MK_API_HAS(px_api, metric_family)) {
        return m;
    }
    /* not declared yet, or not kept then (a configuration only checked): now */
    const char *text = self->servers[slot].a.text;
    const char *v[] = {group, text};
    m->requests = px_api->metric_series(self->mf.requests, v);
    m->ttfb = px_api->metric_series(self->mf.ttfb, v);
    for (unsigned k = 0; k < PX_FAILS; k++) {
        const char *vk[] = {group, text, px_fail_names[k]};
        m->fail[k] = px_api->metric_series(self->mf.failures, vk);
    }
    return m;
}

bool px_metrics_figures(struct px_self *self, unsigned slot, uint64_t *requests, uint64_t *failures,
                        uint64_t *ttfb_us, uint64_t *ttfb_count)
{
    unsigned n = atomic_load_explicit(&self->n_ms, memory_order_acquire);
    struct mk_metric_value v;
    bool any = false;

    *requests = *failures = *ttfb_us = *ttfb_count = 0;
    if (!MK_API_HAS(px_api, metric_read)) {
        return false;
    }
    for (unsigned i = 0; i < n; i++) {
        const struct px_mseries *m = &self->ms[i];
        if (m->slot != slot || px_api->metric_read(m->requests, &v) != MK_OK) {
            continue;
        }
        any = true;
        *requests += v.value;
        for (unsigned k = 0; k < PX_FAILS; k++) {
            if (px_api->metric_read(m->fail[k], &v) == MK_OK) {
                *failures += v.value;
            }
        }
        if (px_api->metric_read(m->ttfb, &v) == MK_OK) {
            *ttfb_us += v.sum_us;
            *ttfb_count += v.count;
        }
    }
    return any;
}

void px_metrics_free(struct px_self *self)
{
    unsigned n = atomic_load_explicit(&self->n_ms, memory_order_relaxed);

    for (unsigned i = 0; i < n; i++) {
        free(self->ms[i].group);
    }
    for (unsigned w = 0; w < PX_WORKERS_MAX; w++) {
        free(atomic_load_explicit(&self->idle[w], memory_order_relaxed));
    }
}
