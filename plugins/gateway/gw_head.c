/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * gw_head.c: the gateway response header block (see gw_head.h). Pure: it
 * reads the bytes given and writes only *h.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include <monkey/mk_common.h>

#include "gw_head.h"

/* RFC 9110 tchar. */
static int gw_is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
        return 1;
    }
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int gw_name_is(const struct mk_gw_slice *name, const char *want)
{
    size_t n = strlen(want);
    return name->len == n && strncasecmp(name->p, want, n) == 0;
}

/*
 * Three digits, then the end or a space and a reason: a final status, 200
 * to 599. A 1xx is no final answer (RFC 9110 15.2), and a gateway has no
 * way to send an interim one (the block is the response's only head): 101
 * without the server's own upgrade would leave the client speaking a
 * protocol nobody runs (the pattern proxies are smuggled with), and 100 or
 * 103 would end the response before it began. The caller answers 502.
 */
static int gw_parse_status(const char *p, size_t len)
{
    if (len < 3 || (len > 3 && p[3] != ' ')) {
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return -1;
        }
    }
    int status = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
    return status >= 200 && status <= 599 ? status : -1;
}

/* Why gw_parse_status refused p[0..len). */
static const char *gw_status_why(const char *p, size_t len)
{
    if (len >= 3 && p[0] == '1' && p[1] >= '0' && p[1] <= '9' && p[2] >= '0' && p[2] <= '9' &&
        (len == 3 || p[3] == ' ')) {
        return "a 1xx status, which is no final response";
    }
    return "a bad status";
}

/* "HTTP/1.x NNN reason" of an NPH answer. */
static int gw_parse_status_line(const char *p, size_t len)
{
    if (len < 12 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1') || p[8] != ' ') {
        return -1;
    }
    return gw_parse_status(p + 9, len - 9);
}

/* Field values: visible ASCII, obs-text, space and tab; no other control byte. */
static int gw_value_ok(const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) p[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            return 0;
        }
    }
    return 1;
}

/* One "Name: value" line (without its line end) into h; MK_ERR with h->why set. */
static int gw_parse_field(const char *p, size_t len, struct mk_gw_head *h)
{
    const char *colon = memchr(p, ':', len);
    if (!colon || colon == p) {
        h->why = "a line without a field name and ':'";
        return MK_ERR;
    }
    struct mk_gw_slice name = {p, (size_t) (colon - p)};
    for (size_t i = 0; i < name.len; i++) {
        if (!gw_is_tchar((unsigned char) p[i])) {
            h->why = "a bad field name";
            return MK_ERR;
        }
    }
    const char *v = colon + 1, *end = p + len;
    while (v < end && (*v == ' ' || *v == '\t')) {
        v++;
    }
    while (end > v && (end[-1] == ' ' || end[-1] == '\t')) {
        end--;
    }
    struct mk_gw_slice value = {v, (size_t) (end - v)};
    if (!gw_value_ok(value.p, value.len)) {
        h->why = "a control character in a value";
        return MK_ERR;
    }
    return mk_gw_head_field(h, name, value);
}

int mk_gw_head_field(struct mk_gw_head *h, struct mk_gw_slice name, struct mk_gw_slice value)
{
    if (gw_name_is(&name, "Status")) {
        int status = gw_parse_status(value.p, value.len);
        if (status < 0 || h->status) {
            h->why = h->status ? "two Status fields" : gw_status_why(value.p, value.len);
            return MK_ERR;
        }
        h->status = status;
    }
    else if (gw_name_is(&name, "Location")) {
        if (h->location.p || value.len == 0) {
            h->why = value.len ? "two Location fields" : "an empty Location";
            return MK_ERR;
        }
        h->location = value;
    }
    else if (gw_name_is(&name, "Content-Type")) {
        if (h->content_type.p) {
            h->why = "two Content-Type fields";
            return MK_ERR;
        }
        h->content_type = value;
    }
    else {
        if (h->n_fields == MK_GW_FIELDS_MAX) {
            h->why = "too many fields";
            return MK_ERR;
        }
        h->fields[h->n_fields].name = name;
        h->fields[h->n_fields].value = value;
        h->n_fields++;
    }
    return MK_OK;
}

