/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * conf.c: schema and validation of the server configuration (see conf.h).
 *
 * Every key a section accepts is listed in one table; defaults are written
 * as configuration text and go through the same readers as the files, so a
 * default can never be a value the file would reject.
 */
#include "conf.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <monkey/mk_common.h>

#include "../core/memory.h"
#include "path.h"
#include "server.h"

/* ---- keys ---------------------------------------------------------------- */

enum mk_key_id {
    K_LISTEN,
    K_WORKERS,
    K_BALANCING,
    K_TIMEOUT,
    K_BODY_MIN_RATE,
    K_SEND_TIMEOUT,
    K_KEEPALIVE,
    K_KEEPALIVE_TIMEOUT,
    K_MAX_KEEPALIVE_REQUESTS,
    K_GRACEFUL_TIMEOUT,
    K_MAX_REQUEST_LINE,
    K_MAX_REQUEST_SIZE,
    K_MAX_REQUEST_HEADERS,
    K_MAX_REQUEST_BODY,
    K_MAX_CONNECTIONS,
    K_BACKLOG,
    K_TCP_FASTOPEN,
    K_DEFER_ACCEPT,
    K_HIDE_VERSION,
    K_USER,
    K_PIDFILE,
    K_LOG,
    K_LOG_LEVEL,
    K_INDEX_FILES,
    K_DEFAULT_MIME,
    K_FILE_CACHE,
    K_TASK_QUEUE_PER_PLUGIN,
    K_TASK_QUEUE_PER_CLIENT,
    K_COUNT
};

struct mk_key {
    const char *name;
    enum mk_key_id id;
    bool multi;           /* may appear on several lines */
    const char *fallback; /* default as configuration text; NULL: none */
};

static const struct mk_key mk_server_keys[] = {
    {"Listen", K_LISTEN, true, NULL},
    {"Workers", K_WORKERS, false, "0"},
    {"Balancing", K_BALANCING, false, "reuseport"},
    {"Timeout", K_TIMEOUT, false, "15"},
    {"BodyMinRate", K_BODY_MIN_RATE, false, "500"},
    {"SendTimeout", K_SEND_TIMEOUT, false, "30"},
    {"KeepAlive", K_KEEPALIVE, false, "On"},
    {"KeepAliveTimeout", K_KEEPALIVE_TIMEOUT, false, "5"},
    {"MaxKeepAliveRequests", K_MAX_KEEPALIVE_REQUESTS, false, "1000"},
    {"GracefulTimeout", K_GRACEFUL_TIMEOUT, false, "30"},
    {"MaxRequestLine", K_MAX_REQUEST_LINE, false, "8K"},
    {"MaxRequestSize", K_MAX_REQUEST_SIZE, false, "32K"},
    {"MaxRequestHeaders", K_MAX_REQUEST_HEADERS, false, "100"},
    {"MaxRequestBody", K_MAX_REQUEST_BODY, false, "16M"},
    {"MaxConnections", K_MAX_CONNECTIONS, false, "0"},
    {"Backlog", K_BACKLOG, false, "1024"},
    {"TCPFastOpen", K_TCP_FASTOPEN, false, "Off"},
    {"DeferAccept", K_DEFER_ACCEPT, false, "On"},
    {"HideVersion", K_HIDE_VERSION, false, "Off"},
    {"User", K_USER, false, NULL},
    {"PidFile", K_PIDFILE, false, NULL},
    {"Log", K_LOG, false, NULL},
    {"LogLevel", K_LOG_LEVEL, false, "info"},
    {"IndexFiles", K_INDEX_FILES, false, "index.html index.htm"},
    {"DefaultMimeType", K_DEFAULT_MIME, false, "application/octet-stream"},
    {"FileCache", K_FILE_CACHE, false, "128"},
    {"TaskQueuePerPlugin", K_TASK_QUEUE_PER_PLUGIN, false, "64"},
    {"TaskQueuePerClient", K_TASK_QUEUE_PER_CLIENT, false, "8"},
};
#define MK_N_SERVER_KEYS (sizeof(mk_server_keys) / sizeof(mk_server_keys[0]))

static const char *const mk_host_keys[] = {"ServerName", "DocumentRoot", "Symlinks",
                                           "HideDotFiles"};

const char *mk_config_key(const char *section, size_t i)
{
    if (strcasecmp(section, "SERVER") == 0) {
        return i < MK_N_SERVER_KEYS ? mk_server_keys[i].name : NULL;
    }
    if (strcasecmp(section, "HOST") == 0) {
        return i < sizeof(mk_host_keys) / sizeof(mk_host_keys[0]) ? mk_host_keys[i] : NULL;
    }
    if (strcasecmp(section, "PLUGINS") == 0) {
        return i == 0 ? "Load" : NULL;
    }
    return NULL;
}

