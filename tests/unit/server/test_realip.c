/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_realip.c: unit tests of server/http/realip.c (the client from
 * X-Forwarded-For, Forwarded and X-Real-IP behind trusted proxies): tables
 * of field lines with the trusted blocks and the client expected.
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

#include <arpa/inet.h>

#include <monkey/mk_common.h>

#include "server/http/realip.h"

static const char *text_of(const union mk_inet_addr *a, char *buf, size_t len)
{
    const void *src = a->sa.sa_family == AF_INET6 ? (const void *) &a->in6.sin6_addr
                                                  : (const void *) &a->in.sin_addr;
    if (!inet_ntop(a->sa.sa_family, src, buf, (socklen_t) len)) {
        snprintf(buf, len, "?");
    }
    return buf;
}

struct walk_case {
    enum mk_realip_field field;
    const char *lines[3]; /* field lines in order, NULL ends */
    const char *expect;   /* the client, or NULL: MK_DECLINED */
    unsigned port;
};

/* Trusted in every case: 10.0.0.0/8, 192.168.1.1 and 2001:db8:1::/48. */
static const char *const trusted_text[] = {"10.0.0.0/8", "192.168.1.1", "2001:db8:1::/48"};

#define XFF MK_REALIP_X_FORWARDED_FOR
#define FWD MK_REALIP_FORWARDED
#define XRI MK_REALIP_X_REAL_IP

static const struct walk_case walk_cases[] = {
    /* the rightmost untrusted wins; what is to its left is never read */
    {XFF, {"203.0.113.7"}, "203.0.113.7", 0},
    {XFF, {"198.51.100.1, 203.0.113.7, 10.0.0.5"}, "203.0.113.7", 0},
    {XFF, {"garbage, 203.0.113.7, 10.1.2.3, 192.168.1.1"}, "203.0.113.7", 0},
    {XFF, {"203.0.113.7,10.0.0.5"}, "203.0.113.7", 0},
    {XFF, {"  203.0.113.7  ,\t10.0.0.5 "}, "203.0.113.7", 0},
    /* several lines are one list */
    {XFF, {"198.51.100.1", "203.0.113.7", "10.0.0.5"}, "203.0.113.7", 0},
    {XFF, {"198.51.100.1, 203.0.113.7", "10.0.0.5, 10.0.0.6"}, "203.0.113.7", 0},
    /* all trusted: the leftmost */
    {XFF, {"10.9.9.9, 10.0.0.5"}, "10.9.9.9", 0},
    {XFF, {"10.9.9.9", "192.168.1.1"}, "10.9.9.9", 0},
    /* something that is no address before an untrusted one: nothing learned */
    {XFF, {"203.0.113.7, unknown, 10.0.0.5"}, NULL, 0},
    {XFF, {"203.0.113.7, 10.0.0.300"}, NULL, 0},
    {XFF, {""}, NULL, 0},
    {XFF, {" , ,"}, NULL, 0},
    {XFF, {NULL}, NULL, 0},
    /* empty elements are skipped */
    {XFF, {"203.0.113.7,, 10.0.0.5,"}, "203.0.113.7", 0},
    /* ports and IPv6 */
    {XFF, {"203.0.113.7:4711"}, "203.0.113.7", 4711},
    {XFF, {"2001:db8:2::9, 2001:db8:1::1"}, "2001:db8:2::9", 0},
    {XFF, {"[2001:db8:2::9]:443"}, "2001:db8:2::9", 443},
    {XFF, {"[2001:db8:2::9]"}, "2001:db8:2::9", 0},
    {XFF, {"[2001:db8:2::9]:"}, NULL, 0},
    {XFF, {"[2001:db8:2::9]:99999"}, NULL, 0},
    {XFF, {"203.0.113.7:"}, NULL, 0},
    {XFF, {"::ffff:10.0.0.5, ::ffff:203.0.113.7"}, "::ffff:203.0.113.7", 0},
    {XFF, {"203.0.113.7, ::ffff:10.0.0.5"}, "203.0.113.7", 0},
    /* Forwarded, RFC 7239's examples and more */
    {FWD, {"for=192.0.2.60;proto=http;by=203.0.113.43"}, "192.0.2.60", 0},
    {FWD, {"for=\"[2001:db8:cafe::17]:4711\""}, "2001:db8:cafe::17", 4711},
    {FWD, {"for=192.0.2.43, for=198.51.100.17"}, "198.51.100.17", 0},
    {FWD, {"for=192.0.2.43, for=198.51.100.17;by=10.0.0.1, for=10.0.0.9"}, "198.51.100.17", 0},
    {FWD, {"For=\"192.0.2.43\", FOR=10.0.0.9"}, "192.0.2.43", 0},
    {FWD, {"for=192.0.2.43", "for=10.0.0.9;proto=https"}, "192.0.2.43", 0},
    {FWD, {"proto=https;for=192.0.2.43;host=example.com"}, "192.0.2.43", 0},
    {FWD, {"for=\"192.0.2.43:80\";note=\"a, b; c\", for=10.0.0.9"}, "192.0.2.43", 80},
    {FWD, {"for=unknown, for=10.0.0.9"}, NULL, 0},
    {FWD, {"for=_hidden, for=10.0.0.9"}, NULL, 0},
    {FWD, {"for=192.0.2.43, by=10.0.0.1"}, NULL, 0},               /* an element without for */
    {FWD, {"for=192.0.2.43, for=10.0.0.9;for=10.0.0.8"}, NULL, 0}, /* two fors */
    {FWD, {"for=192.0.2.43, for=\"10.0.0.9"}, NULL, 0},            /* an open quote */
    {FWD, {"for=192.0.2.43, for"}, NULL, 0},
    {FWD, {"for=192.0.2.43, garbage here, for=10.0.0.9"}, NULL, 0},
    {FWD, {"for=198.51.100.1, garbage \"x,y\" here, for=203.0.113.7"}, "203.0.113.7", 0},
    {FWD, {"for=2001:db8:cafe::17"}, NULL, 0}, /* IPv6 must be quoted: ':' is no tchar */
    {FWD, {";;, for=192.0.2.43;"}, "192.0.2.43", 0},
    {FWD, {"for=\"\\1\\9\\2.0.2.43\""}, "192.0.2.43", 0}, /* quoted pairs */
    /* X-Real-IP: one address; a list reads as X-Forwarded-For does */
    {XRI, {"203.0.113.7"}, "203.0.113.7", 0},
    {XRI, {"forged", "203.0.113.7"}, "203.0.113.7", 0},
    {XRI, {"10.0.0.5"}, "10.0.0.5", 0},
};

