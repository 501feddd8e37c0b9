/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_gw_stderr_spool.c: the gateway core's stderr lines (gw_log.c) and
 * request body spool (gw_spool.c), with a fake function table that records
 * what would have gone to the site's error log and to the server log.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gw.h"

#define MAX_LINES 16

static char site_lines[MAX_LINES][1200], server_lines[MAX_LINES][1200];
static int n_site, n_server;

static void fake_log(int level, const char *fmt, ...)
{
    va_list ap;
    (void) level;
    va_start(ap, fmt);
    vsnprintf(server_lines[n_server++ % MAX_LINES], sizeof(server_lines[0]), fmt, ap);
    va_end(ap);
}

static void fake_error_log(struct mk_request *r, const char *fmt, ...)
{
    va_list ap;
    (void) r;
    va_start(ap, fmt);
    vsnprintf(site_lines[n_site++ % MAX_LINES], sizeof(site_lines[0]), fmt, ap);
    va_end(ap);
}

static struct mk_api api = {
    .size = sizeof(struct mk_api),
    .log = fake_log,
    .error_log = fake_error_log,
};

/* Not a request the code looks into: the fake error_log only records. */
#define LIVE ((struct mk_request *) &api)

static int reset(void **state)
{
    (void) state;
    n_site = n_server = 0;
    return 0;
}

static void test_lines_go_to_the_site_log(void **state)
{
    struct mk_gw_log l;
    (void) state;
    mk_gw_log_init(&l, "cgi", "/cgi-bin/x.sh", 13);
    mk_gw_log_feed(&api, &l, LIVE, "one\ntw", 6);
    mk_gw_log_feed(&api, &l, LIVE, "o\r\n\nthree", 9);
    assert_int_equal(n_site, 2);
    assert_string_equal(site_lines[0], "cgi: /cgi-bin/x.sh: one");
    assert_string_equal(site_lines[1], "cgi: /cgi-bin/x.sh: two "); /* CR as a space */
    mk_gw_log_flush(&api, &l, LIVE);
    assert_int_equal(n_site, 3);
    assert_string_equal(site_lines[2], "cgi: /cgi-bin/x.sh: three");
    assert_int_equal(n_server, 0);
}

static void test_long_lines_are_cut(void **state)
{
    struct mk_gw_log l;
    char big[MK_GW_LOG_LINE * 2 + 10];
    (void) state;
    memset(big, 'e', sizeof(big));
    mk_gw_log_init(&l, "fastcgi", "/a.php", 6);
    mk_gw_log_feed(&api, &l, LIVE, big, sizeof(big));
    mk_gw_log_feed(&api, &l, LIVE, "\n", 1);
    assert_int_equal(n_site, 3);
    assert_int_equal(strlen(site_lines[0]), strlen("fastcgi: /a.php: ") + MK_GW_LOG_LINE);
    assert_int_equal(strlen(site_lines[2]), strlen("fastcgi: /a.php: ") + 10);
}

static void test_held_while_suspended_then_released_in_order(void **state)
{
    struct mk_gw_log l;
    (void) state;
    mk_gw_log_init(&l, "cgi", "/s", 2);
    mk_gw_log_feed(&api, &l, NULL, "a\nb\nc", 5); /* suspended: a and b held */
    mk_gw_log_feed(&api, &l, NULL, "\n", 1);      /* stderr ended: c held too */
    assert_int_equal(n_site + n_server, 0);
    mk_gw_log_feed(&api, &l, LIVE, NULL, 0); /* the request is back */
    assert_int_equal(n_site, 3);
    assert_string_equal(site_lines[0], "cgi: /s: a");
    assert_string_equal(site_lines[2], "cgi: /s: c");
}

static void test_over_goes_to_the_server_log(void **state)
{
    struct mk_gw_log l;
    char line[MK_GW_LOG_LINE];
    (void) state;
    mk_gw_log_init(&l, "cgi", "/s", 2);
    memset(line, 'h', sizeof(line) - 1);
    line[sizeof(line) - 1] = '\n';
    /* more than the hold keeps: the surplus goes to the server log at once */
    for (int i = 0; i < 6; i++) {
        mk_gw_log_feed(&api, &l, NULL, line, sizeof(line));
    }
    assert_true(n_server > 0);
    int early = n_server;
    mk_gw_log_feed(&api, &l, NULL, "tail", 4);
    mk_gw_log_flush(&api, &l, NULL); /* the request is over */
    assert_int_equal(n_site, 0);
    assert_int_equal(n_server, 6 + 1);
    assert_string_equal(server_lines[n_server - 1], "cgi: /s: tail");
    assert_true(early < n_server);
}

static void test_spool_memory_then_file(void **state)
{
    struct mk_gw_spool s = {0};
    size_t total = MK_GW_SPOOL_MEM * 3 + 123;
    unsigned char *in = malloc(total), *out = malloc(total + 10);
    (void) state;
    for (size_t i = 0; i < total; i++) {
        in[i] = (unsigned char) (i * 7 + i / 251);
    }
    for (size_t off = 0; off < total;) {
        size_t n = total - off < 10007 ? total - off : 10007;
        assert_int_equal(mk_gw_spool_add(&s, in + off, n), MK_OK);
        off += n;
    }
    assert_int_equal(s.size, total);
    assert_true(s.fd_open); /* past the memory part: a file with no name */
    size_t got = 0;
    for (;;) {
        ssize_t n = mk_gw_spool_read(&s, out + got, 30000);
        assert_true(n >= 0);
        if (n == 0) {
            break;
        }
        got += (size_t) n;
    }
    assert_int_equal(got, total);
    assert_memory_equal(in, out, total);
    assert_int_equal(mk_gw_spool_left(&s), 0);
    mk_gw_spool_free(&s);
    assert_false(s.fd_open);
    free(in);
    free(out);
}

static void test_spool_small_stays_in_memory(void **state)
{
    struct mk_gw_spool s = {0};
    char out[16];
    (void) state;
    assert_int_equal(mk_gw_spool_add(&s, "hello", 5), MK_OK);
    assert_int_equal(mk_gw_spool_add(&s, "", 0), MK_OK);
    assert_false(s.fd_open);
    assert_int_equal(mk_gw_spool_read(&s, out, sizeof(out)), 5);
    assert_memory_equal(out, "hello", 5);
    assert_int_equal(mk_gw_spool_read(&s, out, sizeof(out)), 0);
    mk_gw_spool_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_lines_go_to_the_site_log, reset),
        cmocka_unit_test_setup(test_long_lines_are_cut, reset),
        cmocka_unit_test_setup(test_held_while_suspended_then_released_in_order, reset),
        cmocka_unit_test_setup(test_over_goes_to_the_server_log, reset),
        cmocka_unit_test(test_spool_memory_then_file),
        cmocka_unit_test(test_spool_small_stays_in_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
