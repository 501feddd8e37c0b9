/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * h2.c: HTTP/2 on a connection (RFC 9113), behind the protocol table
 * (proto.h). nghttp2 parses frames, keeps HPACK state and flow-control
 * windows and schedules the streams (RFC 9218 priorities: the `priority`
 * header and PRIORITY_UPDATE; RFC 7540 priority frames are parsed and
 * ignored, SETTINGS_NO_RFC7540_PRIORITIES is sent). This file turns
 * streams into requests and responses into frames:
 *
 *   HEADERS (+CONTINUATION) ──▶ a request head, built from the fields by
 *       mk_http_head_build (the rules of the HTTP/1 parser, no text in
 *       between), version 20 ──▶ mk_request_run: the same stages, plugins
 *       and static files
 *   DATA ──▶ the stream's body: kept (within the stream's window) until a
 *       handler asks for it, then buffered or streamed (body.h); the
 *       stream's window opens again only as the handler takes the bytes
 *   respond ──▶ HEADERS, then DATA frames read without copying
 *       (NGHTTP2_DATA_FLAG_NO_COPY): a file body is queued as a file range
 *       and goes out with the transport's sendfile, memory and streamed
 *       bodies are copied once into the output queue; so are small files
 *       (pread) and, when the transport's sendfile copies anyway (TLS
 *       without kTLS), every file frame
 *
 * Output: nghttp2 serialises frames into an output queue of memory runs
 * and file ranges (struct mk_h2_seg); the queue is written through the
 * transport and refilled while the socket takes it, up to a budget per
 * event. A stream whose request ended is freed only once the queue is
 * empty (a queued file range still reads its descriptor). A connection
 * idle for MK_H2_TRIM_MS frees the queue's memory and gives back the
 * pages of nghttp2's frame buffer (h2_mem.h).
 *
 * Defences: MaxConcurrentStreams; the header list is held to
 * MaxRequestSize and MaxRequestHeaders (431), and one header block
 * (HEADERS and its CONTINUATION frames, compressed) to MaxRequestSize + 16 KiB,
 * with at most 8 CONTINUATION frames (nghttp2); a block that decodes to
 * more than four times MaxRequestSize (an HPACK bomb) ends the connection;
 * RST_STREAM frames are rate-limited (Http2ResetBurst, Http2ResetRate:
 * CVE-2023-44487, GOAWAY ENHANCE_YOUR_CALM), and so are streams that end
 * without a complete answer because of the client (Http2UnansweredBurst,
 * Http2UnansweredRate: reset by the client, or by this server because of
 * what the client sent, refused over MaxConcurrentStreams included: the
 * variants of rapid reset that send no RST_STREAM; not those this server
 * resets for its own failure); SETTINGS and PING floods are
 * nghttp2's (at most 1000 acknowledgements queued); empty DATA and
 * CONTINUATION frames are counted and end the connection past a bound.
 * Timers: Http2IdleTimeout without streams. With streams, timeouts are
 * per stream and end that stream alone (mk_h2_stream_expire): Timeout for
 * one that waits for its body (408), its plugin (503) or the end of a body
 * it answered (RST_STREAM NO_ERROR); SendTimeout for a response that makes
 * no progress (RST_STREAM CANCEL: its window is shut; INTERNAL_ERROR: its
 * handler is silent). Only a connection stuck as a whole is ended: Timeout
 * inside the preface or a header block, SendTimeout while its output is
 * stalled (a client that reads nothing or keeps the connection's window shut).
 *
 * Everything runs on the connection's worker. nghttp2 must not be
 * re-entered for sending from its own callbacks: `busy` marks those, and
 * a write asked for meanwhile (`flush_wanted`) happens when they return.
 */
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <monkey/mk_util.h>

#include "../../core/log.h"
#include "../request/file_cache.h"
#include "h2.h"
#include "h2_mem.h"
#include "../process/server.h"
#include "../conn/transport.h"

#define MK_H2_SEGS 128                 /* output queue entries */
#define MK_H2_OUT_HIGH (64u * 1024u)   /* queued memory bytes before nghttp2 waits */
#define MK_H2_FILE_HIGH (512u * 1024u) /* queued file bytes before nghttp2 waits */
#define MK_H2_WRITE_BUDGET (2u << 20)  /* bytes per event before yielding to others */
#define MK_H2_READ_SIZE 16384
#define MK_H2_EMPTY_FRAMES_MAX 100 /* empty DATA/CONTINUATION frames per connection */
#define MK_H2_STREAM_WINDOW 65535  /* body bytes a stream may have unread */
#define MK_H2_CLOSED_IDS 64
#define MK_H2_INLINE_FILE 8192  /* a file body up to this size is read into the queue */
#define MK_H2_TRIM_MS 250       /* idle this long, a connection gives memory back */
#define MK_H2_DRAIN_MS 1000     /* at most this long from the shutdown notice to the GOAWAY */
#define MK_H2_RECENT 16         /* open streams found without asking nghttp2 */
#define MK_H2_STREAM_BLOCK 1024 /* a stream and the start of its header block: one h2_mem block */

enum mk_h2_body {
    MK_H2_BODY_KEEP = 0, /* nobody asked yet: keep it (the stream window bounds it) */
    MK_H2_BODY_BUFFER,   /* collect it for the content handler */
    MK_H2_BODY_STREAM,   /* hand it to the handler as its window allows (body.h) */
    MK_H2_BODY_DROP,     /* nobody will read it */
};

/* A pseudo-header value in a stream's header block. */
struct mk_h2_span {
    uint32_t off, len;
    bool set;
};

/* A regular field in a stream's header block: its name and value follow. */
struct mk_h2_rec {
    uint32_t name_len, value_len;
};

struct mk_h2_stream {
    int32_t id;
    struct mk_request *r; /* NULL until the header block is complete, and after an abort */
    struct mk_list node;  /* the connection's streams, or its dead list once closed */
    /*
     * the header block, in one buffer kept with the stream (the request
     * head points into it): the pseudo-header values, then from fields_off
     * on the regular fields as records (struct mk_h2_rec, then the name and
     * the value); pseudo-headers come first. It starts in `first`, the rest
     * of the stream's own allocation, and moves to a block of its own
     * (mk_h2_mem_get) only when it outgrows that.
     */
    char *block;
    size_t block_len, block_cap;
    struct mk_h2_span method, path, authority;
    size_t fields_off; /* where the first regular field begins */
    bool has_fields;
    /* what mk_h2_request_checks needs (nghttp2's HTTP checks are off) */
    bool regular_seen;    /* a regular field came: no pseudo-header may follow */
    bool scheme_set;      /* :scheme came (valid) */
    bool scheme_http;     /* ... and it is http or https */
    bool host_set;        /* a Host field came */
    bool names_unchecked; /* a field name is not a token, or was not classified
                             (mk_http_name_class): mk_http_head_build checks them all */
    bool malformed;       /* RFC 9113 section 8.1.1: reset with PROTOCOL_ERROR */
    bool prio_set;        /* `priority` fields came (RFC 9218), all valid: prio holds them */
    bool prio_bad;        /* one was not: they are all ignored */
    struct mk_http_priority prio;
    int64_t content_length; /* the request's Content-Length, -1: none */
    size_t list_size;       /* RFC 9113 header list size so far (name + value + 32 each) */
    unsigned n_fields;      /* regular fields received */
    unsigned n_recs;        /* regular fields kept (a Host beside :authority is not) */
    int head_status;        /* 431: the list is over the limits */
    /* the request body */
    uint8_t body;     /* enum mk_h2_body */
    bool body_end;    /* END_STREAM received */
    bool body_wanted; /* a handler called read_body and waits for mk_request_body_ready */
    bool responding;  /* a response was submitted */
    bool closed;      /* nghttp2 closed the stream */
    bool peer_reset;  /* the client reset it */
    bool we_reset;    /* this server reset it */
    bool answered;    /* the last frame of its response (END_STREAM) went out */
    bool timed_out;   /* answered 408 by its timeout: reset (NO_ERROR) once that is out */
    uint64_t since;   /* worker ms: the start of its current wait, its timeout counts from here */
    struct mk_send_rate rate; /* SendMinRate while the client keeps its window shut */
    char *kept;               /* body bytes not yet handed over (malloc) */
    size_t kept_len, kept_cap;
    uint64_t body_seen; /* body bytes received */
    char first[];       /* the header block while it fits (MK_H2_STREAM_BLOCK in all) */
};

_Static_assert(MK_H2_STREAM_BLOCK <= MK_H2_MEM_MAX &&
                   sizeof(struct mk_h2_stream) + 512 <= MK_H2_STREAM_BLOCK,
               "a stream and a header block of 512 bytes or more share one h2_mem block");

/* A token bucket: `tokens` left, refilled at a rate per second since `at`. */
struct mk_h2_bucket {
    unsigned tokens;
    uint64_t at; /* when it was last refilled (worker ms clock) */
};

/* One entry of the output queue: bytes of `out`, or a range of a file. */
struct mk_h2_seg {
    bool file;
    int fd;
    off_t off; /* file offset, or the offset in `out` */
    size_t len;
};

struct mk_h2 {
    nghttp2_session *ng;
    struct mk_h2_mem mem;          /* nghttp2's allocator for this session */
    struct mk_list streams;        /* open, by arrival */
    struct mk_list dead;           /* closed, freed when the output queue is empty */
    struct mk_h2_stream *in_block; /* the stream whose header block is being received, or NULL */
    unsigned n_open;
    unsigned n_responding; /* responses submitted and not yet complete */
    /* output queue */
    char *out;
    size_t out_len, out_cap; /* emptied only when the whole queue is written */
    struct mk_h2_seg *segs;  /* MK_H2_SEGS entries; with `out`, none while idle */
    unsigned seg_head, seg_n;
    size_t file_queued;
    /* the transport encrypts in the process, record by record (TLS without
       kTLS: sendfile would copy): file frames are read into the queue, and
       a batch is written in whole records while more frames follow */
    bool records;
    size_t again_len; /* the length of a write that found the socket full: a
                         retry may not be shorter (OpenSSL's rule) */
    bool corked;      /* TCP_CORK is on for the flush under way (mk_h2_flush) */
    /* state */
    bool busy;                      /* inside nghttp2 (recv or send): no session_send now */
    bool flush_wanted;              /* a write was asked for while busy */
    bool going_away;                /* GOAWAY submitted */
    bool draining;                  /* the shutdown notice went out, the final GOAWAY not yet */
    uint64_t drain_at;              /* worker ms: when the shutdown notice was submitted */
    bool calm;                      /* the peer abused a limit: GOAWAY ENHANCE_YOUR_CALM */
    bool progress;                  /* bytes moved in the current event */
    bool trimmed;                   /* idle memory given back since the last activity */
    size_t block_bytes;             /* compressed bytes of the header block being received */
    struct mk_h2_bucket resets;     /* RST_STREAM frames the client may still send */
    struct mk_h2_bucket unanswered; /* streams that may still end without an answer */
    /* streams the client closed (END_STREAM both ways, or its RST_STREAM), the
       latest MK_H2_CLOSED_IDS: frames on them are a STREAM_CLOSED error */
    int32_t closed_ids[MK_H2_CLOSED_IDS];
    unsigned closed_next;
    int32_t max_opened;           /* the highest stream id a request was opened on */
    uint64_t read_at;             /* worker ms: the last bytes read */
    uint64_t out_since;           /* worker ms: the output has not been stalled since */
    uint64_t out_bytes;           /* bytes written to the socket */
    struct mk_send_rate out_rate; /* SendMinRate while the output is stalled */
    uint32_t conn_error;          /* the GOAWAY error a callback asked for, 0: none */
    /* stream 1 of an upgraded connection (Upgrade: h2c), started once the
       client's preface is complete, so that the 101 is read before it */
    struct mk_h2_stream *upgraded;
    /* frame boundaries of the input, checked before nghttp2 sees a frame */
    uint32_t preface_left; /* bytes of the client preface still to come */
    uint8_t scan_hd[14];   /* the frame header being read (+5 for PRIORITY) */
    unsigned scan_have;
    uint32_t scan_left;  /* payload bytes of the current frame not yet seen */
    int32_t scan_max_id; /* the highest stream id of a HEADERS frame scanned */
    bool bad_magic;      /* the client preface was wrong: close at once */
    unsigned empty_frames;
    /* open streams by (id / 2) % MK_H2_RECENT, the latest opened of each
       slot (NULL once closed): most lookups by id need no nghttp2 map */
    struct mk_h2_stream *recent[MK_H2_RECENT];
};

static void mk_h2_flush(struct mk_conn *c);
static void mk_h2_after(struct mk_conn *c);
static void mk_h2_drain_end(struct mk_conn *c);
static void mk_h2_body_deliver(struct mk_conn *c, struct mk_h2_stream *s);

/* The opaque data of the PING that follows the shutdown notice. */
static const uint8_t mk_h2_drain_ping[8] = {'m', 'k', '-', 'd', 'r', 'a', 'i', 'n'};

/* The open stream with this id, or NULL (the same as nghttp2's stream user data). */
static struct mk_h2_stream *mk_h2_stream_find(struct mk_h2 *h, int32_t id)
{
    struct mk_h2_stream *s = h->recent[((uint32_t) id >> 1) % MK_H2_RECENT];

    if (s && s->id == id) {
        return s;
    }
    return nghttp2_session_get_stream_user_data(h->ng, id);
}

/* ---- streams ------------------------------------------------------------- */

static void mk_h2_stream_free(struct mk_conn *c, struct mk_h2_stream *s)
{
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
    (void) c;
}

/* Free the closed streams once nothing queued can refer to them. */
static void mk_h2_reap(struct mk_conn *c)
{
    struct mk_h2 *h = c->h2;

    while (h->seg_n == 0 && !mk_list_is_empty(&h->dead)) {
        mk_h2_stream_free(c, mk_list_entry(h->dead.next, struct mk_h2_stream, node));
    }
}

/* Hand bytes the handler took back to the client's window of the stream. */
static void mk_h2_consume(struct mk_conn *c, struct mk_h2_stream *s, size_t n)
{
    if (n && !s->closed) {
        nghttp2_session_consume_stream(c->h2->ng, s->id, n);
        c->h2->flush_wanted = true;
    }
}

/* Reset s from this side (RST_STREAM with `error`); frames that crossed it are ignored. */
static void mk_h2_reset(struct mk_conn *c, struct mk_h2_stream *s, uint32_t error)
{
    s->we_reset = true;
    nghttp2_submit_rst_stream(c->h2->ng, NGHTTP2_FLAG_NONE, s->id, error);
}

/* ---- output queue ---------------------------------------------------------- */

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
static void mk_h2_idle_trim(struct mk_h2 *h)
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
static void mk_h2_out_put(struct mk_h2 *h, const void *data, size_t len)
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

/* ---- nghttp2 callbacks: sending ---------------------------------------------- */

static ssize_t mk_h2_send_cb(nghttp2_session *ng, const uint8_t *data, size_t len, int flags,
                             void *user)
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
static size_t mk_h2_stream_avail(struct mk_request *r)
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

/* Trailers of a streamed body ("Name: value\r\n"...) as an nghttp2 list. */
static void mk_h2_lines_to_nv(char *p, size_t len, nghttp2_nv *nv, size_t cap, size_t *n,
                              uint8_t flags);

static void mk_h2_submit_trailers(struct mk_conn *c, struct mk_h2_stream *s, struct mk_piece *p)
{
    nghttp2_nv nv[32];
    size_t n = 0;

    mk_h2_lines_to_nv(p->buf + MK_PIECE_HDR, p->len, nv, 32, &n, NGHTTP2_NV_FLAG_NONE);
    nghttp2_submit_trailer(c->h2->ng, s->id, nv, n);
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

static bool mk_h2_file_inline(struct mk_conn *c, const struct mk_request *r);

static ssize_t mk_h2_read_cb(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                             uint32_t *flags, nghttp2_data_source *src, void *user)
{
    struct mk_conn *c = user;
    struct mk_h2_stream *s = src->ptr;
    struct mk_request *r = s->r;
    uint64_t left;

    (void) ng;
    (void) id;
    (void) buf;
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

static int mk_h2_send_data_cb(nghttp2_session *ng, nghttp2_frame *frame, const uint8_t *hd,
                              size_t length, nghttp2_data_source *src, void *user)
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

/* ---- nghttp2 callbacks: receiving -------------------------------------------- */

/*
 * Take a token from b (at most `burst`, refilled by `rate` a second):
 * false when none is left.
 */
static bool mk_h2_bucket_take(struct mk_h2_bucket *b, unsigned burst, unsigned rate, uint64_t now)
{
    uint64_t refill = (now - b->at) * rate / 1000;

    if (refill) {
        b->tokens = b->tokens + refill > burst ? burst : (unsigned) (b->tokens + refill);
        b->at = now;
    }
    if (b->tokens == 0) {
        return false;
    }
    b->tokens--;
    return true;
}

/* One more RST_STREAM from the client: whether Http2ResetBurst/Rate allow it. */
static bool mk_h2_reset_allowed(struct mk_conn *c)
{
    const struct mk_config *cfg = c->worker->use.cfg;

    return mk_h2_bucket_take(&c->h2->resets, cfg->h2_reset_burst, cfg->h2_reset_rate,
                             c->worker->now_ms);
}

/*
 * A stream the client opened ended without a complete answer because of
 * the client (reset by it, or by this server for what it sent, refused):
 * past Http2UnansweredBurst/Rate the connection is over its limit (`calm`).
 * A stream this server resets for its own failure (INTERNAL_ERROR) is not
 * counted: a client must not lose its connection to the server's faults. The GOAWAY follows once
 * nghttp2 returns: at the next frame received (mk_h2_begin_frame_cb), after the input (mk_h2_recv)
 * or after sending (mk_h2_flush).
 */
static void mk_h2_unanswered(struct mk_conn *c)
{
    const struct mk_config *cfg = c->worker->use.cfg;

    if (!mk_h2_bucket_take(&c->h2->unanswered, cfg->h2_unanswered_burst, cfg->h2_unanswered_rate,
                           c->worker->now_ms)) {
        c->h2->calm = true;
    }
}

static bool mk_h2_closed_by_peer(const struct mk_h2 *h, int32_t id)
{
    for (unsigned i = 0; i < MK_H2_CLOSED_IDS; i++) {
        if (h->closed_ids[i] == id) {
            return true;
        }
    }
    return false;
}

/*
 * nghttp2 keeps no closed streams (RFC 9218 priorities): it would ignore
 * a frame on one. A DATA or HEADERS frame on a stream the client closed is
 * a STREAM_CLOSED error, and a request on a stream id below one already
 * used a PROTOCOL_ERROR (RFC 9113 sections 5.1, 5.1.1); frames on streams
 * this server reset are ignored, as they may have crossed the reset. A
 * PRIORITY frame on stream 0 is a PROTOCOL_ERROR. Returns true (with
 * conn_error set) for a connection error.
 */
static bool mk_h2_frame_on_closed(struct mk_conn *c, const nghttp2_frame_hd *hd,
                                  const uint8_t *priority)
{
    struct mk_h2 *h = c->h2;

    if (hd->type == NGHTTP2_PRIORITY && hd->stream_id == 0) {
        h->conn_error = NGHTTP2_PROTOCOL_ERROR;
        return true;
    }
    if (priority && hd->length == 5 &&
        (int32_t) (((uint32_t) priority[0] << 24 | (uint32_t) priority[1] << 16 |
                    (uint32_t) priority[2] << 8 | priority[3]) &
                   0x7fffffffu) == hd->stream_id) {
        /* a stream depending on itself (RFC 9113 section 5.3.1): a stream error,
           which may be treated as one of the connection */
        h->conn_error = NGHTTP2_PROTOCOL_ERROR;
        return true;
    }
    if ((hd->type != NGHTTP2_DATA && hd->type != NGHTTP2_HEADERS) || hd->stream_id <= 0 ||
        mk_h2_stream_find(h, hd->stream_id) || nghttp2_session_find_stream(h->ng, hd->stream_id)) {
        return false;
    }
    if (mk_h2_closed_by_peer(h, hd->stream_id)) {
        h->conn_error = NGHTTP2_STREAM_CLOSED;
        return true;
    }
    if (hd->type == NGHTTP2_HEADERS && (hd->stream_id & 1) && hd->stream_id < h->max_opened) {
        h->conn_error = NGHTTP2_PROTOCOL_ERROR;
        return true;
    }
    return false;
}

static int mk_h2_begin_frame_cb(nghttp2_session *ng, const nghttp2_frame_hd *hd, void *user)
{
    struct mk_conn *c = user;
    struct mk_h2 *h = c->h2;
    const struct mk_config *cfg = c->worker->use.cfg;

    (void) ng;
    if (h->calm) {
        return NGHTTP2_ERR_CALLBACK_FAILURE; /* over a limit since the last frame */
    }
    if (hd->type == NGHTTP2_RST_STREAM && !mk_h2_reset_allowed(c)) {
        h->calm = true; /* rapid reset (CVE-2023-44487) */
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    if (hd->type == NGHTTP2_HEADERS) {
        h->block_bytes = hd->length;
    }
    else if (hd->type == NGHTTP2_CONTINUATION) {
        h->block_bytes += hd->length;
        if (hd->length == 0 && !(hd->flags & NGHTTP2_FLAG_END_HEADERS)) {
            h->empty_frames++;
        }
    }
    else if (hd->type == NGHTTP2_DATA && hd->length == 0 &&
             !(hd->flags & NGHTTP2_FLAG_END_STREAM)) {
        h->empty_frames++;
    }
    if ((hd->type == NGHTTP2_HEADERS || hd->type == NGHTTP2_CONTINUATION) &&
        h->block_bytes > cfg->limits.max_head + 16384) {
        h->calm = true;
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    if (h->empty_frames > MK_H2_EMPTY_FRAMES_MAX) {
        h->calm = true;
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
}

/*
 * A stream the client opened: counted, on the connection's list. One
 * block holds the stream and the start of its header block: a request
 * costs one allocation fewer.
 */
static struct mk_h2_stream *mk_h2_stream_new(struct mk_conn *c, int32_t id)
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

static int mk_h2_begin_headers_cb(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
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

/* ---- request checks (RFC 9113 sections 8.1.1, 8.2, 8.3) ------------------------- */

/*
 * nghttp2 runs with its HTTP checks off (no_http_messaging): they cost
 * more than a thousand instructions a request and repeated what
 * mk_http_head_build checks anyway. What remains specific to HTTP/2 is
 * checked here as the fields arrive, and a malformed request is reset
 * with PROTOCOL_ERROR, as nghttp2 would: pseudo-headers (known, once,
 * not empty, before every regular field, none in trailers; :method,
 * :scheme and :path present, or :authority alone for CONNECT; :path
 * "/..." or OPTIONS "*"), upper-case or connection-specific field names,
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
    else if (nlen == 7 && memcmp(name, ":scheme", 7) == 0 && !s->scheme_set &&
             mk_h2_scheme_valid(value, vlen)) {
        s->scheme_set = true;
        s->scheme_http = (vlen == 4 && strncasecmp((const char *) value, "http", 4) == 0) ||
                         (vlen == 5 && strncasecmp((const char *) value, "https", 5) == 0);
        return true;
    }
    if (!slot || slot->set) {
        s->malformed = true; /* unknown (:status, :protocol...), repeated, a bad :scheme */
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
        return !s->scheme_set && !s->path.set && s->authority.set;
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

static int mk_h2_header_cb(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name,
                           size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags,
                           void *user)
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
        /* trailers: nothing reads them, but a pseudo-header there is malformed */
        s->malformed |= nlen && name[0] == ':';
        return 0;
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
        .method = mk_h2_span_str(s, &s->method),
        .target = mk_h2_span_str(s, s->path.set ? &s->path : &s->authority),
        .names_are_tokens = !s->names_unchecked,
    };

    s->r = r;
    r->proto_data = s;
    s->body_end = end_stream;
    s->since = c->worker->now_ms;
    if (!p.refused) {
        p.headers = mk_h2_headers(r, s, &p.n);
        p.refused = p.headers ? 0 : 503;
    }
    mk_request_run_parts(r, &p);
}

/* Keep body bytes of s until its handler takes them. */
static bool mk_h2_body_keep(struct mk_h2_stream *s, const uint8_t *data, size_t len)
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
static void mk_h2_body_deliver(struct mk_conn *c, struct mk_h2_stream *s)
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

static int mk_h2_data_cb(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user)
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
    if (s->body_seen > s->r->cfg->max_body) {
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

static int mk_h2_frame_recv_cb(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    struct mk_conn *c = user;
    struct mk_h2_stream *s;
    bool end = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;

    (void) ng;
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
        mk_h2_body_done(s);
    }
    return 0;
}

static int mk_h2_frame_send_cb(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    struct mk_conn *c = user;
    struct mk_h2_stream *s;

    (void) ng;
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
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_RESPONSE) {
        s = mk_h2_stream_find(c->h2, frame->hd.stream_id);
        if (s && s->r) {
            /* the response head as it went out: HPACK-compressed, frame header included */
            s->r->head_bytes = (uint32_t) (frame->hd.length + 9);
            s->r->bytes_sent += s->r->head_bytes;
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

static int mk_h2_stream_close_cb(nghttp2_session *ng, int32_t id, uint32_t error, void *user)
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

/* ---- the session ------------------------------------------------------------- */

/* The callbacks, shared by every session: built once, read only afterwards. */
static nghttp2_session_callbacks *mk_h2_cbs;
static pthread_once_t mk_h2_cbs_once = PTHREAD_ONCE_INIT;

static void mk_h2_callbacks_init(void)
{
    nghttp2_session_callbacks *cbs;

    if (nghttp2_session_callbacks_new(&cbs) != 0) {
        mk_err("out of memory");
        abort();
    }
    nghttp2_session_callbacks_set_send_callback(cbs, mk_h2_send_cb);
    nghttp2_session_callbacks_set_send_data_callback(cbs, mk_h2_send_data_cb);
    nghttp2_session_callbacks_set_on_begin_frame_callback(cbs, mk_h2_begin_frame_cb);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, mk_h2_begin_headers_cb);
    nghttp2_session_callbacks_set_on_header_callback(cbs, mk_h2_header_cb);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, mk_h2_data_cb);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, mk_h2_frame_recv_cb);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, mk_h2_frame_send_cb);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, mk_h2_stream_close_cb);
    mk_h2_cbs = cbs;
}

/* A new session for c, its SETTINGS queued: MK_OK or MK_ERR (no memory). */
static int mk_h2_session_new(struct mk_conn *c)
{
    const struct mk_config *cfg = c->worker->use.cfg;
    struct mk_h2 *h = mk_calloc(1, sizeof(*h));
    nghttp2_option *opt;
    int rc;

    pthread_once(&mk_h2_cbs_once, mk_h2_callbacks_init);
    mk_list_init(&h->streams);
    mk_list_init(&h->dead);
    c->h2 = h;
    if (nghttp2_option_new(&opt) != 0) {
        return MK_ERR;
    }
    nghttp2_option_set_no_auto_window_update(opt, 1);
    nghttp2_option_set_no_closed_streams(opt, 1);
    nghttp2_option_set_no_http_messaging(opt, 1); /* h2.c checks requests itself */
    nghttp2_option_set_max_outbound_ack(opt, 1000);
    nghttp2_option_set_max_settings(opt, 32);
    nghttp2_option_set_max_continuations(opt, 8);
    /* RFC 9218 PRIORITY_UPDATE: nghttp2 ignores the frame unless asked to take it */
    nghttp2_option_set_builtin_recv_extension_type(opt, NGHTTP2_PRIORITY_UPDATE);
    /* ours answers ENHANCE_YOUR_CALM first; nghttp2's stays as a backstop */
    nghttp2_option_set_stream_reset_rate_limit(opt, 2 * (uint64_t) cfg->h2_reset_burst,
                                               cfg->h2_reset_rate);
    h->resets = (struct mk_h2_bucket){cfg->h2_reset_burst, c->worker->now_ms};
    h->unanswered = (struct mk_h2_bucket){cfg->h2_unanswered_burst, c->worker->now_ms};
    h->records = c->transport->sendfile_copies && c->transport->sendfile_copies(c);
    h->preface_left = MK_H2_PREFACE_LEN;
    h->read_at = h->out_since = c->worker->now_ms;
    nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
    mk_h2_mem_init(&h->mem);
    h->mem.creating = true;
    rc = nghttp2_session_server_new3(&h->ng, mk_h2_cbs, c, opt, &h->mem.ng);
    h->mem.creating = false;
    nghttp2_option_del(opt);
    if (rc != 0) {
        h->ng = NULL;
        return MK_ERR;
    }
    MK_STAT_ADD(c->worker->n_h2_conns, 1);
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, cfg->h2_max_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, MK_H2_STREAM_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t) cfg->limits.max_head},
        {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
    };
    if (nghttp2_submit_settings(h->ng, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0) {
        return MK_ERR;
    }
    /* The connection's window: streams are held back by their own windows. */
    nghttp2_session_set_local_window_size(h->ng, NGHTTP2_FLAG_NONE, 0, 1 << 24);
    return MK_OK;
}

static void mk_h2_release(struct mk_conn *c)
{
    struct mk_h2 *h = c->h2;

    if (!h) {
        return;
    }
    while (!mk_list_is_empty(&h->streams)) {
        struct mk_h2_stream *s = mk_list_entry(h->streams.next, struct mk_h2_stream, node);
        MK_STAT_ADD(c->worker->n_h2_streams, (unsigned) -1);
        mk_h2_stream_free(c, s);
    }
    while (!mk_list_is_empty(&h->dead)) {
        mk_h2_stream_free(c, mk_list_entry(h->dead.next, struct mk_h2_stream, node));
    }
    if (h->ng) {
        nghttp2_session_del(h->ng);
        MK_STAT_ADD(c->worker->n_h2_conns, (unsigned) -1);
    }
    mk_free(h->out);
    mk_free(h->segs);
    mk_free(h);
    c->h2 = NULL;
}

/* ---- responses ------------------------------------------------------------- */

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

/*
 * The response of r as HEADERS (and DATA): submitted, then written. The
 * fields are not copied by nghttp2 (NO_COPY): they live in r's arena, the
 * configuration r holds, the worker or static storage, and r lives until
 * its stream is closed; a HEADERS frame still queued for a closed stream
 * is dropped by nghttp2 without reading them.
 */
static void mk_h2_respond(struct mk_request *r, bool error)
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
    bool body;

    (void) error;
    if (!s || s->closed) {
        return; /* the stream is gone: the request ends with it */
    }
    s->since = c->worker->now_ms;
    if (s->body_wanted) {
        s->body_wanted = false;
    }
    if (s->body == MK_H2_BODY_KEEP || !s->body_end) {
        s->body = MK_H2_BODY_DROP; /* no handler reads what comes now */
        mk_h2_consume(c, s, s->kept_len);
        s->kept_len = 0;
    }
    if (!nv || !status || !clen || r->status < 200 || r->status > 999) {
        mk_h2_reset(c, s, NGHTTP2_INTERNAL_ERROR);
        mk_h2_flush(c);
        return;
    }
    status[0] = (char) ('0' + r->status / 100);
    status[1] = (char) ('0' + r->status / 10 % 10);
    status[2] = (char) ('0' + r->status % 10);
    nv[n++] = (nghttp2_nv){(uint8_t *) ":status", (uint8_t *) status, 7, 3, nc};
    mk_h2_line_nv(r->cfg->server_header, r->cfg->server_header_len, "server", nv, &n, nc);
    mk_h2_line_nv(w->date, w->date_len, "date", nv, &n, nc);
    if (!mk_response_no_body(r)) {
        if (r->content_type_len) {
            nv[n++] = (nghttp2_nv){(uint8_t *) "content-type", (uint8_t *) r->content_type, 12,
                                   r->content_type_len, nc};
        }
        if (r->body_type != MK_RESP_STREAM) {
            size_t l = mk_u64_dec(r->content_length, clen);
            nv[n++] = (nghttp2_nv){(uint8_t *) "content-length", (uint8_t *) clen, 14, l, nc};
        }
    }
    mk_h2_fields_to_nv(r, nv, cap, &n, nc);
    body = !mk_response_omit_body(r);
    if (nghttp2_submit_response(c->h2->ng, s->id, nv, n, body ? &dp : NULL) != 0) {
        mk_h2_reset(c, s, NGHTTP2_INTERNAL_ERROR);
    }
    else {
        s->responding = true;
        c->h2->n_responding++;
    }
    mk_h2_flush(c);
}

