/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_request.c: unit tests of server/request/request.c, the stages of a request,
 * with the skeleton plugin loaded, through a loopback connection
 * (loopback.h): a plugin's route, its request hook answering first, a body
 * read for a content hook (MK_AGAIN), and the plugins' per-request context
 * slots (api->ctx_set/ctx_get), released when the request ends; and the
 * records of a response's fields (response.c), which HTTP/2 sends from.
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
    mk_loopback_dir(f->dir, "    Load skeleton\n", NULL);
    mk_loopback_file(f->dir, "plugins/skeleton.conf", "[SKELETON]\n    Message loopback says hi\n");
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
    char *end = strstr(out, "\r\n\r\n");
    *body = end ? end + 4 : NULL;
    return out;
}

static void test_plugin_route(void **state)
{
    const char *body;
    char *out = run(*state, "GET /skeleton HTTP/1.1\r\nHost: localhost\r\n\r\n", &body);

    assert_true(strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0);
    assert_non_null(strstr(out, "\r\nX-Skeleton-Worker: 0\r\n"));
    assert_non_null(strstr(out, "\r\nContent-Length: 17\r\n"));
    assert_string_equal(body, "loopback says hi\n");
    free(out);
}

/* A path the plugin does not serve falls through to the static files. */
static void test_plugin_declines(void **state)
{
    const char *body;
    char *out = run(*state, "GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n", &body);

    assert_true(strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0);
    assert_null(strstr(out, "X-Skeleton-Worker"));
    assert_string_equal(body, "<p>hello</p>\n");
    free(out);
}

/* The request hook answers before any content handler. */
static void test_request_hook_403(void **state)
{
    const char *body;
    char *out = run(
        *state, "GET /index.html HTTP/1.1\r\nHost: localhost\r\nX-Skeleton-Deny: 1\r\n\r\n", &body);

    assert_true(strncmp(out, "HTTP/1.1 403 ", 13) == 0);
    assert_null(strstr(out, "<p>hello</p>"));
    free(out);
}

/* The content hook asks for the body (MK_AGAIN) and gets it. */
static void test_body_echo(void **state)
{
    const char *body;
    char *out = run(*state,
                    "POST /skeleton/echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 11\r\n\r\n"
                    "hello world",
                    &body);

    assert_true(strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0);
    assert_string_equal(body, "hello world");
    free(out);
}

/*
 * The request hook stores a context that the content hook reads; it is
 * released at the end of every request that had one, the ones the static
 * handler answered included, and the next request starts with none.
 */
static void test_context_slots(void **state)
{
    const char *body;
    char *out = run(
        *state, "GET /skeleton HTTP/1.1\r\nHost: localhost\r\nX-Skeleton-Tag: abc\r\n\r\n", &body);

    assert_true(strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0);
    assert_non_null(strstr(out, "\r\nX-Skeleton-Tag: abc\r\n"));
    free(out);

    out = run(*state, "GET /index.html HTTP/1.1\r\nHost: localhost\r\nX-Skeleton-Tag: x\r\n\r\n",
              &body);
    assert_true(strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0);
    free(out);

    /* A request without the header on the same struct: no context left over. */
    out = run(*state, "GET /skeleton HTTP/1.1\r\nHost: localhost\r\n\r\n", &body);
    assert_null(strstr(out, "X-Skeleton-Tag"));
    free(out);

    out = run(*state, "GET /skeleton/stats HTTP/1.1\r\nHost: localhost\r\n\r\n", &body);
    assert_non_null(body);
    assert_string_equal(body, "requests 3 connections 4 batches 0 contexts 2\n");
    free(out);
}

/* The field of r's record i is "name: value" at its offset. */
static void check_field(const struct mk_request *r, unsigned i, const char *lower, const char *name,
                        const char *value)
{
    const struct mk_resp_field *f = &r->fields[i];
    const char *line = r->extra_headers + f->off;

    assert_true(i < r->n_fields);
    if (lower) {
        assert_string_equal(f->lower, lower);
    }
    else {
        assert_null(f->lower);
    }
    assert_int_equal(f->name_len, strlen(name));
    assert_memory_equal(line, name, f->name_len);
    assert_memory_equal(line + f->name_len, ": ", 2);
    assert_int_equal(f->value_len, strlen(value));
    assert_memory_equal(line + f->name_len + 2, value, f->value_len);
    assert_memory_equal(line + f->name_len + 2 + f->value_len, "\r\n", 2);
}

/*
 * Each field of a response has a record of its line: one added by name,
 * by the server's names, or copied with prepared lines and their records
 * (offsets moved to where the lines land). Forgetting the response
 * (mk_response_reset: an internal redirect) forgets the records too, or
 * HTTP/2 would send the first handler's fields from lines written over.
 */
static void test_response_fields(void **state)
{
    static const char lines[] = "ETag: \"1\"\r\nAccept-Ranges: bytes\r\n";
    static const struct mk_resp_field recs[] = {{"etag", 0, 4, 3}, {"accept-ranges", 11, 13, 5}};
    struct mk_pool pool;
    struct mk_request r;

    (void) state;
    memset(&r, 0, sizeof(r));
    r.fd = -1;
    mk_pool_init(&pool, 4);
    mk_arena_init(&r.arena, &pool);

    assert_int_equal(mk_response_add_header(&r, "X-One", 5, "a b", 3), MK_OK);
    assert_int_equal(mk_response_add_header(&r, "X-Bad", 5, "a\r\nb", 4), MK_ERR);
    assert_int_equal(mk_response_add_lines(&r, lines, sizeof(lines) - 1, recs, 2), MK_OK);
    assert_int_equal(mk_response_add_known(&r, MK_RESP_VARY, "Accept-Encoding", 15), MK_OK);
    for (int i = 0; i < 8; i++) { /* past the records' first capacity */
        assert_int_equal(mk_response_add_header(&r, "X-N", 3, "v", 1), MK_OK);
    }
    char big[301];
    memset(big, 'z', 300);
    big[300] = '\0';
    assert_int_equal(mk_response_add_header(&r, "X-Big", 5, big, 300), MK_OK); /* past 256 bytes */
    assert_int_equal(r.n_fields, 13);
    check_field(&r, 0, NULL, "X-One", "a b");
    check_field(&r, 1, "etag", "ETag", "\"1\"");
    check_field(&r, 2, "accept-ranges", "Accept-Ranges", "bytes");
    check_field(&r, 3, "vary", "Vary", "Accept-Encoding");
    check_field(&r, 11, NULL, "X-N", "v");
    check_field(&r, 12, NULL, "X-Big", big);
    assert_int_equal(r.extra_len, 12 + sizeof(lines) - 1 + 23 + 8 * 8 + 309);

    mk_response_reset(&r);
    assert_int_equal(r.n_fields, 0);
    assert_int_equal(mk_response_add_known(&r, MK_RESP_ALLOW, "GET", 3), MK_OK);
    assert_int_equal(r.n_fields, 1);
    check_field(&r, 0, "allow", "Allow", "GET");

    mk_arena_reset(&r.arena);
    mk_pool_destroy(&pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_plugin_route, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plugin_declines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_hook_403, setup, teardown),
        cmocka_unit_test_setup_teardown(test_body_echo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_context_slots, setup, teardown),
        cmocka_unit_test(test_response_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
