/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * file_cache.c: see file_cache.h. A fixed-size chained hash table plus an
 * LRU list; eviction takes the least recently used entry.
 */
#include "file_cache.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../core/clock.h"
#include "../../core/memory.h"
#include "../config/conf.h"

void mk_file_cache_init(struct mk_file_cache *fc, unsigned max)
{
    unsigned n = 16;

    while (n < max) {
        n <<= 1;
    }
    fc->buckets = max ? mk_calloc(n, sizeof(*fc->buckets)) : NULL;
    fc->n_buckets = max ? n : 0;
    fc->count = 0;
    fc->max = max;
    mk_list_init(&fc->lru);
}

void mk_file_release(struct mk_file *f)
{
    if (--f->refs == 0) {
        close(f->fd);
        mk_free(f->body);
        mk_free(f);
    }
}

static void mk_file_cache_evict(struct mk_file_cache *fc, struct mk_file *f)
{
    struct mk_file **pp = &fc->buckets[f->hash & (fc->n_buckets - 1)];

    while (*pp != f) {
        pp = &(*pp)->hnext;
    }
    *pp = f->hnext;
    mk_list_del(&f->lru);
    f->cached = false;
    fc->count--;
    mk_file_release(f);
}

void mk_file_cache_flush(struct mk_file_cache *fc)
{
    while (!mk_list_is_empty(&fc->lru)) {
        mk_file_cache_evict(fc, mk_list_entry(fc->lru.next, struct mk_file, lru));
    }
}

void mk_file_cache_destroy(struct mk_file_cache *fc)
{
    if (fc->buckets) {
        mk_file_cache_flush(fc);
        mk_free(fc->buckets);
        fc->buckets = NULL;
    }
    fc->max = 0;
}

/*
 * The document root's identity, the link policy and the path, mixed a word
 * at a time (multiply and fold). Entries are compared in full, and only
 * files that were opened enter (at most FileCache of them), so the hash
 * needs spreading, not strength.
 */
static uint32_t mk_file_hash(const struct mk_site *vh, const char *path, size_t len)
{
    const uint64_t k = 0x9e3779b97f4a7c15ull;
    uint64_t h = ((uint64_t) vh->root_dev ^ ((uint64_t) vh->symlinks << 63)) * k;
    size_t i = 0;

    h = (h ^ (uint64_t) vh->root_ino) * k;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, path + i, sizeof(w));
        h = (h ^ w) * k;
        h ^= h >> 29;
    }
    uint64_t tail = len;
    for (; i < len; i++) {
        tail = (tail << 8) | (unsigned char) path[i];
    }
    h = (h ^ tail) * k;
    return (uint32_t) (h ^ (h >> 32));
}

