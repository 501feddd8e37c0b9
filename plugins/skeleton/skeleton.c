/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * skeleton.c: the template for new plugins. Copy this folder, rename the
 * plugin, keep the hooks you need. It shows every stage of the request,
 * reading a configuration file with the server's reader (errors name file
 * and line), asking for a request body (MK_AGAIN) and per-worker state
 * without locks.
 *
 * Behaviour (with the default conf/plugins/skeleton.conf):
 *   GET  /skeleton          200, the configured Message
 *   POST /skeleton/echo     200, the request body echoed back
 *   GET  /skeleton/stats    200, "requests N connections M" served so far
 *   any request with header "X-Skeleton-Deny"    403 (request stage)
 *   every response from this plugin carries "X-Skeleton-Worker: <id>"
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
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

static int skeleton_content(struct mk_request *r)
{
    size_t mlen;
    const char *method = api->method(r, &mlen);

    if (skeleton_match(r, "")) {
        api->set_status(r, 200);
        api->set_content_type(r, "text/plain; charset=utf-8");
        api->set_body_static(r, skeleton_message, strlen(skeleton_message));
        skeleton_worker_header(r);
        return MK_OK;
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
        int n = snprintf(buf, sizeof(buf), "requests %lu connections %lu\n",
                         atomic_load(&skeleton_requests), atomic_load(&skeleton_connections));
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
};
