/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * plugins.h: a server's set of plugins, the loader and the API table
 * (plugin.c).
 *
 * A set belongs to one server (srv->plugins): it is filled on the
 * controlling thread (mk_plugins_load, then the plugins' init() through
 * mk_plugins_init), then read by every thread until mk_plugins_unload(),
 * once the workers ended. Plugins reach the server only through
 * mk_plugin_api.
 */
#ifndef MK_SERVER_PLUGINS_H
#define MK_SERVER_PLUGINS_H

#include <stdbool.h>
#include <stddef.h>

#include <monkey/mk_plugin.h>

#include "../http/route.h"

struct mk_config;
struct mk_request;
struct mk_server;
struct mk_site;

struct mk_plugin_set {
    const struct mk_plugin **list; /* in plugins.load order */
    void **handles;                /* dlopen handles (NULL for built-in) */
    size_t count;
    /* The plugins' own structs (MK_PLUGIN_SELF); list[i] is a full-size
       copy of own[i] when the plugin was built for an older ABI minor. */
    const struct mk_plugin **own;
    /* Hooks present, in order, so the request path skips plugins without them. */
    const struct mk_plugin **accept, **request, **content, **done, **close, **batch, **head;
    size_t n_accept, n_request, n_content, n_done, n_close, n_batch, n_head;
    const struct mk_plugin **errlog; /* error_log hooks (ABI 3.4) */
    size_t n_errlog;
    const struct mk_plugin **early; /* early hooks, before the site's rules (ABI 3.19) */
    size_t n_early;
    /* transports[i]: list[i]'s transport as this server reads it (the fields
       newer than the plugin's ABI minor NULL), or NULL when it has none. */
    struct mk_transport **transports;
    struct mk_routes routes; /* registered by init(): every site's */
    void **self;             /* each plugin's context for this server (api->self_set) */
};

/* Where a plugin's routes go while its routes hook runs (api->route_table_add). */
struct mk_route_table {
    struct mk_routes *routes;
    const struct mk_plugin *plugin;
};

int mk_plugins_load(struct mk_plugin_set *set, const struct mk_config *cfg, char *err,
                    size_t errlen);
/*
 * Fill every plugin's plugin-wide keys (its conf_schema) for `cfg`, then
 * run every init(). MK_ERR with "file:line: reason" in err.
 */
int mk_plugins_init(struct mk_plugin_set *set, struct mk_server *srv, struct mk_config *cfg,
                    char *err, size_t errlen);
/*
 * Fill every plugin's plugin-wide keys for `cfg` (once per configuration:
 * a second call does nothing). MK_OK, or MK_ERR with "file:line: reason".
 */
int mk_plugins_configure(const struct mk_plugin_set *set, struct mk_config *cfg, char *err,
                         size_t errlen);
/*
 * Check the site sections of `cfg`, fill the plugins' keys (plugin-wide if
 * not yet, and each site's) and run every site_init().
 */
int mk_plugins_sites(const struct mk_plugin_set *set, struct mk_config *cfg, char *err,
                     size_t errlen);
/*
 * Reload, step one: every plugin reads its files into a pending state
 * (reload_prepare). MK_OK; or MK_ERR with "file:line: reason" in err, after
 * the plugins that had prepared were told to discard (reload_commit(0)).
 */
int mk_plugins_reload_prepare(const struct mk_plugin_set *set, char *err, size_t errlen);
/* Reload, step two: every plugin that prepared puts its state in force (commit) or drops it. */
void mk_plugins_reload_commit(const struct mk_plugin_set *set, bool commit);
/* True while this thread checks a configuration (`monkey -t`, mk_server_check). */
extern __thread bool mk_plugins_checking;
void mk_plugins_unload(struct mk_plugin_set *set);
/*
 * The server whose plugins the calling thread acts for, when it is no
 * worker of it: the controlling thread at each entry of the library API,
 * a task thread at its start. api->self() and the server-wide API
 * functions use it (a worker thread uses its worker's server); the
 * thread's log lines go to srv's log. NULL unbinds.
 */
void mk_plugins_bind(struct mk_server *srv);
/* The server the calling thread acts for (see mk_plugins_bind), or NULL. */
struct mk_server *mk_plugins_server(void);
const struct mk_transport *mk_plugins_transport(const struct mk_plugin_set *set, const char *name);
/*
 * What the plugin API asks of the process layer above it: the controlling
 * loop's commands (api->command) and the supervisor's figures
 * (api->supervisor_stats). Given once at start (mk_plugins_process).
 */
struct mk_plugins_process {
    int (*command)(struct mk_server *srv, int cmd, char *err, size_t errlen);
    int (*supervisor_stats)(struct mk_supervisor_stats *out);
};
void mk_plugins_process(const struct mk_plugins_process *process);
/* ---- between plugin.c (the loader) and plugin_api.c (the table) ---- */

/* The server an API call without a request serves (see plugin.c). */
struct mk_server *mk_plugins_current(void);
/* Index of plugin `p` (its own struct or the server's copy) in `ps`, or ps->count. */
size_t mk_plugins_index(const struct mk_plugin_set *ps, const struct mk_plugin *p);
/*
 * A hook of the loader's runs on this thread: init() (set and cfg; routes
 * the plugin-wide table) or site_init() (routes the site's table, site
 * vh). What the API entries may use of it until mk_api_hook_end.
 */
void mk_api_hook_begin(struct mk_plugin_set *set, const struct mk_config *cfg,
                       struct mk_route_table *routes, const struct mk_site *site);
void mk_api_hook_end(void);
extern const struct mk_api mk_plugin_api;

#endif
