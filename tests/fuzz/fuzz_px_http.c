/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_px_http.c: libFuzzer target for the proxy's upstream response
 * parser and chunked decoder (plugins/proxy/px_http.c): bytes an upstream
 * controls.
 *
 * The first byte chooses the mode (bit 0: a HEAD request; bits 1-7: the
 * step the chunked decoder is fed in, 1 to 128 bytes); the rest is a
 * response head, and what follows it a chunked body. Invariants (each a
 * crash when broken):
 *  - MK_OK, MK_AGAIN or MK_ERR only; MK_AGAIN only below PX_HEAD_MAX
 *    bytes; MK_ERR always with a reason;
 *  - on MK_OK: head_len <= len, the head ends with "\n\n" or "\n\r\n",
 *    a status of 100..599, at most PX_FIELDS_MAX fields, every slice
 *    inside the head, names non-empty tokens, values without CR, LF, NUL,
 *    each field's kind the one its name says (compared without case);
 *    never both a length and chunked; no body for HEAD, 1xx, 204, 304;
 *  - the parser is stateless: the head parsed again from a longer buffer
 *    gives the same head;
 *  - px_resp_status (the health check's reading) is 0 or 100..599, and
 *    on MK_OK the parser's status;
 *  - the chunked decoder consumes within what it was given, returns data
 *    inside it, and decodes the same bytes whatever the step, its trailer
 *    section kept whole too (lines ended with CRLF), and filtered into
 *    CRLF-ended lines only.
 */
#include <string.h>
#include <strings.h>

#include "plugins/proxy/px_http.h"

#include "fuzz_check.h"

static void check_slice(const struct px_slice *s, const char *buf, size_t len)
{
    MK_FUZZ_CHECK(mk_fuzz_inside(s->p, s->len, buf, len));
}

/* A field's kind is what its name says, compared the slow way (any case). */
static void check_kind(const struct px_slice *n, unsigned kind)
{
    static const struct {
        const char *name;
        unsigned kind;
    } named[] = {
        {"content-length", PX_K_LENGTH}, {"transfer-encoding", PX_K_TRANSFER},
        {"connection", PX_K_CONNECTION}, {"status", PX_K_STATUS},
        {"location", PX_K_LOCATION},     {"refresh", PX_K_REFRESH},
        {"set-cookie", PX_K_SET_COOKIE},
    };
    unsigned want = px_hop_by_hop(n->p, n->len) ? PX_K_HOP : PX_K_OTHER;
    for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
        if (n->len == strlen(named[i].name) && strncasecmp(n->p, named[i].name, n->len) == 0) {
            want = named[i].kind;
        }
    }
    MK_FUZZ_CHECK(kind == want);
}

