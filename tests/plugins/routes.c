/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * routes.c: a test plugin for the route table (api->route_add), used by
 * tests/integration/api/test_routes.py. Every answer is text/plain.
 *
 * Routes of every site, from init():
 *   GET        /r/hello                   "hello"
 *   GET        /r/users/:id/posts/:post   "user=<id> post=<post>"
 *   POST, PUT  /r/write                   "wrote <method>"
 *   GET        /r/files/ + '*'            "prefix <path>"
 *   GET        /r/files/special           "exact"
 *   GET        /r/files/:name             "param <name>"
 *   DELETE     /r/files/:name             "deleted <name>"
 *   POST       /r/echo                    the request body (MK_AGAIN)
 *   GET        /r/task                    "task done", answered from a task
 *   GET        /r/decline                 MK_DECLINED: static files answer
 * Routes of each site, from site_init() (conf_dir/plugins/routes.conf,
 * section [ROUTES]):
 *   GET        <Extra>                    "extra <Extra>" (default /r/v1)
 *   Conflict On: a second GET /r/hello, which refuses the configuration.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <monkey/mk_plugin.h>

struct routes_conf {
    char *extra;
    bool conflict;
};

static const struct mk_conf_key routes_keys[] = {
    {"Extra", MK_CONF_STRING, 0, MK_CONF_FIELD(struct routes_conf, extra), 0, 199, "/r/v1"},
    {"Conflict", MK_CONF_BOOL, 0, MK_CONF_FIELD(struct routes_conf, conflict), 0, 0, "Off"},
    {NULL},
};

static const struct mk_conf_schema routes_schema = {
    .section = "ROUTES",
    .file = "routes.conf",
    .keys = routes_keys,
    .size = sizeof(struct routes_conf),
};

static const struct mk_api *api;

MK_PLUGIN_DECLARE(routes);

/* Answer with printf-formatted text. */
__attribute__((format(printf, 2, 3))) static int routes_text(struct mk_request *r, const char *fmt,
                                                             ...)
{
    char buf[512];
    va_list ap;

    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t) n >= sizeof(buf)) {
        return 500;
    }
    api->set_status(r, 200);
    api->set_content_type(r, "text/plain");
    return api->set_body(r, buf, (size_t) n) == MK_OK ? MK_OK : 503;
}

static int routes_hello(struct mk_request *r, void *arg)
{
    (void) arg;
    /* Outside init() and site_init() a route is refused. */
    if (api->route_add(NULL, MK_ROUTE_GET, "/r/late", routes_hello, NULL) != MK_ERR ||
        errno != EPERM) {
        return 500;
    }
    return routes_text(r, "hello\n");
}

static int routes_user_post(struct mk_request *r, void *arg)
{
    size_t ilen = 0, plen = 0;
    const char *id = api->route_param(r, "id", &ilen);
    const char *post = api->route_param(r, "post", &plen);

    (void) arg;
    if (!id || !post || api->route_param(r, "nope", NULL)) {
        return 500;
    }
    return routes_text(r, "user=%.*s post=%.*s\n", (int) ilen, id, (int) plen, post);
}

static int routes_write(struct mk_request *r, void *arg)
{
    size_t len;
    const char *m = api->method(r, &len);

    (void) arg;
    return routes_text(r, "wrote %.*s\n", (int) len, m);
}

static int routes_prefix(struct mk_request *r, void *arg)
{
    size_t len;
    const char *path = api->path(r, &len);

    (void) arg;
    return routes_text(r, "prefix %.*s\n", (int) len, path);
}

static int routes_exact(struct mk_request *r, void *arg)
{
    (void) arg;
    return routes_text(r, "exact\n");
}

static int routes_param(struct mk_request *r, void *arg)
{
    size_t len;
    const char *name = api->route_param(r, "name", &len);

    return routes_text(r, "%s %.*s\n", (const char *) arg, (int) len, name);
}

