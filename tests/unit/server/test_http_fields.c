/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_http_fields.c: unit tests of server/http/http_fields.c: Range (RFC 9110
 * section 14), entity-tag comparison (section 8.8.3.2), the priority field
 * (RFC 9218 section 4) and reason phrases.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/http/http.h"

struct range_case {
    const char *value;
    uint64_t size;
    enum mk_range_result result;
    unsigned n; /* when MK_RANGE_OK: the ranges */
    struct mk_range r[4];
};

static const struct range_case range_cases[] = {
    /* single ranges */
    {"bytes=0-499", 1000, MK_RANGE_OK, 1, {{0, 499}}},
    {"bytes=500-999", 1000, MK_RANGE_OK, 1, {{500, 999}}},
    {"bytes=0-0", 1000, MK_RANGE_OK, 1, {{0, 0}}},
    {"bytes=999-999", 1000, MK_RANGE_OK, 1, {{999, 999}}},
    {"bytes=10-5000", 1000, MK_RANGE_OK, 1, {{10, 999}}}, /* last clamped to the size */
    {"bytes=0-18446744073709551615", 1000, MK_RANGE_OK, 1, {{0, 999}}},
    {"bytes=0-99999999999999999999999", 1000, MK_RANGE_OK, 1, {{0, 999}}}, /* saturates */
    /* open ranges */
    {"bytes=500-", 1000, MK_RANGE_OK, 1, {{500, 999}}},
    {"bytes=0-", 1000, MK_RANGE_OK, 1, {{0, 999}}},
    {"bytes=999-", 1000, MK_RANGE_OK, 1, {{999, 999}}},
    /* suffix ranges */
    {"bytes=-100", 1000, MK_RANGE_OK, 1, {{900, 999}}},
    {"bytes=-1", 1000, MK_RANGE_OK, 1, {{999, 999}}},
    {"bytes=-1000", 1000, MK_RANGE_OK, 1, {{0, 999}}},
    {"bytes=-2000", 1000, MK_RANGE_OK, 1, {{0, 999}}}, /* larger than the size: everything */
    {"bytes=-0", 1000, MK_RANGE_UNSATISFIABLE},
    /* first byte beyond the representation */
    {"bytes=1000-", 1000, MK_RANGE_UNSATISFIABLE},
    {"bytes=1000-2000", 1000, MK_RANGE_UNSATISFIABLE},
    {"bytes=5000-6000", 1000, MK_RANGE_UNSATISFIABLE},
    /* empty representation */
    {"bytes=0-", 0, MK_RANGE_UNSATISFIABLE},
    {"bytes=0-0", 0, MK_RANGE_UNSATISFIABLE},
    {"bytes=-5", 0, MK_RANGE_UNSATISFIABLE},
    {"bytes=-0", 0, MK_RANGE_UNSATISFIABLE},
    /* invalid: the field is ignored */
    {"bytes=5-2", 1000, MK_RANGE_NONE},
    {"bytes=-", 1000, MK_RANGE_NONE},
    {"bytes=", 1000, MK_RANGE_NONE},
    {"bytes=,", 1000, MK_RANGE_NONE},
    {"bytes=abc", 1000, MK_RANGE_NONE},
    {"bytes=1-2x", 1000, MK_RANGE_NONE},
    {"bytes=1", 1000, MK_RANGE_NONE},
    {"bytes=1--2", 1000, MK_RANGE_NONE},
    {"bytes=+1-2", 1000, MK_RANGE_NONE},
    {"bytes=0 -1", 1000, MK_RANGE_NONE},
    {"bytes=0- 1", 1000, MK_RANGE_NONE},
    {"bytes 0-1", 1000, MK_RANGE_NONE},
    {"bytes = 0-1", 1000, MK_RANGE_NONE},
    {"items=0-1", 1000, MK_RANGE_NONE},
    {"bits=0-1", 1000, MK_RANGE_NONE},
    {"", 1000, MK_RANGE_NONE},
    {"0-1", 1000, MK_RANGE_NONE},
    {"bytes=5-2", 0, MK_RANGE_NONE},
    /* several ranges, in order and apart: each is a part */
    {"bytes=0-1,5-6", 1000, MK_RANGE_OK, 2, {{0, 1}, {5, 6}}},
    {"bytes=0-1, -5", 1000, MK_RANGE_OK, 2, {{0, 1}, {995, 999}}},
    {"bytes=0-1,2-3", 1000, MK_RANGE_OK, 2, {{0, 1}, {2, 3}}}, /* adjacent: not merged */
    {"bytes=0-0,2-2,4-4,6-", 8, MK_RANGE_OK, 4, {{0, 0}, {2, 2}, {4, 4}, {6, 7}}},
    {"bytes=0-1,,5-6", 1000, MK_RANGE_OK, 2, {{0, 1}, {5, 6}}},
    {"bytes=0-1 , 5-6 ,", 1000, MK_RANGE_OK, 2, {{0, 1}, {5, 6}}},
    {"bytes=10-20,-1", 1000, MK_RANGE_OK, 2, {{10, 20}, {999, 999}}},
    {"bytes=0-0,18446744073709551614-",
     UINT64_MAX,
     MK_RANGE_OK,
     2,
     {{0, 0}, {UINT64_MAX - 1, UINT64_MAX - 1}}},
    /* the unsatisfiable ones of a set are left out; one left is a single range */
    {"bytes=0-1,2000-3000", 1000, MK_RANGE_OK, 1, {{0, 1}}},
    {"bytes=2000-,0-1,5-6", 1000, MK_RANGE_OK, 2, {{0, 1}, {5, 6}}},
    {"bytes=0-1,5-6", 3, MK_RANGE_OK, 1, {{0, 1}}},
    {"bytes=0-1,-0", 1000, MK_RANGE_OK, 1, {{0, 1}}},
    {"bytes=-0,8-", 10, MK_RANGE_OK, 1, {{8, 9}}},
    /* an invalid range-spec anywhere: the field is ignored */
    {"bytes=0-1,5-2", 1000, MK_RANGE_NONE},
    {"bytes=0-1,x", 1000, MK_RANGE_NONE},
    {"bytes=0-1,-", 1000, MK_RANGE_NONE},
    /* overlapping or out of order (after the suffix and open ranges are
       resolved against the size): ignored, the whole representation */
    {"bytes=0-1,1-2", 1000, MK_RANGE_NONE},
    {"bytes=0-1,0-1", 1000, MK_RANGE_NONE},
    {"bytes=0-9,3-4", 1000, MK_RANGE_NONE},
    {"bytes=5-6,0-1", 1000, MK_RANGE_NONE},
    {"bytes=-5,0-1", 1000, MK_RANGE_NONE},
    {"bytes=0-,5-6", 1000, MK_RANGE_NONE},
    {"bytes=0-1,-2000", 1000, MK_RANGE_NONE},
    {"bytes=990-,-5", 1000, MK_RANGE_NONE},
    {"bytes=0-1,5-6,3-4", 1000, MK_RANGE_NONE},
    {"bytes=0-1,5-10000,8-9", 10, MK_RANGE_NONE}, /* 5-9 then 8-9 */
    /* several ranges, none satisfiable */
    {"bytes=2000-,3000-", 1000, MK_RANGE_UNSATISFIABLE},
    {"bytes=2000-,-0", 1000, MK_RANGE_UNSATISFIABLE},
    /* whitespace and empty list elements */
    {" bytes=0-9", 1000, MK_RANGE_OK, 1, {{0, 9}}},
    {"\tbytes=0-9", 1000, MK_RANGE_OK, 1, {{0, 9}}},
    {"bytes= 0-9", 1000, MK_RANGE_OK, 1, {{0, 9}}},
    {"bytes=0-9 ", 1000, MK_RANGE_OK, 1, {{0, 9}}},
    {"bytes=0-9\t", 1000, MK_RANGE_OK, 1, {{0, 9}}},
    {"bytes=,0-9", 1000, MK_RANGE_OK, 1, {{0, 9}}},
    {"bytes=0-9,", 1000, MK_RANGE_OK, 1, {{0, 9}}},
    {"bytes= , 0-9 , ", 1000, MK_RANGE_OK, 1, {{0, 9}}},
    /* the unit is case-insensitive */
    {"BYTES=0-9", 1000, MK_RANGE_OK, 1, {{0, 9}}},
    {"Bytes=-3", 10, MK_RANGE_OK, 1, {{7, 9}}},
    /* large representations */
    {"bytes=-1", UINT64_MAX, MK_RANGE_OK, 1, {{UINT64_MAX - 1, UINT64_MAX - 1}}},
    {"bytes=4294967296-", 4294967297ull, MK_RANGE_OK, 1, {{4294967296ull, 4294967296ull}}},
};

