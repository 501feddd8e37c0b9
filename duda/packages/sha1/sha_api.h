/*
 * duda/packages/sha1/sha_api.h: the hex strings of the sha1 and sha256
 * packages' APIs, for any digest (md: EVP_sha1(), EVP_sha256()), on sha.c.
 * Each package's hex() and hmac_hex() are these with its own md. Compiled
 * into each package (they allocate with the package's gc object).
 */
#ifndef DUDA_PKG_SHA_API_H
#define DUDA_PKG_SHA_API_H

#include <duda/duda.h>
#include <openssl/evp.h>

/*
 * The digest of msg as 2 * EVP_MD_get_size(md) lowercase hex digits:
 * freed when dr's request ends, or by the caller when dr is NULL. NULL
 * when out of memory.
 */
char *duda_sha_api_hex_new(duda_request_t *dr, const EVP_MD *md, const void *msg, size_t len);

/* The HMAC of msg with key as hex digits, allocated like duda_sha_api_hex_new(). */
char *duda_sha_api_hmac_hex_new(duda_request_t *dr, const EVP_MD *md, const void *key,
                                size_t keylen, const void *msg, size_t len);

#endif
