/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * h2_send.c: what an HTTP/2 connection writes (h2.c has the overview).
 * nghttp2 serialises frames into an output queue of memory runs and file
 * ranges (struct mk_h2_seg) through the send callbacks here; DATA frames
 * are read without copying (NGHTTP2_DATA_FLAG_NO_COPY): a file body is
 * queued as a file range and goes out with the transport's sendfile,
 * memory and streamed bodies are copied once into the queue; so are small
 * files (pread) and, when the transport's sendfile copies anyway (TLS
 * without kTLS), every file frame. mk_h2_flush writes the queue through
 * the transport and refills it while the socket takes it, up to a budget
 * per event, corked while more than one write is coming.
 *
 * On the connection's worker. The queue is the connection's (struct mk_h2:
 * `out` and `segs`, allocated when something is queued after an idle
 * spell, given back by mk_h2_idle_trim); a stream whose request ended is
 * freed only once the queue is empty (mk_h2_reap), since a queued file
 * range still reads its descriptor. mk_h2_flush is not called from inside
 * nghttp2 (`busy`: the write waits for `flush_wanted`).
 */
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <string.h>

#include "../../core/log.h"
#include "../request/file_cache.h"
#include "h2_internal.h"
#include "../process/server.h"
#include "../conn/transport.h"

/* ---- the output queue ---------------------------------------------------- */

static struct mk_h2_seg *mk_h2_seg_last(struct mk_h2 *h)
{
    return h->seg_n ? &h->segs[(h->seg_head + h->seg_n - 1) % MK_H2_SEGS] : NULL;
}

static bool mk_h2_out_room(const struct mk_h2 *h)
{
    return h->seg_n + 2 < MK_H2_SEGS && h->out_len < MK_H2_OUT_HIGH &&
           h->file_queued < MK_H2_FILE_HIGH;
}

/* The queue's entries, allocated when something is queued first after an idle spell. */
static void mk_h2_segs_ready(struct mk_h2 *h)
{
    if (!h->segs) {
        h->segs = mk_alloc(MK_H2_SEGS * sizeof(*h->segs));
    }
}

/*
 * A connection idle for MK_H2_TRIM_MS (no stream open, nothing queued)
 * gives memory back: its queue's (16 KiB and up, and 3 KiB of entries)
 * and the pages of nghttp2's frame buffer (h2_mem.h). Thousands of idle
 * connections would otherwise keep them.
 */
void mk_h2_idle_trim(struct mk_h2 *h)
{
    if (h->seg_n == 0 && h->n_open == 0 && !nghttp2_session_want_write(h->ng)) {
        mk_h2_mem_idle(&h->mem);
        mk_free(h->out);
        mk_free(h->segs);
        h->out = NULL;
        h->segs = NULL;
        h->out_len = h->out_cap = 0;
        h->seg_head = 0;
    }
}

/* Grow the queue's memory to hold len more bytes (and its entries after an idle spell). */
static void mk_h2_out_grow(struct mk_h2 *h, size_t len)
{
    mk_h2_segs_ready(h);
    if (h->out_len + len > h->out_cap) {
        size_t cap = h->out_cap ? h->out_cap : 16384;
        while (cap < h->out_len + len) {
            cap *= 2;
        }
        h->out = mk_realloc(h->out, cap);
        h->out_cap = cap;
    }
}

/* Make room for len more bytes in the queue's memory. */
static inline void mk_h2_out_reserve(struct mk_h2 *h, size_t len)
{
    if (h->out_len + len > h->out_cap || !h->segs) {
        mk_h2_out_grow(h, len);
    }
}

/* Count len bytes just written at the end of the queue's memory as queued. */
static inline void mk_h2_out_commit(struct mk_h2 *h, size_t len)
{
    struct mk_h2_seg *last = mk_h2_seg_last(h);

    if (last && !last->file && (size_t) last->off + last->len == h->out_len) {
        last->len += len;
    }
    else {
        struct mk_h2_seg *s = &h->segs[(h->seg_head + h->seg_n++) % MK_H2_SEGS];
        s->file = false;
        s->off = (off_t) h->out_len;
        s->len = len;
    }
    h->out_len += len;
}

