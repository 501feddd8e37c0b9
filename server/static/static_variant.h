/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * static_variant.h: precompressed variants of static files (the site key
 * Precompressed), as nginx's gzip_static and brotli_static serve them.
 *
 * When a site allows them, a request for "file" may be answered with
 * "file.br", "file.zst" or "file.gz" beside it, chosen by Accept-Encoding
 * (accept_encoding.h). A variant is used only when it is a regular file
 * opened under the same containment rules as the file itself, and not
 * older than the file (a stale variant is ignored). The variant is a file
 * of its own: its ETag, Last-Modified, size and ranges are its own.
 *
 * On the request's worker: a variant is an entry of that worker's file
 * cache (file_cache.h), under its own path.
 */
#ifndef MK_SERVER_STATIC_VARIANT_H
#define MK_SERVER_STATIC_VARIANT_H

#include <stdbool.h>
#include <stddef.h>

#include <monkey/mk_schema.h>

#include "../../core/config.h"
#include "../http/accept_encoding.h"

struct mk_file;
struct mk_request;
struct mk_site;

/*
 * Precompressed (a [HOST] key, static_site.c): "Off", "On" (br zstd gzip)
 * or a list of the codings allowed among br, zstd and gzip, into the
 * site's `precompressed` as MK_CODING_BITs. A set() of the schema engine:
 * obj is the struct mk_site.
 */
int mk_static_variant_set(void *obj, const struct mk_conf_key *k, const char *value,
                          const struct mk_conf_origin *origin, char *reason, size_t len);

/*
 * r's Accept-Encoding as one value: several lines mean their values joined
 * with ", " (RFC 9110 section 5.3), in r's arena. MK_OK with *v NULL when
 * absent; MK_ERR when memory is short.
 */
int mk_static_accept_encoding(struct mk_request *r, const char **v, size_t *len);

/*
 * The variant in coding `c` of `f` (the file r's path names) as a
 * referenced entry (release with mk_file_release), or NULL when it is
 * missing, not a regular file, refused by the containment rules, stale
 * (older than f) or memory is short.
 */
struct mk_file *mk_static_variant_open(struct mk_request *r, const struct mk_file *f,
                                       enum mk_coding c);

#endif
