/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * static_compress.c: static files compressed on the fly (see
 * static_compress.h).
 *
 * Why the task threads, and not the worker: compressing 1 MB of
 * JavaScript takes 30 to 65 ms of CPU into br at level 5 or gzip at level
 * 6 here (bench/compress_time.c), during which a worker
 * would answer no other connection. A file is compressed once per worker
 * and kept, so what a task costs on top of the work (a queue, a wake-up,
 * the resume) is paid once per file, not per request.
 *
 * A job: the worker reserves the result's worst-case size in its cache
 * and puts a PENDING entry there, parks the request and queues the work in
 * the server's own share of the task queue (task.h); the task thread reads
 * the file through the descriptor of the file cache's entry (or the body
 * that entry holds) and compresses it; the worker settles the entry, wakes
 * the requests that waited for it, and answers the one that asked.
 */
#include "static.h"
#include "static_compress.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../core/memory.h"
#include "../../core/strings.h"
#include "../http/compress.h"
#include "../request/compress_cache.h"
#include "../config/conf.h"
#include "../conn/conn.h"
#include "../request/file_cache.h"
#include "../request/request.h"
#include "../process/server.h"
#include "../request/task.h"
#include "../runtime/worker.h"

/* ---- site keys (their table is static_site.c's) --------------------------- */

void mk_static_compress_site_free(struct mk_compress_site *zs)
{
    mk_strv_free(zs->types, zs->n_types);
    zs->types = NULL;
    zs->n_types = 0;
}

int mk_static_compress_set_codings(void *obj, const struct mk_conf_key *k, const char *value,
                                   const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct mk_site *site = obj;
    struct mk_compress_site *zs = &site->compress;
    const char *cur = value, *w;
    size_t wlen;
    unsigned m = 0;

    (void) k;
    (void) origin;
    if (strcasecmp(value, "Off") == 0) {
        zs->codings = 0;
        return MK_OK;
    }
    if (strcasecmp(value, "On") == 0) {
        if (!mk_compress_built()) {
            snprintf(reason, len,
                     "this server was built without zlib and brotli (zlib1g-dev, libbrotli-dev)");
            return MK_ERR;
        }
        zs->codings = mk_compress_built();
        return MK_OK;
    }
    while (mk_conf_word(&cur, &w, &wlen)) {
        enum mk_coding c;
        if (wlen == 2 && strncasecmp(w, "br", 2) == 0) {
            c = MK_CODING_BR;
        }
        else if (wlen == 4 && strncasecmp(w, "gzip", 4) == 0) {
            c = MK_CODING_GZIP;
        }
        else {
            snprintf(reason, len, "expected On, Off or codings among br and gzip, got '%.*s'",
                     (int) wlen, w);
            return MK_ERR;
        }
        if (!(mk_compress_built() & MK_CODING_BIT(c))) {
            snprintf(reason, len, "this server was built without %s (%s)",
                     c == MK_CODING_BR ? "brotli" : "zlib",
                     c == MK_CODING_BR ? "libbrotli-dev" : "zlib1g-dev");
            return MK_ERR;
        }
        m |= MK_CODING_BIT(c);
    }
    if (!m) {
        snprintf(reason, len, "expected On, Off or codings among br and gzip");
        return MK_ERR;
    }
    zs->codings = m;
    return MK_OK;
}

/*
 * A media type without parameters, token characters only: type/subtype,
 * or a whole family: the type, a slash and a star.
 */
static bool mk_compress_type_valid(const char *w, size_t len)
{
    const char *slash = memchr(w, '/', len);

    if (!slash || slash == w || slash == w + len - 1) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char c = w[i];
        bool tchar = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     strchr("!#$%&'*+-.^_`|~/", c);
        if (!tchar || (c == '/' && w + i != slash)) {
            return false;
        }
    }
    /* "*" only as the whole subtype */
    const char *star = memchr(w, '*', len);
    return !star || (star == slash + 1 && star == w + len - 1);
}

