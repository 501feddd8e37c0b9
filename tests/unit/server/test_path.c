/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_path.c: unit tests of server/http/path.c (percent-decoding and dot-segment
 * removal of request paths, encoding them again, hidden names).
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

#include "server/http/path.h"

#define RAW(s) s, sizeof(s) - 1

/*
 * Normalise raw[0, len) in an output buffer of exactly len + 1 bytes (the
 * documented size) so the sanitizers see any overrun. Returns the result
 * (caller frees) or NULL on MK_ERR.
 */
static char *normalize(const char *raw, size_t len, ssize_t *ret)
{
    char *in = malloc(len ? len : 1);
    char *out = malloc(len + 1);

    assert_non_null(in);
    assert_non_null(out);
    memcpy(in, raw, len);
    *ret = mk_path_normalize(in, len, out);
    free(in);
    if (*ret < 0) {
        assert_int_equal(*ret, MK_ERR);
        free(out);
        return NULL;
    }
    assert_true((size_t) *ret <= len);
    assert_int_equal(strlen(out), (size_t) *ret); /* NUL terminated, no NUL inside */
    return out;
}

struct path_case {
    const char *raw;
    size_t len;
    const char *want; /* NULL: MK_ERR */
};

static const struct path_case cases[] = {
    /* plain paths */
    {RAW("/"), "/"},
    {RAW("/a"), "/a"},
    {RAW("/a/b/c.html"), "/a/b/c.html"},
    {RAW("/a/b/"), "/a/b/"}, /* the trailing slash is kept */
    {RAW("/a.b/c..d/...e"), "/a.b/c..d/...e"},
    {RAW("/..."), "/..."}, /* not a dot segment */
    {RAW("/.hidden"), "/.hidden"},
    {RAW("/..a/a.."), "/..a/a.."},
    /* repeated slashes */
    {RAW("//"), "/"},
    {RAW("//a"), "/a"},
    {RAW("/a//b"), "/a/b"},
    {RAW("/a///b//"), "/a/b/"},
    /* dot segments */
    {RAW("/."), "/"},
    {RAW("/./"), "/"},
    {RAW("/./a"), "/a"},
    {RAW("/a/."), "/a/"},
    {RAW("/a/./"), "/a/"},
    {RAW("/a/./b"), "/a/b"},
    {RAW("/a/.."), "/"},
    {RAW("/a/../"), "/"},
    {RAW("/a/../b"), "/b"},
    {RAW("/a/b/.."), "/a/"},
    {RAW("/a/b/../c"), "/a/c"},
    {RAW("/a/b/../../c"), "/c"},
    {RAW("/a/./b/./../c/."), "/a/c/"},
    {RAW("/a//..//b"), "/b"},
    {RAW("/a/b/c/../../../d"), "/d"},
    /* percent-decoding happens before the normalisation */
    {RAW("/%61"), "/a"},
    {RAW("/a%20b"), "/a b"},
    {RAW("/%41%42%43"), "/ABC"},
    {RAW("/%7e%7E"), "/~~"},
    {RAW("/a/%2e%2e"), "/"},
    {RAW("/a/%2E%2e/"), "/"},
    {RAW("/a/b/%2E%2e/c"), "/a/c"},
    {RAW("/a/.%2e/b"), "/b"},
    {RAW("/a/%2e./b"), "/b"},
    {RAW("/a/%2e/b"), "/a/b"},
    {RAW("/a%2fb"), "/a/b"}, /* an encoded slash is a slash */
    {RAW("/a%2Fb%2F"), "/a/b/"},
    {RAW("/a/b%2f..%2fc"), "/a/c"},
    {RAW("/%25"), "/%"},
    {RAW("/%252e%252e/x"), "/%2e%2e/x"}, /* decoded once only */
    {RAW("/%c3%a9"), "/\xc3\xa9"},
    /* rejected */
    {RAW(""), NULL},
    {RAW("a"), NULL},
    {RAW("a/b"), NULL},
    {RAW("./a"), NULL},
    {RAW("%61/b"), NULL},
    {RAW("/.."), NULL},
    {RAW("/../"), NULL},
    {RAW("/../a"), NULL},
    {RAW("/a/../.."), NULL},
    {RAW("/a/../../b"), NULL},
    {RAW("/%2e%2e"), NULL},
    {RAW("/%2E%2e/"), NULL},
    {RAW("/a%00"), NULL},
    {RAW("/a%00.html"), NULL},
    {RAW("/a\0b"), NULL},
    {RAW("/\0"), NULL},
    {RAW("/a\\b"), NULL},
    {RAW("/..\\a"), NULL},
    {RAW("/a%5cb"), NULL},
    {RAW("/a%5Cb"), NULL},
    {RAW("/%"), NULL},
    {RAW("/a%"), NULL},
    {RAW("/%4"), NULL},
    {RAW("/a%4"), NULL},
    {RAW("/%zz"), NULL},
    {RAW("/%4g"), NULL},
    {RAW("/%g4"), NULL},
    {RAW("/% 1"), NULL},
    {RAW("/%-1"), NULL},
    {RAW("/%%41"), NULL},
};

