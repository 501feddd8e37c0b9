/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/fconf.c: the fconf object: configuration files of the service,
 * read from its ConfDir in the server's configuration syntax
 * (api->conf_load).
 */
#include <limits.h>
#include <stdio.h>
#include <strings.h>

#include "duda_internal.h"

static duda_fconf_t *duda_fconf_read(const char *name)
{
    char path[PATH_MAX], err[512];
    const char *dir = duda_conf_path();

    if (!dir || !name) {
        duda_misuse(NULL, "fconf->read(): the service has no ConfDir");
        return NULL;
    }
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    struct mk_conf *c = duda_mk->conf_load(path, err, sizeof(err));
    if (!c) {
        duda_mk->log(MK_PLUGIN_LOG_ERROR, "duda: %s: %s", duda_current->name, err);
    }
    return (duda_fconf_t *) c;
}

static const char *duda_fconf_get(duda_fconf_t *f, const char *section, const char *key)
{
    const char *s, *k, *v;
    void *cursor = NULL;
    int line;

    if (!f || !section || !key) {
        return NULL;
    }
    while (duda_mk->conf_next((const struct mk_conf *) f, &cursor, &s, &k, &v, &line)) {
        if (!strcasecmp(s, section) && !strcasecmp(k, key)) {
            return v;
        }
    }
    return NULL;
}

static void duda_fconf_free(duda_fconf_t *f)
{
    if (f) {
        duda_mk->conf_free((struct mk_conf *) f);
    }
}

const struct duda_fconf_api duda_fconf_obj = {.size = sizeof(struct duda_fconf_api),
                                              .read = duda_fconf_read,
                                              .get = duda_fconf_get,
                                              .free = duda_fconf_free};
