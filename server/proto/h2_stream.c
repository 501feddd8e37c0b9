/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * h2_stream.c: an HTTP/2 stream as a request (h2.c has the overview).
 * A stream is opened by the client's HEADERS (mk_h2_stream_new) and
 * becomes one ordinary request once its header block is complete:
 *
 *   the header block is kept with the stream, in one buffer (pseudo-header
 *     values, then the regular fields as records), checked as the fields
 *     arrive for what RFC 9113 asks of HTTP/2 alone (nghttp2's HTTP checks
 *     are off), then handed to mk_request_run_parts as a request head;
 *   DATA is the stream's body: kept (within the stream's window) until a
 *     handler asks for it (read_body), then buffered or streamed (body.h);
 *     the stream's window opens again only as the handler takes the bytes;
 *   the callbacks of the frames the client sends and of those that went
 *     out end the stream: its answer complete, a reset either way, closed.
 *
 * Also stream 1 of a connection upgraded from HTTP/1 (Upgrade: h2c), whose
 * header block is made from the HTTP/1 head (mk_h2_upgrade_stream).
 *
 * On the connection's worker, mostly inside nghttp2's callbacks (`busy`:
 * no session_send from there; a write asked for waits for mk_h2_flush). A
 * stream belongs to its connection's struct mk_h2: on its list while open,
 * on the dead list once closed, freed there by mk_h2_stream_free when
 * nothing queued refers to it any more (h2_send.c); its request (s->r) is
 * freed with it.
 */
#include <nghttp2/nghttp2.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <monkey/mk_util.h>

#include "../../core/log.h"
#include "../http/http_chars.h"
#include "../request/body.h"
#include "h2.h"
#include "h2_internal.h"
#include "../process/server.h"

/* ---- streams ------------------------------------------------------------- */

/*
 * A stream the client opened: counted, on the connection's list. One
 * block holds the stream and the start of its header block: a request
 * costs one allocation fewer.
 */
struct mk_h2_stream *mk_h2_stream_new(struct mk_conn *c, int32_t id)
{
    struct mk_h2_stream *s = mk_h2_mem_get(MK_H2_STREAM_BLOCK);

    if (!s) {
        mk_err("out of memory");
        abort();
    }
    memset(s, 0, sizeof(*s));
    s->block = s->first;
    s->block_cap = MK_H2_STREAM_BLOCK - sizeof(*s);
    s->id = id;
    s->since = c->worker->now_ms;
    s->content_length = -1;
    s->prio.urgency = MK_HTTP_URGENCY_DEFAULT;
    if (s->id > c->h2->max_opened) {
        c->h2->max_opened = s->id;
    }
    mk_list_add_tail(&s->node, &c->h2->streams);
    c->h2->recent[((uint32_t) id >> 1) % MK_H2_RECENT] = s;
    c->h2->n_open++;
    MK_STAT_ADD(c->worker->n_h2_streams, 1);
    MK_STAT_ADD(c->worker->h2_streams, 1);
    return s;
}

void mk_h2_stream_free(struct mk_conn *c, struct mk_h2_stream *s)
{
    if (s->tunnel) {
        mk_h2_tunnel_free(c, s);
    }
    if (s->r) {
        s->r->proto_data = NULL;
        mk_request_free(s->r);
        s->r = NULL;
    }
    mk_list_del(&s->node);
    if (s->block != s->first) {
        mk_h2_mem_put(s->block);
    }
    mk_free(s->kept);
    mk_h2_mem_put(s);
}

/* ---- the header block ---------------------------------------------------- */

/*
 * Move the header block of s to a larger block of its own, for `need` more
 * bytes: false when out of memory (the block stays as it was).
 */
static bool mk_h2_block_grow(struct mk_h2_stream *s, size_t need)
{
    size_t cap = s->block_cap * 2;
    char *p;

    while (cap < s->block_len + need) {
        cap *= 2;
    }
    p = s->block == s->first ? mk_h2_mem_get(cap) : mk_h2_mem_resize(s->block, cap);
    if (!p) {
        return false;
    }
    if (s->block == s->first && s->block_len) {
        memcpy(p, s->first, s->block_len);
    }
    s->block = p;
    s->block_cap = cap;
    return true;
}