static void test_normalize_table(void **state)
{
    unsigned failures = 0;
    (void) state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct path_case *c = &cases[i];
        ssize_t n;
        char *out = normalize(c->raw, c->len, &n);
        if (!c->want && out) {
            print_error("'%.*s': expected MK_ERR, got '%s'\n", (int) c->len, c->raw, out);
            failures++;
        }
        else if (c->want && !out) {
            print_error("'%.*s': expected '%s', got MK_ERR\n", (int) c->len, c->raw, c->want);
            failures++;
        }
        else if (c->want && (strcmp(out, c->want) != 0 || (size_t) n != strlen(c->want))) {
            print_error("'%.*s': expected '%s', got '%s' (%zd)\n", (int) c->len, c->raw, c->want,
                        out, n);
            failures++;
        }
        free(out);
    }
    assert_int_equal(failures, 0);
}

/* The guarantees of path.h, checked on one result. */
static bool path_is_safe(const char *p)
{
    if (p[0] != '/') {
        return false;
    }
    if (strstr(p, "//") || strchr(p, '\\')) {
        return false;
    }
    if (strncmp(p, "/../", 4) == 0 || strcmp(p, "/..") == 0 || strstr(p, "/../") ||
        strstr(p, "/./")) {
        return false;
    }
    size_t n = strlen(p);
    if ((n >= 3 && strcmp(p + n - 3, "/..") == 0) || (n >= 2 && strcmp(p + n - 2, "/.") == 0)) {
        return false;
    }
    return true;
}

/* Traversal attempts: each must be refused or stay under "/". */
static const char *const traversals[] = {
    "/../etc/passwd",
    "/../../../../etc/passwd",
    "/a/../../etc/passwd",
    "/a/b/../../../etc/passwd",
    "/./../etc/passwd",
    "/.././etc/passwd",
    "//../etc/passwd",
    "/a//../../etc/passwd",
    "/%2e%2e/etc/passwd",
    "/%2E%2E/etc/passwd",
    "/.%2e/etc/passwd",
    "/%2e./etc/passwd",
    "/%2e%2e%2fetc%2fpasswd",
    "/..%2fetc%2fpasswd",
    "/a%2f..%2f..%2fetc%2fpasswd",
    "%2f..%2fetc%2fpasswd",
    "/a/%2e%2e/%2e%2e/etc",
    "/..%5c..%5cetc",
    "/..\\..\\etc",
    "/%252e%252e/etc/passwd",
    "/%c0%ae%c0%ae/etc/passwd",
    "/..%00/etc/passwd",
    "/a/..%00",
    "/....//etc/passwd",
    "/..;/etc/passwd",
    "/.../etc",
    "/a/b/c/../../../../",
    "/a/b/c/%2e%2e/%2e%2e/%2e%2e/%2e%2e/",
    "/a/./././../../",
    "/a/b/..//..//..//",
    "/./././.",
    "/a/.",
    "/a/..",
    "/%2e",
    "/%2e%2e",
    "/.%2E",
};

