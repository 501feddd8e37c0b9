/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_qs.c: unit tests of duda/qs.c, the query strings behind the qs
 * object: finding a key, counting pairs, decoding values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "duda/qs.c"

static void check_value(const char *q, const char *key, const char *want)
{
    size_t len = 99;
    const char *v = duda_qs_find(q, strlen(q), key, strlen(key), &len);

    if (!want) {
        assert_null(v);
        return;
    }
    assert_non_null(v);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(v, want, len);
}

static void test_find(void **state)
{
    const char *q = "a=1&b=&c&d=x=y&&a=2&e%20f=3";

    (void) state;
    check_value(q, "a", "1"); /* the first one */
    check_value(q, "b", "");
    check_value(q, "c", ""); /* no '=' */
    check_value(q, "d", "x=y");
    check_value(q, "e%20f", "3"); /* keys are not decoded */
    check_value(q, "e f", NULL);
    check_value(q, "x", NULL);
    check_value(q, "", NULL); /* an empty pair ("&&") is no pair */
    check_value("a=1&", "", NULL);
    check_value("&a=1", "", NULL);
    check_value("&=v", "", "v"); /* an empty key */
    check_value("a=1", "a=1", NULL);
    check_value("", "a", NULL);
    size_t len;
    assert_null(duda_qs_find(NULL, 0, "a", 1, &len));
    /* bounded by n */
    assert_null(duda_qs_find("ab=1", 1, "ab", 2, &len));
    assert_non_null(duda_qs_find("a=12", 3, "a", 1, &len));
    assert_int_equal(len, 1);
}

static void test_count(void **state)
{
    (void) state;
    assert_int_equal(duda_qs_count("a=1&b=2&c", 9), 3);
    assert_int_equal(duda_qs_count("&&a&&", 5), 1);
    assert_int_equal(duda_qs_count("", 0), 0);
    assert_int_equal(duda_qs_count(NULL, 0), 0);
    assert_int_equal(duda_qs_count("=", 1), 1);
}

static void check_decoded(const char *v, const char *want, size_t want_len)
{
    char out[64];
    size_t n = duda_qs_decode(v, strlen(v), out);

    assert_int_equal(n, want_len);
    assert_memory_equal(out, want, n);
}

static void test_decode(void **state)
{
    (void) state;
    check_decoded("a+b%20c", "a b c", 5);
    check_decoded("%41%4a%4A%7e", "AJJ~", 4);
    check_decoded("%2B+", "+ ", 2);
    check_decoded("100%", "100%", 4); /* not an escape: kept */
    check_decoded("%4", "%4", 2);
    check_decoded("%zz%4g", "%zz%4g", 6);
    check_decoded("a%00b", "a\0b", 3); /* the byte it names */
    check_decoded("%%41", "%A", 2);
    check_decoded("", "", 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_count),
        cmocka_unit_test(test_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
