/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * static.c: the built-in content handler for files.
 *
 * Files are opened beneath the site's document root (mk_conf_site_open, with
 * core/fs.c's openat2(RESOLVE_BENEATH)), after the path was decoded and
 * normalised once (path.c): nothing outside the document root can be
 * reached, and symbolic links are refused unless the site allows them.
 *
 * A file is opened and fstat'ed when the worker's file cache does not hold
 * it (mk_static_lookup), and the entry is then kept: a hit costs no system
 * call, and an entry is revalidated with one fstatat the first time it is
 * used in a new second (file_cache.h). With FileCache 0 every request opens
 * and fstats its file. The descriptor carries the body (sendfile, or the
 * bytes of a small file read once into the entry), so a file replaced
 * mid-response is still served consistently.
 *
 * On the request's worker; the entries are that worker's (file_cache.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <monkey/mk_util.h>

#include "../../core/clock.h"
#include "../../core/fs.h"
#ifdef MK_HAVE_COMPRESS
#include "../request/compress_cache.h"
#endif
#include "../config/conf.h"
#include "../conn/conn.h"
#include "../request/file_cache.h"
#include "../http/path.h"
#include "../http/rules.h"
#include "../request/request.h"
#include "static.h"
#include "static_cache.h"
#ifdef MK_HAVE_COMPRESS
#include "static_compress.h"
#endif
#include "static_ranges.h"
#include "static_variant.h"
#include "../runtime/worker.h"

static int mk_errno_status(int err)
{
    switch (err) {
    case ENOENT:
    case ENOTDIR:
    case ENAMETOOLONG:
        return 404;
    case EACCES:
    case EPERM:
    case ELOOP:
    case EXDEV:
        return 403;
    case EMFILE:
    case ENFILE:
    case ENOMEM:
        return 503;
    default:
        return 500;
    }
}

/*
 * "dir" names a directory: send the client to "dir/". The Location is built
 * from the normalised path, encoded again, never from the target as
 * received: "//evil.example/..%2fdir" must lead to "/dir/", not to another
 * host. The query is kept as received (it cannot change the authority).
 */
static int mk_static_redirect_dir(struct mk_request *r)
{
    const struct mk_http_head *h = &r->head;
    size_t len = r->path_len * 3 + 2 + (h->query.p ? h->query.len + 1 : 0);
    char *loc = mk_arena_alloc(&r->arena, len);

    if (!loc) {
        return 503;
    }
    char *p = loc;
    p += mk_path_encode(r->path, r->path_len, p);
    *p++ = '/';
    if (h->query.p) {
        *p++ = '?';
        memcpy(p, h->query.p, h->query.len);
        p += h->query.len;
    }
    if (mk_response_add_header(r, "Location", 8, loc, (size_t) (p - loc)) != MK_OK) {
        return 500;
    }
    mk_response_error(r, 301);
    return MK_OK;
}

/*
 * A header that holds one value (a date, If-Range, Range): its value, or
 * NULL when it is absent or was given on several lines, which makes it
 * invalid: such a field is ignored (RFC 9110 sections 13.1.3, 13.1.4, 14.2).
 */
static const struct mk_str *mk_hdr(const struct mk_request *r, enum mk_http_known k)
{
    if (mk_http_known_repeated(&r->head, k)) {
        return NULL;
    }
    return mk_http_known_get(&r->head, k);
}

/*
 * A list header (If-Match, If-None-Match) as one field value: several lines
 * mean the same as their values joined with ", " in order (RFC 9110 section
 * 5.3), built in request memory. MK_OK with *out set, MK_DECLINED when the
 * header is absent, MK_ERR when memory is short.
 */
static int mk_hdr_list(struct mk_request *r, enum mk_http_known k, struct mk_str *out)
{
    const struct mk_http_head *h = &r->head;
    const struct mk_str *first = mk_http_known_get(h, k);
    size_t len = 0;

    if (!first) {
        return MK_DECLINED;
    }
    if (!mk_http_known_repeated(h, k)) {
        *out = *first;
        return MK_OK;
    }
    const char *name = mk_http_known_name(k); /* only the rare repeated case walks */
    for (unsigned i = h->known[k] - 1u; i < h->n_headers; i++) {
        const struct mk_http_header *hd = &h->headers[i];
        if (mk_str_ieq(hd->name.p, hd->name.len, name)) {
            len += hd->value.len + 2;
        }
    }
    char *buf = mk_arena_alloc(&r->arena, len);
    if (!buf) {
        return MK_ERR;
    }
    size_t w = 0;
    for (unsigned i = h->known[k] - 1u; i < h->n_headers; i++) {
        const struct mk_http_header *hd = &h->headers[i];
        if (!mk_str_ieq(hd->name.p, hd->name.len, name)) {
            continue;
        }
        if (w) {
            buf[w++] = ',';
            buf[w++] = ' ';
        }
        memcpy(buf + w, hd->value.p, hd->value.len);
        w += hd->value.len;
    }
    *out = mk_str_make(buf, w);
    return MK_OK;
}

/* mk_static_preconditions, once r is known to carry at least one of them. */
static int mk_static_preconditions_eval(struct mk_request *r, const struct stat *st,
                                        const char *etag, size_t etag_len)
{
    const struct mk_str *v;
    struct mk_str list;
    time_t t;
    int rc;

    if ((rc = mk_hdr_list(r, MK_HDR_IF_MATCH, &list)) == MK_OK) {
        if (!mk_http_etag_match(list.p, list.len, etag, etag_len, false)) {
            return 412;
        }
    }
    else if (rc == MK_ERR) {
        return 503;
    }
    else if ((v = mk_hdr(r, MK_HDR_IF_UNMODIFIED_SINCE)) && mk_http_date_parse(v->p, v->len, &t)) {
        if (st->st_mtime > t) {
            return 412;
        }
    }
    if ((rc = mk_hdr_list(r, MK_HDR_IF_NONE_MATCH, &list)) == MK_OK) {
        if (mk_http_etag_match(list.p, list.len, etag, etag_len, true)) {
            return 304;
        }
    }
    else if (rc == MK_ERR) {
        return 503;
    }
    else if ((v = mk_hdr(r, MK_HDR_IF_MODIFIED_SINCE)) && mk_http_date_parse(v->p, v->len, &t)) {
        if (st->st_mtime <= t) {
            return 304;
        }
    }
    return 0;
}

/*
 * Preconditions (RFC 9110 section 13.2.2). Returns 0 to go on, 304, 412, or
 * 503 when memory is short. Inline: the common case, no precondition, is
 * one test wherever it is asked.
 */
static inline int mk_static_preconditions(struct mk_request *r, const struct stat *st,
                                          const char *etag, size_t etag_len)
{
    const uint16_t *known = r->head.known;

    if (!(known[MK_HDR_IF_MATCH] | known[MK_HDR_IF_NONE_MATCH] | known[MK_HDR_IF_MODIFIED_SINCE] |
          known[MK_HDR_IF_UNMODIFIED_SINCE])) {
        return 0; /* no precondition: the common case */
    }
    return mk_static_preconditions_eval(r, st, etag, etag_len);
}

/*
 * Does If-Range allow the Range? Yes when it is absent or names the
 * representation: one strong entity tag equal to ours, or its exact
 * modification date. A list, a weak tag or several lines never match
 * (RFC 9110 section 13.1.5), and the whole representation is sent.
 */
static bool mk_static_if_range(const struct mk_request *r, const struct stat *st, const char *etag,
                               size_t etag_len)
{
    const struct mk_str *v = mk_http_known_get(&r->head, MK_HDR_IF_RANGE);
    time_t t;

    if (!v) {
        return true;
    }
    if (mk_http_known_repeated(&r->head, MK_HDR_IF_RANGE)) {
        return false;
    }
    if (v->len && (v->p[0] == '"' || (v->len > 2 && v->p[0] == 'W' && v->p[1] == '/'))) {
        return mk_http_etag_is(v->p, v->len, etag, etag_len);
    }
    return mk_http_date_parse(v->p, v->len, &t) && t == st->st_mtime;
}

int mk_static_index(struct mk_request *r)
{
    struct mk_worker *w = r->conn->worker;
    const struct mk_site *vh = r->site;
    const char *name = NULL;
    size_t name_len = 0;
    size_t n_index;
    char *const *index = mk_request_index_files(r, &n_index);
    /* the directory's entry: its path with the NUL that ends it (file_cache.h); a rule's
       IndexFiles are not the site's, whose the entry is */
#ifdef MK_HAVE_RULES
    bool cached = !r->rule_settings || !r->rule_settings->index_files;
#else
    const bool cached = true;
#endif
    struct mk_file *f =
        cached ? mk_file_cache_get(&w->fcache, vh, r->path, r->path_len + 1, w->now) : NULL;

    if (f) {
        name = f->type_path;
        name_len = f->type_len;
    }
    else {
        int dirfd =
            mk_conf_site_open(vh, r->path_len > 1 ? r->path + 1 : ".", O_RDONLY | O_DIRECTORY);
        if (dirfd < 0) {
            return MK_DECLINED;
        }
        for (size_t i = 0; i < n_index && !name; i++) {
            struct stat st;
            int fd = mk_fs_open_beneath(dirfd, index[i], O_RDONLY, vh->symlinks);
            if (fd < 0) {
                continue;
            }
            if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
                name = index[i]; /* lives with the configuration */
                name_len = strlen(name);
                f = cached ? mk_file_cache_put(&w->fcache, vh, r->path, r->path_len + 1, name, fd,
                                               &st, w->now)
                           : NULL;
            }
            if (!f) {
                close(fd);
            }
        }
        close(dirfd);
        if (!name) {
            return MK_DECLINED;
        }
    }
    char *path = mk_arena_alloc(&r->arena, r->path_len + name_len + 1);
    if (path) {
        memcpy(path, r->path, r->path_len);
        memcpy(path + r->path_len, name, name_len);
        path[r->path_len + name_len] = '\0';
    }
    if (f) {
        mk_file_release(f); /* after the copy: name may point into it */
    }
    if (!path) {
        return 503;
    }
    r->path = path;
    r->path_len += name_len;
    return MK_OK;
}

