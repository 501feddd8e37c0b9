/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_compress_cache.c: server/request/compress_cache.c, a worker's cache of files
 * compressed on the fly: keys, the bound in bytes, least recently used out
 * first, PENDING entries never evicted, entries held after their eviction.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/memory.h"
#include "server/request/compress_cache.h"

#define OVH MK_ZENTRY_OVERHEAD

static struct mk_zkey key(ino_t ino)
{
    struct mk_zkey k;
    memset(&k, 0, sizeof(k));
    k.dev = 8;
    k.ino = ino;
    k.size = 1000;
    k.mtime_sec = 1700000000;
    k.mtime_nsec = 5;
    k.coding = 0;
    k.level = 5;
    return k;
}

static char *bytes(size_t n)
{
    char *p = mk_alloc(n);
    memset(p, 'x', n);
    return p;
}

/* A READY entry of n bytes for inode ino, under bound max; the caller's reference dropped. */
static struct mk_zentry *ready(struct mk_zcache *zc, ino_t ino, size_t n, uint64_t max)
{
    struct mk_zkey k = key(ino);
    struct mk_zentry *e = mk_compress_cache_reserve(zc, &k, n, max);
    assert_non_null(e);
    mk_compress_cache_settle(zc, e, bytes(n), n, false, max);
    mk_compress_cache_release(e);
    return e;
}

static void test_find_by_whole_key(void **state)
{
    struct mk_zcache zc;
    (void) state;

    mk_compress_cache_init(&zc);
    struct mk_zkey k = key(1);
    assert_null(mk_compress_cache_find(&zc, &k));
    struct mk_zentry *e = ready(&zc, 1, 100, 1 << 20);
    assert_ptr_equal(mk_compress_cache_find(&zc, &k), e);
    assert_int_equal(e->state, MK_Z_READY);
    assert_int_equal(e->len, 100);
    /* any part of the key differing: another entry (a changed file, another coding or level) */
    struct mk_zkey other[6];
    for (int i = 0; i < 6; i++) {
        other[i] = k;
    }
    other[0].size++;
    other[1].mtime_sec++;
    other[2].mtime_nsec++;
    other[3].coding = 2;
    other[4].level = 6;
    other[5].dev++;
    for (int i = 0; i < 6; i++) {
        assert_null(mk_compress_cache_find(&zc, &other[i]));
    }
    assert_int_equal(zc.count, 1);
    assert_int_equal(zc.bytes, 100 + OVH);
    assert_int_equal(atomic_load(&zc.st_bytes), 100 + OVH);
    assert_int_equal(atomic_load(&zc.st_entries), 1);
    mk_compress_cache_destroy(&zc);
}

/* A PENDING entry is charged its worst case, found, and then its result. */
static void test_pending_then_settled(void **state)
{
    struct mk_zcache zc;
    (void) state;

    mk_compress_cache_init(&zc);
    struct mk_zkey k = key(1);
    struct mk_zentry *e = mk_compress_cache_reserve(&zc, &k, 5000, 1 << 20);
    assert_non_null(e);
    assert_int_equal(e->refs, 2);
    assert_int_equal(e->state, MK_Z_PENDING);
    assert_ptr_equal(mk_compress_cache_find(&zc, &k), e);
    assert_int_equal(zc.bytes, 5000 + OVH);
    mk_compress_cache_settle(&zc, e, bytes(1200), 1200, false, 1 << 20);
    assert_int_equal(e->state, MK_Z_READY);
    assert_int_equal(zc.bytes, 1200 + OVH);
    mk_compress_cache_release(e);
    assert_int_equal(e->refs, 1);
    mk_compress_cache_destroy(&zc);
}

/* Not smaller: kept as FAILED (its own size charged); an error: taken out. */
static void test_failed_kept_error_dropped(void **state)
{
    struct mk_zcache zc;
    (void) state;

    mk_compress_cache_init(&zc);
    struct mk_zkey k1 = key(1), k2 = key(2);
    struct mk_zentry *a = mk_compress_cache_reserve(&zc, &k1, 5000, 1 << 20);
    struct mk_zentry *b = mk_compress_cache_reserve(&zc, &k2, 5000, 1 << 20);
    mk_compress_cache_settle(&zc, a, NULL, 0, true, 1 << 20);
    mk_compress_cache_settle(&zc, b, NULL, 0, false, 1 << 20);
    assert_int_equal(a->state, MK_Z_FAILED);
    assert_ptr_equal(mk_compress_cache_find(&zc, &k1), a);
    assert_null(mk_compress_cache_find(&zc, &k2));
    assert_false(b->cached);
    assert_int_equal(zc.count, 1);
    assert_int_equal(zc.bytes, OVH);
    mk_compress_cache_release(a);
    mk_compress_cache_release(b); /* the last reference: freed */
    mk_compress_cache_destroy(&zc);
}

