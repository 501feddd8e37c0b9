/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * auth_digest.h: SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for the
 * auth plugin's credential cache. Pure functions: no allocation, no I/O, no
 * globals; any thread may call them.
 */
#ifndef MONKEY_AUTH_DIGEST_H
#define MONKEY_AUTH_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define MK_AUTH_SHA256_LEN 32
#define MK_AUTH_SHA256_BLOCK 64

struct mk_auth_sha256 {
    uint32_t state[8];
    uint64_t bytes; /* message length so far */
    uint8_t block[MK_AUTH_SHA256_BLOCK];
    size_t fill; /* bytes waiting in block */
};

void mk_auth_sha256_init(struct mk_auth_sha256 *ctx);
void mk_auth_sha256_update(struct mk_auth_sha256 *ctx, const void *data, size_t len);
/* Write the digest to out and wipe the context. */
void mk_auth_sha256_final(struct mk_auth_sha256 *ctx, uint8_t out[MK_AUTH_SHA256_LEN]);

/*
 * HMAC-SHA-256 of the concatenation of `n` parts (parts[i], lens[i]) under
 * `key`. Keys longer than a block are hashed first, as RFC 2104 says.
 */
void mk_auth_hmac_sha256(const uint8_t *key, size_t key_len, const void *const *parts,
                         const size_t *lens, size_t n, uint8_t out[MK_AUTH_SHA256_LEN]);

/*
 * Compare two buffers of `len` bytes in time that depends only on `len`.
 * Returns 1 when they are equal, 0 otherwise.
 */
int mk_auth_equal(const void *a, const void *b, size_t len);

/* Overwrite `len` bytes at p with zeros in a way the compiler keeps. */
void mk_auth_wipe(void *p, size_t len);

#endif