int mk_static_compress_set_types(void *obj, const struct mk_conf_key *k, const char *value,
                                 const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct mk_site *site = obj;
    struct mk_compress_site *zs = &site->compress;
    const char *cur = value, *w;
    size_t wlen;

    (void) k;
    (void) origin;
    while (mk_conf_word(&cur, &w, &wlen)) {
        if (!mk_compress_type_valid(w, wlen)) {
            snprintf(reason, len,
                     "'%.*s' is not a media type (type/subtype, or type/* for a whole family, "
                     "without parameters)",
                     (int) wlen, w);
            return MK_ERR;
        }
        size_t keep = w[wlen - 1] == '*' ? wlen - 1 : wlen;
        char *t = mk_strndup(w, keep);
        for (size_t i = 0; i < keep; i++) {
            t[i] = mk_tolower(t[i]);
        }
        zs->types = mk_realloc(zs->types, (zs->n_types + 1) * sizeof(*zs->types));
        zs->types[zs->n_types++] = t;
    }
    if (!zs->n_types) {
        snprintf(reason, len, "expected media types");
        return MK_ERR;
    }
    return MK_OK;
}

bool mk_static_compress_site_finish(const struct mk_compress_site *zs, const struct mk_conf *conf,
                                    int min_line, int max_line, char *err, size_t errlen)
{
    if (zs->min_size > zs->max_size) {
        return mk_conf_error(conf, min_line > max_line ? min_line : max_line, err, errlen,
                             "CompressMinSize (%llu) is larger than CompressMaxSize (%llu): "
                             "nothing would be compressed",
                             (unsigned long long) zs->min_size, (unsigned long long) zs->max_size);
    }
    return true;
}

bool mk_static_compress_type(const struct mk_compress_site *zs, const char *type, size_t len)
{
    size_t n = 0;

    while (n < len && type[n] != ';' && type[n] != ' ' && type[n] != '\t') {
        n++;
    }
    for (size_t i = 0; i < zs->n_types; i++) {
        const char *t = zs->types[i];
        size_t tl = strlen(t);
        bool family = t[tl - 1] == '/';
        if ((family ? n > tl : n == tl) && strncasecmp(type, t, tl) == 0) {
            return true;
        }
    }
    return false;
}

/* ---- jobs ----------------------------------------------------------------- */

struct mk_zjob {
    struct mk_zentry *z; /* PENDING; one reference is the job's */
    struct mk_file *f;   /* referenced: the task reads its descriptor or body */
    struct mk_worker *w;
    enum mk_coding c;
    int level;
    /* written by the task thread, read by the worker after the resume */
    bool ran;
    int result; /* mk_compress's */
    char *out;
    size_t out_len;
};

static void mk_zkey_of(struct mk_zkey *k, const struct mk_file *f, enum mk_coding c, int level)
{
    memset(k, 0, sizeof(*k));
    k->dev = f->st.st_dev;
    k->ino = f->st.st_ino;
    k->size = f->st.st_size;
    k->mtime_sec = (int64_t) f->st.st_mtim.tv_sec;
    k->mtime_nsec = f->st.st_mtim.tv_nsec;
    k->coding = (uint8_t) c;
    k->level = (uint8_t) level;
}

static bool mk_zkey_same(const struct mk_zkey *a, const struct mk_zkey *b)
{
    return a->ino == b->ino && a->dev == b->dev && a->size == b->size &&
           a->mtime_sec == b->mtime_sec && a->mtime_nsec == b->mtime_nsec &&
           a->coding == b->coding && a->level == b->level;
}

/*
 * The task: read the whole file and compress it. A file that changed while
 * it was read (another size or modification time than its entry's) gives
 * nothing: its bytes may mix two versions.
 */
static void mk_zjob_work(void *arg)
{
    struct mk_zjob *j = arg;
    const struct mk_file *f = j->f;
    size_t size = (size_t) f->st.st_size, got = 0;
    const char *in = f->body;
    char *buf = NULL;
    struct stat st;

    j->ran = true;
    j->result = MK_ERR;
    if (!in) {
        if (!(buf = mk_try_alloc(size ? size : 1))) {
            return;
        }
        while (got < size) {
            ssize_t n = pread(f->fd, buf + got, size - got, (off_t) got);
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) {
                break;
            }
            got += (size_t) n;
        }
        if (got != size || fstat(f->fd, &st) != 0 || st.st_size != f->st.st_size ||
            st.st_mtim.tv_sec != f->st.st_mtim.tv_sec ||
            st.st_mtim.tv_nsec != f->st.st_mtim.tv_nsec) {
            mk_free(buf);
            return;
        }
        in = buf;
    }
    j->result = mk_compress(j->c, j->level, in, size, &j->out, &j->out_len);
    mk_free(buf);
}

/* A request that waited for another's job: it starts again and finds the result. */
static int mk_zjob_waited(struct mk_request *r, void *arg)
{
    (void) arg;
    return r ? mk_static_serve(r) : MK_OK;
}

