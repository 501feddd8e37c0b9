/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * h2_response.c: a response as HTTP/2 HEADERS (h2.c has the overview):
 * the status, the fields the server writes itself and the handler's,
 * turned into nghttp2's name/value pairs without copying them (NO_COPY:
 * they live in the request's arena, the configuration it holds, the
 * worker or static storage), names lower-cased and the fields of one
 * HTTP/1 connection left out (RFC 9113 section 8.2.2); the trailers of a
 * streamed body. The body's DATA frames are h2_send.c's (mk_h2_read_cb).
 *
 * On the connection's worker: mk_h2_respond is the protocol table's
 * respond, called by request.c (not from inside nghttp2);
 * mk_h2_submit_trailers is called from inside nghttp2 (a DATA frame's read
 * callback). The request lives until its stream is closed, so what the
 * pairs point to outlives the HEADERS frame.
 */
#include <nghttp2/nghttp2.h>
#include <string.h>

#include <monkey/mk_util.h>

#include "h2_internal.h"
#include "../process/server.h"

/* ---- fields -------------------------------------------------------------- */

/* Fields that mean something only to one HTTP/1 connection (RFC 9113 section 8.2.2). */
static bool mk_h2_conn_field(const char *name, size_t len)
{
    switch (len) {
    case 7:
        return memcmp(name, "upgrade", 7) == 0;
    case 10:
        return memcmp(name, "connection", 10) == 0 || memcmp(name, "keep-alive", 10) == 0;
    case 16:
        return memcmp(name, "proxy-connection", 16) == 0;
    case 17:
        return memcmp(name, "transfer-encoding", 17) == 0;
    default:
        return false;
    }
}

/*
 * "Name: value\r\n" lines (a streamed body's trailers) as nghttp2 fields,
 * up to cap, with `flags` (the NO_COPY ones when the lines outlive the
 * frame). Names are lower-cased in place, in the caller's buffer: HTTP/2
 * wants them so.
 */
static void mk_h2_lines_to_nv(char *p, size_t len, nghttp2_nv *nv, size_t cap, size_t *n,
                              uint8_t flags)
{
    char *end = p ? p + len : NULL;

    while (p < end && *n < cap) {
        char *line_end = memchr(p, '\n', (size_t) (end - p));
        if (!line_end) {
            line_end = end;
        }
        char *colon = memchr(p, ':', (size_t) (line_end - p));
        if (!colon) {
            p = line_end + 1;
            continue;
        }
        const char *name = p;
        for (char *q = p; q < colon; q++) {
            *q = mk_tolower(*q);
        }
        char *v = colon + 1;
        char *vend = line_end;
        while (v < vend && (*v == ' ' || *v == '\t')) {
            v++;
        }
        while (vend > v && (vend[-1] == '\r' || vend[-1] == ' ' || vend[-1] == '\t')) {
            vend--;
        }
        if (!mk_h2_conn_field(name, (size_t) (colon - p))) {
            nv[*n] = (nghttp2_nv){(uint8_t *) name, (uint8_t *) v, (size_t) (colon - p),
                                  (size_t) (vend - v), flags};
            (*n)++;
        }
        p = line_end + 1;
    }
}

/*
 * The one line "Name: value\r\n" of a field the server writes itself
 * (Server, Date), whose name is `lower` lower-cased: appended to nv.
 */
static void mk_h2_line_nv(const char *line, size_t len, const char *lower, nghttp2_nv *nv,
                          size_t *n, uint8_t flags)
{
    size_t skip = strlen(lower) + 2; /* "Name: " */

    if (len < skip + 2) {
        return; /* no such field (an empty server header) */
    }
    nv[*n] =
        (nghttp2_nv){(uint8_t *) lower, (uint8_t *) line + skip, skip - 2, len - skip - 2, flags};
    (*n)++;
}

/*
 * The extra fields of r's response (r->fields, lines of r->extra_headers)
 * appended to nv, up to cap, with `flags`: a name the server added comes
 * with its lower-case spelling; a handler's is lower-cased in place and
 * its value trimmed, and connection-specific ones are left out.
 */
static void mk_h2_fields_to_nv(struct mk_request *r, nghttp2_nv *nv, size_t cap, size_t *n,
                               uint8_t flags)
{
    for (unsigned i = 0; i < r->n_fields && *n < cap; i++) {
        const struct mk_resp_field *f = &r->fields[i];
        char *name = r->extra_headers + f->off;
        const char *v = name + f->name_len + 2, *vend = v + f->value_len;
        if (f->lower) {
            nv[(*n)++] =
                (nghttp2_nv){(uint8_t *) f->lower, (uint8_t *) v, f->name_len, f->value_len, flags};
            continue;
        }
        for (char *q = name; q < name + f->name_len; q++) {
            *q = mk_tolower(*q);
        }
        if (mk_h2_conn_field(name, f->name_len)) {
            continue;
        }
        while (v < vend && (*v == ' ' || *v == '\t')) {
            v++;
        }
        while (vend > v && (vend[-1] == ' ' || vend[-1] == '\t')) {
            vend--;
        }
        nv[(*n)++] =
            (nghttp2_nv){(uint8_t *) name, (uint8_t *) v, f->name_len, (size_t) (vend - v), flags};
    }
}

/* ---- the response -------------------------------------------------------- */

/*
 * The response of r as HEADERS (and DATA): submitted, then written. The
 * fields are not copied by nghttp2 (NO_COPY): they live in r's arena, the
 * configuration r holds, the worker or static storage, and r lives until
 * its stream is closed; a HEADERS frame still queued for a closed stream
 * is dropped by nghttp2 without reading them.
 */
