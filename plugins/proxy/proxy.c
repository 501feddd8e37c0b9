/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * proxy.c: the reverse proxy plugin, the third backend of the gateway job
 * (after cgi and fastcgi). proxy.conf declares upstream groups (Upstream,
 * Server, Balance) and the timeouts; a site's [PROXY] section maps path
 * prefixes (Pass) and patterns (Match) to a group or a single address;
 * the content hook sends such requests there over HTTP/1.1, on pooled
 * keep-alive connections (px_req.c), to a server the group's balancing
 * picks among the healthy ones (px_pick.c). See README.md.
 *
 * State: per server (api->self_set), a table of every upstream server the
 * configurations named, with its health and counters; the control
 * plugin's status shows them through the stats hook.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"

const struct mk_api *px_api;

MK_PLUGIN_DECLARE(proxy);

struct px_self *px_self(void)
{
    return px_api->self(MK_PLUGIN_SELF(proxy));
}

static int px_init(const struct mk_api *api, const char *conf_dir)
{
    (void) conf_dir;
    px_api = api;
    if (!MK_API_HAS(api, stream_abort)) {
        api->log(MK_PLUGIN_LOG_ERROR, "proxy: needs a server with api->stream_abort (ABI 3.3)");
        return MK_ERR;
    }
    struct px_self *self = calloc(1, sizeof(*self));
    if (!self || px_health_init(self) != MK_OK) {
        free(self);
        api->log(MK_PLUGIN_LOG_ERROR, "proxy: out of memory");
        return MK_ERR;
    }
    if (api->self_set(MK_PLUGIN_SELF(proxy), self) != MK_OK) {
        px_health_exit(self);
        api->log(MK_PLUGIN_LOG_ERROR, "proxy: out of memory");
        return MK_ERR;
    }
    return MK_OK;
}

static void px_exit(void)
{
    struct px_self *self = px_self();
    if (self) {
        px_health_exit(self); /* self goes with the last configuration that checks */
    }
}

/* The health check thread starts with the first worker: after any fork of the start. */
static int px_worker_init(int id)
{
    if (id == 0) {
        px_health_start(px_self());
    }
    return MK_OK;
}

static void px_worker_exit(int id)
{
    (void) id;
    px_req_worker_exit();
}

/* The slot of address a in the server table: found, or appended (controlling thread). */
static int px_slot(struct px_self *self, const struct px_addr *a, unsigned *slot)
{
    unsigned n = atomic_load(&self->n_servers);
    for (unsigned i = 0; i < n; i++) {
        const struct px_addr *b = &self->servers[i].a;
        if (b->len == a->len && memcmp(&b->sa, &a->sa, a->len) == 0 && b->tls == a->tls &&
            (!a->tls || strcmp(b->name, a->name) == 0)) {
            *slot = i;
            return MK_OK;
        }
    }
    if (n == PX_SERVERS_MAX) {
        return MK_ERR;
    }
    self->servers[n].a = *a;
    atomic_store(&self->n_servers, n + 1);
    *slot = n;
    return MK_OK;
}

static void px_rgroup_free(struct px_rgroup *g)
{
    if (g) {
        if (g->checked) {
            px_health_release(g->self, g->slot, g->n);
        }
        free(g->ring);
        free(g);
    }
}

static void px_site_free(void *data)
{
    struct px_site *s = data;
    if (!s) {
        return;
    }
    for (size_t i = 0; i < s->sc->n_routes; i++) {
        px_rgroup_free(s->groups[i]);
    }
    free(s->groups);
    free(s);
}

