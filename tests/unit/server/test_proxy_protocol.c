/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_proxy_protocol.c: unit tests of server/http/proxy_protocol.c (the
 * PROXY protocol header, versions 1 and 2): tables of raw bytes with the
 * expected result, every prefix of each accepted header (MK_AGAIN), the
 * client bytes after a header left alone, and the TLVs.
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

#include "server/http/proxy_protocol.h"

#define RAW(s) s, sizeof(s) - 1

/* Parse buf[0, len) in a buffer of exactly that size, so the sanitizers see an overread. */
static ssize_t parse(const char *buf, size_t len, struct mk_proxy_info *info)
{
    char *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    memcpy(copy, buf, len);
    ssize_t rc = mk_proxy_parse(copy, len, info);
    free(copy);
    return rc;
}

static const char *addr_text(const union mk_inet_addr *a, char *buf, size_t len)
{
    const void *src = a->sa.sa_family == AF_INET6 ? (const void *) &a->in6.sin6_addr
                                                  : (const void *) &a->in.sin_addr;
    if (!inet_ntop(a->sa.sa_family, src, buf, (socklen_t) len)) {
        snprintf(buf, len, "?");
    }
    return buf;
}

static unsigned port_of(const union mk_inet_addr *a)
{
    return ntohs(a->sa.sa_family == AF_INET6 ? a->in6.sin6_port : a->in.sin_port);
}

struct v1_case {
    const char *in;
    ssize_t rc; /* the header's length, MK_AGAIN or MK_ERR */
    const char *src;
    unsigned sport;
    bool local;
};

static const struct v1_case v1_cases[] = {
    {"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nGET", 45, "192.0.2.1", 56324, false},
    {"PROXY TCP6 2001:db8::1 2001:db8::2 1 65535\r\n", 44, "2001:db8::1", 1, false},
    {"PROXY TCP6 ::ffff:192.0.2.1 ::1 0 80\r\n", 38, "::ffff:192.0.2.1", 0, false},
    {"PROXY UNKNOWN\r\n", 15, NULL, 0, true},
    {"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\nGET / HTTP/1.1\r\n", 35, NULL, 0, true},
    {"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r", MK_AGAIN, NULL, 0, false},
    {"PROXY TCP4 192.0.2.1", MK_AGAIN, NULL, 0, false},
    {"PROX", MK_AGAIN, NULL, 0, false},
    /* malformed */
    {"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\n", MK_ERR, NULL, 0, false},
    {"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\rX", MK_ERR, NULL, 0, false},
    {"PROXY TCP4 192.0.2.1  198.51.100.2 56324 443\r\n", MK_ERR, NULL, 0, false},
    {"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443 \r\n", MK_ERR, NULL, 0, false},
    {"PROXY TCP4 192.0.2.1 198.51.100.2 56324\r\n", MK_ERR, NULL, 0, false},
    {"PROXY TCP4 192.0.2.1 198.51.100.2 65536 443\r\n", MK_ERR, NULL, 0, false},
    {"PROXY TCP4 192.0.2.1 198.51.100.2 0443 443\r\n", MK_ERR, NULL, 0, false},
    {"PROXY TCP4 192.0.2.1 198.51.100.2 -1 443\r\n", MK_ERR, NULL, 0, false},
    {"PROXY TCP4 2001:db8::1 198.51.100.2 1 443\r\n", MK_ERR, NULL, 0, false},
    {"PROXY TCP6 192.0.2.1 2001:db8::2 1 443\r\n", MK_ERR, NULL, 0, false},
    {"PROXY TCP4 192.0.2.256 198.51.100.2 1 443\r\n", MK_ERR, NULL, 0, false},
    {"PROXY TCP5 192.0.2.1 198.51.100.2 1 443\r\n", MK_ERR, NULL, 0, false},
    {"PROXY tcp4 192.0.2.1 198.51.100.2 1 443\r\n", MK_ERR, NULL, 0, false},
    {"PROXY UNKNOWNX\r\n", MK_ERR, NULL, 0, false},
    {"PROXY \r\n", MK_ERR, NULL, 0, false},
    {"PROXY TCP4 192.0.2.1\x01 198.51.100.2 1 443\r\n", MK_ERR, NULL, 0, false},
    {"proxy TCP4 192.0.2.1 198.51.100.2 1 443\r\n", MK_ERR, NULL, 0, false},
    {"GET / HTTP/1.1\r\n\r\n", MK_ERR, NULL, 0, false},
    {"\x16\x03\x01", MK_ERR, NULL, 0, false},
};

