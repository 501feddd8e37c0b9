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
 * Threads: init(), reload_prepare(), reload_commit() and site_init() run on
 * the controlling thread and are the only users of dirlisting_global and
 * dirlisting_pending. Each site's data carries a copy of the plugin-wide
 * settings taken when its configuration was built, and each job a copy of
 * everything it needs, so workers and task threads never read state that a
 * reload rewrites.
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

/* A site's [DIRLISTING] section; NULL site data means "never list". */
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
static char dirlisting_conf_path[PATH_MAX];
static struct dirlisting_settings dirlisting_global = {DIRLISTING_SORT_BYTES,
                                                       DIRLISTING_MAX_ENTRIES_DEFAULT, ""};
/* A reload's settings, from reload_prepare to reload_commit; site_init reads them meanwhile. */
static struct dirlisting_settings dirlisting_pending;
static bool dirlisting_have_pending;

static const char dirlisting_style[] = "body{font-family:system-ui,sans-serif;margin:2em}"
                                       "table{border-collapse:collapse}"
                                       "th,td{padding:.2em 1em;text-align:left}"
                                       "td.s{text-align:right}"
                                       "tr:nth-child(even){background:#f4f4f4}";

MK_PLUGIN_DECLARE(dirlisting);

/* ---- configuration ----------------------------------------------------------- */

/* Parse a boolean as the server's reader does; false when `v` is not one. */
static bool dirlisting_bool(const char *v, bool *out)
{
    static const char *const yes[] = {"on", "yes", "true", "1"};
    static const char *const no[] = {"off", "no", "false", "0"};

    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0) {
            *out = true;
            return true;
        }
        if (strcasecmp(v, no[i]) == 0) {
            *out = false;
            return true;
        }
    }
    return false;
}

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

/*
 * Apply one line of the plugin-wide file to `out`. Returns NULL, or the
 * reason the line is refused (a static string). `seen` tracks keys given.
 */
static const char *dirlisting_conf_line(const char *key, const char *value,
                                        struct dirlisting_settings *out, unsigned *seen)
{
    if (strcasecmp(key, "Sort") == 0) {
        if (*seen & 1) {
            return "Sort is given twice";
        }
        *seen |= 1;
        if (strcasecmp(value, "bytes") == 0) {
            out->sort = DIRLISTING_SORT_BYTES;
        }
        else if (strcasecmp(value, "nocase") == 0) {
            out->sort = DIRLISTING_SORT_NOCASE;
        }
        else {
            return "Sort: expected bytes or nocase";
        }
        return NULL;
    }
    if (strcasecmp(key, "MaxEntries") == 0) {
        char *end;
        if (*seen & 2) {
            return "MaxEntries is given twice";
        }
        *seen |= 2;
        errno = 0;
        unsigned long n = strtoul(value, &end, 10);
        if (value[0] < '0' || value[0] > '9' || *end || errno || n < 1 ||
            n > DIRLISTING_MAX_ENTRIES_LIMIT) {
            return "MaxEntries: expected a number from 1 to 1000000";
        }
        out->max_entries = n;
        return NULL;
    }
    if (strcasecmp(key, "Stylesheet") == 0) {
        if (*seen & 4) {
            return "Stylesheet is given twice";
        }
        *seen |= 4;
        if (!value[0] || strlen(value) >= DIRLISTING_URL_MAX ||
            dirlisting_has_control(value, true)) {
            return "Stylesheet: expected a URL (no spaces, at most 1023 bytes)";
        }
        snprintf(out->stylesheet, sizeof(out->stylesheet), "%s", value);
        return NULL;
    }
    return "unknown key";
}

/*
 * Read the plugin-wide file into *out. A missing file means the defaults.
 * On a bad line, MK_ERR with "file:line: reason" in err and *out unchanged.
 * Controlling thread only.
 */
static int dirlisting_read_conf(struct dirlisting_settings *out, char *err, size_t errlen)
{
    struct dirlisting_settings next = {DIRLISTING_SORT_BYTES, DIRLISTING_MAX_ENTRIES_DEFAULT, ""};
    const char *section, *key, *value;
    void *cursor = NULL;
    unsigned seen = 0;
    struct stat st;
    int line;

    if (!dirlisting_conf_path[0] || (stat(dirlisting_conf_path, &st) < 0 && errno == ENOENT)) {
        *out = next;
        return MK_OK;
    }
    struct mk_conf *conf = api->conf_load(dirlisting_conf_path, err, errlen);
    if (!conf) {
        return MK_ERR;
    }
    while (api->conf_next(conf, &cursor, &section, &key, &value, &line)) {
        const char *why = strcasecmp(section, "DIRLISTING") != 0
                              ? "unknown section (only [DIRLISTING])"
                              : dirlisting_conf_line(key, value, &next, &seen);
        if (why) {
            snprintf(err, errlen, "%s:%d: %s: '%s %s'", api->conf_path(conf), line, why, key,
                     value);
            api->conf_free(conf);
            return MK_ERR;
        }
    }
    api->conf_free(conf);
    *out = next;
    return MK_OK;
}

