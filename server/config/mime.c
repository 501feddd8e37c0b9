/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * mime.c: see mime.h. Lookups are a binary search over lower-case
 * extensions; the extension of the request is lowered into a small stack
 * buffer, so no allocation happens per request.
 */
#include "mime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../core/memory.h"

#define MK_MIME_EXT_MAX 16

static const char *const mk_mime_builtin_list[][2] = {
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"json", "application/json"},
    {"txt", "text/plain; charset=utf-8"},
    {"xml", "application/xml"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"avif", "image/avif"},
    {"ico", "image/vnd.microsoft.icon"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"ttf", "font/ttf"},
    {"otf", "font/otf"},
    {"wasm", "application/wasm"},
    {"pdf", "application/pdf"},
    {"zip", "application/zip"},
    {"gz", "application/gzip"},
    {"tar", "application/x-tar"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"mp3", "audio/mpeg"},
    {"ogg", "audio/ogg"},
    {"wav", "audio/wav"},
    {"csv", "text/csv; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},
    {"map", "application/json"},
    {"webmanifest", "application/manifest+json"},
};

/* By extension, then by line: of two entries for one extension the first line sorts first. */
static int mk_mime_cmp(const void *a, const void *b)
{
    const struct mk_mime_entry *x = a, *y = b;
    int c = strcmp(x->ext, y->ext);
    return c ? c : (x->line > y->line) - (x->line < y->line);
}

static struct mk_mime_table *mk_mime_new(const char *default_type, size_t capacity)
{
    struct mk_mime_table *t = mk_calloc(1, sizeof(*t));
    t->entries = mk_calloc(capacity ? capacity : 1, sizeof(*t->entries));
    t->default_type_buf = mk_strdup(default_type);
    t->default_type = mk_str_make(t->default_type_buf, strlen(t->default_type_buf));
    return t;
}

static void mk_mime_add(struct mk_mime_table *t, const char *ext, const char *type, int line)
{
    struct mk_mime_entry *e = &t->entries[t->count++];
    e->line = line;
    e->ext = mk_strdup(ext);
    for (char *p = e->ext; *p; p++) {
        *p = mk_tolower(*p);
    }
    e->type = mk_strdup(type);
    e->type_len = strlen(type);
}

struct mk_mime_table *mk_mime_builtin(const char *default_type)
{
    size_t n = sizeof(mk_mime_builtin_list) / sizeof(mk_mime_builtin_list[0]);
    struct mk_mime_table *t = mk_mime_new(default_type, n);

    for (size_t i = 0; i < n; i++) {
        mk_mime_add(t, mk_mime_builtin_list[i][0], mk_mime_builtin_list[i][1], 0);
    }
    qsort(t->entries, t->count, sizeof(*t->entries), mk_mime_cmp);
    return t;
}

struct mk_mime_table *mk_mime_from_conf(const struct mk_conf *conf, const char *default_type,
                                        char *err, size_t errlen)
{
    struct mk_list *it;
    size_t n = 0;

    mk_list_foreach (it, &conf->sections) {
        struct mk_conf_section *s = mk_list_entry(it, struct mk_conf_section, node);
        if (strcasecmp(s->name, "MIMETYPES") != 0) {
            mk_conf_error(conf, s->line, err, errlen, "unknown section [%s] (expected [MIMETYPES])",
                          s->name);
            return NULL;
        }
        struct mk_list *e;
        mk_list_foreach (e, &s->entries) {
            n++;
        }
    }

    struct mk_mime_table *t = mk_mime_new(default_type, n);
    mk_list_foreach (it, &conf->sections) {
        struct mk_conf_section *s = mk_list_entry(it, struct mk_conf_section, node);
        struct mk_list *eit;
        mk_list_foreach (eit, &s->entries) {
            struct mk_conf_entry *e = mk_list_entry(eit, struct mk_conf_entry, node);
            if (strlen(e->key) > MK_MIME_EXT_MAX || strchr(e->key, '/') || strchr(e->key, '.')) {
                mk_conf_error(conf, e->line, err, errlen, "'%s' is not a file extension", e->key);
                mk_mime_free(t);
                return NULL;
            }
            if (!strchr(e->value, '/') || strpbrk(e->value, "\r\n")) {
                mk_conf_error(conf, e->line, err, errlen, "'%s' is not a media type", e->value);
                mk_mime_free(t);
                return NULL;
            }
            mk_mime_add(t, e->key, e->value, e->line);
        }
    }
    qsort(t->entries, t->count, sizeof(*t->entries), mk_mime_cmp);
    /* Report the first line of the file that repeats an extension. */
    const struct mk_mime_entry *dup = NULL, *first = NULL;
    for (size_t i = 1; i < t->count; i++) {
        if (strcmp(t->entries[i - 1].ext, t->entries[i].ext) == 0 &&
            (!dup || t->entries[i].line < dup->line)) {
            dup = &t->entries[i];
            first = &t->entries[i - 1];
        }
    }
    if (dup) {
        int first_line;
        const char *first_file = mk_conf_where(conf, first->line, &first_line);
        bool same = first_file == mk_conf_where(conf, dup->line, NULL);
        mk_conf_error(conf, dup->line, err, errlen,
                      "extension '%s' is listed twice (first at %s%s%d)", dup->ext,
                      same ? "line " : first_file, same ? "" : ":", first_line);
        mk_mime_free(t);
        return NULL;
    }
    return t;
}

void mk_mime_free(struct mk_mime_table *t)
{
    if (!t) {
        return;
    }
    for (size_t i = 0; i < t->count; i++) {
        mk_free(t->entries[i].ext);
        mk_free(t->entries[i].type);
    }
    mk_free(t->entries);
    mk_free(t->default_type_buf);
    mk_free(t);
}

struct mk_str mk_mime_lookup(const struct mk_mime_table *t, const char *path, size_t len)
{
    char ext[MK_MIME_EXT_MAX + 1];
    size_t i = len, n;

    while (i > 0 && path[i - 1] != '.' && path[i - 1] != '/') {
        i--;
    }
    if (i == 0 || path[i - 1] != '.') {
        return t->default_type;
    }
    n = len - i;
    if (n == 0 || n > MK_MIME_EXT_MAX) {
        return t->default_type;
    }
    for (size_t k = 0; k < n; k++) {
        ext[k] = mk_tolower(path[i + k]);
    }
    ext[n] = '\0';

    size_t lo = 0, hi = t->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(t->entries[mid].ext, ext);
        if (c == 0) {
            return mk_str_make(t->entries[mid].type, t->entries[mid].type_len);
        }
        if (c < 0) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    return t->default_type;
}