/* ---- helpers ------------------------------------------------------------- */

#define ERR(conf, line, ...) mk_conf_error((conf), (line), err, errlen, __VA_ARGS__)

/* `path` made absolute against `base` (a directory); caller frees. */
static char *mk_path_join(const char *base, const char *path)
{
    if (path[0] == '/' || !base) {
        return mk_strdup(path);
    }
    size_t n = strlen(base) + strlen(path) + 2;
    char *out = mk_alloc(n);
    snprintf(out, n, "%s/%s", base, path);
    return out;
}

static void mk_strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        mk_free(v[i]);
    }
    mk_free(v);
}

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

static void mk_listen_addr_free(struct mk_listen_addr *a)
{
    mk_free(a->text);
    mk_free(a->spec);
    mk_free(a->transport);
    mk_free(a->where);
}

static void mk_vhost_free(struct mk_vhost *vh)
{
    if (!vh) {
        return;
    }
    mk_strv_free(vh->names, vh->n_names);
    mk_free(vh->docroot);
    if (vh->docroot_fd >= 0) {
        close(vh->docroot_fd);
    }
    for (size_t i = 0; i < vh->n_error_pages; i++) {
        mk_free(vh->error_pages[i].path);
    }
    mk_free(vh->error_pages);
    for (size_t i = 0; i < vh->n_plugin_data; i++) {
        if (vh->plugin_free[i] && vh->plugin_data[i]) {
            vh->plugin_free[i](vh->plugin_data[i]);
        }
    }
    mk_free(vh->plugin_data);
    mk_free(vh->plugin_free);
    mk_conf_free(vh->conf);
    mk_free(vh->file);
    mk_free(vh);
}

static void mk_config_free(struct mk_config *cfg)
{
    for (size_t i = 0; i < cfg->n_listen; i++) {
        mk_listen_addr_free(&cfg->listen[i]);
    }
    mk_free(cfg->listen);
    mk_free(cfg->user);
    mk_free(cfg->pidfile);
    mk_free(cfg->log_path);
    mk_free(cfg->default_mime);
    for (size_t i = 0; i < K_COUNT; i++) {
        mk_free(cfg->key_text[i]);
        mk_free(cfg->key_where[i]);
    }
    mk_strv_free(cfg->index_files, cfg->n_index_files);
    mk_mime_free(cfg->mime);
    for (size_t i = 0; i < cfg->n_vhosts; i++) {
        mk_vhost_free(cfg->vhosts[i]);
    }
    mk_free(cfg->vhosts);
    for (size_t i = 0; i < cfg->n_plugins; i++) {
        mk_free(cfg->plugins[i].spec);
        mk_free(cfg->plugins[i].where);
    }
    mk_free(cfg->plugins);
    mk_free(cfg->confdir);
    mk_free(cfg);
}

struct mk_config *mk_config_ref(struct mk_config *cfg)
{
    atomic_fetch_add(&cfg->refs, 1);
    return cfg;
}

void mk_config_unref(struct mk_config *cfg)
{
    if (cfg && atomic_fetch_sub(&cfg->refs, 1) == 1) {
        mk_config_free(cfg);
    }
}

/* ---- [SERVER] values ----------------------------------------------------- */

static char *mk_where(const struct mk_conf *conf, int line)
{
    char buf[PATH_MAX + 32];
    snprintf(buf, sizeof(buf), "%s:%d", conf->path, line);
    return mk_strdup(buf);
}

static bool mk_parse_listen(const struct mk_conf *conf, const struct mk_conf_entry *e,
                            struct mk_listen_addr *out, char *err, size_t errlen)
{
    const char *cursor = e->value, *w, *tw;
    size_t wlen, twlen;
    char v[128];
    const char *port_str;
    char host[INET6_ADDRSTRLEN + 1];
    uint64_t port;

