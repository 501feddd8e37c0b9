/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * dirlisting.c: an HTML listing of a directory that has no index file (the
 * original Monkey's "Dirlisting" plugin).
 *
 * Listings are off unless a site's [DIRLISTING] section enables them, for
 * the whole site (Enable On) or below given paths (Path /prefix). For GET or
 * HEAD of an enabled path that ends with '/', names a directory and has none
 * of the IndexFiles, the plugin answers 200 with a listing. In every other
 * case it declines, and the static handler serves the index file, the
 * redirect from "dir" to "dir/" or the error (403, 404).
 *
 * Guarantees:
 *  - the directory is opened with api->open_beneath(), so the site's
 *    containment and symbolic-link rules apply to it exactly as to files;
 *  - only what the static handler would serve is listed: directories and
 *    regular files. Symbolic links are listed only when the site follows
 *    them ([HOST] Symlinks On), described by their target, and omitted when
 *    dangling; with Symlinks Off they would answer 403 and are omitted.
 *    Hidden names (leading '.') are listed only with ShowHidden On; without
 *    it a path with a hidden component is not listed at all. When the site
 *    hides them ([HOST] HideDotFiles On, the default) the server answers 404
 *    for them, so even with ShowHidden On the only hidden name listed is
 *    ".well-known" in the root, the one it serves. Names holding a
 *    backslash are omitted (the server refuses such paths with 400). An entry
 *    that vanishes between readdir and stat is skipped;
 *  - names are HTML-escaped in text (& < > " ', control bytes and invalid
 *    UTF-8 shown as U+FFFD) and percent-encoded in links (every byte except
 *    A-Z a-z 0-9 - . _ ~; a '/' is added only after a directory's name), so
 *    a name cannot inject markup or change where its link points;
 *  - the worker only tries the index names and opens the directory; reading
 *    it, the stat calls, sorting and the HTML are done on a task thread
 *    (api->task) and the page is handed over with api->set_body_owned();
 *  - at most MaxEntries entries are listed, so memory is bounded; past that
 *    the listing stops reading and the page says it was truncated.
 *
 * Order: directories first, then files; within each group by name, in byte
 * order (Sort bytes, the default) or ASCII case-insensitively with byte order
 * between names that differ only in case (Sort nocase).
 *
 * Configuration: the keys are declared (dirlisting_keys); the server reads
 * dirlisting.conf and the sites' [DIRLISTING] sections into every
 * configuration it builds, checks them with file and line, and frees them
 * with it. site_init() (controlling thread) copies the plugin-wide values
 * into the site's data and each job carries a copy of everything it needs,
 * so workers and task threads never read state that a reload rewrites.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <monkey/mk_json.h>
#include <monkey/mk_plugin.h>

#define DIRLISTING_URL_MAX 1024              /* longest Stylesheet URL */
#define DIRLISTING_PREFIX_MAX 1024           /* longest Path prefix */
#define DIRLISTING_MAX_ENTRIES_LIMIT 1000000 /* highest MaxEntries accepted */
#define DIRLISTING_MAX_ENTRIES_DEFAULT 100000

enum dirlisting_sort {
    DIRLISTING_SORT_BYTES = 0, /* strcmp order of the raw bytes */
    DIRLISTING_SORT_NOCASE,    /* ASCII letters folded, then byte order */
};

/* Plugin-wide settings, from conf_dir/plugins/dirlisting.conf. */
struct dirlisting_settings {
    enum dirlisting_sort sort;
    unsigned long max_entries;
    char stylesheet[DIRLISTING_URL_MAX]; /* "": the built-in style */
};

/* The keys of a site's [DIRLISTING] section, as the server filled them. */
struct dirlisting_site_conf {
    bool whole_site;  /* Enable */
    bool show_hidden; /* ShowHidden */
    size_t n_prefixes;
    char **prefixes; /* Path values, normalised */
};

/* What site_init() stores for a site that lists; NULL site data means "never list". */
struct dirlisting_site {
    struct dirlisting_settings settings; /* plugin-wide values of this configuration */
    bool whole_site;                     /* Enable On */
    bool show_hidden;                    /* ShowHidden On */
    bool symlinks;                       /* the site's [HOST] Symlinks */
    bool hide_dotfiles;                  /* the site's [HOST] HideDotFiles */
    size_t n_prefixes;
    char **prefixes; /* Path values, without a trailing '/' ("" for "/") */
};

/* One listing, from the content hook to the task thread and back. */
struct dirlisting_job {
    int dirfd; /* the directory, until the task thread owns it */
    bool root; /* the site's root: no parent link */
    bool show_hidden;
    bool hide_dotfiles;
    bool symlinks;
    struct dirlisting_settings settings;
    int status;  /* 200, or the error status of the task */
    char *body;  /* the page (malloc), handed to the server on success */
    size_t len;  /* its length */
    char path[]; /* the request path, NUL-terminated */
};

/* One listed entry; `name` points into the list's name buffer once read. */
struct dirlisting_entry {
    size_t name_off;
    const char *name;
    bool dir;
    uint64_t size;
    time_t mtime;
};

/* The entries of a directory and the bytes of their names. */
struct dirlisting_list {
    struct dirlisting_entry *v;
    size_t n, cap;
    char *names;
    size_t names_len, names_cap;
    size_t n_dirs;
    bool truncated; /* more than max_entries: the rest were not read */
};

/* A growing output buffer; `failed` latches the first allocation failure. */
struct dirlisting_buf {
    char *p;
    size_t len, cap;
    bool failed;
};

static const struct mk_api *api;

static const char dirlisting_style[] = "body{font-family:system-ui,sans-serif;margin:2em}"
                                       "table{border-collapse:collapse}"
                                       "th,td{padding:.2em 1em;text-align:left}"
                                       "td.s{text-align:right}"
                                       "tr:nth-child(even){background:#f4f4f4}";

MK_PLUGIN_DECLARE(dirlisting);

/* ---- configuration ----------------------------------------------------------- */

/* Does `s` hold a byte below 0x20, DEL, or (with no_space) a space? */
static bool dirlisting_has_control(const char *s, bool no_space)
{
    for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f || (no_space && *p == ' ')) {
            return true;
        }
    }
    return false;
}

