/*
 * duda/packages/sha1/sha_api.c: see sha_api.h.
 */
#include <stdlib.h>

#include "sha.h"
#include "sha_api.h"

/* md (n bytes) as hex digits for dr (freed at its end) or for the caller. */
static char *duda_sha_to_hex(duda_request_t *dr, const unsigned char *md, size_t n)
{
    char *out = dr ? gc->alloc(dr, 2 * n + 1) : malloc(2 * n + 1);
    if (out) {
        duda_sha_hex(md, n, out);
    }
    return out;
}

char *duda_sha_api_hex_new(duda_request_t *dr, const EVP_MD *md, const void *msg, size_t len)
{
    unsigned char d[EVP_MAX_MD_SIZE];
    duda_sha_digest(md, msg, len, d);
    return duda_sha_to_hex(dr, d, (size_t) EVP_MD_get_size(md));
}

char *duda_sha_api_hmac_hex_new(duda_request_t *dr, const EVP_MD *md, const void *key,
                                size_t keylen, const void *msg, size_t len)
{
    unsigned char d[EVP_MAX_MD_SIZE];
    duda_sha_hmac(md, key, keylen, msg, len, d);
    return duda_sha_to_hex(dr, d, (size_t) EVP_MD_get_size(md));
}