static int routes_echo(struct mk_request *r, void *arg)
{
    size_t len;
    const char *body = api->body(r, &len);

    (void) arg;
    if (!body) {
        return MK_AGAIN; /* called again once the body is read */
    }
    api->set_status(r, 200);
    api->set_content_type(r, "application/octet-stream");
    return api->set_body(r, body, len) == MK_OK ? MK_OK : 503;
}

static void routes_task_work(void *arg)
{
    (void) arg;
}

static int routes_task_done(struct mk_request *r, void *arg)
{
    (void) arg;
    return r ? routes_text(r, "task done\n") : MK_OK;
}

static int routes_task(struct mk_request *r, void *arg)
{
    (void) arg;
    int rc = api->task(r, routes_task_work, routes_task_done, NULL);
    return rc == MK_SUSPENDED ? MK_SUSPENDED : 503;
}

static int routes_decline(struct mk_request *r, void *arg)
{
    (void) r;
    (void) arg;
    return MK_DECLINED;
}

static int routes_extra(struct mk_request *r, void *arg)
{
    return routes_text(r, "extra %s\n", (const char *) arg);
}

static const struct {
    uint32_t methods;
    const char *pattern;
    mk_route_cb handler;
    void *arg;
} routes_all[] = {
    {MK_ROUTE_GET, "/r/hello", routes_hello, NULL},
    {MK_ROUTE_GET, "/r/users/:id/posts/:post", routes_user_post, NULL},
    {MK_ROUTE_POST | MK_ROUTE_PUT, "/r/write", routes_write, NULL},
    {MK_ROUTE_GET, "/r/files/*", routes_prefix, NULL},
    {MK_ROUTE_GET, "/r/files/special", routes_exact, NULL},
    {MK_ROUTE_GET, "/r/files/:name", routes_param, "param"},
    {MK_ROUTE_DELETE, "/r/files/:name", routes_param, "deleted"},
    {MK_ROUTE_POST, "/r/echo", routes_echo, NULL},
    {MK_ROUTE_GET, "/r/task", routes_task, NULL},
    {MK_ROUTE_GET, "/r/decline", routes_decline, NULL},
};

static int routes_init(const struct mk_api *server_api, const char *conf_dir)
{
    (void) conf_dir;
    api = server_api;
    if (!MK_API_HAS(api, route_add)) {
        api->log(MK_PLUGIN_LOG_ERROR, "routes: needs a server with plugin ABI 3.2");
        return MK_ERR;
    }
    for (size_t i = 0; i < sizeof(routes_all) / sizeof(routes_all[0]); i++) {
        if (api->route_add(NULL, routes_all[i].methods, routes_all[i].pattern,
                           routes_all[i].handler, routes_all[i].arg) != MK_OK) {
            return MK_ERR;
        }
    }
    return MK_OK;
}

static int routes_site_init(const struct mk_site *site, const struct mk_conf *conf, void **data,
                            char *err, size_t errlen)
{
    const struct routes_conf *rc = api->plugin_conf(site, MK_PLUGIN_SELF(routes));

    (void) conf;
    (void) data;
    /* The configuration's struct lives as long as the site: a safe arg. */
    if (api->route_add(site, MK_ROUTE_GET, rc->extra, routes_extra, rc->extra) != MK_OK) {
        snprintf(err, errlen, "%s: routes: bad Extra '%s'", api->site_file(site), rc->extra);
        return MK_ERR;
    }
    if (rc->conflict &&
        api->route_add(site, MK_ROUTE_GET, "/r/hello", routes_hello, NULL) != MK_OK) {
        snprintf(err, errlen, "%s: routes: cannot add the conflict", api->site_file(site));
        return MK_ERR;
    }
    return MK_OK;
}

MK_PLUGIN_DEFINE(routes) = {
    MK_PLUGIN_ABI_INIT,
    .name = "routes",
    .version = "1.0",
    .description = "test plugin: the route table",
    .init = routes_init,
    .site_init = routes_site_init,
    .conf_schema = &routes_schema,
};
