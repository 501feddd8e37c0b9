/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * websocket.c: the websocket package (websocket.h, README.md). The opening
 * handshake on a route, then the connection as a websocket_t on the
 * socket Duda hands over after the 101 (response->takeover). Over HTTP/2
 * the handshake is an extended CONNECT (RFC 8441, request->protocol): no
 * key and no Upgrade, the answer is 200, and the socket is the stream.
 *
 * Frames are read by the pure reader of ws_proto.c; messages are
 * reassembled into one buffer bounded by max_message, inflated when
 * permessage-deflate is on (bounded too), checked for UTF-8 when text and
 * handed to on_message whole. Our own frame parser rather than wslay: the
 * bytes arrive pushed (on_read) through whatever transport the listener
 * has (TLS included) and leave through Duda's socket, whose queue and
 * back-pressure are the server's; wslay wants to pull and push through
 * its own callbacks and queue, has no permessage-deflate, and a pure
 * reader is what the fuzzer drives.
 *
 * Output: a frame goes to the socket at once; once the socket says it
 * holds 64 KiB (DUDA_AGAIN) later frames wait in our queue until
 * on_writable. That queue is bounded by send_queue: a client that lets it
 * grow past is dropped (close 1008, logged), so a slow reader costs at
 * most about send_queue + 64 KiB.
 *
 * Everything runs on the connection's worker.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/sha.h>
#include <zlib.h>

#include <duda/duda_package.h>
#include <monkey/mk_json.h>

#include "websocket.h"
#include "ws_proto.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define WS_DEFAULT_LIMIT (1u << 20)
#define WS_STACK_FRAME 16384 /* frames up to this size are built on the stack */
#define WS_KEEP_BUFFER 4096  /* a message buffer larger than this is freed after use */
#define WS_HOOKS 4

enum ws_state { WS_OPENING, WS_OPEN, WS_CLOSING, WS_CLOSED };

struct ws_piece {
    struct ws_piece *next;
    size_t len;
    uint8_t bytes[];
};

struct websocket {
    duda_socket_t *sock; /* NULL until on_open */
    const struct websocket_callbacks *cb;
    struct websocket_settings st;
    void *user;
    unsigned long id;
    int worker;
    enum ws_state state;
    bool blocked;     /* the socket said DUDA_AGAIN: frames wait in our queue */
    bool peer_closed; /* a close frame arrived */
    bool close_sent;  /* ours is written (or queued): nothing may follow it */
    bool shut;        /* close the socket once our queue is out */
    int peer_code;
    struct ws_reader rd;
    struct ws_head head; /* of the frame being read */
    uint8_t *msg;        /* the data message being reassembled */
    size_t msg_len, msg_cap;
    int msg_type;
    bool msg_deflated;
    uint8_t ctrl[125];
    struct ws_piece *q_head, *q_tail;
    size_t q_bytes;
    duda_timer_t *close_timer;
    bool close_drained;    /* data arrived (and was dropped) since the close timer was set */
    unsigned close_rounds; /* close timeouts waited on since then (WS_CLOSE_DRAIN_ROUNDS) */
    bool deflate, inf_ready, def_ready;
    struct ws_deflate_params dp;
    z_stream inf, def;
    struct {
        void (*fn)(websocket_t *ws, void *arg);
        void *arg;
    } hooks[WS_HOOKS];
    int n_hooks;
};

static atomic_ulong ws_next_id;

/* ---- output ------------------------------------------------------------------ */

static int ws_enqueue(websocket_t *ws, const uint8_t *bytes, size_t len)
{
    struct ws_piece *p = malloc(sizeof(*p) + len);
    if (!p) {
        return DUDA_ERR;
    }
    p->next = NULL;
    p->len = len;
    memcpy(p->bytes, bytes, len);
    if (ws->q_tail) {
        ws->q_tail->next = p;
    }
    else {
        ws->q_head = p;
    }
    ws->q_tail = p;
    ws->q_bytes += len;
    return DUDA_OK;
}

static void ws_queue_free(websocket_t *ws)
{
    while (ws->q_head) {
        struct ws_piece *next = ws->q_head->next;
        free(ws->q_head);
        ws->q_head = next;
    }
    ws->q_tail = NULL;
    ws->q_bytes = 0;
}