/*
 * The job's continuation, on its worker (r NULL: the request is gone, or
 * the server stops and the work never ran): settle the entry, wake the
 * requests that waited for it, and answer r from it.
 */
static int mk_zjob_done(struct mk_request *r, void *arg)
{
    struct mk_zjob *j = arg;
    struct mk_zentry *z = j->z;
    struct mk_worker *w = j->w;
    bool ok = j->ran && j->result == MK_OK;

    mk_compress_cache_settle(&w->zcache, z, ok ? j->out : NULL, j->out_len,
                             j->ran && j->result == MK_DECLINED, w->use.cfg->compress_cache);
    for (struct mk_suspended *s = z->waiters, *next; s; s = next) {
        next = s->next;
        s->cb = mk_zjob_waited;
        s->arg = NULL;
        mk_task_resume_post(s);
    }
    z->waiters = NULL;
    mk_file_release(j->f);
    mk_free(j);
    if (!r) {
        mk_compress_cache_release(z);
        return MK_OK;
    }
    r->zbody = z; /* the job's reference: mk_static_compress_get() takes it */
    return mk_static_serve(r);
}

int mk_static_compress_get(struct mk_request *r, const struct mk_file *f, enum mk_coding c,
                           struct mk_zentry **out)
{
    struct mk_zcache *zc = &r->conn->worker->zcache;
    struct mk_zentry *z = r->zbody;
    struct mk_zkey k;

    *out = NULL;
    mk_zkey_of(&k, f, c, r->site->compress.level[c]);
    if (z) {
        /* What r's own job made: used even if the cache could not keep it. */
        r->zbody = NULL;
        if (z->state == MK_Z_READY && mk_zkey_same(&z->key, &k)) {
            *out = z;
            return MK_OK;
        }
        bool failed = z->state == MK_Z_FAILED && mk_zkey_same(&z->key, &k);
        mk_compress_cache_release(z);
        if (failed) {
            return MK_DECLINED;
        }
    }
    if (zc->bytes > r->cfg->compress_cache) {
        mk_compress_cache_trim(zc, r->cfg->compress_cache); /* the bound shrank with a reload */
    }
    z = mk_compress_cache_find(zc, &k);
    if (!z || z->state == MK_Z_PENDING) {
        return MK_AGAIN;
    }
    if (z->state == MK_Z_FAILED) {
        return MK_DECLINED;
    }
    z->refs++;
    MK_STAT_ADD(zc->st_hits, 1);
    *out = z;
    return MK_OK;
}

int mk_static_compress_wait(struct mk_request *r, struct mk_file *f, enum mk_coding c)
{
    struct mk_worker *w = r->conn->worker;
    struct mk_zcache *zc = &w->zcache;
    int level = r->site->compress.level[c];
    struct mk_suspended *s;
    struct mk_zkey k;

    mk_zkey_of(&k, f, c, level);
    struct mk_zentry *z = mk_compress_cache_find(zc, &k);
    if (z) {
        if (z->state != MK_Z_PENDING || !(s = mk_request_suspend(r))) {
            return MK_DECLINED;
        }
        s->next = z->waiters;
        z->waiters = s;
        MK_STAT_ADD(zc->st_waits, 1);
        return MK_SUSPENDED;
    }
    z = mk_compress_cache_reserve(zc, &k, mk_compress_bound(c, (size_t) f->st.st_size),
                                  r->cfg->compress_cache);
    struct mk_zjob *j = z ? mk_try_alloc(sizeof(*j)) : NULL;
    s = j ? mk_request_suspend(r) : NULL;
    if (s) {
        memset(j, 0, sizeof(*j));
        j->z = z;
        j->f = f;
        j->w = w;
        j->c = c;
        j->level = level;
        s->work = mk_zjob_work;
        s->cb = mk_zjob_done;
        s->arg = j;
        f->refs++;
        if (mk_task_submit_server(w->server, r, s) == MK_OK) {
            MK_STAT_ADD(zc->st_compressions, 1);
            return MK_SUSPENDED;
        }
        f->refs--; /* r's own reference remains */
        mk_request_unsuspend(r, s);
    }
    mk_free(j);
    if (z) {
        mk_compress_cache_settle(zc, z, NULL, 0, false, r->cfg->compress_cache);
        mk_compress_cache_release(z);
    }
    MK_STAT_ADD(zc->st_skipped, 1);
    return MK_DECLINED;
}