int mk_gw_head_parse(const char *buf, size_t len, int nph, struct mk_gw_head *h)
{
    size_t pos = 0;
    int first = 1;

    /* the fields past n_fields are never read: 2 KB not cleared on every call */
    memset(h, 0, offsetof(struct mk_gw_head, fields));
    h->n_fields = 0;
    h->head_len = 0;
    h->why = NULL;
    for (;;) {
        const char *nl = memchr(buf + pos, '\n', len - pos);
        if (!nl) {
            if (len < MK_GW_HEAD_MAX) {
                return MK_AGAIN;
            }
            h->why = "no end within 16 KiB";
            return MK_ERR;
        }
        size_t end = (size_t) (nl - buf) + 1;
        if (end > MK_GW_HEAD_MAX) {
            h->why = "no end within 16 KiB";
            return MK_ERR;
        }
        size_t line_len = end - 1 - pos;
        if (line_len > 0 && buf[pos + line_len - 1] == '\r') {
            line_len--;
        }
        const char *line = buf + pos;
        pos = end;
        if (line_len == 0) {
            if (first && nph) {
                h->why = "no status line";
                return MK_ERR;
            }
            break;
        }
        if (memchr(line, '\r', line_len)) {
            h->why = "a bare CR";
            return MK_ERR;
        }
        if (first && nph) {
            if ((h->status = gw_parse_status_line(line, line_len)) < 0) {
                h->status = 0;
                h->why = line_len > 9 && memcmp(line, "HTTP/1.", 7) == 0
                             ? gw_status_why(line + 9, line_len - 9)
                             : "a bad status line";
                return MK_ERR;
            }
        }
        else if (gw_parse_field(line, line_len, h) != MK_OK) {
            return MK_ERR;
        }
        first = 0;
    }
    if (!nph && !h->status && !h->location.p && !h->content_type.p) {
        h->why = "no Status, Location nor Content-Type"; /* RFC 3875 6.2 */
        return MK_ERR;
    }
    h->head_len = pos;
    return MK_OK;
}

int mk_gw_field_is_framing(const struct mk_gw_slice *name)
{
    static const char *const framing[] = {
        "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Date",
        "Server",         "Upgrade",           "Trailer",    "TE",         "Proxy-Connection"};
    for (size_t i = 0; i < sizeof(framing) / sizeof(framing[0]); i++) {
        if (gw_name_is(name, framing[i])) {
            return 1;
        }
    }
    return 0;
}

static int gw_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

size_t mk_gw_content_length(const char *v, size_t len, char out[MK_GW_DEC_MAX])
{
    const char *p = v, *end = v + len;
    uint64_t value = 0;
    int items = 0;

    for (;;) {
        while (p < end && (*p == ' ' || *p == '\t')) {
            p++;
        }
        if (p < end && *p == ',') {
            p++; /* an empty list element */
            continue;
        }
        if (p == end) {
            break;
        }
        if (!gw_is_digit(*p)) {
            return 0;
        }
        uint64_t n = 0;
        while (p < end && gw_is_digit(*p)) {
            unsigned d = (unsigned) (*p++ - '0');
            if (n > (UINT64_C(0x7fffffffffffffff) - d) / 10) {
                return 0;
            }
            n = n * 10 + d;
        }
        if (items++ && n != value) {
            return 0;
        }
        value = n;
        while (p < end && (*p == ' ' || *p == '\t')) {
            p++;
        }
        if (p < end && *p != ',') {
            return 0;
        }
    }
    if (!items) {
        return 0;
    }
    char digits[MK_GW_DEC_MAX];
    size_t n = 0;
    do {
        digits[n++] = (char) ('0' + value % 10);
        value /= 10;
    } while (value);
    for (size_t i = 0; i < n; i++) {
        out[i] = digits[n - 1 - i];
    }
    out[n] = '\0';
    return n;
}

int mk_gw_target_absolute(const char *t, size_t len, struct mk_gw_slice *authority,
                          struct mk_gw_slice *rest)
{
    size_t skip;
    if (len >= 7 && strncasecmp(t, "http://", 7) == 0) {
        skip = 7;
    }
    else if (len >= 8 && strncasecmp(t, "https://", 8) == 0) {
        skip = 8;
    }
    else {
        return 0;
    }
    size_t a = skip;
    while (a < len && t[a] != '/' && t[a] != '?') {
        a++;
    }
    authority->p = t + skip;
    authority->len = a - skip;
    rest->p = t + a;
    rest->len = len - a;
    return 1;
}

int mk_gw_location_is_local(const struct mk_gw_slice *location)
{
    return location->len >= 1 && location->p[0] == '/' &&
           (location->len == 1 || location->p[1] != '/');
}
