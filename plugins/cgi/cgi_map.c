/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * cgi_map.c: which script a request runs. A ScriptAlias maps a URL prefix
 * to a directory: the first path segments naming a file there are the
 * script, the rest is PATH_INFO. Match expressions select files under the
 * document root (the gateway core's mk_gw_map_match: index files, PATH_INFO).
 */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgi.h"

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
                           size_t name_len, size_t path_len, char *filename, struct cgi_target *t)
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

/* Under the document root: the gateway core finds the script Match selects. */
static int cgi_map_match(struct mk_request *r, const struct cgi_site_conf *sc, const char *path,
                         size_t path_len, struct cgi_target *t)
{
    int rc = mk_gw_map_match(cgi_api, r, sc->matches, sc->n_matches, path, path_len, &t->gw);
    if (rc != MK_OK) {
        return rc;
    }
    return cgi_target_fill(r, sc, t->gw.name, t->gw.name_len, t->gw.name_len + t->gw.path_info_len,
                           (char *) t->gw.filename, t);
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
