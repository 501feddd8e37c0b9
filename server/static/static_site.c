/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * static_site.c: the static handler's [HOST] keys, one line per key, given
 * to the configuration at start (mk_conf_site_keys; server.c) so that
 * the configuration layer never calls the static handler. They follow the
 * configuration's own keys in [HOST] and fill fields of struct mk_site;
 * each value is checked by the file that uses it (static_variant.c,
 * static_cache.c, static_compress.c). Read-only after start.
 */
#include "static.h"

#include <stddef.h>

#include "../../core/schema.h"
#include "../config/conf.h"
#include "../http/compress.h"
#include "static_cache.h"
#include "static_compress.h"
#include "static_variant.h"

#define MK_SITE(member) MK_CONF_FIELD(struct mk_site, member)
#define MK_SITE_ONE MK_CONF_SITE
#define MK_SITE_MANY (MK_CONF_SITE | MK_CONF_MULTI)

/* The keys, in the order of docs/configuration.md; their index is the one of `lines` below. */
static const struct mk_conf_key mk_static_keys[] = {
    {"Precompressed", MK_CONF_CUSTOM, MK_SITE_ONE, 0, 0, 0, 0, "Off", .set = mk_static_variant_set},
    {"CacheControl", MK_CONF_CUSTOM, MK_SITE_MANY | MK_SCHEMA_WHOLE_REASON, 0, 0, 0, 0, NULL,
     .set = mk_static_cache_set},
    {"IndexFiles", MK_CONF_WORDS, MK_SITE_ONE, MK_SITE(index_list), 0, 0, NULL,
     .check = mk_config_check_index_file},
#ifdef MK_HAVE_COMPRESS
    {"Compress", MK_CONF_CUSTOM, MK_SITE_ONE, 0, 0, 0, 0, "Off",
     .set = mk_static_compress_set_codings},
    {"CompressTypes", MK_CONF_CUSTOM, MK_SITE_ONE, 0, 0, 0, 0, MK_COMPRESS_DEFAULT_TYPES,
     .set = mk_static_compress_set_types},
    {"CompressMinSize", MK_CONF_SIZE, MK_SITE_ONE, MK_SITE(compress.min_size), 1,
     MK_COMPRESS_MAX_LIMIT, "256"},
    {"CompressMaxSize", MK_CONF_SIZE, MK_SITE_ONE, MK_SITE(compress.max_size), 1,
     MK_COMPRESS_MAX_LIMIT, "4M"},
    {"CompressBrotliLevel", MK_CONF_INT, MK_SITE_ONE, MK_SITE(compress.level[MK_CODING_BR]),
     MK_COMPRESS_BR_MIN, MK_COMPRESS_BR_MAX, "5"},
    {"CompressGzipLevel", MK_CONF_INT, MK_SITE_ONE, MK_SITE(compress.level[MK_CODING_GZIP]),
     MK_COMPRESS_GZIP_MIN, MK_COMPRESS_GZIP_MAX, "6"},
#endif
    {NULL},
};

#ifdef MK_HAVE_COMPRESS
enum {
    MK_STATIC_KEY_MIN_SIZE = 5, /* CompressMinSize in mk_static_keys */
    MK_STATIC_KEY_MAX_SIZE = 6,
};
#endif

/*
 * The keys of compression on the fly in a build without it: refused with
 * their line and the part's name, "Compress Off" taken (it asks for nothing).
 */
static const struct mk_schema_absent mk_static_absent[] = {
#ifndef MK_HAVE_COMPRESS
    {"Compress", NULL, "compression on the fly", true},
    {"CompressTypes", NULL, "compression on the fly", false},
    {"CompressMinSize", NULL, "compression on the fly", false},
    {"CompressMaxSize", NULL, "compression on the fly", false},
    {"CompressBrotliLevel", NULL, "compression on the fly", false},
    {"CompressGzipLevel", NULL, "compression on the fly", false},
#endif
    {NULL},
};

static bool mk_static_site_finish(struct mk_site *vh, const struct mk_conf *conf, const int *lines,
                                  char *err, size_t errlen)
{
#ifdef MK_HAVE_COMPRESS
    return mk_static_compress_site_finish(&vh->compress, conf, lines[MK_STATIC_KEY_MIN_SIZE],
                                          lines[MK_STATIC_KEY_MAX_SIZE], err, errlen);
#else
    (void) vh;
    (void) conf;
    (void) lines;
    (void) err;
    (void) errlen;
    return true;
#endif
}

static void mk_static_site_free(struct mk_site *vh)
{
    mk_static_cache_free(&vh->cache_rules);
#ifdef MK_HAVE_COMPRESS
    mk_static_compress_site_free(&vh->compress);
#endif
}

const struct mk_site_keys mk_static_site_keys = {
    .keys = mk_static_keys,
    .absent = mk_static_absent,
    .finish = mk_static_site_finish,
    .free = mk_static_site_free,
};
