/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_mk_json.c: unit tests of include/monkey/mk_json.h, the UTF-8
 * validator and JSON writer shared by the server and its plugins.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <monkey/mk_json.h>

#define RAW(s) (const unsigned char *) (s), sizeof(s) - 1

static void test_utf8_len(void **state)
{
    (void) state;
    assert_int_equal(mk_utf8_len(RAW("a")), 1);
    assert_int_equal(mk_utf8_len(RAW("\xc3\xa9")), 2);         /* é */
    assert_int_equal(mk_utf8_len(RAW("\xe2\x82\xac")), 3);     /* € */
    assert_int_equal(mk_utf8_len(RAW("\xf0\x9f\x90\x92")), 4); /* U+1F412 */
    assert_int_equal(mk_utf8_len(RAW("\xf4\x8f\xbf\xbf")), 4); /* U+10FFFF */
    assert_int_equal(mk_utf8_len(RAW("\xc0\xaf")), 0);         /* overlong '/' */
    assert_int_equal(mk_utf8_len(RAW("\xe0\x80\xaf")), 0);     /* overlong */
    assert_int_equal(mk_utf8_len(RAW("\xf0\x80\x80\xaf")), 0); /* overlong */
    assert_int_equal(mk_utf8_len(RAW("\xed\xa0\x80")), 0);     /* surrogate U+D800 */
    assert_int_equal(mk_utf8_len(RAW("\xf4\x90\x80\x80")), 0); /* U+110000 */
    assert_int_equal(mk_utf8_len(RAW("\x80")), 0);             /* continuation alone */
    assert_int_equal(mk_utf8_len(RAW("\xc3")), 0);             /* cut short */
    assert_int_equal(mk_utf8_len((const unsigned char *) "\xe2\x82\xac", 2), 0); /* n bounds */
    assert_int_equal(mk_utf8_len(RAW("\xff")), 0);
}

static void test_utf8_valid(void **state)
{
    (void) state;
    assert_true(mk_utf8_valid("", 0));
    assert_true(mk_utf8_valid("caf\xc3\xa9 \xe2\x82\xac", 9));
    assert_false(mk_utf8_valid("caf\xc3", 4));
    assert_false(mk_utf8_valid("a\xed\xbf\xbf", 4));
}

/* ASCII is taken 8 bytes at a time: a bad byte anywhere after a run is still found. */
static void test_utf8_valid_after_ascii_runs(void **state)
{
    char buf[40];
    (void) state;

    for (size_t at = 0; at < 32; at++) {
        memset(buf, 'a', sizeof(buf));
        assert_true(mk_utf8_valid(buf, at + 8));
        buf[at] = (char) 0x80; /* a continuation byte alone */
        assert_false(mk_utf8_valid(buf, at + 1));
        assert_false(mk_utf8_valid(buf, sizeof(buf)));
        memcpy(buf + at, "\xe2\x82\xac", 3); /* a whole sequence */
        assert_true(mk_utf8_valid(buf, sizeof(buf)));
        assert_false(mk_utf8_valid(buf, at + 2)); /* cut short */
    }
}

static void test_writer_structure(void **state)
{
    struct mk_json j;
    (void) state;

    mk_json_init(&j, 4096);
    mk_json_object_begin(&j);
    mk_json_key(&j, "name");
    mk_json_string(&j, "monkey");
    mk_json_key(&j, "sizes");
    mk_json_array_begin(&j);
    mk_json_uint(&j, 1);
    mk_json_int(&j, -2);
    mk_json_array_begin(&j);
    mk_json_array_end(&j);
    mk_json_object_begin(&j);
    mk_json_object_end(&j);
    mk_json_array_end(&j);
    mk_json_key(&j, "ok");
    mk_json_bool(&j, true);
    mk_json_key(&j, "none");
    mk_json_null(&j);
    mk_json_key(&j, "nothing");
    mk_json_string(&j, NULL);
    mk_json_key(&j, "big");
    mk_json_uint(&j, UINT64_MAX);
    mk_json_object_end(&j);
    assert_false(j.failed);
    assert_string_equal(j.data, "{\"name\":\"monkey\",\"sizes\":[1,-2,[],{}],\"ok\":true,"
                                "\"none\":null,\"nothing\":null,\"big\":18446744073709551615}");
    assert_int_equal(j.len, strlen(j.data));
    mk_json_free(&j);
}

static void test_writer_escaping(void **state)
{
    struct mk_json j;
    (void) state;

    mk_json_init(&j, 4096);
    mk_json_array_begin(&j);
    mk_json_string(&j, "q\"b\\n\nr\rt\t\x01\x1f\x7f");
    mk_json_string(&j, "caf\xc3\xa9");     /* valid UTF-8 is kept as is */
    mk_json_string(&j, "bad\xff\xc3(end"); /* each invalid byte becomes U+FFFD */
    mk_json_string_n(&j, "a\0b", 3);       /* NUL inside a counted string */
    mk_json_array_end(&j);
    assert_false(j.failed);
    assert_string_equal(j.data, "[\"q\\\"b\\\\n\\nr\\rt\\t\\u0001\\u001f\\u007f\","
                                "\"caf\xc3\xa9\",\"bad\\ufffd\\ufffd(end\",\"a\\u0000b\"]");
    mk_json_free(&j);
}

static void test_writer_bounds(void **state)
{
    struct mk_json j;
    (void) state;

    mk_json_init(&j, 16);
    mk_json_string(&j, "0123456789");
    assert_false(j.failed);
    assert_int_equal(j.len, 12);
    mk_json_string(&j, "too much"); /* would pass 16 bytes */
    assert_true(j.failed);
    size_t len = j.len;
    mk_json_raw_str(&j, "x"); /* nothing once failed */
    assert_int_equal(j.len, len);
    mk_json_free(&j);

    mk_json_init(&j, 4096);
    for (int i = 0; i < MK_JSON_DEPTH; i++) {
        mk_json_array_begin(&j);
    }
    assert_true(j.failed); /* nested too deep */
    mk_json_free(&j);

    mk_json_init(&j, 4096);
    mk_json_array_end(&j); /* closes nothing */
    assert_true(j.failed);
    mk_json_free(&j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_len),
        cmocka_unit_test(test_utf8_valid),
        cmocka_unit_test(test_utf8_valid_after_ascii_runs),
        cmocka_unit_test(test_writer_structure),
        cmocka_unit_test(test_writer_escaping),
        cmocka_unit_test(test_writer_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
