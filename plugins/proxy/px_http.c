/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * px_http.c: the upstream response's head and the chunked coding, parsed
 * strictly (px_http.h). Pure: no I/O, no allocation, no globals.
 */
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "px_http.h"

enum {
    CH_SIZE,       /* hex digits of a chunk's size */
    CH_EXT,        /* a chunk extension, up to the line's end */
    CH_SIZE_LF,    /* the LF after the size line's CR */
    CH_DATA,       /* the chunk's data */
    CH_DATA_CR,    /* the CRLF after the data */
    CH_DATA_LF,    /* its LF */
    CH_TRAILER,    /* the start of a trailer line, or the empty line */
    CH_TRAILER_IN, /* inside a trailer line */
    CH_TRAILER_LF, /* the LF after a trailer line's CR */
    CH_END_LF,     /* the LF of the final empty line */
};

/* Byte classes: PX_T a tchar (RFC 9110), PX_C a control byte a value may not hold. */
enum { PX_T = 1, PX_C = 2 };
static const unsigned char px_class[256] = {
    [0 ... 8] = PX_C,     [10 ... 31] = PX_C,   [127] = PX_C, ['0' ... '9'] = PX_T,
    ['a' ... 'z'] = PX_T, ['A' ... 'Z'] = PX_T, ['!'] = PX_T, ['#'] = PX_T,
    ['$'] = PX_T,         ['%'] = PX_T,         ['&'] = PX_T, ['\''] = PX_T,
    ['*'] = PX_T,         ['+'] = PX_T,         ['-'] = PX_T, ['.'] = PX_T,
    ['^'] = PX_T,         ['_'] = PX_T,         ['`'] = PX_T, ['|'] = PX_T,
    ['~'] = PX_T,
};

bool px_tchar(unsigned char c)
{
    return px_class[c] & PX_T;
}

static bool px_eq(const struct px_slice *s, const char *lit)
{
    size_t n = strlen(lit);
    return s->len == n && strncasecmp(s->p, lit, n) == 0;
}

static int px_fail(struct px_resp *r, const char *why)
{
    r->why = why;
    return MK_ERR;
}

/* Whether p[0..n) starts with "HTTP/1.0 " or "HTTP/1.1 " and has room for a status after it. */
static bool px_version_ok(const char *p, size_t n)
{
    return n >= 12 && memcmp(p, "HTTP/1.", 7) == 0 && (p[7] == '0' || p[7] == '1') && p[8] == ' ';
}

int px_resp_status(const char *buf, size_t len)
{
    if (!px_version_ok(buf, len)) {
        return 0;
    }
    for (int i = 9; i < 12; i++) {
        if (buf[i] < '0' || buf[i] > '9') {
            return 0;
        }
    }
    int status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
    return status >= 100 && status <= 599 ? status : 0;
}

/* "HTTP/1.x SSS reason": MK_OK or MK_ERR. */
static int px_status_line(const char *p, size_t n, struct px_resp *r)
{
    if (!px_version_ok(p, n)) {
        return px_fail(r, "not an HTTP/1.0 or HTTP/1.1 status line");
    }
    if (!(r->status = px_resp_status(p, n))) {
        return px_fail(r, "a status that is not three digits of 100..599");
    }
    r->minor = p[7] - '0';
    if (n > 12 && p[12] != ' ') {
        return px_fail(r, "no space after the status");
    }
    for (size_t i = 13; i < n; i++) {
        if (px_class[(unsigned char) p[i]] & PX_C) {
            return px_fail(r, "a control byte in the reason phrase");
        }
    }
    return MK_OK;
}

/* A Content-Length value: digits only, at most 18 of them. */
static int px_length(const struct px_slice *v, uint64_t *out)
{
    uint64_t n = 0;
    if (v->len == 0 || v->len > 18) {
        return MK_ERR;
    }
    for (size_t i = 0; i < v->len; i++) {
        if (v->p[i] < '0' || v->p[i] > '9') {
            return MK_ERR;
        }
        n = n * 10 + (uint64_t) (v->p[i] - '0');
    }
    *out = n;
    return MK_OK;
}

/*
 * Whether the token name[0..len) is lit (len bytes of lowercase letters,
 * digits and '-') in any case: eight or four bytes at a time (one by one below four), with
 * 0x20 set in each. Exact for tokens: the only tchars that differ from
 * lit's bytes but not once 0x20 is set are the upper case letters.
 */