static void test_v1_table(void **state)
{
    unsigned failures = 0;
    char text[INET6_ADDRSTRLEN];
    (void) state;

    for (size_t i = 0; i < sizeof(v1_cases) / sizeof(v1_cases[0]); i++) {
        const struct v1_case *t = &v1_cases[i];
        struct mk_proxy_info info;
        ssize_t rc = parse(t->in, strlen(t->in), &info);
        if (rc != t->rc) {
            print_error("case %zu '%s': %zd, expected %zd\n", i, t->in, rc, t->rc);
            failures++;
            continue;
        }
        if (rc <= 0) {
            continue;
        }
        if (info.version != 1 || info.local != t->local) {
            print_error("case %zu: version %d local %d\n", i, info.version, info.local);
            failures++;
        }
        if (t->src && (strcmp(addr_text(&info.src, text, sizeof(text)), t->src) != 0 ||
                       port_of(&info.src) != t->sport)) {
            print_error("case %zu: src %s port %u\n", i, text, port_of(&info.src));
            failures++;
        }
    }
    assert_int_equal(failures, 0);
}

/* 107 bytes is the longest line; one more is refused, complete or not. */
static void test_v1_length(void **state)
{
    char line[200];
    struct mk_proxy_info info;
    (void) state;

    memcpy(line, "PROXY UNKNOWN ", 14);
    memset(line + 14, 'x', 91);
    memcpy(line + 105, "\r\n", 2);
    assert_int_equal(parse(line, 107, &info), 107);
    assert_true(info.local);
    memset(line + 14, 'x', 92);
    memcpy(line + 106, "\r\n", 2);
    assert_int_equal(parse(line, 108, &info), MK_ERR);
    assert_int_equal(parse(line, 107, &info), MK_ERR);
    assert_int_equal(parse(line, 105, &info), MK_AGAIN);
    assert_int_equal(parse(line, 106, &info), MK_ERR); /* no room left for "\r\n" */
}

/* A v2 header: signature, ver_cmd, fam, length, then `body`. */
static size_t v2(uint8_t *out, uint8_t ver_cmd, uint8_t fam, const void *body, size_t len)
{
    static const uint8_t sig[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                    0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};
    memcpy(out, sig, 12);
    out[12] = ver_cmd;
    out[13] = fam;
    out[14] = (uint8_t) (len >> 8);
    out[15] = (uint8_t) len;
    memcpy(out + 16, body, len);
    return 16 + len;
}

static size_t tlv(uint8_t *out, uint8_t type, const void *v, size_t len)
{
    out[0] = type;
    out[1] = (uint8_t) (len >> 8);
    out[2] = (uint8_t) len;
    memcpy(out + 3, v, len);
    return 3 + len;
}

static void test_v2_inet(void **state)
{
    uint8_t body[64], buf[128];
    struct mk_proxy_info info;
    char text[INET6_ADDRSTRLEN];
    (void) state;

    /* 192.0.2.1:56324 -> 198.51.100.2:443, then the client's bytes */
    const uint8_t a[12] = {192, 0, 2, 1, 198, 51, 100, 2, 0xdc, 0x04, 0x01, 0xbb};
    size_t n = v2(buf, 0x21, 0x11, a, sizeof(a));
    memcpy(buf + n, "GET /", 5);
    assert_int_equal(parse((char *) buf, n + 5, &info), 28);
    assert_int_equal(info.version, 2);
    assert_false(info.local);
    assert_string_equal(addr_text(&info.src, text, sizeof(text)), "192.0.2.1");
    assert_int_equal(port_of(&info.src), 56324);
    assert_string_equal(addr_text(&info.dst, text, sizeof(text)), "198.51.100.2");
    assert_int_equal(port_of(&info.dst), 443);
    /* every prefix needs more */
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(parse((char *) buf, i, &info), MK_AGAIN);
    }

    /* IPv6 */
    memset(body, 0, sizeof(body));
    body[0] = 0x20;
    body[1] = 0x01;
    body[2] = 0x0d;
    body[3] = 0xb8;
    body[15] = 1;
    body[16 + 15] = 2;
    body[32] = 0x30;
    body[33] = 0x39;
    body[35] = 80;
    n = v2(buf, 0x21, 0x21, body, 36);
    assert_int_equal(parse((char *) buf, n, &info), 52);
    assert_string_equal(addr_text(&info.src, text, sizeof(text)), "2001:db8::1");
    assert_int_equal(port_of(&info.src), 12345);
    assert_string_equal(addr_text(&info.dst, text, sizeof(text)), "::2");
}

