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
#include <sys/stat.h>
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

/* ---- Include and variables ------------------------------------------------ */

/* A temporary directory for one test's files; removed by tmp_clean(). */
static char tmp_dir[64];

static void tmp_make(void)
{
    snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/mk-test-include-XXXXXX");
    assert_non_null(mkdtemp(tmp_dir));
}

/* Write `text` into tmp_dir/name (name may hold one folder, made first). */
static void tmp_write(const char *name, const char *text)
{
    char path[256];
    const char *slash = strchr(name, '/');
    if (slash) {
        snprintf(path, sizeof(path), "%s/%.*s", tmp_dir, (int) (slash - name), name);
        mkdir(path, 0700);
    }
    snprintf(path, sizeof(path), "%s/%s", tmp_dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    fclose(f);
}

static void tmp_clean(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_dir);
    assert_int_equal(system(cmd), 0);
}

static struct mk_conf *tmp_load(const char *name, char *err, size_t errlen)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", tmp_dir, name);
    return mk_conf_load(path, err, errlen);
}

/* Loading tmp_dir/name fails with "tmp_dir/file:line: " and `needle` in the message. */
static void tmp_fails(const char *name, const char *file, int line, const char *needle)
{
    char err[MK_CONF_ERR_LEN] = "", prefix[256];
    struct mk_conf *conf = tmp_load(name, err, sizeof(err));
    if (conf) {
        mk_conf_free(conf);
        fail_msg("%s accepted", name);
    }
    snprintf(prefix, sizeof(prefix), "%s/%s:%d: ", tmp_dir, file, line);
    if (strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, needle)) {
        fail_msg("message '%s', expected '%s...%s'", err, prefix, needle);
    }
}

/* "key=value;" for every entry in order, with "[section]" before each section. */
static void flatten(const struct mk_conf *conf, char *out, size_t len)
{
    struct mk_list *it, *eit;
    size_t n = 0;
    out[0] = '\0';
    mk_list_foreach (it, &conf->sections) {
        struct mk_conf_section *sec = mk_list_entry(it, struct mk_conf_section, node);
        n += (size_t) snprintf(out + n, len - n, "[%s]", sec->name);
        mk_list_foreach (eit, &sec->entries) {
            struct mk_conf_entry *e = mk_list_entry(eit, struct mk_conf_entry, node);
            n += (size_t) snprintf(out + n, len - n, "%s=%s;", e->key, e->value);
        }
        assert_true(n < len);
    }
}

/* `line` of conf is line `want` of tmp_dir/file. */
static void where_is(const struct mk_conf *conf, int line, const char *file, int want)
{
    char path[256];
    int got;
    snprintf(path, sizeof(path), "%s/%s", tmp_dir, file);
    assert_string_equal(mk_conf_where(conf, line, &got), path);
    assert_int_equal(got, want);
}

static void test_include_order_and_sections(void **state)
{
    char err[MK_CONF_ERR_LEN] = "", flat[512];
    (void) state;

    tmp_make();
    tmp_write("main.conf", "[A]\n"
                           "    one 1\n"
                           "    Include d/*.conf   # sorted\n"
                           "    four 4\n"
                           "include   sect.conf\n"
                           "    five 5\n");
    tmp_write("d/b.conf", "    three 3\n");
    tmp_write("d/a.conf", "# first by name\n    two 2\n");
    tmp_write("d/skip.txt", "    no 0\n");
    tmp_write("sect.conf", "[B]\n    bee 1\n");
    char sub[256];
    snprintf(sub, sizeof(sub), "%s/d/dir.conf", tmp_dir);
    assert_int_equal(mkdir(sub, 0700), 0); /* a directory matching the glob is skipped */

    struct mk_conf *conf = tmp_load("main.conf", err, sizeof(err));
    if (!conf) {
        fail_msg("rejected: %s", err);
    }
    flatten(conf, flat, sizeof(flat));
    /* The section before an Include is current again after it. */
    assert_string_equal(flat, "[A]one=1;two=2;three=3;four=4;five=5;[B]bee=1;");
    assert_int_equal(conf->n_files, 4);

    struct mk_conf_section *a = mk_conf_section(conf, "A"), *b = mk_conf_section(conf, "B");
    where_is(conf, a->line, "main.conf", 1);
    where_is(conf, mk_conf_entry(a, "two")->line, "d/a.conf", 2);
    where_is(conf, mk_conf_entry(a, "three")->line, "d/b.conf", 1);
    where_is(conf, mk_conf_entry(a, "four")->line, "main.conf", 4);
    where_is(conf, b->line, "sect.conf", 1);
    where_is(conf, mk_conf_entry(a, "five")->line, "main.conf", 6);

    /* Typed readers name the included file too. */
    bool v;
    assert_false(mk_conf_bool(conf, mk_conf_entry(a, "three"), &v, err, sizeof(err)));
    char prefix[256];
    snprintf(prefix, sizeof(prefix), "%s/d/b.conf:1: three:", tmp_dir);
    assert_true(strncmp(err, prefix, strlen(prefix)) == 0);
    mk_conf_free(conf);
    tmp_clean();
}

