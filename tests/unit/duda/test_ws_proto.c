/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_ws_proto.c: unit tests of duda/packages/websocket/ws_proto.c, the
 * WebSocket frame reader and the handshake's header values: tables of raw
 * bytes with the events or the close code they must give, every input also
 * fed one byte at a time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "duda/packages/websocket/ws_proto.c"

/* What a whole input gives: the payload of every data frame unmasked and joined. */
struct outcome {
    int rc; /* 0, or the negative close code */
    unsigned heads;
    uint8_t opcodes[8];
    uint8_t payload[256];
    size_t len;
};

static void run(const uint8_t *in, size_t len, size_t step, bool deflate, uint64_t max_frame,
                struct outcome *o)
{
    struct ws_reader r = {.max_frame = max_frame, .deflate = deflate};
    size_t off = 0;

    memset(o, 0, sizeof(*o));
    while (off < len) {
        size_t n = len - off < step ? len - off : step, used_all = 0;
        for (;;) {
            size_t used;
            struct ws_chunk ev;
            int rc = ws_proto_read(&r, in + off + used_all, n - used_all, &used, &ev);
            used_all += used;
            if (rc < 0) {
                o->rc = rc;
                return;
            }
            if (rc == WS_EV_NEED) {
                break;
            }
            if (rc == WS_EV_HEAD) {
                o->opcodes[o->heads++ % 8] = ev.head.opcode;
                continue;
            }
            assert_true(ev.len <= sizeof(o->payload) - o->len);
            ws_proto_unmask(o->payload + o->len, ev.data, ev.len, ev.head.mask, ev.offset);
            o->len += ev.len;
        }
        assert_int_equal(used_all, n);
        off += n;
    }
}

/* A masked client frame of `len` payload bytes into out: its size. */
static size_t client_frame(uint8_t *out, uint8_t b0, const char *payload, size_t len)
{
    static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
    size_t n = ws_proto_head_write(out, true, false, 0, len);

    out[0] = b0;
    out[1] |= 0x80;
    memcpy(out + n, mask, 4);
    n += 4;
    for (size_t i = 0; i < len; i++) {
        out[n + i] = (uint8_t) payload[i] ^ mask[i & 3];
    }
    return n + len;
}

static void test_rfc_example_and_pieces(void **state)
{
    (void) state;
    /* RFC 6455 5.7: a masked "Hello". */
    static const uint8_t hello[] = {0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d,
                                    0x7f, 0x9f, 0x4d, 0x51, 0x58};
    struct outcome o;
    for (size_t step = 1; step <= sizeof(hello); step++) {
        run(hello, sizeof(hello), step, false, 0, &o);
        assert_int_equal(o.rc, 0);
        assert_int_equal(o.heads, 1);
        assert_int_equal(o.opcodes[0], WS_OP_TEXT);
        assert_int_equal(o.len, 5);
        assert_memory_equal(o.payload, "Hello", 5);
    }
}

static void test_fragments_and_control_between(void **state)
{
    uint8_t in[128];
    size_t n = 0;
    struct outcome o;

    (void) state;
    n += client_frame(in + n, 0x01, "Hel", 3); /* text, not final */
    n += client_frame(in + n, 0x89, "", 0);    /* ping between the fragments */
    n += client_frame(in + n, 0x80, "lo", 2);  /* the last continuation */
    for (size_t step = 1; step <= n; step++) {
        run(in, n, step, false, 0, &o);
        assert_int_equal(o.rc, 0);
        assert_int_equal(o.heads, 3);
        assert_int_equal(o.opcodes[1], WS_OP_PING);
        assert_int_equal(o.len, 5);
        assert_memory_equal(o.payload, "Hello", 5);
    }
}

