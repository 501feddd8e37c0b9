/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * ws_proto.c: the WebSocket frame reader, frame heads, close payloads and
 * the handshake's header values (see ws_proto.h). Pure: every function
 * works on the bytes it is given and nothing else.
 */
#include <string.h>
#include <strings.h>

#include <monkey/mk_json.h>

#include "ws_proto.h"

/* Bytes of the head announced by its first two bytes. */
static size_t ws_head_size(const uint8_t *b)
{
    size_t n = 2;
    uint8_t len7 = b[1] & 0x7f;

    if (len7 == 126) {
        n += 2;
    }
    else if (len7 == 127) {
        n += 8;
    }
    if (b[1] & 0x80) {
        n += 4;
    }
    return n;
}

/* Check a complete head against the reader's state: 0 or a negative close code. */
static int ws_head_check(struct ws_reader *r, const struct ws_head *h, uint8_t b0)
{
    if (b0 & 0x30) {
        return -WS_CLOSE_PROTOCOL; /* RSV2, RSV3: no extension uses them */
    }
    if (!h->masked) {
        return -WS_CLOSE_PROTOCOL; /* a client masks every frame */
    }
    if (h->opcode & 0x8) {
        if (h->opcode > WS_OP_PONG || !h->fin || h->len > 125 || h->rsv1) {
            return -WS_CLOSE_PROTOCOL;
        }
        return 0;
    }
    if (h->opcode == WS_OP_CONT) {
        if (!r->in_message || h->rsv1) {
            return -WS_CLOSE_PROTOCOL;
        }
    }
    else if (h->opcode == WS_OP_TEXT || h->opcode == WS_OP_BINARY) {
        if (r->in_message || (h->rsv1 && !r->deflate)) {
            return -WS_CLOSE_PROTOCOL;
        }
    }
    else {
        return -WS_CLOSE_PROTOCOL; /* reserved data opcodes 3-7 */
    }
    if (r->max_frame && h->len > r->max_frame) {
        return -WS_CLOSE_TOO_BIG;
    }
    r->in_message = !h->fin;
    return 0;
}

/* Decode the head in r->buf (complete) into r->head: 0 or a negative close code. */
static int ws_head_decode(struct ws_reader *r)
{
    const uint8_t *b = r->buf;
    struct ws_head *h = &r->head;
    size_t i = 2;

    memset(h, 0, sizeof(*h));
    h->fin = (b[0] & 0x80) != 0;
    h->rsv1 = (b[0] & 0x40) != 0;
    h->opcode = b[0] & 0x0f;
    h->masked = (b[1] & 0x80) != 0;
    h->len = b[1] & 0x7f;
    if (h->len == 126) {
        h->len = ((uint64_t) b[2] << 8) | b[3];
        i = 4;
    }
    else if (h->len == 127) {
        h->len = 0;
        for (; i < 10; i++) {
            h->len = (h->len << 8) | b[i];
        }
        if (h->len >> 63) {
            return -WS_CLOSE_PROTOCOL;
        }
    }
    if (h->masked) {
        memcpy(h->mask, b + i, 4);
    }
    return ws_head_check(r, h, b[0]);
}

int ws_proto_read(struct ws_reader *r, const uint8_t *in, size_t len, size_t *used,
                  struct ws_chunk *ev)
{
    *used = 0;
    if (!r->in_payload) {
        size_t i = 0;
        if (r->buf_len == 0 && len >= 2 && len >= ws_head_size(in)) {
            i = ws_head_size(in); /* the whole head is here: no byte by byte */
            memcpy(r->buf, in, i);
            r->buf_len = (uint8_t) i;
        }
        while (i < len) {
            size_t need = r->buf_len < 2 ? 2 : ws_head_size(r->buf);
            if (r->buf_len >= need) {
                break;
            }
            r->buf[r->buf_len++] = in[i++];
        }
        *used = i;
        if (r->buf_len < 2 || r->buf_len < ws_head_size(r->buf)) {
            return WS_EV_NEED;
        }
        int rc = ws_head_decode(r);
        if (rc < 0) {
            return rc;
        }
        r->buf_len = 0;
        r->in_payload = true;
        r->got = 0;
        ev->head = r->head;
        return WS_EV_HEAD;
    }
    uint64_t left = r->head.len - r->got;
    size_t n = left < len ? (size_t) left : len;
    if (n == 0 && left > 0) {
        return WS_EV_NEED;
    }
    ev->head = r->head;
    ev->data = in;
    ev->len = n;
    ev->offset = r->got;
    r->got += n;
    ev->end = r->got == r->head.len;
    if (ev->end) {
        r->in_payload = false;
    }
    *used = n;
    return WS_EV_DATA;
}

