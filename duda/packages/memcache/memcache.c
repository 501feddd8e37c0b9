/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/packages/memcache/memcache.c: the memcache package (API in
 * memcache.h). An operation is a struct duda_mc_op: filled on the worker,
 * run by libmemcached on a task thread with a connection taken from the
 * server's pool, then answered on the worker (worker->task's done). The
 * pool is the only state shared between threads, and it has its own lock.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmemcached-1.0/memcached.h>
#include <libmemcachedutil-1.0/pool.h>

#include <duda/duda_package.h>

#include "memcache.h"

#define DUDA_MC_KEY_MAX 250

struct duda_memcache {
    memcached_pool_st *pool;
    struct duda_memcache *next;
};

enum duda_mc_kind { DUDA_MC_GET, DUDA_MC_SET, DUDA_MC_DEL, DUDA_MC_INCR };

struct duda_mc_op {
    duda_memcache_t *m;
    enum duda_mc_kind kind;
    char key[DUDA_MC_KEY_MAX + 1];
    size_t key_len;
    char *value; /* set: the value to store; get: what was found (malloc'ed by libmemcached) */
    size_t len;
    uint64_t delta;
    time_t expires;
    duda_memcache_cb cb;
    void *cb_data;
    struct duda_memcache_result res;
    char error[160];
};

/* Every server list handed out, freed when the package is unloaded. */
static struct duda_memcache *duda_mc_all;

static bool duda_mc_key_ok(const char *key, size_t *len)
{
    if (!key) {
        return false;
    }
    size_t n = strlen(key);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char) key[i];
        if (c <= ' ' || c == 0x7f) {
            return false;
        }
    }
    *len = n;
    return n >= 1 && n <= DUDA_MC_KEY_MAX;
}

/* ---- on a task thread --------------------------------------------------------------------- */

static void duda_mc_fail(struct duda_mc_op *op, memcached_st *mc, memcached_return_t rc)
{
    snprintf(op->error, sizeof(op->error), "%s",
             mc ? memcached_last_error_message(mc) : memcached_strerror(NULL, rc));
    op->res.status = DUDA_MEMCACHE_ERROR;
    op->res.error = op->error;
}

static void duda_mc_incr(struct duda_mc_op *op, memcached_st *mc)
{
    uint64_t v = 0;

    for (int attempt = 0; attempt < 2; attempt++) {
        memcached_return_t rc = memcached_increment(mc, op->key, op->key_len, op->delta, &v);
        if (rc == MEMCACHED_SUCCESS) {
            op->res.number = v;
            return;
        }
        if (rc != MEMCACHED_NOTFOUND) {
            duda_mc_fail(op, mc, rc);
            return;
        }
        /* Missing: it starts at delta, unless another client created it meanwhile. */
        char num[24];
        int n = snprintf(num, sizeof(num), "%llu", (unsigned long long) op->delta);
        rc = memcached_add(mc, op->key, op->key_len, num, (size_t) n, op->expires, 0);
        if (rc == MEMCACHED_SUCCESS) {
            op->res.number = op->delta;
            return;
        }
        if (rc != MEMCACHED_NOTSTORED && rc != MEMCACHED_DATA_EXISTS) {
            duda_mc_fail(op, mc, rc);
            return;
        }
    }
    duda_mc_fail(op, mc, MEMCACHED_NOTSTORED);
}

static void duda_mc_work(void *arg)
{
    struct duda_mc_op *op = arg;
    memcached_return_t rc;
    uint32_t flags;

    memcached_st *mc = memcached_pool_pop(op->m->pool, true, &rc);
    if (!mc) {
        duda_mc_fail(op, NULL, rc);
        return;
    }
    op->res.status = DUDA_MEMCACHE_OK;
    switch (op->kind) {
    case DUDA_MC_GET:
        free(op->value);
        op->value = memcached_get(mc, op->key, op->key_len, &op->len, &flags, &rc);
        if (rc == MEMCACHED_NOTFOUND) {
            op->res.status = DUDA_MEMCACHE_NOT_FOUND;
        }
        else if (rc != MEMCACHED_SUCCESS) {
            duda_mc_fail(op, mc, rc);
        }
        else if (!op->value) {
            op->value = strdup(""); /* an empty value */
        }
        break;
    case DUDA_MC_SET:
        rc = memcached_set(mc, op->key, op->key_len, op->value, op->len, op->expires, 0);
        if (rc != MEMCACHED_SUCCESS) {
            duda_mc_fail(op, mc, rc);
        }
        break;
    case DUDA_MC_DEL:
        rc = memcached_delete(mc, op->key, op->key_len, 0);
        if (rc == MEMCACHED_NOTFOUND) {
            op->res.status = DUDA_MEMCACHE_NOT_FOUND;
        }
        else if (rc != MEMCACHED_SUCCESS) {
            duda_mc_fail(op, mc, rc);
        }
        break;
    case DUDA_MC_INCR:
        duda_mc_incr(op, mc);
        break;
    }
    memcached_pool_push(op->m->pool, mc);
}

/* ---- on the worker ------------------------------------------------------------------------ */

static void duda_mc_done(duda_request_t *dr, void *arg)
{
    struct duda_mc_op *op = arg;

    if (dr) {
        if (op->kind == DUDA_MC_GET && op->res.status == DUDA_MEMCACHE_OK) {
            op->res.value = op->value;
            op->res.len = op->len;
        }
        op->cb(dr, &op->res, op->cb_data);
    }
    free(op->value);
    free(op);
}

