/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_util.c: libFuzzer target for the helpers plugins share in
 * include/monkey/: mk_util.h (base 64, Basic credentials, address blocks,
 * addresses and numbers as text) and mk_json.h (UTF-8, JSON strings).
 *
 * The first input byte chooses (its low two bits) and sizes (the rest);
 * the other bytes are the text. Invariants (each a crash when broken):
 *  0 mk_base64_decode accepts exactly padded base 64 (a model: groups of
 *    four, '=' only as the last one or two of the last group) and gives the
 *    model's bytes, writing no more than its `cap` (a buffer of exactly
 *    that size; cap from the first byte); any bytes, encoded by a model
 *    encoder, decode back to themselves; mk_basic_credentials agrees with
 *    a model made of those steps (trim, the scheme, the decoder, the ':');
 *  1 mk_cidr_parse: an accepted block's net has no bits past its mask, the
 *    mask is a prefix, the family and the host-bits flag are right, and the
 *    address written matches it (IPv4 through mk_cidr_client of a
 *    sockaddr_in); a client built from the bytes gets the family and text
 *    inet_ntop gives (mk_addr_text), its text parses back to a block that
 *    matches it; mk_u64_dec writes what snprintf writes;
 *  2 mk_utf8_valid and mk_utf8_len agree with a model decoder (code
 *    points, no overlong forms, no surrogates, none past U+10FFFF);
 *  3 a JSON string of the bytes (mk_json_string_n) is valid UTF-8 without
 *    control characters, and read back by a model JSON string reader it
 *    gives the bytes, each byte of an invalid sequence as U+FFFD.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <monkey/mk_json.h>
#include <monkey/mk_util.h>

#include "fuzz_check.h"

/* ---- 0: base 64 and Basic credentials ------------------------------------------------- */

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_index(char c)
{
    const char *p = c ? strchr(b64_alphabet, c) : NULL;
    return p ? (int) (p - b64_alphabet) : -1;
}

/* The model decoder: -1, or the length written into out (room for len). */
static ssize_t model_b64(const char *in, size_t len, char *out)
{
    size_t o = 0;
    if (len == 0 || len % 4) {
        return -1;
    }
    for (size_t g = 0; g < len; g += 4) {
        bool last = g + 4 == len;
        size_t pad = 0;
        if (last && in[g + 3] == '=') {
            pad = in[g + 2] == '=' ? 2 : 1;
        }
        uint32_t bits = 0;
        for (size_t j = 0; j < 4; j++) {
            int v = j < 4 - pad ? b64_index(in[g + j]) : 0;
            if (v < 0) {
                return -1;
            }
            bits = bits << 6 | (uint32_t) v;
        }
        for (size_t j = 0; j < 3 - pad; j++) {
            out[o++] = (char) (bits >> (16 - 8 * j));
        }
    }
    return (ssize_t) o;
}

static size_t model_b64_encode(const uint8_t *in, size_t len, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t bits = (uint32_t) in[i] << 16;
        size_t have = len - i < 3 ? len - i : 3;
        if (have > 1) {
            bits |= (uint32_t) in[i + 1] << 8;
        }
        if (have > 2) {
            bits |= in[i + 2];
        }
        for (size_t j = 0; j < 4; j++) {
            out[o++] = j <= have ? b64_alphabet[(bits >> (18 - 6 * j)) & 63] : '=';
        }
    }
    return o;
}

