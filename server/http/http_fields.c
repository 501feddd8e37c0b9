/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * http_fields.c: pure readers of header field values the static handler
 * needs (Range, entity-tag lists), the `priority` field HTTP/2 schedules
 * by, the Cookie fields of a request joined into one, and the status
 * reason phrases.
 */
#include "http.h"

#include <string.h>
#include <strings.h>

#include "../../core/strings.h"
#include "http_chars.h"

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

/* ---- Cookie: several fields as one ----------------------------------------- */

static bool mk_is_cookie(const struct mk_http_header *hd)
{
    return mk_str_ieq(hd->name.p, hd->name.len, "cookie");
}

size_t mk_http_cookie_join_len(const struct mk_http_head *head)
{
    size_t len = 0;
    unsigned n = 0;

    if (!head->known[MK_HDR_COOKIE]) {
        return 0;
    }
    for (unsigned i = head->known[MK_HDR_COOKIE] - 1u; i < head->n_headers; i++) {
        const struct mk_http_header *hd = &head->headers[i];
        if (hd->value.len && mk_is_cookie(hd)) {
            len += (n++ ? 2 : 0) + hd->value.len;
        }
    }
    return len;
}

void mk_http_cookie_join(struct mk_http_head *head, char *buf)
{
    unsigned first = head->known[MK_HDR_COOKIE];
    unsigned removed[MK_HDR_KNOWN_COUNT] = {0};
    size_t len = 0;

    if (!first) {
        return;
    }
    first--; /* known[] is 1 + the index */
    unsigned w = first + 1;
    for (unsigned i = first; i < head->n_headers; i++) {
        const struct mk_http_header *hd = &head->headers[i];
        if (i > first && !mk_is_cookie(hd)) {
            head->headers[w++] = *hd;
            continue;
        }
        if (hd->value.len) {
            if (len) {
                memcpy(buf + len, "; ", 2);
                len += 2;
            }
            memcpy(buf + len, hd->value.p, hd->value.len);
            len += hd->value.len;
        }
        for (unsigned k = 0; i > first && k < MK_HDR_KNOWN_COUNT; k++) {
            removed[k] += head->known[k] > i + 1u; /* the kind's first field comes after it */
        }
    }
    for (unsigned k = 0; k < MK_HDR_KNOWN_COUNT; k++) {
        head->known[k] = (uint16_t) (head->known[k] - removed[k]);
    }
    head->headers[first].value = mk_str_make(buf, len);
    head->n_headers = w;
    head->known_repeated &= (uint8_t) ~(1u << MK_HDR_COOKIE);
}

enum mk_range_result mk_http_range_parse(const char *value, size_t len, uint64_t size,
                                         struct mk_range *ranges, unsigned max, unsigned *n)
{
    const char *p = value, *end = value + len;
    unsigned specs = 0, satisfiable = 0;
    uint64_t prev = 0; /* the last byte of the satisfiable range before */

    mk_skip_ows(&p, end);
    if (!mk_str_iprefix(p, (size_t) (end - p), "bytes=")) {
        return MK_RANGE_NONE;
    }
    p += 6;