static inline bool px_tok_is(const char *name, const char *lit, size_t len)
{
    uint64_t a, b;
    if (len >= 8) {
        bool same = true;
        /* whole words, then the last eight bytes (overlapping the word before them) */
        for (size_t i = 0; i + 8 < len; i += 8) {
            memcpy(&a, name + i, 8);
            memcpy(&b, lit + i, 8);
            same &= (a | 0x2020202020202020ull) == b;
        }
        memcpy(&a, name + len - 8, 8);
        memcpy(&b, lit + len - 8, 8);
        return same & ((a | 0x2020202020202020ull) == b);
    }
    uint32_t x, y, z, w;
    if (len >= 4) {
        memcpy(&x, name, 4);
        memcpy(&y, lit, 4);
        memcpy(&z, name + len - 4, 4);
        memcpy(&w, lit + len - 4, 4);
        return ((x | 0x20202020u) == y) & ((z | 0x20202020u) == w);
    }
    for (size_t i = 0; i < len; i++) {
        if ((name[i] | 0x20) != lit[i]) {
            return false;
        }
    }
    return true;
}

/* The kind of the field name[0..len), a token (enum px_kind): by length, then the bytes. */
static unsigned char px_kind(const char *name, size_t len)
{
    if (len >= 6 && px_tok_is(name, "proxy-", 6)) {
        return PX_K_HOP;
    }
    switch (len) {
    case 2:
        return px_tok_is(name, "te", 2) ? PX_K_HOP : PX_K_OTHER;
    case 6:
        return px_tok_is(name, "status", 6) ? PX_K_STATUS : PX_K_OTHER;
    case 7:
        return px_tok_is(name, "trailer", 7) || px_tok_is(name, "upgrade", 7) ? PX_K_HOP
               : px_tok_is(name, "refresh", 7)                                ? PX_K_REFRESH
                                                                              : PX_K_OTHER;
    case 8:
        return px_tok_is(name, "location", 8) ? PX_K_LOCATION : PX_K_OTHER;
    case 10:
        return px_tok_is(name, "connection", 10)   ? PX_K_CONNECTION
               : px_tok_is(name, "keep-alive", 10) ? PX_K_HOP
               : px_tok_is(name, "set-cookie", 10) ? PX_K_SET_COOKIE
                                                   : PX_K_OTHER;
    case 14:
        return px_tok_is(name, "content-length", 14) ? PX_K_LENGTH : PX_K_OTHER;
    case 17:
        return px_tok_is(name, "transfer-encoding", 17) ? PX_K_TRANSFER : PX_K_OTHER;
    default:
        return PX_K_OTHER;
    }
}

/*
 * The first byte from u on whose class, masked with `mask`, is not `want`
 * (a byte that is must come: the scans of a line stop at its end), four
 * bytes a turn: none is read past that byte.
 */
static inline const unsigned char *px_skip(const unsigned char *u, unsigned char mask,
                                           unsigned char want)
{
    for (;; u += 4) {
        if ((px_class[u[0]] & mask) != want) {
            return u;
        }
        if ((px_class[u[1]] & mask) != want) {
            return u + 1;
        }
        if ((px_class[u[2]] & mask) != want) {
            return u + 2;
        }
        if ((px_class[u[3]] & mask) != want) {
            return u + 3;
        }
    }
}

/*
 * One field line p[0..n): name, colon, value (trimmed). p[n] is the
 * line's CR or LF, which stops both scans (neither a tchar nor a byte a
 * value may hold): each byte of the line is classed once. MK_OK or
 * MK_ERR (the caller looks for a bare CR first).
 */
static int px_field_line(const char *p, size_t n, struct px_resp *r)
{
    const unsigned char *u = (const unsigned char *) p;
    size_t i = (size_t) (px_skip(u, PX_T, PX_T) - u);
    if (i == 0 || i == n || p[i] != ':') {
        return px_fail(r, i < n && (p[i] == ' ' || p[i] == '\t') ? "a space before a field's colon"
                                                                 : "a field line without a name");
    }
    if (r->n_fields == PX_FIELDS_MAX) {
        return px_fail(r, "too many fields");
    }
    size_t s = i + 1;
    while (p[s] == ' ' || p[s] == '\t') {
        s++;
    }
    if ((size_t) (px_skip(u + s, PX_C, 0) - u) != n) {
        return px_fail(r, "a control byte in a field value");
    }
    size_t e = n;
    while (e > s && (p[e - 1] == ' ' || p[e - 1] == '\t')) {
        e--;
    }
    struct px_field *f = &r->fields[r->n_fields];
    r->kind[r->n_fields++] = px_kind(p, i);
    f->name.p = p;
    f->name.len = i;
    f->value.p = p + s;
    f->value.len = e - s;
    return MK_OK;
}

