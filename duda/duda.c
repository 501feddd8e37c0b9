/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/duda.c: the Duda framework as a plugin of the server. It reads
 * conf/plugins/duda.conf ([DUDA] ServicesRoot, PackagesRoot, declared
 * keys) and the [WEB_SERVICE] sections of every site file, loads the
 * services they name for that site and configuration (service.c) and
 * routes their requests through the server's route table. A reload loads
 * every service again (a rebuilt NAME.duda is picked up); the old copies
 * are unloaded once the old configuration's requests are done.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "duda_internal.h"

const struct mk_api *duda_mk;
__thread struct duda_service *duda_current;
__thread duda_request_t *duda_current_request;

static const struct mk_conf_key duda_keys[] = {
    {"ServicesRoot", MK_CONF_PATH, 0, MK_CONF_FIELD(struct duda_conf, services_root), 0, 0,
     "services", .doc = "the folder of the services' NAME.duda files"},
    {"PackagesRoot", MK_CONF_PATH, 0, MK_CONF_FIELD(struct duda_conf, packages_root), 0, 0,
     "packages", .doc = "the folder of the packages services load"},
    {"SessionStore", MK_CONF_STRING, 0, MK_CONF_FIELD(struct duda_conf, session_store), 0, 300,
     "memory", .check = duda_session_store_check,
     .doc = "where sessions live: memory (this process) or redis://host:port/db (shared)"},
    {NULL},
};

static const struct mk_conf_schema duda_schema = {
    .section = "DUDA",
    .file = "duda.conf",
    .keys = duda_keys,
    .size = sizeof(struct duda_conf),
};

const struct duda_api duda_api_table = {
    .abi_major = DUDA_ABI_MAJOR,
    .abi_minor = DUDA_ABI_MINOR,
    .size = sizeof(struct duda_api),
    .request = &duda_request_obj,
    .response = &duda_response_obj,
    .router = &duda_router_obj,
    .param = &duda_param_obj,
    .qs = &duda_qs_obj,
    .cookie = &duda_cookie_obj,
    .session = &duda_session_obj,
    .gc = &duda_gc_obj,
    .global = &duda_global_obj,
    .worker = &duda_worker_obj,
    .event = &duda_event_obj,
    .console = &duda_console_obj,
    .logger = &duda_logger_obj,
    .data = &duda_data_obj,
    .conf = &duda_conf_obj,
    .fconf = &duda_fconf_obj,
    .xtime = &duda_xtime_obj,
    .package = &duda_package_obj,
};

MK_PLUGIN_DECLARE(duda);

struct duda_self *duda_self(void)
{
    return duda_mk->self(MK_PLUGIN_SELF(duda));
}

void duda_misuse(duda_request_t *dr, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    if (!dr) {
        dr = duda_current_request;
    }
    struct duda_service *svc = dr && dr->svc ? dr->svc : duda_current;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (dr) {
        dr->misuse = true;
    }
    if (svc) {
        atomic_fetch_add(&svc->misuses, 1);
    }
    struct duda_self *self = duda_self();
    if (self) {
        atomic_fetch_add(&self->misuses, 1);
    }
    duda_mk->log(MK_PLUGIN_LOG_ERROR, "duda: service '%s': %s%s%s", svc ? svc->name : "?", msg,
                 dr && dr->path ? " on " : "", dr && dr->path ? dr->path : "");
}

static int duda_init(const struct mk_api *api, const char *conf_dir)
{
    duda_mk = api;
    if (!MK_API_HAS(api, route_table_add) || !MK_API_HAS(api, site_sections) ||
        !MK_API_HAS(api, timer_new) || !MK_API_HAS(api, metric_value)) {
        api->log(MK_PLUGIN_LOG_ERROR, "duda: needs a server with plugin ABI 3.20");
        return MK_ERR;
    }
    struct duda_self *self = calloc(1, sizeof(*self));
    if (!self || api->self_set(MK_PLUGIN_SELF(duda), self) != MK_OK) {
        free(self);
        api->log(MK_PLUGIN_LOG_ERROR, "duda: out of memory");
        return MK_ERR;
    }
    snprintf(self->conf_dir, sizeof(self->conf_dir), "%s", conf_dir ? conf_dir : ".");
    static const char *const labels[] = {"site", "service", NULL};
    self->m_family = api->metric_family("monkey_duda_service_requests_total", MK_METRIC_COUNTER,
                                        "Requests taken by a Duda service's routes, by site (its "
                                        "first ServerName) and service.",
                                        labels, NULL, 0);
    return MK_OK;
}

