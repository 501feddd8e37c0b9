/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_px_fields.c: libFuzzer target for the proxy's field rewriting
 * (plugins/proxy/px_fields.c): Location, Refresh and Set-Cookie values an
 * upstream controls, rewritten by maps, and the Forwarded element built
 * from a client's Host.
 *
 * The input is lines: the first byte chooses a small output room (0 to
 * 255 bytes); the first line is the value, the next ones maps
 * "FROM<TAB>TO" (up to 8; a map for Set-Cookie goes to the Path maps when
 * its line starts with 'P', else to the Domain maps; maps holding ';' are
 * skipped for Set-Cookie, as the configuration refuses them). Invariants
 * (each a crash when broken):
 *  - with room for the worst case each writer succeeds, and with any
 *    smaller room it either fails (-1) or writes exactly the same bytes;
 *  - without maps the value is copied as it is;
 *  - Location: the result is the value with the first map whose FROM is
 *    its prefix applied (a model), else the value;
 *  - Refresh: without a ';' or ',' in the value it is copied;
 *  - Set-Cookie: the cookie's own pair (up to the first ';') is kept, and
 *    the number of ';' too;
 *  - Forwarded: "for=" first, no control byte, quotes balanced, a host=
 *    only for a host without control bytes, and ";host=HOST" last for a
 *    token host;
 *  - px_field_value_ok is false exactly when a control byte but HTAB is there.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <stdlib.h>
#include <string.h>

#include "plugins/proxy/px_fields.h"

#include "fuzz_check.h"

#define MAPS 8
#define BIG 65536

static char full[BIG], small[256];

typedef long (*rewrite_fn)(const char *v, size_t len, const struct px_map *m, size_t n, char *out,
                           size_t cap);

/* The writer once with a roomy buffer, once with `room` bytes: the same bytes or -1. */
static long both(rewrite_fn fn, const char *v, size_t len, const struct px_map *m, size_t n,
                 size_t room, size_t worst)
{
    long k = fn(v, len, m, n, full, worst);
    MK_FUZZ_CHECK(k >= 0 && (size_t) k <= worst);
    long s = fn(v, len, m, n, small, room);
    MK_FUZZ_CHECK(s == -1 || (s == k && memcmp(small, full, (size_t) k) == 0));
    MK_FUZZ_CHECK(s >= 0 || (size_t) k > room);
    return k;
}