    memset(out, 0, sizeof(*out));
    if (!mk_conf_word(&cursor, &w, &wlen) || wlen >= sizeof(v)) {
        return ERR(conf, e->line, "Listen: bad address '%s'", e->value);
    }
    memcpy(v, w, wlen);
    v[wlen] = '\0';
    if (mk_conf_word(&cursor, &tw, &twlen)) {
        const char *extra;
        size_t extra_len;
        if (mk_conf_word(&cursor, &extra, &extra_len)) {
            return ERR(conf, e->line, "Listen: expected ADDRESS [TRANSPORT], got '%s'", e->value);
        }
    }
    else {
        tw = "plain";
        twlen = 5;
    }
    if (v[0] == '[') {
        const char *close = strchr(v, ']');
        if (!close || close[1] != ':' || (size_t) (close - v - 1) >= sizeof(host)) {
            return ERR(conf, e->line, "Listen: expected [IPv6]:PORT, got '%s'", v);
        }
        memcpy(host, v + 1, (size_t) (close - v - 1));
        host[close - v - 1] = '\0';
        port_str = close + 2;
    }
    else if (strchr(v, ':')) {
        const char *colon = strrchr(v, ':');
        if ((size_t) (colon - v) >= sizeof(host)) {
            return ERR(conf, e->line, "Listen: bad address '%s'", v);
        }
        memcpy(host, v, (size_t) (colon - v));
        host[colon - v] = '\0';
        port_str = colon + 1;
    }
    else {
        host[0] = '\0';
        port_str = v;
    }
    if (!mk_str_to_u64(port_str, strlen(port_str), 65535, &port) || port == 0) {
        return ERR(conf, e->line, "Listen: '%s' is not a port number (1 to 65535)", port_str);
    }

    struct sockaddr_in *in4 = (struct sockaddr_in *) &out->addr;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &out->addr;
    if (host[0] == '\0' || strcmp(host, "*") == 0) {
        out->any = true;
        in6->sin6_family = AF_INET6;
        in6->sin6_addr = in6addr_any;
        in6->sin6_port = htons((uint16_t) port);
        out->addrlen = sizeof(*in6);
    }
    else if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t) port);
        out->addrlen = sizeof(*in4);
    }
    else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t) port);
        out->addrlen = sizeof(*in6);
    }
    else {
        return ERR(conf, e->line, "Listen: '%s' is not a numeric IPv4 or IPv6 address", host);
    }
    out->spec = mk_strdup(v);
    out->transport = mk_strndup(tw, twlen);
    if (strcmp(out->transport, "plain") == 0) {
        out->text = mk_strdup(v);
    }
    else {
        size_t n = strlen(v) + twlen + 2;
        out->text = mk_alloc(n);
        snprintf(out->text, n, "%s %s", v, out->transport);
    }
    out->where = mk_where(conf, e->line);
    return true;
}

static bool mk_same_addr(const struct mk_listen_addr *a, const struct mk_listen_addr *b)
{
    return a->any == b->any && a->addrlen == b->addrlen &&
           memcmp(&a->addr, &b->addr, a->addrlen) == 0;
}

