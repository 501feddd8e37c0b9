/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_timer.c: unit tests of core/timer.c, the deadline queues of the
 * workers: order by deadline across durations, re-arming, disarming,
 * expiry callbacks that arm again or free their entry, the earliest
 * deadline, and the freeing of idle queues. Times are milliseconds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/timer.h"

/* What the expiry callbacks below record, in order. */
struct log {
    struct mk_timer *seen[16];
    size_t n;
    struct mk_timers *timers;
    uint64_t now;
    uint64_t rearm_ms; /* > 0: re-arm instead of disarming */
};

static void expire_disarm(struct mk_timer *e, void *arg)
{
    struct log *l = arg;
    assert_true(l->n < 16);
    l->seen[l->n++] = e;
    if (l->rearm_ms > 0) {
        mk_timer_arm(l->timers, e, l->now, l->rearm_ms);
    }
    else {
        mk_timer_disarm(e);
    }
}

static void expire_nothing(struct mk_timer *e, void *arg)
{
    struct log *l = arg;
    l->seen[l->n++] = e;
}

static size_t expire(struct mk_timers *t, uint64_t now, struct log *l)
{
    l->n = 0;
    l->timers = t;
    l->now = now;
    return mk_timers_expire(t, now, expire_disarm, l);
}

static void test_fifo_within_a_duration(void **state)
{
    struct mk_timers t;
    struct mk_timer a, b, c;
    struct log l = {0};
    (void) state;

    mk_timers_init(&t);
    mk_timer_init(&a);
    mk_timer_init(&b);
    mk_timer_init(&c);
    assert_true(mk_timers_empty(&t));
    assert_false(mk_timer_armed(&a));
    mk_timer_arm(&t, &a, 100, 5);
    mk_timer_arm(&t, &b, 101, 5);
    mk_timer_arm(&t, &c, 102, 5);
    assert_true(mk_timer_armed(&a));
    assert_int_equal(a.deadline, 105);
    assert_int_equal(t.n_queues, 1);

    /* Due from the deadline on, not a millisecond before. */
    assert_int_equal(mk_timers_next(&t), 105);
    assert_int_equal(expire(&t, 104, &l), 0);
    assert_int_equal(expire(&t, 105, &l), 1);
    assert_ptr_equal(l.seen[0], &a);
    assert_false(mk_timer_armed(&a));
    assert_int_equal(mk_timers_next(&t), 106);
    assert_int_equal(expire(&t, 107, &l), 2);
    assert_ptr_equal(l.seen[0], &b);
    assert_ptr_equal(l.seen[1], &c);
    assert_true(mk_timers_empty(&t));
    mk_timers_destroy(&t);
}

/* The fault of issue 7, item 4: a shorter duration behind a longer one. */
static void test_shorter_duration_is_not_held_back(void **state)
{
    struct mk_timers t;
    struct mk_timer old_wait, new_wait;
    struct log l = {0};
    (void) state;

    mk_timers_init(&t);
    mk_timer_init(&old_wait);
    mk_timer_init(&new_wait);
    mk_timer_arm(&t, &old_wait, 1000, 20); /* Timeout 20 */
    mk_timer_arm(&t, &new_wait, 1001, 2);  /* after a reload to Timeout 2 */
    assert_int_equal(t.n_queues, 2);

    assert_int_equal(mk_timers_next(&t), 1003); /* the head of the later queue */
    assert_int_equal(expire(&t, 1002, &l), 0);
    assert_int_equal(expire(&t, 1003, &l), 1);
    assert_ptr_equal(l.seen[0], &new_wait);
    assert_true(mk_timer_armed(&old_wait));
    assert_int_equal(mk_timers_next(&t), 1020);
    assert_int_equal(expire(&t, 1019, &l), 0);
    assert_int_equal(expire(&t, 1020, &l), 1);
    assert_ptr_equal(l.seen[0], &old_wait);
    mk_timers_destroy(&t);
}

