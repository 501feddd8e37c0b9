/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_config.c: unit tests of core/config.c, the reader of the indented
 * configuration format, and its typed value readers.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/config.h"

#define RAW(s) s, sizeof(s) - 1

/* Parse a buffer copied into an allocation of its exact size. */
static struct mk_conf *parse(const char *text, size_t len, char *err, size_t errlen)
{
    char *buf = malloc(len ? len : 1);
    struct mk_conf *conf;

    assert_non_null(buf);
    memcpy(buf, text, len);
    conf = mk_conf_parse("t.conf", buf, len, err, errlen);
    free(buf);
    return conf;
}

static struct mk_conf *parse_ok(const char *text, size_t len)
{
    char err[MK_CONF_ERR_LEN] = "";
    struct mk_conf *conf = parse(text, len, err, sizeof(err));
    if (!conf) {
        fail_msg("rejected: %s", err);
    }
    return conf;
}

/* The parse fails with "t.conf:LINE: " and a message containing `needle`. */
static void parse_fails(const char *text, size_t len, int line, const char *needle)
{
    char err[MK_CONF_ERR_LEN] = "", prefix[32];
    struct mk_conf *conf = parse(text, len, err, sizeof(err));

    if (conf) {
        mk_conf_free(conf);
        fail_msg("accepted: '%.*s'", (int) len, text);
    }
    snprintf(prefix, sizeof(prefix), "t.conf:%d: ", line);
    if (strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, needle)) {
        fail_msg("'%.*s': message '%s', expected '%s...%s'", (int) len, text, err, prefix, needle);
    }
}

static const char *value_of(const struct mk_conf *conf, const char *section, const char *key)
{
    struct mk_conf_section *s = mk_conf_section(conf, section);
    struct mk_conf_entry *e;

    assert_non_null(s);
    e = mk_conf_entry(s, key);
    return e ? e->value : NULL;
}

static void test_sections_and_entries(void **state)
{
    struct mk_conf *conf = parse_ok(RAW("[First]\n"
                                        "    Alpha one\n"
                                        "    beta  two words  \n"
                                        "\n"
                                        "[second section]\n"
                                        "\tGamma\tthree\n"
                                        "  \t delta four\n"
                                        "[Empty]\n"));
    struct mk_conf_section *s;
    struct mk_conf_entry *e;
    (void) state;

    assert_string_equal(conf->path, "t.conf");
    s = mk_conf_section(conf, "first");
    assert_non_null(s);
    assert_string_equal(s->name, "First");
    assert_int_equal(s->line, 1);
    e = mk_conf_entry(s, "ALPHA");
    assert_non_null(e);
    assert_string_equal(e->key, "Alpha");
    assert_string_equal(e->value, "one");
    assert_int_equal(e->line, 2);
    assert_ptr_equal(e->section, s);
    assert_string_equal(value_of(conf, "FIRST", "beta"), "two words");
    assert_null(mk_conf_entry(s, "gamma")); /* in another section */
    assert_null(mk_conf_entry(s, "alph"));

    s = mk_conf_section(conf, "SECOND SECTION");
    assert_non_null(s);
    assert_int_equal(s->line, 5);
    assert_string_equal(value_of(conf, "second section", "gamma"), "three");
    e = mk_conf_entry(s, "delta");
    assert_non_null(e);
    assert_string_equal(e->value, "four");
    assert_int_equal(e->line, 7);

    s = mk_conf_section(conf, "empty");
    assert_non_null(s);
    assert_true(mk_list_is_empty(&s->entries));
    assert_null(mk_conf_section(conf, "missing"));
    mk_conf_free(conf);
}

/* Repeated sections and keys are kept; lookups return the first. */
static void test_repeats_kept_in_order(void **state)
{
    struct mk_conf *conf = parse_ok(RAW("[A]\n    k 1\n    K 2\n[a]\n    k 3\n"));
    struct mk_conf_section *s = mk_conf_section(conf, "A");
    struct mk_conf_entry *e;
    (void) state;

    assert_int_equal(s->line, 1);
    e = mk_conf_entry(s, "k");
    assert_string_equal(e->value, "1");
    e = mk_conf_next(conf, e);
    assert_string_equal(e->value, "2");
    e = mk_conf_next(conf, e);
    assert_string_equal(e->value, "3");
    assert_int_equal(e->section->line, 4);
    assert_null(mk_conf_next(conf, e));
    mk_conf_free(conf);
}