static bool mk_apply_server_key(struct mk_config *cfg, const struct mk_conf *conf,
                                const struct mk_key *k, const struct mk_conf_entry *e, char *err,
                                size_t errlen)
{
    long n;
    uint64_t sz, ms;
    bool b;

    switch (k->id) {
    case K_LISTEN: {
        struct mk_listen_addr a;
        if (!mk_parse_listen(conf, e, &a, err, errlen)) {
            return false;
        }
        for (size_t i = 0; i < cfg->n_listen; i++) {
            if (mk_same_addr(&cfg->listen[i], &a)) {
                mk_listen_addr_free(&a);
                return ERR(conf, e->line, "Listen: '%s' is given twice", e->value);
            }
        }
        cfg->listen = mk_realloc(cfg->listen, (cfg->n_listen + 1) * sizeof(*cfg->listen));
        cfg->listen[cfg->n_listen++] = a;
        return true;
    }
    case K_WORKERS:
        if (!mk_conf_int(conf, e, 0, 1024, &n, err, errlen)) {
            return false;
        }
        if (n == 0) {
            n = sysconf(_SC_NPROCESSORS_ONLN);
            if (n < 1) {
                n = 1;
            }
        }
        cfg->workers = (int) n;
        return true;
    case K_BALANCING:
        if (strcasecmp(e->value, "reuseport") == 0) {
            cfg->balancing = MK_BALANCE_REUSEPORT;
        }
        else if (strcasecmp(e->value, "fair") == 0) {
            cfg->balancing = MK_BALANCE_FAIR;
        }
        else {
            return ERR(conf, e->line, "Balancing: expected reuseport or fair, got '%s'", e->value);
        }
        return true;
    case K_TIMEOUT:
        if (!mk_conf_duration(conf, e, 1, 3600000u, &ms, err, errlen)) {
            return false;
        }
        cfg->timeout_ms = (uint32_t) ms;
        return true;
    case K_BODY_MIN_RATE:
        if (!mk_conf_size(conf, e, 0, 1u << 30, &sz, err, errlen)) {
            return false;
        }
        cfg->body_min_rate = sz;
        return true;
    case K_SEND_TIMEOUT:
        if (!mk_conf_duration(conf, e, 1, 3600000u, &ms, err, errlen)) {
            return false;
        }
        cfg->send_timeout_ms = (uint32_t) ms;
        return true;
    case K_KEEPALIVE:
        if (!mk_conf_bool(conf, e, &b, err, errlen)) {
            return false;
        }
        cfg->keepalive = b;
        return true;
    case K_KEEPALIVE_TIMEOUT:
        if (!mk_conf_duration(conf, e, 1, 3600000u, &ms, err, errlen)) {
            return false;
        }
        cfg->keepalive_timeout_ms = (uint32_t) ms;
        return true;
    case K_MAX_KEEPALIVE_REQUESTS:
        if (!mk_conf_int(conf, e, 0, 100000000, &n, err, errlen)) {
            return false;
        }
        cfg->max_keepalive_requests = (unsigned) n;
        return true;
    case K_GRACEFUL_TIMEOUT:
        if (!mk_conf_duration(conf, e, 0, 86400000u, &ms, err, errlen)) {
            return false;
        }
        cfg->graceful_timeout_ms = (uint32_t) ms;
        return true;
    case K_MAX_REQUEST_LINE:
        if (!mk_conf_size(conf, e, 64, 1u << 20, &sz, err, errlen)) {
            return false;
        }
        cfg->limits.max_line = (size_t) sz;
        return true;
    case K_MAX_REQUEST_SIZE:
        if (!mk_conf_size(conf, e, 256, 16u << 20, &sz, err, errlen)) {
            return false;
        }
        cfg->limits.max_head = (size_t) sz;
        return true;
    case K_MAX_REQUEST_HEADERS:
        if (!mk_conf_int(conf, e, 1, 10000, &n, err, errlen)) {
            return false;
        }
        cfg->limits.max_headers = (unsigned) n;
        return true;
    case K_MAX_REQUEST_BODY:
        if (!mk_conf_size(conf, e, 0, (uint64_t) INT64_MAX, &sz, err, errlen)) {
            return false;
        }
        cfg->max_body = sz;
        return true;
    case K_MAX_CONNECTIONS:
        if (!mk_conf_int(conf, e, 0, 10000000, &n, err, errlen)) {
            return false;
        }
        cfg->max_connections = (unsigned) n;
        return true;
    case K_BACKLOG:
        if (!mk_conf_int(conf, e, 1, 1 << 20, &n, err, errlen)) {
            return false;
        }
        cfg->backlog = (int) n;
        return true;
    case K_TCP_FASTOPEN:
        if (mk_conf_bool(conf, e, &b, NULL, 0)) {
            cfg->tcp_fastopen = b ? 256 : 0;
            return true;
        }
        if (!mk_conf_int(conf, e, 0, 1 << 20, &n, NULL, 0)) {
            return ERR(conf, e->line, "TCPFastOpen: expected On, Off or a queue length, got '%s'",
                       e->value);
        }
        cfg->tcp_fastopen = (int) n;
        return true;
    case K_DEFER_ACCEPT:
        if (!mk_conf_bool(conf, e, &b, err, errlen)) {
            return false;
        }
        cfg->defer_accept = b;
        return true;
    case K_HIDE_VERSION:
        if (!mk_conf_bool(conf, e, &b, err, errlen)) {
            return false;
        }
        cfg->hide_version = b;
        return true;
    case K_USER:
        if (!getpwnam(e->value)) {
            return ERR(conf, e->line, "User: no such user '%s'", e->value);
        }
        mk_free(cfg->user);
        cfg->user = mk_strdup(e->value);
        return true;
    case K_PIDFILE:
        mk_free(cfg->pidfile);
        cfg->pidfile = mk_path_join(cfg->confdir, e->value);
        return true;
    case K_LOG:
        mk_free(cfg->log_path);
        cfg->log_path =
            strcmp(e->value, "stderr") == 0 ? NULL : mk_path_join(cfg->confdir, e->value);
        return true;
    case K_LOG_LEVEL: {
        static const char *const levels[] = {"error", "warn", "info", "debug"};
        for (int i = 0; i < 4; i++) {
            if (strcasecmp(e->value, levels[i]) == 0) {
                cfg->log_level = i;
                return true;
            }
        }
        return ERR(conf, e->line, "LogLevel: expected error, warn, info or debug, got '%s'",
                   e->value);
    }
    case K_INDEX_FILES: {
        size_t count;
        char **v = mk_words(e->value, &count);
        for (size_t i = 0; i < count; i++) {
            if (strchr(v[i], '/') || strcmp(v[i], ".") == 0 || strcmp(v[i], "..") == 0) {
                ERR(conf, e->line, "IndexFiles: '%s' is not a plain file name", v[i]);
                mk_strv_free(v, count);
                return false;
            }
        }
        mk_strv_free(cfg->index_files, cfg->n_index_files);
        cfg->index_files = v;
        cfg->n_index_files = count;
        return true;
    }
    case K_DEFAULT_MIME:
        if (!strchr(e->value, '/')) {
            return ERR(conf, e->line, "DefaultMimeType: '%s' is not a media type", e->value);
        }
        mk_free(cfg->default_mime);
        cfg->default_mime = mk_strdup(e->value);
        return true;
    case K_FILE_CACHE:
        if (!mk_conf_int(conf, e, 0, 65536, &n, err, errlen)) {
            return false;
        }
        cfg->file_cache = (unsigned) n;
        return true;
    case K_TASK_QUEUE_PER_PLUGIN:
        if (!mk_conf_int(conf, e, 1, 65536, &n, err, errlen)) {
            return false;
        }
        cfg->task_queue_per_plugin = (unsigned) n;
        return true;
    case K_TASK_QUEUE_PER_CLIENT:
        if (!mk_conf_int(conf, e, 1, 65536, &n, err, errlen)) {
            return false;
        }
        cfg->task_queue_per_client = (unsigned) n;
        return true;
    case K_COUNT:
        break;
    }
    return false;
}