/* ---- the connection ---------------------------------------------------------- */

/*
 * End the session with GOAWAY: the connection error a callback chose
 * (conn_error), else `error`; ENHANCE_YOUR_CALM is logged (the client
 * went over a limit). Not from inside nghttp2.
 */
static void mk_h2_fail(struct mk_conn *c, uint32_t error)
{
    struct mk_h2 *h = c->h2;

    if (!h->conn_error) {
        h->conn_error = error;
    }
    if (h->conn_error == NGHTTP2_ENHANCE_YOUR_CALM) {
        mk_warn("HTTP/2 client over a limit (resets, unanswered streams, header block, empty "
                "frames): GOAWAY");
    }
    nghttp2_session_terminate_session(h->ng, h->conn_error);
    h->going_away = true;
}

/* Send GOAWAY (once) with the last stream the server took. */
static void mk_h2_goaway(struct mk_conn *c, uint32_t error)
{
    struct mk_h2 *h = c->h2;

    if (h->going_away && error == NGHTTP2_NO_ERROR) {
        return;
    }
    h->going_away = true;
    nghttp2_submit_goaway(h->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(h->ng),
                          error, NULL, 0);
}

/*
 * Let nghttp2 serialise what it has and write it, until the socket is
 * full, the budget is spent or nothing is left; a cork set on the way
 * (mk_h2_out_write) is taken off before returning. Not from inside nghttp2.
 */