/* Room for `need` more bytes in the header block of s: false when out of memory. */
static inline bool mk_h2_block_room(struct mk_h2_stream *s, size_t need)
{
    return s->block_len + need <= s->block_cap || mk_h2_block_grow(s, need);
}

/* Append a regular field (a record, its name, its value) to the header block of s. */
static bool mk_h2_field_add(struct mk_h2_stream *s, const uint8_t *name, size_t nlen,
                            const uint8_t *value, size_t vlen)
{
    struct mk_h2_rec rec = {(uint32_t) nlen, (uint32_t) vlen};
    size_t need = sizeof(rec) + nlen + vlen;

    if (!mk_h2_block_room(s, need)) {
        return false;
    }
    if (!s->has_fields) {
        s->has_fields = true;
        s->fields_off = s->block_len;
    }
    char *w = s->block + s->block_len;
    memcpy(w, &rec, sizeof(rec));
    w += sizeof(rec);
    if (nlen) {
        memcpy(w, name, nlen);
    }
    if (vlen) {
        memcpy(w + nlen, value, vlen);
    }
    s->block_len += need;
    s->n_recs++;
    return true;
}

/* Keep a pseudo-header value in the header block of s: false when out of memory. */
static bool mk_h2_span_set(struct mk_h2_stream *s, struct mk_h2_span *span, const void *value,
                           size_t len)
{
    if (!mk_h2_block_room(s, len)) {
        return false;
    }
    if (len) {
        memcpy(s->block + s->block_len, value, len);
    }
    span->off = (uint32_t) s->block_len;
    span->len = (uint32_t) len;
    span->set = true;
    s->block_len += len;
    return true;
}

static struct mk_str mk_h2_span_str(const struct mk_h2_stream *s, const struct mk_h2_span *span)
{
    return span->len ? mk_str_make(s->block + span->off, span->len) : MK_STR("");
}

/*
 * The fields of s as a request head's header array (in r's arena): Host
 * from :authority first, then the regular fields, as views into the
 * header block. NULL when out of memory.
 */
static struct mk_http_header *mk_h2_headers(struct mk_request *r, const struct mk_h2_stream *s,
                                            unsigned *n)
{
    unsigned cap = s->n_recs + (s->authority.set ? 1 : 0);
    struct mk_http_header *headers = mk_arena_alloc(&r->arena, (cap ? cap : 1) * sizeof(*headers));
    const char *p = s->block + s->fields_off;

    if (!headers) {
        return NULL;
    }
    *n = 0;
    if (s->authority.set) {
        headers[(*n)++] = (struct mk_http_header){MK_STR("host"), mk_h2_span_str(s, &s->authority)};
    }
    for (unsigned i = 0; i < s->n_recs; i++) {
        struct mk_h2_rec rec;
        memcpy(&rec, p, sizeof(rec));
        p += sizeof(rec);
        headers[*n].name = mk_str_make(p, rec.name_len);
        headers[*n].value = mk_str_make(p + rec.name_len, rec.value_len);
        p += rec.name_len + rec.value_len;
        (*n)++;
    }
    return headers;
}

/* ---- request checks (RFC 9113 sections 8.1.1, 8.2, 8.3) ------------------ */

/*
 * nghttp2 runs with its HTTP checks off (no_http_messaging): they cost
 * more than a thousand instructions a request and repeated what
 * mk_http_head_build checks anyway. What remains specific to HTTP/2 is
 * checked here as the fields arrive, and a malformed request is reset
 * with PROTOCOL_ERROR, as nghttp2 would: pseudo-headers (known, once,
 * not empty, before every regular field, none in trailers; :method,
 * :scheme and :path present, or :authority alone for CONNECT, or all
 * four with :protocol for an extended CONNECT (RFC 8441), :protocol with
 * no other method; :path "/..." or OPTIONS "*"), upper-case or connection-specific field names,
 * TE other than "trailers", Content-Length against the DATA received.
 * The rest (characters of names, values, :method, :path, :authority) is
 * mk_http_head_build's, which answers 400 like HTTP/1. The `priority`
 * field (RFC 9218) is parsed here too and given to nghttp2's scheduler.
 */

