/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * response.c: what a response is, whatever protocol carries it: its extra
 * header lines with a record of each field (mk_response_add_*: HTTP/2
 * takes names and values from the records), error answers (the site's
 * error pages or a short HTML body, with Allow where it belongs), the reset
 * of what a handler set up when an internal redirect starts the request
 * again, whether the body goes out at all (mk_response_omit_body), a
 * streamed body's queue of pieces (the handler appends, the protocol pops
 * and is woken), and the walk over a multipart body's runs. Setting the
 * status, type and body source is response_set.c's.
 *
 * The protocol builds the head, frames the body and writes it (proto.h:
 * h1_out.c writes a file or multipart body with the transport's sendfile,
 * or reads and writes without one; HTTP/2 queues file ranges itself and
 * copies parts with mk_response_parts_copy, h2_send.c).
 *
 * On the request's worker, like the request it belongs to (request.h).
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../core/log.h"
#ifdef MK_HAVE_COMPRESS
#include "compress_cache.h"
#endif
#include "../config/conf.h"
#include "../conn/conn.h"
#include "../http/http_chars.h"
#include "file_cache.h"
#include "../proto/proto.h"
#include "request.h"
#include "../runtime/worker.h"

/* ---- extra headers ------------------------------------------------------- */

/* The names of enum mk_resp_name, as HTTP/1 writes them and in lower case. */
static const struct {
    const char *name, *lower;
    uint32_t len;
} mk_resp_names[] = {
#define MK_RESP_NAME(id, n, l) [id] = {n, l, sizeof(n) - 1}
    MK_RESP_NAME(MK_RESP_ETAG, "ETag", "etag"),
    MK_RESP_NAME(MK_RESP_LAST_MODIFIED, "Last-Modified", "last-modified"),
    MK_RESP_NAME(MK_RESP_ACCEPT_RANGES, "Accept-Ranges", "accept-ranges"),
    MK_RESP_NAME(MK_RESP_CONTENT_RANGE, "Content-Range", "content-range"),
    MK_RESP_NAME(MK_RESP_ALLOW, "Allow", "allow"),
    MK_RESP_NAME(MK_RESP_CACHE_CONTROL, "Cache-Control", "cache-control"),
    MK_RESP_NAME(MK_RESP_EXPIRES, "Expires", "expires"),
    MK_RESP_NAME(MK_RESP_VARY, "Vary", "vary"),
    MK_RESP_NAME(MK_RESP_CONTENT_ENCODING, "Content-Encoding", "content-encoding"),
    MK_RESP_NAME(MK_RESP_RETRY_AFTER, "Retry-After", "retry-after"),
#undef MK_RESP_NAME
};

#define MK_EXTRA_FIRST 256u      /* bytes of lines of a response's first block */
#define MK_EXTRA_FIRST_FIELDS 8u /* and records: one arena allocation for both */

/*
 * Room for `need` more bytes of extra header lines and `n` more records:
 * where the lines go, or NULL (no memory).
 */
static char *mk_response_extra_room(struct mk_request *r, size_t need, unsigned n)
{
    if (!r->extra_cap && !r->fields_cap && need <= MK_EXTRA_FIRST && n <= MK_EXTRA_FIRST_FIELDS) {
        /* the usual case: the first fields, and few */
        char *p = mk_arena_alloc(&r->arena, MK_EXTRA_FIRST + MK_EXTRA_FIRST_FIELDS *
                                                                 sizeof(struct mk_resp_field));
        if (!p) {
            return NULL;
        }
        r->extra_headers = p;
        r->extra_cap = MK_EXTRA_FIRST;
        r->fields = (struct mk_resp_field *) (void *) (p + MK_EXTRA_FIRST);
        r->fields_cap = MK_EXTRA_FIRST_FIELDS;
        return p;
    }
    if (r->extra_len + need > r->extra_cap) {
        size_t cap = r->extra_cap ? r->extra_cap * 2 : MK_EXTRA_FIRST;
        while (cap < r->extra_len + need) {
            cap *= 2;
        }
        char *p = mk_arena_alloc(&r->arena, cap);
        if (!p) {
            return NULL;
        }
        if (r->extra_len) {
            memcpy(p, r->extra_headers, r->extra_len);
        }
        r->extra_headers = p;
        r->extra_cap = cap;
    }
    if (r->n_fields + n > r->fields_cap) {
        unsigned cap = r->fields_cap ? r->fields_cap * 2 : MK_EXTRA_FIRST_FIELDS;
        while (cap < r->n_fields + n) {
            cap *= 2;
        }
        struct mk_resp_field *f = mk_arena_alloc(&r->arena, cap * sizeof(*f));
        if (!f) {
            return NULL;
        }
        if (r->n_fields) {
            memcpy(f, r->fields, r->n_fields * sizeof(*f));
        }
        r->fields = f;
        r->fields_cap = cap;
    }
    return r->extra_headers + r->extra_len;
}