void ws_proto_read_skip(struct ws_reader *r)
{
    if (!(r->head.opcode & 0x8)) {
        r->in_message = !r->head.fin;
    }
    r->buf_len = 0;
    r->in_payload = true;
    r->got = 0;
}

void ws_proto_unmask(uint8_t *dst, const uint8_t *src, size_t len, const uint8_t mask[4],
                     uint64_t offset)
{
    size_t k = (size_t) (offset & 3), i = 0;
    uint8_t m8[8];
    uint64_t m, w;

    /* Eight bytes at a time with the mask turned to start at this offset. */
    for (int j = 0; j < 8; j++) {
        m8[j] = mask[(k + j) & 3];
    }
    memcpy(&m, m8, 8);
    for (; len - i >= 8; i += 8) {
        memcpy(&w, src + i, 8);
        w ^= m;
        memcpy(dst + i, &w, 8);
    }
    for (; i < len; i++) {
        dst[i] = src[i] ^ mask[(k + i) & 3];
    }
}

size_t ws_proto_head_write(uint8_t *out, bool fin, bool rsv1, uint8_t opcode, uint64_t len)
{
    out[0] = (uint8_t) ((fin ? 0x80 : 0) | (rsv1 ? 0x40 : 0) | (opcode & 0x0f));
    if (len < 126) {
        out[1] = (uint8_t) len;
        return 2;
    }
    if (len <= 0xffff) {
        out[1] = 126;
        out[2] = (uint8_t) (len >> 8);
        out[3] = (uint8_t) len;
        return 4;
    }
    out[1] = 127;
    for (int i = 0; i < 8; i++) {
        out[2 + i] = (uint8_t) (len >> (56 - 8 * i));
    }
    return 10;
}

bool ws_proto_close_code_valid(unsigned code)
{
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
           (code >= 3000 && code <= 4999);
}

int ws_proto_close_payload_check(const uint8_t *p, size_t len)
{
    if (len == 0) {
        return WS_CLOSE_NO_STATUS;
    }
    if (len == 1) {
        return -WS_CLOSE_PROTOCOL;
    }
    unsigned code = ((unsigned) p[0] << 8) | p[1];
    if (!ws_proto_close_code_valid(code)) {
        return -WS_CLOSE_PROTOCOL;
    }
    if (!mk_utf8_valid(p + 2, len - 2)) {
        return -WS_CLOSE_INVALID_DATA;
    }
    return (int) code;
}

/* ---- header values ------------------------------------------------------------ */

static bool ws_space(char c)
{
    return c == ' ' || c == '\t';
}

/* [*s, *e) without surrounding blanks. */
static void ws_trim(const char **s, const char **e)
{
    while (*s < *e && ws_space(**s)) {
        (*s)++;
    }
    while (*e > *s && ws_space((*e)[-1])) {
        (*e)--;
    }
}

static bool ws_equal(const char *s, const char *e, const char *word)
{
    size_t n = strlen(word);
    return (size_t) (e - s) == n && strncasecmp(s, word, n) == 0;
}

bool ws_proto_token_in_list(const char *list, size_t len, const char *token)
{
    const char *p = list, *end = list + len;

    while (p <= end) {
        const char *comma = memchr(p, ',', (size_t) (end - p));
        const char *s = p, *e = comma ? comma : end;
        ws_trim(&s, &e);
        if (ws_equal(s, e, token)) {
            return true;
        }
        if (!comma) {
            break;
        }
        p = comma + 1;
    }
    return false;
}

static bool ws_b64(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/';
}

bool ws_proto_key_valid(const char *key, size_t len)
{
    if (len != 24 || key[22] != '=' || key[23] != '=') {
        return false;
    }
    for (size_t i = 0; i < 22; i++) {
        if (!ws_b64(key[i])) {
            return false;
        }
    }
    /* 16 bytes leave the last character's low 4 bits unused: zero. */
    return strchr("AQgw", key[21]) != NULL;
}