static bool mk_h2_is_lower(char c)
{
    return c >= 'a' && c <= 'z';
}

static bool mk_h2_is_alpha(char c)
{
    return mk_h2_is_lower(mk_tolower(c));
}

/* A scheme (RFC 3986 section 3.1): ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ). */
static bool mk_h2_scheme_valid(const uint8_t *p, size_t len)
{
    if (len == 0 || !mk_h2_is_alpha((char) p[0])) {
        return false;
    }
    for (size_t i = 1; i < len; i++) {
        if (!mk_h2_is_alpha((char) p[i]) && !mk_is_digit((char) p[i]) && p[i] != '+' &&
            p[i] != '-' && p[i] != '.') {
            return false;
        }
    }
    return true;
}

static bool mk_h2_pseudo(struct mk_h2_stream *s, const uint8_t *name, size_t nlen,
                         const uint8_t *value, size_t vlen)
{
    struct mk_h2_span *slot = NULL;

    if (s->regular_seen || vlen == 0) {
        s->malformed = true; /* after a regular field, or empty */
        return true;
    }
    if (nlen == 7 && memcmp(name, ":method", 7) == 0) {
        slot = &s->method;
    }
    else if (nlen == 5 && memcmp(name, ":path", 5) == 0) {
        slot = &s->path;
    }
    else if (nlen == 10 && memcmp(name, ":authority", 10) == 0) {
        slot = &s->authority;
    }
    else if (nlen == 9 && memcmp(name, ":protocol", 9) == 0) {
        slot = &s->protocol; /* RFC 8441: SETTINGS_ENABLE_CONNECT_PROTOCOL is sent */
    }
    else if (nlen == 7 && memcmp(name, ":scheme", 7) == 0 && !s->scheme_set &&
             mk_h2_scheme_valid(value, vlen)) {
        s->scheme_set = true;
        s->scheme_http = (vlen == 4 && strncasecmp((const char *) value, "http", 4) == 0) ||
                         (vlen == 5 && strncasecmp((const char *) value, "https", 5) == 0);
        return true;
    }
    if (!slot || slot->set) {
        s->malformed = true; /* unknown (:status...), repeated, a bad :scheme */
        return true;
    }
    return mk_h2_span_set(s, slot, value, vlen);
}

/*
 * A regular field of a request: upper case in a name, a connection-
 * specific field, TE other than "trailers" or a bad or second
 * Content-Length make the request malformed; `priority` is parsed.
 */
static void mk_h2_regular_check(struct mk_h2_stream *s, const uint8_t *name, size_t nlen,
                                const uint8_t *value, size_t vlen)
{
    const char *n = (const char *) name, *v = (const char *) value;

    s->regular_seen = true;
    switch (mk_http_name_class(n, nlen)) {
    case MK_HTTP_NAME_LOWER:
        break;
    case MK_HTTP_NAME_UPPER:
        s->malformed = true;
        return;
    default:
        /* not a token: mk_http_head_build answers 400, unless upper case
           makes the request malformed first */
        for (size_t i = 0; i < nlen; i++) {
            if ((unsigned) (name[i] - 'A') < 26u) {
                s->malformed = true;
                return;
            }
        }
        s->names_unchecked = true;
        break;
    }
    switch (nlen) {
    case 2:
        if (memcmp(n, "te", 2) == 0 && !(vlen == 8 && strncasecmp(v, "trailers", 8) == 0)) {
            s->malformed = true;
        }
        break;
    case 4:
        if (memcmp(n, "host", 4) == 0) {
            s->host_set = true;
        }
        break;
    case 7:
        s->malformed |= memcmp(n, "upgrade", 7) == 0;
        break;
    case 8:
        if (memcmp(n, "priority", 8) == 0 && !s->prio_bad) {
            /* several lines are one comma-joined value: one bad line spoils it */
            s->prio_bad = !mk_http_priority_parse(v, vlen, &s->prio);
            s->prio_set = !s->prio_bad;
        }
        break;
    case 10:
        s->malformed |= memcmp(n, "connection", 10) == 0 || memcmp(n, "keep-alive", 10) == 0;
        break;
    case 14:
        if (memcmp(n, "content-length", 14) == 0) {
            uint64_t cl;
            if (s->content_length >= 0 || !mk_str_to_u64(v, vlen, INT64_MAX, &cl)) {
                s->malformed = true;
                return;
            }
            s->content_length = (int64_t) cl;
        }
        break;
    case 16:
        s->malformed |= memcmp(n, "proxy-connection", 16) == 0;
        break;
    case 17:
        s->malformed |= memcmp(n, "transfer-encoding", 17) == 0;
        break;
    default:
        break;
    }
}

