/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_h2_upgrade.c: unit tests of server/proto/h2_upgrade.c: which HTTP/1.1
 * heads ask for `Upgrade: h2c` (RFC 7540 section 3.2) and the decoding of
 * their HTTP2-Settings. Built without HTTP/2, there is nothing to test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/proto/h2.h"
#include "server/http/http.h"

#ifdef MK_HAVE_H2

#define UPGRADE "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
/* SETTINGS_MAX_CONCURRENT_STREAMS 100, SETTINGS_INITIAL_WINDOW_SIZE 65535 */
#define SETTINGS "HTTP2-Settings: AAMAAABkAAQAAP__\r\n"

/* Parse `text` (a whole head) and ask mk_h2_upgrade_wanted. */
static bool wanted(const char *text, uint8_t *settings, size_t *len)
{
    struct mk_http_header headers[32];
    struct mk_http_head head;
    uint8_t scratch[MK_H2_UPGRADE_SETTINGS_MAX];
    size_t scratch_len = 0;

    memset(&head, 0, sizeof(head));
    assert_true(mk_http_parse(&head, text, strlen(text), headers, 32) >= 0);
    return mk_h2_upgrade_wanted(&head, settings ? settings : scratch, MK_H2_UPGRADE_SETTINGS_MAX,
                                len ? len : &scratch_len);
}

static void test_upgrade_request_and_its_settings(void **state)
{
    static const uint8_t expect[] = {0, 3, 0, 0, 0, 100, 0, 4, 0, 0, 0xff, 0xff};
    uint8_t settings[MK_H2_UPGRADE_SETTINGS_MAX];
    size_t len = 0;
    (void) state;

    assert_true(wanted("GET / HTTP/1.1\r\nHost: a\r\n" UPGRADE SETTINGS "\r\n", settings, &len));
    assert_int_equal(len, sizeof(expect));
    assert_memory_equal(settings, expect, sizeof(expect));
    /* tokens in any case and order, among others; padding allowed */
    assert_true(wanted("HEAD /x HTTP/1.1\r\nHost: a\r\nconnection: keep-alive , http2-settings,"
                       "UPGRADE\r\nUpgrade: websocket, H2C\r\nhttp2-settings: AAMAAABk\r\n\r\n",
                       settings, &len));
    assert_int_equal(len, 6);
    /* an empty payload is an empty SETTINGS frame */
    assert_true(
        wanted("GET / HTTP/1.1\r\nHost: a\r\n" UPGRADE "HTTP2-Settings: \r\n\r\n", settings, &len));
    assert_int_equal(len, 0);
    /* Content-Length: 0 is no body */
    assert_true(wanted("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n" UPGRADE SETTINGS "\r\n",
                       NULL, NULL));
}

static void test_not_an_upgrade(void **state)
{
    (void) state;
    /* no Upgrade, or to another protocol */
    assert_false(wanted("GET / HTTP/1.1\r\nHost: a\r\n\r\n", NULL, NULL));
    assert_false(wanted("GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                        "Upgrade: h2\r\n" SETTINGS "\r\n",
                        NULL, NULL));
    /* Connection must name both Upgrade and HTTP2-Settings */
    assert_false(wanted(
        "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n" SETTINGS "\r\n",
        NULL, NULL));
    assert_false(
        wanted("GET / HTTP/1.1\r\nHost: a\r\nUpgrade: h2c\r\n" SETTINGS "\r\n", NULL, NULL));
    /* HTTP2-Settings: missing, twice, not base64url, not a multiple of 6 bytes */
    assert_false(wanted("GET / HTTP/1.1\r\nHost: a\r\n" UPGRADE "\r\n", NULL, NULL));
    assert_false(
        wanted("GET / HTTP/1.1\r\nHost: a\r\n" UPGRADE SETTINGS SETTINGS "\r\n", NULL, NULL));
    assert_false(wanted("GET / HTTP/1.1\r\nHost: a\r\n" UPGRADE "HTTP2-Settings: AAMA+ABk\r\n\r\n",
                        NULL, NULL));
    assert_false(wanted("GET / HTTP/1.1\r\nHost: a\r\n" UPGRADE "HTTP2-Settings: AAMAAA\r\n\r\n",
                        NULL, NULL));
    /* HTTP/1.0 has no Upgrade */
    assert_false(wanted("GET / HTTP/1.0\r\n" UPGRADE SETTINGS "\r\n", NULL, NULL));
}

static void test_request_with_a_body_stays_http1(void **state)
{
    (void) state;
    assert_false(wanted(
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n" UPGRADE SETTINGS "\r\n", NULL, NULL));
    assert_false(wanted(
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n" UPGRADE SETTINGS "\r\n",
        NULL, NULL));
}

static void test_settings_larger_than_the_buffer_are_refused(void **state)
{
    struct mk_http_header headers[8];
    struct mk_http_head head;
    uint8_t settings[6];
    size_t len = 0;
    const char *text = "GET / HTTP/1.1\r\nHost: a\r\n" UPGRADE SETTINGS "\r\n";
    (void) state;

    memset(&head, 0, sizeof(head));
    assert_true(mk_http_parse(&head, text, strlen(text), headers, 8) >= 0);
    assert_false(mk_h2_upgrade_wanted(&head, settings, sizeof(settings), &len));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_upgrade_request_and_its_settings),
        cmocka_unit_test(test_not_an_upgrade),
        cmocka_unit_test(test_request_with_a_body_stays_http1),
        cmocka_unit_test(test_settings_larger_than_the_buffer_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* built without HTTP/2 */

static void test_nothing_without_nghttp2(void **state)
{
    (void) state;
    assert_false(mk_h2_available());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nothing_without_nghttp2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