static void test_range_table(void **state)
{
    unsigned failures = 0;
    (void) state;

    for (size_t i = 0; i < sizeof(range_cases) / sizeof(range_cases[0]); i++) {
        const struct range_case *c = &range_cases[i];
        struct mk_range rg[MK_RANGES_MAX];
        unsigned n = 0xdead;
        enum mk_range_result r =
            mk_http_range_parse(c->value, strlen(c->value), c->size, rg, MK_RANGES_MAX, &n);
        if (r != c->result) {
            print_error("'%s' (size %llu): result %d, expected %d\n", c->value,
                        (unsigned long long) c->size, r, c->result);
            failures++;
            continue;
        }
        if (r != MK_RANGE_OK) {
            if (n != 0xdead) {
                print_error("'%s': count written although the result is %d\n", c->value, r);
                failures++;
            }
            continue;
        }
        if (n != c->n) {
            print_error("'%s' (size %llu): %u ranges, expected %u\n", c->value,
                        (unsigned long long) c->size, n, c->n);
            failures++;
            continue;
        }
        for (unsigned k = 0; k < n; k++) {
            if (rg[k].first != c->r[k].first || rg[k].last != c->r[k].last) {
                print_error("'%s' (size %llu): range %u is %llu-%llu, expected %llu-%llu\n",
                            c->value, (unsigned long long) c->size, k,
                            (unsigned long long) rg[k].first, (unsigned long long) rg[k].last,
                            (unsigned long long) c->r[k].first, (unsigned long long) c->r[k].last);
                failures++;
            }
        }
    }
    assert_int_equal(failures, 0);
}

