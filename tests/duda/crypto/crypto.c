/*
 * The base64, sha1 and sha256 packages loaded by a service, every function
 * of each through HTTP. The request body is the input; `?key=HEX` is the
 * HMAC key; `?own=1` calls the function with a NULL request and frees the
 * result itself (the other way of allocating).
 *
 *   POST /crypto/base64/encode     the text
 *   POST /crypto/base64/decode     the bytes, 400 for bad input
 *   POST /crypto/ALG/digest        the raw digest (ALG: sha1 or sha256)
 *   POST /crypto/ALG/hex           the digest in hex
 *   POST /crypto/ALG/hmac?key=K    the raw HMAC
 *   POST /crypto/ALG/hmac_hex?key=K
 */
#include <stdlib.h>
#include <string.h>

#include <duda/duda.h>
#include <duda/packages/base64.h>
#include <duda/packages/sha1.h>
#include <duda/packages/sha256.h>

DUDA_REGISTER("The base64, sha1 and sha256 packages", "crypto");

static const struct duda_base64_api *base64;
static const struct duda_sha1_api *sha1;
static const struct duda_sha256_api *sha256;

/* One digest package seen through one shape: both APIs have the same functions. */
struct crypto_alg {
    size_t len;
    void (*digest)(const void *data, size_t len, unsigned char *out);
    char *(*hex)(duda_request_t *dr, const void *data, size_t len);
    void (*hmac)(const void *key, size_t keylen, const void *data, size_t len, unsigned char *out);
    char *(*hmac_hex)(duda_request_t *dr, const void *key, size_t keylen, const void *data,
                      size_t len);
};

static void crypto_answer(duda_request_t *dr, int status, const char *type, const void *data,
                          size_t len)
{
    response->http_status(dr, status);
    response->http_content_type(dr, type);
    response->print(dr, data, len);
    response->end(dr, NULL);
}

static int crypto_own(duda_request_t *dr)
{
    const char *own = qs->get(dr, "own");
    return own && strcmp(own, "1") == 0;
}

/* ?key=HEX decoded into a buffer freed with the request: its length, or -1 for bad hex. */
static long crypto_key(duda_request_t *dr, unsigned char **out)
{
    const char *hex = qs->get(dr, "key");
    size_t n = hex ? strlen(hex) : 0;

    if (n % 2) {
        return -1;
    }
    *out = gc->alloc(dr, n / 2 + 1);
    if (!*out) {
        return -1;
    }
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v = 0;
        for (size_t j = 0; j < 2; j++) {
            char c = hex[2 * i + j];
            v <<= 4;
            if (c >= '0' && c <= '9') {
                v |= (unsigned) (c - '0');
            }
            else if (c >= 'a' && c <= 'f') {
                v |= (unsigned) (c - 'a' + 10);
            }
            else {
                return -1;
            }
        }
        (*out)[i] = (unsigned char) v;
    }
    return (long) (n / 2);
}

static void cb_encode(duda_request_t *dr)
{
    size_t len, n = 0;
    const char *body = request->body(dr, &len);
    char *text = base64->encode(crypto_own(dr) ? NULL : dr, body, len, &n);

    if (!text) {
        crypto_answer(dr, 500, "text/plain", "out of memory\n", 14);
        return;
    }
    crypto_answer(dr, 200, "text/plain", text, n);
    if (crypto_own(dr)) {
        free(text);
    }
}

static void cb_decode(duda_request_t *dr)
{
    size_t len, n = 0;
    const char *body = request->body(dr, &len);
    unsigned char *raw = base64->decode(crypto_own(dr) ? NULL : dr, body, len, &n);

    if (!raw) {
        crypto_answer(dr, 400, "text/plain", "not base64\n", 11);
        return;
    }
    crypto_answer(dr, 200, "application/octet-stream", raw, n);
    if (crypto_own(dr)) {
        free(raw);
    }
}

/* POST /ALG/:fn */
static void crypto_run(duda_request_t *dr, const struct crypto_alg *alg)
{
    const char *fn = param->get(dr, "fn");
    size_t len;
    const char *body = request->body(dr, &len);
    unsigned char md[64], *key = NULL;
    char *hex = NULL;
    long keylen = 0;
    int own = crypto_own(dr);

    if (strncmp(fn, "hmac", 4) == 0) {
        keylen = crypto_key(dr, &key);
        if (keylen < 0) {
            crypto_answer(dr, 400, "text/plain", "bad key\n", 8);
            return;
        }
    }
    if (strcmp(fn, "digest") == 0) {
        alg->digest(body, len, md);
        crypto_answer(dr, 200, "application/octet-stream", md, alg->len);
        return;
    }
    if (strcmp(fn, "hmac") == 0) {
        alg->hmac(key, (size_t) keylen, body, len, md);
        crypto_answer(dr, 200, "application/octet-stream", md, alg->len);
        return;
    }
    if (strcmp(fn, "hex") == 0) {
        hex = alg->hex(own ? NULL : dr, body, len);
    }
    else if (strcmp(fn, "hmac_hex") == 0) {
        hex = alg->hmac_hex(own ? NULL : dr, key, (size_t) keylen, body, len);
    }
    else {
        crypto_answer(dr, 404, "text/plain", "no such function\n", 17);
        return;
    }
    if (!hex) {
        crypto_answer(dr, 500, "text/plain", "out of memory\n", 14);
        return;
    }
    crypto_answer(dr, 200, "text/plain", hex, strlen(hex));
    if (own) {
        free(hex);
    }
}

static void cb_sha1(duda_request_t *dr)
{
    const struct crypto_alg alg = {DUDA_SHA1_LEN, sha1->digest, sha1->hex, sha1->hmac,
                                   sha1->hmac_hex};
    crypto_run(dr, &alg);
}

static void cb_sha256(duda_request_t *dr)
{
    const struct crypto_alg alg = {DUDA_SHA256_LEN, sha256->digest, sha256->hex, sha256->hmac,
                                   sha256->hmac_hex};
    crypto_run(dr, &alg);
}

int duda_main(void)
{
    duda_load_package(base64, "base64");
    duda_load_package(sha1, "sha1");
    duda_load_package(sha256, "sha256");
    if (!base64 || !sha1 || !sha256) {
        return -1;
    }
    router->map("/base64/encode", DUDA_POST, cb_encode);
    router->map("/base64/decode", DUDA_POST, cb_decode);
    router->map("/sha1/:fn", DUDA_POST, cb_sha1);
    router->map("/sha256/:fn", DUDA_POST, cb_sha256);
    return 0;
}
