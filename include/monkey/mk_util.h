/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * mk_util.h: small helpers plugins share, as static inline functions so a
 * plugin needs nothing from the server to use them: base 64 decoding
 * (RFC 4648) and Basic credentials (RFC 7617), address blocks (CIDR) matched
 * against clients, and numbers and addresses as text (for access logs
 * and gateway variables, every request). The server uses the same ones
 * (status lines and lengths, the task queue's client keys,
 * api->remote_addr), so there is one implementation of each; and the
 * plural of a count in messages. Pure: no allocation, no globals, no I/O.
 */
#ifndef MONKEY_MK_UTIL_H
#define MONKEY_MK_UTIL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/types.h>

/* ---- hexadecimal ----------------------------------------------------------- */

/* The value of a hexadecimal digit (either case), or -1. */
static inline int mk_hex_digit(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c = (char) (c | 0x20);
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

/* ---- base 64 -------------------------------------------------------------- */

/* Value of a base-64 character, or -1. */
static inline int mk_base64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    if (c == '+') {
        return 62;
    }
    return c == '/' ? 63 : -1;
}

/*
 * Decode padded base 64 of `len` bytes into out (room for `cap` bytes).
 * Returns the decoded length, or -1 for anything but canonical padded
 * base 64 (a bad character, a length not a multiple of 4, data after '=').
 */
static inline ssize_t mk_base64_decode(const char *in, size_t len, char *out, size_t cap)
{
    size_t w = 0;

    if (len == 0 || len % 4 != 0 || len / 4 * 3 > cap) {
        return -1;
    }
    for (size_t i = 0; i < len; i += 4) {
        int v[4];
        int pad = 0;
        for (int j = 0; j < 4; j++) {
            unsigned char c = (unsigned char) in[i + (size_t) j];
            if (c == '=' && i + 4 == len && j >= 2) {
                v[j] = 0;
                pad++;
                continue;
            }
            v[j] = mk_base64_value(c);
            if (v[j] < 0 || pad) {
                return -1;
            }
        }
        uint32_t bits =
            (uint32_t) v[0] << 18 | (uint32_t) v[1] << 12 | (uint32_t) v[2] << 6 | (uint32_t) v[3];
        out[w++] = (char) (bits >> 16);
        if (pad < 2) {
            out[w++] = (char) (bits >> 8);
        }
        if (pad < 1) {
            out[w++] = (char) bits;
        }
    }
    return (ssize_t) w;
}

/* ---- Basic credentials ---------------------------------------------------- */

/*
 * The credentials of an Authorization value "Basic <token68>" (RFC 7617:
 * the scheme in any case, then spaces or tabs; whitespace around the value
 * is ignored), decoded by mk_base64_decode into out (room for cap bytes, no
 * NUL written) with their length in *len. Returns the offset in out of the
 * ':' that ends the user name, or -1 when the value is not Basic, or its
 * credentials are not padded base 64 of at most cap bytes or hold no ':'.
 * Callers check the bytes themselves (control characters, lengths).
 */
static inline ssize_t mk_basic_credentials(const char *v, size_t vlen, char *out, size_t cap,
                                           size_t *len)
{
    while (vlen && (*v == ' ' || *v == '\t')) {
        v++, vlen--;
    }
    while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t')) {
        vlen--;
    }
    if (vlen < 6 || strncasecmp(v, "Basic", 5) != 0 || (v[5] != ' ' && v[5] != '\t')) {
        return -1;
    }
    v += 5, vlen -= 5;
    while (vlen && (*v == ' ' || *v == '\t')) {
        v++, vlen--;
    }
    ssize_t got = mk_base64_decode(v, vlen, out, cap);
    if (got < 0) {
        return -1;
    }
    *len = (size_t) got;
    const char *colon = (const char *) memchr(out, ':', (size_t) got);
    return colon ? colon - out : -1;
}

/* ---- address blocks ------------------------------------------------------- */

/*
 * An address block. Every address is held in the 16-byte IPv6 form, IPv4 as
 * IPv4-mapped (::ffff:a.b.c.d), so one comparison serves both; `family` keeps
 * the blocks of the two families apart (0.0.0.0/0 does not cover IPv6).
 */
struct mk_cidr {
    uint8_t net[16]; /* the address with the bits past the prefix cleared */
    uint8_t mask[16];
    int family;     /* AF_INET or AF_INET6 */
    bool host_bits; /* the text had bits set past its prefix (they are ignored) */
};

/* Results of mk_cidr_parse(). */
#define MK_CIDR_OK 0
#define MK_CIDR_BAD_ADDRESS (-1) /* not an IPv4 or IPv6 address */
#define MK_CIDR_BAD_PREFIX (-2)  /* what follows '/' is not a number */
#define MK_CIDR_RANGE (-3)       /* prefix longer than 32 (IPv4) or 128 (IPv6) */
#define MK_CIDR_MAPPED (-4)      /* an IPv4-mapped address with a prefix under 96 */

/*
 * Parse "ADDRESS[/LEN]" (len bytes, not NUL terminated). Without /LEN the
 * block is one host. An IPv4-mapped IPv6 address with LEN >= 96 is the IPv4
 * block it maps.
 */
