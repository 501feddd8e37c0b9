/*
 * duda/packages/base64/base64.c: the base64 package (README.md), on b64.c.
 */
#include <duda/duda_package.h>
#include <stdlib.h>

#include "b64.h"
#include "base64.h"

/* n bytes for dr (freed at its end) or for the caller (dr NULL). */
static void *base64_alloc(duda_request_t *dr, size_t n)
{
    return dr ? gc->alloc(dr, n) : malloc(n);
}

static char *base64_encode(duda_request_t *dr, const void *src, size_t len, size_t *out_len)
{
    if (!src && len) {
        return NULL;
    }
    char *out = base64_alloc(dr, DUDA_B64_ENCODED_SIZE(len));
    if (!out) {
        return NULL;
    }
    size_t n = duda_b64_encode(src, len, out);
    if (out_len) {
        *out_len = n;
    }
    return out;
}

static unsigned char *base64_decode(duda_request_t *dr, const char *src, size_t len,
                                    size_t *out_len)
{
    if (!src || len % 4 != 0) {
        return NULL;
    }
    unsigned char *out = malloc(DUDA_B64_DECODED_SIZE(len));
    if (!out) {
        return NULL;
    }
    long n = duda_b64_decode(src, len, out);
    if (n < 0 || (dr && gc->add(dr, out) != 0)) {
        free(out);
        return NULL;
    }
    if (out_len) {
        *out_len = (size_t) n;
    }
    return out;
}

static const struct duda_base64_api base64_api = {
    .size = sizeof(base64_api),
    .encode = base64_encode,
    .decode = base64_decode,
};

DUDA_PACKAGE("base64", "1.0", &base64_api, NULL, NULL);
