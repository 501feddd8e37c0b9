/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_ratelimit.c: unit tests of server/http/ratelimit.c: the RateLimit
 * line of a [RULE] (rates, options, what is refused) and the cookie a key
 * names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <monkey/mk_common.h>

#include "server/http/ratelimit.h"

static void test_parse_rates_and_options(void **state)
{
    struct mk_rate_limit l;
    char reason[256];
    (void) state;

    assert_int_equal(mk_rate_limit_parse(&l, "10/s", reason, sizeof(reason)), MK_OK);
    assert_int_equal(l.rate, 10);
    assert_int_equal(l.interval_us, 100000);
    assert_int_equal(l.burst, 0);
    assert_int_equal(l.key, MK_RATE_KEY_ADDR);
    assert_int_equal(l.keys, MK_RATE_KEYS_DEFAULT);
    mk_rate_limit_free(&l);

    assert_int_equal(mk_rate_limit_parse(&l, "600/m  burst=20 key=header:X-Api-Key keys=1000",
                                         reason, sizeof(reason)),
                     MK_OK);
    assert_int_equal(l.interval_us, 100000);
    assert_int_equal(l.per, 'm');
    assert_int_equal(l.burst, 20);
    assert_int_equal(l.key, MK_RATE_KEY_HEADER);
    assert_string_equal(l.name, "X-Api-Key");
    assert_int_equal(l.keys, 1000);
    mk_rate_limit_free(&l);

    assert_int_equal(mk_rate_limit_parse(&l, "3/s key=cookie:sid", reason, sizeof(reason)), MK_OK);
    assert_int_equal(l.key, MK_RATE_KEY_COOKIE);
    assert_int_equal(l.interval_us, 333333);
    assert_int_equal(l.name_len, 3);
    mk_rate_limit_free(&l);

    assert_int_equal(mk_rate_limit_parse(&l, "10/s burst=5 delay", reason, sizeof(reason)), MK_OK);
    assert_true(l.delay);
    assert_int_equal(l.delay_free, 0);
    mk_rate_limit_free(&l);
    assert_int_equal(mk_rate_limit_parse(&l, "10/s burst=5 delay=2", reason, sizeof(reason)),
                     MK_OK);
    assert_true(l.delay);
    assert_int_equal(l.delay_free, 2);
    assert_int_equal(l.burst, 5);
    mk_rate_limit_free(&l);

    /* the last key= wins */
    assert_int_equal(mk_rate_limit_parse(&l, "1/s key=header:X key=addr", reason, sizeof(reason)),
                     MK_OK);
    assert_int_equal(l.key, MK_RATE_KEY_ADDR);
    assert_null(l.name);
    mk_rate_limit_free(&l);

    assert_int_equal(mk_rate_limit_parse(&l, "1000000/s key=path", reason, sizeof(reason)), MK_OK);
    assert_int_equal(l.key, MK_RATE_KEY_PATH);
    assert_int_equal(l.interval_us, 1);
    mk_rate_limit_free(&l);
}

static void test_parse_refuses(void **state)
{
    static const struct {
        const char *value, *words;
    } bad[] = {
        {"", "expected a rate"},
        {"10", "expected a rate"},
        {"10/h", "expected a rate"},
        {"0/s", "expected a rate"},
        {"1000001/s", "expected a rate"},
        {"-1/s", "expected a rate"},
        {"10/s/s", "expected a rate"},
        {"10/s burst", "unknown option"},
        {"10/s burst=", "bad 'burst='"},
        {"10/s burst=1000001", "bad 'burst=1000001'"},
        {"10/s key=", "bad 'key='"},
        {"10/s key=header:", "bad 'key=header:'"},
        {"10/s key=header:a:b", "bad 'key=header:a:b'"},
        {"10/s key=cookie:a,b", "bad 'key=cookie:a,b'"},
        {"10/s keys=7", "bad 'keys=7'"},
        {"10/s keys=16777217", "bad 'keys=16777217'"},
        {"10/s nodelay", "unknown option"},
        {"10/s delay=", "bad 'delay='"},
        {"10/s delay=x", "bad 'delay=x'"},
    };
    struct mk_rate_limit l;
    char reason[256];
    (void) state;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        reason[0] = '\0';
        assert_int_equal(mk_rate_limit_parse(&l, bad[i].value, reason, sizeof(reason)), MK_ERR);
        if (!strstr(reason, bad[i].words)) {
            fail_msg("%s: %s", bad[i].value, reason);
        }
        assert_null(l.name);
    }
}

static void test_cookie(void **state)
{
    static const struct {
        const char *field, *name, *value; /* value NULL: none */
    } cases[] = {
        {"sid=abc", "sid", "abc"},
        {"a=1; sid=abc; b=2", "sid", "abc"},
        {"a=1;sid = abc ;b=2", "sid", "abc"},
        {"xsid=1; sid=2", "sid", "2"},
        {"sidx=1", "sid", NULL},
        {"sid", "sid", NULL},
        {"sid=", "sid", ""},
        {";;; ;", "sid", NULL},
        {"", "sid", NULL},
        {"a=1; sid=\"q\"", "sid", "\"q\""},
    };
    (void) state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct mk_str out;
        struct mk_str f = mk_str_make(cases[i].field, strlen(cases[i].field));
        bool found = mk_rate_cookie(f, cases[i].name, strlen(cases[i].name), &out);
        if (!cases[i].value) {
            assert_false(found);
            continue;
        }
        assert_true(found);
        assert_int_equal(out.len, strlen(cases[i].value));
        assert_memory_equal(out.p, cases[i].value, out.len);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_rates_and_options),
        cmocka_unit_test(test_parse_refuses),
        cmocka_unit_test(test_cookie),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
