/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * skeleton.c: the template for new plugins. Copy this folder, rename the
 * plugin, keep the hooks you need. It shows every stage of the request,
 * reading a configuration file with the server's reader (errors name file
 * and line), a reload that changes nothing unless the whole configuration
 * is valid (reload_prepare, reload_commit), a section of its own in site
 * files, asking for a request body (MK_AGAIN), blocking work moved off the
 * worker (api->task) and the batch hook.
 *
 * Settings reach the request hooks through the site data: site_init() gives
 * every site of a configuration a copy of the plugin-wide settings it was
 * built with, so a request sees one consistent set for its whole life, and
 * a reload never writes what a worker is reading.
 *
 * Behaviour (with the default conf/plugins/skeleton.conf):
 *   GET  /skeleton          200, the configured Message, or the site's
 *                           [SKELETON] Greeting when the site has one
 *   POST /skeleton/echo     200, the request body echoed back
 *   GET  /skeleton/stats    200, "requests N connections M batches B"
 *   GET  /skeleton/slow?ms=N  200 after N ms (default 50, at most 10000)
 *                           slept on a task thread: the worker goes on
 *   any request with header "X-Skeleton-Deny"    403 (request stage)
 *   every response from this plugin carries "X-Skeleton-Worker: <id>"
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <strings.h>

#include <monkey/mk_plugin.h>

#define SKELETON_MAX 256

/* Plugin-wide settings (skeleton.conf). */
struct skeleton_settings {
    char path[SKELETON_MAX];
    char message[SKELETON_MAX];
};

/* What site_init() stores for every site. */
struct skeleton_site {
    struct skeleton_settings settings; /* of the configuration the site belongs to */
    char *greeting;                    /* [SKELETON] Greeting, NULL when not given */
};

static const struct mk_api *api;
static const struct skeleton_settings skeleton_defaults = {"/skeleton",
                                                           "Hello from the skeleton plugin\n"};
/* In force, and a reload's between reload_prepare and reload_commit. Controlling thread. */
static struct skeleton_settings skeleton_live, skeleton_pending;
static int skeleton_have_pending;
static char skeleton_conf[4096];
static atomic_ulong skeleton_requests;
static atomic_ulong skeleton_connections;
static atomic_ulong skeleton_batches;

MK_PLUGIN_DECLARE(skeleton);

/*
 * Read conf_dir/plugins/skeleton.conf ([SKELETON] Path, Message) into *out.
 * Absent: defaults. MK_ERR with "file:line: reason" in err.
 */
static int skeleton_read_conf(struct skeleton_settings *out, char *err, size_t errlen)
{
    const char *section, *key, *value;
    void *cursor = NULL;
    int line;

    *out = skeleton_defaults;
    if (!skeleton_conf[0]) {
        return MK_OK;
    }
    struct mk_conf *conf = api->conf_load(skeleton_conf, err, errlen);
    if (!conf) {
        return strstr(err, "No such file") ? MK_OK : MK_ERR;
    }
    while (api->conf_next(conf, &cursor, &section, &key, &value, &line)) {
        if (strcasecmp(section, "SKELETON") != 0) {
            snprintf(err, errlen, "%s:%d: unknown section [%s]", api->conf_path(conf), line,
                     section);
            api->conf_free(conf);
            return MK_ERR;
        }
        if (strcasecmp(key, "Path") == 0 && value[0] == '/' && strlen(value) < 200) {
            snprintf(out->path, sizeof(out->path), "%s", value);
        }
        else if (strcasecmp(key, "Message") == 0 && strlen(value) < SKELETON_MAX - 2) {
            snprintf(out->message, sizeof(out->message), "%s\n", value);
        }
        else {
            snprintf(err, errlen, "%s:%d: bad key or value '%s %s'", api->conf_path(conf), line,
                     key, value);
            api->conf_free(conf);
            return MK_ERR;
        }
    }
    api->conf_free(conf);
    return MK_OK;
}

