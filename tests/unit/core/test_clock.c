/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_clock.c: unit tests of core/clock.c (HTTP dates, RFC 9110 5.6.7).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "core/clock.h"

static void assert_format(time_t t, const char *want)
{
    char out[MK_HTTP_DATE_LEN + 1];

    memset(out, '#', sizeof(out));
    mk_http_date_format(t, out);
    assert_int_equal(out[MK_HTTP_DATE_LEN], '#'); /* exactly MK_HTTP_DATE_LEN bytes written */
    out[MK_HTTP_DATE_LEN] = '\0';
    if (strcmp(out, want) != 0) {
        fail_msg("%lld: got '%s', expected '%s'", (long long) t, out, want);
    }
}

static void test_format_known(void **state)
{
    (void) state;
    assert_int_equal(strlen("Sun, 06 Nov 1994 08:49:37 GMT"), MK_HTTP_DATE_LEN);
    assert_format(0, "Thu, 01 Jan 1970 00:00:00 GMT");
    assert_format(784111777, "Sun, 06 Nov 1994 08:49:37 GMT");
    assert_format(946684799, "Fri, 31 Dec 1999 23:59:59 GMT");
    assert_format(946684800, "Sat, 01 Jan 2000 00:00:00 GMT");
    assert_format(1483228799, "Sat, 31 Dec 2016 23:59:59 GMT");
    assert_format(2147483647, "Tue, 19 Jan 2038 03:14:07 GMT");
    assert_format((time_t) 2147483648LL, "Tue, 19 Jan 2038 03:14:08 GMT");
    assert_format((time_t) 4107542400LL, "Mon, 01 Mar 2100 00:00:00 GMT");
    assert_format((time_t) 253402300799LL, "Fri, 31 Dec 9999 23:59:59 GMT");
    assert_format(-1, "Wed, 31 Dec 1969 23:59:59 GMT");
}

static void test_format_leap_days(void **state)
{
    (void) state;
    assert_format(68255999, "Tue, 29 Feb 1972 23:59:59 GMT");
    assert_format(68256000, "Wed, 01 Mar 1972 00:00:00 GMT");
    assert_format(951782400, "Tue, 29 Feb 2000 00:00:00 GMT"); /* divisible by 400 */
    assert_format(1709208000, "Thu, 29 Feb 2024 12:00:00 GMT");
    assert_format((time_t) 4107456000LL, "Sun, 28 Feb 2100 00:00:00 GMT"); /* 2100: no 29th */
}

/* The C library (C locale, UTC) as an oracle over a wide range. */
static void test_format_matches_gmtime(void **state)
{
    char want[64];
    struct tm tm;
    (void) state;

    for (int64_t t = -86400LL * 365 * 2; t < 4200000000LL; t += 7777777 + (t & 0xfff)) {
        time_t tt = (time_t) t;
        assert_non_null(gmtime_r(&tt, &tm));
        strftime(want, sizeof(want), "%a, %d %b %Y %H:%M:%S GMT", &tm);
        assert_format(tt, want);
    }
}

static void assert_parse(const char *s, time_t want)
{
    time_t t = 12345;
    if (!mk_http_date_parse(s, strlen(s), &t)) {
        fail_msg("'%s' was rejected", s);
    }
    if (t != want) {
        fail_msg("'%s': got %lld, expected %lld", s, (long long) t, (long long) want);
    }
}

static void assert_reject(const char *s)
{
    time_t t = 12345;
    if (mk_http_date_parse(s, strlen(s), &t)) {
        fail_msg("'%s' was accepted as %lld", s, (long long) t);
    }
    assert_int_equal(t, 12345); /* not written */
}

