/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_schema.c: unit tests of core/schema.c, the declarative configuration
 * keys: every type, ranges, defaults, repeatable keys, scopes, overrides,
 * and that every error names the file and the line.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "core/schema.h"

struct demo {
    bool flag;
    int count;
    unsigned short small;
    uint64_t bytes;
    size_t limit;
    char *name;
    char *file;
    int mode;
    struct mk_conf_address addr;
    struct mk_conf_words words;
    struct mk_conf_words many;
    int custom_calls;
};

struct demo_site {
    char *greeting;
    long level;
};

static int check_no_x(const char *value, char *reason, size_t len)
{
    if (strchr(value, 'x')) {
        snprintf(reason, len, "'%s' has an x", value);
        return -1;
    }
    return 0;
}

static int set_custom(void *obj, const struct mk_conf_key *k, const char *value,
                      const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct demo *d = obj;
    (void) k;
    (void) origin;
    if (strcmp(value, "bad") == 0) {
        snprintf(reason, len, "custom says no");
        return -1;
    }
    d->custom_calls++;
    return 0;
}

static const char *const modes[] = {"fast", "safe", "slow", NULL};

#define D(m) MK_CONF_FIELD(struct demo, m)
#define S(m) MK_CONF_FIELD(struct demo_site, m)

static const struct mk_conf_key demo_keys[] = {
    {"Flag", MK_CONF_BOOL, 0, D(flag), 0, 0, "Off"},
    {"Count", MK_CONF_INT, 0, D(count), -5, 100, "7"},
    {"Small", MK_CONF_INT, 0, D(small), 0, 65535, "1"},
    {"Bytes", MK_CONF_SIZE, 0, D(bytes), 1, 1ull << 40, "4K"},
    {"Limit", MK_CONF_SIZE, 0, D(limit), 0, 1 << 20, NULL},
    {"Name", MK_CONF_STRING, 0, D(name), 0, 8, "demo", .check = check_no_x},
    {"File", MK_CONF_PATH, 0, D(file), 0, 0, NULL},
    {"Mode", MK_CONF_ENUM, 0, D(mode), 0, 0, "safe", modes},
    {"Address", MK_CONF_ADDRESS, 0, D(addr), 0, 0, "127.0.0.1:80"},
    {"Words", MK_CONF_WORDS, 0, D(words), 0, 0, "a b", .check = check_no_x},
    {"Many", MK_CONF_WORDS, MK_CONF_MULTI, D(many), 0, 0, NULL},
    {"Custom", MK_CONF_CUSTOM, MK_CONF_MULTI, 0, 0, 0, 0, NULL, .set = set_custom},
    {"Greeting", MK_CONF_STRING, MK_CONF_SITE, S(greeting), 0, 0, "hi"},
    {"Level", MK_CONF_INT, MK_CONF_SITE, S(level), 1, 9, "3"},
    {NULL},
};

static const struct mk_conf_schema demo_schema = {
    .section = "DEMO",
    .file = "demo.conf",
    .keys = demo_keys,
    .size = sizeof(struct demo),
    .site_size = sizeof(struct demo_site),
};

static struct mk_conf *parse(const char *text)
{
    char err[MK_CONF_ERR_LEN] = "";
    struct mk_conf *conf = mk_conf_parse("t.conf", text, strlen(text), err, sizeof(err));
    if (!conf) {
        fail_msg("parse: %s", err);
    }
    return conf;
}

/* Fill plugin-wide keys from `text`; returns the struct, or NULL with err. */
static struct demo *fill(const char *text, const struct mk_schema_override *ov, size_t n_ov,
                         char *err, size_t errlen)
{
    struct mk_conf *conf = text ? parse(text) : NULL;
    struct mk_schema_input in = {
        .conf = conf, .confdir = "/etc/demo", .own_file = true, .ov = ov, .n_ov = n_ov};
    struct demo *d = mk_schema_new(&demo_schema, &in, err, errlen);
    mk_conf_free(conf);
    return d;
}

/* Filling `text` fails with a message starting "t.conf:<line>: " and containing needle. */
static void expect_error(const char *text, int line, const char *needle)
{
    char err[MK_CONF_ERR_LEN] = "", prefix[32];
    struct demo *d = fill(text, NULL, 0, err, sizeof(err));

    if (d) {
        mk_schema_delete(&demo_schema, 0, d);
        fail_msg("accepted: %s", text);
    }
    snprintf(prefix, sizeof(prefix), "t.conf:%d: ", line);
    if (strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, needle)) {
        fail_msg("'%s': expected '%s...%s'", err, prefix, needle);
    }
}

