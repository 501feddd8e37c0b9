/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_compress.c: server/http/compress.c, one-shot compression into br and
 * gzip: the output decodes to the input, its worst case holds, a result not
 * smaller than the input is declined, a coding not built is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <monkey/mk_common.h>

#include "core/memory.h"
#include "server/http/compress.h"

#ifdef MK_HAVE_ZLIB
#include <zlib.h>
#endif
#ifdef MK_TEST_BROTLIDEC
#include <brotli/decode.h>
#endif

/* Text that compresses: words from a small set, in a fixed pseudo-random order. */
static char *mk_test_text(size_t n)
{
    static const char *const words[] = {"function ", "return ", "var ", "this.", "(",    ");\n",
                                        "document",  "window",  " = ",  "null",  "true", "if "};
    char *s = malloc(n + 16);
    uint32_t x = 12345;
    size_t len = 0;

    while (len < n) {
        x = x * 1103515245u + 12345u;
        const char *w = words[(x >> 16) % (sizeof(words) / sizeof(words[0]))];
        size_t wl = strlen(w);
        memcpy(s + len, w, wl);
        len += wl;
    }
    return s;
}

static void mk_test_noise(char *s, size_t n)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s[i] = (char) (x >> 24);
    }
}

#ifdef MK_HAVE_ZLIB
static void mk_test_gunzip(const char *in, size_t len, const char *want, size_t want_len)
{
    z_stream zs;
    char *out = malloc(want_len + 1);

    memset(&zs, 0, sizeof(zs));
    assert_int_equal(inflateInit2(&zs, 15 + 16), Z_OK);
    zs.next_in = (Bytef *) (uintptr_t) in;
    zs.avail_in = (uInt) len;
    zs.next_out = (Bytef *) out;
    zs.avail_out = (uInt) want_len + 1;
    assert_int_equal(inflate(&zs, Z_FINISH), Z_STREAM_END);
    assert_int_equal(zs.total_out, want_len);
    assert_memory_equal(out, want, want_len);
    inflateEnd(&zs);
    free(out);
}

static void test_gzip_round_trip(void **state)
{
    (void) state;
    static const size_t sizes[] = {300, 4096, 100000, 1u << 20};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char *in = mk_test_text(sizes[i]), *out;
        size_t out_len;
        for (int level = MK_COMPRESS_GZIP_MIN; level <= MK_COMPRESS_GZIP_MAX; level += 4) {
            assert_int_equal(mk_compress(MK_CODING_GZIP, level, in, sizes[i], &out, &out_len),
                             MK_OK);
            assert_true(out_len < (sizes[i] < 4096 ? sizes[i] : sizes[i] / 2));
            assert_true(out_len <= mk_compress_bound(MK_CODING_GZIP, sizes[i]));
            /* a gzip member: magic, deflate, modification time 0 */
            assert_int_equal((unsigned char) out[0], 0x1f);
            assert_int_equal((unsigned char) out[1], 0x8b);
            assert_int_equal(out[2], 8);
            assert_memory_equal(out + 4, "\0\0\0\0", 4);
            mk_test_gunzip(out, out_len, in, sizes[i]);
            mk_free(out);
        }
        free(in);
    }
}
#endif

#ifdef MK_TEST_BROTLIDEC
static void test_br_round_trip(void **state)
{
    (void) state;
    static const size_t sizes[] = {300, 4096, 100000, 1u << 20, 5u << 20};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char *in = mk_test_text(sizes[i]), *out;
        size_t out_len;
        for (int level = MK_COMPRESS_BR_MIN; level <= MK_COMPRESS_BR_MAX; level += 5) {
            if (level > 5 && sizes[i] > 100000) {
                continue; /* the highest levels take seconds on megabytes */
            }
            assert_int_equal(mk_compress(MK_CODING_BR, level, in, sizes[i], &out, &out_len), MK_OK);
            assert_true(out_len < (sizes[i] < 4096 ? sizes[i] : sizes[i] / 2));
            assert_true(out_len <= mk_compress_bound(MK_CODING_BR, sizes[i]));
            char *back = malloc(sizes[i]);
            size_t back_len = sizes[i];
            assert_int_equal(BrotliDecoderDecompress(out_len, (const uint8_t *) out, &back_len,
                                                     (uint8_t *) back),
                             BROTLI_DECODER_RESULT_SUCCESS);
            assert_int_equal(back_len, sizes[i]);
            assert_memory_equal(back, in, sizes[i]);
            free(back);
            mk_free(out);
        }
        free(in);
    }
}
#endif

/* Random bytes do not shrink: declined, nothing returned. */
static void test_incompressible_is_declined(void **state)
{
    (void) state;
    char in[4096], *out = (char *) 1;
    size_t out_len = 7;

    mk_test_noise(in, sizeof(in));
    for (int c = 0; c < MK_CODING_N_VARIANTS; c++) {
        if (!(mk_compress_built() & MK_CODING_BIT(c))) {
            continue;
        }
        assert_int_equal(mk_compress((enum mk_coding) c, 5, in, sizeof(in), &out, &out_len),
                         MK_DECLINED);
        assert_null(out);
        assert_int_equal(out_len, 0);
    }
}

/* zstd is never compressed here, nor a coding this build left out. */
static void test_codings_built(void **state)
{
    (void) state;
    char *out;
    size_t out_len;
    char *in = mk_test_text(1000);

    assert_int_equal(
        mk_compress_built() & ~(MK_CODING_BIT(MK_CODING_BR) | MK_CODING_BIT(MK_CODING_GZIP)), 0);
    assert_int_equal(mk_compress(MK_CODING_ZSTD, 3, in, 1000, &out, &out_len), MK_ERR);
    assert_int_equal(mk_compress_bound(MK_CODING_ZSTD, 1000), 0);
#ifdef MK_HAVE_BROTLI
    assert_true(mk_compress_built() & MK_CODING_BIT(MK_CODING_BR));
#else
    assert_int_equal(mk_compress(MK_CODING_BR, 5, in, 1000, &out, &out_len), MK_ERR);
#endif
#ifdef MK_HAVE_ZLIB
    assert_true(mk_compress_built() & MK_CODING_BIT(MK_CODING_GZIP));
#else
    assert_int_equal(mk_compress(MK_CODING_GZIP, 6, in, 1000, &out, &out_len), MK_ERR);
#endif
    free(in);
}

/* The same bytes and level give the same output: entity tags stay true. */
static void test_deterministic(void **state)
{
    (void) state;
    char *in = mk_test_text(50000);

    for (int c = 0; c < MK_CODING_N_VARIANTS; c++) {
        char *a, *b;
        size_t alen, blen;
        if (!(mk_compress_built() & MK_CODING_BIT(c))) {
            continue;
        }
        assert_int_equal(mk_compress((enum mk_coding) c, 5, in, 50000, &a, &alen), MK_OK);
        assert_int_equal(mk_compress((enum mk_coding) c, 5, in, 50000, &b, &blen), MK_OK);
        assert_int_equal(alen, blen);
        assert_memory_equal(a, b, alen);
        mk_free(a);
        mk_free(b);
    }
    free(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#ifdef MK_HAVE_ZLIB
        cmocka_unit_test(test_gzip_round_trip),
#endif
#ifdef MK_TEST_BROTLIDEC
        cmocka_unit_test(test_br_round_trip),
#endif
        cmocka_unit_test(test_incompressible_is_declined),
        cmocka_unit_test(test_codings_built),
        cmocka_unit_test(test_deterministic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