void mk_h2_respond(struct mk_request *r, bool error)
{
    const uint8_t nc = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
    struct mk_conn *c = r->conn;
    struct mk_h2_stream *s = r->proto_data;
    struct mk_worker *w = c->worker;
    /* the fixed fields, and the extra ones */
    size_t cap = 8 + r->n_fields, n = 0;
    nghttp2_nv *nv = mk_arena_alloc(&r->arena, cap * sizeof(*nv));
    char *status = mk_arena_alloc(&r->arena, 4), *clen = mk_arena_alloc(&r->arena, 24);
    nghttp2_data_provider dp = {.source.ptr = s, .read_callback = mk_h2_read_cb};
    bool body, tunnel = false;
    int code = r->status;

    if (!s || s->closed) {
        return; /* the stream is gone: the request ends with it */
    }
    if (s->protocol.set) {
        /* an extended CONNECT (RFC 8441): the handler took it over (api->takeover,
           a 101 to HTTP/1) and the tunnel opens with 200; a 2xx nobody takes
           over would promise a tunnel that is not there */
        tunnel = r->upgrade && r->status == 101 && !error;
        if (tunnel) {
            code = 200;
        }
        else if (r->status >= 200 && r->status < 300) {
            mk_request_error(r, 501);
            return;
        }
    }
    s->since = c->worker->now_ms;
    if (s->body_wanted) {
        s->body_wanted = false;
    }
    if (!tunnel && (s->body == MK_H2_BODY_KEEP || !s->body_end)) {
        s->body = MK_H2_BODY_DROP; /* no handler reads what comes now */
        mk_h2_consume(c, s, s->kept_len);
        s->kept_len = 0;
    }
    if (!nv || !status || !clen || code < 200 || code > 999) {
        mk_h2_reset(c, s, NGHTTP2_INTERNAL_ERROR);
        mk_h2_flush(c);
        return;
    }
    status[0] = (char) ('0' + code / 100);
    status[1] = (char) ('0' + code / 10 % 10);
    status[2] = (char) ('0' + code % 10);
    nv[n++] = (nghttp2_nv){(uint8_t *) ":status", (uint8_t *) status, 7, 3, nc};
    mk_h2_line_nv(r->cfg->server_header, r->cfg->server_header_len, "server", nv, &n, nc);
    mk_h2_line_nv(w->date, w->date_len, "date", nv, &n, nc);
    if (!tunnel && !mk_response_no_body(r)) {
        if (r->content_type_len) {
            nv[n++] = (nghttp2_nv){(uint8_t *) "content-type", (uint8_t *) r->content_type, 12,
                                   r->content_type_len, nc};
        }
        if (r->body_type != MK_RESP_STREAM || r->stream_sized) {
            size_t l = mk_u64_dec(r->content_length, clen);
            nv[n++] = (nghttp2_nv){(uint8_t *) "content-length", (uint8_t *) clen, 14, l, nc};
        }
    }
    mk_h2_fields_to_nv(r, nv, cap, &n, nc);
    body = tunnel || !mk_response_omit_body(r);
    if (nghttp2_submit_response(c->h2->ng, s->id, nv, n, body ? &dp : NULL) != 0) {
        mk_h2_reset(c, s, NGHTTP2_INTERNAL_ERROR);
    }
    else {
        s->responding = true;
        c->h2->n_responding++;
        if (tunnel) {
            mk_h2_tunnel_open(c, s, r); /* its DATA source is mk_h2_read_cb's too */
        }
    }
    mk_h2_flush(c);
}

/*
 * An interim answer (api->interim) on r's stream: a HEADERS frame with its
 * 1xx :status and the fields, without END_STREAM, before the response's
 * own. nghttp2 copies the pairs; the names are lower-cased in a copy of
 * the lines, in r's arena.
 */
int mk_h2_interim(struct mk_request *r, int status, const char *fields, size_t len)
{
    struct mk_h2_stream *s = r->proto_data;
    struct mk_conn *c = r->conn;
    nghttp2_nv nv[33];
    size_t n = 0;
    char code[4];

    if (!s || s->closed || s->responding) {
        return MK_ERR;
    }
    char *lines = len ? mk_arena_alloc(&r->arena, len) : NULL;
    if (len && !lines) {
        return MK_ERR;
    }
    if (len) {
        memcpy(lines, fields, len);
    }
    code[0] = (char) ('0' + status / 100);
    code[1] = (char) ('0' + status / 10 % 10);
    code[2] = (char) ('0' + status % 10);
    code[3] = '\0';
    nv[n++] = (nghttp2_nv){(uint8_t *) ":status", (uint8_t *) code, 7, 3, NGHTTP2_NV_FLAG_NONE};
    mk_h2_lines_to_nv(lines, len, nv, 33, &n, NGHTTP2_NV_FLAG_NONE);
    if (nghttp2_submit_headers(c->h2->ng, NGHTTP2_FLAG_NONE, s->id, NULL, nv, n, NULL) != 0) {
        return MK_ERR;
    }
    mk_h2_flush(c);
    return MK_OK;
}

/* The trailers of a streamed body (its last piece: "Name: value\r\n" lines) as a HEADERS frame. */
void mk_h2_submit_trailers(struct mk_conn *c, struct mk_h2_stream *s, struct mk_piece *p)
{
    nghttp2_nv nv[32];
    size_t n = 0;

    mk_h2_lines_to_nv(p->buf + MK_PIECE_HDR, p->len, nv, 32, &n, NGHTTP2_NV_FLAG_NONE);
    nghttp2_submit_trailer(c->h2->ng, s->id, nv, n);
}