static void test_v2_local_and_unspec(void **state)
{
    uint8_t buf[300], body[216] = {0};
    struct mk_proxy_info info;
    (void) state;

    /* LOCAL with no block, and with any family and block: skipped whole */
    size_t n = v2(buf, 0x20, 0x00, body, 0);
    assert_int_equal(parse((char *) buf, n, &info), 16);
    assert_true(info.local);
    n = v2(buf, 0x20, 0x11, body, 5); /* LOCAL ignores a block too short for its family */
    assert_int_equal(parse((char *) buf, n, &info), 21);
    assert_true(info.local);
    /* PROXY of UNSPEC and of UNIX: the TCP peer is kept */
    n = v2(buf, 0x21, 0x00, body, 0);
    assert_int_equal(parse((char *) buf, n, &info), 16);
    assert_true(info.local);
    n = v2(buf, 0x21, 0x31, body, 216);
    assert_int_equal(parse((char *) buf, n, &info), 232);
    assert_true(info.local);
}

static void test_v2_refused(void **state)
{
    uint8_t buf[1200], body[1100] = {0};
    struct mk_proxy_info info;
    (void) state;

    /* version 1 in the binary form, version 3, command 2 */
    assert_int_equal(parse((char *) buf, v2(buf, 0x11, 0x11, body, 12), &info), MK_ERR);
    assert_int_equal(parse((char *) buf, v2(buf, 0x31, 0x11, body, 12), &info), MK_ERR);
    assert_int_equal(parse((char *) buf, v2(buf, 0x22, 0x11, body, 12), &info), MK_ERR);
    /* DGRAM, an unknown family or transport */
    assert_int_equal(parse((char *) buf, v2(buf, 0x21, 0x12, body, 12), &info), MK_ERR);
    assert_int_equal(parse((char *) buf, v2(buf, 0x21, 0x41, body, 12), &info), MK_ERR);
    assert_int_equal(parse((char *) buf, v2(buf, 0x21, 0x13, body, 12), &info), MK_ERR);
    /* a block too short for the addresses: refused before it is complete */
    size_t n = v2(buf, 0x21, 0x11, body, 11);
    assert_int_equal(parse((char *) buf, 16, &info), MK_ERR);
    assert_int_equal(parse((char *) buf, n, &info), MK_ERR);
    n = v2(buf, 0x21, 0x21, body, 35);
    assert_int_equal(parse((char *) buf, n, &info), MK_ERR);
    /* too long for this server, known from the 16 bytes */
    v2(buf, 0x21, 0x11, body, MK_PROXY_MAX - 16 + 1);
    assert_int_equal(parse((char *) buf, 16, &info), MK_ERR);
    n = v2(buf, 0x21, 0x11, body, MK_PROXY_MAX - 16);
    assert_int_equal(parse((char *) buf, n, &info), (ssize_t) MK_PROXY_MAX); /* NOOP TLVs of 0s */
    /* a bad signature byte anywhere */
    for (size_t i = 0; i < 12; i++) {
        v2(buf, 0x21, 0x11, body, 12);
        buf[i] ^= 0x40;
        assert_int_equal(parse((char *) buf, 28, &info), MK_ERR);
        assert_int_equal(parse((char *) buf, i + 1, &info), MK_ERR);
    }
}

