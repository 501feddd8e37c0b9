/*
 * duda/packages/sha1/sha.h: digests and HMAC on libcrypto, shared by the
 * sha1 and sha256 packages. Pure: no allocation, no globals;
 * tests/test_sha.c tests them against the RFC vectors.
 */
#ifndef DUDA_PKG_SHA_H
#define DUDA_PKG_SHA_H

#include <openssl/evp.h>
#include <stddef.h>

/* The digest of data (md: EVP_sha1(), EVP_sha256()) into out (EVP_MD_get_size(md) bytes). */
void duda_sha_digest(const EVP_MD *md, const void *data, size_t len, unsigned char *out);

/* HMAC (RFC 2104) of data with key into out (EVP_MD_get_size(md) bytes). */
void duda_sha_hmac(const EVP_MD *md, const void *key, size_t keylen, const void *data, size_t len,
                   unsigned char *out);

/* n bytes as 2n lowercase hex digits and a NUL into out. */
void duda_sha_hex(const unsigned char *in, size_t n, char *out);

#endif
