/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_h1.c: unit tests of server/proto/h1.c, the HTTP/1 codec behind the
 * protocol table: the keep-alive decision for heads as received, and the
 * table itself (every entry conn.c and request.c call is filled).
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

#include "server/proto/h1.h"

/* Parse a complete head (scan, then parse) into *h; headers in hdrs. */
static void parse(const char *req, struct mk_http_head *h, struct mk_http_header *hdrs,
                  unsigned cap)
{
    static const struct mk_http_limits lim = {
        .max_line = 8192, .max_head = 8192, .max_headers = 64};
    struct mk_http_scan scan;
    size_t len = strlen(req);

    memset(&scan, 0, sizeof(scan));
    assert_int_equal(mk_http_scan(&scan, req, len, &lim), (ssize_t) len);
    assert_int_equal(mk_http_parse(h, req, len, hdrs, cap), (ssize_t) len);
}

struct keepalive_case {
    const char *req;
    bool allowed;
    uint32_t max_requests;
    uint32_t served;
    bool keep;
};

static void test_keepalive_decision(void **state)
{
    static const struct keepalive_case cases[] = {
        {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", true, 0, 0, true},
        {"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", true, 0, 0, false},
        {"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n", true, 0, 0, false},
        {"GET / HTTP/1.0\r\n\r\n", true, 0, 0, false},
        {"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true, 0, 0, true},
        {"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true, 0, 0, true},
        /* KeepAlive Off, a stopping server or a connection marked to close */
        {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", false, 0, 0, false},
        /* MaxKeepAliveRequests 3: the third response is the last */
        {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", true, 3, 1, true},
        {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", true, 3, 2, false},
    };
    (void) state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct keepalive_case *k = &cases[i];
        struct mk_http_head h;
        struct mk_http_header hdrs[8];

        parse(k->req, &h, hdrs, 8);
        if (mk_h1_keepalive(&h, k->allowed, k->max_requests, k->served) != k->keep) {
            fail_msg("case %zu (%s): expected keep=%d", i, k->req, k->keep);
        }
    }
}

static void test_protocol_table_is_complete(void **state)
{
    const struct mk_proto *p = &mk_proto_h1;
    (void) state;

    assert_string_equal(p->name, "http/1.1");
    assert_non_null(p->on_input);
    assert_non_null(p->on_writable);
    assert_non_null(p->expire);
    assert_non_null(p->go_away);
    assert_non_null(p->release);
    assert_non_null(p->respond);
    assert_non_null(p->read_body);
    assert_non_null(p->park);
    assert_non_null(p->unpark);
    assert_non_null(p->proceed);
    assert_non_null(p->abort);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keepalive_decision),
        cmocka_unit_test(test_protocol_table_is_complete),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