static void test_comments(void **state)
{
    struct mk_conf *conf = parse_ok(RAW("# leading comment\n"
                                        "   # indented comment before any section\n"
                                        "[S]   # after a header\n"
                                        "    # indented comment\n"
                                        "    a value # trailing comment\n"
                                        "    b value\t# after a tab\n"
                                        "    c a#b\n"
                                        "    d url http://x/#frag\n"
                                        "    e 50%#\n"
                                        "    f x  #  y # z\n"
                                        "#[NOT]\n"
                                        "    g last\n"));
    (void) state;

    assert_string_equal(value_of(conf, "S", "a"), "value");
    assert_string_equal(value_of(conf, "S", "b"), "value");
    assert_string_equal(value_of(conf, "S", "c"), "a#b");
    assert_string_equal(value_of(conf, "S", "d"), "url http://x/#frag");
    assert_string_equal(value_of(conf, "S", "e"), "50%#");
    assert_string_equal(value_of(conf, "S", "f"), "x");
    assert_string_equal(value_of(conf, "S", "g"), "last");
    assert_null(mk_conf_section(conf, "NOT"));
    mk_conf_free(conf);
}

static void test_crlf_and_last_line(void **state)
{
    struct mk_conf *conf = parse_ok(RAW("[S]\r\n    a 1\r\n\r\n    b two words \r\n    c 3"));
    struct mk_conf_entry *e;
    (void) state;

    assert_string_equal(value_of(conf, "S", "a"), "1");
    assert_string_equal(value_of(conf, "S", "b"), "two words");
    e = mk_conf_entry(mk_conf_section(conf, "S"), "c");
    assert_non_null(e);
    assert_string_equal(e->value, "3"); /* no final newline */
    assert_int_equal(e->line, 5);
    mk_conf_free(conf);

    conf = parse_ok(RAW("[S]\r\n    a x # c\r\n"));
    assert_string_equal(value_of(conf, "S", "a"), "x");
    mk_conf_free(conf);
}

static void test_empty_inputs(void **state)
{
    struct mk_conf *conf;
    (void) state;

    conf = parse_ok(RAW(""));
    assert_true(mk_list_is_empty(&conf->sections));
    assert_null(mk_conf_next(conf, NULL));
    mk_conf_free(conf);

    conf = parse_ok(RAW("\n\n   \n\t\n# only comments\n"));
    assert_true(mk_list_is_empty(&conf->sections));
    mk_conf_free(conf);
}

static void test_syntax_errors(void **state)
{
    (void) state;
    parse_fails(RAW("# c\n\n    key value\n"), 3, "outside");
    parse_fails(RAW("[S]\nkey value\n"), 2, "SECTION");
    parse_fails(RAW("[S]\n    a 1\n\n  [T]\n"), 4, "invalid character in key");
    parse_fails(RAW("[S\n"), 1, "malformed");
    parse_fails(RAW("[]\n"), 1, "malformed");
    parse_fails(RAW("[S] x\n"), 1, "after section header");
    parse_fails(RAW("[S]]\n"), 1, "after section header");
    parse_fails(RAW("[S$]\n"), 1, "invalid character in section");
    parse_fails(RAW("[S]\n    k$y v\n"), 2, "invalid character in key");
    parse_fails(RAW("[S]\n    k=v\n"), 2, "invalid character in key");
    parse_fails(RAW("[S]\n    key\n"), 2, "'key' has no value");
    parse_fails(RAW("[S]\n    key   \n"), 2, "no value");
    parse_fails(RAW("[S]\n    a 1\n    b x\0y\n"), 3, "NUL");
    parse_fails(RAW("[S]\0\n"), 1, "NUL");
    parse_fails(RAW("[S]\n    a 1\rb\n"), 2, "carriage return");
    parse_fails(RAW("[S]\n    a 1\r\r\n"), 2, "carriage return");
    parse_fails(RAW("[S]\r\n    a 1\r\n    b\r\n"), 3, "no value");
    parse_fails(RAW("\xef\xbb\xbf[S]\n"), 1, "SECTION"); /* a byte order mark */
}