/* Over the bound the least recently used go first; a find makes an entry recent. */
static void test_lru_within_the_bound(void **state)
{
    struct mk_zcache zc;
    const uint64_t max = 4 * (1000 + OVH);
    (void) state;

    mk_compress_cache_init(&zc);
    for (ino_t i = 1; i <= 4; i++) {
        ready(&zc, i, 1000, max);
    }
    assert_int_equal(zc.count, 4);
    struct mk_zkey k1 = key(1);
    assert_non_null(
        mk_compress_cache_find(&zc, &k1)); /* 1 is now the most recent: 2 is the oldest */
    ready(&zc, 5, 1000, max);
    assert_true(zc.bytes <= max);
    assert_int_equal(zc.count, 4);
    for (ino_t i = 1; i <= 5; i++) {
        struct mk_zkey k = key(i);
        if (i == 2) {
            assert_null(mk_compress_cache_find(&zc, &k));
        }
        else {
            assert_non_null(mk_compress_cache_find(&zc, &k));
        }
    }
    assert_int_equal(atomic_load(&zc.st_evictions), 1);
    /* a reservation larger than the bound never fits */
    struct mk_zkey k9 = key(9);
    assert_null(mk_compress_cache_reserve(&zc, &k9, max, max));
    assert_int_equal(zc.count, 4);
    mk_compress_cache_destroy(&zc);
}

/* PENDING entries are never evicted: when they hold the bound, nothing more is reserved. */
static void test_pending_not_evicted(void **state)
{
    struct mk_zcache zc;
    const uint64_t max = 3 * (1000 + OVH);
    (void) state;

    mk_compress_cache_init(&zc);
    struct mk_zkey k1 = key(1), k2 = key(2), k3 = key(3), k4 = key(4);
    struct mk_zentry *p1 = mk_compress_cache_reserve(&zc, &k1, 1000, max);
    struct mk_zentry *p2 = mk_compress_cache_reserve(&zc, &k2, 1000, max);
    ready(&zc, 3, 1000, max);
    /* room is made by evicting the settled entry only */
    struct mk_zentry *p4 = mk_compress_cache_reserve(&zc, &k4, 1000, max);
    assert_non_null(p4);
    assert_null(mk_compress_cache_find(&zc, &k3));
    struct mk_zkey k5 = key(5);
    assert_null(mk_compress_cache_reserve(&zc, &k5, 1000, max)); /* three PENDING hold it all */
    assert_int_equal(zc.count, 3);
    mk_compress_cache_settle(&zc, p1, bytes(10), 10, false, max);
    mk_compress_cache_settle(&zc, p2, bytes(10), 10, false, max);
    mk_compress_cache_settle(&zc, p4, bytes(10), 10, false, max);
    assert_int_equal(zc.bytes, 3 * (10 + OVH));
    mk_compress_cache_release(p1);
    mk_compress_cache_release(p2);
    mk_compress_cache_release(p4);
    mk_compress_cache_destroy(&zc);
}

/* An entry evicted while held stays valid, uncharged, until released. */
static void test_held_entry_outlives_eviction(void **state)
{
    struct mk_zcache zc;
    const uint64_t max = 2 * (1000 + OVH);
    (void) state;

    mk_compress_cache_init(&zc);
    struct mk_zentry *a = ready(&zc, 1, 1000, max);
    a->refs++; /* a response sends it */
    ready(&zc, 2, 1000, max);
    ready(&zc, 3, 1000, max);
    assert_false(a->cached);
    assert_int_equal(a->refs, 1);
    assert_int_equal(zc.bytes, 2 * (1000 + OVH));
    assert_int_equal(a->data[999], 'x');
    mk_compress_cache_release(a);
    mk_compress_cache_destroy(&zc);
}

/* A result that does not fit once settled (the bound shrank) leaves the table, still held. */
static void test_settle_over_a_smaller_bound(void **state)
{
    struct mk_zcache zc;
    (void) state;

    mk_compress_cache_init(&zc);
    ready(&zc, 1, 1000, 1 << 20);
    struct mk_zkey k2 = key(2);
    struct mk_zentry *e = mk_compress_cache_reserve(&zc, &k2, 4000, 1 << 20);
    mk_compress_cache_settle(&zc, e, bytes(3000), 3000, false, 2000);
    assert_false(e->cached);
    assert_int_equal(e->state, MK_Z_READY);
    assert_int_equal(zc.count, 0);
    assert_int_equal(zc.bytes, 0);
    mk_compress_cache_release(e);
    /* and trim applies a smaller bound to what is there */
    for (ino_t i = 1; i <= 5; i++) {
        ready(&zc, i, 100, 1 << 20);
    }
    mk_compress_cache_trim(&zc, 2 * (100 + OVH));
    assert_int_equal(zc.count, 2);
    struct mk_zkey k5 = key(5);
    assert_non_null(mk_compress_cache_find(&zc, &k5));
    mk_compress_cache_destroy(&zc);
}

/* Many entries: the table grows, every one is found. */
static void test_many_entries(void **state)
{
    struct mk_zcache zc;
    (void) state;

    mk_compress_cache_init(&zc);
    for (ino_t i = 1; i <= 5000; i++) {
        ready(&zc, i, 10, UINT64_MAX);
    }
    assert_int_equal(zc.count, 5000);
    assert_true(zc.n_buckets >= 4096);
    for (ino_t i = 1; i <= 5000; i++) {
        struct mk_zkey k = key(i);
        struct mk_zentry *e = mk_compress_cache_find(&zc, &k);
        assert_non_null(e);
        assert_int_equal(e->key.ino, i);
    }
    mk_compress_cache_destroy(&zc);
    assert_int_equal(zc.count, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find_by_whole_key),
        cmocka_unit_test(test_pending_then_settled),
        cmocka_unit_test(test_failed_kept_error_dropped),
        cmocka_unit_test(test_lru_within_the_bound),
        cmocka_unit_test(test_pending_not_evicted),
        cmocka_unit_test(test_held_entry_outlives_eviction),
        cmocka_unit_test(test_settle_over_a_smaller_bound),
        cmocka_unit_test(test_many_entries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
