/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * schema.h: the engine behind declarative configuration keys
 * (include/monkey/mk_schema.h describes the tables).
 *
 * mk_schema_fill() reads one scope of a schema (plugin-wide or per site)
 * from a parsed file into a typed struct: every line of the schema's
 * section is checked against the table, overrides (the command line)
 * replace the file's lines of their key, and every key nobody set takes
 * its default, checked the same way. The first error stops it, written as
 * "file:line: reason". Nothing here knows the server: the server's own
 * [SERVER] keys are one table, each plugin's another.
 */
#ifndef MK_CORE_SCHEMA_H
#define MK_CORE_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>

#include <monkey/mk_schema.h>

#include "config.h"

/* A key/value given outside the files ("command line"). */
struct mk_schema_override {
    const char *key;
    const char *value;
};

/* The value in force of one key as text, and where it was set. Owned strings. */
struct mk_schema_record {
    char *text;
    char *where; /* "file:line", "command line", "built-in default" */
};

/*
 * A key of a part this build compiled out (cmake/profile.cmake: the
 * supervisor, HTTP/2, ...): a line giving it is refused with "file:line:
 * KEY VALUE: this server was built without PART" rather than "unknown
 * key", so the reader learns what the build lacks. With `value` only that
 * value is refused (Balancing fair; Balancing reuseport is read as usual);
 * with `off`, a value that reads as a false boolean asks for nothing the
 * build lacks and is taken as given (Supervisor Off).
 */
struct mk_schema_absent {
    const char *key; /* NULL ends a list */
    const char *value;
    const char *part; /* "the supervisor", "HTTP/2" */
    bool off;
};

/*
 * A key flag of the server's own tables, beside MK_CONF_MULTI and
 * MK_CONF_SITE (not part of the plugin ABI): the reason a callback writes
 * is the whole message after "file:line: ", without the key's name put
 * before it (messages such as "ServerName 'a.com' is already used by ...").
 */
#define MK_SCHEMA_WHOLE_REASON 0x100

struct mk_schema_input {
    const struct mk_conf *conf; /* NULL: defaults and overrides only */
    const char *confdir;        /* base of relative paths; NULL: kept relative */
    int scope;                  /* 0: plugin-wide keys, MK_CONF_SITE: site keys */
    /* Sections other than the schema's are an error (a file of its own) or skipped. */
    bool own_file;
    const struct mk_schema_override *ov;
    size_t n_ov;
    /* NULL, or one record per key of the table (index as in schema->keys). */
    struct mk_schema_record *records;
    /* Not NULL: read this section of conf only (one of a repeated section). */
    const struct mk_conf_section *only;
    /* NULL, or the keys of the parts this build left out. */
    const struct mk_schema_absent *absent;
    /* NULL, or one int per key of the table: set to the line of conf where
       the key was first given, 0 when it was not (checks across keys that
       name a line of their own). */
    int *lines;
};

/*
 * Fill `obj` (zeroed by the caller, of the scope's size) from `in`. MK_OK,
 * or MK_ERR with "file:line: reason" in err; either way release `obj` with
 * mk_schema_release() afterwards.
 */
int mk_schema_fill(const struct mk_conf_schema *schema, const struct mk_schema_input *in, void *obj,
                   char *err, size_t errlen);

/* Release what a fill stored in `obj` (strings, word lists, schema->free). */
void mk_schema_release(const struct mk_conf_schema *schema, int scope, void *obj);

/* Allocate and fill a struct of the scope's size: NULL with err set on error. */
void *mk_schema_new(const struct mk_conf_schema *schema, const struct mk_schema_input *in,
                    char *err, size_t errlen);
/* Release and free what mk_schema_new() returned; NULL is fine. */
void mk_schema_delete(const struct mk_conf_schema *schema, int scope, void *obj);

/* Number of keys in the table. */
size_t mk_schema_count(const struct mk_conf_schema *schema);
/* The key named `name` (any case) of `scope`, or NULL. */
const struct mk_conf_key *mk_schema_find(const struct mk_conf_schema *schema, int scope,
                                         const char *name);

/*
 * Parse an address "PORT", "*:PORT", "HOST:PORT" or "[IPV6]:PORT" (numeric
 * hosts only). MK_OK, or MK_ERR with the reason in reason.
 */
int mk_schema_parse_address(const char *text, struct mk_conf_address *out, char *reason,
                            size_t len);

#endif