static void check_base64(uint8_t sel, const char *in, size_t n)
{
    size_t cap = (size_t) (sel >> 2) * n / 32;
    char *out = malloc(cap ? cap : 1);
    char *model = malloc(n ? n : 1);
    ssize_t got = mk_base64_decode(in, n, out, cap);
    ssize_t want = model_b64(in, n, model);

    if (n / 4 * 3 <= cap) {
        MK_FUZZ_CHECK(got == want);
    }
    else {
        MK_FUZZ_CHECK(got == -1);
    }
    MK_FUZZ_CHECK(got < 0 || memcmp(out, model, (size_t) got) == 0);
    free(out);

    /* any bytes, encoded, decode to themselves */
    char *enc = malloc(n / 3 * 4 + 4);
    char *back = malloc(n + 3);
    size_t e = model_b64_encode((const uint8_t *) in, n, enc);
    ssize_t b = mk_base64_decode(enc, e, back, n + 2);
    MK_FUZZ_CHECK(n == 0 ? b == -1 : (b == (ssize_t) n && memcmp(back, in, n) == 0));
    free(enc);
    free(back);

    /* Basic credentials, against the same steps by hand */
    char cred[96];
    size_t clen = 0;
    ssize_t colon = mk_basic_credentials(in, n, cred, sizeof(cred), &clen);
    const char *p = in, *end = in + n;
    while (p < end && (*p == ' ' || *p == '\t')) {
        p++;
    }
    while (end > p && (end[-1] == ' ' || end[-1] == '\t')) {
        end--;
    }
    ssize_t want_colon = -1;
    if (end - p >= 6 && strncasecmp(p, "basic", 5) == 0 && (p[5] == ' ' || p[5] == '\t')) {
        p += 6;
        while (p < end && (*p == ' ' || *p == '\t')) {
            p++;
        }
        size_t tl = (size_t) (end - p);
        ssize_t d = tl / 4 * 3 <= sizeof(cred) ? model_b64(p, tl, model) : -1;
        const char *c = d > 0 ? memchr(model, ':', (size_t) d) : NULL;
        if (c) {
            want_colon = c - model;
            MK_FUZZ_CHECK(clen == (size_t) d && memcmp(cred, model, clen) == 0);
        }
    }
    MK_FUZZ_CHECK(colon == want_colon);
    free(model);
}

/* ---- 1: address blocks, addresses and numbers as text --------------------------------- */

static void check_cidr(const char *in, size_t n)
{
    struct mk_cidr c;
    int rc = mk_cidr_parse(in, n, &c);

    MK_FUZZ_CHECK(rc <= MK_CIDR_OK && rc >= MK_CIDR_MAPPED);
    if (rc == MK_CIDR_OK) {
        MK_FUZZ_CHECK(c.family == AF_INET || c.family == AF_INET6);
        bool ended = false;
        unsigned bits = 0;
        for (int i = 0; i < 16; i++) {
            MK_FUZZ_CHECK((c.net[i] & ~c.mask[i]) == 0);
            for (int b = 7; b >= 0; b--) {
                bool one = (c.mask[i] >> b) & 1;
                MK_FUZZ_CHECK(!(one && ended)); /* a prefix: ones, then zeros */
                ended |= !one;
                bits += one;
            }
        }
        if (c.family == AF_INET) {
            /* an IPv4 block is an IPv4-mapped one */
            MK_FUZZ_CHECK(bits >= 96 && c.net[10] == 0xff && c.net[11] == 0xff);
        }
        /* the address written matches its block, and sets host_bits exactly */
        const char *slash = memchr(in, '/', n);
        size_t alen = slash ? (size_t) (slash - in) : n;
        char addr[64];
        uint8_t a[16] = {0};
        memcpy(addr, in, alen);
        addr[alen] = '\0';
        if (inet_pton(AF_INET, addr, a + 12) == 1) {
            a[10] = a[11] = 0xff;
        }
        else {
            MK_FUZZ_CHECK(inet_pton(AF_INET6, addr, a) == 1);
        }
        bool host_bits = false;
        for (int i = 0; i < 16; i++) {
            host_bits |= (a[i] & ~c.mask[i]) != 0;
        }
        MK_FUZZ_CHECK(host_bits == c.host_bits);
        MK_FUZZ_CHECK(mk_cidr_match(&c, a, c.family));
        MK_FUZZ_CHECK(!mk_cidr_match(&c, a, c.family == AF_INET ? AF_INET6 : AF_INET));
    }

    /* a client from the first 16 bytes (zeros after the input), as IPv4 and IPv6 */
    uint8_t raw[16] = {0};
    memcpy(raw, in, n < 16 ? n : 16);
    struct sockaddr_in6 s6 = {.sin6_family = AF_INET6};
    struct sockaddr_in s4 = {.sin_family = AF_INET};
    memcpy(&s6.sin6_addr, raw, 16);
    memcpy(&s4.sin_addr, raw, 4);
    const struct sockaddr *clients[2] = {(const struct sockaddr *) &s6,
                                         (const struct sockaddr *) &s4};
    for (int k = 0; k < 2; k++) {
        uint8_t key[16];
        int family;
        char text[MK_ADDR_TEXT_LEN], want[MK_ADDR_TEXT_LEN];
        mk_cidr_client(clients[k], key, &family);
        size_t tl = mk_addr_text(clients[k], text);
        MK_FUZZ_CHECK(tl == strlen(text) && tl > 0);
        bool v4 = k == 1 || IN6_IS_ADDR_V4MAPPED(&s6.sin6_addr);
        MK_FUZZ_CHECK(family == (v4 ? AF_INET : AF_INET6));
        if (v4) {
            MK_FUZZ_CHECK(inet_ntop(AF_INET, k == 1 ? raw : raw + 12, want, sizeof(want)));
        }
        else {
            MK_FUZZ_CHECK(inet_ntop(AF_INET6, raw, want, sizeof(want)));
        }
        MK_FUZZ_CHECK(strcmp(text, want) == 0);
        struct mk_cidr back;
        MK_FUZZ_CHECK(mk_cidr_parse(text, tl, &back) == MK_CIDR_OK);
        MK_FUZZ_CHECK(back.family == family && mk_cidr_match(&back, key, family));
        MK_FUZZ_CHECK(!back.host_bits);
    }

    /* numbers */
    uint64_t v = 0;
    memcpy(&v, raw, sizeof(v));
    char dec[24], want[24];
    size_t dl = mk_u64_dec(v, dec);
    dec[dl] = '\0';
    snprintf(want, sizeof(want), "%llu", (unsigned long long) v);
    MK_FUZZ_CHECK(strcmp(dec, want) == 0);
}

