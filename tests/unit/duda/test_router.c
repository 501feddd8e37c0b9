/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_router.c: unit tests of duda/router.c (service names, checking a
 * service's patterns and method sets, placing them under the service's
 * prefix) and of how the server's route table then matches them: a
 * service takes its first path segment as a whole segment, parameters,
 * precedence between services and routes, method filters.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <monkey/mk_plugin.h>

#include "duda/router.c"
#include "server/http/http.h"
#include "server/http/route.h"

static void test_names(void **state)
{
    (void) state;
    assert_true(duda_router_name_ok("hello"));
    assert_true(duda_router_name_ok("query_string"));
    assert_true(duda_router_name_ok("a-b9"));
    assert_false(duda_router_name_ok(""));
    assert_false(duda_router_name_ok("a/b"));
    assert_false(duda_router_name_ok("a b"));
    assert_false(duda_router_name_ok(".."));
    char long_name[70];
    memset(long_name, 'a', 65);
    long_name[65] = '\0';
    assert_false(duda_router_name_ok(long_name));
}

static const struct {
    const char *pattern;
    uint32_t methods;
    const char *reason; /* NULL: valid */
} checks[] = {
    {"/", MK_ROUTE_GET, NULL},
    {"/users/:id", MK_ROUTE_GET, NULL},
    {"/users/:id/posts/:post_2", MK_ROUTE_GET | MK_ROUTE_POST, NULL},
    {"/files/*", MK_ROUTE_ANY, NULL},
    {"/dir/", MK_ROUTE_GET, NULL},
    {"users", MK_ROUTE_GET, "a pattern starts with '/'"},
    {"", MK_ROUTE_GET, "a pattern starts with '/'"},
    {"/a//b", MK_ROUTE_GET, "empty segment"},
    {"/a/../b", MK_ROUTE_GET, "'.' and '..' segments never match"},
    {"/users/:", MK_ROUTE_GET, "a parameter without a name"},
    {"/users/:a-b", MK_ROUTE_GET, "parameter names are letters, digits and '_'"},
    {"/a/:id/b/:id", MK_ROUTE_GET, "parameter 'id' given twice"},
    {"/a/*/b", MK_ROUTE_GET, "'*' only as the whole last segment"},
    {"/a/b*", MK_ROUTE_GET, "'*' only as the whole last segment"},
    {"/a b", MK_ROUTE_GET, "space, control"},
    {"/a?b", MK_ROUTE_GET, "space, control"},
    {"/a", 0, "no method"},
};

static void test_check(void **state)
{
    char err[256];

    (void) state;
    for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
        err[0] = '\0';
        int rc = duda_router_check(checks[i].pattern, checks[i].methods, err, sizeof(err));
        if (!checks[i].reason) {
            assert_int_equal(rc, MK_OK);
            continue;
        }
        assert_int_equal(rc, MK_ERR);
        if (!strstr(err, checks[i].reason)) {
            fail_msg("%s: '%s' lacks '%s'", checks[i].pattern, err, checks[i].reason);
        }
    }
    char big[300];
    memset(big, 'a', sizeof(big) - 1);
    big[0] = '/';
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(duda_router_check(big, MK_ROUTE_GET, err, sizeof(err)), MK_ERR);
}

static void test_join(void **state)
{
    char out[DUDA_PATTERN_MAX];

    (void) state;
    assert_int_equal(duda_router_join("/hello", "/users/:id", out, sizeof(out)), MK_OK);
    assert_string_equal(out, "/hello/users/:id");
    assert_int_equal(duda_router_join("/hello", "/", out, sizeof(out)), MK_OK);
    assert_string_equal(out, "/hello/");
    assert_int_equal(duda_router_join("", "/users/:id", out, sizeof(out)), MK_OK);
    assert_string_equal(out, "/users/:id");
    assert_int_equal(duda_router_join("/hello", "/*", out, sizeof(out)), MK_OK);
    assert_string_equal(out, "/hello/*");
    assert_int_equal(duda_router_join("/hello", "/abc", out, 8), MK_ERR);
}

