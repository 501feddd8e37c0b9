/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * compress_cache.c: see compress_cache.h. A chained hash table that doubles
 * with its count, and a least-recently-used list of the settled entries.
 */
#include "compress_cache.h"

#include <string.h>

#include "../../core/memory.h"

#define MK_STAT_SET(var, v) atomic_store_explicit(&(var), (v), memory_order_relaxed)
#define MK_STAT_INC(var)                                                                           \
    atomic_store_explicit(&(var), atomic_load_explicit(&(var), memory_order_relaxed) + 1,          \
                          memory_order_relaxed)

void mk_compress_cache_init(struct mk_zcache *zc)
{
    memset(zc, 0, sizeof(*zc));
    mk_list_init(&zc->lru);
}

void mk_compress_cache_release(struct mk_zentry *e)
{
    if (--e->refs == 0) {
        mk_free(e->data);
        mk_free(e);
    }
}

static uint32_t mk_zkey_hash(const struct mk_zkey *k)
{
    const uint64_t m = 0x9e3779b97f4a7c15ull;
    uint64_t parts[5] = {(uint64_t) k->dev, (uint64_t) k->ino, (uint64_t) k->size,
                         (uint64_t) k->mtime_sec,
                         ((uint64_t) k->mtime_nsec << 16) | ((uint64_t) k->coding << 8) | k->level};
    uint64_t h = 0;

    for (int i = 0; i < 5; i++) {
        h = (h ^ parts[i]) * m;
        h ^= h >> 29;
    }
    return (uint32_t) (h ^ (h >> 32));
}

static bool mk_zkey_eq(const struct mk_zkey *a, const struct mk_zkey *b)
{
    return a->ino == b->ino && a->dev == b->dev && a->size == b->size &&
           a->mtime_sec == b->mtime_sec && a->mtime_nsec == b->mtime_nsec &&
           a->coding == b->coding && a->level == b->level;
}

static void mk_zcache_stats(struct mk_zcache *zc)
{
    MK_STAT_SET(zc->st_bytes, zc->bytes);
    MK_STAT_SET(zc->st_entries, zc->count);
}

/* Take e out of the table (and the LRU list) and drop the table's reference. */
static void mk_zcache_remove(struct mk_zcache *zc, struct mk_zentry *e)
{
    struct mk_zentry **pp = &zc->buckets[e->hash & (zc->n_buckets - 1)];

    while (*pp != e) {
        pp = &(*pp)->hnext;
    }
    *pp = e->hnext;
    e->hnext = NULL;
    mk_list_del(&e->lru);
    e->cached = false;
    zc->count--;
    zc->bytes -= e->charge;
    mk_zcache_stats(zc);
    mk_compress_cache_release(e);
}

void mk_compress_cache_destroy(struct mk_zcache *zc)
{
    for (unsigned i = 0; i < zc->n_buckets; i++) {
        while (zc->buckets[i]) {
            mk_zcache_remove(zc, zc->buckets[i]);
        }
    }
    mk_free(zc->buckets);
    zc->buckets = NULL;
    zc->n_buckets = 0;
}

struct mk_zentry *mk_compress_cache_find(struct mk_zcache *zc, const struct mk_zkey *k)
{
    struct mk_zentry *e;

    if (!zc->count) {
        return NULL;
    }
    uint32_t h = mk_zkey_hash(k);
    for (e = zc->buckets[h & (zc->n_buckets - 1)]; e; e = e->hnext) {
        if (e->hash == h && mk_zkey_eq(&e->key, k)) {
            break;
        }
    }
    if (e && e->state != MK_Z_PENDING) {
        mk_list_move_tail(&e->lru, &zc->lru);
    }
    return e;
}

/* Evict least recently used entries (never `keep`) until `need` more bytes fit in max. */
static void mk_zcache_make_room(struct mk_zcache *zc, uint64_t need, uint64_t max,
                                const struct mk_zentry *keep)
{
    struct mk_list *it = zc->lru.next;

    while (zc->bytes + need > max && it != &zc->lru) {
        struct mk_zentry *e = mk_list_entry(it, struct mk_zentry, lru);
        it = it->next;
        if (e == keep) {
            continue;
        }
        mk_zcache_remove(zc, e);
        MK_STAT_INC(zc->st_evictions);
    }
}

void mk_compress_cache_trim(struct mk_zcache *zc, uint64_t max)
{
    mk_zcache_make_room(zc, 0, max, NULL);
}

/* Double the table when it holds as many entries as buckets. */
static void mk_zcache_grow(struct mk_zcache *zc)
{
    unsigned n = zc->n_buckets ? zc->n_buckets * 2 : 64;

    if (zc->count < zc->n_buckets) {
        return;
    }
    struct mk_zentry **b = mk_try_alloc(n * sizeof(*b));
    if (!b) {
        return; /* the chains only grow longer */
    }
    memset(b, 0, n * sizeof(*b));
    for (unsigned i = 0; i < zc->n_buckets; i++) {
        while (zc->buckets[i]) {
            struct mk_zentry *e = zc->buckets[i];
            zc->buckets[i] = e->hnext;
            e->hnext = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    }
    mk_free(zc->buckets);
    zc->buckets = b;
    zc->n_buckets = n;
}

struct mk_zentry *mk_compress_cache_reserve(struct mk_zcache *zc, const struct mk_zkey *k,
                                            size_t charge, uint64_t max)
{
    uint64_t need = (uint64_t) charge + MK_ZENTRY_OVERHEAD;

    if (need > max) {
        return NULL;
    }
    mk_zcache_make_room(zc, need, max, NULL);
    if (zc->bytes + need > max) {
        return NULL;
    }
    mk_zcache_grow(zc);
    if (!zc->n_buckets) {
        return NULL;
    }
    struct mk_zentry *e = mk_try_alloc(sizeof(*e));
    if (!e) {
        return NULL;
    }
    memset(e, 0, sizeof(*e));
    e->key = *k;
    e->hash = mk_zkey_hash(k);
    e->state = MK_Z_PENDING;
    e->cached = true;
    e->refs = 2;
    e->charge = (size_t) need;
    mk_list_init(&e->lru);
    e->hnext = zc->buckets[e->hash & (zc->n_buckets - 1)];
    zc->buckets[e->hash & (zc->n_buckets - 1)] = e;
    zc->count++;
    zc->bytes += need;
    mk_zcache_stats(zc);
    return e;
}

void mk_compress_cache_settle(struct mk_zcache *zc, struct mk_zentry *e, char *data, size_t len,
                              bool failed, uint64_t max)
{
    e->data = data;
    e->len = data ? len : 0;
    e->state = data ? MK_Z_READY : MK_Z_FAILED;
    if (!e->cached) {
        return;
    }
    if (!data && !failed) {
        mk_zcache_remove(zc, e);
        return;
    }
    zc->bytes -= e->charge;
    e->charge = e->len + MK_ZENTRY_OVERHEAD;
    zc->bytes += e->charge;
    mk_list_add_tail(&e->lru, &zc->lru);
    mk_zcache_make_room(zc, 0, max, e);
    if (zc->bytes > max) {
        mk_zcache_remove(zc, e);
        MK_STAT_INC(zc->st_evictions);
        return;
    }
    mk_zcache_stats(zc);
}
