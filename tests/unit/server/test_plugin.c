/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_plugin.c: unit tests of server/plugin/plugin.c, the API table's functions
 * that need no running server: remote_addr() and its buffer contract,
 * set_status() and the statuses it refuses.
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/un.h>

#include <cmocka.h>

#include <monkey/mk_util.h>

#include "server/conn/conn.h"
#include "server/plugin/plugins.h"
#include "server/request/request.h"

/* api->remote_addr() of a client at `text` (family af) into len bytes, guarded on both sides. */
static void check_remote(int af, const char *text, size_t len, const char *want)
{
    struct mk_conn c;
    struct mk_request r;
    char buf[MK_ADDR_TEXT_LEN + 16];

    memset(&c, 0, sizeof(c));
    memset(&r, 0, sizeof(r));
    r.conn = &c;
    c.peer.sa.sa_family = (sa_family_t) af;
    if (af == AF_INET) {
        assert_int_equal(inet_pton(AF_INET, text, &c.peer.in.sin_addr), 1);
    }
    else if (af == AF_INET6) {
        assert_int_equal(inet_pton(AF_INET6, text, &c.peer.in6.sin6_addr), 1);
    }
    memset(buf, 'Z', sizeof(buf));
    const char *got = mk_plugin_api.remote_addr(&r, buf + 8, len);
    assert_ptr_equal(got, buf + 8);
    assert_string_equal(got, want);
    for (size_t i = 0; i < 8; i++) {
        assert_int_equal(buf[i], 'Z');
    }
    for (size_t i = 8 + len; i < sizeof(buf); i++) {
        assert_int_equal(buf[i], 'Z');
    }
}

static void test_remote_addr(void **state)
{
    (void) state;
    check_remote(AF_INET, "192.0.2.1", MK_ADDR_TEXT_LEN, "192.0.2.1");
    check_remote(AF_INET, "255.255.255.255", MK_ADDR_TEXT_LEN, "255.255.255.255");
    /* an IPv4 client of a dual-stack socket, in IPv4 form */
    check_remote(AF_INET6, "::ffff:192.0.2.33", MK_ADDR_TEXT_LEN, "192.0.2.33");
    check_remote(AF_INET6, "2001:db8::1", MK_ADDR_TEXT_LEN, "2001:db8::1");
    check_remote(AF_INET6, "::1", MK_ADDR_TEXT_LEN, "::1");
    check_remote(AF_INET6, "1:2:3:4:5:6:7:8", MK_ADDR_TEXT_LEN, "1:2:3:4:5:6:7:8");
    /* not IP: "-" */
    check_remote(AF_UNIX, NULL, MK_ADDR_TEXT_LEN, "-");
}

static void test_remote_addr_short_buffer(void **state)
{
    (void) state;
    /* what fits in a shorter buffer is copied whole, NUL included */
    check_remote(AF_INET, "192.0.2.1", 10, "192.0.2.1");
    check_remote(AF_INET6, "::ffff:192.0.2.33", 11, "192.0.2.33");
    check_remote(AF_INET6, "::1", 4, "::1");
    /* what does not fit is "-", never a cut address */
    check_remote(AF_INET, "192.0.2.1", 9, "-");
    check_remote(AF_INET6, "2001:db8::1", 11, "-");
    check_remote(AF_UNIX, NULL, 2, "-");
    check_remote(AF_INET, "192.0.2.1", 1, "");
}

/* set_status: a final status only; 101 only for a request taken over (api->takeover). */
static void test_set_status_final_only(void **state)
{
    (void) state;
    struct mk_request r;
    static const int refused[] = {0, 1, 99, 100, 101, 103, 199, 600, 999, -1};

    memset(&r, 0, sizeof(r));
    r.head.target = mk_str_make("/x", 2);
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        r.status = 200;
        mk_plugin_api.set_status(&r, refused[i]);
        assert_int_equal(r.status, 500);
    }
    static const int taken[] = {200, 204, 302, 404, 418, 500, 599};
    for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++) {
        mk_plugin_api.set_status(&r, taken[i]);
        assert_int_equal(r.status, taken[i]);
    }
    r.upgrade = (struct mk_upgrade *) &r; /* accepted by takeover: its 101 is the server's */
    mk_plugin_api.set_status(&r, 101);
    assert_int_equal(r.status, 101);
    mk_plugin_api.set_status(&r, 103);
    assert_int_equal(r.status, 500);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remote_addr),
        cmocka_unit_test(test_remote_addr_short_buffer),
        cmocka_unit_test(test_set_status_final_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
