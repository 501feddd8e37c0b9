/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * conf_site.c: the site part of the configuration (see conf.h): one site
 * file per virtual host in sites/ ([HOST]: names, document root, symbolic
 * links, hidden files, error pages), what plugins keep for a site, and the
 * virtual host lookup by Host. Every error names the site file and line.
 */
#include "conf.h"
#include "../http/route.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <monkey/mk_common.h>
#include <monkey/mk_plugin.h>

#include "../../core/memory.h"
#include "../../core/fs.h"
#include "../../core/schema.h"
#include "../http/path.h"
#include "../process/server.h"
#include "../static/static_variant.h"

#define ERR(conf, line, ...) mk_conf_error((conf), (line), err, errlen, __VA_ARGS__)

static char **mk_words(const char *value, size_t *count)
{
    const char *cur = value, *w;
    size_t len, n = 0;
    char **v;

    while (mk_conf_word(&cur, &w, &len)) {
        n++;
    }
    v = mk_calloc(n + 1, sizeof(char *));
    cur = value;
    n = 0;
    while (mk_conf_word(&cur, &w, &len)) {
        v[n++] = mk_strndup(w, len);
    }
    *count = n;
    return v;
}

void mk_vhost_free(struct mk_vhost *vh)
{
    if (!vh) {
        return;
    }
    mk_strv_free(vh->names, vh->n_names);
    if (vh->index_files) {
        mk_strv_free(vh->index_files, vh->n_index_files);
    }
    mk_free(vh->docroot);
    mk_free(vh->fallback);
    mk_static_compress_site_free(&vh->compress);
    if (vh->docroot_fd >= 0) {
        close(vh->docroot_fd);
    }
    for (size_t i = 0; i < vh->n_error_pages; i++) {
        mk_free(vh->error_pages[i].path);
    }
    mk_free(vh->error_pages);
    mk_static_cache_free(&vh->cache_rules);
    mk_conf_free(vh->conf);
    mk_free(vh->file);
    mk_free(vh);
}

/*
 * Release what plugins keep for a site: their site_init() data first (its
 * destructor may still read the site's keys), then the site keys.
 */
void mk_vhost_release_plugins(const struct mk_config *cfg, struct mk_vhost *vh)
{
    for (size_t i = 0; i < vh->n_plugin_data; i++) {
        if (vh->plugin_free[i] && vh->plugin_data[i]) {
            vh->plugin_free[i](vh->plugin_data[i]);
        }
    }
    for (size_t i = 0; vh->plugin_conf && i < vh->n_plugin_data && i < cfg->n_plugin_conf; i++) {
        const struct mk_conf_schema *schema = cfg->conf_plugins[i]->conf_schema;
        if (schema && vh->plugin_conf[i]) {
            mk_schema_delete(schema, MK_CONF_SITE, vh->plugin_conf[i]);
        }
    }
    for (size_t i = 0; vh->plugin_sections && i < vh->n_plugin_data; i++) {
        for (struct mk_section_instances *s = vh->plugin_sections[i]; s && s->schema; s++) {
            for (size_t k = 0; k < s->n; k++) {
                mk_schema_delete(s->schema, MK_CONF_SITE, (void *) s->v[k].obj);
            }
            mk_free(s->v);
        }
        mk_free(vh->plugin_sections[i]);
    }
    mk_free(vh->plugin_sections);
    vh->plugin_sections = NULL;
    mk_free(vh->plugin_data);
    mk_free(vh->plugin_free);
    mk_free(vh->plugin_conf);
    mk_routes_free(vh->routes);
    mk_free(vh->routes);
    vh->routes = NULL;
    vh->plugin_data = NULL;
    vh->plugin_free = NULL;
    vh->plugin_conf = NULL;
    vh->n_plugin_data = 0;
}

/* ---- sites --------------------------------------------------------------- */

static bool mk_valid_server_name(const char *n)
{
    const char *p = n;
    if (p[0] == '*' && p[1] == '.') {
        p += 2;
    }
    if (*p == '\0') {
        return false;
    }
    for (; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || mk_is_digit(c) || c == '-' || c == '.' || c == '_' ||
              c == ':' || c == '[' || c == ']')) {
            return false;
        }
    }
    return true;
}

struct mk_vhost *mk_vhost_new(const char *file)
{
    struct mk_vhost *vh = mk_calloc(1, sizeof(*vh));
    vh->docroot_fd = -1;
    vh->hide_dotfiles = true;
    vh->file = mk_strdup(file);
    mk_static_compress_site_init(&vh->compress);
    return vh;
}

