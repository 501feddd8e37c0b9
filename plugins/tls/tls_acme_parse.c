/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls_acme_parse.c: base64url, https URLs and HTTP/1.1 responses for the
 * ACME client (tls_acme_parse.h). Pure: bytes in, a result out.
 *
 * What it guarantees: acme_http_parse never reads past `len` bytes nor
 * writes past len + 1; a response it accepts has a status in 100..599, a
 * body inside the buffer, and every field it returns NUL ended.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <monkey/mk_common.h>

#include "tls_acme_parse.h"

static const char acme_b64_abc[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t acme_b64url(const unsigned char *in, size_t n, char *out)
{
    size_t o = 0, i = 0;

    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t) in[i] << 16 | (uint32_t) in[i + 1] << 8 | in[i + 2];
        out[o++] = acme_b64_abc[v >> 18 & 63];
        out[o++] = acme_b64_abc[v >> 12 & 63];
        out[o++] = acme_b64_abc[v >> 6 & 63];
        out[o++] = acme_b64_abc[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t) in[i] << 16;
        out[o++] = acme_b64_abc[v >> 18 & 63];
        out[o++] = acme_b64_abc[v >> 12 & 63];
    }
    else if (n - i == 2) {
        uint32_t v = (uint32_t) in[i] << 16 | (uint32_t) in[i + 1] << 8;
        out[o++] = acme_b64_abc[v >> 18 & 63];
        out[o++] = acme_b64_abc[v >> 12 & 63];
        out[o++] = acme_b64_abc[v >> 6 & 63];
    }
    out[o] = '\0';
    return o;
}

static int acme_b64_value(unsigned char c)
{
    const char *p = c ? memchr(acme_b64_abc, c, 64) : NULL;
    return p ? (int) (p - acme_b64_abc) : -1;
}

long acme_b64url_decode(const char *in, size_t n, unsigned char *out, size_t cap)
{
    uint32_t acc = 0;
    size_t o = 0;
    int bits = 0;

    while (n > 0 && in[n - 1] == '=') {
        n--;
    }
    if (n % 4 == 1) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        int v = acme_b64_value((unsigned char) in[i]);
        if (v < 0) {
            return -1;
        }
        acc = (acc << 6 | (uint32_t) v) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o >= cap) {
                return -1;
            }
            out[o++] = (unsigned char) (acc >> bits);
        }
    }
    return (long) o;
}

int acme_url_parse(const char *url, struct acme_url *out)
{
    const char *p, *host_end, *path;
    size_t hlen;

    if (strncasecmp(url, "https://", 8) != 0) {
        return MK_ERR;
    }
    p = url + 8;
    path = p + strcspn(p, "/?#");
    if (*path == '#') {
        return MK_ERR;
    }
    snprintf(out->port, sizeof(out->port), "443");
    if (*p == '[') {
        host_end = memchr(p, ']', (size_t) (path - p));
        if (!host_end) {
            return MK_ERR;
        }
        hlen = (size_t) (host_end - p - 1);
        p++;
        host_end++;
    }
    else {
        host_end = memchr(p, ':', (size_t) (path - p));
        host_end = host_end ? host_end : path;
        hlen = (size_t) (host_end - p);
    }
    if (hlen == 0 || hlen >= sizeof(out->host) || memchr(p, '@', hlen)) {
        return MK_ERR;
    }
    memcpy(out->host, p, hlen);
    out->host[hlen] = '\0';
    if (host_end < path) {
        if (*host_end != ':') {
            return MK_ERR;
        }
        size_t plen = (size_t) (path - host_end - 1);
        if (plen == 0 || plen >= 6 || strspn(host_end + 1, "0123456789") < plen) {
            return MK_ERR;
        }
        memcpy(out->port, host_end + 1, plen);
        out->port[plen] = '\0';
        long port = strtol(out->port, NULL, 10);
        if (port < 1 || port > 65535) {
            return MK_ERR;
        }
    }
    size_t rest = strlen(path);
    if (rest + 2 > sizeof(out->path)) {
        return MK_ERR;
    }
    if (*path != '/') {
        out->path[0] = '/';
        memcpy(out->path + 1, path, rest + 1);
    }
    else {
        memcpy(out->path, path, rest + 1);
    }
    for (const char *c = out->path; *c; c++) {
        if ((unsigned char) *c <= 0x20 || (unsigned char) *c >= 0x7f) {
            return MK_ERR;
        }
    }
    return MK_OK;
}

/* The end of the line starting at p (its CR or LF) within end, or NULL. */
static char *acme_line_end(char *p, const char *end)
{
    char *lf = memchr(p, '\n', (size_t) (end - p));
    if (!lf) {
        return NULL;
    }
    return lf > p && lf[-1] == '\r' ? lf - 1 : lf;
}

