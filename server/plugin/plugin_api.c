/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * plugin_api.c: the function table plugins call (struct mk_api,
 * include/monkey/mk_plugin.h). Its entries are the server's own functions
 * where one fits (request.h, response_set.c, loop.h, takeover.h...) and
 * else short wrappers over them: what a request is and does lives in the
 * request layer, not here.
 *
 * What an entry needs to know of the hook that calls it, the loader says
 * around the call (mk_api_hook_begin): the configuration and plugin set
 * whose init() runs (api->plugin_conf with no site, api->self_set), and,
 * for plugins built before ABI 3.11, where api->route_add puts routes.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <monkey/mk_util.h>

#ifndef MK_PLUGIN_DIR
#define MK_PLUGIN_DIR "/usr/local/lib/monkey/plugins"
#endif

#include "../../core/log.h"
#include "../../core/fs.h"
#include "../../core/schema.h"
#ifdef MK_HAVE_LIBMONKEY
#include "lib.h"
#endif
#include "../http/path.h"
#ifdef MK_HAVE_RULES
#include "../../core/ratelimit.h"
#include "../http/ratelimit.h"
#include "../http/rules.h"
#endif
#include "../static/static.h"
#include "../process/server.h"
#include "../process/supervisor.h"
#include "../proto/takeover.h"
#include "../conn/conn_count.h"
#include "../conn/transport.h"

/* The hook that runs on this thread (mk_api_hook_begin), and what it may use. */
__thread bool mk_plugins_checking; /* per thread: another server may be checked meanwhile */
/* The configuration whose plugins' init() runs (api->plugin_conf with no site). */
static __thread const struct mk_config *mk_init_cfg;
/* The plugin set whose init() runs on this thread (api->self_set). */
static __thread struct mk_plugin_set *mk_init_set;
/*
 * api->route_add of plugins built before ABI 3.11, which add routes from
 * init() (site NULL) and site_init() (their site): the table of the hook
 * that runs on this thread, and its site (NULL: every site). NULL
 * elsewhere: route_add is refused. Plugins of 3.11 and later are given
 * their table (the routes hook, the loader's mk_plugins_routes).
 */
static __thread struct mk_route_table *mk_route_legacy;
static __thread const struct mk_site *mk_route_legacy_site;

/* Add one route to t: MK_OK, or MK_ERR with the reason in err. */
static int mk_route_table_put(struct mk_route_table *t, uint32_t methods, const char *pattern,
                              mk_route_cb handler, void *arg, char *err, size_t errlen)
{
    struct mk_route rt;

    if (!t) {
        snprintf(err, errlen, "no route table: routes are added from the routes hook only");
        return MK_ERR;
    }
    if (!handler || !methods) {
        snprintf(err, errlen, "route '%s' without a handler or methods", pattern ? pattern : "");
        return MK_ERR;
    }
    if (mk_route_parse(&rt, pattern, err, errlen) != MK_OK) {
        return MK_ERR;
    }
    rt.methods = methods;
    rt.plugin = t->plugin;
    rt.handler = handler;
    rt.arg = arg;
    return mk_routes_add(t->routes, &rt); /* a pattern given twice is found once all are in */
}

void mk_api_hook_begin(struct mk_plugin_set *set, const struct mk_config *cfg,
                       struct mk_route_table *routes, const struct mk_site *site)
{
    mk_init_set = set;
    mk_init_cfg = cfg;
    mk_route_legacy = routes;
    mk_route_legacy_site = site;
}

void mk_api_hook_end(void)
{
    mk_init_set = NULL;
    mk_init_cfg = NULL;
    mk_route_legacy = NULL;
    mk_route_legacy_site = NULL;
}

/* ---- the API table ------------------------------------------------------- */

static void mk_api_log(int level, const char *fmt, ...)
{
    char buf[900];
    va_list ap;

    if (level < MK_LOG_ERROR || level > MK_LOG_DEBUG || level > (int) mk_log_get_level()) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    mk_log((enum mk_log_level) level, "%s", buf);
}

static const char *mk_api_method(const struct mk_request *r, size_t *len)
{
    *len = r->head.method_name.len;
    return r->head.method_name.p ? r->head.method_name.p : "";
}

static const char *mk_api_path(const struct mk_request *r, size_t *len)
{
    if (!r->path) {
        *len = r->head.target.len;
        return r->head.target.p ? r->head.target.p : "";
    }
    *len = r->path_len;
    return r->path;
}

