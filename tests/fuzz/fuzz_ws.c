/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_ws.c: libFuzzer target for the WebSocket frame reader and the
 * handshake's header values (duda/packages/websocket/ws_proto.c), which
 * read what any client sends.
 *
 * The first byte gives where to split the input and the reader's settings
 * (deflate, a frame limit); the rest is read once whole and once in two
 * pieces (frames cut anywhere). Invariants (each a crash when broken):
 *  - both runs give the same events (heads, payload bytes unmasked) and
 *    the same result: running out of input, or the same close code;
 *  - every payload view lies inside the input and the payload total is at
 *    most the input's length; a data frame never exceeds the frame limit;
 *  - a close code returned is 1002, or 1009 for a frame past the limit,
 *    after which ws_proto_read_skip() goes on past it (as the package does);
 *  - a close payload check returns 1005, a code a peer may send, or
 *    -1002/-1007;
 * and the input read as a Sec-WebSocket-Extensions value gives an accepted
 * offer whose response fits and starts with "permessage-deflate".
 */
#include <string.h>

#include "duda/packages/websocket/ws_proto.h"

#include "fuzz_check.h"

struct trace {
    uint32_t hash;
    size_t payload;
    int rc;
};

static uint32_t mix(uint32_t h, uint32_t v)
{
    return (h ^ v) * 16777619u;
}

/* Feed [in, in + len) to r, adding its events to t: 0, or the (negative) close code. */
static int feed(struct ws_reader *r, const uint8_t *in, size_t len, const uint8_t *all,
                size_t all_len, struct trace *t)
{
    size_t off = 0;

    for (;;) {
        size_t used;
        struct ws_chunk ev;
        int rc = ws_proto_read(r, in + off, len - off, &used, &ev);
        MK_FUZZ_CHECK(used <= len - off);
        off += used;
        if (rc == -WS_CLOSE_TOO_BIG) {
            /* What the websocket package does: drop that frame and go on. */
            MK_FUZZ_CHECK(r->max_frame && r->head.len > r->max_frame);
            ws_proto_read_skip(r);
            t->hash = mix(t->hash, 0x300u);
            continue;
        }
        if (rc < 0) {
            MK_FUZZ_CHECK(rc == -WS_CLOSE_PROTOCOL);
            return rc;
        }
        if (rc == WS_EV_NEED) {
            MK_FUZZ_CHECK(off == len);
            return 0;
        }
        if (rc == WS_EV_HEAD) {
            MK_FUZZ_CHECK(!r->max_frame || ev.head.len <= r->max_frame || (ev.head.opcode & 8));
            MK_FUZZ_CHECK(ev.head.masked);
            t->hash = mix(t->hash, 0x100u | ev.head.opcode);
            t->hash = mix(t->hash, (uint32_t) ev.head.len);
            continue;
        }
        MK_FUZZ_CHECK(mk_fuzz_inside((const char *) ev.data, ev.len, (const char *) all, all_len));
        MK_FUZZ_CHECK(ev.offset + ev.len <= ev.head.len);
        for (size_t i = 0; i < ev.len; i++) {
            uint8_t b;
            ws_proto_unmask(&b, ev.data + i, 1, ev.head.mask, ev.offset + i);
            t->hash = mix(t->hash, b);
        }
        t->payload += ev.len;
        if (ev.end) {
            t->hash = mix(t->hash, 0x200u);
        }
    }
}

static void run(const uint8_t *in, size_t len, size_t split, bool deflate, uint64_t max_frame,
                struct trace *t)
{
    struct ws_reader r = {.max_frame = max_frame, .deflate = deflate};

    memset(t, 0, sizeof(*t));
    t->hash = 2166136261u;
    t->rc = feed(&r, in, split, in, len, t);
    if (t->rc == 0) {
        t->rc = feed(&r, in + split, len - split, in, len, t);
    }
    MK_FUZZ_CHECK(t->payload <= len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    uint8_t ctl = data[0];
    const uint8_t *in = data + 1;
    size_t len = size - 1;
    bool deflate = ctl & 0x80;
    uint64_t max_frame = (ctl & 0x40) ? 64 : 0;
    struct trace whole, cut;

    run(in, len, len, deflate, max_frame, &whole);
    run(in, len, len ? (ctl & 0x3f) % (len + 1) : 0, deflate, max_frame, &cut);
    MK_FUZZ_CHECK(whole.rc == cut.rc);
    MK_FUZZ_CHECK(whole.hash == cut.hash);
    MK_FUZZ_CHECK(whole.payload == cut.payload);

    int code = ws_proto_close_payload_check(in, len < 125 ? len : 125);
    MK_FUZZ_CHECK(code == WS_CLOSE_NO_STATUS || code == -WS_CLOSE_PROTOCOL ||
                  code == -WS_CLOSE_INVALID_DATA ||
                  (code > 0 && ws_proto_close_code_valid((unsigned) code)));

    struct ws_deflate_params p;
    if (ws_proto_deflate_offer((const char *) in, len, &p)) {
        char out[160];
        size_t n = ws_proto_deflate_response(&p, out, sizeof(out));
        MK_FUZZ_CHECK(n < sizeof(out) && strlen(out) == n);
        MK_FUZZ_CHECK(strncmp(out, "permessage-deflate", 18) == 0);
        MK_FUZZ_CHECK(!p.server_max_window_bits ||
                      (p.server_max_window_bits >= 9 && p.server_max_window_bits <= 15));
    }
    (void) ws_proto_token_in_list((const char *) in, len, "upgrade");
    (void) ws_proto_key_valid((const char *) in, len);
    return 0;
}
