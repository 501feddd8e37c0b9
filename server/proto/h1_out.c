/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * h1_out.c: what HTTP/1 writes on a connection: the response head (built
 * into the connection's output buffer, c->h1.out), the body after it (a
 * memory body in the head's write, a small file or multipart body read
 * into the head's buffer, a file or multipart body with the transport's
 * sendfile, a streamed body framed in chunks or by the close), the cork
 * of large file bodies, and the answers written outside any request (a
 * raw 503 or 408, 100 Continue). It writes; h1.c decides when and what
 * follows (keep-alive, the next request, closing).
 *
 * Everything runs on the connection's worker. The output buffer is the
 * connection's (c->h1.out: a pool chunk, or a larger malloc block for a
 * large head), attached here for the head and released by h1.c once the
 * response is sent; the body's source stays the request's (request.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <monkey/mk_util.h>

#include "../../core/log.h"
#include "../request/file_cache.h"
#include "h1_internal.h"
#include "../process/server.h"
#include "../conn/transport.h"

#define MK_WRITE_BUDGET (2u << 20) /* bytes per event before yielding to others */

/* ---- answers outside a response ------------------------------------------ */

void mk_h1_send_raw(struct mk_conn *c, int status)
{
    struct mk_worker *w = c->worker;
    char buf[512];
    const char *reason = mk_http_reason(status);
    int body_len, n;
    char body[160];

    body_len = snprintf(body, sizeof(body),
                        "<!DOCTYPE html>\n<html><head><title>%d %s</title></head>"
                        "<body><h1>%d %s</h1></body></html>\n",
                        status, reason, status, reason);
    n = snprintf(buf, sizeof(buf),
                 "HTTP/1.1 %d %s\r\n%.*s%.*sContent-Type: text/html; charset=utf-8\r\n"
                 "Content-Length: %d\r\n%sConnection: close\r\n\r\n%s",
                 status, reason, (int) w->use.cfg->server_header_len, w->use.cfg->server_header,
                 (int) w->date_len, w->date, body_len, status == 503 ? "Retry-After: 1\r\n" : "",
                 body);
    if (n <= 0 || (size_t) n >= sizeof(buf)) {
        return;
    }
    struct iovec iov = {buf, (size_t) n};
    ssize_t ignored = mk_conn_writev(c, &iov, 1, 0);
    (void) ignored;
}

/* The interim answer to "Expect: 100-continue", once a handler asks for the body. */
int mk_h1_send_continue(struct mk_conn *c)
{
    static const char msg[] = "HTTP/1.1 100 Continue\r\n\r\n";
    struct iovec iov = {(void *) msg, sizeof(msg) - 1};
    ssize_t n = mk_conn_writev(c, &iov, 1, 0);
    return n == (ssize_t) (sizeof(msg) - 1) ? MK_OK : MK_ERR;
}

/*
 * An interim answer (api->interim) before r's head: the status line, the
 * fields and the empty line, written at once. What the socket does not
 * take of it is kept (r->interim_rest) and goes first in the head's
 * buffer: a partial line is never followed by anything else.
 */
int mk_h1_interim(struct mk_request *r, int status, const char *fields, size_t len)
{
    struct mk_conn *c = r->conn;
    char line[48];

    if (r->head.version < 11) {
        return MK_DECLINED; /* RFC 9110 section 15.2: never to an HTTP/1.0 client */
    }
    if (c->h1.req != r || c->h1.out || r->head_bytes) {
        return MK_ERR;
    }
    int n = snprintf(line, sizeof(line), "HTTP/1.1 %d %s\r\n", status, mk_http_reason(status));
    if (n <= 0 || (size_t) n >= sizeof(line)) {
        return MK_ERR;
    }
    size_t total = (size_t) n + len + 2;
    char *msg = mk_arena_alloc(&r->arena, r->interim_rest_len + total);
    if (!msg) {
        return MK_ERR;
    }
    if (r->interim_rest_len) {
        memcpy(msg, r->interim_rest, r->interim_rest_len);
    }
    memcpy(msg + r->interim_rest_len, line, (size_t) n);
    memcpy(msg + r->interim_rest_len + (size_t) n, fields, len);
    memcpy(msg + r->interim_rest_len + (size_t) n + len, "\r\n", 2);
    total += r->interim_rest_len;
    if (r->interim_rest_len) {
        /* the rest of one before waits: this one after it, with the head */
        r->interim_rest = msg;
        r->interim_rest_len = total;
        return MK_OK;
    }
    struct iovec iov = {msg, total};
    ssize_t k = mk_conn_writev(c, &iov, 1, 0);
    if (k <= 0) {
        return MK_AGAIN; /* nothing went: a hint lost, the stream intact */
    }
    if ((size_t) k < total) {
        r->interim_rest = msg + k;
        r->interim_rest_len = total - (size_t) k;
    }
    return MK_OK;
}

/* ---- the head ------------------------------------------------------------ */

static inline char *mk_put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

#define MK_PUT_LIT(p, lit) mk_put((p), (lit), sizeof(lit) - 1)

static size_t mk_h1_head_size(const struct mk_request *r)
{
    const struct mk_conn *c = r->conn;
    return 64 /* status line */
           + r->cfg->server_header_len + c->worker->date_len + 16 +
           r->content_type_len /* Content-Type */
           + 40                /* Content-Length */
           + r->extra_len + 32 /* Connection */
           + 2 + r->interim_rest_len;
}

/* Build the head into the connection's output buffer. MK_ERR: no memory. */
static int mk_h1_build_head(struct mk_request *r)
{
    struct mk_conn *c = r->conn;
    struct mk_h1 *h = &c->h1;
    struct mk_worker *w = c->worker;
    size_t size = mk_h1_head_size(r);
    char *p;

    if (size <= MK_CHUNK_SIZE) {
        h->out = mk_pool_get(&w->pool);
        h->out_size = MK_CHUNK_SIZE;
    }
    else {
        h->out = mk_try_alloc(size);
        h->out_size = (uint32_t) size;
    }
    if (!h->out) {
        h->out_size = 0;
        return MK_ERR;
    }
    p = h->out;
    if (r->interim_rest_len) {
        p = mk_put(p, r->interim_rest, r->interim_rest_len);
        r->interim_rest_len = 0;
    }

    if (r->status == 200) {
        p = MK_PUT_LIT(p, "HTTP/1.1 200 OK\r\n");
    }
    else {
        const char *reason = mk_http_reason(r->status);
        p = MK_PUT_LIT(p, "HTTP/1.1 ");
        p += mk_u64_dec((uint64_t) r->status, p);
        *p++ = ' ';
        p = mk_put(p, reason, strlen(reason));
        p = MK_PUT_LIT(p, "\r\n");
    }
    if (r->cfg == w->use.cfg) {
        p = mk_put(p, w->head_lines, w->head_lines_len);
    }
    else {
        p = mk_put(p, r->cfg->server_header, r->cfg->server_header_len);
        p = mk_put(p, w->date, w->date_len);
    }

    bool no_body = mk_response_no_body(r);
    if (r->content_type_len && !no_body) {
        p = MK_PUT_LIT(p, "Content-Type: ");
        p = mk_put(p, r->content_type, r->content_type_len);
        p = MK_PUT_LIT(p, "\r\n");
    }
    if (!no_body && r->body_type == MK_RESP_STREAM && !r->stream_sized) {
        if (r->chunked) {
            p = MK_PUT_LIT(p, "Transfer-Encoding: chunked\r\n");
        }
    }
    else if (!no_body) {
        p = MK_PUT_LIT(p, "Content-Length: ");
        p += mk_u64_dec(r->content_length, p);
        p = MK_PUT_LIT(p, "\r\n");
    }
    if (r->extra_len) {
        p = mk_put(p, r->extra_headers, r->extra_len);
    }
    if (r->upgrade && r->status == 101) {
        /* the handler's Connection: Upgrade says it all */
    }
    else if (!(r->flags & MK_REQ_KEEPALIVE)) {
        p = MK_PUT_LIT(p, "Connection: close\r\n");
    }
    else if (r->head.version == 10) {
        p = MK_PUT_LIT(p, "Connection: keep-alive\r\n");
    }
    p = MK_PUT_LIT(p, "\r\n");
    h->out_len = (uint32_t) (p - h->out);
    h->out_pos = 0;
    r->head_bytes = h->out_len;
    return MK_OK;
}

/* Build the head and write what the socket takes: MK_OK, MK_AGAIN, MK_ERR. */
int mk_h1_start(struct mk_request *r)
{
    struct mk_h1 *h = &r->conn->h1;

    if (mk_h1_build_head(r) != MK_OK) {
        return MK_ERR;
    }
    if (mk_response_omit_body(r)) {
        /* Nothing but the head goes out. */
    }
    else if (r->body_type == MK_RESP_FILE && r->body_left <= h->out_size - h->out_len) {
        /*
         * A small file rides in the head's buffer: one read and one write
         * instead of a write and a sendfile, which costs more than it saves
         * for a few bytes.
         */
        ssize_t n =
            mk_file_read(r->file, r->fd, h->out + h->out_len, (size_t) r->body_left, r->file_off);
        if (n != (ssize_t) r->body_left) {
            return MK_ERR; /* the file shrank: the announced length cannot be kept */
        }
        h->out_len += (uint32_t) n;
        r->body_type = MK_RESP_NONE;
        r->body_left = 0;
    }
    else if (r->body_type == MK_RESP_PARTS && r->body_left <= h->out_size - h->out_len) {
        /* A small multipart body too: its part heads and bytes, read. */
        size_t len = (size_t) r->body_left;
        if (mk_response_parts_copy(r, h->out + h->out_len, len) != MK_OK) {
            return MK_ERR;
        }
        h->out_len += (uint32_t) len;
        r->body_type = MK_RESP_NONE;
    }
    return mk_h1_write(r);
}

/* ---- file bodies --------------------------------------------------------- */

/* Without a transport sendfile: read the file at *off and write it, moving *off on. */
static ssize_t mk_h1_copy_file(struct mk_request *r, off_t *off, size_t len)
{
    struct mk_conn *c = r->conn;
    char buf[16384];
    struct iovec iov;

    if (len > sizeof(buf)) {
        len = sizeof(buf);
    }
    ssize_t n = mk_file_read(r->file, r->fd, buf, len, *off);
    if (n <= 0) {
        return n;
    }
    iov.iov_base = buf;
    iov.iov_len = (size_t) n;
    ssize_t sent = mk_conn_writev(c, &iov, 1, 0);
    if (sent > 0) {
        *off += sent;
    }
    return sent;
}

/*
 * Write the file body of r through the connection's transport, within
 * `budget` bytes: MK_OK (all sent), MK_AGAIN (socket full or budget spent),
 * MK_ERR.
 */
static int mk_h1_send_file(struct mk_request *r, size_t budget)
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
            n = mk_h1_copy_file(r, &r->file_off, chunk);
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

/*
 * Write the memory runs from the cursor on, up to the next file run, in
 * one writev: a part's head (held for the file bytes after it with
 * MK_IO_MORE), or every part of a body from memory. The same cursor
 * gives the same buffers, as a transport may require of a write repeated
 * after EAGAIN (TLS). Returns what the write returns.
 */
static ssize_t mk_h1_parts_write(struct mk_request *r)
{
    const struct mk_parts *p = r->parts;
    struct iovec iov[2 * MK_RANGES_MAX + 1];
    unsigned i = p->i;
    int cnt = 0;

    iov[cnt].iov_base = (void *) (p->run[i].mem + p->done);
    iov[cnt++].iov_len = (size_t) (p->run[i].len - p->done);
    while (++i < p->n && p->run[i].mem && cnt < (int) (sizeof(iov) / sizeof(iov[0]))) {
        iov[cnt].iov_base = (void *) p->run[i].mem;
        iov[cnt++].iov_len = (size_t) p->run[i].len;
    }
    return mk_conn_writev(r->conn, iov, cnt, i < p->n ? MK_IO_MORE : 0);
}

/*
 * The same for a multipart body (MK_RESP_PARTS): the part heads from
 * memory (mk_h1_parts_write), the parts' bytes with the transport's
 * sendfile.
 */
static int mk_h1_send_parts(struct mk_request *r, size_t budget)
{
    struct mk_conn *c = r->conn;
    const struct mk_transport *t = c->transport;

    while (r->body_type == MK_RESP_PARTS && r->body_left) {
        const struct mk_parts *p = r->parts;
        const struct mk_parts_run *run = &p->run[p->i];
        uint64_t left = run->len - p->done;
        size_t chunk = left < budget ? (size_t) left : budget;
        off_t off = (off_t) (run->off + p->done);
        ssize_t n;
        if (run->mem) {
            n = mk_h1_parts_write(r);
        }
        else if (t->sendfile) {
            c->io_want = 0;
            n = t->sendfile(c, r->fd, &off, chunk);
        }
        else {
            n = mk_h1_copy_file(r, &off, chunk);
        }
        if (n < 0) {
            return (errno == EAGAIN || errno == EWOULDBLOCK) ? MK_AGAIN : MK_ERR;
        }
        if (n == 0) {
            mk_warn("file shrank while being sent; closing the connection");
            return MK_ERR;
        }
        r->bytes_sent += (uint64_t) n;
        mk_response_parts_advance(r, (uint64_t) n);
        if ((size_t) n >= budget && r->body_left) {
            return MK_AGAIN;
        }
        budget -= (size_t) n < budget ? (size_t) n : budget;
    }
    return MK_OK;
}

/* ---- streamed bodies ----------------------------------------------------- */

/* Frame a queued piece in place: a chunk-size line and CRLF around it. */
static void mk_h1_frame(struct mk_request *r, struct mk_piece *p)
{
    char hdr[MK_PIECE_HDR];
    int n = 0;

    p->start = p->buf + MK_PIECE_HDR;
    p->end = p->start + p->len;
    if (r->chunked) {
        n = snprintf(hdr, sizeof(hdr), "%zx\r\n", p->last ? (size_t) 0 : p->len);
        p->start -= n;
        memcpy(p->start, hdr, (size_t) n);
        memcpy(p->end, "\r\n", 2);
        p->end += 2;
    }
    else if (p->last) {
        p->end = p->start; /* close-delimited: the end is the close */
    }
    p->framed = true;
}

/*
 * Write the queued pieces of a streamed body, asking the handler for more
 * (proceed) each time the queue is empty. MK_OK: the body ended and is
 * sent; MK_AGAIN: socket full or budget spent; MK_DECLINED: the queue is
 * empty and the handler will write later (MK_REQ_IDLE set); MK_ERR.
 */
static int mk_h1_write_stream(struct mk_request *r, size_t budget)
{
    struct mk_conn *c = r->conn;

    for (;;) {
        while (r->q_head) {
            struct iovec iov[16];
            int cnt = 0;
            for (struct mk_piece *p = r->q_head; p && cnt < 16; p = p->next) {
                if (!p->framed) {
                    mk_h1_frame(r, p);
                }
                if (p->end > p->start) {
                    iov[cnt].iov_base = p->start;
                    iov[cnt++].iov_len = (size_t) (p->end - p->start);
                }
            }
            ssize_t n = cnt ? mk_conn_writev(c, iov, cnt, 0) : 0;
            if (n < 0) {
                return (errno == EAGAIN || errno == EWOULDBLOCK) ? MK_AGAIN : MK_ERR;
            }
            r->bytes_sent += (uint64_t) n;
            size_t left = (size_t) n;
            for (struct mk_piece *p = r->q_head; p && left; p = p->next) {
                size_t take =
                    (size_t) (p->end - p->start) < left ? (size_t) (p->end - p->start) : left;
                p->start += take;
                left -= take;
            }
            while (r->q_head && r->q_head->framed && r->q_head->start == r->q_head->end) {
                mk_response_stream_pop(r);
            }
            if ((size_t) n >= budget) {
                return MK_AGAIN;
            }
            budget -= (size_t) n;
        }
        if (r->flags & MK_REQ_STREAM_END) {
            return MK_OK;
        }
        if (r->flags & MK_REQ_PROCEEDING) {
            break;
        }
        r->flags |= MK_REQ_PROCEEDING;
        r->proceed(r, r->proceed_arg);
        r->flags &= (uint16_t) ~MK_REQ_PROCEEDING;
        if (!r->q_head && !(r->flags & MK_REQ_STREAM_END)) {
            break;
        }
    }
    r->flags |= MK_REQ_IDLE;
    return MK_DECLINED;
}

/* ---- the write loop ------------------------------------------------------ */

/*
 * Write the head, with a memory body in the same call, then a file or
 * streamed body: MK_OK when all is sent, MK_AGAIN when the socket is full
 * or this event's budget is spent, MK_DECLINED when a stream waits for its
 * handler, MK_ERR.
 */
static int mk_h1_write_all(struct mk_request *r)
{
    struct mk_conn *c = r->conn;
    struct mk_h1 *h = &c->h1;
    size_t budget = MK_WRITE_BUDGET;

    while (h->out_pos < h->out_len || (r->body_type == MK_RESP_MEM && r->mem_len)) {
        struct iovec iov[2];
        int cnt = 0, flags = 0;
        size_t head_left = h->out_len - h->out_pos;

        if (head_left) {
            iov[cnt].iov_base = h->out + h->out_pos;
            iov[cnt++].iov_len = head_left;
        }
        if (r->body_type == MK_RESP_MEM && r->mem_len) {
            iov[cnt].iov_base = (void *) r->mem;
            iov[cnt++].iov_len = r->mem_len;
        }
        else if (r->body_type >= MK_RESP_FILE && r->body_left) {
            flags = MK_IO_MORE; /* a file's bytes follow (MK_RESP_FILE, MK_RESP_PARTS) */
        }
        ssize_t n = mk_conn_writev(c, iov, cnt, flags);
        if (n < 0) {
            return (errno == EAGAIN || errno == EWOULDBLOCK) ? MK_AGAIN : MK_ERR;
        }
        r->bytes_sent += (uint64_t) n;
        size_t from_head = (size_t) n < head_left ? (size_t) n : head_left;
        h->out_pos += (uint32_t) from_head;
        r->mem += (size_t) n - from_head;
        r->mem_len -= (size_t) n - from_head;
        if ((size_t) n >= budget) {
            return MK_AGAIN;
        }
        budget -= (size_t) n;
    }
    int rc = r->body_type <= MK_RESP_MEM     ? MK_OK /* a memory body went with the head */
             : r->body_type == MK_RESP_FILE  ? mk_h1_send_file(r, budget)
             : r->body_type == MK_RESP_PARTS ? mk_h1_send_parts(r, budget)
                                             : mk_h1_write_stream(r, budget);
    if (rc == MK_OK) {
        r->flags |= MK_REQ_COMPLETE;
    }
    return rc;
}

/*
 * The file bytes that one sendfile(2) hands to TCP at a time: the kernel
 * splices a file to a socket through a pipe of 16 pages, one TCP send each.
 */
#define MK_H1_SPLICE_STEP (16u * 4096u)

/* The smallest file body sent corked by a sendfile that does not copy. */
#define MK_H1_CORK_MIN (4u * MK_H1_SPLICE_STEP)

/*
 * Whether the response goes out corked (TCP_CORK) from its head to the end
 * of what this event writes: a file body that would otherwise end writes in
 * partial TCP segments.
 *   - A transport whose sendfile copies (TLS without kTLS, or none at all)
 *     writes the file in pieces, each ending in a partial segment: corked
 *     above one record.
 *   - sendfile(2) that does not copy: MSG_MORE holds a partial segment
 *     back for one call only, and an ACK processed between two splice
 *     steps, or between the head and the body, pushes it out on its own
 *     (the socket has TCP_NODELAY). Uncorked, a 1 MB body left in 21.5
 *     segments under wrk -c100 instead of 18.2; a 200 KB one in 4.15
 *     instead of 4.02, which does not pay for the two setsockopt(2): corked
 *     above MK_H1_CORK_MIN.
 *   - A multipart body too large to ride in the head's buffer: the
 *     writes of its part heads and its sendfile(2) calls would each end in
 *     a partial segment.
 */
static bool mk_h1_cork_file(struct mk_request *r)
{
    struct mk_conn *c = r->conn;
    const struct mk_transport *t = c->transport;

    if (r->body_type < MK_RESP_FILE) {
        return false;
    }
    if (r->body_type == MK_RESP_PARTS) {
        return r->fd >= 0; /* not a body compressed on the fly: one writev */
    }
    bool copies = !t->sendfile || (t->sendfile_copies && t->sendfile_copies(c));
    return r->body_left > (copies ? MK_TRANSPORT_RECORD : MK_H1_CORK_MIN);
}

/* mk_h1_write_all, corked for a large file body (mk_h1_cork_file). */
int mk_h1_write(struct mk_request *r)
{
    if (!mk_h1_cork_file(r)) {
        return mk_h1_write_all(r);
    }
    mk_conn_cork(r->conn, true);
    int rc = mk_h1_write_all(r);
    mk_conn_cork(r->conn, false);
    return rc;
}