static void mk_h2_flush(struct mk_conn *c)
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

/*
 * Whether the output is stuck for the whole connection: bytes queued that
 * the socket does not take, or responses held by the connection's window.
 */
static bool mk_h2_out_stalled(const struct mk_h2 *h)
{
    return h->seg_n || (h->n_responding && nghttp2_session_get_remote_window_size(h->ng) <= 0);
}

/* The shorter of Timeout and SendTimeout: the first check of a busy connection. */
static uint64_t mk_h2_check_ms(const struct mk_config *cfg)
{
    return cfg->timeout_ms < cfg->send_timeout_ms ? cfg->timeout_ms : cfg->send_timeout_ms;
}

/*
 * Arm the connection's timer (MK_TIMER_READ: the checks of a busy
 * connection) for about `ms`: rounded up to four significant bits, so that
 * the deadlines of many connections share a few timer queues of the
 * worker, at most 1/8 late.
 */
static void mk_h2_timer_check(struct mk_conn *c, uint64_t ms)
{
    unsigned shift = 0;

    if (ms == 0) {
        ms = 1;
    }
    while ((ms >> shift) > 15) {
        shift++;
    }
    ms = ((ms + ((UINT64_C(1) << shift) - 1)) >> shift) << shift;
    mk_conn_timer_arm(c, MK_TIMER_READ, ms > UINT32_MAX ? UINT32_MAX : (uint32_t) ms);
}