/* A worker stops: the services' values it made, and its Redis session store connections. */
static void duda_worker_exit(int worker_id)
{
    duda_global_worker_exit(worker_id);
#ifdef DUDA_HAVE_HIREDIS
    duda_session_redis_worker_exit();
#endif
}

static void duda_exit(void)
{
    duda_logger_shutdown();
    duda_session_shutdown();
    free(duda_self());
}

/* ---- [WEB_SERVICE] sections -------------------------------------------------- */

static void duda_service_free(struct duda_service *svc)
{
    if (!svc) {
        return;
    }
    duda_service_unload(svc);
    duda_service_put(svc); /* the site's: timers, sockets or threads may hold it longer */
}

static void duda_site_free(void *data)
{
    struct duda_site *site = data;

    if (!site) {
        return;
    }
    for (size_t i = 0; i < site->n; i++) {
        duda_service_free(site->svc[i]);
    }
    free(site->svc);
    free(site);
}

/* One [WEB_SERVICE] section, as the server fills it from duda_ws_schema. */
struct duda_ws_conf {
    char *name, *docroot, *confdir, *datadir, *logdir;
    bool enabled, root;
};

static int duda_ws_name_check(const char *value, char *reason, size_t len)
{
    if (duda_router_name_ok(value)) {
        return MK_OK;
    }
    snprintf(reason, len,
             "'%s': 1 to 64 letters, digits, '_' or '-' (it is the service's path segment and "
             "file name)",
             value);
    return MK_ERR;
}

static int duda_ws_finish(void *obj, int site, const char **key, char *reason, size_t len)
{
    const struct duda_ws_conf *ws = obj;
    (void) site;
    (void) key;
    if (!ws->name) {
        snprintf(reason, len, "[WEB_SERVICE] without Name");
        return MK_ERR;
    }
    return MK_OK;
}

#define DUDA_WS_FIELD(m) MK_CONF_FIELD(struct duda_ws_conf, m)
static const struct mk_conf_key duda_ws_keys[] = {
    {"Name", MK_CONF_STRING, MK_CONF_SITE, DUDA_WS_FIELD(name), 0, 64, NULL,
     .check = duda_ws_name_check, .doc = "the service: ServicesRoot/NAME.duda, answering /NAME"},
    {"Enabled", MK_CONF_BOOL, MK_CONF_SITE, DUDA_WS_FIELD(enabled), 0, 0, "On",
     .doc = "Off keeps the section without loading the service"},
    {"Root", MK_CONF_BOOL, MK_CONF_SITE, DUDA_WS_FIELD(root), 0, 0, "Off",
     .doc = "the service owns the whole site, without the /NAME prefix"},
    {"DocumentRoot", MK_CONF_PATH, MK_CONF_SITE, DUDA_WS_FIELD(docroot), 0, 0, NULL,
     .doc = "the service's static files"},
    {"ConfDir", MK_CONF_PATH, MK_CONF_SITE, DUDA_WS_FIELD(confdir), 0, 0, NULL,
     .doc = "the service's configuration files"},
    {"DataDir", MK_CONF_PATH, MK_CONF_SITE, DUDA_WS_FIELD(datadir), 0, 0, NULL,
     .doc = "the service's data files"},
    {"LogDir", MK_CONF_PATH, MK_CONF_SITE, DUDA_WS_FIELD(logdir), 0, 0, NULL,
     .doc = "the service's log files"},
    {NULL},
};

/* [WEB_SERVICE], once per service in a site file (plugin ABI 3.4 section_schemas). */
static const struct mk_conf_schema duda_ws_schema = {
    .section = "WEB_SERVICE",
    .keys = duda_ws_keys,
    .site_size = sizeof(struct duda_ws_conf),
    .finish = duda_ws_finish,
};

static char *duda_strdup_opt(const char *s, bool *oom)
{
    char *p = s ? strdup(s) : NULL;
    if (s && !p) {
        *oom = true;
    }
    return p;
}