    for (;;) {
        uint64_t a, b, f, l;
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
        if (++specs > MK_RANGES_MAX) {
            return MK_RANGE_NONE; /* too many: the field is ignored */
        }

        if (has_a) {
            if (has_b && b < a) {
                return MK_RANGE_NONE; /* invalid range-spec: the field is ignored */
            }
            if (a >= size) {
                continue; /* unsatisfiable: left out */
            }
            f = a;
            l = (has_b && b < size) ? b : size - 1;
        }
        else if (has_b) {
            if (b == 0 || size == 0) {
                continue;
            }
            f = b >= size ? 0 : size - b;
            l = size - 1;
        }
        else {
            return MK_RANGE_NONE; /* a lone "-" */
        }
        if (satisfiable && f <= prev) {
            return MK_RANGE_NONE; /* overlapping or out of order */
        }
        if (satisfiable < max) {
            ranges[satisfiable] = (struct mk_range){f, l};
        }
        satisfiable++;
        prev = l;
    }
    if (specs == 0) {
        return MK_RANGE_NONE;
    }
    if (satisfiable == 0) {
        return MK_RANGE_UNSATISFIABLE;
    }
    *n = satisfiable;
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

/* ---- priority: an RFC 8941 dictionary ------------------------------------ */

/* What an RFC 8941 bare item or member value is. */
enum mk_sf_kind {
    MK_SF_BAD = 0, /* malformed */
    MK_SF_INTEGER,
    MK_SF_DECIMAL,
    MK_SF_STRING,
    MK_SF_TOKEN,
    MK_SF_BYTES,
    MK_SF_BOOLEAN,
    MK_SF_INNER_LIST,
};

static bool mk_sf_lcalpha(char c)
{
    return c >= 'a' && c <= 'z';
}

static bool mk_sf_alpha(char c)
{
    return mk_sf_lcalpha(mk_tolower(c));
}

/* RFC 9110 tchar, and the ':' and '/' a token may hold after its first character. */
static bool mk_sf_token_char(char c)
{
    return mk_sf_alpha(c) || mk_is_digit(c) || (c && strchr("!#$%&'*+-.^_`|~:/", c));
}

static void mk_sf_skip_sp(const char **p, const char *end)
{
    while (*p < end && **p == ' ') {
        (*p)++;
    }
}

/* A key (RFC 8941 section 4.2.3.3) at *p: its length, 0 when there is none. */
static size_t mk_sf_key(const char **p, const char *end)
{
    const char *k = *p;

    if (*p == end || !(mk_sf_lcalpha(**p) || **p == '*')) {
        return 0;
    }
    do {
        (*p)++;
    } while (*p < end && (mk_sf_lcalpha(**p) || mk_is_digit(**p) || **p == '_' || **p == '-' ||
                          **p == '.' || **p == '*'));
    return (size_t) (*p - k);
}

/*
 * An integer or a decimal (RFC 8941 section 4.2.4) at *p: integers have
 * at most 15 digits, decimals at most 12 before the '.' and 1 to 3 after.
 * An integer's value goes to *v.
 */
static enum mk_sf_kind mk_sf_number(const char **p, const char *end, int64_t *v)
{
    bool neg = *p < end && **p == '-';
    const char *digits, *dot = NULL;
    int64_t x = 0;

    *p += neg;
    digits = *p;
    if (*p == end || !mk_is_digit(**p)) {
        return MK_SF_BAD;
    }
    for (; *p < end; (*p)++) {
        if (**p == '.' && !dot) {
            if (*p - digits > 12) {
                return MK_SF_BAD;
            }
            dot = *p;
            continue;
        }
        if (!mk_is_digit(**p)) {
            break;
        }
        if (dot) {
            if (*p - dot > 3) {
                return MK_SF_BAD;
            }
            continue;
        }
        if (*p - digits == 15) {
            return MK_SF_BAD;
        }
        x = x * 10 + (**p - '0');
    }
    if (dot) {
        size_t frac = (size_t) (*p - dot - 1);
        return frac >= 1 && frac <= 3 ? MK_SF_DECIMAL : MK_SF_BAD;
    }
    *v = neg ? -x : x;
    return MK_SF_INTEGER;
}

/* A bare item (RFC 8941 section 4.2.3.1) at *p; an integer's or a boolean's value in *v. */
static enum mk_sf_kind mk_sf_bare_item(const char **p, const char *end, int64_t *v)
{
    if (*p == end) {
        return MK_SF_BAD;
    }
    char c = **p;
    if (c == '-' || mk_is_digit(c)) {
        return mk_sf_number(p, end, v);
    }
    if (c == '"') {
        for ((*p)++; *p < end; (*p)++) {
            unsigned char ch = (unsigned char) **p;
            if (ch == '"') {
                (*p)++;
                return MK_SF_STRING;
            }
            if (ch == '\\') {
                if (++*p == end || (**p != '"' && **p != '\\')) {
                    return MK_SF_BAD;
                }
            }
            else if (ch < 0x20 || ch >= 0x7f) {
                return MK_SF_BAD;
            }
        }
        return MK_SF_BAD; /* unterminated */
    }
    if (mk_sf_alpha(c) || c == '*') {
        do {
            (*p)++;
        } while (*p < end && mk_sf_token_char(**p));
        return MK_SF_TOKEN;
    }
    if (c == ':') {
        for ((*p)++; *p < end; (*p)++) {
            if (**p == ':') {
                (*p)++;
                return MK_SF_BYTES;
            }
            if (!(mk_sf_alpha(**p) || mk_is_digit(**p) || **p == '+' || **p == '/' || **p == '=')) {
                return MK_SF_BAD;
            }
        }
        return MK_SF_BAD;
    }
    if (c == '?') {
        if (end - *p < 2 || ((*p)[1] != '0' && (*p)[1] != '1')) {
            return MK_SF_BAD;
        }
        *v = (*p)[1] == '1';
        *p += 2;
        return MK_SF_BOOLEAN;
    }
    return MK_SF_BAD;
}

/* Parameters (RFC 8941 section 4.2.3.2) at *p: false when malformed. */
static bool mk_sf_params(const char **p, const char *end)
{
    int64_t v;

    while (*p < end && **p == ';') {
        (*p)++;
        mk_sf_skip_sp(p, end);
        if (mk_sf_key(p, end) == 0) {
            return false;
        }
        if (*p < end && **p == '=') {
            (*p)++;
            if (mk_sf_bare_item(p, end, &v) == MK_SF_BAD) {
                return false;
            }
        }
    }
    return true;
}

/* A member value (RFC 8941 section 4.2.1.1: an item or an inner list) after '='. */
static enum mk_sf_kind mk_sf_member_value(const char **p, const char *end, int64_t *v)
{
    int64_t ignored;

