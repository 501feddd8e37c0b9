/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * strings.h: length-delimited strings and the few helpers the parsers share.
 * Nothing here allocates; everything is locale independent (HTTP is ASCII).
 */
#ifndef MK_CORE_STRINGS_H
#define MK_CORE_STRINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A view into someone else's bytes; not NUL terminated. */
struct mk_str {
    const char *p;
    size_t len;
};

#define MK_STR(lit) ((struct mk_str){(lit), sizeof(lit) - 1})

static inline struct mk_str mk_str_make(const char *p, size_t len)
{
    return (struct mk_str){p, len};
}

static inline char mk_tolower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char) (c | 0x20) : c;
}

static inline bool mk_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* ASCII case-insensitive equality of `a` (length `alen`) and C string `b`. */
bool mk_str_ieq(const char *a, size_t alen, const char *b);
/* Exact equality. */
static inline bool mk_str_eq(const char *a, size_t alen, const char *b)
{
    size_t blen = strlen(b);
    return alen == blen && memcmp(a, b, alen) == 0;
}

/* Case-insensitive prefix test. */
bool mk_str_iprefix(const char *a, size_t alen, const char *prefix);

/*
 * Parse a decimal number made of digits only (no sign, no spaces) into
 * `*out`. Returns false on an empty string, a non-digit or overflow past
 * `max`.
 */
bool mk_str_to_u64(const char *p, size_t len, uint64_t max, uint64_t *out);

/*
 * Parse a duration into milliseconds: digits followed by an optional unit,
 * `ms`, `s`, `m` or `h` (lowercase, no space before it). Without a unit the
 * number counts seconds ("30" is 30 s). Returns false on anything else or
 * when the value exceeds `max_ms`.
 */
bool mk_str_to_duration_ms(const char *p, size_t len, uint64_t max_ms, uint64_t *out);

/* Write `ms` as a duration text ("1500ms", "30s") into `buf` (at least 24 bytes). */
void mk_duration_to_str(uint64_t ms, char *buf);

/* Strip spaces and horizontal tabs at both ends. */
static inline struct mk_str mk_str_trim(struct mk_str s)
{
    while (s.len && (s.p[0] == ' ' || s.p[0] == '\t')) {
        s.p++;
        s.len--;
    }
    while (s.len && (s.p[s.len - 1] == ' ' || s.p[s.len - 1] == '\t')) {
        s.len--;
    }
    return s;
}

/*
 * Comma-separated list iteration (RFC 9110 section 5.6.1): each call returns
 * the next non-empty element, trimmed, advancing `*cursor`. Returns false at
 * the end. Quoted strings are not special-cased; callers that need them (ETag
 * lists) use their own parser.
 */
bool mk_str_list_next(struct mk_str *cursor, struct mk_str *item);

#endif
