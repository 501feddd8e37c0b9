/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * skeleton.c: the template for new plugins. Copy this folder, rename the
 * plugin, keep the hooks you need. It shows every stage of the request,
 * routes (the routes hook fills the table the server gives it, with
 * api->route_table_add; the server matches path and method and answers
 * 405 and OPTIONS with the routes' Allow), declared configuration keys (a
 * file of its own and a section of site files, read and checked by the
 * server, errors naming file and line), asking for a request body
 * (MK_AGAIN), blocking work moved off the worker (api->task), the batch
 * hook, a context of its own per server (api->self_set/self) and a
 * per-request context slot (api->ctx_set/get).
 *
 * State: the plugin keeps no mutable file statics. Its counters live in a
 * struct skeleton_self made by init() and handed to the server
 * (api->self_set), which keeps one per server: two servers in one process
 * (monkey.h) count apart. The only static written is `api`, the server's
 * function table, which is the same for every server of the process.
 *
 * Settings reach the request hooks through the configuration: the server
 * fills the typed structs of the schema below for every configuration it
 * builds and frees them with it, so a request sees one consistent set for
 * its whole life, a reload never writes what a worker is reading, and a
 * refused reload changes nothing (no reload_prepare/reload_commit needed).
 *
 * Behaviour (with the default conf/plugins/skeleton.conf), one route each,
 * added for every site by site_init() (so a reload that changes Path moves
 * them with the new configuration):
 *   GET  /skeleton          200, the configured Message, or the site's
 *                           [SKELETON] Greeting when the site has one
 *   POST /skeleton/echo     200, the request body echoed back (other
 *                           methods: 405 with "Allow: POST, OPTIONS")
 *   GET  /skeleton/stats    200, "requests N connections M batches B
 *                           contexts C" (C: request contexts released)
 *   GET  /skeleton/slow?ms=N  200 after N ms (default 50, at most 10000)
 *                           slept on a task thread: the worker goes on
 *   any request with header "X-Skeleton-Deny"    403 (request stage)
 *   any request with header "X-Skeleton-Tag: T": the request hook keeps T
 *                           in the request's context slot and GET /skeleton
 *                           answers with "X-Skeleton-Tag: T"
 *   every response from this plugin carries "X-Skeleton-Worker: <id>"
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <strings.h>

#include <monkey/mk_plugin.h>

/* Plugin-wide settings (skeleton.conf), filled by the server from the schema below. */
struct skeleton_conf {
    char *path;
    char *message;
};

/* A site's [SKELETON] section. */
struct skeleton_site_conf {
    char *greeting; /* NULL when not given */
};

/* What site_init() stores for every site: the texts it answers with. */
struct skeleton_site {
    const struct skeleton_conf *conf; /* of the configuration the site belongs to */
    char *text;                       /* Greeting or Message, with a newline */
};

static int skeleton_check_path(const char *value, char *reason, size_t len)
{
    if (value[0] != '/') {
        snprintf(reason, len, "'%s' does not start with '/'", value);
        return MK_ERR;
    }
    if (strchr(value, '*') || strstr(value, "/:")) {
        snprintf(reason, len, "'%s' holds a route pattern ('*' or '/:')", value);
        return MK_ERR;
    }
    return MK_OK;
}

/*
 * The keys: the server reads conf_dir/plugins/skeleton.conf and the
 * [SKELETON] sections of site files, checks them and reports errors with
 * file and line; a reload builds new structs with the new configuration.
 */
static const struct mk_conf_key skeleton_keys[] = {
    {"Path", MK_CONF_STRING, 0, MK_CONF_FIELD(struct skeleton_conf, path), 0, 199, "/skeleton",
     .check = skeleton_check_path, .doc = "the path the plugin answers on"},
    {"Message", MK_CONF_STRING, 0, MK_CONF_FIELD(struct skeleton_conf, message), 0, 253,
     "Hello from the skeleton plugin", .doc = "the text GET Path answers"},
    {"Greeting", MK_CONF_STRING, MK_CONF_SITE, MK_CONF_FIELD(struct skeleton_site_conf, greeting),
     0, 253, NULL, .doc = "a site's own text instead of Message"},
    {NULL},
};

static const struct mk_conf_schema skeleton_schema = {
    .section = "SKELETON",
    .file = "skeleton.conf",
    .keys = skeleton_keys,
    .size = sizeof(struct skeleton_conf),
    .site_size = sizeof(struct skeleton_site_conf),
};

/* The server's function table: the same for every server of the process. */
static const struct mk_api *api;

