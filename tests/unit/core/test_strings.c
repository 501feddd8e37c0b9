/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_strings.c: unit tests of core/strings.c and the inline helpers of
 * core/strings.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <monkey/mk_util.h>

#include "core/strings.h"

static bool to_u64(const char *s, uint64_t max, uint64_t *out)
{
    return mk_str_to_u64(s, strlen(s), max, out);
}

static void test_to_u64_values(void **state)
{
    uint64_t v;
    (void) state;

    assert_true(to_u64("0", UINT64_MAX, &v));
    assert_int_equal(v, 0);
    assert_true(to_u64("7", UINT64_MAX, &v));
    assert_int_equal(v, 7);
    assert_true(to_u64("00042", UINT64_MAX, &v));
    assert_int_equal(v, 42);
    assert_true(to_u64("1234567890123", UINT64_MAX, &v));
    assert_int_equal(v, 1234567890123ull);
    assert_true(to_u64("18446744073709551615", UINT64_MAX, &v));
    assert_true(v == UINT64_MAX);
    assert_true(to_u64("000000000000000000000000018446744073709551615", UINT64_MAX, &v));
    assert_true(v == UINT64_MAX);
    assert_true(to_u64("9223372036854775807", INT64_MAX, &v));
    assert_int_equal(v, INT64_MAX);

    /* the length is honoured */
    assert_true(mk_str_to_u64("123abc", 3, UINT64_MAX, &v));
    assert_int_equal(v, 123);
    assert_true(mk_str_to_u64("98", 1, UINT64_MAX, &v));
    assert_int_equal(v, 9);
}

static void test_to_u64_rejects(void **state)
{
    static const char *const bad[] = {
        "",
        "-1",
        "+1",
        " 1",
        "1 ",
        "1a",
        "a1",
        "0x1",
        "1.0",
        "1,000",
        "1e3",
        "\t1",
        "18446744073709551616", /* 2^64 */
        "18446744073709551620", /* 2^64 + 4: must not wrap around */
        "36893488147419103232", /* 2^65 */
        "99999999999999999999",
        "184467440737095516150", /* UINT64_MAX * 10 */
    };
    uint64_t v = 4242;
    (void) state;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (to_u64(bad[i], UINT64_MAX, &v)) {
            fail_msg("'%s' accepted as %llu", bad[i], (unsigned long long) v);
        }
    }
    assert_int_equal(v, 4242); /* untouched */
    assert_false(mk_str_to_u64("1\0", 2, UINT64_MAX, &v));
    assert_false(mk_str_to_u64(NULL, 0, UINT64_MAX, &v));
}

/* `max` is an inclusive limit, exact at every magnitude. */
static void test_to_u64_limits(void **state)
{
    static const uint64_t limits[] = {9,
                                      10,
                                      99,
                                      100,
                                      255,
                                      599,
                                      65535,
                                      1000000,
                                      INT64_MAX,
                                      UINT64_MAX - 1,
                                      UINT64_MAX / 10,
                                      (UINT64_MAX / 10) * 10 + 4};
    char buf[32];
    uint64_t v;
    (void) state;

    for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
        uint64_t max = limits[i];
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long) max);
        assert_true(to_u64(buf, max, &v));
        assert_true(v == max);
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long) max - 1);
        assert_true(to_u64(buf, max, &v));
        assert_true(v == max - 1);
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long) max + 1);
        if (to_u64(buf, max, &v)) {
            fail_msg("'%s' accepted with max %llu", buf, (unsigned long long) max);
        }
        snprintf(buf, sizeof(buf), "%llu0", (unsigned long long) max);
        if (to_u64(buf, max, &v)) {
            fail_msg("'%s' accepted with max %llu", buf, (unsigned long long) max);
        }
    }
}

/* Limits below 9: a single digit above the limit must be refused too. */
static void test_to_u64_small_limits(void **state)
{
    char buf[8];
    uint64_t v;
    (void) state;

    for (uint64_t max = 0; max < 10; max++) {
        for (unsigned d = 0; d <= 9; d++) {
            snprintf(buf, sizeof(buf), "%u", d);
            bool ok = to_u64(buf, max, &v);
            if (ok != (d <= max) || (ok && v != d)) {
                fail_msg("'%s' with max %llu: %s", buf, (unsigned long long) max,
                         ok ? "accepted" : "refused");
            }
        }
        snprintf(buf, sizeof(buf), "1%llu", (unsigned long long) max);
        if (to_u64(buf, max, &v)) {
            fail_msg("'%s' accepted with max %llu (as %llu)", buf, (unsigned long long) max,
                     (unsigned long long) v);
        }
    }
}

