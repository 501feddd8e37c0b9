/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * http_fields.c: pure readers of header field values the static handler
 * needs (Range, entity-tag lists) and the status reason phrases.
 */
#include "http.h"

#include <string.h>

static void mk_skip_ows(const char **p, const char *end)
{
    while (*p < end && (**p == ' ' || **p == '\t')) {
        (*p)++;
    }
}

/* Digits as a number, saturating at UINT64_MAX; false when there are none. */
static bool mk_read_u64_sat(const char **p, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    const char *s = *p;

    while (*p < end && mk_is_digit(**p)) {
        unsigned d = (unsigned) (**p - '0');
        v = (v > (UINT64_MAX - d) / 10) ? UINT64_MAX : v * 10 + d;
        (*p)++;
    }
    *out = v;
    return *p != s;
}

enum mk_range_result mk_http_range_parse(const char *value, size_t len, uint64_t size,
                                         uint64_t *first, uint64_t *last)
{
    const char *p = value, *end = value + len;
    unsigned specs = 0, satisfiable = 0;
    uint64_t f = 0, l = 0;

    mk_skip_ows(&p, end);
    if (!mk_str_iprefix(p, (size_t) (end - p), "bytes=")) {
        return MK_RANGE_NONE;
    }
    p += 6;

    for (;;) {
        uint64_t a, b;
        bool has_a, has_b;

        mk_skip_ows(&p, end);
        if (p < end && *p == ',') { /* empty list elements are allowed */
            p++;
            continue;
        }
        if (p == end) {
            break;
        }
        has_a = mk_read_u64_sat(&p, end, &a);
        if (p == end || *p != '-') {
            return MK_RANGE_NONE;
        }
        p++;
        has_b = mk_read_u64_sat(&p, end, &b);
        mk_skip_ows(&p, end);
        if (p < end && *p != ',') {
            return MK_RANGE_NONE;
        }
        specs++;

        if (has_a) {
            if (has_b && b < a) {
                return MK_RANGE_NONE; /* invalid range-spec: the field is ignored */
            }
            if (a < size) {
                satisfiable++;
                f = a;
                l = (has_b && b < size) ? b : size - 1;
            }
        }
        else if (has_b) {
            if (b > 0 && size > 0) {
                satisfiable++;
                f = b >= size ? 0 : size - b;
                l = size - 1;
            }
        }
        else {
            return MK_RANGE_NONE; /* a lone "-" */
        }
    }
    if (specs == 0) {
        return MK_RANGE_NONE;
    }
    if (satisfiable == 0) {
        return MK_RANGE_UNSATISFIABLE;
    }
    if (specs > 1) {
        return MK_RANGE_NONE; /* multipart/byteranges is not offered */
    }
    *first = f;
    *last = l;
    return MK_RANGE_OK;
}

/*
 * Read an opaque-tag (a quoted string of etagc) at *p, moving *p past it.
 * False when there is none or it is malformed.
 */
static bool mk_read_opaque_tag(const char **p, const char *end)
{
    const char *q = *p;

    if (q == end || *q != '"') {
        return false;
    }
    for (q++; q < end && *q != '"'; q++) {
        unsigned char c = (unsigned char) *q;
        if (!(c == 0x21 || (c >= 0x23 && c != 0x7f))) {
            return false; /* etagc */
        }
    }
    if (q == end) {
        return false;
    }
    *p = q + 1;
    return true;
}

bool mk_http_etag_is(const char *value, size_t len, const char *etag, size_t etag_len)
{
    const char *p = value, *end = value + len;

    if (etag_len >= 2 && etag[0] == 'W' && etag[1] == '/') {
        return false; /* a weak tag of ours never compares strongly */
    }
    mk_skip_ows(&p, end);
    const char *tag = p;
    if (!mk_read_opaque_tag(&p, end)) {
        return false; /* no tag, a weak one (W/) or a malformed one */
    }
    size_t tlen = (size_t) (p - tag);
    mk_skip_ows(&p, end);
    return p == end && tlen == etag_len && memcmp(tag, etag, tlen) == 0;
}

bool mk_http_etag_match(const char *value, size_t len, const char *etag, size_t etag_len, bool weak)
{
    const char *p = value, *end = value + len;

    mk_skip_ows(&p, end);
    if (end - p >= 1 && *p == '*') {
        p++;
        mk_skip_ows(&p, end);
        return p == end;
    }
    /* Our tags are strong; compare without the W/ of either side when weak. */
    if (etag_len >= 2 && etag[0] == 'W' && etag[1] == '/') {
        if (!weak) {
            return false;
        }
        etag += 2;
        etag_len -= 2;
    }

    bool matched = false;
    while (p < end) {
        bool is_weak = false;
        mk_skip_ows(&p, end);
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        if (p == end) {
            break;
        }
        if (end - p >= 2 && p[0] == 'W' && p[1] == '/') {
            is_weak = true;
            p += 2;
        }
        const char *tag = p;
        if (!mk_read_opaque_tag(&p, end)) {
            return false;
        }
        size_t tlen = (size_t) (p - tag);
        if ((weak || !is_weak) && tlen == etag_len && memcmp(tag, etag, tlen) == 0) {
            matched = true;
        }
        mk_skip_ows(&p, end);
        if (p < end && *p != ',') {
            return false;
        }
    }
    return matched;
}

const char *mk_http_reason(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 101:
        return "Switching Protocols";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 303:
        return "See Other";
    case 304:
        return "Not Modified";
    case 307:
        return "Temporary Redirect";
    case 308:
        return "Permanent Redirect";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 406:
        return "Not Acceptable";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 411:
        return "Length Required";
    case 412:
        return "Precondition Failed";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 416:
        return "Range Not Satisfiable";
    case 417:
        return "Expectation Failed";
    case 421:
        return "Misdirected Request";
    case 426:
        return "Upgrade Required";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Unknown";
    }
}
