/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_ratelimit_table.c: unit tests of core/ratelimit.c: the GCRA step
 * (burst, refill, the wait of a refusal), the table's bound and its
 * evictions (idle entries first, then the least recently used of a set),
 * one count for two threads, and SipHash-2-4's reference vectors and
 * SipHash-1-3's (the rate-limit key's).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <pthread.h>

#include "core/ratelimit.h"

#define SEC 1000000u

/* 10/s burst 2: three at once, then one every 100 ms; a refusal says when. */
static void test_gcra_burst_then_rate(void **state)
{
    uint64_t tat = 0, ahead, now = 5 * SEC, iv = SEC / 10, tol = 2 * iv;
    (void) state;

    assert_true(mk_gcra_take(&tat, now, iv, tol, &ahead));
    assert_int_equal(ahead, 0);
    assert_true(mk_gcra_take(&tat, now, iv, tol, &ahead));
    assert_int_equal(ahead, iv);
    assert_true(mk_gcra_take(&tat, now, iv, tol, &ahead));
    assert_int_equal(ahead, 2 * iv);
    uint64_t before = tat;
    assert_false(mk_gcra_take(&tat, now, iv, tol, &ahead));
    assert_int_equal(ahead, iv);   /* the next is taken 100 ms later */
    assert_int_equal(tat, before); /* a refusal changes nothing */
    assert_false(mk_gcra_take(&tat, now + iv - 1, iv, tol, &ahead));
    assert_int_equal(ahead, 1);
    assert_true(mk_gcra_take(&tat, now + iv, iv, tol, &ahead));
    assert_false(mk_gcra_take(&tat, now + iv, iv, tol, &ahead));
    /* idle long enough, the bucket is full again: burst + 1 once more, not more */
    now += 10 * SEC;
    int taken = 0;
    while (mk_gcra_take(&tat, now, iv, tol, &ahead)) {
        taken++;
    }
    assert_int_equal(taken, 3);
}

/* Over a long run at twice the rate, the count taken is rate * time + burst + 1. */
static void test_gcra_long_run(void **state)
{
    uint64_t tat = 0, ahead, iv = SEC / 20, tol = 5 * iv;
    unsigned taken = 0;
    (void) state;

    for (uint64_t t = 0; t < 10 * SEC; t += iv / 2) {
        taken += mk_gcra_take(&tat, SEC + t, iv, tol, &ahead);
    }
    assert_int_equal(taken, 20 * 10 + 5 + 1 - 1); /* the last interval's is still ahead */
}

static void test_table_bound(void **state)
{
    uint64_t ahead;
    (void) state;

    struct mk_ratelimit_table *t = mk_ratelimit_table_new(100);
    assert_int_equal(mk_ratelimit_capacity(t), 128); /* whole sets, a power of two of them */
    for (uint32_t i = 0; i < 100000; i++) {
        uint64_t k = mk_ratelimit_key(t, &i, sizeof(i));
        assert_true(mk_ratelimit_take(t, k, SEC, SEC, 0, &ahead));
    }
    assert_int_equal(mk_ratelimit_capacity(t), 128);
    /* every key but those of the last round was still limited when it went */
    assert_true(mk_ratelimit_evictions(t) >= 100000 - 128);
    mk_ratelimit_table_free(t);
    t = mk_ratelimit_table_new(16384);
    assert_int_equal(mk_ratelimit_capacity(t), 16384);
    mk_ratelimit_table_free(t);
}