/*
 * The header block of s is complete: whether the request is well formed
 * (RFC 9113 section 8.3.1: the pseudo-headers a request needs; the
 * :authority or Host that nghttp2 also demands; a body its Content-Length
 * already rules out).
 */
static bool mk_h2_request_checks(const struct mk_h2_stream *s, bool end_stream)
{
    if (s->malformed || !s->method.set || (!s->authority.set && !s->host_set)) {
        return false;
    }
    if (s->method.len == 7 && memcmp(s->block + s->method.off, "CONNECT", 7) == 0) {
        if (s->protocol.set) {
            /* an extended CONNECT (RFC 8441 section 4): a tunnel for :protocol at :path */
            return s->scheme_set && s->path.set && s->authority.set && s->block[s->path.off] == '/';
        }
        return !s->scheme_set && !s->path.set && s->authority.set;
    }
    if (s->protocol.set) {
        return false; /* :protocol with another method */
    }
    if (!s->scheme_set || !s->path.set) {
        return false;
    }
    if (s->scheme_http && s->block[s->path.off] != '/' &&
        !(s->path.len == 1 && s->block[s->path.off] == '*' && s->method.len == 7 &&
          memcmp(s->block + s->method.off, "OPTIONS", 7) == 0)) {
        return false;
    }
    return !(end_stream && s->content_length > 0);
}

/* Reset s with PROTOCOL_ERROR: a malformed request (RFC 9113 section 8.1.1). */
static void mk_h2_malformed(struct mk_conn *c, struct mk_h2_stream *s)
{
    mk_h2_reset(c, s, NGHTTP2_PROTOCOL_ERROR);
}

/* ---- the request and its body -------------------------------------------- */

/*
 * The header block of s is complete: run its request from the
 * pseudo-headers and fields (mk_request_run_parts builds the head by the
 * rules and limits of an HTTP/1.1 head: "METHOD PATH", Host from
 * :authority, the fields), version 20. The head points into the header
 * block, which stays with the stream.
 */
static void mk_h2_request_start(struct mk_conn *c, struct mk_h2_stream *s, bool end_stream)
{
    struct mk_request *r = mk_request_new(c);
    struct mk_request_parts p = {
        .version = 20,
        .refused = s->head_status,
        /* an extended CONNECT goes through the stages as a GET of its :path (RFC 8441) */
        .method = s->protocol.set ? MK_STR("GET") : mk_h2_span_str(s, &s->method),
        .target = mk_h2_span_str(s, s->path.set ? &s->path : &s->authority),
        .names_are_tokens = !s->names_unchecked,
    };

    s->r = r;
    r->proto_data = s;
    if (s->protocol.set) {
        r->protocol = mk_h2_span_str(s, &s->protocol);
    }
    s->body_end = end_stream;
    s->since = c->worker->now_ms;
    if (!p.refused) {
        p.headers = mk_h2_headers(r, s, &p.n);
        p.refused = p.headers ? 0 : 503;
    }
    mk_request_run_parts(r, &p);
}

bool mk_h2_body_keep(struct mk_h2_stream *s, const uint8_t *data, size_t len)
{
    if (s->kept_len + len > s->kept_cap) {
        size_t cap = s->kept_cap ? s->kept_cap * 2 : 16384;
        while (cap < s->kept_len + len) {
            cap *= 2;
        }
        char *p = mk_try_realloc(s->kept, cap);
        if (!p) {
            return false;
        }
        s->kept = p;
        s->kept_cap = cap;
    }
    memcpy(s->kept + s->kept_len, data, len);
    s->kept_len += len;
    return true;
}