static const char *mk_api_target(const struct mk_request *r, size_t *len)
{
    *len = r->head.target.len;
    return r->head.target.p ? r->head.target.p : "";
}

static const char *mk_api_client_method(const struct mk_request *r, size_t *len)
{
    if (!(r->flags & MK_REQ_REDIRECTED)) {
        return mk_api_method(r, len);
    }
    *len = r->client_method.len;
    return r->client_method.p ? r->client_method.p : "";
}

static const char *mk_api_client_target(const struct mk_request *r, size_t *len)
{
    if (!(r->flags & MK_REQ_REDIRECTED)) {
        return mk_api_target(r, len);
    }
    *len = r->client_target.len;
    return r->client_target.p ? r->client_target.p : "";
}

static const char *mk_api_query(const struct mk_request *r, size_t *len)
{
    *len = r->head.query.len;
    return r->head.query.p;
}

static const char *mk_api_host(const struct mk_request *r, size_t *len)
{
    *len = r->head.host.len;
    return r->head.host.p ? r->head.host.p : "";
}

static int mk_api_version(const struct mk_request *r)
{
    return r->head.version ? r->head.version : 10;
}

static const char *mk_api_request_protocol(const struct mk_request *r, size_t *len)
{
    *len = r->protocol.len;
    return r->protocol.len ? r->protocol.p : NULL;
}

static unsigned mk_api_header_count(const struct mk_request *r)
{
    return r->head.n_headers;
}

static int mk_api_header_at(const struct mk_request *r, unsigned i, const char **name,
                            size_t *name_len, const char **value, size_t *value_len)
{
    if (i >= r->head.n_headers) {
        return MK_ERR;
    }
    *name = r->head.headers[i].name.p;
    *name_len = r->head.headers[i].name.len;
    *value = r->head.headers[i].value.p;
    *value_len = r->head.headers[i].value.len;
    return MK_OK;
}

static const char *mk_api_body(const struct mk_request *r, size_t *len)
{
    *len = r->body_len;
    if (!(r->flags & MK_REQ_BODY_READ)) {
        return NULL;
    }
    return r->body ? r->body : "";
}

static const char *mk_api_docroot(const struct mk_request *r)
{
    return r->site ? r->site->docroot : "";
}

/*
 * The client address as text, by mk_addr_text() (mk_util.h: IPv4 clients
 * of a dual-stack socket in IPv4 form): straight into buf when it has
 * MK_ADDR_TEXT_LEN bytes, else through a copy that must fit; "-" for a
 * client that is not IP or an address buf cannot hold.
 */
static const char *mk_api_remote_addr(const struct mk_request *r, char *buf, size_t len)
{
    char text[MK_ADDR_TEXT_LEN];
    char *out = len >= sizeof(text) ? buf : text;
    size_t n = mk_addr_text(mk_request_client(r), out);

    if (n == 0 || n >= len) {
        snprintf(buf, len, "-");
    }
    else if (out != buf) {
        memcpy(buf, text, n + 1);
    }
    return buf;
}

static struct mk_conn *mk_api_conn(const struct mk_request *r)
{
    return r->conn;
}

static int mk_api_add_header(struct mk_request *r, const char *name, const char *value)
{
    return mk_response_add_header(r, name, strlen(name), value, strlen(value));
}

static void *mk_api_alloc(struct mk_request *r, size_t size)
{
    return mk_arena_alloc(&r->arena, size);
}

static int mk_api_status(const struct mk_request *r)
{
    return r->status;
}

static uint64_t mk_api_bytes_sent(const struct mk_request *r)
{
    return r->bytes_sent;
}

static int mk_api_conn_fd(const struct mk_conn *c)
{
    return c->ev.fd;
}

static void **mk_api_conn_transport_data(struct mk_conn *c)
{
    return &c->transport_data;
}

static struct mk_conf *mk_api_conf_load(const char *path, char *err, size_t errlen)
{
    return mk_conf_load(path, err, errlen);
}

static int mk_api_conf_next(const struct mk_conf *conf, void **cursor, const char **section,
                            const char **key, const char **value, int *line)
{
    struct mk_conf_entry *e = mk_conf_next(conf, *cursor);
    if (!e) {
        return 0;
    }
    *cursor = e;
    *section = e->section->name;
    *key = e->key;
    *value = e->value;
    *line = e->line;
    return 1;
}

static const char *mk_api_conf_path(const struct mk_conf *conf)
{
    return conf->path;
}

static const struct sockaddr *mk_api_remote_sockaddr(const struct mk_request *r, socklen_t *len)
{
    const struct sockaddr *sa = mk_request_client(r);
    *len = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    return sa;
}

