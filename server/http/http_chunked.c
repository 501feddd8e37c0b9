/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * http_chunked.c: the decoder of the chunked transfer coding (RFC 9112
 * section 7.1) of a request body, byte by byte, in place: the chunk-size
 * lines (with their extensions), the data, and the trailer section, which
 * is held to the rules of the header section (http_parser.c), so that a
 * front end that splits lines another way cannot read a request into what
 * is taken for trailers. Bad or oversized chunk sizes and lines are
 * refused.
 *
 * Pure (see http.h), callable from any thread: the state is the caller's
 * struct mk_chunked, the bytes the caller's buffer.
 */
#include <string.h>

#include <monkey/mk_common.h>

#include "http.h"
#include "http_chars.h"

enum {
    MK_CH_SIZE = 0,
    MK_CH_SIZE_WS, /* whitespace after the size: only ';' may follow (BWS) */
    MK_CH_EXT,
    MK_CH_SIZE_LF,
    MK_CH_DATA,
    MK_CH_DATA_CR,
    MK_CH_DATA_LF,
    MK_CH_TRAILER,          /* at the start of a trailer line, or of the final empty one */
    MK_CH_TRAILER_NAME,     /* in a field name: token characters up to ':' */
    MK_CH_TRAILER_VALUE,    /* in a field value */
    MK_CH_TRAILER_VALUE_LF, /* CR ended a field line: only LF may follow */
    MK_CH_TRAILER_LF,       /* CR of the final empty line: only LF may follow */
    MK_CH_DONE,
};

#define MK_CHUNK_LINE_MAX 4096 /* chunk-size line with extensions */

void mk_chunked_init(struct mk_chunked *c)
{
    memset(c, 0, sizeof(*c));
}

bool mk_chunked_done(const struct mk_chunked *c)
{
    return c->state == MK_CH_DONE;
}

/* The size line has ended: start the data or the trailer section. */
static void mk_chunk_size_done(struct mk_chunked *c)
{
    c->state = c->left ? MK_CH_DATA : MK_CH_TRAILER;
    c->line_bytes = 0;
}

/*
 * One byte of the trailer section, which is held to the rules of the header
 * section (mk_http_parse): each line is a token, a colon and a value of
 * field characters; a line may not start with whitespace (obs-fold); CR is
 * allowed only right before LF; an empty line ends the section. A front end
 * that splits lines another way can then not read a request into what we
 * take for trailers. MK_OK, or MK_ERR for a byte that may not come here.
 */
static int mk_chunk_trailer_byte(struct mk_chunked *c, unsigned char ch)
{
    switch (c->state) {
    case MK_CH_TRAILER:
        if (ch == '\r') {
            c->state = MK_CH_TRAILER_LF;
        }
        else if (ch == '\n') {
            c->state = MK_CH_DONE;
        }
        else if (mk_is_tchar(ch)) {
            c->state = MK_CH_TRAILER_NAME;
        }
        else {
            return MK_ERR; /* obs-fold, empty name, control byte */
        }
        return MK_OK;
    case MK_CH_TRAILER_NAME:
        if (ch == ':') {
            c->state = MK_CH_TRAILER_VALUE;
        }
        else if (!mk_is_tchar(ch)) {
            return MK_ERR; /* no colon, or whitespace before it */
        }
        return MK_OK;
    case MK_CH_TRAILER_VALUE:
        if (ch == '\r') {
            c->state = MK_CH_TRAILER_VALUE_LF;
        }
        else if (ch == '\n') {
            c->state = MK_CH_TRAILER;
        }
        else if (!mk_is_field_char(ch)) {
            return MK_ERR;
        }
        return MK_OK;
    case MK_CH_TRAILER_VALUE_LF:
        if (ch != '\n') {
            return MK_ERR; /* bare CR */
        }
        c->state = MK_CH_TRAILER;
        return MK_OK;
    default:
        return MK_ERR;
    }
}

