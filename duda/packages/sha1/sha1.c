/*
 * duda/packages/sha1/sha1.c: the sha1 package (README.md): sha.c and
 * sha_api.c with EVP_sha1().
 */
#include <duda/duda_package.h>

#include "sha.h"
#include "sha_api.h"
#include "sha1.h"

static void sha1_digest(const void *msg, size_t len, unsigned char *out)
{
    duda_sha_digest(EVP_sha1(), msg, len, out);
}

static char *sha1_hex(duda_request_t *dr, const void *msg, size_t len)
{
    return duda_sha_api_hex_new(dr, EVP_sha1(), msg, len);
}

static void sha1_hmac(const void *key, size_t keylen, const void *msg, size_t len,
                      unsigned char *out)
{
    duda_sha_hmac(EVP_sha1(), key, keylen, msg, len, out);
}

static char *sha1_hmac_hex(duda_request_t *dr, const void *key, size_t keylen, const void *msg,
                           size_t len)
{
    return duda_sha_api_hmac_hex_new(dr, EVP_sha1(), key, keylen, msg, len);
}

static const struct duda_sha1_api sha1_api = {
    .size = sizeof(sha1_api),
    .digest = sha1_digest,
    .hex = sha1_hex,
    .hmac = sha1_hmac,
    .hmac_hex = sha1_hmac_hex,
};

DUDA_PACKAGE("sha1", "1.0", &sha1_api, NULL, NULL);
