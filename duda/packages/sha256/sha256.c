/*
 * duda/packages/sha256/sha256.c: the sha256 package (README.md): sha.c and
 * sha_api.c with EVP_sha256().
 */
#include <duda/duda_package.h>

#include "sha.h"
#include "sha_api.h"
#include "sha256.h"

static void sha256_digest(const void *msg, size_t len, unsigned char *out)
{
    duda_sha_digest(EVP_sha256(), msg, len, out);
}

static char *sha256_hex(duda_request_t *dr, const void *msg, size_t len)
{
    return duda_sha_api_hex_new(dr, EVP_sha256(), msg, len);
}

static void sha256_hmac(const void *key, size_t keylen, const void *msg, size_t len,
                        unsigned char *out)
{
    duda_sha_hmac(EVP_sha256(), key, keylen, msg, len, out);
}

static char *sha256_hmac_hex(duda_request_t *dr, const void *key, size_t keylen, const void *msg,
                             size_t len)
{
    return duda_sha_api_hmac_hex_new(dr, EVP_sha256(), key, keylen, msg, len);
}

static const struct duda_sha256_api sha256_api = {
    .size = sizeof(sha256_api),
    .digest = sha256_digest,
    .hex = sha256_hex,
    .hmac = sha256_hmac,
    .hmac_hex = sha256_hmac_hex,
};

DUDA_PACKAGE("sha256", "1.0", &sha256_api, NULL, NULL);
