/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_keycount.c: unit tests of core/keycount.c: the bound per key, keys
 * apart, an entry only while something is counted, two threads at once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <pthread.h>

#include "core/keycount.h"

static void key_of(uint32_t n, uint8_t key[MK_KEYCOUNT_KEY_LEN])
{
    memset(key, 0, MK_KEYCOUNT_KEY_LEN);
    memcpy(key, &n, sizeof(n));
}

static void test_bound_per_key(void **state)
{
    struct mk_keycount *t = mk_keycount_new();
    uint8_t a[MK_KEYCOUNT_KEY_LEN], b[MK_KEYCOUNT_KEY_LEN];
    (void) state;

    key_of(1, a);
    key_of(2, b);
    for (int i = 0; i < 3; i++) {
        assert_true(mk_keycount_acquire(t, a, 3));
    }
    assert_false(mk_keycount_acquire(t, a, 3));
    assert_int_equal(mk_keycount_get(t, a), 3);
    assert_true(mk_keycount_acquire(t, b, 3));
    assert_false(mk_keycount_acquire(t, b, 0)); /* a bound of 0 takes none */
    mk_keycount_release(t, a);
    assert_true(mk_keycount_acquire(t, a, 3));
    assert_int_equal(mk_keycount_entries(t), 2);
    mk_keycount_free(t); /* with entries left: freed too */
}

/* Many keys seen, few open: the table holds only those with a count. */
static void test_entries_only_while_counted(void **state)
{
    struct mk_keycount *t = mk_keycount_new();
    uint8_t k[MK_KEYCOUNT_KEY_LEN];
    (void) state;

    for (uint32_t i = 0; i < 100000; i++) {
        key_of(i, k);
        assert_true(mk_keycount_acquire(t, k, 1));
        if (i % 1000 != 0) {
            mk_keycount_release(t, k);
        }
    }
    assert_int_equal(mk_keycount_entries(t), 100);
    for (uint32_t i = 0; i < 100000; i += 1000) {
        key_of(i, k);
        assert_int_equal(mk_keycount_get(t, k), 1);
        mk_keycount_release(t, k);
    }
    assert_int_equal(mk_keycount_entries(t), 0);
    mk_keycount_free(t);
}

static void *churn(void *arg)
{
    struct mk_keycount *t = arg;
    uint8_t k[MK_KEYCOUNT_KEY_LEN];

    key_of(7, k);
    for (int i = 0; i < 100000; i++) {
        if (mk_keycount_acquire(t, k, 1000000)) {
            mk_keycount_release(t, k);
        }
    }
    return NULL;
}

static void test_two_threads(void **state)
{
    struct mk_keycount *t = mk_keycount_new();
    pthread_t th[2];
    uint8_t k[MK_KEYCOUNT_KEY_LEN];
    (void) state;

    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, churn, t), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
    }
    key_of(7, k);
    assert_int_equal(mk_keycount_get(t, k), 0);
    assert_int_equal(mk_keycount_entries(t), 0);
    mk_keycount_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bound_per_key),
        cmocka_unit_test(test_entries_only_while_counted),
        cmocka_unit_test(test_two_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
