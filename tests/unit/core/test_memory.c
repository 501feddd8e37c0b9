/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_memory.c: unit tests of core/memory.c: the allocation wrappers, the
 * chunk pool and the request arena.
 */
#include <setjmp.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/memory.h"

#define ALIGN alignof(max_align_t)

static void test_wrappers(void **state)
{
    char *p;
    (void) state;

    p = mk_alloc(0);
    assert_non_null(p);
    mk_free(p);

    p = mk_calloc(16, 4);
    assert_non_null(p);
    for (size_t i = 0; i < 64; i++) {
        assert_int_equal(p[i], 0);
    }
    memcpy(p, "0123456789", 10);
    p = mk_realloc(p, 100000);
    assert_memory_equal(p, "0123456789", 10);
    p[99999] = 'z';
    mk_free(p);

    p = mk_calloc(0, 0);
    assert_non_null(p);
    mk_free(p);

    p = mk_strdup("hello");
    assert_string_equal(p, "hello");
    mk_free(p);

    p = mk_strndup("hello world", 5);
    assert_string_equal(p, "hello");
    mk_free(p);

    p = mk_strndup("a\0b", 3);
    assert_memory_equal(p, "a\0b\0", 4);
    mk_free(p);

    p = mk_try_alloc(32);
    assert_non_null(p);
    p = mk_try_realloc(p, 64);
    assert_non_null(p);
    mk_free(p);
    mk_free(NULL);
}

static void test_pool_caching_limit(void **state)
{
    struct mk_pool pool;
    void *chunks[6];
    (void) state;

    mk_pool_init(&pool, 2);
    assert_int_equal(pool.in_use, 0);
    assert_int_equal(pool.cached, 0);
    assert_int_equal(pool.max_cached, 2);
    for (int i = 0; i < 6; i++) {
        chunks[i] = mk_pool_get(&pool);
        assert_non_null(chunks[i]);
        memset(chunks[i], i, MK_CHUNK_SIZE); /* every byte is ours */
        assert_int_equal(pool.in_use, (unsigned long) i + 1);
        assert_int_equal(pool.cached, 0);
    }
    for (int i = 0; i < 6; i++) {
        for (int j = 0; j < 6; j++) {
            if (i != j) {
                assert_ptr_not_equal(chunks[i], chunks[j]);
            }
        }
    }
    for (int i = 0; i < 6; i++) {
        mk_pool_put(&pool, chunks[i]);
        assert_int_equal(pool.in_use, 5ul - (unsigned long) i);
        assert_int_equal(pool.cached, i < 2 ? (unsigned) i + 1 : 2u); /* never above the limit */
    }
    mk_pool_destroy(&pool);
    assert_int_equal(pool.cached, 0);
}

/* A chunk given back is handed out again, most recent first. */
static void test_pool_reuse(void **state)
{
    struct mk_pool pool;
    void *a, *b, *c;
    (void) state;

    mk_pool_init(&pool, 8);
    a = mk_pool_get(&pool);
    b = mk_pool_get(&pool);
    mk_pool_put(&pool, a);
    mk_pool_put(&pool, b);
    assert_int_equal(pool.cached, 2);
    assert_int_equal(pool.in_use, 0);

    c = mk_pool_get(&pool);
    assert_ptr_equal(c, b);
    assert_int_equal(pool.cached, 1);
    assert_int_equal(pool.in_use, 1);
    c = mk_pool_get(&pool);
    assert_ptr_equal(c, a);
    assert_int_equal(pool.cached, 0);
    memset(c, 0xab, MK_CHUNK_SIZE);
    c = mk_pool_get(&pool); /* cache empty: a fresh one */
    assert_ptr_not_equal(c, a);
    assert_ptr_not_equal(c, b);
    assert_int_equal(pool.in_use, 3);
    mk_pool_put(&pool, a);
    mk_pool_put(&pool, b);
    mk_pool_put(&pool, c);
    assert_int_equal(pool.in_use, 0);
    assert_int_equal(pool.cached, 3);
    mk_pool_destroy(&pool);
}

