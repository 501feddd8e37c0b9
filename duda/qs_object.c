/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/qs_object.c: the qs object: the request's query string, read with
 * the pure parsers of qs.c (values decoded into the request's gc).
 */
#include <limits.h>
#include <string.h>

#include "duda_internal.h"
#include "qs.h"

/* The value of query key `key` of dr's request (a span into the query), or NULL. */
static const char *duda_qs_value(duda_request_t *dr, const char *key, size_t *len)
{
    size_t qn;
    const char *q = duda_mk->query(dr->r, &qn);

    return duda_qs_find(q, q ? qn : 0, key, strlen(key), len);
}

static const char *duda_qs_raw(duda_request_t *dr, const char *key, size_t *len)
{
    if (!duda_request_live(dr, "qs->get_raw") || !key) {
        return NULL;
    }
    return duda_qs_value(dr, key, len);
}

static const char *duda_qs_get(duda_request_t *dr, const char *key)
{
    size_t n;
    if (!duda_request_live(dr, "qs->get") || !key) {
        return NULL;
    }
    const char *v = duda_qs_value(dr, key, &n);
    if (!v) {
        return NULL;
    }
    char *out = duda_gc_alloc(dr, n + 1);
    if (!out) {
        return NULL;
    }
    out[duda_qs_decode(v, n, out)] = '\0';
    return out;
}

static int duda_qs_count_get(duda_request_t *dr)
{
    size_t qn;
    if (!duda_request_live(dr, "qs->count")) {
        return 0;
    }
    const char *q = duda_mk->query(dr->r, &qn);
    size_t count = duda_qs_count(q, q ? qn : 0);
    return count > INT_MAX ? INT_MAX : (int) count;
}

const struct duda_qs_api duda_qs_obj = {.size = sizeof(struct duda_qs_api),
                                        .get = duda_qs_get,
                                        .get_raw = duda_qs_raw,
                                        .count = duda_qs_count_get};