/* Append bytes to the queue (data may already be where they go). */
void mk_h2_out_put(struct mk_h2 *h, const void *data, size_t len)
{
    mk_h2_out_reserve(h, len);
    if (data != h->out + h->out_len) {
        memcpy(h->out + h->out_len, data, len);
    }
    mk_h2_out_commit(h, len);
}

/* Append a frame header (9 bytes): the one copy the compiler can inline. */
static inline void mk_h2_out_hd(struct mk_h2 *h, const uint8_t *hd)
{
    mk_h2_out_reserve(h, 9);
    memcpy(h->out + h->out_len, hd, 9);
    mk_h2_out_commit(h, 9);
}

static void mk_h2_out_file(struct mk_h2 *h, int fd, off_t off, size_t len)
{
    struct mk_h2_seg *s;

    mk_h2_segs_ready(h);
    s = &h->segs[(h->seg_head + h->seg_n++) % MK_H2_SEGS];

    s->file = true;
    s->fd = fd;
    s->off = off;
    s->len = len;
    h->file_queued += len;
}

static void mk_h2_seg_pop(struct mk_h2 *h)
{
    h->seg_head = (h->seg_head + 1) % MK_H2_SEGS;
    if (--h->seg_n == 0) {
        h->out_len = 0;
    }
}

/*
 * The bytes of the last memory entry s to write now, when the transport
 * makes records and more frames follow (`hold`): whole records only, so a
 * batch does not end in a small record (and a write(2) of its own); the
 * rest waits for the next frames. 0: hold all of it.
 */
static size_t mk_h2_whole_records(const struct mk_h2 *h, const struct mk_h2_seg *s, bool hold)
{
    size_t len = s->len;

    if (hold && h->records && h->seg_n == 1 && len % MK_TRANSPORT_RECORD) {
        len -= len % MK_TRANSPORT_RECORD;
        if (len < h->again_len) {
            len = h->again_len < s->len ? h->again_len : s->len;
        }
    }
    return len;
}

/* Move the queue's one memory entry to the start of its buffer. */
static void mk_h2_out_compact(struct mk_h2 *h)
{
    struct mk_h2_seg *s = &h->segs[h->seg_head];

    memmove(h->out, h->out + s->off, s->len);
    s->off = 0;
    h->out_len = s->len;
}

/*
 * Write the queue through the transport, within `*budget` bytes: MK_OK
 * (empty, or only a partial record held back: see mk_h2_whole_records),
 * MK_AGAIN (socket full or budget spent), MK_ERR. `more`: nghttp2 has
 * frames to add after these. When more than one write is coming, the
 * socket is corked first (mk_conn_cork; mk_h2_flush uncorks): without it
 * every file frame's sendfile(2), and every TLS record's write(2), would
 * leave as a TCP segment of its own.
 */
