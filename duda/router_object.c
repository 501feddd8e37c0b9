/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/router_object.c: the router object (router->map, map_stream,
 * root) and the console's dashboard route. In duda_main() a service's
 * routes are checked (router.c) and recorded in its duda_service;
 * service.c adds them to the site's route table once duda_main()
 * returned.
 */
#include <stdio.h>
#include <stdlib.h>

#include "duda_internal.h"

static struct duda_route *duda_route_new(const char *what)
{
    struct duda_service *svc = duda_current;

    if (!svc || svc->workers) {
        duda_misuse(NULL, "router->%s() outside duda_main()", what);
        return NULL;
    }
    if (svc->map_err[0]) {
        return NULL;
    }
    if (svc->n_routes == svc->cap_routes) {
        size_t cap = svc->cap_routes ? svc->cap_routes * 2 : 8;
        struct duda_route *v = realloc(svc->routes, cap * sizeof(*v));
        if (!v) {
            snprintf(svc->map_err, sizeof(svc->map_err), "out of memory");
            return NULL;
        }
        svc->routes = v;
        svc->cap_routes = cap;
    }
    struct duda_route *rt = &svc->routes[svc->n_routes++];
    *rt = (struct duda_route){.svc = svc};
    return rt;
}

static int duda_map_as(const char *pattern, uint32_t methods, duda_callback_t cb, bool stream,
                       bool dashboard)
{
    struct duda_service *svc = duda_current;
    char err[256];

    if (svc && !svc->workers && !svc->map_err[0]) {
        if (duda_router_check(pattern, methods, err, sizeof(err)) != MK_OK) {
            snprintf(svc->map_err, sizeof(svc->map_err), "%s", err);
            return -1;
        }
        if (!cb && !dashboard) {
            snprintf(svc->map_err, sizeof(svc->map_err), "route '%s': no callback", pattern);
            return -1;
        }
    }
    struct duda_route *rt = duda_route_new("map");
    if (!rt) {
        return -1;
    }
    snprintf(rt->pattern, sizeof(rt->pattern), "%s", pattern);
    rt->methods = methods;
    rt->cb = cb;
    rt->stream = stream;
    rt->dashboard = dashboard;
    return 0;
}

static int duda_map(const char *pattern, uint32_t methods, duda_callback_t cb)
{
    return duda_map_as(pattern, methods, cb, false, false);
}

static int duda_map_stream(const char *pattern, uint32_t methods, duda_callback_t cb)
{
    return duda_map_as(pattern, methods, cb, true, false);
}

static int duda_root(duda_callback_t cb)
{
    if (duda_map_as("/", MK_ROUTE_GET | MK_ROUTE_HEAD, cb, false, false) != 0) {
        return -1;
    }
    duda_current->routes[duda_current->n_routes - 1].root = true;
    return 0;
}

int duda_router_object_dashboard(const char *path)
{
    return duda_map_as(path, MK_ROUTE_GET | MK_ROUTE_HEAD, NULL, false, true);
}

const struct duda_router_api duda_router_obj = {
    .size = sizeof(struct duda_router_api),
    .map = duda_map,
    .map_stream = duda_map_stream,
    .root = duda_root,
};