bool mk_vhost_set_docroot(struct mk_vhost *vh, const struct mk_conf *conf, int line,
                          const char *path, char *err, size_t errlen)
{
    char resolved[PATH_MAX];

    if (!realpath(path, resolved)) {
        return ERR(conf, line, "DocumentRoot: %s: %s", path, strerror(errno));
    }
    vh->docroot_fd = open(resolved, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (vh->docroot_fd < 0 || fstat(vh->docroot_fd, &st) < 0) {
        return ERR(conf, line, "DocumentRoot: %s: %s", resolved, strerror(errno));
    }
    vh->root_dev = st.st_dev;
    vh->root_ino = st.st_ino;
    vh->docroot = mk_strdup(resolved);
    return true;
}

/*
 * Stat the error page `norm` (normalised, leading '/') as a request for it
 * opens it: beneath the document root, with the site's rule for symbolic
 * links (with Symlinks Off a link anywhere on the way is refused). With
 * Symlinks On the page may still not lead out of the document root. False
 * with "file:line: reason" in err.
 */
static bool mk_vhost_error_page_stat(const struct mk_vhost *vh, const char *norm, struct stat *st,
                                     const struct mk_conf *conf, const struct mk_conf_entry *e,
                                     char *err, size_t errlen)
{
    int fd = mk_vhost_open(vh, norm + 1, O_RDONLY);

    if (fd < 0) {
        if (errno == ELOOP || errno == EXDEV) {
            return ERR(conf, e->line,
                       "error page '%s' is or passes through a symbolic link (Symlinks Off)",
                       e->value);
        }
        return ERR(conf, e->line, "error page '%s': %s", e->value, strerror(errno));
    }
    bool ok = fstat(fd, st) == 0;
    int saved = errno;
    close(fd);
    if (!ok) {
        return ERR(conf, e->line, "error page '%s': %s", e->value, strerror(saved));
    }
    if (!S_ISREG(st->st_mode)) {
        return ERR(conf, e->line, "error page '%s': not a regular file", e->value);
    }
    if (vh->symlinks) {
        char *full = mk_fs_path_join(vh->docroot, norm + 1), real[PATH_MAX];
        size_t n = strlen(vh->docroot);
        bool inside = realpath(full, real) &&
                      (strncmp(real, vh->docroot, n) == 0 && (real[n] == '/' || n == 1));
        mk_free(full);
        if (!inside) {
            return ERR(conf, e->line, "error page '%s' leads out of the document root", e->value);
        }
    }
    return true;
}

static bool mk_vhost_error_page(struct mk_vhost *vh, const struct mk_conf *conf,
                                const struct mk_conf_entry *e, char *err, size_t errlen)
{
    uint64_t status;
    size_t len = strlen(e->value);
    char *raw = mk_alloc(len + 2), *norm = mk_alloc(len + 2);
    struct stat st;

    if (!mk_str_to_u64(e->key, strlen(e->key), 599, &status) || status < 400) {
        mk_free(raw);
        mk_free(norm);
        return ERR(conf, e->line, "'%s' is not an error status (400 to 599)", e->key);
    }
    snprintf(raw, len + 2, "%s%s", e->value[0] == '/' ? "" : "/", e->value);
    ssize_t n = mk_path_normalize(raw, strlen(raw), norm);
    mk_free(raw);
    if (n < 0 || norm[n - 1] == '/') {
        mk_free(norm);
        return ERR(conf, e->line, "error page '%s' is not a file path inside the document root",
                   e->value);
    }
    if (!mk_vhost_error_page_stat(vh, norm, &st, conf, e, err, errlen)) {
        mk_free(norm);
        return false;
    }
    for (size_t i = 0; i < vh->n_error_pages; i++) {
        if (vh->error_pages[i].status == (int) status) {
            mk_free(norm);
            return ERR(conf, e->line, "error page for %d is given twice", (int) status);
        }
    }
    vh->error_pages =
        mk_realloc(vh->error_pages, (vh->n_error_pages + 1) * sizeof(*vh->error_pages));
    vh->error_pages[vh->n_error_pages].status = (int) status;
    vh->error_pages[vh->n_error_pages].path = norm;
    vh->n_error_pages++;
    return true;
}

/*
 * Is `a` within two edits of `b` (letters inserted, removed, changed or
 * two neighbours swapped), without regard to case? Short names only: a
 * section name that misses [HOST] by a typo ([HOSTS], [HOTS], [HSOT]).
 */
static bool mk_name_near(const char *a, const char *b)
{
    enum { MAX = 16 };
    size_t la = strlen(a), lb = strlen(b);
    unsigned d[MAX + 1][MAX + 1];

    if (la > MAX || lb > MAX || (la > lb ? la - lb : lb - la) > 2) {
        return false;
    }
    for (size_t i = 0; i <= la; i++) {
        for (size_t j = 0; j <= lb; j++) {
            if (i == 0 || j == 0) {
                d[i][j] = (unsigned) (i + j);
                continue;
            }
            unsigned cost = mk_tolower(a[i - 1]) != mk_tolower(b[j - 1]);
            unsigned v = d[i - 1][j - 1] + cost;
            v = d[i - 1][j] + 1 < v ? d[i - 1][j] + 1 : v;
            v = d[i][j - 1] + 1 < v ? d[i][j - 1] + 1 : v;
            if (i > 1 && j > 1 && mk_tolower(a[i - 1]) == mk_tolower(b[j - 2]) &&
                mk_tolower(a[i - 2]) == mk_tolower(b[j - 1]) && d[i - 2][j - 2] + 1 < v) {
                v = d[i - 2][j - 2] + 1;
            }
            d[i][j] = v;
        }
    }
    return d[la][lb] <= 2;
}

/*
 * A site file without [HOST]: "file:line: reason" at the section that was
 * probably meant to be it (a name near HOST), else at the file's first
 * section, else at line 1 of a file that has none.
 */
static void mk_vhost_no_host(const struct mk_conf *conf, char *err, size_t errlen)
{
    const struct mk_conf_section *first = NULL;
    struct mk_list *it;

    mk_list_foreach (it, &conf->sections) {
        const struct mk_conf_section *s = mk_list_entry(it, struct mk_conf_section, node);
        if (mk_name_near(s->name, "HOST") && strcasecmp(s->name, "ERROR_PAGES") != 0) {
            ERR(conf, s->line,
                "unknown section [%s]: did you mean [HOST]? (every site file needs one)", s->name);
            return;
        }
        first = first ? first : s;
    }
    if (first) {
        ERR(conf, first->line,
            "missing [HOST] section: the file has [%s] but no [HOST] with the site's DocumentRoot",
            first->name);
        return;
    }
    ERR(conf, 1,
        "missing [HOST] section: the file has no section (every site file needs [HOST] "
        "with the site's DocumentRoot)");
}

/*
 * IndexFiles of a site: plain file names, as the server's (no '/', not "."
 * or ".."), at least one. False with "file:line: reason" in err.
 */
static bool mk_vhost_index_conf(struct mk_vhost *vh, const struct mk_conf *conf,
                                const struct mk_conf_entry *e, char *err, size_t errlen)
{
    size_t n;
    char **names = mk_words(e->value, &n);

    for (size_t i = 0; i < n; i++) {
        if (strchr(names[i], '/') || strcmp(names[i], ".") == 0 || strcmp(names[i], "..") == 0) {
            ERR(conf, e->line, "IndexFiles: '%s' is not a plain file name", names[i]);
            mk_strv_free(names, n);
            return false;
        }
    }
    if (n == 0) {
        mk_strv_free(names, n);
        return ERR(conf, e->line, "IndexFiles: no file name");
    }
    vh->index_files = names;
    vh->n_index_files = n;
    return true;
}

static struct mk_vhost *mk_vhost_load(const struct mk_config *cfg, const char *path, char *err,
                                      size_t errlen)
{
    struct mk_conf *conf = mk_conf_load(path, err, errlen);
    struct mk_vhost *vh;
    struct mk_conf_section *host = NULL;
    struct mk_list *it;
    int docroot_line = 0;
    const char *docroot = NULL;

    if (!conf) {
        return NULL;
    }
    vh = mk_vhost_new(path);

    mk_list_foreach (it, &conf->sections) {
        struct mk_conf_section *s = mk_list_entry(it, struct mk_conf_section, node);
        if (strcasecmp(s->name, "HOST") == 0) {
            if (host) {
                ERR(conf, s->line, "[HOST] is given twice");
                goto fail;
            }
            host = s;
        }
        /* Other sections belong to plugins: checked once plugins are known. */
    }
    if (!host) {
        mk_vhost_no_host(conf, err, errlen);
        goto fail;
    }

    bool seen_symlinks = false, seen_hide = false, seen_precompressed = false;
    int zrc;
    char fallback[MK_FALLBACK_MAX + 2];
    mk_list_foreach (it, &host->entries) {
        struct mk_conf_entry *e = mk_list_entry(it, struct mk_conf_entry, node);
        if (strcasecmp(e->key, "ServerName") == 0) {
            size_t count;
            char **names = mk_words(e->value, &count);
            for (size_t i = 0; i < count; i++) {
                for (char *c = names[i]; *c; c++) {
                    *c = mk_tolower(*c);
                }
                if (!mk_valid_server_name(names[i])) {
                    ERR(conf, e->line, "ServerName: '%s' is not a host name", names[i]);
                    mk_strv_free(names, count);
                    goto fail;
                }
                /* A name may belong to one site only, and appear once. */
                const char *owner = NULL;
                for (size_t k = 0; k < cfg->n_vhosts && !owner; k++) {
                    for (size_t j = 0; j < cfg->vhosts[k]->n_names; j++) {
                        if (strcmp(cfg->vhosts[k]->names[j], names[i]) == 0) {
                            owner = cfg->vhosts[k]->file;
                            break;
                        }
                    }
                }
                for (size_t j = 0; j < vh->n_names + i && !owner; j++) {
                    const char *prev = j < vh->n_names ? vh->names[j] : names[j - vh->n_names];
                    if (strcmp(prev, names[i]) == 0) {
                        owner = "this site";
                    }
                }
                if (owner) {
                    ERR(conf, e->line, "ServerName '%s' is already used by %s", names[i], owner);
                    mk_strv_free(names, count);
                    goto fail;
                }
            }
            vh->names = mk_realloc(vh->names, (vh->n_names + count) * sizeof(char *));
            memcpy(vh->names + vh->n_names, names, count * sizeof(char *));
            vh->n_names += count;
            mk_free(names);
        }
        else if (strcasecmp(e->key, "DocumentRoot") == 0) {
            if (docroot) {
                ERR(conf, e->line, "'DocumentRoot' is given twice");
                goto fail;
            }
            docroot = e->value;
            docroot_line = e->line;
        }
        else if (strcasecmp(e->key, "Symlinks") == 0) {
            if (seen_symlinks) {
                ERR(conf, e->line, "'Symlinks' is given twice");
                goto fail;
            }
            seen_symlinks = true;
            if (!mk_conf_bool(conf, e, &vh->symlinks, err, errlen)) {
                goto fail;
            }
        }
        else if (strcasecmp(e->key, "HideDotFiles") == 0) {
            if (seen_hide) {
                ERR(conf, e->line, "'HideDotFiles' is given twice");
                goto fail;
            }
            seen_hide = true;
            if (!mk_conf_bool(conf, e, &vh->hide_dotfiles, err, errlen)) {
                goto fail;
            }
        }
        else if (strcasecmp(e->key, "Fallback") == 0) {
            size_t len = strlen(e->value);
            ssize_t n = len <= MK_FALLBACK_MAX && e->value[0] == '/' && !strchr(e->value, '?')
                            ? mk_path_normalize(e->value, len, fallback)
                            : -1;
            if (vh->fallback) {
                ERR(conf, e->line, "'Fallback' is given twice");
                goto fail;
            }
            if (n <= 0 || (size_t) n != len || memcmp(fallback, e->value, len) != 0) {
                ERR(conf, e->line,
                    "Fallback: expected a normalised path such as /index.php, got '%s'", e->value);
                goto fail;
            }
            vh->fallback = mk_strdup(e->value);
            vh->fallback_len = len;
        }
        else if (strcasecmp(e->key, "Precompressed") == 0) {
            if (seen_precompressed) {
                ERR(conf, e->line, "'Precompressed' is given twice");
                goto fail;
            }
            seen_precompressed = true;
            if (!mk_static_variant_conf(conf, e, &vh->precompressed, err, errlen)) {
                goto fail;
            }
        }
        else if (strcasecmp(e->key, "IndexFiles") == 0) {
            if (vh->index_files) {
                ERR(conf, e->line, "'IndexFiles' is given twice");
                goto fail;
            }
            if (!mk_vhost_index_conf(vh, conf, e, err, errlen)) {
                goto fail;
            }
        }
        else if (strcasecmp(e->key, "CacheControl") == 0) {
            if (!mk_static_cache_conf(&vh->cache_rules, conf, e, err, errlen)) {
                goto fail;
            }
        }
        else if ((zrc = mk_static_compress_key(&vh->compress, conf, e, err, errlen)) !=
                 MK_DECLINED) {
            if (zrc != MK_OK) {
                goto fail;
            }
        }
        else {
            ERR(conf, e->line, "unknown key '%s' in [HOST]", e->key);
            goto fail;
        }
    }
    if (!docroot) {
        ERR(conf, host->line, "[HOST] has no DocumentRoot");
        goto fail;
    }
    if (!mk_static_compress_site_finish(&vh->compress, conf, err, errlen)) {
        goto fail;
    }
    char *abs = mk_fs_path_join(cfg->confdir, docroot);
    bool ok = mk_vhost_set_docroot(vh, conf, docroot_line, abs, err, errlen);
    mk_free(abs);
    if (!ok) {
        goto fail;
    }

    mk_list_foreach (it, &conf->sections) {
        struct mk_conf_section *s = mk_list_entry(it, struct mk_conf_section, node);
        struct mk_list *eit;
        if (strcasecmp(s->name, "ERROR_PAGES") != 0) {
            continue;
        }
        mk_list_foreach (eit, &s->entries) {
            struct mk_conf_entry *e = mk_list_entry(eit, struct mk_conf_entry, node);
            if (!mk_vhost_error_page(vh, conf, e, err, errlen)) {
                goto fail;
            }
        }
    }
    vh->conf = conf; /* kept for the plugins' site sections */
    return vh;

fail:
    mk_conf_free(conf);
    mk_vhost_free(vh);
    return NULL;
}

static int mk_name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *) a, *(const char *const *) b);
}

