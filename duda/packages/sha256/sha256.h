/*
 * <duda/packages/sha256.h>: the sha256 package (duda/packages/sha256/README.md):
 * SHA-256 digests and HMAC-SHA256, on libcrypto.
 *
 *     static const struct duda_sha256_api *sha256;
 *     duda_load_package(sha256, "sha256");            in duda_main()
 */
#ifndef DUDA_PACKAGES_SHA256_H
#define DUDA_PACKAGES_SHA256_H

#include <duda/duda.h>

#define DUDA_SHA256_LEN 32 /* bytes of a digest */

struct duda_sha256_api {
    size_t size;
    /* The digest of len bytes into out (DUDA_SHA256_LEN bytes). */
    void (*digest)(const void *data, size_t len, unsigned char *out);
    /*
     * The digest as 64 lowercase hex digits: freed when dr's request ends,
     * or by the caller when dr is NULL. NULL when out of memory.
     */
    char *(*hex)(duda_request_t *dr, const void *data, size_t len);
    /* HMAC-SHA256 (RFC 2104) of data with key into out (DUDA_SHA256_LEN bytes). */
    void (*hmac)(const void *key, size_t keylen, const void *data, size_t len, unsigned char *out);
    /* The HMAC as hex digits, allocated like hex(). */
    char *(*hmac_hex)(duda_request_t *dr, const void *key, size_t keylen, const void *data,
                      size_t len);
};

#endif
