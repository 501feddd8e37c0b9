/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_route.c: unit tests of server/http/route.c (route patterns, the
 * precedence order of a table, matching paths and methods, parameters,
 * the Allow value).
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

#include <monkey/mk_common.h>

#include "server/http/http.h"
#include "server/http/path.h"
#include "server/http/route.h"

/* Handlers are told apart by their arg: the index of the route in `table`. */
static int handler(struct mk_request *r, void *arg)
{
    (void) r;
    (void) arg;
    return MK_OK;
}

static const struct {
    uint32_t methods;
    const char *pattern;
} table[] = {
    /* 0 */ {MK_ROUTE_GET, "/status"},
    /* 1 */ {MK_ROUTE_GET, "/users/:id"},
    /* 2 */ {MK_ROUTE_DELETE, "/users/:uid"},
    /* 3 */ {MK_ROUTE_GET, "/users/:id/posts/:post"},
    /* 4 */ {MK_ROUTE_GET, "/users/me"},
    /* 5 */ {MK_ROUTE_GET | MK_ROUTE_POST, "/files/*"},
    /* 6 */ {MK_ROUTE_GET, "/files/deep/*"},
    /* 7 */ {MK_ROUTE_PUT, "/files/deep/:name"},
    /* 8 */ {MK_ROUTE_POST | MK_ROUTE_PUT, "/write"},
    /* 9 */ {MK_ROUTE_GET, "/:a/:b/posts"},
    /* 10 */ {MK_ROUTE_ANY, "/any"},
    /* 11 */ {MK_ROUTE_GET, "/"},
};

static struct mk_routes build(void)
{
    struct mk_routes t = {0};
    char err[256];

    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        struct mk_route rt;
        assert_int_equal(mk_route_parse(&rt, table[i].pattern, err, sizeof(err)), MK_OK);
        rt.methods = table[i].methods;
        rt.handler = handler;
        rt.arg = (void *) (uintptr_t) i;
        assert_int_equal(mk_routes_add(&t, &rt), MK_OK);
    }
    assert_int_equal(mk_routes_finish(&t, err, sizeof(err)), MK_OK);
    return t;
}

struct match_case {
    unsigned method;
    const char *path;
    int route;          /* index in table, -1: none */
    uint32_t allow;     /* m.allow */
    const char *params; /* "name=value;..." expected, or NULL */
};

static const struct match_case cases[] = {
    /* exact */
    {MK_METHOD_GET, "/status", 0, MK_ROUTE_GET, NULL},
    {MK_METHOD_GET, "/status/", -1, 0, NULL},
    {MK_METHOD_GET, "/statu", -1, 0, NULL},
    {MK_METHOD_GET, "/", 11, MK_ROUTE_GET, NULL},
    /* exact over parameters */
    {MK_METHOD_GET, "/users/me", 4, MK_ROUTE_GET | MK_ROUTE_DELETE, NULL},
    /* parameters; the method set decides between patterns of one shape */
    {MK_METHOD_GET, "/users/42", 1, MK_ROUTE_GET | MK_ROUTE_DELETE, "id=42"},
    {MK_METHOD_DELETE, "/users/42", 2, MK_ROUTE_GET | MK_ROUTE_DELETE, "uid=42"},
    {MK_METHOD_POST, "/users/42", -1, MK_ROUTE_GET | MK_ROUTE_DELETE, NULL},
    {MK_METHOD_DELETE, "/users/me", 2, MK_ROUTE_GET | MK_ROUTE_DELETE, "uid=me"},
    {MK_METHOD_GET, "/users/", -1, 0, NULL},
    {MK_METHOD_GET, "/users/42/posts/7", 3, MK_ROUTE_GET, "id=42;post=7"},
    {MK_METHOD_GET, "/users/42/posts/", -1, 0, NULL},
    {MK_METHOD_GET, "/users/42/posts/7/x", -1, 0, NULL},
    /* longer over shorter: "/users/:id/posts/:post" has more literal bytes than "/:a/:b/posts"
       and neither matches the other's paths; "/x/y/posts" only the latter */
    {MK_METHOD_GET, "/x/y/posts", 9, MK_ROUTE_GET, "a=x;b=y"},
    /* parameters over prefixes, longer prefixes first */
    {MK_METHOD_PUT, "/files/deep/a", 7, MK_ROUTE_GET | MK_ROUTE_POST | MK_ROUTE_PUT, "name=a"},
    {MK_METHOD_GET, "/files/deep/a", 6, MK_ROUTE_GET | MK_ROUTE_POST | MK_ROUTE_PUT, NULL},
    {MK_METHOD_POST, "/files/deep/a", 5, MK_ROUTE_GET | MK_ROUTE_POST | MK_ROUTE_PUT, NULL},
    {MK_METHOD_GET, "/files/deep/", 6, MK_ROUTE_GET | MK_ROUTE_POST, NULL},
    {MK_METHOD_GET, "/files/x/y/z", 5, MK_ROUTE_GET | MK_ROUTE_POST, NULL},
    {MK_METHOD_GET, "/files/", 5, MK_ROUTE_GET | MK_ROUTE_POST, NULL},
    {MK_METHOD_GET, "/files", -1, 0, NULL},
    {MK_METHOD_GET, "/filesx", -1, 0, NULL},
    /* method filters; HEAD rides on GET */
    {MK_METHOD_HEAD, "/status", 0, MK_ROUTE_GET, NULL},
    {MK_METHOD_HEAD, "/write", -1, MK_ROUTE_POST | MK_ROUTE_PUT, NULL},
    {MK_METHOD_GET, "/write", -1, MK_ROUTE_POST | MK_ROUTE_PUT, NULL},
    {MK_METHOD_PUT, "/write", 8, MK_ROUTE_POST | MK_ROUTE_PUT, NULL},
    {MK_METHOD_OPTIONS, "/write", -1, MK_ROUTE_POST | MK_ROUTE_PUT, NULL},
    {MK_METHOD_UNKNOWN, "/write", -1, MK_ROUTE_POST | MK_ROUTE_PUT, NULL},
    {MK_METHOD_UNKNOWN, "/any", 10, MK_ROUTE_ANY, NULL},
    {MK_METHOD_PATCH, "/any", 10, MK_ROUTE_ANY, NULL},
    /* no route for the path */
    {MK_METHOD_GET, "/index.html", -1, 0, NULL},
};