static void mk_api_request_time(const struct mk_request *r, struct timespec *start,
                                uint64_t *elapsed_us)
{
    struct timespec now;

    if (start) {
        *start = r->start;
    }
    if (elapsed_us) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        uint64_t us = (uint64_t) now.tv_sec * 1000000u + (uint64_t) now.tv_nsec / 1000u;
        *elapsed_us = us > r->start_mono_us ? us - r->start_mono_us : 0;
    }
}

static int mk_api_open_beneath(const struct mk_request *r, const char *rel, int flags)
{
    if (!r->site) {
        errno = ENOENT;
        return -1;
    }
    return mk_conf_site_open(r->site, rel[0] ? rel : ".", flags);
}

static const char *mk_api_index_file(const struct mk_request *r, unsigned i)
{
    size_t n;
    char *const *names = mk_request_index_files(r, &n);
    return i < n ? names[i] : NULL;
}

static int mk_api_listing(const struct mk_request *r)
{
    return mk_request_listing(r);
}

static const struct mk_site *mk_api_site(const struct mk_request *r)
{
    return r->site;
}

static const char *mk_api_site_name(const struct mk_site *s, unsigned i)
{
    const struct mk_site *vh = s;
    return vh && i < vh->n_names ? vh->names[i] : NULL;
}

static const char *mk_api_site_docroot(const struct mk_site *s)
{
    return s ? s->docroot : "";
}

static const char *mk_api_site_file(const struct mk_site *s)
{
    return s ? s->file : "";
}

static const struct mk_site *mk_api_site_lookup(const struct mk_site *s, const char *name,
                                                size_t len)
{
    if (!s) {
        return NULL;
    }
    const struct mk_config *cfg = s->cfg;
    return mk_conf_site_lookup(cfg, name ? name : "", name ? len : 0);
}

static void *mk_api_site_data(const struct mk_site *s, const struct mk_plugin *plugin)
{
    const struct mk_site *vh = s;
    struct mk_server *srv = mk_plugins_current();
    size_t i;

    if (!vh || !srv) {
        return NULL;
    }
    i = mk_plugins_index(&srv->plugins, plugin);
    return i < vh->n_plugin_data ? vh->plugin_data[i] : NULL;
}

static struct mk_suspended *mk_api_suspend(struct mk_request *r)
{
    return mk_request_suspend(r);
}

static void mk_api_resume(struct mk_suspended *s, mk_resume_cb cb, void *arg)
{
    atomic_store_explicit(&s->resumed, true, memory_order_release);
    s->cb = cb;
    s->arg = arg;
    mk_task_resume_post(s);
}

static void mk_api_suspend_cancel(struct mk_suspended *s, mk_cancel_cb cancel, void *arg)
{
    s->cancel = cancel;
    s->cancel_arg = arg;
}

static int mk_api_task(struct mk_request *r, void (*work)(void *arg), mk_resume_cb done, void *arg)
{
    struct mk_suspended *s = mk_request_suspend(r);

    if (!s) {
        return MK_ERR;
    }
    s->work = work;
    s->cb = done;
    s->arg = arg;
    int rc = mk_task_submit(r->conn->worker->server, r, s);
    if (rc != MK_OK) {
        /* Nothing started: the handle is settled here, on the worker. */
        mk_request_unsuspend(r, s);
        if (rc == 503) {
            mk_response_add_known(r, MK_RESP_RETRY_AFTER, "1", 1);
        }
        return rc;
    }
    r->task = s; /* dropped unrun if the request is given up first */
    return MK_SUSPENDED;
}

/* A worker's requests and bytes sent: the sums of its sites' counters, with metrics. */
static void mk_api_worker_totals(const struct mk_worker *w, uint64_t *requests, uint64_t *bytes)
{
#ifdef MK_HAVE_METRICS
    mk_metrics_worker_totals(&w->metrics, requests, bytes);
#else
    *requests = atomic_load_explicit(&w->n_requests, memory_order_relaxed);
    *bytes = atomic_load_explicit(&w->bytes_out, memory_order_relaxed);
#endif
}

