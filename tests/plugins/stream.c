/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * stream.c: a test plugin that streams a body of unknown length, driven by
 * proceed. GET /stream?bytes=N&piece=P[&trailer=1][&async=1] answers N
 * bytes in pieces of P (default 16384); piece k is P bytes of 'a' + k % 26,
 * so a client can check each chunk. trailer=1 ends with the trailer line
 * "X-Stream-Bytes: N"; async=1 writes every piece from a later event
 * (api->worker_call) instead of from proceed itself; buffer=1 fills each
 * piece in a buffer of the queue (api->stream_buffer, stream_commit, ABI
 * 3.5) instead of copying it in with stream_write, and checks their
 * contract on the way: a broken rule is logged ("stream: buffer contract")
 * and the body ends short. length=1 announces the body's length first
 * (api->stream_length, ABI 3.13), and checks at its end that a byte more
 * is refused ("stream: length contract" logged when it is not). hints=1
 * sends two 103 Early Hints first (api->interim, ABI 3.15), each with a
 * Link field, after checking that a bad status or field is refused, and
 * checks at the first proceed that one after the head is refused too
 * ("stream: interim contract" logged when a rule is broken).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <monkey/mk_plugin.h>

static const struct mk_api *api;

struct stream {
    struct mk_request *r;
    unsigned long long total, left;
    size_t piece;
    unsigned seq;
    int trailer, async, pending, gone, buffer, length, hints;
    char buf[];
};

static int stream_init(const struct mk_api *a, const char *conf_dir)
{
    (void) conf_dir;
    api = a;
    if (!MK_API_HAS(api, stream_start)) { /* added in ABI 3.1 */
        api->log(MK_PLUGIN_LOG_ERROR, "stream: needs a server with plugin ABI 3.1");
        return MK_ERR;
    }
    return MK_OK;
}

static unsigned long long query_num(const char *q, size_t len, const char *key,
                                    unsigned long long def)
{
    char tmp[256];
    size_t klen = strlen(key);

    if (!q || len >= sizeof(tmp)) {
        return def;
    }
    memcpy(tmp, q, len);
    tmp[len] = '\0';
    for (char *p = tmp; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
        if (strncmp(p, key, klen) == 0 && p[klen] == '=') {
            return strtoull(p + klen + 1, NULL, 10);
        }
    }
    return def;
}

/* A broken rule of stream_buffer()/stream_commit(): logged, and the body ends short. */
static int stream_contract(struct stream *s, const char *what)
{
    api->log(MK_PLUGIN_LOG_ERROR, "stream: buffer contract: %s", what);
    s->left = 0;
    return MK_ERR;
}

/* Piece n of s through a buffer of the queue: as stream_write() returns. */
static int stream_buffered(struct stream *s, size_t n)
{
    if (api->stream_commit(s->r, n) != MK_ERR) {
        return stream_contract(s, "a commit without a buffer was taken");
    }
    if (api->stream_buffer(s->r, 0) != NULL) {
        return stream_contract(s, "a buffer of 0 bytes");
    }
    char *b = api->stream_buffer(s->r, n + 1);
    if (!b || api->stream_commit(s->r, n + 2) != MK_ERR) {
        return stream_contract(s, "a commit past the buffer was taken");
    }
    /* a buffer replaced by another, then one released unused */
    if (!api->stream_buffer(s->r, n) || !api->stream_buffer(s->r, n) ||
        api->stream_commit(s->r, 0) != MK_OK) {
        return stream_contract(s, "an unused buffer");
    }
    if (!(b = api->stream_buffer(s->r, n + 100))) {
        return stream_contract(s, "no buffer below the mark");
    }
    memset(b, 'a' + (int) (s->seq % 26), n);
    int rc = api->stream_commit(s->r, n);
    if (rc == MK_AGAIN && api->stream_buffer(s->r, 1) != NULL) {
        return stream_contract(s, "a buffer over the mark");
    }
    return rc;
}

