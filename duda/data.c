/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/data.c: the data object: the service's DataDir and paths beneath
 * it.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "duda_internal.h"

static const char *duda_data_path(void)
{
    return duda_current ? duda_current->datadir : NULL;
}

static char *duda_data_locate(duda_request_t *dr, const char *name)
{
    char buf[PATH_MAX];
    const char *dir = duda_data_path();

    if (!dir || !name) {
        return NULL;
    }
    int n = snprintf(buf, sizeof(buf), "%s/%s", dir, name);
    if (n < 0 || (size_t) n >= sizeof(buf)) {
        return NULL;
    }
    return dr ? duda_gc_strndup(dr, buf, (size_t) n) : strdup(buf);
}

const struct duda_data_api duda_data_obj = {
    .size = sizeof(struct duda_data_api), .get_path = duda_data_path, .locate = duda_data_locate};