/*
 * Open the regular file the request path names. Returns a referenced file
 * entry (cached when the cache is on), or an HTTP status; MK_OK with *out
 * NULL means a redirect was set up. A directory is never answered here: one
 * without the trailing '/' is redirected to it, one with it is 403 (its
 * index file, if it has one, was found by mk_static_index before the
 * content hooks, and the request came here for the index file's own path).
 */
static int mk_static_lookup(struct mk_request *r, struct mk_file **out)
{
    struct mk_worker *w = r->conn->worker;
    const struct mk_site *vh = r->site;
    struct stat st;
    struct mk_file *f;
    int fd;

    *out = NULL;
    f = mk_file_cache_get(&w->fcache, vh, r->path, r->path_len, w->now);
    if (f) {
        *out = f;
        return MK_OK;
    }
    fd = mk_conf_site_open(vh, r->path_len > 1 ? r->path + 1 : ".", O_RDONLY);
    if (fd < 0) {
        return mk_errno_status(errno);
    }
    if (fstat(fd, &st) < 0) {
        close(fd);
        return 500;
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return r->path[r->path_len - 1] == '/' ? 403 : mk_static_redirect_dir(r);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return 403;
    }
    f = mk_file_cache_put(&w->fcache, vh, r->path, r->path_len, NULL, fd, &st, w->now);
    if (!f) {
        close(fd);
        return 503;
    }
    *out = f;
    return MK_OK;
}