static void test_parse_three_forms(void **state)
{
    (void) state;
    assert_parse("Sun, 06 Nov 1994 08:49:37 GMT", 784111777);  /* IMF-fixdate */
    assert_parse("Sunday, 06-Nov-94 08:49:37 GMT", 784111777); /* RFC 850 */
    assert_parse("Sun Nov  6 08:49:37 1994", 784111777);       /* asctime */
    assert_parse("Thu Jan  1 00:00:00 1970", 0);
    assert_parse("Tue Feb 29 12:00:00 2000", 951825600);
    assert_parse("Thu, 01 Jan 1970 00:00:00 GMT", 0);
    assert_parse("Tue, 19 Jan 2038 03:14:08 GMT", (time_t) 2147483648LL);
    assert_parse("Fri, 31 Dec 9999 23:59:59 GMT", (time_t) 253402300799LL);
    assert_parse("Wednesday, 31-Dec-69 23:59:59 GMT", (time_t) 3155759999LL); /* 2069 */
    /* every day name in both forms */
    assert_parse("Mon, 07 Nov 1994 08:49:37 GMT", 784111777 + 86400);
    assert_parse("Tuesday, 08-Nov-94 08:49:37 GMT", 784111777 + 2 * 86400);
    assert_parse("Wed Nov  9 08:49:37 1994", 784111777 + 3 * 86400);
    assert_parse("Thursday, 10-Nov-94 08:49:37 GMT", 784111777 + 4 * 86400);
    assert_parse("Fri, 11 Nov 1994 08:49:37 GMT", 784111777 + 5 * 86400);
    assert_parse("Saturday, 12-Nov-94 08:49:37 GMT", 784111777 + 6 * 86400);
    assert_parse("Sat Nov 12 08:49:37 1994", 784111777 + 6 * 86400);
}

/* RFC 850 two-digit years: 70-99 are 19xx, 00-69 are 20xx. */
static void test_parse_rfc850_years(void **state)
{
    (void) state;
    assert_parse("Thursday, 01-Jan-70 00:00:00 GMT", 0);
    assert_parse("Friday, 31-Dec-99 23:59:59 GMT", 946684799);
    assert_parse("Saturday, 01-Jan-00 00:00:00 GMT", 946684800);
    assert_parse("Tuesday, 01-Jan-69 00:00:00 GMT", (time_t) 3124224000LL);
}

static void test_parse_leap(void **state)
{
    (void) state;
    assert_parse("Tue, 29 Feb 2000 00:00:00 GMT", 951782400);
    assert_parse("Thu, 29 Feb 2024 12:00:00 GMT", 1709208000);
    assert_parse("Tue, 29 Feb 1972 23:59:59 GMT", 68255999);
    assert_reject("Mon, 29 Feb 2100 00:00:00 GMT");
    assert_reject("Thu, 29 Feb 1900 00:00:00 GMT");
    assert_reject("Tue, 29 Feb 2023 00:00:00 GMT");
    /* a leap second is read as the second before */
    assert_parse("Sat, 31 Dec 2016 23:59:60 GMT", 1483228799);
}