/* One set of 8: the least recently used goes first, and its limit restarts. */
static void test_table_evicts_the_oldest(void **state)
{
    uint64_t ahead, k[9];
    (void) state;

    struct mk_ratelimit_table *t = mk_ratelimit_table_new(8);
    assert_int_equal(mk_ratelimit_capacity(t), 8);
    for (uint64_t i = 0; i < 9; i++) {
        k[i] = i + 1;
    }
    for (int i = 0; i < 8; i++) {
        assert_true(mk_ratelimit_take(t, k[i], SEC + (uint64_t) i, 60 * SEC, 0, &ahead));
    }
    /* key 0 is touched again (refused), so key 1 is now the oldest */
    assert_false(mk_ratelimit_take(t, k[0], SEC + 10, 60 * SEC, 0, &ahead));
    assert_int_equal(mk_ratelimit_evictions(t), 0);
    assert_true(mk_ratelimit_take(t, k[8], SEC + 11, 60 * SEC, 0, &ahead));
    assert_int_equal(mk_ratelimit_evictions(t), 1);
    assert_false(mk_ratelimit_take(t, k[0], SEC + 12, 60 * SEC, 0, &ahead));
    /* key 1 was forgotten: taken again */
    assert_true(mk_ratelimit_take(t, k[1], SEC + 13, 60 * SEC, 0, &ahead));
    assert_int_equal(mk_ratelimit_evictions(t), 2);
    /* once their buckets are full again, entries are reused without an eviction */
    uint64_t later = 100 * SEC;
    for (uint64_t i = 100; i < 108; i++) {
        assert_true(mk_ratelimit_take(t, i, later, 60 * SEC, 0, &ahead));
    }
    assert_int_equal(mk_ratelimit_evictions(t), 2);
    /* the evictions are told once, then not again within 60 s */
    uint64_t n = 0;
    assert_true(mk_ratelimit_report(t, later, &n));
    assert_int_equal(n, 2);
    assert_false(mk_ratelimit_report(t, later + 1, &n));
    mk_ratelimit_table_free(t);
}

struct hammer {
    struct mk_ratelimit_table *t;
    unsigned taken;
};

static void *hammer(void *arg)
{
    struct hammer *h = arg;
    uint64_t ahead;

    for (int i = 0; i < 100000; i++) {
        h->taken += mk_ratelimit_take(h->t, 42, SEC, SEC, 9 * (uint64_t) SEC, &ahead);
    }
    return NULL;
}

/* Two threads on one key at one instant: burst + 1 in all, not per thread. */
static void test_table_two_threads(void **state)
{
    struct mk_ratelimit_table *t = mk_ratelimit_table_new(64);
    struct hammer h[2] = {{t, 0}, {t, 0}};
    pthread_t th[2];
    (void) state;

    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, hammer, &h[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
    }
    assert_int_equal(h[0].taken + h[1].taken, 10);
    mk_ratelimit_table_free(t);
}

/* SipHash-2-4's reference vectors (key 00..0f; messages 00..len-1). */
static void test_siphash_vectors(void **state)
{
    uint8_t k[16], m[64];
    (void) state;

    for (int i = 0; i < 16; i++) {
        k[i] = (uint8_t) i;
    }
    for (int i = 0; i < 64; i++) {
        m[i] = (uint8_t) i;
    }
    assert_true(mk_siphash(k, m, 0) == 0x726fdb47dd0e0e31ull);
    assert_true(mk_siphash(k, m, 8) == 0x93f5f5799a932462ull);
    assert_true(mk_siphash(k, m, 15) == 0xa129ca6149be45e5ull);
    assert_true(mk_siphash(k, m, 63) == 0x958a324ceb064572ull);
}

/*
 * SipHash-1-3 under the zero key, as CPython 3.11 computes it (its bytes
 * hash is SipHash-1-3; PYTHONHASHSEED=0 zeroes the key):
 * PYTHONHASHSEED=0 python3 -c 'print(hex(hash(bytes(range(15))) % 2**64))'.
 */
static void test_siphash13_vectors(void **state)
{
    uint8_t k[16] = {0}, m[64];
    (void) state;

    for (int i = 0; i < 64; i++) {
        m[i] = (uint8_t) i;
    }
    assert_true(mk_siphash13(k, "a", 1) == 0x407448d2b89b1813ull);
    assert_true(mk_siphash13(k, m, 8) == 0xead411e67ebe2eeaull);
    assert_true(mk_siphash13(k, m, 15) == 0xf30eb725bb91c9eaull);
    assert_true(mk_siphash13(k, m, 16) == 0x8972188433a5c5b7ull);
    assert_true(mk_siphash13(k, m, 63) == 0x385d3e39e5f37359ull);
    /* not SipHash-2-4 */
    assert_true(mk_siphash13(k, m, 16) != mk_siphash(k, m, 16));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gcra_burst_then_rate), cmocka_unit_test(test_gcra_long_run),
        cmocka_unit_test(test_table_bound),          cmocka_unit_test(test_table_evicts_the_oldest),
        cmocka_unit_test(test_table_two_threads),    cmocka_unit_test(test_siphash_vectors),
        cmocka_unit_test(test_siphash13_vectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
