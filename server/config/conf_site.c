/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * conf_site.c: the site part of the configuration (see conf.h): one site
 * file per virtual host in sites/ ([HOST]: names, document root, symbolic
 * links, hidden files, fallback, then the keys a part above gives at start
 * with mk_conf_site_keys; [ERROR_PAGES]), what plugins keep for a site,
 * and the virtual host lookup by Host. [HOST] is one key table read by the
 * schema engine (core/schema.h), as [SERVER] and the plugins' sections
 * are. Every error names the site file and line.
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

void mk_conf_site_free(struct mk_site *vh)
{
    if (!vh) {
        return;
    }
    mk_schema_release(mk_conf_site_schema(), MK_CONF_SITE, vh);
    if (vh->docroot_fd >= 0) {
        close(vh->docroot_fd);
    }
    for (size_t i = 0; i < vh->n_error_pages; i++) {
        mk_free(vh->error_pages[i].path);
    }
    mk_free(vh->error_pages);
#ifdef MK_HAVE_RULES
    mk_conf_rules_free(vh->rules);
#endif
    mk_conf_free(vh->conf);
    mk_free(vh->file);
    mk_free(vh);
}

/*
 * Release what plugins keep for a site: their site_init() data first (its
 * destructor may still read the site's keys), then the site keys.
 */
void mk_conf_site_release_plugins(const struct mk_config *cfg, struct mk_site *vh)
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

/* ---- the [HOST] keys ------------------------------------------------------ */

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

/*
 * ServerName NAME...: host names in lower case, each the name of one site
 * only and given once. Other sites are those of vh->cfg loaded before.
 */
