/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_config.c: libFuzzer target for the indented configuration format
 * (core/config.c): parse the input, then read every entry with each typed
 * reader, as a schema would. Errors are expected; crashes and leaks (the
 * LeakSanitizer of libFuzzer runs on every input) are not.
 *
 * Invariants (each a crash when broken):
 *  - a failed parse, or a failed typed read, leaves a "fuzz:LINE: ..."
 *    message in err;
 *  - mk_conf_next() visits exactly the entries of the sections, in order;
 *  - every section is found by its name and holds only entries with a
 *    non-empty key and value that belong to it, with increasing line numbers;
 *  - a value read as a number or a size lies within the requested bounds;
 *  - a buffer has one file: every position maps to the label and itself
 *    (mk_conf_where), and an Include line is refused, never read;
 *  - variables: the environment holds MK_FUZZ_A ("8080") and MK_FUZZ_B
 *    ("a b"), so "${MK_FUZZ_A}", "${MK_FUZZ_B:-x}" and the errors of the
 *    expansion are reached; an expanded value holds no line break and is
 *    never empty.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"

#include "fuzz_check.h"

#define MK_FUZZ_LABEL "fuzz"

static void check_err(const char *err)
{
    MK_FUZZ_CHECK(strncmp(err, MK_FUZZ_LABEL ":", sizeof(MK_FUZZ_LABEL)) == 0);
    MK_FUZZ_CHECK(memchr(err, '\0', MK_CONF_ERR_LEN) != NULL);
}

static void read_entry(const struct mk_conf *conf, const struct mk_conf_entry *e)
{
    char err[MK_CONF_ERR_LEN];
    bool b;
    long l;
    uint64_t u;

    err[0] = '\0';
    if (!mk_conf_bool(conf, e, &b, err, sizeof(err))) {
        check_err(err);
    }
    err[0] = '\0';
    if (mk_conf_int(conf, e, LONG_MIN, LONG_MAX, &l, err, sizeof(err))) {
        /* Whatever was read also reads within its own bounds. */
        long again;
        MK_FUZZ_CHECK(mk_conf_int(conf, e, l, l, &again, err, sizeof(err)) && again == l);
    }
    else {
        check_err(err);
    }
    err[0] = '\0';
    if (mk_conf_int(conf, e, -10, 1000, &l, err, sizeof(err))) {
        MK_FUZZ_CHECK(l >= -10 && l <= 1000);
    }
    else {
        check_err(err);
    }
    err[0] = '\0';
    if (mk_conf_size(conf, e, 0, UINT64_MAX, &u, err, sizeof(err))) {
        uint64_t again;
        MK_FUZZ_CHECK(mk_conf_size(conf, e, u, u, &again, err, sizeof(err)) && again == u);
    }
    else {
        check_err(err);
    }
    err[0] = '\0';
    if (mk_conf_size(conf, e, 512, 1u << 20, &u, err, sizeof(err))) {
        MK_FUZZ_CHECK(u >= 512 && u <= 1u << 20);
    }
    else {
        check_err(err);
    }
    /* A too small error buffer is truncated, never overrun. */
    char tiny[8];
    (void) mk_conf_bool(conf, e, &b, tiny, sizeof(tiny));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[MK_CONF_ERR_LEN];

    setenv("MK_FUZZ_A", "8080", 0);
    setenv("MK_FUZZ_B", "a b", 0);

    err[0] = '\0';
    struct mk_conf *conf =
        mk_conf_parse(MK_FUZZ_LABEL, (const char *) data, size, err, sizeof(err));
    if (!conf) {
        check_err(err);
        return 0;
    }

    const struct mk_conf_entry *e = NULL;
    struct mk_list *sit, *eit;
    mk_list_foreach (sit, &conf->sections) {
        const struct mk_conf_section *s = mk_list_entry(sit, struct mk_conf_section, node);
        MK_FUZZ_CHECK(s->name && s->name[0] != '\0');
        MK_FUZZ_CHECK(mk_conf_section(conf, s->name) != NULL);
        int line = s->line;
        mk_list_foreach (eit, &s->entries) {
            const struct mk_conf_entry *want = mk_list_entry(eit, struct mk_conf_entry, node);
            e = mk_conf_next(conf, e);
            MK_FUZZ_CHECK(e == want);
            MK_FUZZ_CHECK(e->section == s && e->line > line);
            MK_FUZZ_CHECK(e->key[0] != '\0' && e->value[0] != '\0');
            MK_FUZZ_CHECK(!strpbrk(e->value, "\r\n"));
            int file_line;
            MK_FUZZ_CHECK(strcmp(mk_conf_where(conf, e->line, &file_line), MK_FUZZ_LABEL) == 0 &&
                          file_line == e->line);
            MK_FUZZ_CHECK(mk_conf_entry(s, e->key) != NULL);
            line = e->line;
            read_entry(conf, e);
        }
    }
    MK_FUZZ_CHECK(mk_conf_next(conf, e) == NULL);
    mk_conf_free(conf);
    return 0;
}
