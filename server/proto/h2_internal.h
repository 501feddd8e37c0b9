/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * h2_internal.h: the state of an HTTP/2 connection (struct mk_h2, c->h2)
 * and of its streams (struct mk_h2_stream), and what the five files of the
 * HTTP/2 code give each other:
 *
 *   h2.c           the connection: the session, the input and the frames
 *                  checked before nghttp2 takes them, timers, the graceful
 *                  shutdown, the start, the protocol table's entries
 *   h2_stream.c    a stream as a request: header block, RFC 9113 checks,
 *                  body, the callbacks of a stream's frames
 *   h2_response.c  a response as HEADERS (and trailers)
 *   h2_send.c      the output queue, DATA frames, the writes
 *   h2_tunnel.c    a stream taken over after the 200 of an extended
 *                  CONNECT (RFC 8441: WebSocket over HTTP/2)
 *
 * Private to those files: the rest of the server reaches HTTP/2 through
 * mk_proto_h2 and h2.h. Everything runs on the connection's worker; the
 * state belongs to the connection (allocated when it starts speaking
 * HTTP/2, freed by proto->release: mk_h2_release).
 */
#ifndef MK_SERVER_H2_INTERNAL_H
#define MK_SERVER_H2_INTERNAL_H

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../core/list.h"
#include "../http/http.h"
#include "../http/send_rate.h"
#include "h2_mem.h"
#include "../conn/conn.h"

struct mk_piece;
struct mk_request;

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
    struct mk_h2_span protocol;  /* :protocol of an extended CONNECT (RFC 8441) */
    struct mk_h2_tunnel *tunnel; /* the plugin's once the 200 of that CONNECT is submitted */
    size_t fields_off;           /* where the first regular field begins */
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
    unsigned tunnel_due; /* tunnels with work for mk_h2_tunnel_settle (h2_tunnel.c) */
};

/* The opaque data of the PING that follows the shutdown notice (h2.c). */
extern const uint8_t mk_h2_drain_ping[8];

/* The open stream with this id, or NULL (the same as nghttp2's stream user data). */
static inline struct mk_h2_stream *mk_h2_stream_find(struct mk_h2 *h, int32_t id)
{
    struct mk_h2_stream *s = h->recent[((uint32_t) id >> 1) % MK_H2_RECENT];

    if (s && s->id == id) {
        return s;
    }
    return nghttp2_session_get_stream_user_data(h->ng, id);
}

/* Hand bytes the handler took back to the client's window of the stream. */
static inline void mk_h2_consume(struct mk_conn *c, struct mk_h2_stream *s, size_t n)
{
    if (n && !s->closed) {
        nghttp2_session_consume_stream(c->h2->ng, s->id, n);
        c->h2->flush_wanted = true;
    }
}

/* Reset s from this side (RST_STREAM with `error`); frames that crossed it are ignored. */
static inline void mk_h2_reset(struct mk_conn *c, struct mk_h2_stream *s, uint32_t error)
{
    s->we_reset = true;
    nghttp2_submit_rst_stream(c->h2->ng, NGHTTP2_FLAG_NONE, s->id, error);
}

/* ---- h2.c ---------------------------------------------------------------- */

/*
 * End the session with GOAWAY: the connection error a callback chose
 * (conn_error), else `error`. Not from inside nghttp2.
 */
void mk_h2_fail(struct mk_conn *c, uint32_t error);
/* A stream ended without a complete answer because of the client: counted
   against Http2UnansweredBurst/Rate (past them `calm` is set). */
void mk_h2_unanswered(struct mk_conn *c);
/* Have the connection's checks (mk_h2_expire) run within about `ms`: a deadline nearer
   than Timeout and SendTimeout (a tunnel's idle timeout, the drain). */
void mk_h2_timer_within(struct mk_conn *c, uint64_t ms);
/* The final GOAWAY of a graceful shutdown, with the last stream taken. */
void mk_h2_drain_end(struct mk_conn *c);

/* ---- h2_stream.c --------------------------------------------------------- */

/* A stream the client opened (id): counted, on the connection's list. Aborts
   when out of memory. */
struct mk_h2_stream *mk_h2_stream_new(struct mk_conn *c, int32_t id);
/* Free s, its request and its header block; s leaves its list. */
void mk_h2_stream_free(struct mk_conn *c, struct mk_h2_stream *s);
/* Stream 1 of an upgraded connection: the HTTP/1 head as its header block
   (false when out of memory). */
bool mk_h2_upgrade_stream(struct mk_h2_stream *s, const struct mk_http_head *head);
/* Keep body bytes of s until its handler (or its tunnel) takes them: false when out of memory. */
bool mk_h2_body_keep(struct mk_h2_stream *s, const uint8_t *data, size_t len);
/* Hand what s kept of its body to its handler, as far as the handler takes it. */
void mk_h2_body_deliver(struct mk_conn *c, struct mk_h2_stream *s);
/* nghttp2's callbacks of a stream's frames (mk_h2_callbacks_init registers them). */
int mk_h2_begin_headers_cb(nghttp2_session *ng, const nghttp2_frame *frame, void *user);
int mk_h2_header_cb(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name,
                    size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *user);