/*
 * config.h: " #" or "\t#" starts a comment, also right after the key, so
 * "Key # note" is a key without a value, not the value "# note".
 */
static void test_comment_right_after_key(void **state)
{
    (void) state;
    parse_fails(RAW("[S]\n    key # only a comment\n"), 2, "no value");
    parse_fails(RAW("[S]\n    key\t#comment\n"), 2, "no value");
}

/* A message longer than the buffer is cut, never overflows it. */
static void test_error_truncation(void **state)
{
    char *err = malloc(12);
    struct mk_conf conf = {.path = "a/long/label/for/messages"};
    (void) state;

    assert_non_null(err);
    assert_false(mk_conf_error(&conf, 42, err, 12, "%s", "some message"));
    assert_int_equal(strlen(err), 11);
    assert_memory_equal(err, "a/long/labe", 11);
    memset(err, 'x', 12);
    assert_false(mk_conf_error(&conf, 7, err, 12, "%d", 12345));
    assert_string_equal(err, "a/long/labe");
    free(err);

    char big[64];
    struct mk_conf small = {.path = "f"};
    assert_false(mk_conf_error(&small, 7, big, sizeof(big), "bad %s %d", "x", 5));
    assert_string_equal(big, "f:7: bad x 5");
    assert_false(mk_conf_error(NULL, 3, big, sizeof(big), "m"));
    assert_string_equal(big, "?:3: m");
    assert_false(mk_conf_error(&small, 1, NULL, 0, "nothing written"));
}

/* ---- mk_conf_next -------------------------------------------------------- */

static void test_next_across_sections(void **state)
{
    struct mk_conf *conf = parse_ok(RAW("[Empty1]\n"
                                        "[A]\n    k1 v1\n    k2 v2\n"
                                        "[Empty2]\n[Empty3]\n"
                                        "[B]\n    k3 v3\n"
                                        "[Empty4]\n"));
    static const char *const keys[] = {"k1", "k2", "k3"};
    static const char *const sections[] = {"A", "A", "B"};
    struct mk_conf_entry *e = NULL;
    size_t n = 0;
    (void) state;

    while ((e = mk_conf_next(conf, e))) {
        assert_true(n < 3);
        assert_string_equal(e->key, keys[n]);
        assert_string_equal(e->section->name, sections[n]);
        n++;
    }
    assert_int_equal(n, 3);
    mk_conf_free(conf);

    conf = parse_ok(RAW("[A]\n[B]\n"));
    assert_null(mk_conf_next(conf, NULL));
    mk_conf_free(conf);
}

/* ---- typed readers ------------------------------------------------------- */

/* An entry with `value` on line 9 of "t.conf". */
struct fake {
    struct mk_conf conf;
    struct mk_conf_section section;
    struct mk_conf_entry entry;
};

static void fake_init(struct fake *f, const char *value)
{
    memset(f, 0, sizeof(*f));
    f->conf.path = "t.conf";
    f->section.name = "S";
    f->entry.key = "Key";
    f->entry.value = (char *) value;
    f->entry.line = 9;
    f->entry.section = &f->section;
}

static void test_bool(void **state)
{
    static const char *const yes[] = {"on", "On", "ON", "yes", "Yes", "true", "TRUE", "1"};
    static const char *const no[] = {"off", "Off", "OFF", "no", "NO", "false", "False", "0"};
    static const char *const bad[] = {"", "maybe", "2", "onn", "o", "y", "n", "enable", "-1", "01"};
    char err[MK_CONF_ERR_LEN];
    struct fake f;
    bool b;
    (void) state;

    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        fake_init(&f, yes[i]);
        b = false;
        assert_true(mk_conf_bool(&f.conf, &f.entry, &b, err, sizeof(err)));
        assert_true(b);
    }
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        fake_init(&f, no[i]);
        b = true;
        assert_true(mk_conf_bool(&f.conf, &f.entry, &b, err, sizeof(err)));
        assert_false(b);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        fake_init(&f, bad[i]);
        b = true;
        err[0] = '\0';
        assert_false(mk_conf_bool(&f.conf, &f.entry, &b, err, sizeof(err)));
        assert_true(b); /* untouched */
        assert_true(strncmp(err, "t.conf:9: Key: ", 15) == 0);
    }
    fake_init(&f, "bad");
    assert_false(mk_conf_bool(&f.conf, &f.entry, &b, NULL, 0));
}

