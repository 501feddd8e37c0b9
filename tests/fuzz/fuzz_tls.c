/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_tls.c: libFuzzer target for plugins/tls/tls_parse.c, what the tls
 * plugin reads from a client without OpenSSL: the ClientHello's
 * server_name extension (before OpenSSL checks it), the ALPN list, and the
 * Host and path of a plain HTTP request it redirects.
 *
 * The first input byte chooses (its low two bits) and sizes (the rest).
 * Invariants (each a crash when broken):
 *  0 tls_sni_host agrees with a model walk of RFC 6066's ServerNameList
 *    (the first host_name entry; the list's length must be exact), into a
 *    buffer of 1 to 64 bytes: a name is NUL terminated, non-empty, without
 *    NUL, fits, and is the entry's bytes; a refusal writes nothing;
 *  1 tls_alpn_find gives, for "h2" and "http/1.1", the first entry of a
 *    model walk of the list equal to it (a pointer into the list), or
 *    NULL;
 *  2 tls_host_ok and tls_name_matches (input: pattern, NUL, name) agree
 *    with a model (lower case both, drop a final '.', a "*." pattern
 *    matches any name ending with its rest after one byte or more);
 *  3 tls_path_encode writes at most three bytes per byte, only pchar, '/'
 *    and %XX, and decoding %XX gives the path back.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/tls/tls_parse.h"

#include "fuzz_check.h"

static void check_sni(uint8_t sel, const unsigned char *in, size_t n)
{
    size_t size = 1 + (size_t) (sel >> 2); /* 1 to 64 */
    char *buf = malloc(size);
    memset(buf, 'Z', size);
    bool ok = tls_sni_host(in, n, buf, size);

    /* the model */
    const unsigned char *want = NULL;
    size_t want_len = 0;
    bool list_ok = n >= 2 && (size_t) (in[0] * 256 + in[1]) == n - 2;
    for (size_t i = 2; list_ok && i + 3 <= n;) {
        size_t len = (size_t) (in[i + 1] * 256 + in[i + 2]);
        if (i + 3 + len > n) {
            break; /* malformed: no name */
        }
        if (in[i] == 0) {
            want = in + i + 3;
            want_len = len;
            break;
        }
        i += 3 + len;
    }
    bool want_ok = want && want_len > 0 && want_len < size && !memchr(want, '\0', want_len);
    MK_FUZZ_CHECK(ok == want_ok);
    if (ok) {
        MK_FUZZ_CHECK(buf[want_len] == '\0' && memcmp(buf, want, want_len) == 0);
    }
    else {
        for (size_t i = 0; i < size; i++) {
            MK_FUZZ_CHECK(buf[i] == 'Z');
        }
    }
    free(buf);
}

static void check_alpn(const unsigned char *in, size_t n)
{
    static const char *const protos[] = {"h2", "http/1.1", ""};
    unsigned len = n > 65535 ? 65535 : (unsigned) n;

    for (size_t k = 0; k < sizeof(protos) / sizeof(protos[0]); k++) {
        size_t pl = strlen(protos[k]);
        const unsigned char *want = NULL;
        for (size_t i = 0; i < len;) {
            size_t el = in[i];
            if (i + 1 + el > len) {
                break;
            }
            if (el == pl && memcmp(in + i + 1, protos[k], pl) == 0) {
                want = in + i + 1;
                break;
            }
            i += 1 + el;
        }
        const unsigned char *got = tls_alpn_find(in, len, protos[k], pl);
        MK_FUZZ_CHECK(got == want);
    }
}

static void check_names(const char *in, size_t n)
{
    const char *nul = memchr(in, '\0', n);
    char pattern[300];
    size_t pl = nul ? (size_t) (nul - in) : 0;
    if (!nul || pl >= sizeof(pattern)) {
        bool ok = tls_host_ok(in, n);
        bool want = n >= 1 && n <= 253;
        for (size_t i = 0; i < n && want; i++) {
            want = isalnum((unsigned char) in[i]) || in[i] == '-' || in[i] == '.';
        }
        MK_FUZZ_CHECK(ok == want);
        return;
    }
    memcpy(pattern, in, pl);
    pattern[pl] = '\0';
    const char *name = nul + 1;
    size_t nl = n - pl - 1;
    char *copy = malloc(nl ? nl : 1); /* exactly the name: overruns are seen */
    memcpy(copy, name, nl);
    bool got = tls_name_matches(pattern, copy, nl);

    /* the model, on lower-case copies without a final '.' */
    char p[300], *h = malloc(nl + 1);
    size_t a = pl, b = nl;
    for (size_t i = 0; i < pl; i++) {
        p[i] = (char) tolower((unsigned char) pattern[i]);
    }
    for (size_t i = 0; i < nl; i++) {
        h[i] = (char) tolower((unsigned char) name[i]);
    }
    if (a && p[a - 1] == '.') {
        a--;
    }
    if (b && h[b - 1] == '.') {
        b--;
    }
    bool want;
    if (a > 2 && p[0] == '*' && p[1] == '.') {
        size_t rest = a - 1; /* ".example.com" */
        want = b > rest && memcmp(h + b - rest, p + 1, rest) == 0;
    }
    else {
        want = a == b && memcmp(p, h, a) == 0;
    }
    MK_FUZZ_CHECK(got == want);
    free(h);
    free(copy);
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void check_path(const char *in, size_t n)
{
    char *out = malloc(3 * n + 1), *back = malloc(n + 1);
    size_t o = tls_path_encode(in, n, out), b = 0;

    MK_FUZZ_CHECK(o <= 3 * n && o >= n);
    for (size_t i = 0; i < o; i++) {
        char c = out[i];
        if (c == '%') {
            MK_FUZZ_CHECK(i + 2 < o && hexval(out[i + 1]) >= 0 && hexval(out[i + 2]) >= 0);
            back[b++] = (char) (hexval(out[i + 1]) * 16 + hexval(out[i + 2]));
            i += 2;
            continue;
        }
        MK_FUZZ_CHECK(isalnum((unsigned char) c) || (c && strchr("-._~!$&'()*+,;=:@/", c)));
        back[b++] = c;
    }
    MK_FUZZ_CHECK(b == n && memcmp(back, in, n) == 0);
    free(out);
    free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    size_t n = size - 1;
    unsigned char *in = malloc(n ? n : 1); /* exactly the bytes: overruns are seen */
    memcpy(in, data + 1, n);
    switch (data[0] & 3) {
    case 0:
        check_sni(data[0], in, n);
        break;
    case 1:
        check_alpn(in, n);
        break;
    case 2:
        check_names((const char *) in, n);
        break;
    default:
        check_path((const char *) in, n);
        break;
    }
    free(in);
    return 0;
}
