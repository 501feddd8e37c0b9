/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_rules.c: unit tests of server/http/rules.c (templates, their
 * expansion, the path conditions, the first rule that takes a request) and
 * of server/config/conf_rules.c ([RULE] sections and their errors).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include <monkey/mk_common.h>

#include "core/config.h"
#include "server/config/conf.h"
#include "server/http/http.h"
#include "server/http/rules.h"

/* ---- templates and expansion ---------------------------------------------- */

struct expand_case {
    const char *tpl;
    const char *path;  /* normalised; the subject of the groups */
    const char *query; /* NULL: none */
    const char *host;
    const char *want; /* NULL: expansion fails */
};

static const struct expand_case expand_cases[] = {
    /* the query is kept unless the template writes one */
    {"/new", "/old", "a=1&b=2", "ex.com", "/new?a=1&b=2"},
    {"/new?", "/old", "a=1", "ex.com", "/new"}, /* a '?' at the end: no query at all */
    {"/new?$query", "/old", "a=1", "ex.com", "/new?a=1"},
    {"/new?x=1", "/old", "a=1", "ex.com", "/new?x=1"},
    {"/new?x=1&$query", "/old", "a=1", "ex.com", "/new?x=1&a=1"},
    {"/new#top", "/old", "a=1", "ex.com", "/new?a=1#top"},
    /* groups: $0 the path, $1 after the prefix (here the second half) */
    {"/articles$1", "/blog/x", NULL, "ex.com", "/articles/x"},
    {"/all$0", "/blog/x", NULL, "ex.com", "/all/blog/x"},
    /* variables */
    {"https://$host$request_uri", "/a", "q=1", "ex.com", "https://ex.com/a?q=1"},
    {"https://$host:$port$path", "/a b", NULL, "ex.com", "https://ex.com:8080/a%20b"},
    {"$scheme", "/a", NULL, "ex.com", NULL}, /* refused: not a path (see below) */
    {"/$$1", "/a", NULL, "ex.com", "/$1"},
    /* encoding: what a group holds can end neither the path nor start a query */
    {"/x/$1", "/blog?#", NULL, "ex.com", "/x/%3F%23"},
    {"/q?v=$1", "/blog&a=b", NULL, "ex.com", "/q?v=%26a%3Db"},
    /* open redirects: a group or the raw target never make "//host" */
    {"/$1", "/x//evil.example/p", NULL, "ex.com", "/evil.example/p"},
    {"$request_uri", "/a", NULL, "ex.com", NULL},
    {"/$request_uri", "//evil.example", NULL, "ex.com", "/evil.example"},
    {"/$1", "/x\\evil", NULL, "ex.com", "/%5Cevil"},
    /* a Host that is no host name */
    {"https://$host/", "/", NULL, "evil.example/x?", NULL},
    {"https://$host/", "/", NULL, "a@b", NULL},
};

static void test_expand(void **state)
{
    (void) state;
    for (size_t i = 0; i < sizeof(expand_cases) / sizeof(expand_cases[0]); i++) {
        const struct expand_case *c = &expand_cases[i];
        struct mk_rule_template t;
        char reason[256], out[256];
        size_t plen = strlen(c->path);
        /* $1 is the second half of the path, as a Prefix of half its length gives */
        size_t half = strncmp(c->path, "/blog", 5) == 0 ? 5
                      : strncmp(c->path, "/x", 2) == 0  ? 2
                                                        : 0;
        size_t groups[4] = {0, plen, half, plen};
        int rc = mk_rule_template_parse(&t, c->tpl, 2, NULL, NULL, reason, sizeof(reason));
        if (rc != MK_OK) {
            if (c->want) {
                fail_msg("%s: %s", c->tpl, reason);
            }
            continue;
        }
        struct mk_rule_vars v = {
            .scheme = {"https", 5},
            .host = {c->host, strlen(c->host)},
            .port = {"8080", 4},
            .path = {c->path, plen},
            .query = {c->query, c->query ? strlen(c->query) : 0},
            .uri = {c->path, plen},
            .subject = c->path,
            .groups = groups,
            .n_groups = 2,
        };
        ssize_t n = mk_rule_expand(&t, &v, out, sizeof(out));
        if (!c->want) {
            if (n >= 0) {
                fail_msg("%s: expected a failure, got '%s'", c->tpl, out);
            }
        }
        else if (n < 0 || strcmp(out, c->want) != 0) {
            fail_msg("%s with %s: expected '%s', got '%s'", c->tpl, c->path, c->want,
                     n < 0 ? "(failure)" : out);
        }
        mk_rule_template_free(&t);
    }
}

