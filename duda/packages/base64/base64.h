/*
 * <duda/packages/base64.h>: the base64 package (duda/packages/base64/README.md).
 *
 *     static const struct duda_base64_api *base64;
 *     duda_load_package(base64, "base64");          in duda_main()
 */
#ifndef DUDA_PACKAGES_BASE64_H
#define DUDA_PACKAGES_BASE64_H

#include <duda/duda.h>

struct duda_base64_api {
    size_t size;
    /*
     * Encode len bytes (RFC 4648, standard alphabet, padded): a NUL
     * terminated string, its length in *out_len (may be NULL). With a dr it
     * is freed when the request ends; with NULL the caller frees it. NULL
     * when out of memory.
     */
    char *(*encode)(duda_request_t *dr, const void *src, size_t len, size_t *out_len);
    /*
     * Decode len characters: the bytes, NUL terminated, their number in
     * *out_len (may be NULL); freed like encode's. NULL for bad input (a
     * length not a multiple of 4, a character outside the alphabet,
     * misplaced '=') or when out of memory.
     */
    unsigned char *(*decode)(duda_request_t *dr, const char *src, size_t len, size_t *out_len);
};

#endif