/* Hand the socket what waits, until it says it is full. */
static void ws_queue_flush(websocket_t *ws)
{
    while (ws->q_head && !ws->blocked) {
        struct ws_piece *p = ws->q_head;
        int rc = response->socket_write(ws->sock, p->bytes, p->len);
        if (rc == DUDA_ERR) {
            return;
        }
        ws->blocked = rc == DUDA_AGAIN;
        ws->q_head = p->next;
        if (!ws->q_head) {
            ws->q_tail = NULL;
        }
        ws->q_bytes -= p->len;
        free(p);
    }
}

/* Write bytes of whole frames: to the socket, or to our queue while it is full. */
static int ws_output(websocket_t *ws, const uint8_t *bytes, size_t len)
{
    if (!ws->sock || ws->blocked || ws->q_head) {
        return ws_enqueue(ws, bytes, len) == DUDA_OK ? DUDA_AGAIN : DUDA_ERR;
    }
    int rc = response->socket_write(ws->sock, bytes, len);
    if (rc == DUDA_AGAIN) {
        ws->blocked = true;
    }
    return rc;
}

/* Write one frame (head and payload in one piece). */
static int ws_frame(websocket_t *ws, uint8_t opcode, bool rsv1, const void *bytes, size_t len)
{
    uint8_t stack[WS_STACK_FRAME];
    uint8_t *buf = stack;
    uint8_t head[10];
    size_t hl = ws_proto_head_write(head, true, rsv1, opcode, len);

    if (hl + len > sizeof(stack)) {
        buf = malloc(hl + len);
        if (!buf) {
            return DUDA_ERR;
        }
    }
    memcpy(buf, head, hl);
    if (len) {
        memcpy(buf + hl, bytes, len);
    }
    int rc = ws_output(ws, buf, hl + len);
    if (buf != stack) {
        free(buf);
    }
    return rc;
}

/* A close frame with `code` (0: none) and a reason cut to fit. */
static void ws_close_frame(websocket_t *ws, int code, const char *reason)
{
    uint8_t p[125];
    size_t n = 0;

    if (ws->close_sent) {
        return;
    }
    ws->close_sent = true;
    if (code) {
        p[0] = (uint8_t) (code >> 8);
        p[1] = (uint8_t) code;
        n = 2;
        size_t rl = reason ? strlen(reason) : 0;
        if (rl > sizeof(p) - 2) {
            rl = sizeof(p) - 2;
        }
        if (rl) {
            memcpy(p + 2, reason, rl); /* reason may be NULL: memcpy must not see it */
        }
        n += rl;
    }
    ws_frame(ws, WS_OP_CLOSE, false, p, n);
}

/* Close the socket once our last frame is out of our queue (on_close follows). */
static void ws_shutdown(websocket_t *ws)
{
    ws->state = WS_CLOSED;
    ws->shut = true;
    if (ws->sock) {
        ws_queue_flush(ws);
        if (!ws->q_head) {
            response->socket_close(ws->sock);
        }
    }
}

/* Drop the message being reassembled and its buffer. */
static void ws_msg_release_all(websocket_t *ws)
{
    free(ws->msg);
    ws->msg = NULL;
    ws->msg_len = ws->msg_cap = 0;
}

/* Fail the connection: close frame with `code`, on_error, close. */
static void ws_fail(websocket_t *ws, int code, const char *reason)
{
    if (ws->state == WS_CLOSED) {
        return;
    }
    if (code == WS_CLOSE_POLICY || code == WS_CLOSE_TOO_BIG || code == WS_CLOSE_INTERNAL) {
        console->debug(NULL, "websocket %lu (%s): closed with %d: %s", ws->id,
                       ws->sock ? response->socket_remote_addr(ws->sock) : "-", code, reason);
    }
    ws_close_frame(ws, code, reason);
    if (ws->cb->on_error) {
        ws->cb->on_error(ws, code, reason);
    }
    ws_shutdown(ws);
}

static void ws_close_timeout(duda_request_t *dr, void *arg);

/*
 * A client still sending what it sent before our close frame (a refused big
 * message) cannot answer it yet: each close timeout in which such data kept
 * coming waits one more, up to this many, before the connection is cut.
 */
#define WS_CLOSE_DRAIN_ROUNDS 8

/*
 * Too big: close frame 1009 and on_error, then a closing handshake rather
 * than a reset, since the client may still be sending what we refuse:
 * its data is read and dropped until its close frame, or the close timeout.
 */