static void test_defaults(void **state)
{
    char err[MK_CONF_ERR_LEN] = "";
    (void) state;

    struct demo *d = fill(NULL, NULL, 0, err, sizeof(err));
    assert_non_null(d);
    assert_false(d->flag);
    assert_int_equal(d->count, 7);
    assert_int_equal(d->small, 1);
    assert_int_equal(d->bytes, 4096);
    assert_int_equal(d->limit, 0); /* no default: left zero */
    assert_string_equal(d->name, "demo");
    assert_null(d->file);
    assert_int_equal(d->mode, 1);
    assert_int_equal(d->addr.addr.ss_family, AF_INET);
    assert_int_equal(ntohs(((struct sockaddr_in *) &d->addr.addr)->sin_port), 80);
    assert_int_equal(d->words.n, 2);
    assert_string_equal(d->words.v[1], "b");
    assert_null(d->words.v[2]);
    assert_int_equal(d->many.n, 0);
    mk_schema_delete(&demo_schema, 0, d);
}

static void test_every_type(void **state)
{
    char err[MK_CONF_ERR_LEN] = "";
    (void) state;

    struct demo *d = fill("[DEMO]\n"
                          "    flag yes\n"
                          "    Count -5\n"
                          "    Small 65535\n"
                          "    Bytes 2M\n"
                          "    Limit 1M\n"
                          "    Name monkey\n"
                          "    File logs/demo.log\n"
                          "    Mode SLOW\n"
                          "    Address [::1]:8080\n"
                          "    Words one two three\n"
                          "    Many a b\n"
                          "    Many c\n"
                          "    Custom 1\n"
                          "    Custom 2\n",
                          NULL, 0, err, sizeof(err));
    assert_non_null(d);
    assert_true(d->flag);
    assert_int_equal(d->count, -5);
    assert_int_equal(d->small, 65535);
    assert_int_equal(d->bytes, 2 << 20);
    assert_int_equal(d->limit, 1 << 20);
    assert_string_equal(d->name, "monkey");
    assert_string_equal(d->file, "/etc/demo/logs/demo.log");
    assert_int_equal(d->mode, 2);
    assert_int_equal(d->addr.addr.ss_family, AF_INET6);
    assert_false(d->addr.any);
    assert_int_equal(d->words.n, 3);
    assert_int_equal(d->many.n, 3); /* a repeatable list adds every line's words */
    assert_string_equal(d->many.v[2], "c");
    assert_int_equal(d->custom_calls, 2);
    mk_schema_delete(&demo_schema, 0, d);
}

static void test_errors_name_file_and_line(void **state)
{
    (void) state;
    expect_error("[DEMO]\n    Flag maybe\n", 2, "Flag: expected On or Off, got 'maybe'");
    expect_error("[DEMO]\n    Count 101\n", 2, "Count: 101 is out of range (-5 to 100)");
    expect_error("[DEMO]\n\n    Count seven\n", 3, "expected a whole number");
    expect_error("[DEMO]\n    Bytes 0\n", 2, "out of range");
    expect_error("[DEMO]\n    Bytes 3Q\n", 2, "expected a size");
    expect_error("[DEMO]\n    Name toolongname\n", 2, "Name: longer than 8 bytes");
    expect_error("[DEMO]\n    Name xy\n", 2, "Name: 'xy' has an x");
    expect_error("[DEMO]\n    Mode quick\n", 2, "Mode: expected fast, safe or slow, got 'quick'");
    expect_error("[DEMO]\n    Address 1.2.3:80\n", 2, "not a numeric IPv4 or IPv6 address");
    expect_error("[DEMO]\n    Address 80000\n", 2, "not a port number");
    expect_error("[DEMO]\n    Words a x\n", 2, "Words: 'x' has an x");
    expect_error("[DEMO]\n    Custom bad\n", 2, "Custom: custom says no");
    expect_error("[DEMO]\n    Count 1\n    Count 2\n", 3, "'Count' is given twice");
    expect_error("[DEMO]\n    Nope 1\n", 2, "unknown key 'Nope' in [DEMO]");
    expect_error("[DEMO]\n    Greeting hello\n", 2, "unknown key 'Greeting'"); /* a site key */
    expect_error("[DEMO]\n    Flag on\n[OTHER]\n    Flag on\n", 3, "unknown section [OTHER]");
}