/* The plugin's state in one server (api->self_set): workers update it at once. */
struct skeleton_self {
    atomic_ulong requests;
    atomic_ulong connections;
    atomic_ulong batches;
    atomic_ulong contexts; /* request contexts released */
};

/* A request's context (api->ctx_set): from the request hook to the content hook. */
struct skeleton_req {
    struct skeleton_self *self;
    char tag[]; /* the X-Skeleton-Tag value */
};

MK_PLUGIN_DECLARE(skeleton);

/* This server's state: any hook, on any thread the server runs it on. */
static struct skeleton_self *skeleton_self(void)
{
    return api->self(MK_PLUGIN_SELF(skeleton));
}

static int skeleton_init(const struct mk_api *server_api, const char *conf_dir)
{
    (void) conf_dir;
    api = server_api;
    if (!MK_API_HAS(api, ctx_get) || !MK_API_HAS(api, route_table_add)) {
        api->log(MK_PLUGIN_LOG_ERROR, "skeleton: needs a server with plugin ABI 3.11");
        return MK_ERR;
    }
    /* The settings of the configuration being started, already checked. */
    const struct skeleton_conf *conf = api->plugin_conf(NULL, MK_PLUGIN_SELF(skeleton));
    struct skeleton_self *self = calloc(1, sizeof(*self));
    if (!self || api->self_set(MK_PLUGIN_SELF(skeleton), self) != MK_OK) {
        free(self);
        api->log(MK_PLUGIN_LOG_ERROR, "skeleton: out of memory");
        return MK_ERR;
    }
    api->log(MK_PLUGIN_LOG_DEBUG, "skeleton: serving %s", conf->path);
    return MK_OK;
}

/* The server stops (or `monkey -t` is done): release what init() made. */
static void skeleton_exit(void)
{
    free(skeleton_self());
}

static int skeleton_conn_accept(struct mk_conn *c)
{
    (void) c;
    atomic_fetch_add_explicit(&skeleton_self()->connections, 1, memory_order_relaxed);
    return MK_OK;
}

/* The request ended: the server calls this for the context slot. */
static void skeleton_req_free(void *ctx)
{
    struct skeleton_req *req = ctx;

    atomic_fetch_add_explicit(&req->self->contexts, 1, memory_order_relaxed);
    free(req);
}

static int skeleton_request(struct mk_request *r)
{
    size_t len;
    if (api->header(r, "X-Skeleton-Deny", &len)) {
        return 403;
    }
    const char *tag = api->header(r, "X-Skeleton-Tag", &len);
    if (tag) {
        /* Kept in the request's slot, released by skeleton_req_free at its end. */
        struct skeleton_req *req = malloc(sizeof(*req) + len + 1);
        if (!req) {
            return 503;
        }
        req->self = skeleton_self();
        memcpy(req->tag, tag, len);
        req->tag[len] = '\0';
        if (api->ctx_set(r, MK_PLUGIN_SELF(skeleton), req, skeleton_req_free) != MK_OK) {
            free(req);
            return 503;
        }
    }
    return MK_OK;
}

static void skeleton_worker_header(struct mk_request *r)
{
    char id[16];
    snprintf(id, sizeof(id), "%d", api->worker_id());
    api->add_header(r, "X-Skeleton-Worker", id);
}

/* ---- per site: the answer text and the routes --------------------------------------------- */

static void skeleton_site_free(void *data)
{
    struct skeleton_site *site = data;

    if (site) {
        free(site->text);
        free(site);
    }
}

/* The server filled both structs already; derive what the request hooks need. */
static int skeleton_site_init(const struct mk_site *site, const struct mk_conf *conf, void **data,
                              char *err, size_t errlen)
{
    const struct skeleton_site_conf *sc = api->site_conf(site, MK_PLUGIN_SELF(skeleton));
    struct skeleton_site *s = calloc(1, sizeof(*s));

    (void) conf;
    *data = s;
    if (!s) {
        snprintf(err, errlen, "%s: out of memory", api->site_file(site));
        return MK_ERR;
    }
    s->conf = api->plugin_conf(site, MK_PLUGIN_SELF(skeleton));
    const char *text = sc->greeting ? sc->greeting : s->conf->message;
    size_t n = strlen(text);
    s->text = malloc(n + 2);
    if (!s->text) {
        snprintf(err, errlen, "%s: out of memory", api->site_file(site));
        return MK_ERR; /* the server frees what *data holds */
    }
    memcpy(s->text, text, n);
    memcpy(s->text + n, "\n", 2);
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
    atomic_fetch_add_explicit(&skeleton_self()->batches, 1, memory_order_relaxed);
}