/* Whether a comma-separated list names `tok` (any case). */
static bool px_list_has(const struct px_slice *v, const char *tok, size_t tlen)
{
    size_t i = 0;
    while (i < v->len) {
        while (i < v->len && (v->p[i] == ' ' || v->p[i] == '\t' || v->p[i] == ',')) {
            i++;
        }
        size_t s = i;
        while (i < v->len && v->p[i] != ',') {
            i++;
        }
        size_t e = i;
        while (e > s && (v->p[e - 1] == ' ' || v->p[e - 1] == '\t')) {
            e--;
        }
        if (e - s == tlen && strncasecmp(v->p + s, tok, tlen) == 0) {
            return true;
        }
    }
    return false;
}

bool px_resp_conn_names(const struct px_resp *r, const char *name, size_t len)
{
    for (unsigned i = 0; i < r->n_fields; i++) {
        if (px_eq(&r->fields[i].name, "connection") &&
            px_list_has(&r->fields[i].value, name, len)) {
            return true;
        }
    }
    return false;
}

bool px_hop_by_hop(const char *name, size_t len)
{
    if (len >= 6 && (name[0] | 0x20) == 'p' && strncasecmp(name, "proxy-", 6) == 0) {
        return true;
    }
    /* by length: most fields are none of these, and pay one switch */
    switch (len) {
    case 2:
        return strncasecmp(name, "te", 2) == 0;
    case 7:
        return strncasecmp(name, "trailer", 7) == 0 || strncasecmp(name, "upgrade", 7) == 0;
    case 10: /* the first letter first: User-Agent is 10 bytes too */
        switch (name[0] | 0x20) {
        case 'c':
            return strncasecmp(name, "connection", 10) == 0;
        case 'k':
            return strncasecmp(name, "keep-alive", 10) == 0;
        default:
            return false;
        }
    case 17:
        return strncasecmp(name, "transfer-encoding", 17) == 0;
    default:
        return false;
    }
}

/* Fields a trailer section may not carry on (RFC 9110 section 6.5.1), hop-by-hop ones aside. */
static bool px_trailer_banned(const char *name, size_t len)
{
    static const char *const banned[] = {
        "content-length", "content-type",  "content-encoding", "content-range", "host",
        "set-cookie",     "authorization", "www-authenticate", "cache-control", "expires",
        "date",           "location",      "retry-after",      "vary",          "age",
        "server",         "status",        "expect",           "range",         NULL};
    struct px_slice s = {name, len};
    for (int i = 0; banned[i]; i++) {
        if (px_eq(&s, banned[i])) {
            return true;
        }
    }
    return px_hop_by_hop(name, len);
}

size_t px_trailers_filter(const char *in, size_t len, char *out, size_t cap)
{
    size_t o = 0;
    const char *end = in + len;

    while (in < end) {
        const char *eol = memchr(in, '\n', (size_t) (end - in));
        const char *line_end = eol ? eol : end;
        const char *next = eol ? eol + 1 : end;
        if (line_end > in && line_end[-1] == '\r') {
            line_end--;
        }
        size_t n = 0;
        while (in + n < line_end && px_tchar((unsigned char) in[n])) {
            n++;
        }
        if (n == 0 || in + n == line_end || in[n] != ':' || px_trailer_banned(in, n)) {
            in = next; /* not a field, or one that may not come after the body */
            continue;
        }
        const char *v = in + n + 1, *vend = line_end;
        while (v < vend && (*v == ' ' || *v == '\t')) {
            v++;
        }
        while (vend > v && (vend[-1] == ' ' || vend[-1] == '\t')) {
            vend--;
        }
        size_t need = n + 2 + (size_t) (vend - v) + 2;
        if (cap - o < need + 1) {
            break;
        }
        memcpy(out + o, in, n);
        memcpy(out + o + n, ": ", 2);
        memcpy(out + o + n + 2, v, (size_t) (vend - v));
        memcpy(out + o + need - 2, "\r\n", 2);
        o += need;
        in = next;
    }
    if (cap > 0) {
        out[o] = '\0';
    }
    return o;
}