static void test_rearm_moves_and_disarm_removes(void **state)
{
    struct mk_timers t;
    struct mk_timer a, b;
    struct log l = {0};
    (void) state;

    mk_timers_init(&t);
    mk_timer_init(&a);
    mk_timer_init(&b);
    mk_timer_arm(&t, &a, 10, 3);
    mk_timer_arm(&t, &b, 10, 3);
    mk_timer_arm(&t, &a, 12, 3); /* progress: a goes behind b */
    assert_int_equal(expire(&t, 14, &l), 1);
    assert_ptr_equal(l.seen[0], &b);
    mk_timer_arm(&t, &a, 14, 7); /* another duration: another queue */
    assert_int_equal(t.n_queues, 2);
    assert_int_equal(expire(&t, 16, &l), 0);
    mk_timer_disarm(&a);
    mk_timer_disarm(&a); /* twice is harmless */
    assert_false(mk_timer_armed(&a));
    assert_true(mk_timers_empty(&t));
    assert_null(mk_timers_any(&t));
    assert_true(mk_timers_next(&t) == MK_TIMER_NEVER);
    assert_int_equal(expire(&t, 100, &l), 0);
    mk_timers_destroy(&t);
}

static void test_expiry_callback_may_rearm(void **state)
{
    struct mk_timers t;
    struct mk_timer a, b;
    struct log l = {0};
    (void) state;

    mk_timers_init(&t);
    mk_timer_init(&a);
    mk_timer_init(&b);
    mk_timer_arm(&t, &a, 0, 1);
    mk_timer_arm(&t, &b, 0, 1);
    /* Both due; each moves to a (new) 5-second queue, like a lingering close. */
    l.rearm_ms = 5;
    assert_int_equal(expire(&t, 2, &l), 2);
    assert_true(mk_timer_armed(&a) && mk_timer_armed(&b));
    assert_int_equal(a.deadline, 7);
    /* Re-armed into the same duration: visited once, not again. */
    l.rearm_ms = 5;
    assert_int_equal(expire(&t, 8, &l), 2);
    assert_int_equal(b.deadline, 13);
    l.rearm_ms = 0;
    assert_int_equal(expire(&t, 14, &l), 2);
    assert_true(mk_timers_empty(&t));
    mk_timers_destroy(&t);
}

static void test_callback_that_leaves_entry_due_does_not_spin(void **state)
{
    struct mk_timers t;
    struct mk_timer a;
    struct log l = {0};
    (void) state;

    mk_timers_init(&t);
    mk_timer_init(&a);
    mk_timer_arm(&t, &a, 0, 1);
    assert_int_equal(mk_timers_expire(&t, 5, expire_nothing, &l), 1);
    assert_false(mk_timer_armed(&a));
    mk_timers_destroy(&t);
}

static void test_idle_queues_are_freed(void **state)
{
    struct mk_timers t;
    struct mk_timer a, b;
    struct log l = {0};
    (void) state;

    mk_timers_init(&t);
    mk_timer_init(&a);
    mk_timer_init(&b);
    mk_timer_arm(&t, &a, 0, 20000);
    mk_timer_arm(&t, &b, 0, 2000);
    assert_int_equal(t.n_queues, 2);
    /* Empty but recently used: kept, so steady traffic allocates nothing. */
    assert_int_equal(expire(&t, 3000, &l), 1);
    assert_int_equal(t.n_queues, 2);
    /* Empty and unused for MK_TIMER_QUEUE_IDLE ms: freed; the other is busy. */
    mk_timer_arm(&t, &a, 45000, 20000);
    expire(&t, MK_TIMER_QUEUE_IDLE - 1, &l);
    assert_int_equal(t.n_queues, 2);
    expire(&t, MK_TIMER_QUEUE_IDLE, &l);
    assert_int_equal(t.n_queues, 1);
    assert_true(mk_timer_armed(&a));
    /* The duration comes back: a queue again. */
    mk_timer_arm(&t, &b, MK_TIMER_QUEUE_IDLE, 2000);
    assert_int_equal(t.n_queues, 2);
    assert_int_equal(expire(&t, MK_TIMER_QUEUE_IDLE + 2000, &l), 1);
    assert_ptr_equal(l.seen[0], &b);
    assert_int_equal(expire(&t, 65000, &l), 1);
    assert_ptr_equal(l.seen[0], &a);
    mk_timers_destroy(&t);
    assert_false(mk_timer_armed(&b)); /* destroy unlinks what was left */
}