static int mk_h2_out_write(struct mk_conn *c, size_t *budget, bool hold, bool more)
{
    struct mk_h2 *h = c->h2;

    while (h->seg_n) {
        struct mk_h2_seg *s = &h->segs[h->seg_head];
        ssize_t n;
        if (*budget == 0) {
            return MK_AGAIN;
        }
        if (!h->corked && (more || h->seg_n > 1)) {
            mk_conn_cork(c, true);
            h->corked = true;
        }
        if (s->file) {
            size_t len = s->len < *budget ? s->len : *budget;
            off_t off = s->off;
            c->io_want = 0; /* file ranges are queued only with a sendfile */
            n = c->transport->sendfile(c, s->fd, &off, len);
        }
        else {
            struct mk_h2_seg *next = h->seg_n > 1 ? &h->segs[(h->seg_head + 1) % MK_H2_SEGS] : NULL;
            struct iovec iov = {h->out + s->off, mk_h2_whole_records(h, s, hold)};
            if (iov.iov_len == 0) {
                if (s->off) {
                    mk_h2_out_compact(h);
                }
                return MK_OK;
            }
            n = mk_conn_writev(c, &iov, 1, next && next->file ? MK_IO_MORE : 0);
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                h->again_len = iov.iov_len;
            }
            else if (n > 0) {
                h->again_len = 0;
            }
        }
        if (n < 0) {
            return (errno == EAGAIN || errno == EWOULDBLOCK) ? MK_AGAIN : MK_ERR;
        }
        if (n == 0 && s->file) {
            mk_warn("file shrank while being sent; closing the connection");
            return MK_ERR;
        }
        h->progress = true;
        h->out_since = c->worker->now_ms;
        h->out_bytes += (uint64_t) n;
        *budget -= (size_t) n < *budget ? (size_t) n : *budget;
        s->off += n;
        s->len -= (size_t) n;
        if (s->file) {
            h->file_queued -= (size_t) n;
        }
        if (s->len == 0) {
            mk_h2_seg_pop(h);
        }
    }
    return MK_OK;
}

/* Free the closed streams once nothing queued can refer to them. */
static void mk_h2_reap(struct mk_conn *c)
{
    struct mk_h2 *h = c->h2;

    while (h->seg_n == 0 && !mk_list_is_empty(&h->dead)) {
        mk_h2_stream_free(c, mk_list_entry(h->dead.next, struct mk_h2_stream, node));
    }
}

/* ---- nghttp2 callbacks: sending ------------------------------------------ */

ssize_t mk_h2_send_cb(nghttp2_session *ng, const uint8_t *data, size_t len, int flags, void *user)
{
    struct mk_conn *c = user;

    (void) ng;
    (void) flags;
    if (!mk_h2_out_room(c->h2)) {
        return NGHTTP2_ERR_WOULDBLOCK;
    }
    mk_h2_out_put(c->h2, data, len);
    return (ssize_t) len;
}

/* Bytes a streamed body has queued, before its last (trailer) piece. */
size_t mk_h2_stream_avail(struct mk_request *r)
{
    size_t n = 0;

    for (struct mk_piece *p = r->q_head; p && !p->last; p = p->next) {
        if (!p->framed) {
            p->start = p->buf + MK_PIECE_HDR;
            p->end = p->start + p->len;
            p->framed = true;
        }
        n += (size_t) (p->end - p->start);
    }
    return n;
}

/* Drop the pieces written in full; the last one only when trailers went. */
static void mk_h2_stream_trim(struct mk_request *r)
{
    while (r->q_head && !r->q_head->last && r->q_head->start == r->q_head->end) {
        mk_response_stream_pop(r);
    }
}

static ssize_t mk_h2_read_stream(struct mk_conn *c, struct mk_h2_stream *s, size_t length,
                                 uint32_t *flags)
{
    struct mk_request *r = s->r;
    size_t avail = mk_h2_stream_avail(r);

    if (avail == 0 && !(r->flags & (MK_REQ_STREAM_END | MK_REQ_PROCEEDING))) {
        r->flags |= MK_REQ_PROCEEDING;
        r->proceed(r, r->proceed_arg);
        r->flags &= (uint16_t) ~MK_REQ_PROCEEDING;
        avail = mk_h2_stream_avail(r);
    }
    if (avail) {
        *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
        return (ssize_t) (avail < length ? avail : length);
    }
    if (r->flags & MK_REQ_STREAM_END) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (r->q_head && r->q_head->last && r->q_head->len) {
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
            mk_h2_submit_trailers(c, s, r->q_head);
        }
        return 0;
    }
    r->flags |= MK_REQ_IDLE; /* mk_response_stream_queue wakes us */
    return NGHTTP2_ERR_DEFERRED;
}

