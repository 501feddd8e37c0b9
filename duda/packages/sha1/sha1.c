/*
 * duda/packages/sha1/sha1.c: the sha1 package (README.md), on sha.c.
 */
#include <duda/duda_package.h>
#include <stdlib.h>

#include "../sha1/sha.h"
#include "sha1.h"

static void sha1_digest(const void *msg, size_t len, unsigned char *out)
{
    duda_sha_digest(EVP_sha1(), msg, len, out);
}

static void sha1_hmac(const void *key, size_t keylen, const void *msg, size_t len,
                      unsigned char *out)
{
    duda_sha_hmac(EVP_sha1(), key, keylen, msg, len, out);
}

/* The hex digits of md for dr (freed at its end) or for the caller. */
static char *sha1_to_hex(duda_request_t *dr, const unsigned char *md)
{
    char *out = dr ? gc->alloc(dr, 2 * DUDA_SHA1_LEN + 1) : malloc(2 * DUDA_SHA1_LEN + 1);
    if (out) {
        duda_sha_hex(md, DUDA_SHA1_LEN, out);
    }
    return out;
}

static char *sha1_hex(duda_request_t *dr, const void *msg, size_t len)
{
    unsigned char md[DUDA_SHA1_LEN];
    sha1_digest(msg, len, md);
    return sha1_to_hex(dr, md);
}

static char *sha1_hmac_hex(duda_request_t *dr, const void *key, size_t keylen, const void *msg,
                           size_t len)
{
    unsigned char md[DUDA_SHA1_LEN];
    sha1_hmac(key, keylen, msg, len, md);
    return sha1_to_hex(dr, md);
}

static const struct duda_sha1_api sha1_api = {
    .size = sizeof(sha1_api),
    .digest = sha1_digest,
    .hex = sha1_hex,
    .hmac = sha1_hmac,
    .hmac_hex = sha1_hmac_hex,
};

DUDA_PACKAGE("sha1", "1.0", &sha1_api, NULL, NULL);