static void test_include_errors(void **state)
{
    (void) state;

    tmp_make();
    /* A syntax error in an included file names that file and its line. */
    tmp_write("main.conf", "[A]\n    Include inc.conf\n");
    tmp_write("inc.conf", "    ok 1\n\n    bad\n");
    tmp_fails("main.conf", "inc.conf", 3, "key 'bad' has no value");

    /* A plain path must exist; a wildcard may match nothing. */
    tmp_write("main.conf", "[A]\n    x 1\n    Include missing.conf\n");
    tmp_fails("main.conf", "main.conf", 3, "cannot open");
    tmp_write("main.conf", "[A]\n    Include none/*.conf\n    x 1\n");
    char err[MK_CONF_ERR_LEN] = "";
    struct mk_conf *conf = tmp_load("main.conf", err, sizeof(err));
    assert_non_null(conf);
    assert_int_equal(conf->n_files, 1);
    mk_conf_free(conf);

    tmp_write("main.conf", "[A]\n    Include\n");
    tmp_fails("main.conf", "main.conf", 2, "key 'Include' has no value");
    tmp_write("main.conf", "[A]\n    Include ${MK_TEST_UNSET_X:-}\n");
    tmp_fails("main.conf", "main.conf", 2, "Include needs a file name");

    /* Cycles: itself, and through another file. */
    tmp_write("main.conf", "[A]\n    Include main.conf\n");
    tmp_fails("main.conf", "main.conf", 2, "includes itself");
    tmp_write("main.conf", "[A]\nInclude b.conf\n");
    tmp_write("b.conf", "    y 1\n    Include main.conf\n");
    tmp_fails("main.conf", "b.conf", 2, "includes itself");

    /* A file included twice, not in a cycle, is fine. */
    tmp_write("main.conf", "[A]\n    Include c.conf\n    Include c.conf\n");
    tmp_write("c.conf", "    z 1\n");
    conf = tmp_load("main.conf", err, sizeof(err));
    assert_non_null(conf);
    assert_int_equal(conf->n_files, 3);
    mk_conf_free(conf);

    /* Depth: a chain of MK_CONF_MAX_DEPTH included files reads, one more does not. */
    char name[32], text[64];
    for (int i = 0; i <= MK_CONF_MAX_DEPTH; i++) {
        snprintf(name, sizeof(name), "n%d.conf", i);
        snprintf(text, sizeof(text), "    k%d 1\n    Include n%d.conf\n", i, i + 1);
        tmp_write(name, text);
    }
    snprintf(name, sizeof(name), "n%d.conf", MK_CONF_MAX_DEPTH);
    tmp_write(name, "    last 1\n");
    tmp_write("main.conf", "[A]\n    Include n1.conf\n");
    conf = tmp_load("main.conf", err, sizeof(err));
    if (!conf) {
        fail_msg("rejected: %s", err);
    }
    assert_string_equal(value_of(conf, "A", "last"), "1");
    mk_conf_free(conf);
    tmp_write("main.conf", "[A]\n    Include n0.conf\n");
    snprintf(name, sizeof(name), "n%d.conf", MK_CONF_MAX_DEPTH - 1);
    tmp_fails("main.conf", name, 2, "nested deeper than 16 files");

    /* A buffer has no directory to include from. */
    parse_fails(RAW("[A]\n    Include x.conf\n"), 2, "Include is not allowed here");
    tmp_clean();
}