static size_t count(const char *p, size_t len, char c)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        n += p[i] == c;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096) {
        return 0;
    }
    size_t room = data[0];
    const char *in = (const char *) data + 1;
    size_t len = size - 1;
    const char *nl = memchr(in, '\n', len);
    size_t vlen = nl ? (size_t) (nl - in) : len;
    const char *v = in;
    struct px_map all[MAPS] = {0}, paths[MAPS] = {0}, domains[MAPS] = {0};
    size_t n = 0, np = 0, nd = 0, max_to = 0;

    for (const char *p = nl ? nl + 1 : NULL; p && n < MAPS;) {
        const char *end = memchr(p, '\n', (size_t) (in + len - p));
        size_t ll = end ? (size_t) (end - p) : (size_t) (in + len - p);
        const char *tab = memchr(p, '\t', ll);
        if (tab) {
            struct px_map m = {p, tab + 1, (size_t) (tab - p), ll - (size_t) (tab - p) - 1};
            all[n++] = m;
            max_to = m.to_len > max_to ? m.to_len : max_to;
            if (!memchr(m.from, ';', m.from_len) && !memchr(m.to, ';', m.to_len)) {
                if (ll > 0 && p[0] == 'P') {
                    paths[np++] = m;
                }
                else {
                    domains[nd++] = m;
                }
            }
        }
        p = end ? end + 1 : NULL;
    }

    /* Location: against a model */
    size_t worst = vlen + max_to;
    long k = both(px_location_rewrite, v, vlen, all, n, room, worst);
    const struct px_map *hit = NULL;
    for (size_t i = 0; i < n && !hit; i++) {
        if (all[i].from_len <= vlen && memcmp(v, all[i].from, all[i].from_len) == 0) {
            hit = &all[i];
        }
    }
    if (!hit) {
        MK_FUZZ_CHECK((size_t) k == vlen && memcmp(full, v, vlen) == 0);
    }
    else {
        MK_FUZZ_CHECK((size_t) k == hit->to_len + vlen - hit->from_len);
        MK_FUZZ_CHECK(memcmp(full, hit->to, hit->to_len) == 0);
        MK_FUZZ_CHECK(memcmp(full + hit->to_len, v + hit->from_len, vlen - hit->from_len) == 0);
    }
    k = both(px_location_rewrite, v, vlen, NULL, 0, room, vlen);
    MK_FUZZ_CHECK((size_t) k == vlen && memcmp(full, v, vlen) == 0);

    /* Refresh */
    k = both(px_refresh_rewrite, v, vlen, all, n, room, worst);
    if (!memchr(v, ';', vlen) && !memchr(v, ',', vlen)) {
        MK_FUZZ_CHECK((size_t) k == vlen && memcmp(full, v, vlen) == 0);
    }
    k = both(px_refresh_rewrite, v, vlen, NULL, 0, room, vlen);
    MK_FUZZ_CHECK((size_t) k == vlen && memcmp(full, v, vlen) == 0);

    /* Set-Cookie: every attribute may be rewritten */
    size_t semis = count(v, vlen, ';');
    worst = vlen + (semis + 1) * max_to;
    k = px_cookie_rewrite(v, vlen, paths, np, domains, nd, full, worst);
    MK_FUZZ_CHECK(k >= 0 && (size_t) k <= worst);
    long s = px_cookie_rewrite(v, vlen, paths, np, domains, nd, small, room);
    MK_FUZZ_CHECK(s == -1 || (s == k && memcmp(small, full, (size_t) k) == 0));
    MK_FUZZ_CHECK(s >= 0 || (size_t) k > room);
    const char *semi = memchr(v, ';', vlen);
    size_t own = semi ? (size_t) (semi - v) : vlen;
    MK_FUZZ_CHECK((size_t) k >= own && memcmp(full, v, own) == 0);
    MK_FUZZ_CHECK(count(full, (size_t) k, ';') == semis);
    k = px_cookie_rewrite(v, vlen, NULL, 0, NULL, 0, full, vlen);
    MK_FUZZ_CHECK((size_t) k == vlen && memcmp(full, v, vlen) == 0);

    /* Forwarded: the value as the client's address (up to 63 bytes), the first map's FROM as Host
     */
    char addr[64];
    size_t al = vlen < sizeof(addr) - 1 ? vlen : sizeof(addr) - 1;
    memcpy(addr, v, al);
    addr[al] = '\0';
    const char *host = n ? all[0].from : NULL;
    size_t hlen = n ? all[0].from_len : 0;
    worst = 4 + 2 * sizeof(addr) + 14 + 8 + 2 * hlen + 2;
    k = px_forwarded_element(addr, "https", host, hlen, full, worst);
    MK_FUZZ_CHECK(k >= 4 && (size_t) k <= worst && memcmp(full, "for=", 4) == 0);
    MK_FUZZ_CHECK(px_field_value_ok(full, (size_t) k) && !memchr(full, '\t', (size_t) k));
    s = px_forwarded_element(addr, "https", host, hlen, small, room);
    MK_FUZZ_CHECK(s == -1 || (s == k && memcmp(small, full, (size_t) k) == 0));
    bool host_ok = host && hlen && px_field_value_ok(host, hlen) && !memchr(host, '\t', hlen);
    MK_FUZZ_CHECK(host_ok == (memmem(full, (size_t) k, ";host=", 6) != NULL));
    if (host_ok && px_field_name_ok(host, hlen)) {
        MK_FUZZ_CHECK((size_t) k >= hlen + 6 && memcmp(full + k - hlen, host, hlen) == 0 &&
                      memcmp(full + k - hlen - 6, ";host=", 6) == 0);
    }
    /* quotes: an even count of '"' not escaped */
    size_t quotes = 0;
    for (long i = 0; i < k; i++) {
        if (full[i] == '\\') {
            i++;
        }
        else if (full[i] == '"') {
            quotes++;
        }
    }
    MK_FUZZ_CHECK(quotes % 2 == 0);

    /* the names and values checks */
    bool ctl = false;
    for (size_t i = 0; i < vlen; i++) {
        unsigned char c = (unsigned char) v[i];
        ctl |= (c < 0x20 && c != '\t') || c == 0x7f;
    }
    MK_FUZZ_CHECK(px_field_value_ok(v, vlen) == !ctl);
    if (px_field_name_ok(v, vlen)) {
        MK_FUZZ_CHECK(vlen > 0 && !ctl && !memchr(v, ' ', vlen) && !memchr(v, ':', vlen));
    }
    (void) px_field_refused(v, vlen, room & 1);
    return 0;
}
