/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * px_pick.c: which server of a group takes a request, and the passive
 * health that keeps failing servers out. Any worker may call these at
 * once: the state is atomics of the server table (struct px_server) and
 * of the site's group (its round robin counter); a ring is built once by
 * site_init and only read afterwards.
 */
#include <stdlib.h>
#include <string.h>

#include "proxy.h"

static uint32_t px_fnv(uint32_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h = (h ^ p[i]) * 16777619u;
    }
    /* a final mix: FNV's low bits spread poorly over a ring */
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

static int px_point_cmp(const void *a, const void *b)
{
    const struct px_point *x = a, *y = b;
    return x->hash < y->hash ? -1 : x->hash > y->hash;
}

int px_ring_build(struct px_rgroup *g)
{
    size_t n = 0;
    for (unsigned i = 0; i < g->n; i++) {
        n += (size_t) g->weight[i] * PX_VNODES;
    }
    if (!(g->ring = malloc(n * sizeof(*g->ring)))) {
        return MK_ERR;
    }
    for (unsigned i = 0; i < g->n; i++) {
        /* the points of a server depend on its address only: removing
           another server moves no key of this one */
        const char *text = g->self->servers[g->slot[i]].a.text;
        for (unsigned v = 0; v < g->weight[i] * PX_VNODES; v++) {
            uint32_t h = px_fnv(2166136261u, text, strlen(text));
            h = px_fnv(h, &v, sizeof(v));
            g->ring[g->n_ring].hash = h;
            g->ring[g->n_ring].member = i;
            g->n_ring++;
        }
    }
    qsort(g->ring, g->n_ring, sizeof(*g->ring), px_point_cmp);
    return MK_OK;
}

static bool px_up(const struct px_server *s, uint64_t now)
{
    return atomic_load_explicit(&s->down_until, memory_order_relaxed) <= now &&
           !atomic_load_explicit(&s->hc_down, memory_order_relaxed);
}

/* Whether member i is a candidate: up, not tried, of the tier in use. */
static bool px_alive(const struct px_rgroup *g, unsigned i, uint64_t tried, bool backup,
                     uint64_t now)
{
    return !(tried >> i & 1) && g->backup[i] == backup && px_up(&g->self->servers[g->slot[i]], now);
}

/* Whether member i is at its max= (requests on it, all workers together). */
static bool px_full(const struct px_rgroup *g, unsigned i)
{
    return g->max[i] && atomic_load_explicit(&g->self->servers[g->slot[i]].active,
                                             memory_order_relaxed) >= g->max[i];
}

/* Whether member i may take the request: a candidate with room. */
static bool px_usable(const struct px_rgroup *g, unsigned i, uint64_t tried, bool backup,
                      uint64_t now)
{
    return px_alive(g, i, tried, backup, now) && !px_full(g, i);
}

/* The value the hash of g reads from r, into buf: its length (0: none). */
static size_t px_key(const struct px_rgroup *g, struct mk_request *r, char *buf, size_t cap)
{
    size_t len = 0;
    const char *v;

    switch (g->g ? g->g->key : PX_KEY_CLIENT) {
    case PX_KEY_CLIENT:
        px_api->remote_addr(r, buf, cap);
        return strlen(buf);
    case PX_KEY_HEADER:
        v = px_api->header(r, g->g->key_name, &len);
        break;
    case PX_KEY_COOKIE: {
        size_t nlen = strlen(g->g->key_name), clen = 0;
        const char *c = px_api->header(r, "Cookie", &clen);
        const char *end = c ? c + clen : NULL;
        v = NULL;
        while (c && c < end) {
            while (c < end && (*c == ' ' || *c == ';')) {
                c++;
            }
            const char *semi = memchr(c, ';', (size_t) (end - c));
            const char *stop = semi ? semi : end;
            if ((size_t) (stop - c) > nlen && memcmp(c, g->g->key_name, nlen) == 0 &&
                c[nlen] == '=') {
                v = c + nlen + 1;
                len = (size_t) (stop - v);
                break;
            }
            c = stop;
        }
        break;
    }
    default:
        v = NULL;
    }
    if (!v) {
        return 0;
    }
    if (len > cap) {
        len = cap;
    }
    memcpy(buf, v, len);
    return len;
}