/* The group of route rt: a declared group, or one address. NULL with err. */
static struct px_rgroup *px_resolve(const struct px_conf *conf, const struct px_route *rt,
                                    char *err, size_t errlen)
{
    struct px_rgroup *g = calloc(1, sizeof(*g));
    struct px_member one = {.weight = 1};
    const struct px_member *m = &one;
    size_t n = 1;

    if (!g) {
        snprintf(err, errlen, "%s: out of memory", rt->where);
        return NULL;
    }
    if (strchr(rt->target, ':')) {
        px_parse_addr(rt->target, &one.a); /* checked when the line was read */
    }
    else {
        for (size_t i = 0; i < conf->n_groups && !g->g; i++) {
            if (strcmp(conf->groups[i].name, rt->target) == 0) {
                g->g = &conf->groups[i];
            }
        }
        if (!g->g) {
            snprintf(err, errlen,
                     "%s: unknown upstream group '%s' (proxy.conf declares it with "
                     "Upstream)",
                     rt->where, rt->target);
            free(g);
            return NULL;
        }
        m = g->g->m;
        n = g->g->n;
        g->balance = g->g->balance;
    }
    g->self = px_self();
    for (size_t i = 0; i < n; i++) {
        if (px_slot(g->self, &m[i].a, &g->slot[i]) != MK_OK) {
            snprintf(err, errlen, "%s: more than %d upstream servers in all", rt->where,
                     PX_SERVERS_MAX);
            px_rgroup_free(g);
            return NULL;
        }
        g->weight[i] = m[i].weight;
        g->max[i] = m[i].max;
        g->backup[i] = m[i].backup;
        g->total += m[i].backup ? 0 : m[i].weight;
    }
    g->n = (unsigned) n;
    for (size_t i = 0; i < n; i++) {
        if (m[i].a.tls) {
#ifdef PX_TLS
            char why[256];
            /* the configuration's context, made once for its first tls:// route */
            if (px_tls_ctx((struct px_conf *) conf, why, sizeof(why)) != MK_OK) {
                snprintf(err, errlen, "%s: %s", rt->where, why);
                px_rgroup_free(g);
                return NULL;
            }
#endif
            break;
        }
    }
    if (g->g && g->g->health.path && !px_api->checking()) {
        px_health_holds(g->self, g->slot, g->n, &g->g->health, conf->tls_ctx);
        g->checked = true;
    }
    if (g->balance == PX_BAL_HASH && px_ring_build(g) != MK_OK) {
        snprintf(err, errlen, "%s: out of memory", rt->where);
        px_rgroup_free(g);
        return NULL;
    }
    return g;
}

static int px_site_init(const struct mk_site *site, const struct mk_conf *conf, void **data,
                        char *err, size_t errlen)
{
    const struct px_site_conf *sc = px_api->site_conf(site, MK_PLUGIN_SELF(proxy));
    (void) conf;
    *data = NULL;
    if (!sc || sc->n_routes == 0) {
        return MK_OK;
    }
    struct px_site *s = calloc(1, sizeof(*s));
    if (!s || !(s->groups = calloc(sc->n_routes, sizeof(*s->groups)))) {
        free(s);
        snprintf(err, errlen, "%s: out of memory", px_api->site_file(site));
        return MK_ERR;
    }
    s->sc = sc;
    s->conf = px_api->plugin_conf(site, MK_PLUGIN_SELF(proxy));
    s->buffering = sc->buffering ? sc->buffering == 2 : s->conf->buffering != 0;
    if (sc->buffering == 2 && !s->conf->buffering && s->conf->buf_max_temp > 0) {
        /* proxy.conf's BufferDir was not checked for its own Buffering off */
        char why[256];
        if (px_rbuf_dir_check(s->conf->buf_dir, why, sizeof(why)) != MK_OK) {
            snprintf(err, errlen, "%s: Buffering on: %s", sc->buffering_at, why);
            px_site_free(s);
            return MK_ERR;
        }
    }
    for (size_t i = 0; i < sc->n_routes; i++) {
        if (!(s->groups[i] = px_resolve(s->conf, &sc->routes[i], err, errlen))) {
            px_site_free(s);
            return MK_ERR;
        }
    }
    *data = s;
    return MK_OK;
}

/* Whether path lies under prefix, by whole segments ("/api" takes "/api" and "/api/x"). */
static bool px_under(const struct px_route *rt, const char *path, size_t len)
{
    size_t n = rt->prefix_len;
    if (len < n || memcmp(path, rt->prefix, n) != 0) {
        return false;
    }
    return n == 1 || len == n || path[n] == '/';
}

static int px_content(struct mk_request *r)
{
    const struct px_site *site = px_api->site_data(px_api->site(r), MK_PLUGIN_SELF(proxy));
    size_t len;

    if (!site) {
        return MK_DECLINED;
    }
    const char *path = px_api->path(r, &len);
    for (size_t i = 0; i < site->sc->n_routes; i++) {
        const struct px_route *rt = &site->sc->routes[i];
        bool hit;
        if (rt->prefix) {
            hit = px_under(rt, path, len);
        }
        else {
            char buf[4096];
            if (len >= sizeof(buf)) {
                continue;
            }
            memcpy(buf, path, len);
            buf[len] = '\0';
            hit = regexec(&rt->re, buf, 0, NULL, 0) == 0;
        }
        if (hit) {
            return px_req_start(r, site, i);
        }
    }
    return MK_DECLINED;
}

