/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * auth.c: HTTP Basic authentication (RFC 7617) per path and realm.
 *
 * A site file protects paths with [AUTH] sections (Location, Realm, Users).
 * The request hook finds the longest Location that is a segment-boundary
 * prefix of the request's decoded path; a request there must carry
 * "Authorization: Basic" credentials of a user of that section's password
 * file (plugins/auth/auth_users.c), or it is answered 401 with
 * `WWW-Authenticate: Basic realm="...", charset="UTF-8"`.
 *
 * Guarantees:
 *   - the worker never hashes: libcrypt verification (bcrypt costs tens to
 *     hundreds of milliseconds) runs on a task thread through api->task();
 *   - the computed hash is compared with the stored one in constant time;
 *   - an unknown user costs the same as a known one: the password is hashed
 *     against a dummy setting of the kind and cost most users of the file
 *     have, and the answer is 401 whatever the result;
 *   - malformed credentials (another scheme, bad base64, no colon, NUL or
 *     control bytes, two Authorization headers) get 401, never more work;
 *   - password files are read when a configuration is built (start and
 *     reload); a file that cannot be read or holds a bad line refuses the
 *     configuration with the file and the line;
 *   - a bounded cache per password file remembers credentials verified in
 *     the last CacheTTL seconds as HMAC-SHA-256 digests under a random key
 *     of that file's table (never the password); a reload builds new tables,
 *     so it empties every cache. CacheSize 0 turns it off.
 *
 * A request let through is noted as authenticated (api->note_set):
 * MK_NOTE_REMOTE_USER is the user, MK_NOTE_AUTH_TYPE "Basic". The cgi and
 * fastcgi plugins pass them on as REMOTE_USER and AUTH_TYPE, the logger
 * prints the user with %u.
 *
 * Threads: init, site_init and site_free on
 * the controlling thread; the request hook and the continuation on workers;
 * auth_verify on task threads, touching only its job (the request, and with
 * it the site's data, may be gone when the work ends).
 */
#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <monkey/mk_plugin.h>
#include <monkey/mk_util.h>

#include "auth_digest.h"
#include "auth_users.h"

#define AUTH_CRED_MAX 1024        /* decoded "user:password", bytes */
#define AUTH_FILE_MAX (16u << 20) /* password file size limit */
#define AUTH_REALM_MAX 255
#define AUTH_CACHE_SIZE_MAX 65536
#define AUTH_CACHE_TTL_MAX 86400

/* The server's function table: the same for every server of the process. */
static const struct mk_api *api;

/* The plugin's state in one server (api->self_set): two servers keep apart. */
struct auth_self {
    char conf_dir[PATH_MAX]; /* "" when serving built-in defaults */
};

/* Plugin-wide settings (auth.conf), as the server filled them for one configuration. */
struct auth_settings {
    unsigned cache_size;
    unsigned cache_ttl;
};

static const struct mk_conf_key auth_keys[] = {
    {"CacheSize", MK_CONF_INT, 0, MK_CONF_FIELD(struct auth_settings, cache_size), 0,
     AUTH_CACHE_SIZE_MAX, "128"},
    {"CacheTTL", MK_CONF_INT, 0, MK_CONF_FIELD(struct auth_settings, cache_ttl), 1,
     AUTH_CACHE_TTL_MAX, "300"},
    {NULL},
};

/* The [AUTH] sections of site files are read by auth_site_init(), one rule each. */
static const struct mk_conf_schema auth_schema = {
    .section = "AUTH",
    .file = "auth.conf",
    .keys = auth_keys,
    .size = sizeof(struct auth_settings),
};

MK_PLUGIN_DECLARE(auth);

struct auth_cache_entry {
    uint8_t digest[MK_AUTH_SHA256_LEN];
    time_t expires; /* 0: empty */
};

/* One Users file as read for one configuration. */
struct auth_table {
    struct mk_auth_users users;
    char dummy[CRYPT_GENSALT_OUTPUT_SIZE]; /* setting hashed for unknown users */
    uint8_t key[MK_AUTH_SHA256_LEN];       /* HMAC key of the cache entries */
    pthread_mutex_t lock;                  /* guards the cache */
    struct auth_cache_entry *cache;
    unsigned cache_size, cache_next, cache_ttl;
};

/* One [AUTH] section. */
struct auth_rule {
    char *location; /* normalised, no trailing '/' except for "/" itself */
    size_t location_len;
    char *challenge; /* the WWW-Authenticate value */
    struct auth_table *table;
    int line; /* of the Location entry */
};

struct auth_site {
    struct auth_rule *rules; /* longest Location first */
    size_t n;
};

/* A verification handed to a task thread; owned by the job until freed. */
struct auth_job {
    const struct auth_rule *rule;    /* used only when the request still exists */
    char setting[CRYPT_OUTPUT_SIZE]; /* the stored hash, or the dummy setting */
    char password[AUTH_CRED_MAX + 1];
    char user[MK_AUTH_USER_MAX + 1];
    uint8_t digest[MK_AUTH_SHA256_LEN];
    int known; /* the user is in the file */
    int ok;    /* set by auth_verify */
};

/* ---- start ------------------------------------------------------------------ */

/*
 * Server start: remember the API, and the server's configuration folder
 * (for relative Users paths) in the plugin's context for that server.
 */
static int auth_init(const struct mk_api *server_api, const char *conf_dir)
{
    api = server_api;
    if (!MK_API_HAS(api, self_set)) {
        api->log(MK_PLUGIN_LOG_ERROR, "auth: needs a server with plugin ABI 3.2");
        return MK_ERR;
    }
    struct auth_self *self = calloc(1, sizeof(*self));
    if (!self) {
        api->log(MK_PLUGIN_LOG_ERROR, "auth: out of memory");
        return MK_ERR;
    }
    if (conf_dir) {
        int n = snprintf(self->conf_dir, sizeof(self->conf_dir), "%s", conf_dir);
        if (n < 0 || (size_t) n >= sizeof(self->conf_dir)) {
            api->log(MK_PLUGIN_LOG_ERROR, "auth: configuration directory name too long");
            free(self);
            return MK_ERR;
        }
    }
    if (api->self_set(MK_PLUGIN_SELF(auth), self) != MK_OK) {
        free(self);
        return MK_ERR;
    }
    return MK_OK;
}

/* Server stop: release the context init() made. */
static void auth_exit(void)
{
    free(api->self(MK_PLUGIN_SELF(auth)));
}

/* ---- password files -------------------------------------------------------- */

static void auth_table_free(struct auth_table *t)
{
    if (!t) {
        return;
    }
    mk_auth_users_free(&t->users);
    if (t->cache) {
        mk_auth_wipe(t->cache, sizeof(*t->cache) * t->cache_size);
        free(t->cache);
    }
    mk_auth_wipe(t->key, sizeof(t->key));
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* Read the whole file at `path` (at most AUTH_FILE_MAX bytes) into a new buffer. */
static char *auth_read_file(const char *path, size_t *len, char *err, size_t errlen)
{
    struct stat st;
    char *buf;
    size_t got = 0;

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t) st.st_size > AUTH_FILE_MAX) {
        snprintf(err, errlen, "not a regular file of at most 16 MiB");
        close(fd);
        return NULL;
    }
    buf = malloc((size_t) st.st_size + 1);
    if (!buf) {
        snprintf(err, errlen, "out of memory");
        close(fd);
        return NULL;
    }
    while (got < (size_t) st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t) st.st_size - got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            snprintf(err, errlen, "cannot read: %s", n < 0 ? strerror(errno) : "file shrank");
            close(fd);
            free(buf);
            return NULL;
        }
        got += (size_t) n;
    }
    close(fd);
    *len = got;
    return buf;
}

