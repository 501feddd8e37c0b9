/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * response.c: what a response is, whatever protocol carries it: extra
 * headers, error answers (the site's error pages or a short HTML body), the
 * body's source, and the file-body write loop through the transport. The
 * protocol (h1.c) builds the head and decides how the bytes are framed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/log.h"
#include "conf.h"
#include "conn.h"
#include "file_cache.h"
#include "proto.h"
#include "request.h"
#include "transport.h"
#include "worker.h"

/* ---- extra headers ------------------------------------------------------- */

/* Room for `need` more bytes of extra header lines: where they go, or NULL. */
static char *mk_response_extra_room(struct mk_request *r, size_t need)
{
    if (r->extra_len + need > r->extra_cap) {
        size_t cap = r->extra_cap ? r->extra_cap * 2 : 256;
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
    return r->extra_headers + r->extra_len;
}

int mk_response_add_lines(struct mk_request *r, const char *lines, size_t len)
{
    char *w = mk_response_extra_room(r, len);

    if (!w) {
        return MK_ERR;
    }
    memcpy(w, lines, len);
    r->extra_len += len;
    return MK_OK;
}

int mk_response_add_header(struct mk_request *r, const char *name, size_t name_len,
                           const char *value, size_t value_len)
{
    size_t need = name_len + value_len + 4;

    /* A header must never smuggle a line break into the response. */
    if (name_len == 0 || memchr(name, '\r', name_len) || memchr(name, '\n', name_len) ||
        memchr(name, ':', name_len) || memchr(value, '\r', value_len) ||
        memchr(value, '\n', value_len)) {
        return MK_ERR;
    }
    char *w = mk_response_extra_room(r, need);
    if (!w) {
        return MK_ERR;
    }
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

void mk_response_drop_file(struct mk_request *r)
{
    if (r->file) {
        mk_file_release(r->file);
        r->file = NULL;
    }
    else if (r->fd >= 0) {
        close(r->fd);
    }
    r->fd = -1;
}

/* ---- error responses ----------------------------------------------------- */

/* Serve the site's page for `status`, if it has one that can be opened. */
static bool mk_response_error_page(struct mk_request *r, int status)
{
    const struct mk_vhost *vh = r->vhost;
    struct stat st;

    if (!vh) {
        return false;
    }
    for (size_t i = 0; i < vh->n_error_pages; i++) {
        const struct mk_error_page *ep = &vh->error_pages[i];
        if (ep->status != status) {
            continue;
        }
        int fd = mk_static_open(vh, ep->path + 1, O_RDONLY);
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
    const char *p = r->extra_headers, *end = p ? p + r->extra_len : NULL; /* NULL + 0 is UB */

    while (p && end - p > 6) {
        if (strncasecmp(p, "Allow:", 6) == 0) {
            return true;
        }
        const char *nl = memchr(p, '\n', (size_t) (end - p));
        p = nl ? nl + 1 : end;
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
        mk_response_add_header(r, "Allow", 5, "GET, HEAD, OPTIONS", 18);
        return;
    }
    size_t n = mk_route_allow_format(methods, allow, sizeof(allow));
    mk_response_add_header(r, "Allow", 5, allow, n);
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
    r->proceed = proceed;
    r->proceed_arg = arg;
    return MK_OK;
}

/* Append a piece (the last one: trailer lines) and wake an idle writer. */
static int mk_response_stream_queue(struct mk_request *r, const void *data, size_t len, bool last)
{
    if (r->body_type != MK_RESP_STREAM || (r->flags & MK_REQ_STREAM_END) ||
        (!last && r->queued >= MK_STREAM_HIGH_WATER)) {
        return MK_ERR;
    }
    struct mk_piece *p = mk_try_alloc(sizeof(*p) + MK_PIECE_HDR + len + 2);
    if (!p) {
        return MK_ERR;
    }
    memset(p, 0, sizeof(*p));
    memcpy(p->buf + MK_PIECE_HDR, data, len);
    p->len = len;
    p->last = last;
    if (r->q_tail) {
        r->q_tail->next = p;
    }
    else {
        r->q_head = p;
    }
    r->q_tail = p;
    r->queued += len;
    if (last) {
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

/* Without a transport sendfile: read the file and write it. */
static ssize_t mk_response_copy_file(struct mk_request *r, size_t len)
{
    struct mk_conn *c = r->conn;
    char buf[16384];
    struct iovec iov;

    if (len > sizeof(buf)) {
        len = sizeof(buf);
    }
    ssize_t n = mk_file_read(r->file, r->fd, buf, len, r->file_off);
    if (n <= 0) {
        return n;
    }
    iov.iov_base = buf;
    iov.iov_len = (size_t) n;
    ssize_t sent = mk_conn_writev(c, &iov, 1, 0);
    if (sent > 0) {
        r->file_off += sent;
    }
    return sent;
}

int mk_response_send_file(struct mk_request *r, size_t budget)
{
    struct mk_conn *c = r->conn;
    const struct mk_transport *t = c->transport;

    while (r->body_type == MK_RESP_FILE && r->body_left) {
        size_t chunk = r->body_left < budget ? (size_t) r->body_left : budget;
        ssize_t n;
        if (t->sendfile) {
            c->io_want = 0;
            n = t->sendfile(c, r->fd, &r->file_off, chunk);
        }
        else {
            n = mk_response_copy_file(r, chunk);
        }
        if (n < 0) {
            return (errno == EAGAIN || errno == EWOULDBLOCK) ? MK_AGAIN : MK_ERR;
        }
        if (n == 0) {
            /* The file shrank under us: the promised length cannot be kept. */
            mk_warn("file shrank while being sent; closing the connection");
            return MK_ERR;
        }
        r->bytes_sent += (uint64_t) n;
        r->body_left -= (uint64_t) n;
        if ((size_t) n >= budget && r->body_left) {
            return MK_AGAIN; /* let other connections run; we are still writable */
        }
        budget -= (size_t) n;
    }
    return MK_OK;
}
