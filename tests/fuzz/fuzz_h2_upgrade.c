/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_h2_upgrade.c: libFuzzer target for server/proto/h2_upgrade.c: whether an
 * HTTP/1.1 request asks to continue in cleartext HTTP/2 (Upgrade: h2c) and
 * the SETTINGS its HTTP2-Settings header carries in base64url.
 *
 * The first input byte gives the room for the settings (its low seven
 * bits, as a count of 6-byte settings) and the version (bit 7: HTTP/1.0);
 * the rest is the head's field lines, after "GET / HTTP/1.x" and
 * "Host: h", ended by an empty line. Invariants for every head the parser
 * accepts (each a crash when broken):
 *  - the answer agrees with a model: HTTP/1.1; Upgrade holding the token
 *    h2c and Connection the tokens upgrade and http2-settings (comma-
 *    separated lists, any case, optional whitespace); no body (chunked, a
 *    Content-Length above 0, a Transfer-Encoding); exactly one
 *    HTTP2-Settings, whose value decodes as base64url (trailing '=' are
 *    dropped; a length of 4k + 1 is not base 64) into a whole number of
 *    6-byte settings that fits the room;
 *  - the settings are the model's decoded bytes, written within the room
 *    (a buffer of exactly its size).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/proto/h2.h"
#include "server/http/http.h"

#include "fuzz_check.h"

/* Does the comma-separated list v hold `token` (any case)? */
static bool model_list_has(const struct mk_str *v, const char *token)
{
    size_t tl = strlen(token), start = 0;
    for (size_t i = 0; i <= v->len; i++) {
        if (i < v->len && v->p[i] != ',') {
            continue;
        }
        size_t a = start, b = i;
        while (a < b && (v->p[a] == ' ' || v->p[a] == '\t')) {
            a++;
        }
        while (b > a && (v->p[b - 1] == ' ' || v->p[b - 1] == '\t')) {
            b--;
        }
        if (b - a == tl && strncasecmp(v->p + a, token, tl) == 0) {
            return true;
        }
        start = i + 1;
    }
    return false;
}

/* base64url into out (room enough): the length, or -1. */
static ssize_t model_b64url(const char *in, size_t len, uint8_t *out)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint64_t bits = 0;
    unsigned have = 0;
    size_t o = 0;

    while (len && in[len - 1] == '=') {
        len--;
    }
    if (len % 4 == 1) {
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        const char *p = in[i] ? strchr(alphabet, in[i]) : NULL;
        if (!p) {
            return -1;
        }
        bits = bits << 6 | (uint64_t) (p - alphabet);
        have += 6;
        if (have >= 8) {
            have -= 8;
            out[o++] = (uint8_t) (bits >> have);
        }
    }
    return (ssize_t) o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    size_t cap = (size_t) (data[0] & 0x7f) * 6;
    bool v10 = data[0] & 0x80;
    static const char pre11[] = "GET / HTTP/1.1\r\nHost: h\r\n", pre10[] = "GET / HTTP/1.0\r\n";
    const char *pre = v10 ? pre10 : pre11;
    size_t pl = strlen(pre), n = size - 1;
    char *text = malloc(pl + n + 2);
    memcpy(text, pre, pl);
    memcpy(text + pl, data + 1, n);
    memcpy(text + pl + n, "\r\n", 2);
    size_t len = pl + n + 2;

    struct mk_http_header headers[64];
    struct mk_http_head head;
    memset(&head, 0, sizeof(head));
    if (mk_http_parse(&head, text, len, headers, 64) != (ssize_t) len) {
        free(text);
        return 0;
    }

    uint8_t *settings = malloc(cap ? cap : 1);
    size_t got_len = 0;
    bool got = mk_h2_upgrade_wanted(&head, settings, cap, &got_len);

    /* the model */
    const struct mk_str *up = mk_http_header_get(&head, "upgrade");
    const struct mk_str *conn = mk_http_header_get(&head, "connection");
    const struct mk_str *value = NULL;
    unsigned n_settings = 0;
    for (unsigned i = 0; i < head.n_headers; i++) {
        if (head.headers[i].name.len == 14 &&
            strncasecmp(head.headers[i].name.p, "http2-settings", 14) == 0) {
            value = &head.headers[i].value;
            n_settings++;
        }
    }
    bool want = head.version == 11 && up && conn && model_list_has(up, "h2c") &&
                model_list_has(conn, "upgrade") && model_list_has(conn, "http2-settings") &&
                !(head.flags & MK_HEAD_CHUNKED) && head.content_length == 0 &&
                !mk_http_header_get(&head, "transfer-encoding") && n_settings == 1;
    uint8_t *model = malloc(value ? value->len + 1 : 1);
    ssize_t m = want ? model_b64url(value->p, value->len, model) : -1;
    want = want && m >= 0 && (size_t) m <= cap && m % 6 == 0;
    MK_FUZZ_CHECK(got == want);
    if (got) {
        MK_FUZZ_CHECK(got_len == (size_t) m && memcmp(settings, model, got_len) == 0);
    }
    free(model);
    free(settings);
    free(text);
    return 0;
}
