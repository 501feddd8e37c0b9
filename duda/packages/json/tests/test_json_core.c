/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_json_core.c: the json package's parsing and printing (json_core.c):
 * what is JSON and what is not, the reasons given, compact and pretty.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json_core.h"

static cJSON *parse(const char *text, char *why)
{
    return duda_json_core_parse(text, strlen(text), why, 96);
}

static void test_values_parse(void **state)
{
    (void) state;
    static const char *const good[] = {"{}", " [1, 2.5, -3e2] ", "\"a\\u00e9\"", "null",
                                       "{\"a\": {\"b\": [true, false]}}\n"};
    char why[96];
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        cJSON *v = parse(good[i], why);
        assert_non_null(v);
        cJSON_Delete(v);
    }
    cJSON *v = parse("{\"title\": \"x\", \"n\": 42}", why);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(v, "title")->valuestring, "x");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(v, "n")->valueint, 42);
    cJSON_Delete(v);
}

static void test_bad_json_refused_with_reason(void **state)
{
    (void) state;
    char why[96];
    assert_null(parse("", why));
    assert_string_equal(why, "empty: no JSON value");
    assert_null(parse("{\"a\": }", why));
    assert_string_equal(why, "not JSON: a syntax error at byte 6");
    assert_null(parse("{} {}", why));
    assert_string_equal(why, "not JSON: text after the value at byte 3");
    assert_null(parse("{\"a\":1,}", why));
    /* A NUL byte inside the length is not white space, nor a raw control character text. */
    assert_null(duda_json_core_parse("{}\0", 3, why, sizeof(why)));
    assert_string_equal(why, "not JSON: a control character at byte 2");
    assert_null(parse("[\"a\x01\"]", why));
    assert_string_equal(why, "not JSON: a control character at byte 3");
    assert_null(parse("{\"n\": [1, -1e999]}", why));
    assert_string_equal(why, "a number too large (beyond a double)");
    /* Only len bytes are read: the text need not be NUL terminated. */
    cJSON *v = duda_json_core_parse("[1]]", 3, why, sizeof(why));
    assert_non_null(v);
    cJSON_Delete(v);
}

static void test_deep_nesting_refused(void **state)
{
    (void) state;
    size_t n = 5000;
    char *deep = malloc(2 * n + 1), why[96];
    memset(deep, '[', n);
    memset(deep + n, ']', n);
    deep[2 * n] = '\0';
    assert_null(duda_json_core_parse(deep, 2 * n, why, sizeof(why)));
    free(deep);
}

static void test_print_compact_and_pretty(void **state)
{
    (void) state;
    char why[96];
    size_t len;
    cJSON *v = parse("{ \"id\" : 1, \"tags\" : [\"a\", \"b\"] }", why);
    char *s = duda_json_core_print(v, 0, &len);
    assert_string_equal(s, "{\"id\":1,\"tags\":[\"a\",\"b\"]}\n");
    assert_int_equal(len, strlen(s));
    free(s);
    s = duda_json_core_print(v, 1, &len);
    assert_string_equal(s, "{\n\t\"id\":\t1,\n\t\"tags\":\t[\"a\", \"b\"]\n}\n");
    free(s);
    cJSON_Delete(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_parse),
        cmocka_unit_test(test_bad_json_refused_with_reason),
        cmocka_unit_test(test_deep_nesting_refused),
        cmocka_unit_test(test_print_compact_and_pretty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
