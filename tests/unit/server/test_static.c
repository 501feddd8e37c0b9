/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_static.c: unit tests of server/static/static.c, the static file handler,
 * through a loopback connection (loopback.h): the request bytes go through
 * the HTTP/1 codec and the request stages exactly as from a socket, and the
 * tests check the response bytes.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "loopback.h"

struct fixture {
    char dir[PATH_MAX];
    struct mk_loopback lb;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    char err[1024] = "";

    assert_non_null(f);
    mk_loopback_dir(f->dir, NULL, NULL);
    if (mk_loopback_open(&f->lb, f->dir, err, sizeof(err)) != MK_OK) {
        fail_msg("mk_loopback_open: %s", err);
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    mk_loopback_close(&f->lb);
    mk_loopback_dir_free(f->dir);
    free(f);
    return 0;
}

/* The response to `request`; its body starts at *body (NULL: no head end). */
static char *run(struct fixture *f, const char *request, const char **body)
{
    size_t len;
    char *out = mk_loopback_run(&f->lb, request, &len);
    assert_non_null(out);
    assert_int_equal(strlen(out), len);
    char *end = strstr(out, "\r\n\r\n");
    *body = end ? end + 4 : NULL;
    return out;
}

/* The value of header `name` in response `out`, copied into buf ("" if absent). */
static const char *header(const char *out, const char *name, char *buf, size_t size)
{
    char key[64];
    snprintf(key, sizeof(key), "\r\n%s: ", name);
    const char *p = strstr(out, key);
    const char *end = p ? strstr(p + strlen(key), "\r\n") : NULL;
    buf[0] = '\0';
    if (p && end) {
        p += strlen(key);
        snprintf(buf, size, "%.*s", (int) (end - p), p);
    }
    return buf;
}

static void test_file_200(void **state)
{
    const char *body;
    char v[128];
    char *out = run(*state, "GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n", &body);

    assert_true(strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0);
    assert_string_equal(header(out, "Content-Length", v, sizeof(v)), "13");
    assert_string_equal(header(out, "Content-Type", v, sizeof(v)), "text/html; charset=utf-8");
    assert_non_null(body);
    assert_string_equal(body, "<p>hello</p>\n");
    free(out);
}

/* "/" is the index file. */
static void test_index_200(void **state)
{
    const char *body;
    char *out = run(*state, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", &body);

    assert_true(strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0);
    assert_string_equal(body, "<p>hello</p>\n");
    free(out);
}

static void test_missing_404(void **state)
{
    const char *body;
    char *out = run(*state, "GET /nothing.html HTTP/1.1\r\nHost: localhost\r\n\r\n", &body);

    assert_true(strncmp(out, "HTTP/1.1 404 ", 13) == 0);
    assert_null(strstr(out, "<p>hello</p>"));
    free(out);
}

/* The ETag of a 200 matches If-None-Match: 304 without a body. */
static void test_if_none_match_304(void **state)
{
    const char *body;
    char etag[128], req[512], v[64];
    char *out = run(*state, "GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n", &body);

    header(out, "ETag", etag, sizeof(etag));
    assert_true(strlen(etag) > 2);
    free(out);

    snprintf(req, sizeof(req),
             "GET /index.html HTTP/1.1\r\nHost: localhost\r\nIf-None-Match: %s\r\n\r\n", etag);
    out = run(*state, req, &body);
    assert_true(strncmp(out, "HTTP/1.1 304 Not Modified\r\n", 27) == 0);
    assert_string_equal(header(out, "ETag", v, sizeof(v)), etag);
    assert_non_null(body);
    assert_string_equal(body, "");
    free(out);

    /* Another tag: the whole file again. */
    out = run(*state,
              "GET /index.html HTTP/1.1\r\nHost: localhost\r\nIf-None-Match: \"other\"\r\n\r\n",
              &body);
    assert_true(strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0);
    assert_string_equal(body, "<p>hello</p>\n");
    free(out);
}

static void test_range_206(void **state)
{
    const char *body;
    char v[64];
    char *out = run(
        *state, "GET /index.html HTTP/1.1\r\nHost: localhost\r\nRange: bytes=3-7\r\n\r\n", &body);

    assert_true(strncmp(out, "HTTP/1.1 206 Partial Content\r\n", 30) == 0);
    assert_string_equal(header(out, "Content-Range", v, sizeof(v)), "bytes 3-7/13");
    assert_string_equal(header(out, "Content-Length", v, sizeof(v)), "5");
    assert_string_equal(body, "hello");
    free(out);

    out = run(*state, "GET /index.html HTTP/1.1\r\nHost: localhost\r\nRange: bytes=50-\r\n\r\n",
              &body);
    assert_true(strncmp(out, "HTTP/1.1 416 ", 13) == 0);
    assert_string_equal(header(out, "Content-Range", v, sizeof(v)), "bytes */13");
    free(out);
}

/*
 * The multipart body of `ranges` (n pairs, inclusive) of `data` (size
 * bytes, media type `type`) with `boundary`, as static_ranges.c frames it.
 */
static char *multipart(const char *data, size_t size, const char *type, const char *boundary,
                       const unsigned *ranges, unsigned n)
{
    size_t cap = 256 * n + size + 64, len = 0;
    char *out = malloc(cap);

    assert_non_null(out);
    for (unsigned i = 0; i < n; i++) {
        unsigned a = ranges[2 * i], b = ranges[2 * i + 1];
        len += (size_t) snprintf(
            out + len, cap - len,
            "%s--%s\r\nContent-Type: %s\r\nContent-Range: bytes %u-%u/%zu\r\n\r\n", i ? "\r\n" : "",
            boundary, type, a, b, size);
        memcpy(out + len, data + a, b - a + 1);
        len += b - a + 1;
    }
    snprintf(out + len, cap - len, "\r\n--%s--\r\n", boundary);
    return out;
}

/* Several ranges: 206 multipart/byteranges, its length exact, a small body
   in the head's buffer and a large one sent run by run. */
static void test_ranges_multipart(void **state)
{
    struct fixture *f = *state;
    static const unsigned small[] = {0, 2, 3, 7, 11, 12};
    static const unsigned large[] = {0, 9, 1000, 9999, 19990, 19999};
    char *data = malloc(20001), v[128], boundary[128];
    const char *body;
    char *out;

    assert_non_null(data);
    for (unsigned i = 0; i < 20000; i++) {
        data[i] = (char) ('a' + i % 26);
    }
    data[20000] = '\0';
    mk_loopback_file(f->dir, "htdocs/big.txt", data);

    for (int big = 0; big < 2; big++) {
        const char *req = big ? "GET /big.txt HTTP/1.1\r\nHost: localhost\r\n"
                                "Range: bytes=0-9,1000-9999,-10\r\n\r\n"
                              : "GET /index.html HTTP/1.1\r\nHost: localhost\r\n"
                                "Range: bytes=0-2,3-7,11-\r\n\r\n";
        out = run(f, req, &body);
        assert_non_null(body);
        char *head = strndup(out, (size_t) (body - out)); /* the part heads have fields too */
        assert_non_null(head);
        assert_true(strncmp(head, "HTTP/1.1 206 Partial Content\r\n", 30) == 0);
        assert_string_equal(header(head, "Content-Range", v, sizeof(v)), "");
        header(head, "Content-Type", v, sizeof(v));
        assert_true(strncmp(v, "multipart/byteranges; boundary=", 31) == 0);
        snprintf(boundary, sizeof(boundary), "%s", v + 31);
        assert_int_equal(strlen(boundary), 24);
        assert_int_equal(strspn(boundary, "0123456789abcdef"), 24);
        char *want =
            big ? multipart(data, 20000, "text/plain; charset=utf-8", boundary, large, 3)
                : multipart("<p>hello</p>\n", 13, "text/html; charset=utf-8", boundary, small, 3);
        char len[32];
        snprintf(len, sizeof(len), "%zu", strlen(want));
        assert_string_equal(header(head, "Content-Length", v, sizeof(v)), len);
        assert_string_equal(body, want);
        free(want);
        free(head);
        free(out);
    }
    free(data);
}

/* Two requests in one input: both answered on the same connection, in order. */
static void test_pipelined(void **state)
{
    const char *body;
    char *out = run(*state,
                    "HEAD /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n"
                    "GET /nothing HTTP/1.1\r\nHost: localhost\r\n\r\n",
                    &body);

    assert_true(strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0);
    assert_non_null(body);
    assert_true(strncmp(body, "HTTP/1.1 404 ", 13) == 0);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_file_200, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_200, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_404, setup, teardown),
        cmocka_unit_test_setup_teardown(test_if_none_match_304, setup, teardown),
        cmocka_unit_test_setup_teardown(test_range_206, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ranges_multipart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipelined, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
