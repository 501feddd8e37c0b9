/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_fields.c: libFuzzer target for the header field values the static
 * handler reads: Range (mk_http_range_parse), entity-tag lists
 * (mk_http_etag_match), the one tag of If-Range (mk_http_etag_is) and HTTP
 * dates (mk_http_date_parse, core/clock.c).
 *
 * Input: the first 8 bytes are a representation size (little endian; fewer
 * bytes give a small size), the rest is the field value.
 *
 * Invariants (each a crash when broken):
 *  - MK_RANGE_OK gives 1 to MK_RANGES_MAX ranges, each first <= last <
 *    size, each starting after the one before ends (ascending, no
 *    overlap), for the size as given and for a small size made of its low
 *    16 bits; the value then holds at least as many '-' as ranges; with
 *    room for one range, the result, the count and the first range are
 *    the same;
 *  - a strong match is also a weak match; "*" matches anything; a value
 *    that is exactly our tag matches it (strongly too, unless it is weak);
 *  - an If-Range match is a strong list match, never holds a ',' outside
 *    the tag, and a value that is exactly our strong tag is one;
 *  - a parsed date in 1970..9999 formats as IMF-fixdate and parses back to
 *    the same time.
 */
#include <string.h>

#include "core/clock.h"
#include "server/http/http.h"

#include "fuzz_check.h"

static const char *const mk_fuzz_etags[] = {
    "\"5f-1a\"",
    "W/\"5f-1a\"",
    "\"\"",
    "\"x\"",
};

/* Last second of 9999-12-31, the last IMF-fixdate has room for. */
#define MK_FUZZ_DATE_MAX ((time_t) 253402300799)

static void fuzz_range(const char *v, size_t len, uint64_t size)
{
    struct mk_range rg[MK_RANGES_MAX], one;
    unsigned n = UINT32_MAX, n1 = UINT32_MAX;
    enum mk_range_result r = mk_http_range_parse(v, len, size, rg, MK_RANGES_MAX, &n);

    MK_FUZZ_CHECK(r == MK_RANGE_NONE || r == MK_RANGE_OK || r == MK_RANGE_UNSATISFIABLE);
    MK_FUZZ_CHECK(mk_http_range_parse(v, len, size, &one, 1, &n1) == r && n1 == n);
    if (r != MK_RANGE_OK) {
        MK_FUZZ_CHECK(n == UINT32_MAX);
        return;
    }
    MK_FUZZ_CHECK(one.first == rg[0].first && one.last == rg[0].last);
    MK_FUZZ_CHECK(n >= 1 && n <= MK_RANGES_MAX);
    size_t dashes = 0;
    for (size_t i = 0; i < len; i++) {
        dashes += v[i] == '-';
    }
    MK_FUZZ_CHECK(dashes >= n);
    for (unsigned i = 0; i < n; i++) {
        MK_FUZZ_CHECK(rg[i].first <= rg[i].last && rg[i].last < size);
        if (i) {
            MK_FUZZ_CHECK(rg[i].first > rg[i - 1].last);
        }
    }
}

static bool only_ows(const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (p[i] != ' ' && p[i] != '\t') {
            return false;
        }
    }
    return true;
}

static void fuzz_etag(const char *v, size_t len)
{
    for (size_t i = 0; i < sizeof(mk_fuzz_etags) / sizeof(mk_fuzz_etags[0]); i++) {
        const char *tag = mk_fuzz_etags[i];
        size_t tlen = strlen(tag);
        bool strong = mk_http_etag_match(v, len, tag, tlen, false);
        bool weak = mk_http_etag_match(v, len, tag, tlen, true);

        if (strong) {
            MK_FUZZ_CHECK(weak);
        }
        if (mk_http_etag_is(v, len, tag, tlen)) {
            MK_FUZZ_CHECK(strong && tag[0] == '"');
            const char *q = memchr(v, '"', len);
            MK_FUZZ_CHECK(q && only_ows(v, (size_t) (q - v)));
            MK_FUZZ_CHECK(only_ows(q + tlen, len - (size_t) (q - v) - tlen));
        }
        if (len == tlen && memcmp(v, tag, len) == 0 && tag[0] == '"') {
            MK_FUZZ_CHECK(mk_http_etag_is(v, len, tag, tlen));
        }
        if (len == tlen && memcmp(v, tag, len) == 0) {
            MK_FUZZ_CHECK(weak && (strong || tag[0] == 'W'));
        }
        const char *star = memchr(v, '*', len);
        if (star && only_ows(v, (size_t) (star - v)) &&
            only_ows(star + 1, len - (size_t) (star - v) - 1)) {
            MK_FUZZ_CHECK(strong && weak);
        }
    }
}

static void fuzz_date(const char *v, size_t len)
{
    time_t t;
    char buf[MK_HTTP_DATE_LEN];

    if (!mk_http_date_parse(v, len, &t)) {
        return;
    }
    if (t < 0 || t > MK_FUZZ_DATE_MAX) {
        return;
    }
    mk_http_date_format(t, buf);
    time_t back;
    MK_FUZZ_CHECK(mk_http_date_parse(buf, sizeof(buf), &back));
    MK_FUZZ_CHECK(back == t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t rep = 0;
    size_t n = size < 8 ? size : 8;

    for (size_t i = 0; i < n; i++) {
        rep |= (uint64_t) data[i] << (8 * i);
    }
    const char *v = (const char *) data + n;
    size_t len = size - n;

    fuzz_range(v, len, rep);
    fuzz_range(v, len, rep & 0xffff);
    fuzz_etag(v, len);
    fuzz_date(v, len);
    return 0;
}
