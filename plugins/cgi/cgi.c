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

#define CGI_REDIRECTS_MAX 5

const struct mk_api *cgi_api;

MK_PLUGIN_DECLARE(cgi);

static int cgi_init(const struct mk_api *api, const char *conf_dir)
{
    (void) conf_dir;
    cgi_api = api;
    if (!MK_API_HAS(api, serve_file)) {
        api->log(MK_PLUGIN_LOG_ERROR, "cgi: needs a server with plugin ABI 3.4");
        return MK_ERR;
    }
    struct cgi_self *self = calloc(1, sizeof(*self));
    if (!self || api->self_set(MK_PLUGIN_SELF(cgi), self) != MK_OK) {
        free(self);
        api->log(MK_PLUGIN_LOG_ERROR, "cgi: out of memory");
        return MK_ERR;
    }
    return MK_OK;
}

static void cgi_exit(void)
{
    free(cgi_api->self(MK_PLUGIN_SELF(cgi)));
}

static void cgi_worker_exit(int id)
{
    (void) id;
    cgi_job_worker_exit();
}

static int cgi_run(struct mk_request *r, const char *path, size_t len, bool redirected,
                   const char *query)
{
    const struct mk_site *site = cgi_api->site(r);
    const struct cgi_site_conf *sc = cgi_api->site_conf(site, MK_PLUGIN_SELF(cgi));
    struct cgi_target t;

    int rc = cgi_map_request(r, sc, path, len, &t);
    if (rc != MK_OK) {
        return rc;
    }
    /* RFC 3875 4.1.18: credentials only for a site that asks for them. */
    t.gw.pass_authorization = t.gw.pass_proxy_authorization = sc->pass_authorization;
    if (redirected) {
        t.gw.method = "GET";
        t.gw.query = query ? query : "";
        t.gw.uri = path;
    }
    return cgi_job_start(r, &t, cgi_api->plugin_conf(site, MK_PLUGIN_SELF(cgi)),
                         cgi_api->self(MK_PLUGIN_SELF(cgi)), redirected);
}

static int cgi_content(struct mk_request *r)
{
    const struct cgi_site_conf *sc = cgi_api->site_conf(cgi_api->site(r), MK_PLUGIN_SELF(cgi));
    if (!sc || (sc->n_aliases == 0 && sc->n_matches == 0)) {
        return MK_DECLINED;
    }
    size_t len;
    const char *path = cgi_api->path(r, &len);
    return cgi_run(r, path, len, false, NULL);
}

static int cgi_hex(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/*
 * Decode a local redirect's path in place: %XX escapes (not to NUL or
 * '/'), and no "." or ".." segment nor "//". MK_OK or MK_ERR.
 */
static int cgi_path_decode(char *p)
{
    char *w = p;
    for (const char *s = p; *s; s++) {
        if (*s == '%') {
            int hi = cgi_hex(s[1]), lo = hi >= 0 ? cgi_hex(s[2]) : -1;
            if (lo < 0 || (hi == 0 && lo == 0) || (hi == 2 && (lo == 15))) {
                return MK_ERR;
            }
            *w++ = (char) (hi * 16 + lo);
            s += 2;
        }
        else {
            *w++ = *s;
        }
    }
    *w = '\0';
    return strstr(p, "//") || strstr(p, "/./") || strstr(p, "/../") ||
                   (strlen(p) >= 2 && strcmp(p + strlen(p) - 2, "/.") == 0) ||
                   (strlen(p) >= 3 && strcmp(p + strlen(p) - 3, "/..") == 0)
               ? MK_ERR
               : MK_OK;
}

int cgi_local_redirect(struct mk_request *r, const char *location)
{
    uintptr_t n = (uintptr_t) cgi_api->ctx_get(r, MK_PLUGIN_SELF(cgi));
    if (n >= CGI_REDIRECTS_MAX) {
        cgi_api->log(MK_PLUGIN_LOG_ERROR, "cgi: more than %d local redirects for one request",
                     CGI_REDIRECTS_MAX);
        return 500;
    }
    cgi_api->ctx_set(r, MK_PLUGIN_SELF(cgi), (void *) (n + 1), NULL);
    size_t len = strlen(location);
    char *path = cgi_api->alloc(r, len + 1);
    if (!path) {
        return 500;
    }
    memcpy(path, location, len + 1);
    char *query = strchr(path, '?');
    if (query) {
        *query++ = '\0';
    }
    char *frag = strchr(query ? query : path, '#');
    if (frag) {
        *frag = '\0';
    }
    char *raw = cgi_api->alloc(r, strlen(path) + 1); /* as written, for serve_file */
    if (!raw) {
        return 500;
    }
    memcpy(raw, path, strlen(path) + 1);
    if (cgi_path_decode(path) != MK_OK) {
        return 502;
    }
    int rc = cgi_run(r, path, strlen(path), true, query);
    if (rc != MK_DECLINED) {
        return rc;
    }
    /* Not a script: the file, as the static handler sends it (Content-Type and all). */
    rc = cgi_api->serve_file(r, raw);
    return rc == MK_ERR ? 502 : rc;
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
    emit(arg, "timeouts", atomic_load_explicit(&self->timeouts, memory_order_relaxed));
    emit(arg, "bad_heads", atomic_load_explicit(&self->bad_heads, memory_order_relaxed));
    emit(arg, "killed", atomic_load_explicit(&self->killed, memory_order_relaxed));
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
    .conf_schema = &cgi_schema,
    .stats = cgi_stats,
};
