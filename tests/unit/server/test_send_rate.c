/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_send_rate.c: unit tests of server/http/send_rate.h (SendMinRate: the
 * rate a client must take a response at, over windows of SendTimeout).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "server/http/send_rate.h"

#define WINDOW 1000 /* SendTimeout 1 s */
#define RATE 500    /* SendMinRate 500 */

static void test_window_and_rate(void **state)
{
    struct mk_send_rate w = {0};
    (void) state;

    /* Not waiting for the client: nothing to check. */
    assert_false(mk_send_rate_short(&w, 0, 5000, WINDOW, RATE));
    assert_true(mk_send_rate_due(&w, WINDOW, RATE) == UINT64_MAX);

    mk_send_rate_start(&w, 100, 10000);
    assert_true(mk_send_rate_due(&w, WINDOW, RATE) == 11000);
    /* Within the window: never short, whatever moved. */
    assert_false(mk_send_rate_short(&w, 100, 10999, WINDOW, RATE));
    /* The window is over with 500 bytes in 1 s: enough, and the next starts. */
    assert_false(mk_send_rate_short(&w, 600, 11000, WINDOW, RATE));
    assert_true(w.since == 11000 && w.base == 600);
    /* A window checked late counts its whole length: 1000 bytes in 2.5 s is short. */
    assert_true(mk_send_rate_short(&w, 1600, 13500, WINDOW, RATE));
    /* ... 1250 in 2.5 s is not. */
    assert_false(mk_send_rate_short(&w, 1850, 13500, WINDOW, RATE));
    assert_true(w.since == 13500);
}

static void test_no_banking(void **state)
{
    struct mk_send_rate w = {0};
    (void) state;

    /* A fast first window buys nothing for the next one. */
    mk_send_rate_start(&w, 0, 1000);
    assert_false(mk_send_rate_short(&w, 10 * 1000 * 1000, 2000, WINDOW, RATE));
    assert_true(mk_send_rate_short(&w, 10 * 1000 * 1000 + 32, 3000, WINDOW, RATE));
}

static void test_off_and_stop(void **state)
{
    struct mk_send_rate w = {0};
    (void) state;

    mk_send_rate_start(&w, 0, 1000);
    assert_false(mk_send_rate_short(&w, 0, 60000, WINDOW, 0)); /* SendMinRate 0: off */
    assert_true(mk_send_rate_due(&w, WINDOW, 0) == UINT64_MAX);
    mk_send_rate_stop(&w);
    assert_false(mk_send_rate_short(&w, 0, 60000, WINDOW, RATE));
    /* A start at 0 ms (the clock's origin) still counts as a window. */
    mk_send_rate_start(&w, 0, 0);
    assert_true(w.since != 0);
    assert_true(mk_send_rate_short(&w, 0, 5000, WINDOW, RATE));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_and_rate),
        cmocka_unit_test(test_no_banking),
        cmocka_unit_test(test_off_and_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
