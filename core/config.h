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
 *
 * Two things are done here for every reader, so that every file of a
 * configuration has them (docs/configuration.md, "The file format"):
 *
 *  - "Include PATTERN" (at column 0 or indented) reads the files the glob
 *    PATTERN matches, sorted, relative to the including file's directory,
 *    as if their lines stood there; the section current before the Include
 *    is current again after it. Nesting is bounded (MK_CONF_MAX_DEPTH) and a
 *    file that includes itself, directly or not, is an error. A pattern
 *    with a wildcard may match nothing; a plain path must exist.
 *  - "${NAME}" and "${NAME:-default}" in values (and Include patterns) are
 *    replaced by the environment variable NAME (the default when it is unset
 *    or empty); an unset NAME without a default is an error. "$${" stands for
 *    a literal "${". Section names and keys are never expanded.
 *
 * Line numbers: an entry's or section's `line` is a position in the whole
 * configuration, numbering the lines of every file read in reading order.
 * For a file without Include it is the line of that file. mk_conf_where()
 * gives the file and its own line; mk_conf_error() formats with it, so a
 * message names the included file.
 */
#ifndef MK_CORE_CONFIG_H
#define MK_CORE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

/* A file read into a configuration: the first, then every included one. */
struct mk_conf_file {
    char *path;
    unsigned parent; /* index of the including file (0 for the first) */
    int parent_line; /* position of the Include line; 0 for the first file */
};

/* Positions from `first` on are lines `line`, `line + 1`... of files[file]. */
struct mk_conf_span {
    int first;
    int line;
    unsigned file;
};

struct mk_conf {
    char *path; /* label used in messages: the first file */
    struct mk_list sections;
    struct mk_conf_file *files; /* in the order they were opened */
    unsigned n_files;
    struct mk_conf_span *spans; /* by increasing `first` */
    unsigned n_spans;
    int n_lines; /* positions used */
};

#define MK_CONF_MAX_DEPTH 16 /* nested Include levels below the first file */

/*
 * Parse a file and what it includes. On error returns NULL and writes
 * "file:line: reason" to err (the file the error is in).
 */
struct mk_conf *mk_conf_load(const char *path, char *err, size_t errlen);
/*
 * Parse a buffer; `label` names it in messages. No I/O: an Include line is
 * an error ("Include needs a file"). Variables are expanded (getenv).
 */
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

/*
 * The file that position `line` of `conf` is in, and its line there in
 * *file_line (NULL: not wanted). A position outside every file (0, a
 * default's) gives conf->path and the position itself.
 */
const char *mk_conf_where(const struct mk_conf *conf, int line, int *file_line);

/*
 * Write the configuration as read (after Include and variables) in the
 * indented format to `out`: a comment naming every file read, then the
 * sections, with a "# from FILE" comment wherever the next lines come from
 * another file. Values are written as expanded, "${" as "$${", so the text
 * reads back into the same entries (a value containing " #" excepted).
 * Returns false when writing failed.
 */
bool mk_conf_dump(const struct mk_conf *conf, FILE *out);

/* Format "file:line: " + message into err (see mk_conf_where). Always returns false. */
bool mk_conf_error(const struct mk_conf *conf, int line, char *err, size_t errlen, const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));

/*
 * Split a value into whitespace-separated words. Each call returns the next
 * word and advances `*cursor`; false at the end. Words point into the value.
 */
bool mk_conf_word(const char **cursor, const char **word, size_t *len);

#endif
