/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * skeleton.c: the template for new plugins. Copy this folder, rename the
 * plugin, keep the hooks you need. It shows every stage of the request,
 * reading a configuration file with the server's reader (errors name file
 * and line), a section of its own in site files, asking for a request body
 * (MK_AGAIN), blocking work moved off the worker (api->task) and the batch
 * hook.
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

static const struct mk_api *api;
static char skeleton_path[SKELETON_MAX] = "/skeleton";
static char skeleton_message[SKELETON_MAX] = "Hello from the skeleton plugin\n";
static char skeleton_conf[4096];
static atomic_ulong skeleton_requests;
static atomic_ulong skeleton_connections;
static atomic_ulong skeleton_batches;

MK_PLUGIN_DECLARE(skeleton);

/* Read conf_dir/plugins/skeleton.conf ([SKELETON] Path, Message). Absent: defaults. */
static int skeleton_read_conf(void)
{
    char err[512], path[SKELETON_MAX] = "", message[SKELETON_MAX] = "";
    const char *section, *key, *value;
    void *cursor = NULL;
    int line;

    if (!skeleton_conf[0]) {
        return MK_OK;
    }
    struct mk_conf *conf = api->conf_load(skeleton_conf, err, sizeof(err));
    if (!conf) {
        if (strstr(err, "No such file")) {
            return MK_OK;
        }
        api->log(MK_PLUGIN_LOG_ERROR, "skeleton: %s", err);
        return MK_ERR;
    }
    while (api->conf_next(conf, &cursor, &section, &key, &value, &line)) {
        if (strcasecmp(section, "SKELETON") != 0) {
            api->log(MK_PLUGIN_LOG_ERROR, "%s:%d: unknown section [%s]", api->conf_path(conf), line,
                     section);
            api->conf_free(conf);
            return MK_ERR;
        }
        if (strcasecmp(key, "Path") == 0 && value[0] == '/' && strlen(value) < 200) {
            snprintf(path, sizeof(path), "%s", value);
        }
        else if (strcasecmp(key, "Message") == 0 && strlen(value) < SKELETON_MAX - 2) {
            snprintf(message, sizeof(message), "%s\n", value);
        }
        else {
            api->log(MK_PLUGIN_LOG_ERROR, "%s:%d: bad key or value '%s %s'", api->conf_path(conf),
                     line, key, value);
            api->conf_free(conf);
            return MK_ERR;
        }
    }
    api->conf_free(conf);
    if (path[0]) {
        memcpy(skeleton_path, path, sizeof(path));
    }
    if (message[0]) {
        memcpy(skeleton_message, message, sizeof(message));
    }
    return MK_OK;
}

static int skeleton_init(const struct mk_api *server_api, const char *conf_dir)
{
    api = server_api;
    if (conf_dir) {
        snprintf(skeleton_conf, sizeof(skeleton_conf), "%s/plugins/skeleton.conf", conf_dir);
    }
    return skeleton_read_conf();
}

static int skeleton_reload(void)
{
    return skeleton_read_conf();
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

/* Does the request path equal skeleton_path + suffix? */
static int skeleton_match(struct mk_request *r, const char *suffix)
{
    size_t len, plen = strlen(skeleton_path), slen = strlen(suffix);
    const char *p = api->path(r, &len);
    return len == plen + slen && memcmp(p, skeleton_path, plen) == 0 &&
           memcmp(p + plen, suffix, slen) == 0;
}

static void skeleton_worker_header(struct mk_request *r)
{
    char id[16];
    snprintf(id, sizeof(id), "%d", api->worker_id());
    api->add_header(r, "X-Skeleton-Worker", id);
}

/* ---- a site section: [SKELETON] Greeting TEXT ----------------------------- */

static int skeleton_site_init(const struct mk_site *site, const struct mk_conf *conf, void **data,
                              char *err, size_t errlen)
{
    const char *section, *key, *value;
    void *cursor = NULL;
    int line;

    (void) site;
    *data = NULL;
    while (api->conf_next(conf, &cursor, &section, &key, &value, &line)) {
        if (strcasecmp(section, "SKELETON") != 0) {
            continue; /* [HOST] and other plugins' sections */
        }
        if (strcasecmp(key, "Greeting") != 0 || *data) {
            snprintf(err, errlen, "%s:%d: [SKELETON] takes one Greeting, not '%s'",
                     api->conf_path(conf), line, key);
            free(*data);
            *data = NULL;
            return MK_ERR;
        }
        size_t n = strlen(value);
        char *greeting = malloc(n + 2);
        if (!greeting) {
            snprintf(err, errlen, "%s:%d: out of memory", api->conf_path(conf), line);
            return MK_ERR;
        }
        memcpy(greeting, value, n);
        memcpy(greeting + n, "\n", 2);
        *data = greeting;
    }
    return MK_OK;
}

static void skeleton_site_free(void *data)
{
    free(data);
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

    if (skeleton_match(r, "")) {
        const char *greeting = api->site_data(api->site(r), MK_PLUGIN_SELF(skeleton));
        const char *text = greeting ? greeting : skeleton_message;
        api->set_status(r, 200);
        api->set_content_type(r, "text/plain; charset=utf-8");
        api->set_body_static(r, text, strlen(text));
        skeleton_worker_header(r);
        return MK_OK;
    }
    if (skeleton_match(r, "/slow")) {
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
    if (skeleton_match(r, "/echo")) {
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
    if (skeleton_match(r, "/stats")) {
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
    .abi = MK_PLUGIN_ABI,
    .name = "skeleton",
    .version = "1.0",
    .description = "template plugin: every hook, documented",
    .init = skeleton_init,
    .reload = skeleton_reload,
    .conn_accept = skeleton_conn_accept,
    .request = skeleton_request,
    .content = skeleton_content,
    .request_done = skeleton_request_done,
    .site_sections = (const char *const[]){"SKELETON", NULL},
    .site_init = skeleton_site_init,
    .site_free = skeleton_site_free,
    .batch_done = skeleton_batch_done,
};
