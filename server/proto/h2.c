/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * h2.c: HTTP/2 on a connection (RFC 9113), behind the protocol table
 * (proto.h). nghttp2 parses frames, keeps HPACK state and flow-control
 * windows and schedules the streams (RFC 9218 priorities: the `priority`
 * header and PRIORITY_UPDATE; RFC 7540 priority frames are parsed and
 * ignored, SETTINGS_NO_RFC7540_PRIORITIES is sent). The HTTP/2 code
 * turns streams into requests and responses into frames
 * (SETTINGS_ENABLE_CONNECT_PROTOCOL is sent too: an extended CONNECT
 * becomes a tunnel for WebSocket, h2_tunnel.c):
 *
 *   HEADERS (+CONTINUATION) ──▶ a request head, built from the fields by
 *       mk_request_run_parts (mk_http_head_build: the rules of the HTTP/1
 *       parser, no text in between), version 20 ──▶ the same stages,
 *       plugins and static files as HTTP/1 (h2_stream.c)
 *   DATA ──▶ the stream's body: kept (within the stream's window) until a
 *       handler asks for it, then buffered or streamed (body.h); the
 *       stream's window opens again only as the handler takes the bytes
 *   respond ──▶ HEADERS, then DATA frames read without copying
 *       (NGHTTP2_DATA_FLAG_NO_COPY): a file body is queued as a file range
 *       and goes out with the transport's sendfile, memory and streamed
 *       bodies are copied once into the output queue; so are small files
 *       (pread) and, when the transport's sendfile copies anyway (TLS
 *       without kTLS), every file frame (h2_response.c, h2_send.c)
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
 * This file is the connection: the session and the table of its
 * callbacks, the input (each frame header checked before nghttp2 takes
 * the frame, the defences above), the connection's timer and the streams'
 * timeouts, the graceful shutdown, the start (the preface, or Upgrade:
 * h2c) and the protocol table's entries. h2_internal.h has the state and
 * the other files: h2_stream.c (a stream as a request), h2_response.c (a
 * response as HEADERS), h2_send.c (the output queue and the writes).
 *
 * Everything runs on the connection's worker. nghttp2 must not be
 * re-entered for sending from its own callbacks: `busy` marks those, and
 * a write asked for meanwhile (`flush_wanted`) happens when they return.
 */
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <monkey/mk_util.h>

#include "../../core/log.h"
#include "h2.h"
#include "h2_internal.h"
#include "h2_mem.h"
#include "../process/server.h"
#include "../conn/transport.h"

/* The opaque data of the PING that follows the shutdown notice. */
const uint8_t mk_h2_drain_ping[8] = {'m', 'k', '-', 'd', 'r', 'a', 'i', 'n'};

/* ---- frames checked before nghttp2 takes them ---------------------------- */

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
void mk_h2_unanswered(struct mk_conn *c)
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

/* ---- the session --------------------------------------------------------- */

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
    nghttp2_option_set_no_http_messaging(opt, 1); /* h2_stream.c checks requests itself */
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
        {NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1}, /* RFC 8441: h2_tunnel.c */
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
    mk_h2_tunnel_release_all(c); /* before any on_close: none writes to a sibling */
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

/* ---- the connection ------------------------------------------------------ */

/*
 * End the session with GOAWAY: the connection error a callback chose
 * (conn_error), else `error`; ENHANCE_YOUR_CALM is logged (the client
 * went over a limit). Not from inside nghttp2.
 */
void mk_h2_fail(struct mk_conn *c, uint32_t error)
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

void mk_h2_timer_within(struct mk_conn *c, uint64_t ms)
{
    uint64_t now = c->worker->now_ms;

    if (c->timer != MK_TIMER_READ || c->expiry.deadline > now + ms) {
        mk_h2_timer_check(c, ms);
    }
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
    if (h->tunnel_due) {
        mk_h2_tunnel_settle(c);
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
    if (h->seg_n || h->tunnel_due || nghttp2_session_want_write(h->ng)) {
        mask |= MK_EV_WRITE; /* a tunnel marked due while writing: settled next turn */
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
    if (mk_h2_tunnel_live(s)) {
        return mk_h2_tunnel_expire(c, s, now); /* its own idle timeout */
    }
    /* the stream's rule's Timeout and SendTimeout, else the server's */
    uint32_t read_ms = mk_request_timeout(r, false), send_ms = mk_request_timeout(r, true);
    read_ms = read_ms ? read_ms : cfg->timeout_ms;
    send_ms = send_ms ? send_ms : cfg->send_timeout_ms;
    if (s->responding) {
        /* SendMinRate: a client that keeps the stream's window shut, opening
           it a little now and then (WINDOW_UPDATE), must keep up the rate */
        if (cfg->send_min_rate &&
            nghttp2_session_get_stream_remote_window_size(c->h2->ng, s->id) <= 0) {
            if (!s->rate.since) {
                mk_send_rate_start(&s->rate, r->bytes_sent, now);
            }
            else if (mk_send_rate_short(&s->rate, r->bytes_sent, now, send_ms,
                                        cfg->send_min_rate)) {
                mk_h2_reset(c, s, NGHTTP2_CANCEL);
                return UINT64_MAX;
            }
        }
        else {
            mk_send_rate_stop(&s->rate);
        }
        uint64_t rate_due = mk_send_rate_due(&s->rate, send_ms, cfg->send_min_rate);
        due = s->since + send_ms;
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
            return now + send_ms;
        }
        return UINT64_MAX;
    }
    due = s->since + read_ms;
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
void mk_h2_drain_end(struct mk_conn *c)
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
    if (c->worker->stopping) {
        mk_h2_tunnel_stop_all(c); /* a tunnel never finishes by itself */
    }
    if (!h->going_away && !h->draining) {
        if (nghttp2_submit_shutdown_notice(h->ng) == 0 &&
            nghttp2_submit_ping(h->ng, NGHTTP2_FLAG_NONE, mk_h2_drain_ping) == 0) {
            h->draining = true;
            h->drain_at = now;
            mk_h2_timer_within(c, MK_H2_DRAIN_MS);
        }
        else {
            mk_h2_goaway(c, NGHTTP2_NO_ERROR);
        }
    }
    mk_h2_flush(c);
    mk_h2_after(c);
}

/* ---- request-level entries ----------------------------------------------- */

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

/*
 * r's rule gave it its own Timeout or SendTimeout (request_rules.c): the
 * connection's next check comes by the shorter of them, so that a value
 * below the server's is not waited for past it (mk_h2_stream_expire
 * counts each stream's own).
 */
static void mk_h2_timeouts(struct mk_request *r)
{
    uint32_t a = mk_request_timeout(r, false), b = mk_request_timeout(r, true);
    uint32_t ms = a && (!b || a < b) ? a : b;

    if (ms && r->conn->h2) {
        mk_h2_timer_within(r->conn, ms);
    }
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
    .takeover = mk_h2_takeover,
    .interim = mk_h2_interim,
    .timeouts = mk_h2_timeouts,
};
