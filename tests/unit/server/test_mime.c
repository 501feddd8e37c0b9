/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_mime.c: unit tests of server/config/mime.c (extension to media type).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/config.h"
#include "server/config/mime.h"

#define DEFAULT_TYPE "application/octet-stream"

static void assert_type(const struct mk_mime_table *t, const char *path, const char *want)
{
    struct mk_str s = mk_mime_lookup(t, path, strlen(path));
    assert_non_null(s.p);
    if (s.len != strlen(want) || memcmp(s.p, want, s.len) != 0) {
        fail_msg("'%s': got '%.*s', expected '%s'", path, (int) s.len, s.p, want);
    }
}

/*
 * The table compiled in (for -o and configurations without monkey.mime) is
 * sorted, and gives every extension it knows the type the shipped
 * conf/monkey.mime gives it: a file is served with the same type whichever
 * table is in force.
 */
static void test_builtin_agrees_with_shipped_file(void **state)
{
    struct mk_mime_table *t = mk_mime_builtin(DEFAULT_TYPE);
    char err[512] = "", path[64];
    (void) state;

    struct mk_conf *conf = mk_conf_load(MK_SOURCE_DIR "/conf/monkey.mime", err, sizeof(err));
    if (!conf) {
        fail_msg("%s", err);
    }
    struct mk_mime_table *full = mk_mime_from_conf(conf, DEFAULT_TYPE, err, sizeof(err));
    if (!full) {
        fail_msg("%s", err);
    }
    assert_true(t->count >= 30);
    for (size_t i = 1; i < t->count; i++) {
        assert_true(strcmp(t->entries[i - 1].ext, t->entries[i].ext) < 0); /* sorted */
    }
    for (size_t i = 0; i < t->count; i++) {
        snprintf(path, sizeof(path), "/dir/file.%s", t->entries[i].ext);
        assert_type(full, path, t->entries[i].type);
        assert_type(t, path, t->entries[i].type);
    }
    mk_mime_free(full);
    mk_conf_free(conf);
    mk_mime_free(t);
}

static void test_builtin_lookups(void **state)
{
    struct mk_mime_table *t = mk_mime_builtin(DEFAULT_TYPE);
    (void) state;

    assert_type(t, "/index.html", "text/html; charset=utf-8");
    assert_type(t, "/INDEX.HTML", "text/html; charset=utf-8");
    assert_type(t, "/a.HtMl", "text/html; charset=utf-8");
    assert_type(t, "/img/logo.PNG", "image/png");
    assert_type(t, "/archive.tar.gz", "application/gzip"); /* the last extension */
    assert_type(t, "/a.b.c/file.css", "text/css; charset=utf-8");
    /* no extension */
    assert_type(t, "/README", DEFAULT_TYPE);
    assert_type(t, "/", DEFAULT_TYPE);
    assert_type(t, "", DEFAULT_TYPE);
    assert_type(t, "/dir.html/README", DEFAULT_TYPE); /* a dot in a directory only */
    assert_type(t, "/dir.html/", DEFAULT_TYPE);
    assert_type(t, "/file.", DEFAULT_TYPE);
    assert_type(t, "html", DEFAULT_TYPE);
    /* unknown extensions */
    assert_type(t, "/file.xyz", DEFAULT_TYPE);
    assert_type(t, "/file.htmlx", DEFAULT_TYPE);
    assert_type(t, "/file.htm l", DEFAULT_TYPE);
    assert_type(t, "/file.ht", DEFAULT_TYPE);
    /* dotfiles */
    assert_type(t, "/.bashrc", DEFAULT_TYPE);
    assert_type(t, "/home/.profile", DEFAULT_TYPE);
    /* longer than 16 characters */
    assert_type(t, "/f.webmanifestwebmanifest", DEFAULT_TYPE);
    mk_mime_free(t);
}

/* The lookup honours the length: bytes past it are not part of the path. */
static void test_lookup_uses_length(void **state)
{
    struct mk_mime_table *t = mk_mime_builtin(DEFAULT_TYPE);
    const char *p = "/a.css.png";
    struct mk_str s;
    (void) state;

    s = mk_mime_lookup(t, p, 6);
    assert_int_equal(s.len, strlen("text/css; charset=utf-8"));
    assert_memory_equal(s.p, "text/css; charset=utf-8", s.len);
    s = mk_mime_lookup(t, p, 4);
    assert_int_equal(s.len, strlen(DEFAULT_TYPE));
    mk_mime_free(t);
}

static void test_builtin_default_type(void **state)
{
    struct mk_mime_table *t = mk_mime_builtin("text/plain; charset=us-ascii");
    (void) state;

    assert_type(t, "/noext", "text/plain; charset=us-ascii");
    assert_int_equal(t->default_type.len, strlen("text/plain; charset=us-ascii"));
    assert_type(t, "/a.json", "application/json");
    mk_mime_free(t);
}

static struct mk_mime_table *from_text(const char *text, char *err, size_t errlen)
{
    struct mk_conf *conf = mk_conf_parse("test.mime", text, strlen(text), err, errlen);
    struct mk_mime_table *t;