ssize_t mk_chunked_decode(struct mk_chunked *c, char *buf, size_t len, size_t *out)
{
    size_t i = 0, o = 0, t = SIZE_MAX;

    while (i < len && c->state != MK_CH_DONE) {
        char ch = buf[i];

        switch (c->state) {
        case MK_CH_SIZE:
            if (mk_is_hex(ch)) {
                if (c->digits >= 16 || c->left > (UINT64_MAX >> 4)) {
                    return MK_ERR;
                }
                c->left = (c->left << 4) | mk_hex_val(ch);
                c->digits++;
            }
            else if (c->digits == 0) {
                return MK_ERR;
            }
            else if (ch == ';') {
                c->state = MK_CH_EXT;
            }
            else if (ch == ' ' || ch == '\t') {
                c->state = MK_CH_SIZE_WS;
            }
            else if (ch == '\r') {
                c->state = MK_CH_SIZE_LF;
            }
            else if (ch == '\n') {
                mk_chunk_size_done(c);
            }
            else {
                return MK_ERR;
            }
            if (++c->line_bytes > MK_CHUNK_LINE_MAX) {
                return MK_ERR;
            }
            i++;
            break;
        case MK_CH_SIZE_WS:
            if (ch == ';') {
                c->state = MK_CH_EXT;
            }
            else if (ch != ' ' && ch != '\t') {
                return MK_ERR; /* "1 2" must not be read as size 1 */
            }
            if (++c->line_bytes > MK_CHUNK_LINE_MAX) {
                return MK_ERR;
            }
            i++;
            break;
        case MK_CH_EXT:
            if (ch == '\r') {
                c->state = MK_CH_SIZE_LF;
            }
            else if (ch == '\n') {
                mk_chunk_size_done(c);
            }
            else if (!mk_is_field_char((unsigned char) ch)) {
                return MK_ERR;
            }
            if (++c->line_bytes > MK_CHUNK_LINE_MAX) {
                return MK_ERR;
            }
            i++;
            break;
        case MK_CH_SIZE_LF:
            if (ch != '\n') {
                return MK_ERR;
            }
            mk_chunk_size_done(c);
            i++;
            break;
        case MK_CH_DATA: {
            size_t n = len - i;
            if ((uint64_t) n > c->left) {
                n = (size_t) c->left;
            }
            if (o != i) {
                memmove(buf + o, buf + i, n);
            }
            o += n;
            i += n;
            c->left -= n;
            if (c->left == 0) {
                c->state = MK_CH_DATA_CR;
            }
            break;
        }
        case MK_CH_DATA_CR:
            if (ch == '\r') {
                c->state = MK_CH_DATA_LF;
            }
            else if (ch == '\n') {
                c->state = MK_CH_SIZE;
                c->digits = 0;
            }
            else {
                return MK_ERR;
            }
            i++;
            break;
        case MK_CH_DATA_LF:
            if (ch != '\n') {
                return MK_ERR;
            }
            c->state = MK_CH_SIZE;
            c->digits = 0;
            i++;
            break;
        case MK_CH_TRAILER:
        case MK_CH_TRAILER_NAME:
        case MK_CH_TRAILER_VALUE:
        case MK_CH_TRAILER_VALUE_LF:
            if (t == SIZE_MAX) {
                t = i;
            }
            if (mk_chunk_trailer_byte(c, (unsigned char) ch) != MK_OK ||
                ++c->trailer_bytes > MK_CHUNK_TRAILER_MAX) {
                return MK_ERR;
            }
            i++;
            break;
        case MK_CH_TRAILER_LF:
            if (ch != '\n') {
                return MK_ERR;
            }
            if (t == SIZE_MAX) {
                t = i;
            }
            c->state = MK_CH_DONE;
            i++;
            break;
        default:
            return MK_ERR;
        }
    }
    *out = o;
    c->trailer_off = t == SIZE_MAX ? i : t;
    return (ssize_t) i;
}

size_t mk_chunked_trailer_lines(const char *raw, size_t len, char *out)
{
    size_t i = 0, o = 0;

    while (i < len) {
        const char *line = raw + i;
        const char *nl = memchr(line, '\n', len - i);
        size_t n = nl ? (size_t) (nl - line) : len - i;
        const char *colon = memchr(line, ':', n);

        i += n + 1;
        if (n && line[n - 1] == '\r') {
            n--;
        }
        if (!colon) {
            continue; /* the final empty line (the decoder let no other through) */
        }
        size_t name = (size_t) (colon - line), v = name + 1;
        while (v < n && (line[v] == ' ' || line[v] == '\t')) {
            v++;
        }
        while (n > v && (line[n - 1] == ' ' || line[n - 1] == '\t')) {
            n--;
        }
        memcpy(out + o, line, name);
        o += name;
        memcpy(out + o, ": ", 2);
        o += 2;
        memcpy(out + o, line + v, n - v);
        o += n - v;
        memcpy(out + o, "\r\n", 2);
        o += 2;
    }
    return o;
}
