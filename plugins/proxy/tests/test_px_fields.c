/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_px_fields.c: the proxy's field rewriting (plugins/proxy/px_fields.c):
 * Location and Refresh prefixes, Set-Cookie's Path and Domain, the
 * Forwarded element and the names RequestHeader and ResponseHeader may
 * not touch, as tables of values and what they must become.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "px_fields.h"

#define MAP(f, t)                                                                                  \
    {                                                                                              \
        f, t, sizeof(f) - 1, sizeof(t) - 1                                                         \
    }

static const struct px_map redirect[] = {
    MAP("http://10.0.0.1:8080/app", "https://www.test/app"),
    MAP("http://10.0.0.1:8080/", "https://www.test/other/"),
    MAP("/internal/", "/"),
};

struct rw_case {
    const char *in, *out;
};

static void check(long k, const char *out, const char *want)
{
    assert_true(k >= 0);
    assert_int_equal((size_t) k, strlen(want));
    assert_memory_equal(out, want, strlen(want));
}

static void test_location(void **state)
{
    static const struct rw_case cases[] = {
        {"http://10.0.0.1:8080/app/x?y=1", "https://www.test/app/x?y=1"},
        {"http://10.0.0.1:8080/app", "https://www.test/app"},
        {"http://10.0.0.1:8080/b", "https://www.test/other/b"}, /* the first map that matches */
        {"/internal/login", "/login"},
        {"http://10.0.0.1:8081/app", "http://10.0.0.1:8081/app"}, /* another port */
        {"HTTP://10.0.0.1:8080/app", "HTTP://10.0.0.1:8080/app"}, /* bytes as written */
        {"/internal", "/internal"},
        {"", ""},
    };
    char out[256];
    (void) state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        long k =
            px_location_rewrite(cases[i].in, strlen(cases[i].in), redirect, 3, out, sizeof(out));
        check(k, out, cases[i].out);
    }
    /* no maps: a copy; no room: -1 */
    check(px_location_rewrite("/a", 2, NULL, 0, out, sizeof(out)), out, "/a");
    assert_int_equal(px_location_rewrite("http://10.0.0.1:8080/app", 24, redirect, 3, out, 19), -1);
    assert_int_equal(px_location_rewrite("/a", 2, NULL, 0, out, 1), -1);
    check(px_location_rewrite("/a", 2, NULL, 0, out, 2), out, "/a");
}

static void test_refresh(void **state)
{
    static const struct rw_case cases[] = {
        {"5; url=http://10.0.0.1:8080/app/x", "5; url=https://www.test/app/x"},
        {"0;URL=/internal/a", "0;URL=/a"},
        {"0; Url = '/internal/a' ", "0; Url = '/a' "},
        {"1;url=\"/internal/q\"", "1;url=\"/q\""},
        {"3, /internal/p", "3, /p"},
        {"3;/internal/p", "3;/p"},
        {"10", "10"},
        {"0; url=/other", "0; url=/other"},
        {"0; url='/internal/unclosed", "0; url='/unclosed"},
        {"0; urlx=/internal/", "0; urlx=/internal/"}, /* no url= part: the URL is "urlx=..." */
        {"", ""},
    };
    char out[256];
    (void) state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        long k =
            px_refresh_rewrite(cases[i].in, strlen(cases[i].in), redirect, 3, out, sizeof(out));
        check(k, out, cases[i].out);
    }
    assert_int_equal(px_refresh_rewrite("5; url=/internal/x", 18, redirect, 3, out, 5), -1);
}

