/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * compress.h: one-shot compression of a buffer into a content coding (br
 * with libbrotlienc, gzip with zlib), for the static files compressed on
 * the fly (static_compress.h).
 *
 * Pure: bytes in, bytes out, no globals; any thread (the task threads call
 * it). A coding whose library was not found at build time
 * (MK_HAVE_BROTLI, MK_HAVE_ZLIB) is missing from mk_compress_built().
 */
#ifndef MK_SERVER_COMPRESS_H
#define MK_SERVER_COMPRESS_H

#include <stddef.h>

#include "accept_encoding.h"

/* The codings this build can compress into: MK_CODING_BIT of br and gzip. */
unsigned mk_compress_built(void);

/* The quality levels a coding takes: br 0 to 11, gzip 1 to 9. */
#define MK_COMPRESS_BR_MIN 0
#define MK_COMPRESS_BR_MAX 11
#define MK_COMPRESS_GZIP_MIN 1
#define MK_COMPRESS_GZIP_MAX 9

/*
 * The most bytes compressing `len` bytes into `c` may take, the output
 * buffer of mk_compress included (the input is not). 0 when the coding is
 * not built or len is too large for it.
 */
size_t mk_compress_bound(enum mk_coding c, size_t len);

/*
 * Compress the `len` bytes at `in` into coding `c` at quality `level`: a
 * whole brotli stream, or a gzip member (RFC 1952: no name, modification
 * time 0, so the output depends on the bytes and the level alone). MK_OK
 * with *out (mk_free) and *out_len set; MK_DECLINED when the result would
 * not be smaller than the input (nothing to gain: *out NULL); MK_ERR when
 * memory is short, the coding is not built or its library fails.
 */
int mk_compress(enum mk_coding c, int level, const void *in, size_t len, char **out,
                size_t *out_len);

#endif