static void test_overrides(void **state)
{
    char err[MK_CONF_ERR_LEN] = "";
    struct mk_schema_record rec[16] = {{0}};
    (void) state;

    const struct mk_schema_override ov[] = {{"count", "42"}, {"Many", "z"}};
    struct mk_conf *conf = parse("[DEMO]\n    Count 5\n    Many a\n    Many b\n    Mode fast\n");
    struct mk_schema_input in = {
        .conf = conf, .own_file = true, .ov = ov, .n_ov = 2, .records = rec};
    struct demo *d = mk_schema_new(&demo_schema, &in, err, sizeof(err));
    assert_non_null(d);
    assert_int_equal(d->count, 42);
    assert_int_equal(d->many.n, 1); /* the override replaces every line of its key */
    assert_string_equal(d->many.v[0], "z");
    assert_string_equal(rec[1].text, "42");
    assert_string_equal(rec[1].where, "command line");
    assert_string_equal(rec[7].text, "fast");
    assert_string_equal(rec[7].where, "t.conf:5");
    assert_string_equal(rec[0].where, "built-in default");
    mk_schema_delete(&demo_schema, 0, d);
    for (size_t i = 0; i < 16; i++) {
        free(rec[i].text);
        free(rec[i].where);
    }

    const struct mk_schema_override bad[] = {{"Nope", "1"}};
    in.ov = bad;
    in.n_ov = 1;
    in.records = NULL;
    assert_null(mk_schema_new(&demo_schema, &in, err, sizeof(err)));
    assert_string_equal(err, "command line:0: unknown key 'Nope'");
    mk_conf_free(conf);
}

static void test_site_scope(void **state)
{
    char err[MK_CONF_ERR_LEN] = "";
    (void) state;

    /* A site file: other sections belong to others and are skipped. */
    struct mk_conf *conf = parse("[HOST]\n    ServerName a\n[DEMO]\n    Level 9\n");
    struct mk_schema_input in = {.conf = conf, .scope = MK_CONF_SITE};
    struct demo_site *s = mk_schema_new(&demo_schema, &in, err, sizeof(err));
    assert_non_null(s);
    assert_int_equal(s->level, 9);
    assert_string_equal(s->greeting, "hi");
    mk_schema_delete(&demo_schema, MK_CONF_SITE, s);
    mk_conf_free(conf);

    conf = parse("[HOST]\n    ServerName a\n[DEMO]\n    Flag On\n");
    in.conf = conf;
    assert_null(mk_schema_new(&demo_schema, &in, err, sizeof(err)));
    assert_string_equal(err, "t.conf:4: unknown key 'Flag' in [DEMO]"); /* plugin-wide key */
    mk_conf_free(conf);

    conf = parse("[DEMO]\n    Level 0\n");
    in.conf = conf;
    assert_null(mk_schema_new(&demo_schema, &in, err, sizeof(err)));
    assert_string_equal(err, "t.conf:2: Level: 0 is out of range (1 to 9)");
    mk_conf_free(conf);
    assert_int_equal(mk_schema_count(&demo_schema), 14);
    assert_non_null(mk_schema_find(&demo_schema, MK_CONF_SITE, "greeting"));
    assert_null(mk_schema_find(&demo_schema, 0, "greeting"));
}

static int finish_calls;

static int demo_finish(void *obj, int site, const char **key, char *reason, size_t len)
{
    struct demo *d = obj;
    (void) site;
    finish_calls++;
    if (d->flag && d->count > 10) {
        *key = "Count"; /* reported at the line of Count */
        snprintf(reason, len, "Count above 10 with Flag on");
        return -1;
    }
    if (d->count > d->small) {
        snprintf(reason, len, "Count %d exceeds Small %u", d->count, d->small);
        return -1;
    }
    return 0;
}

static void test_finish(void **state)
{
    char err[MK_CONF_ERR_LEN] = "";
    struct mk_conf_schema schema = demo_schema;
    (void) state;

    schema.finish = demo_finish;
    struct mk_conf *conf = parse("# c\n[DEMO]\n    Count 50\n    Small 10\n");
    struct mk_schema_input in = {.conf = conf, .own_file = true};
    assert_null(mk_schema_new(&schema, &in, err, sizeof(err)));
    assert_string_equal(err, "t.conf:2: Count 50 exceeds Small 10"); /* the section's line */
    assert_int_equal(finish_calls, 1);
    mk_conf_free(conf);

    conf = parse("[DEMO]\n    Flag on\n    Small 100\n    Count 50\n");
    in.conf = conf;
    assert_null(mk_schema_new(&schema, &in, err, sizeof(err)));
    assert_string_equal(err, "t.conf:4: Count above 10 with Flag on");
    mk_conf_free(conf);
}