/*
 * Watch for what the connection waits for, and arm the right timer: idle,
 * or the checks of a busy connection. The latter is not pushed back by
 * progress: each stream's deadline counts from its own last progress
 * (`since`), and mk_h2_expire finds the due ones and re-arms for the next.
 */
static void mk_h2_after(struct mk_conn *c)
{
    struct mk_h2 *h = c->h2;
    struct mk_worker *w = c->worker;
    uint32_t mask = MK_EV_READ;

    if (c->state == MK_CONN_CLOSED || !h || h->busy) {
        return;
    }
    if (h->flush_wanted) {
        mk_h2_flush(c);
        if (c->state == MK_CONN_CLOSED) {
            return;
        }
    }
    if (!nghttp2_session_want_read(h->ng) && !nghttp2_session_want_write(h->ng) && h->seg_n == 0) {
        mk_conn_linger(c); /* GOAWAY went out, or the client said goodbye */
        return;
    }
    if (h->going_away && h->n_open == 0 && h->seg_n == 0 && !nghttp2_session_want_write(h->ng)) {
        mk_conn_linger(c);
        return;
    }
    if (h->seg_n || nghttp2_session_want_write(h->ng)) {
        mask |= MK_EV_WRITE;
    }
    if (c->io_want == MK_IO_WANT_WRITE) {
        mask |= MK_EV_WRITE;
    }
    if (mk_event_mod(&w->loop, &c->ev, mask) != MK_OK) {
        mk_conn_close(c);
        return;
    }
    if (!mk_h2_out_stalled(h)) {
        h->out_since = w->now_ms;
        mk_send_rate_stop(&h->out_rate);
    }
    else if (!h->out_rate.since) {
        mk_send_rate_start(&h->out_rate, h->out_bytes, w->now_ms); /* SendMinRate */
    }
    if (h->seg_n || h->n_open || h->preface_left || h->draining) {
        /* streams wait (for the client, a plugin or their turn), or the preface does,
           or the final GOAWAY */
        if (c->timer != MK_TIMER_READ) {
            mk_h2_timer_check(c, mk_h2_check_ms(w->use.cfg));
        }
    }
    else if (h->progress || c->timer != MK_TIMER_IDLE) {
        /* idle: MK_H2_TRIM_MS first (mk_h2_expire trims), then the rest */
        uint32_t timeout = w->use.cfg->h2_idle_timeout_ms;
        h->trimmed = false;
        mk_conn_timer_idle(c, timeout < MK_H2_TRIM_MS ? timeout : MK_H2_TRIM_MS);
    }
    h->progress = false;
}