/* "bytes=" and `count` ranges "0-0,2-2,..." (every other byte), `unsat` of
   them beyond a 1000-byte representation. */
static char *many_ranges(unsigned count, unsigned unsat)
{
    char *v = malloc(16 + 16 * (size_t) count), *p = v;

    assert_non_null(v);
    p += sprintf(p, "bytes=");
    for (unsigned i = 0; i < count; i++) {
        unsigned at = i < count - unsat ? 2 * i : 5000 + i;
        p += sprintf(p, "%s%u-%u", i ? "," : "", at, at);
    }
    return v;
}

/* At most MK_RANGES_MAX ranges, satisfiable or not: one more and the field
   is ignored. */
static void test_range_count_bound(void **state)
{
    struct mk_range rg[MK_RANGES_MAX];
    unsigned n = 0;
    char *v;
    (void) state;

    v = many_ranges(MK_RANGES_MAX, 0);
    assert_int_equal(mk_http_range_parse(v, strlen(v), 1000, rg, MK_RANGES_MAX, &n), MK_RANGE_OK);
    assert_int_equal(n, MK_RANGES_MAX);
    for (unsigned i = 0; i < n; i++) {
        assert_true(rg[i].first == 2 * i && rg[i].last == 2 * i);
    }
    free(v);
    v = many_ranges(MK_RANGES_MAX + 1, 0);
    assert_int_equal(mk_http_range_parse(v, strlen(v), 1000, rg, MK_RANGES_MAX, &n), MK_RANGE_NONE);
    free(v);
    /* unsatisfiable ones count too */
    v = many_ranges(MK_RANGES_MAX + 1, 10);
    assert_int_equal(mk_http_range_parse(v, strlen(v), 1000, rg, MK_RANGES_MAX, &n), MK_RANGE_NONE);
    free(v);
    v = many_ranges(MK_RANGES_MAX, MK_RANGES_MAX);
    assert_int_equal(mk_http_range_parse(v, strlen(v), 1000, rg, MK_RANGES_MAX, &n),
                     MK_RANGE_UNSATISFIABLE);
    free(v);
    v = many_ranges(MK_RANGES_MAX + 1, MK_RANGES_MAX + 1);
    assert_int_equal(mk_http_range_parse(v, strlen(v), 1000, rg, MK_RANGES_MAX, &n), MK_RANGE_NONE);
    free(v);
    /* empty list elements are not ranges */
    v = many_ranges(MK_RANGES_MAX, 0);
    size_t len = strlen(v);
    char *w = malloc(len + 40);
    assert_non_null(w);
    memcpy(w, v, len);
    memcpy(w + len, ",,, ,\t,", 7);
    assert_int_equal(mk_http_range_parse(w, len + 7, 1000, rg, MK_RANGES_MAX, &n), MK_RANGE_OK);
    assert_int_equal(n, MK_RANGES_MAX);
    free(w);
    free(v);
}