static void mk_api_stats(struct mk_server_stats *out)
{
    struct mk_server *srv = mk_plugins_current();

    memset(out, 0, sizeof(*out));
    if (!srv || !atomic_load_explicit(&srv->stats_ready, memory_order_acquire)) {
        return; /* not started yet, or stopping: zeros */
    }
    out->started = srv->started;
    out->workers = (unsigned) srv->n_workers;
    out->connections = atomic_load_explicit(&srv->n_conns, memory_order_relaxed);
    for (int i = 0; i < srv->n_workers; i++) {
        uint64_t requests, bytes;
        mk_api_worker_totals(&srv->workers[i], &requests, &bytes);
        out->requests += requests;
        out->bytes_out += bytes;
    }
}

/* Compression on the fly of the whole server: all zero when built without it. */
static void mk_api_compress_stats(struct mk_compress_stats *out)
{
    memset(out, 0, sizeof(*out));
#ifdef MK_HAVE_COMPRESS
    struct mk_server *srv = mk_plugins_current();
    if (!srv || !atomic_load_explicit(&srv->stats_ready, memory_order_acquire)) {
        return;
    }
    for (int i = 0; i < srv->n_workers; i++) {
        const struct mk_zcache *zc = &srv->workers[i].zcache;
        out->bytes += atomic_load_explicit(&zc->st_bytes, memory_order_relaxed);
        out->entries += atomic_load_explicit(&zc->st_entries, memory_order_relaxed);
        out->hits += atomic_load_explicit(&zc->st_hits, memory_order_relaxed);
        out->compressions += atomic_load_explicit(&zc->st_compressions, memory_order_relaxed);
        out->waits += atomic_load_explicit(&zc->st_waits, memory_order_relaxed);
        out->evictions += atomic_load_explicit(&zc->st_evictions, memory_order_relaxed);
        out->skipped += atomic_load_explicit(&zc->st_skipped, memory_order_relaxed);
    }
#endif
}

/* HTTP/2 of the whole server: all zero when built without it. */
static void mk_api_h2_stats(struct mk_h2_stats *out)
{
    memset(out, 0, sizeof(*out));
#ifdef MK_HAVE_H2
    struct mk_server *srv = mk_plugins_current();
    if (!srv || !atomic_load_explicit(&srv->stats_ready, memory_order_acquire)) {
        return;
    }
    for (int i = 0; i < srv->n_workers; i++) {
        struct mk_worker *w = &srv->workers[i];
        out->connections += atomic_load_explicit(&w->n_h2_conns, memory_order_relaxed);
        out->streams += atomic_load_explicit(&w->n_h2_streams, memory_order_relaxed);
        out->streams_total += atomic_load_explicit(&w->h2_streams, memory_order_relaxed);
    }
#endif
}

static int mk_api_worker_stats(unsigned i, struct mk_worker_stats *out)
{
    struct mk_server *srv = mk_plugins_current();

    if (!srv || !atomic_load_explicit(&srv->stats_ready, memory_order_acquire) ||
        i >= (unsigned) srv->n_workers) {
        return MK_ERR;
    }
    out->connections = atomic_load_explicit(&srv->workers[i].n_conns, memory_order_relaxed);
    mk_api_worker_totals(&srv->workers[i], &out->requests, &out->bytes_out);
    return MK_OK;
}

static int mk_api_site_metrics(unsigned i, struct mk_site_metrics *out)
{
    memset(out, 0, sizeof(*out));
#ifdef MK_HAVE_METRICS
    struct mk_server *srv = mk_plugins_current();
    if (srv && atomic_load_explicit(&srv->stats_ready, memory_order_acquire)) {
        return mk_metrics_read(&srv->metrics, srv->workers, srv->n_workers, i, out);
    }
#else
    (void) i;
#endif
    return MK_ERR;
}

static int mk_api_server_metrics(struct mk_server_metrics *out)
{
    memset(out, 0, sizeof(*out));
#ifdef MK_HAVE_METRICS
    struct mk_server *srv = mk_plugins_current();
    if (!srv || !atomic_load_explicit(&srv->stats_ready, memory_order_acquire)) {
        return MK_ERR;
    }
    for (int i = 0; i < srv->n_workers; i++) {
        const struct mk_worker *w = &srv->workers[i];
        out->accepted += atomic_load_explicit(&w->conns_accepted, memory_order_relaxed);
        out->refused += atomic_load_explicit(&w->conns_refused, memory_order_relaxed);
#ifdef MK_HAVE_H2
        out->h2_resets_sent += atomic_load_explicit(&w->h2_rst_sent, memory_order_relaxed);
        out->h2_resets_received += atomic_load_explicit(&w->h2_rst_received, memory_order_relaxed);
        for (unsigned k = 0; k < MK_METRICS_H2_ERRORS; k++) {
            out->h2_goaways_sent[k] +=
                atomic_load_explicit(&w->h2_goaway_sent[k], memory_order_relaxed);
        }
#endif
    }
    out->reloads = atomic_load_explicit(&srv->reloads, memory_order_relaxed);
    out->reload_failures = atomic_load_explicit(&srv->reload_failures, memory_order_relaxed);
    return MK_OK;
#else
    return MK_ERR;
#endif
}