/* The framing and the connection's fate, from the fields. MK_OK or MK_ERR. */
static int px_framing(struct px_resp *r, bool head_request)
{
    bool have_len = false, chunked = false, te = false;
    uint64_t len = 0;

    r->close = r->minor == 0;
    for (unsigned i = 0; i < r->n_fields; i++) {
        const struct px_field *f = &r->fields[i];
        if (r->kind[i] == PX_K_LENGTH) {
            uint64_t n;
            if (px_length(&f->value, &n) != MK_OK) {
                return px_fail(r, "a bad Content-Length");
            }
            if (have_len && n != len) {
                return px_fail(r, "Content-Length fields that differ");
            }
            have_len = true;
            len = n;
        }
        else if (r->kind[i] == PX_K_TRANSFER) {
            if (te || !px_eq(&f->value, "chunked")) {
                return px_fail(r, "a transfer coding other than chunked alone");
            }
            te = chunked = true;
        }
        else if (r->kind[i] == PX_K_CONNECTION) {
            r->has_connection = true;
            if (px_list_has(&f->value, "close", 5)) {
                r->close = true;
            }
            else if (r->minor == 0 && px_list_has(&f->value, "keep-alive", 10)) {
                r->close = false;
            }
        }
    }
    if (te && have_len) {
        return px_fail(r, "both Content-Length and Transfer-Encoding");
    }
    if (te && r->minor == 0) {
        return px_fail(r, "Transfer-Encoding in an HTTP/1.0 response");
    }
    r->length = len;
    r->has_length = have_len;
    if (head_request || r->status < 200 || r->status == 204 || r->status == 304) {
        r->framing = PX_BODY_NONE;
    }
    else if (chunked) {
        r->framing = PX_BODY_CHUNKED;
    }
    else if (have_len) {
        r->framing = len ? PX_BODY_LENGTH : PX_BODY_NONE;
    }
    else {
        r->framing = PX_BODY_CLOSE;
        r->close = true;
    }
    return MK_OK;
}

int px_resp_parse(const char *buf, size_t len, bool head_request, struct px_resp *r)
{
    const char *end = buf + (len > PX_HEAD_MAX ? PX_HEAD_MAX : len);
    const char *p = buf;

    /* the scalars only: fields[] and kind[] are written up to n_fields (2 KiB not zeroed per
       answer) */
    memset(r, 0, offsetof(struct px_resp, fields));
    r->n_fields = 0;
    r->head_len = 0;
    r->why = NULL;
    for (bool first = true;; first = false) {
        /* the line: up to its LF, without the CR before it; any other CR in it is bare */
        const char *lf = memchr(p, '\n', (size_t) (end - p));
        if (!lf) {
            const char *cr = memchr(p, '\r', (size_t) (end - p));
            if (cr && cr + 1 != end) {
                return px_fail(r, "a bare CR");
            }
            return len >= PX_HEAD_MAX ? px_fail(r, "a head longer than 16 KiB") : MK_AGAIN;
        }
        size_t ll = (size_t) (lf - p);
        if (ll && p[ll - 1] == '\r') {
            ll--;
        }
        int rc;
        if (first) {
            rc = px_status_line(p, ll, r);
        }
        else if (ll == 0) {
            r->head_len = (size_t) (lf + 1 - buf);
            return px_framing(r, head_request);
        }
        else if (p[0] == ' ' || p[0] == '\t') {
            rc = px_fail(r, "obs-fold (a field line continued)");
        }
        else {
            rc = px_field_line(p, ll, r);
        }
        if (rc != MK_OK) {
            /* a bare CR is what is wrong with a line that has one, as it is found first */
            return memchr(p, '\r', ll) ? px_fail(r, "a bare CR") : MK_ERR;
        }
        p = lf + 1;
    }
}