static void mk_static_content_range(struct mk_request *r, const char *prefix, uint64_t first,
                                    uint64_t last, uint64_t size, bool unsatisfied)
{
    char cr[80], *p = cr;
    size_t n = strlen(prefix);

    memcpy(p, prefix, n);
    p += n;
    if (!unsatisfied) {
        p += mk_u64_dec(first, p);
        *p++ = '-';
        p += mk_u64_dec(last, p);
        *p++ = '/';
    }
    p += mk_u64_dec(size, p);
    mk_response_add_known(r, MK_RESP_CONTENT_RANGE, cr, (size_t) (p - cr));
}

/*
 * The media type of the file entry `named` under r's configuration: looked
 * up in its table once, then kept with the entry while the table is the
 * same (a reload brings another table and a new cache).
 */
static struct mk_str mk_static_type(const struct mk_request *r, struct mk_file *named)
{
    if (named->type_table != r->cfg->mime) {
        struct mk_str type = mk_mime_lookup(r->cfg->mime, named->type_path, named->type_len);
        named->type = type.p;
        named->type_str_len = type.len;
        named->type_table = r->cfg->mime;
    }
    return mk_str_make(named->type, named->type_str_len);
}

/*
 * Answer r from the file entry f (r->file, the variant when one was
 * chosen) with the entity tag `etag`; `named` is the file the path names,
 * which gives the media type and the extension of the cache rules. A
 * coding other than MK_CODING_IDENTITY is named in Content-Encoding on
 * the answers that carry the representation (200, 206, 304), not on an
 * error. With z (f compressed on the fly, held) the body is z's bytes, f
 * giving the validators. Takes over the caller's references to f and z.
 *
 * Inlined into its two callers: mk_static_serve_plain, the common path,
 * where coding and z are constants and their branches fold away, and
 * mk_static_serve_file for the encoded answers. Without compression on
 * the fly (MK_COMPRESS=OFF) z is always NULL, and what reads it is
 * compiled out.
 */
