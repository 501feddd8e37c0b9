/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * ws_proto.h: the WebSocket protocol (RFC 6455) and the permessage-deflate
 * offer (RFC 7692) as pure functions: no I/O, no allocation, no globals.
 * The websocket package (websocket.c) feeds them what a connection reads;
 * tests/unit/duda/test_ws_proto.c and tests/fuzz/fuzz_ws.c drive them with
 * bytes.
 *
 * The reader takes a client's bytes in pieces of any size and reports one
 * event at a time: a frame's head (checked against the rules a server
 * applies to a client: masked, known opcodes, control frames short and
 * whole, no reserved bit but RSV1 on the first frame of a compressed
 * message, fragments in order, the frame size limit), then its payload as
 * views into the input (still masked: ws_proto_unmask() copies them out).
 * A violation is returned as the close code the server then sends:
 * 1002 (protocol error) or 1009 (too big).
 */
#ifndef DUDA_WS_PROTO_H
#define DUDA_WS_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Opcodes. */
#define WS_OP_CONT 0x0
#define WS_OP_TEXT 0x1
#define WS_OP_BINARY 0x2
#define WS_OP_CLOSE 0x8
#define WS_OP_PING 0x9
#define WS_OP_PONG 0xa

/* Close codes (RFC 6455 7.4.1). */
#define WS_CLOSE_NORMAL 1000
#define WS_CLOSE_GOING_AWAY 1001
#define WS_CLOSE_PROTOCOL 1002
#define WS_CLOSE_NO_STATUS 1005 /* never sent: a close frame without a code */
#define WS_CLOSE_INVALID_DATA 1007
#define WS_CLOSE_POLICY 1008
#define WS_CLOSE_TOO_BIG 1009
#define WS_CLOSE_INTERNAL 1011
#define WS_CLOSE_TRY_LATER 1013

#define WS_HEAD_MAX 14 /* 2 + 8 bytes of length + 4 of mask */

/* A frame's head. */
struct ws_head {
    bool fin, rsv1, masked;
    uint8_t opcode;
    uint8_t mask[4];
    uint64_t len; /* payload bytes */
};

/* Events of ws_proto_read(). */
enum ws_event {
    WS_EV_NEED = 0, /* every byte was used: read more */
    WS_EV_HEAD,     /* a frame's head, in ev->head */
    WS_EV_DATA,     /* payload bytes: ev->data, ev->len, at ev->offset in the frame; ev->end */
};

struct ws_chunk {
    struct ws_head head;
    const uint8_t *data; /* inside the input, masked */
    size_t len;
    uint64_t offset; /* of data in the frame's payload (for the mask) */
    bool end;        /* the frame's last payload bytes (also for an empty payload) */
};

/* The reader of one connection. Zero it, then set the two settings. */
struct ws_reader {
    uint64_t max_frame; /* payload bytes of a frame past which 1009 (0: no limit) */
    bool deflate;       /* permessage-deflate was negotiated: RSV1 allowed */
    /* state */
    uint8_t buf[WS_HEAD_MAX];
    uint8_t buf_len;
    bool in_payload, data_sent;
    struct ws_head head;
    uint64_t got;
    bool in_message; /* a fragmented data message is open */
};

/*
 * Take bytes from `in` (len of them) until one event: returns the event
 * (WS_EV_NEED once everything was used) with *used bytes of `in`
 * consumed, or a negative close code (-1002, -1009) for a frame a server
 * must refuse; the reader must not be used after an error (but see
 * ws_proto_read_skip() for -1009).
 */
int ws_proto_read(struct ws_reader *r, const uint8_t *in, size_t len, size_t *used,
                  struct ws_chunk *ev);

/*
 * After -1009 (a frame past max_frame): go on past that frame, whose
 * payload is then reported as WS_EV_DATA events for the caller to drop,
 * so that a server can answer a frame too big with a closing handshake
 * instead of resetting a client that is still sending it.
 */
void ws_proto_read_skip(struct ws_reader *r);

/* Copy len payload bytes unmasked: `offset` is their place in the frame's payload. */
void ws_proto_unmask(uint8_t *dst, const uint8_t *src, size_t len, const uint8_t mask[4],
                     uint64_t offset);

/* Write a server frame's head (never masked) into out (10 bytes): its length. */
size_t ws_proto_head_write(uint8_t *out, bool fin, bool rsv1, uint8_t opcode, uint64_t len);

/*
 * A close frame's payload as received: WS_CLOSE_NO_STATUS for an empty
 * one, the code in it when it is one a peer may send, or -1002 (a payload
 * of one byte, a code that may not be sent) or -1007 (a reason that is not
 * UTF-8).
 */
int ws_proto_close_payload_check(const uint8_t *p, size_t len);

/* Whether a close code may be sent by a peer (1000-1003, 1007-1014, 3000-4999). */
bool ws_proto_close_code_valid(unsigned code);

/* Whether the comma-separated list `list` (len bytes) has `token` (no case). */
bool ws_proto_token_in_list(const char *list, size_t len, const char *token);

/* Whether `key` is a Sec-WebSocket-Key: 16 bytes in base64 (24 characters). */
bool ws_proto_key_valid(const char *key, size_t len);

/* The permessage-deflate parameters the server accepted. */
struct ws_deflate_params {
    bool server_no_context_takeover;
    bool client_no_context_takeover;
    uint8_t server_max_window_bits; /* 9..15: the window of our deflate */
    uint8_t client_max_window_bits; /* 0: not mentioned; 9..15 */
};

/*
 * Choose from a Sec-WebSocket-Extensions value (len bytes; offers
 * separated by commas, parameters by semicolons) the first
 * permessage-deflate offer the server can take: 1 with *out filled, 0 when
 * there is none (other extensions, or offers with unknown, repeated or bad
 * parameters, are passed over; server_max_window_bits=8 cannot be honoured
 * by zlib and is passed over too).
 */
int ws_proto_deflate_offer(const char *value, size_t len, struct ws_deflate_params *out);

/* The response's Sec-WebSocket-Extensions value for `p` into out (NUL ended): its length. */
size_t ws_proto_deflate_response(const struct ws_deflate_params *p, char *out, size_t cap);

#endif