static void test_traversal_never_escapes(void **state)
{
    unsigned failures = 0;
    (void) state;

    for (size_t i = 0; i < sizeof(traversals) / sizeof(traversals[0]); i++) {
        ssize_t n;
        char *out = normalize(traversals[i], strlen(traversals[i]), &n);
        if (out && !path_is_safe(out)) {
            print_error("'%s' normalised to '%s'\n", traversals[i], out);
            failures++;
        }
        free(out);
    }
    assert_int_equal(failures, 0);
}

/* Those that reach above the root are refused, not clamped to "/". */
static void test_traversal_above_root_is_error(void **state)
{
    static const char *const above[] = {
        "/../etc/passwd",     "/a/../../etc/passwd", "/%2e%2e/etc/passwd",
        "/..%2fetc%2fpasswd", "//../etc/passwd",     "/a/b/c/%2e%2e/%2e%2e/%2e%2e/%2e%2e/",
    };
    (void) state;

    for (size_t i = 0; i < sizeof(above) / sizeof(above[0]); i++) {
        ssize_t n;
        char *out = normalize(above[i], strlen(above[i]), &n);
        if (out) {
            fail_msg("'%s' normalised to '%s' instead of MK_ERR", above[i], out);
        }
        assert_int_equal(n, MK_ERR);
    }
}

/*
 * Every path made of the pieces below (up to four of them) either fails or
 * satisfies the guarantees, and normalising the result again changes nothing.
 */
static void test_normalize_exhaustive_small(void **state)
{
    static const char *const pieces[] = {"/", "a", ".", "..", "%2e", "%2f", "//", "b/"};
    const size_t np = sizeof(pieces) / sizeof(pieces[0]);
    char raw[64];
    unsigned checked = 0;
    (void) state;

    for (size_t total = 1; total <= 4; total++) {
        size_t combos = 1;
        for (size_t k = 0; k < total; k++) {
            combos *= np;
        }
        for (size_t idx = 0; idx < combos; idx++) {
            size_t v = idx, len = 1;
            raw[0] = '/';
            for (size_t k = 0; k < total; k++) {
                size_t pl = strlen(pieces[v % np]);
                memcpy(raw + len, pieces[v % np], pl);
                len += pl;
                v /= np;
            }
            ssize_t n, n2;
            char *out = normalize(raw, len, &n);
            if (!out) {
                continue;
            }
            if (!path_is_safe(out)) {
                fail_msg("'%.*s' normalised to unsafe '%s'", (int) len, raw, out);
            }
            char *again = normalize(out, (size_t) n, &n2);
            assert_non_null(again);
            assert_string_equal(again, out);
            free(again);
            free(out);
            checked++;
        }
    }
    assert_true(checked > 1000);
}

/* ---- mk_path_encode ------------------------------------------------------ */

/* Encode raw[0, len) into a buffer of exactly 3 * len bytes; caller frees. */
static char *encode(const char *raw, size_t len)
{
    char *in = malloc(len ? len : 1);
    char *out = malloc(len ? 3 * len : 1);

    assert_non_null(in);
    assert_non_null(out);
    memcpy(in, raw, len);
    size_t n = mk_path_encode(in, len, out);
    free(in);
    assert_true(n <= 3 * len);
    char *res = malloc(n + 1);
    assert_non_null(res);
    memcpy(res, out, n);
    res[n] = '\0';
    free(out);
    return res;
}

static void test_encode_table(void **state)
{
    static const struct {
        const char *raw;
        size_t len;
        const char *want;
    } enc[] = {
        {RAW("/"), "/"},
        {RAW("/a/b.html"), "/a/b.html"},
        {RAW("/A-Z_a.z~0/9"), "/A-Z_a.z~0/9"},
        {RAW("/!$&'()*+,;=:@"), "/!$&'()*+,;=:@"},
        {RAW("/a b"), "/a%20b"},
        {RAW("/100%"), "/100%25"},
        {RAW("/q?x#y"), "/q%3Fx%23y"},
        {RAW("/\"<>\\^`{|}"), "/%22%3C%3E%5C%5E%60%7B%7C%7D"},
        {RAW("/caf\xc3\xa9"), "/caf%C3%A9"},
        {RAW("/\r\n\t\x7f"), "/%0D%0A%09%7F"},
        {RAW("/\xff"), "/%FF"},
        {RAW(""), ""},
    };
    unsigned failures = 0;
    (void) state;

    for (size_t i = 0; i < sizeof(enc) / sizeof(enc[0]); i++) {
        char *got = encode(enc[i].raw, enc[i].len);
        if (strcmp(got, enc[i].want) != 0) {
            print_error("encode '%.*s': expected '%s', got '%s'\n", (int) enc[i].len, enc[i].raw,
                        enc[i].want, got);
            failures++;
        }
        free(got);
    }
    assert_int_equal(failures, 0);
}

