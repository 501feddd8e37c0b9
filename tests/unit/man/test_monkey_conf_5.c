/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_monkey_conf_5.c: man/monkey.conf.5 names every configuration key the
 * parser accepts, so the manual page cannot drift from the schema: the
 * [SERVER] keys of the declarative schema, the [HOST] and [PLUGINS] keys,
 * and the keys each plugin of the tree declares. The plugins are those of
 * the tree (every plugins/NAME/NAME.c), each read from its code: the
 * descriptor built into the binary, else build/plugins/monkey-NAME.so opened
 * with dlopen (tests/CMakeLists.txt builds them before this test); a plugin
 * this build was configured without (MK_PLUGINS_NOT_BUILT, such as tls
 * without OpenSSL) is named in the output, any other one missing fails.
 * The duda plugin (duda/, build/plugins/monkey-duda.so) is checked the same
 * way, its [DUDA] keys and its [WEB_SERVICE] site section, whenever the
 * build has it (MK_DUDA_BUILT).
 * A key is documented by an item of the page: ".TP", then ".B Key" on a
 * line of its own; a plugin's key in the subsection of its plugin and scope:
 * ".SS "NAME: plugins/FILE [SECTION]"" for plugin-wide keys,
 * ".SS "NAME: [SECTION] in a site file"" for MK_CONF_SITE keys.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <monkey/mk_plugin.h>

#include "server/config/conf.h"
#include "server/static/static.h"

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

/*
 * The subsection of `page` whose title starts with `title` (up to the next
 * .SS or .SH), malloc'ed; NULL (and says so) when the page has none.
 */
static char *subsection(const char *page, const char *title)
{
    char head[200];
    const char *at, *end;

    snprintf(head, sizeof(head), "\n.SS \"%s", title);
    at = strstr(page, head);
    if (!at) {
        print_error("man/monkey.conf.5 has no subsection .SS \"%s...\"\n", title);
        return NULL;
    }
    at += strlen(head);
    end = at + strcspn(at, "\n");
    while (*end && strncmp(end, "\n.SS ", 5) != 0 && strncmp(end, "\n.SH ", 5) != 0) {
        end = strchr(end + 1, '\n') ? strchr(end + 1, '\n') : end + strlen(end);
    }
    char *text = strndup(at, (size_t) (end - at) + 1);
    assert_non_null(text);
    return text;
}

/* The keys of `schema` with (site != 0) or without MK_CONF_SITE missing from `section`. */
static unsigned missing_scope(const char *section, const char *where,
                              const struct mk_conf_schema *schema, int site)
{
    unsigned missing = 0;

    for (const struct mk_conf_key *k = schema->keys; k->name; k++) {
        if (!(k->flags & MK_CONF_SITE) == !site) {
            missing += missing_key(section, where, k->name);
        }
    }
    return missing;
}

/*
 * How many keys of plugin `name` (its schema) are not in the subsection of
 * their plugin and scope.
 */
static unsigned missing_plugin_keys(const char *page, const char *name,
                                    const struct mk_conf_schema *schema)
{
    char title[160], where[200];
    unsigned missing = 0, wide = 0, site = 0;

    for (const struct mk_conf_key *k = schema->keys; k->name; k++) {
        *(k->flags & MK_CONF_SITE ? &site : &wide) += 1;
    }
    if (wide) {
        snprintf(title, sizeof(title), "%s: plugins/%s [%s]\"", name,
                 schema->file ? schema->file : "(no file)", schema->section);
        snprintf(where, sizeof(where), "plugin %s, plugins/%s", name,
                 schema->file ? schema->file : "(no file)");
        char *text = subsection(page, title);
        missing += text ? missing_scope(text, where, schema, 0) : wide;
        free(text);
    }
    if (site) {
        snprintf(title, sizeof(title), "%s: [%s] in a site file", name, schema->section);
        snprintf(where, sizeof(where), "plugin %s, [%s] of a site file", name, schema->section);
        char *text = subsection(page, title);
        missing += text ? missing_scope(text, where, schema, 1) : site;
        free(text);
    }
    return missing;
}