#ifdef MK_HAVE_COMPRESS
#define MK_ZB_RELEASE(z)                                                                           \
    do {                                                                                           \
        if (z) {                                                                                   \
            mk_compress_cache_release(z);                                                          \
        }                                                                                          \
    } while (0)
#else
struct mk_zentry;
#define MK_ZB_RELEASE(z) ((void) (z))
#endif
static inline __attribute__((always_inline)) int
mk_static_answer(struct mk_request *r, struct mk_file *f, struct mk_file *named, const char *etag,
                 size_t etag_len, enum mk_coding coding, struct mk_zentry *z)
{
    r->file = f;
    r->fd = f->fd;

    const struct stat *st = &f->st;
    bool own_tag = etag == f->etag; /* not a variant's: the prepared lines apply */
    int pre = mk_static_preconditions(r, st, etag, etag_len);
    if (pre == 304) {
        if (own_tag) {
            mk_response_add_lines(r, f->hdrs, f->hdrs_validators_len, f->hdr_fields, 2);
        }
        else {
            mk_response_add_known(r, MK_RESP_ETAG, etag, etag_len);
            mk_response_add_known(r, MK_RESP_LAST_MODIFIED, f->last_modified, MK_HTTP_DATE_LEN);
        }
        if (coding < MK_CODING_N_VARIANTS) {
            const char *name = mk_accept_coding_name(coding);
            mk_response_add_known(r, MK_RESP_CONTENT_ENCODING, name, strlen(name));
        }
        if (mk_static_cache_wanted(r)) {
            mk_static_cache_headers(r, named->type_path, named->type_len);
        }
        r->status = 304;
        MK_ZB_RELEASE(z);
        return MK_OK;
    }
    if (pre) {
        MK_ZB_RELEASE(z);
        return pre;
    }

#ifdef MK_HAVE_COMPRESS
    uint64_t size = z ? (uint64_t) z->len : (uint64_t) st->st_size;
#else
    uint64_t size = (uint64_t) st->st_size;
#endif
    uint64_t first = 0, last = size ? size - 1 : 0;
    const struct mk_str *range = mk_hdr(r, MK_HDR_RANGE);
    bool multi = false;
    r->status = 200;
    if (range && r->head.method == MK_METHOD_GET && mk_static_if_range(r, st, etag, etag_len)) {
        struct mk_range one;
        unsigned n;
        switch (mk_http_range_parse(range->p, range->len, size, &one, 1, &n)) {
        case MK_RANGE_OK:
            if (n > 1) {
                /* several: a multipart body, or all of it when memory or
                   random bytes are short (a server may ignore Range) */
#ifdef MK_HAVE_COMPRESS
                const char *zdata = z ? z->data : NULL;
#else
                const char *zdata = NULL;
#endif
                multi = mk_static_ranges(r, range->p, range->len, size, mk_static_type(r, named),
                                         zdata) == MK_OK;
                r->status = multi ? 206 : 200;
                break;
            }
            first = one.first;
            last = one.last;
            r->status = 206;
            mk_static_content_range(r, "bytes ", first, last, size, false);
            break;
        case MK_RANGE_UNSATISFIABLE:
            mk_static_content_range(r, "bytes */", 0, 0, size, true);
            MK_ZB_RELEASE(z);
            return 416;
        case MK_RANGE_NONE:
            break;
        }
    }

    if (!multi) {
        struct mk_str type = mk_static_type(r, named);
        r->content_type = type.p;
        r->content_type_len = type.len;
    }
    if (own_tag) {
        mk_response_add_lines(r, f->hdrs, f->hdrs_len, f->hdr_fields, 3);
    }
    else {
        mk_response_add_known(r, MK_RESP_ETAG, etag, etag_len);
        mk_response_add_known(r, MK_RESP_LAST_MODIFIED, f->last_modified, MK_HTTP_DATE_LEN);
        mk_response_add_known(r, MK_RESP_ACCEPT_RANGES, "bytes", 5);
        if (coding < MK_CODING_N_VARIANTS) {
            const char *name = mk_accept_coding_name(coding);
            mk_response_add_known(r, MK_RESP_CONTENT_ENCODING, name, strlen(name));
        }
    }
    if (mk_static_cache_wanted(r)) {
        mk_static_cache_headers(r, named->type_path, named->type_len);
    }

    if (multi) {
        /* r->parts, its type and length are set (mk_static_ranges) */
        r->body_type = MK_RESP_PARTS;
#ifdef MK_HAVE_COMPRESS
        if (z) {
            r->zbody = z; /* what the parts point into; as below */
            r->file = NULL;
            r->fd = -1;
            mk_file_release(f);
        }
#endif
        return MK_OK;
    }
    r->content_length = size ? last - first + 1 : 0;
#ifdef MK_HAVE_COMPRESS
    if (z) {
        /* From memory: the file entry is no longer needed (what the
           response keeps points into the tables, not into f). r->zbody
           is only ever set without r->file (mk_response_drop_file). */
        r->zbody = z;
        r->body_type = MK_RESP_MEM;
        r->mem = z->data + first;
        r->mem_len = (size_t) r->content_length;
        r->file = NULL;
        r->fd = -1;
        mk_file_release(f);
        return MK_OK;
    }
#endif
    r->body_type = MK_RESP_FILE;
    r->file_off = (off_t) first;
    r->body_left = r->content_length;
    return MK_OK;
}