static inline int mk_cidr_parse(const char *text, size_t len, struct mk_cidr *out)
{
    char addr[INET6_ADDRSTRLEN + 1];
    uint8_t a[16] = {0};
    const char *slash = memchr(text, '/', len);
    size_t alen = slash ? (size_t) (slash - text) : len;
    unsigned bits, max;

    memset(out, 0, sizeof(*out));
    if (alen == 0 || alen >= sizeof(addr)) {
        return MK_CIDR_BAD_ADDRESS;
    }
    memcpy(addr, text, alen);
    addr[alen] = '\0';
    if (inet_pton(AF_INET, addr, a + 12) == 1) {
        a[10] = a[11] = 0xff;
        out->family = AF_INET;
        max = 32;
    }
    else if (inet_pton(AF_INET6, addr, a) == 1) {
        out->family = AF_INET6;
        max = 128;
    }
    else {
        return MK_CIDR_BAD_ADDRESS;
    }
    bits = max;
    if (slash) {
        const char *d = slash + 1, *end = text + len;
        if (d == end || end - d > 3) {
            return MK_CIDR_BAD_PREFIX;
        }
        bits = 0;
        for (; d < end; d++) {
            if (*d < '0' || *d > '9') {
                return MK_CIDR_BAD_PREFIX;
            }
            bits = bits * 10 + (unsigned) (*d - '0');
        }
        if (bits > max) {
            return MK_CIDR_RANGE;
        }
    }
    if (out->family == AF_INET) {
        bits += 96;
    }
    else if (IN6_IS_ADDR_V4MAPPED((const struct in6_addr *) (const void *) a)) {
        if (bits < 96) {
            return MK_CIDR_MAPPED;
        }
        out->family = AF_INET;
    }
    for (unsigned i = 0; i < 16; i++) {
        unsigned b = bits > 8 * i ? bits - 8 * i : 0;
        out->mask[i] = b >= 8 ? 0xff : (uint8_t) (0xff00u >> b);
        out->net[i] = a[i] & out->mask[i];
        out->host_bits |= out->net[i] != a[i];
    }
    return MK_CIDR_OK;
}

/*
 * A client address in the form blocks are matched against: 16 bytes, IPv4
 * (including IPv4 clients of a dual-stack socket, ::ffff:a.b.c.d) as
 * IPv4-mapped with *family AF_INET.
 */
static inline void mk_cidr_client(const struct sockaddr *sa, uint8_t key[16], int *family)
{
    memset(key, 0, 16);
    *family = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *) (const void *) sa;
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &in->sin_addr, 4);
        *family = AF_INET;
    }
    else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) (const void *) sa;
        memcpy(key, &in6->sin6_addr, 16);
        *family = IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) ? AF_INET : AF_INET6;
    }
}

/* Is the client (from mk_cidr_client) inside the block? */
static inline bool mk_cidr_match(const struct mk_cidr *c, const uint8_t key[16], int family)
{
    uint64_t k[2], m[2], n[2];

    if (c->family != family) {
        return false;
    }
    memcpy(k, key, 16);
    memcpy(m, c->mask, 16);
    memcpy(n, c->net, 16);
    return (k[0] & m[0]) == n[0] && (k[1] & m[1]) == n[1];
}

/* ---- numbers and addresses as text ---------------------------------------- */

/*
 * The word for a count of n in a message: `one` for 1, `many` otherwise
 * ("1 worker", "0 workers", "2 workers").
 */
static inline const char *mk_plural(unsigned long long n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

/* v in decimal into out (room for 20 characters, no NUL written); the length. */
static inline size_t mk_u64_dec(uint64_t v, char *out)
{
    static const char pairs[] =
        "00010203040506070809101112131415161718192021222324252627282930313233"
        "34353637383940414243444546474849505152535455565758596061626364656667"
        "6869707172737475767778798081828384858687888990919293949596979899";
    size_t n = 1;

    /* Count the digits, then write them from the last one, two at a time. */
    for (uint64_t t = v; t >= 10; t /= 10) {
        n++;
    }
    char *p = out + n;
    while (v >= 100) {
        const char *d = pairs + (v % 100) * 2;
        v /= 100;
        p -= 2;
        p[0] = d[0];
        p[1] = d[1];
    }
    if (v >= 10) {
        p[-2] = pairs[v * 2];
        p[-1] = pairs[v * 2 + 1];
    }
    else {
        p[-1] = (char) ('0' + v);
    }
    return n;
}

/* The room mk_addr_text() needs, its NUL included. */
#define MK_ADDR_TEXT_LEN INET6_ADDRSTRLEN

/*
 * The address of sa as text into out (MK_ADDR_TEXT_LEN bytes, NUL
 * terminated): IPv4 in dotted decimal without printf, an IPv4-mapped IPv6
 * address (an IPv4 client of a dual-stack socket) in IPv4 form as well,
 * other IPv6 addresses by inet_ntop. Returns the length: 0, with "" in
 * out, for another family.
 */
static inline size_t mk_addr_text(const struct sockaddr *sa, char out[MK_ADDR_TEXT_LEN])
{
    uint8_t key[16];
    int family;
    size_t n = 0;

    mk_cidr_client(sa, key, &family);
    if (family == AF_INET6 && inet_ntop(AF_INET6, key, out, MK_ADDR_TEXT_LEN)) {
        return strlen(out);
    }
    if (family != AF_INET) {
        out[0] = '\0';
        return 0;
    }
    for (int i = 12; i < 16; i++) {
        n += mk_u64_dec(key[i], out + n);
        out[n++] = i < 15 ? '.' : '\0';
    }
    return n - 1;
}

#endif
