/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * gw_map.c: which script under the document root a request runs, by the
 * site's Match expressions (see mk_gw_map_match in gw.h). Only a path an
 * expression matches costs a system call, and a script found lately none;
 * files are opened beneath the document root with the site's rules, so no
 * script outside it runs. Index files are the server's business: a path
 * ending in '/' with one comes here as the index file's path.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gw.h"

/* a + b as a NUL-terminated string in r's memory. */
static char *gw_join(const struct mk_api *api, struct mk_request *r, const char *a, size_t alen,
                     const char *b, size_t blen)
{
    char *s = api->alloc(r, alen + blen + 1);
    if (s) {
        memcpy(s, a, alen);
        memcpy(s + alen, b, blen);
        s[alen + blen] = '\0';
    }
    return s;
}

/* The script is path[0..name_len), the rest PATH_INFO. */
static int gw_script(const struct mk_api *api, struct mk_request *r, const char *path,
                     size_t name_len, size_t path_len, const char *filename, struct mk_gw_script *s)
{
    memset(s, 0, sizeof(*s));
    s->name = path;
    s->name_len = name_len;
    s->path_info = path + name_len;
    s->path_info_len = path_len - name_len;
    s->filename = filename;
    s->docroot = api->docroot(r);
    return MK_OK;
}

static int gw_matches(const regex_t *re, size_t n_re, const char *s)
{
    for (size_t i = 0; i < n_re; i++) {
        if (regexec(&re[i], s, 0, NULL, 0) == 0) {
            return 1;
        }
    }
    return 0;
}

/*
 * Scripts found lately, per worker thread: a script that exists is not
 * looked for again for GW_SEEN_MS (three system calls a request saved, as
 * nginx's open_file_cache does). Only found scripts are kept, keyed by the
 * site and its document root with the path, so a new script is seen at
 * once and a removed one runs at most GW_SEEN_MS longer (the backend then
 * finds it gone itself).
 */
#define GW_SEEN_SLOTS 64
#define GW_SEEN_MS 1000
#define GW_SEEN_KEY 240

struct gw_seen {
    uint64_t hash, until_ms;
    const void *site;
    char key[GW_SEEN_KEY]; /* docroot, NUL, rel, NUL */
};

static __thread struct gw_seen gw_seen[GW_SEEN_SLOTS];

/* The key of rel under r's site into key (NUL-separated); its length, 0 when too long. */
static size_t gw_seen_key(const struct mk_api *api, struct mk_request *r, const char *rel,
                          char *key, uint64_t *hash)
{
    const char *root = api->docroot(r);
    size_t rlen = strlen(root) + 1, len = strlen(rel) + 1;
    if (rlen + len > GW_SEEN_KEY) {
        return 0;
    }
    memcpy(key, root, rlen);
    memcpy(key + rlen, rel, len);
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < rlen + len; i++) {
        h = (h ^ (unsigned char) key[i]) * 1099511628211ull;
    }
    *hash = h;
    return rlen + len;
}

/* Whether `rel` (no leading '/') is a regular file beneath the document root. */
static int gw_is_file_beneath(const struct mk_api *api, struct mk_request *r, const char *rel)
{
    struct stat st;
    char key[GW_SEEN_KEY];
    uint64_t hash = 0, now = api->now_ms();
    const void *site = api->site(r);
    size_t klen = gw_seen_key(api, r, rel, key, &hash);
    struct gw_seen *e = &gw_seen[hash % GW_SEEN_SLOTS];
    if (klen && e->hash == hash && e->site == site && e->until_ms > now &&
        memcmp(e->key, key, klen) == 0) {
        return 1;
    }
    int fd = api->open_beneath(r, rel, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        return 0;
    }
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    close(fd);
    if (ok && klen) {
        e->hash = hash;
        e->site = site;
        e->until_ms = now + GW_SEEN_MS;
        memcpy(e->key, key, klen);
    }
    return ok;
}

/* The script path `name` (NUL terminated, in r's memory) as a file name. */
static char *gw_filename(const struct mk_api *api, struct mk_request *r, const char *name,
                         size_t name_len)
{
    const char *root = api->docroot(r);
    size_t rlen = strlen(root);
    while (rlen > 1 && root[rlen - 1] == '/') {
        rlen--;
    }
    return gw_join(api, r, root, rlen, name, name_len);
}

/* Under the document root: the shortest prefix of whole segments Match selects. */
int mk_gw_map_match(const struct mk_api *api, struct mk_request *r, const regex_t *re, size_t n_re,
                    const char *path, size_t path_len, struct mk_gw_script *s)
{
    char *copy = gw_join(api, r, path, path_len, "", 0);
    if (!copy) {
        return 500;
    }
    for (size_t end = 1; end <= path_len; end++) {
        if (end < path_len && copy[end] != '/') {
            continue;
        }
        char saved = copy[end];
        copy[end] = '\0';
        int hit = gw_matches(re, n_re, copy) && gw_is_file_beneath(api, r, copy + 1);
        copy[end] = saved;
        if (hit) {
            char *file = gw_filename(api, r, copy, end);
            if (!file) {
                return 500;
            }
            return gw_script(api, r, copy, end, path_len, file, s);
        }
    }
    return MK_DECLINED;
}

int mk_gw_match_add(regex_t **matches, size_t *n, const char *value, char *reason, size_t len)
{
    regex_t re;
    int rc = regcomp(&re, value, REG_EXTENDED | REG_NOSUB);

    if (rc != 0) {
        char msg[128];
        regerror(rc, &re, msg, sizeof(msg));
        snprintf(reason, len, "bad regular expression '%s': %s", value, msg);
        return MK_ERR;
    }
    regex_t *v = realloc(*matches, (*n + 1) * sizeof(*v));
    if (!v) {
        regfree(&re);
        snprintf(reason, len, "out of memory");
        return MK_ERR;
    }
    *matches = v;
    v[(*n)++] = re;
    return MK_OK;
}