    assert_non_null(conf);
    t = mk_mime_from_conf(conf, DEFAULT_TYPE, err, errlen);
    mk_conf_free(conf);
    return t;
}

static void test_from_conf(void **state)
{
    char err[MK_CONF_ERR_LEN] = "";
    struct mk_mime_table *t = from_text("# media types\n"
                                        "[MIMETYPES]\n"
                                        "    foo   text/x-foo\n"
                                        "    BAR   application/bar   # comment\n"
                                        "    abcdefghijklmnop application/sixteen\n"
                                        "    html  text/html\n"
                                        "[mimetypes]\n"
                                        "    zip   application/zip\n",
                                        err, sizeof(err));
    (void) state;

    assert_non_null(t);
    assert_int_equal(t->count, 5);
    assert_type(t, "/a.foo", "text/x-foo");
    assert_type(t, "/a.FOO", "text/x-foo");
    assert_type(t, "/a.bar", "application/bar"); /* keys are lowered */
    assert_type(t, "/a.Bar", "application/bar");
    assert_type(t, "/a.abcdefghijklmnop", "application/sixteen"); /* 16 characters */
    assert_type(t, "/a.abcdefghijklmnopq", DEFAULT_TYPE);         /* 17 */
    assert_type(t, "/a.html", "text/html");                       /* the file, not built in */
    assert_type(t, "/a.zip", "application/zip");
    assert_type(t, "/a.css", DEFAULT_TYPE); /* only what the file lists */
    assert_type(t, "/.foo", "text/x-foo");
    mk_mime_free(t);
}

static void test_from_conf_empty(void **state)
{
    char err[MK_CONF_ERR_LEN] = "";
    struct mk_mime_table *t = from_text("# nothing\n", err, sizeof(err));
    (void) state;

    assert_non_null(t);
    assert_int_equal(t->count, 0);
    assert_type(t, "/a.html", DEFAULT_TYPE);
    mk_mime_free(t);
}

static void expect_conf_error(const char *text, const char *prefix, const char *needle)
{
    char err[MK_CONF_ERR_LEN] = "";
    struct mk_mime_table *t = from_text(text, err, sizeof(err));

    if (t) {
        mk_mime_free(t);
        fail_msg("accepted: %s", text);
    }
    if (strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, needle)) {
        fail_msg("message '%s' lacks '%s' or '%s'", err, prefix, needle);
    }
}

static void test_from_conf_errors(void **state)
{
    (void) state;
    /* A repeated extension names the repeating line and the first one. */
    expect_conf_error("[MIMETYPES]\n    foo text/a\n    bar b/c\n    FOO text/b\n",
                      "test.mime:4: ", "'foo' is listed twice (first at line 2)");
    expect_conf_error("[MIMETYPES]\n    foo text/a\n    foo text/a\n", "test.mime:3: ", "'foo'");
    /* The first repetition in the file, whatever the order of the extensions. */
    expect_conf_error("[MIMETYPES]\n    zz a/b\n    aa a/b\n    zz a/c\n    aa a/c\n    zz a/d\n",
                      "test.mime:4: ", "'zz' is listed twice (first at line 2)");
    expect_conf_error("[MIMETYPES]\n    foo text/a\n    bar text\n", "test.mime:3: ", "text");
    expect_conf_error("[MIMETYPES]\n    bar plain text\n", "test.mime:2: ", "media type");
    expect_conf_error("[MIMETYPES]\n    a.b text/a\n", "test.mime:2: ", "a.b");
    expect_conf_error("[MIMETYPES]\n    a/b text/a\n", "test.mime:2: ", "a/b");
    expect_conf_error("[MIMETYPES]\n    abcdefghijklmnopq text/a\n",
                      "test.mime:2: ", "not a file extension");
    expect_conf_error("[MIMETYPES]\n    foo text/a\n\n[TYPES]\n    bar text/b\n",
                      "test.mime:4: ", "[TYPES]");
}

/* The shipped conf/monkey.mime loads and every line of it is found. */
static void test_shipped_file(void **state)
{
    char err[MK_CONF_ERR_LEN] = "";
    struct mk_conf *conf = mk_conf_load(MK_SOURCE_DIR "/conf/monkey.mime", err, sizeof(err));
    struct mk_mime_table *t;
    struct mk_conf_entry *e = NULL;
    char path[64];
    size_t n = 0;
    (void) state;

    assert_non_null(conf);
    t = mk_mime_from_conf(conf, DEFAULT_TYPE, err, sizeof(err));
    if (!t) {
        fail_msg("%s", err);
    }
    while ((e = mk_conf_next(conf, e))) {
        snprintf(path, sizeof(path), "/x.%s", e->key);
        assert_type(t, path, e->value);
        n++;
    }
    assert_int_equal(t->count, n);
    assert_true(n > 50);
    mk_mime_free(t);
    mk_conf_free(conf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_agrees_with_shipped_file),
        cmocka_unit_test(test_builtin_lookups),
        cmocka_unit_test(test_lookup_uses_length),
        cmocka_unit_test(test_builtin_default_type),
        cmocka_unit_test(test_from_conf),
        cmocka_unit_test(test_from_conf_empty),
        cmocka_unit_test(test_from_conf_errors),
        cmocka_unit_test(test_shipped_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
