/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_http_request.c: libFuzzer target for server/http/http_parser.c and
 * http_chunked.c, the way a connection uses them: scan the input for the
 * end of a request head, parse the head, then run what follows it through
 * the chunked decoder.
 *
 * Invariants (each a crash when broken):
 *  - the scan is resumable: one call over the whole input, a call over a
 *    prefix followed by one over the whole, and one call per added byte all
 *    give the same head length, or the same error status (400/414/431),
 *    with the server's limits (8K line, 32K head, 100 headers) and with
 *    tiny ones that short inputs can reach (16, 64, 4);
 *  - a header array of (lines counted by the scan - 1) entries is enough:
 *    mk_http_parse() never answers 431 for it;
 *  - mk_http_parse() returns the head length or MK_ERR with status
 *    400/417/431/501/505; every view it returns lies inside the head;
 *  - the flags of a parsed head are consistent (chunked excludes
 *    Content-Length and HTTP/1.0, HTTP/1.1 has a Host);
 *  - each indexed header kind (If-Match ... Range) points at the first line
 *    of that name, and is marked repeated exactly when a second one exists;
 *  - mk_http_head_build() (HTTP/2: a head from its parts) agrees with the
 *    text parser: an HTTP/1.1 head the parser accepts, given as parts, is
 *    built into the same head; and an input that begins with a NUL byte is
 *    read as NUL-separated parts (method, target, then names and values),
 *    built, and written as HTTP/1.1 text for the scan and the parser: both
 *    accept it with the same head, or both refuse it with the same status
 *    (but a 414 or 431 may meet another status: the scan judges the line
 *    length and the field count before the parser sees the line);
 *  - mk_http_read_head() (a head read in one pass) either declines or
 *    agrees with the scan and the parser on the same bytes: the same head
 *    length, line count and head;
 *  - mk_http_cookie_join() on a head with several Cookie fields leaves one,
 *    at the first one's place, whose value is the non-empty values joined
 *    with "; " in order, the other fields in their order, and the indexed
 *    kinds as consistent as after the parse (none repeated: Cookie);
 *  - mk_chunked_decode() never produces more bytes than it consumed, stops
 *    early only when the message is complete, and decoding in two pieces
 *    gives the same bytes, the same count and the same error as in one;
 *    the trailer section's bytes (trailer_off) follow the data and are the
 *    same in one piece or two, and mk_chunked_trailer_lines() makes of a
 *    complete one at most twice its bytes of "Name: value\r\n" lines, a
 *    token, ": ", a value without CR, LF or NUL, nor whitespace at its ends.
 */
#include <stdlib.h>
#include <string.h>

#include <monkey/mk_common.h>

#include "server/http/http.h"
#include "server/http/http_chars.h"

#include "fuzz_check.h"

static const struct mk_http_limits mk_fuzz_limits = {
    .max_line = 8192,
    .max_head = 32768,
    .max_headers = 100,
};

static const struct mk_http_limits mk_fuzz_small_limits = {
    .max_line = 16,
    .max_head = 64,
    .max_headers = 4,
};

static void check_scan_result(ssize_t r, const struct mk_http_scan *s, size_t len,
                              const struct mk_http_limits *lim)
{
    if (r == MK_ERR) {
        MK_FUZZ_CHECK(s->status == 400 || s->status == 414 || s->status == 431);
        return;
    }
    MK_FUZZ_CHECK(r == MK_AGAIN || (r > 0 && (size_t) r <= len));
    if (r > 0) {
        MK_FUZZ_CHECK(s->lines >= 1 && s->lines <= lim->max_headers + 1);
    }
}

/* Two scan outcomes agree: the same head length, or the same error. */
static void check_same_scan(ssize_t a, const struct mk_http_scan *sa, ssize_t b,
                            const struct mk_http_scan *sb)
{
    MK_FUZZ_CHECK(a == b);
    if (a == MK_ERR) {
        MK_FUZZ_CHECK(sa->status == sb->status);
    }
    if (a > 0) {
        MK_FUZZ_CHECK(sa->lines == sb->lines);
    }
}

/* A view returned by the parser: inside the head, or empty. */
static bool view_ok(struct mk_str v, const char *head, size_t len)
{
    return v.len == 0 || mk_fuzz_inside(v.p, v.len, head, len);
}

