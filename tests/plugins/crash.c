/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * crash.c: a test plugin that faults as it starts (SIGSEGV from init), so
 * that a supervised server crashes at every start: the supervisor's crash
 * loop limit (tests/integration/process/test_supervisor.py).
 */
#include <signal.h>

#include <monkey/mk_plugin.h>

static int crash_init(const struct mk_api *api, const char *conf_dir)
{
    (void) api;
    (void) conf_dir;
    raise(SIGSEGV);
    return MK_ERR; /* not reached: the default action ends the process */
}

MK_EXPORT const struct mk_plugin mk_plugin = {
    MK_PLUGIN_ABI_INIT,
    .name = "crash",
    .init = crash_init,
};
