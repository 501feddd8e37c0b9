/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_mk_util.c: unit tests of the text helpers of include/monkey/mk_util.h
 * (mk_u64_dec, mk_addr_text), which the logger and the gateways use for
 * every request, and of mk_basic_credentials (the auth plugin, the
 * logger's %u).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <monkey/mk_util.h>

/* mk_u64_dec of v, NUL terminated into out; checks the length against the text. */
static const char *dec(uint64_t v, char out[21])
{
    size_t n = mk_u64_dec(v, out);
    out[n] = '\0';
    assert_int_equal(n, strlen(out));
    return out;
}

static void test_u64_dec(void **state)
{
    char out[21];

    (void) state;
    assert_string_equal(dec(0, out), "0");
    assert_string_equal(dec(7, out), "7");
    assert_string_equal(dec(9, out), "9");
    assert_string_equal(dec(10, out), "10");
    assert_string_equal(dec(255, out), "255");
    assert_string_equal(dec(99, out), "99");
    assert_string_equal(dec(100, out), "100");
    assert_string_equal(dec(1000000, out), "1000000");
    assert_string_equal(dec(4294967295u, out), "4294967295");
    assert_string_equal(dec(4294967296ull, out), "4294967296");
    assert_string_equal(dec(INT64_MAX, out), "9223372036854775807");
    assert_string_equal(dec(UINT64_MAX, out), "18446744073709551615");
}

/* No terminator and nothing past the digits; 20 bytes hold the longest. */
static void test_u64_dec_room(void **state)
{
    char buf[24];

    (void) state;
    memset(buf, '#', sizeof(buf));
    assert_int_equal(mk_u64_dec(4711, buf), 4);
    assert_memory_equal(buf, "4711#", 5);
    char *exact = malloc(20);
    assert_non_null(exact);
    assert_int_equal(mk_u64_dec(UINT64_MAX, exact), 20);
    assert_memory_equal(exact, "18446744073709551615", 20);
    free(exact);
}

/* mk_addr_text of text (an address of family) with a canary after the room it may use. */
static size_t addr(int family, const char *text, char out[MK_ADDR_TEXT_LEN + 1])
{
    struct sockaddr_storage ss;

    memset(&ss, 0, sizeof(ss));
    ss.ss_family = (sa_family_t) family;
    if (family == AF_INET) {
        assert_int_equal(inet_pton(AF_INET, text, &((struct sockaddr_in *) &ss)->sin_addr), 1);
    }
    else if (family == AF_INET6) {
        assert_int_equal(inet_pton(AF_INET6, text, &((struct sockaddr_in6 *) &ss)->sin6_addr), 1);
    }
    out[MK_ADDR_TEXT_LEN] = 'X';
    size_t n = mk_addr_text((const struct sockaddr *) &ss, out);
    assert_int_equal(out[MK_ADDR_TEXT_LEN], 'X');
    assert_int_equal(n, strlen(out));
    return n;
}

static void test_addr_text(void **state)
{
    static const struct {
        int family;
        const char *in, *text;
    } cases[] = {
        {AF_INET, "127.0.0.1", "127.0.0.1"},
        {AF_INET, "0.0.0.0", "0.0.0.0"},
        {AF_INET, "255.255.255.255", "255.255.255.255"},
        {AF_INET, "10.20.100.9", "10.20.100.9"},
        /* An IPv4 client of a dual-stack socket reads as IPv4. */
        {AF_INET6, "::ffff:192.0.2.33", "192.0.2.33"},
        {AF_INET6, "::1", "::1"},
        {AF_INET6, "2001:db8::8:800:200c:417a", "2001:db8::8:800:200c:417a"},
        /* Eight groups, none to compress. */
        {AF_INET6, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe",
         "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe"},
    };
    char out[MK_ADDR_TEXT_LEN + 1];

    (void) state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        addr(cases[i].family, cases[i].in, out);
        assert_string_equal(out, cases[i].text);
    }
    /* Another family: nothing. */
    memset(out, 'z', MK_ADDR_TEXT_LEN);
    assert_int_equal(addr(AF_UNIX, NULL, out), 0);
    assert_string_equal(out, "");
}

struct basic_case {
    const char *value;
    const char *cred; /* NULL: refused */
    int colon;
};

static const struct basic_case basic_cases[] = {
    {"Basic YWxpY2U6c2VjcmV0", "alice:secret", 5},
    {"basic YWxpY2U6c2VjcmV0", "alice:secret", 5},
    {" \tBASIC\t  YWxpY2U6c2VjcmV0 \t", "alice:secret", 5},
    {"Basic OnA=", ":p", 0},        /* an empty user: the caller decides */
    {"Basic YTo=", "a:", 1},        /* an empty password */
    {"Basic YTpiOmM=", "a:b:c", 1}, /* the first ':' ends the user */
    {"Basic YWxpY2U=", NULL, 0},    /* no ':' */
    {"Basic YWxpY2U6c2VjcmV0=", NULL, 0},
    {"Basic YWxpY2U6c2VjcmV", NULL, 0},
    {"Basic YW*pY2U6c2VjcmV0", NULL, 0},
    {"Basic ", NULL, 0},
    {"Basic", NULL, 0},
    {"BasicYWxpY2U6c2VjcmV0", NULL, 0},
    {"Bearer YWxpY2U6c2VjcmV0", NULL, 0},
    {"Digest YWxpY2U6c2VjcmV0", NULL, 0},
    {"", NULL, 0},
};

static void test_basic_credentials(void **state)
{
    char out[64];

    (void) state;
    for (size_t i = 0; i < sizeof(basic_cases) / sizeof(basic_cases[0]); i++) {
        const struct basic_case *c = &basic_cases[i];
        size_t len = 0;
        ssize_t colon = mk_basic_credentials(c->value, strlen(c->value), out, sizeof(out), &len);
        if (!c->cred) {
            if (colon != -1) {
                fail_msg("'%s' accepted", c->value);
            }
            continue;
        }
        if (colon != c->colon || len != strlen(c->cred) || memcmp(out, c->cred, len) != 0) {
            fail_msg("'%s': colon %zd, %zu bytes", c->value, colon, len);
        }
    }
    /* the room is honoured: 12 bytes decoded do not fit in 11 */
    size_t len;
    assert_int_equal(mk_basic_credentials("Basic YWxpY2U6c2VjcmV0", 22, out, 11, &len), -1);
    assert_int_equal(mk_basic_credentials("Basic YWxpY2U6c2VjcmV0", 22, out, 12, &len), 5);
    /* and the length of the value: 10 characters of base 64 */
    assert_int_equal(mk_basic_credentials("Basic YWxpY2U6c2VjcmV0", 20, out, 64, &len), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_u64_dec),
        cmocka_unit_test(test_u64_dec_room),
        cmocka_unit_test(test_addr_text),
        cmocka_unit_test(test_basic_credentials),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
