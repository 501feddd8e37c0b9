/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_path.c: libFuzzer target for mk_path_normalize() (server/http/path.c), the
 * function that stands between a request path and the file system, and for
 * what is done with its result: mk_path_encode() (the Location of a
 * redirect) and mk_path_is_hidden().
 *
 * Invariants on success (each a crash when broken):
 *  - the result starts with '/', has no "//", no "/./" or "/../", does not
 *    end in "/." or "/..", holds no NUL or backslash, is NUL terminated and
 *    fits the len + 1 bytes the caller provides;
 *  - a raw path ending in '/' gives a result ending in '/';
 *  - normalising the result again changes nothing (when it has no '%': the
 *    decoded result may hold a '%' that is not an escape);
 *  - encoding the result gives at most 3 bytes per byte, only pchar, '/'
 *    and %XX, starting with one '/' (never "//": another host), and
 *    normalising the encoding gives the result back;
 *  - the result is hidden exactly when one of its segments starts with '.',
 *    the first segment ".well-known" excepted;
 * and always:
 *  - the result and the success or failure agree with a second, simple
 *    model of path.h (percent-decode, then RFC 3986 dot-segment removal over
 *    a stack of segments, with '/' runs collapsed).
 */
#include <stdlib.h>
#include <string.h>

#include <monkey/mk_common.h>

#include "server/http/path.h"

#include "fuzz_check.h"

static int model_hex(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/*
 * The model: writes the expected result into `out` (room for len + 1 bytes,
 * plus `seg` for len segment starts) and returns its length, or -1.
 */
static ssize_t model_normalize(const char *raw, size_t len, char *dec, size_t *seg, char *out)
{
    size_t n = 0, depth = 0, w = 0;

    for (size_t i = 0; i < len; i++) {
        char c = raw[i];
        if (c == '%') {
            if (len - i < 3 || model_hex(raw[i + 1]) < 0 || model_hex(raw[i + 2]) < 0) {
                return -1;
            }
            c = (char) (model_hex(raw[i + 1]) * 16 + model_hex(raw[i + 2]));
            i += 2;
        }
        if (c == '\0' || c == '\\') {
            return -1;
        }
        dec[n++] = c;
    }
    if (n == 0 || dec[0] != '/') {
        return -1;
    }

    /* Segments between slashes; seg[] holds the start of each kept one in dec. */
    bool dir = false;
    size_t i = 0;
    while (i < n) {
        while (i < n && dec[i] == '/') {
            i++;
        }
        size_t s = i;
        while (i < n && dec[i] != '/') {
            i++;
        }
        size_t l = i - s;
        if (l == 0) {
            dir = true; /* ended with '/' */
        }
        else if (l == 1 && dec[s] == '.') {
            dir = true;
        }
        else if (l == 2 && dec[s] == '.' && dec[s + 1] == '.') {
            if (depth == 0) {
                return -1;
            }
            depth--;
            dir = true;
        }
        else {
            seg[depth++] = s;
            dir = false;
        }
    }
    for (size_t k = 0; k < depth; k++) {
        out[w++] = '/';
        for (size_t j = seg[k]; j < n && dec[j] != '/'; j++) {
            out[w++] = dec[j];
        }
    }
    if (dir || depth == 0) {
        out[w++] = '/';
    }
    out[w] = '\0';
    return (ssize_t) w;
}

/* The model of mk_path_is_hidden() for a normalised path. */
static bool model_hidden(const char *p, size_t n)
{
    size_t i = 0;
    bool first = true;

    while (i < n) {
        size_t s = ++i; /* p[i - 1] is '/' */
        while (i < n && p[i] != '/') {
            i++;
        }
        bool wk = first && i - s == 11 && memcmp(p + s, ".well-known", 11) == 0;
        if (i > s && p[s] == '.' && !wk) {
            return true;
        }
        first = false;
    }
    return false;
}

static bool is_plain(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("-._~!$&'()*+,;=:@/", c));
}

static void check_encoding(const char *p, size_t n)
{
    char *enc = malloc(3 * n);
    size_t e = mk_path_encode(p, n, enc);

    MK_FUZZ_CHECK(e >= n && e <= 3 * n);
    MK_FUZZ_CHECK(enc[0] == '/' && (e == 1 || enc[1] != '/'));
    for (size_t i = 0; i < e; i++) {
        if (enc[i] == '%') {
            MK_FUZZ_CHECK(i + 2 < e && model_hex(enc[i + 1]) >= 0 && model_hex(enc[i + 2]) >= 0);
            i += 2;
            continue;
        }
        MK_FUZZ_CHECK(is_plain((unsigned char) enc[i]));
    }
    char *back = malloc(e + 1);
    ssize_t r = mk_path_normalize(enc, e, back);
    MK_FUZZ_CHECK(r == (ssize_t) n && memcmp(back, p, n) == 0);
    free(back);
    free(enc);
}

static void check_normal_form(const char *p, size_t n)
{
    MK_FUZZ_CHECK(n >= 1 && p[0] == '/' && p[n] == '\0');
    MK_FUZZ_CHECK(memchr(p, '\0', n) == NULL);
    MK_FUZZ_CHECK(memchr(p, '\\', n) == NULL);
    MK_FUZZ_CHECK(memmem(p, n, "//", 2) == NULL);
    MK_FUZZ_CHECK(memmem(p, n, "/./", 3) == NULL);
    MK_FUZZ_CHECK(memmem(p, n, "/../", 4) == NULL);
    MK_FUZZ_CHECK(!(n >= 2 && memcmp(p + n - 2, "/.", 2) == 0));
    MK_FUZZ_CHECK(!(n >= 3 && memcmp(p + n - 3, "/..", 3) == 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *raw = (const char *) data;
    char *out = malloc(size + 1); /* exactly the room path.h promises to need */

    ssize_t r = mk_path_normalize(raw, size, out);
    MK_FUZZ_CHECK(r == MK_ERR || r >= 1);

    char *dec = malloc(size + 1);
    char *want = malloc(size + 2);
    size_t *seg = malloc((size + 1) * sizeof(*seg));
    ssize_t m = model_normalize(raw, size, dec, seg, want);
    MK_FUZZ_CHECK((r == MK_ERR) == (m < 0));

    if (r >= 1) {
        size_t n = (size_t) r;
        MK_FUZZ_CHECK(n <= size); /* n bytes and the NUL in the len + 1 of `out` */
        check_normal_form(out, n);
        MK_FUZZ_CHECK((size_t) m == n && memcmp(out, want, n) == 0);
        if (raw[size - 1] == '/') {
            MK_FUZZ_CHECK(out[n - 1] == '/');
        }
        check_encoding(out, n);
        MK_FUZZ_CHECK(mk_path_is_hidden(out, n) == model_hidden(out, n));

        if (memchr(out, '%', n) == NULL) {
            char *again = malloc(n + 1);
            ssize_t r2 = mk_path_normalize(out, n, again);
            MK_FUZZ_CHECK(r2 == (ssize_t) n && memcmp(again, out, n + 1) == 0);
            free(again);
        }
    }
    free(seg);
    free(want);
    free(dec);
    free(out);
    return 0;
}