static void ws_refuse_big(websocket_t *ws, const char *reason)
{
    if (ws->state != WS_OPEN) {
        ws_fail(ws, WS_CLOSE_TOO_BIG, reason);
        return;
    }
    console->debug(NULL, "websocket %lu (%s): closed with %d: %s", ws->id,
                   ws->sock ? response->socket_remote_addr(ws->sock) : "-", WS_CLOSE_TOO_BIG,
                   reason);
    ws_close_frame(ws, WS_CLOSE_TOO_BIG, reason);
    ws->state = WS_CLOSING;
    ws_msg_release_all(ws);
    if (ws->cb->on_error) {
        ws->cb->on_error(ws, WS_CLOSE_TOO_BIG, reason);
    }
    ws->close_timer = event->timer_add(NULL, ws->st.close_timeout_ms, 0, ws_close_timeout, ws);
    if (!ws->close_timer) {
        ws_shutdown(ws);
    }
}

/* ---- permessage-deflate ------------------------------------------------------------ */

static int ws_deflate_msg(websocket_t *ws, const void *bytes, size_t len, uint8_t **out,
                          size_t *out_len)
{
    if (!ws->def_ready) {
        int bits = ws->dp.server_max_window_bits ? ws->dp.server_max_window_bits : 15;
        if (deflateInit2(&ws->def, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -bits, 8,
                         Z_DEFAULT_STRATEGY) != Z_OK) {
            return -1;
        }
        ws->def_ready = true;
    }
    size_t cap = deflateBound(&ws->def, len) + 16;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        return -1;
    }
    ws->def.next_in = (Bytef *) (uintptr_t) bytes;
    ws->def.avail_in = (uInt) len;
    ws->def.next_out = buf;
    ws->def.avail_out = (uInt) cap;
    if (deflate(&ws->def, Z_SYNC_FLUSH) != Z_OK || ws->def.avail_in) {
        free(buf);
        return -1;
    }
    size_t n = cap - ws->def.avail_out;
    if (n >= 4) {
        n -= 4; /* the 00 00 ff ff of the flush: RFC 7692 7.2.1 */
    }
    if (ws->dp.server_no_context_takeover) {
        deflateReset(&ws->def);
    }
    *out = buf;
    *out_len = n;
    return 0;
}

/* Inflate the message in ws->msg into a new buffer bounded by max_message: 0 or a close code. */
static int ws_inflate_msg(websocket_t *ws, uint8_t **out, size_t *out_len)
{
    static const uint8_t tail[4] = {0x00, 0x00, 0xff, 0xff};
    size_t cap = ws->msg_len * 3 + 64, n = 0;

    if (!ws->inf_ready) {
        if (inflateInit2(&ws->inf, -15) != Z_OK) {
            return WS_CLOSE_INTERNAL;
        }
        ws->inf_ready = true;
    }
    if (cap > ws->st.max_message + 1) {
        cap = ws->st.max_message + 1;
    }
    uint8_t *buf = malloc(cap);
    if (!buf) {
        return WS_CLOSE_INTERNAL;
    }
    for (int part = 0; part < 2; part++) {
        ws->inf.next_in = part ? (Bytef *) (uintptr_t) tail : ws->msg;
        ws->inf.avail_in = part ? 4 : (uInt) ws->msg_len;
        for (;;) {
            if (n == cap) {
                if (cap > ws->st.max_message) {
                    free(buf);
                    return WS_CLOSE_TOO_BIG;
                }
                size_t ncap = cap * 2 > ws->st.max_message + 1 ? ws->st.max_message + 1 : cap * 2;
                uint8_t *nb = realloc(buf, ncap);
                if (!nb) {
                    free(buf);
                    return WS_CLOSE_INTERNAL;
                }
                buf = nb;
                cap = ncap;
            }
            ws->inf.next_out = buf + n;
            ws->inf.avail_out = (uInt) (cap - n);
            int rc = inflate(&ws->inf, Z_SYNC_FLUSH);
            n = cap - ws->inf.avail_out;
            if (rc == Z_STREAM_END) {
                inflateReset(&ws->inf); /* a final block: the next bytes start afresh */
                if (!ws->inf.avail_in) {
                    break;
                }
                continue;
            }
            if (rc != Z_OK && rc != Z_BUF_ERROR) {
                free(buf);
                return WS_CLOSE_INVALID_DATA;
            }
            if (n < cap && (ws->inf.avail_in == 0 || rc == Z_BUF_ERROR)) {
                break; /* all taken, and room was left: nothing pending */
            }
        }
    }
    if (n > ws->st.max_message) {
        free(buf);
        return WS_CLOSE_TOO_BIG;
    }
    if (ws->dp.client_no_context_takeover) {
        inflateReset(&ws->inf);
    }
    *out = buf;
    *out_len = n;
    return 0;
}

