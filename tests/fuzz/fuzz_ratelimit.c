/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_ratelimit.c: libFuzzer target for server/http/ratelimit.c: the
 * RateLimit line of a [RULE] (mk_rate_limit_parse), and the cookie a key
 * names read from a client's Cookie field (mk_rate_cookie).
 *
 * Input: the RateLimit value up to the first NUL, then a cookie name up to
 * the next, then the Cookie field (the rest).
 * Invariants (each a crash when broken):
 *  - a line accepted has a rate of 1 to MK_RATE_MAX, an interval of at
 *    least 1 us, a burst and a table size within their bounds, and a name
 *    (a token, NUL-terminated, of name_len bytes) exactly for a field or
 *    cookie key; a line refused leaves no name behind;
 *  - a cookie found lies inside the field and holds no ';'.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <monkey/mk_common.h>

#include "server/http/ratelimit.h"

#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *) data, *end = in + size;
    const char *z = memchr(in, '\0', size);
    size_t vlen = z ? (size_t) (z - in) : size;
    char *value = malloc(vlen + 1);
    char reason[256];
    struct mk_rate_limit l;

    memcpy(value, in, vlen);
    value[vlen] = '\0';
    if (mk_rate_limit_parse(&l, value, reason, sizeof(reason)) == MK_OK) {
        MK_FUZZ_CHECK(l.rate >= 1 && l.rate <= MK_RATE_MAX && l.interval_us >= 1);
        MK_FUZZ_CHECK(l.burst <= MK_RATE_BURST_MAX && l.keys <= MK_RATE_KEYS_MAX);
        MK_FUZZ_CHECK(l.delay_free <= MK_RATE_BURST_MAX && (l.delay || l.delay_free == 0));
        bool named = l.key == MK_RATE_KEY_HEADER || l.key == MK_RATE_KEY_COOKIE;
        MK_FUZZ_CHECK(named == (l.name != NULL));
        MK_FUZZ_CHECK(!named || (l.name_len > 0 && strlen(l.name) == l.name_len));
        mk_rate_limit_free(&l);
    }
    else {
        MK_FUZZ_CHECK(l.name == NULL);
    }
    free(value);
    if (!z) {
        return 0;
    }
    const char *name = z + 1, *nz = memchr(name, '\0', (size_t) (end - name));
    if (!nz) {
        return 0;
    }
    struct mk_str field = mk_str_make(nz + 1, (size_t) (end - nz - 1)), out;
    if (mk_rate_cookie(field, name, (size_t) (nz - name), &out)) {
        MK_FUZZ_CHECK(mk_fuzz_inside(out.p, out.len, field.p, field.len));
        MK_FUZZ_CHECK(!memchr(out.p, ';', out.len));
    }
    return 0;
}
