/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * http_chars.h: the character classes of RFC 9110 that the request parser
 * (http_parser.c) and the chunked decoder (http_chunked.c) hold bytes to.
 * Pure; private to server/http.
 */
#ifndef MK_SERVER_HTTP_CHARS_H
#define MK_SERVER_HTTP_CHARS_H

#include <stdbool.h>
#include <stdint.h>

#include "../../core/strings.h"

/*
 * tchar (RFC 9110 section 5.6.2): 3, upper-case letters 1
 * (MK_HTTP_NAME_UPPER), so that ANDing the bytes of a name classifies it
 * (mk_http_name_class). Defined in http_parser.c.
 */
extern const uint8_t mk_http_tchar[256] __attribute__((visibility("hidden")));

static inline bool mk_is_tchar(unsigned char c)
{
    return mk_http_tchar[c] != 0;
}

/* field-vchar / SP / HTAB: anything but controls (HTAB excepted) and DEL. */
static inline bool mk_is_field_char(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static inline bool mk_is_hex(char c)
{
    return mk_is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static inline unsigned mk_hex_val(char c)
{
    if (mk_is_digit(c)) {
        return (unsigned) (c - '0');
    }
    return (unsigned) (mk_tolower(c) - 'a' + 10);
}

#endif