/* Hand bytes to nghttp2: MK_OK, or MK_ERR after a connection error (GOAWAY queued). */
static int mk_h2_recv(struct mk_conn *c, const char *data, size_t len)
{
    struct mk_h2 *h = c->h2;
    ssize_t n;

    if (len == 0 || h->conn_error) {
        return h->conn_error ? MK_ERR : MK_OK;
    }
    h->busy = true;
    n = nghttp2_session_mem_recv(h->ng, (const uint8_t *) data, len);
    h->busy = false;
    if (n == NGHTTP2_ERR_BAD_CLIENT_MAGIC) {
        h->conn_error = NGHTTP2_PROTOCOL_ERROR;
        h->bad_magic = true;
        return MK_ERR;
    }
    if (n >= 0 && !h->calm) {
        return MK_OK;
    }
    mk_h2_fail(c, h->calm || n == NGHTTP2_ERR_FLOODED ? NGHTTP2_ENHANCE_YOUR_CALM
                                                      : NGHTTP2_PROTOCOL_ERROR);
    return MK_ERR;
}

/* A frame header (and a PRIORITY frame's payload) is complete: check it. */
static int mk_h2_scan_frame(struct mk_conn *c)
{
    struct mk_h2 *h = c->h2;
    const uint8_t *b = h->scan_hd;
    nghttp2_frame_hd hd = {
        .length = (size_t) b[0] << 16 | (size_t) b[1] << 8 | b[2],
        .type = b[3],
        .flags = b[4],
        .stream_id = (int32_t) (((uint32_t) b[5] << 24 | (uint32_t) b[6] << 16 |
                                 (uint32_t) b[7] << 8 | b[8]) &
                                0x7fffffffu),
    };

    if (hd.type == NGHTTP2_HEADERS && hd.stream_id > h->scan_max_id) {
        h->scan_max_id = hd.stream_id;
    }
    if (mk_h2_frame_on_closed(c, &hd, h->scan_have == 14 ? b + 9 : NULL)) {
        nghttp2_session_terminate_session(h->ng, h->conn_error);
        h->going_away = true;
        return MK_ERR;
    }
    return MK_OK;
}