static void close_odd(struct mk_timer *e, void *arg)
{
    size_t *count = arg;
    if ((*count)++ % 2 == 1) {
        mk_timer_disarm(e);
    }
}

static void test_each_visits_every_entry_once(void **state)
{
    struct mk_timers t;
    struct mk_timer e[6];
    size_t count = 0, left = 0;
    (void) state;

    mk_timers_init(&t);
    for (int i = 0; i < 6; i++) {
        mk_timer_init(&e[i]);
        mk_timer_arm(&t, &e[i], 0, 1 + i % 3);
    }
    mk_timers_each(&t, close_odd, &count);
    assert_int_equal(count, 6);
    for (int i = 0; i < 6; i++) {
        left += mk_timer_armed(&e[i]);
    }
    assert_int_equal(left, 3);
    while (mk_timers_any(&t)) {
        mk_timer_disarm(mk_timers_any(&t));
    }
    assert_true(mk_timers_empty(&t));
    mk_timers_destroy(&t);
}

struct tick {
    uint64_t now;
    size_t expired;
};

static void expire_on_time(struct mk_timer *e, void *arg)
{
    struct tick *k = arg;
    assert_true(e->deadline == k->now); /* the first tick at it: not early, not late */
    mk_timer_disarm(e);
    k->expired++;
}

/* Many entries in a few durations, ticked every ms: each expires once, on time. */
static void test_mixed_durations_expire_on_time(void **state)
{
    enum { N = 300 };
    static struct mk_timer e[N];
    static const int durations[] = {20, 2, 5, 30, 1};
    struct mk_timers t;
    struct tick k = {0};
    (void) state;

    mk_timers_init(&t);
    for (int i = 0; i < N; i++) {
        mk_timer_init(&e[i]);
        mk_timer_arm(&t, &e[i], i / 10, durations[i % 5]);
    }
    assert_int_equal(t.n_queues, 5);
    for (k.now = 0; k.now < 80; k.now++) {
        mk_timers_expire(&t, k.now, expire_on_time, &k);
    }
    assert_int_equal(k.expired, N);
    assert_true(mk_timers_empty(&t));
    mk_timers_destroy(&t);
}

/* A plugin timer: the expiry callback disarms and frees its entry. */
struct owned {
    struct mk_timer t;
    int *fired;
};

static void expire_and_free(struct mk_timer *e, void *arg)
{
    struct owned *o = mk_container_of(e, struct owned, t);
    (void) arg;
    (*o->fired)++;
    mk_timer_disarm(e);
    free(o);
}

static void test_callback_may_free_its_entry(void **state)
{
    struct mk_timers t;
    int fired = 0;
    (void) state;

    mk_timers_init(&t);
    for (int i = 0; i < 4; i++) {
        struct owned *o = calloc(1, sizeof(*o));
        assert_non_null(o);
        o->fired = &fired;
        mk_timer_init(&o->t);
        mk_timer_arm(&t, &o->t, (uint64_t) i, 50 + (uint64_t) (i % 2) * 25);
    }
    assert_int_equal(mk_timers_next(&t), 50);
    assert_int_equal(mk_timers_expire(&t, 60, expire_and_free, NULL), 2);
    assert_int_equal(mk_timers_next(&t), 76);
    assert_int_equal(mk_timers_expire(&t, 1000, expire_and_free, NULL), 2);
    assert_int_equal(fired, 4);
    assert_true(mk_timers_empty(&t));
    mk_timers_destroy(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_within_a_duration),
        cmocka_unit_test(test_shorter_duration_is_not_held_back),
        cmocka_unit_test(test_rearm_moves_and_disarm_removes),
        cmocka_unit_test(test_expiry_callback_may_rearm),
        cmocka_unit_test(test_callback_that_leaves_entry_due_does_not_spin),
        cmocka_unit_test(test_idle_queues_are_freed),
        cmocka_unit_test(test_each_visits_every_entry_once),
        cmocka_unit_test(test_mixed_durations_expire_on_time),
        cmocka_unit_test(test_callback_may_free_its_entry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
