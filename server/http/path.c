/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * path.c: see path.h.
 */
#include "path.h"

#include <stdint.h>
#include <string.h>

#include <monkey/mk_common.h>
#include <monkey/mk_util.h>

/* Percent-decode raw into out; returns the decoded length or MK_ERR. */
static ssize_t mk_path_decode(const char *raw, size_t len, char *out)
{
    size_t w = 0;

    for (size_t i = 0; i < len; i++) {
        char c = raw[i];
        if (c == '%') {
            int hi, lo;
            if (i + 2 >= len) {
                return MK_ERR; /* fewer than two characters follow */
            }
            hi = mk_hex_digit(raw[i + 1]);
            lo = mk_hex_digit(raw[i + 2]);
            if (hi < 0 || lo < 0) {
                return MK_ERR;
            }
            c = (char) (hi << 4 | lo);
            i += 2;
        }
        if (c == '\0' || c == '\\') {
            return MK_ERR;
        }
        out[w++] = c;
    }
    return (ssize_t) w;
}

/*
 * Bytes that may make a path change when normalised, or be refused: '%',
 * '\\', NUL, and '/' (when a '/' or a '.' follows it).
 */
static const uint8_t mk_path_special[256] = {['%'] = 1, ['\\'] = 1, [0] = 1, ['/'] = 1};

ssize_t mk_path_normalize(const char *raw, size_t len, char *out)
{
    /* Most paths are normal already ("/img/a.png"): then they are copied. */
    if (len && raw[0] == '/') {
        size_t i = 0;
        for (; i < len; i++) {
            unsigned char c = (unsigned char) raw[i];
            if (mk_path_special[c] &&
                (c != '/' || (i + 1 < len && (raw[i + 1] == '/' || raw[i + 1] == '.')))) {
                break;
            }
        }
        if (i == len) {
            memcpy(out, raw, len);
            out[len] = '\0';
            return (ssize_t) len;
        }
    }
    ssize_t n = mk_path_decode(raw, len, out);
    size_t r = 0, w = 0;
    int trailing = 0;

    if (n <= 0 || out[0] != '/') {
        return MK_ERR;
    }
    /*
     * In place: the write position never passes the read position. The
     * output holds "/seg/seg" without a trailing slash; `trailing` records
     * whether the path names a directory.
     */
    while (r < (size_t) n) {
        while (r < (size_t) n && out[r] == '/') {
            r++;
        }
        size_t s = r;
        while (r < (size_t) n && out[r] != '/') {
            r++;
        }
        size_t seg = r - s;
        trailing = (r == (size_t) n) ? 0 : 1;

        if (seg == 0) {
            trailing = 1; /* the path ended with '/' */
            break;
        }
        if (seg == 1 && out[s] == '.') {
            trailing = 1;
            continue;
        }
        if (seg == 2 && out[s] == '.' && out[s + 1] == '.') {
            if (w == 0) {
                return MK_ERR; /* above the root */
            }
            while (w > 0 && out[w - 1] != '/') {
                w--;
            }
            w--; /* drop the '/' that introduced the segment */
            trailing = 1;
            continue;
        }
        out[w++] = '/';
        memmove(out + w, out + s, seg);
        w += seg;
    }
    if (trailing || w == 0) {
        out[w++] = '/';
    }
    out[w] = '\0';
    return (ssize_t) w;
}

/* pchar without pct-encoded (RFC 3986 section 3.3), and '/'. */
static bool mk_path_plain(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
        return true;
    }
    return c != 0 && strchr("-._~!$&'()*+,;=:@/", c) != NULL;
}

size_t mk_path_encode(const char *path, size_t len, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t w = 0;

    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) path[i];
        if (mk_path_plain(c)) {
            out[w++] = (char) c;
            continue;
        }
        out[w++] = '%';
        out[w++] = hex[c >> 4];
        out[w++] = hex[c & 15];
    }
    return w;
}

bool mk_path_is_hidden(const char *path, size_t len)
{
    static const char well_known[] = "/.well-known";
    size_t from = 0, wk = sizeof(well_known) - 1;

    if (len >= wk && memcmp(path, well_known, wk) == 0 && (len == wk || path[wk] == '/')) {
        from = wk;
    }
    /* Look for the dots (few: usually an extension's) and at what precedes each. */
    for (const char *p = path + from, *end = path + len;
         (p = memchr(p, '.', (size_t) (end - p))) != NULL; p++) {
        if (p > path + from && p[-1] == '/') {
            return true;
        }
    }
    return false;
}
