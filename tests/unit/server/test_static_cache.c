/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_static_cache.c: unit tests of server/static/static_cache.c (CacheControl
 * lines: what is accepted, what is refused with its line, and which rule a
 * path takes).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/config.h"
#include "server/static/static_cache.h"

/* Load every CacheControl line of `text` ([HOST]); NULL err means success expected. */
static bool load(struct mk_cache_rules *rules, const char *text, char *err, size_t errlen)
{
    struct mk_conf *conf = mk_conf_parse("site", text, strlen(text), err, errlen);
    const struct mk_conf_entry *e = NULL;
    bool ok = true;

    assert_non_null(conf);
    while (ok && (e = mk_conf_next(conf, e))) {
        char reason[256];
        ok = mk_static_cache_conf(rules, e->value, reason, sizeof(reason));
        if (!ok) {
            mk_conf_error(conf, e->line, err, errlen, "%s", reason);
        }
    }
    mk_conf_free(conf);
    return ok;
}

static void test_accepted(void **state)
{
    struct mk_cache_rules rules = {0};
    char err[256];

    (void) state;
    assert_true(load(&rules,
                     "[HOST]\n"
                     "    CacheControl /assets/ max-age=31536000, immutable\n"
                     "    CacheControl .css max-age=3600\n"
                     "    CacheControl / no-cache\n"
                     "    CacheControl /assets/fonts/ public, max-age=\"60\"x\n",
                     err, sizeof(err)) == false);
    assert_non_null(strstr(err, "site:5:"));
    assert_int_equal(rules.n, 3);
    assert_string_equal(rules.v[0].value, "max-age=31536000, immutable");
    assert_int_equal(rules.v[0].max_age, 31536000);
    assert_true(rules.v[1].ext);
    assert_int_equal(rules.v[1].max_age, 3600);
    assert_int_equal(rules.v[2].max_age, -1);
    mk_static_cache_free(&rules);
}

static const struct {
    const char *line;
    const char *msg;
} refused[] = {
    {"CacheControl /a/", "not a Cache-Control value"},
    {"CacheControl assets/ max-age=1", "neither a normalised path prefix"},
    {"CacheControl /a/../b/ max-age=1", "neither a normalised path prefix"},
    {"CacheControl .tar.gz max-age=1", "neither a normalised path prefix"},
    {"CacheControl . max-age=1", "neither a normalised path prefix"},
    {"CacheControl /a/ max-age=", "not a Cache-Control value"},
    {"CacheControl /a/ max-age=-1", "not a Cache-Control value"},
    {"CacheControl /a/ max-age=1x", "not a Cache-Control value"},
    {"CacheControl /a/ max-age=99999999999", "not a Cache-Control value"},
    {"CacheControl /a/ pub lic;", "not a Cache-Control value"},
    {"CacheControl /a/ private=\"x", "not a Cache-Control value"},
    {"CacheControl /a/ ,,", "not a Cache-Control value"},
};

static void test_refused(void **state)
{
    (void) state;
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        struct mk_cache_rules rules = {0};
        char text[256], err[256];
        snprintf(text, sizeof(text), "[HOST]\n    %s\n", refused[i].line);
        if (load(&rules, text, err, sizeof(err)) || !strstr(err, refused[i].msg) ||
            !strstr(err, "site:2:")) {
            fail_msg("'%s': '%s'", refused[i].line, err);
        }
        mk_static_cache_free(&rules);
    }
}

static void test_twice(void **state)
{
    struct mk_cache_rules rules = {0};
    char err[256];

    (void) state;
    assert_false(load(&rules,
                      "[HOST]\n    CacheControl .CSS max-age=1\n"
                      "    CacheControl .css max-age=2\n",
                      err, sizeof(err)));
    assert_non_null(strstr(err, "site:3: CacheControl .css is given twice"));
    mk_static_cache_free(&rules);
}

static const char *find(const struct mk_cache_rules *rules, const char *path, const char *name)
{
    const struct mk_cache_rule *r =
        mk_static_cache_find(rules, path, strlen(path), name, strlen(name));
    return r ? r->value : NULL;
}

static void test_precedence(void **state)
{
    struct mk_cache_rules rules = {0};
    char err[256];

    (void) state;
    assert_true(load(&rules,
                     "[HOST]\n"
                     "    CacheControl / no-cache\n"
                     "    CacheControl .css max-age=3600\n"
                     "    CacheControl /assets/ max-age=31536000, immutable\n"
                     "    CacheControl /assets/tmp/ no-store\n",
                     err, sizeof(err)));
    assert_string_equal(find(&rules, "/index.html", "/index.html"), "no-cache");
    assert_string_equal(find(&rules, "/a.css", "/a.css"), "max-age=3600");
    assert_string_equal(find(&rules, "/a.CSS", "/a.CSS"), "max-age=3600");
    assert_string_equal(find(&rules, "/assets/a.css", "/assets/a.css"),
                        "max-age=31536000, immutable");
    assert_string_equal(find(&rules, "/assets/tmp/a.css", "/assets/tmp/a.css"), "no-store");
    assert_string_equal(find(&rules, "/assets", "/assets"), "no-cache");      /* not the folder */
    assert_string_equal(find(&rules, "/dir.css/", "index.html"), "no-cache"); /* index's own */
    assert_string_equal(find(&rules, "/style/", "main.css"), "max-age=3600");
    assert_string_equal(find(&rules, "/x.css.d/file", "/x.css.d/file"), "no-cache");
    mk_static_cache_free(&rules);

    assert_null(find(&rules, "/a.css", "/a.css"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_twice),
        cmocka_unit_test(test_precedence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
