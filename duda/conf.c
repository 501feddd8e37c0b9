/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/conf.c: the conf object: the service's ConfDir.
 */
#include "duda_internal.h"

const char *duda_conf_path(void)
{
    return duda_current ? duda_current->confdir : NULL;
}

const struct duda_conf_api duda_conf_obj = {.size = sizeof(struct duda_conf_api),
                                            .get_path = duda_conf_path};