/* Stylesheet URL: no spaces or control bytes, at most DIRLISTING_URL_MAX - 1 bytes. */
static int dirlisting_set_stylesheet(void *obj, const struct mk_conf_key *k, const char *value,
                                     const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct dirlisting_settings *out = obj;

    (void) k;
    (void) origin;
    if (!value[0] || strlen(value) >= DIRLISTING_URL_MAX || dirlisting_has_control(value, true)) {
        snprintf(reason, len, "expected a URL (no spaces, at most %d bytes), got '%s'",
                 DIRLISTING_URL_MAX - 1, value);
        return MK_ERR;
    }
    snprintf(out->stylesheet, sizeof(out->stylesheet), "%s", value);
    return MK_OK;
}

/* Process start: remember the API (the server reads and checks the keys). */
static int dirlisting_init(const struct mk_api *server_api, const char *conf_dir)
{
    (void) conf_dir;
    api = server_api;
    return MK_OK;
}

/* Release what dirlisting_site_init() stored (NULL is allowed). */
static void dirlisting_site_free(void *data)
{
    struct dirlisting_site *s = data;

    if (!s) {
        return;
    }
    for (size_t i = 0; i < s->n_prefixes; i++) {
        free(s->prefixes[i]);
    }
    free(s->prefixes);
    free(s);
}

/*
 * Normalise a Path value into `out`: repeated slashes collapsed, no trailing
 * slash ("" for "/"). Returns NULL or the reason it is refused.
 */