/* mk_static_answer for an encoded answer (or the identity one of a site that may encode). */
static int mk_static_serve_file(struct mk_request *r, struct mk_file *f, struct mk_file *named,
                                const char *etag, size_t etag_len, enum mk_coding coding,
                                struct mk_zentry *z)
{
#ifdef MK_HAVE_COMPRESS
    if (r->zbody) {
        /* what a compression job left for r and nothing took (another
           coding or the file itself is sent): r->file is about to be set */
        mk_compress_cache_release(r->zbody);
        r->zbody = NULL;
    }
#endif
    return mk_static_answer(r, f, named, etag, etag_len, coding, z);
}

/* mk_static_answer with f itself, for a site that encodes nothing: the common path. */
static int mk_static_serve_plain(struct mk_request *r, struct mk_file *f)
{
    return mk_static_answer(r, f, f, f->etag, f->etag_len, MK_CODING_IDENTITY, NULL);
}

/* Every answer of a site that sends encoded files varies with Accept-Encoding. */
static void mk_static_vary(struct mk_request *r)
{
    mk_response_add_known(r, MK_RESP_VARY, "Accept-Encoding", 15);
}

/*
 * The entity tag of `tag` (a file's, with its quotes) for coding c: the
 * tag with "-" and the coding's name appended, then `suffix` ("...-gzip",
 * "...-br5"). Into out (room for the tag and 16 more bytes); its length.
 */