static int skeleton_init(const struct mk_api *server_api, const char *conf_dir)
{
    char err[4096 + 512];

    api = server_api;
    skeleton_have_pending = 0;
    if (conf_dir) {
        snprintf(skeleton_conf, sizeof(skeleton_conf), "%s/plugins/skeleton.conf", conf_dir);
    }
    if (skeleton_read_conf(&skeleton_live, err, sizeof(err)) != MK_OK) {
        api->log(MK_PLUGIN_LOG_ERROR, "skeleton: %s", err);
        return MK_ERR;
    }
    return MK_OK;
}

/* Reload, step one: read the file aside; the settings in force stay as they are. */
static int skeleton_reload_prepare(char *err, size_t errlen)
{
    if (skeleton_read_conf(&skeleton_pending, err, errlen) != MK_OK) {
        return MK_ERR;
    }
    skeleton_have_pending = 1;
    return MK_OK;
}

/*
 * Reload, step two: keep the new settings (the sites of the new
 * configuration already carry them) or forget them.
 */
static void skeleton_reload_commit(int commit)
{
    if (commit) {
        skeleton_live = skeleton_pending;
    }
    skeleton_have_pending = 0;
}

static int skeleton_conn_accept(struct mk_conn *c)
{
    (void) c;
    atomic_fetch_add_explicit(&skeleton_connections, 1, memory_order_relaxed);
    return MK_OK;
}

static int skeleton_request(struct mk_request *r)
{
    size_t len;
    if (api->header(r, "X-Skeleton-Deny", &len)) {
        return 403;
    }
    return MK_OK;
}

/* Does the request path equal the site's Path + suffix? */
static int skeleton_match(struct mk_request *r, const struct skeleton_site *site,
                          const char *suffix)
{
    size_t len, plen = strlen(site->settings.path), slen = strlen(suffix);
    const char *p = api->path(r, &len);
    return len == plen + slen && memcmp(p, site->settings.path, plen) == 0 &&
           memcmp(p + plen, suffix, slen) == 0;
}

static void skeleton_worker_header(struct mk_request *r)
{
    char id[16];
    snprintf(id, sizeof(id), "%d", api->worker_id());
    api->add_header(r, "X-Skeleton-Worker", id);
}

/* ---- a site section: [SKELETON] Greeting TEXT ----------------------------- */

static void skeleton_site_free(void *data)
{
    struct skeleton_site *site = data;

    if (site) {
        free(site->greeting);
        free(site);
    }
}

static int skeleton_site_init(const struct mk_site *site, const struct mk_conf *conf, void **data,
                              char *err, size_t errlen)
{
    const char *section, *key, *value;
    void *cursor = NULL;
    int line;

    (void) site;
    struct skeleton_site *s = calloc(1, sizeof(*s));
    *data = s;
    if (!s) {
        snprintf(err, errlen, "%s: out of memory", api->conf_path(conf));
        return MK_ERR;
    }
    /* The settings of the configuration being built: a reload's, while one is prepared. */
    s->settings = skeleton_have_pending ? skeleton_pending : skeleton_live;
    while (api->conf_next(conf, &cursor, &section, &key, &value, &line)) {
        if (strcasecmp(section, "SKELETON") != 0) {
            continue; /* [HOST] and other plugins' sections */
        }
        if (strcasecmp(key, "Greeting") != 0 || s->greeting) {
            snprintf(err, errlen, "%s:%d: [SKELETON] takes one Greeting, not '%s'",
                     api->conf_path(conf), line, key);
            return MK_ERR; /* the server frees what *data holds */
        }
        size_t n = strlen(value);
        s->greeting = malloc(n + 2);
        if (!s->greeting) {
            snprintf(err, errlen, "%s:%d: out of memory", api->conf_path(conf), line);
            return MK_ERR;
        }
        memcpy(s->greeting, value, n);
        memcpy(s->greeting + n, "\n", 2);
    }
    return MK_OK;
}

/* ---- blocking work on a task thread ---------------------------------------- */

struct skeleton_slow {
    long ms;
    char reply[64];
};