static const char *dirlisting_prefix_norm(const char *value, char *out, size_t outlen)
{
    size_t w = 0;

    if (value[0] != '/') {
        return "Path must start with '/'";
    }
    if (strlen(value) >= outlen || dirlisting_has_control(value, false)) {
        return "Path is too long or holds control characters";
    }
    for (const char *p = value; *p;) {
        while (*p == '/') {
            p++;
        }
        const char *seg = p;
        while (*p && *p != '/') {
            p++;
        }
        size_t n = (size_t) (p - seg);
        if (n == 0) {
            break;
        }
        if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.')) {
            return "Path may not hold '.' or '..' segments";
        }
        out[w++] = '/';
        memcpy(out + w, seg, n);
        w += n;
    }
    out[w] = '\0';
    return NULL;
}

/* Path PREFIX (repeatable): one more normalised prefix of the site. */
static int dirlisting_set_path(void *obj, const struct mk_conf_key *k, const char *value,
                               const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct dirlisting_site_conf *sc = obj;
    char prefix[DIRLISTING_PREFIX_MAX];
    const char *why;

    (void) k;
    (void) origin;
    if ((why = dirlisting_prefix_norm(value, prefix, sizeof(prefix)))) {
        snprintf(reason, len, "%s: '%s'", why, value);
        return MK_ERR;
    }
    char **v = realloc(sc->prefixes, (sc->n_prefixes + 1) * sizeof(*v));
    if (!v) {
        snprintf(reason, len, "out of memory");
        return MK_ERR;
    }
    sc->prefixes = v;
    if (!(v[sc->n_prefixes] = strdup(prefix))) {
        snprintf(reason, len, "out of memory");
        return MK_ERR;
    }
    sc->n_prefixes++;
    return MK_OK;
}

/* Release the prefixes dirlisting_set_path() stored. */
static void dirlisting_schema_free(void *obj, int site)
{
    struct dirlisting_site_conf *sc = obj;

    if (!site) {
        return;
    }
    for (size_t i = 0; i < sc->n_prefixes; i++) {
        free(sc->prefixes[i]);
    }
    free(sc->prefixes);
}

static const char *const dirlisting_sort_words[] = {"bytes", "nocase", NULL};

#define DIRLISTING_G(m) MK_CONF_FIELD(struct dirlisting_settings, m)
#define DIRLISTING_S(m) MK_CONF_FIELD(struct dirlisting_site_conf, m)

/* dirlisting.conf (plugin-wide) and the [DIRLISTING] section of site files. */
static const struct mk_conf_key dirlisting_keys[] = {
    {"Sort", MK_CONF_ENUM, 0, DIRLISTING_G(sort), 0, 0, "bytes", dirlisting_sort_words},
    {"MaxEntries", MK_CONF_INT, 0, DIRLISTING_G(max_entries), 1, DIRLISTING_MAX_ENTRIES_LIMIT,
     "100000"},
    {"Stylesheet", MK_CONF_CUSTOM, 0, 0, 0, 0, 0, NULL, .set = dirlisting_set_stylesheet},
    {"Enable", MK_CONF_BOOL, MK_CONF_SITE, DIRLISTING_S(whole_site), 0, 0, "Off"},
    {"ShowHidden", MK_CONF_BOOL, MK_CONF_SITE, DIRLISTING_S(show_hidden), 0, 0, "Off"},
    {"Path", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI, 0, 0, 0, 0, NULL,
     .set = dirlisting_set_path},
    {NULL},
};

static const struct mk_conf_schema dirlisting_schema = {
    .section = "DIRLISTING",
    .file = "dirlisting.conf",
    .keys = dirlisting_keys,
    .size = sizeof(struct dirlisting_settings),
    .site_size = sizeof(struct dirlisting_site_conf),
    .free = dirlisting_schema_free,
};

/*
 * Build a site's data from its [DIRLISTING] keys (the server checked them);
 * the site's Symlinks setting decides whether links are listed. *data is
 * NULL when the site lists nothing.
 */