static void check_parsed(const struct mk_http_head *h, const char *head, size_t len, unsigned cap)
{
    MK_FUZZ_CHECK(h->status == 0);
    MK_FUZZ_CHECK(h->method_name.len > 0 && view_ok(h->method_name, head, len));
    MK_FUZZ_CHECK(h->target.len > 0 && view_ok(h->target, head, len));
    if (h->method != MK_METHOD_UNKNOWN) {
        const char *name = mk_http_method_name(h->method);
        MK_FUZZ_CHECK(name && mk_str_eq(h->method_name.p, h->method_name.len, name));
    }
    MK_FUZZ_CHECK(h->version == 10 || h->version == 11);
    MK_FUZZ_CHECK(h->n_headers <= cap);

    /* The path is a view, or the literal "/" of an absolute-form target without one. */
    MK_FUZZ_CHECK(h->path.len > 0 || h->form == MK_TARGET_AUTHORITY);
    MK_FUZZ_CHECK(view_ok(h->path, head, len) || (h->path.len == 1 && h->path.p[0] == '/'));
    MK_FUZZ_CHECK(h->query.p == NULL || view_ok(h->query, head, len));
    MK_FUZZ_CHECK(view_ok(h->host, head, len));
    switch (h->form) {
    case MK_TARGET_ORIGIN:
        MK_FUZZ_CHECK(h->target.p[0] == '/' && h->path.p[0] == '/');
        break;
    case MK_TARGET_ABSOLUTE:
        MK_FUZZ_CHECK(h->host.len > 0 && h->path.p[0] == '/');
        break;
    case MK_TARGET_AUTHORITY:
        MK_FUZZ_CHECK(h->method == MK_METHOD_CONNECT && h->host.len > 0 && h->path.len == 0);
        break;
    case MK_TARGET_ASTERISK:
        MK_FUZZ_CHECK(h->method == MK_METHOD_OPTIONS);
        break;
    default:
        MK_FUZZ_CHECK(!"unknown target form");
    }

    if (h->flags & MK_HEAD_CHUNKED) {
        MK_FUZZ_CHECK(h->version == 11 && !(h->flags & MK_HEAD_CONTENT_LENGTH));
    }
    if (h->version == 11) {
        MK_FUZZ_CHECK(h->flags & MK_HEAD_HOST);
    }
    if (h->flags & MK_HEAD_EXPECT_CONTINUE) {
        MK_FUZZ_CHECK(h->version == 11);
    }
    if (!(h->flags & MK_HEAD_CONTENT_LENGTH)) {
        MK_FUZZ_CHECK(h->content_length == 0);
    }
    MK_FUZZ_CHECK(h->content_length <= INT64_MAX);

    for (unsigned k = 0; k < MK_HDR_KNOWN_COUNT; k++) {
        const char *kname = mk_http_known_name((enum mk_http_known) k);
        unsigned count = 0;
        for (unsigned i = 0; i < h->n_headers; i++) {
            count += mk_str_ieq(h->headers[i].name.p, h->headers[i].name.len, kname);
        }
        MK_FUZZ_CHECK(mk_http_known_get(h, (enum mk_http_known) k) == mk_http_header_get(h, kname));
        MK_FUZZ_CHECK(mk_http_known_repeated(h, (enum mk_http_known) k) == (count > 1));
    }

    for (unsigned i = 0; i < h->n_headers; i++) {
        const struct mk_http_header *hd = &h->headers[i];
        MK_FUZZ_CHECK(hd->name.len > 0 && view_ok(hd->name, head, len));
        MK_FUZZ_CHECK(view_ok(hd->value, head, len));
        /* Lookup by name finds this header or an earlier one of the same name. */
        char name[64];
        if (hd->name.len < sizeof(name)) {
            memcpy(name, hd->name.p, hd->name.len);
            name[hd->name.len] = '\0';
            const struct mk_str *v = mk_http_header_get(h, name);
            MK_FUZZ_CHECK(v && v >= &h->headers[0].value && v <= &hd->value);
        }
    }
}