/* ---- 2: UTF-8 ------------------------------------------------------------------------- */

/* The model: the length of the valid sequence at s (n bytes), or 0. */
static size_t model_utf8(const uint8_t *s, size_t n)
{
    size_t len;
    uint32_t cp, min;
    if (s[0] < 0x80) {
        return 1;
    }
    if ((s[0] & 0xe0) == 0xc0) {
        len = 2, cp = s[0] & 0x1fu, min = 0x80;
    }
    else if ((s[0] & 0xf0) == 0xe0) {
        len = 3, cp = s[0] & 0x0fu, min = 0x800;
    }
    else if ((s[0] & 0xf8) == 0xf0) {
        len = 4, cp = s[0] & 0x07u, min = 0x10000;
    }
    else {
        return 0;
    }
    if (n < len) {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            return 0;
        }
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
        return 0;
    }
    return len;
}

static void check_utf8(const uint8_t *s, size_t n)
{
    bool valid = true;
    for (size_t i = 0; i < n; i++) {
        size_t want = model_utf8(s + i, n - i);
        MK_FUZZ_CHECK(mk_utf8_len(s + i, n - i) == want);
    }
    for (size_t i = 0; i < n;) {
        size_t l = model_utf8(s + i, n - i);
        if (l == 0) {
            valid = false;
            break;
        }
        i += l;
    }
    MK_FUZZ_CHECK(mk_utf8_valid(s, n) == valid);
    MK_FUZZ_CHECK(mk_utf8_len(s, 0) == 0);
}

/* ---- 3: JSON strings ------------------------------------------------------------------ */

