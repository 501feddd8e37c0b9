/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_task_queue.c: unit tests of server/request/task_queue.c (the bounds, the
 * turns between plugins and between clients, cancellation and client keys).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <monkey/mk_common.h>

#include "server/request/task_queue.h"

/* A client key for IPv4 address `text`. */
static void key4(const char *text, uint8_t key[MK_TASK_KEY_LEN])
{
    struct sockaddr_in in = {.sin_family = AF_INET};

    assert_int_equal(inet_pton(AF_INET, text, &in.sin_addr), 1);
    mk_task_key((const struct sockaddr *) &in, key);
}

static void key6(const char *text, uint8_t key[MK_TASK_KEY_LEN])
{
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};

    assert_int_equal(inet_pton(AF_INET6, text, &in6.sin6_addr), 1);
    mk_task_key((const struct sockaddr *) &in6, key);
}

static void test_client_keys_ipv4_and_ipv6_prefix(void **state)
{
    uint8_t a[MK_TASK_KEY_LEN], b[MK_TASK_KEY_LEN];
    (void) state;

    key4("192.0.2.1", a);
    key4("192.0.2.2", b);
    assert_memory_not_equal(a, b, MK_TASK_KEY_LEN);
    /* The same IPv4 client over IPv6 (a dual-stack listener) is the same client. */
    key6("::ffff:192.0.2.1", b);
    assert_memory_equal(a, b, MK_TASK_KEY_LEN);
    /* An IPv6 client is its /64. */
    key6("2001:db8:1:2::1", a);
    key6("2001:db8:1:2:ffff:1:2:3", b);
    assert_memory_equal(a, b, MK_TASK_KEY_LEN);
    key6("2001:db8:1:3::1", b);
    assert_memory_not_equal(a, b, MK_TASK_KEY_LEN);
    /* ::1 is not 0.0.0.1. */
    key6("::1", a);
    key4("0.0.0.1", b);
    assert_memory_not_equal(a, b, MK_TASK_KEY_LEN);
}

static void test_share_bound_leaves_other_shares(void **state)
{
    struct mk_task_queue q;
    struct mk_task_entry e[6];
    uint8_t key[MK_TASK_KEY_LEN];
    char addr[16];
    (void) state;

    memset(e, 0, sizeof(e));
    mk_task_queue_init(&q, 2);
    for (int i = 0; i < 4; i++) {
        snprintf(addr, sizeof(addr), "10.0.0.%d", i + 1);
        key4(addr, key);
        assert_int_equal(mk_task_queue_push(&q, &e[i], 0, key, 4, 8), MK_OK);
    }
    key4("10.0.0.9", key);
    /* Share 0 is full; share 1 is not touched by it. */
    assert_int_equal(mk_task_queue_push(&q, &e[4], 0, key, 4, 8), MK_TASK_SHARE_FULL);
    assert_int_equal(e[4].state, MK_TASK_IDLE);
    assert_int_equal(mk_task_queue_push(&q, &e[5], 1, key, 4, 8), MK_OK);
    assert_int_equal(q.total, 5);
    /* Running jobs still count; a finished one frees its place. */
    struct mk_task_entry *run = mk_task_queue_pop(&q);
    assert_ptr_equal(run, &e[0]);
    assert_int_equal(mk_task_queue_push(&q, &e[4], 0, key, 4, 8), MK_TASK_SHARE_FULL);
    mk_task_queue_done(&q, run);
    assert_int_equal(run->state, MK_TASK_IDLE);
    assert_int_equal(mk_task_queue_push(&q, &e[4], 0, key, 4, 8), MK_OK);
    mk_task_queue_destroy(&q);
}

static void test_client_bound_counts_all_shares(void **state)
{
    struct mk_task_queue q;
    struct mk_task_entry e[8];
    uint8_t a[MK_TASK_KEY_LEN], b[MK_TASK_KEY_LEN];
    (void) state;

    memset(e, 0, sizeof(e));
    mk_task_queue_init(&q, 3);
    key4("192.0.2.7", a);
    key4("192.0.2.8", b);
    /* Three jobs of client a over two shares: the limit counts them together. */
    assert_int_equal(mk_task_queue_push(&q, &e[0], 0, a, 100, 3), MK_OK);
    assert_int_equal(mk_task_queue_push(&q, &e[1], 1, a, 100, 3), MK_OK);
    assert_int_equal(mk_task_queue_push(&q, &e[2], 1, a, 100, 3), MK_OK);
    assert_int_equal(mk_task_queue_client(&q, a), 3);
    assert_int_equal(mk_task_queue_push(&q, &e[3], 2, a, 100, 3), MK_TASK_CLIENT_FULL);
    assert_int_equal(mk_task_queue_push(&q, &e[3], 2, b, 100, 3), MK_OK);
    assert_int_equal(mk_task_queue_client(&q, b), 1);
    /* Running, a's job still counts; cancelled, it does not. */
    struct mk_task_entry *run = mk_task_queue_pop(&q);
    assert_ptr_equal(run, &e[0]);
    assert_int_equal(mk_task_queue_push(&q, &e[4], 0, a, 100, 3), MK_TASK_CLIENT_FULL);
    assert_true(mk_task_queue_cancel(&q, &e[2]));
    assert_int_equal(mk_task_queue_client(&q, a), 2);
    assert_int_equal(mk_task_queue_push(&q, &e[4], 0, a, 100, 3), MK_OK);
    mk_task_queue_destroy(&q);
}

