/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * compress_cache.h: a worker's cache of static files compressed on the fly
 * (static_compress.h), bounded in bytes, least recently used out first.
 *
 * An entry is keyed by the identity of the file (device, inode) and its
 * validators (size, modification time), with the coding and the quality
 * level: a file changed on disk has another key, so its old entry is never
 * found again and leaves by age. The key comes from the file cache's entry,
 * which is revalidated once a second (file_cache.h): a change is seen
 * within that bound.
 *
 * An entry is PENDING while a task thread compresses the file (it is then
 * found, so that a second request waits for the same work instead of
 * starting its own, and is never evicted), then READY (the bytes) or
 * FAILED (the result was not smaller than the file: kept, small, so that the
 * file is not tried again). What the table holds is charged against the
 * bound: a READY entry its bytes, a PENDING one the most its result may
 * take, each with the entry's own size. An entry evicted while a response
 * still sends it stays allocated (reference counted) until that response
 * ends: such bytes are no longer charged.
 *
 * One cache per worker, touched by its worker's thread only: no locks. The
 * counters are atomic so that any thread may read them (api->compress_stats).
 */
#ifndef MK_SERVER_COMPRESS_CACHE_H
#define MK_SERVER_COMPRESS_CACHE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "../../core/list.h"

struct mk_suspended;

enum mk_zstate {
    MK_Z_PENDING = 0,
    MK_Z_READY,
    MK_Z_FAILED,
};

struct mk_zkey {
    dev_t dev;
    ino_t ino;
    off_t size;
    int64_t mtime_sec;
    long mtime_nsec;
    uint8_t coding; /* enum mk_coding */
    uint8_t level;
};

struct mk_zentry {
    struct mk_zkey key;
    uint32_t hash;
    uint8_t state; /* enum mk_zstate */
    bool cached;   /* in the table (and, unless PENDING, in the LRU list) */
    unsigned refs; /* the table's, plus one per holder (a job, a response) */
    size_t charge; /* bytes counted against the bound while cached */
    char *data;    /* READY: the encoded bytes (mk_free), len of them */
    size_t len;
    /* PENDING: the requests parked until the work is done, linked through
       their handles' `next` (static_compress.c) */
    struct mk_suspended *waiters;
    struct mk_zentry *hnext;
    struct mk_list lru; /* oldest first */
};

struct mk_zcache {
    struct mk_zentry **buckets;
    unsigned n_buckets; /* power of two, grown with the count */
    unsigned count;     /* entries in the table */
    uint64_t bytes;     /* charged */
    struct mk_list lru; /* READY and FAILED entries, least recently used first */
    /* counters, written by the worker only */
    atomic_ullong st_bytes;       /* = bytes */
    atomic_uint st_entries;       /* = count */
    atomic_ulong st_hits;         /* answers from a READY entry */
    atomic_ulong st_compressions; /* jobs started */
    atomic_ulong st_waits;        /* requests that waited for another's job */
    atomic_ulong st_evictions;    /* entries evicted to make room */
    atomic_ulong st_skipped;      /* answers sent unencoded: no room, queue full */
};

/* What one entry costs besides its bytes. */
#define MK_ZENTRY_OVERHEAD ((size_t) sizeof(struct mk_zentry))

void mk_compress_cache_init(struct mk_zcache *zc);
/* Drop every entry (the worker's teardown); those still held live on until released. */
void mk_compress_cache_destroy(struct mk_zcache *zc);

/*
 * The entry for `k`, or NULL. A READY or FAILED entry becomes the most
 * recently used. No reference is taken: the caller takes one (refs++)
 * before anything that may evict it.
 */
struct mk_zentry *mk_compress_cache_find(struct mk_zcache *zc, const struct mk_zkey *k);

/*
 * A new PENDING entry for `k`, put in the table and charged `charge` bytes
 * plus its own size, after evicting least recently used entries until the
 * charges fit in `max`. Returns it with two references (the table's and
 * the caller's), or NULL when that much cannot be freed (the PENDING
 * entries hold the rest) or memory is short.
 */
struct mk_zentry *mk_compress_cache_reserve(struct mk_zcache *zc, const struct mk_zkey *k,
                                            size_t charge, uint64_t max);

/*
 * The work of PENDING entry e is over: `data` (len bytes, now e's) makes it
 * READY; NULL with `failed` makes it FAILED (kept: the file does not
 * compress); NULL without takes it out of the table (an error worth trying
 * again later). The charge becomes what e holds; older entries are evicted
 * while the total is over `max` (e itself last: then it leaves the table,
 * still valid for its holders).
 */
void mk_compress_cache_settle(struct mk_zcache *zc, struct mk_zentry *e, char *data, size_t len,
                              bool failed, uint64_t max);

/* Evict least recently used entries until the charges fit in `max` (a smaller bound after a
 * reload). */
void mk_compress_cache_trim(struct mk_zcache *zc, uint64_t max);

/* Drop one reference; the entry and its bytes are freed with the last one. */
void mk_compress_cache_release(struct mk_zentry *e);

#endif