static bool mk_file_same(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

struct mk_file *mk_file_cache_get(struct mk_file_cache *fc, const struct mk_site *vh,
                                  const char *path, size_t path_len, time_t now)
{
    struct mk_file *f;
    uint32_t h;

    if (!fc->max) {
        return NULL;
    }
    h = mk_file_hash(vh, path, path_len);
    for (f = fc->buckets[h & (fc->n_buckets - 1)]; f; f = f->hnext) {
        if (f->hash == h && f->path_len == path_len && f->root_ino == vh->root_ino &&
            f->root_dev == vh->root_dev && f->symlinks == vh->symlinks &&
            memcmp(f->path, path, path_len) == 0) {
            break;
        }
    }
    if (!f) {
        return NULL;
    }
    if (f->checked != now) {
        struct stat st;
        const char *real = f->path + f->path_len + 1;
        if (fstatat(vh->docroot_fd, real, &st, 0) < 0 || !mk_file_same(&st, &f->st)) {
            mk_file_cache_evict(fc, f);
            return NULL;
        }
        f->checked = now;
    }
    mk_list_move_tail(&f->lru, &fc->lru); /* tail: most recent */
    f->refs++;
    return f;
}

static void mk_file_validators(struct mk_file *f)
{
    static const char hex[] = "0123456789abcdef";
    uint64_t parts[3] = {(uint64_t) f->st.st_mtim.tv_sec, (uint64_t) f->st.st_mtim.tv_nsec,
                         (uint64_t) f->st.st_size};
    const char seps[3] = {'.', '-', '"'};
    char *p = f->etag;

    *p++ = '"';
    for (int i = 0; i < 3; i++) {
        char tmp[16];
        int n = 0;
        uint64_t v = parts[i];
        do {
            tmp[n++] = hex[v & 0xf];
            v >>= 4;
        } while (v);
        while (n) {
            *p++ = tmp[--n];
        }
        *p++ = seps[i];
    }
    f->etag_len = (uint8_t) (p - f->etag);
    mk_http_date_format(f->st.st_mtime, f->last_modified);

    /* the lines and records an answer copies (struct mk_resp_field) */
    char *h = f->hdrs;
    uint32_t lm = 6u + f->etag_len + 2u, ar = lm + 15u + (uint32_t) sizeof(f->last_modified) + 2u;
    f->hdr_fields[0] = (struct mk_resp_field){"etag", 0, 4, f->etag_len};
    f->hdr_fields[1] =
        (struct mk_resp_field){"last-modified", lm, 13, (uint32_t) sizeof(f->last_modified)};
    f->hdr_fields[2] = (struct mk_resp_field){"accept-ranges", ar, 13, 5};
    memcpy(h, "ETag: ", 6);
    h += 6;
    memcpy(h, f->etag, f->etag_len);
    h += f->etag_len;
    memcpy(h, "\r\nLast-Modified: ", 17);
    h += 17;
    memcpy(h, f->last_modified, sizeof(f->last_modified));
    h += sizeof(f->last_modified);
    memcpy(h, "\r\n", 2);
    h += 2;
    f->hdrs_validators_len = (uint8_t) (h - f->hdrs);
    memcpy(h, "Accept-Ranges: bytes\r\n", 22);
    h += 22;
    f->hdrs_len = (uint8_t) (h - f->hdrs);
}

/*
 * Read the whole of a small file into f->body, once, as it enters the
 * cache. Nothing is kept when the file is larger than `max`, empty, memory
 * is short or the read comes short (the file changed under us: the
 * descriptor serves it, and the next revalidation sees the change).
 */
static void mk_file_keep_body(struct mk_file *f, uint64_t max)
{
    size_t size = (size_t) f->st.st_size;

    if (!max || f->st.st_size <= 0 || (uint64_t) f->st.st_size > max) {
        return;
    }
    char *b = mk_try_alloc(size);
    if (!b) {
        return;
    }
    if (pread(f->fd, b, size, 0) != (ssize_t) size) {
        mk_free(b);
        return;
    }
    f->body = b;
}

struct mk_file *mk_file_cache_put(struct mk_file_cache *fc, const struct mk_site *vh,
                                  const char *path, size_t path_len, const char *type_name, int fd,
                                  const struct stat *st, time_t now)
{
    /* The real path, relative to the root, used to revalidate: the path
       without its '/' ("." for the root), or for a directory's key (path and
       NUL) the directory's path without it, then the index file's name. */
    size_t name_len = type_name ? strlen(type_name) : 0;
    size_t rel_len = path_len - (type_name ? 2 : 1);
    struct mk_file *f;

    if (path_len > UINT16_MAX || path_len < (type_name ? 2u : 1u)) {
        return NULL;
    }
    f = mk_try_alloc(sizeof(*f) + path_len + 1 + rel_len + name_len + 2);
    if (!f) {
        return NULL;
    }
    memset(f, 0, sizeof(*f));
    f->fd = fd;
    f->refs = 1;
    f->checked = now;
    f->root_dev = vh->root_dev;
    f->root_ino = vh->root_ino;
    f->symlinks = vh->symlinks;
    f->st = *st;
    f->path_len = (uint16_t) path_len;
    memcpy(f->path, path, path_len);
    f->path[path_len] = '\0';

    char *real = f->path + path_len + 1;
    memcpy(real, path + 1, rel_len);
    if (type_name) {
        memcpy(real + rel_len, type_name, name_len);
    }
    real[rel_len + name_len] = '\0';
    if (rel_len + name_len == 0) {
        memcpy(real, ".", 2);
    }
    if (type_name) {
        f->type_path = real + rel_len;
        f->type_len = name_len;
    }
    else {
        f->type_path = f->path;
        f->type_len = path_len;
    }
    mk_file_validators(f);
    mk_list_init(&f->lru);

    if (!fc->max) {
        return f;
    }
    if (!type_name) { /* a directory's entry only tells which index file answered */
        mk_file_keep_body(f, vh->cfg ? vh->cfg->file_cache_body : 0);
    }
    if (fc->count >= fc->max) {
        mk_file_cache_evict(fc, mk_list_entry(fc->lru.next, struct mk_file, lru));
    }
    f->hash = mk_file_hash(vh, path, path_len);
    struct mk_file **head = &fc->buckets[f->hash & (fc->n_buckets - 1)];
    f->hnext = *head;
    *head = f;
    mk_list_add_tail(&f->lru, &fc->lru);
    f->cached = true;
    f->refs++;
    fc->count++;
    return f;
}
