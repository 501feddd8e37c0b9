/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * cgi_map.c: which script a request runs. A ScriptAlias maps a URL prefix
 * to a directory: the first path segments naming a file there are the
 * script, the rest is PATH_INFO. Match expressions select files under the
 * document root by their path (opened beneath it with the site's rules,
 * so no script outside the document root runs); a path ending in '/'
 * tries the site's index files, so "/" with index.cgi runs it. Only a
 * path an expression matches costs a system call.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgi.h"

/* A NUL-terminated copy of p[0..len) followed by `tail`, in r's memory. */
static char *cgi_join(struct mk_request *r, const char *a, size_t alen, const char *b, size_t blen)
{
    char *s = cgi_api->alloc(r, alen + blen + 1);
    if (s) {
        memcpy(s, a, alen);
        memcpy(s + alen, b, blen);
        s[alen + blen] = '\0';
    }
    return s;
}

/* The interpreter for the script's extension, else NULL. */
static const char *cgi_interpreter(const struct cgi_site_conf *sc, const char *file)
{
    const char *slash = strrchr(file, '/');
    const char *base = slash ? slash + 1 : file;
    size_t blen = strlen(base);
    for (size_t i = 0; i < sc->n_interps; i++) {
        size_t elen = strlen(sc->interps[i].ext);
        if (blen > elen && strcmp(base + blen - elen, sc->interps[i].ext) == 0) {
            return sc->interps[i].program;
        }
    }
    return NULL;
}

/* Fill the parts of t common to both ways of finding a script; a status on failure. */
static int cgi_target_fill(struct mk_request *r, const struct cgi_site_conf *sc, const char *path,
                           size_t name_len, size_t path_len, char *filename,
                           struct cgi_target *t)
{
    t->gw.name = path;
    t->gw.name_len = name_len;
    t->gw.path_info = path + name_len;
    t->gw.path_info_len = path_len - name_len;
    t->gw.filename = filename;
    t->gw.docroot = cgi_api->docroot(r);
    t->interpreter = cgi_interpreter(sc, filename);
    const char *slash = strrchr(filename, '/');
    t->nph = strncmp(slash ? slash + 1 : filename, "nph-", 4) == 0;
    if (!t->interpreter && access(filename, X_OK) != 0) {
        cgi_api->log(MK_PLUGIN_LOG_ERROR, "cgi: %s: not executable and no Interpreter for it",
                     filename);
        return 403;
    }
    return MK_OK;
}

/* Under a ScriptAlias: the first segments that name a regular file. */
static int cgi_map_alias(struct mk_request *r, const struct cgi_site_conf *sc,
                         const struct cgi_alias *a, const char *path, size_t path_len,
                         struct cgi_target *t)
{
    size_t plen = strlen(a->prefix), dlen = strlen(a->dir);
    size_t pos = plen;

    if (pos >= path_len) {
        return 403; /* the directory itself */
    }
    while (pos < path_len) {
        const char *slash = memchr(path + pos, '/', path_len - pos);
        size_t end = slash ? (size_t) (slash - path) : path_len;
        /* dir + "/" + the path's segments after the prefix, up to end */
        char *file = cgi_api->alloc(r, dlen + 1 + (end - plen) + 1);
        if (!file) {
            return 500;
        }
        memcpy(file, a->dir, dlen);
        file[dlen] = '/';
        memcpy(file + dlen + 1, path + plen, end - plen);
        file[dlen + 1 + end - plen] = '\0';
        struct stat st;
        if (stat(file, &st) != 0) {
            return 404;
        }
        if (S_ISREG(st.st_mode)) {
            return cgi_target_fill(r, sc, path, end, path_len, file, t);
        }
        if (!S_ISDIR(st.st_mode) || !slash) {
            return 403;
        }
        pos = end + 1;
    }
    return 403; /* a directory, with a trailing '/' */
}

static int cgi_matches(const struct cgi_site_conf *sc, const char *s)
{
    for (size_t i = 0; i < sc->n_matches; i++) {
        if (regexec(&sc->matches[i], s, 0, NULL, 0) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Whether `rel` (no leading '/') is a regular file beneath the document root. */
static int cgi_is_file_beneath(struct mk_request *r, const char *rel)
{
    struct stat st;
    int fd = cgi_api->open_beneath(r, rel, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        return 0;
    }
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    close(fd);
    return ok;
}

/* The script path `name` (NUL terminated, in r's memory) as a file name. */
static char *cgi_filename(struct mk_request *r, const char *name, size_t name_len)
{
    const char *root = cgi_api->docroot(r);
    size_t rlen = strlen(root);
    while (rlen > 1 && root[rlen - 1] == '/') {
        rlen--;
    }
    return cgi_join(r, root, rlen, name, name_len);
}

/* A path ending in '/': the first index file a Match expression selects. */
static int cgi_map_index(struct mk_request *r, const struct cgi_site_conf *sc, const char *path,
                         size_t path_len, struct cgi_target *t)
{
    const char *index;
    for (unsigned i = 0; (index = cgi_api->index_file(r, i)) != NULL; i++) {
        char *name = cgi_join(r, path, path_len, index, strlen(index));
        if (!name) {
            return 500;
        }
        if (cgi_matches(sc, name) && cgi_is_file_beneath(r, name + 1)) {
            char *file = cgi_filename(r, name, path_len + strlen(index));
            if (!file) {
                return 500;
            }
            size_t nlen = strlen(name);
            return cgi_target_fill(r, sc, name, nlen, nlen, file, t);
        }
    }
    return MK_DECLINED;
}

/* Under the document root: the shortest prefix of whole segments Match selects. */
static int cgi_map_match(struct mk_request *r, const struct cgi_site_conf *sc, const char *path,
                         size_t path_len, struct cgi_target *t)
{
    char *copy = cgi_join(r, path, path_len, "", 0);
    if (!copy) {
        return 500;
    }
    if (path_len > 0 && path[path_len - 1] == '/') {
        return cgi_map_index(r, sc, copy, path_len, t);
    }
    for (size_t end = 1; end <= path_len; end++) {
        if (end < path_len && copy[end] != '/') {
            continue;
        }
        char saved = copy[end];
        copy[end] = '\0';
        int hit = cgi_matches(sc, copy) && cgi_is_file_beneath(r, copy + 1);
        copy[end] = saved;
        if (hit) {
            char *file = cgi_filename(r, copy, end);
            if (!file) {
                return 500;
            }
            return cgi_target_fill(r, sc, copy, end, path_len, file, t);
        }
    }
    return MK_DECLINED;
}

int cgi_map_request(struct mk_request *r, const struct cgi_site_conf *sc, const char *path,
                    size_t path_len, struct cgi_target *t)
{
    memset(t, 0, sizeof(*t));
    /* The longest ScriptAlias prefix first. */
    const struct cgi_alias *best = NULL;
    for (size_t i = 0; i < sc->n_aliases; i++) {
        size_t plen = strlen(sc->aliases[i].prefix);
        if (path_len >= plen && memcmp(path, sc->aliases[i].prefix, plen) == 0 &&
            (!best || plen > strlen(best->prefix))) {
            best = &sc->aliases[i];
        }
    }
    if (best) {
        return cgi_map_alias(r, sc, best, path, path_len, t);
    }
    if (sc->n_matches == 0) {
        return MK_DECLINED;
    }
    return cgi_map_match(r, sc, path, path_len, t);
}