/* ---- input ------------------------------------------------------------------- */

static void ws_msg_release(websocket_t *ws)
{
    ws->msg_len = 0;
    if (ws->msg_cap > WS_KEEP_BUFFER) {
        free(ws->msg);
        ws->msg = NULL;
        ws->msg_cap = 0;
    }
}

/* A whole data message arrived. */
static void ws_message(websocket_t *ws)
{
    uint8_t *bytes = ws->msg, *inflated = NULL;
    size_t len = ws->msg_len;

    if (ws->msg_deflated) {
        int rc = ws_inflate_msg(ws, &inflated, &len);
        if (rc) {
            if (rc == WS_CLOSE_TOO_BIG) {
                ws_refuse_big(ws, "message too big");
            }
            else {
                ws_fail(ws, rc, "bad compressed data");
            }
            return;
        }
        bytes = inflated;
    }
    if (ws->msg_type == WS_OP_TEXT && !mk_utf8_valid(bytes, len)) {
        free(inflated);
        ws_fail(ws, WS_CLOSE_INVALID_DATA, "text is not UTF-8");
        return;
    }
    if (ws->cb->on_message) {
        ws->cb->on_message(ws, ws->msg_type, bytes ? (const void *) bytes : "", len);
    }
    free(inflated);
    ws_msg_release(ws);
}

static void ws_control(websocket_t *ws, const uint8_t *p, size_t len)
{
    if (ws->head.opcode == WS_OP_PING) {
        if (ws->state == WS_OPEN) {
            ws_frame(ws, WS_OP_PONG, false, p, len);
        }
        if (ws->cb->on_ping) {
            ws->cb->on_ping(ws, p, len);
        }
        return;
    }
    if (ws->head.opcode == WS_OP_PONG) {
        if (ws->cb->on_pong) {
            ws->cb->on_pong(ws, p, len);
        }
        return;
    }
    int code = ws_proto_close_payload_check(p, len);
    if (code < 0) {
        ws_fail(ws, -code,
                code == -WS_CLOSE_INVALID_DATA ? "close reason is not UTF-8" : "bad close frame");
        return;
    }
    ws->peer_closed = true;
    ws->peer_code = code;
    if (ws->state == WS_OPEN) {
        ws_close_frame(ws, code == WS_CLOSE_NO_STATUS ? 0 : code, NULL);
    }
    ws_shutdown(ws);
}

/* A frame's head: prepare where its payload goes. 0, or -1 when the connection failed. */
static int ws_on_head(websocket_t *ws, const struct ws_head *h)
{
    ws->head = *h;
    if ((h->opcode & 0x8) || ws->state != WS_OPEN) {
        return 0; /* closing: data frames are read and dropped */
    }
    if (h->opcode != WS_OP_CONT) {
        ws->msg_type = h->opcode;
        ws->msg_deflated = h->rsv1;
        ws->msg_len = 0;
    }
    if (h->len > ws->st.max_message - ws->msg_len) {
        ws_refuse_big(ws, "message too big");
        return 0;
    }
    size_t need = ws->msg_len + (size_t) h->len;
    if (need > ws->msg_cap) {
        size_t cap = ws->msg_cap ? ws->msg_cap : 256;
        while (cap < need) {
            cap *= 2;
        }
        uint8_t *m = realloc(ws->msg, cap);
        if (!m) {
            ws_fail(ws, WS_CLOSE_INTERNAL, "out of memory");
            return -1;
        }
        ws->msg = m;
        ws->msg_cap = cap;
    }
    return 0;
}

static void ws_on_data(websocket_t *ws, const struct ws_chunk *ev)
{
    const struct ws_head *h = &ws->head;

    if (h->opcode & 0x8) {
        ws_proto_unmask(ws->ctrl + ev->offset, ev->data, ev->len, h->mask, ev->offset);
        if (ev->end) {
            ws_control(ws, ws->ctrl, (size_t) h->len);
        }
        return;
    }
    if (ws->state != WS_OPEN) {
        ws->close_drained = true;
        return; /* closing: dropped */
    }
    if (ev->len) {
        ws_proto_unmask(ws->msg + ws->msg_len + ev->offset, ev->data, ev->len, h->mask, ev->offset);
    }
    if (ev->end) {
        ws->msg_len += (size_t) h->len;
        if (h->fin) {
            ws_message(ws);
        }
    }
}

