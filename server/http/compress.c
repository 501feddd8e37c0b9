/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * compress.c: see compress.h.
 *
 * Both libraries are called in their one-shot form into a buffer of their
 * worst-case size, which is then shrunk to what was written: no stream
 * state survives a call, and no loop over partial outputs is needed for
 * files of a few megabytes.
 */
#include "compress.h"

#include <stdint.h>
#include <string.h>

#include <monkey/mk_common.h>

#include "../../core/memory.h"

#ifdef MK_HAVE_BROTLI
#include <brotli/encode.h>
#endif
#ifdef MK_HAVE_ZLIB
#include <zlib.h>
#endif

unsigned mk_compress_built(void)
{
    unsigned m = 0;
#ifdef MK_HAVE_BROTLI
    m |= MK_CODING_BIT(MK_CODING_BR);
#endif
#ifdef MK_HAVE_ZLIB
    m |= MK_CODING_BIT(MK_CODING_GZIP);
#endif
    return m;
}

#ifdef MK_HAVE_BROTLI
/*
 * The smallest window (in bits, BROTLI_MIN_WINDOW_BITS to the default of
 * 22) that holds the whole input: a larger one finds nothing more, and
 * costs the encoder memory.
 */
static int mk_compress_br_window(size_t len)
{
    int bits = BROTLI_MIN_WINDOW_BITS;

    while (bits < BROTLI_DEFAULT_WINDOW && ((size_t) 1 << bits) - 16 < len) {
        bits++;
    }
    return bits;
}
#endif

size_t mk_compress_bound(enum mk_coding c, size_t len)
{
    switch (c) {
#ifdef MK_HAVE_BROTLI
    case MK_CODING_BR:
        return BrotliEncoderMaxCompressedSize(len);
#endif
#ifdef MK_HAVE_ZLIB
    case MK_CODING_GZIP:
        if (len > UINT32_MAX / 2) {
            return 0; /* deflate's counts are 32-bit */
        }
        /* compressBound() is for the zlib wrapper (6 bytes); the gzip one
           takes 18. */
        return compressBound((uLong) len) + 12;
#endif
    default:
        (void) len;
        return 0;
    }
}

#ifdef MK_HAVE_ZLIB
static int mk_compress_gzip(int level, const void *in, size_t len, char *out, size_t cap,
                            size_t *out_len)
{
    z_stream zs;

    memset(&zs, 0, sizeof(zs));
    /* windowBits 15 + 16: the gzip wrapper; memLevel 8: zlib's default. */
    if (deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        return MK_ERR;
    }
    zs.next_in = (Bytef *) (uintptr_t) in;
    zs.avail_in = (uInt) len;
    zs.next_out = (Bytef *) out;
    zs.avail_out = (uInt) cap;
    int rc = deflate(&zs, Z_FINISH);
    *out_len = (size_t) zs.total_out;
    deflateEnd(&zs);
    return rc == Z_STREAM_END ? MK_OK : MK_ERR;
}
#endif

int mk_compress(enum mk_coding c, int level, const void *in, size_t len, char **out,
                size_t *out_len)
{
    size_t cap = mk_compress_bound(c, len), n = 0;
    int rc = MK_ERR;

    *out = NULL;
    *out_len = 0;
    if (cap == 0) {
        return MK_ERR;
    }
    char *buf = mk_try_alloc(cap);
    if (!buf) {
        return MK_ERR;
    }
    switch (c) {
#ifdef MK_HAVE_BROTLI
    case MK_CODING_BR:
        n = cap;
        rc = BrotliEncoderCompress(level, mk_compress_br_window(len), BROTLI_MODE_GENERIC, len,
                                   (const uint8_t *) in, &n, (uint8_t *) buf)
                 ? MK_OK
                 : MK_ERR;
        break;
#endif
#ifdef MK_HAVE_ZLIB
    case MK_CODING_GZIP:
        rc = mk_compress_gzip(level, in, len, buf, cap, &n);
        break;
#endif
    default:
        (void) level;
        (void) in;
        break;
    }
    if (rc != MK_OK || n >= len) {
        mk_free(buf);
        return rc == MK_OK ? MK_DECLINED : MK_ERR;
    }
    char *shrunk = mk_try_realloc(buf, n ? n : 1);
    *out = shrunk ? shrunk : buf;
    *out_len = n;
    return MK_OK;
}
