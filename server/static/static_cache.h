/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * static_cache.h: Cache-Control and Expires on static files (the site key
 * CacheControl, repeatable), chosen by path prefix or file extension.
 *
 * Precedence: the longest matching path prefix other than "/" wins; else
 * the rule for the extension of the file served (an index file's own);
 * else the prefix "/" (the site's default); else no header. The headers go
 * on 200, 206 and 304 answers (RFC 9111 section 4.3.4: a 304 carries the
 * Cache-Control and Expires a 200 would), never on errors.
 *
 * Ownership: a site's rules are built with its configuration on the
 * controlling thread and freed with it; workers only read them.
 */
#ifndef MK_SERVER_STATIC_CACHE_H
#define MK_SERVER_STATIC_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <monkey/mk_schema.h>

#include "../../core/config.h"

struct mk_request;

struct mk_cache_rule {
    char *match; /* "/prefix" or ".ext" */
    size_t match_len;
    bool ext;
    char *value; /* the Cache-Control value as written */
    size_t value_len;
    int64_t max_age; /* its max-age in seconds, -1: none (then no Expires) */
};

struct mk_cache_rules {
    struct mk_cache_rule *v;
    size_t n;
};

/*
 * Add the rule of a CacheControl value ("MATCH DIRECTIVES") to rules.
 * False with the whole reason (no file or line) in reason: a MATCH that is
 * neither a normalised path prefix nor ".ext", given twice, or directives
 * that are not a Cache-Control value.
 */
bool mk_static_cache_conf(struct mk_cache_rules *rules, const char *value, char *reason,
                          size_t len);
/*
 * CacheControl (a repeatable [HOST] key, static_site.c, whose reasons are
 * whole messages): mk_static_cache_conf into the site's cache_rules. A
 * set() of the schema engine: obj is the struct mk_site.
 */
int mk_static_cache_set(void *obj, const struct mk_conf_key *k, const char *value,
                        const struct mk_conf_origin *origin, char *reason, size_t len);
void mk_static_cache_free(struct mk_cache_rules *rules);
#ifdef MK_HAVE_RULES
/* Whether r's response may get a Cache-Control: its site has CacheControl, or its rule. */
bool mk_static_cache_wanted(const struct mk_request *r);
#else
#define mk_static_cache_wanted(r) ((r)->site->cache_rules.n > 0)
#endif

/* The rule for request path `path` serving a file named `name` (its last
   segment gives the extension), or NULL. */
const struct mk_cache_rule *mk_static_cache_find(const struct mk_cache_rules *rules,
                                                 const char *path, size_t path_len,
                                                 const char *name, size_t name_len);

/* Add the Cache-Control and Expires of the rule for r to r's response. */
void mk_static_cache_headers(struct mk_request *r, const char *name, size_t name_len);

#endif