/* Process start: remember the API and read the plugin-wide file. MK_ERR stops the server. */
static int dirlisting_init(const struct mk_api *server_api, const char *conf_dir)
{
    char err[PATH_MAX + 512];

    api = server_api;
    dirlisting_conf_path[0] = '\0';
    dirlisting_have_pending = false;
    if (conf_dir &&
        (size_t) snprintf(dirlisting_conf_path, sizeof(dirlisting_conf_path),
                          "%s/plugins/dirlisting.conf", conf_dir) >= sizeof(dirlisting_conf_path)) {
        api->log(MK_PLUGIN_LOG_ERROR, "dirlisting: configuration directory path too long");
        return MK_ERR;
    }
    if (dirlisting_read_conf(&dirlisting_global, err, sizeof(err)) != MK_OK) {
        api->log(MK_PLUGIN_LOG_ERROR, "dirlisting: %s", err);
        return MK_ERR;
    }
    return MK_OK;
}

/* Reload, step one: read the plugin-wide file into the pending settings. */
static int dirlisting_reload_prepare(char *err, size_t errlen)
{
    if (dirlisting_read_conf(&dirlisting_pending, err, errlen) != MK_OK) {
        return MK_ERR;
    }
    dirlisting_have_pending = true;
    return MK_OK;
}

/* Reload, step two: the pending settings go in force, or are dropped. */
static void dirlisting_reload_commit(int commit)
{
    if (commit) {
        dirlisting_global = dirlisting_pending;
    }
    dirlisting_have_pending = false;
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

/* Add a normalised prefix to the site; false when memory is short. */
static bool dirlisting_site_add_prefix(struct dirlisting_site *s, const char *prefix)
{
    char **v = realloc(s->prefixes, (s->n_prefixes + 1) * sizeof(*v));
    if (!v) {
        return false;
    }
    s->prefixes = v;
    v[s->n_prefixes] = strdup(prefix);
    if (!v[s->n_prefixes]) {
        return false;
    }
    s->n_prefixes++;
    return true;
}

/*
 * Apply one [DIRLISTING] line of a site file. Returns NULL or the reason.
 * `seen` tracks Enable (1) and ShowHidden (2).
 */
static const char *dirlisting_site_line(struct dirlisting_site *s, const char *key,
                                        const char *value, unsigned *seen)
{
    char prefix[DIRLISTING_PREFIX_MAX];
    const char *why;

    if (strcasecmp(key, "Enable") == 0) {
        if (*seen & 1) {
            return "Enable is given twice";
        }
        *seen |= 1;
        return dirlisting_bool(value, &s->whole_site) ? NULL : "Enable: expected On or Off";
    }
    if (strcasecmp(key, "ShowHidden") == 0) {
        if (*seen & 2) {
            return "ShowHidden is given twice";
        }
        *seen |= 2;
        return dirlisting_bool(value, &s->show_hidden) ? NULL : "ShowHidden: expected On or Off";
    }
    if (strcasecmp(key, "Path") == 0) {
        if ((why = dirlisting_prefix_norm(value, prefix, sizeof(prefix)))) {
            return why;
        }
        return dirlisting_site_add_prefix(s, prefix) ? NULL : "out of memory";
    }
    return "unknown key in [DIRLISTING] (Enable, Path, ShowHidden)";
}

/*
 * Read a site's [DIRLISTING] section; the site's Symlinks setting decides
 * whether links are listed. *data is NULL when the site lists nothing.
 * MK_ERR with "file:line: reason" in err for a bad line.
 */
static int dirlisting_site_init(const struct mk_site *site, const struct mk_conf *conf, void **data,
                                char *err, size_t errlen)
{
    const char *section, *key, *value, *why;
    void *cursor = NULL;
    unsigned seen = 0;
    int line;

    *data = NULL;
    struct dirlisting_site *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "%s: out of memory", api->conf_path(conf));
        return MK_ERR;
    }
    s->settings = dirlisting_have_pending ? dirlisting_pending : dirlisting_global;
    s->symlinks = api->site_symlinks(site);
    s->hide_dotfiles = api->site_hide_dotfiles(site);
    while (api->conf_next(conf, &cursor, &section, &key, &value, &line)) {
        if (strcasecmp(section, "DIRLISTING") != 0) {
            continue;
        }
        if ((why = dirlisting_site_line(s, key, value, &seen))) {
            snprintf(err, errlen, "%s:%d: %s: '%s %s'", api->conf_path(conf), line, why, key,
                     value);
            dirlisting_site_free(s);
            return MK_ERR;
        }
    }
    if (!s->whole_site && s->n_prefixes == 0) {
        dirlisting_site_free(s);
        return MK_OK;
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

/* Back on the worker: hand the page over, or answer the task's error. */
static int dirlisting_done(struct mk_request *r, void *arg)
{
    struct dirlisting_job *job = arg;
    int rc = job->status;

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
    .abi = MK_PLUGIN_ABI,
    .name = "dirlisting",
    .version = "1.0",
    .description = "HTML listings of directories without an index file",
    .init = dirlisting_init,
    .reload_prepare = dirlisting_reload_prepare,
    .reload_commit = dirlisting_reload_commit,
    .content = dirlisting_content,
    .site_sections = (const char *const[]){"DIRLISTING", NULL},
    .site_init = dirlisting_site_init,
    .site_free = dirlisting_site_free,
};
