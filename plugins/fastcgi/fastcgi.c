/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fastcgi.c: the FastCGI plugin, with php-fpm as its main backend. A
 * site's [FASTCGI] section names backends (unix sockets or HOST:PORT) and
 * the paths they run (Match \.php$); the content hook sends such requests
 * to a backend chosen round-robin among the healthy ones, over pooled
 * keep-alive connections (fcgi_pool.c, fcgi_req.c). See README.md.
 *
 * State: per server (api->self_set), a table of the backends every
 * configuration named, with their health and counters; the control
 * plugin's status shows them through the stats hook.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fastcgi.h"

const struct mk_api *fcgi_api;

MK_PLUGIN_DECLARE(fastcgi);

struct fcgi_self *fcgi_self(void)
{
    return fcgi_api->self(MK_PLUGIN_SELF(fastcgi));
}

static int fcgi_init(const struct mk_api *api, const char *conf_dir)
{
    (void) conf_dir;
    fcgi_api = api;
    if (!MK_API_HAS(api, stream_abort) || !MK_API_HAS(api, metric_value)) {
        api->log(MK_PLUGIN_LOG_ERROR, "fastcgi: needs a server with api->metric_value (ABI 3.20)");
        return MK_ERR;
    }
    struct fcgi_self *self = calloc(1, sizeof(*self));
    if (!self || api->self_set(MK_PLUGIN_SELF(fastcgi), self) != MK_OK) {
        free(self);
        api->log(MK_PLUGIN_LOG_ERROR, "fastcgi: out of memory");
        return MK_ERR;
    }
    mk_gw_metrics_families(api, "fastcgi", &self->mf);
    static const char *const by_backend[] = {"backend", NULL};
    static const char *const by_state[] = {"backend", "state", NULL};
    self->mf_up = api->metric_family("monkey_fastcgi_backend_up", MK_METRIC_GAUGE,
                                     "Whether a fastcgi backend is in service: 1, or 0 while "
                                     "marked down (DownTime).",
                                     by_backend, NULL, 0);
    self->mf_conns = api->metric_family("monkey_fastcgi_backend_connections", MK_METRIC_GAUGE,
                                        "Connections to a fastcgi backend, all workers, by "
                                        "state: open (in use or idle), idle (kept in a pool).",
                                        by_state, NULL, 0);
    return MK_OK;
}

/* The gauges of a backend, read at the scrape from what its status shows too. */
static int64_t fcgi_up_read(void *arg)
{
    const struct fcgi_backend *b = arg;
    return atomic_load_explicit(&b->down_until, memory_order_relaxed) <= fcgi_api->now_ms();
}

static int64_t fcgi_open_read(void *arg)
{
    const struct fcgi_backend *b = arg;
    return atomic_load_explicit(&b->active, memory_order_relaxed);
}

static int64_t fcgi_idle_read(void *arg)
{
    const struct fcgi_backend *b = arg;
    return atomic_load_explicit(&b->idle, memory_order_relaxed);
}

/* Its series (controlling thread): declared again, the same ids. */
static void fcgi_backend_metrics(struct fcgi_self *self, struct fcgi_backend *b)
{
    const char *up[] = {b->text};
    const char *open[] = {b->text, "open"};
    const char *idle[] = {b->text, "idle"};

    mk_gw_metrics_series(fcgi_api, &self->mf, b->text, &b->m);
    fcgi_api->metric_gauge_cb(self->mf_up, up, fcgi_up_read, b);
    fcgi_api->metric_gauge_cb(self->mf_conns, open, fcgi_open_read, b);
    fcgi_api->metric_gauge_cb(self->mf_conns, idle, fcgi_idle_read, b);
}

static void fcgi_exit(void)
{
    free(fcgi_self());
}

static void fcgi_worker_exit(int id)
{
    (void) id;
    fcgi_pool_worker_stopping();
    fcgi_req_worker_exit();
    fcgi_pool_worker_exit();
}

/* The health slot of address a: found, or appended (controlling thread). */
static int fcgi_slot(struct fcgi_self *self, const struct fcgi_addr *a, unsigned *slot)
{
    unsigned n = atomic_load(&self->n_backends);
    for (unsigned i = 0; i < n; i++) {
        if (self->backends[i].len == a->len && memcmp(&self->backends[i].sa, &a->sa, a->len) == 0) {
            *slot = i;
            return MK_OK;
        }
    }
    if (n == FCGI_BACKENDS_MAX) {
        return MK_ERR;
    }
    struct fcgi_backend *b = &self->backends[n];
    memcpy(&b->sa, &a->sa, a->len);
    b->len = a->len;
    snprintf(b->text, sizeof(b->text), "%s", a->text);
    b->m.requests = -1; /* declared by site_init */
    atomic_store(&self->n_backends, n + 1);
    *slot = n;
    return MK_OK;
}