/* One section of a repeated one (input.only): its own keys and defaults, its own lines. */
static void test_one_section_of_several(void **state)
{
    char err[MK_CONF_ERR_LEN] = "";
    const struct mk_conf_schema schema = demo_schema;
    (void) state;

    struct mk_conf *conf = parse("[DEMO]\n    Level 4\n[HOST]\n    ServerName a\n"
                                 "[DEMO]\n    Level 8\n    Greeting yo\n[DEMO]\n    Level 2\n"
                                 "    Level 3\n");
    const struct mk_conf_section *secs[3];
    size_t n = 0;
    for (struct mk_conf_section *sec = mk_conf_section(conf, "DEMO"); sec;) {
        secs[n++] = sec;
        struct mk_list *next = sec->node.next;
        sec = NULL;
        while (next != &conf->sections) {
            struct mk_conf_section *c = mk_list_entry(next, struct mk_conf_section, node);
            if (strcasecmp(c->name, "DEMO") == 0) {
                sec = c;
                break;
            }
            next = next->next;
        }
    }
    assert_int_equal(n, 3);
    struct mk_schema_input in = {.conf = conf, .scope = MK_CONF_SITE, .only = secs[0]};
    struct demo_site *a = mk_schema_new(&schema, &in, err, sizeof(err));
    in.only = secs[1];
    struct demo_site *b = mk_schema_new(&schema, &in, err, sizeof(err));
    assert_non_null(a);
    assert_non_null(b);
    /* The same key in two sections is no repeat; each gets its own defaults. */
    assert_int_equal(a->level, 4);
    assert_string_equal(a->greeting, "hi");
    assert_int_equal(b->level, 8);
    assert_string_equal(b->greeting, "yo");
    mk_schema_delete(&schema, MK_CONF_SITE, a);
    mk_schema_delete(&schema, MK_CONF_SITE, b);
    /* A key twice within one section is, at that section's line. */
    in.only = secs[2];
    assert_null(mk_schema_new(&schema, &in, err, sizeof(err)));
    assert_string_equal(err, "t.conf:10: 'Level' is given twice");
    mk_conf_free(conf);
}

/*
 * The keys of a part the build left out (in->absent): a line giving one is
 * refused with "KEY VALUE: this server was built without PART" at its file
 * and line, from the files and from overrides alike; a refused value
 * refuses only itself; `off` takes a false boolean as asking for nothing.
 */
static void test_absent_keys(void **state)
{
    static const struct mk_schema_absent absent[] = {
        {"Gone", NULL, "the gone part", false},
        {"Switch", NULL, "the switch", true},
        {"Mode", "slow", "the slow mode", false},
        {NULL},
    };
    char err[MK_CONF_ERR_LEN] = "";
    (void) state;

    const struct {
        const char *text;
        int line;
        const char *message;
    } refused[] = {
        {"[DEMO]\n    Count 3\n    Gone 1\n", 3,
         "Gone 1: this server was built without the gone part"},
        {"[DEMO]\n    gone Off\n", 2, "gone Off: this server was built without the gone part"},
        {"[DEMO]\n    Switch On\n", 2, "Switch On: this server was built without the switch"},
        {"[DEMO]\n    Mode SLOW\n", 2, "Mode SLOW: this server was built without the slow mode"},
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        struct mk_conf *conf = parse(refused[i].text);
        struct mk_schema_input in = {.conf = conf, .own_file = true, .absent = absent};
        char want[MK_CONF_ERR_LEN];
        assert_null(mk_schema_new(&demo_schema, &in, err, sizeof(err)));
        snprintf(want, sizeof(want), "t.conf:%d: %s", refused[i].line, refused[i].message);
        assert_string_equal(err, want);
        mk_conf_free(conf);
    }

    /* What asks for nothing missing is read as usual, or skipped. */
    struct mk_conf *conf = parse("[DEMO]\n    Switch Off\n    Mode fast\n    Count 9\n");
    struct mk_schema_input in = {.conf = conf, .own_file = true, .absent = absent};
    struct demo *d = mk_schema_new(&demo_schema, &in, err, sizeof(err));
    assert_non_null(d);
    assert_int_equal(d->mode, 0);
    assert_int_equal(d->count, 9);
    mk_schema_delete(&demo_schema, 0, d);

    /* An override is held to the same. */
    const struct mk_schema_override ov[] = {{"Switch", "yes"}};
    in.ov = ov;
    in.n_ov = 1;
    assert_null(mk_schema_new(&demo_schema, &in, err, sizeof(err)));
    assert_string_equal(err,
                        "command line:0: Switch yes: this server was built without the switch");
    mk_conf_free(conf);

    /* Without the list, the same key is unknown. */
    expect_error("[DEMO]\n    Gone 1\n", 2, "unknown key 'Gone' in [DEMO]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_every_type),
        cmocka_unit_test(test_errors_name_file_and_line),
        cmocka_unit_test(test_overrides),
        cmocka_unit_test(test_site_scope),
        cmocka_unit_test(test_finish),
        cmocka_unit_test(test_one_section_of_several),
        cmocka_unit_test(test_absent_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