static void ws_sock_read(duda_socket_t *s, const void *bytes, size_t len, void *arg)
{
    websocket_t *ws = arg;
    const uint8_t *in = bytes;
    size_t off = 0;

    (void) s;
    while (ws->state == WS_OPEN || ws->state == WS_CLOSING) {
        size_t used;
        struct ws_chunk ev;
        int rc = ws_proto_read(&ws->rd, in + off, len - off, &used, &ev);
        off += used;
        if (rc < 0) {
            if (rc != -WS_CLOSE_TOO_BIG) {
                ws_fail(ws, -rc, "protocol error");
                return;
            }
            ws_proto_read_skip(&ws->rd);
            ws->head = ws->rd.head;
            ws_refuse_big(ws, "frame too big");
            continue;
        }
        if (rc == WS_EV_NEED) {
            return;
        }
        if (rc == WS_EV_HEAD) {
            if (ws_on_head(ws, &ev.head) != 0) {
                return;
            }
            continue;
        }
        ws_on_data(ws, &ev);
    }
}

/* ---- the socket's life ---------------------------------------------------------- */

static void ws_sock_open(duda_socket_t *s, void *arg)
{
    websocket_t *ws = arg;

    ws->sock = s;
    ws->worker = worker->id();
    ws->state = WS_OPEN;
    if (ws->cb->on_open) {
        ws->cb->on_open(ws);
    }
    ws_queue_flush(ws);
}

static void ws_sock_writable(duda_socket_t *s, void *arg)
{
    websocket_t *ws = arg;

    (void) s;
    ws->blocked = false;
    ws_queue_flush(ws);
    if (ws->shut && !ws->q_head) {
        response->socket_close(ws->sock);
    }
}

static void ws_free(websocket_t *ws)
{
    ws_queue_free(ws);
    free(ws->msg);
    if (ws->inf_ready) {
        inflateEnd(&ws->inf);
    }
    if (ws->def_ready) {
        deflateEnd(&ws->def);
    }
    free(ws);
}

static void ws_sock_close(duda_socket_t *s, void *arg)
{
    websocket_t *ws = arg;

    (void) s;
    ws->state = WS_CLOSED;
    if (ws->close_timer) {
        event->timer_del(ws->close_timer);
        ws->close_timer = NULL;
    }
    for (int i = ws->n_hooks - 1; i >= 0; i--) {
        ws->hooks[i].fn(ws, ws->hooks[i].arg);
    }
    if (ws->cb->on_close) {
        ws->cb->on_close(ws, ws->peer_closed ? ws->peer_code : 1006);
    }
    ws->sock = NULL;
    ws_free(ws);
}

static const struct duda_socket_ops ws_sock_ops = {
    .on_open = ws_sock_open,
    .on_read = ws_sock_read,
    .on_writable = ws_sock_writable,
    .on_close = ws_sock_close,
};

/* ---- the handshake ---------------------------------------------------------------- */

static void ws_refuse(duda_request_t *dr, int status, const char *why)
{
    response->http_status(dr, status);
    if (status == 426) {
        response->http_header(dr, "Sec-WebSocket-Version", "13");
    }
    response->http_content_type(dr, "text/plain");
    response->printf(dr, "%s\n", why);
    response->end(dr, NULL);
}

/* Sec-WebSocket-Accept for `key` into out (29 bytes). */
static void ws_accept_key(const char *key, char *out)
{
    unsigned char digest[SHA_DIGEST_LENGTH];
    char in[64];
    int n = snprintf(in, sizeof(in), "%s%s", key, WS_GUID);

    SHA1((const unsigned char *) in, (size_t) n, digest);
    EVP_EncodeBlock((unsigned char *) out, digest, SHA_DIGEST_LENGTH);
}

static void ws_settings(struct websocket_settings *st, const struct websocket_settings *in)
{
    if (in) {
        *st = *in;
    }
    else {
        memset(st, 0, sizeof(*st));
    }
    st->max_frame = st->max_frame ? st->max_frame : WS_DEFAULT_LIMIT;
    st->max_message = st->max_message ? st->max_message : WS_DEFAULT_LIMIT;
    st->send_queue = st->send_queue ? st->send_queue : WS_DEFAULT_LIMIT;
    st->idle_timeout_ms = st->idle_timeout_ms ? st->idle_timeout_ms : 60000;
    st->close_timeout_ms = st->close_timeout_ms ? st->close_timeout_ms : 5000;
}