static int hexval(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Read the JSON string at j (its quotes included) into out: its length, or -1. */
static ssize_t model_json_string(const char *j, size_t n, uint8_t *out)
{
    size_t o = 0;
    if (n < 2 || j[0] != '"' || j[n - 1] != '"') {
        return -1;
    }
    for (size_t i = 1; i < n - 1; i++) {
        unsigned char c = (unsigned char) j[i];
        if (c == '"' || c < 0x20) {
            return -1;
        }
        if (c != '\\') {
            out[o++] = c;
            continue;
        }
        if (++i >= n - 1) {
            return -1;
        }
        switch (j[i]) {
        case '"':
        case '\\':
        case '/':
            out[o++] = (uint8_t) j[i];
            break;
        case 'n':
            out[o++] = '\n';
            break;
        case 'r':
            out[o++] = '\r';
            break;
        case 't':
            out[o++] = '\t';
            break;
        case 'b':
            out[o++] = '\b';
            break;
        case 'f':
            out[o++] = '\f';
            break;
        case 'u': {
            uint32_t cp = 0;
            if (i + 4 >= n - 1) {
                return -1;
            }
            for (int k = 1; k <= 4; k++) {
                int h = hexval(j[i + (size_t) k]);
                if (h < 0) {
                    return -1;
                }
                cp = cp << 4 | (uint32_t) h;
            }
            i += 4;
            if (cp >= 0xd800 && cp <= 0xdfff) {
                return -1; /* the writer never splits into surrogates */
            }
            if (cp < 0x80) {
                out[o++] = (uint8_t) cp;
            }
            else if (cp < 0x800) {
                out[o++] = (uint8_t) (0xc0 | cp >> 6);
                out[o++] = (uint8_t) (0x80 | (cp & 0x3f));
            }
            else {
                out[o++] = (uint8_t) (0xe0 | cp >> 12);
                out[o++] = (uint8_t) (0x80 | ((cp >> 6) & 0x3f));
                out[o++] = (uint8_t) (0x80 | (cp & 0x3f));
            }
            break;
        }
        default:
            return -1;
        }
    }
    return (ssize_t) o;
}

static void check_json(const uint8_t *s, size_t n)
{
    struct mk_json j;
    mk_json_init(&j, 64 + 6 * n);
    mk_json_string_n(&j, (const char *) s, n);
    MK_FUZZ_CHECK(!j.failed && j.data);
    MK_FUZZ_CHECK(mk_utf8_valid(j.data, j.len) && strlen(j.data) == j.len);
    for (size_t i = 0; i < j.len; i++) {
        MK_FUZZ_CHECK((unsigned char) j.data[i] >= 0x20 && j.data[i] != 0x7f);
    }
    /* what the string should read back as */
    uint8_t *want = malloc(3 * n + 1), *got = malloc(3 * n + 1);
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        size_t l = model_utf8(s + i, n - i);
        if (l == 0) {
            memcpy(want + w, "\xef\xbf\xbd", 3);
            w += 3;
            i++;
            continue;
        }
        memcpy(want + w, s + i, l);
        w += l;
        i += l;
    }
    ssize_t g = model_json_string(j.data, j.len, got);
    MK_FUZZ_CHECK(g == (ssize_t) w && memcmp(got, want, w) == 0);
    free(want);
    free(got);
    mk_json_free(&j);

    /* a document around it: commas and nesting; too small a max fails it */
    mk_json_init(&j, 1u << 20);
    mk_json_object_begin(&j);
    mk_json_key(&j, "s");
    mk_json_string_n(&j, (const char *) s, n < 4 ? n : 4);
    mk_json_key(&j, "a");
    mk_json_array_begin(&j);
    mk_json_uint(&j, n);
    mk_json_int(&j, -(int64_t) n);
    mk_json_bool(&j, n & 1);
    mk_json_null(&j);
    mk_json_array_end(&j);
    mk_json_object_end(&j);
    MK_FUZZ_CHECK(!j.failed && j.data[0] == '{' && j.data[j.len - 1] == '}');
    MK_FUZZ_CHECK(strstr(j.data, ",\"a\":[") && strstr(j.data, ",null]}"));
    mk_json_free(&j);
    mk_json_init(&j, n + 2); /* the quotes and the NUL do not fit with n bytes */
    mk_json_string_n(&j, (const char *) s, n);
    MK_FUZZ_CHECK(j.failed);
    mk_json_free(&j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    size_t n = size - 1;
    char *in = malloc(n ? n : 1); /* exactly the text: overruns are seen */
    memcpy(in, data + 1, n);
    switch (data[0] & 3) {
    case 0:
        check_base64(data[0], in, n);
        break;
    case 1:
        check_cidr(in, n);
        break;
    case 2:
        check_utf8((const uint8_t *) in, n);
        break;
    default:
        check_json((const uint8_t *) in, n);
        break;
    }
    free(in);
    return 0;
}
