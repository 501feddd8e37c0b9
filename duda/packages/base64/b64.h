/*
 * duda/packages/base64/b64.h: the base64 codec (RFC 4648, standard
 * alphabet, with padding) on libcrypto's EVP_EncodeBlock/EVP_DecodeBlock,
 * with the checks libcrypto leaves out. Pure: no allocation, no globals;
 * tests/unit/duda/test_packages.c tests it.
 */
#ifndef DUDA_PKG_B64_H
#define DUDA_PKG_B64_H

#include <stddef.h>

/* Room encoding `len` bytes needs, with the NUL. */
#define DUDA_B64_ENCODED_SIZE(len) (((len) + 2) / 3 * 4 + 1)
/* Room decoding `len` characters needs (an upper bound), with a NUL. */
#define DUDA_B64_DECODED_SIZE(len) ((len) / 4 * 3 + 3)

/* Encode src into out (DUDA_B64_ENCODED_SIZE(len) bytes), NUL terminated: the length. */
size_t duda_b64_encode(const unsigned char *src, size_t len, char *out);

/*
 * Decode `len` characters (a multiple of 4, the alphabet, '=' only as the
 * last one or two) into out (DUDA_B64_DECODED_SIZE(len) bytes), NUL
 * terminated. The length, or -1 for bad input.
 */
long duda_b64_decode(const char *src, size_t len, unsigned char *out);

#endif
