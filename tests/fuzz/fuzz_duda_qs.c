/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_duda_qs.c: libFuzzer target for duda/qs.c, the query strings a
 * client sends to a Duda service (qs->get, qs->get_raw, qs->count).
 *
 * Input: a key, a NUL byte, then the query (no NUL: the whole input is the
 * query and the key is its first pair's). Invariants (each a crash when
 * broken):
 *  - duda_qs_find agrees with a model that splits the query at every '&'
 *    and each non-empty pair at its first '=': the first pair with that
 *    key, its value a span inside the query (empty for a pair without '=');
 *  - duda_qs_count is the model's number of non-empty pairs;
 *  - duda_qs_decode never writes more bytes than it reads and agrees with
 *    a model decoder; decoding what a model encoder made of the decoded
 *    bytes gives them back;
 *  - the query is read within its length (a buffer of exactly its size).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "duda/qs.h"

#include "fuzz_check.h"

/* The model: pair k of the query, split naively. */
static bool model_pair(const char *q, size_t n, size_t k, const char **pair, size_t *len)
{
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || q[i] == '&') {
            if (k == 0) {
                *pair = q + start;
                *len = i - start;
                return true;
            }
            k--;
            start = i + 1;
        }
    }
    return false;
}

static int model_hex(unsigned char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c |= 0x20; /* 'A'..'F' to 'a'..'f' */
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static size_t model_decode(const char *v, size_t n, char *out)
{
    size_t o = 0, i = 0;
    while (i < n) {
        if (v[i] == '%' && i + 2 < n && model_hex((unsigned char) v[i + 1]) >= 0 &&
            model_hex((unsigned char) v[i + 2]) >= 0) {
            out[o++] = (char) (model_hex((unsigned char) v[i + 1]) * 16 +
                               model_hex((unsigned char) v[i + 2]));
            i += 3;
            continue;
        }
        out[o++] = v[i] == '+' ? ' ' : v[i];
        i++;
    }
    return o;
}

/* Every byte but letters and digits as %XX, a space as '+'. */
static size_t model_encode(const char *v, size_t n, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char) v[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
            out[o++] = (char) c;
        }
        else if (c == ' ') {
            out[o++] = '+';
        }
        else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *) data;
    const char *nul = memchr(in, '\0', size);
    const char *src = nul ? nul + 1 : in;
    size_t n = nul ? size - (size_t) (src - in) : size;
    char *q = malloc(n ? n : 1);
    memcpy(q, src, n);

    const char *key;
    size_t key_len;
    if (nul) {
        key = in;
        key_len = (size_t) (nul - in);
    }
    else {
        const char *first = q;
        size_t fl = 0;
        model_pair(q, n, 0, &first, &fl);
        const char *eq = memchr(first, '=', fl);
        key = first;
        key_len = eq ? (size_t) (eq - first) : fl;
    }

    /* find, against the model */
    size_t len = 0, count = 0;
    const char *v = duda_qs_find(q, n, key, key_len, &len);
    const char *want = NULL;
    size_t want_len = 0;
    const char *pair;
    size_t pl;
    for (size_t k = 0; n && model_pair(q, n, k, &pair, &pl); k++) {
        const char *eq = memchr(pair, '=', pl);
        size_t nl = eq ? (size_t) (eq - pair) : pl;
        count += pl > 0;
        if (!want && pl > 0 && nl == key_len && memcmp(pair, key, key_len) == 0) {
            want = eq ? eq + 1 : pair + pl;
            want_len = eq ? pl - nl - 1 : 0;
        }
    }
    MK_FUZZ_CHECK(v == want);
    if (v) {
        MK_FUZZ_CHECK(len == want_len && mk_fuzz_inside(v, len, q, n));
    }
    MK_FUZZ_CHECK(duda_qs_count(q, n) == count);

    /* decode the whole query, against the model, and back */
    char *out = malloc(n + 1), *model = malloc(n + 1), *enc = malloc(3 * n + 1),
         *again = malloc(3 * n + 1);
    size_t o = duda_qs_decode(q, n, out);
    MK_FUZZ_CHECK(o <= n);
    MK_FUZZ_CHECK(o == model_decode(q, n, model) && memcmp(out, model, o) == 0);
    size_t e = model_encode(out, o, enc);
    size_t a = duda_qs_decode(enc, e, again);
    MK_FUZZ_CHECK(a == o && memcmp(again, out, o) == 0);
    free(out);
    free(model);
    free(enc);
    free(again);
    free(q);
    return 0;
}