static int mk_api_conn_states(unsigned *out, unsigned n)
{
    memset(out, 0, n * sizeof(*out));
#ifdef MK_HAVE_METRICS
    struct mk_server *srv = mk_plugins_current();
    if (!srv || !atomic_load_explicit(&srv->stats_ready, memory_order_acquire)) {
        return MK_ERR;
    }
    for (int i = 0; i < srv->n_workers; i++) {
        for (unsigned k = 0; k < n && k < MK_CSTATES; k++) {
            out[k] +=
                k == MK_CSTATE_READING
                    ? mk_conn_reading(&srv->workers[i])
                    : atomic_load_explicit(&srv->workers[i].conns_in[1 + k], memory_order_relaxed);
        }
    }
    return MK_OK;
#else
    return MK_ERR;
#endif
}

static unsigned mk_api_metrics_bounds(uint64_t *out, unsigned n)
{
#ifdef MK_HAVE_METRICS
    for (unsigned b = 0; b < n && b < mk_metrics_n_bounds; b++) {
        out[b] = mk_metrics_bounds[b];
    }
    return mk_metrics_n_bounds;
#else
    (void) out;
    (void) n;
    return 0;
#endif
}

static int mk_api_h2_goaways_received(uint64_t *out, unsigned n)
{
    memset(out, 0, n * sizeof(*out));
#if defined(MK_HAVE_METRICS) && defined(MK_HAVE_H2)
    struct mk_server *srv = mk_plugins_current();
    if (!srv || !atomic_load_explicit(&srv->stats_ready, memory_order_acquire)) {
        return MK_ERR;
    }
    for (int i = 0; i < srv->n_workers; i++) {
        for (unsigned k = 0; k < n && k < MK_METRICS_H2_ERRORS; k++) {
            out[k] +=
                atomic_load_explicit(&srv->workers[i].h2_goaway_received[k], memory_order_relaxed);
        }
    }
    return MK_OK;
#else
    return MK_ERR;
#endif
}

static uint64_t mk_api_mono_us(void)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t) now.tv_sec * 1000000u + (uint64_t) now.tv_nsec / 1000u;
}

static void mk_api_upstream_wait(struct mk_request *r, int waiting)
{
    if (waiting) {
        if (!r->upstream_since) {
            r->upstream_since = mk_api_mono_us();
        }
        r->upstream_any = true;
        return;
    }
    if (r->upstream_since) {
        r->upstream_us += mk_api_mono_us() - r->upstream_since;
        r->upstream_since = 0;
    }
}

static int64_t mk_api_upstream_time(const struct mk_request *r)
{
    if (!r->upstream_any) {
        return -1;
    }
    return (int64_t) (r->upstream_us +
                      (r->upstream_since ? mk_api_mono_us() - r->upstream_since : 0));
}

static struct mk_config *mk_api_config_get(void)
{
    struct mk_server *srv = mk_plugins_current();
    struct mk_config *cfg;

    if (!srv) {
        return NULL;
    }
    pthread_mutex_lock(&srv->cfg_lock);
    cfg = srv->cfg ? mk_config_ref(srv->cfg) : NULL;
    pthread_mutex_unlock(&srv->cfg_lock);
    return cfg;
}

/* The RateLimit tables of the configuration in force, summed over its sites' rules. */
static int mk_api_ratelimit_stats(struct mk_ratelimit_stats *out)
{
    memset(out, 0, sizeof(*out));
#ifdef MK_HAVE_RULES
    struct mk_config *cfg = mk_api_config_get();
    if (!cfg) {
        return MK_ERR;
    }
    for (size_t i = 0; i < cfg->n_sites; i++) {
        const struct mk_rules *t = cfg->sites[i]->rules;
        for (size_t k = 0; t && k < t->n; k++) {
            const struct mk_rate_limit *l = t->v[k]->limit;
            if (l && l->table) {
                out->limits++;
                out->keys += mk_ratelimit_capacity(l->table);
                out->evictions += mk_ratelimit_evictions(l->table);
            }
        }
    }
    mk_config_unref(cfg);
    return MK_OK;
#else
    return MK_ERR;
#endif
}

