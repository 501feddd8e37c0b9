/*
 * <duda/packages/sha1.h>: the sha1 package (duda/packages/sha1/README.md):
 * SHA-1 digests and HMAC-SHA1, on libcrypto.
 *
 *     static const struct duda_sha1_api *sha1;
 *     duda_load_package(sha1, "sha1");            in duda_main()
 */
#ifndef DUDA_PACKAGES_SHA1_H
#define DUDA_PACKAGES_SHA1_H

#include <duda/duda.h>

#define DUDA_SHA1_LEN 20 /* bytes of a digest */

struct duda_sha1_api {
    size_t size;
    /* The digest of len bytes into out (DUDA_SHA1_LEN bytes). */
    void (*digest)(const void *data, size_t len, unsigned char *out);
    /*
     * The digest as 40 lowercase hex digits: freed when dr's request ends,
     * or by the caller when dr is NULL. NULL when out of memory.
     */
    char *(*hex)(duda_request_t *dr, const void *data, size_t len);
    /* HMAC-SHA1 (RFC 2104) of data with key into out (DUDA_SHA1_LEN bytes). */
    void (*hmac)(const void *key, size_t keylen, const void *data, size_t len, unsigned char *out);
    /* The HMAC as hex digits, allocated like hex(). */
    char *(*hmac_hex)(duda_request_t *dr, const void *key, size_t keylen, const void *data,
                      size_t len);
};

#endif