/* Write pieces until the queue is full or the body is done. */
static void stream_produce(struct stream *s)
{
    while (s->left) {
        size_t n = s->left < s->piece ? (size_t) s->left : s->piece;
        int rc;
        if (s->buffer) {
            rc = stream_buffered(s, n);
        }
        else {
            memset(s->buf, 'a' + (int) (s->seq % 26), n);
            rc = api->stream_write(s->r, s->buf, n);
        }
        if (rc == MK_ERR) {
            return;
        }
        s->left -= n;
        s->seq++;
        if (rc == MK_AGAIN || s->async) {
            return;
        }
    }
    if (s->length && api->stream_write(s->r, "x", 1) != MK_ERR) {
        api->log(MK_PLUGIN_LOG_ERROR, "stream: length contract: a byte past the length taken");
    }
    char trailer[64];
    snprintf(trailer, sizeof(trailer), "X-Stream-Bytes: %llu\r\n", s->total);
    struct mk_request *r = s->r;
    int with_trailer = s->trailer;
    free(s); /* no proceed call follows stream_end */
    api->stream_end(r, with_trailer ? trailer : NULL);
}

static void stream_later(void *arg)
{
    struct stream *s = arg;

    s->pending = 0;
    if (s->gone) {
        free(s);
        return;
    }
    stream_produce(s);
}

static void stream_proceed(struct mk_request *r, void *arg)
{
    struct stream *s = arg;

    if (r && s->hints == 1) {
        s->hints = 2; /* the head is out: no interim answer now */
        int late = api->version(r) == 10 ? MK_DECLINED : MK_ERR; /* 1.0: never any */
        if (api->interim(r, 103, "Link: </late.css>\r\n") != late) {
            api->log(MK_PLUGIN_LOG_ERROR, "stream: interim contract: one after the head");
        }
    }
    if (!r) {
        if (s->pending) {
            s->gone = 1; /* stream_later frees it */
        }
        else {
            free(s);
        }
        return;
    }
    if (s->async) {
        s->pending = 1;
        if (api->worker_call(api->worker_id(), stream_later, s) != MK_OK) {
            s->pending = 0;
        }
        return;
    }
    stream_produce(s);
}

static int stream_content(struct mk_request *r)
{
    size_t len, qlen;
    const char *path = api->path(r, &len);
    const char *q = api->query(r, &qlen);

    if (len != 7 || memcmp(path, "/stream", 7) != 0) {
        return MK_DECLINED;
    }
    size_t piece = (size_t) query_num(q, qlen, "piece", 16384);
    if (piece == 0 || piece > (1u << 20)) {
        return 400;
    }
    struct stream *s = calloc(1, sizeof(*s) + piece);
    if (!s) {
        return 503;
    }
    s->r = r;
    s->total = s->left = query_num(q, qlen, "bytes", 0);
    s->piece = piece;
    s->trailer = (int) query_num(q, qlen, "trailer", 0);
    s->async = (int) query_num(q, qlen, "async", 0);
    s->buffer = (int) query_num(q, qlen, "buffer", 0);
    s->length = (int) query_num(q, qlen, "length", 0);
    s->hints = (int) query_num(q, qlen, "hints", 0) ? 1 : 0;
    if ((s->buffer && !MK_API_HAS(api, stream_buffer)) ||
        (s->length && !MK_API_HAS(api, stream_length)) || (s->hints && !MK_API_HAS(api, interim))) {
        free(s);
        return 501;
    }
    if (s->hints) {
        static const char *const bad[] = {"Link x\r\n", "Bad Name: x\r\n", "Link: a\rb\r\n",
                                          "Link: a\n",  "Link: a",         ": a\r\n"};
        int ok = api->interim(r, 101, NULL) == MK_ERR && api->interim(r, 200, NULL) == MK_ERR &&
                 api->interim(r, 99, NULL) == MK_ERR;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            ok &= api->interim(r, 103, bad[i]) == MK_ERR;
        }
        int rc = api->interim(r, 103, "Link: </a.css>; rel=preload\r\n");
        int rc2 = api->interim(r, 103, "Link: </b.js>; rel=preload\r\nX-Hint: 2\r\n");
        int want = api->version(r) == 10 ? MK_DECLINED : MK_OK;
        if (!ok || rc != want || rc2 != want) {
            api->log(MK_PLUGIN_LOG_ERROR, "stream: interim contract: ok %d, rc %d %d", ok, rc, rc2);
        }
    }
    api->set_content_type(r, "application/octet-stream");
    if (api->stream_start(r, stream_proceed, s) != MK_OK) {
        free(s);
        return 500;
    }
    if (s->length && api->stream_length(r, s->total) != MK_OK) {
        return 500; /* the server drops the stream: proceed(NULL) frees s */
    }
    return MK_OK;
}

MK_EXPORT const struct mk_plugin mk_plugin = {
    MK_PLUGIN_ABI_INIT,
    .name = "stream",
    .init = stream_init,
    .content = stream_content,
};