/* With room for fewer ranges than the set has: the count and the first of them. */
static void test_range_room(void **state)
{
    struct mk_range rg[3] = {{7, 7}, {7, 7}, {7, 7}};
    unsigned n = 0;
    const char *v = "bytes=0-1,5-6,-2";
    (void) state;

    assert_int_equal(mk_http_range_parse(v, strlen(v), 100, rg, 1, &n), MK_RANGE_OK);
    assert_int_equal(n, 3);
    assert_true(rg[0].first == 0 && rg[0].last == 1);
    assert_true(rg[1].first == 7 && rg[2].first == 7); /* beyond the room: untouched */
    assert_int_equal(mk_http_range_parse(v, strlen(v), 100, rg, 2, &n), MK_RANGE_OK);
    assert_int_equal(n, 3);
    assert_true(rg[1].first == 5 && rg[1].last == 6 && rg[2].first == 7);
    /* the order is still checked beyond the room */
    v = "bytes=0-1,5-6,3-4";
    assert_int_equal(mk_http_range_parse(v, strlen(v), 100, rg, 1, &n), MK_RANGE_NONE);
    v = "bytes=0-1,5-6,6-";
    assert_int_equal(mk_http_range_parse(v, strlen(v), 100, rg, 1, &n), MK_RANGE_NONE);
}

/* The length bounds the value: bytes beyond it are never read. */
static void test_range_uses_length(void **state)
{
    struct mk_range rg[MK_RANGES_MAX];
    unsigned n = 0;
    char *v = malloc(14);
    (void) state;

    assert_non_null(v);
    memcpy(v, "bytes=2-5,7-8X", 14);
    assert_int_equal(mk_http_range_parse(v, 9, 100, rg, MK_RANGES_MAX, &n), MK_RANGE_OK);
    assert_int_equal(n, 1);
    assert_int_equal(rg[0].first, 2);
    assert_int_equal(rg[0].last, 5);
    assert_int_equal(mk_http_range_parse(v, 13, 100, rg, MK_RANGES_MAX, &n), MK_RANGE_OK);
    assert_int_equal(n, 2);
    assert_int_equal(rg[1].first, 7);
    assert_int_equal(rg[1].last, 8);
    assert_int_equal(mk_http_range_parse(v, 14, 100, rg, MK_RANGES_MAX, &n), MK_RANGE_NONE);
    assert_int_equal(mk_http_range_parse(v, 7, 100, rg, MK_RANGES_MAX, &n), MK_RANGE_NONE);
    free(v);
}

struct etag_case {
    const char *value;
    const char *etag;
    bool weak;
    bool match;
};

/*
 * RFC 9110 8.8.3.2: strong comparison needs both tags strong and equal; weak
 * comparison ignores W/ on either side.
 */