/*
 * Whether the next frame of r's file is read into the queue rather than
 * queued as a file range: a small body (one pread, and it rides in the
 * batch's single write), or a transport whose sendfile would copy it
 * through the process anyway (TLS without kTLS: whole batches of frames
 * then go to one encrypted write instead of a write and a sendfile each),
 * or one without sendfile.
 */
static bool mk_h2_file_inline(struct mk_conn *c, const struct mk_request *r)
{
    return r->body_left <= MK_H2_INLINE_FILE || !c->transport->sendfile || c->h2->records;
}

ssize_t mk_h2_read_cb(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                      nghttp2_data_source *src, void *user)
{
    struct mk_conn *c = user;
    struct mk_h2_stream *s = src->ptr;
    struct mk_request *r = s->r;
    uint64_t left;

    (void) ng;
    (void) id;
    if (s->tunnel) {
        return mk_h2_tunnel_read(c, s, buf, length, flags);
    }
    if (!r) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    if (r->body_type == MK_RESP_STREAM) {
        return mk_h2_read_stream(c, s, length, flags);
    }
    left = r->body_type == MK_RESP_MEM ? r->mem_len : r->body_left;
    if (r->body_type == MK_RESP_PARTS && !mk_h2_file_inline(c, r)) {
        /* one file range a frame: the queue has room for that */
        uint64_t span = mk_response_parts_span(r);
        length = span < length ? (size_t) span : length;
    }
    if (left <= length) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    if (left == 0) {
        return 0;
    }
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    return (ssize_t) (left < length ? left : length);
}

/*
 * The frame header and `length` bytes of r's file, read into the queue:
 * a small body costs one pread and rides in the batch's single write
 * instead of a write and a sendfile of its own. MK_OK, or MK_ERR when
 * the file shrank (the announced length cannot be kept).
 */
static int mk_h2_out_file_inline(struct mk_h2 *h, const uint8_t *hd, struct mk_request *r,
                                 size_t length)
{
    ssize_t n;

    mk_h2_out_hd(h, hd);
    mk_h2_out_reserve(h, length);
    n = mk_file_read(r->file, r->fd, h->out + h->out_len, length, r->file_off);
    if (n != (ssize_t) length) {
        return MK_ERR;
    }
    mk_h2_out_put(h, h->out + h->out_len, length); /* in place: the copy is a no-op */
    r->file_off += (off_t) length;
    r->body_left -= length;
    return MK_OK;
}

/*
 * The frame header and `length` bytes of r's multipart body: the part
 * heads copied into the queue, the parts' bytes queued as file ranges (at
 * most one a frame: mk_h2_read_cb), or read into the queue with `copy`
 * (mk_h2_file_inline). MK_OK, or MK_ERR when the file shrank.
 */
static int mk_h2_out_parts(struct mk_h2 *h, const uint8_t *hd, struct mk_request *r, size_t length,
                           bool copy)
{
    mk_h2_out_hd(h, hd);
    if (copy) {
        mk_h2_out_reserve(h, length);
        if (mk_response_parts_copy(r, h->out + h->out_len, length) != MK_OK) {
            return MK_ERR;
        }
        mk_h2_out_put(h, h->out + h->out_len, length); /* in place: the copy is a no-op */
        return MK_OK;
    }
    while (length) {
        const struct mk_parts *p = r->parts;
        const struct mk_parts_run *run = &p->run[p->i];
        uint64_t left = run->len - p->done;
        size_t take = left < length ? (size_t) left : length;
        if (run->mem) {
            mk_h2_out_put(h, run->mem + p->done, take);
        }
        else {
            mk_h2_out_file(h, r->fd, (off_t) (run->off + p->done), take);
        }
        mk_response_parts_advance(r, take);
        length -= take;
    }
    return MK_OK;
}

