/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/param.c: the param object: the values of the route's ":name"
 * segments, as the server's route table matched them, copied into the
 * request's gc.
 */
#include <errno.h>
#include <stdlib.h>

#include "duda_internal.h"

static const char *duda_param_get(duda_request_t *dr, const char *name)
{
    size_t n;
    if (!duda_request_live(dr, "param->get") || !name) {
        return NULL;
    }
    const char *v = duda_mk->route_param(dr->r, name, &n);
    return v ? duda_gc_strndup(dr, v, n) : NULL;
}

static int duda_param_number(duda_request_t *dr, const char *name, long *out)
{
    const char *v = duda_param_get(dr, name);
    char *end;

    if (!v || !*v) {
        return -1;
    }
    errno = 0;
    long x = strtol(v, &end, 10);
    if (*end || errno) {
        return -1;
    }
    *out = x;
    return 0;
}

const struct duda_param_api duda_param_obj = {
    .size = sizeof(struct duda_param_api), .get = duda_param_get, .get_number = duda_param_number};