/* The body of s ended and its handler waits for it. */
static void mk_h2_body_done(struct mk_h2_stream *s)
{
    if (s->body_wanted && s->body_end && s->kept_len == 0 && s->r) {
        s->body_wanted = false;
        mk_request_body_ready(s->r);
    }
}

/*
 * Hand what s kept to its handler: all of it when buffering, while the
 * handler's window is open when streaming. The client's window of the
 * stream opens by what was handed over.
 */
void mk_h2_body_deliver(struct mk_conn *c, struct mk_h2_stream *s)
{
    struct mk_request *r = s->r;
    size_t n = s->kept_len;
    int rc = MK_OK;

    if (!r || !s->body_wanted) {
        return;
    }
    if (s->body == MK_H2_BODY_BUFFER) {
        rc = mk_body_append(r, s->kept, n);
    }
    else if (s->body == MK_H2_BODY_STREAM) {
        struct mk_body_stream *bs = &r->bs;
        n = 0;
        while (n < s->kept_len && mk_body_stream_window_open(bs)) {
            size_t room = bs->window - bs->held, take = s->kept_len - n;
            take = take < room ? take : room;
            rc = mk_body_stream_data(r, s->kept + n, take);
            n += take;
            if (rc != MK_OK) {
                break;
            }
        }
        bs->waiting = n < s->kept_len && rc == MK_OK;
    }
    if (n && n < s->kept_len) {
        memmove(s->kept, s->kept + n, s->kept_len - n);
    }
    s->kept_len -= n;
    if (n) {
        s->since = c->worker->now_ms; /* the handler took bytes */
    }
    mk_h2_consume(c, s, n);
    if (rc != MK_OK) {
        bool buffered = s->body == MK_H2_BODY_BUFFER;
        s->body = MK_H2_BODY_DROP;
        s->body_wanted = false;
        s->kept_len = 0;
        if (buffered) {
            mk_request_error(r, rc);
        }
        else {
            mk_request_body_result(r, rc);
        }
        return;
    }
    mk_h2_body_done(s);
}

/* ---- nghttp2 callbacks: a stream's frames -------------------------------- */

int mk_h2_begin_headers_cb(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    struct mk_conn *c = user;
    struct mk_h2_stream *s;

    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
        return 0;
    }
    s = mk_h2_stream_new(c, frame->hd.stream_id);
    nghttp2_session_set_stream_user_data(ng, s->id, s);
    c->h2->in_block = s;
    return 0;
}

/*
 * One field of a request's trailing HEADERS: kept for the request
 * (api->request_trailers) while its body is read. A pseudo-header there, a
 * name that is not a lower-case token, a value HTTP/1 could not carry (CR,
 * LF, NUL, another control byte) or more than MK_CHUNK_TRAILER_MAX bytes
 * of them make the stream malformed (RFC 9113 section 8.2.1), as such a
 * trailer section makes an HTTP/1.1 request a 400.
 */
static int mk_h2_trailer_field(struct mk_h2_stream *s, const uint8_t *name, size_t nlen,
                               const uint8_t *value, size_t vlen)
{
    if (s->malformed) {
        return 0;
    }
    if (mk_http_name_class((const char *) name, nlen) != MK_HTTP_NAME_LOWER) {
        s->malformed = true; /* a pseudo-header (':' is no tchar) among them */
        return 0;
    }
    for (size_t i = 0; i < vlen; i++) {
        if (!mk_is_field_char(value[i])) {
            s->malformed = true;
            return 0;
        }
    }
    if (!s->r || s->tunnel || s->body == MK_H2_BODY_DROP) {
        return 0; /* nobody reads the body, nor what follows it */
    }
    int rc = mk_body_trailer_field(s->r, (const char *) name, nlen, (const char *) value, vlen);
    if (rc == 400) {
        s->malformed = true;
    }
    else if (rc != MK_OK) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* out of memory: reset the stream */
    }
    return 0;
}

