/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_h2_mem.c: unit tests of server/proto/h2_mem.c, the allocator of an
 * nghttp2 session: blocks through the nghttp2_mem table behave like
 * malloc's (malloc's alignment, which is 8 bytes on 32-bit ARM and 16 on
 * x86-64, calloc zeroes, realloc keeps the bytes), a freed
 * small block is handed out again by the worker's free list (not under
 * AddressSanitizer, which must still see every free), and the frame buffer
 * stays page aligned and can be moved.
 */
#include <setjmp.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#ifdef MK_HAVE_H2
#include "server/proto/h2_mem.h"

#if defined(__SANITIZE_ADDRESS__)
#define POOLED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOLED 0
#endif
#endif
#ifndef POOLED
#define POOLED 1
#endif

static void test_blocks_behave_like_malloc(void **state)
{
    struct mk_h2_mem m;
    nghttp2_mem *ng = &m.ng;
    (void) state;

    mk_h2_mem_init(&m);
    for (size_t size = 1; size <= 3 * MK_H2_MEM_MAX; size = size * 3 + 1) {
        uint8_t *p = ng->malloc(size, ng->mem_user_data);
        assert_non_null(p);
        assert_int_equal((uintptr_t) p % alignof(max_align_t), 0);
        memset(p, 0xab, size);
        uint8_t *q = ng->realloc(p, 2 * size + 100, ng->mem_user_data);
        assert_non_null(q);
        for (size_t i = 0; i < size; i++) {
            assert_int_equal(q[i], 0xab);
        }
        memset(q, 0xcd, 2 * size + 100);
        ng->free(q, ng->mem_user_data);
    }
    /* calloc zeroes, also a block that comes back from the free list dirty */
    uint8_t *dirty = ng->malloc(200, ng->mem_user_data);
    memset(dirty, 0xff, 200);
    ng->free(dirty, ng->mem_user_data);
    uint8_t *z = ng->calloc(10, 20, ng->mem_user_data);
    for (size_t i = 0; i < 200; i++) {
        assert_int_equal(z[i], 0);
    }
    ng->free(z, ng->mem_user_data);
    assert_null(ng->calloc(SIZE_MAX / 2, 4, ng->mem_user_data));
    ng->free(NULL, ng->mem_user_data);
}

static void test_a_freed_block_is_handed_out_again(void **state)
{
    struct mk_h2_mem m;
    nghttp2_mem *ng = &m.ng;
    (void) state;

    mk_h2_mem_init(&m);
    void *a = ng->malloc(100, ng->mem_user_data);
    ng->free(a, ng->mem_user_data);
    void *b = ng->malloc(120, ng->mem_user_data); /* the same size class (128) */
    if (POOLED) {
        assert_ptr_equal(a, b);
    }
    /* a block above the classes is malloc'd and freed as such */
    void *big = ng->malloc(MK_H2_MEM_MAX + 1, ng->mem_user_data);
    assert_non_null(big);
    ng->free(big, ng->mem_user_data);
    /* more frees than a class keeps: the rest go back to malloc */
    void *many[MK_H2_MEM_KEEP + 8];
    for (size_t i = 0; i < MK_H2_MEM_KEEP + 8; i++) {
        many[i] = ng->malloc(64, ng->mem_user_data);
        assert_non_null(many[i]);
    }
    for (size_t i = 0; i < MK_H2_MEM_KEEP + 8; i++) {
        ng->free(many[i], ng->mem_user_data);
    }
    ng->free(b, ng->mem_user_data);
}

static void test_frame_buffer_is_page_aligned_and_may_move(void **state)
{
    struct mk_h2_mem m;
    nghttp2_mem *ng = &m.ng;
    size_t page = (size_t) sysconf(_SC_PAGESIZE);
    (void) state;

    mk_h2_mem_init(&m);
    m.creating = true;
    uint8_t *fb = ng->malloc(16384 + 10, ng->mem_user_data);
    m.creating = false;
    assert_non_null(fb);
    assert_ptr_equal(fb, m.framebuf);
    assert_int_equal((uintptr_t) fb % page, 0);
    memset(fb, 0x5a, 16384 + 10);
    mk_h2_mem_idle(&m); /* the pages go back: they read as zeros */
    assert_int_equal(fb[0], 0);
    fb[0] = 0x11;
    uint8_t *moved = ng->realloc(fb, 40000, ng->mem_user_data);
    assert_non_null(moved);
    assert_null(m.framebuf);
    assert_int_equal(moved[0], 0x11);
    ng->free(moved, ng->mem_user_data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_behave_like_malloc),
        cmocka_unit_test(test_a_freed_block_is_handed_out_again),
        cmocka_unit_test(test_frame_buffer_is_page_aligned_and_may_move),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* built without HTTP/2 */

int main(void)
{
    return 0;
}
#endif