bool mk_load_sites(struct mk_config *cfg, char *err, size_t errlen)
{
    char *dir = mk_fs_path_join(cfg->confdir, "sites");
    DIR *d = opendir(dir);
    struct dirent *de;
    char **names = NULL;
    size_t n = 0;
    bool ok = true;

    if (!d) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        mk_free(dir);
        return false;
    }
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || de->d_name[strlen(de->d_name) - 1] == '~') {
            continue; /* hidden files and editor backups */
        }
        names = mk_realloc(names, (n + 1) * sizeof(char *));
        names[n++] = mk_strdup(de->d_name);
    }
    closedir(d);
    if (n > 1) {
        qsort(names, n, sizeof(char *), mk_name_cmp);
    }

    for (size_t i = 0; i < n && ok; i++) {
        char *path = mk_fs_path_join(dir, names[i]);
        struct stat st;
        if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
            mk_free(path);
            continue;
        }
        struct mk_vhost *vh = mk_vhost_load(cfg, path, err, errlen);
        mk_free(path);
        if (!vh) {
            ok = false;
            break;
        }
        cfg->vhosts = mk_realloc(cfg->vhosts, (cfg->n_vhosts + 1) * sizeof(*cfg->vhosts));
        cfg->vhosts[cfg->n_vhosts++] = vh;
        if (strcmp(names[i], "default") == 0) {
            cfg->default_vhost = vh;
        }
    }
    mk_strv_free(names, n);

    if (ok && cfg->n_vhosts == 0) {
        snprintf(err, errlen, "%s: no site defined", dir);
        ok = false;
    }
    if (ok && !cfg->default_vhost) {
        cfg->default_vhost = cfg->vhosts[0];
    }
    mk_free(dir);
    return ok;
}

/* ---- virtual hosts ------------------------------------------------------- */

struct mk_vhost *mk_vhost_lookup(const struct mk_config *cfg, const char *host, size_t len)
{
    if (len == 0 || cfg->n_vhosts == 1) {
        return cfg->default_vhost;
    }
    if (host[len - 1] == '.') {
        len--; /* "example.com." is "example.com" */
    }
    for (size_t i = 0; i < cfg->n_vhosts; i++) {
        struct mk_vhost *vh = cfg->vhosts[i];
        for (size_t j = 0; j < vh->n_names; j++) {
            const char *n = vh->names[j];
            if (n[0] == '*' && n[1] == '.') {
                size_t sl = strlen(n + 1); /* ".example.com" */
                if (len > sl && mk_str_ieq(host + len - sl, sl, n + 1)) {
                    return vh;
                }
            }
            else if (mk_str_ieq(host, len, n)) {
                return vh;
            }
        }
    }
    return cfg->default_vhost;
}

int mk_vhost_open(const struct mk_vhost *vh, const char *rel, int flags)
{
    return mk_fs_open_beneath(vh->docroot_fd, rel, flags, vh->symlinks);
}
