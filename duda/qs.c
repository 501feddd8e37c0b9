/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/qs.c: query strings, for the qs object (see qs.h). Pure.
 */
#include <string.h>

#include <monkey/mk_util.h>

#include "qs.h"

const char *duda_qs_find(const char *q, size_t n, const char *key, size_t key_len, size_t *len)
{
    while (q && n) {
        const char *amp = memchr(q, '&', n);
        size_t pn = amp ? (size_t) (amp - q) : n;
        const char *eq = memchr(q, '=', pn);
        size_t name_n = eq ? (size_t) (eq - q) : pn;
        if (pn > 0 && name_n == key_len && memcmp(q, key, key_len) == 0) {
            *len = eq ? pn - name_n - 1 : 0;
            return eq ? eq + 1 : q + pn;
        }
        if (!amp) {
            break;
        }
        n -= pn + 1;
        q = amp + 1;
    }
    return NULL;
}

size_t duda_qs_count(const char *q, size_t n)
{
    size_t count = 0;

    while (q && n) {
        const char *amp = memchr(q, '&', n);
        size_t pn = amp ? (size_t) (amp - q) : n;
        count += pn > 0;
        if (!amp) {
            break;
        }
        n -= pn + 1;
        q = amp + 1;
    }
    return count;
}

size_t duda_qs_decode(const char *v, size_t n, char *out)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (v[i] == '+') {
            out[o++] = ' ';
        }
        else if (v[i] == '%' && n - i > 2 && (hi = mk_hex_digit(v[i + 1])) >= 0 &&
                 (lo = mk_hex_digit(v[i + 2])) >= 0) {
            out[o++] = (char) (hi * 16 + lo);
            i += 2;
        }
        else {
            out[o++] = v[i];
        }
    }
    return o;
}