/* The end of the element starting at p (before `sep`, quotes respected), or end. */
static const char *ws_element_end(const char *p, const char *end, char sep)
{
    bool quoted = false;

    for (; p < end; p++) {
        if (*p == '"') {
            quoted = !quoted;
        }
        else if (*p == '\\' && quoted && p + 1 < end) {
            p++;
        }
        else if (*p == sep && !quoted) {
            return p;
        }
    }
    return end;
}

/* A window-bits value (8..15), quoted or not; -1 when it is not one. */
static int ws_window_bits(const char *s, const char *e)
{
    if (e - s >= 2 && *s == '"' && e[-1] == '"') {
        s++;
        e--;
    }
    if (e - s == 1 && *s >= '8' && *s <= '9') {
        return *s - '0';
    }
    if (e - s == 2 && s[0] == '1' && s[1] >= '0' && s[1] <= '5') {
        return 10 + (s[1] - '0');
    }
    return -1;
}

/* One parameter "name[=value]" of a permessage-deflate offer: 0, or -1 to pass the offer over. */
static int ws_deflate_param(const char *s, const char *e, struct ws_deflate_params *p,
                            unsigned *seen)
{
    const char *eq = memchr(s, '=', (size_t) (e - s));
    const char *ne = eq ? eq : e, *vs = eq ? eq + 1 : e, *ve = e;
    ws_trim(&s, &ne);
    ws_trim(&vs, &ve);
    int bits = eq ? ws_window_bits(vs, ve) : 0;
    unsigned which;

    if (ws_equal(s, ne, "server_no_context_takeover") && !eq) {
        which = 1;
        p->server_no_context_takeover = true;
    }
    else if (ws_equal(s, ne, "client_no_context_takeover") && !eq) {
        which = 2;
        p->client_no_context_takeover = true;
    }
    else if (ws_equal(s, ne, "server_max_window_bits") && bits >= 9) {
        which = 4;
        p->server_max_window_bits = (uint8_t) bits;
    }
    else if (ws_equal(s, ne, "client_max_window_bits") && bits >= 0) {
        which = 8;
        p->client_max_window_bits = (uint8_t) (bits ? bits : 15);
    }
    else {
        return -1; /* unknown, a value where none belongs, 8 or a bad number */
    }
    if (*seen & which) {
        return -1; /* repeated */
    }
    *seen |= which;
    return 0;
}

/* One offer [s, e): 1 when it is a permessage-deflate offer we take. */
static int ws_deflate_one(const char *s, const char *e, struct ws_deflate_params *out)
{
    const char *semi = ws_element_end(s, e, ';');
    const char *ns = s, *ne = semi;
    struct ws_deflate_params p = {0};
    unsigned seen = 0;

    ws_trim(&ns, &ne);
    if (!ws_equal(ns, ne, "permessage-deflate")) {
        return 0;
    }
    while (semi < e) {
        const char *ps = semi + 1;
        semi = ws_element_end(ps, e, ';');
        if (ws_deflate_param(ps, semi, &p, &seen) != 0) {
            return 0;
        }
    }
    *out = p;
    return 1;
}

int ws_proto_deflate_offer(const char *value, size_t len, struct ws_deflate_params *out)
{
    const char *p = value, *end = value + len;

    while (p < end) {
        const char *comma = ws_element_end(p, end, ',');
        if (ws_deflate_one(p, comma, out)) {
            return 1;
        }
        p = comma + 1;
    }
    return 0;
}

size_t ws_proto_deflate_response(const struct ws_deflate_params *p, char *out, size_t cap)
{
    size_t n = 0;

#define WS_PUT(s)                                                                                  \
    do {                                                                                           \
        size_t l_ = strlen(s);                                                                     \
        if (n + l_ < cap) {                                                                        \
            memcpy(out + n, s, l_);                                                                \
            n += l_;                                                                               \
        }                                                                                          \
    } while (0)
    WS_PUT("permessage-deflate");
    if (p->server_no_context_takeover) {
        WS_PUT("; server_no_context_takeover");
    }
    if (p->client_no_context_takeover) {
        WS_PUT("; client_no_context_takeover");
    }
    if (p->server_max_window_bits) {
        char bits[32] = "; server_max_window_bits=1x";
        bits[26] = (char) ('0' + p->server_max_window_bits % 10);
        if (p->server_max_window_bits < 10) {
            bits[25] = (char) ('0' + p->server_max_window_bits);
            bits[26] = '\0';
        }
        WS_PUT(bits);
    }
#undef WS_PUT
    if (cap) {
        out[n < cap ? n : cap - 1] = '\0';
    }
    return n;
}