static int dirlisting_site_init(const struct mk_site *site, const struct mk_conf *conf, void **data,
                                char *err, size_t errlen)
{
    const struct dirlisting_site_conf *sc = api->site_conf(site, MK_PLUGIN_SELF(dirlisting));

    (void) conf;
    *data = NULL;
    if (!sc->whole_site && sc->n_prefixes == 0) {
        return MK_OK;
    }
    struct dirlisting_site *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "%s: out of memory", api->site_file(site));
        return MK_ERR;
    }
    s->settings =
        *(const struct dirlisting_settings *) api->plugin_conf(site, MK_PLUGIN_SELF(dirlisting));
    s->symlinks = api->site_symlinks(site);
    s->hide_dotfiles = api->site_hide_dotfiles(site);
    s->whole_site = sc->whole_site;
    s->show_hidden = sc->show_hidden;
    for (size_t i = 0; i < sc->n_prefixes; i++) {
        char **v = realloc(s->prefixes, (s->n_prefixes + 1) * sizeof(*v));
        if (v) {
            s->prefixes = v;
            v[s->n_prefixes] = strdup(sc->prefixes[i]);
        }
        if (!v || !v[s->n_prefixes]) {
            snprintf(err, errlen, "%s: out of memory", api->site_file(site));
            dirlisting_site_free(s);
            return MK_ERR;
        }
        s->n_prefixes++;
    }
    *data = s;
    return MK_OK;
}

/* ---- output ----------------------------------------------------------------- */

/* Make room for `n` more bytes; false (and `failed` latched) when memory is short. */
static bool dirlisting_buf_reserve(struct dirlisting_buf *b, size_t n)
{
    if (b->failed) {
        return false;
    }
    if (b->cap - b->len >= n) {
        return true;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < n) {
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

/* Append `n` bytes; nothing once the buffer has failed. */
static void dirlisting_buf_put(struct dirlisting_buf *b, const char *s, size_t n)
{
    if (dirlisting_buf_reserve(b, n)) {
        memcpy(b->p + b->len, s, n);
        b->len += n;
    }
}

/* Append a NUL-terminated string. */
static void dirlisting_buf_puts(struct dirlisting_buf *b, const char *s)
{
    dirlisting_buf_put(b, s, strlen(s));
}

/*
 * Append `n` bytes of `s` as HTML text or attribute value: & < > " ' as
 * character references, control bytes and invalid UTF-8 as U+FFFD.
 */
static void dirlisting_buf_html(struct dirlisting_buf *b, const char *s, size_t n)
{
    static const char replacement[] = "\xef\xbf\xbd";
    const unsigned char *p = (const unsigned char *) s;
    size_t i = 0;

    while (i < n) {
        size_t run = i;
        while (run < n && p[run] >= 0x20 && p[run] < 0x7f && p[run] != '&' && p[run] != '<' &&
               p[run] != '>' && p[run] != '"' && p[run] != '\'') {
            run++;
        }
        dirlisting_buf_put(b, s + i, run - i);
        if (run == n) {
            return;
        }
        i = run;
        size_t len = 0;
        switch (p[i]) {
        case '&':
            dirlisting_buf_puts(b, "&amp;");
            break;
        case '<':
            dirlisting_buf_puts(b, "&lt;");
            break;
        case '>':
            dirlisting_buf_puts(b, "&gt;");
            break;
        case '"':
            dirlisting_buf_puts(b, "&quot;");
            break;
        case '\'':
            dirlisting_buf_puts(b, "&#39;");
            break;
        default:
            len = p[i] >= 0x80 ? mk_utf8_len(p + i, n - i) : 0;
            if (len) {
                dirlisting_buf_put(b, s + i, len);
                i += len;
                continue;
            }
            dirlisting_buf_put(b, replacement, 3);
        }
        i++;
    }
}

/* Append `s` percent-encoded: every byte except A-Z a-z 0-9 - . _ ~ as %XX. */
static void dirlisting_buf_url(struct dirlisting_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);

    if (!dirlisting_buf_reserve(b, 3 * n)) {
        return;
    }
    char *w = b->p + b->len;
    for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
        unsigned char c = *p;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            *w++ = (char) c;
            continue;
        }
        *w++ = '%';
        *w++ = hex[c >> 4];
        *w++ = hex[c & 15];
    }
    b->len = (size_t) (w - b->p);
}