/* ---- the routes' handlers (arg: the site's struct skeleton_site) ---------- */

/* GET Path: the site's text. */
static int skeleton_hello(struct mk_request *r, void *arg)
{
    const struct skeleton_site *site = arg;

    /* Site data lives as long as the request's configuration: a static body is safe. */
    api->set_status(r, 200);
    api->set_content_type(r, "text/plain; charset=utf-8");
    api->set_body_static(r, site->text, strlen(site->text));
    skeleton_worker_header(r);
    const struct skeleton_req *req = api->ctx_get(r, MK_PLUGIN_SELF(skeleton));
    if (req) {
        api->add_header(r, "X-Skeleton-Tag", req->tag);
    }
    return MK_OK;
}

/* GET Path/slow?ms=N: sleep on a task thread, answer from the worker. */
static int skeleton_slow(struct mk_request *r, void *arg)
{
    size_t qlen;
    const char *q = api->query(r, &qlen);
    struct skeleton_slow *job = calloc(1, sizeof(*job));

    (void) arg;
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

/* POST Path/echo: the body back (a POST route: other methods get 405 from the server). */
static int skeleton_echo(struct mk_request *r, void *arg)
{
    size_t blen;
    const char *body = api->body(r, &blen);

    (void) arg;
    if (!body) {
        return MK_AGAIN; /* called again once the body has been read */
    }
    api->set_status(r, 200);
    api->set_content_type(r, "application/octet-stream");
    skeleton_worker_header(r);
    return api->set_body(r, body, blen) == MK_OK ? MK_OK : 503;
}

/* GET Path/stats: the counters of the other hooks. */
static int skeleton_stats(struct mk_request *r, void *arg)
{
    struct skeleton_self *self = skeleton_self();
    char buf[128];
    int n = snprintf(buf, sizeof(buf), "requests %lu connections %lu batches %lu contexts %lu\n",
                     atomic_load(&self->requests), atomic_load(&self->connections),
                     atomic_load(&self->batches), atomic_load(&self->contexts));

    (void) arg;
    api->set_status(r, 200);
    api->set_content_type(r, "text/plain; charset=utf-8");
    skeleton_worker_header(r);
    return api->set_body(r, buf, (size_t) n) == MK_OK ? MK_OK : 503;
}

/*
 * The routes hook: the server gives the table to fill, once for every site
 * (site NULL: this plugin has none) and once per site after its
 * site_init(): Path and the paths beneath it, so they belong to this site
 * of this configuration, like `s`, their arg (what site_init stored).
 */
static int skeleton_routes(const struct mk_site *site, struct mk_route_table *t, char *err,
                           size_t errlen)
{
    const struct skeleton_site *s = site ? api->site_data(site, MK_PLUGIN_SELF(skeleton)) : NULL;

    static const struct {
        uint32_t methods;
        const char *suffix;
        mk_route_cb handler;
    } routes[] = {
        {MK_ROUTE_GET, "", skeleton_hello},
        {MK_ROUTE_GET, "/slow", skeleton_slow},
        {MK_ROUTE_POST, "/echo", skeleton_echo},
        {MK_ROUTE_GET, "/stats", skeleton_stats},
    };
    char pattern[256], why[200];

    if (!s) {
        return MK_OK;
    }
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        snprintf(pattern, sizeof(pattern), "%s%s", s->conf->path, routes[i].suffix);
        if (api->route_table_add(t, routes[i].methods, pattern, routes[i].handler, (void *) s, why,
                                 sizeof(why)) != MK_OK) {
            snprintf(err, errlen, "cannot route %s: %s", pattern, why);
            return MK_ERR;
        }
    }
    return MK_OK;
}

static void skeleton_request_done(struct mk_request *r)
{
    (void) r;
    atomic_fetch_add_explicit(&skeleton_self()->requests, 1, memory_order_relaxed);
}

MK_PLUGIN_DEFINE(skeleton) = {
    MK_PLUGIN_ABI_INIT,
    .name = "skeleton",
    .version = "1.0",
    .description = "template plugin: every hook, documented",
    .init = skeleton_init,
    .exit = skeleton_exit,
    .conn_accept = skeleton_conn_accept,
    .request = skeleton_request,
    .request_done = skeleton_request_done,
    .site_init = skeleton_site_init,
    .site_free = skeleton_site_free,
    .batch_done = skeleton_batch_done,
    .conf_schema = &skeleton_schema,
    .routes = skeleton_routes,
};