/* Several Cookie fields joined into one (request.c does it for every head). */
static void check_cookie_join(const struct mk_http_head *h)
{
    if (!mk_http_known_repeated(h, MK_HDR_COOKIE)) {
        return;
    }
    struct mk_http_header *copy = malloc(h->n_headers * sizeof(*copy));
    struct mk_http_head j = *h;
    size_t len = mk_http_cookie_join_len(h), model = 0;
    char *buf = malloc(len + 1), *want = malloc(len + 1);
    unsigned others = 0, first = h->known[MK_HDR_COOKIE] - 1u;

    memcpy(copy, h->headers, h->n_headers * sizeof(*copy));
    j.headers = copy;
    for (unsigned i = 0; i < h->n_headers; i++) {
        const struct mk_http_header *hd = &h->headers[i];
        if (!mk_str_ieq(hd->name.p, hd->name.len, "cookie")) {
            others++;
            continue;
        }
        if (hd->value.len) {
            MK_FUZZ_CHECK(model + (model ? 2 : 0) + hd->value.len <= len);
            if (model) {
                memcpy(want + model, "; ", 2);
                model += 2;
            }
            memcpy(want + model, hd->value.p, hd->value.len);
            model += hd->value.len;
        }
    }
    MK_FUZZ_CHECK(model == len);
    mk_http_cookie_join(&j, buf);
    MK_FUZZ_CHECK(j.n_headers == others + 1);
    MK_FUZZ_CHECK(!mk_http_known_repeated(&j, MK_HDR_COOKIE));
    MK_FUZZ_CHECK(j.known[MK_HDR_COOKIE] == h->known[MK_HDR_COOKIE]);
    MK_FUZZ_CHECK(j.headers[first].value.len == len &&
                  (len == 0 || memcmp(j.headers[first].value.p, want, len) == 0));
    for (unsigned i = 0, w = 0; i < h->n_headers; i++) {
        const struct mk_http_header *hd = &h->headers[i];
        if (mk_str_ieq(hd->name.p, hd->name.len, "cookie")) {
            w += i == first;
            continue;
        }
        MK_FUZZ_CHECK(j.headers[w].name.p == hd->name.p && j.headers[w].value.p == hd->value.p);
        w++;
    }
    for (unsigned k = 0; k < MK_HDR_KNOWN_COUNT; k++) {
        const char *kname = mk_http_known_name((enum mk_http_known) k);
        MK_FUZZ_CHECK(mk_http_known_get(&j, (enum mk_http_known) k) ==
                      mk_http_header_get(&j, kname));
        MK_FUZZ_CHECK(mk_http_known_repeated(&j, (enum mk_http_known) k) ==
                      (k != MK_HDR_COOKIE && mk_http_known_repeated(h, (enum mk_http_known) k)));
    }
    free(copy);
    free(buf);
    free(want);
}

/* Two heads agree on everything the server reads from them. */
static void check_same_head(const struct mk_http_head *a, const struct mk_http_head *b)
{
    MK_FUZZ_CHECK(a->method == b->method && a->form == b->form && a->flags == b->flags);
    MK_FUZZ_CHECK(a->content_length == b->content_length && a->n_headers == b->n_headers);
    MK_FUZZ_CHECK(a->method_name.len == b->method_name.len &&
                  memcmp(a->method_name.p, b->method_name.p, a->method_name.len) == 0);
    MK_FUZZ_CHECK(a->path.len == b->path.len &&
                  (a->path.len == 0 || memcmp(a->path.p, b->path.p, a->path.len) == 0));
    MK_FUZZ_CHECK((a->query.p == NULL) == (b->query.p == NULL));
    MK_FUZZ_CHECK(a->query.len == b->query.len &&
                  (a->query.len == 0 || memcmp(a->query.p, b->query.p, a->query.len) == 0));
    MK_FUZZ_CHECK(a->host.len == b->host.len &&
                  (a->host.len == 0 || memcmp(a->host.p, b->host.p, a->host.len) == 0));
    MK_FUZZ_CHECK(memcmp(a->known, b->known, sizeof(a->known)) == 0);
    MK_FUZZ_CHECK(a->known_repeated == b->known_repeated);
    for (unsigned i = 0; i < a->n_headers; i++) {
        const struct mk_str *va = &a->headers[i].value, *vb = &b->headers[i].value;
        MK_FUZZ_CHECK(va->len == vb->len && (va->len == 0 || memcmp(va->p, vb->p, va->len) == 0));
    }
}

/* An HTTP/1.1 head the parser accepted, given to mk_http_head_build as parts. */
static void fuzz_head_parts(const struct mk_http_head *h)
{
    struct mk_http_header *copy = malloc((h->n_headers ? h->n_headers : 1) * sizeof(*copy));
    struct mk_http_head b;

    if (h->n_headers) {
        memcpy(copy, h->headers, h->n_headers * sizeof(*copy));
    }
    MK_FUZZ_CHECK(mk_http_head_build(&b, h->method_name, h->target, copy, h->n_headers, false,
                                     &mk_fuzz_limits) == MK_OK);
    check_same_head(h, &b);
    free(copy);
}

