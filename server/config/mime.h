/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * mime.h: file extension to media type. A table is immutable once built and
 * shared by all workers through the configuration that owns it.
 */
#ifndef MK_SERVER_MIME_H
#define MK_SERVER_MIME_H

#include <stddef.h>

#include "../../core/config.h"
#include "../../core/strings.h"

struct mk_mime_entry {
    char *ext;  /* lower case, without the dot */
    char *type; /* e.g. "text/html; charset=utf-8" */
    size_t type_len;
    int line; /* in monkey.mime; 0 when built in */
};

struct mk_mime_table {
    struct mk_mime_entry *entries; /* sorted by ext */
    size_t count;
    struct mk_str default_type;
    char *default_type_buf;
};

/* The table compiled into the binary (used by -o and when no file exists). */
struct mk_mime_table *mk_mime_builtin(const char *default_type);
/*
 * Build from a parsed monkey.mime ([MIMETYPES] section, "ext type" lines).
 * NULL with "file:line: reason" in err on a bad line or duplicate extension.
 */
struct mk_mime_table *mk_mime_from_conf(const struct mk_conf *conf, const char *default_type,
                                        char *err, size_t errlen);
void mk_mime_free(struct mk_mime_table *table);

/* Media type for a path (by the extension of its last segment). Never NULL. */
struct mk_str mk_mime_lookup(const struct mk_mime_table *table, const char *path, size_t len);

#endif
