/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_duda_base64.c: libFuzzer target for the Duda base64 package's codec
 * (duda/packages/base64/b64.c): decoding is outside input.
 *
 * Invariants (each a crash when broken):
 *  - decoding writes at most DUDA_B64_DECODED_SIZE(len) bytes, NUL
 *    terminated, and accepts only lengths that are multiples of 4;
 *  - what decodes encodes back to a text of the same length that decodes
 *    to the same bytes (unused low bits of the last character may differ);
 *  - anything encodes to a length of 4 * ceil(n / 3) that decodes back.
 */
#include <stdlib.h>
#include <string.h>

#include "duda/packages/base64/b64.h"

#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *dec = malloc(DUDA_B64_DECODED_SIZE(size));
    char *enc = malloc(DUDA_B64_ENCODED_SIZE(size));
    long n = duda_b64_decode((const char *) data, size, dec);
    if (n >= 0) {
        MK_FUZZ_CHECK(size % 4 == 0 && (size_t) n <= size / 4 * 3 && dec[n] == '\0');
        char *back = malloc(DUDA_B64_ENCODED_SIZE((size_t) n));
        size_t m = duda_b64_encode(dec, (size_t) n, back);
        /* Non-canonical trailing bits ("Zh==") decode too: compare the decoded bytes instead. */
        unsigned char *again = malloc(DUDA_B64_DECODED_SIZE(m));
        MK_FUZZ_CHECK(m == size && duda_b64_decode(back, m, again) == n);
        MK_FUZZ_CHECK(memcmp(again, dec, (size_t) n) == 0);
        free(again);
        free(back);
    }
    size_t m = duda_b64_encode(data, size, enc);
    MK_FUZZ_CHECK(m == (size + 2) / 3 * 4 && strlen(enc) == m);
    unsigned char *round = malloc(DUDA_B64_DECODED_SIZE(m));
    MK_FUZZ_CHECK(duda_b64_decode(enc, m, round) == (long) size);
    MK_FUZZ_CHECK(size == 0 || memcmp(round, data, size) == 0);
    free(round);
    free(enc);
    free(dec);
    return 0;
}