static const struct etag_case etag_cases[] = {
    /* the table of the RFC, our tag first */
    {"W/\"1\"", "W/\"1\"", false, false},
    {"W/\"1\"", "W/\"1\"", true, true},
    {"W/\"1\"", "W/\"2\"", false, false},
    {"W/\"1\"", "W/\"2\"", true, false},
    {"W/\"1\"", "\"1\"", false, false},
    {"W/\"1\"", "\"1\"", true, true},
    {"\"1\"", "\"1\"", false, true},
    {"\"1\"", "\"1\"", true, true},
    {"\"1\"", "W/\"1\"", false, false},
    {"\"1\"", "W/\"1\"", true, true},
    /* different tags */
    {"\"abc\"", "\"abd\"", false, false},
    {"\"abc\"", "\"abc \"", true, false},
    {"\"ab\"", "\"abc\"", true, false},
    {"\"\"", "\"\"", false, true},
    {"\"\"", "\"x\"", true, false},
    /* case matters in tags */
    {"\"ABC\"", "\"abc\"", true, false},
    /* "*" matches any current representation */
    {"*", "\"x\"", false, true},
    {"*", "W/\"x\"", false, true},
    {" * ", "\"x\"", true, true},
    {"*, \"x\"", "\"x\"", false, false},
    {"**", "\"x\"", false, false},
    /* lists */
    {"\"a\", \"b\", \"c\"", "\"b\"", false, true},
    {"\"a\",\"b\",\"c\"", "\"c\"", false, true},
    {"\"a\", \"b\"", "\"c\"", true, false},
    {"\"a\", W/\"b\"", "\"b\"", false, false},
    {"\"a\", W/\"b\"", "\"b\"", true, true},
    {" \"a\" ,\t\"b\" ", "\"b\"", false, true},
    {", , \"a\" ,,", "\"a\"", false, true},
    {"\"a,b\"", "\"a,b\"", false, true}, /* comma inside a tag */
    {"\"a,b\"", "\"a\"", true, false},
    /* malformed lists match nothing */
    {"", "\"a\"", true, false},
    {"a", "a", true, false},
    {"\"a", "\"a\"", true, false},
    {"\"a\" \"b\"", "\"a\"", true, false},
    {"\"a\", b", "\"a\"", true, false},
    {"\"a\" x", "\"a\"", true, false},
    {"w/\"a\"", "\"a\"", true, false}, /* the weak prefix is case-sensitive */
    {"W/ \"a\"", "\"a\"", true, false},
    {"W/", "\"a\"", true, false},
    {"\"a b\"", "\"a b\"", true, false},     /* SP is not an etagc */
    {"\"a\x7f\"", "\"a\x7f\"", true, false}, /* nor DEL */
    {"\"a\001\"", "\"a\001\"", true, false},
    {"\"caf\xc3\xa9\"", "\"caf\xc3\xa9\"", false, true}, /* obs-text is */
};

static void test_etag_table(void **state)
{
    unsigned failures = 0;
    (void) state;

    for (size_t i = 0; i < sizeof(etag_cases) / sizeof(etag_cases[0]); i++) {
        const struct etag_case *c = &etag_cases[i];
        bool m = mk_http_etag_match(c->value, strlen(c->value), c->etag, strlen(c->etag), c->weak);
        if (m != c->match) {
            print_error("value '%s' etag '%s' %s: %s, expected %s\n", c->value, c->etag,
                        c->weak ? "weak" : "strong", m ? "match" : "no match",
                        c->match ? "match" : "no match");
            failures++;
        }
    }
    assert_int_equal(failures, 0);
}

/* If-Range: exactly one strong tag, equal to ours (RFC 9110 section 13.1.5). */
static const struct etag_case etag_is_cases[] = {
    {"\"1\"", "\"1\"", false, true},
    {" \"1\"\t", "\"1\"", false, true},
    {"\"1\"", "\"2\"", false, false},
    {"\"\"", "\"\"", false, true},
    {"W/\"1\"", "\"1\"", false, false}, /* weak: never a strong match */
    {"\"1\"", "W/\"1\"", false, false},
    {"W/\"1\"", "W/\"1\"", false, false},
    {"\"1\", \"zz\"", "\"1\"", false, false}, /* a list is not one tag */
    {"\"zz\", \"1\"", "\"1\"", false, false},
    {"\"1\",", "\"1\"", false, false},
    {",\"1\"", "\"1\"", false, false},
    {"\"1\" \"1\"", "\"1\"", false, false},
    {"*", "\"1\"", false, false},
    {"", "\"1\"", false, false},
    {"\"1", "\"1\"", false, false},
    {"\"a b\"", "\"a b\"", false, false},
    {"\"a,b\"", "\"a,b\"", false, true},
};