static void test_server_host_and_plugins_keys(void **state)
{
    static const char *const sections[] = {
        "HOST",
        "PLUGINS",
#ifdef MK_HAVE_RULES
        "RULE",
#endif
    };
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

/* Plugins of the tree this build was configured without (";"-separated). */
#ifndef MK_PLUGINS_NOT_BUILT
#define MK_PLUGINS_NOT_BUILT ""
#endif

static const struct mk_plugin *builtin_plugin(const char *name)
{
    for (size_t i = 0; mk_builtin_plugins[i]; i++) {
        if (strcmp(mk_builtin_plugins[i]->name, name) == 0) {
            return mk_builtin_plugins[i];
        }
    }
    return NULL;
}

static int not_built(const char *name)
{
    char list[512], *save = NULL;

    snprintf(list, sizeof(list), "%s", MK_PLUGINS_NOT_BUILT);
    for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        if (strcmp(p, name) == 0) {
            return 1;
        }
    }
    return 0;
}

/* 1 when plugins/NAME/NAME.c exists: the build's rule for a plugin. */
static int is_plugin_dir(const char *name)
{
    char path[512];

    if (name[0] == '.') {
        return 0;
    }
    snprintf(path, sizeof(path), "%s/plugins/%s/%s.c", MK_SOURCE_DIR, name, name);
    return access(path, R_OK) == 0;
}

/*
 * The keys of plugin `name` missing from `page`, read from its code: the
 * built-in descriptor, else its shared object (which must exist).
 */
static unsigned check_plugin(const char *page, const char *name, unsigned *schemas)
{
    const struct mk_plugin *p = builtin_plugin(name);
    char path[512];
    void *h = NULL;
    unsigned missing = 0;

    if (!p) {
        snprintf(path, sizeof(path), "%s/plugins/monkey-%s.so", MK_BUILD_DIR, name);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        p = h ? dlsym(h, "mk_plugin") : NULL;
        if (!p) {
            fail_msg("plugin %s: %s (its keys cannot be checked)", name, dlerror());
        }
    }
    if (p->conf_schema) {
        missing = missing_plugin_keys(page, name, p->conf_schema);
        *schemas += 1;
    }
    /* Repeated site sections (plugin ABI 3.4): "NAME: [SECTION] in a site file" too. */
    if (p->size >= offsetof(struct mk_plugin, section_schemas) + sizeof(p->section_schemas)) {
        for (const struct mk_conf_schema *const *s = p->section_schemas; s && *s; s++) {
            missing += missing_plugin_keys(page, name, *s);
            *schemas += 1;
        }
    }
    if (h) {
        dlclose(h);
    }
    return missing;
}

static void test_plugin_keys(void **state)
{
    char *page = read_all(MAN_PAGE);
    unsigned missing = 0, schemas = 0, plugins = 0;
    DIR *d = opendir(MK_SOURCE_DIR "/plugins");
    struct dirent *e;
    (void) state;

    assert_non_null(d);
    while ((e = readdir(d))) {
        if (!is_plugin_dir(e->d_name)) {
            continue;
        }
        plugins++;
        if (not_built(e->d_name)) {
            print_message("plugin %s is not built in this configuration: its keys are not "
                          "checked\n",
                          e->d_name);
            continue;
        }
        missing += check_plugin(page, e->d_name, &schemas);
    }
    closedir(d);
    /*
     * The duda plugin lives in duda/, built unless MK_DUDA is off (or the
     * build is static); when built, its shared object must be there.
     */
#ifdef MK_DUDA_BUILT
    missing += check_plugin(page, "duda", &schemas);
#else
    print_message("the duda plugin is not built in this configuration: its keys are not "
                  "checked\n");
#endif
    assert_true(plugins > 1);
    assert_true(schemas > 0); /* the skeleton declares its keys */
    assert_int_equal(missing, 0);
    free(page);
}

int main(void)
{
    /* The [HOST] keys of the static handler, as the server gives them at start. */
    mk_conf_site_keys(&mk_static_site_keys);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_server_host_and_plugins_keys),
        cmocka_unit_test(test_plugin_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