int mk_response_add_lines(struct mk_request *r, const char *lines, size_t len,
                          const struct mk_resp_field *fields, unsigned n)
{
    char *w = mk_response_extra_room(r, len, n);

    if (!w) {
        return MK_ERR;
    }
    struct mk_resp_field *f = r->fields + r->n_fields;
    uint32_t base = (uint32_t) r->extra_len;

    memcpy(w, lines, len);
    memcpy(f, fields, n * sizeof(*f));
    if (base) { /* not the first lines: the offsets move with them */
        for (unsigned i = 0; i < n; i++) {
            f[i].off += base;
        }
    }
    r->n_fields += n;
    r->extra_len += len;
    return MK_OK;
}

/* Append the line "Name: value\r\n" and its record: MK_OK, or MK_ERR (no memory). */
static int mk_response_field_put(struct mk_request *r, const char *lower, const char *name,
                                 size_t name_len, const char *value, size_t value_len)
{
    size_t need = name_len + value_len + 4;
    char *w = mk_response_extra_room(r, need, 1);

    if (!w) {
        return MK_ERR;
    }
    r->fields[r->n_fields++] = (struct mk_resp_field){lower, (uint32_t) r->extra_len,
                                                      (uint32_t) name_len, (uint32_t) value_len};
    memcpy(w, name, name_len);
    w += name_len;
    *w++ = ':';
    *w++ = ' ';
    memcpy(w, value, value_len);
    w += value_len;
    *w++ = '\r';
    *w++ = '\n';
    r->extra_len += need;
    return MK_OK;
}

int mk_response_add_header(struct mk_request *r, const char *name, size_t name_len,
                           const char *value, size_t value_len)
{
    /* A header must never smuggle a line break into the response. */
    if (name_len == 0 || memchr(name, '\r', name_len) || memchr(name, '\n', name_len) ||
        memchr(name, ':', name_len) || memchr(value, '\r', value_len) ||
        memchr(value, '\n', value_len)) {
        return MK_ERR;
    }
    return mk_response_field_put(r, NULL, name, name_len, value, value_len);
}

int mk_response_add_known(struct mk_request *r, enum mk_resp_name name, const char *value,
                          size_t value_len)
{
    return mk_response_field_put(r, mk_resp_names[name].lower, mk_resp_names[name].name,
                                 mk_resp_names[name].len, value, value_len);
}

#ifdef MK_HAVE_RULES
/* Whether field record f of r is named `name` (len bytes, any case). */
static bool mk_response_field_is(const struct mk_request *r, const struct mk_resp_field *f,
                                 const char *name, size_t len)
{
    return f->name_len == len && strncasecmp(r->extra_headers + f->off, name, len) == 0;
}

void mk_response_field_remove(struct mk_request *r, const char *name, size_t len)
{
    unsigned i = 0;

    while (i < r->n_fields && !mk_response_field_is(r, &r->fields[i], name, len)) {
        i++; /* the usual case: no such field, nothing moves */
    }
    unsigned k = i;
    uint32_t w = i < r->n_fields ? r->fields[i].off : 0;
    for (; i < r->n_fields; i++) {
        struct mk_resp_field f = r->fields[i];
        uint32_t line = f.name_len + f.value_len + 4; /* "Name: value\r\n" */
        if (mk_response_field_is(r, &f, name, len)) {
            continue;
        }
        memmove(r->extra_headers + w, r->extra_headers + f.off, line);
        f.off = w;
        r->fields[k++] = f;
        w += line;
    }
    if (k < r->n_fields) {
        r->n_fields = k;
        r->extra_len = w;
    }
}
#endif

void mk_response_drop_file(struct mk_request *r)
{
    if (r->file) {
        /* never with r->zbody (static.c): the common path tests nothing more */
        mk_file_release(r->file);
        r->file = NULL;
    }
    else {
        if (r->fd >= 0) {
            close(r->fd);
        }
#ifdef MK_HAVE_COMPRESS
        if (r->zbody) {
            mk_compress_cache_release(r->zbody);
            r->zbody = NULL;
        }
#endif
    }
    r->fd = -1;
}