static const char *mk_api_config_key(unsigned i)
{
    return mk_config_key("SERVER", i);
}

static unsigned mk_api_config_sites(const struct mk_config *cfg)
{
    return (unsigned) cfg->n_sites;
}

static const struct mk_site *mk_api_config_site(const struct mk_config *cfg, unsigned i)
{
    return i < cfg->n_sites ? cfg->sites[i] : NULL;
}

static unsigned mk_api_plugin_count(void)
{
    struct mk_server *srv = mk_plugins_current();
    return srv ? (unsigned) srv->plugins.count : 0;
}

static const struct mk_plugin *mk_api_plugin_at(unsigned i)
{
    struct mk_server *srv = mk_plugins_current();
    return srv && i < srv->plugins.count ? srv->plugins.list[i] : NULL;
}

static const struct mk_plugins_process *mk_api_process;

void mk_plugins_process(const struct mk_plugins_process *process)
{
    mk_api_process = process;
}

static int mk_api_command(int cmd, char *err, size_t errlen)
{
    struct mk_server *srv = mk_plugins_current();

    if (!srv || !mk_api_process) {
        snprintf(err, errlen, "no server is running");
        return MK_ERR;
    }
    return mk_api_process->command(srv, cmd, err, errlen);
}

static int mk_api_supervisor_stats(struct mk_supervisor_stats *out)
{
    return mk_api_process ? mk_api_process->supervisor_stats(out) : MK_DECLINED;
}

static int mk_api_conf_section_line(const void *cursor)
{
    return cursor ? ((const struct mk_conf_entry *) cursor)->section->line : 0;
}

static int mk_api_site_symlinks(const struct mk_site *s)
{
    return s && s->symlinks;
}

static int mk_api_site_hide_dotfiles(const struct mk_site *s)
{
    return s && s->hide_dotfiles;
}

static uint64_t mk_api_body_bytes_sent(const struct mk_request *r)
{
    return r->bytes_sent > r->head_bytes ? r->bytes_sent - r->head_bytes : 0;
}

static int mk_api_response_complete(const struct mk_request *r)
{
    return (r->flags & MK_REQ_COMPLETE) != 0;
}

static int mk_api_worker_call(int worker, void (*fn)(void *arg), void *arg)
{
    struct mk_server *srv = mk_plugins_current();
    return srv ? mk_worker_call(srv, worker, fn, arg) : MK_ERR;
}

static int mk_api_checking(void)
{
    return mk_plugins_checking;
}

/* Index of plugin `p` among those `cfg` holds settings for, or n_plugin_conf. */
static size_t mk_conf_index(const struct mk_config *cfg, const struct mk_plugin *p)
{
    size_t i = 0;
    while (i < cfg->n_plugin_conf && cfg->conf_plugins[i] != p) {
        i++;
    }
    return i;
}

static const void *mk_api_plugin_conf(const struct mk_site *s, const struct mk_plugin *p)
{
    const struct mk_config *cfg = s ? s->cfg : mk_init_cfg;
    size_t i;

    if (!cfg || (i = mk_conf_index(cfg, p)) == cfg->n_plugin_conf) {
        return NULL;
    }
    return cfg->plugin_conf[i];
}

static const void *mk_api_site_conf(const struct mk_site *s, const struct mk_plugin *p)
{
    const struct mk_site *vh = s;
    size_t i;

    if (!vh || !vh->cfg || !vh->plugin_conf) {
        return NULL;
    }
    i = mk_conf_index(vh->cfg, p);
    return i < vh->n_plugin_data ? vh->plugin_conf[i] : NULL;
}

static const struct mk_conf_instance *mk_api_site_sections(const struct mk_site *s,
                                                           const struct mk_plugin *p,
                                                           const char *section, size_t *n)
{
    const struct mk_site *vh = s;
    size_t i;

    *n = 0;
    if (!vh || !vh->cfg || !vh->plugin_sections || !section) {
        return NULL;
    }
    i = mk_conf_index(vh->cfg, p);
    if (i >= vh->n_plugin_data) {
        return NULL;
    }
    for (const struct mk_section_instances *si = vh->plugin_sections[i]; si && si->schema; si++) {
        if (strcasecmp(si->schema->section, section) == 0) {
            *n = si->n;
            return si->v;
        }
    }
    return NULL;
}

static int mk_api_self_set(const struct mk_plugin *p, void *self)
{
    struct mk_plugin_set *ps = mk_init_set;
    size_t i;

    if (!ps || (i = mk_plugins_index(ps, p)) == ps->count) {
        return MK_ERR;
    }
    ps->self[i] = self;
    return MK_OK;
}

