/*
 * duda/packages/sha256/sha256.c: the sha256 package (README.md), on sha.c.
 */
#include <duda/duda_package.h>
#include <stdlib.h>

#include "../sha1/sha.h"
#include "sha256.h"

static void sha256_digest(const void *msg, size_t len, unsigned char *out)
{
    duda_sha_digest(EVP_sha256(), msg, len, out);
}

static void sha256_hmac(const void *key, size_t keylen, const void *msg, size_t len,
                        unsigned char *out)
{
    duda_sha_hmac(EVP_sha256(), key, keylen, msg, len, out);
}

/* The hex digits of md for dr (freed at its end) or for the caller. */
static char *sha256_to_hex(duda_request_t *dr, const unsigned char *md)
{
    char *out = dr ? gc->alloc(dr, 2 * DUDA_SHA256_LEN + 1) : malloc(2 * DUDA_SHA256_LEN + 1);
    if (out) {
        duda_sha_hex(md, DUDA_SHA256_LEN, out);
    }
    return out;
}

static char *sha256_hex(duda_request_t *dr, const void *msg, size_t len)
{
    unsigned char md[DUDA_SHA256_LEN];
    sha256_digest(msg, len, md);
    return sha256_to_hex(dr, md);
}

static char *sha256_hmac_hex(duda_request_t *dr, const void *key, size_t keylen, const void *msg,
                             size_t len)
{
    unsigned char md[DUDA_SHA256_LEN];
    sha256_hmac(key, keylen, msg, len, md);
    return sha256_to_hex(dr, md);
}

static const struct duda_sha256_api sha256_api = {
    .size = sizeof(sha256_api),
    .digest = sha256_digest,
    .hex = sha256_hex,
    .hmac = sha256_hmac,
    .hmac_hex = sha256_hmac_hex,
};

DUDA_PACKAGE("sha256", "1.0", &sha256_api, NULL, NULL);