/* With max_cached 0 nothing is kept. */
static void test_pool_no_cache(void **state)
{
    struct mk_pool pool;
    (void) state;

    mk_pool_init(&pool, 0);
    void *a = mk_pool_get(&pool);
    assert_non_null(a);
    mk_pool_put(&pool, a);
    assert_int_equal(pool.cached, 0);
    assert_int_equal(pool.in_use, 0);
    assert_null(pool.free_list);
    mk_pool_destroy(&pool);
}

static bool aligned(const void *p)
{
    return ((uintptr_t) p % ALIGN) == 0;
}

static void test_arena_alignment(void **state)
{
    struct mk_pool pool;
    struct mk_arena arena;
    char *prev = NULL;
    (void) state;

    mk_pool_init(&pool, 4);
    mk_arena_init(&arena, &pool);
    for (size_t size = 1; size <= 100; size++) {
        char *p = mk_arena_alloc(&arena, size);
        assert_non_null(p);
        assert_true(aligned(p));
        memset(p, (int) size, size);
        if (prev) {
            assert_ptr_not_equal(p, prev);
        }
        prev = p;
    }
    /* odd sizes do not break the alignment of what follows */
    for (int i = 0; i < 50; i++) {
        assert_true(aligned(mk_arena_alloc(&arena, 1)));
        assert_true(aligned(mk_arena_alloc(&arena, 3)));
        assert_true(aligned(mk_arena_alloc(&arena, ALIGN + 1)));
        long double *ld = mk_arena_alloc(&arena, sizeof(long double));
        *ld = 1.5L;
        assert_true(*ld == 1.5L);
    }
    mk_arena_reset(&arena);
    mk_pool_destroy(&pool);
}

/* Allocations never overlap: fill each with its own pattern, check them all. */
static void test_arena_no_overlap(void **state)
{
    struct mk_pool pool;
    struct mk_arena arena;
    enum { N = 600 };
    unsigned char *ptrs[N];
    size_t sizes[N];
    (void) state;

    mk_pool_init(&pool, 16);
    mk_arena_init(&arena, &pool);
    for (size_t i = 0; i < N; i++) {
        sizes[i] = (i * 37) % 300 + (i % 50 == 0 ? 5000 : 0);
        ptrs[i] = mk_arena_alloc(&arena, sizes[i]);
        assert_non_null(ptrs[i]);
        memset(ptrs[i], (int) (i & 0xff), sizes[i]);
    }
    for (size_t i = 0; i < N; i++) {
        for (size_t k = 0; k < sizes[i]; k++) {
            if (ptrs[i][k] != (unsigned char) (i & 0xff)) {
                fail_msg("allocation %zu byte %zu overwritten", i, k);
            }
        }
    }
    assert_true(pool.in_use > 1);
    mk_arena_reset(&arena);
    assert_int_equal(pool.in_use, 0);
    mk_pool_destroy(&pool);
}

/* Reset gives every pooled block back; the arena can be used again. */
static void test_arena_reset_returns_chunks(void **state)
{
    struct mk_pool pool;
    struct mk_arena arena;
    (void) state;

    mk_pool_init(&pool, 2);
    mk_arena_init(&arena, &pool);
    assert_int_equal(pool.in_use, 0);
    assert_non_null(mk_arena_alloc(&arena, 8));
    assert_int_equal(pool.in_use, 1);
    /* fill well past one chunk with small allocations */
    for (int i = 0; i < 3 * (MK_CHUNK_SIZE / 64); i++) {
        assert_non_null(mk_arena_alloc(&arena, 64));
    }
    unsigned long used = pool.in_use;
    assert_true(used >= 3);
    mk_arena_reset(&arena);
    assert_int_equal(pool.in_use, 0);
    assert_int_equal(pool.cached, 2); /* the pool keeps at most max_cached */
    assert_null(arena.blocks);

    /* again: the cached chunks are used first */
    assert_non_null(mk_arena_alloc(&arena, 8));
    assert_int_equal(pool.in_use, 1);
    assert_int_equal(pool.cached, 1);
    mk_arena_reset(&arena);
    mk_arena_reset(&arena); /* twice is harmless */
    assert_int_equal(pool.in_use, 0);
    mk_pool_destroy(&pool);
}