static struct mk_server *mk_api_server_get(void)
{
    return mk_plugins_checking ? NULL : mk_plugins_current();
}

static void mk_api_thread_serve(struct mk_server *srv)
{
    mk_plugins_bind(srv);
}

static void *mk_api_self(const struct mk_plugin *p)
{
    struct mk_server *srv = mk_init_set ? NULL : mk_plugins_current();
    const struct mk_plugin_set *ps = mk_init_set ? mk_init_set : srv ? &srv->plugins : NULL;
    size_t i;

    if (!ps || !ps->self || (i = mk_plugins_index(ps, p)) == ps->count) {
        return NULL;
    }
    return ps->self[i];
}

static int mk_api_ctx_set(struct mk_request *r, const struct mk_plugin *p, void *ctx,
                          void (*cleanup)(void *ctx))
{
    const struct mk_plugin_set *ps = &r->conn->worker->server->plugins;

    return mk_request_ctx_set(r, mk_plugins_index(ps, p), ctx, cleanup);
}

static void *mk_api_ctx_get(const struct mk_request *r, const struct mk_plugin *p)
{
    const struct mk_plugin_set *ps = &r->conn->worker->server->plugins;

    return mk_request_ctx_get(r, mk_plugins_index(ps, p));
}

static time_t mk_api_now(void)
{
    struct mk_worker *w = mk_loop_worker();
    return w ? w->now : time(NULL);
}

static int mk_api_worker_id(void)
{
    struct mk_worker *w = mk_loop_worker();
    return w ? w->id : -1;
}

static int mk_api_route_add(const struct mk_site *site, uint32_t methods, const char *pattern,
                            mk_route_cb handler, void *arg)
{
    char err[256];

    if (!mk_route_legacy || site != mk_route_legacy_site) {
        errno = EPERM;
        return MK_ERR;
    }
    if (mk_route_table_put(mk_route_legacy, methods, pattern, handler, arg, err, sizeof(err)) !=
        MK_OK) {
        mk_err("plugin %s: %s", mk_route_legacy->plugin->name, err);
        errno = EINVAL;
        return MK_ERR;
    }
    return MK_OK;
}

static int mk_api_route_table_add(struct mk_route_table *t, uint32_t methods, const char *pattern,
                                  mk_route_cb handler, void *arg, char *err, size_t errlen)
{
    return mk_route_table_put(t, methods, pattern, handler, arg, err, errlen);
}

static const char *mk_api_route_param(const struct mk_request *r, const char *name, size_t *len)
{
    return mk_route_param(&r->route, r->path, name, len);
}

