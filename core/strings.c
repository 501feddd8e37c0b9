/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * strings.c: see strings.h.
 */
#include "strings.h"

#include <monkey/mk_util.h>

bool mk_str_ieq(const char *a, size_t alen, const char *b)
{
    size_t i;
    for (i = 0; i < alen; i++) {
        if (b[i] == '\0' || mk_tolower(a[i]) != mk_tolower(b[i])) {
            return false;
        }
    }
    return b[i] == '\0';
}

bool mk_str_iprefix(const char *a, size_t alen, const char *prefix)
{
    size_t i;
    for (i = 0; prefix[i] != '\0'; i++) {
        if (i >= alen || mk_tolower(a[i]) != mk_tolower(prefix[i])) {
            return false;
        }
    }
    return true;
}

bool mk_str_to_u64(const char *p, size_t len, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;

    if (len == 0) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (!mk_is_digit(p[i])) {
            return false;
        }
        unsigned d = (unsigned) (p[i] - '0');
        if (d > max || v > (max - d) / 10) {
            return false;
        }
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

bool mk_str_to_duration_ms(const char *p, size_t len, uint64_t max_ms, uint64_t *out)
{
    uint64_t mult = 1000, v;

    if (len >= 2 && p[len - 2] == 'm' && p[len - 1] == 's') {
        mult = 1;
        len -= 2;
    }
    else if (len >= 1 && (p[len - 1] == 's' || p[len - 1] == 'm' || p[len - 1] == 'h')) {
        mult = p[len - 1] == 's' ? 1000 : p[len - 1] == 'm' ? 60000 : 3600000;
        len--;
    }
    if (!mk_str_to_u64(p, len, max_ms / mult, &v)) {
        return false;
    }
    *out = v * mult;
    return true;
}

void mk_duration_to_str(uint64_t ms, char *buf)
{
    size_t n;

    if (ms % 1000 == 0) {
        n = mk_u64_dec(ms / 1000, buf);
        buf[n++] = 's';
    }
    else {
        n = mk_u64_dec(ms, buf);
        buf[n++] = 'm';
        buf[n++] = 's';
    }
    buf[n] = '\0';
}

bool mk_str_list_next(struct mk_str *cursor, struct mk_str *item)
{
    while (cursor->len) {
        const char *comma = memchr(cursor->p, ',', cursor->len);
        size_t n = comma ? (size_t) (comma - cursor->p) : cursor->len;
        struct mk_str e = mk_str_trim(mk_str_make(cursor->p, n));

        cursor->p += n;
        cursor->len -= n;
        if (cursor->len) { /* skip the comma */
            cursor->p++;
            cursor->len--;
        }
        if (e.len) {
            *item = e;
            return true;
        }
    }
    return false;
}