int mk_h2_header_cb(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name,
                    size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
    struct mk_conn *c = user;
    const struct mk_config *cfg = c->worker->use.cfg;
    struct mk_h2_stream *s;

    (void) ng;
    (void) flags;
    if (frame->hd.type != NGHTTP2_HEADERS) {
        return 0;
    }
    s = c->h2->in_block;
    if (!s || s->id != frame->hd.stream_id) {
        s = mk_h2_stream_find(c->h2, frame->hd.stream_id);
    }
    if (!s) {
        return 0;
    }
    if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
        return mk_h2_trailer_field(s, name, nlen, value, vlen);
    }
    s->list_size += nlen + vlen + 32;
    if (s->list_size > 4 * (size_t) cfg->limits.max_head) {
        c->h2->calm = true; /* an HPACK bomb: decoding it is the attack */
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    if (s->head_status || s->malformed) {
        return 0;
    }
    bool pseudo = nlen && name[0] == ':';
    if (s->list_size > cfg->limits.max_head ||
        (!pseudo && ++s->n_fields > cfg->limits.max_headers)) {
        s->head_status = 431;
        return 0;
    }
    bool ok;
    if (pseudo) {
        ok = mk_h2_pseudo(s, name, nlen, value, vlen);
    }
    else {
        mk_h2_regular_check(s, name, nlen, value, vlen);
        if (nlen == 4 && memcmp(name, "host", 4) == 0 && s->authority.set) {
            ok = true; /* :authority wins (RFC 9113 section 8.3.1) */
        }
        else {
            ok = mk_h2_field_add(s, name, nlen, value, vlen);
        }
    }
    if (!ok) {
        s->head_status = 503;
    }
    return 0;
}

int mk_h2_data_cb(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                  void *user)
{
    struct mk_conn *c = user;
    struct mk_h2_stream *s = mk_h2_stream_find(c->h2, id);

    (void) flags;
    nghttp2_session_consume_connection(ng, len); /* the stream's window holds the client */
    if (s) {
        s->since = c->worker->now_ms;
        s->body_seen += len;
        if (s->content_length >= 0 && s->body_seen > (uint64_t) s->content_length) {
            mk_h2_malformed(c, s); /* more than its Content-Length */
            return 0;
        }
        if (s->tunnel) {
            return mk_h2_tunnel_data(c, s, data, len);
        }
    }
    if (!s || !s->r || s->body == MK_H2_BODY_DROP) {
        /*
         * Nobody reads the rest: after a success the client may finish
         * sending it; after a refusal its window stays shut, so it sends
         * at most one window more (and ends or resets the stream itself).
         */
        if (s && s->r && s->r->status < 400) {
            mk_h2_consume(c, s, len);
        }
        return 0;
    }
    if (s->body_seen > mk_request_max_body(s->r)) {
        s->body = MK_H2_BODY_DROP;
        mk_h2_consume(c, s, len);
        if (!s->responding) {
            s->body_wanted = false;
            mk_request_error(s->r, 413);
        }
        return 0;
    }
    if (!mk_h2_body_keep(s, data, len)) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* out of memory: reset the stream */
    }
    mk_h2_body_deliver(c, s);
    return 0;
}