static void test_cookie(void **state)
{
    static const struct px_map paths[] = {MAP("/app", "/"), MAP("/x/", "/y/")};
    static const struct px_map domains[] = {MAP("internal.local", "www.test"),
                                            MAP(".corp", ".example")};
    static const struct rw_case cases[] = {
        {"sid=1; Path=/app; HttpOnly", "sid=1; Path=/; HttpOnly"},
        {"sid=1; path=/app", "sid=1; path=/"},
        {"sid=1;PATH = /app ;Secure", "sid=1;PATH = / ;Secure"},
        {"sid=1; Path=/app/sub", "sid=1; Path=/app/sub"}, /* exact values only */
        {"sid=1; Path=/APP", "sid=1; Path=/APP"},         /* a path's case counts */
        {"sid=1; Domain=Internal.LOCAL; Path=/x/", "sid=1; Domain=www.test; Path=/y/"},
        {"sid=1; Domain=.corp", "sid=1; Domain=.example"},
        {"sid=1; Domain=a.internal.local", "sid=1; Domain=a.internal.local"},
        {"Path=/app; Path=/app", "Path=/app; Path=/"}, /* the cookie's own pair is kept */
        {"a=b; Pathx=/app; Path", "a=b; Pathx=/app; Path"},
        {"a=b; Expires=Wed, 21 Oct 2015 07:28:00 GMT; Path=/app",
         "a=b; Expires=Wed, 21 Oct 2015 07:28:00 GMT; Path=/"},
        {"a=b;", "a=b;"},
        {"a=b; ;; Path=/app;", "a=b; ;; Path=/;"},
        {"", ""},
    };
    char out[256];
    (void) state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        long k = px_cookie_rewrite(cases[i].in, strlen(cases[i].in), paths, 2, domains, 2, out,
                                   sizeof(out));
        check(k, out, cases[i].out);
    }
    assert_int_equal(px_cookie_rewrite("a=b; Path=/x/", 13, paths, 2, domains, 2, out, 12), -1);
}

static void test_forwarded(void **state)
{
    char out[256];
    (void) state;
    check(px_forwarded_element("192.0.2.60", "http", "www.test", 8, out, sizeof(out)), out,
          "for=192.0.2.60;proto=http;host=www.test");
    check(px_forwarded_element("2001:db8::1", "https", NULL, 0, out, sizeof(out)), out,
          "for=\"[2001:db8::1]\";proto=https");
    check(px_forwarded_element("-", "http", "a.test:8080", 11, out, sizeof(out)), out,
          "for=unknown;proto=http;host=\"a.test:8080\"");
    check(px_forwarded_element("", NULL, "a\"b\\c", 5, out, sizeof(out)), out,
          "for=unknown;host=\"a\\\"b\\\\c\"");
    check(px_forwarded_element("10.0.0.1", "http", "a\rb", 3, out, sizeof(out)), out,
          "for=10.0.0.1;proto=http"); /* a control byte: no host= */
    check(px_forwarded_element("10.0.0.1;x", "http", NULL, 0, out, sizeof(out)), out,
          "for=unknown;proto=http");
    assert_int_equal(px_forwarded_element("192.0.2.60", "http", "www.test", 8, out, 20), -1);
}

static void test_names(void **state)
{
    (void) state;
    assert_true(px_field_name_ok("X-Custom", 8));
    assert_false(px_field_name_ok("", 0));
    assert_false(px_field_name_ok("X Custom", 8));
    assert_false(px_field_name_ok("X:", 2));
    assert_true(px_field_value_ok("a\tb c", 5));
    assert_false(px_field_value_ok("a\rb", 3));
    assert_false(px_field_value_ok("a\nb", 3));
    assert_false(px_field_value_ok("a\0b", 3));
    assert_false(px_field_value_ok("a\x7f", 2));
    static const char *const both[] = {"Connection",        "keep-alive",    "TE",
                                       "Trailer",           "Upgrade",       "Proxy-Authorization",
                                       "Transfer-Encoding", "Content-Length"};
    for (size_t i = 0; i < sizeof(both) / sizeof(both[0]); i++) {
        assert_non_null(px_field_refused(both[i], strlen(both[i]), false));
        assert_non_null(px_field_refused(both[i], strlen(both[i]), true));
    }
    assert_non_null(px_field_refused("Host", 4, false));
    assert_null(px_field_refused("Host", 4, true));
    assert_non_null(px_field_refused("expect", 6, false));
    assert_non_null(px_field_refused("Server", 6, true));
    assert_non_null(px_field_refused("Date", 4, true));
    assert_null(px_field_refused("Server", 6, false));
    assert_null(px_field_refused("X-Forwarded-For", 15, false));
    assert_null(px_field_refused("Set-Cookie", 10, true));
    assert_null(px_field_refused("Content-Type", 12, true));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_location), cmocka_unit_test(test_refresh),
        cmocka_unit_test(test_cookie),   cmocka_unit_test(test_forwarded),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
