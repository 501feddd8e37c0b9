/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_b64.c: the base64 codec of the base64 package (b64.c): the RFC 4648
 * vectors both ways, and the inputs decoding must refuse.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "b64.h"

static const char *const vectors[][2] = {
    {"", ""},
    {"f", "Zg=="},
    {"fo", "Zm8="},
    {"foo", "Zm9v"},
    {"foob", "Zm9vYg=="},
    {"fooba", "Zm9vYmE="},
    {"foobar", "Zm9vYmFy"},
};

static void test_rfc4648_vectors(void **state)
{
    (void) state;
    for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
        const char *plain = vectors[i][0], *coded = vectors[i][1];
        char enc[DUDA_B64_ENCODED_SIZE(6)];
        unsigned char dec[DUDA_B64_DECODED_SIZE(8)];

        assert_int_equal(duda_b64_encode((const unsigned char *) plain, strlen(plain), enc),
                         strlen(coded));
        assert_string_equal(enc, coded);
        assert_int_equal(duda_b64_decode(coded, strlen(coded), dec), (long) strlen(plain));
        assert_memory_equal(dec, plain, strlen(plain));
        assert_int_equal(dec[strlen(plain)], 0);
    }
}

static void test_binary_round_trip(void **state)
{
    (void) state;
    unsigned char bytes[256], dec[DUDA_B64_DECODED_SIZE(DUDA_B64_ENCODED_SIZE(256))];
    char enc[DUDA_B64_ENCODED_SIZE(256)];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (unsigned char) (255 - i);
    }
    size_t n = duda_b64_encode(bytes, sizeof(bytes), enc);
    assert_int_equal(n, 344);
    assert_int_equal(duda_b64_decode(enc, n, dec), 256);
    assert_memory_equal(dec, bytes, 256);
}

static void test_bad_input_refused(void **state)
{
    (void) state;
    static const char *const bad[] = {
        "Zg=",      /* not a multiple of 4 */
        "Zg==Zg==", /* padding in the middle */
        "Z===",     /* three '=' */
        "Zm9v\n",   /* a newline */
        "Zm 9",     /* a space */
        "Zm-_",     /* the URL alphabet */
        "====",     /* padding only */
    };
    unsigned char dec[16];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(duda_b64_decode(bad[i], strlen(bad[i]), dec), -1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc4648_vectors),
        cmocka_unit_test(test_binary_round_trip),
        cmocka_unit_test(test_bad_input_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
