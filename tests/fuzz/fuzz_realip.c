/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_realip.c: libFuzzer target for server/http/realip.c, the client read
 * from X-Forwarded-For, Forwarded or X-Real-IP past trusted proxies.
 *
 * The first input byte chooses the field (its value modulo 3, enum
 * mk_realip_field) and which of four trusted blocks are in force (bits
 * 2-5: 10.0.0.0/8, 127.0.0.1, 2001:db8::/32, ::/0); the rest is field lines
 * separated by '\n'. Invariants (each a crash when broken):
 *  - the answer is MK_OK with an IPv4 or IPv6 address, or MK_DECLINED;
 *  - for X-Forwarded-For and X-Real-IP, the lines give what their
 *    comma-joined value gives (several lines are one list), and the answer
 *    is that of a model that splits the list and walks it from the right;
 *  - for Forwarded, lines without a quote give what their joined value
 *    gives;
 *  - with no block trusted, an answer is the rightmost element's address.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <monkey/mk_common.h>

#include "server/http/realip.h"

#include "fuzz_check.h"

static const char *const blocks[] = {"10.0.0.0/8", "127.0.0.1", "2001:db8::/32", "::/0"};

/* Feed the lines of v[0, len) one by one (each copied to a buffer of its size). */
static int walk_lines(enum mk_realip_field f, const struct mk_cidr *t, size_t nt, const char *v,
                      size_t len, union mk_inet_addr *out)
{
    struct mk_realip_walk w;
    const char *end = v + len;

    mk_realip_begin(&w, f, t, nt);
    while (v <= end) {
        const char *nl = memchr(v, '\n', (size_t) (end - v));
        size_t n = nl ? (size_t) (nl - v) : (size_t) (end - v);
        char *copy = malloc(n ? n : 1);
        MK_FUZZ_CHECK(copy != NULL);
        memcpy(copy, v, n);
        mk_realip_feed(&w, copy, n);
        free(copy);
        if (!nl) {
            break;
        }
        v = nl + 1;
    }
    int rc = mk_realip_end(&w, out);
    MK_FUZZ_CHECK(rc == MK_OK || rc == MK_DECLINED);
    if (rc == MK_OK) {
        MK_FUZZ_CHECK(out->sa.sa_family == AF_INET || out->sa.sa_family == AF_INET6);
    }
    return rc;
}

/* X-Forwarded-For's model: the elements between commas, from the right. */
static int model_list(const struct mk_cidr *t, size_t nt, const char *v, size_t len,
                      union mk_inet_addr *out)
{
    const char *end = v + len;
    const char *e = end;
    bool any = false;

    for (;;) {
        const char *s = e;
        while (s > v && s[-1] != ',') {
            s--;
        }
        const char *a = s, *b = e;
        while (a < b && (*a == ' ' || *a == '\t')) {
            a++;
        }
        if (a < b) {
            union mk_inet_addr x;
            if (!mk_realip_addr_parse(a, (size_t) (b - a), &x)) {
                return MK_DECLINED;
            }
            *out = x;
            any = true;
            if (!mk_realip_trusted(&x.sa, t, nt)) {
                return MK_OK;
            }
        }
        if (s == v) {
            return any ? MK_OK : MK_DECLINED;
        }
        e = s - 1;
    }
}

static bool same(const union mk_inet_addr *a, const union mk_inet_addr *b)
{
    if (a->sa.sa_family != b->sa.sa_family) {
        return false;
    }
    return a->sa.sa_family == AF_INET ? memcmp(&a->in, &b->in, sizeof(a->in)) == 0
                                      : memcmp(&a->in6, &b->in6, sizeof(a->in6)) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mk_cidr t[4];
    size_t nt = 0;

    if (size < 1 || size > 4096) {
        return 0;
    }
    enum mk_realip_field f = (enum mk_realip_field)(data[0] % 3);
    for (unsigned i = 0; i < 4; i++) {
        if (data[0] & (4u << i)) {
            MK_FUZZ_CHECK(mk_cidr_parse(blocks[i], strlen(blocks[i]), &t[nt++]) == MK_CIDR_OK);
        }
    }
    const char *v = (const char *) data + 1;
    size_t len = size - 1;
    union mk_inet_addr got, joined_got, model;
    int rc = walk_lines(f, t, nt, v, len, &got);

    /* the lines joined with ',' into one */
    char *joined = malloc(len ? len : 1);
    MK_FUZZ_CHECK(joined != NULL);
    memcpy(joined, v, len);
    bool quote = memchr(v, '"', len) != NULL;
    for (size_t i = 0; i < len; i++) {
        if (joined[i] == '\n') {
            joined[i] = ',';
        }
    }
    if (f != MK_REALIP_FORWARDED || !quote) {
        int jrc = walk_lines(f, t, nt, joined, len, &joined_got);
        MK_FUZZ_CHECK(jrc == rc && (rc != MK_OK || same(&got, &joined_got)));
    }
    if (f != MK_REALIP_FORWARDED) {
        int mrc = model_list(t, nt, joined, len, &model);
        MK_FUZZ_CHECK(mrc == rc && (rc != MK_OK || same(&got, &model)));
    }
    free(joined);
    return 0;
}