int mk_h2_send_data_cb(nghttp2_session *ng, nghttp2_frame *frame, const uint8_t *hd, size_t length,
                       nghttp2_data_source *src, void *user)
{
    struct mk_conn *c = user;
    struct mk_h2 *h = c->h2;
    struct mk_h2_stream *s = src->ptr;
    struct mk_request *r = s->r;

    (void) ng;
    if (!mk_h2_out_room(h)) {
        return NGHTTP2_ERR_WOULDBLOCK;
    }
    if (r->body_type == MK_RESP_FILE && mk_h2_file_inline(c, r)) {
        if (mk_h2_out_file_inline(h, hd, r, length) != MK_OK) {
            return NGHTTP2_ERR_CALLBACK_FAILURE; /* the file shrank */
        }
    }
    else if (r->body_type == MK_RESP_FILE) {
        mk_h2_out_hd(h, hd);
        mk_h2_out_file(h, r->fd, r->file_off, length);
        r->file_off += (off_t) length;
        r->body_left -= length;
    }
    else if (r->body_type == MK_RESP_PARTS) {
        if (mk_h2_out_parts(h, hd, r, length, mk_h2_file_inline(c, r)) != MK_OK) {
            return NGHTTP2_ERR_CALLBACK_FAILURE; /* the file shrank */
        }
    }
    else if (r->body_type == MK_RESP_MEM) {
        mk_h2_out_hd(h, hd);
        mk_h2_out_put(h, r->mem, length);
        r->mem += length;
        r->mem_len -= length;
    }
    else {
        size_t left = length;
        mk_h2_out_hd(h, hd);
        for (struct mk_piece *p = r->q_head; p && left; p = p->next) {
            size_t take = (size_t) (p->end - p->start) < left ? (size_t) (p->end - p->start) : left;
            mk_h2_out_put(h, p->start, take);
            p->start += take;
            left -= take;
        }
        mk_h2_stream_trim(r);
    }
    if (frame->data.padlen > 0) {
        static const uint8_t zeros[256];
        uint8_t pad = (uint8_t) (frame->data.padlen - 1);
        mk_h2_out_put(h, &pad, 1);
        mk_h2_out_put(h, zeros, frame->data.padlen - 1);
    }
    r->bytes_sent += length;
    s->since = c->worker->now_ms;
    return 0;
}

/* ---- writing ------------------------------------------------------------- */

/*
 * Let nghttp2 serialise what it has and write it, until the socket is
 * full, the budget is spent or nothing is left; a cork set on the way
 * (mk_h2_out_write) is taken off before returning. Not from inside nghttp2.
 */
void mk_h2_flush(struct mk_conn *c)
{
    struct mk_h2 *h = c->h2;
    size_t budget = MK_H2_WRITE_BUDGET;
    bool hold = true;

    if (!h || h->busy) {
        if (h) {
            h->flush_wanted = true;
        }
        return;
    }
    h->flush_wanted = false;
    for (;;) {
        /* a partial record waits for more frames only while nghttp2 has
           more and the last round added some */
        bool more = nghttp2_session_want_write(h->ng);
        int rc = mk_h2_out_write(c, &budget, hold && h->records && more, more);
        if (rc == MK_ERR) {
            mk_conn_close(c);
            return;
        }
        mk_h2_reap(c);
        if (rc == MK_AGAIN || !nghttp2_session_want_write(h->ng)) {
            break;
        }
        size_t queued = h->out_len + h->file_queued;
        h->busy = true;
        int sr = nghttp2_session_send(h->ng);
        h->busy = false;
        if (sr != 0) {
            mk_conn_close(c);
            return;
        }
        hold = h->out_len + h->file_queued != queued;
        if (h->calm && !h->conn_error) {
            /* streams closed unanswered as frames went out: GOAWAY now */
            mk_h2_fail(c, NGHTTP2_ENHANCE_YOUR_CALM);
            continue;
        }
        if (h->seg_n == 0) {
            mk_h2_reap(c);
            if (!h->flush_wanted) {
                break;
            }
            h->flush_wanted = false;
        }
    }
    if (h->corked) {
        h->corked = false;
        mk_conn_cork(c, false); /* the last partial segment goes now */
    }
}