static void test_lengths_16_and_64_bits(void **state)
{
    static uint8_t in[70000 + 14];
    struct ws_reader r = {0};
    struct ws_chunk ev;
    size_t used;

    (void) state;
    assert_int_equal(client_frame(in, 0x82, (const char *) in + 20000, 125), 2 + 4 + 125);
    /* 126: two bytes of length */
    uint8_t h16[] = {0x82, 0x80 | 126, 0x01, 0x00, 1, 2, 3, 4};
    assert_int_equal(ws_proto_read(&r, h16, sizeof(h16), &used, &ev), WS_EV_HEAD);
    assert_int_equal(used, sizeof(h16));
    assert_int_equal(ev.head.len, 256);
    /* 127: eight bytes, the top bit must be clear */
    struct ws_reader r2 = {0};
    uint8_t h64[] = {0x82, 0x80 | 127, 0, 0, 0, 1, 0, 0, 0, 0, 1, 2, 3, 4};
    assert_int_equal(ws_proto_read(&r2, h64, sizeof(h64), &used, &ev), WS_EV_HEAD);
    assert_int_equal(ev.head.len, 1ull << 32);
    struct ws_reader r3 = {0};
    uint8_t bad[] = {0x82, 0x80 | 127, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4};
    assert_int_equal(ws_proto_read(&r3, bad, sizeof(bad), &used, &ev), -WS_CLOSE_PROTOCOL);
}

static const struct {
    uint8_t in[16];
    size_t len;
    bool deflate;
    uint64_t max_frame;
    int rc;
} refused[] = {
    {{0x81, 0x01, 'a'}, 3, false, 0, -WS_CLOSE_PROTOCOL},        /* unmasked */
    {{0x83, 0x80, 0, 0, 0, 0}, 6, false, 0, -WS_CLOSE_PROTOCOL}, /* opcode 3 */
    {{0x8b, 0x80, 0, 0, 0, 0}, 6, false, 0, -WS_CLOSE_PROTOCOL}, /* opcode 0xb */
    {{0x80, 0x80, 0, 0, 0, 0}, 6, false, 0, -WS_CLOSE_PROTOCOL}, /* lone continuation */
    {{0x09, 0x80, 0, 0, 0, 0}, 6, false, 0, -WS_CLOSE_PROTOCOL}, /* fragmented ping */
    {{0x89, 0x80 | 126, 0, 126, 0, 0, 0, 0}, 8, false, 0, -WS_CLOSE_PROTOCOL}, /* long ping */
    {{0xa1, 0x80, 0, 0, 0, 0}, 6, false, 0, -WS_CLOSE_PROTOCOL},               /* RSV2 */
    {{0x91, 0x80, 0, 0, 0, 0}, 6, false, 0, -WS_CLOSE_PROTOCOL},               /* RSV3 */
    {{0xc1, 0x80, 0, 0, 0, 0}, 6, false, 0, -WS_CLOSE_PROTOCOL}, /* RSV1, no deflate */
    {{0xc9, 0x80, 0, 0, 0, 0}, 6, true, 0, -WS_CLOSE_PROTOCOL},  /* RSV1 on a ping */
    {{0x82, 0x80 | 126, 0x10, 0x00, 0, 0, 0, 0}, 8, false, 4095, -WS_CLOSE_TOO_BIG},
    {{0x01, 0x80, 0, 0, 0, 0, 0x02, 0x80, 0, 0, 0, 0}, 12, false, 0, -WS_CLOSE_PROTOCOL},
};

static void test_refused_frames(void **state)
{
    struct outcome o;

    (void) state;
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        for (size_t step = 1; step <= refused[i].len; step++) {
            run(refused[i].in, refused[i].len, step, refused[i].deflate, refused[i].max_frame, &o);
            if (o.rc != refused[i].rc) {
                fail_msg("case %zu, step %zu: %d", i, step, o.rc);
            }
        }
    }
    /* RSV1 on the first frame of a message, with deflate: taken. */
    uint8_t ok[] = {0xc1, 0x80, 0, 0, 0, 0};
    run(ok, sizeof(ok), 1, true, 0, &o);
    assert_int_equal(o.rc, 0);
}

