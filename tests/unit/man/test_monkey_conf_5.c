/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_monkey_conf_5.c: man/monkey.conf.5 names every configuration key the
 * parser accepts, so the manual page cannot drift from the schema: the
 * [SERVER] keys of the declarative schema, the [HOST] and [PLUGINS] keys,
 * and the keys each plugin declares (the built-in ones, and every plugin
 * built as a shared object in this build, opened with dlopen). A key is
 * documented by an item of the page: ".TP", then ".B Key" on a line of its
 * own.
 */
#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <monkey/mk_plugin.h>

#include "server/conf.h"

#define MAN_PAGE MK_SOURCE_DIR "/man/monkey.conf.5"

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf;
    long n;

    if (!f) {
        fail_msg("%s: %s", path, strerror(errno));
    }
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    assert_true(n > 0);
    rewind(f);
    buf = malloc((size_t) n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t) n, f), (size_t) n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* 1 when `key` has no ".TP / .B key" item in `page` (and says so). */
static unsigned missing_key(const char *page, const char *where, const char *key)
{
    char item[160];

    snprintf(item, sizeof(item), ".TP\n.B %s\n", key);
    if (strstr(page, item)) {
        return 0;
    }
    print_error("%s key %s is not described in man/monkey.conf.5\n", where, key);
    return 1;
}

static unsigned missing_schema(const char *page, const char *where,
                               const struct mk_conf_schema *schema)
{
    unsigned missing = 0;

    for (const struct mk_conf_key *k = schema->keys; k->name; k++) {
        missing += missing_key(page, where, k->name);
    }
    return missing;
}

static void test_server_host_and_plugins_keys(void **state)
{
    static const char *const sections[] = {"HOST", "PLUGINS"};
    char *page = read_all(MAN_PAGE);
    unsigned missing = missing_schema(page, "[SERVER]", mk_config_schema());
    (void) state;

    assert_non_null(mk_config_schema()->keys[0].name);
    for (size_t s = 0; s < sizeof(sections) / sizeof(sections[0]); s++) {
        const char *key;
        size_t i = 0;
        while ((key = mk_config_key(sections[s], i++))) {
            missing += missing_key(page, sections[s], key);
        }
        assert_true(i > 1);
    }
    assert_int_equal(missing, 0);
    free(page);
}

extern const struct mk_plugin *const mk_builtin_plugins[];

static void test_plugin_keys(void **state)
{
    char *page = read_all(MAN_PAGE);
    unsigned missing = 0, schemas = 0;
    glob_t g;
    (void) state;

    for (size_t i = 0; mk_builtin_plugins[i]; i++) {
        if (mk_builtin_plugins[i]->conf_schema) {
            missing += missing_schema(page, mk_builtin_plugins[i]->name,
                                      mk_builtin_plugins[i]->conf_schema);
            schemas++;
        }
    }
    if (glob(MK_BUILD_DIR "/plugins/monkey-*.so", 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            void *h = dlopen(g.gl_pathv[i], RTLD_NOW | RTLD_LOCAL);
            const struct mk_plugin *p = h ? dlsym(h, "mk_plugin") : NULL;
            if (!p) {
                fail_msg("%s: %s", g.gl_pathv[i], dlerror());
            }
            if (p->conf_schema) {
                missing += missing_schema(page, g.gl_pathv[i], p->conf_schema);
                schemas++;
            }
            dlclose(h);
        }
        globfree(&g);
    }
    assert_true(schemas > 0);
    assert_int_equal(missing, 0);
    free(page);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_server_host_and_plugins_keys),
        cmocka_unit_test(test_plugin_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