/* Requests larger than a chunk are served apart and do not use the pool. */
static void test_arena_large(void **state)
{
    struct mk_pool pool;
    struct mk_arena arena;
    (void) state;

    mk_pool_init(&pool, 4);
    mk_arena_init(&arena, &pool);

    /* a large allocation first, with no block yet */
    char *big = mk_arena_alloc(&arena, 3 * MK_CHUNK_SIZE);
    assert_non_null(big);
    assert_true(aligned(big));
    memset(big, 'B', 3 * MK_CHUNK_SIZE);
    assert_int_equal(pool.in_use, 0);

    char *a = mk_arena_alloc(&arena, 16);
    assert_non_null(a);
    assert_int_equal(pool.in_use, 1);

    /* a large one between small ones keeps the current block in use */
    char *big2 = mk_arena_alloc(&arena, 100000);
    assert_non_null(big2);
    assert_true(aligned(big2));
    memset(big2, 'C', 100000);
    char *b = mk_arena_alloc(&arena, 16);
    assert_ptr_equal(b, a + 16);
    assert_int_equal(pool.in_use, 1);
    assert_int_equal(big[3 * MK_CHUNK_SIZE - 1], 'B');

    mk_arena_reset(&arena);
    assert_int_equal(pool.in_use, 0);
    mk_pool_destroy(&pool);
}

/* Sizes that cannot be rounded or allocated give NULL, not a tiny block. */
static void test_arena_overflow(void **state)
{
    struct mk_pool pool;
    struct mk_arena arena;
    (void) state;

    mk_pool_init(&pool, 4);
    mk_arena_init(&arena, &pool);
    assert_null(mk_arena_alloc(&arena, SIZE_MAX));
    assert_null(mk_arena_alloc(&arena, SIZE_MAX - 1));
    assert_null(mk_arena_alloc(&arena, SIZE_MAX - ALIGN + 2));
    assert_null(mk_arena_alloc(&arena, SIZE_MAX - ALIGN - 4));
    assert_int_equal(pool.in_use, 0);
    /* the arena still works */
    assert_non_null(mk_arena_alloc(&arena, 10));
    mk_arena_reset(&arena);
    mk_pool_destroy(&pool);
}

/* Without a pool every allocation is its own block. */
static void test_arena_without_pool(void **state)
{
    struct mk_arena arena;
    (void) state;

    mk_arena_init(&arena, NULL);
    char *a = mk_arena_alloc(&arena, 10);
    char *b = mk_arena_alloc(&arena, 20);
    char *c = mk_arena_alloc(&arena, 10000);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    assert_true(aligned(a) && aligned(b) && aligned(c));
    memset(a, 1, 10);
    memset(b, 2, 20);
    memset(c, 3, 10000);
    assert_int_equal(a[9], 1);
    assert_int_equal(b[19], 2);
    mk_arena_reset(&arena);
    assert_null(arena.blocks);
    /* a zero-initialised arena is valid too */
    struct mk_arena zero = {0};
    assert_non_null(mk_arena_alloc(&zero, 5));
    mk_arena_reset(&zero);
}

static void test_arena_strndup(void **state)
{
    struct mk_pool pool;
    struct mk_arena arena;
    (void) state;

    mk_pool_init(&pool, 4);
    mk_arena_init(&arena, &pool);
    char *s = mk_arena_strndup(&arena, "hello world", 5);
    assert_string_equal(s, "hello");
    assert_true(aligned(s));
    char *e = mk_arena_strndup(&arena, "", 0);
    assert_string_equal(e, "");
    char *t = mk_arena_strndup(&arena, "abc", 3);
    assert_string_equal(t, "abc");
    assert_string_equal(s, "hello"); /* untouched by later copies */
    mk_arena_reset(&arena);
    mk_pool_destroy(&pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrappers),
        cmocka_unit_test(test_pool_caching_limit),
        cmocka_unit_test(test_pool_reuse),
        cmocka_unit_test(test_pool_no_cache),
        cmocka_unit_test(test_arena_alignment),
        cmocka_unit_test(test_arena_no_overlap),
        cmocka_unit_test(test_arena_reset_returns_chunks),
        cmocka_unit_test(test_arena_large),
        cmocka_unit_test(test_arena_overflow),
        cmocka_unit_test(test_arena_without_pool),
        cmocka_unit_test(test_arena_strndup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