static void test_template_refused(void **state)
{
    static const char *const bad[] = {
        "new",                  /* not a path */
        "//evil.example/",      /* another host */
        "$request_uri",         /* may be anything */
        "https://$1/",          /* a group in the host */
        "https://ex.com$1",     /* a group right after the host: "@evil" */
        "https://user@ex.com/", /* userinfo */
        "ftp://ex.com/",        /* another scheme: not absolute, not a path */
        "/a/$2",                /* no such group */
        "/a/$nosuch",           /* no such variable or named group */
        "/a/$",                 /* a '$' alone */
        "/a\\b",                /* a backslash */
    };
    (void) state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct mk_rule_template t;
        char reason[256] = "";
        if (mk_rule_template_parse(&t, bad[i], 2, NULL, NULL, reason, sizeof(reason)) == MK_OK) {
            fail_msg("'%s' accepted", bad[i]);
        }
        assert_true(strlen(reason) > 0);
    }
}

static void test_expand_too_long(void **state)
{
    struct mk_rule_template t;
    char reason[256], out[16];
    size_t groups[4] = {0, 30, 0, 30};
    struct mk_rule_vars v = {.host = {"h", 1},
                             .path = {"/aaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 30},
                             .subject = "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                             .groups = groups,
                             .n_groups = 2};
    (void) state;
    assert_int_equal(mk_rule_template_parse(&t, "/x$1", 2, NULL, NULL, reason, sizeof(reason)),
                     MK_OK);
    assert_int_equal(mk_rule_expand(&t, &v, out, sizeof(out)), -1);
    mk_rule_template_free(&t);
}

/* ---- [RULE] sections and matching ------------------------------------------ */

static struct mk_site *load(const char *text, char *err, size_t errlen)
{
    struct mk_conf *conf = mk_conf_parse("sites/default", text, strlen(text), err, errlen);
    struct mk_site *vh;

    if (!conf) {
        return NULL;
    }
    vh = calloc(1, sizeof(*vh));
    if (!mk_conf_rules_load(vh, conf, err, errlen)) {
        mk_conf_rules_free(vh->rules);
        free(vh);
        vh = NULL;
    }
    mk_conf_free(conf);
    return vh;
}

/* The site of `text`, which must load: the test fails with the error otherwise. */
static struct mk_site *load_ok(const char *text)
{
    char err[512] = "";
    struct mk_site *vh = load(text, err, sizeof(err));

    if (!vh) {
        fail_msg("%s", err);
    }
    return vh;
}

static void site_free(struct mk_site *vh)
{
    mk_conf_rules_free(vh->rules);
    free(vh);
}

static struct mk_http_head head_of(enum mk_http_method m, const char *host)
{
    struct mk_http_head h;
    memset(&h, 0, sizeof(h));
    h.method = m;
    h.host = mk_str_make(host, strlen(host));
    return h;
}

/* The line of the rule that takes path (the [RULE] header's), 0: none. */
static int taken(const struct mk_site *vh, const struct mk_http_head *h, const char *path)
{
    size_t groups[2 * (MK_RULE_GROUPS_MAX + 1)];
    const struct mk_rule *r = mk_rules_find(vh->rules, h, path, strlen(path), groups);
    return r ? r->line : 0;
}

static void test_first_match_wins(void **state)
{
    struct mk_site *vh = load_ok("[RULE]\n" /* 1 */
                                 "    Path /a\n"
                                 "    Return 200 exact\n"
                                 "[RULE]\n" /* 4 */
                                 "    Prefix /a\n"
                                 "    Method POST\n"
                                 "    Return 200 post\n"
                                 "[RULE]\n" /* 8 */
                                 "    Prefix /a\n"
                                 "    Host www.ex.com *.ex.org\n"
                                 "    Return 200 host\n"
                                 "[RULE]\n" /* 12 */
                                 "    Prefix /a\n"
                                 "    Header X-Debug on\n"
                                 "    Return 200 field\n"
                                 "[RULE]\n" /* 16 */
                                 "    Prefix /a/\n"
                                 "    Return 200 prefix\n");
    (void) state;
    struct mk_http_head get = head_of(MK_METHOD_GET, "ex.com");
    struct mk_http_head post = head_of(MK_METHOD_POST, "ex.com");
    struct mk_http_head www = head_of(MK_METHOD_GET, "WWW.ex.com");
    struct mk_http_head org = head_of(MK_METHOD_GET, "api.ex.org");
    assert_int_equal(taken(vh, &get, "/a"), 1);  /* exact, first */
    assert_int_equal(taken(vh, &post, "/a"), 1); /* still the first */
    assert_int_equal(taken(vh, &post, "/a/b"), 4);
    assert_int_equal(taken(vh, &post, "/ab"), 0); /* whole segments */
    assert_int_equal(taken(vh, &www, "/a/b"), 8);
    assert_int_equal(taken(vh, &org, "/a/b"), 8);
    assert_int_equal(taken(vh, &get, "/a/b"), 16);
    assert_int_equal(taken(vh, &get, "/a/"), 16);
    assert_int_equal(taken(vh, &get, "/b"), 0);
    site_free(vh);
}

static void test_prefix_groups(void **state)
{
    struct mk_site *vh = load_ok("[RULE]\n    Prefix /blog\n    Redirect 301 /articles$1\n");
    size_t groups[4];
    (void) state;
    const struct mk_rule *r = vh->rules->v[0];
    assert_true(mk_rule_match_path(r, "/blog/2020/x", 12, groups));
    assert_int_equal(groups[2], 5);
    assert_int_equal(groups[3], 12);
    assert_true(mk_rule_match_path(r, "/blog", 5, groups));
    assert_false(mk_rule_match_path(r, "/blogs", 6, groups));
    site_free(vh);
}

#ifdef MK_HAVE_PCRE2
static void test_regex(void **state)
{
    struct mk_site *vh = load_ok("[RULE]\n"
                                 "    Regex ^/u/(?<user>[a-z]+)(/(\\d+))?$\n"
                                 "    Redirect 302 /users/$user/$3\n");
    size_t groups[2 * (MK_RULE_GROUPS_MAX + 1)];
    char out[128];
    (void) state;
    const struct mk_rule *r = vh->rules->v[0];
    assert_int_equal(r->n_groups, 4);
    assert_true(mk_rule_match_path(r, "/u/ann/42", 9, groups));
    struct mk_rule_vars v = {.path = {"/u/ann/42", 9},
                             .subject = "/u/ann/42",
                             .groups = groups,
                             .n_groups = r->n_groups};
    assert_int_equal(mk_rule_expand(&r->target, &v, out, sizeof(out)), 13);
    assert_string_equal(out, "/users/ann/42");
    /* an optional group that did not take part expands to nothing */
    assert_true(mk_rule_match_path(r, "/u/bob", 6, groups));
    v.path = mk_str_make("/u/bob", 6);
    v.subject = "/u/bob";
    assert_true(mk_rule_expand(&r->target, &v, out, sizeof(out)) > 0);
    assert_string_equal(out, "/users/bob/");
    assert_false(mk_rule_match_path(r, "/u/Bob", 6, groups));
    site_free(vh);
}
#endif

struct bad_rule {
    const char *text;
    int line;
    const char *words;
};

static const struct bad_rule bad_rules[] = {
    {"[RULE]\n    Path /a\n", 1, "needs one of Redirect, Return, ReturnFile, Rewrite"},
    {"[RULE]\n    Path /a\n    Return 410\n    Redirect 301 /b\n", 1, "only one"},
    {"[RULE]\n    Path /a\n    Prefix /b\n    Return 410\n", 1, "one of Path, Prefix"},
    {"[RULE]\n    Path a\n    Return 410\n", 2, "normalised path"},
    {"[RULE]\n    Prefix /a/../b\n    Return 410\n", 2, "normalised path"},
    {"[RULE]\n    Return 410\n    Method FETCH\n", 3, "not a method"},
    {"[RULE]\n    Redirect 300 /b\n", 2, "expected a status"},
    {"[RULE]\n    Redirect 301\n", 2, "expected a status"},
    {"[RULE]\n    Redirect 301 //evil.example/\n", 2, "single '/'"},
    {"[RULE]\n    Path /a\n    Redirect 301 /b/$2\n", 3, "$2"},
    {"[RULE]\n    Return 99\n", 2, "expected a status"},
    {"[RULE]\n    Return 204 text\n", 2, "no body"},
    {"[RULE]\n    Rewrite https://ex.com/\n", 2, "internal rewrite"},
    {"[RULE]\n    Header Bad:Name\n    Return 403\n", 2, "field name"},
    {"[RULE]\n    Return 410\n    Nosuch 1\n", 3, "unknown key"},
    {"[RULE]\n    ResponseHeader put X-A 1\n", 2, "set|add|remove"},
    {"[RULE]\n    ResponseHeader set X-A\n", 2, "a name and a value"},
    {"[RULE]\n    ResponseHeader remove X-A 1\n", 2, "a name only"},
    {"[RULE]\n    ResponseHeader set Content-Length 1\n", 2, "written by the server"},
    {"[RULE]\n    ResponseHeader always add X:A 1\n", 2, "not a field name"},
    {"[RULE]\n    RequestHeader set Host evil.example\n", 2, "frames the request"},
    {"[RULE]\n    RequestHeader remove Cookie\n", 2, "read by the server itself"},
    {"[RULE]\n    RequestHeader always set X-A 1\n", 2, "set|add|remove"},
    {"[RULE]\n    Cors origins=* credentials\n", 2, "origins=* with credentials"},
    {"[RULE]\n    Cors credentials\n", 2, "expected origins="},
    {"[RULE]\n    Cors origins=ftp://a.example\n", 2, "not an origin"},
    {"[RULE]\n    Cors origins=* methods=GET,FETCH\n", 2, "'methods=GET,FETCH'"},
    {"[RULE]\n    Cors origins=* max-age=86401\n", 2, "'max-age=86401'"},
    {"[RULE]\n    Cors origins=* expose=\n", 2, "'expose='"},
    {"[RULE]\n    Method GET\n    Cors origins=*\n", 2, "must take OPTIONS"},
    {"[RULE]\n    Prefix /a\n    CacheControl max-age=x\n", 3, "Cache-Control value"},
    {"[RULE]\n    Prefix /a\n    IndexFiles a/b.html\n", 3, "IndexFiles"},
    {"[RULE]\n    Query a=b\n    Return 410\n", 2, "parameter name"},
    {"[RULE]\n    Query x&y 1\n    Return 410\n", 2, "parameter name"},
    {"[RULE]\n    Prefix /up\n    MaxRequestBody 1Q\n", 3, "MaxRequestBody"},
    {"[RULE]\n    Prefix /up\n    MaxRequestBody -1\n", 3, "MaxRequestBody"},
    {"[RULE]\n    Prefix /a\n    Allow 10.0.0.0/8\n    Deny everyone\n", 4, "'everyone' is not"},
    {"[RULE]\n    Prefix /a\n    Allow 10.0.0.1/8\n", 3, "bits set beyond"},
    {"[RULE]\n    Prefix /a\n    Deny 10.0.0.0/33\n", 3, "out of range"},
    {"[RULE]\n    Prefix /a\n    Deny ::1/129\n", 3, "out of range"},
    {"[RULE]\n    Prefix /a\n    DirectoryListing maybe\n", 3, "DirectoryListing"},
    {"[RULE]\n    Scheme ftp\n    Return 410\n", 2, "expected http or https"},
    {"[RULE]\n    Prefix /a\n    Timeout 0\n", 3, "Timeout"},
    {"[RULE]\n    Prefix /a\n    SendTimeout 2h\n", 3, "SendTimeout"},
    {"[RULE]\n    ReturnFile 503\n", 2, "expected a status"},
    {"[RULE]\n    ReturnFile 204 /etc/hostname\n", 2, "expected a status"},
    {"[RULE]\n    ReturnFile 503 /nonexistent/page.html\n", 2, "No such file"},
    {"[RULE]\n    ReturnFile 503 /\n", 2, "not a regular file"},
    {"[RULE]\n    Return 410\n    ReturnFile 503 /etc/hostname\n", 1, "only one"},
#ifdef MK_HAVE_PCRE2
    {"[RULE]\n    QueryRegex (x\n    Return 410\n", 2, "QueryRegex (x"},
    {"[RULE]\n    Regex ^/(a\n    Return 410\n", 2, "Regex"},
    {"[RULE]\n    Regex ^/(?<n>a)$\n    Redirect 301 /$m\n", 3, "$m"},
#else
    {"[RULE]\n    Regex ^/a$\n    Return 410\n", 2, "built without PCRE2"},
    {"[RULE]\n    QueryRegex ^a$\n    Return 410\n", 2, "built without PCRE2"},
#endif
};

static void test_bad_rules(void **state)
{
    (void) state;
    for (size_t i = 0; i < sizeof(bad_rules) / sizeof(bad_rules[0]); i++) {
        char err[512] = "", where[64];
        struct mk_site *vh = load(bad_rules[i].text, err, sizeof(err));
        if (vh) {
            site_free(vh);
            fail_msg("accepted: %s", bad_rules[i].text);
        }
        snprintf(where, sizeof(where), "sites/default:%d: ", bad_rules[i].line);
        if (strncmp(err, where, strlen(where)) != 0 || !strstr(err, bad_rules[i].words)) {
            fail_msg("%s: expected '%s' ... '%s', got '%s'", bad_rules[i].text, where,
                     bad_rules[i].words, err);
        }
    }
}

static void test_response_header_lines(void **state)
{
    struct mk_site *vh =
        load_ok("[RULE]\n"
                "    Prefix /\n"
                "    ResponseHeader set X-Frame-Options DENY\n"
                "    ResponseHeader always add Strict-Transport-Security max-age=1; "
                "includeSubDomains\n"
                "    ResponseHeader remove X-Powered-By\n");
    (void) state;
    const struct mk_rule *r = vh->rules->v[0];
    assert_int_equal(r->action, MK_RULE_PASS);
    assert_int_equal(r->n_headers, 3);
    assert_int_equal(r->headers[0].op, MK_RH_SET);
    assert_false(r->headers[0].always);
    assert_string_equal(r->headers[0].value, "DENY");
    assert_int_equal(r->headers[1].op, MK_RH_ADD);
    assert_true(r->headers[1].always);
    assert_string_equal(r->headers[1].value, "max-age=1; includeSubDomains");
    assert_int_equal(r->headers[2].op, MK_RH_REMOVE);
    assert_null(r->headers[2].value);
    site_free(vh);
}

static void test_request_header_lines(void **state)
{
    struct mk_site *vh = load_ok("[RULE]\n"
                                 "    RequestHeader set X-Api-Key s3cret\n"
                                 "    RequestHeader remove X-Debug\n"
                                 "    RequestHeader add X-Seen rules\n");
    struct mk_http_header in[] = {
        {{"X-Debug", 7}, {"1", 1}},      {{"Range", 5}, {"bytes=0-1", 9}},
        {{"x-api-key", 9}, {"mine", 4}}, {{"Accept", 6}, {"*/*", 3}},
        {{"X-Debug", 7}, {"2", 1}},      {{"X-Seen", 6}, {"client", 6}},
    };
    struct mk_http_header out[sizeof(in) / sizeof(in[0]) + 3];
    struct mk_http_head h;
    (void) state;
    memset(&h, 0, sizeof(h));
    h.headers = in;
    h.n_headers = sizeof(in) / sizeof(in[0]);
    h.known[MK_HDR_RANGE] = 2; /* 1 + its index */
    mk_rule_request_fields(vh->rules->v[0], &h, out);
    assert_ptr_equal(h.headers, out);
    assert_int_equal(h.n_headers, 5);
    assert_int_equal(h.known[MK_HDR_RANGE], 1); /* X-Debug before it went */
    assert_string_equal(mk_http_header_get(&h, "Range")->p, "bytes=0-1");
    assert_int_equal(mk_http_header_get(&h, "X-Api-Key")->len, 6);
    assert_memory_equal(mk_http_header_get(&h, "X-Api-Key")->p, "s3cret", 6);
    assert_null(mk_http_header_get(&h, "X-Debug"));
    assert_memory_equal(h.headers[2].value.p, "client", 6); /* add keeps the client's */
    assert_memory_equal(h.headers[4].value.p, "rules", 5);
    site_free(vh);
}

static bool preflight(const struct mk_rule_cors *c, const char *method, const char *fields)
{
    struct mk_str m = {method, strlen(method)}, f = {fields, fields ? strlen(fields) : 0};
    return mk_rule_cors_preflight(c, &m, fields ? &f : NULL);
}

static bool origin_ok(const struct mk_rule_cors *c, const char *origin)
{
    struct mk_str o = {origin, strlen(origin)};
    return mk_rule_cors_origin(c, &o);
}

static void test_cors(void **state)
{
    struct mk_site *vh = load_ok("[RULE]\n"
                                 "    Prefix /api\n"
                                 "    Method GET OPTIONS PUT\n"
                                 "    Cors origins=https://A.example,http://b.example:8080,null "
                                 "methods=PUT,DELETE headers=Content-Type,X-Token expose=ETag "
                                 "credentials max-age=0\n"
                                 "[RULE]\n"
                                 "    Cors origins=* headers=*\n");
    (void) state;
    const struct mk_rule_cors *c = vh->rules->v[0]->cors, *any = vh->rules->v[1]->cors;
    assert_int_equal(vh->rules->v[0]->action, MK_RULE_PASS);
    assert_int_equal(c->n_origins, 3);
    assert_string_equal(c->origins[0], "https://a.example");
    assert_string_equal(c->methods_text, "PUT,DELETE");
    assert_string_equal(c->expose, "ETag");
    assert_true(c->credentials);
    assert_int_equal(c->max_age, 0);
    assert_true(origin_ok(c, "https://a.EXAMPLE"));
    assert_true(origin_ok(c, "null"));
    assert_false(origin_ok(c, "https://a.example:443"));
    assert_false(origin_ok(c, "http://b.example"));
    assert_false(origin_ok(c, ""));
    assert_true(origin_ok(any, "https://whoever"));
    /* methods: the listed and the safelisted */
    assert_true(preflight(c, "DELETE", NULL));
    assert_true(preflight(c, "GET", NULL));
    assert_true(preflight(c, "POST", NULL));
    assert_false(preflight(c, "PATCH", NULL));
    assert_false(preflight(c, "delete", NULL)); /* methods are case-sensitive */
    assert_false(preflight(c, "", NULL));
    /* fields: each asked for must be listed, any case, any blanks */
    assert_true(preflight(c, "PUT", "x-token"));
    assert_true(preflight(c, "PUT", " content-type ,X-TOKEN,"));
    assert_true(preflight(c, "PUT", ""));
    assert_false(preflight(c, "PUT", "x-token,x-other"));
    assert_false(preflight(c, "PUT", "x-tok"));
    assert_false(preflight(c, "PUT", "content-type,x-tokens"));
    assert_true(preflight(any, "GET", "x-anything, y"));
    assert_null(any->origins);
    assert_int_equal(any->max_age, -1);
    assert_null(any->methods_text);
    site_free(vh);
}

static void test_settings(void **state)
{
    struct mk_site *vh = load_ok("[RULE]\n"
                                 "    Prefix /assets\n"
                                 "    DirectoryListing Off\n"
                                 "    CacheControl max-age=600, immutable\n"
                                 "    IndexFiles a.html b.html\n");
    (void) state;
    const struct mk_rule *r = vh->rules->v[0];
    assert_int_equal(r->action, MK_RULE_PASS);
    assert_true(mk_rule_sets(r));
    assert_string_equal(r->cache_control, "max-age=600, immutable");
    assert_int_equal(r->cache_control_len, 22);
    assert_int_equal(r->cache_max_age, 600);
    assert_int_equal(r->n_index_files, 2);
    assert_string_equal(r->index_files[1], "b.html");
    assert_int_equal(r->listing, 0);
    site_free(vh);
}

static bool param(const char *query, const char *name, const char *value)
{
    struct mk_str q = {query, query ? strlen(query) : 0};
    return mk_rule_query_param(&q, name, strlen(name), value, value ? strlen(value) : 0);
}

static void test_query_param(void **state)
{
    (void) state;
    assert_true(param("a=1&b=2", "b", NULL));
    assert_true(param("a=1&b=2", "b", "2"));
    assert_false(param("a=1&b=2", "b", "1"));
    assert_false(param("a=1&bb=2", "b", NULL)); /* whole names */
    assert_false(param("ab=2", "b", NULL));
    assert_true(param("a&b", "b", NULL)); /* no '=': present, empty */
    assert_true(param("a&b", "b", ""));
    assert_true(param("b=", "b", ""));
    assert_false(param("b=", "b", "x"));
    assert_true(param("x=1&b=1&b=2", "b", "2"));       /* any of the repeated ones */
    assert_true(param("q=a+b%20c%2", "q", "a b c%2")); /* decoded; a lone '%' is itself */
    assert_true(param("%62=%26", "b", "&"));
    assert_false(param("q=abc", "q", "ab"));
    assert_false(param("q=ab", "q", "abc"));
    assert_false(param("", "b", NULL));
    assert_false(param(NULL, "b", NULL)); /* no query */
    assert_true(param("&&b&", "b", NULL));
}

static void test_query_conditions(void **state)
{
    struct mk_site *vh = load_ok("[RULE]\n" /* 1 */
                                 "    Query debug\n"
                                 "    Return 200 debug\n"
                                 "[RULE]\n" /* 4 */
                                 "    Prefix /s\n"
                                 "    Query sort price desc\n"
                                 "    Return 200 by price\n"
#ifdef MK_HAVE_PCRE2
                                 "[RULE]\n" /* 8 */
                                 "    QueryRegex (^|&)id=[0-9]+(&|$)\n"
                                 "    Return 200 numeric\n"
                                 "[RULE]\n" /* 11 */
                                 "    Path /empty\n"
                                 "    QueryRegex ^$\n"
                                 "    Return 200 none\n"
#endif
    );
    struct mk_http_head h = head_of(MK_METHOD_GET, "ex.com");
    (void) state;
    h.query = mk_str_make("a=1&debug", 9);
    assert_int_equal(taken(vh, &h, "/x"), 1);
    h.query = mk_str_make("sort=price+desc", 15);
    assert_int_equal(taken(vh, &h, "/s/1"), 4);
    assert_int_equal(taken(vh, &h, "/t"), 0); /* the path too */
    h.query = mk_str_make("sort=price", 10);
    assert_int_equal(taken(vh, &h, "/s/1"), 0);
#ifdef MK_HAVE_PCRE2
    h.query = mk_str_make("x=1&id=42", 9);
    assert_int_equal(taken(vh, &h, "/a"), 8);
    h.query = mk_str_make("id=4x2", 6);
    assert_int_equal(taken(vh, &h, "/a"), 0);
    h.query = mk_str_make(NULL, 0); /* no query: matched as empty */
    assert_int_equal(taken(vh, &h, "/empty"), 11);
    h.query = mk_str_make("a", 1);
    assert_int_equal(taken(vh, &h, "/empty"), 0);
#endif
    site_free(vh);
}

static bool allows(const struct mk_rule *r, const char *addr)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (strchr(addr, ':')) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &ss;
        in6->sin6_family = AF_INET6;
        assert_int_equal(inet_pton(AF_INET6, addr, &in6->sin6_addr), 1);
    }
    else {
        struct sockaddr_in *in = (struct sockaddr_in *) &ss;
        in->sin_family = AF_INET;
        assert_int_equal(inet_pton(AF_INET, addr, &in->sin_addr), 1);
    }
    return mk_rule_access_allows(r, (const struct sockaddr *) &ss);
}