static int mk_site_set_names(void *obj, const struct mk_conf_key *k, const char *value,
                             const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct mk_site *vh = obj;
    const struct mk_config *cfg = vh->cfg;
    size_t count;
    char **names = mk_words(value, &count);

    (void) origin;
    for (size_t i = 0; i < count; i++) {
        for (char *c = names[i]; *c; c++) {
            *c = mk_tolower(*c);
        }
        if (!mk_valid_server_name(names[i])) {
            snprintf(reason, len, "%s: '%s' is not a host name", k->name, names[i]);
            mk_strv_free(names, count);
            return MK_ERR;
        }
        const char *owner = NULL;
        for (size_t s = 0; cfg && s < cfg->n_sites && !owner; s++) {
            for (size_t j = 0; j < cfg->sites[s]->n_names; j++) {
                if (strcmp(cfg->sites[s]->names[j], names[i]) == 0) {
                    owner = cfg->sites[s]->file;
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
            snprintf(reason, len, "%s '%s' is already used by %s", k->name, names[i], owner);
            mk_strv_free(names, count);
            return MK_ERR;
        }
    }
    vh->names = mk_realloc(vh->names, (vh->n_names + count) * sizeof(char *));
    memcpy(vh->names + vh->n_names, names, count * sizeof(char *));
    vh->n_names += count;
    mk_free(names);
    return MK_OK;
}

/* Fallback PATH: a normalised path, no query, at most MK_FALLBACK_MAX bytes. */
static int mk_site_check_fallback(const char *value, char *reason, size_t len)
{
    char norm[MK_FALLBACK_MAX + 2];
    size_t n = strlen(value);
    ssize_t r = n <= MK_FALLBACK_MAX && value[0] == '/' && !strchr(value, '?')
                    ? mk_path_normalize(value, n, norm)
                    : -1;

    if (r <= 0 || (size_t) r != n || memcmp(norm, value, n) != 0) {
        snprintf(reason, len, "expected a normalised path such as /index.php, got '%s'", value);
        return MK_ERR;
    }
    return MK_OK;
}

#define MK_SITE(member) MK_CONF_FIELD(struct mk_site, member)

/* The configuration's own [HOST] keys, in the order of docs/configuration.md. */
static const struct mk_conf_key mk_site_own_keys[] = {
    {"ServerName", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI | MK_SCHEMA_WHOLE_REASON, 0, 0, 0,
     0, NULL, .set = mk_site_set_names},
    {"DocumentRoot", MK_CONF_PATH, MK_CONF_SITE, MK_SITE(docroot), 0, 0, NULL},
    {"Symlinks", MK_CONF_BOOL, MK_CONF_SITE, MK_SITE(symlinks), 0, 0, "Off"},
    {"HideDotFiles", MK_CONF_BOOL, MK_CONF_SITE, MK_SITE(hide_dotfiles), 0, 0, "On"},
    {"Fallback", MK_CONF_STRING, MK_CONF_SITE, MK_SITE(fallback), 0, 0, NULL,
     .check = mk_site_check_fallback},
    {NULL},
};
enum {
    MK_SITE_DOCROOT = 1, /* the index of DocumentRoot in mk_site_own_keys */
    MK_SITE_N_OWN = sizeof(mk_site_own_keys) / sizeof(mk_site_own_keys[0]) - 1,
};

/* The [HOST] table: mk_site_own_keys, then those of mk_site_part. */
#define MK_SITE_KEYS_MAX 32
static struct mk_conf_key mk_site_table[MK_SITE_KEYS_MAX + 1];
static const struct mk_site_keys *mk_site_part;

static void mk_site_schema_free(void *obj, int site)
{
    struct mk_site *vh = obj;

    (void) site;
    mk_strv_free(vh->names, vh->n_names);
    vh->names = NULL;
    vh->n_names = 0;
    if (mk_site_part && mk_site_part->free) {
        mk_site_part->free(vh);
    }
}

static const struct mk_conf_schema mk_site_schema = {
    .section = "HOST",
    .keys = mk_site_table,
    .site_size = sizeof(struct mk_site),
    .free = mk_site_schema_free,
};

void mk_conf_site_keys(const struct mk_site_keys *keys)
{
    size_t n = 0;

    if (keys == mk_site_part && mk_site_table[0].name) {
        return;
    }
    for (const struct mk_conf_key *k = mk_site_own_keys; k->name; k++) {
        mk_site_table[n++] = *k;
    }
    for (const struct mk_conf_key *k = keys ? keys->keys : NULL; k && k->name; k++) {
        if (n == MK_SITE_KEYS_MAX) {
            fprintf(stderr, "monkey: more [HOST] keys than MK_SITE_KEYS_MAX (%d)\n",
                    MK_SITE_KEYS_MAX);
            abort();
        }
        mk_site_table[n++] = *k;
    }
    mk_site_table[n] = (struct mk_conf_key){0};
    mk_site_part = keys;
}

const struct mk_conf_schema *mk_conf_site_schema(void)
{
    if (!mk_site_table[0].name) {
        mk_conf_site_keys(NULL);
    }
    return &mk_site_schema;
}

/* ---- sites --------------------------------------------------------------- */

/* A site of site file `file` with no key read yet. */
static struct mk_site *mk_site_alloc(const char *file)
{
    struct mk_site *vh = mk_calloc(1, sizeof(*vh));
    vh->docroot_fd = -1;
    vh->file = mk_strdup(file);
    return vh;
}

struct mk_site *mk_conf_site_new(const char *file, char *err, size_t errlen)
{
    struct mk_site *vh = mk_site_alloc(file);
    struct mk_schema_input in = {.scope = MK_CONF_SITE};

    if (mk_schema_fill(mk_conf_site_schema(), &in, vh, err, errlen) != MK_OK) {
        mk_conf_site_free(vh);
        return NULL;
    }
    return vh;
}

bool mk_conf_site_set_docroot(struct mk_site *vh, const struct mk_conf *conf, int line,
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
    char *docroot = mk_strdup(resolved); /* `path` may be vh->docroot */
    mk_free(vh->docroot);
    vh->docroot = docroot;
    return true;
}

/*
 * Stat the error page `norm` (normalised, leading '/') as a request for it
 * opens it: beneath the document root, with the site's rule for symbolic
 * links (with Symlinks Off a link anywhere on the way is refused). With
 * Symlinks On the page may still not lead out of the document root. False
 * with "file:line: reason" in err.
 */
static bool mk_site_error_page_stat(const struct mk_site *vh, const char *norm, struct stat *st,
                                    const struct mk_conf *conf, const struct mk_conf_entry *e,
                                    char *err, size_t errlen)
{
    int fd = mk_conf_site_open(vh, norm + 1, O_RDONLY);

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

static bool mk_site_error_page(struct mk_site *vh, const struct mk_conf *conf,
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
    if (!mk_site_error_page_stat(vh, norm, &st, conf, e, err, errlen)) {
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
static void mk_site_no_host(const struct mk_conf *conf, char *err, size_t errlen)
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
 * Read site file `path` into a new site of cfg: its [HOST] through the
 * table, then the checks across keys, the document root and [ERROR_PAGES].
 * NULL with "file:line: reason" in err.
 */
static struct mk_site *mk_site_read(struct mk_config *cfg, const char *path, char *err,
                                    size_t errlen)
{
    const struct mk_conf_schema *schema = mk_conf_site_schema();
    struct mk_conf *conf = mk_conf_load(path, err, errlen);
    const struct mk_conf_section *host = NULL;
    int lines[MK_SITE_KEYS_MAX + 1] = {0};
    struct mk_list *it;

    if (!conf) {
        return NULL;
    }
    mk_config_file_read(cfg, path);
    mk_list_foreach (it, &conf->sections) {
        const struct mk_conf_section *s = mk_list_entry(it, struct mk_conf_section, node);
        if (strcasecmp(s->name, "HOST") == 0) {
            if (host) {
                ERR(conf, s->line, "[HOST] is given twice");
                mk_conf_free(conf);
                return NULL;
            }
            host = s;
        }
        /* Other sections belong to plugins: checked once plugins are known. */
    }
    if (!host) {
        mk_site_no_host(conf, err, errlen);
        mk_conf_free(conf);
        return NULL;
    }

    struct mk_site *vh = mk_site_alloc(path);
    struct mk_schema_input in = {
        .conf = conf,
        .confdir = cfg->confdir,
        .scope = MK_CONF_SITE,
        .only = host,
        .absent = mk_site_part ? mk_site_part->absent : NULL,
        .lines = lines,
    };
    vh->cfg = cfg; /* ServerName looks at the sites read before */
    if (mk_schema_fill(schema, &in, vh, err, errlen) != MK_OK) {
        goto fail;
    }
    if (!vh->docroot) {
        ERR(conf, host->line, "[HOST] has no DocumentRoot");
        goto fail;
    }
    if (mk_site_part && mk_site_part->finish &&
        !mk_site_part->finish(vh, conf, lines + MK_SITE_N_OWN, err, errlen)) {
        goto fail;
    }
    vh->fallback_len = vh->fallback ? strlen(vh->fallback) : 0;
    if (!mk_conf_site_set_docroot(vh, conf, lines[MK_SITE_DOCROOT], vh->docroot, err, errlen)) {
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
            if (!mk_site_error_page(vh, conf, e, err, errlen)) {
                goto fail;
            }
        }
    }
#ifdef MK_HAVE_RULES
    if (!mk_conf_rules_load(vh, conf, err, errlen)) {
        goto fail;
    }
#else
    const struct mk_conf_section *rule = mk_conf_section(conf, "RULE");
    if (rule) {
        ERR(conf, rule->line, "[RULE]: this server was built without request rules");
        goto fail;
    }
#endif
    vh->conf = conf; /* kept for the plugins' site sections */
    return vh;

fail:
    mk_conf_free(conf);
    mk_conf_site_free(vh);
    return NULL;
}

static int mk_name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *) a, *(const char *const *) b);
}

bool mk_conf_site_load(struct mk_config *cfg, char *err, size_t errlen)
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
        struct mk_site *vh = mk_site_read(cfg, path, err, errlen);
        mk_free(path);
        if (!vh) {
            ok = false;
            break;
        }
        cfg->sites = mk_realloc(cfg->sites, (cfg->n_sites + 1) * sizeof(*cfg->sites));
        cfg->sites[cfg->n_sites++] = vh;
        if (strcmp(names[i], "default") == 0) {
            cfg->default_site = vh;
        }
    }
    mk_strv_free(names, n);

    if (ok && cfg->n_sites == 0) {
        snprintf(err, errlen, "%s: no site defined", dir);
        ok = false;
    }
    if (ok && !cfg->default_site) {
        cfg->default_site = cfg->sites[0];
    }
    mk_free(dir);
    return ok;
}

/* ---- virtual hosts ------------------------------------------------------- */

struct mk_site *mk_conf_site_lookup(const struct mk_config *cfg, const char *host, size_t len)
{
    if (len == 0 || cfg->n_sites == 1) {
        return cfg->default_site;
    }
    if (host[len - 1] == '.') {
        len--; /* "example.com." is "example.com" */
    }
    for (size_t i = 0; i < cfg->n_sites; i++) {
        struct mk_site *vh = cfg->sites[i];
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
    return cfg->default_site;
}

int mk_conf_site_open(const struct mk_site *vh, const char *rel, int flags)
{
    return mk_fs_open_beneath(vh->docroot_fd, rel, flags, vh->symlinks);
}