/* The threads take the plugins in turn: a long queue of one does not delay another. */
static void test_threads_take_shares_in_turn(void **state)
{
    struct mk_task_queue q;
    struct mk_task_entry slow[5], fast[2], other;
    uint8_t key[MK_TASK_KEY_LEN] = {0};
    (void) state;

    memset(slow, 0, sizeof(slow));
    memset(fast, 0, sizeof(fast));
    memset(&other, 0, sizeof(other));
    mk_task_queue_init(&q, 4);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(mk_task_queue_push(&q, &slow[i], 1, key, 64, 64), MK_OK);
    }
    assert_ptr_equal(mk_task_queue_pop(&q), &slow[0]);
    assert_int_equal(mk_task_queue_push(&q, &fast[0], 2, key, 64, 64), MK_OK);
    assert_int_equal(mk_task_queue_push(&q, &fast[1], 2, key, 64, 64), MK_OK);
    /* A share past the last is the last one. */
    assert_int_equal(mk_task_queue_push(&q, &other, 99, key, 64, 64), MK_OK);
    assert_int_equal(other.share, 3);
    /* After share 1: share 2, then 3, then back to 1. */
    assert_ptr_equal(mk_task_queue_pop(&q), &fast[0]);
    assert_ptr_equal(mk_task_queue_pop(&q), &other);
    assert_ptr_equal(mk_task_queue_pop(&q), &slow[1]);
    assert_ptr_equal(mk_task_queue_pop(&q), &fast[1]);
    assert_ptr_equal(mk_task_queue_pop(&q), &slow[2]);
    assert_ptr_equal(mk_task_queue_pop(&q), &slow[3]);
    assert_ptr_equal(mk_task_queue_pop(&q), &slow[4]);
    assert_null(mk_task_queue_pop(&q));
    assert_int_equal(q.total, 8); /* all running */
    mk_task_queue_destroy(&q);
}

/* Within a share, a client with nothing running goes before one that has. */
static void test_idle_client_goes_before_a_busy_one(void **state)
{
    struct mk_task_queue q;
    struct mk_task_entry a[4], b[2];
    uint8_t ka[MK_TASK_KEY_LEN], kb[MK_TASK_KEY_LEN];
    (void) state;

    memset(a, 0, sizeof(a));
    memset(b, 0, sizeof(b));
    mk_task_queue_init(&q, 1);
    key4("198.51.100.1", ka);
    key4("198.51.100.2", kb);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(mk_task_queue_push(&q, &a[i], 0, ka, 64, 8), MK_OK);
    }
    assert_ptr_equal(mk_task_queue_pop(&q), &a[0]);
    assert_int_equal(mk_task_queue_push(&q, &b[0], 0, kb, 64, 8), MK_OK);
    assert_int_equal(mk_task_queue_push(&q, &b[1], 0, kb, 64, 8), MK_OK);
    /* b has nothing running: its oldest job passes a's queued ones. */
    assert_ptr_equal(mk_task_queue_pop(&q), &b[0]);
    /* Both have a job running now: the oldest. */
    assert_ptr_equal(mk_task_queue_pop(&q), &a[1]);
    mk_task_queue_done(&q, &b[0]);
    assert_ptr_equal(mk_task_queue_pop(&q), &b[1]);
    assert_ptr_equal(mk_task_queue_pop(&q), &a[2]);
    assert_ptr_equal(mk_task_queue_pop(&q), &a[3]);
    assert_null(mk_task_queue_pop(&q));
    mk_task_queue_destroy(&q);
}

static void test_cancel_only_waiting_jobs(void **state)
{
    struct mk_task_queue q;
    struct mk_task_entry e[3];
    uint8_t key[MK_TASK_KEY_LEN] = {0};
    (void) state;

    memset(e, 0, sizeof(e));
    mk_task_queue_init(&q, 1);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(mk_task_queue_push(&q, &e[i], 0, key, 8, 8), MK_OK);
    }
    struct mk_task_entry *run = mk_task_queue_pop(&q);
    assert_ptr_equal(run, &e[0]);
    /* A running job cannot be cancelled; a waiting one can, once. */
    assert_false(mk_task_queue_cancel(&q, &e[0]));
    assert_true(mk_task_queue_cancel(&q, &e[1]));
    assert_false(mk_task_queue_cancel(&q, &e[1]));
    assert_int_equal(e[1].state, MK_TASK_IDLE);
    assert_int_equal(q.total, 2);
    assert_int_equal(q.count[0], 2);
    /* The cancelled job is never handed out. */
    assert_ptr_equal(mk_task_queue_pop(&q), &e[2]);
    assert_null(mk_task_queue_pop(&q));
    mk_task_queue_done(&q, &e[0]);
    mk_task_queue_done(&q, &e[2]);
    mk_task_queue_done(&q, &e[2]); /* twice: harmless */
    assert_int_equal(q.total, 0);
    assert_int_equal(q.count[0], 0);
    assert_false(mk_task_queue_cancel(&q, &e[0]));
    mk_task_queue_destroy(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_keys_ipv4_and_ipv6_prefix),
        cmocka_unit_test(test_share_bound_leaves_other_shares),
        cmocka_unit_test(test_client_bound_counts_all_shares),
        cmocka_unit_test(test_threads_take_shares_in_turn),
        cmocka_unit_test(test_idle_client_goes_before_a_busy_one),
        cmocka_unit_test(test_cancel_only_waiting_jobs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