static void test_skip_a_frame_too_big(void **state)
{
    uint8_t in[600];
    size_t n = 0, off = 0, used, dropped = 0;
    struct ws_reader r = {.max_frame = 100};
    struct ws_chunk ev;
    char big[300];

    (void) state;
    memset(big, 'b', sizeof(big));
    n += client_frame(in + n, 0x82, big, sizeof(big));
    n += client_frame(in + n, 0x81, "after", 5);
    assert_int_equal(ws_proto_read(&r, in, n, &used, &ev), -WS_CLOSE_TOO_BIG);
    off += used;
    ws_proto_read_skip(&r);
    for (;;) {
        int rc = ws_proto_read(&r, in + off, n - off, &used, &ev);
        off += used;
        assert_int_equal(rc, WS_EV_DATA);
        dropped += ev.len;
        if (ev.end) {
            break;
        }
    }
    assert_int_equal(dropped, sizeof(big));
    assert_int_equal(ws_proto_read(&r, in + off, n - off, &used, &ev), WS_EV_HEAD);
    assert_int_equal(ev.head.opcode, WS_OP_TEXT);
    assert_int_equal(ev.head.len, 5);
}

/* Unmasking goes 8 bytes at a time: every length and offset gives the bytes one by one would. */
static void test_unmask_lengths_and_offsets(void **state)
{
    const uint8_t mask[4] = {0x12, 0x34, 0x56, 0x78};
    uint8_t src[40], dst[41], want[40];
    (void) state;

    for (size_t i = 0; i < sizeof(src); i++) {
        src[i] = (uint8_t) (i * 7 + 1);
    }
    for (uint64_t offset = 0; offset < 8; offset++) {
        for (size_t len = 0; len <= sizeof(src); len++) {
            for (size_t i = 0; i < len; i++) {
                want[i] = src[i] ^ mask[(offset + i) & 3];
            }
            memset(dst, 0xee, sizeof(dst));
            ws_proto_unmask(dst, src, len, mask, offset);
            assert_memory_equal(dst, want, len);
            assert_int_equal(dst[len], 0xee); /* not a byte past len */
        }
    }
}

static void test_head_write(void **state)
{
    uint8_t h[10];

    (void) state;
    assert_int_equal(ws_proto_head_write(h, true, false, WS_OP_TEXT, 5), 2);
    assert_memory_equal(h, "\x81\x05", 2);
    assert_int_equal(ws_proto_head_write(h, true, true, WS_OP_BINARY, 126), 4);
    assert_memory_equal(h, "\xc2\x7e\x00\x7e", 4);
    assert_int_equal(ws_proto_head_write(h, false, false, WS_OP_CONT, 65536), 10);
    assert_memory_equal(h, "\x00\x7f\x00\x00\x00\x00\x00\x01\x00\x00", 10);
}

static void test_close_payloads(void **state)
{
    (void) state;
    assert_int_equal(ws_proto_close_payload_check(NULL, 0), WS_CLOSE_NO_STATUS);
    assert_int_equal(ws_proto_close_payload_check((const uint8_t *) "\x03", 1), -WS_CLOSE_PROTOCOL);
    assert_int_equal(ws_proto_close_payload_check((const uint8_t *) "\x03\xe8", 2), 1000);
    assert_int_equal(ws_proto_close_payload_check((const uint8_t *) "\x0f\xa1ok", 4), 4001);
    assert_int_equal(ws_proto_close_payload_check((const uint8_t *) "\x03\xed", 2),
                     -WS_CLOSE_PROTOCOL);
    assert_int_equal(ws_proto_close_payload_check((const uint8_t *) "\x03\xee", 2),
                     -WS_CLOSE_PROTOCOL);
    assert_int_equal(ws_proto_close_payload_check((const uint8_t *) "\x03\xe8\xc0\xaf", 4),
                     -WS_CLOSE_INVALID_DATA);
    static const unsigned valid[] = {1000, 1001, 1002, 1003, 1007, 1008,
                                     1009, 1010, 1011, 3000, 4999};
    static const unsigned invalid[] = {0,    999,  1004, 1005, 1006, 1015,
                                       1016, 1100, 2000, 2999, 5000};
    for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
        assert_true(ws_proto_close_code_valid(valid[i]));
    }
    for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
        assert_false(ws_proto_close_code_valid(invalid[i]));
    }
}

