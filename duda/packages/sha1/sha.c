/*
 * duda/packages/sha1/sha.c: see sha.h.
 */
#include <openssl/hmac.h>

#include "sha.h"

void duda_sha_digest(const EVP_MD *md, const void *data, size_t len, unsigned char *out)
{
    unsigned int n = 0;
    EVP_Digest(data, len, out, &n, md, NULL);
}

void duda_sha_hmac(const EVP_MD *md, const void *key, size_t keylen, const void *data, size_t len,
                   unsigned char *out)
{
    static const unsigned char none[1];
    unsigned int n = 0;
    /* HMAC() with a NULL key and 0 length means "no key" to libcrypto, not "an empty key". */
    HMAC(md, key && keylen ? key : none, (int) keylen, data && len ? data : none, len, out, &n);
}

void duda_sha_hex(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 0xf];
    }
    out[2 * n] = '\0';
}