const struct mk_api mk_plugin_api = {
    .abi_major = MK_PLUGIN_ABI_MAJOR,
    .abi_minor = MK_PLUGIN_ABI_MINOR,
    .size = sizeof(struct mk_api),
    .log = mk_api_log,
    .method = mk_api_method,
    .path = mk_api_path,
    .target = mk_api_target,
    .query = mk_api_query,
    .host = mk_api_host,
    .version = mk_api_version,
    .header = mk_request_header,
    .header_count = mk_api_header_count,
    .header_at = mk_api_header_at,
    .body = mk_api_body,
    .docroot = mk_api_docroot,
    .remote_addr = mk_api_remote_addr,
    .conn = mk_api_conn,
    .set_status = mk_response_set_status,
    .add_header = mk_api_add_header,
    .set_content_type = mk_response_set_type,
    .set_body = mk_response_set_body,
    .set_body_static = mk_response_set_body_static,
    .set_body_file = mk_response_set_body_file,
    .alloc = mk_api_alloc,
    .status = mk_api_status,
    .bytes_sent = mk_api_bytes_sent,
    .conn_fd = mk_api_conn_fd,
    .conn_transport_data = mk_api_conn_transport_data,
    .conf_load = mk_api_conf_load,
    .conf_free = mk_conf_free,
    .conf_next = mk_api_conf_next,
    .conf_path = mk_api_conf_path,
    .now = mk_api_now,
    .worker_id = mk_api_worker_id,
    .remote_sockaddr = mk_api_remote_sockaddr,
    .request_time = mk_api_request_time,
    .set_body_owned = mk_response_set_body_owned,
    .open_beneath = mk_api_open_beneath,
    .index_file = mk_api_index_file,
    .site = mk_api_site,
    .site_name = mk_api_site_name,
    .site_docroot = mk_api_site_docroot,
    .site_file = mk_api_site_file,
    .site_data = mk_api_site_data,
    .suspend = mk_api_suspend,
    .resume = mk_api_resume,
    .task = mk_api_task,
    .stats = mk_api_stats,
    .worker_stats = mk_api_worker_stats,
    .h2_stats = mk_api_h2_stats,
    .config_get = mk_api_config_get,
    .config_put = mk_config_unref,
    .config_key = mk_api_config_key,
    .config_value = mk_config_value,
    .config_sites = mk_api_config_sites,
    .config_site = mk_api_config_site,
    .plugin_count = mk_api_plugin_count,
    .plugin_at = mk_api_plugin_at,
    .command = mk_api_command,
    .checking = mk_api_checking,
    .conf_section_line = mk_api_conf_section_line,
    .site_symlinks = mk_api_site_symlinks,
    .body_bytes_sent = mk_api_body_bytes_sent,
    .response_complete = mk_api_response_complete,
    .worker_call = mk_api_worker_call,
    .site_hide_dotfiles = mk_api_site_hide_dotfiles,
    .timer_start = mk_loop_timer_start,
    .timer_stop = mk_loop_timer_stop,
    .timer_new = mk_loop_timer_new,
    .timer_arm = mk_loop_timer_arm,
    .timer_disarm = mk_loop_timer_disarm,
    .fd_watch = mk_loop_fd_watch,
    .fd_modify = mk_loop_fd_modify,
    .fd_unwatch = mk_loop_fd_unwatch,
    .child_watch = mk_loop_child_watch,
    .child_unwatch = mk_loop_child_unwatch,
    .now_ms = mk_loop_now_ms,
    .plugin_conf = mk_api_plugin_conf,
    .site_conf = mk_api_site_conf,
    .stream_start = mk_response_stream_start,
    .stream_write = mk_response_stream_write,
    .stream_end = mk_response_stream_end,
    .body_stream = mk_body_stream_start,
    .body_consume = mk_body_stream_consume,
    .self_set = mk_api_self_set,
    .self = mk_api_self,
    .ctx_set = mk_api_ctx_set,
    .ctx_get = mk_api_ctx_get,
    .route_add = mk_api_route_add,
    .route_param = mk_api_route_param,
    .conn_io_want = mk_conn_io_want,
    .conn_alpn = mk_conn_alpn,
    .conn_server_name = mk_conn_server_name,
    .conn_local_addr = mk_conn_local_addr,
    .conn_listen_options = mk_conn_listen_options,
    .protocol_known = mk_proto_known,
    .takeover = mk_upgrade_request,
    .takeover_write = mk_takeover_write,
    .takeover_close = mk_takeover_close,
    .takeover_conn = mk_takeover_conn,
    .site_lookup = mk_api_site_lookup,
    .conn_transport_var = mk_conn_transport_var,
    .stream_abort = mk_response_stream_abort,
    .note_set = mk_request_note_set,
    .note = mk_request_note,
    .site_sections = mk_api_site_sections,
    .takeover_on_open = mk_upgrade_on_open,
    .supervisor_stats = mk_api_supervisor_stats,
    .error_log = mk_request_error_log,
    .serve_file = mk_request_serve_file,
    .server = mk_api_server_get,
    .thread_serve = mk_api_thread_serve,
    .stream_buffer = mk_response_stream_buffer,
    .stream_commit = mk_response_stream_commit,
    .internal_redirect = mk_request_redirect,
    .client_method = mk_api_client_method,
    .client_target = mk_api_client_target,
    .compress_stats = mk_api_compress_stats,
    .suspend_cancel = mk_api_suspend_cancel,
    .log_file_open = mk_log_file_open,
    .route_table_add = mk_api_route_table_add,
    .request_protocol = mk_api_request_protocol,
    .stream_length = mk_response_stream_length,
    .takeover_hold = mk_takeover_hold,
    .interim = mk_response_interim,
    .conf_where = mk_conf_where,
    .site_metrics = mk_api_site_metrics,
    .server_metrics = mk_api_server_metrics,
    .conn_states = mk_api_conn_states,
    .ratelimit_stats = mk_api_ratelimit_stats,
    .listing = mk_api_listing,
    .request_trailers = mk_body_trailers,
    .metrics_bounds = mk_api_metrics_bounds,
    .h2_goaways_received = mk_api_h2_goaways_received,
    .upstream_wait = mk_api_upstream_wait,
    .upstream_time = mk_api_upstream_time,
};