/* mk_u64_dec (mk_util.h, the server's numbers as text) and mk_str_to_u64 are inverses. */
static void test_u64_round_trip(void **state)
{
    char buf[21];
    uint64_t v = 0, back;
    (void) state;

    for (int i = 0; i < 20000; i++) {
        size_t n = mk_u64_dec(v, buf);
        assert_true(mk_str_to_u64(buf, n, UINT64_MAX, &back));
        assert_true(back == v);
        v = v * 6364136223846793005ull + 1442695040888963407ull; /* LCG */
        if (i % 3 == 0) {
            v >>= (unsigned) (i % 60);
        }
    }
}

static void test_duration(void **state)
{
    static const struct {
        const char *s;
        uint64_t ms; /* UINT64_MAX: refused */
    } cases[] = {
        {"30", 30000},
        {"0", 0},
        {"500ms", 500},
        {"2s", 2000},
        {"1m", 60000},
        {"1h", 3600000},
        {"0ms", 0},
        {"3600s", 3600000},
        {"", UINT64_MAX},
        {"ms", UINT64_MAX},
        {"s", UINT64_MAX},
        {"1.5s", UINT64_MAX},
        {"5 s", UINT64_MAX},
        {"5S", UINT64_MAX},
        {"5sec", UINT64_MAX},
        {"-1", UINT64_MAX},
        {"5x", UINT64_MAX},
        {"1d", UINT64_MAX},
        {"3601s", UINT64_MAX},
        {"61m", UINT64_MAX},
    };
    char buf[24];
    uint64_t v;
    (void) state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bool ok = mk_str_to_duration_ms(cases[i].s, strlen(cases[i].s), 3600000, &v);
        if (cases[i].ms == UINT64_MAX) {
            assert_false(ok);
        }
        else {
            assert_true(ok);
            assert_true(v == cases[i].ms);
        }
    }
    assert_false(mk_str_to_duration_ms("99999999999999999999h", 21, UINT64_MAX, &v));
    mk_duration_to_str(1500, buf);
    assert_string_equal(buf, "1500ms");
    mk_duration_to_str(30000, buf);
    assert_string_equal(buf, "30s");
    mk_duration_to_str(0, buf);
    assert_string_equal(buf, "0s");
    mk_duration_to_str(UINT64_MAX, buf);
    assert_string_equal(buf, "18446744073709551615ms");
}

static void expect_items(const char *list, const char *const *want, size_t n)
{
    struct mk_str cursor = mk_str_make(list, strlen(list)), item;
    size_t i = 0;

    while (mk_str_list_next(&cursor, &item)) {
        if (i >= n) {
            fail_msg("'%s': extra item '%.*s'", list, (int) item.len, item.p);
        }
        if (item.len != strlen(want[i]) || memcmp(item.p, want[i], item.len) != 0) {
            fail_msg("'%s': item %zu is '%.*s', expected '%s'", list, i, (int) item.len, item.p,
                     want[i]);
        }
        i++;
    }
    assert_int_equal(i, n);
    assert_int_equal(cursor.len, 0);
    assert_false(mk_str_list_next(&cursor, &item)); /* stays at the end */
}

static void test_list_next(void **state)
{
    static const char *const abc[] = {"a", "b", "c"};
    static const char *const one[] = {"gzip"};
    static const char *const spaced[] = {"keep-alive", "Upgrade"};
    static const char *const inner[] = {"a b", "c\td"};
    (void) state;

    expect_items("a,b,c", abc, 3);
    expect_items("a, b, c", abc, 3);
    expect_items("  a ,\tb\t,  c  ", abc, 3);
    expect_items(",a,,b, ,c,", abc, 3);
    expect_items(", , ,a,\t,b,c,,,", abc, 3);
    expect_items("gzip", one, 1);
    expect_items("  gzip  ", one, 1);
    expect_items("keep-alive, Upgrade", spaced, 2);
    expect_items(" a b , c\td ", inner, 2);
    expect_items("", NULL, 0);
    expect_items(",", NULL, 0);
    expect_items(" , ,\t, ", NULL, 0);
}

/* Items point into the list; the length is honoured. */
static void test_list_next_views(void **state)
{
    const char *list = "x, yy, zzz";
    struct mk_str cursor = mk_str_make(list, 5), item; /* "x, yy" */
    (void) state;

    assert_true(mk_str_list_next(&cursor, &item));
    assert_ptr_equal(item.p, list);
    assert_int_equal(item.len, 1);
    assert_true(mk_str_list_next(&cursor, &item));
    assert_ptr_equal(item.p, list + 3);
    assert_int_equal(item.len, 2);
    assert_false(mk_str_list_next(&cursor, &item));
}