/* On a task thread: it may block. */
static void skeleton_slow_work(void *arg)
{
    struct skeleton_slow *job = arg;
    struct timespec ts = {job->ms / 1000, (job->ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    snprintf(job->reply, sizeof(job->reply), "slept %ld ms\n", job->ms);
}

/* Back on the request's worker; r is NULL if the request is gone. */
static int skeleton_slow_done(struct mk_request *r, void *arg)
{
    struct skeleton_slow *job = arg;
    int rc = MK_OK;

    if (r) {
        api->set_status(r, 200);
        api->set_content_type(r, "text/plain; charset=utf-8");
        rc = api->set_body(r, job->reply, strlen(job->reply)) == MK_OK ? MK_OK : 503;
    }
    free(job);
    return rc;
}

static void skeleton_batch_done(int worker_id)
{
    (void) worker_id;
    atomic_fetch_add_explicit(&skeleton_batches, 1, memory_order_relaxed);
}

static int skeleton_content(struct mk_request *r)
{
    size_t mlen;
    const char *method = api->method(r, &mlen);
    const struct skeleton_site *site = api->site_data(api->site(r), MK_PLUGIN_SELF(skeleton));

    if (!site) {
        return MK_DECLINED; /* no site (a request refused before its Host was read) */
    }
    if (skeleton_match(r, site, "")) {
        /* Site data lives as long as the request's configuration: a static body is safe. */
        const char *text = site->greeting ? site->greeting : site->settings.message;
        api->set_status(r, 200);
        api->set_content_type(r, "text/plain; charset=utf-8");
        api->set_body_static(r, text, strlen(text));
        skeleton_worker_header(r);
        return MK_OK;
    }
    if (skeleton_match(r, site, "/slow")) {
        size_t qlen;
        const char *q = api->query(r, &qlen);
        struct skeleton_slow *job = calloc(1, sizeof(*job));
        if (!job) {
            return 503;
        }
        job->ms = 50;
        if (q && qlen > 3 && qlen < 12 && memcmp(q, "ms=", 3) == 0) {
            char num[12];
            memcpy(num, q + 3, qlen - 3);
            num[qlen - 3] = '\0';
            job->ms = strtol(num, NULL, 10);
        }
        if (job->ms < 0 || job->ms > 10000) {
            free(job);
            return 400;
        }
        skeleton_worker_header(r);
        int rc = api->task(r, skeleton_slow_work, skeleton_slow_done, job);
        if (rc != MK_SUSPENDED) {
            free(job);
            return 503;
        }
        return MK_SUSPENDED;
    }
    if (skeleton_match(r, site, "/echo")) {
        if (mlen != 4 || memcmp(method, "POST", 4) != 0) {
            api->add_header(r, "Allow", "POST");
            return 405;
        }
        size_t blen;
        const char *body = api->body(r, &blen);
        if (!body) {
            return MK_AGAIN; /* called again once the body has been read */
        }
        api->set_status(r, 200);
        api->set_content_type(r, "application/octet-stream");
        skeleton_worker_header(r);
        return api->set_body(r, body, blen) == MK_OK ? MK_OK : 503;
    }
    if (skeleton_match(r, site, "/stats")) {
        char buf[96];
        int n = snprintf(buf, sizeof(buf), "requests %lu connections %lu batches %lu\n",
                         atomic_load(&skeleton_requests), atomic_load(&skeleton_connections),
                         atomic_load(&skeleton_batches));
        api->set_status(r, 200);
        api->set_content_type(r, "text/plain; charset=utf-8");
        skeleton_worker_header(r);
        return api->set_body(r, buf, (size_t) n) == MK_OK ? MK_OK : 503;
    }
    return MK_DECLINED;
}

static void skeleton_request_done(struct mk_request *r)
{
    (void) r;
    atomic_fetch_add_explicit(&skeleton_requests, 1, memory_order_relaxed);
}

MK_PLUGIN_DEFINE(skeleton) = {
    MK_PLUGIN_ABI_INIT,
    .name = "skeleton",
    .version = "1.0",
    .description = "template plugin: every hook, documented",
    .init = skeleton_init,
    .reload_prepare = skeleton_reload_prepare,
    .reload_commit = skeleton_reload_commit,
    .conn_accept = skeleton_conn_accept,
    .request = skeleton_request,
    .content = skeleton_content,
    .request_done = skeleton_request_done,
    .site_sections = (const char *const[]){"SKELETON", NULL},
    .site_init = skeleton_site_init,
    .site_free = skeleton_site_free,
    .batch_done = skeleton_batch_done,
};
