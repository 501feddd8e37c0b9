/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * static_variant.c: precompressed variants (see static_variant.h).
 *
 * A variant is looked up as the request path of its own name would be
 * ("/dir/index.html.gz" for "/dir/"), so it shares the per-worker file cache
 * and its revalidation with direct requests for it. A missing variant costs
 * one failed open per request and coding tried; sites that enable the key
 * are expected to ship the variants they name.
 */
#include "static_variant.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../core/memory.h"
#include "../../core/strings.h"
#include "../config/conf.h"
#include "../conn/conn.h"
#include "../request/file_cache.h"
#include "../request/request.h"
#include "../runtime/worker.h"

#define MK_ALL_VARIANTS                                                                            \
    (MK_CODING_BIT(MK_CODING_BR) | MK_CODING_BIT(MK_CODING_ZSTD) | MK_CODING_BIT(MK_CODING_GZIP))

int mk_static_variant_set(void *obj, const struct mk_conf_key *k, const char *value,
                          const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct mk_site *vh = obj;
    const char *cur = value, *w;
    size_t wlen;
    unsigned m = 0;

    (void) k;
    (void) origin;
    if (strcasecmp(value, "Off") == 0) {
        vh->precompressed = 0;
        return MK_OK;
    }
    if (strcasecmp(value, "On") == 0) {
        vh->precompressed = MK_ALL_VARIANTS;
        return MK_OK;
    }
    while (mk_conf_word(&cur, &w, &wlen)) {
        int c = -1;
        for (int i = 0; i < MK_CODING_N_VARIANTS; i++) {
            const char *name = mk_accept_coding_name((enum mk_coding) i);
            if (wlen == strlen(name) && strncasecmp(w, name, wlen) == 0) {
                c = i;
            }
        }
        if (c < 0) {
            snprintf(reason, len, "expected On, Off or codings among br, zstd and gzip, got '%.*s'",
                     (int) wlen, w);
            return MK_ERR;
        }
        m |= MK_CODING_BIT(c);
    }
    if (!m) {
        snprintf(reason, len, "expected On, Off or codings among br, zstd and gzip");
        return MK_ERR;
    }
    vh->precompressed = m;
    return MK_OK;
}

int mk_static_accept_encoding(struct mk_request *r, const char **v, size_t *len)
{
    const struct mk_http_head *h = &r->head;
    size_t total = 0, n = 0;

    *v = NULL;
    *len = 0;
    for (unsigned i = 0; i < h->n_headers; i++) {
        const struct mk_http_header *hd = &h->headers[i];
        if (hd->name.len == 15 && mk_str_ieq(hd->name.p, 15, "accept-encoding")) {
            total += hd->value.len + 2;
            n++;
            *v = hd->value.p;
            *len = hd->value.len;
        }
    }
    if (n <= 1) {
        return MK_OK;
    }
    char *buf = mk_arena_alloc(&r->arena, total);
    size_t w = 0;
    if (!buf) {
        return MK_ERR;
    }
    for (unsigned i = 0; i < h->n_headers; i++) {
        const struct mk_http_header *hd = &h->headers[i];
        if (hd->name.len != 15 || !mk_str_ieq(hd->name.p, 15, "accept-encoding")) {
            continue;
        }
        if (w) {
            buf[w++] = ',';
            buf[w++] = ' ';
        }
        memcpy(buf + w, hd->value.p, hd->value.len);
        w += hd->value.len;
    }
    *v = buf;
    *len = w;
    return MK_OK;
}

struct mk_file *mk_static_variant_open(struct mk_request *r, const struct mk_file *f,
                                       enum mk_coding c)
{
    struct mk_worker *w = r->conn->worker;
    const struct mk_site *vh = r->site;
    const char *real = f->path + f->path_len + 1; /* relative to the root */
    const char *suffix = mk_accept_coding_suffix(c);
    size_t rlen = strlen(real), slen = strlen(suffix);
    char *key = mk_arena_alloc(&r->arena, rlen + slen + 2);
    struct mk_file *v;
    struct stat st;

    if (!key || (rlen == 1 && real[0] == '.')) {
        return NULL;
    }
    key[0] = '/';
    memcpy(key + 1, real, rlen);
    memcpy(key + 1 + rlen, suffix, slen + 1);
    size_t klen = rlen + slen + 1;

    v = mk_file_cache_get(&w->fcache, vh, key, klen, w->now);
    if (!v) {
        int fd = mk_conf_site_open(vh, key + 1, O_RDONLY);
        if (fd < 0) {
            return NULL;
        }
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
            !(v = mk_file_cache_put(&w->fcache, vh, key, klen, NULL, fd, &st, w->now))) {
            close(fd);
            return NULL;
        }
    }
    if (v->st.st_mtim.tv_sec < f->st.st_mtim.tv_sec ||
        (v->st.st_mtim.tv_sec == f->st.st_mtim.tv_sec &&
         v->st.st_mtim.tv_nsec < f->st.st_mtim.tv_nsec)) {
        mk_file_release(v); /* stale: the file changed after it was compressed */
        return NULL;
    }
    return v;
}