/* Check m's parameters against "name=value;...". */
static void check_params(const struct mk_route_match *m, const char *path, const char *want)
{
    char buf[128];
    size_t n = 0;

    if (!want) {
        assert_int_equal(m->n_params, 0);
        return;
    }
    snprintf(buf, sizeof(buf), "%s", want);
    for (char *save = NULL, *kv = strtok_r(buf, ";", &save); kv; kv = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(kv, '=');
        size_t len = 99;
        *eq = '\0';
        const char *v = mk_route_param(m, path, kv, &len);
        assert_non_null(v);
        assert_int_equal(len, strlen(eq + 1));
        assert_memory_equal(v, eq + 1, len);
        n++;
    }
    assert_int_equal(m->n_params, n);
    assert_null(mk_route_param(m, path, "missing", NULL));
}

static void test_match_table(void **state)
{
    struct mk_routes t = build();

    (void) state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct match_case *c = &cases[i];
        struct mk_route_match m;
        memset(&m, 0xa5, sizeof(m)); /* the matcher sets what it reports */
        bool hit = mk_routes_match(&t, c->method, c->path, strlen(c->path), &m);
        print_message("case %zu: %s\n", i, c->path);
        assert_int_equal(hit, c->route >= 0);
        assert_int_equal(m.allow, c->allow);
        if (c->route < 0) {
            assert_null(m.route);
            continue;
        }
        assert_int_equal((uintptr_t) m.route->arg, (uintptr_t) c->route);
        check_params(&m, c->path, c->params);
    }
    mk_routes_free(&t);
}

/* The matcher sees the decoded, normalised path: parameters come out decoded. */
static void test_percent_decoded_path(void **state)
{
    struct mk_routes t = build();
    static const char raw[] = "/users/caf%C3%A9/posts/a%20b%2Fc";
    char path[sizeof(raw)];
    struct mk_route_match m;
    size_t len;

    (void) state;
    ssize_t n = mk_path_normalize(raw, sizeof(raw) - 1, path);
    assert_true(n > 0);
    /* "%2F" decodes to a separator: the path has one more segment, no route takes it. */
    assert_false(mk_routes_match(&t, MK_METHOD_GET, path, (size_t) n, &m));

    static const char raw2[] = "/users/caf%C3%A9/posts/a%20b";
    n = mk_path_normalize(raw2, sizeof(raw2) - 1, path);
    assert_true(mk_routes_match(&t, MK_METHOD_GET, path, (size_t) n, &m));
    const char *v = mk_route_param(&m, path, "id", &len);
    assert_int_equal(len, 5);
    assert_memory_equal(v, "caf\xc3\xa9", 5);
    v = mk_route_param(&m, path, "post", &len);
    assert_int_equal(len, 3);
    assert_memory_equal(v, "a b", 3);
    mk_routes_free(&t);
}

static void test_bad_patterns(void **state)
{
    static const struct {
        const char *pattern;
        const char *reason;
    } bad[] = {
        {"", "does not start with '/'"},
        {"status", "does not start with '/'"},
        {"/a/:", "an empty parameter name"},
        {"/a/:/b", "an empty parameter name"},
        {"/a/:id/:id", "a repeated parameter name"},
        {"/a/:i-d", "an invalid parameter name"},
        {"/a*", "'*' only as its last segment"},
        {"/a/*/b", "'*' only as its last segment"},
        {"/:a/:b/:c/:d/:e/:f/:g/:h/:i", "more than 8 parameters"},
    };
    char err[256];
    struct mk_route rt;

    (void) state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(mk_route_parse(&rt, bad[i].pattern, err, sizeof(err)), MK_ERR);
        print_message("%s: %s\n", bad[i].pattern, err);
        assert_non_null(strstr(err, bad[i].reason));
    }
    assert_int_equal(mk_route_parse(&rt, "/a/:id/*", err, sizeof(err)), MK_OK);
    assert_int_equal(rt.kind, MK_ROUTE_PREFIX);
    assert_int_equal(rt.n_params, 1);
    free(rt.pattern);
}