/* Decode a chunked body at p..end in place; its length, or -1. */
static long acme_unchunk(char *p, char *end)
{
    char *const start = p;
    char *w = p;

    for (;;) {
        char *eol = acme_line_end(p, end);
        if (!eol) {
            return -1;
        }
        char *q = p;
        unsigned long size = 0;
        int digits = 0;
        for (; q < eol; q++) {
            int v = *q >= '0' && *q <= '9'   ? *q - '0'
                    : *q >= 'a' && *q <= 'f' ? *q - 'a' + 10
                    : *q >= 'A' && *q <= 'F' ? *q - 'A' + 10
                                             : -1;
            if (v < 0) {
                break;
            }
            if (++digits > 8) {
                return -1;
            }
            size = size * 16 + (unsigned long) v;
        }
        if (digits == 0 || (q < eol && *q != ';' && *q != ' ')) {
            return -1;
        }
        p = eol + (*eol == '\r' ? 2 : 1);
        if (p > end) {
            return -1;
        }
        if (size == 0) {
            return (long) (w - start); /* trailers, if any, are not needed */
        }
        if ((size_t) (end - p) < size + 1) {
            return -1;
        }
        memmove(w, p, size);
        w += size;
        p += size;
        if (*p == '\r') {
            p++;
        }
        if (p >= end || *p != '\n') {
            return -1;
        }
        p++;
    }
}

/* Field `name` on the line [p, eol), value NUL ended in place; NULL when it is another field. */
static const char *acme_field(char *p, char *eol, const char *name)
{
    size_t n = strlen(name);
    if ((size_t) (eol - p) <= n || strncasecmp(p, name, n) != 0 || p[n] != ':') {
        return NULL;
    }
    char *v = p + n + 1;
    while (v < eol && (*v == ' ' || *v == '\t')) {
        v++;
    }
    char *e = eol;
    while (e > v && (e[-1] == ' ' || e[-1] == '\t')) {
        e--;
    }
    *e = '\0';
    return v;
}

int acme_http_parse(char *buf, size_t len, struct acme_http_resp *out)
{
    char *end = buf + len, *p = buf, *eol;
    long content_length = -1;
    bool chunked = false;

    memset(out, 0, sizeof(*out));
    out->retry_after = -1;
    buf[len] = '\0';
    eol = acme_line_end(p, end);
    if (!eol || eol - p < 12 || strncmp(p, "HTTP/1.", 7) != 0 || p[8] != ' ') {
        return MK_ERR;
    }
    for (int i = 9; i < 12; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return MK_ERR;
        }
        out->status = out->status * 10 + (p[i] - '0');
    }
    if (out->status < 100 || out->status > 599) {
        return MK_ERR;
    }
    char *next = eol + (*eol == '\r' ? 2 : 1);
    for (;;) {
        p = next;
        if (p > end) {
            return MK_ERR;
        }
        eol = acme_line_end(p, end);
        if (!eol) {
            return MK_ERR;
        }
        next = eol + (*eol == '\r' ? 2 : 1);
        if (eol == p) {
            break;
        }
        const char *v;
        if ((v = acme_field(p, eol, "Replay-Nonce"))) {
            out->nonce = v;
        }
        else if ((v = acme_field(p, eol, "Location"))) {
            out->location = v;
        }
        else if ((v = acme_field(p, eol, "Content-Type"))) {
            out->content_type = v;
        }
        else if ((v = acme_field(p, eol, "Retry-After"))) {
            if (*v >= '0' && *v <= '9' && strlen(v) < 9) {
                out->retry_after = strtol(v, NULL, 10);
            }
        }
        else if ((v = acme_field(p, eol, "Content-Length"))) {
            if (!*v || strspn(v, "0123456789") != strlen(v) || strlen(v) > 9) {
                return MK_ERR;
            }
            content_length = strtol(v, NULL, 10);
        }
        else if ((v = acme_field(p, eol, "Transfer-Encoding"))) {
            chunked = strcasecmp(v, "chunked") == 0;
            if (!chunked) {
                return MK_ERR;
            }
        }
    }
    p = next;
    if (p > end) {
        return MK_ERR;
    }
    out->body = p;
    if (chunked) {
        long n = acme_unchunk(p, end);
        if (n < 0) {
            return MK_ERR;
        }
        out->body_len = (size_t) n;
    }
    else if (content_length >= 0) {
        if ((size_t) (end - p) < (size_t) content_length) {
            return MK_ERR;
        }
        out->body_len = (size_t) content_length;
    }
    else {
        out->body_len = (size_t) (end - p);
    }
    out->body[out->body_len] = '\0';
    return MK_OK;
}
