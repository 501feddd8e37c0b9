/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_supervisor_msg.c: unit tests of server/process/supervisor_msg.c (the crash
 * window, the back-off, crash reasons, readiness messages rewritten for the
 * service manager, the child's variables).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <signal.h>
#include <sys/wait.h>

#include <monkey/mk_common.h>

#include "server/process/supervisor.h"

static struct mk_crash_window w; /* 8 KB: not on the stack */

static void test_crash_window_counts_within_the_window(void **state)
{
    (void) state;
    mk_supervisor_crash_window_init(&w, 3, 10000);
    assert_int_equal(mk_supervisor_crash_window_add(&w, 1000), 1);
    assert_int_equal(mk_supervisor_crash_window_add(&w, 2000), 2);
    /* the first left the window: 11000 - 1000 is not within 10 s */
    assert_int_equal(mk_supervisor_crash_window_add(&w, 11000), 2);
    assert_int_equal(mk_supervisor_crash_window_add(&w, 11500), 3); /* the limit: give up */
    /* long after, the count starts again */
    assert_int_equal(mk_supervisor_crash_window_add(&w, 100000), 1);
}

static void test_crash_window_limit_one_and_bounds(void **state)
{
    (void) state;
    mk_supervisor_crash_window_init(&w, 1, 60000);
    assert_int_equal(mk_supervisor_crash_window_add(&w, 5), 1); /* gives up at the first */
    mk_supervisor_crash_window_init(&w, 0, 60000);
    assert_int_equal(w.limit, 1);
    mk_supervisor_crash_window_init(&w, 5000, 60000);
    assert_int_equal(w.limit, MK_SUPERVISOR_CRASH_LIMIT_MAX);
    /* a full ring keeps counting at its capacity */
    for (unsigned i = 0; i < MK_SUPERVISOR_CRASH_LIMIT_MAX + 5; i++) {
        unsigned n = mk_supervisor_crash_window_add(&w, 10 + i);
        assert_int_equal(n,
                         i < MK_SUPERVISOR_CRASH_LIMIT_MAX ? i + 1 : MK_SUPERVISOR_CRASH_LIMIT_MAX);
    }
}

static void test_backoff(void **state)
{
    (void) state;
    assert_int_equal(mk_supervisor_backoff_ms(0), 0);
    assert_int_equal(mk_supervisor_backoff_ms(1), 0);
    assert_int_equal(mk_supervisor_backoff_ms(2), 100);
    assert_int_equal(mk_supervisor_backoff_ms(3), 200);
    assert_int_equal(mk_supervisor_backoff_ms(4), 400);
    assert_int_equal(mk_supervisor_backoff_ms(7), 3200);
    assert_int_equal(mk_supervisor_backoff_ms(8), MK_SUPERVISOR_BACKOFF_MAX_MS);
    assert_int_equal(mk_supervisor_backoff_ms(1000), MK_SUPERVISOR_BACKOFF_MAX_MS);
}

static void test_retry(void **state)
{
    (void) state;
    assert_int_equal(mk_supervisor_retry_ms(0), 100);
    assert_int_equal(mk_supervisor_retry_ms(1), 100);
    assert_int_equal(mk_supervisor_retry_ms(2), 200);
    assert_int_equal(mk_supervisor_retry_ms(3), 400);
    assert_int_equal(mk_supervisor_retry_ms(9), 25600);
    assert_int_equal(mk_supervisor_retry_ms(10), MK_SUPERVISOR_RETRY_MAX_MS);
    assert_int_equal(mk_supervisor_retry_ms(17), MK_SUPERVISOR_RETRY_MAX_MS);
    assert_int_equal(mk_supervisor_retry_ms(~0u), MK_SUPERVISOR_RETRY_MAX_MS);
}

static void test_notify_error(void **state)
{
    char msg[64], out[32] = "untouched";
    (void) state;

    /* The child's side: one line, control characters made spaces. */
    size_t n = mk_supervisor_notify_error_format("a:1: bad\nthing\t!", msg, sizeof(msg));
    assert_string_equal(msg, "MONKEY_START_ERROR=a:1: bad thing !");
    assert_int_equal(n, strlen(msg));
    n = mk_supervisor_notify_error_format("0123456789012345678901234567890123456789012345678", msg,
                                          sizeof(msg));
    assert_int_equal(n, sizeof(msg) - 1);
    assert_int_equal(strlen(msg), sizeof(msg) - 1);
    assert_int_equal(mk_supervisor_notify_error_format("x", msg, 0), 0);

    /* The supervisor's side: the value, the last of several, cut to fit. */
    assert_false(mk_supervisor_notify_error("READY=1\nSTATUS=x", 16, out, sizeof(out)));
    assert_string_equal(out, "untouched");
    assert_false(mk_supervisor_notify_error("MONKEY_START_ERRORS=x", 21, out, sizeof(out)));
    assert_false(mk_supervisor_notify_error("MONKEY_START_ERROR", 18, out, sizeof(out)));
    const char in[] = "STATUS=x\nMONKEY_START_ERROR=first\nMONKEY_START_ERROR=second one";
    assert_true(mk_supervisor_notify_error(in, sizeof(in) - 1, out, sizeof(out)));
    assert_string_equal(out, "second one");
    assert_true(mk_supervisor_notify_error(in, sizeof(in) - 1, out, 5));
    assert_string_equal(out, "seco");
    assert_false(mk_supervisor_notify_error(in, sizeof(in) - 1, out, 0));
    const char nul[] = "MONKEY_START_ERROR=ab\0cd";
    assert_true(mk_supervisor_notify_error(nul, sizeof(nul) - 1, out, sizeof(out)));
    assert_string_equal(out, "ab");
    assert_true(mk_supervisor_notify_error("MONKEY_START_ERROR=", 19, out, sizeof(out)));
    assert_string_equal(out, "");

    /* Never passed on to the service manager. */
    char fwd[128];
    bool ready;
    const char both[] = "MONKEY_START_ERROR=x\nSTATUS=y";
    n = mk_supervisor_notify_rewrite(both, sizeof(both) - 1, 7, fwd, sizeof(fwd), &ready);
    assert_string_equal(fwd, "STATUS=y");
    assert_false(ready);
    n = mk_supervisor_notify_rewrite(both, 20, 7, fwd, sizeof(fwd), &ready);
    assert_int_equal(n, 0);
}

/* A wait status as the kernel builds it (glibc's W* macros read it). */
#define SIGNALED(sig, core) ((sig) | ((core) ? 0x80 : 0))
#define EXITED(code) ((code) << 8)

static void test_reasons(void **state)
{
    char out[96];

    (void) state;
    mk_supervisor_reason(SIGNALED(SIGSEGV, 1), out, sizeof(out));
    assert_string_equal(out, "signal 11 (SIGSEGV), core dumped");
    mk_supervisor_reason(SIGNALED(SIGKILL, 0), out, sizeof(out));
    assert_string_equal(out, "signal 9 (SIGKILL)");
    mk_supervisor_reason(SIGNALED(SIGABRT, 1), out, sizeof(out));
    assert_string_equal(out, "signal 6 (SIGABRT), core dumped");
    mk_supervisor_reason(SIGNALED(SIGRTMIN + 1, 0), out, sizeof(out));
    assert_true(strncmp(out, "signal ", 7) == 0 && !strchr(out, '('));
    mk_supervisor_reason(EXITED(3), out, sizeof(out));
    assert_string_equal(out, "exit status 3");
    mk_supervisor_reason(SIGNALED(SIGSEGV, 1), out, 8); /* cut, still terminated */
    assert_string_equal(out, "signal ");
}

static void test_notify_rewrite(void **state)
{
    char out[128];
    bool ready;
    size_t n;

    (void) state;
    const char *msg = "READY=1\nMAINPID=4242";
    n = mk_supervisor_notify_rewrite(msg, strlen(msg), 77, out, sizeof(out), &ready);
    assert_string_equal(out, "READY=1\nMAINPID=77");
    assert_int_equal(n, strlen(out));
    assert_true(ready);

    msg = "RELOADING=1\nMONOTONIC_USEC=123";
    n = mk_supervisor_notify_rewrite(msg, strlen(msg), 77, out, sizeof(out), &ready);
    assert_string_equal(out, "RELOADING=1\nMONOTONIC_USEC=123");
    assert_false(ready);

    msg = "STOPPING=1";
    n = mk_supervisor_notify_rewrite(msg, strlen(msg), 77, out, sizeof(out), &ready);
    assert_string_equal(out, "STOPPING=1");
    assert_int_equal(n, 10);

    /* a MAINPID alone, lines without '=', empty lines: nothing to pass on */
    msg = "MAINPID=1\n\nnonsense\n=x";
    n = mk_supervisor_notify_rewrite(msg, strlen(msg), 77, out, sizeof(out), &ready);
    assert_int_equal(n, 0);
    assert_string_equal(out, "");
    assert_false(ready);

    /* READY=10 is not READY=1; a NUL inside a line drops it */
    static const char with_nul[] = "READY=10\nSTATUS=a\0b\nSTATUS=ok\n";
    n = mk_supervisor_notify_rewrite(with_nul, sizeof(with_nul) - 1, 77, out, sizeof(out), &ready);
    assert_string_equal(out, "READY=10\nSTATUS=ok");
    assert_false(ready);

    /* too long for out: dropped whole */
    msg = "READY=1\nSTATUS=aaaaaaaaaaaaaaaaaaaa";
    n = mk_supervisor_notify_rewrite(msg, strlen(msg), 77, out, 20, &ready);
    assert_int_equal(n, 0);
    assert_false(ready);
}

static void test_env_parse(void **state)
{
    struct mk_supervisor_stats st;

    (void) state;
    assert_int_equal(mk_supervisor_env_parse("123", "4", "1700000000 signal 9 (SIGKILL)", &st),
                     MK_OK);
    assert_int_equal(st.pid, 123);
    assert_int_equal(st.restarts, 4);
    assert_int_equal(st.last_crash, 1700000000);
    assert_string_equal(st.last_crash_reason, "signal 9 (SIGKILL)");

    assert_int_equal(mk_supervisor_env_parse("123", NULL, NULL, &st), MK_OK);
    assert_int_equal(st.restarts, 0);
    assert_int_equal(st.last_crash, 0);
    assert_string_equal(st.last_crash_reason, "");

    /* bad restarts or crash values count as none */
    assert_int_equal(mk_supervisor_env_parse("9", "-1", "x y", &st), MK_OK);
    assert_int_equal(st.restarts, 0);
    assert_int_equal(st.last_crash, 0);
    assert_int_equal(mk_supervisor_env_parse("9", "3x", "17nospace", &st), MK_OK);
    assert_int_equal(st.restarts, 0);
    assert_int_equal(st.last_crash, 0);

    /* the pid decides whether there is a supervisor at all */
    assert_int_equal(mk_supervisor_env_parse(NULL, "1", NULL, &st), MK_ERR);
    assert_int_equal(mk_supervisor_env_parse("0", "1", NULL, &st), MK_ERR);
    assert_int_equal(mk_supervisor_env_parse("12a", "1", NULL, &st), MK_ERR);
    assert_int_equal(mk_supervisor_env_parse("99999999999", "1", NULL, &st), MK_ERR);
    assert_int_equal(mk_supervisor_env_parse(" 12", "1", NULL, &st), MK_ERR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crash_window_counts_within_the_window),
        cmocka_unit_test(test_crash_window_limit_one_and_bounds),
        cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_retry),
        cmocka_unit_test(test_notify_error),
        cmocka_unit_test(test_reasons),
        cmocka_unit_test(test_notify_rewrite),
        cmocka_unit_test(test_env_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