static void test_v2_tlvs(void **state)
{
    uint8_t body[600], buf[700];
    struct mk_proxy_info info;
    (void) state;

    const uint8_t a[12] = {10, 0, 0, 1, 10, 0, 0, 2, 0, 1, 0, 2};
    size_t b = 0;
    memcpy(body, a, 12);
    b = 12;
    b += tlv(body + b, 0x01, "h2", 2);
    b += tlv(body + b, 0x02, "example.com", 11);
    b += tlv(body + b, 0x04, "\0\0\0", 3); /* NOOP */
    b += tlv(body + b, 0x05, "id-1", 4);
    uint8_t ssl[32] = {0x07, 0, 0, 0, 0};
    size_t s = 5 + tlv(ssl + 5, 0x21, "TLSv1.3", 7);
    b += tlv(body + b, 0x20, ssl, s);
    b += tlv(body + b, 0xe0, "custom", 6);
    size_t n = v2(buf, 0x21, 0x11, body, b);
    assert_int_equal(parse((char *) buf, n, &info), (ssize_t) n);
    assert_int_equal(info.alpn.len, 2);
    assert_memory_equal(info.alpn.p, "h2", 2);
    assert_int_equal(info.authority.len, 11);
    assert_memory_equal(info.authority.p, "example.com", 11);
    assert_int_equal(info.unique_id.len, 4);
    assert_true(info.ssl);
    assert_int_equal(info.ssl_version.len, 7);
    assert_memory_equal(info.ssl_version.p, "TLSv1.3", 7);

    /* SSL without the client bit */
    ssl[0] = 0;
    b = 12 + tlv(body + 12, 0x20, ssl, 5);
    n = v2(buf, 0x21, 0x11, body, b);
    assert_int_equal(parse((char *) buf, n, &info), (ssize_t) n);
    assert_false(info.ssl);

    /* refused: a TLV cut short, two bytes left over, an SSL TLV under 5 bytes,
       a sub-TLV cut short, a unique id over 128 bytes */
    b = 12 + tlv(body + 12, 0x02, "example.com", 11);
    n = v2(buf, 0x21, 0x11, body, b - 1);
    assert_int_equal(parse((char *) buf, n, &info), MK_ERR);
    n = v2(buf, 0x21, 0x11, body, 14);
    assert_int_equal(parse((char *) buf, n, &info), MK_ERR);
    b = 12 + tlv(body + 12, 0x20, ssl, 4);
    n = v2(buf, 0x21, 0x11, body, b);
    assert_int_equal(parse((char *) buf, n, &info), MK_ERR);
    ssl[5] = 0x21;
    ssl[6] = 0;
    ssl[7] = 9;
    b = 12 + tlv(body + 12, 0x20, ssl, 8);
    n = v2(buf, 0x21, 0x11, body, b);
    assert_int_equal(parse((char *) buf, n, &info), MK_ERR);
    char id[129];
    memset(id, 'u', sizeof(id));
    b = 12 + tlv(body + 12, 0x05, id, 128);
    n = v2(buf, 0x21, 0x11, body, b);
    assert_int_equal(parse((char *) buf, n, &info), (ssize_t) n);
    b = 12 + tlv(body + 12, 0x05, id, 129);
    n = v2(buf, 0x21, 0x11, body, b);
    assert_int_equal(parse((char *) buf, n, &info), MK_ERR);
}

/* Every prefix of an accepted header needs more, and the answer never depends on what follows. */
static void test_prefixes(void **state)
{
    const char *headers[] = {
        "PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n",
        "PROXY TCP6 2001:db8::1 2001:db8::2 1 65535\r\n",
        "PROXY UNKNOWN\r\n",
    };
    struct mk_proxy_info info;
    char buf[256];
    (void) state;

    for (size_t h = 0; h < sizeof(headers) / sizeof(headers[0]); h++) {
        size_t len = strlen(headers[h]);
        for (size_t i = 0; i < len; i++) {
            assert_int_equal(parse(headers[h], i, &info), MK_AGAIN);
        }
        snprintf(buf, sizeof(buf), "%sGET / HTTP/1.1\r\n\r\n", headers[h]);
        assert_int_equal(parse(buf, strlen(buf), &info), (ssize_t) len);
        assert_int_equal(parse(buf, len, &info), (ssize_t) len);
    }
    assert_int_equal(parse(RAW(""), &info), MK_AGAIN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1_table),   cmocka_unit_test(test_v1_length),
        cmocka_unit_test(test_v2_inet),    cmocka_unit_test(test_v2_local_and_unspec),
        cmocka_unit_test(test_v2_refused), cmocka_unit_test(test_v2_tlvs),
        cmocka_unit_test(test_prefixes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