/*
 * A frame header (9 bytes at p, all there) that mk_h2_frame_on_closed
 * would pass whatever the frames before it did: a frame that is neither
 * DATA nor HEADERS nor PRIORITY, or a HEADERS frame opening a stream
 * above every id seen so far (no stream is open or closed there). Then
 * true, with the frame's payload to be skipped: nghttp2 takes it with the
 * rest of the input, in one call.
 */
static bool mk_h2_frame_unchecked(struct mk_h2 *h, const char *p)
{
    const uint8_t *b = (const uint8_t *) p;
    uint8_t type = b[3];
    int32_t id =
        (int32_t) (((uint32_t) b[5] << 24 | (uint32_t) b[6] << 16 | (uint32_t) b[7] << 8 | b[8]) &
                   0x7fffffffu);

    if (type == NGHTTP2_DATA || type == NGHTTP2_PRIORITY) {
        return false;
    }
    if (type == NGHTTP2_HEADERS) {
        if (!(id & 1) || id <= h->scan_max_id || id <= h->max_opened) {
            return false;
        }
        h->scan_max_id = id;
    }
    h->scan_left = (uint32_t) b[0] << 16 | (uint32_t) b[1] << 8 | b[2];
    return true;
}

/*
 * Feed input to nghttp2 frame by frame: each frame header is checked
 * (mk_h2_frame_on_closed) against the state the frames before it left,
 * since nghttp2 drops some frames silently before any callback; a frame
 * the check cannot refuse (mk_h2_frame_unchecked) is not split off, so a
 * batch of requests goes to nghttp2 in one call. MK_OK
 * (after a connection error too: its GOAWAY is queued and no more input
 * is taken), or MK_ERR when the client did not even send the preface.
 */
static int mk_h2_feed(struct mk_conn *c, const char *data, size_t len)
{
    struct mk_h2 *h = c->h2;
    size_t i = 0, fed = 0;
    bool bad_magic;

    while (i < len && !h->conn_error) {
        if (h->preface_left) {
            size_t take = len - i < h->preface_left ? len - i : h->preface_left;
            h->preface_left -= (uint32_t) take;
            i += take;
            continue;
        }
        if (h->scan_have == 0 && h->scan_left) {
            size_t take = len - i < h->scan_left ? len - i : h->scan_left;
            h->scan_left -= (uint32_t) take;
            i += take;
            continue;
        }
        if (h->scan_have == 0 && len - i >= 9 && mk_h2_frame_unchecked(h, data + i)) {
            i += 9;
            continue;
        }
        if (h->scan_have == 0) {
            /* a new frame starts: nghttp2 takes everything before it first */
            mk_h2_recv(c, data + fed, i - fed);
            fed = i;
            if (h->conn_error) {
                break;
            }
        }
        h->scan_hd[h->scan_have++] = (uint8_t) data[i++];
        if (h->scan_have < 9) {
            continue;
        }
        if (h->scan_have == 9) {
            h->scan_left =
                (uint32_t) h->scan_hd[0] << 16 | (uint32_t) h->scan_hd[1] << 8 | h->scan_hd[2];
            if (h->scan_hd[3] == NGHTTP2_PRIORITY && h->scan_left == 5) {
                continue; /* its payload is read into scan_hd too */
            }
        }
        else if (--h->scan_left, h->scan_have < 14) {
            continue;
        }
        mk_h2_scan_frame(c);
        h->scan_have = 0;
    }
    if (!h->conn_error) {
        mk_h2_recv(c, data + fed, len - fed);
    }
    bad_magic = h->bad_magic;
    return bad_magic ? MK_ERR : MK_OK;
}

static void mk_h2_on_input(struct mk_conn *c)
{
    char buf[MK_H2_READ_SIZE];

    if (!c->h2 && mk_h2_session_new(c) != MK_OK) {
        mk_conn_close(c);
        return;
    }
    mk_h2_flush(c);
    if (c->state == MK_CONN_CLOSED) {
        return;
    }
    do {
        ssize_t n = mk_conn_read(c, buf, sizeof(buf));
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
            mk_conn_close(c);
            return;
        }
        if (n < 0) {
            break;
        }
        c->h2->progress = true;
        c->h2->read_at = c->worker->now_ms;
        if (mk_h2_feed(c, buf, (size_t) n) != MK_OK) {
            mk_conn_close(c);
            return;
        }
        mk_h2_flush(c);
        if (c->state == MK_CONN_CLOSED) {
            return;
        }
    } while (mk_conn_pending(c) > 0);
    mk_h2_after(c);
}