int mk_h2_data_cb(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                  void *user);
int mk_h2_frame_recv_cb(nghttp2_session *ng, const nghttp2_frame *frame, void *user);
int mk_h2_frame_send_cb(nghttp2_session *ng, const nghttp2_frame *frame, void *user);
int mk_h2_stream_close_cb(nghttp2_session *ng, int32_t id, uint32_t error, void *user);

/* ---- h2_response.c ------------------------------------------------------- */

/* proto->respond: r's response as HEADERS (and DATA), submitted, then written. */
void mk_h2_respond(struct mk_request *r, bool error);
/* proto.h's interim for HTTP/2: a 1xx HEADERS frame on r's stream. */
int mk_h2_interim(struct mk_request *r, int status, const char *fields, size_t len);
/* A streamed body's trailers (its last piece p) submitted on stream s. */
void mk_h2_submit_trailers(struct mk_conn *c, struct mk_h2_stream *s, struct mk_piece *p);

/* ---- h2_send.c ----------------------------------------------------------- */

/*
 * Let nghttp2 serialise what it has and write it, until the socket is
 * full, the budget is spent or nothing is left. From inside nghttp2
 * (`busy`) it only asks for a write (`flush_wanted`). May close c.
 */
void mk_h2_flush(struct mk_conn *c);
/* Append bytes to the output queue (data may already be where they go). */
void mk_h2_out_put(struct mk_h2 *h, const void *data, size_t len);
/* An idle connection (no stream, nothing queued) gives its queue's memory back. */
void mk_h2_idle_trim(struct mk_h2 *h);
/* Bytes a streamed body has queued, before its last (trailer) piece. */
size_t mk_h2_stream_avail(struct mk_request *r);
/* nghttp2's callbacks that write: frames into the queue, and a DATA frame's source. */
ssize_t mk_h2_send_cb(nghttp2_session *ng, const uint8_t *data, size_t len, int flags, void *user);
int mk_h2_send_data_cb(nghttp2_session *ng, nghttp2_frame *frame, const uint8_t *hd, size_t length,
                       nghttp2_data_source *src, void *user);
ssize_t mk_h2_read_cb(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                      nghttp2_data_source *src, void *user);

/* ---- h2_tunnel.c --------------------------------------------------------- */

/* proto->takeover: MK_OK when r is an extended CONNECT (RFC 8441) whose stream can carry a
   tunnel (the client has not ended it), else MK_ERR. */
int mk_h2_takeover(struct mk_request *r);
/* r's takeover (r->upgrade) becomes the tunnel of s, whose 200 was just submitted; the plugin's
   on_open runs, then what the client sent early. Not from inside nghttp2. */
void mk_h2_tunnel_open(struct mk_conn *c, struct mk_h2_stream *s, struct mk_request *r);
/* DATA of a tunnel stream: to the plugin, or kept (not consumed) while its output is full;
   0, or nghttp2's error to reset the stream (memory short). */
int mk_h2_tunnel_data(struct mk_conn *c, struct mk_h2_stream *s, const uint8_t *data, size_t len);
/* The client ended the tunnel's stream (END_STREAM), or it closed or was reset. */
void mk_h2_tunnel_peer_end(struct mk_conn *c, struct mk_h2_stream *s);
/* Our END_STREAM on the tunnel went out. */
void mk_h2_tunnel_sent_end(struct mk_conn *c, struct mk_h2_stream *s);
/* The DATA source of a tunnel stream (mk_h2_read_cb): bytes the plugin wrote, copied. */
ssize_t mk_h2_tunnel_read(struct mk_conn *c, struct mk_h2_stream *s, uint8_t *buf, size_t length,
                          uint32_t *flags);
/* The tunnel's idle timeout (mk_h2_stream_expire): its next deadline, UINT64_MAX once over. */
uint64_t mk_h2_tunnel_expire(struct mk_conn *c, struct mk_h2_stream *s, uint64_t now);
/* The server stops: reset every live tunnel (CANCEL). */
void mk_h2_tunnel_stop_all(struct mk_conn *c);
/* Run what the tunnels marked due (on_writable, input kept, on_close), outside nghttp2. */
void mk_h2_tunnel_settle(struct mk_conn *c);
/* The connection is released: no tunnel takes writes any more (their on_close follow). */
void mk_h2_tunnel_release_all(struct mk_conn *c);
/* The stream is freed: on_close if it did not run yet, then the tunnel is freed. */
void mk_h2_tunnel_free(struct mk_conn *c, struct mk_h2_stream *s);
/* Whether s carries a tunnel whose plugin side is still open. */
bool mk_h2_tunnel_live(const struct mk_h2_stream *s);

#endif
