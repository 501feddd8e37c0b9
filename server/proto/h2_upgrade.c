/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * h2_upgrade.c: whether an HTTP/1.1 request head asks to continue in
 * cleartext HTTP/2 (`Upgrade: h2c`, RFC 7540 section 3.2; optional in RFC
 * 9113), and the client's SETTINGS it carries (HTTP2-Settings, base64url).
 * Pure: h1.c asks, h2.c (mk_h2_start_upgrade) switches.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include "h2.h"
#include "../http/http.h"

/* Does the comma-separated list `v` hold `token` (case-insensitive)? */
static bool mk_h2_list_has(const struct mk_str *v, const char *token)
{
    size_t tlen = strlen(token);
    size_t i = 0;

    while (i < v->len) {
        while (i < v->len && (v->p[i] == ' ' || v->p[i] == '\t' || v->p[i] == ',')) {
            i++;
        }
        size_t start = i;
        while (i < v->len && v->p[i] != ',') {
            i++;
        }
        size_t end = i;
        while (end > start && (v->p[end - 1] == ' ' || v->p[end - 1] == '\t')) {
            end--;
        }
        if (end - start == tlen && strncasecmp(v->p + start, token, tlen) == 0) {
            return true;
        }
    }
    return false;
}

static int mk_h2_b64url_value(char ch)
{
    if (ch >= 'A' && ch <= 'Z') {
        return ch - 'A';
    }
    if (ch >= 'a' && ch <= 'z') {
        return ch - 'a' + 26;
    }
    if (ch >= '0' && ch <= '9') {
        return ch - '0' + 52;
    }
    if (ch == '-') {
        return 62;
    }
    if (ch == '_') {
        return 63;
    }
    return -1;
}

/* base64url (trailing '=' allowed) into out (cap bytes): the length, or -1. */
static ssize_t mk_h2_b64url_decode(const char *in, size_t len, uint8_t *out, size_t cap)
{
    uint32_t acc = 0;
    unsigned bits = 0;
    size_t n = 0;

    while (len > 0 && in[len - 1] == '=') {
        len--;
    }
    if (len % 4 == 1) {
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        int v = mk_h2_b64url_value(in[i]);
        if (v < 0) {
            return -1;
        }
        acc = (acc << 6) | (uint32_t) v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n == cap) {
                return -1;
            }
            out[n++] = (uint8_t) (acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    return (ssize_t) n;
}

bool mk_h2_upgrade_wanted(const struct mk_http_head *head, uint8_t *settings, size_t cap,
                          size_t *len)
{
    const struct mk_str *upgrade = mk_http_header_get(head, "upgrade");
    const struct mk_str *connection = mk_http_header_get(head, "connection");
    const struct mk_str *value = NULL;
    unsigned n_settings = 0;

    if (head->version != 11 || !upgrade || !connection || !mk_h2_list_has(upgrade, "h2c") ||
        !mk_h2_list_has(connection, "upgrade") || !mk_h2_list_has(connection, "http2-settings")) {
        return false;
    }
    /* a body would have to be read over HTTP/1 first: answer it there */
    if ((head->flags & MK_HEAD_CHUNKED) || head->content_length > 0 ||
        mk_http_header_get(head, "transfer-encoding")) {
        return false;
    }
    for (unsigned i = 0; i < head->n_headers; i++) {
        const struct mk_str *name = &head->headers[i].name;
        if (name->len == 14 && strncasecmp(name->p, "http2-settings", 14) == 0) {
            value = &head->headers[i].value;
            n_settings++;
        }
    }
    if (n_settings != 1) {
        return false; /* RFC 7540 section 3.2.1: exactly one */
    }
    ssize_t n = mk_h2_b64url_decode(value->p, value->len, settings, cap);
    if (n < 0 || n % 6 != 0) {
        return false; /* not a SETTINGS payload: stay with HTTP/1.1 */
    }
    *len = (size_t) n;
    return true;
}