static void test_variables(void **state)
{
    (void) state;

    setenv("MK_TEST_PORT", "8080", 1);
    setenv("MK_TEST_EMPTY", "", 1);
    setenv("MK_TEST_NL", "a\nb", 1);
    unsetenv("MK_TEST_UNSET");

    struct mk_conf *conf = parse_ok(RAW("[S]\n"
                                        "    Listen ${MK_TEST_PORT}\n"
                                        "    Both ${MK_TEST_PORT}:${MK_TEST_UNSET:-80}/x\n"
                                        "    Empty ${MK_TEST_EMPTY:-fallback}\n"
                                        "    Spaced ${MK_TEST_UNSET:-two words}  # comment\n"
                                        "    Literal $${MK_TEST_PORT} and $$ and $x $\n"));
    assert_string_equal(value_of(conf, "S", "Listen"), "8080");
    assert_string_equal(value_of(conf, "S", "Both"), "8080:80/x");
    assert_string_equal(value_of(conf, "S", "Empty"), "fallback");
    assert_string_equal(value_of(conf, "S", "Spaced"), "two words");
    assert_string_equal(value_of(conf, "S", "Literal"), "${MK_TEST_PORT} and $$ and $x $");
    mk_conf_free(conf);
}

static void test_variable_errors(void **state)
{
    (void) state;

    unsetenv("MK_TEST_UNSET");
    setenv("MK_TEST_EMPTY", "", 1);
    setenv("MK_TEST_NL", "a\nb", 1);
    parse_fails(RAW("[S]\n    a 1\n    Root ${MK_TEST_UNSET}\n"), 3,
                "environment variable MK_TEST_UNSET is not set");
    parse_fails(RAW("[S]\n    Root ${MK_TEST_EMPTY}\n"), 2, "MK_TEST_EMPTY is not set");
    parse_fails(RAW("[S]\n    Root ${MK_TEST_UNSET\n"), 2, "without a closing");
    parse_fails(RAW("[S]\n    Root ${}\n"), 2, "is not a variable");
    parse_fails(RAW("[S]\n    Root ${1A}\n"), 2, "is not a variable");
    parse_fails(RAW("[S]\n    Root ${A-B}\n"), 2, "is not a variable");
    parse_fails(RAW("[S]\n    Root ${MK_TEST_NL}\n"), 2, "holds a line break");
    parse_fails(RAW("[S]\n    Root ${MK_TEST_UNSET:-}\n"), 2, "no value once expanded");
    /* Section names and keys are never expanded: '$' is no name character. */
    parse_fails(RAW("[${MK_TEST_EMPTY}]\n"), 1, "invalid character in section name");
    parse_fails(RAW("[S]\n    K${MK_TEST_EMPTY} 1\n"), 2, "invalid character in key name");
}

/* The dump reads back into the same entries; "# from" comments mark the files. */
static void test_dump_reads_back(void **state)
{
    char err[MK_CONF_ERR_LEN] = "", before[512], after[512], path[256];
    (void) state;

    setenv("MK_TEST_PORT", "8080", 1);
    tmp_make();
    tmp_write("main.conf", "[A]\n    Listen ${MK_TEST_PORT}\n    Include inc.conf\n"
                           "    Lit $${X}\n[C]\n    c 1\n");
    tmp_write("inc.conf", "    inc yes\n[B]\n    bee 2\n");
    struct mk_conf *conf = tmp_load("main.conf", err, sizeof(err));
    assert_non_null(conf);
    flatten(conf, before, sizeof(before));
    assert_string_equal(before, "[A]Listen=8080;inc=yes;Lit=${X};[B]bee=2;[C]c=1;");

    snprintf(path, sizeof(path), "%s/dump.conf", tmp_dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(mk_conf_dump(conf, f));
    fclose(f);
    mk_conf_free(conf);

    conf = tmp_load("dump.conf", err, sizeof(err));
    if (!conf) {
        fail_msg("the dump does not read back: %s", err);
    }
    assert_int_equal(conf->n_files, 1);
    flatten(conf, after, sizeof(after));
    assert_string_equal(after, before);
    mk_conf_free(conf);

    char text[1024];
    f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    char want[512];
    snprintf(want, sizeof(want), "# file %s/inc.conf (Include at %s/main.conf:3)\n", tmp_dir,
             tmp_dir);
    assert_non_null(strstr(text, want));
    /* Entries are written by section: [A]'s line after the Include comes before [B]. */
    snprintf(want, sizeof(want),
             "[A]\n    Listen 8080\n# from %s/inc.conf\n    inc yes\n# from %s/main.conf\n"
             "    Lit $${X}\n# from %s/inc.conf\n[B]\n    bee 2\n# from %s/main.conf\n[C]\n",
             tmp_dir, tmp_dir, tmp_dir, tmp_dir);
    assert_non_null(strstr(text, want));
    tmp_clean();
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
        cmocka_unit_test(test_include_order_and_sections),
        cmocka_unit_test(test_include_errors),
        cmocka_unit_test(test_variables),
        cmocka_unit_test(test_variable_errors),
        cmocka_unit_test(test_dump_reads_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