/* A size for people: "512 B", "1.5 KiB", "3.0 MiB" (binary units, one decimal). */
static void dirlisting_human_size(uint64_t size, char *out, size_t outlen)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double) size;
    int u = -1;

    if (size < 1024) {
        snprintf(out, outlen, "%u B", (unsigned) size);
        return;
    }
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    snprintf(out, outlen, "%.1f %s", v, units[u]);
}

/* Append the modification time cell: <time datetime="…Z">YYYY-MM-DD HH:MM:SS</time>, UTC. */
static void dirlisting_buf_time(struct dirlisting_buf *b, time_t t)
{
    char text[96];
    struct tm tm;

    if (!gmtime_r(&t, &tm)) {
        return;
    }
    int n =
        snprintf(text, sizeof(text),
                 "<time datetime=\"%04d-%02d-%02dT%02d:%02d:%02dZ\">"
                 "%04d-%02d-%02d %02d:%02d:%02d</time>",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    if (n > 0 && (size_t) n < sizeof(text)) {
        dirlisting_buf_put(b, text, (size_t) n);
    }
}

/* ---- reading and sorting (task thread) --------------------------------------- */

/*
 * Describe entry `name` of directory `dfd` in *e (name not set). False when
 * it is not listed: vanished, a link the site does not follow or a dangling
 * one, or neither a directory nor a regular file.
 */
static bool dirlisting_stat(int dfd, const char *name, bool symlinks, struct dirlisting_entry *e)
{
    struct stat st;

    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        return false;
    }
    if (S_ISLNK(st.st_mode) && (!symlinks || fstatat(dfd, name, &st, 0) < 0)) {
        return false;
    }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
        return false;
    }
    e->dir = S_ISDIR(st.st_mode);
    e->size = e->dir ? 0 : (uint64_t) st.st_size;
    e->mtime = st.st_mtime;
    return true;
}

/* Append an entry and its name to the list; false when memory is short. */
static bool dirlisting_list_add(struct dirlisting_list *l, const struct dirlisting_entry *e,
                                const char *name)
{
    size_t n = strlen(name) + 1;

    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        struct dirlisting_entry *v = realloc(l->v, cap * sizeof(*v));
        if (!v) {
            return false;
        }
        l->v = v;
        l->cap = cap;
    }
    if (l->names_cap - l->names_len < n) {
        size_t cap = l->names_cap ? l->names_cap * 2 : 8192;
        while (cap - l->names_len < n) {
            cap *= 2;
        }
        char *p = realloc(l->names, cap);
        if (!p) {
            return false;
        }
        l->names = p;
        l->names_cap = cap;
    }
    memcpy(l->names + l->names_len, name, n);
    l->v[l->n] = *e;
    l->v[l->n].name_off = l->names_len;
    l->names_len += n;
    l->n_dirs += e->dir;
    l->n++;
    return true;
}

/* Is the hidden name `name` (it starts with '.') listed? Never "." or "..". */
static bool dirlisting_show_hidden(const struct dirlisting_job *job, const char *name)
{
    if (!job->show_hidden || name[1] == '\0' || (name[1] == '.' && name[2] == '\0')) {
        return false;
    }
    /* The server answers 404 for every other hidden name of such a site. */
    return !job->hide_dotfiles || (job->root && strcmp(name, ".well-known") == 0);
}

/*
 * Read the job's directory (the descriptor is consumed) into `l`. Returns
 * 200, or 500 (unreadable) or 503 (memory short).
 */