_Static_assert(K_COUNT <= sizeof(((struct mk_config *) 0)->key_text) / sizeof(char *),
               "key_text is too small");

/*
 * Remember the text of the value in force (Workers: the resolved number) and
 * where it was set ("file:line", "command line", "built-in default"; NULL
 * keeps the place already recorded).
 */
static void mk_config_record(struct mk_config *cfg, const struct mk_key *k, const char *value,
                             char *where)
{
    char buf[16];

    if (k->id == K_LISTEN) {
        mk_free(where);
        return; /* derived from cfg->listen */
    }
    if (k->id == K_WORKERS) {
        snprintf(buf, sizeof(buf), "%d", cfg->workers);
        value = buf;
    }
    mk_free(cfg->key_text[k->id]);
    cfg->key_text[k->id] = mk_strdup(value);
    if (where) {
        mk_free(cfg->key_where[k->id]);
        cfg->key_where[k->id] = where;
    }
}

static const struct mk_key *mk_find_key(const char *name)
{
    for (size_t i = 0; i < MK_N_SERVER_KEYS; i++) {
        if (strcasecmp(mk_server_keys[i].name, name) == 0) {
            return &mk_server_keys[i];
        }
    }
    return NULL;
}

/*
 * Apply the [SERVER] section `sec` (may be NULL), then the overrides, then
 * the defaults of keys nobody set.
 */
static bool mk_apply_server(struct mk_config *cfg, const struct mk_conf *conf,
                            const struct mk_conf_section *sec, const struct mk_config_override *ov,
                            size_t n_ov, char *err, size_t errlen)
{
    bool seen[K_COUNT] = {false};
    struct mk_list *it;

    if (sec) {
        mk_list_foreach (it, &sec->entries) {
            struct mk_conf_entry *e = mk_list_entry(it, struct mk_conf_entry, node);
            const struct mk_key *k = mk_find_key(e->key);
            if (!k) {
                return ERR(conf, e->line, "unknown key '%s' in [SERVER]", e->key);
            }
            if (seen[k->id] && !k->multi) {
                return ERR(conf, e->line, "'%s' is given twice", k->name);
            }
            /* A key given on the command line replaces the file's lines. */
            bool overridden = false;
            for (size_t i = 0; i < n_ov; i++) {
                if (strcasecmp(ov[i].key, k->name) == 0) {
                    overridden = true;
                }
            }
            seen[k->id] = true;
            if (overridden) {
                continue;
            }
            if (!mk_apply_server_key(cfg, conf, k, e, err, errlen)) {
                return false;
            }
            mk_config_record(cfg, k, e->value, mk_where(conf, e->line));
        }
    }

    if (n_ov) {
        struct mk_conf label = {.path = "command line"};
        for (size_t i = 0; i < n_ov; i++) {
            const struct mk_key *k = mk_find_key(ov[i].key);
            struct mk_conf_entry e = {.key = (char *) ov[i].key, .value = (char *) ov[i].value};
            if (!k) {
                return ERR(&label, 0, "unknown key '%s'", ov[i].key);
            }
            if (!mk_apply_server_key(cfg, &label, k, &e, err, errlen)) {
                return false;
            }
            mk_config_record(cfg, k, e.value, mk_strdup("command line"));
            seen[k->id] = true;
        }
    }

    struct mk_conf builtin = {.path = "built-in default"};
    for (size_t i = 0; i < MK_N_SERVER_KEYS; i++) {
        const struct mk_key *k = &mk_server_keys[i];
        if (seen[k->id] || !k->fallback) {
            continue;
        }
        struct mk_conf_entry e = {.key = (char *) k->name, .value = (char *) k->fallback};
        if (!mk_apply_server_key(cfg, &builtin, k, &e, err, errlen)) {
            return false;
        }
        mk_config_record(cfg, k, e.value, mk_strdup("built-in default"));
    }
    if (cfg->n_listen == 0) {
        struct mk_conf_entry e = {.key = "Listen", .value = "2001"};
        if (!mk_apply_server_key(cfg, &builtin, &mk_server_keys[0], &e, err, errlen)) {
            return false;
        }
    }
    if (cfg->limits.max_line > cfg->limits.max_head) {
        cfg->limits.max_line = cfg->limits.max_head;
    }
    return true;
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

static struct mk_vhost *mk_vhost_new(const char *file)
{
    struct mk_vhost *vh = mk_calloc(1, sizeof(*vh));
    vh->docroot_fd = -1;
    vh->hide_dotfiles = true;
    vh->file = mk_strdup(file);
    return vh;
}

static bool mk_vhost_set_docroot(struct mk_vhost *vh, const struct mk_conf *conf, int line,
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
    int fd = mk_static_open(vh, norm + 1, O_RDONLY);

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
        char *full = mk_path_join(vh->docroot, norm + 1), real[PATH_MAX];
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
        snprintf(err, errlen, "%s: missing [HOST] section", path);
        goto fail;
    }

    bool seen_symlinks = false, seen_hide = false;
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
        else {
            ERR(conf, e->line, "unknown key '%s' in [HOST]", e->key);
            goto fail;
        }
    }
    if (!docroot) {
        ERR(conf, host->line, "[HOST] has no DocumentRoot");
        goto fail;
    }
    char *abs = mk_path_join(cfg->confdir, docroot);
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

