/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_fcgi_responder.c: libFuzzer target for the parsers of the example
 * FastCGI responder (examples/fastcgi_responder), which reads what a web
 * server sends: a PARAMS stream's name-value pairs (pair_length, param)
 * and the query string's arguments (query_arg). The example is compiled
 * here whole (its main() renamed), so its static functions are reached.
 *
 * The first input byte sizes the output buffer (1 to 64 bytes); the rest
 * is a PARAMS stream, and, up to its first NUL, a query. Invariants (each
 * a crash when broken):
 *  - param gives, for each name a model walk of the pairs finds (1- and
 *    4-byte lengths; a pair past the end stops the walk), the value of its
 *    first pair, cut to the buffer and NUL terminated;
 *  - query_arg gives the first "key=" argument's raw value, cut likewise.
 */
#include <stdint.h>

int fcgi_responder_main(int argc, char **argv);
#define main fcgi_responder_main
#include "examples/fastcgi_responder/fastcgi_responder.c"
#undef main

#include "fuzz_check.h"

/* The model: the pair at *pos (1- or 4-byte lengths), false past the end. */
static bool model_pair(const uint8_t *b, size_t len, size_t *pos, const uint8_t **name, size_t *nl,
                       const uint8_t **value, size_t *vl)
{
    size_t l[2];
    for (int k = 0; k < 2; k++) {
        if (*pos >= len) {
            return false;
        }
        if (b[*pos] < 0x80) {
            l[k] = b[(*pos)++];
            continue;
        }
        if (len - *pos < 4) {
            return false;
        }
        l[k] = (size_t) (b[*pos] & 0x7f) << 24 | (size_t) b[*pos + 1] << 16 |
               (size_t) b[*pos + 2] << 8 | b[*pos + 3];
        *pos += 4;
    }
    if (l[0] + l[1] > len - *pos) {
        return false;
    }
    *name = b + *pos;
    *nl = l[0];
    *value = b + *pos + l[0];
    *vl = l[1];
    *pos += l[0] + l[1];
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    size_t cap = 1 + (data[0] & 63), len = size - 1;
    uint8_t *b = malloc(len ? len : 1); /* exactly the stream: overruns are seen */
    char *out = malloc(cap), name[300];
    memcpy(b, data + 1, len);

    /* each pair's name finds its first pair's value */
    size_t pos = 0;
    const uint8_t *n, *v;
    size_t nl, vl;
    while (model_pair(b, len, &pos, &n, &nl, &v, &vl)) {
        if (nl >= sizeof(name) || memchr(n, '\0', nl)) {
            continue; /* param() takes a C string */
        }
        memcpy(name, n, nl);
        name[nl] = '\0';
        size_t p2 = 0;
        const uint8_t *n2, *v2 = NULL;
        size_t nl2, vl2 = 0;
        while (model_pair(b, len, &p2, &n2, &nl2, &v2, &vl2) &&
               !(nl2 == nl && memcmp(n2, name, nl) == 0)) {
        }
        const char *got = param(b, len, name, out, cap);
        size_t want = vl2 < cap - 1 ? vl2 : cap - 1;
        MK_FUZZ_CHECK(got == out && out[want] == '\0' && memcmp(out, v2, want) == 0);
    }

    /* the query: the stream's bytes up to a NUL */
    char *q = malloc(len + 1);
    size_t ql = strnlen((const char *) b, len);
    memcpy(q, b, ql);
    q[ql] = '\0';
    for (const char *p = q; *p;) {
        const char *amp = strchr(p, '&');
        size_t pl = amp ? (size_t) (amp - p) : strlen(p);
        const char *eq = memchr(p, '=', pl);
        if (eq && eq > p && (size_t) (eq - p) < sizeof(name)) {
            memcpy(name, p, (size_t) (eq - p));
            name[eq - p] = '\0';
            /* the first argument with this key */
            const char *first = NULL;
            size_t fl = 0;
            for (const char *r = q; *r && !first;) {
                const char *a2 = strchr(r, '&');
                size_t l2 = a2 ? (size_t) (a2 - r) : strlen(r);
                size_t kl = strlen(name);
                if (l2 > kl && memcmp(r, name, kl) == 0 && r[kl] == '=') {
                    first = r + kl + 1;
                    fl = l2 - kl - 1;
                }
                r += l2 + (a2 ? 1 : 0);
            }
            const char *got = query_arg(q, name, out, cap);
            size_t want = fl < cap - 1 ? fl : cap - 1;
            MK_FUZZ_CHECK(first && got == out && out[want] == '\0' &&
                          memcmp(out, first, want) == 0);
        }
        p += pl + (amp ? 1 : 0);
    }
    free(q);
    free(out);
    free(b);
    return 0;
}
