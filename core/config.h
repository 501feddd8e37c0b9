/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * config.h: the indented configuration format, for human beings.
 *
 *     # a comment
 *     [SECTION]
 *         Key  value, the rest of the line   # trailing comment
 *
 * A section header starts at column 0; its entries are indented (spaces or
 * tabs). A value runs to the end of the line; " #" or "\t#" starts a comment.
 * Section and key names are compared without regard to case. This layer knows
 * no keys: it only produces sections of (key, value, line) entries, keeping
 * file order, and reports syntax errors as "file:line: message". Meaning is
 * given by the schema of whoever reads the file (server/config/conf.c, plugins).
 */
#ifndef MK_CORE_CONFIG_H
#define MK_CORE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "list.h"

#define MK_CONF_ERR_LEN 512

struct mk_conf_section;

struct mk_conf_entry {
    char *key;
    char *value;
    int line;
    struct mk_conf_section *section;
    struct mk_list node;
};

struct mk_conf_section {
    char *name;
    int line;
    struct mk_list entries;
    struct mk_list node;
};

struct mk_conf {
    char *path; /* label used in messages */
    struct mk_list sections;
};

/* Parse a file. On error returns NULL and writes "file:line: reason" to err. */
struct mk_conf *mk_conf_load(const char *path, char *err, size_t errlen);
/* Parse a buffer; `label` names it in messages. Pure apart from allocation. */
struct mk_conf *mk_conf_parse(const char *label, const char *buf, size_t len, char *err,
                              size_t errlen);
void mk_conf_free(struct mk_conf *conf);

/* First section named `name` (case-insensitive), or NULL. */
struct mk_conf_section *mk_conf_section(const struct mk_conf *conf, const char *name);
/* The entry after `e` in file order across sections (NULL: the first), or NULL. */
struct mk_conf_entry *mk_conf_next(const struct mk_conf *conf, const struct mk_conf_entry *e);
/* First entry named `key` in `section`, or NULL. */
struct mk_conf_entry *mk_conf_entry(const struct mk_conf_section *section, const char *key);

/*
 * Typed value readers. Each returns true and stores the value, or returns
 * false and writes "file:line: key: reason" into err.
 */
bool mk_conf_bool(const struct mk_conf *conf, const struct mk_conf_entry *e, bool *out, char *err,
                  size_t errlen);
bool mk_conf_int(const struct mk_conf *conf, const struct mk_conf_entry *e, long min, long max,
                 long *out, char *err, size_t errlen);
/* A byte count with an optional K, M or G suffix (powers of 1024). */
bool mk_conf_size(const struct mk_conf *conf, const struct mk_conf_entry *e, uint64_t min,
                  uint64_t max, uint64_t *out, char *err, size_t errlen);

/*
 * A duration (see mk_str_to_duration_ms: "500ms", "2s", "1m"; a plain number
 * counts seconds) in milliseconds, from min_ms to max_ms.
 */
bool mk_conf_duration(const struct mk_conf *conf, const struct mk_conf_entry *e, uint64_t min_ms,
                      uint64_t max_ms, uint64_t *out, char *err, size_t errlen);

/* Format "file:line: " + message into err. Always returns false. */
bool mk_conf_error(const struct mk_conf *conf, int line, char *err, size_t errlen, const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));

/*
 * Split a value into whitespace-separated words. Each call returns the next
 * word and advances `*cursor`; false at the end. Words point into the value.
 */
bool mk_conf_word(const char **cursor, const char **word, size_t *len);

#endif