static void test_etag_is_table(void **state)
{
    unsigned failures = 0;
    (void) state;

    for (size_t i = 0; i < sizeof(etag_is_cases) / sizeof(etag_is_cases[0]); i++) {
        const struct etag_case *c = &etag_is_cases[i];
        bool m = mk_http_etag_is(c->value, strlen(c->value), c->etag, strlen(c->etag));
        if (m != c->match) {
            print_error("If-Range '%s' etag '%s': %s, expected %s\n", c->value, c->etag,
                        m ? "match" : "no match", c->match ? "match" : "no match");
            failures++;
        }
    }
    assert_int_equal(failures, 0);
    /* lengths are honoured */
    assert_true(mk_http_etag_is("\"ab\", \"c\"", 4, "\"ab\"", 4));
    assert_false(mk_http_etag_is("\"ab\"", 3, "\"ab\"", 4));
    assert_false(mk_http_etag_is("\"ab\"", 4, "\"ab\"XYZ", 7));
}

static void test_etag_uses_length(void **state)
{
    char *v = malloc(8);
    (void) state;

    assert_non_null(v);
    memcpy(v, "\"ab\", \"c", 8);
    assert_true(mk_http_etag_match(v, 4, "\"ab\"", 4, false));
    assert_false(mk_http_etag_match(v, 8, "\"ab\"", 4, false)); /* unterminated second tag */
    assert_false(mk_http_etag_match(v, 3, "\"ab\"", 4, false));
    /* the tag's length is honoured as well */
    assert_true(mk_http_etag_match("\"ab\"", 4, "\"ab\"XYZ", 4, false));
    assert_false(mk_http_etag_match("\"ab\"", 4, "\"ab\"XYZ", 7, false));
    free(v);
}

struct prio_case {
    const char *value;
    bool ok;
    int urgency; /* when ok, from the default {3, false} */
    bool incremental;
};

static const struct prio_case prio_cases[] = {
    {"u=0", true, 0, false},
    {"u=7, i", true, 7, true},
    {"i", true, 3, true}, /* no u: urgency 3, not 0 */
    {"i=?0", true, 3, false},
    {"", true, 3, false},
    {"  u=5\t", true, 5, false},
    {"u=1, u=6", true, 6, false}, /* the last value counts */
    {"u=07", true, 7, false},     /* an RFC 8941 integer may have leading zeros */
    {"u=-0", true, 0, false},
    {"u=2;a=1;b, i;x=\"y\"", true, 2, true},
    {"x=\"a, b\", u=0;p=1, i=?0", true, 0, false},
    {"u=0, y=(a b), z=:AAA=:, w=1.5, v=tok/en:1, *k=?1", true, 0, false},
    {"u=1,i", true, 1, true},
    {"u=1 ,  i", true, 1, true},
    {"a=(), b=( 1 \"x\";p ), u=4", true, 4, false},
    /* refused: the field is ignored */
    {"u=8", false},
    {"u=-1", false},
    {"u", false},     /* the boolean true, not an integer */
    {"u=1.0", false}, /* a decimal */
    {"u=\"1\"", false},
    {"u=(1)", false},
    {"i=1", false},
    {"i=?2", false},
    {"i=(?1)", false},
    {"u=0, i=5", false},
    {"u=0 u=1", false},
    {"u=1,", false},
    {",u=1", false},
    {"u=1,,i", false},
    {"U=1", false},
    {"1=1", false},
    {"u=1;", false},
    {"u=1;A", false},
    {"x=@", false},
    {"x=\"a", false},
    {"x=\"a\\b\"", false},
    {"x=\"\x01\"", false},
    {"x=:a-b:", false},
    {"x=:ab", false},
    {"x=(a", false},
    {"x=(a)b", false},
    {"x=(a,b)", false},
    {"x=1234567890123456", false}, /* 16 digits */
    {"x=123456789012345", true, 3, false},
    {"x=1234567890123.1", false}, /* 13 digits before the point */
    {"x=123456789012.123", true, 3, false},
    {"x=1.1234", false},
    {"x=1.", false},
    {"x=-", false},
    {"x=?", false},
};