void mk_h2_start(struct mk_conn *c, const char *data, size_t len)
{
    c->proto = &mk_proto_h2;
    if (mk_h2_session_new(c) != MK_OK || mk_h2_feed(c, data, len) != MK_OK) {
        mk_conn_close(c);
        return;
    }
    mk_h2_flush(c);
    mk_h2_after(c);
}

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
static bool mk_h2_upgrade_stream(struct mk_h2_stream *s, const struct mk_http_head *head)
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

void mk_h2_start_upgrade(struct mk_conn *c, const struct mk_http_head *head,
                         const uint8_t *settings, size_t settings_len, const char *rest,
                         size_t rest_len)
{
    static const char switching[] = "HTTP/1.1 101 Switching Protocols\r\n"
                                    "Connection: Upgrade\r\nUpgrade: h2c\r\n\r\n";
    struct mk_h2_stream *s;

    c->proto = &mk_proto_h2;
    if (mk_h2_session_new(c) != MK_OK) {
        mk_conn_close(c);
        return;
    }
    /*
     * The 101 first; the server's SETTINGS (queued in nghttp2) follow it.
     * The answer on stream 1 waits for the client's preface: a client that
     * read more than the 101 and a SETTINGS frame in one go before switching
     * (curl's 32 KiB) would otherwise fail.
     */
    mk_h2_out_put(c->h2, switching, sizeof(switching) - 1);
    s = mk_h2_stream_new(c, 1);
    if (nghttp2_session_upgrade2(c->h2->ng, settings, settings_len, head->method == MK_METHOD_HEAD,
                                 s) != 0 ||
        !mk_h2_upgrade_stream(s, head)) {
        mk_conn_close(c);
        return;
    }
    c->h2->upgraded = s;
    if (rest_len && mk_h2_feed(c, rest, rest_len) != MK_OK) {
        mk_conn_close(c);
        return;
    }
    mk_h2_flush(c);
    mk_h2_after(c);
}

static void mk_h2_on_writable(struct mk_conn *c)
{
    mk_h2_on_input(c);
}

/*
 * The timeouts of one stream, when the connection's timer expires: act on
 * the ones due and return the stream's next deadline (UINT64_MAX: none).
 * Each is the stream's own: its siblings' progress does not put it off, and
 * the connection goes on. Not from inside nghttp2.
 *
 *   responding, SendTimeout without a byte of it going out:
 *     its window is shut: RST_STREAM CANCEL (the client does not take the
 *       response; CANCEL says the stream is no longer wanted, whereas
 *       NO_ERROR would pass a cut response for a complete one);
 *     its handler wrote nothing: RST_STREAM INTERNAL_ERROR (the server could
 *       not finish the response: as when its upstream fails mid-body);
 *     otherwise it waits its turn (the connection's window, the queue,
 *       priorities): the connection's own check covers that.
 *   Timeout without progress:
 *     parked (a plugin holds it): 503 (or its cancel callback's status), as
 *       with HTTP/1 (mk_request_expire_held);
 *     waiting for its body, no response begun: 408 (503 when its handler
 *       holds the bytes received: not the client's fault), then RST_STREAM
 *       NO_ERROR once the answer is out, so the client sends no more;
 *     answered, but the client never ended its body: RST_STREAM NO_ERROR
 *       (RFC 9113 section 8.1: the response is complete).
 */
static uint64_t mk_h2_stream_expire(struct mk_conn *c, struct mk_h2_stream *s, uint64_t now)
{
    const struct mk_config *cfg = c->worker->use.cfg;
    struct mk_request *r = s->r;
    uint64_t due;

    if (!r || s->closed || s->we_reset) {
        return UINT64_MAX; /* a header block (the connection's check), or closing */
    }
    if (s->responding) {
        /* SendMinRate: a client that keeps the stream's window shut, opening
           it a little now and then (WINDOW_UPDATE), must keep up the rate */
        if (cfg->send_min_rate &&
            nghttp2_session_get_stream_remote_window_size(c->h2->ng, s->id) <= 0) {
            if (!s->rate.since) {
                mk_send_rate_start(&s->rate, r->bytes_sent, now);
            }
            else if (mk_send_rate_short(&s->rate, r->bytes_sent, now, cfg->send_timeout_ms,
                                        cfg->send_min_rate)) {
                mk_h2_reset(c, s, NGHTTP2_CANCEL);
                return UINT64_MAX;
            }
        }
        else {
            mk_send_rate_stop(&s->rate);
        }
        uint64_t rate_due = mk_send_rate_due(&s->rate, cfg->send_timeout_ms, cfg->send_min_rate);
        due = s->since + cfg->send_timeout_ms;
        if (now < due) {
            return rate_due < due ? rate_due : due;
        }
        if (nghttp2_session_get_stream_remote_window_size(c->h2->ng, s->id) <= 0) {
            mk_h2_reset(c, s, NGHTTP2_CANCEL);
        }
        else if (r->body_type == MK_RESP_STREAM && (r->flags & MK_REQ_IDLE) &&
                 mk_h2_stream_avail(r) == 0) {
            mk_warn("a streamed response's handler wrote nothing within the SendTimeout");
            mk_h2_reset(c, s, NGHTTP2_INTERNAL_ERROR);
        }
        else {
            return now + cfg->send_timeout_ms;
        }
        return UINT64_MAX;
    }
    due = s->since + cfg->timeout_ms;
    if (now < due) {
        return due;
    }
    if (r->flags & MK_REQ_PARKED) {
        mk_request_expire_held(r);
    }
    else if (s->answered) {
        mk_h2_reset(c, s, NGHTTP2_NO_ERROR);
    }
    else if (s->body_wanted) {
        s->timed_out = true;
        mk_request_error(r, s->kept_len ? 503 : 408);
    }
    return UINT64_MAX;
}

/*
 * The timer. Idle (no stream): Http2IdleTimeout, GOAWAY and close. Busy:
 * the connection ends only when it is stuck as a whole (Timeout inside the
 * preface or a header block, SendTimeout with its output stalled: a client
 * that reads nothing or keeps the connection's window shut); otherwise each
 * stream's own timeouts apply (mk_h2_stream_expire) and the timer is armed
 * again for the nearest deadline.
 */