/* Decode body[0..len) in steps of `step`: the data's length and a hash, or -1. */
static long decode(const char *body, size_t len, size_t step, uint32_t *hash, int *done)
{
    static char keep[PX_TRAILER_KEEP], out[PX_TRAILER_KEEP + 1];
    struct px_chunked c = {0};
    size_t off = 0, avail = 0, total = 0;
    c.keep = keep;
    c.keep_cap = sizeof(keep);
    *hash = 2166136261u;
    while (!c.done) {
        if (avail == off) {
            if (avail == len) {
                break;
            }
            avail = avail + step > len ? len : avail + step;
        }
        const char *d, *why;
        size_t dl;
        long k = px_chunked_step(&c, body + off, avail - off, &d, &dl, &why);
        if (k < 0) {
            MK_FUZZ_CHECK(why != NULL);
            return -1;
        }
        MK_FUZZ_CHECK((size_t) k <= avail - off);
        if (dl) {
            MK_FUZZ_CHECK(mk_fuzz_inside(d, dl, body + off, (size_t) k));
        }
        for (size_t i = 0; i < dl; i++) {
            *hash = (*hash ^ (unsigned char) d[i]) * 16777619u;
        }
        total += dl;
        off += (size_t) k;
        MK_FUZZ_CHECK(k > 0 || c.done || avail == off);
    }
    *done = c.done;
    if (c.done) {
        /* the section kept whole (it fits by construction), each line ended
           with CRLF; what is filtered is "token: value\r\n" lines */
        MK_FUZZ_CHECK(!c.keep_over && c.keep_len <= sizeof(keep));
        MK_FUZZ_CHECK(c.keep_len == 0 || memcmp(keep + c.keep_len - 2, "\r\n", 2) == 0);
        for (size_t i = 0; i < c.keep_len; i++) {
            *hash = (*hash ^ (unsigned char) keep[i]) * 16777619u;
        }
        size_t n = px_trailers_filter(keep, c.keep_len, out, sizeof(out));
        MK_FUZZ_CHECK(n < sizeof(out) && out[n] == '\0' && strlen(out) == n);
        MK_FUZZ_CHECK(n == 0 || memcmp(out + n - 2, "\r\n", 2) == 0);
        for (size_t i = 0; i < n; i++) {
            MK_FUZZ_CHECK(out[i] != '\n' || (i > 0 && out[i - 1] == '\r'));
            MK_FUZZ_CHECK(out[i] != '\r' || (i + 1 < n && out[i + 1] == '\n'));
        }
    }
    return (long) total;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    bool head = data[0] & 1;
    size_t step = (size_t) (data[0] >> 1) + 1;
    const char *buf = (const char *) data + 1;
    size_t len = size - 1;
    static struct px_resp r, again;

    int rc = px_resp_parse(buf, len, head, &r);
    MK_FUZZ_CHECK(rc == MK_OK || rc == MK_AGAIN || rc == MK_ERR);
    int status = px_resp_status(buf, len);
    MK_FUZZ_CHECK(status == 0 || (status >= 100 && status <= 599));
    MK_FUZZ_CHECK(rc != MK_OK || status == r.status);
    if (rc == MK_AGAIN) {
        MK_FUZZ_CHECK(len < PX_HEAD_MAX);
    }
    if (rc == MK_ERR) {
        MK_FUZZ_CHECK(r.why != NULL);
    }
    if (rc != MK_OK) {
        return 0;
    }
    MK_FUZZ_CHECK(r.head_len >= 2 && r.head_len <= len && r.head_len <= PX_HEAD_MAX);
    MK_FUZZ_CHECK(buf[r.head_len - 1] == '\n');
    MK_FUZZ_CHECK(buf[r.head_len - 2] == '\n' ||
                  (r.head_len >= 3 && buf[r.head_len - 2] == '\r' && buf[r.head_len - 3] == '\n'));
    MK_FUZZ_CHECK(r.status >= 100 && r.status <= 599);
    MK_FUZZ_CHECK(r.n_fields <= PX_FIELDS_MAX);
    for (unsigned i = 0; i < r.n_fields; i++) {
        check_slice(&r.fields[i].name, buf, r.head_len);
        check_slice(&r.fields[i].value, buf, r.head_len);
        MK_FUZZ_CHECK(r.fields[i].name.len > 0);
        for (size_t k = 0; k < r.fields[i].value.len; k++) {
            char ch = r.fields[i].value.p[k];
            MK_FUZZ_CHECK(ch != '\r' && ch != '\n' && ch != '\0');
        }
        for (size_t k = 0; k < r.fields[i].name.len; k++) {
            char ch = r.fields[i].name.p[k];
            MK_FUZZ_CHECK(ch > 0x20 && ch != ':' && ch < 0x7f);
        }
        check_kind(&r.fields[i].name, r.kind[i]);
    }
    if (head || r.status < 200 || r.status == 204 || r.status == 304) {
        MK_FUZZ_CHECK(r.framing == PX_BODY_NONE);
    }
    if (r.framing == PX_BODY_CLOSE) {
        MK_FUZZ_CHECK(r.close);
    }
    MK_FUZZ_CHECK(px_resp_parse(buf, r.head_len, head, &again) == MK_OK);
    MK_FUZZ_CHECK(again.status == r.status && again.framing == r.framing &&
                  again.n_fields == r.n_fields && again.head_len == r.head_len);

    /* the rest as a chunked body: the same bytes whatever the step */
    const char *body = buf + r.head_len;
    size_t blen = len - r.head_len;
    uint32_t h1, h2;
    int d1 = 0, d2 = 0;
    long n1 = decode(body, blen, step, &h1, &d1);
    long n2 = decode(body, blen, blen ? blen : 1, &h2, &d2);
    MK_FUZZ_CHECK(n1 == n2);
    if (n1 >= 0) {
        MK_FUZZ_CHECK(h1 == h2 && d1 == d2);
    }
    return 0;
}