static int dirlisting_read_dir(struct dirlisting_job *job, struct dirlisting_list *l)
{
    DIR *d = fdopendir(job->dirfd);
    struct dirent *de;

    if (!d) {
        close(job->dirfd);
        job->dirfd = -1;
        return 500;
    }
    job->dirfd = -1;
    int dfd = dirfd(d);
    for (errno = 0; (de = readdir(d)) != NULL; errno = 0) {
        const char *name = de->d_name;
        struct dirlisting_entry e;
        if (name[0] == '.' && !dirlisting_show_hidden(job, name)) {
            continue;
        }
        if (strchr(name, '\\') || !dirlisting_stat(dfd, name, job->symlinks, &e)) {
            continue;
        }
        if (l->n >= job->settings.max_entries) {
            l->truncated = true;
            break;
        }
        if (!dirlisting_list_add(l, &e, name)) {
            closedir(d);
            return 503;
        }
    }
    int saved = errno;
    closedir(d);
    if (saved && !l->truncated) {
        return 500;
    }
    for (size_t i = 0; i < l->n; i++) {
        l->v[i].name = l->names + l->v[i].name_off;
    }
    return 200;
}

/* qsort order for Sort bytes: directories first, then strcmp (unsigned bytes). */
static int dirlisting_cmp_bytes(const void *pa, const void *pb)
{
    const struct dirlisting_entry *a = pa, *b = pb;

    if (a->dir != b->dir) {
        return a->dir ? -1 : 1;
    }
    return strcmp(a->name, b->name);
}

/* qsort order for Sort nocase: directories first, then A-Z folded to a-z, then bytes. */
static int dirlisting_cmp_nocase(const void *pa, const void *pb)
{
    const struct dirlisting_entry *a = pa, *b = pb;

    if (a->dir != b->dir) {
        return a->dir ? -1 : 1;
    }
    for (const unsigned char *x = (const unsigned char *) a->name,
                             *y = (const unsigned char *) b->name;
         ; x++, y++) {
        int cx = (*x >= 'A' && *x <= 'Z') ? *x + 32 : *x;
        int cy = (*y >= 'A' && *y <= 'Z') ? *y + 32 : *y;
        if (cx != cy) {
            return cx - cy;
        }
        if (!*x) {
            break;
        }
    }
    return strcmp(a->name, b->name);
}

/* ---- the page (task thread) ------------------------------------------------- */

/* Append the document head, the table head and the parent row (except at the root). */
static void dirlisting_render_head(struct dirlisting_buf *b, const struct dirlisting_job *job)
{
    size_t plen = strlen(job->path);

    dirlisting_buf_puts(b,
                        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                        "<title>Index of ");
    dirlisting_buf_html(b, job->path, plen);
    dirlisting_buf_puts(b, "</title>\n");
    if (job->settings.stylesheet[0]) {
        dirlisting_buf_puts(b, "<link rel=\"stylesheet\" href=\"");
        dirlisting_buf_html(b, job->settings.stylesheet, strlen(job->settings.stylesheet));
        dirlisting_buf_puts(b, "\">\n");
    }
    else {
        dirlisting_buf_puts(b, "<style>");
        dirlisting_buf_puts(b, dirlisting_style);
        dirlisting_buf_puts(b, "</style>\n");
    }
    dirlisting_buf_puts(b, "</head>\n<body>\n<h1>Index of ");
    dirlisting_buf_html(b, job->path, plen);
    dirlisting_buf_puts(b, "</h1>\n<table>\n<thead><tr><th>Name</th><th>Size</th>"
                           "<th>Modified (UTC)</th></tr></thead>\n<tbody>\n");
    if (!job->root) {
        dirlisting_buf_puts(b, "<tr class=\"parent\"><td class=\"n\"><a href=\"../\">../</a></td>"
                               "<td class=\"s\">-</td><td class=\"m\"></td></tr>\n");
    }
}

