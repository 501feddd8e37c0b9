/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_sha.c: the digests and HMAC of the sha1 and sha256 packages (sha.c)
 * against FIPS 180 and RFC 2202 / RFC 4231 vectors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "sha.h"

static void hex_of(const EVP_MD *md, const char *data, char *out)
{
    unsigned char d[EVP_MAX_MD_SIZE];
    duda_sha_digest(md, data, strlen(data), d);
    duda_sha_hex(d, (size_t) EVP_MD_get_size(md), out);
}

static void hmac_of(const EVP_MD *md, const char *key, const char *data, char *out)
{
    unsigned char d[EVP_MAX_MD_SIZE];
    duda_sha_hmac(md, key, strlen(key), data, strlen(data), d);
    duda_sha_hex(d, (size_t) EVP_MD_get_size(md), out);
}

static void test_digests(void **state)
{
    (void) state;
    char out[2 * EVP_MAX_MD_SIZE + 1];
    hex_of(EVP_sha1(), "abc", out);
    assert_string_equal(out, "a9993e364706816aba3e25717850c26c9cd0d89d");
    hex_of(EVP_sha1(), "", out);
    assert_string_equal(out, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    hex_of(EVP_sha256(), "abc", out);
    assert_string_equal(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void test_hmac(void **state)
{
    (void) state;
    char out[2 * EVP_MAX_MD_SIZE + 1];
    /* RFC 2202 test 2 and RFC 4231 test 2: key "Jefe". */
    hmac_of(EVP_sha1(), "Jefe", "what do ya want for nothing?", out);
    assert_string_equal(out, "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79");
    hmac_of(EVP_sha256(), "Jefe", "what do ya want for nothing?", out);
    assert_string_equal(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    /* An empty key is a key of zero bytes, not "no key". */
    hmac_of(EVP_sha256(), "", "", out);
    assert_string_equal(out, "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_digests),
        cmocka_unit_test(test_hmac),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