int mk_h2_frame_recv_cb(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    struct mk_conn *c = user;
    struct mk_h2_stream *s;
    bool end = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;

    (void) ng;
#ifdef MK_HAVE_METRICS
    if (frame->hd.type == NGHTTP2_RST_STREAM) {
        MK_STAT_ADD(c->worker->h2_rst_received, 1);
    }
    else if (frame->hd.type == NGHTTP2_GOAWAY) {
        uint32_t code = frame->goaway.error_code;
        MK_STAT_ADD(c->worker->h2_goaway_received[code < MK_METRICS_H2_ERRORS - 1
                                                      ? code
                                                      : MK_METRICS_H2_ERRORS - 1],
                    1);
    }
#endif
    if (frame->hd.type == NGHTTP2_SETTINGS && c->h2->upgraded) {
        s = c->h2->upgraded; /* the client's preface is complete */
        c->h2->upgraded = NULL;
        mk_h2_request_start(c, s, true);
        return 0;
    }
    if (frame->hd.type == NGHTTP2_PING && (frame->hd.flags & NGHTTP2_FLAG_ACK) && c->h2->draining &&
        memcmp(frame->ping.opaque_data, mk_h2_drain_ping, 8) == 0) {
        /* a round trip since the shutdown notice: whatever the client sent
           before it saw the notice has arrived */
        mk_h2_drain_end(c);
        return 0;
    }
    s = mk_h2_stream_find(c->h2, frame->hd.stream_id);
    if (s && frame->hd.type == NGHTTP2_RST_STREAM) {
        s->peer_reset = true;
    }
    if (!s || (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)) {
        return 0;
    }
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
        c->h2->block_bytes = 0;
        c->h2->in_block = NULL; /* complete */
        if (!mk_h2_request_checks(s, end)) {
            mk_h2_malformed(c, s);
            return 0;
        }
        if (s->prio_set) {
            nghttp2_extpri pri = {s->prio.urgency, s->prio.incremental};
            nghttp2_session_change_extpri_stream_priority(c->h2->ng, s->id, &pri, 0);
        }
        mk_h2_request_start(c, s, end);
        return 0;
    }
    if ((frame->hd.type == NGHTTP2_HEADERS && (!end || s->malformed)) ||
        (end && s->content_length >= 0 && s->body_seen != (uint64_t) s->content_length)) {
        /* trailers that do not end the stream or hold a pseudo-header, or a
           body shorter than its Content-Length */
        mk_h2_malformed(c, s);
        return 0;
    }
    if (end) {
        s->body_end = true;
        if (s->tunnel) {
            mk_h2_tunnel_peer_end(c, s);
        }
        else {
            mk_h2_body_done(s);
        }
    }
    return 0;
}

int mk_h2_frame_send_cb(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    struct mk_conn *c = user;
    struct mk_h2_stream *s;

    (void) ng;
#ifdef MK_HAVE_METRICS
    if (frame->hd.type == NGHTTP2_RST_STREAM) {
        MK_STAT_ADD(c->worker->h2_rst_sent, 1);
    }
    else if (frame->hd.type == NGHTTP2_GOAWAY) {
        uint32_t code = frame->goaway.error_code;
        MK_STAT_ADD(
            c->worker
                ->h2_goaway_sent[code < MK_METRICS_H2_ERRORS - 1 ? code : MK_METRICS_H2_ERRORS - 1],
            1);
    }
#endif
    if (frame->hd.type == NGHTTP2_RST_STREAM && !mk_h2_stream_find(c->h2, frame->hd.stream_id)) {
        /* a stream nghttp2 refused before it became ours: counted when
           over MaxConcurrentStreams or malformed, not for this server's
           own failure (INTERNAL_ERROR); ours are counted as they close */
        if (frame->rst_stream.error_code != NGHTTP2_NO_ERROR &&
            frame->rst_stream.error_code != NGHTTP2_INTERNAL_ERROR) {
            mk_h2_unanswered(c);
        }
        return 0;
    }
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.nvlen > 0 &&
        frame->headers.nva[0].namelen == 7 &&
        memcmp(frame->headers.nva[0].name, ":status", 7) == 0) {
        s = mk_h2_stream_find(c->h2, frame->hd.stream_id);
        if (s && s->r) {
            /* a head as it went out: HPACK-compressed, frame header included; an
               interim one (1xx: api->interim, 100 Continue) counts in the bytes
               sent, the final one is the response's head */
            uint32_t len = (uint32_t) (frame->hd.length + 9);
            if (frame->headers.nva[0].valuelen != 3 || frame->headers.nva[0].value[0] != '1') {
                s->r->head_bytes = len;
            }
            s->r->bytes_sent += len;
        }
    }
    if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM) ||
        (frame->hd.type != NGHTTP2_DATA && frame->hd.type != NGHTTP2_HEADERS)) {
        return 0;
    }
    s = mk_h2_stream_find(c->h2, frame->hd.stream_id);
    if (s) {
        s->answered = true;
        s->since = c->worker->now_ms; /* now the client's END_STREAM is all it waits for */
        if (s->timed_out && !s->body_end) {
            /* its 408 is out: the client need not send the rest (RFC 9113 section 8.1) */
            mk_h2_reset(c, s, NGHTTP2_NO_ERROR);
        }
        if (s->tunnel) {
            mk_h2_tunnel_sent_end(c, s);
        }
    }
    if (!s || !s->r) {
        return 0;
    }
    s->r->flags |= MK_REQ_COMPLETE;
    if (s->responding) {
        s->responding = false;
        c->h2->n_responding--;
    }
    return 0;
}