/* Two services on one site as duda_service_routes() registers them. */
static const struct {
    const char *prefix, *pattern;
    uint32_t methods;
} site[] = {
    /* 0 */ {"/hello", "", MK_ROUTE_GET | MK_ROUTE_HEAD},  /* root callback */
    /* 1 */ {"/hello", "/", MK_ROUTE_GET | MK_ROUTE_HEAD}, /* root callback */
    /* 2 */ {"/hello", "/users/:id", MK_ROUTE_GET},
    /* 3 */ {"/hello", "/users/:uid", MK_ROUTE_DELETE},
    /* 4 */ {"/hello", "/users/me", MK_ROUTE_GET},
    /* 5 */ {"/hello", "/*", MK_ROUTE_GET | MK_ROUTE_HEAD}, /* static files */
    /* 6 */ {"/hello2", "/users/:id", MK_ROUTE_GET},
    /* 7 */ {"", "/files/:name", MK_ROUTE_GET | MK_ROUTE_POST}, /* a service with Root on */
    /* 8 */ {"", "/*", MK_ROUTE_GET | MK_ROUTE_HEAD},
};

static int handler(struct mk_request *r, void *arg)
{
    (void) r;
    (void) arg;
    return MK_OK;
}

static struct mk_routes build(void)
{
    struct mk_routes t = {0};
    char err[256], full[DUDA_PATTERN_MAX];

    for (size_t i = 0; i < sizeof(site) / sizeof(site[0]); i++) {
        struct mk_route rt;
        assert_int_equal(duda_router_join(site[i].prefix, site[i].pattern, full, sizeof(full)),
                         MK_OK);
        assert_int_equal(mk_route_parse(&rt, full, err, sizeof(err)), MK_OK);
        rt.methods = site[i].methods;
        rt.handler = handler;
        rt.arg = (void *) (uintptr_t) i;
        assert_int_equal(mk_routes_add(&t, &rt), MK_OK);
    }
    assert_int_equal(mk_routes_finish(&t, err, sizeof(err)), MK_OK);
    return t;
}

static const struct {
    unsigned method;
    const char *path;
    int route; /* index in site, -1: none takes it */
    const char *param, *value;
} cases[] = {
    {MK_METHOD_GET, "/hello", 0, NULL, NULL},
    {MK_METHOD_GET, "/hello/", 1, NULL, NULL},
    {MK_METHOD_GET, "/hello/users/42", 2, "id", "42"},
    {MK_METHOD_DELETE, "/hello/users/42", 3, "uid", "42"},
    {MK_METHOD_GET, "/hello/users/me", 4, NULL, NULL},   /* exact before parameters */
    {MK_METHOD_GET, "/hello/users/42/x", 5, NULL, NULL}, /* prefix: the static files */
    {MK_METHOD_GET, "/hello/index.html", 5, NULL, NULL},
    {MK_METHOD_GET, "/hello2/users/7", 6, "id", "7"}, /* a longer name, its own service */
    {MK_METHOD_GET, "/helloworld", 8, NULL, NULL},    /* never hello's */
    {MK_METHOD_GET, "/hellox/users/1", 8, NULL, NULL},
    {MK_METHOD_GET, "/files/a.txt", 7, "name", "a.txt"},
    {MK_METHOD_POST, "/files/a.txt", 7, "name", "a.txt"},
    {MK_METHOD_PUT, "/hello/users/42", -1, NULL, NULL}, /* method filter: 405 */
    {MK_METHOD_POST, "/hello/users/me", -1, NULL, NULL},
};

static void test_match(void **state)
{
    struct mk_routes t = build();

    (void) state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct mk_route_match m;
        const char *p = cases[i].path;
        bool found = mk_routes_match(&t, cases[i].method, p, strlen(p), &m);
        if (cases[i].route < 0) {
            if (found) {
                fail_msg("%s: taken by route %d", p, (int) (uintptr_t) m.route->arg);
            }
            assert_true(m.allow != 0);
            continue;
        }
        if (!found) {
            fail_msg("%s: no route", p);
        }
        if ((int) (uintptr_t) m.route->arg != cases[i].route) {
            fail_msg("%s: route %d, expected %d", p, (int) (uintptr_t) m.route->arg,
                     cases[i].route);
        }
        if (cases[i].param) {
            size_t n;
            const char *v = mk_route_param(&m, p, cases[i].param, &n);
            assert_non_null(v);
            assert_int_equal(n, strlen(cases[i].value));
            assert_memory_equal(v, cases[i].value, n);
        }
    }
    /* The Allow of a path hello maps for other methods. */
    struct mk_route_match m;
    assert_false(mk_routes_match(&t, MK_METHOD_PUT, "/hello/users/42", 15, &m));
    assert_int_equal(m.allow & (MK_ROUTE_GET | MK_ROUTE_DELETE), MK_ROUTE_GET | MK_ROUTE_DELETE);
    mk_routes_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_join),
        cmocka_unit_test(test_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
