/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_session_parse.c: unit tests of duda/session_parse.c: the store
 * addresses of SessionStore and redis->connect(), and the Cookie header's
 * name=value pairs the Redis session store looks up and cookie->get finds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "duda/session_parse.c"

struct url_case {
    const char *url;
    const char *host; /* NULL: refused, with `reason` in the message */
    int port, db;
    const char *reason;
};

static const struct url_case url_cases[] = {
    {"redis://127.0.0.1", "127.0.0.1", 6379, 0, NULL},
    {"redis://localhost:7000", "localhost", 7000, 0, NULL},
    {"redis://cache.example:6380/3", "cache.example", 6380, 3, NULL},
    {"redis://h/15", "h", 6379, 15, NULL},
    {"redis://h/", "h", 6379, 0, NULL},
    {"redis://[::1]:6379/2", "::1", 6379, 2, NULL},
    {"redis://[::1]", "::1", 6379, 0, NULL},
    {"redis:/h", NULL, 0, 0, "is not a redis://host[:port][/db] address"},
    {"http://h", NULL, 0, 0, "is not a redis://host[:port][/db] address"},
    {"memory", NULL, 0, 0, "is not a redis://host[:port][/db] address"},
    {"redis://", NULL, 0, 0, "no host"},
    {"redis://:6379", NULL, 0, 0, "no host"},
    {"redis://h:0", NULL, 0, 0, "the port is not a number from 1 to 65535"},
    {"redis://h:65536", NULL, 0, 0, "the port is not a number from 1 to 65535"},
    {"redis://h:x", NULL, 0, 0, "the port is not a number from 1 to 65535"},
    {"redis://h:12x/1", NULL, 0, 0, "the port is not a number from 1 to 65535"},
    {"redis://h/x", NULL, 0, 0, "the database is not a number from 0"},
    {"redis://h/-1", NULL, 0, 0, "the database is not a number from 0"},
    {"redis://h/1/2", NULL, 0, 0, "the database is not a number from 0"},
    {"redis://[::1", NULL, 0, 0, "no ']'"},
    {"redis://[::1]x", NULL, 0, 0, "unexpected 'x' after the host"},
};

static void test_urls(void **state)
{
    (void) state;
    for (size_t i = 0; i < sizeof(url_cases) / sizeof(url_cases[0]); i++) {
        const struct url_case *c = &url_cases[i];
        char host[256], err[256] = "";
        int port = -1, db = -1;
        int rc =
            duda_session_parse_redis_url(c->url, host, sizeof(host), &port, &db, err, sizeof(err));
        if (c->host) {
            assert_int_equal(rc, 0);
            assert_string_equal(host, c->host);
            assert_int_equal(port, c->port);
            assert_int_equal(db, c->db);
        }
        else {
            assert_int_equal(rc, -1);
            if (!strstr(err, c->reason)) {
                fail_msg("%s: '%s' lacks '%s'", c->url, err, c->reason);
            }
        }
    }
}

static void test_url_host_too_long(void **state)
{
    char url[400], host[16], err[256];
    int port, db;

    (void) state;
    snprintf(url, sizeof(url), "redis://%s:1", "averyveryverylonghostname");
    assert_int_equal(
        duda_session_parse_redis_url(url, host, sizeof(host), &port, &db, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "a host too long"));
    assert_int_equal(
        duda_session_parse_redis_url(NULL, host, sizeof(host), &port, &db, err, sizeof(err)), -1);
}

static void expect_pair(const struct duda_cookie_pair *p, const char *name, const char *value)
{
    assert_int_equal(p->name_len, strlen(name));
    assert_memory_equal(p->name, name, p->name_len);
    assert_int_equal(p->value_len, strlen(value));
    assert_memory_equal(p->value, value, p->value_len);
}

static void test_cookie_pairs(void **state)
{
    struct duda_cookie_pair out[4];
    const char *h = "sid=0123; theme=dark;  empty=;=novalue; flag; b64=YQ==;last=x";

    (void) state;
    size_t n = duda_session_parse_cookie_pairs(h, strlen(h), out, 4);
    assert_int_equal(n, 4);
    expect_pair(&out[0], "sid", "0123");
    expect_pair(&out[1], "theme", "dark");
    expect_pair(&out[2], "empty", "");
    expect_pair(&out[3], "b64", "YQ==");
    /* Bounded by max, and by n (not NUL terminated). */
    assert_int_equal(duda_session_parse_cookie_pairs(h, strlen(h), out, 1), 1);
    assert_int_equal(duda_session_parse_cookie_pairs(h, 7, out, 4), 1);
    expect_pair(&out[0], "sid", "012");
    assert_int_equal(duda_session_parse_cookie_pairs("", 0, out, 4), 0);
    assert_int_equal(duda_session_parse_cookie_pairs(" ; ;", 4, out, 4), 0);
    assert_int_equal(duda_session_parse_cookie_pairs("a=1;\tb=2", 8, out, 4), 2);
    expect_pair(&out[1], "b", "2");
}

/* cookie->get: the first pair of that name, split as duda_session_parse_cookie_pairs splits. */
static void test_cookie_find(void **state)
{
    const char *h = "sid=0123; theme=dark;\tempty=;=novalue; flag; sid=again;last=x";
    size_t len = 99;

    (void) state;
    const char *v = duda_session_parse_cookie_find(h, strlen(h), "sid", 3, &len);
    assert_non_null(v);
    assert_int_equal(len, 4);
    assert_memory_equal(v, "0123", 4);
    v = duda_session_parse_cookie_find(h, strlen(h), "empty", 5, &len); /* after a tab */
    assert_non_null(v);
    assert_int_equal(len, 0);
    v = duda_session_parse_cookie_find(h, strlen(h), "last", 4, &len);
    assert_non_null(v);
    assert_int_equal(len, 1);
    assert_null(duda_session_parse_cookie_find(h, strlen(h), "flag", 4, &len));
    assert_null(
        duda_session_parse_cookie_find(h, strlen(h), "", 0, &len)); /* "=novalue" has no name */
    assert_null(duda_session_parse_cookie_find(h, strlen(h), "SID", 3, &len));
    assert_null(duda_session_parse_cookie_find(h, strlen(h), "si", 2, &len));
    assert_null(duda_session_parse_cookie_find(h, 5, "theme", 5, &len)); /* bounded by n */
    assert_null(duda_session_parse_cookie_find("", 0, "a", 1, &len));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_urls),
        cmocka_unit_test(test_url_host_too_long),
        cmocka_unit_test(test_cookie_pairs),
        cmocka_unit_test(test_cookie_find),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
