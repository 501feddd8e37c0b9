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
    if (!MK_API_HAS(api, route_add) || !MK_API_HAS(api, stream_start)) {
        api->log(MK_PLUGIN_LOG_ERROR, "duda: needs a server with plugin ABI 3.2");
        return MK_ERR;
    }
    struct duda_self *self = calloc(1, sizeof(*self));
    if (!self || api->self_set(MK_PLUGIN_SELF(duda), self) != MK_OK) {
        free(self);
        api->log(MK_PLUGIN_LOG_ERROR, "duda: out of memory");
        return MK_ERR;
    }
    snprintf(self->conf_dir, sizeof(self->conf_dir), "%s", conf_dir ? conf_dir : ".");
    return MK_OK;
}

static void duda_exit(void)
{
    duda_logger_shutdown();
    duda_sessions_shutdown();
    free(duda_self());
}

/* ---- [WEB_SERVICE] sections -------------------------------------------------- */

static void duda_service_free(struct duda_service *svc)
{
    if (!svc) {
        return;
    }
    duda_service_unload(svc);
    free(svc->name);
    free(svc->docroot);
    free(svc->confdir);
    free(svc->datadir);
    free(svc->logdir);
    free(svc->file);
    free(svc->packages_root);
    free(svc);
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

/* A section being read: its values and where they were given. */
struct duda_section {
    int header;
    int line; /* of its first entry */
    char *name, *docroot, *confdir, *datadir, *logdir;
    bool enabled, root;
};

static int duda_bool(const char *value, bool *out)
{
    if (!strcasecmp(value, "on") || !strcasecmp(value, "yes") || !strcasecmp(value, "true") ||
        !strcmp(value, "1")) {
        *out = true;
        return MK_OK;
    }
    if (!strcasecmp(value, "off") || !strcasecmp(value, "no") || !strcasecmp(value, "false") ||
        !strcmp(value, "0")) {
        *out = false;
        return MK_OK;
    }
    return MK_ERR;
}

/* `value` made absolute against the configuration directory. */
static char *duda_path(const char *value)
{
    char buf[PATH_MAX];

    if (value[0] == '/') {
        return strdup(value);
    }
    int n = snprintf(buf, sizeof(buf), "%s/%s", duda_self()->conf_dir, value);
    return n < 0 || (size_t) n >= sizeof(buf) ? NULL : strdup(buf);
}

static int duda_section_entry(struct duda_section *sec, const char *key, const char *value,
                              const char *where, int line, char *err, size_t errlen)
{
    char **slot = NULL;
    bool *flag = NULL;

    if (!strcasecmp(key, "Name")) {
        slot = &sec->name;
    }
    else if (!strcasecmp(key, "DocumentRoot")) {
        slot = &sec->docroot;
    }
    else if (!strcasecmp(key, "ConfDir")) {
        slot = &sec->confdir;
    }
    else if (!strcasecmp(key, "DataDir")) {
        slot = &sec->datadir;
    }
    else if (!strcasecmp(key, "LogDir")) {
        slot = &sec->logdir;
    }
    else if (!strcasecmp(key, "Enabled")) {
        flag = &sec->enabled;
    }
    else if (!strcasecmp(key, "Root")) {
        flag = &sec->root;
    }
    else {
        snprintf(err, errlen, "%s:%d: unknown key '%s' in [WEB_SERVICE]", where, line, key);
        return MK_ERR;
    }
    if (flag) {
        if (duda_bool(value, flag) != MK_OK) {
            snprintf(err, errlen, "%s:%d: %s: '%s' is not On or Off", where, line, key, value);
            return MK_ERR;
        }
        return MK_OK;
    }
    if (*slot) {
        snprintf(err, errlen, "%s:%d: '%s' is given twice", where, line, key);
        return MK_ERR;
    }
    if (slot == &sec->name) {
        if (!duda_router_name_ok(value)) {
            snprintf(err, errlen,
                     "%s:%d: Name '%s': 1 to 64 letters, digits, '_' or '-' (it is the "
                     "service's path segment and file name)",
                     where, line, value);
            return MK_ERR;
        }
        *slot = strdup(value);
    }
    else {
        *slot = duda_path(value);
    }
    if (!*slot) {
        snprintf(err, errlen, "%s:%d: out of memory", where, line);
        return MK_ERR;
    }
    return MK_OK;
}

static void duda_section_clear(struct duda_section *sec)
{
    free(sec->name);
    free(sec->docroot);
    free(sec->confdir);
    free(sec->datadir);
    free(sec->logdir);
    *sec = (struct duda_section){0};
}

static int duda_site_add(struct duda_site *site, const struct mk_site *s, struct duda_section *sec,
                         const char *where, char *err, size_t errlen)
{
    const struct duda_conf *conf = duda_mk->plugin_conf(s, MK_PLUGIN_SELF(duda));
    char file[PATH_MAX];

    if (!sec->name) {
        snprintf(err, errlen, "%s:%d: [WEB_SERVICE] without Name", where, sec->header);
        return MK_ERR;
    }
    for (size_t i = 0; i < site->n; i++) {
        if (!strcmp(site->svc[i]->name, sec->name)) {
            snprintf(err, errlen, "%s:%d: service '%s' is given twice for this site", where,
                     sec->header, sec->name);
            return MK_ERR;
        }
        if (site->svc[i]->root && sec->root && sec->enabled) {
            snprintf(err, errlen, "%s:%d: Root On for '%s': '%s' already owns the site", where,
                     sec->header, sec->name, site->svc[i]->name);
            return MK_ERR;
        }
    }
    if (!sec->enabled) {
        return MK_OK;
    }
    struct duda_service *svc = calloc(1, sizeof(*svc));
    struct duda_service **v = realloc(site->svc, (site->n + 1) * sizeof(*v));
    if (!svc || !v) {
        free(svc);
        snprintf(err, errlen, "%s:%d: out of memory", where, sec->header);
        return MK_ERR;
    }
    site->svc = v;
    snprintf(file, sizeof(file), "%s/%s.duda", conf->services_root, sec->name);
    svc->name = sec->name;
    svc->root = sec->root;
    svc->docroot = sec->docroot;
    svc->confdir = sec->confdir;
    svc->datadir = sec->datadir;
    svc->logdir = sec->logdir;
    svc->file = strdup(file);
    svc->packages_root = conf->packages_root ? strdup(conf->packages_root) : NULL;
    svc->docroot_fd = -1;
    int header = sec->header;
    *sec = (struct duda_section){0};
    site->svc[site->n++] = svc;
    if (!svc->file) {
        snprintf(err, errlen, "%s: out of memory", where);
        return MK_ERR;
    }
    char inner[512];
    if (duda_service_load(svc, inner, sizeof(inner)) != MK_OK ||
        duda_service_routes(s, svc, inner, sizeof(inner)) != MK_OK) {
        snprintf(err, errlen, "%s:%d: [WEB_SERVICE] %s: %s", where, header, svc->name, inner);
        return MK_ERR;
    }
    return MK_OK;
}

static int duda_site_init(const struct mk_site *s, const struct mk_conf *conf, void **data,
                          char *err, size_t errlen)
{
    const char *section, *key, *value;
    struct duda_section sec = {0};
    void *cursor = NULL;
    int line, rc = MK_OK;
    const char *where = duda_mk->conf_path(conf);

    *data = NULL;
    struct duda_site *site = calloc(1, sizeof(*site));
    if (!site) {
        snprintf(err, errlen, "%s: out of memory", where);
        return MK_ERR;
    }
    *data = site; /* the server frees it with duda_site_free, also on an error */
    while (rc == MK_OK && duda_mk->conf_next(conf, &cursor, &section, &key, &value, &line)) {
        if (strcasecmp(section, "WEB_SERVICE") != 0) {
            continue;
        }
        int header = duda_mk->conf_section_line(cursor);
        if (header != sec.header) {
            if (sec.header) {
                rc = duda_site_add(site, s, &sec, where, err, errlen);
                duda_section_clear(&sec);
                if (rc != MK_OK) {
                    break;
                }
            }
            sec = (struct duda_section){.header = header, .line = line, .enabled = true};
        }
        rc = duda_section_entry(&sec, key, value, where, line, err, errlen);
    }
    if (rc == MK_OK && sec.header) {
        rc = duda_site_add(site, s, &sec, where, err, errlen);
    }
    duda_section_clear(&sec);
    return rc;
}

/* The counters in the server's status (monkey-ctl status, the control plugin's JSON). */
static void duda_stats(mk_stats_emit_cb emit, void *arg)
{
    struct duda_self *self = duda_self();

    if (self) {
        emit(arg, "requests", atomic_load_explicit(&self->requests, memory_order_relaxed));
        emit(arg, "misuses", atomic_load_explicit(&self->misuses, memory_order_relaxed));
        emit(arg, "sessions", duda_sessions_count());
    }
}

MK_PLUGIN_DEFINE(duda) = {
    MK_PLUGIN_ABI_INIT,
    .name = "duda",
    .version = "1.0",
    .description = "Duda: web services in C as shared objects",
    .init = duda_init,
    .exit = duda_exit,
    .reopen_logs = duda_logger_reopen,
    .site_sections = (const char *const[]){"WEB_SERVICE", NULL},
    .site_init = duda_site_init,
    .site_free = duda_site_free,
    .conf_schema = &duda_schema,
    .stats = duda_stats,
};
