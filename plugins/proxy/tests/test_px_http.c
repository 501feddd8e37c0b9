/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_px_http.c: the proxy's upstream response parser and chunked decoder
 * (plugins/proxy/px_http.c), as tables of raw bytes and what the parser
 * must make of them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "px_http.h"

struct resp_case {
    const char *raw;
    int head; /* a HEAD request */
    int rc;
    int status;
    enum px_framing framing;
    unsigned long long length;
    int close;
};

static const struct resp_case cases[] = {
    {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 0, MK_OK, 200, PX_BODY_LENGTH, 5, 0},
    {"HTTP/1.1 200 OK\nContent-Length: 5\n\n", 0, MK_OK, 200, PX_BODY_LENGTH, 5, 0},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 0, MK_OK, 200, PX_BODY_CHUNKED},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n", 0, MK_OK, 200, PX_BODY_CHUNKED},
    {"HTTP/1.1 200 OK\r\n\r\n", 0, MK_OK, 200, PX_BODY_CLOSE, 0, 1},
    {"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0, MK_OK, 200, PX_BODY_NONE},
    {"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", 1, MK_OK, 200, PX_BODY_NONE},
    {"HTTP/1.1 204 No Content\r\n\r\n", 0, MK_OK, 204, PX_BODY_NONE},
    {"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", 0, MK_OK, 304, PX_BODY_NONE},
    {"HTTP/1.1 100 Continue\r\n\r\n", 0, MK_OK, 100, PX_BODY_NONE},
    {"HTTP/1.1 200\r\nContent-Length: 1\r\n\r\n", 0, MK_OK, 200, PX_BODY_LENGTH, 1},
    {"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", 0, MK_OK, 200, PX_BODY_LENGTH, 1, 1},
    {"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n", 0, MK_OK, 200,
     PX_BODY_LENGTH, 1, 0},
    {"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n", 0, MK_OK, 200,
     PX_BODY_LENGTH, 1, 1},
    {"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", 0, MK_OK, 200,
     PX_BODY_LENGTH, 3},
    /* incomplete */
    {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n", 0, MK_AGAIN},
    {"HTTP/1.1 200 OK\r", 0, MK_AGAIN},
    {"", 0, MK_AGAIN},
    /* malformed: 502 */
    {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 0, MK_ERR},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 0, MK_ERR},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 0,
     MK_ERR},
    {"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 0, MK_ERR},
    {"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 0, MK_ERR},
    {"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 0, MK_ERR},
    {"HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\n\r\n", 0, MK_ERR},
    {"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", 0, MK_ERR},
    {"HTTP/1.1 200 OK\rX: y\r\n\r\n", 0, MK_ERR},
    {"HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n", 0, MK_ERR},
    {"HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n", 0, MK_ERR},
    {"HTTP/1.1 200 OK\r\nX : a\r\n\r\n", 0, MK_ERR},
    {"HTTP/1.1 200 OK\r\n: a\r\n\r\n", 0, MK_ERR},
    {"HTTP/1.1 200 OK\r\nX: a\x01\r\n\r\n", 0, MK_ERR},
    {"HTTP/1.1 20 OK\r\n\r\n", 0, MK_ERR},
    {"HTTP/1.1 2000 OK\r\n\r\n", 0, MK_ERR},
    {"HTTP/1.1 099 OK\r\n\r\n", 0, MK_ERR},
    {"HTTP/1.1 600 OK\r\n\r\n", 0, MK_ERR},
    {"HTTP/2 200 OK\r\n\r\n", 0, MK_ERR},
    {"HTTP/1.2 200 OK\r\n\r\n", 0, MK_ERR},
    {"ICY 200 OK\r\n\r\n", 0, MK_ERR},
    {"HTTP/1.1 200 OK\r\nX\r\n\r\n", 0, MK_ERR},
    /* line ends (px_line): a bare CR before any LF, a CR at the end that waits */
    {"HTTP/1.1 200 OK\rX", 0, MK_ERR},
    {"HTTP/1.1 200 OK\r\nX: a\r", 0, MK_AGAIN},
    {"HTTP/1.1 200 OK\r\nX: a\rb", 0, MK_ERR},
    /* byte classes: every tchar in a name; tab and obs-text in a value, DEL not */
    {"HTTP/1.1 200 OK\r\nX-a!#$%&'*+.^_`|~09: v\r\nContent-Length: 0\r\n\r\n", 0, MK_OK, 200,
     PX_BODY_NONE},
    {"HTTP/1.1 200 OK\r\nX: a\tb\xc3\xa9\r\nContent-Length: 0\r\n\r\n", 0, MK_OK, 200,
     PX_BODY_NONE},
    {"HTTP/1.1 200 OK\r\nX: a\x7f\r\n\r\n", 0, MK_ERR},
    /* names near the ones the parser knows are other fields (each byte compared) */
    {"HTTP/1.1 200 OK\r\nTransfer6Encoding: x\r\nContent-Length: 0\r\n\r\n", 0, MK_OK, 200,
     PX_BODY_NONE},
    {"HTTP/1.1 200 OK\r\nTransfer-EncodinG: chunked\r\nContent-Length: 0\r\n\r\n", 0, MK_ERR},
    {"HTTP/1.1 200 OK\r\nContent-Lengtx: 5\r\nConnectioN: close\r\n\r\n", 0, MK_OK, 200,
     PX_BODY_CLOSE, 0, 1},
    {"HTTP/1.1 200 OK\r\nContent_Length: 5\r\nContent-Length: 0\r\n\r\n", 0, MK_OK, 200,
     PX_BODY_NONE},
    {"HTTP/1.1 200 OK\r\nX(: a\r\n\r\n", 0, MK_ERR},
    {"HTTP/1.1 200 O\x7fK\r\n\r\n", 0, MK_ERR},
};

static void test_resp_table(void **state)
{
    (void) state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct resp_case *c = &cases[i];
        struct px_resp r;
        int rc = px_resp_parse(c->raw, strlen(c->raw), c->head, &r);
        if (rc != c->rc) {
            fail_msg("case %zu (%s): rc %d, expected %d (%s)", i, c->raw, rc, c->rc,
                     r.why ? r.why : "");
        }
        if (rc == MK_ERR) {
            assert_non_null(r.why);
        }
        if (rc != MK_OK) {
            continue;
        }
        assert_int_equal(r.status, c->status);
        assert_int_equal(r.framing, c->framing);
        if (c->framing == PX_BODY_LENGTH) {
            assert_int_equal(r.length, c->length);
        }
        assert_int_equal(r.close, c->close);
    }
}

/* The length a HEAD's answer announces is kept for the client, though no body follows. */
static void test_resp_head_length(void **state)
{
    static const char with[] = "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n";
    static const char without[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    struct px_resp r;
    (void) state;
    assert_int_equal(px_resp_parse(with, strlen(with), true, &r), MK_OK);
    assert_int_equal(r.framing, PX_BODY_NONE);
    assert_true(r.has_length);
    assert_int_equal(r.length, 9);
    assert_int_equal(px_resp_parse(without, strlen(without), true, &r), MK_OK);
    assert_false(r.has_length);
    assert_int_equal(px_resp_parse(with, strlen(with), false, &r), MK_OK);
    assert_true(r.has_length);
    assert_int_equal(r.framing, PX_BODY_LENGTH);
}

static void test_resp_fields(void **state)
{
    const char *raw = "HTTP/1.1 200 OK\r\nConnection: X-Drop, close\r\nX-Drop: 1\r\n"
                      "Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nX-Pad:   v  \r\n\r\nbody";
    struct px_resp r;
    (void) state;
    assert_int_equal(px_resp_parse(raw, strlen(raw), false, &r), MK_OK);
    assert_int_equal(r.n_fields, 5);
    assert_int_equal(r.head_len, strlen(raw) - 4);
    assert_true(r.has_connection);
    assert_true(px_resp_conn_names(&r, "x-drop", 6));
    assert_false(px_resp_conn_names(&r, "set-cookie", 10));
    assert_int_equal(r.fields[4].value.len, 1);
    assert_true(px_hop_by_hop("Keep-Alive", 10));
    assert_true(px_hop_by_hop("Proxy-Authenticate", 18));
    assert_true(px_hop_by_hop("transfer-encoding", 17));
    assert_false(px_hop_by_hop("Content-Type", 12));
    assert_true(px_hop_by_hop("TE", 2));
    assert_true(px_hop_by_hop("Trailer", 7));
    assert_true(px_hop_by_hop("UPGRADE", 7));
    assert_true(px_hop_by_hop("Connection", 10));
    assert_true(px_hop_by_hop("Proxy-A", 7)); /* the prefix, whatever the length */
    assert_true(px_hop_by_hop("proxy-connection", 16));
    assert_false(px_hop_by_hop("Proxy", 5));
    assert_false(px_hop_by_hop("Upgrades", 8));
    assert_false(px_hop_by_hop("Content-Length", 14));
    assert_false(px_hop_by_hop("Tk", 2));
    assert_true(px_hop_by_hop("KEEP-ALIVE", 10));
    assert_false(px_hop_by_hop("User-Agent", 10)); /* the same length, another first letter */
    assert_false(px_hop_by_hop("Connectiox", 10));
    const char *plain = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    assert_int_equal(px_resp_parse(plain, strlen(plain), false, &r), MK_OK);
    assert_false(r.has_connection);
    /* a head that never ends within PX_HEAD_MAX */
    static char big[PX_HEAD_MAX + 64];
    memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 20);
    memset(big + 20, 'a', sizeof(big) - 20);
    assert_int_equal(px_resp_parse(big, sizeof(big), false, &r), MK_ERR);
}

/* Decode all of `in`, fed `step` bytes at a time: MK_OK with out, or MK_ERR. */
static int decode(const char *in, size_t len, size_t step, char *out, size_t *olen, size_t *rest)
{
    struct px_chunked c = {0};
    size_t off = 0, avail = 0;
    *olen = 0;
    while (!c.done) {
        if (avail == off) {
            if (avail == len) {
                return MK_AGAIN;
            }
            avail = avail + step > len ? len : avail + step;
        }
        const char *d, *why;
        size_t dl;
        long k = px_chunked_step(&c, in + off, avail - off, &d, &dl, &why);
        if (k < 0) {
            return MK_ERR;
        }
        if (dl) {
            memcpy(out + *olen, d, dl);
            *olen += dl;
        }
        off += (size_t) k;
    }
    *rest = len - off;
    return MK_OK;
}

static void test_chunked(void **state)
{
    static const struct {
        const char *in;
        int rc;
        const char *out;
        size_t rest;
    } t[] = {
        {"5\r\nhello\r\n0\r\n\r\n", MK_OK, "hello", 0},
        {"5\nhello\n0\n\n", MK_OK, "hello", 0},
        {"3;ext=1\r\nabc\r\nA\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\nNEXT", MK_OK, "abc0123456789",
         4},
        {"0\r\n\r\n", MK_OK, "", 0},
        {"5\r\nhello\r\n", MK_AGAIN},
        {"x\r\n", MK_ERR},
        {"\r\n", MK_ERR},
        {"5 \r\nhello\r\n0\r\n\r\n", MK_ERR},
        {"5\rhello", MK_ERR},
        {"5\r\nhelloX\r\n", MK_ERR},
        {"1234567890abcdef0\r\n", MK_ERR},
        {"0\r\n folded\r\n\r\n", MK_ERR},
        {"0\r\nA: b\rc\r\n\r\n", MK_ERR},
    };
    char out[256];
    (void) state;
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        for (size_t step = 1; step <= strlen(t[i].in) + 1; step++) {
            size_t olen = 0, rest = 0;
            int rc = decode(t[i].in, strlen(t[i].in), step, out, &olen, &rest);
            if (rc != t[i].rc) {
                fail_msg("chunked case %zu step %zu: rc %d, expected %d", i, step, rc, t[i].rc);
            }
            if (rc == MK_OK) {
                assert_int_equal(olen, strlen(t[i].out));
                assert_memory_equal(out, t[i].out, olen);
                assert_int_equal(rest, t[i].rest);
            }
        }
    }
}