/* ---- error responses ----------------------------------------------------- */

/* Serve the site's page for `status`, if it has one that can be opened. */
static bool mk_response_error_page(struct mk_request *r, int status)
{
    const struct mk_site *vh = r->site;
    struct stat st;

    if (!vh) {
        return false;
    }
    for (size_t i = 0; i < vh->n_error_pages; i++) {
        const struct mk_error_page *ep = &vh->error_pages[i];
        if (ep->status != status) {
            continue;
        }
        int fd = mk_conf_site_open(vh, ep->path + 1, O_RDONLY);
        if (fd < 0) {
            return false;
        }
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
            close(fd);
            return false;
        }
        struct mk_str type = mk_mime_lookup(r->cfg->mime, ep->path, strlen(ep->path));
        r->content_type = type.p;
        r->content_type_len = type.len;
        r->fd = fd;
        r->file_off = 0;
        r->body_type = MK_RESP_FILE;
        r->body_left = (uint64_t) st.st_size;
        r->content_length = (uint64_t) st.st_size;
        return true;
    }
    return false;
}

/* Did the handler add an Allow header already? */
static bool mk_response_has_allow(const struct mk_request *r)
{
    for (unsigned i = 0; i < r->n_fields; i++) {
        const struct mk_resp_field *f = &r->fields[i];
        if (f->name_len == 5 && strncasecmp(r->extra_headers + f->off, "Allow", 5) == 0) {
            return true;
        }
    }
    return false;
}

/*
 * Allow of a 405 or 501: the methods of the routes matching the path when
 * routes do (route.c), else the static handler's.
 */
static void mk_response_allow(struct mk_request *r)
{
    char allow[96];
    uint32_t methods = r->route.allow;

    if (r->route.route) {
        methods |= r->route.route->methods;
    }
    if (!methods) {
        mk_response_add_known(r, MK_RESP_ALLOW, "GET, HEAD, OPTIONS", 18);
        return;
    }
    size_t n = mk_route_allow_format(methods, allow, sizeof(allow));
    mk_response_add_known(r, MK_RESP_ALLOW, allow, n);
}

void mk_response_error(struct mk_request *r, int status)
{
    const char *reason = mk_http_reason(status);
    static const char type[] = "text/html; charset=utf-8";

    r->status = status;
    mk_response_stream_cancel(r);
    mk_response_drop_file(r);
    r->body_type = MK_RESP_NONE;
    r->content_length = 0;
    if ((status == 405 || status == 501) && !mk_response_has_allow(r)) {
        mk_response_allow(r);
    }
    if (mk_response_error_page(r, status)) {
        return;
    }
    char *body = mk_arena_alloc(&r->arena, 256);
    if (!body) {
        return; /* an empty body still carries the status */
    }
    int n = snprintf(body, 256,
                     "<!DOCTYPE html>\n<html><head><title>%d %s</title></head>"
                     "<body><h1>%d %s</h1></body></html>\n",
                     status, reason, status, reason);
    r->content_type = type;
    r->content_type_len = sizeof(type) - 1;
    r->body_type = MK_RESP_MEM;
    r->mem = body;
    r->mem_len = (size_t) n;
    r->content_length = (uint64_t) n;
}

void mk_response_reset(struct mk_request *r)
{
    mk_response_stream_cancel(r);
    mk_response_drop_file(r);
    mk_free(r->owned);
    r->owned = NULL;
    r->status = 200;
    r->content_type = NULL;
    r->content_type_len = 0;
    r->extra_len = 0;
    r->n_fields = 0; /* the records go with their lines */
    r->body_type = MK_RESP_NONE;
    r->mem = NULL;
    r->mem_len = 0;
    r->file_off = 0;
    r->body_left = 0;
    r->content_length = 0;
    r->stream_sized = false;
}

/* ---- streamed bodies ----------------------------------------------------- */

int mk_response_stream_start(struct mk_request *r, mk_proceed_cb proceed, void *arg)
{
    if (r->body_type == MK_RESP_STREAM || !proceed) {
        return MK_ERR;
    }
    mk_response_drop_file(r);
    r->body_type = MK_RESP_STREAM;
    r->mem_len = 0;
    r->content_length = 0;
    r->stream_sized = false;
    r->proceed = proceed;
    r->proceed_arg = arg;
    return MK_OK;
}

