/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * halfreload.c: a test plugin with reload_prepare() but no reload_commit();
 * its pending state could never go in force, so the server must refuse it
 * at load, before calling any of its code.
 */
#include <stdlib.h>

#include <monkey/mk_plugin.h>

static int halfreload_init(const struct mk_api *api, const char *conf_dir)
{
    (void) api;
    (void) conf_dir;
    abort(); /* never called */
}

static int halfreload_prepare(char *err, size_t errlen)
{
    (void) err;
    (void) errlen;
    abort(); /* never called */
}

MK_EXPORT const struct mk_plugin mk_plugin = {
    MK_PLUGIN_ABI_INIT,
    .name = "halfreload",
    .init = halfreload_init,
    .reload_prepare = halfreload_prepare,
};