static void test_chunked_unread(void **state)
{
    struct px_chunked c = {0};
    const char *d, *why;
    size_t dl;
    const char *in = "6\r\nabcdef\r\n0\r\n\r\n";
    (void) state;
    long k = px_chunked_step(&c, in, strlen(in), &d, &dl, &why);
    assert_int_equal(k, 9);
    assert_int_equal(dl, 6);
    px_chunked_unread(&c, 4); /* only "ab" taken */
    k = px_chunked_step(&c, in + 5, strlen(in) - 5, &d, &dl, &why);
    assert_int_equal(dl, 4);
    assert_memory_equal(d, "cdef", 4);
}

/* The trailer section kept, split at every step, then filtered. */
static void test_chunked_trailers_kept(void **state)
{
    const char *in = "3\r\nabc\r\n0\r\nX-Sum: 1\r\nContent-Length: 9\nBad Name: x\r\n"
                     "Grpc-Status:0 \r\nnocolon\r\nSet-Cookie: a=b\r\nTE: x\r\n\r\nNEXT";
    const char *kept = "X-Sum: 1\r\nContent-Length: 9\r\nBad Name: x\r\nGrpc-Status:0 \r\n"
                       "nocolon\r\nSet-Cookie: a=b\r\nTE: x\r\n";
    char keep[256], out[256];
    (void) state;
    for (size_t step = 1; step <= strlen(in); step++) {
        struct px_chunked c = {0};
        const char *d, *why;
        size_t dl, off = 0;
        c.keep = keep;
        c.keep_cap = sizeof(keep);
        while (!c.done) {
            size_t n = strlen(in) - off < step ? strlen(in) - off : step;
            long k = px_chunked_step(&c, in + off, n, &d, &dl, &why);
            assert_true(k >= 0);
            off += (size_t) k;
        }
        assert_int_equal(off, strlen(in) - 4);
        assert_false(c.keep_over);
        assert_int_equal(c.keep_len, strlen(kept));
        assert_memory_equal(keep, kept, c.keep_len);
        size_t n = px_trailers_filter(keep, c.keep_len, out, sizeof(out));
        assert_string_equal(out, "X-Sum: 1\r\nGrpc-Status: 0\r\n");
        assert_int_equal(n, strlen(out));
    }
    /* too little room: over, never past it */
    struct px_chunked c = {0};
    const char *d, *why;
    size_t dl;
    c.keep = keep;
    c.keep_cap = 8;
    for (size_t off = 0; !c.done;) {
        long k = px_chunked_step(&c, in + off, strlen(in) - off, &d, &dl, &why);
        assert_true(k > 0);
        off += (size_t) k;
    }
    assert_true(c.keep_over && c.keep_len <= 8);
    /* no room for a line in out: none, NUL-terminated */
    assert_int_equal(px_trailers_filter("X-Sum: 1\r\n", 10, out, 6), 0);
    assert_string_equal(out, "");
}

