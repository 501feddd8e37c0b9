/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * response.c: response heads and the write loop.
 *
 * The head is built once into the connection's output chunk, then written
 * together with the body in as few system calls as possible: one writev for
 * a head with a body in memory; for a file, the head is sent with MSG_MORE
 * and sendfile(2) follows, so head and first body bytes leave in the same
 * segment.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/log.h"
#include "server.h"

#define MK_WRITE_BUDGET (2u << 20) /* bytes per event before yielding to others */

/* ---- extra headers ------------------------------------------------------- */

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
    if (r->extra_len + need > r->extra_cap) {
        size_t cap = r->extra_cap ? r->extra_cap * 2 : 256;
        while (cap < r->extra_len + need) {
            cap *= 2;
        }
        char *p = mk_arena_alloc(&r->arena, cap);
        if (!p) {
            return MK_ERR;
        }
        if (r->extra_len) {
            memcpy(p, r->extra_headers, r->extra_len);
        }
        r->extra_headers = p;
        r->extra_cap = cap;
    }
    char *w = r->extra_headers + r->extra_len;
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

void mk_response_error(struct mk_request *r, int status)
{
    const char *reason = mk_http_reason(status);
    static const char type[] = "text/html; charset=utf-8";

    r->status = status;
    mk_response_drop_file(r);
    r->body_type = MK_RESP_NONE;
    r->content_length = 0;
    if (status == 405 || status == 501) {
        mk_response_add_header(r, "Allow", 5, "GET, HEAD, OPTIONS", 18);
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

/* ---- the head ------------------------------------------------------------ */

static inline char *mk_put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

#define MK_PUT_LIT(p, lit) mk_put((p), (lit), sizeof(lit) - 1)

static size_t mk_response_head_size(const struct mk_request *r)
{
    const struct mk_conn *c = r->conn;
    return 64 /* status line */
           + r->cfg->server_header_len + c->worker->date_len + 16 +
           r->content_type_len /* Content-Type */
           + 40                /* Content-Length */
           + r->extra_len + 32 /* Connection */
           + 2;
}

/* Build the head into the connection's output buffer. MK_ERR: no memory. */
static int mk_response_build_head(struct mk_request *r)
{
    struct mk_conn *c = r->conn;
    struct mk_worker *w = c->worker;
    size_t size = mk_response_head_size(r);
    char num[24];
    char *p;

    if (size <= MK_CHUNK_SIZE) {
        c->out = mk_pool_get(&w->pool);
        c->out_size = MK_CHUNK_SIZE;
    }
    else {
        c->out = mk_try_alloc(size);
        c->out_size = (uint32_t) size;
    }
    if (!c->out) {
        c->out_size = 0;
        return MK_ERR;
    }
    p = c->out;

    const char *reason = mk_http_reason(r->status);
    p = MK_PUT_LIT(p, "HTTP/1.1 ");
    p += mk_u64_to_str((uint64_t) r->status, p);
    *p++ = ' ';
    p = mk_put(p, reason, strlen(reason));
    p = MK_PUT_LIT(p, "\r\n");
    p = mk_put(p, r->cfg->server_header, r->cfg->server_header_len);
    p = mk_put(p, w->date, w->date_len);

    bool no_body = (r->status < 200 || r->status == 204 || r->status == 304);
    if (no_body) {
        r->flags |= MK_REQ_NO_BODY;
    }
    if (r->content_type_len && !no_body) {
        p = MK_PUT_LIT(p, "Content-Type: ");
        p = mk_put(p, r->content_type, r->content_type_len);
        p = MK_PUT_LIT(p, "\r\n");
    }
    if (!no_body) {
        p = MK_PUT_LIT(p, "Content-Length: ");
        p = mk_put(p, num, mk_u64_to_str(r->content_length, num));
        p = MK_PUT_LIT(p, "\r\n");
    }
    if (r->extra_len) {
        p = mk_put(p, r->extra_headers, r->extra_len);
    }
    if (!(r->flags & MK_REQ_KEEPALIVE)) {
        p = MK_PUT_LIT(p, "Connection: close\r\n");
    }
    else if (r->head.version == 10) {
        p = MK_PUT_LIT(p, "Connection: keep-alive\r\n");
    }
    p = MK_PUT_LIT(p, "\r\n");
    c->out_len = (uint32_t) (p - c->out);
    c->out_pos = 0;
    r->head_bytes = c->out_len;
    return MK_OK;
}

int mk_response_start(struct mk_request *r)
{
    struct mk_conn *c = r->conn;

    if (mk_response_build_head(r) != MK_OK) {
        return MK_ERR;
    }
    if ((r->flags & (MK_REQ_HEAD | MK_REQ_NO_BODY)) || r->content_length == 0) {
        /* Nothing but the head goes out. */
        mk_response_drop_file(r);
        r->body_type = MK_RESP_NONE;
        r->body_left = 0;
        r->mem_len = 0;
    }
    else if (r->body_type == MK_RESP_FILE && r->body_left <= c->out_size - c->out_len) {
        /*
         * A small file rides in the head's buffer: one read and one write
         * instead of a write and a sendfile, which costs more than it saves
         * for a few bytes.
         */
        ssize_t n = pread(r->fd, c->out + c->out_len, (size_t) r->body_left, r->file_off);
        if (n != (ssize_t) r->body_left) {
            return MK_ERR; /* the file shrank: the announced length cannot be kept */
        }
        c->out_len += (uint32_t) n;
        r->body_type = MK_RESP_NONE;
        r->body_left = 0;
    }
    return mk_response_write(r);
}

/* ---- writing ------------------------------------------------------------- */

/* Without a transport sendfile: read the file and write it. */
static ssize_t mk_response_copy_file(struct mk_request *r, size_t len)
{
    struct mk_conn *c = r->conn;
    char buf[16384];
    struct iovec iov;

    if (len > sizeof(buf)) {
        len = sizeof(buf);
    }
    ssize_t n = pread(r->fd, buf, len, r->file_off);
    if (n <= 0) {
        return n;
    }
    iov.iov_base = buf;
    iov.iov_len = (size_t) n;
    ssize_t sent = c->transport->writev(c, &iov, 1, 0);
    if (sent > 0) {
        r->file_off += sent;
    }
    return sent;
}

int mk_response_write(struct mk_request *r)
{
    struct mk_conn *c = r->conn;
    const struct mk_transport *t = c->transport;
    size_t budget = MK_WRITE_BUDGET;

    /* The head, with a memory body in the same call. */
    while (c->out_pos < c->out_len || (r->body_type == MK_RESP_MEM && r->mem_len)) {
        struct iovec iov[2];
        int cnt = 0, flags = 0;
        size_t head_left = c->out_len - c->out_pos;

        if (head_left) {
            iov[cnt].iov_base = c->out + c->out_pos;
            iov[cnt++].iov_len = head_left;
        }
        if (r->body_type == MK_RESP_MEM && r->mem_len) {
            iov[cnt].iov_base = (void *) r->mem;
            iov[cnt++].iov_len = r->mem_len;
        }
        else if (r->body_type == MK_RESP_FILE && r->body_left) {
            flags = MK_IO_MORE;
        }
        ssize_t n = t->writev(c, iov, cnt, flags);
        if (n < 0) {
            return (errno == EAGAIN || errno == EWOULDBLOCK) ? MK_AGAIN : MK_ERR;
        }
        r->bytes_sent += (uint64_t) n;
        size_t from_head = (size_t) n < head_left ? (size_t) n : head_left;
        c->out_pos += (uint32_t) from_head;
        r->mem += (size_t) n - from_head;
        r->mem_len -= (size_t) n - from_head;
        if ((size_t) n >= budget) {
            return MK_AGAIN;
        }
        budget -= (size_t) n;
    }

    while (r->body_type == MK_RESP_FILE && r->body_left) {
        size_t chunk = r->body_left < budget ? (size_t) r->body_left : budget;
        ssize_t n;
        if (t->sendfile) {
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
    r->flags |= MK_REQ_COMPLETE;
    return MK_OK;
}