static void px_stats(mk_stats_emit_cb emit, void *arg)
{
    struct px_self *self = px_self();
    char name[48];

    if (!self) {
        return;
    }
    emit(arg, "requests", atomic_load_explicit(&self->requests, memory_order_relaxed));
    emit(arg, "bad_gateway", atomic_load_explicit(&self->gw.bad_gateway, memory_order_relaxed));
    emit(arg, "timeouts", atomic_load_explicit(&self->gw.timeouts, memory_order_relaxed));
    emit(arg, "upstream_ms", atomic_load_explicit(&self->gw.upstream_ms, memory_order_relaxed));
    emit(arg, "retries", atomic_load_explicit(&self->retries, memory_order_relaxed));
    emit(arg, "queue_full", atomic_load_explicit(&self->queue_full, memory_order_relaxed));
    emit(arg, "tunnels", atomic_load_explicit(&self->tunnels, memory_order_relaxed));
    emit(arg, "tunnels_open", atomic_load_explicit(&self->tunnels_open, memory_order_relaxed));
    emit(arg, "queue_timeouts",
         atomic_load_explicit(&self->gw.queue_timeouts, memory_order_relaxed));
    emit(arg, "early_hints", atomic_load_explicit(&self->early_hints, memory_order_relaxed));
    unsigned n = atomic_load(&self->n_servers);
    uint64_t now = px_api->now_ms();
    for (unsigned i = 0; i < n; i++) {
        struct px_server *s = &self->servers[i];
        snprintf(name, sizeof(name), "server%u_up", i);
        emit(arg, name, atomic_load_explicit(&s->down_until, memory_order_relaxed) <= now);
        snprintf(name, sizeof(name), "server%u_healthy", i);
        emit(arg, name, !atomic_load_explicit(&s->hc_down, memory_order_relaxed));
        snprintf(name, sizeof(name), "server%u_checks", i);
        emit(arg, name, atomic_load_explicit(&s->checks, memory_order_relaxed));
        snprintf(name, sizeof(name), "server%u_check_failures", i);
        emit(arg, name, atomic_load_explicit(&s->check_failures, memory_order_relaxed));
        snprintf(name, sizeof(name), "server%u_active", i);
        emit(arg, name, atomic_load_explicit(&s->active, memory_order_relaxed));
        snprintf(name, sizeof(name), "server%u_requests", i);
        emit(arg, name, atomic_load_explicit(&s->requests, memory_order_relaxed));
        snprintf(name, sizeof(name), "server%u_failures", i);
        emit(arg, name, atomic_load_explicit(&s->failures, memory_order_relaxed));
        snprintf(name, sizeof(name), "server%u_connects", i);
        emit(arg, name, atomic_load_explicit(&s->connects, memory_order_relaxed));
        snprintf(name, sizeof(name), "server%u_reuses", i);
        emit(arg, name, atomic_load_explicit(&s->reuses, memory_order_relaxed));
        snprintf(name, sizeof(name), "server%u_retries", i);
        emit(arg, name, atomic_load_explicit(&s->retries, memory_order_relaxed));
        snprintf(name, sizeof(name), "server%u_ttfb_ms", i);
        emit(arg, name, atomic_load_explicit(&s->ttfb_ms, memory_order_relaxed));
        snprintf(name, sizeof(name), "server%u_ttfb_count", i);
        emit(arg, name, atomic_load_explicit(&s->ttfb_count, memory_order_relaxed));
        if (s->a.tls) {
            snprintf(name, sizeof(name), "server%u_tls_handshakes", i);
            emit(arg, name, atomic_load_explicit(&s->tls_handshakes, memory_order_relaxed));
            snprintf(name, sizeof(name), "server%u_tls_resumed", i);
            emit(arg, name, atomic_load_explicit(&s->tls_resumed, memory_order_relaxed));
        }
    }
}

MK_PLUGIN_DEFINE(proxy) = {
    MK_PLUGIN_ABI_INIT,
    .name = "proxy",
    .version = "1.0",
    .description = "HTTP/1.1 reverse proxy and load balancer over the gateway job",
    .init = px_init,
    .exit = px_exit,
    .worker_init = px_worker_init,
    .worker_exit = px_worker_exit,
    .content = px_content,
    .site_init = px_site_init,
    .site_free = px_site_free,
    .conf_schema = &px_schema,
    .stats = px_stats,
};