static void test_prefix_with_parameter(void **state)
{
    struct mk_routes t = {0};
    struct mk_route rt;
    struct mk_route_match m;
    char err[256];
    size_t len;

    (void) state;
    assert_int_equal(mk_route_parse(&rt, "/u/:id/*", err, sizeof(err)), MK_OK);
    rt.methods = MK_ROUTE_GET;
    mk_routes_add(&t, &rt);
    assert_int_equal(mk_routes_finish(&t, err, sizeof(err)), MK_OK);
    assert_true(mk_routes_match(&t, MK_METHOD_GET, "/u/7/a/b", 8, &m));
    assert_memory_equal(mk_route_param(&m, "/u/7/a/b", "id", &len), "7", 1);
    assert_int_equal(len, 1);
    assert_true(mk_routes_match(&t, MK_METHOD_GET, "/u/7/", 5, &m));
    assert_false(mk_routes_match(&t, MK_METHOD_GET, "/u/7", 4, &m));
    assert_false(mk_routes_match(&t, MK_METHOD_GET, "/u//", 4, &m));
    mk_routes_free(&t);
}

static void test_conflicts(void **state)
{
    struct mk_routes t = {0};
    struct mk_route rt;
    char err[256];

    (void) state;
    /* Same shape, different names, a common method: refused. */
    assert_int_equal(mk_route_parse(&rt, "/u/:id", err, sizeof(err)), MK_OK);
    rt.methods = MK_ROUTE_GET | MK_ROUTE_PUT;
    mk_routes_add(&t, &rt);
    assert_int_equal(mk_route_parse(&rt, "/u/:name", err, sizeof(err)), MK_OK);
    rt.methods = MK_ROUTE_PUT;
    mk_routes_add(&t, &rt);
    assert_int_equal(mk_routes_finish(&t, err, sizeof(err)), MK_ERR);
    assert_non_null(strstr(err, "routes '/u/:id' (plugin ?) and '/u/:name' (plugin ?)"));
    mk_routes_free(&t);
    /* Disjoint methods, or another shape: accepted. */
    assert_int_equal(mk_route_parse(&rt, "/u/:id", err, sizeof(err)), MK_OK);
    rt.methods = MK_ROUTE_GET;
    mk_routes_add(&t, &rt);
    assert_int_equal(mk_route_parse(&rt, "/u/:name", err, sizeof(err)), MK_OK);
    rt.methods = MK_ROUTE_DELETE;
    mk_routes_add(&t, &rt);
    assert_int_equal(mk_route_parse(&rt, "/u/:id/*", err, sizeof(err)), MK_OK);
    rt.methods = MK_ROUTE_GET;
    mk_routes_add(&t, &rt);
    assert_int_equal(mk_routes_finish(&t, err, sizeof(err)), MK_OK);
    mk_routes_free(&t);
}

static void test_allow_format(void **state)
{
    char buf[96];

    (void) state;
    assert_int_equal(mk_route_allow_format(MK_ROUTE_GET, buf, sizeof(buf)), 18);
    assert_string_equal(buf, "GET, HEAD, OPTIONS");
    mk_route_allow_format(MK_ROUTE_PUT | MK_ROUTE_POST, buf, sizeof(buf));
    assert_string_equal(buf, "POST, PUT, OPTIONS");
    mk_route_allow_format(MK_ROUTE_OPTIONS | MK_ROUTE_DELETE, buf, sizeof(buf));
    assert_string_equal(buf, "DELETE, OPTIONS");
    mk_route_allow_format(MK_ROUTE_ANY, buf, sizeof(buf));
    assert_string_equal(buf, "GET, HEAD, POST, PUT, DELETE, PATCH, TRACE, OPTIONS");
}

static void test_empty_table(void **state)
{
    struct mk_routes t = {0};
    struct mk_route_match m;
    char err[8];

    (void) state;
    assert_int_equal(mk_routes_finish(&t, err, sizeof(err)), MK_OK);
    assert_false(mk_routes_match(&t, MK_METHOD_GET, "/", 1, &m));
    assert_int_equal(m.allow, 0);
    mk_routes_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match_table),  cmocka_unit_test(test_percent_decoded_path),
        cmocka_unit_test(test_bad_patterns), cmocka_unit_test(test_prefix_with_parameter),
        cmocka_unit_test(test_conflicts),    cmocka_unit_test(test_allow_format),
        cmocka_unit_test(test_empty_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