int mk_response_stream_length(struct mk_request *r, uint64_t len)
{
    if (!r || r->body_type != MK_RESP_STREAM || (r->flags & MK_REQ_STREAM_END) || r->q_head ||
        r->head_bytes) {
        return MK_ERR;
    }
    r->stream_sized = true;
    r->content_length = len;
    r->stream_left = len;
    return MK_OK;
}

/*
 * Whether `fields` is what an interim answer may carry: "Name: value\r\n"
 * lines, each name a token, each value without CR, LF or NUL, within
 * MK_INTERIM_MAX bytes (*len set).
 */
static bool mk_response_interim_fields(const char *fields, size_t *len)
{
    const char *p = fields;
    size_t n = strlen(fields);

    if (n > MK_INTERIM_MAX) {
        return false;
    }
    *len = n;
    while (*p) {
        const char *name = p;
        while (mk_is_tchar((unsigned char) *p)) {
            p++;
        }
        if (p == name || *p != ':') {
            return false;
        }
        for (p++; *p && *p != '\r' && *p != '\n'; p++) {
        }
        if (p[0] != '\r' || p[1] != '\n') {
            return false;
        }
        p += 2;
    }
    return true;
}

int mk_response_interim(struct mk_request *r, int status, const char *fields)
{
    size_t len = 0;

    if (!r || status < 100 || status > 199 || status == 101 ||
        (fields && !mk_response_interim_fields(fields, &len))) {
        return MK_ERR;
    }
    if (!r->conn->proto->interim) {
        return MK_DECLINED;
    }
    return r->conn->proto->interim(r, status, fields ? fields : "", len);
}

/*
 * Whether a piece of len bytes keeps a sized stream within its length
 * (the last one: only once all of it was queued), counted when it does.
 */
static bool mk_response_stream_fits(struct mk_request *r, size_t len, bool last)
{
    if (!r->stream_sized) {
        return true;
    }
    if (last) {
        return r->stream_left == 0;
    }
    if (len > r->stream_left) {
        return false;
    }
    r->stream_left -= len;
    return true;
}

/* A piece for len data bytes, with room for the framing around them: NULL when memory is short. */
static struct mk_piece *mk_piece_new(size_t len)
{
    if (len > SIZE_MAX - sizeof(struct mk_piece) - MK_PIECE_HDR - 2) {
        return NULL;
    }
    struct mk_piece *p = mk_try_alloc(sizeof(*p) + MK_PIECE_HDR + len + 2);
    if (p) {
        memset(p, 0, sizeof(*p));
        p->len = len;
    }
    return p;
}

/* Whether the stream of r takes a piece now (the last one: whatever the mark). */
static bool mk_response_stream_open(const struct mk_request *r, bool last)
{
    return r->body_type == MK_RESP_STREAM && !(r->flags & MK_REQ_STREAM_END) &&
           (last || r->queued < MK_STREAM_HIGH_WATER);
}

/* Append piece p (its data in place) and wake an idle writer: MK_OK or MK_AGAIN. */
static int mk_response_stream_append(struct mk_request *r, struct mk_piece *p)
{
    if (r->q_tail) {
        r->q_tail->next = p;
    }
    else {
        r->q_head = p;
    }
    r->q_tail = p;
    r->queued += p->len;
    if (p->last) {
        r->flags |= MK_REQ_STREAM_END;
    }
    int rc = r->queued >= MK_STREAM_HIGH_WATER ? MK_AGAIN : MK_OK;
    if (r->flags & MK_REQ_IDLE) {
        /* The protocol waits for this handler: write now (r may end there). */
        r->flags &= (uint16_t) ~MK_REQ_IDLE;
        r->conn->proto->wake(r);
    }
    return rc;
}

/* Append a copy of a piece (the last one: trailer lines) and wake an idle writer. */
static int mk_response_stream_queue(struct mk_request *r, const void *data, size_t len, bool last)
{
    if (!mk_response_stream_open(r, last)) {
        return MK_ERR;
    }
    struct mk_piece *p = mk_piece_new(len);
    if (!p) {
        return MK_ERR;
    }
    if (!mk_response_stream_fits(r, last ? 0 : len, last)) {
        mk_free(p);
        return MK_ERR;
    }
    memcpy(p->buf + MK_PIECE_HDR, data, len);
    p->last = last;
    return mk_response_stream_append(r, p);
}