    if (*p == end || **p != '(') {
        enum mk_sf_kind k = mk_sf_bare_item(p, end, v);
        return k != MK_SF_BAD && mk_sf_params(p, end) ? k : MK_SF_BAD;
    }
    (*p)++;
    for (;;) {
        mk_sf_skip_sp(p, end);
        if (*p == end) {
            return MK_SF_BAD;
        }
        if (**p == ')') {
            (*p)++;
            return mk_sf_params(p, end) ? MK_SF_INNER_LIST : MK_SF_BAD;
        }
        if (mk_sf_bare_item(p, end, &ignored) == MK_SF_BAD || !mk_sf_params(p, end) || *p == end ||
            (**p != ' ' && **p != ')')) {
            return MK_SF_BAD;
        }
    }
}

bool mk_http_priority_parse(const char *value, size_t len, struct mk_http_priority *prio)
{
    const char *p = value, *end = value + len;
    struct mk_http_priority got = *prio;

    mk_skip_ows(&p, end);
    while (p < end) {
        const char *key = p;
        size_t klen = mk_sf_key(&p, end);
        enum mk_sf_kind kind = MK_SF_BOOLEAN;
        int64_t v = 1; /* a member without a value is the boolean true */
        if (klen == 0) {
            return false;
        }
        if (p < end && *p == '=') {
            p++;
            kind = mk_sf_member_value(&p, end, &v);
        }
        else if (!mk_sf_params(&p, end)) {
            kind = MK_SF_BAD;
        }
        if (kind == MK_SF_BAD) {
            return false;
        }
        if (klen == 1 && key[0] == 'u') {
            if (kind != MK_SF_INTEGER || v < 0 || v > 7) {
                return false;
            }
            got.urgency = (uint8_t) v;
        }
        else if (klen == 1 && key[0] == 'i') {
            if (kind != MK_SF_BOOLEAN) {
                return false;
            }
            got.incremental = v == 1;
        }
        mk_skip_ows(&p, end);
        if (p == end) {
            break;
        }
        if (*p != ',') {
            return false;
        }
        p++;
        mk_skip_ows(&p, end);
        if (p == end) {
            return false; /* a trailing comma */
        }
    }
    *prio = got;
    return true;
}

const char *mk_http_reason(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 101:
        return "Switching Protocols";
    case 102:
        return "Processing";
    case 103:
        return "Early Hints";
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

/*
 * Check a Cache-Control value (RFC 9111 section 5.2: #( token [ "="
 * ( token / quoted-string ) ] )) and find its max-age. False when it is
 * not one; *max_age -1 without max-age (see http.h).
 */
bool mk_http_cache_control_check(const char *v, int64_t *max_age)
{
    const char *p = v;
    size_t members = 0;

    *max_age = -1;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',') {
            p++;
        }
        if (!*p) {
            break;
        }
        const char *name = p;
        while (mk_is_tchar((unsigned char) *p)) {
            p++;
        }
        size_t nlen = (size_t) (p - name);
        if (!nlen) {
            return false;
        }
        members++;
        if (*p != '=') {
            if (*p && *p != ',' && *p != ' ' && *p != '\t') {
                return false;
            }
            continue;
        }
        const char *val = ++p;
        if (*p == '"') {
            for (p++; *p && *p != '"'; p++) {
                if (*p == '\\' && p[1]) {
                    p++;
                }
            }
            if (*p++ != '"') {
                return false;
            }
        }
        else {
            while (mk_is_tchar((unsigned char) *p)) {
                p++;
            }
            if (p == val) {
                return false;
            }
        }
        if (*p && *p != ',' && *p != ' ' && *p != '\t') {
            return false;
        }
        if (nlen == 7 && strncasecmp(name, "max-age", 7) == 0) {
            uint64_t n;
            if (!mk_str_to_u64(val, (size_t) (p - val), MK_HTTP_MAX_AGE_LIMIT, &n)) {
                return false;
            }
            *max_age = (int64_t) n;
        }
    }
    return members > 0;
}