/*
 * The :protocol of an HTTP/2 extended CONNECT (RFC 8441), NULL for an
 * HTTP/1.1 request (or a plugin older than service ABI 1.4).
 */
static const char *ws_h2_protocol(duda_request_t *dr)
{
    return DUDA_HAS(request, protocol) ? request->protocol(dr) : NULL;
}

static websocket_t *ws_handshake(duda_request_t *dr, const struct websocket_callbacks *cb,
                                 const struct websocket_settings *settings, void *user)
{
    static const struct websocket_callbacks none;
    const char *h2 = ws_h2_protocol(dr);
    const char *up = request->header_get(dr, "Upgrade");
    const char *conn = request->header_get(dr, "Connection");
    const char *key = request->header_get(dr, "Sec-WebSocket-Key");
    const char *version = request->header_get(dr, "Sec-WebSocket-Version");

    if (h2) {
        /* RFC 8441 section 5: the extended CONNECT replaces Upgrade and the key */
        if (strcmp(h2, "websocket") != 0) {
            ws_refuse(dr, 400, "an extended CONNECT for another protocol than websocket");
            return NULL;
        }
    }
    else if (!request->is_get(dr) || !up || !ws_proto_token_in_list(up, strlen(up), "websocket") ||
             !conn || !ws_proto_token_in_list(conn, strlen(conn), "upgrade")) {
        ws_refuse(dr, 400,
                  "a WebSocket handshake needs GET, Upgrade: websocket and "
                  "Connection: Upgrade");
        return NULL;
    }
    if (!version || strcmp(version, "13") != 0) {
        ws_refuse(dr, 426, "WebSocket version 13 only");
        return NULL;
    }
    if (!h2 && (!key || !ws_proto_key_valid(key, strlen(key)))) {
        ws_refuse(dr, 400, "bad Sec-WebSocket-Key");
        return NULL;
    }
    websocket_t *ws = calloc(1, sizeof(*ws));
    if (!ws) {
        ws_refuse(dr, 503, "out of memory");
        return NULL;
    }
    ws->cb = cb ? cb : &none;
    ws->user = user;
    ws->id = atomic_fetch_add(&ws_next_id, 1) + 1;
    ws->worker = -1;
    ws_settings(&ws->st, settings);
    ws->rd.max_frame = ws->st.max_frame;
    const char *ext = request->header_get(dr, "Sec-WebSocket-Extensions");
    if (ws->st.deflate && ext && ws_proto_deflate_offer(ext, strlen(ext), &ws->dp)) {
        ws->deflate = true;
        ws->rd.deflate = true;
    }
    if (response->takeover(dr, &ws_sock_ops, ws, ws->st.idle_timeout_ms) != 0) {
        free(ws);
        ws_refuse(dr, 400, "this request cannot switch protocols (HTTP/1.1 without a body only)");
        return NULL;
    }
    /* From here on ws is freed by the socket's on_close, which always follows. */
    char accept[32], extv[128];
    if (!h2) {
        ws_accept_key(key, accept);
        response->http_header(dr, "Upgrade", "websocket");
        response->http_header(dr, "Connection", "Upgrade");
        response->http_header(dr, "Sec-WebSocket-Accept", accept);
    }
    if (ws->deflate) {
        ws_proto_deflate_response(&ws->dp, extv, sizeof(extv));
        response->http_header(dr, "Sec-WebSocket-Extensions", extv);
    }
    response->end(dr, NULL);
    return ws;
}

/* ---- the API ------------------------------------------------------------------- */