/*
 * Load the password file `path` named by the Users entry at `where` (the
 * "site:line" text). Returns a new table, or NULL with "file:line: reason"
 * in err.
 */
static struct auth_table *auth_table_load(const struct auth_settings *settings, const char *path,
                                          const char *where, char *err, size_t errlen)
{
    char why[256];
    size_t len = 0;
    int line = 0;
    unsigned long cost;

    char *buf = auth_read_file(path, &len, why, sizeof(why));
    if (!buf) {
        snprintf(err, errlen, "%s: Users %s: %s", where, path, why);
        return NULL;
    }
    struct auth_table *t = calloc(1, sizeof(*t));
    if (!t) {
        free(buf);
        snprintf(err, errlen, "%s: out of memory", where);
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    int rc = mk_auth_users_parse(buf, len, &t->users, &line, why, sizeof(why));
    mk_auth_wipe(buf, len);
    free(buf);
    if (rc != 0) {
        snprintf(err, errlen, "%s:%d: %s (password file of Users at %s)", path, line, why, where);
        auth_table_free(t);
        return NULL;
    }
    enum mk_auth_hash_kind kind = mk_auth_users_typical(&t->users, &cost);
    const char *prefix = kind == MK_AUTH_HASH_SHA512 ? "$6$" : "$2b$";
    if (!crypt_gensalt_rn(prefix, cost, NULL, 0, t->dummy, sizeof(t->dummy)) ||
        getrandom(t->key, sizeof(t->key), 0) != (ssize_t) sizeof(t->key)) {
        snprintf(err, errlen, "%s: Users %s: cannot get random bytes: %s", where, path,
                 strerror(errno));
        auth_table_free(t);
        return NULL;
    }
    t->cache_size = settings->cache_size;
    t->cache_ttl = settings->cache_ttl;
    if (t->cache_size) {
        t->cache = calloc(t->cache_size, sizeof(*t->cache));
        if (!t->cache) {
            snprintf(err, errlen, "%s: out of memory", where);
            auth_table_free(t);
            return NULL;
        }
    }
    return t;
}

/* ---- the credential cache ------------------------------------------------- */

/* Was `digest` verified less than CacheTTL seconds ago? Any worker. */
static int auth_cache_lookup(struct auth_table *t, const uint8_t *digest)
{
    time_t now = api->now();
    int hit = 0;

    if (!t->cache_size) {
        return 0;
    }
    pthread_mutex_lock(&t->lock);
    for (unsigned i = 0; i < t->cache_size; i++) {
        const struct auth_cache_entry *e = &t->cache[i];
        hit |= mk_auth_equal(e->digest, digest, MK_AUTH_SHA256_LEN) & (e->expires > now);
    }
    pthread_mutex_unlock(&t->lock);
    return hit;
}

/* Remember a verified digest: refresh its entry, or take an expired or the oldest slot. */
static void auth_cache_store(struct auth_table *t, const uint8_t *digest)
{
    time_t now = api->now();
    unsigned slot = t->cache_size;

    if (!t->cache_size) {
        return;
    }
    pthread_mutex_lock(&t->lock);
    for (unsigned i = 0; i < t->cache_size && slot == t->cache_size; i++) {
        if (mk_auth_equal(t->cache[i].digest, digest, MK_AUTH_SHA256_LEN)) {
            slot = i;
        }
    }
    for (unsigned i = 0; i < t->cache_size && slot == t->cache_size; i++) {
        if (t->cache[i].expires <= now) {
            slot = i;
        }
    }
    if (slot == t->cache_size) {
        slot = t->cache_next;
        t->cache_next = (t->cache_next + 1) % t->cache_size;
    }
    memcpy(t->cache[slot].digest, digest, MK_AUTH_SHA256_LEN);
    t->cache[slot].expires = now + (time_t) t->cache_ttl;
    pthread_mutex_unlock(&t->lock);
}

/* ---- site sections: [AUTH] Location, Realm, Users ------------------------ */

static void auth_site_free(void *data)
{
    struct auth_site *site = data;

    if (!site) {
        return;
    }
    for (size_t i = 0; i < site->n; i++) {
        free(site->rules[i].location);
        free(site->rules[i].challenge);
        auth_table_free(site->rules[i].table);
    }
    free(site->rules);
    free(site);
}

/*
 * Check a Location value and store it without its trailing '/'. NULL with
 * the reason in *why when it is not an absolute, normalised path.
 */
static char *auth_location(const char *value, const char **why)
{
    size_t n = strlen(value);

    if (value[0] != '/') {
        *why = "must start with '/'";
        return NULL;
    }
    for (const char *p = value; *p; p++) {
        if ((unsigned char) *p < 0x20 || *p == 0x7f || *p == '\\') {
            *why = "must not contain control characters or '\\'";
            return NULL;
        }
        if (p[0] == '/' && p > value && p[-1] == '/') {
            *why = "must not contain '//'";
            return NULL;
        }
        if (p[0] == '/' && p[1] == '.' &&
            (p[2] == '/' || !p[2] || (p[2] == '.' && (p[3] == '/' || !p[3])))) {
            *why = "must not contain '.' or '..' segments";
            return NULL;
        }
    }
    while (n > 1 && value[n - 1] == '/') {
        n--;
    }
    char *loc = strndup(value, n);
    if (!loc) {
        *why = "out of memory";
    }
    return loc;
}

/* Build `Basic realm="...", charset="UTF-8"` with '"' and '\' escaped. */
static char *auth_challenge_value(const char *realm, const char **why)
{
    size_t n = strlen(realm);
    const char *prefix = "Basic realm=\"", *suffix = "\", charset=\"UTF-8\"";

    if (n == 0 || n > AUTH_REALM_MAX) {
        *why = "must have 1 to 255 bytes";
        return NULL;
    }
    for (const char *p = realm; *p; p++) {
        if ((unsigned char) *p < 0x20 || *p == 0x7f) {
            *why = "must not contain control characters";
            return NULL;
        }
    }
    char *out = malloc(strlen(prefix) + 2 * n + strlen(suffix) + 1), *w = out;
    if (!out) {
        *why = "out of memory";
        return NULL;
    }
    w = stpcpy(w, prefix);
    for (const char *p = realm; *p; p++) {
        if (*p == '"' || *p == '\\') {
            *w++ = '\\';
        }
        *w++ = *p;
    }
    stpcpy(w, suffix);
    return out;
}

/* A section being read: its entries and where they are. */
struct auth_section {
    int header_line; /* the line of its [AUTH] header: 0 before the first one */
    const char *location, *realm, *users;
    int first_line, location_line, realm_line, users_line;
};

/* Turn a complete section into a rule appended to `site`. */
static int auth_section_finish(const struct auth_settings *settings, struct auth_site *site,
                               const struct auth_section *sec, const struct mk_conf *conf,
                               char *err, size_t errlen)
{
    const char *why = NULL;
    char where[MK_CONF_AT_LEN], at[MK_CONF_AT_LEN], path[PATH_MAX];

    if (!sec->location || !sec->realm || !sec->users) {
        snprintf(err, errlen, "%s: [AUTH] needs Location, Realm and Users (%s is missing)",
                 mk_api_conf_at(api, conf, sec->first_line, at, sizeof(at)),
                 !sec->location ? "Location"
                 : !sec->realm  ? "Realm"
                                : "Users");
        return MK_ERR;
    }
    struct auth_rule *rules = realloc(site->rules, (site->n + 1) * sizeof(*rules));
    if (!rules) {
        snprintf(err, errlen, "%s: out of memory",
                 mk_api_conf_at(api, conf, sec->first_line, at, sizeof(at)));
        return MK_ERR;
    }
    site->rules = rules;
    struct auth_rule *rule = &rules[site->n];
    memset(rule, 0, sizeof(*rule));
    site->n++;
    rule->line = sec->location_line;
    rule->location = auth_location(sec->location, &why);
    if (!rule->location) {
        snprintf(err, errlen, "%s: Location %s: %s",
                 mk_api_conf_at(api, conf, sec->location_line, at, sizeof(at)), sec->location, why);
        return MK_ERR;
    }
    rule->location_len = strlen(rule->location);
    for (size_t i = 0; i + 1 < site->n; i++) {
        if (strcmp(site->rules[i].location, rule->location) == 0) {
            char first[MK_CONF_AT_LEN];
            mk_api_conf_at(api, conf, site->rules[i].line, first, sizeof(first));
            mk_api_conf_at(api, conf, sec->location_line, at, sizeof(at));
            /* "line N" when both are in one file, else "file:N" */
            const char *colon = strrchr(first, ':');
            size_t flen = (size_t) (colon - first);
            bool same = strncmp(at, first, flen) == 0 && at[flen] == ':';
            snprintf(err, errlen, "%s: Location %s is already protected at %s%s", at, sec->location,
                     same ? "line " : "", same ? colon + 1 : first);
            return MK_ERR;
        }
    }
    rule->challenge = auth_challenge_value(sec->realm, &why);
    if (!rule->challenge) {
        snprintf(err, errlen, "%s: Realm: %s",
                 mk_api_conf_at(api, conf, sec->realm_line, at, sizeof(at)), why);
        return MK_ERR;
    }
    mk_api_conf_at(api, conf, sec->users_line, where, sizeof(where));
    const char *conf_dir = ((const struct auth_self *) api->self(MK_PLUGIN_SELF(auth)))->conf_dir;
    if (sec->users[0] != '/' && !conf_dir[0]) {
        snprintf(err, errlen, "%s: Users %s: a relative path needs a configuration directory",
                 where, sec->users);
        return MK_ERR;
    }
    int n = sec->users[0] == '/' ? snprintf(path, sizeof(path), "%s", sec->users)
                                 : snprintf(path, sizeof(path), "%s/%s", conf_dir, sec->users);
    if (n < 0 || (size_t) n >= sizeof(path)) {
        snprintf(err, errlen, "%s: Users: path too long", where);
        return MK_ERR;
    }
    rule->table = auth_table_load(settings, path, where, err, errlen);
    return rule->table ? MK_OK : MK_ERR;
}

/* Record one entry of an [AUTH] section. */
static int auth_section_entry(struct auth_section *sec, const char *key, const char *value,
                              int line, const struct mk_conf *conf, char *err, size_t errlen)
{
    const char **slot = NULL;
    int *where = NULL;

    if (strcasecmp(key, "Location") == 0) {
        slot = &sec->location, where = &sec->location_line;
    }
    else if (strcasecmp(key, "Realm") == 0) {
        slot = &sec->realm, where = &sec->realm_line;
    }
    else if (strcasecmp(key, "Users") == 0) {
        slot = &sec->users, where = &sec->users_line;
    }
    else {
        char at[MK_CONF_AT_LEN];
        snprintf(err, errlen, "%s: unknown key '%s' in [AUTH] (Location, Realm, Users)",
                 mk_api_conf_at(api, conf, line, at, sizeof(at)), key);
        return MK_ERR;
    }
    if (*slot) {
        char at[MK_CONF_AT_LEN];
        snprintf(err, errlen, "%s: %s given twice in one [AUTH] section",
                 mk_api_conf_at(api, conf, line, at, sizeof(at)), key);
        return MK_ERR;
    }
    *slot = value;
    if (where) {
        *where = line;
    }
    return MK_OK;
}

/* qsort order of rules: longest Location first. */
static int auth_rule_cmp(const void *a, const void *b)
{
    const struct auth_rule *x = a, *y = b;
    return (x->location_len < y->location_len) - (x->location_len > y->location_len);
}

/*
 * Read every [AUTH] section of the site file. A new header line starts a new
 * section, even when two [AUTH] sections follow each other.
 */
static int auth_site_init(const struct mk_site *s, const struct mk_conf *conf, void **data,
                          char *err, size_t errlen)
{
    const char *section, *key, *value;
    struct auth_section sec = {0};
    void *cursor = NULL;
    int line;

    /* auth.conf of the configuration being built. */
    const struct auth_settings *settings = api->plugin_conf(s, MK_PLUGIN_SELF(auth));
    *data = NULL;
    struct auth_site *site = calloc(1, sizeof(*site));
    if (!site) {
        snprintf(err, errlen, "%s: out of memory", api->conf_path(conf));
        return MK_ERR;
    }
    while (api->conf_next(conf, &cursor, &section, &key, &value, &line)) {
        if (strcasecmp(section, "AUTH") != 0) {
            continue;
        }
        int header = api->conf_section_line(cursor);
        if (header != sec.header_line) {
            if (sec.header_line &&
                auth_section_finish(settings, site, &sec, conf, err, errlen) != MK_OK) {
                auth_site_free(site);
                return MK_ERR;
            }
            sec = (struct auth_section){.header_line = header, .first_line = line};
        }
        if (auth_section_entry(&sec, key, value, line, conf, err, errlen) != MK_OK) {
            auth_site_free(site);
            return MK_ERR;
        }
    }
    if (sec.header_line && auth_section_finish(settings, site, &sec, conf, err, errlen) != MK_OK) {
        auth_site_free(site);
        return MK_ERR;
    }
    if (!site->n) {
        free(site);
        return MK_OK;
    }
    qsort(site->rules, site->n, sizeof(*site->rules), auth_rule_cmp);
    *data = site;
    return MK_OK;
}

/* ---- requests ---------------------------------------------------------------- */

/* The rule with the longest Location that is a segment-boundary prefix of the path. */
static const struct auth_rule *auth_rule_find(const struct auth_site *site, const char *path,
                                              size_t len)
{
    for (size_t i = 0; i < site->n; i++) {
        const struct auth_rule *rule = &site->rules[i];
        size_t n = rule->location_len;
        if (n == 1) {
            if (len >= 1 && path[0] == '/') {
                return rule;
            }
            continue;
        }
        if (len >= n && memcmp(path, rule->location, n) == 0 && (len == n || path[n] == '/')) {
            return rule;
        }
    }
    return NULL;
}

/*
 * Extract the Basic credentials of the request into cred (AUTH_CRED_MAX + 1
 * bytes). Returns the offset of the colon that ends the user name, or -1
 * when they are absent or malformed.
 */
static ssize_t auth_credentials(struct mk_request *r, char *cred, size_t *cred_len)
{
    unsigned count = 0, n = api->header_count(r);
    const char *name, *value = NULL;
    size_t name_len, len = 0;

    for (unsigned i = 0; i < n; i++) {
        const char *v;
        size_t vlen;
        if (api->header_at(r, i, &name, &name_len, &v, &vlen) == MK_OK && name_len == 13 &&
            strncasecmp(name, "Authorization", 13) == 0) {
            count++;
            value = v, len = vlen;
        }
    }
    if (count != 1) {
        return -1; /* none, or an ambiguous pair */
    }
    ssize_t colon = mk_basic_credentials(value, len, cred, AUTH_CRED_MAX, cred_len);
    if (colon < 0) {
        return -1;
    }
    cred[*cred_len] = '\0';
    for (size_t i = 0; i < *cred_len; i++) {
        unsigned char c = (unsigned char) cred[i];
        if (c < 0x20 || c == 0x7f) {
            return -1; /* RFC 7617: no control characters (NUL included) */
        }
    }
    return colon > MK_AUTH_USER_MAX ? -1 : colon;
}

/*
 * The request is authenticated as `user` (NUL terminated): note it for the
 * other plugins (MK_NOTE_REMOTE_USER, MK_NOTE_AUTH_TYPE: the gateways'
 * REMOTE_USER and AUTH_TYPE, the logger's %u). MK_OK, or 503 when memory
 * is short: a script behind the rule must not run without knowing who
 * asks. Nothing on a server without notes (before ABI 3.3).
 */
static int auth_note_user(struct mk_request *r, const char *user)
{
    if (!MK_API_HAS(api, note_set)) {
        return MK_OK;
    }
    if (api->note_set(r, MK_NOTE_REMOTE_USER, user) != MK_OK ||
        api->note_set(r, MK_NOTE_AUTH_TYPE, "Basic") != MK_OK) {
        return 503;
    }
    return MK_OK;
}

/* Answer 401 with the rule's challenge. */
static int auth_challenge(struct mk_request *r, const struct auth_rule *rule)
{
    return api->add_header(r, "WWW-Authenticate", rule->challenge) == MK_OK ? 401 : 503;
}

/* On a task thread: hash the password with the job's setting and compare. */
static void auth_verify(void *arg)
{
    struct auth_job *job = arg;
    struct crypt_data *data = calloc(1, sizeof(*data));

    job->ok = 0;
    if (data) {
        const char *out = crypt_rn(job->password, job->setting, data, (int) sizeof(*data));
        size_t len = strlen(job->setting);
        int same = out && strlen(out) == len && mk_auth_equal(out, job->setting, len);
        job->ok = job->known & same;
        mk_auth_wipe(data, sizeof(*data));
        free(data);
    }
    mk_auth_wipe(job->password, sizeof(job->password));
}

/* Wipe (password, digest) and release a job. */
static void auth_job_free(struct auth_job *job)
{
    mk_auth_wipe(job, sizeof(*job));
    free(job);
}

/* Back on the worker: let the request go on (the user noted), or answer 401. */
static int auth_verified(struct mk_request *r, void *arg)
{
    struct auth_job *job = arg;
    int rc = MK_OK;

    if (r) {
        if (job->ok) {
            auth_cache_store(job->rule->table, job->digest);
            rc = auth_note_user(r, job->user);
        }
        else {
            char addr[64];
            api->log(MK_PLUGIN_LOG_INFO, "auth: %s: authentication failed for user '%s' (%s)",
                     job->rule->location, job->user, api->remote_addr(r, addr, sizeof(addr)));
            rc = auth_challenge(r, job->rule);
        }
    }
    auth_job_free(job);
    return rc;
}

/*
 * The request hook, on a worker: MK_OK when the path is not protected or
 * the credentials are in the cache (the user then noted), 401 (with the
 * challenge) when they are absent or malformed, otherwise MK_SUSPENDED
 * while a task thread verifies them (503 if no task could be started).
 */
static int auth_request(struct mk_request *r)
{
    const struct auth_site *site = api->site_data(api->site(r), MK_PLUGIN_SELF(auth));
    char cred[AUTH_CRED_MAX + 1];
    size_t path_len, cred_len = 0;

    if (!site) {
        return MK_OK;
    }
    const char *path = api->path(r, &path_len);
    const struct auth_rule *rule = auth_rule_find(site, path, path_len);
    if (!rule) {
        return MK_OK;
    }
    ssize_t colon = auth_credentials(r, cred, &cred_len);
    if (colon < 0) {
        mk_auth_wipe(cred, sizeof(cred));
        return auth_challenge(r, rule);
    }
    struct auth_table *t = rule->table;
    const struct mk_auth_user *u = mk_auth_users_find(&t->users, cred, (size_t) colon);
    const char *setting = u ? u->hash : t->dummy;
    const char *pass = cred + colon + 1;
    size_t pass_len = cred_len - (size_t) colon - 1;
    const void *parts[] = {cred, "", pass, "", setting};
    const size_t lens[] = {(size_t) colon, 1, pass_len, 1, strlen(setting)};
    uint8_t digest[MK_AUTH_SHA256_LEN];

    /* Known or not, the same work: a digest, a cache lookup, a hash on a task thread. */
    mk_auth_hmac_sha256(t->key, sizeof(t->key), parts, lens, 5, digest);
    if (auth_cache_lookup(t, digest) && u) {
        cred[colon] = '\0'; /* the user name alone */
        int rc = auth_note_user(r, cred);
        mk_auth_wipe(cred, sizeof(cred));
        return rc;
    }
    struct auth_job *job = calloc(1, sizeof(*job));
    if (!job) {
        mk_auth_wipe(cred, sizeof(cred));
        return 503;
    }
    job->rule = rule;
    job->known = u != NULL;
    memcpy(job->digest, digest, sizeof(digest));
    memcpy(job->setting, setting, lens[4]);
    memcpy(job->password, pass, pass_len);
    memcpy(job->user, cred, (size_t) colon);
    mk_auth_wipe(cred, sizeof(cred));
    if (api->task(r, auth_verify, auth_verified, job) != MK_SUSPENDED) {
        auth_job_free(job);
        return 503;
    }
    return MK_SUSPENDED;
}

MK_PLUGIN_DEFINE(auth) = {
    MK_PLUGIN_ABI_INIT,
    .name = "auth",
    .version = "1.0",
    .description = "HTTP Basic authentication per path and realm",
    .init = auth_init,
    .exit = auth_exit,
    .request = auth_request,
    .site_sections = (const char *const[]){"AUTH", NULL},
    .site_init = auth_site_init,
    .site_free = auth_site_free,
    .conf_schema = &auth_schema,
};
