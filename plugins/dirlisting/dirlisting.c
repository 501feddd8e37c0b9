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
 * case it declines, and the static handler serves the redirect from "dir"
 * to "dir/" or the error (403, 404). A directory with an index file comes
 * here as the index file's path (the server resolves it first); the check
 * here only covers an index file created in between.
 *
 * Guarantees:
 *  - the directory is opened with dirlisting_api->open_beneath(), so the site's
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
 *    (dirlisting_api->task) and the page is handed over with dirlisting_api->set_body_owned();
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
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dirlisting.h"

const struct mk_api *dirlisting_api;

/* Process start: remember the API (the server reads and checks the keys). */
static int dirlisting_init(const struct mk_api *server_api, const char *conf_dir)
{
    (void) conf_dir;
    dirlisting_api = server_api;
    return MK_OK;
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
        dirlisting_api->set_status(r, 200);
        dirlisting_api->set_content_type(r, "text/html; charset=utf-8");
        dirlisting_api->set_body_owned(r, job->body, job->len);
        job->body = NULL;
        rc = MK_OK;
    }
    free(job->body);
    free(job);
    return rc;
}

/* ---- the content hook (worker) ----------------------------------------------- */

/*
 * Is a listing enabled for `path` (ends with '/') of r? The DirectoryListing
 * of r's request rule when it has one, else the site's Enable and Path.
 */
static bool dirlisting_enabled(const struct dirlisting_site *s, const struct mk_request *r,
                               const char *path, size_t len)
{
    int rule = MK_API_HAS(dirlisting_api, listing) ? dirlisting_api->listing(r) : -1;

    if (rule >= 0) {
        return rule == 1;
    }
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

    for (unsigned i = 0; (name = dirlisting_api->index_file(r, i)) != NULL; i++) {
        int n = snprintf(file, sizeof(file), "%.*s%s%s", (int) rlen, rel, rlen ? "/" : "", name);
        if (n < 0 || (size_t) n >= sizeof(file)) {
            continue;
        }
        int fd = dirlisting_api->open_beneath(r, file, O_RDONLY);
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
    const struct dirlisting_site *s =
        dirlisting_api->site_data(dirlisting_api->site(r), MK_PLUGIN_SELF(dirlisting));
    char rel[PATH_MAX];
    size_t mlen, len;

    if (!s) {
        return MK_DECLINED;
    }
    const char *method = dirlisting_api->method(r, &mlen);
    if (!dirlisting_method_is(method, mlen, "GET") && !dirlisting_method_is(method, mlen, "HEAD")) {
        return MK_DECLINED;
    }
    const char *path = dirlisting_api->path(r, &len);
    if (!path || len == 0 || len >= sizeof(rel) || path[len - 1] != '/' ||
        !dirlisting_enabled(s, r, path, len) ||
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
    int dfd = dirlisting_api->open_beneath(r, rel, O_RDONLY | O_DIRECTORY);
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
    if (dirlisting_api->task(r, dirlisting_work, dirlisting_done, job) != MK_SUSPENDED) {
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
