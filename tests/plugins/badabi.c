/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * badabi.c: a test plugin built for another ABI major version; the server
 * must refuse it at load, before calling any of its code.
 */
#include <stdlib.h>

#include <monkey/mk_plugin.h>

static int badabi_init(const struct mk_api *api, const char *conf_dir)
{
    (void) api;
    (void) conf_dir;
    abort(); /* never called */
}

MK_EXPORT const struct mk_plugin mk_plugin = {
    .abi_major = MK_PLUGIN_ABI_MAJOR + 100,
    .abi_minor = MK_PLUGIN_ABI_MINOR,
    .size = sizeof(struct mk_plugin),
    .name = "badabi",
    .init = badabi_init,
};
