/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * static_compress.h: static files compressed on the fly (the site key
 * Compress and its companions), for the media types a site lists that have
 * no precompressed variant of the coding chosen (static_variant.h).
 *
 * A file is compressed once per worker, coding and level, on the task
 * threads (task.h) while the request that asked for it is parked; requests
 * for the same file and coding that come meanwhile wait for the same work.
 * The result is kept in the worker's cache (compress_cache.h), bounded by
 * the server key CompressCache; whatever cannot be compressed at once (no
 * room, the task queue full, a file that does not shrink) is answered
 * unencoded, never refused. The request side (Accept-Encoding, validators,
 * ranges, HEAD) is static.c's.
 *
 * On the request's worker, except the work itself (a task thread).
 */
#ifndef MK_SERVER_STATIC_COMPRESS_H
#define MK_SERVER_STATIC_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <monkey/mk_common.h>
#include <monkey/mk_schema.h>

#include "../../core/config.h"
#include "../http/accept_encoding.h"

struct mk_file;
struct mk_request;
struct mk_zentry;

#ifdef MK_HAVE_COMPRESS
/* A site's settings (struct mk_site's `compress`), read by the keys of static_site.c. */
struct mk_compress_site {
    unsigned codings; /* Compress: MK_CODING_BIT of br and gzip; 0: off */
    /* CompressTypes: media types without parameters, in lower case; one
       ending in "/" stands for its whole family, as "text/" for text/ + "*" */
    char **types;
    size_t n_types;
    uint64_t min_size;                   /* CompressMinSize */
    uint64_t max_size;                   /* CompressMaxSize */
    uint8_t level[MK_CODING_N_VARIANTS]; /* CompressBrotliLevel, CompressGzipLevel */
};

/* CompressTypes by default: text compresses; images, audio, video, archives are compressed. */
#define MK_COMPRESS_DEFAULT_TYPES                                                                  \
    "text/* application/javascript application/json application/ld+json "                          \
    "application/manifest+json application/xml application/xhtml+xml application/rss+xml "         \
    "application/atom+xml application/wasm image/svg+xml"

/* CompressMaxSize at most: beyond it a task runs for seconds. */
#define MK_COMPRESS_MAX_LIMIT (256ull << 20)

/*
 * Compress (Off, On: every coding built, or codings among br and gzip) and
 * CompressTypes (media types, "type/" + "*" for a family): set()s of the
 * schema engine, obj the struct mk_site.
 */
int mk_static_compress_set_codings(void *obj, const struct mk_conf_key *k, const char *value,
                                   const struct mk_conf_origin *origin, char *reason, size_t len);
int mk_static_compress_set_types(void *obj, const struct mk_conf_key *k, const char *value,
                                 const struct mk_conf_origin *origin, char *reason, size_t len);
/*
 * After the keys and their defaults: CompressMinSize no larger than
 * CompressMaxSize, else false with "file:line: reason" in err at the later
 * of their lines (min_line, max_line: 0 when not given).
 */
bool mk_static_compress_site_finish(const struct mk_compress_site *zs, const struct mk_conf *conf,
                                    int min_line, int max_line, char *err, size_t errlen);
void mk_static_compress_site_free(struct mk_compress_site *zs);

/* Whether `type` (a media type, parameters allowed) is among the site's CompressTypes. */
bool mk_static_compress_type(const struct mk_compress_site *zs, const char *type, size_t len);

/*
 * The encoded body of file `f` in coding `c` for r (r->zbody when a
 * finished job left it there for r, else the worker's cache):
 *   MK_OK        *out is a referenced READY entry (the caller owns it);
 *   MK_AGAIN     not there yet: the body needs mk_static_compress_wait();
 *   MK_DECLINED  the file does not compress (or the work failed): try
 *                another coding, or send the file itself.
 */
int mk_static_compress_get(struct mk_request *r, const struct mk_file *f, enum mk_coding c,
                           struct mk_zentry **out);

/*
 * Park r until the compression of `f` into `c` is done: r joins the work
 * already in progress, or starts it on the task threads. MK_SUSPENDED (the
 * static handler returns it; r then starts again through mk_static_serve),
 * or MK_DECLINED when the work cannot be started now (no room within
 * CompressCache, the task queue full, memory short): send something else.
 */
int mk_static_compress_wait(struct mk_request *r, struct mk_file *f, enum mk_coding c);

#else /* built without compression on the fly (MK_COMPRESS=OFF) */

/* Nothing: a site's struct mk_site holds no settings for it. */
struct mk_compress_site {};
#endif

#endif