int mk_h2_stream_close_cb(nghttp2_session *ng, int32_t id, uint32_t error, void *user)
{
    struct mk_conn *c = user;
    struct mk_h2 *h = c->h2;
    struct mk_h2_stream *s = mk_h2_stream_find(h, id);

    (void) ng;
    if (!s) {
        return 0;
    }
    if (s->peer_reset || (error == NGHTTP2_NO_ERROR && !s->we_reset)) {
        h->closed_ids[h->closed_next++ % MK_H2_CLOSED_IDS] = id;
    }
    if (!s->answered && (s->peer_reset || error != NGHTTP2_INTERNAL_ERROR)) {
        /* not when this server reset it for its own failure (INTERNAL_ERROR:
           a silent handler, a hook that failed, memory short) */
        mk_h2_unanswered(c);
    }
    /* nghttp2 destroys the stream (and its user data) when this returns:
       it keeps no closed streams (no_closed_streams, RFC 9218 priorities) */
    if (h->recent[((uint32_t) id >> 1) % MK_H2_RECENT] == s) {
        h->recent[((uint32_t) id >> 1) % MK_H2_RECENT] = NULL;
    }
    s->closed = true;
    if (h->in_block == s) {
        h->in_block = NULL;
    }
    if (h->upgraded == s) {
        h->upgraded = NULL; /* closed before the client's preface came */
    }
    if (s->responding) {
        s->responding = false;
        h->n_responding--;
    }
    if (s->tunnel) {
        mk_h2_tunnel_peer_end(c, s);
    }
    if (s->r) {
        mk_body_stream_abort(s->r); /* the handler lets go of its body now */
        s->r->flags &= (uint16_t) ~MK_REQ_IDLE;
    }
    h->n_open--;
    MK_STAT_ADD(c->worker->n_h2_streams, (unsigned) -1);
    mk_list_del(&s->node);
    mk_list_add_tail(&s->node, &h->dead);
    return 0;
}

/* ---- stream 1 of an upgraded connection ---------------------------------- */

/* Fields of an HTTP/1 upgrade request that are about that connection only. */
static bool mk_h2_upgrade_skip(const struct mk_str *name)
{
    static const char *const hop[] = {
        "host", "connection",        "upgrade", "http2-settings", "keep-alive", "proxy-connection",
        "te",   "transfer-encoding", NULL};

    for (int i = 0; hop[i]; i++) {
        if (name->len == strlen(hop[i]) && strncasecmp(name->p, hop[i], name->len) == 0) {
            return true;
        }
    }
    return false;
}

/* Stream 1 of an upgraded connection: the HTTP/1 head as a header block. */
bool mk_h2_upgrade_stream(struct mk_h2_stream *s, const struct mk_http_head *head)
{
    const struct mk_str *host = mk_http_header_get(head, "host");

    s->names_unchecked = true; /* its fields skip mk_h2_regular_check */
    if (!mk_h2_span_set(s, &s->method, head->method_name.p, head->method_name.len) ||
        !mk_h2_span_set(s, &s->path, head->target.p, head->target.len) ||
        (host && !mk_h2_span_set(s, &s->authority, host->p, host->len))) {
        return false;
    }
    for (unsigned i = 0; i < head->n_headers; i++) {
        const struct mk_http_header *f = &head->headers[i];
        if (!mk_h2_upgrade_skip(&f->name) &&
            !mk_h2_field_add(s, (const uint8_t *) f->name.p, f->name.len,
                             (const uint8_t *) f->value.p, f->value.len)) {
            return false;
        }
    }
    return true;
}