/*
 * A Location built from a normalised path is an absolute path on this host:
 * it starts with one '/', never "//" (another host) or a scheme, whatever
 * the request said, and decoding and normalising it gives the path back.
 */
static void test_encode_of_normalised_stays_on_host(void **state)
{
    static const char *const targets[] = {
        "//evil.example/..%2fdir", "//evil.example/%2e%2e/dir", "///evil.example",
        "/%2fevil.example",        "/%2F%2Fevil.example/x",     "/.//evil.example",
        "/a/..//evil.example",     "/http:%2f%2fevil.example",  "/%5c%5cevil.example",
        "/javascript:alert(1)",    "/%0d%0aSet-Cookie:x",
    };
    (void) state;

    for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
        ssize_t n, n2;
        char *norm = normalize(targets[i], strlen(targets[i]), &n);
        if (!norm) {
            continue; /* refused (400): nothing to redirect */
        }
        char *loc = encode(norm, (size_t) n);
        if (loc[0] != '/' || loc[1] == '/' || strchr(loc, '\r') || strchr(loc, '\n')) {
            fail_msg("'%s' gave the Location '%s'", targets[i], loc);
        }
        char *back = normalize(loc, strlen(loc), &n2);
        assert_non_null(back);
        assert_string_equal(back, norm);
        free(back);
        free(loc);
        free(norm);
    }
}

/* ---- mk_path_is_hidden --------------------------------------------------- */

static void test_is_hidden_table(void **state)
{
    static const struct {
        const char *path;
        bool hidden;
    } hid[] = {
        {"/", false},
        {"/a", false},
        {"/a/b.c/", false},
        {"/a.", false},
        {"/a/b..c", false},
        {"/.hidden", true},
        {"/.git/", true},
        {"/.git/config", true},
        {"/a/.htpasswd", true},
        {"/a/.b/c", true},
        {"/a/b/.", true}, /* not a normalised path, but hidden all the same */
        /* the top-level /.well-known/ is served, names inside it are not */
        {"/.well-known", false},
        {"/.well-known/", false},
        {"/.well-known/acme-challenge/tok", false},
        {"/.well-known/.x", true},
        {"/.well-known/a/.x/", true},
        {"/.well-knownx", true},
        {"/.well-known.txt", true},
        {"/.WELL-KNOWN/", true},
        {"/a/.well-known/", true},
    };
    unsigned failures = 0;
    (void) state;

    for (size_t i = 0; i < sizeof(hid) / sizeof(hid[0]); i++) {
        bool got = mk_path_is_hidden(hid[i].path, strlen(hid[i].path));
        if (got != hid[i].hidden) {
            print_error("'%s': hidden %d, expected %d\n", hid[i].path, got, hid[i].hidden);
            failures++;
        }
    }
    assert_int_equal(failures, 0);
    /* the length is honoured */
    assert_false(mk_path_is_hidden("/a/.b", 3));
    assert_true(mk_path_is_hidden("/a/.b", 4));
    assert_true(mk_path_is_hidden("/.well-known/x", 2));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalize_table),
        cmocka_unit_test(test_traversal_never_escapes),
        cmocka_unit_test(test_traversal_above_root_is_error),
        cmocka_unit_test(test_normalize_exhaustive_small),
        cmocka_unit_test(test_encode_table),
        cmocka_unit_test(test_encode_of_normalised_stays_on_host),
        cmocka_unit_test(test_is_hidden_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