/* The service of section `ws` (its header at `at`, "file:line"), loaded for site s. */
static int duda_site_add(struct duda_site *site, const struct mk_site *s,
                         const struct duda_ws_conf *ws, const char *at, char *err, size_t errlen)
{
    const struct duda_conf *conf = duda_mk->plugin_conf(s, MK_PLUGIN_SELF(duda));
    char file[PATH_MAX];
    bool oom = false;

    for (size_t i = 0; i < site->n; i++) {
        if (!strcmp(site->svc[i]->name, ws->name)) {
            snprintf(err, errlen, "%s: service '%s' is given twice for this site", at, ws->name);
            return MK_ERR;
        }
        if (site->svc[i]->root && ws->root && ws->enabled) {
            snprintf(err, errlen, "%s: Root On for '%s': '%s' already owns the site", at, ws->name,
                     site->svc[i]->name);
            return MK_ERR;
        }
    }
    if (!ws->enabled) {
        return MK_OK;
    }
    struct duda_service *svc = calloc(1, sizeof(*svc));
    struct duda_service **v = realloc(site->svc, (site->n + 1) * sizeof(*v));
    if (!svc || !v) {
        free(svc);
        snprintf(err, errlen, "%s: out of memory", at);
        return MK_ERR;
    }
    site->svc = v;
    snprintf(file, sizeof(file), "%s/%s.duda", conf->services_root, ws->name);
    svc->name = duda_strdup_opt(ws->name, &oom);
    svc->root = ws->root;
    svc->docroot = duda_strdup_opt(ws->docroot, &oom);
    svc->confdir = duda_strdup_opt(ws->confdir, &oom);
    svc->datadir = duda_strdup_opt(ws->datadir, &oom);
    svc->logdir = duda_strdup_opt(ws->logdir, &oom);
    svc->file = duda_strdup_opt(file, &oom);
    svc->packages_root = duda_strdup_opt(conf->packages_root, &oom);
    if (conf->session_store && strcmp(conf->session_store, "memory") != 0) {
        svc->session_store = duda_strdup_opt(conf->session_store, &oom);
    }
    svc->docroot_fd = -1;
    const char *names = duda_mk->site_name(s, 0);
    const char *labels[] = {names ? names : "", ws->name};
    svc->m_requests = duda_mk->metric_series(duda_self()->m_family, labels);
    atomic_init(&svc->refs, 1); /* the site's, until duda_service_free */
    site->svc[site->n++] = svc;
    if (oom) {
        snprintf(err, errlen, "%s: out of memory", at);
        return MK_ERR;
    }
    char inner[512];
    if (duda_service_load(svc, inner, sizeof(inner)) != MK_OK ||
        duda_service_globals(svc, inner, sizeof(inner)) != MK_OK) {
        snprintf(err, errlen, "%s: [WEB_SERVICE] %s: %s", at, svc->name, inner);
        return MK_ERR;
    }
    return MK_OK;
}

static int duda_site_init(const struct mk_site *s, const struct mk_conf *conf, void **data,
                          char *err, size_t errlen)
{
    const char *where = duda_mk->conf_path(conf);
    size_t n = 0;

    *data = NULL;
    struct duda_site *site = calloc(1, sizeof(*site));
    if (!site) {
        snprintf(err, errlen, "%s: out of memory", where);
        return MK_ERR;
    }
    *data = site; /* the server frees it with duda_site_free, also on an error */
    const struct mk_conf_instance *ws =
        duda_mk->site_sections(s, MK_PLUGIN_SELF(duda), "WEB_SERVICE", &n);
    for (size_t i = 0; i < n; i++) {
        char at[MK_CONF_AT_LEN];
        mk_api_conf_at(duda_mk, conf, ws[i].line, at, sizeof(at));
        if (duda_site_add(site, s, ws[i].obj, at, err, errlen) != MK_OK) {
            return MK_ERR;
        }
    }
    return MK_OK;
}

/* The counters in the server's status (monkey-ctl status, the control plugin's JSON). */
static void duda_stats(mk_stats_emit_cb emit, void *arg)
{
    struct duda_self *self = duda_self();

    if (self) {
        emit(arg, "requests", atomic_load_explicit(&self->requests, memory_order_relaxed));
        emit(arg, "misuses", atomic_load_explicit(&self->misuses, memory_order_relaxed));
        emit(arg, "sessions", duda_session_count());
    }
}

/* The routes hook: each service of the site, after the site's site_init() loaded them. */
static int duda_routes(const struct mk_site *s, struct mk_route_table *t, char *err, size_t errlen)
{
    const struct duda_site *site = s ? duda_mk->site_data(s, MK_PLUGIN_SELF(duda)) : NULL;

    for (size_t i = 0; site && i < site->n; i++) {
        if (duda_service_routes(t, site->svc[i], err, errlen) != MK_OK) {
            return MK_ERR;
        }
    }
    return MK_OK;
}

MK_PLUGIN_DEFINE(duda) = {
    MK_PLUGIN_ABI_INIT,
    .name = "duda",
    .version = "1.0",
    .description = "Duda: web services in C as shared objects",
    .init = duda_init,
    .exit = duda_exit,
    .reopen_logs = duda_logger_reopen,
    .site_init = duda_site_init,
    .site_free = duda_site_free,
    .conf_schema = &duda_schema,
    .stats = duda_stats,
    .section_schemas = (const struct mk_conf_schema *const[]){&duda_ws_schema, NULL},
    .worker_exit = duda_worker_exit,
    .routes = duda_routes,
};