/* One line per entry: <tr class="d|f"><td class="n"><a href=…>…</a></td>… */
static void dirlisting_render_entry(struct dirlisting_buf *b, const struct dirlisting_entry *e)
{
    char human[32], exact[48];

    dirlisting_buf_puts(b, e->dir ? "<tr class=\"d\"><td class=\"n\"><a href=\""
                                  : "<tr class=\"f\"><td class=\"n\"><a href=\"");
    dirlisting_buf_url(b, e->name);
    dirlisting_buf_puts(b, e->dir ? "/\">" : "\">");
    dirlisting_buf_html(b, e->name, strlen(e->name));
    dirlisting_buf_puts(b, e->dir ? "/</a></td>" : "</a></td>");
    if (e->dir) {
        dirlisting_buf_puts(b, "<td class=\"s\">-</td>");
    }
    else {
        dirlisting_human_size(e->size, human, sizeof(human));
        snprintf(exact, sizeof(exact), "%llu bytes", (unsigned long long) e->size);
        dirlisting_buf_puts(b, "<td class=\"s\" title=\"");
        dirlisting_buf_puts(b, exact);
        dirlisting_buf_puts(b, "\">");
        dirlisting_buf_puts(b, human);
        dirlisting_buf_puts(b, "</td>");
    }
    dirlisting_buf_puts(b, "<td class=\"m\">");
    dirlisting_buf_time(b, e->mtime);
    dirlisting_buf_puts(b, "</td></tr>\n");
}

/* Append the whole page for the sorted list `l`; failures latch in b->failed. */
static void dirlisting_render(struct dirlisting_buf *b, const struct dirlisting_job *job,
                              const struct dirlisting_list *l)
{
    char note[160];

    dirlisting_render_head(b, job);
    for (size_t i = 0; i < l->n; i++) {
        dirlisting_render_entry(b, &l->v[i]);
    }
    dirlisting_buf_puts(b, "</tbody>\n</table>\n");
    snprintf(note, sizeof(note), "<p class=\"count\">%zu directories, %zu files</p>\n", l->n_dirs,
             l->n - l->n_dirs);
    dirlisting_buf_puts(b, note);
    if (l->truncated) {
        snprintf(note, sizeof(note),
                 "<p class=\"truncated\">Truncated: this directory has more than %lu entries; "
                 "only %lu are listed.</p>\n",
                 job->settings.max_entries, job->settings.max_entries);
        dirlisting_buf_puts(b, note);
    }
    dirlisting_buf_puts(b, "</body>\n</html>\n");
}

/* The task: read, sort and render. Sets job->status, and job->body on 200. */
static void dirlisting_work(void *arg)
{
    struct dirlisting_job *job = arg;
    struct dirlisting_list l = {0};
    struct dirlisting_buf b = {0};

    job->status = dirlisting_read_dir(job, &l);
    if (job->status == 200) {
        if (l.n > 1) {
            qsort(l.v, l.n, sizeof(*l.v),
                  job->settings.sort == DIRLISTING_SORT_NOCASE ? dirlisting_cmp_nocase
                                                               : dirlisting_cmp_bytes);
        }
        dirlisting_buf_reserve(&b, 2048 + l.n * 320);
        dirlisting_render(&b, job, &l);
        if (b.failed) {
            free(b.p);
            job->status = 503;
        }
        else {
            job->body = b.p;
            job->len = b.len;
        }
    }
    free(l.v);
    free(l.names);
}

/*
 * Back on the worker: hand the page over, or answer the task's error. With
 * r NULL the task may not have run (the request was given up before it
 * started): the directory is then still the job's to close.
 */
static int dirlisting_done(struct mk_request *r, void *arg)
{
    struct dirlisting_job *job = arg;
    int rc = job->status;

    if (job->dirfd >= 0) {
        close(job->dirfd);
    }

    if (r && rc == 200) {
        api->set_status(r, 200);
        api->set_content_type(r, "text/html; charset=utf-8");
        api->set_body_owned(r, job->body, job->len);
        job->body = NULL;
        rc = MK_OK;
    }
    free(job->body);
    free(job);
    return rc;
}

/* ---- the content hook (worker) ----------------------------------------------- */

/* Is a listing enabled for `path` (ends with '/') on this site? */
static bool dirlisting_enabled(const struct dirlisting_site *s, const char *path, size_t len)
{
    if (s->whole_site) {
        return true;
    }
    for (size_t i = 0; i < s->n_prefixes; i++) {
        size_t n = strlen(s->prefixes[i]);
        if (n < len && memcmp(path, s->prefixes[i], n) == 0 && path[n] == '/') {
            return true;
        }
    }
    return false;
}