static bool mk_load_sites(struct mk_config *cfg, char *err, size_t errlen)
{
    char *dir = mk_path_join(cfg->confdir, "sites");
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
        char *path = mk_path_join(dir, names[i]);
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

/* ---- plugins.load -------------------------------------------------------- */

static bool mk_load_plugin_list(struct mk_config *cfg, char *err, size_t errlen)
{
    char *path = mk_path_join(cfg->confdir, "plugins.load");
    struct mk_conf *conf;
    struct mk_list *it, *eit;

    if (access(path, F_OK) != 0) {
        mk_free(path);
        return true; /* no plugins */
    }
    conf = mk_conf_load(path, err, errlen);
    mk_free(path);
    if (!conf) {
        return false;
    }
    mk_list_foreach (it, &conf->sections) {
        struct mk_conf_section *s = mk_list_entry(it, struct mk_conf_section, node);
        if (strcasecmp(s->name, "PLUGINS") != 0) {
            ERR(conf, s->line, "unknown section [%s] (expected [PLUGINS])", s->name);
            mk_conf_free(conf);
            return false;
        }
        mk_list_foreach (eit, &s->entries) {
            struct mk_conf_entry *e = mk_list_entry(eit, struct mk_conf_entry, node);
            if (strcasecmp(e->key, "Load") != 0) {
                ERR(conf, e->line, "unknown key '%s' in [PLUGINS]", e->key);
                mk_conf_free(conf);
                return false;
            }
            bool is_path = strchr(e->value, '/') || strstr(e->value, ".so");
            char *v = is_path ? mk_path_join(cfg->confdir, e->value) : mk_strdup(e->value);
            for (size_t i = 0; i < cfg->n_plugins; i++) {
                if (strcmp(cfg->plugins[i].spec, v) == 0) {
                    ERR(conf, e->line, "plugin '%s' is loaded twice", e->value);
                    mk_free(v);
                    mk_conf_free(conf);
                    return false;
                }
            }
            cfg->plugins = mk_realloc(cfg->plugins, (cfg->n_plugins + 1) * sizeof(*cfg->plugins));
            cfg->plugins[cfg->n_plugins].spec = v;
            cfg->plugins[cfg->n_plugins].where = mk_where(conf, e->line);
            cfg->n_plugins++;
        }
    }
    mk_conf_free(conf);
    return true;
}

/* ---- entry points -------------------------------------------------------- */

static struct mk_config *mk_config_new(void)
{
    struct mk_config *cfg = mk_calloc(1, sizeof(*cfg));
    atomic_init(&cfg->refs, 1);
    return cfg;
}

static void mk_config_finish(struct mk_config *cfg)
{
    int n = snprintf(cfg->server_header, sizeof(cfg->server_header), "Server: Monkey%s%s\r\n",
                     cfg->hide_version ? "" : "/", cfg->hide_version ? "" : MK_VERSION_STR);
    cfg->server_header_len = (size_t) n;
}

struct mk_config *mk_config_load(const char *confdir, const struct mk_config_override *ov,
                                 size_t n_ov, char *err, size_t errlen)
{
    struct mk_config *cfg = mk_config_new();
    char resolved[PATH_MAX];
    struct mk_conf *conf;
    char *path;

    if (!realpath(confdir, resolved)) {
        snprintf(err, errlen, "%s: %s", confdir, strerror(errno));
        mk_config_free(cfg);
        return NULL;
    }
    cfg->confdir = mk_strdup(resolved);

    path = mk_path_join(cfg->confdir, "monkey.conf");
    conf = mk_conf_load(path, err, errlen);
    mk_free(path);
    if (!conf) {
        mk_config_free(cfg);
        return NULL;
    }
    struct mk_list *it;
    mk_list_foreach (it, &conf->sections) {
        struct mk_conf_section *s = mk_list_entry(it, struct mk_conf_section, node);
        if (strcasecmp(s->name, "SERVER") != 0) {
            ERR(conf, s->line, "unknown section [%s] (expected [SERVER])", s->name);
            goto fail;
        }
        if (s != mk_conf_section(conf, "SERVER")) {
            ERR(conf, s->line, "[SERVER] is given twice");
            goto fail;
        }
    }
    if (!mk_apply_server(cfg, conf, mk_conf_section(conf, "SERVER"), ov, n_ov, err, errlen)) {
        goto fail;
    }
    mk_conf_free(conf);
    conf = NULL;

    path = mk_path_join(cfg->confdir, "monkey.mime");
    if (access(path, F_OK) == 0) {
        struct mk_conf *mc = mk_conf_load(path, err, errlen);
        if (mc) {
            cfg->mime = mk_mime_from_conf(mc, cfg->default_mime, err, errlen);
            mk_conf_free(mc);
        }
        if (!cfg->mime) {
            mk_free(path);
            goto fail;
        }
    }
    else {
        cfg->mime = mk_mime_builtin(cfg->default_mime);
    }
    mk_free(path);

    if (!mk_load_sites(cfg, err, errlen) || !mk_load_plugin_list(cfg, err, errlen)) {
        goto fail;
    }
    mk_config_finish(cfg);
    return cfg;

fail:
    mk_conf_free(conf);
    mk_config_free(cfg);
    return NULL;
}

struct mk_config *mk_config_for_dir(const char *dir, const struct mk_config_override *ov,
                                    size_t n_ov, char *err, size_t errlen)
{
    struct mk_config *cfg = mk_config_new();
    struct mk_conf label = {.path = "-o"};

    if (!mk_apply_server(cfg, NULL, NULL, ov, n_ov, err, errlen)) {
        mk_config_free(cfg);
        return NULL;
    }
    cfg->mime = mk_mime_builtin(cfg->default_mime);
    struct mk_vhost *vh = mk_vhost_new("built-in");
    vh->conf = mk_conf_parse("built-in", "", 0, err, errlen);
    if (!mk_vhost_set_docroot(vh, &label, 0, dir, err, errlen)) {
        mk_vhost_free(vh);
        mk_config_free(cfg);
        return NULL;
    }
    cfg->vhosts = mk_calloc(1, sizeof(*cfg->vhosts));
    cfg->vhosts[0] = vh;
    cfg->n_vhosts = 1;
    cfg->default_vhost = vh;
    mk_config_finish(cfg);
    return cfg;
}

void mk_config_force_workers(struct mk_config *cfg, int workers)
{
    cfg->workers = workers;
    mk_config_record(cfg, mk_find_key("Workers"), "", NULL);
}

const char *mk_config_value(const struct mk_config *cfg, const char *key, unsigned i)
{
    const struct mk_key *k = mk_find_key(key);

    if (!k) {
        return NULL;
    }
    if (k->id == K_LISTEN) {
        return i < cfg->n_listen ? cfg->listen[i].text : NULL;
    }
    return i == 0 ? cfg->key_text[k->id] : NULL;
}

/* ---- files a start writes ------------------------------------------------ */

/* Who writes a file: this process, or the User a server started as root becomes. */
struct mk_writer {
    const char *user; /* NULL: this process (access(2) decides) */
    uid_t uid;
    gid_t gid;
    gid_t groups[64];
    int n_groups;
};

/* The identity that writes the PidFile of `cfg` (see mk_server_start). */
static void mk_writer_for_pidfile(const struct mk_config *cfg, struct mk_writer *w)
{
    const struct passwd *pw = cfg->user && geteuid() == 0 ? getpwnam(cfg->user) : NULL;

    memset(w, 0, sizeof(*w));
    if (!pw || pw->pw_uid == 0) {
        return;
    }
    w->user = cfg->user;
    w->uid = pw->pw_uid;
    w->gid = pw->pw_gid;
    w->n_groups = (int) (sizeof(w->groups) / sizeof(w->groups[0]));
    if (getgrouplist(cfg->user, pw->pw_gid, w->groups, &w->n_groups) < 0) {
        w->n_groups = (int) (sizeof(w->groups) / sizeof(w->groups[0])); /* the first ones */
    }
}

/* May `w` (another user) do `want` (2: write, 1: search) to the file of `st`? Mode bits only. */
static bool mk_writer_may(const struct mk_writer *w, const struct stat *st, unsigned want)
{
    unsigned shift = 0;

    if (st->st_uid == w->uid) {
        shift = 6;
    }
    else {
        bool member = st->st_gid == w->gid;
        for (int i = 0; i < w->n_groups && !member; i++) {
            member = w->groups[i] == st->st_gid;
        }
        shift = member ? 3 : 0;
    }
    return ((st->st_mode >> shift) & want) == want;
}

/* May `w` (another user) search every directory down to `dir`? Else the reason in why. */
static bool mk_writer_reaches(const struct mk_writer *w, const char *dir, char *why, size_t whylen)
{
    char buf[PATH_MAX];
    struct stat st;
    size_t n = strlen(dir);

    if (n >= sizeof(buf)) {
        snprintf(why, whylen, "%s", strerror(ENAMETOOLONG));
        return false;
    }
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (i < n && buf[i] != '/') {
            continue;
        }
        char c = buf[i];
        buf[i] = '\0';
        if (stat(buf, &st) == 0 && !mk_writer_may(w, &st, 1)) {
            snprintf(why, whylen, "user %s (User) cannot enter %s", w->user, buf);
            return false;
        }
        buf[i] = c;
    }
    return true;
}