void *mk_response_stream_buffer(struct mk_request *r, size_t len)
{
    mk_free(r->spare);
    r->spare = NULL;
    if (len == 0 || !mk_response_stream_open(r, false) || !(r->spare = mk_piece_new(len))) {
        return NULL;
    }
    return r->spare->buf + MK_PIECE_HDR;
}

int mk_response_stream_commit(struct mk_request *r, size_t n)
{
    struct mk_piece *p = r->spare;

    r->spare = NULL;
    if (!p) {
        return MK_ERR;
    }
    if (n == 0 || n > p->len || !mk_response_stream_open(r, false) ||
        !mk_response_stream_fits(r, n, false)) {
        mk_free(p);
        return n == 0 && mk_response_stream_open(r, true) ? MK_OK : MK_ERR;
    }
    p->len = n;
    return mk_response_stream_append(r, p);
}

int mk_response_stream_write(struct mk_request *r, const void *data, size_t len)
{
    if (len == 0) {
        return r->body_type == MK_RESP_STREAM && !(r->flags & MK_REQ_STREAM_END) ? MK_OK : MK_ERR;
    }
    return mk_response_stream_queue(r, data, len, false);
}

int mk_response_stream_end(struct mk_request *r, const char *trailers)
{
    size_t len = trailers ? strlen(trailers) : 0;

    /* Trailer lines end with CRLF and hold no empty line (it would end them early). */
    if (len && (len < 2 || memcmp(trailers + len - 2, "\r\n", 2) != 0 ||
                strstr(trailers, "\r\n\r\n") || trailers[0] == '\r')) {
        return MK_ERR;
    }
    return mk_response_stream_queue(r, trailers ? trailers : "", len, true);
}

void mk_response_stream_pop(struct mk_request *r)
{
    struct mk_piece *p = r->q_head;

    r->q_head = p->next;
    if (!r->q_head) {
        r->q_tail = NULL;
    }
    r->queued -= p->len;
    mk_free(p);
}

void mk_response_stream_cancel(struct mk_request *r)
{
    if (r->spare) {
        mk_free(r->spare);
        r->spare = NULL;
    }
    if (r->body_type != MK_RESP_STREAM) {
        return;
    }
    while (r->q_head) {
        mk_response_stream_pop(r);
    }
    r->body_type = MK_RESP_NONE;
    r->flags &= (uint16_t) ~MK_REQ_IDLE;
    if (!(r->flags & MK_REQ_STREAM_END) && r->proceed) {
        r->flags |= MK_REQ_STREAM_END;
        r->proceed(NULL, r->proceed_arg);
    }
    r->proceed = NULL;
}

/* ---- the body ------------------------------------------------------------ */

void mk_response_drop_body(struct mk_request *r)
{
    mk_response_stream_cancel(r);
    mk_response_drop_file(r);
    r->body_type = MK_RESP_NONE;
    r->body_left = 0;
    r->mem_len = 0;
}

/* ---- multipart bodies ---------------------------------------------------- */

void mk_response_parts_advance(struct mk_request *r, uint64_t len)
{
    struct mk_parts *p = r->parts;

    r->body_left -= len;
    while (len) {
        uint64_t left = p->run[p->i].len - p->done;
        if (len < left) {
            p->done += len;
            return;
        }
        len -= left;
        p->i++;
        p->done = 0;
    }
}

int mk_response_parts_copy(struct mk_request *r, char *buf, size_t len)
{
    const struct mk_parts *p = r->parts;

    while (len) {
        const struct mk_parts_run *run = &p->run[p->i];
        uint64_t left = run->len - p->done;
        size_t take = left < len ? (size_t) left : len;
        if (run->mem) {
            memcpy(buf, run->mem + p->done, take);
        }
        else if (mk_file_read(r->file, r->fd, buf, take, (off_t) (run->off + p->done)) !=
                 (ssize_t) take) {
            return MK_ERR; /* the file shrank: the announced length cannot be kept */
        }
        mk_response_parts_advance(r, take);
        buf += take;
        len -= take;
    }
    return MK_OK;
}

uint64_t mk_response_parts_span(const struct mk_request *r)
{
    const struct mk_parts *p = r->parts;
    uint64_t span = p->run[p->i].len - p->done;
    unsigned i = p->i;

    while (p->run[i].mem && i + 1 < p->n) { /* up to the next file run */
        span += p->run[++i].len;
    }
    while (i + 1 < p->n && p->run[i + 1].mem) { /* and the memory after it */
        span += p->run[++i].len;
    }
    return span;
}