/* Does the normalised path have a component starting with '.'? */
static bool dirlisting_hidden_path(const char *path, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (path[i] == '/' && path[i + 1] == '.') {
            return true;
        }
    }
    return false;
}

/*
 * Does directory `rel` ("" for the root) hold one of the IndexFiles as a
 * regular file, opened under the site's rules as the static handler does?
 */
static bool dirlisting_has_index(struct mk_request *r, const char *rel, size_t rlen)
{
    char file[PATH_MAX];
    const char *name;
    struct stat st;

    for (unsigned i = 0; (name = api->index_file(r, i)) != NULL; i++) {
        int n = snprintf(file, sizeof(file), "%.*s%s%s", (int) rlen, rel, rlen ? "/" : "", name);
        if (n < 0 || (size_t) n >= sizeof(file)) {
            continue;
        }
        int fd = api->open_beneath(r, file, O_RDONLY);
        if (fd < 0) {
            continue;
        }
        bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
        close(fd);
        if (regular) {
            return true;
        }
    }
    return false;
}

/* Is the request method (`len` bytes at `m`) exactly `want`? */
static bool dirlisting_method_is(const char *m, size_t len, const char *want)
{
    return len == strlen(want) && memcmp(m, want, len) == 0;
}

/*
 * The content hook, on a worker: MK_DECLINED unless this request gets a
 * listing; then MK_SUSPENDED with the listing built on a task thread, or 503
 * when no task could be started.
 */
static int dirlisting_content(struct mk_request *r)
{
    const struct dirlisting_site *s = api->site_data(api->site(r), MK_PLUGIN_SELF(dirlisting));
    char rel[PATH_MAX];
    size_t mlen, len;

    if (!s) {
        return MK_DECLINED;
    }
    const char *method = api->method(r, &mlen);
    if (!dirlisting_method_is(method, mlen, "GET") && !dirlisting_method_is(method, mlen, "HEAD")) {
        return MK_DECLINED;
    }
    const char *path = api->path(r, &len);
    if (!path || len == 0 || len >= sizeof(rel) || path[len - 1] != '/' ||
        !dirlisting_enabled(s, path, len) ||
        (!s->show_hidden && dirlisting_hidden_path(path, len))) {
        return MK_DECLINED;
    }
    /* "/a/b/" -> "a/b"; "/" -> "" (the document root). */
    size_t rlen = len > 1 ? len - 2 : 0;
    memcpy(rel, path + 1, rlen);
    rel[rlen] = '\0';
    if (dirlisting_has_index(r, rel, rlen)) {
        return MK_DECLINED;
    }
    int dfd = api->open_beneath(r, rel, O_RDONLY | O_DIRECTORY);
    if (dfd < 0) {
        return MK_DECLINED; /* the static handler answers 403, 404 or 503 */
    }
    struct dirlisting_job *job = calloc(1, sizeof(*job) + len + 1);
    if (!job) {
        close(dfd);
        return 503;
    }
    job->dirfd = dfd;
    job->root = len == 1;
    job->show_hidden = s->show_hidden;
    job->hide_dotfiles = s->hide_dotfiles;
    job->symlinks = s->symlinks;
    job->settings = s->settings;
    memcpy(job->path, path, len);
    job->path[len] = '\0';
    if (api->task(r, dirlisting_work, dirlisting_done, job) != MK_SUSPENDED) {
        close(dfd);
        free(job);
        return 503;
    }
    return MK_SUSPENDED;
}

MK_PLUGIN_DEFINE(dirlisting) = {
    MK_PLUGIN_ABI_INIT,
    .name = "dirlisting",
    .version = "1.0",
    .description = "HTML listings of directories without an index file",
    .init = dirlisting_init,
    .content = dirlisting_content,
    .site_init = dirlisting_site_init,
    .site_free = dirlisting_site_free,
    .conf_schema = &dirlisting_schema,
};