static int px_hex(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

static long px_chunk_bad(const char **why, const char *what)
{
    *why = what;
    return -1;
}

/* Keep n trailer bytes when the caller asked for them (c->keep). */
static void px_chunk_keep(struct px_chunked *c, const char *p, size_t n)
{
    if (c->keep && !c->keep_over && !px_push(c->keep, c->keep_cap, &c->keep_len, p, n)) {
        c->keep_over = true;
    }
}

long px_chunked_step(struct px_chunked *c, const char *in, size_t len, const char **data,
                     size_t *dlen, const char **why)
{
    size_t i = 0;

    *data = NULL;
    *dlen = 0;
    while (i < len && !c->done) {
        char ch = in[i];
        switch (c->state) {
        case CH_SIZE: {
            int h = px_hex(ch);
            if (h >= 0) {
                if (c->digits == 15) {
                    return px_chunk_bad(why, "a chunk size of more than 15 digits");
                }
                c->left = c->left * 16 + (uint64_t) h;
                c->digits++;
                i++;
                break;
            }
            if (c->digits == 0) {
                return px_chunk_bad(why, "a chunk size without digits");
            }
            if (ch == ';') {
                c->state = CH_EXT;
            }
            else if (ch == '\r') {
                c->state = CH_SIZE_LF;
            }
            else if (ch == '\n') {
                c->state = c->left ? CH_DATA : CH_TRAILER;
            }
            else {
                return px_chunk_bad(why, "a bad byte after a chunk size");
            }
            i++;
            break;
        }
        case CH_EXT:
            if (ch == '\r') {
                c->state = CH_SIZE_LF;
            }
            else if (ch == '\n') {
                c->state = c->left ? CH_DATA : CH_TRAILER;
            }
            else if ((unsigned char) ch < 0x20 && ch != '\t') {
                return px_chunk_bad(why, "a control byte in a chunk extension");
            }
            i++;
            break;
        case CH_SIZE_LF:
            if (ch != '\n') {
                return px_chunk_bad(why, "a bare CR in a chunk size line");
            }
            c->state = c->left ? CH_DATA : CH_TRAILER;
            i++;
            break;
        case CH_DATA: {
            size_t n = len - i;
            if (n > c->left) {
                n = (size_t) c->left;
            }
            *data = in + i;
            *dlen = n;
            c->left -= n;
            i += n;
            if (c->left == 0) {
                c->state = CH_DATA_CR;
            }
            return (long) i;
        }
        case CH_DATA_CR:
            if (ch == '\r') {
                c->state = CH_DATA_LF;
            }
            else if (ch == '\n') {
                c->state = CH_SIZE;
                c->digits = 0;
            }
            else {
                return px_chunk_bad(why, "no CRLF after a chunk's data");
            }
            i++;
            break;
        case CH_DATA_LF:
            if (ch != '\n') {
                return px_chunk_bad(why, "a bare CR after a chunk's data");
            }
            c->state = CH_SIZE;
            c->digits = 0;
            i++;
            break;
        case CH_TRAILER:
            if (ch == '\r') {
                c->state = CH_END_LF;
            }
            else if (ch == '\n') {
                c->done = true;
            }
            else if (ch == ' ' || ch == '\t') {
                return px_chunk_bad(why, "obs-fold in the trailer section");
            }
            else {
                c->state = CH_TRAILER_IN;
                c->trailer++;
                px_chunk_keep(c, &ch, 1);
            }
            i++;
            break;
        case CH_TRAILER_IN:
            if (ch == '\r' || ch == '\n') {
                c->state = ch == '\r' ? CH_TRAILER_LF : CH_TRAILER;
                px_chunk_keep(c, "\r\n", 2);
            }
            else if (((unsigned char) ch < 0x20 && ch != '\t') || ++c->trailer > PX_TRAILER_MAX) {
                return px_chunk_bad(why, "a bad trailer section");
            }
            else {
                px_chunk_keep(c, &ch, 1);
            }
            i++;
            break;
        case CH_TRAILER_LF:
            if (ch != '\n') {
                return px_chunk_bad(why, "a bare CR in the trailer section");
            }
            c->state = CH_TRAILER;
            i++;
            break;
        case CH_END_LF:
            if (ch != '\n') {
                return px_chunk_bad(why, "a bare CR at the end of the chunks");
            }
            c->done = true;
            i++;
            break;
        default:
            return px_chunk_bad(why, "a bad state");
        }
    }
    return (long) i;
}

void px_chunked_unread(struct px_chunked *c, size_t n)
{
    if (n > 0) {
        c->left += n;
        c->state = CH_DATA;
    }
}
