/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/qs.h: the pure parsers behind the qs object: a query string's
 * key=value pairs and their decoding (application/x-www-form-urlencoded).
 * No I/O, no allocation, no globals (tests/unit/duda/test_qs.c,
 * tests/fuzz/fuzz_duda_qs.c).
 */
#ifndef DUDA_QS_H
#define DUDA_QS_H

#include <stddef.h>

/*
 * The value of the first pair whose key is `key` (key_len bytes, compared
 * exactly, not decoded) in the query q of n bytes: pairs are separated by
 * '&' (an empty one is no pair), the key ends at the pair's first '='. A
 * span into q of *len bytes (0 for a pair without '='), or NULL when there
 * is no such pair.
 */
const char *duda_qs_find(const char *q, size_t n, const char *key, size_t key_len, size_t *len);

/* The number of non-empty '&'-separated pairs of the query q of n bytes. */
size_t duda_qs_count(const char *q, size_t n);

/*
 * Decode the n bytes at v into out (room for n bytes; no NUL written): '+'
 * is a space, '%' and two hexadecimal digits the byte they give (%00
 * included), any other '%' stays as it is. Returns the decoded length.
 */
size_t duda_qs_decode(const char *v, size_t n, char *out);

#endif