static void test_priority_table(void **state)
{
    unsigned failures = 0;
    (void) state;

    for (size_t i = 0; i < sizeof(prio_cases) / sizeof(prio_cases[0]); i++) {
        const struct prio_case *c = &prio_cases[i];
        struct mk_http_priority p = {MK_HTTP_URGENCY_DEFAULT, false};
        bool ok = mk_http_priority_parse(c->value, strlen(c->value), &p);
        int want_u = c->ok ? c->urgency : MK_HTTP_URGENCY_DEFAULT;
        bool want_i = c->ok && c->incremental;
        if (ok != c->ok || p.urgency != want_u || p.incremental != want_i) {
            print_error("priority '%s': %s u=%d i=%d, expected %s u=%d i=%d\n", c->value,
                        ok ? "accepted" : "refused", p.urgency, p.incremental,
                        c->ok ? "accepted" : "refused", want_u, want_i);
            failures++;
        }
    }
    assert_int_equal(failures, 0);
}

/* A refused value leaves the priority alone, even after a good member. */
static void test_priority_refused_untouched(void **state)
{
    struct mk_http_priority p = {5, true};
    (void) state;

    assert_false(mk_http_priority_parse("u=0, i=?0, x=@", 14, &p));
    assert_int_equal(p.urgency, 5);
    assert_true(p.incremental);
}

/* Lines read one after the other give what their comma-joined value gives; lengths are honoured. */
static void test_priority_lines_and_length(void **state)
{
    struct mk_http_priority p = {MK_HTTP_URGENCY_DEFAULT, false};
    (void) state;

    assert_true(mk_http_priority_parse("u=1", 3, &p));
    assert_true(mk_http_priority_parse("i", 1, &p));
    assert_int_equal(p.urgency, 1);
    assert_true(p.incremental);
    assert_true(mk_http_priority_parse("u=2, u=9", 3, &p)); /* only "u=2" */
    assert_int_equal(p.urgency, 2);
    assert_false(mk_http_priority_parse("u=2, u=9", 8, &p));
    assert_int_equal(p.urgency, 2);
}

static void test_reason(void **state)
{
    (void) state;
    assert_string_equal(mk_http_reason(100), "Continue");
    assert_string_equal(mk_http_reason(200), "OK");
    assert_string_equal(mk_http_reason(206), "Partial Content");
    assert_string_equal(mk_http_reason(304), "Not Modified");
    assert_string_equal(mk_http_reason(400), "Bad Request");
    assert_string_equal(mk_http_reason(404), "Not Found");
    assert_string_equal(mk_http_reason(413), "Content Too Large");
    assert_string_equal(mk_http_reason(414), "URI Too Long");
    assert_string_equal(mk_http_reason(416), "Range Not Satisfiable");
    assert_string_equal(mk_http_reason(417), "Expectation Failed");
    assert_string_equal(mk_http_reason(431), "Request Header Fields Too Large");
    assert_string_equal(mk_http_reason(500), "Internal Server Error");
    assert_string_equal(mk_http_reason(501), "Not Implemented");
    assert_string_equal(mk_http_reason(503), "Service Unavailable");
    assert_string_equal(mk_http_reason(505), "HTTP Version Not Supported");
    assert_string_equal(mk_http_reason(0), "Unknown");
    assert_string_equal(mk_http_reason(-1), "Unknown");
    assert_string_equal(mk_http_reason(299), "Unknown");
    assert_string_equal(mk_http_reason(418), "Unknown");
    assert_string_equal(mk_http_reason(999), "Unknown");
}

/* Every status the parser or the server can answer has a real phrase. */
static void test_reason_covers_parser_statuses(void **state)
{
    static const int statuses[] = {100, 200, 204, 206, 301, 304, 400, 403, 404, 405, 408,
                                   411, 412, 413, 414, 416, 417, 431, 500, 501, 503, 505};
    (void) state;

    for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
        const char *r = mk_http_reason(statuses[i]);
        assert_non_null(r);
        if (strcmp(r, "Unknown") == 0) {
            fail_msg("status %d has no reason phrase", statuses[i]);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_range_table),
        cmocka_unit_test(test_range_count_bound),
        cmocka_unit_test(test_range_room),
        cmocka_unit_test(test_range_uses_length),
        cmocka_unit_test(test_etag_table),
        cmocka_unit_test(test_etag_uses_length),
        cmocka_unit_test(test_etag_is_table),
        cmocka_unit_test(test_priority_table),
        cmocka_unit_test(test_priority_refused_untouched),
        cmocka_unit_test(test_priority_lines_and_length),
        cmocka_unit_test(test_reason),
        cmocka_unit_test(test_reason_covers_parser_statuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