static bool conf_int(const char *value, long min, long max, long *out, char *err)
{
    struct fake f;
    fake_init(&f, value);
    return mk_conf_int(&f.conf, &f.entry, min, max, out, err, MK_CONF_ERR_LEN);
}

static void test_int(void **state)
{
    char err[MK_CONF_ERR_LEN];
    long v;
    (void) state;

    assert_true(conf_int("42", 0, 100, &v, err));
    assert_int_equal(v, 42);
    assert_true(conf_int("0", 0, 100, &v, err));
    assert_int_equal(v, 0);
    assert_true(conf_int("100", 0, 100, &v, err));
    assert_int_equal(v, 100);
    assert_true(conf_int("007", 0, 100, &v, err));
    assert_int_equal(v, 7);
    assert_true(conf_int("-5", -10, 10, &v, err));
    assert_int_equal(v, -5);
    assert_true(conf_int("-10", -10, 10, &v, err));
    assert_int_equal(v, -10);
    /* Half of the range of long: 2^62 where long has 64 bits, 2^30 on armhf. */
    char big[32];
    snprintf(big, sizeof(big), "%ld", LONG_MAX / 2 + 1);
    assert_true(conf_int(big, 0, LONG_MAX, &v, err));
    assert_int_equal(v, LONG_MAX / 2 + 1);
    snprintf(big, sizeof(big), "%ld", LONG_MIN / 2);
    assert_true(conf_int(big, LONG_MIN, 0, &v, err));
    assert_int_equal(v, LONG_MIN / 2);

    v = 77;
    err[0] = '\0';
    assert_false(conf_int("101", 0, 100, &v, err));
    assert_string_equal(err, "t.conf:9: Key: 101 is out of range (0 to 100)");
    assert_int_equal(v, 77);
    assert_false(conf_int("-1", 0, 100, &v, err));
    assert_string_equal(err, "t.conf:9: Key: -1 is out of range (0 to 100)");
    assert_false(conf_int("-11", -10, 10, &v, err));
    assert_false(conf_int("abc", 0, 100, &v, err));
    assert_string_equal(err, "t.conf:9: Key: expected a whole number, got 'abc'");
    static const char *const bad[] = {"",
                                      "-",
                                      "-0",
                                      "+5",
                                      "5x",
                                      "0x10",
                                      "1.5",
                                      "1e3",
                                      "--1",
                                      "5 ",
                                      " 5",
                                      "1K",
                                      "4611686018427387905",
                                      "99999999999999999999",
                                      "-99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        if (conf_int(bad[i], LONG_MIN, LONG_MAX, &v, err)) {
            fail_msg("'%s' accepted as %ld", bad[i], v);
        }
        assert_true(strncmp(err, "t.conf:9: Key: ", 15) == 0);
    }
    assert_int_equal(v, 77);
}

static bool conf_size(const char *value, uint64_t min, uint64_t max, uint64_t *out, char *err)
{
    struct fake f;
    fake_init(&f, value);
    return mk_conf_size(&f.conf, &f.entry, min, max, out, err, MK_CONF_ERR_LEN);
}