/*
 * data (after its first byte) as NUL-separated parts: method, target,
 * then name, value pairs. Built with mk_http_head_build, and as the text
 * "METHOD TARGET HTTP/1.1\r\nname: value\r\n...\r\n" through the scan and
 * the parser, when the parts can be written so (no CR or LF in them, no
 * ':' in a name): the two must agree.
 */
static void fuzz_parts(const uint8_t *data, size_t size)
{
    static const struct mk_http_limits lim = {
        .max_line = 64, .max_head = 1 << 20, .max_headers = 4};
    struct mk_str part[2 + 2 * 8];
    struct mk_http_header fields[8], fields2[8];
    unsigned n = 0;
    size_t start = 1;
    char *text, *w;
    struct mk_http_head built, parsed;

    for (size_t i = 1; i <= size && n < sizeof(part) / sizeof(part[0]); i++) {
        if (i == size || data[i] == 0) {
            part[n++] = mk_str_make((const char *) data + start, i - start);
            start = i + 1;
        }
    }
    if (n < 2 || n % 2) {
        return;
    }
    for (unsigned i = 0; i < n; i++) {
        if (memchr(part[i].p, '\r', part[i].len) || memchr(part[i].p, '\n', part[i].len) ||
            (i >= 2 && i % 2 == 0 && memchr(part[i].p, ':', part[i].len))) {
            return;
        }
    }
    unsigned nf = (n - 2) / 2;
    for (unsigned i = 0; i < nf; i++) {
        fields[i] = (struct mk_http_header){part[2 + 2 * i], part[3 + 2 * i]};
    }
    struct mk_http_header fields3[8];
    bool tokens = true;
    for (unsigned i = 0; i < nf; i++) {
        fields3[i] = fields[i];
        tokens &= mk_http_name_class(fields[i].name.p, fields[i].name.len) != MK_HTTP_NAME_BAD;
    }
    int rb = mk_http_head_build(&built, part[0], part[1], fields, nf, false, &lim);
    if (tokens) {
        /* names the caller classified as tokens: the same answer without checking them again */
        struct mk_http_head again;
        int ra = mk_http_head_build(&again, part[0], part[1], fields3, nf, true, &lim);
        MK_FUZZ_CHECK(ra == rb && again.status == built.status);
        if (ra == MK_OK) {
            check_same_head(&built, &again);
        }
    }

    text = malloc(size + 16 + 4 * nf);
    w = text;
    for (unsigned i = 0; i < n; i++) {
        memcpy(w, part[i].p, part[i].len);
        w += part[i].len;
        const char *sep = i == 0 ? " " : i == 1 ? " HTTP/1.1\r\n" : i % 2 ? "\r\n" : ": ";
        memcpy(w, sep, strlen(sep));
        w += strlen(sep);
    }
    memcpy(w, "\r\n", 2);
    w += 2;
    size_t len = (size_t) (w - text);
    struct mk_http_scan scan = {0};
    ssize_t rs = mk_http_scan(&scan, text, len, &lim);
    int status = rs == MK_ERR ? scan.status : 0;
    if (rs > 0 && (size_t) rs != len) {
        status = 400; /* a field such as " x" made an empty line: the text has no such head */
    }
    if (rs > 0 && (size_t) rs == len) {
        int rp = (int) mk_http_parse(&parsed, text, len, fields2, 8) == (int) len ? MK_OK : MK_ERR;
        status = rp == MK_OK ? 0 : parsed.status;
    }
    if (rb == MK_OK) {
        MK_FUZZ_CHECK(status == 0);
        check_same_head(&built, &parsed);
    }
    else if (status == 414 || built.status == 414 || status == 431 || built.status == 431) {
        MK_FUZZ_CHECK(status != 0);
    }
    else {
        MK_FUZZ_CHECK(status == built.status);
    }
    free(text);
}

