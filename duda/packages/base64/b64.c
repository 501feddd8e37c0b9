/*
 * duda/packages/base64/b64.c: see b64.h.
 */
#include <openssl/evp.h>
#include <string.h>

#include "b64.h"

size_t duda_b64_encode(const unsigned char *src, size_t len, char *out)
{
    size_t n = 0;

    /* EVP_EncodeBlock takes an int: encode in pieces of a multiple of 3 bytes. */
    while (len > 0) {
        size_t piece = len > 3 * (1u << 20) ? 3 * (1u << 20) : len;
        n += (size_t) EVP_EncodeBlock((unsigned char *) out + n, src, (int) piece);
        src += piece;
        len -= piece;
    }
    out[n] = '\0';
    return n;
}

static int duda_b64_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/';
}

long duda_b64_decode(const char *src, size_t len, unsigned char *out)
{
    size_t pad = 0;

    if (len % 4 != 0 || len > (size_t) 1 << 30) {
        return -1;
    }
    if (len > 0 && src[len - 1] == '=') {
        pad = len > 1 && src[len - 2] == '=' ? 2 : 1;
    }
    for (size_t i = 0; i < len - pad; i++) {
        if (!duda_b64_char((unsigned char) src[i])) {
            return -1;
        }
    }
    if (len == 0) {
        out[0] = '\0';
        return 0;
    }
    int n = EVP_DecodeBlock(out, (const unsigned char *) src, (int) len);
    if (n < 0 || (size_t) n < pad) {
        return -1;
    }
    n -= (int) pad;
    out[n] = '\0';
    return n;
}