static void test_access(void **state)
{
    struct mk_site *vh = load_ok("[RULE]\n"
                                 "    Prefix /admin\n"
                                 "    Deny 10.1.0.0/16\n"
                                 "    Allow 10.0.0.0/8 ::1 2001:db8::/32\n"
                                 "    Deny all\n"
                                 "    MaxRequestBody 1k\n"
                                 "[RULE]\n"
                                 "    Prefix /\n"
                                 "    Deny 192.0.2.1\n");
    (void) state;
    const struct mk_rule *r = vh->rules->v[0], *open = vh->rules->v[1];
    assert_int_equal(r->action, MK_RULE_PASS);
    assert_int_equal(r->n_access, 5);
    assert_int_equal(r->max_body, 1024);
    assert_true(vh->rules->max_body);
    assert_int_equal(open->max_body, -1);
    assert_int_equal(open->listing, -1);
    assert_true(allows(r, "10.2.3.4"));
    assert_false(allows(r, "10.1.3.4")); /* the first word that holds decides */
    assert_false(allows(r, "192.0.2.7"));
    assert_true(allows(r, "::1"));
    assert_true(allows(r, "::ffff:10.9.9.9")); /* IPv4-mapped is IPv4 */
    assert_true(allows(r, "2001:db8:1::5"));
    assert_false(allows(r, "2001:db9::5"));
    assert_false(allows(open, "192.0.2.1"));
    assert_true(allows(open, "192.0.2.2")); /* no word holds: allowed */
    site_free(vh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expand),
        cmocka_unit_test(test_template_refused),
        cmocka_unit_test(test_expand_too_long),
        cmocka_unit_test(test_first_match_wins),
        cmocka_unit_test(test_prefix_groups),
#ifdef MK_HAVE_PCRE2
        cmocka_unit_test(test_regex),
#endif
        cmocka_unit_test(test_bad_rules),
        cmocka_unit_test(test_request_header_lines),
        cmocka_unit_test(test_response_header_lines),
        cmocka_unit_test(test_cors),
        cmocka_unit_test(test_settings),
        cmocka_unit_test(test_query_param),
        cmocka_unit_test(test_query_conditions),
        cmocka_unit_test(test_access),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