static int duda_mc_queue(duda_memcache_t *m, duda_request_t *dr, enum duda_mc_kind kind,
                         const char *key, duda_memcache_cb cb, void *cb_data,
                         struct duda_mc_op **out)
{
    size_t n;

    if (!m || !dr || !cb || !duda_mc_key_ok(key, &n)) {
        return -1;
    }
    struct duda_mc_op *op = calloc(1, sizeof(*op));
    if (!op) {
        return -1;
    }
    op->m = m;
    op->kind = kind;
    memcpy(op->key, key, n);
    op->key_len = n;
    op->cb = cb;
    op->cb_data = cb_data;
    *out = op;
    return 0;
}

static int duda_mc_start(duda_request_t *dr, struct duda_mc_op *op)
{
    if (worker->task(dr, duda_mc_work, duda_mc_done, op) != 0) {
        free(op->value);
        free(op);
        return -1;
    }
    return 0;
}

static int duda_mc_get(duda_memcache_t *m, duda_request_t *dr, const char *key, duda_memcache_cb cb,
                       void *cb_data)
{
    struct duda_mc_op *op;

    if (duda_mc_queue(m, dr, DUDA_MC_GET, key, cb, cb_data, &op) != 0) {
        return -1;
    }
    return duda_mc_start(dr, op);
}

static int duda_mc_set(duda_memcache_t *m, duda_request_t *dr, const char *key, const void *value,
                       size_t len, time_t expires, duda_memcache_cb cb, void *cb_data)
{
    struct duda_mc_op *op;

    if ((!value && len) || expires < 0 ||
        duda_mc_queue(m, dr, DUDA_MC_SET, key, cb, cb_data, &op) != 0) {
        return -1;
    }
    op->value = malloc(len + 1);
    if (!op->value) {
        free(op);
        return -1;
    }
    if (len) {
        memcpy(op->value, value, len);
    }
    op->len = len;
    op->expires = expires;
    return duda_mc_start(dr, op);
}

static int duda_mc_del(duda_memcache_t *m, duda_request_t *dr, const char *key, duda_memcache_cb cb,
                       void *cb_data)
{
    struct duda_mc_op *op;

    if (duda_mc_queue(m, dr, DUDA_MC_DEL, key, cb, cb_data, &op) != 0) {
        return -1;
    }
    return duda_mc_start(dr, op);
}

static int duda_mc_incr_op(duda_memcache_t *m, duda_request_t *dr, const char *key, uint64_t delta,
                           time_t expires, duda_memcache_cb cb, void *cb_data)
{
    struct duda_mc_op *op;

    if (expires < 0 || duda_mc_queue(m, dr, DUDA_MC_INCR, key, cb, cb_data, &op) != 0) {
        return -1;
    }
    op->delta = delta;
    op->expires = expires;
    return duda_mc_start(dr, op);
}

/* "host:port,host:port" as libmemcached's configuration: one --SERVER= each. */
static int duda_mc_options(const char *servers, char *out, size_t len)
{
    size_t used = 0;
    const char *p = servers;

    while (p && *p) {
        size_t n = strcspn(p, ",");
        if (n == 0 || *p == '-' || memchr(p, ' ', n)) {
            return -1;
        }
        int w = snprintf(out + used, len - used, "--SERVER=%.*s ", (int) n, p);
        if (w < 0 || (size_t) w >= len - used) {
            return -1;
        }
        used += (size_t) w;
        p += n;
        p += *p == ',';
    }
    int w = snprintf(out + used, len - used,
                     "--CONNECT-TIMEOUT=1000 --POLL-TIMEOUT=1000 --POOL-MIN=1 --POOL-MAX=16");
    return used && w > 0 && (size_t) w < len - used ? 0 : -1;
}

static duda_memcache_t *duda_mc_connect(const char *servers)
{
    char opts[1024], err[256];

    if (!servers || duda_mc_options(servers, opts, sizeof(opts)) != 0) {
        console->debug(NULL, "memcache->connect(%s): give host:port[,host:port...]",
                       servers ? servers : "NULL");
        return NULL;
    }
    if (libmemcached_check_configuration(opts, strlen(opts), err, sizeof(err)) !=
        MEMCACHED_SUCCESS) {
        console->debug(NULL, "memcache->connect(%s): %s", servers, err);
        return NULL;
    }
    duda_memcache_t *m = calloc(1, sizeof(*m));
    if (!m || !(m->pool = memcached_pool(opts, strlen(opts)))) {
        free(m);
        console->debug(NULL, "memcache->connect(%s): cannot make the pool", servers);
        return NULL;
    }
    m->next = duda_mc_all;
    duda_mc_all = m;
    return m;
}

static void duda_mc_exit(void)
{
    while (duda_mc_all) {
        duda_memcache_t *m = duda_mc_all;
        duda_mc_all = m->next;
        memcached_pool_destroy(m->pool);
        free(m);
    }
}

static const struct duda_memcache_api duda_mc_pkg = {
    .size = sizeof(struct duda_memcache_api),
    .connect = duda_mc_connect,
    .get = duda_mc_get,
    .set = duda_mc_set,
    .del = duda_mc_del,
    .incr = duda_mc_incr_op,
};

DUDA_PACKAGE("memcache", "1.0", &duda_mc_pkg, NULL, duda_mc_exit);