/*
 * Can `w` create the file at `path`, or write to it if it exists? MK_OK, or
 * MK_ERR with the reason in why.
 */
static int mk_file_writable(const char *path, const struct mk_writer *w, char *why, size_t whylen)
{
    char copy[PATH_MAX];
    struct stat st;

    if (strlen(path) >= sizeof(copy)) {
        snprintf(why, whylen, "%s", strerror(ENAMETOOLONG));
        return MK_ERR;
    }
    memcpy(copy, path, strlen(path) + 1);
    const char *dir = dirname(copy);
    if (stat(dir, &st) != 0) {
        snprintf(why, whylen, "directory %s: %s", dir, strerror(errno));
        return MK_ERR;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, whylen, "%s is not a directory", dir);
        return MK_ERR;
    }
    if (w->user && !mk_writer_reaches(w, dir, why, whylen)) {
        return MK_ERR;
    }
    bool exists = stat(path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        snprintf(why, whylen, "%s", strerror(EISDIR));
        return MK_ERR;
    }
    if (w->user) {
        if (exists ? !mk_writer_may(w, &st, 2)
                   : (stat(dir, &st) != 0 || !mk_writer_may(w, &st, 3))) {
            snprintf(why, whylen, "user %s (User) cannot %s", w->user,
                     exists ? "write to it" : "create files in its directory");
            return MK_ERR;
        }
        return MK_OK;
    }
    if (exists ? access(path, W_OK) != 0 : access(dir, W_OK | X_OK) != 0) {
        snprintf(why, whylen, "%s%s: %s", exists ? "" : "directory ", exists ? path : dir,
                 strerror(errno));
        return MK_ERR;
    }
    return MK_OK;
}

int mk_config_check_files(const struct mk_config *cfg, const struct mk_config *running, char *err,
                          size_t errlen)
{
    struct mk_writer self = {0}, w;
    char why[PATH_MAX + 128];

    if (cfg->log_path &&
        !(running && running->log_path && strcmp(running->log_path, cfg->log_path) == 0) &&
        mk_file_writable(cfg->log_path, &self, why, sizeof(why)) != MK_OK) {
        snprintf(err, errlen, "%s: Log %s: %s", cfg->key_where[K_LOG], cfg->log_path, why);
        return MK_ERR;
    }
    if (cfg->pidfile && !running) {
        mk_writer_for_pidfile(cfg, &w);
        if (mk_file_writable(cfg->pidfile, &w, why, sizeof(why)) != MK_OK) {
            snprintf(err, errlen, "%s: PidFile %s: %s", cfg->key_where[K_PIDFILE], cfg->pidfile,
                     why);
            return MK_ERR;
        }
    }
    return MK_OK;
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