static int px_pick_hash(struct px_rgroup *g, struct mk_request *r, uint64_t tried, bool backup,
                        uint64_t now)
{
    char key[256];
    size_t len = px_key(g, r, key, sizeof(key));
    uint32_t h = px_fnv(2166136261u, key, len);
    size_t lo = 0, hi = g->n_ring;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g->ring[mid].hash < h) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    /* clockwise from the key to the first point of a usable server */
    for (size_t k = 0; k < g->n_ring; k++) {
        unsigned m = g->ring[(lo + k) % g->n_ring].member;
        if (px_usable(g, m, tried, backup, now)) {
            return (int) m;
        }
    }
    return -1;
}

static int px_pick_wrr(struct px_rgroup *g, uint64_t tried, bool backup, uint64_t now)
{
    unsigned total = 0;
    for (unsigned i = 0; i < g->n; i++) {
        total += g->backup[i] == backup ? g->weight[i] : 0;
    }
    if (total == 0) {
        return -1;
    }
    unsigned pos = atomic_fetch_add_explicit(&g->rr, 1, memory_order_relaxed) % total;
    unsigned start = 0;
    for (unsigned i = 0; i < g->n; i++) {
        if (g->backup[i] != backup) {
            continue;
        }
        if (pos < g->weight[i]) {
            start = i;
            break;
        }
        pos -= g->weight[i];
    }
    for (unsigned k = 0; k < g->n; k++) {
        unsigned i = (start + k) % g->n;
        if (px_usable(g, i, tried, backup, now)) {
            return (int) i;
        }
    }
    return -1;
}

static int px_pick_least(struct px_rgroup *g, uint64_t tried, bool backup, uint64_t now)
{
    unsigned start = atomic_fetch_add_explicit(&g->rr, 1, memory_order_relaxed);
    int best = -1;
    uint64_t best_a = 0, best_w = 1;

    for (unsigned k = 0; k < g->n; k++) {
        unsigned i = (start + k) % g->n;
        if (!px_usable(g, i, tried, backup, now)) {
            continue;
        }
        uint64_t a =
            atomic_load_explicit(&g->self->servers[g->slot[i]].active, memory_order_relaxed);
        if (best < 0 || a * best_w < best_a * g->weight[i]) {
            best = (int) i;
            best_a = a;
            best_w = g->weight[i];
        }
    }
    return best;
}

int px_pick(struct px_rgroup *g, struct mk_request *r, uint64_t tried, bool *full)
{
    uint64_t now = px_api->now_ms();
    *full = false;
    for (int tier = 0; tier < 2; tier++) {
        bool backup = tier == 1;
        bool alive = false;
        for (unsigned i = 0; i < g->n && !alive; i++) {
            alive = px_alive(g, i, tried, backup, now);
        }
        if (!alive) {
            continue; /* the backups take over only when no primary is left */
        }
        int m;
        switch (!r && g->balance == PX_BAL_HASH ? PX_BAL_WRR : g->balance) {
        case PX_BAL_HASH: /* (a retry, r not at hand: the next in turn) */
            m = px_pick_hash(g, r, tried, backup, now);
            break;
        case PX_BAL_LEASTCONN:
            m = px_pick_least(g, tried, backup, now);
            break;
        default:
            m = px_pick_wrr(g, tried, backup, now);
        }
        if (m < 0) {
            *full = true; /* candidates, every one at its max: wait rather than go to backups */
        }
        return m;
    }
    return -1;
}

void px_server_failed(struct px_server *s, const struct px_conf *conf)
{
    uint64_t now = px_api->now_ms();
    if (now - atomic_load_explicit(&s->fail_start, memory_order_relaxed) > conf->fail_ms) {
        atomic_store_explicit(&s->fail_start, now, memory_order_relaxed);
        atomic_store_explicit(&s->fails, 0, memory_order_relaxed);
    }
    unsigned n = atomic_fetch_add_explicit(&s->fails, 1, memory_order_relaxed) + 1;
    if (n >= (unsigned) conf->max_fails) {
        atomic_store_explicit(&s->down_until, now + conf->fail_ms, memory_order_relaxed);
        atomic_store_explicit(&s->fails, 0, memory_order_relaxed);
        px_api->log(MK_PLUGIN_LOG_ERROR, "proxy: %s: %u failures: out for %llu ms", s->a.text, n,
                    (unsigned long long) conf->fail_ms);
    }
}

void px_server_ok(struct px_server *s)
{
    if (atomic_load_explicit(&s->fails, memory_order_relaxed)) {
        atomic_store_explicit(&s->fails, 0, memory_order_relaxed);
    }
}
