/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_accept_encoding.c: unit tests of server/http/accept_encoding.c (the
 * qualities an Accept-Encoding value gives, and the coding chosen among the
 * precompressed variants present).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server/http/accept_encoding.h"

#define BR MK_CODING_BIT(MK_CODING_BR)
#define ZS MK_CODING_BIT(MK_CODING_ZSTD)
#define GZ MK_CODING_BIT(MK_CODING_GZIP)
#define ALL (BR | ZS | GZ)

static const struct {
    const char *value; /* NULL: no header */
    unsigned available;
    enum mk_coding want;
} choices[] = {
    {NULL, ALL, MK_CODING_IDENTITY},
    {"", ALL, MK_CODING_IDENTITY},
    {"gzip", ALL, MK_CODING_GZIP},
    {"x-gzip", ALL, MK_CODING_GZIP},
    {"GZIP", ALL, MK_CODING_GZIP},
    {"gzip, deflate, br, zstd", ALL, MK_CODING_BR},       /* tie: the server's order */
    {"gzip, deflate, br, zstd", ZS | GZ, MK_CODING_ZSTD}, /* br missing */
    {"gzip, deflate, br, zstd", GZ, MK_CODING_GZIP},
    {"gzip, deflate, br, zstd", 0, MK_CODING_IDENTITY},
    {"br;q=0.5, gzip;q=0.8", ALL, MK_CODING_GZIP},
    {"br;q=0.5, gzip;q=0.8, zstd;q=0.9", ALL, MK_CODING_ZSTD},
    {"br;q=0, gzip", ALL, MK_CODING_GZIP},
    {"br;q=0, gzip;q=0", ALL, MK_CODING_IDENTITY},
    {"gzip;q=0.5, identity", ALL, MK_CODING_IDENTITY}, /* identity rates higher */
    {"gzip;q=1, identity;q=1", ALL, MK_CODING_GZIP},   /* tie: a variant first */
    {"identity", ALL, MK_CODING_IDENTITY},
    {"*", ALL, MK_CODING_BR},
    {"*;q=0.5, gzip", ALL, MK_CODING_GZIP},
    {"*;q=0", ALL, MK_CODING_NONE}, /* identity refused too */
    {"*;q=0, identity", ALL, MK_CODING_IDENTITY},
    {"gzip, identity;q=0", 0, MK_CODING_NONE}, /* nothing acceptable present */
    {"identity;q=0", ALL, MK_CODING_NONE},
    {" gzip ; q=0.3 ,  br ; q = 0.2 ", ALL, MK_CODING_GZIP}, /* spaces around '=' are not OWS */
    {"gzip ;Q=0.3, br;q=0.2", ALL, MK_CODING_GZIP},
    {"br;level=5;q=0.9, gzip;q=0.8", ALL, MK_CODING_BR}, /* other parameters skipped */
    {"br;q=1.5, gzip", ALL, MK_CODING_GZIP},             /* a bad q drops its member */
    {"br;q=0.1234, gzip;q=0.1", ALL, MK_CODING_GZIP},
    {"br;q=, gzip;q=0.1", ALL, MK_CODING_GZIP},
    {"br;q, gzip;q=0.1", ALL, MK_CODING_GZIP},
    {"b@r, gzip;q=0.1", ALL, MK_CODING_GZIP},
    {",,, ,gzip,,", ALL, MK_CODING_GZIP},
    {"gzip;q=0, gzip;q=0.5", ALL, MK_CODING_GZIP}, /* named twice: the highest */
    {"compress, deflate", ALL, MK_CODING_IDENTITY},
    {"br;q=0.001", BR, MK_CODING_BR}, /* identity unnamed: the lowest */
    {"br;q=0.001, identity;q=0.002", BR, MK_CODING_IDENTITY},
    {"br;q=0.001, identity;q=0", BR, MK_CODING_BR},
    {"gzip;q=1.000", GZ, MK_CODING_GZIP},
    {"gzip;q=1.", GZ, MK_CODING_GZIP},
    {"gzip;q=0.", GZ, MK_CODING_IDENTITY},
    {"gzip;q=0.8", GZ, MK_CODING_GZIP},
};

static void test_choose(void **state)
{
    (void) state;
    for (size_t i = 0; i < sizeof(choices) / sizeof(choices[0]); i++) {
        const char *v = choices[i].value;
        enum mk_coding got = mk_accept_encoding_choose(v, v ? strlen(v) : 0, choices[i].available);
        if (got != choices[i].want) {
            fail_msg("'%s' (available %#x): got %d, want %d", v ? v : "(none)",
                     choices[i].available, (int) got, (int) choices[i].want);
        }
        if (v) {
            /* the same choice from the qualities parsed once */
            unsigned q[MK_CODING_NONE];
            mk_accept_encoding_q(v, strlen(v), q);
            assert_int_equal(mk_accept_encoding_pick(q, choices[i].available), choices[i].want);
        }
    }
}

static void test_qualities(void **state)
{
    unsigned q[MK_CODING_NONE];
    const char *v = "br;q=0.25, zstd;q=0.7, *;q=0.05";

    (void) state;
    mk_accept_encoding_q(v, strlen(v), q);
    assert_int_equal(q[MK_CODING_BR], 250);
    assert_int_equal(q[MK_CODING_ZSTD], 700);
    assert_int_equal(q[MK_CODING_GZIP], 50);
    assert_int_equal(q[MK_CODING_IDENTITY], 50);

    mk_accept_encoding_q("", 0, q);
    assert_int_equal(q[MK_CODING_BR], 0);
    assert_int_equal(q[MK_CODING_IDENTITY], 1);
}

static void test_names(void **state)
{
    (void) state;
    assert_string_equal(mk_accept_coding_name(MK_CODING_BR), "br");
    assert_string_equal(mk_accept_coding_name(MK_CODING_ZSTD), "zstd");
    assert_string_equal(mk_accept_coding_name(MK_CODING_GZIP), "gzip");
    assert_string_equal(mk_accept_coding_suffix(MK_CODING_BR), ".br");
    assert_string_equal(mk_accept_coding_suffix(MK_CODING_ZSTD), ".zst");
    assert_string_equal(mk_accept_coding_suffix(MK_CODING_GZIP), ".gz");
    assert_string_equal(mk_accept_coding_suffix(MK_CODING_IDENTITY), "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_choose),
        cmocka_unit_test(test_qualities),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
