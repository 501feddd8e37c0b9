/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * auth_digest.c: SHA-256 and HMAC-SHA-256 for the auth plugin's credential
 * cache (keyed digests of verified credentials), a constant-time comparison
 * and a wipe the compiler cannot drop. Pure: no allocation, no I/O, no
 * globals; checked against the FIPS 180-4 and RFC 4231 test vectors by
 * plugins/auth/tests/test_auth_units.c.
 */
#include <string.h>

#include "auth_digest.h"

static const uint32_t mk_auth_sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t mk_auth_ror(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32 - n));
}

/* Process one 64-byte block into the state. */
static void mk_auth_sha256_block(uint32_t st[8], const uint8_t *p)
{
    uint32_t w[64], a, b, c, d, e, f, g, h;

    for (int i = 0; i < 16; i++) {
        w[i] = (uint32_t) p[4 * i] << 24 | (uint32_t) p[4 * i + 1] << 16 |
               (uint32_t) p[4 * i + 2] << 8 | (uint32_t) p[4 * i + 3];
    }
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = mk_auth_ror(w[i - 15], 7) ^ mk_auth_ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = mk_auth_ror(w[i - 2], 17) ^ mk_auth_ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = st[0], b = st[1], c = st[2], d = st[3], e = st[4], f = st[5], g = st[6], h = st[7];
    for (int i = 0; i < 64; i++) {
        uint32_t s1 = mk_auth_ror(e, 6) ^ mk_auth_ror(e, 11) ^ mk_auth_ror(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = h + s1 + ch + mk_auth_sha256_k[i] + w[i];
        uint32_t s0 = mk_auth_ror(a, 2) ^ mk_auth_ror(a, 13) ^ mk_auth_ror(a, 22);
        uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = s0 + maj;
        h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    st[0] += a, st[1] += b, st[2] += c, st[3] += d;
    st[4] += e, st[5] += f, st[6] += g, st[7] += h;
    mk_auth_wipe(w, sizeof(w));
}

void mk_auth_sha256_init(struct mk_auth_sha256 *ctx)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(ctx->state, iv, sizeof(iv));
    ctx->bytes = 0;
    ctx->fill = 0;
}

void mk_auth_sha256_update(struct mk_auth_sha256 *ctx, const void *data, size_t len)
{
    const uint8_t *p = data;

    ctx->bytes += len;
    if (ctx->fill) {
        size_t n = MK_AUTH_SHA256_BLOCK - ctx->fill;
        if (n > len) {
            n = len;
        }
        memcpy(ctx->block + ctx->fill, p, n);
        ctx->fill += n, p += n, len -= n;
        if (ctx->fill < MK_AUTH_SHA256_BLOCK) {
            return;
        }
        mk_auth_sha256_block(ctx->state, ctx->block);
        ctx->fill = 0;
    }
    for (; len >= MK_AUTH_SHA256_BLOCK; p += MK_AUTH_SHA256_BLOCK, len -= MK_AUTH_SHA256_BLOCK) {
        mk_auth_sha256_block(ctx->state, p);
    }
    memcpy(ctx->block, p, len);
    ctx->fill = len;
}

void mk_auth_sha256_final(struct mk_auth_sha256 *ctx, uint8_t out[MK_AUTH_SHA256_LEN])
{
    uint64_t bits = ctx->bytes * 8;
    uint8_t pad[MK_AUTH_SHA256_BLOCK + 8] = {0x80};
    size_t padlen = (ctx->fill < 56 ? 56 : 120) - ctx->fill;

    for (int i = 0; i < 8; i++) {
        pad[padlen + (size_t) i] = (uint8_t) (bits >> (56 - 8 * i));
    }
    mk_auth_sha256_update(ctx, pad, padlen + 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t) (ctx->state[i] >> 24);
        out[4 * i + 1] = (uint8_t) (ctx->state[i] >> 16);
        out[4 * i + 2] = (uint8_t) (ctx->state[i] >> 8);
        out[4 * i + 3] = (uint8_t) ctx->state[i];
    }
    mk_auth_wipe(ctx, sizeof(*ctx));
}

void mk_auth_hmac_sha256(const uint8_t *key, size_t key_len, const void *const *parts,
                         const size_t *lens, size_t n, uint8_t out[MK_AUTH_SHA256_LEN])
{
    uint8_t k[MK_AUTH_SHA256_BLOCK] = {0}, pad[MK_AUTH_SHA256_BLOCK];
    uint8_t inner[MK_AUTH_SHA256_LEN];
    struct mk_auth_sha256 ctx;

    if (key_len > MK_AUTH_SHA256_BLOCK) {
        mk_auth_sha256_init(&ctx);
        mk_auth_sha256_update(&ctx, key, key_len);
        mk_auth_sha256_final(&ctx, k);
    }
    else {
        memcpy(k, key, key_len);
    }
    for (size_t i = 0; i < sizeof(pad); i++) {
        pad[i] = k[i] ^ 0x36;
    }
    mk_auth_sha256_init(&ctx);
    mk_auth_sha256_update(&ctx, pad, sizeof(pad));
    for (size_t i = 0; i < n; i++) {
        mk_auth_sha256_update(&ctx, parts[i], lens[i]);
    }
    mk_auth_sha256_final(&ctx, inner);
    for (size_t i = 0; i < sizeof(pad); i++) {
        pad[i] = k[i] ^ 0x5c;
    }
    mk_auth_sha256_init(&ctx);
    mk_auth_sha256_update(&ctx, pad, sizeof(pad));
    mk_auth_sha256_update(&ctx, inner, sizeof(inner));
    mk_auth_sha256_final(&ctx, out);
    mk_auth_wipe(k, sizeof(k));
    mk_auth_wipe(pad, sizeof(pad));
    mk_auth_wipe(inner, sizeof(inner));
}

int mk_auth_equal(const void *a, const void *b, size_t len)
{
    const volatile uint8_t *x = a, *y = b;
    uint8_t diff = 0;

    for (size_t i = 0; i < len; i++) {
        diff |= x[i] ^ y[i];
    }
    return diff == 0;
}

void mk_auth_wipe(void *p, size_t len)
{
    explicit_bzero(p, len);
}