static void test_parse_rejects(void **state)
{
    static const char *const bad[] = {
        "",
        "Sun",
        "Sun, 06 Nov 1994 08:49:37",      /* no GMT */
        "Sun, 06 Nov 1994 08:49:37 UTC",  /* another zone */
        "Sun, 06 Nov 1994 08:49:37 gmt",  /* GMT is case-sensitive */
        "Sun, 06 Nov 1994 08:49:37 GMT ", /* trailing space */
        "Sun, 06 Nov 1994 08:49:37 GMTx", /* trailing junk */
        "Sun, 06 Nov 1994 08:49:37 GMT\r\n",
        " Sun, 06 Nov 1994 08:49:37 GMT", /* leading space */
        "Snd, 06 Nov 1994 08:49:37 GMT",  /* bad day names */
        "Sunn, 06 Nov 1994 08:49:37 GMT",
        "sun, 06 Nov 1994 08:49:37 GMT",
        "SUN, 06 Nov 1994 08:49:37 GMT",
        "Sundy, 06-Nov-94 08:49:37 GMT",
        "Sunday, 06 Nov 1994 08:49:37 GMT", /* long day name with the IMF layout */
        "Sun, 06-Nov-94 08:49:37 GMT",      /* short day name with the RFC 850 layout */
        "Sun, 30 Feb 1994 08:49:37 GMT",    /* Feb 30 */
        "Sun, 31 Apr 1994 08:49:37 GMT",
        "Sun, 32 Jan 1994 08:49:37 GMT",
        "Sun, 00 Jan 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:60:00 GMT",
        "Sun, 06 Nov 1994 08:49:61 GMT",
        "Sun, 6 Nov 1994 08:49:37 GMT", /* one-digit day */
        "Sun, 06 Nov 94 08:49:37 GMT",  /* two-digit year */
        "Sun, 06 nov 1994 08:49:37 GMT",
        "Sun, 06 Nob 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 8:49:37 GMT",
        "Sun, 06 Nov 1994 08:49 GMT",
        "Sun, 06 Nov 1994 08-49-37 GMT",
        "Sun,  06 Nov 1994 08:49:37 GMT",
        "Sun 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994  08:49:37 GMT",
        "Sun, 06 Nov +994 08:49:37 GMT",
        "Sunday, 06-Nov-1994 08:49:37 GMT", /* four-digit year in RFC 850 */
        "Sunday, 06-Nov-94 08:49:37",
        "Sunday, 30-Feb-94 08:49:37 GMT",
        "Sun Nov 6 08:49:37 1994", /* asctime: one-digit day needs two spaces */
        "Sun Nov  6 08:49:37 94",
        "Sun Nov  6 08:49:37 1994 ",
        "Sun Nov 06 08:49:37 1994 GMT",
        "Sun Feb 30 08:49:37 1994",
        "Sun Nov   6 08:49:37 1994",
        "1994-11-06T08:49:37Z",
        "784111777",
    };
    (void) state;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_reject(bad[i]);
    }
}

/* The length is honoured: what follows it is not part of the date. */
static void test_parse_uses_length(void **state)
{
    const char *s = "Sun, 06 Nov 1994 08:49:37 GMT, and more";
    time_t t = 0;
    (void) state;

    assert_true(mk_http_date_parse(s, MK_HTTP_DATE_LEN, &t));
    assert_int_equal(t, 784111777);
    assert_false(mk_http_date_parse(s, MK_HTTP_DATE_LEN - 1, &t));
    assert_false(mk_http_date_parse(s, MK_HTTP_DATE_LEN + 1, &t));
    assert_false(mk_http_date_parse(s, 0, &t));
}

/* format then parse gives the same second back. */
static void test_round_trip(void **state)
{
    char out[MK_HTTP_DATE_LEN];
    unsigned n = 0;
    (void) state;

    for (int64_t t = 0; t < 253402300799LL; t += 86399LL * 37 + (t % 97)) {
        time_t back = -1;
        mk_http_date_format((time_t) t, out);
        if (!mk_http_date_parse(out, sizeof(out), &back) || back != (time_t) t) {
            fail_msg("%lld -> '%.29s' -> %lld", (long long) t, out, (long long) back);
        }
        n++;
    }
    assert_true(n > 10000);

    /* every second of one day across a leap day */
    for (int64_t t = 951782400 - 43200; t < 951782400 + 43200; t += 1) {
        time_t back = -1;
        mk_http_date_format((time_t) t, out);
        assert_true(mk_http_date_parse(out, sizeof(out), &back));
        assert_int_equal(back, (time_t) t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_known),
        cmocka_unit_test(test_format_leap_days),
        cmocka_unit_test(test_format_matches_gmtime),
        cmocka_unit_test(test_parse_three_forms),
        cmocka_unit_test(test_parse_rfc850_years),
        cmocka_unit_test(test_parse_leap),
        cmocka_unit_test(test_parse_rejects),
        cmocka_unit_test(test_parse_uses_length),
        cmocka_unit_test(test_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