static void test_walk_table(void **state)
{
    struct mk_cidr trusted[3];
    unsigned failures = 0;
    char text[INET6_ADDRSTRLEN];
    (void) state;

    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(mk_cidr_parse(trusted_text[i], strlen(trusted_text[i]), &trusted[i]),
                         MK_CIDR_OK);
    }
    for (size_t i = 0; i < sizeof(walk_cases) / sizeof(walk_cases[0]); i++) {
        const struct walk_case *t = &walk_cases[i];
        struct mk_realip_walk w;
        union mk_inet_addr a;

        mk_realip_begin(&w, t->field, trusted, 3);
        for (size_t l = 0; l < 3 && t->lines[l]; l++) {
            /* a buffer of the line's size, not NUL terminated */
            size_t len = strlen(t->lines[l]);
            char *copy = malloc(len ? len : 1);
            assert_non_null(copy);
            memcpy(copy, t->lines[l], len);
            mk_realip_feed(&w, copy, len);
            free(copy);
        }
        int rc = mk_realip_end(&w, &a);
        if (!t->expect) {
            if (rc != MK_DECLINED) {
                print_error("case %zu '%s': %s, expected nothing\n", i, t->lines[0],
                            text_of(&a, text, sizeof(text)));
                failures++;
            }
            continue;
        }
        unsigned port = ntohs(a.sa.sa_family == AF_INET6 ? a.in6.sin6_port : a.in.sin_port);
        if (rc != MK_OK || strcmp(text_of(&a, text, sizeof(text)), t->expect) != 0 ||
            port != t->port) {
            print_error("case %zu '%s': rc %d %s port %u, expected %s port %u\n", i, t->lines[0],
                        rc, rc == MK_OK ? text : "-", port, t->expect, t->port);
            failures++;
        }
    }
    assert_int_equal(failures, 0);
}

static void test_trusted(void **state)
{
    struct mk_cidr c[2];
    union mk_inet_addr a;
    (void) state;

    assert_int_equal(mk_cidr_parse("127.0.0.0/8", 11, &c[0]), MK_CIDR_OK);
    assert_int_equal(mk_cidr_parse("::1", 3, &c[1]), MK_CIDR_OK);
    assert_true(mk_realip_addr_parse("127.0.0.2", 9, &a));
    assert_true(mk_realip_trusted(&a.sa, c, 2));
    assert_true(mk_realip_addr_parse("::ffff:127.0.0.2", 16, &a)); /* dual stack */
    assert_true(mk_realip_trusted(&a.sa, c, 2));
    assert_true(mk_realip_addr_parse("::1", 3, &a));
    assert_true(mk_realip_trusted(&a.sa, c, 2));
    assert_true(mk_realip_addr_parse("::2", 3, &a));
    assert_false(mk_realip_trusted(&a.sa, c, 2));
    assert_false(mk_realip_trusted(&a.sa, c, 0));
    assert_true(mk_realip_addr_parse("128.0.0.1", 9, &a));
    assert_false(mk_realip_trusted(&a.sa, c, 2));
    /* the length is honoured */
    assert_true(mk_realip_addr_parse("10.0.0.1:80", 8, &a));
    assert_int_equal(a.in.sin_port, 0);
    assert_false(mk_realip_addr_parse("", 0, &a));
    assert_false(mk_realip_addr_parse("[", 1, &a));
    assert_false(mk_realip_addr_parse("[]", 2, &a));
    assert_false(mk_realip_addr_parse("1.2.3.4:5:6", 11, &a));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk_table),
        cmocka_unit_test(test_trusted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