static size_t mk_static_coded_tag(const char *tag, size_t tag_len, enum mk_coding c,
                                  const char *suffix, char *out)
{
    const char *name = mk_accept_coding_name(c);
    size_t name_len = strlen(name), slen = strlen(suffix);
    char *p = out;

    memcpy(p, tag, tag_len - 1u); /* without its closing quote */
    p += tag_len - 1u;
    *p++ = '-';
    memcpy(p, name, name_len);
    p += name_len;
    memcpy(p, suffix, slen);
    p += slen;
    *p++ = '"';
    return (size_t) (p - out);
}

/*
 * Answer r from the precompressed variant v (coding c) of f. Its entity
 * tag is its file's with the coding's name appended ("...-gzip"):
 * compressors keep the source's modification time, so two variants of the
 * same size, or a variant and the file, would otherwise share a tag. Takes
 * over the caller's references to f and v.
 */
static int mk_static_serve_variant(struct mk_request *r, struct mk_file *f, struct mk_file *v,
                                   enum mk_coding c)
{
    char etag[sizeof(v->etag) + 16];
    size_t etag_len = mk_static_coded_tag(v->etag, v->etag_len, c, "", etag);

    mk_static_vary(r);
    int rc = mk_static_serve_file(r, v, f, etag, etag_len, c, NULL);
    mk_file_release(f); /* what the response keeps points into the tables, not into f */
    return rc;
}

#ifdef MK_HAVE_COMPRESS
/*
 * Whether the site compresses f on the fly: its size within CompressMinSize
 * and CompressMaxSize, its media type among CompressTypes (decided once
 * per file entry and site).
 */
static bool mk_static_compressible(const struct mk_request *r, struct mk_file *f)
{
    const struct mk_compress_site *zs = &r->site->compress;
    uint64_t size = (uint64_t) f->st.st_size;

    if (size < zs->min_size || size > zs->max_size) {
        return false;
    }
    if (f->z_site != zs) {
        struct mk_str type = mk_static_type(r, f);
        f->z_type = mk_static_compress_type(zs, type.p, type.len);
        f->z_site = zs;
    }
    return f->z_type;
}

/*
 * Answer r in coding c, compressed on the fly from f. Its entity tag is
 * f's with the coding and the level appended ("...-br5"): derived from the
 * file's validators, so conditional requests are answered (304, 412)
 * before anything is compressed, distinct from a precompressed variant's
 * and from another level's. MK_OK or a status (f taken over), MK_SUSPENDED
 * (r waits for the compression; f released), MK_DECLINED (not in this
 * coding now: f is still the caller's).
 */
static int mk_static_serve_compressed(struct mk_request *r, struct mk_file *f, enum mk_coding c)
{
    struct mk_zentry *z;
    char etag[sizeof(f->etag) + 16], level[3];
    unsigned lv = r->site->compress.level[c]; /* 0 to 11 */
    int st = mk_static_compress_get(r, f, c, &z);

    if (st == MK_DECLINED) {
        return MK_DECLINED;
    }
    level[0] = (char) (lv >= 10 ? '1' : '0' + lv);
    level[1] = (char) (lv >= 10 ? '0' + lv - 10 : '\0');
    level[2] = '\0';
    size_t etag_len = mk_static_coded_tag(f->etag, f->etag_len, c, level, etag);
    if (st == MK_AGAIN && mk_static_preconditions(r, &f->st, etag, etag_len) == 0) {
        /* The body is needed and not there yet. */
        int rc = mk_static_compress_wait(r, f, c);
        if (rc == MK_SUSPENDED) {
            mk_file_release(f);
        }
        return rc;
    }
    mk_static_vary(r);
    return mk_static_serve_file(r, f, f, etag, etag_len, c, z);
}
#endif