static void assert_trim(const char *in, const char *want)
{
    struct mk_str t = mk_str_trim(mk_str_make(in, strlen(in)));
    if (t.len != strlen(want) || memcmp(t.p, want, t.len) != 0) {
        fail_msg("trim '%s': got '%.*s', expected '%s'", in, (int) t.len, t.p, want);
    }
    if (t.len) {
        assert_ptr_equal(t.p, strstr(in, want)); /* a view, not a copy */
    }
}

static void test_trim(void **state)
{
    (void) state;
    assert_trim("abc", "abc");
    assert_trim("  abc", "abc");
    assert_trim("abc  ", "abc");
    assert_trim(" \t a b \t ", "a b");
    assert_trim("\tx\t", "x");
    assert_trim("", "");
    assert_trim("   ", "");
    assert_trim("\t\t", "");
    assert_trim("\na\n", "\na\n"); /* only SP and HTAB */
    assert_trim("\ra\r", "\ra\r");
    assert_trim("\va", "\va");

    struct mk_str e = mk_str_trim(mk_str_make("  ", 2));
    assert_int_equal(e.len, 0);
}

static void test_ieq(void **state)
{
    (void) state;
    assert_true(mk_str_ieq("Content-Length", 14, "content-length"));
    assert_true(mk_str_ieq("HOST", 4, "host"));
    assert_true(mk_str_ieq("host", 4, "HOST"));
    assert_true(mk_str_ieq("a-1_Z", 5, "A-1_z"));
    assert_true(mk_str_ieq("", 0, ""));
    assert_true(mk_str_ieq("abcdef", 3, "ABC")); /* only alen bytes of a */
    assert_false(mk_str_ieq("abc", 3, "ab"));
    assert_false(mk_str_ieq("ab", 2, "abc"));
    assert_false(mk_str_ieq("", 0, "a"));
    assert_false(mk_str_ieq("a", 1, ""));
    assert_false(mk_str_ieq("abd", 3, "abc"));
    assert_false(mk_str_ieq("a\0c", 3, "a"));
    /* only ASCII letters fold: these differ by 0x20 but are not letters */
    assert_false(mk_str_ieq("[", 1, "{"));
    assert_false(mk_str_ieq("@", 1, "`"));
    assert_false(mk_str_ieq("^", 1, "~"));
    assert_false(mk_str_ieq("\xc9", 1, "\xe9"));
    assert_false(mk_str_ieq("0", 1, "\x10"));
}

static void test_iprefix_and_eq(void **state)
{
    (void) state;
    assert_true(mk_str_iprefix("Content-Length", 14, "content-"));
    assert_true(mk_str_iprefix("HTTP://x", 8, "http://"));
    assert_true(mk_str_iprefix("abc", 3, ""));
    assert_true(mk_str_iprefix("abc", 3, "ABC"));
    assert_false(mk_str_iprefix("abc", 3, "abcd"));
    assert_false(mk_str_iprefix("abcd", 2, "abc")); /* the length is honoured */
    assert_false(mk_str_iprefix("xbc", 3, "a"));
    assert_false(mk_str_iprefix("[bc", 3, "{"));

    assert_true(mk_str_eq("abc", 3, "abc"));
    assert_false(mk_str_eq("abc", 3, "ABC"));
    assert_false(mk_str_eq("abc", 2, "abc"));
    assert_true(mk_str_eq("abcd", 2, "ab"));
    assert_true(mk_str_eq("", 0, ""));
}

static void test_inline_helpers(void **state)
{
    (void) state;
    for (int c = 0; c < 256; c++) {
        char ch = (char) c;
        char want = (c >= 'A' && c <= 'Z') ? (char) (c + 32) : ch;
        assert_int_equal(mk_tolower(ch), want);
        assert_int_equal(mk_is_digit(ch), c >= '0' && c <= '9');
    }
    struct mk_str s = MK_STR("hello");
    assert_int_equal(s.len, 5);
    assert_memory_equal(s.p, "hello", 5);
    s = mk_str_make("abc", 2);
    assert_int_equal(s.len, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_to_u64_values),  cmocka_unit_test(test_to_u64_rejects),
        cmocka_unit_test(test_to_u64_limits),  cmocka_unit_test(test_to_u64_small_limits),
        cmocka_unit_test(test_u64_round_trip), cmocka_unit_test(test_duration),
        cmocka_unit_test(test_list_next),      cmocka_unit_test(test_list_next_views),
        cmocka_unit_test(test_trim),           cmocka_unit_test(test_ieq),
        cmocka_unit_test(test_iprefix_and_eq), cmocka_unit_test(test_inline_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
