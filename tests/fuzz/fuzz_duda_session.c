/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_duda_session.c: libFuzzer target for duda/session_parse.c, the
 * parsers of outside input of the session stores: a Cookie header's
 * name=value pairs (every request to a service with the Redis store, and
 * cookie->get) and a store address (SessionStore, redis->connect).
 *
 * Invariants (each a crash when broken):
 *  - every pair lies inside the header, in order, with a name of at least
 *    one byte holding no '=' or ';', a value holding no ';', and no more
 *    pairs than asked for; splitting the same header again gives the same;
 *  - duda_session_parse_cookie_find (cookie->get) gives, for each pair's name, the value
 *    of the first pair of that name, and nothing for names no pair has;
 *  - an accepted address starts with "redis://", gives a NUL-terminated
 *    host of 1 to hostlen - 1 bytes, a port from 1 to 65535 and a database
 *    from 0 to 1000000; a refused one leaves a NUL-terminated reason.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "duda/session_parse.h"
#include "fuzz_check.h"

static void fuzz_cookies(const char *h, size_t n)
{
    struct duda_cookie_pair out[16], again[16];
    size_t max = n % 17;
    size_t got = duda_session_parse_cookie_pairs(h, n, out, max);
    const char *prev = h;

    MK_FUZZ_CHECK(got <= max);
    for (size_t i = 0; i < got; i++) {
        const struct duda_cookie_pair *p = &out[i];
        MK_FUZZ_CHECK(p->name >= prev && p->name_len >= 1);
        MK_FUZZ_CHECK(p->value == p->name + p->name_len + 1);
        MK_FUZZ_CHECK(p->value + p->value_len <= h + n);
        MK_FUZZ_CHECK(!memchr(p->name, '=', p->name_len) && !memchr(p->name, ';', p->name_len));
        MK_FUZZ_CHECK(!memchr(p->value, ';', p->value_len));
        prev = p->value + p->value_len;
    }
    MK_FUZZ_CHECK(duda_session_parse_cookie_pairs(h, n, again, max) == got);
    MK_FUZZ_CHECK(got == 0 || memcmp(out, again, got * sizeof(out[0])) == 0);

    /* cookie->get: each pair's name finds the first pair of that name */
    for (size_t i = 0; i < got; i++) {
        size_t j = 0, vlen = 0;
        while (out[j].name_len != out[i].name_len ||
               memcmp(out[j].name, out[i].name, out[i].name_len) != 0) {
            j++;
        }
        const char *v = duda_session_parse_cookie_find(h, n, out[i].name, out[i].name_len, &vlen);
        MK_FUZZ_CHECK(v == out[j].value && vlen == out[j].value_len);
    }
    /* and a name no pair has finds nothing: no pair holds ';' in its name */
    size_t vlen;
    MK_FUZZ_CHECK(duda_session_parse_cookie_find(h, n, "a;b", 3, &vlen) == NULL);
    MK_FUZZ_CHECK(duda_session_parse_cookie_find(h, n, "", 0, &vlen) == NULL);
}

static void fuzz_url(const char *data, size_t n)
{
    char *url = malloc(n + 1);
    char host[64], err[256];
    int port = -1, db = -1;

    if (!url) {
        return;
    }
    memcpy(url, data, n);
    url[n] = '\0';
    err[0] = '\0';
    if (duda_session_parse_redis_url(url, host, sizeof(host), &port, &db, err, sizeof(err)) == 0) {
        MK_FUZZ_CHECK(strncmp(url, "redis://", 8) == 0);
        size_t hl = strnlen(host, sizeof(host));
        MK_FUZZ_CHECK(hl >= 1 && hl < sizeof(host));
        MK_FUZZ_CHECK(port >= 1 && port <= 65535);
        MK_FUZZ_CHECK(db >= 0 && db <= 1000000);
    }
    else {
        MK_FUZZ_CHECK(strnlen(err, sizeof(err)) < sizeof(err) && err[0] != '\0');
    }
    free(url);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    if (data[0] & 1) {
        fuzz_url((const char *) data + 1, size - 1);
    }
    else {
        fuzz_cookies((const char *) data + 1, size - 1);
    }
    return 0;
}
