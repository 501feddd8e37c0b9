/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_reqid.c: unit tests of server/http/reqid.c (the request ID check,
 * the traceparent parser and writer, the hex writer): tables of
 * values with the answer expected.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server/http/reqid.h"

#define TP_OK "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

struct tp_case {
    const char *value;
    bool ok;
};

static void test_traceparent_table(void **state)
{
    static const struct tp_case cases[] = {
        {TP_OK, true},
        {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", true},
        {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-ff", true}, /* unknown flags kept */
        /* a later version: 55 bytes, or more behind a '-' */
        {"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", true},
        {"cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-more", true},
        {"cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01more", false},
        /* version 00 is exactly 55 bytes */
        {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-", false},
        {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0", false},
        {"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", false},
        /* ids all zero */
        {"00-00000000000000000000000000000000-b7ad6b7169203331-01", false},
        {"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", false},
        /* uppercase, other bytes, dashes misplaced */
        {"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", false},
        {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333g-01", false},
        {"0x-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", false},
        {"00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", false},
        {"00-0af7651916cd43dd8448eb211c80319cb-7ad6b7169203331-01", false},
        {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331_01", false},
        {"", false},
        {"garbage", false},
    };
    (void) state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct mk_traceparent tp;
        bool ok = mk_traceparent_parse(cases[i].value, strlen(cases[i].value), &tp);
        if (ok != cases[i].ok) {
            fail_msg("case %zu '%s': %d", i, cases[i].value, ok);
        }
    }
}

static void test_traceparent_fields_and_format(void **state)
{
    struct mk_traceparent tp;
    char out[MK_TRACEPARENT_LEN];

    (void) state;
    assert_true(mk_traceparent_parse(TP_OK, strlen(TP_OK), &tp));
    assert_int_equal(tp.trace_id[0], 0x0a);
    assert_int_equal(tp.trace_id[15], 0x9c);
    assert_int_equal(tp.parent_id[0], 0xb7);
    assert_int_equal(tp.parent_id[7], 0x31);
    assert_int_equal(tp.flags, 1);
    mk_traceparent_format(&tp, out);
    assert_memory_equal(out, TP_OK, MK_TRACEPARENT_LEN);
    /* a later version is written back as 00 */
    const char *v = "cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x";
    assert_true(mk_traceparent_parse(v, strlen(v), &tp));
    mk_traceparent_format(&tp, out);
    assert_memory_equal(out, TP_OK, MK_TRACEPARENT_LEN);
    /* the length is honoured: no byte past it is read */
    assert_false(mk_traceparent_parse(TP_OK, MK_TRACEPARENT_LEN - 1, &tp));
}

static void test_reqid_valid(void **state)
{
    char big[MK_REQID_MAX + 1];

    (void) state;
    assert_true(mk_reqid_valid("abc-123", 7));
    assert_true(mk_reqid_valid("f81d4fae-7dec-11d0-a765-00a0c91e6bf6", 36));
    assert_true(mk_reqid_valid("!~", 2));
    assert_false(mk_reqid_valid("", 0));
    assert_false(mk_reqid_valid("a b", 3));
    assert_false(mk_reqid_valid("a\tb", 3));
    assert_false(mk_reqid_valid("a\x7f", 2));
    assert_false(mk_reqid_valid("caf\xc3\xa9", 5));
    assert_false(mk_reqid_valid("a\0b", 3));
    memset(big, 'x', sizeof(big));
    assert_true(mk_reqid_valid(big, MK_REQID_MAX));
    assert_false(mk_reqid_valid(big, MK_REQID_MAX + 1));
}

static void test_reqid_hex(void **state)
{
    static const uint8_t bytes[] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
    char out[16];

    (void) state;
    mk_reqid_hex(bytes, sizeof(bytes), out);
    assert_memory_equal(out, "0123456789abcdef", 16);
    assert_true(mk_reqid_valid(out, sizeof(out)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_traceparent_table),
        cmocka_unit_test(test_traceparent_fields_and_format),
        cmocka_unit_test(test_reqid_valid),
        cmocka_unit_test(test_reqid_hex),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