static void test_header_values(void **state)
{
    (void) state;
    assert_true(ws_proto_token_in_list("keep-alive, Upgrade", 19, "upgrade"));
    assert_true(ws_proto_token_in_list("websocket", 9, "websocket"));
    assert_false(ws_proto_token_in_list("upgrades", 8, "upgrade"));
    assert_false(ws_proto_token_in_list("", 0, "upgrade"));
    assert_true(ws_proto_key_valid("dGhlIHNhbXBsZSBub25jZQ==", 24));
    assert_false(ws_proto_key_valid("dGhlIHNhbXBsZSBub25jZQ=", 23));
    assert_false(ws_proto_key_valid("dGhlIHNhbXBsZSBub25jZR==", 24)); /* stray low bits */
    assert_false(ws_proto_key_valid("dGhlIHNhbXBsZSBub25j*Q==", 24));
}

static void test_deflate_offers(void **state)
{
    struct ws_deflate_params p;
    char out[160];

    (void) state;
#define OFFER(s) ws_proto_deflate_offer(s, strlen(s), &p)
    assert_int_equal(OFFER("permessage-deflate; client_max_window_bits"), 1);
    assert_int_equal(p.client_max_window_bits, 15);
    assert_int_equal(p.server_max_window_bits, 0);
    ws_proto_deflate_response(&p, out, sizeof(out));
    assert_string_equal(out, "permessage-deflate");
    assert_int_equal(OFFER("x-webkit-deflate-frame, permessage-deflate; server_no_context_takeover;"
                           " server_max_window_bits=\"10\""),
                     1);
    assert_true(p.server_no_context_takeover);
    assert_int_equal(p.server_max_window_bits, 10);
    ws_proto_deflate_response(&p, out, sizeof(out));
    assert_string_equal(
        out, "permessage-deflate; server_no_context_takeover; server_max_window_bits=10");
    /* The first offer we cannot take is passed over for the next. */
    assert_int_equal(OFFER("permessage-deflate; server_max_window_bits=8, permessage-deflate; "
                           "client_no_context_takeover"),
                     1);
    assert_int_equal(p.server_max_window_bits, 0);
    assert_true(p.client_no_context_takeover);
    ws_proto_deflate_response(&p, out, sizeof(out));
    assert_string_equal(out, "permessage-deflate; client_no_context_takeover");
    assert_int_equal(OFFER("permessage-deflate; server_max_window_bits=9"), 1);
    ws_proto_deflate_response(&p, out, sizeof(out));
    assert_string_equal(out, "permessage-deflate; server_max_window_bits=9");
    assert_int_equal(OFFER("permessage-deflate; bogus"), 0);
    assert_int_equal(OFFER("permessage-deflate; server_no_context_takeover; "
                           "server_no_context_takeover"),
                     0);
    assert_int_equal(OFFER("permessage-deflate; server_max_window_bits=16"), 0);
    assert_int_equal(OFFER("permessage-deflate; server_max_window_bits"), 0);
    assert_int_equal(OFFER("permessage-deflate; server_no_context_takeover=1"), 0);
    assert_int_equal(OFFER("deflate-stream"), 0);
    assert_int_equal(OFFER(""), 0);
#undef OFFER
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc_example_and_pieces),
        cmocka_unit_test(test_fragments_and_control_between),
        cmocka_unit_test(test_lengths_16_and_64_bits),
        cmocka_unit_test(test_refused_frames),
        cmocka_unit_test(test_skip_a_frame_too_big),
        cmocka_unit_test(test_unmask_lengths_and_offsets),
        cmocka_unit_test(test_head_write),
        cmocka_unit_test(test_close_payloads),
        cmocka_unit_test(test_header_values),
        cmocka_unit_test(test_deflate_offers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