static void test_size(void **state)
{
    static const struct {
        const char *value;
        uint64_t want;
    } good[] = {
        {"0", 0},
        {"512", 512},
        {"1K", 1024},
        {"32K", 32768},
        {"32k", 32768},
        {"8M", 8388608},
        {"8m", 8388608},
        {"2G", 2147483648ull},
        {"2g", 2147483648ull},
        {"0K", 0},
        {"017K", 17408},
        {"17179869183G", 17179869183ull << 30}, /* the largest whole number of G */
        {"17592186044415M", 17592186044415ull << 20},
        {"18014398509481983K", 18014398509481983ull << 10},
        {"18446744073709551615", UINT64_MAX},
    };
    static const char *const bad[] = {
        "",
        "K",
        "M",
        "-1",
        "+1",
        "1T",
        "1KB",
        "1 K",
        "1.5M",
        "1e3",
        "0x10",
        "KK",
        "1KK",
        "K1",
        "1b",
        "1Kb",
        " 1",
        "1 ",
        "17179869184G", /* 2^64 bytes */
        "17592186044416M",
        "18014398509481984K",
        "18446744073709551616",
        "99999999999999999999G",
    };
    char err[MK_CONF_ERR_LEN];
    uint64_t v;
    (void) state;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        v = 1;
        if (!conf_size(good[i].value, 0, UINT64_MAX, &v, err)) {
            fail_msg("'%s' rejected: %s", good[i].value, err);
        }
        if (v != good[i].want) {
            fail_msg("'%s': %llu, expected %llu", good[i].value, (unsigned long long) v,
                     (unsigned long long) good[i].want);
        }
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 99;
        err[0] = '\0';
        if (conf_size(bad[i], 0, UINT64_MAX, &v, err)) {
            fail_msg("'%s' accepted as %llu", bad[i], (unsigned long long) v);
        }
        assert_int_equal(v, 99);
        assert_true(strncmp(err, "t.conf:9: Key: ", 15) == 0);
    }

    /* range, after the suffix is applied */
    assert_true(conf_size("1K", 1024, 1024, &v, err));
    assert_int_equal(v, 1024);
    assert_false(conf_size("1K", 0, 1000, &v, err));
    assert_string_equal(err, "t.conf:9: Key: 1024 bytes is out of range (0 to 1000)");
    assert_false(conf_size("63", 64, 1 << 20, &v, err));
    assert_false(conf_size("2M", 64, 1 << 20, &v, err));
    assert_true(conf_size("1M", 64, 1 << 20, &v, err));
    assert_int_equal(v, 1 << 20);
}

static void test_words(void **state)
{
    const char *cur = "  one\ttwo   three\t ", *w;
    static const char *const want[] = {"one", "two", "three"};
    size_t len, n = 0;
    (void) state;

    while (mk_conf_word(&cur, &w, &len)) {
        assert_true(n < 3);
        assert_int_equal(len, strlen(want[n]));
        assert_memory_equal(w, want[n], len);
        n++;
    }
    assert_int_equal(n, 3);
    assert_int_equal(*cur, '\0');
    assert_false(mk_conf_word(&cur, &w, &len)); /* stays at the end */

    cur = "";
    assert_false(mk_conf_word(&cur, &w, &len));
    cur = " \t ";
    assert_false(mk_conf_word(&cur, &w, &len));
    cur = "single";
    assert_true(mk_conf_word(&cur, &w, &len));
    assert_int_equal(len, 6);
    assert_false(mk_conf_word(&cur, &w, &len));
}

/* ---- files --------------------------------------------------------------- */

static void test_load_file(void **state)
{
    char path[] = "/tmp/mk-test-config-XXXXXX";
    char err[MK_CONF_ERR_LEN] = "";
    const char text[] = "[S]\n    key value\n    bad\n";
    struct mk_conf *conf;
    int fd;
    (void) state;

    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, 18), 18); /* without the bad line */
    conf = mk_conf_load(path, err, sizeof(err));
    assert_non_null(conf);
    assert_string_equal(conf->path, path);
    assert_string_equal(value_of(conf, "s", "KEY"), "value");
    mk_conf_free(conf);

    assert_int_equal(write(fd, text + 18, sizeof(text) - 1 - 18),
                     (ssize_t) (sizeof(text) - 1 - 18));
    close(fd);
    assert_null(mk_conf_load(path, err, sizeof(err)));
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "%s:3: ", path);
    assert_true(strncmp(err, prefix, strlen(prefix)) == 0);
    unlink(path);

    err[0] = '\0';
    assert_null(mk_conf_load(path, err, sizeof(err)));
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, strerror(ENOENT)));

    err[0] = '\0';
    assert_null(mk_conf_load("/tmp", err, sizeof(err)));
    assert_non_null(strstr(err, "not a regular file"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sections_and_entries),
        cmocka_unit_test(test_repeats_kept_in_order),
        cmocka_unit_test(test_comments),
        cmocka_unit_test(test_crlf_and_last_line),
        cmocka_unit_test(test_empty_inputs),
        cmocka_unit_test(test_syntax_errors),
        cmocka_unit_test(test_comment_right_after_key),
        cmocka_unit_test(test_error_truncation),
        cmocka_unit_test(test_next_across_sections),
        cmocka_unit_test(test_bool),
        cmocka_unit_test(test_int),
        cmocka_unit_test(test_size),
        cmocka_unit_test(test_words),
        cmocka_unit_test(test_load_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