static void mk_h2_expire(struct mk_conn *c)
{
    struct mk_h2 *h = c->h2;
    const struct mk_config *cfg = c->worker->use.cfg;
    uint64_t now = c->worker->now_ms, next = UINT64_MAX;
    bool reading = h->preface_left || h->in_block || h->upgraded;
    bool stalled = mk_h2_out_stalled(h);
    struct mk_list *it, *tmp;

    if (c->timer == MK_TIMER_IDLE) {
        uint32_t timeout = cfg->h2_idle_timeout_ms;
        if (!h->trimmed) {
            mk_h2_idle_trim(h);
            h->trimmed = true;
            if (timeout > MK_H2_TRIM_MS) {
                mk_conn_timer_idle(c, timeout - MK_H2_TRIM_MS);
                return;
            }
        }
        mk_h2_goaway(c, NGHTTP2_NO_ERROR);
        mk_h2_flush(c);
        if (c->state != MK_CONN_CLOSED) {
            mk_conn_close(c);
        }
        return;
    }
    if ((reading && now - h->read_at >= cfg->timeout_ms) ||
        (stalled && now - h->out_since >= cfg->send_timeout_ms) ||
        (stalled && mk_send_rate_short(&h->out_rate, h->out_bytes, now, cfg->send_timeout_ms,
                                       cfg->send_min_rate))) {
        mk_h2_goaway(c, NGHTTP2_INTERNAL_ERROR);
        if (!stalled) {
            mk_h2_flush(c); /* a stalled client gets no more bytes */
        }
        if (c->state != MK_CONN_CLOSED) {
            mk_conn_close(c);
        }
        return;
    }
    if (h->draining && now - h->drain_at >= MK_H2_DRAIN_MS) {
        mk_h2_drain_end(c); /* the PING was not answered in time */
    }
    else if (h->draining) {
        next = h->drain_at + MK_H2_DRAIN_MS;
    }
    if (reading && h->read_at + cfg->timeout_ms < next) {
        next = h->read_at + cfg->timeout_ms;
    }
    if (stalled && h->out_since + cfg->send_timeout_ms < next) {
        next = h->out_since + cfg->send_timeout_ms;
    }
    if (stalled &&
        mk_send_rate_due(&h->out_rate, cfg->send_timeout_ms, cfg->send_min_rate) < next) {
        next = mk_send_rate_due(&h->out_rate, cfg->send_timeout_ms, cfg->send_min_rate);
    }
    h->busy = true; /* what the streams' answers write goes out once, below */
    mk_list_foreach_safe (it, tmp, &h->streams) {
        uint64_t due = mk_h2_stream_expire(c, mk_list_entry(it, struct mk_h2_stream, node), now);
        if (due < next) {
            next = due;
        }
    }
    h->busy = false;
    h->progress = true;
    mk_h2_flush(c);
    if (c->state == MK_CONN_CLOSED) {
        return;
    }
    mk_h2_timer_check(c, next == UINT64_MAX ? mk_h2_check_ms(cfg) : next - now);
    mk_h2_after(c);
}

/*
 * The final GOAWAY of a graceful shutdown, with the last stream taken:
 * streams up to it finish, later ones the client retries elsewhere.
 */
static void mk_h2_drain_end(struct mk_conn *c)
{
    c->h2->draining = false;
    mk_h2_goaway(c, NGHTTP2_NO_ERROR);
}

/*
 * The server stops, or its configuration was reloaded: a graceful shutdown
 * in two steps (RFC 9113 section 6.8). First the shutdown notice, a GOAWAY
 * with the last stream id 2^31-1 (nghttp2_submit_shutdown_notice), and a
 * PING; new streams are still taken meanwhile. When the PING's ACK comes,
 * a round trip later, every request the client sent before it saw the
 * notice has arrived: then the final GOAWAY names the last stream taken
 * (mk_h2_drain_end; also after MK_H2_DRAIN_MS if no ACK comes, as h2o
 * does). A single GOAWAY would refuse the requests already on their way.
 * The streams taken finish, then the connection closes; the client opens a
 * new one, which gets the configuration in force.
 */
static void mk_h2_go_away(struct mk_conn *c)
{
    struct mk_h2 *h = c->h2;
    uint64_t now = c->worker->now_ms;

    if (!h) {
        mk_conn_close(c);
        return;
    }
    if (!h->going_away && !h->draining) {
        if (nghttp2_submit_shutdown_notice(h->ng) == 0 &&
            nghttp2_submit_ping(h->ng, NGHTTP2_FLAG_NONE, mk_h2_drain_ping) == 0) {
            h->draining = true;
            h->drain_at = now;
            if (c->timer != MK_TIMER_READ || c->expiry.deadline > now + MK_H2_DRAIN_MS) {
                mk_h2_timer_check(c, MK_H2_DRAIN_MS);
            }
        }
        else {
            mk_h2_goaway(c, NGHTTP2_NO_ERROR);
        }
    }
    mk_h2_flush(c);
    mk_h2_after(c);
}

/* ---- request-level entries ------------------------------------------------------ */

static void mk_h2_read_body(struct mk_request *r)
{
    struct mk_h2_stream *s = r->proto_data;
    struct mk_conn *c = r->conn;

    if (!s || s->closed) {
        return;
    }
    if (s->body_end && s->kept_len == 0) {
        mk_request_body_ready(r);
        return;
    }
    s->body = mk_body_streaming(&r->bs) ? MK_H2_BODY_STREAM : MK_H2_BODY_BUFFER;
    s->body_wanted = true;
    if (r->head.flags & MK_HEAD_EXPECT_CONTINUE) {
        nghttp2_nv nv = {(uint8_t *) ":status", (uint8_t *) "100", 7, 3, NGHTTP2_NV_FLAG_NONE};
        nghttp2_submit_headers(c->h2->ng, NGHTTP2_FLAG_NONE, s->id, NULL, &nv, 1, NULL);
        r->flags |= MK_REQ_CONTINUE_SENT;
    }
    mk_h2_body_deliver(c, s);
    mk_h2_flush(c);
}

/* The stream waits for its plugin (Timeout from now); the connection goes on. */
static void mk_h2_park(struct mk_request *r)
{
    struct mk_h2_stream *s = r->proto_data;

    if (s) {
        s->since = r->conn->worker->now_ms;
    }
}

static void mk_h2_unpark(struct mk_request *r)
{
    mk_h2_park(r); /* its next wait starts now */
}

/* A resumed request was handled, or a streaming handler made room. */
static void mk_h2_proceed(struct mk_conn *c)
{
    struct mk_list *it, *tmp;

    if (!c->h2 || c->state == MK_CONN_CLOSED) {
        return;
    }
    mk_list_foreach_safe (it, tmp, &c->h2->streams) {
        struct mk_h2_stream *s = mk_list_entry(it, struct mk_h2_stream, node);
        if (s->body == MK_H2_BODY_STREAM && s->kept_len && s->r &&
            mk_body_stream_window_open(&s->r->bs)) {
            mk_h2_body_deliver(c, s);
        }
    }
    c->h2->progress = true;
    mk_h2_flush(c);
    mk_h2_after(c);
}

/* A hook failed: reset the stream; the others go on. */
static void mk_h2_abort(struct mk_request *r)
{
    struct mk_h2_stream *s = r->proto_data;
    struct mk_conn *c = r->conn;

    if (!s || s->closed) {
        return;
    }
    mk_h2_reset(c, s, NGHTTP2_INTERNAL_ERROR);
    mk_h2_flush(c);
}

/* A streamed response's handler queued bytes: let nghttp2 read them. */
static void mk_h2_wake(struct mk_request *r)
{
    struct mk_h2_stream *s = r->proto_data;
    struct mk_conn *c = r->conn;

    if (!s || s->closed) {
        return;
    }
    nghttp2_session_resume_data(c->h2->ng, s->id);
    mk_h2_flush(c);
    mk_h2_after(c);
}

const struct mk_proto mk_proto_h2 = {
    .name = "h2",
    .on_input = mk_h2_on_input,
    .on_writable = mk_h2_on_writable,
    .expire = mk_h2_expire,
    .go_away = mk_h2_go_away,
    .reload = mk_h2_go_away,
    .release = mk_h2_release,
    .respond = mk_h2_respond,
    .read_body = mk_h2_read_body,
    .park = mk_h2_park,
    .unpark = mk_h2_unpark,
    .proceed = mk_h2_proceed,
    .abort = mk_h2_abort,
    .wake = mk_h2_wake,
    .takeover = NULL,
};