static void fuzz_head(const char *head, size_t len, unsigned lines)
{
    unsigned cap = lines > 1 ? lines - 1 : 1;
    struct mk_http_header *headers = malloc(cap * sizeof(*headers));
    struct mk_http_head h;

    ssize_t r = mk_http_parse(&h, head, len, headers, cap);
    MK_FUZZ_CHECK(r == MK_ERR || r == (ssize_t) len);
    MK_FUZZ_CHECK(h.n_headers <= cap);
    if (r == MK_ERR) {
        MK_FUZZ_CHECK(h.status == 400 || h.status == 417 || h.status == 431 || h.status == 501 ||
                      h.status == 505);
        MK_FUZZ_CHECK(h.status != 431); /* the scan sized the array */
        for (unsigned i = 0; i < h.n_headers; i++) {
            MK_FUZZ_CHECK(view_ok(h.headers[i].name, head, len));
            MK_FUZZ_CHECK(view_ok(h.headers[i].value, head, len));
        }
    }
    else {
        check_parsed(&h, head, len, cap);
        check_cookie_join(&h);
        if (h.version == 11) {
            fuzz_head_parts(&h);
        }
    }
    free(headers);
}

/*
 * The whole input through mk_http_read_head, in a buffer of its exact size:
 * when it reads a head, the scan and the parser must read the same.
 */
static void fuzz_read_head(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    struct mk_http_header fields[24], fields2[24];
    struct mk_http_head a, b;
    struct mk_http_scan scan;
    unsigned lines = 0;

    memcpy(buf, data, size);
    ssize_t n = mk_http_read_head(&a, buf, size, &mk_fuzz_limits, fields, 24, &lines);
    if (n != MK_DECLINED) {
        MK_FUZZ_CHECK(n > 0 && (size_t) n <= size);
        memset(&scan, 0, sizeof(scan));
        MK_FUZZ_CHECK(mk_http_scan(&scan, buf, size, &mk_fuzz_limits) == n);
        MK_FUZZ_CHECK(scan.lines == lines);
        MK_FUZZ_CHECK(mk_http_parse(&b, buf, (size_t) n, fields2, 24) == n);
        check_same_head(&a, &b);
    }
    free(buf);
}

/* One decoder call over buf[0, len): checks what holds for any call. */
static ssize_t decode_step(struct mk_chunked *c, char *buf, size_t len, size_t *out)
{
    *out = 0;
    ssize_t r = mk_chunked_decode(c, buf, len, out);
    if (r == MK_ERR) {
        return r;
    }
    MK_FUZZ_CHECK(r >= 0 && (size_t) r <= len);
    MK_FUZZ_CHECK(*out <= (size_t) r);
    MK_FUZZ_CHECK(*out <= c->trailer_off && c->trailer_off <= (size_t) r);
    if ((size_t) r < len) {
        MK_FUZZ_CHECK(mk_chunked_done(c));
    }
    return r;
}

/* mk_chunked_trailer_lines() of a whole trailer section the decoder took. */
static void check_trailer_lines(const char *raw, size_t len)
{
    char *out = malloc(2 * len + 1);
    size_t n = mk_chunked_trailer_lines(raw, len, out);

    MK_FUZZ_CHECK(n <= 2 * len);
    for (size_t i = 0; i < n;) {
        const char *line = out + i;
        const char *lf = memchr(line, '\n', n - i);
        MK_FUZZ_CHECK(lf && lf > line + 1 && lf[-1] == '\r');
        size_t l = (size_t) (lf - line) - 1; /* without its CRLF */
        const char *colon = memchr(line, ':', l);
        MK_FUZZ_CHECK(colon && colon > line && colon + 1 < line + l && colon[1] == ' ');
        for (const char *p = line; p < colon; p++) {
            MK_FUZZ_CHECK(mk_is_tchar((unsigned char) *p));
        }
        const char *v = colon + 2, *vend = line + l;
        MK_FUZZ_CHECK(v == vend ||
                      (*v != ' ' && *v != '\t' && vend[-1] != ' ' && vend[-1] != '\t'));
        for (const char *p = v; p < vend; p++) {
            MK_FUZZ_CHECK(*p != '\r' && *p != '\n' && *p != '\0');
        }
        i += l + 2;
    }
    free(out);
}

