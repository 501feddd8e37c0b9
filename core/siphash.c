/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * siphash.c: SipHash-2-4 and SipHash-1-3 (siphash.h).
 */
#include "siphash.h"

#include <endian.h>
#include <string.h>

/* ---- SipHash (Aumasson and Bernstein), little-endian words ------------- */

static inline uint64_t mk_rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

/* A little-endian word at p (any alignment): one load on a little-endian CPU. */
static inline uint64_t mk_le64(const uint8_t *p)
{
    uint64_t v;

    memcpy(&v, p, sizeof(v));
    return le64toh(v);
}

#define MK_SIPROUND                                                                                \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = mk_rotl(v1, 13);                                                                      \
        v1 ^= v0;                                                                                  \
        v0 = mk_rotl(v0, 32);                                                                      \
        v2 += v3;                                                                                  \
        v3 = mk_rotl(v3, 16);                                                                      \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = mk_rotl(v3, 21);                                                                      \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = mk_rotl(v1, 17);                                                                      \
        v1 ^= v2;                                                                                  \
        v2 = mk_rotl(v2, 32);                                                                      \
    } while (0)

/*
 * SipHash-c-d: c rounds per 8-byte word, d rounds to finish. Inlined into
 * each variant with constant rounds, so the loops unroll.
 */
static inline uint64_t mk_siphash_cd(const uint8_t k[16], const void *data, size_t len, int c,
                                     int d)
{
    const uint8_t *p = data;
    uint64_t k0 = mk_le64(k), k1 = mk_le64(k + 8);
    uint64_t v0 = 0x736f6d6570736575ull ^ k0, v1 = 0x646f72616e646f6dull ^ k1;
    uint64_t v2 = 0x6c7967656e657261ull ^ k0, v3 = 0x7465646279746573ull ^ k1;
    size_t whole = len & ~(size_t) 7;

    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m = mk_le64(p + i);
        v3 ^= m;
        for (int r = 0; r < c; r++) {
            MK_SIPROUND;
        }
        v0 ^= m;
    }
    uint64_t b = (uint64_t) len << 56;
    for (size_t i = 0; i < (len & 7); i++) {
        b |= (uint64_t) p[whole + i] << (8 * i);
    }
    v3 ^= b;
    for (int r = 0; r < c; r++) {
        MK_SIPROUND;
    }
    v0 ^= b;
    v2 ^= 0xff;
    for (int r = 0; r < d; r++) {
        MK_SIPROUND;
    }
    return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t mk_siphash(const uint8_t k[16], const void *data, size_t len)
{
    return mk_siphash_cd(k, data, len, 2, 4);
}

uint64_t mk_siphash13(const uint8_t k[16], const void *data, size_t len)
{
    return mk_siphash_cd(k, data, len, 1, 3);
}