/* px_resp_status: the status of the first 12 bytes, 0 for anything else. */
static void test_resp_status(void **state)
{
    static const struct {
        const char *raw;
        int status;
    } t[] = {
        {"HTTP/1.1 200 OK\r\n", 200}, {"HTTP/1.0 503 Busy\r\n", 503},
        {"HTTP/1.1 100", 100},        {"HTTP/1.1 599 x", 599},
        {"HTTP/1.1 204", 204},        {"HTTP/1.1 099 low\r\n", 0},
        {"HTTP/1.1 600 high\r\n", 0}, {"HTTP/1.1 20", 0},
        {"HTTP/1.1 2x0 OK\r\n", 0},   {"HTTP/1.2 200 OK\r\n", 0},
        {"HTTP/2.0 200 OK\r\n", 0},   {"http/1.1 200 OK\r\n", 0},
        {"HTTP/1.1  200 OK\r\n", 0},  {"HTTP/1.1\t200 OK\r\n", 0},
        {"SSH-2.0-OpenSSH\r\n", 0},   {"", 0},
    };
    (void) state;
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        if (px_resp_status(t[i].raw, strlen(t[i].raw)) != t[i].status) {
            fail_msg("case %zu (%s): %d, not %d", i, t[i].raw,
                     px_resp_status(t[i].raw, strlen(t[i].raw)), t[i].status);
        }
    }
    /* only len bytes are read: a status cut short is none */
    assert_int_equal(px_resp_status("HTTP/1.1 200 OK", 11), 0);
    assert_int_equal(px_resp_status("HTTP/1.1 200 OK", 12), 200);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resp_table),     cmocka_unit_test(test_resp_head_length),
        cmocka_unit_test(test_resp_fields),    cmocka_unit_test(test_chunked),
        cmocka_unit_test(test_chunked_unread), cmocka_unit_test(test_chunked_trailers_kept),
        cmocka_unit_test(test_resp_status),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
