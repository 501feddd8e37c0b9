/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * file_cache.h: a per-worker cache of open files and their metadata.
 *
 * Serving a file costs openat2 + fstat + close on top of the transfer; the
 * cache keeps the descriptor, the size and the validators of recently
 * served files, so a hit costs nothing; and for a directory's path (ending
 * in '/'), which index file answered (static.c's mk_static_index), so that
 * a request for the directory finds it without a system call. Such an
 * entry is keyed by the directory's path followed by its NUL (path_len + 1
 * bytes), which no request path holds: a lookup of the path as a file
 * never finds it.
 *
 * Freshness: an entry is revalidated with one fstatat(2) of its path the
 * first time it is used in a new second; a changed inode, size or
 * modification time drops it. A file changed or replaced is therefore
 * served from the old descriptor for at most the rest of that second: the
 * same contract as lighttpd's stat cache. Every descriptor in the cache was
 * opened under the site's containment rules (static.c), so a stale entry can
 * only serve a file that was legitimately inside the document root.
 *
 * Small bodies: a cached regular file of at most FileCacheBody bytes
 * (default 16 KB) is read once when it enters the cache, and its bytes are
 * then served from memory (mk_file_read): no pread per request. They follow
 * the same revalidation as the metadata, so a file changed on disk is
 * served from memory for at most the rest of the second in which it changed,
 * like nginx's open_file_cache_valid with a bound of one second rather than
 * its 60: the one fstatat a second is paid anyway, and one second is what
 * Last-Modified can tell apart. The copy is always the whole file as it was
 * when read, with the size and validators read with it, so an answer never
 * mixes two versions (a file rewritten in place mid-second could, through
 * the descriptor).
 *
 * One cache per worker: no locks. Entries in use by a response are
 * reference counted and closed when the last user is done.
 */
#ifndef MK_SERVER_FILE_CACHE_H
#define MK_SERVER_FILE_CACHE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "../../core/list.h"
#include "../http/http.h"

struct mk_mime_table;
struct mk_site;

struct mk_file {
    int fd;
    unsigned refs;  /* the cache's own reference plus one per response */
    bool cached;    /* still reachable from the cache */
    time_t checked; /* worker clock of the last validation */
    dev_t root_dev; /* the document root the path is relative to */
    ino_t root_ino;
    bool symlinks; /* opened with symbolic links allowed */
    struct stat st;
    char etag[64];
    uint8_t etag_len;
    char last_modified[29]; /* IMF-fixdate of st_mtime */
    /* The fields ETag, Last-Modified and "Accept-Ranges: bytes" of an answer
       from this file, as lines ready to copy (the first two alone for 304)
       with their records (offsets from hdrs). */
    uint8_t hdrs_validators_len;
    uint8_t hdrs_len;
    char hdrs[128];
    struct mk_resp_field hdr_fields[3];
    const char *type_path; /* name to derive the media type from; a directory's: its index file */
    size_t type_len;
    /* the media type of type_path in the table `type_table` (the one of the
       configuration that looked it up last; NULL: not looked up yet) */
    const struct mk_mime_table *type_table;
    const char *type;
    size_t type_str_len;
    char *body; /* the whole file (st.st_size bytes) when small enough; else NULL */
#ifdef MK_HAVE_COMPRESS
    /* whether the media type is among the CompressTypes of the site whose
       settings z_site are (static.c; NULL: not decided yet) */
    const void *z_site;
    bool z_type;
#endif
    uint32_t hash;
    struct mk_file *hnext;
    struct mk_list lru;
    uint16_t path_len;
    char path[]; /* the normalised request path, then the type name */
};

struct mk_file_cache {
    struct mk_file **buckets;
    unsigned n_buckets; /* power of two */
    unsigned count;
    unsigned max;       /* 0: the cache is off */
    struct mk_list lru; /* most recently used first */
};

void mk_file_cache_init(struct mk_file_cache *fc, unsigned max);
/* Drop every entry (configuration change, worker exit). */
void mk_file_cache_flush(struct mk_file_cache *fc);
void mk_file_cache_destroy(struct mk_file_cache *fc);

/*
 * A referenced, fresh entry for `path` under `vh`, or NULL. `now` is the
 * worker clock. Release with mk_file_release().
 */
struct mk_file *mk_file_cache_get(struct mk_file_cache *fc, const struct mk_site *vh,
                                  const char *path, size_t path_len, time_t now);

/*
 * Wrap an open regular file in a referenced entry and, when the cache is on,
 * remember it for `path`. `type_name` names the file actually opened for
 * a directory's key (its path and NUL: the index file; such an entry keeps
 * no body, it only tells the name); NULL means the path itself. Returns NULL
 * when memory is short (the caller still owns fd then).
 */
struct mk_file *mk_file_cache_put(struct mk_file_cache *fc, const struct mk_site *vh,
                                  const char *path, size_t path_len, const char *type_name, int fd,
                                  const struct stat *st, time_t now);

/*
 * Read len bytes at off of the body of f (NULL: none) whose descriptor is
 * fd: from memory when f holds the body, else pread(2). Returns what pread
 * returns.
 */
static inline ssize_t mk_file_read(const struct mk_file *f, int fd, void *buf, size_t len,
                                   off_t off)
{
    if (f && f->body && off >= 0 && (uint64_t) off + len <= (uint64_t) f->st.st_size) {
        memcpy(buf, f->body + off, len);
        return (ssize_t) len;
    }
    return pread(fd, buf, len, off);
}

/* Drop one reference; the descriptor is closed with the last one. */
void mk_file_release(struct mk_file *f);

#endif
