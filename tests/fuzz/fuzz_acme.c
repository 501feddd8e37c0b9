/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_acme.c: libFuzzer target for plugins/tls/tls_acme_parse.c, what the
 * ACME client reads from an ACME server before cJSON sees the body: the
 * HTTP/1.1 response (status, Replay-Nonce, Location, Retry-After,
 * Content-Length or chunked), the https URLs the server hands out, and
 * base64url.
 *
 * The first input byte chooses (its low two bits). Invariants (each a
 * crash when broken):
 *  0 acme_http_parse on a copy with one byte of room: an accepted response
 *    has a status in 100..599, a body inside the buffer and NUL ended, and
 *    every field it returns inside the buffer and NUL ended;
 *  1 acme_url_parse: an accepted URL has a non-empty host, a port of 1 to
 *    65535 and a path that starts with '/' without spaces or control bytes;
 *  2 base64url: decoding the encoding of the input gives the input back,
 *    and acme_b64url_decode of the input itself never writes past its cap.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/tls/tls_acme_parse.h"

#include "fuzz_check.h"

static void check_field(const char *f, const char *buf, size_t len)
{
    if (f) {
        size_t n = strlen(f);
        MK_FUZZ_CHECK(mk_fuzz_inside(f, n + 1, buf, len + 1));
    }
}

static void check_http(const uint8_t *in, size_t n)
{
    char *buf = malloc(n + 1);
    struct acme_http_resp r;

    memcpy(buf, in, n);
    if (acme_http_parse(buf, n, &r) == 0) {
        MK_FUZZ_CHECK(r.status >= 100 && r.status <= 599);
        MK_FUZZ_CHECK(r.body && mk_fuzz_inside(r.body, r.body_len + 1, buf, n + 1));
        MK_FUZZ_CHECK(r.body[r.body_len] == '\0');
        check_field(r.nonce, buf, n);
        check_field(r.location, buf, n);
        check_field(r.content_type, buf, n);
        MK_FUZZ_CHECK(r.retry_after >= -1);
    }
    free(buf);
}

static void check_url(const uint8_t *in, size_t n)
{
    char *s = malloc(n + 1);
    struct acme_url u;

    memcpy(s, in, n);
    s[n] = '\0';
    if (acme_url_parse(s, &u) == 0) {
        long port = strtol(u.port, NULL, 10);
        MK_FUZZ_CHECK(u.host[0] != '\0');
        MK_FUZZ_CHECK(port >= 1 && port <= 65535);
        MK_FUZZ_CHECK(u.path[0] == '/');
        for (const char *c = u.path; *c; c++) {
            MK_FUZZ_CHECK((unsigned char) *c > 0x20 && (unsigned char) *c < 0x7f);
        }
    }
    free(s);
}

static void check_b64(const uint8_t *in, size_t n)
{
    char *enc = malloc(ACME_B64_LEN(n) + 1);
    unsigned char *dec = malloc(n + 1);
    size_t elen = acme_b64url(in, n, enc);

    MK_FUZZ_CHECK(elen == ACME_B64_LEN(n) && enc[elen] == '\0');
    MK_FUZZ_CHECK(acme_b64url_decode(enc, elen, dec, n + 1) == (long) n);
    MK_FUZZ_CHECK(memcmp(dec, in, n) == 0);
    size_t cap = n / 2;
    unsigned char *small = malloc(cap + 1);
    long got = acme_b64url_decode((const char *) in, n, small, cap);
    MK_FUZZ_CHECK(got <= (long) cap);
    free(small);
    free(enc);
    free(dec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    switch (data[0] & 3) {
    case 0:
    case 3:
        check_http(data + 1, size - 1);
        break;
    case 1:
        check_url(data + 1, size - 1);
        break;
    default:
        check_b64(data + 1, size - 1);
        break;
    }
    return 0;
}