static int ws_send(websocket_t *ws, int type, const void *bytes, size_t len)
{
    if (!ws || (type != WEBSOCKET_TEXT && type != WEBSOCKET_BINARY) ||
        (ws->state != WS_OPEN && ws->state != WS_OPENING)) {
        return DUDA_ERR;
    }
    int rc;
    if (ws->deflate && len > 0) {
        uint8_t *z;
        size_t zlen;
        if (ws_deflate_msg(ws, bytes, len, &z, &zlen) != 0) {
            ws_fail(ws, WS_CLOSE_INTERNAL, "deflate failed");
            return DUDA_ERR;
        }
        rc = ws_frame(ws, (uint8_t) type, true, z, zlen);
        free(z);
    }
    else {
        rc = ws_frame(ws, (uint8_t) type, false, bytes, len);
    }
    if (rc == DUDA_ERR) {
        return DUDA_ERR;
    }
    if (ws->q_bytes > ws->st.send_queue) {
        /* The client does not read: drop what waits and it. */
        char why[96];
        snprintf(why, sizeof(why), "send queue over %zu bytes (slow reader)", ws->st.send_queue);
        ws_queue_free(ws);
        ws_fail(ws, WS_CLOSE_POLICY, why);
        return DUDA_ERR;
    }
    return rc;
}

static int ws_send_text(websocket_t *ws, const char *text)
{
    return text ? ws_send(ws, WEBSOCKET_TEXT, text, strlen(text)) : DUDA_ERR;
}

static int ws_ping(websocket_t *ws, const void *bytes, size_t len)
{
    if (!ws || ws->state != WS_OPEN || len > 125) {
        return DUDA_ERR;
    }
    return ws_frame(ws, WS_OP_PING, false, bytes, len);
}

static void ws_close_timeout(duda_request_t *dr, void *arg)
{
    websocket_t *ws = arg;

    (void) dr;
    ws->close_timer = NULL;
    if (ws->close_drained && ws->close_rounds < WS_CLOSE_DRAIN_ROUNDS) {
        ws->close_drained = false;
        ws->close_rounds++;
        ws->close_timer = event->timer_add(NULL, ws->st.close_timeout_ms, 0, ws_close_timeout, ws);
        if (ws->close_timer) {
            return;
        }
    }
    ws_shutdown(ws);
}

static int ws_close(websocket_t *ws, int code, const char *reason)
{
    if (!ws || ws->state != WS_OPEN || !ws_proto_close_code_valid((unsigned) code) ||
        (reason && (strlen(reason) > 123 || !mk_utf8_valid(reason, strlen(reason))))) {
        return -1;
    }
    ws_close_frame(ws, code, reason);
    ws->state = WS_CLOSING;
    ws->close_timer = event->timer_add(NULL, ws->st.close_timeout_ms, 0, ws_close_timeout, ws);
    if (!ws->close_timer) {
        ws_shutdown(ws);
    }
    return 0;
}

static void *ws_user(websocket_t *ws)
{
    return ws ? ws->user : NULL;
}

static void ws_set_user(websocket_t *ws, void *user)
{
    if (ws) {
        ws->user = user;
    }
}

static int ws_worker(websocket_t *ws)
{
    return ws ? ws->worker : -1;
}

static unsigned long ws_id(websocket_t *ws)
{
    return ws ? ws->id : 0;
}

static const char *ws_remote_addr(websocket_t *ws)
{
    return ws && ws->sock ? response->socket_remote_addr(ws->sock) : NULL;
}

static size_t ws_queued(websocket_t *ws)
{
    return ws ? ws->q_bytes : 0;
}

static int ws_deflated(websocket_t *ws)
{
    return ws && ws->deflate;
}

static int ws_on_close_hook(websocket_t *ws, void (*fn)(websocket_t *ws, void *arg), void *arg)
{
    if (!ws || !fn || ws->n_hooks == WS_HOOKS) {
        return -1;
    }
    ws->hooks[ws->n_hooks].fn = fn;
    ws->hooks[ws->n_hooks].arg = arg;
    ws->n_hooks++;
    return 0;
}

static int ws_init(const struct duda_api *api)
{
    (void) api;
    if (!DUDA_HAS(response, takeover) || !DUDA_HAS(worker, call)) {
        return -1; /* a plugin older than service ABI 1.1 */
    }
    return 0;
}

static const struct duda_websocket_api ws_api = {
    .size = sizeof(struct duda_websocket_api),
    .handshake = ws_handshake,
    .send = ws_send,
    .send_text = ws_send_text,
    .ping = ws_ping,
    .close = ws_close,
    .user = ws_user,
    .set_user = ws_set_user,
    .worker = ws_worker,
    .id = ws_id,
    .remote_addr = ws_remote_addr,
    .queued = ws_queued,
    .deflated = ws_deflated,
    .on_close_hook = ws_on_close_hook,
};

DUDA_PACKAGE("websocket", "1.0", &ws_api, ws_init, NULL);