static int fcgi_site_init(const struct mk_site *site, const struct mk_conf *conf, void **data,
                          char *err, size_t errlen)
{
    const struct fcgi_site_conf *sc = fcgi_api->site_conf(site, MK_PLUGIN_SELF(fastcgi));
    (void) conf;
    *data = NULL;
    if (!sc || sc->n_backends == 0) {
        return MK_OK;
    }
    struct fcgi_site *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "%s: out of memory", fcgi_api->site_file(site));
        return MK_ERR;
    }
    s->sc = sc;
    s->conf = fcgi_api->plugin_conf(site, MK_PLUGIN_SELF(fastcgi));
    for (size_t i = 0; i < sc->n_backends; i++) {
        if (fcgi_slot(fcgi_self(), &sc->backends[i], &s->slots[s->n_slots]) != MK_OK) {
            snprintf(err, errlen, "%s: more than %d FastCGI backends in all",
                     fcgi_api->site_file(site), FCGI_BACKENDS_MAX);
            free(s);
            return MK_ERR;
        }
        struct fcgi_backend *b = &fcgi_self()->backends[s->slots[s->n_slots]];
        if (b->m.requests < 0) { /* not yet, or not kept then (a configuration only checked) */
            fcgi_backend_metrics(fcgi_self(), b);
        }
        /* the limit of the configuration coming in (its MaxConnections) */
        atomic_store(&b->conf_max, s->conf->max_conns);
        s->n_slots++;
    }
    *data = s;
    return MK_OK;
}

static void fcgi_site_free(void *data)
{
    free(data);
}

static int fcgi_content(struct mk_request *r)
{
    const struct fcgi_site *site = fcgi_api->site_data(fcgi_api->site(r), MK_PLUGIN_SELF(fastcgi));
    struct mk_gw_script s;
    size_t len;

    if (!site) {
        return MK_DECLINED;
    }
    const char *path = fcgi_api->path(r, &len);
    int rc = mk_gw_map_match(fcgi_api, r, site->sc->matches, site->sc->n_matches, path, len, &s);
    if (rc != MK_OK) {
        return rc;
    }
    /* Applications check credentials themselves (PHP's PHP_AUTH_USER comes from
       HTTP_AUTHORIZATION), as nginx and lighttpd pass it; a proxy's are for no
       application. */
    s.pass_authorization = true;
    return fcgi_req_start(r, site, &s);
}

static void fcgi_stats(mk_stats_emit_cb emit, void *arg)
{
    struct fcgi_self *self = fcgi_self();
    char name[48];

    if (!self) {
        return;
    }
    emit(arg, "requests", atomic_load_explicit(&self->requests, memory_order_relaxed));
    emit(arg, "bad_gateway", atomic_load_explicit(&self->gw.bad_gateway, memory_order_relaxed));
    emit(arg, "timeouts", atomic_load_explicit(&self->gw.timeouts, memory_order_relaxed));
    emit(arg, "queue_timeouts",
         atomic_load_explicit(&self->gw.queue_timeouts, memory_order_relaxed));
    emit(arg, "upstream_ms", atomic_load_explicit(&self->gw.upstream_ms, memory_order_relaxed));
    emit(arg, "retries", atomic_load_explicit(&self->retries, memory_order_relaxed));
    unsigned n = atomic_load(&self->n_backends);
    uint64_t now = fcgi_api->now_ms();
    for (unsigned i = 0; i < n; i++) {
        struct fcgi_backend *b = &self->backends[i];
        snprintf(name, sizeof(name), "backend%u_up", i);
        emit(arg, name, atomic_load_explicit(&b->down_until, memory_order_relaxed) <= now);
        snprintf(name, sizeof(name), "backend%u_active", i);
        emit(arg, name, atomic_load_explicit(&b->active, memory_order_relaxed));
        snprintf(name, sizeof(name), "backend%u_queued", i);
        emit(arg, name, atomic_load_explicit(&b->queued, memory_order_relaxed));
        uint64_t requests, failures, timeouts;
        /* the counters of the metrics endpoint: failures marked down or broken, and timeouts */
        if (mk_gw_metrics_figures(fcgi_api, &b->m,
                                  1u << MK_GW_FAIL_CONNECT | 1u << MK_GW_FAIL_BAD_GATEWAY,
                                  &requests, &failures) &&
            mk_gw_metrics_figures(fcgi_api, &b->m, 1u << MK_GW_FAIL_TIMEOUT, &requests,
                                  &timeouts)) {
            snprintf(name, sizeof(name), "backend%u_requests", i);
            emit(arg, name, requests);
            snprintf(name, sizeof(name), "backend%u_failures", i);
            emit(arg, name, failures);
            snprintf(name, sizeof(name), "backend%u_timeouts", i);
            emit(arg, name, timeouts);
        }
        snprintf(name, sizeof(name), "backend%u_limit", i);
        emit(arg, name, fcgi_limit(b));
        snprintf(name, sizeof(name), "backend%u_idle", i);
        emit(arg, name, atomic_load_explicit(&b->idle, memory_order_relaxed));
        snprintf(name, sizeof(name), "backend%u_get_values", i);
        emit(arg, name, (uint64_t) atomic_load_explicit(&b->gv, memory_order_relaxed));
        snprintf(name, sizeof(name), "backend%u_max_conns", i);
        emit(arg, name, atomic_load_explicit(&b->said, memory_order_relaxed));
        snprintf(name, sizeof(name), "backend%u_not_accepted", i);
        emit(arg, name, atomic_load_explicit(&b->not_accepted, memory_order_relaxed));
    }
}

MK_PLUGIN_DEFINE(fastcgi) = {
    MK_PLUGIN_ABI_INIT,
    .name = "fastcgi",
    .version = "1.0",
    .description = "FastCGI responders (php-fpm), pooled and streamed both ways",
    .init = fcgi_init,
    .exit = fcgi_exit,
    .worker_exit = fcgi_worker_exit,
    .content = fcgi_content,
    .site_init = fcgi_site_init,
    .site_free = fcgi_site_free,
    .conf_schema = &fcgi_schema,
    .stats = fcgi_stats,
};