/*
 * A site with precompressed variants or compression on the fly: answer in
 * the coding r's Accept-Encoding prefers among those it may get (a
 * precompressed variant first, then one made on the fly), or with f
 * itself. Every answer varies with Accept-Encoding, the identity one
 * included, so that a cache keeps them apart; except, when the site has
 * no variants, for files that are never compressed (their size or type),
 * whose answer does not vary. Takes over the caller's reference to f.
 */
static int mk_static_serve_encoded(struct mk_request *r, struct mk_file *f)
{
    const struct mk_site *vh = r->site;
#ifdef MK_HAVE_COMPRESS
    unsigned zmask =
        vh->compress.codings && mk_static_compressible(r, f) ? vh->compress.codings : 0;
#else
    unsigned zmask = 0;
#endif
    unsigned mask = vh->precompressed | zmask;
    const char *ae;
    size_t ae_len;

    if (!mask) {
        return mk_static_serve_file(r, f, f, f->etag, f->etag_len, MK_CODING_IDENTITY, NULL);
    }
    if (mk_static_accept_encoding(r, &ae, &ae_len) != MK_OK) {
        mk_file_release(f);
        return 503;
    }
    /* The best acceptable coding among those that may be sent; one that
       cannot be (no variant, nothing made on the fly) is taken out and the
       choice made again, from the qualities parsed once. Without
       Accept-Encoding: the file as it is. */
    unsigned q[MK_CODING_NONE];
    if (ae) {
        mk_accept_encoding_q(ae, ae_len, q);
    }
    while (ae && mask) {
        enum mk_coding c = mk_accept_encoding_pick(q, mask);
        if (c >= MK_CODING_N_VARIANTS) {
            break;
        }
        if (vh->precompressed & MK_CODING_BIT(c)) {
            struct mk_file *v = mk_static_variant_open(r, f, c);
            if (v) {
                return mk_static_serve_variant(r, f, v, c);
            }
        }
#ifdef MK_HAVE_COMPRESS
        if (zmask & MK_CODING_BIT(c)) {
            int rc = mk_static_serve_compressed(r, f, c);
            if (rc != MK_DECLINED) {
                return rc;
            }
        }
#endif
        mask &= ~MK_CODING_BIT(c);
    }
    mk_static_vary(r);
    return mk_static_serve_file(r, f, f, f->etag, f->etag_len, MK_CODING_IDENTITY, NULL);
}

int mk_static_serve(struct mk_request *r)
{
    struct mk_file *f;

    switch (r->head.method) {
    case MK_METHOD_GET:
    case MK_METHOD_HEAD:
        break;
    case MK_METHOD_OPTIONS:
        r->status = 200;
        mk_response_add_known(r, MK_RESP_ALLOW, "GET, HEAD, OPTIONS", 18);
        return MK_OK;
    case MK_METHOD_UNKNOWN:
        return 501;
    default:
        return 405;
    }
    if (!r->path) {
        return 400;
    }
    int rc = mk_static_lookup(r, &f);
    if (rc != MK_OK || !f) {
        return rc;
    }
#ifdef MK_HAVE_COMPRESS
    if (r->site->precompressed | r->site->compress.codings) {
#else
    if (r->site->precompressed) {
#endif
        return mk_static_serve_encoded(r, f);
    }
    return mk_static_serve_plain(r, f);
}

const struct mk_request_files mk_static_files = {
    .serve = mk_static_serve,
    .index = mk_static_index,
};
