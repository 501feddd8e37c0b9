/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * cgi.c: the CGI plugin (RFC 3875). A site's [CGI] section says which
 * paths are scripts (ScriptAlias, Match) and which programs run which
 * extensions (Interpreter); the content hook runs the script of such a
 * request (cgi_job.c) and streams its answer back. See README.md.
 *
 * State: the counters and the running-script count live in a struct
 * cgi_self per server (api->self_set); running jobs on their worker's list
 * (cgi_job.c). The settings are the declared keys of the configuration the
 * request belongs to.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgi.h"

const struct mk_api *cgi_api;

MK_PLUGIN_DECLARE(cgi);

static int cgi_init(const struct mk_api *api, const char *conf_dir)
{
    (void) conf_dir;
    cgi_api = api;
    if (!MK_API_HAS(api, metric_value)) {
        api->log(MK_PLUGIN_LOG_ERROR, "cgi: needs a server with plugin ABI 3.20");
        return MK_ERR;
    }
    struct cgi_self *self = calloc(1, sizeof(*self));
    if (!self || api->self_set(MK_PLUGIN_SELF(cgi), self) != MK_OK) {
        free(self);
        api->log(MK_PLUGIN_LOG_ERROR, "cgi: out of memory");
        return MK_ERR;
    }
    mk_gw_metrics_families(api, "cgi", &self->mf);
    return MK_OK;
}

static void cgi_exit(void)
{
    struct cgi_self *self = cgi_api->self(MK_PLUGIN_SELF(cgi));
    if (self) {
        unsigned n = atomic_load(&self->n_be);
        for (unsigned i = 0; i < n; i++) {
            free(self->be[i].program);
        }
    }
    free(self);
}

/* The backend of program's metrics, declared (again, once a configuration only checked
   kept none); past CGI_MBACKENDS_MAX, none. Controlling thread. */
static void cgi_mbackend(struct cgi_self *self, const char *program)
{
    unsigned n = atomic_load_explicit(&self->n_be, memory_order_relaxed);
    struct cgi_mbackend *b = NULL;

    for (unsigned i = 0; i < n && !b; i++) {
        if (strcmp(self->be[i].program, program) == 0) {
            b = &self->be[i];
        }
    }
    if (!b) {
        char *copy = n < CGI_MBACKENDS_MAX ? strdup(program) : NULL;
        if (!copy) {
            return;
        }
        b = &self->be[n];
        b->program = copy;
        b->m.requests = -1;
        atomic_store_explicit(&self->n_be, n + 1, memory_order_release);
    }
    if (b->m.requests < 0) {
        mk_gw_metrics_series(cgi_api, &self->mf, program, &b->m);
    }
}

/* A site's backends: its interpreters, and scripts run themselves. */
static int cgi_site_init(const struct mk_site *site, const struct mk_conf *conf, void **data,
                         char *err, size_t errlen)
{
    const struct cgi_site_conf *sc = cgi_api->site_conf(site, MK_PLUGIN_SELF(cgi));
    struct cgi_self *self = cgi_api->self(MK_PLUGIN_SELF(cgi));

    (void) conf, (void) err, (void) errlen;
    *data = NULL;
    if (!sc || (sc->n_aliases == 0 && sc->n_matches == 0) || !self) {
        return MK_OK;
    }
    cgi_mbackend(self, CGI_MBACKEND_EXEC);
    for (size_t i = 0; i < sc->n_interps; i++) {
        cgi_mbackend(self, sc->interps[i].program);
    }
    return MK_OK;
}

const struct mk_gw_metrics *cgi_metrics_of(struct cgi_self *self, const char *interpreter)
{
    const char *program = interpreter ? interpreter : CGI_MBACKEND_EXEC;
    unsigned n = atomic_load_explicit(&self->n_be, memory_order_acquire);

    for (unsigned i = 0; i < n; i++) {
        if (strcmp(self->be[i].program, program) == 0) {
            return &self->be[i].m;
        }
    }
    return NULL;
}

static void cgi_worker_exit(int id)
{
    (void) id;
    cgi_job_worker_exit();
}

static int cgi_content(struct mk_request *r)
{
    const struct mk_site *site = cgi_api->site(r);
    const struct cgi_site_conf *sc = cgi_api->site_conf(site, MK_PLUGIN_SELF(cgi));
    if (!sc || (sc->n_aliases == 0 && sc->n_matches == 0)) {
        return MK_DECLINED;
    }
    size_t len;
    const char *path = cgi_api->path(r, &len);
    struct cgi_target t;
    int rc = cgi_map_request(r, sc, path, len, &t);
    if (rc != MK_OK) {
        return rc;
    }
    /* RFC 3875 4.1.18: credentials only for a site that asks for them. */
    t.gw.pass_authorization = t.gw.pass_proxy_authorization = sc->pass_authorization;
    return cgi_job_start(r, &t, cgi_api->plugin_conf(site, MK_PLUGIN_SELF(cgi)),
                         cgi_api->self(MK_PLUGIN_SELF(cgi)));
}

int cgi_local_redirect(struct mk_request *r, const char *location)
{
    int rc = cgi_api->internal_redirect(r, location);
    if (rc == MK_ERR) {
        cgi_api->error_log(r, "cgi: a local redirect to a malformed path: %s", location);
        return 502;
    }
    return rc;
}

static void cgi_stats(mk_stats_emit_cb emit, void *arg)
{
    struct cgi_self *self = cgi_api->self(MK_PLUGIN_SELF(cgi));
    if (!self) {
        return;
    }
    emit(arg, "running", (uint64_t) atomic_load_explicit(&self->running, memory_order_relaxed));
    emit(arg, "spawned", atomic_load_explicit(&self->spawned, memory_order_relaxed));
    emit(arg, "refused", atomic_load_explicit(&self->refused, memory_order_relaxed));
    emit(arg, "timeouts", atomic_load_explicit(&self->gw.timeouts, memory_order_relaxed));
    emit(arg, "bad_heads", atomic_load_explicit(&self->gw.bad_gateway, memory_order_relaxed));
    emit(arg, "killed", atomic_load_explicit(&self->killed, memory_order_relaxed));
    /* per backend, in the order the sites named them: the counters of the metrics endpoint */
    unsigned n = atomic_load_explicit(&self->n_be, memory_order_acquire);
    for (unsigned i = 0; i < n; i++) {
        uint64_t requests, failures;
        char name[48];
        if (!mk_gw_metrics_figures(cgi_api, &self->be[i].m, (1u << MK_GW_FAILS) - 1, &requests,
                                   &failures)) {
            continue;
        }
        snprintf(name, sizeof(name), "backend%u_requests", i);
        emit(arg, name, requests);
        snprintf(name, sizeof(name), "backend%u_failures", i);
        emit(arg, name, failures);
    }
}

MK_PLUGIN_DEFINE(cgi) = {
    MK_PLUGIN_ABI_INIT,
    .name = "cgi",
    .version = "1.0",
    .description = "CGI/1.1 scripts (RFC 3875), streamed both ways",
    .init = cgi_init,
    .exit = cgi_exit,
    .worker_exit = cgi_worker_exit,
    .content = cgi_content,
    .site_init = cgi_site_init,
    .conf_schema = &cgi_schema,
    .stats = cgi_stats,
};