/* Decode body[0, len) in one call and in two (split at `split`); compare. */
static void fuzz_chunked(const uint8_t *body, size_t len, size_t split)
{
    char *one = malloc(len ? len : 1);
    char *two = malloc(len ? len : 1);
    struct mk_chunked c1, c2;
    size_t out1 = 0, out2a = 0, out2b = 0;
    ssize_t r2a, r2b = 0;

    memcpy(one, body, len);
    memcpy(two, body, len);
    mk_chunked_init(&c1);
    mk_chunked_init(&c2);

    ssize_t r1 = decode_step(&c1, one, len, &out1);
    r2a = decode_step(&c2, two, split, &out2a);
    size_t off2a = c2.trailer_off, off2b = 0;
    if (r2a != MK_ERR && (size_t) r2a == split && !mk_chunked_done(&c2)) {
        r2b = decode_step(&c2, two + split, len - split, &out2b);
        off2b = c2.trailer_off;
    }

    if (r1 == MK_ERR) {
        MK_FUZZ_CHECK(r2a == MK_ERR || r2b == MK_ERR);
    }
    else {
        MK_FUZZ_CHECK(r2a != MK_ERR && r2b != MK_ERR);
        MK_FUZZ_CHECK((size_t) r1 == (size_t) r2a + (size_t) r2b);
        MK_FUZZ_CHECK(out1 == out2a + out2b);
        MK_FUZZ_CHECK(memcmp(one, two, out2a) == 0);
        MK_FUZZ_CHECK(memcmp(one + out2a, two + split, out2b) == 0);
        MK_FUZZ_CHECK(mk_chunked_done(&c1) == mk_chunked_done(&c2));
        /* the trailer bytes: what the one call kept, and the two calls' */
        size_t t1 = (size_t) r1 - c1.trailer_off;
        char *tail2 = malloc(len + 1);
        size_t t2 = (size_t) r2a - off2a;
        memcpy(tail2, two + off2a, t2);
        if (r2b > 0) {
            memcpy(tail2 + t2, two + split + off2b, (size_t) r2b - off2b);
            t2 += (size_t) r2b - off2b;
        }
        MK_FUZZ_CHECK(t1 == t2 && memcmp(one + c1.trailer_off, tail2, t1) == 0);
        if (mk_chunked_done(&c1)) {
            check_trailer_lines(one + c1.trailer_off, t1);
        }
        free(tail2);
    }
    free(one);
    free(two);
}

/*
 * Scan buf[0, size) in one call, in two (a prefix whose length comes from
 * the first byte, then everything) and one byte at a time, as a slow client
 * sends it; all three must agree. Returns the one-call result.
 */
static ssize_t fuzz_scan(const uint8_t *data, size_t size, const struct mk_http_limits *lim,
                         struct mk_http_scan *s1)
{
    const char *buf = (const char *) data;

    memset(s1, 0, sizeof(*s1));
    ssize_t r1 = mk_http_scan(s1, buf, size, lim);
    check_scan_result(r1, s1, size, lim);

    size_t split = size ? (size_t) data[0] * size / 255 : 0;
    struct mk_http_scan s2 = {0};
    ssize_t r2 = mk_http_scan(&s2, buf, split, lim);
    check_scan_result(r2, &s2, split, lim);
    if (r2 == MK_AGAIN) {
        r2 = mk_http_scan(&s2, buf, size, lim);
        check_scan_result(r2, &s2, size, lim);
    }
    check_same_scan(r1, s1, r2, &s2);

    struct mk_http_scan s3 = {0};
    ssize_t r3 = MK_AGAIN;
    for (size_t n = 0; n <= size && r3 == MK_AGAIN; n++) {
        r3 = mk_http_scan(&s3, buf, n, lim);
        check_scan_result(r3, &s3, n, lim);
    }
    check_same_scan(r1, s1, r3, &s3);
    return r1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mk_http_scan s1;

    if (size && data[0] == 0) {
        fuzz_parts(data, size);
    }
    fuzz_read_head(data, size);
    /* Tiny limits first, so that short inputs reach every limit check. */
    fuzz_scan(data, size, &mk_fuzz_small_limits, &s1);
    ssize_t r1 = fuzz_scan(data, size, &mk_fuzz_limits, &s1);
    if (r1 <= 0) {
        return 0;
    }

    /* The head alone, in a buffer of its exact size, so reads past it are caught. */
    size_t head_len = (size_t) r1;
    char *head = malloc(head_len);
    memcpy(head, data, head_len);
    fuzz_head(head, head_len, s1.lines);
    free(head);

    size_t body_len = size - head_len;
    size_t body_split = (size_t) data[size - 1] * body_len / 255;
    fuzz_chunked(data + head_len, body_len, body_split);
    return 0;
}
