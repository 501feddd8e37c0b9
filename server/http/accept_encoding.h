/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * accept_encoding.h: choosing a content coding from Accept-Encoding
 * (RFC 9110 section 12.5.3), for precompressed variants of static files.
 *
 * Pure: bytes in, a choice out; no allocation, no I/O, no globals.
 */
#ifndef MK_SERVER_ACCEPT_ENCODING_H
#define MK_SERVER_ACCEPT_ENCODING_H

#include <stddef.h>

/* The codings a variant may have, in the server's order of preference. */
enum mk_coding {
    MK_CODING_BR = 0,
    MK_CODING_ZSTD,
    MK_CODING_GZIP,
    MK_CODING_IDENTITY, /* the file itself */
    MK_CODING_NONE,     /* nothing acceptable (identity refused) */
};
#define MK_CODING_N_VARIANTS 3
#define MK_CODING_BIT(c) (1u << (c))

/* "br", "zstd", "gzip", "identity"; the file suffix is ".br", ".zst", ".gz". */
const char *mk_accept_coding_name(enum mk_coding c);
const char *mk_accept_coding_suffix(enum mk_coding c);

/*
 * The quality in thousandths (0..1000) the Accept-Encoding value `v` gives
 * each coding, into q[MK_CODING_NONE] (br, zstd, gzip, identity). A coding
 * not named takes the value of "*" when there is one; else 0 for br, zstd
 * and gzip, and 1 for identity: acceptable unless refused (RFC 9110
 * section 12.5.3) but below any coding the client names. "x-gzip" is
 * gzip. A member that does not parse (bad token, bad q) is ignored, as are
 * the others' parameters. When a coding is named several times, the
 * highest quality counts. An empty value accepts identity
 * only.
 */
void mk_accept_encoding_q(const char *v, size_t len, unsigned q[MK_CODING_NONE]);

/*
 * The coding to send for Accept-Encoding value `v` (NULL: the header is
 * absent, anything goes: identity), among the variants present in
 * `available` (MK_CODING_BIT of br, zstd, gzip; identity is always
 * present): the highest quality above zero wins, ties go to br, then zstd,
 * then gzip, then identity. MK_CODING_NONE when every present coding is
 * refused (the caller sends identity anyway or answers 406).
 */
enum mk_coding mk_accept_encoding_choose(const char *v, size_t len, unsigned available);

/*
 * mk_accept_encoding_choose() from the qualities mk_accept_encoding_q()
 * gave: for a caller that chooses again among fewer codings (a variant
 * missing, a file that does not compress) without parsing the value again.
 */
enum mk_coding mk_accept_encoding_pick(const unsigned q[MK_CODING_NONE], unsigned available);

#endif
