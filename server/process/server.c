/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * server.c: the library API (monkey.h): starting, reloading and stopping.
 *
 * Process context (this file) versus thread context (worker.c), as in the
 * seeds: the controlling thread reads the configuration, binds, loads
 * plugins and starts the workers; afterwards it only sends them messages.
 * Process setup (limits, privileges, pid file) and the signal loop of the
 * binary are process.c's.
 *
 * Reload builds a complete new configuration first, the plugins' own files
 * included (read into a pending state); nothing changes unless all of it is
 * valid and every new listening socket could be bound. Workers then
 * switch between requests: requests in flight finish with the configuration
 * they started with. Listening sockets whose address did not change are
 * kept, so a reload never refuses a connection.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <monkey/mk_util.h>
#include <monkey/monkey.h>

#include "../../core/keycount.h"
#include "../../core/log.h"
#ifdef MK_HAVE_LIBMONKEY
#include "../plugin/lib.h"
#endif
#include "../static/static.h"
#include "../runtime/listener.h"
#include "process.h"
#include "supervisor.h"
#include "server.h"
#include "../conn/transport.h"

#define ERRF(...) snprintf(err, errlen, __VA_ARGS__)

/* How long a reload waits for each worker to take the new configuration. */
#define MK_RELOAD_WAIT_MS 2000

/* ---- configuration ------------------------------------------------------- */

struct mk_server *mk_server_create(void)
{
    struct mk_server *srv = mk_calloc(1, sizeof(*srv));

    /* The same tables for every server of the process. */
    static const struct mk_plugins_process process = {
        .command = mk_process_command,
        .supervisor_stats = mk_supervisor_stats_get,
    };
    mk_conn_protocols(&mk_proto_table);
    mk_request_files(&mk_static_files);
    mk_conf_site_keys(&mk_static_site_keys);
    mk_plugins_process(&process);
    srv->stop_efd = -1;
    srv->cmd_efd = -1;
#ifdef MK_HAVE_FAIR
    srv->acceptor_ctl = -1;
    srv->acceptor_guard.reserve = -1;
    mk_list_init(&srv->acceptor_listeners);
    mk_list_init(&srv->acceptor_dead);
    pthread_mutex_init(&srv->acceptor_lock, NULL);
#endif
    pthread_mutex_init(&srv->cfg_lock, NULL);
    pthread_mutex_init(&srv->cmd_lock, NULL);
    pthread_cond_init(&srv->cmd_cond, NULL);
    srv->tasks.thread_start = mk_plugins_bind;
    pthread_mutex_init(&srv->tasks.lock, NULL);
    pthread_cond_init(&srv->tasks.cond, NULL);
    mk_log_sink_init(&srv->log);
    return srv;
}

int mk_server_set_confdir(struct mk_server *srv, const char *dir)
{
    mk_free(srv->confdir);
    srv->confdir = mk_strdup(dir);
    return MK_OK;
}

int mk_server_set_docroot(struct mk_server *srv, const char *dir)
{
    mk_free(srv->serve_dir);
    srv->serve_dir = mk_strdup(dir);
    return MK_OK;
}

int mk_server_set(struct mk_server *srv, const char *key, const char *value)
{
    for (size_t i = 0; i < srv->n_overrides; i++) {
        if (strcasecmp(srv->overrides[i].key, key) == 0) {
            mk_free((char *) srv->overrides[i].value);
            srv->overrides[i].value = mk_strdup(value);
            return MK_OK;
        }
    }
    srv->overrides = mk_realloc(srv->overrides, (srv->n_overrides + 1) * sizeof(*srv->overrides));
    srv->overrides[srv->n_overrides].key = mk_strdup(key);
    srv->overrides[srv->n_overrides].value = mk_strdup(value);
    srv->n_overrides++;
    return MK_OK;
}

static struct mk_config *mk_server_read_config(struct mk_server *srv, char *err, size_t errlen)
{
#ifdef MK_HAVE_LIBMONKEY
    const char *dir = srv->serve_dir ? srv->serve_dir : mk_lib_first_docroot(srv);
#else
    const char *dir = srv->serve_dir;
#endif

    if (!srv->confdir && dir) {
        return mk_config_for_dir(dir, srv->overrides, srv->n_overrides, err, errlen);
    }
    if (!srv->confdir) {
        ERRF("no configuration directory and no directory to serve");
        return NULL;
    }
    return mk_config_load(srv->confdir, srv->overrides, srv->n_overrides, err, errlen);
}

/* The configuration files (or defaults), then the program's sites and routes (lib.c). */
struct mk_config *mk_server_load_config(struct mk_server *srv, char *err, size_t errlen)
{
    struct mk_config *cfg = mk_server_read_config(srv, err, errlen);

#ifdef MK_HAVE_LIBMONKEY
    if (cfg && mk_lib_configure(srv, cfg, err, errlen) != MK_OK) {
        mk_config_unref(cfg);
        return NULL;
    }
#endif
    return cfg;
}

/* Every Listen names a transport that exists, with options it accepts. */
static int mk_server_check_transports(const struct mk_plugin_set *ps, const struct mk_config *cfg,
                                      char *err, size_t errlen)
{
    char reason[256];

    for (size_t i = 0; i < cfg->n_listen; i++) {
        const struct mk_listen_addr *a = &cfg->listen[i];
        const struct mk_transport *t = mk_plugins_transport(ps, a->transport);
        if (!t) {
            ERRF("%s: Listen %s: no loaded plugin provides the transport '%s'", a->where, a->spec,
                 a->transport);
            return MK_ERR;
        }
        if (mk_transport_check_options(t, a->options, reason, sizeof(reason)) != MK_OK) {
            ERRF("%s: Listen %s: %s", a->where, a->spec, reason);
            return MK_ERR;
        }
    }
    return MK_OK;
}

/*
 * Once the sites are built: each transport that a Listen line uses and
 * that checks the sites (check_sites, ABI 3.10) checks them, once, and a
 * refusal names its first Listen line.
 */
static int mk_server_check_sites(const struct mk_plugin_set *ps, const struct mk_config *cfg,
                                 char *err, size_t errlen)
{
    char reason[512];

    for (size_t i = 0; i < cfg->n_listen; i++) {
        const struct mk_listen_addr *a = &cfg->listen[i];
        const struct mk_transport *t = mk_plugins_transport(ps, a->transport);
        bool first = true;
        for (size_t j = 0; j < i && first; j++) {
            first = strcmp(cfg->listen[j].transport, a->transport) != 0;
        }
        if (!t || !t->check_sites || !first) {
            continue;
        }
        reason[0] = '\0';
        if (t->check_sites(cfg, reason, sizeof(reason)) != MK_OK) {
            ERRF("%s: Listen %s %s: %s", a->where, a->spec, a->transport,
                 reason[0] ? reason : "the transport refused the sites");
            return MK_ERR;
        }
    }
    return MK_OK;
}

/*
 * The server's own copy of a Listen options text, equal texts shared: it
 * lives until the server is destroyed, since connections accepted under
 * an older configuration keep pointing to it. Controlling thread.
 */
static const char *mk_server_options(struct mk_server *srv, const char *options)
{
    if (!options) {
        return NULL;
    }
    for (size_t i = 0; i < srv->n_options; i++) {
        if (strcmp(srv->options[i], options) == 0) {
            return srv->options[i];
        }
    }
    srv->options = mk_realloc(srv->options, (srv->n_options + 1) * sizeof(*srv->options));
    srv->options[srv->n_options] = mk_strdup(options);
    return srv->options[srv->n_options++];
}

/*
 * Load and check the configuration as mk_server_check() does; when it is
 * valid and `out` is set, write it out (mk_config_dump) before releasing it.
 */
static int mk_server_check_to(struct mk_server *srv, FILE *out, char *err, size_t errlen)
{
    struct mk_config *cfg = mk_server_load_config(srv, err, errlen);
    bool started = false;
    int rc;

    mk_plugins_bind(srv);
    if (!cfg) {
        return MK_ERR;
    }
    srv->n_workers = cfg->workers;
    if (mk_config_check_files(cfg, NULL, err, errlen) != MK_OK) {
        mk_config_unref(cfg);
        return MK_ERR;
    }
    /* Plugins validate their configuration too, without side effects. */
    mk_plugins_checking = true;
    rc = mk_plugins_load(&srv->plugins, cfg, err, errlen);
    if (rc != MK_OK) {
        mk_plugins_checking = false;
        mk_config_unref(cfg);
        return rc;
    }
    rc = mk_server_check_transports(&srv->plugins, cfg, err, errlen);
    if (rc == MK_OK) {
        rc = mk_plugins_init(&srv->plugins, srv, cfg, err, errlen);
        started = rc == MK_OK;
    }
    if (rc == MK_OK) {
        rc = mk_plugins_sites(&srv->plugins, cfg, err, errlen);
    }
    if (rc == MK_OK) {
        rc = mk_server_check_sites(&srv->plugins, cfg, err, errlen);
    }
    if (rc == MK_OK && out) {
        rc = mk_config_dump(cfg, out, err, errlen);
    }
    mk_config_unref(cfg); /* releases site data while the plugins are still loaded */
    for (size_t i = 0; started && i < srv->plugins.count; i++) {
        if (srv->plugins.list[i]->exit) {
            srv->plugins.list[i]->exit();
        }
    }
    mk_plugins_unload(&srv->plugins);
    mk_plugins_checking = false;
    return rc;
}

int mk_server_check(struct mk_server *srv, char *err, size_t errlen)
{
    return mk_server_check_to(srv, NULL, err, errlen);
}

int mk_server_dump(struct mk_server *srv, FILE *out, char *err, size_t errlen)
{
    return mk_server_check_to(srv, out, err, errlen);
}

int mk_server_workers(const struct mk_server *srv)
{
    return srv->cfg ? srv->cfg->workers : srv->n_workers;
}

/* ---- listener plans ------------------------------------------------------ */

static const struct mk_listen_addr *mk_find_listen(const struct mk_config *cfg, const char *spec)
{
    if (!cfg) {
        return NULL;
    }
    for (size_t i = 0; i < cfg->n_listen; i++) {
        if (strcmp(cfg->listen[i].spec, spec) == 0) {
            return &cfg->listen[i];
        }
    }
    return NULL;
}

static void mk_plans_free(struct mk_listen_plan **plans, int n_plans, size_t n_each)
{
    for (int w = 0; plans && w < n_plans; w++) {
        mk_listener_plan_free(plans[w], n_each);
    }
    mk_free(plans);
}

/*
 * With Balancing reuseport, refuse an address another program listens on
 * (mk_listener_probe) before binding any socket, so "Address already in
 * use" stops the start or the reload as it does with one socket (fair).
 * Addresses that may meet a socket of `old`, which the server holds itself,
 * are not probed: the probe would find that socket.
 */
static int mk_server_probe(const struct mk_config *old, const struct mk_config *cfg, char *err,
                           size_t errlen)
{
    if (MK_FAIR(cfg)) {
        return MK_OK; /* the one socket per address is bound without SO_REUSEPORT */
    }
    for (size_t i = 0; i < cfg->n_listen; i++) {
        bool held = false;
        for (size_t j = 0; old && j < old->n_listen && !held; j++) {
            held = mk_listener_addr_overlap(&cfg->listen[i], &old->listen[j]);
        }
        if (!held && mk_listener_probe(&cfg->listen[i], err, errlen) != MK_OK) {
            return MK_ERR;
        }
    }
    return MK_OK;
}

/*
 * One plan per socket owner (each worker with reuseport, the acceptor with
 * fair balancing): keep the sockets of addresses `old` already had, open the
 * others, probed first (mk_server_probe). Nothing is left open on failure.
 */
static struct mk_listen_plan **mk_server_plans(struct mk_server *srv, const struct mk_config *old,
                                               const struct mk_config *cfg, int owners, char *err,
                                               size_t errlen)
{
    bool reuseport = !MK_FAIR(cfg);

    if (mk_server_probe(old, cfg, err, errlen) != MK_OK) {
        return NULL;
    }
    struct mk_listen_plan **plans = mk_calloc((size_t) owners, sizeof(*plans));

    for (int w = 0; w < owners; w++) {
        plans[w] = mk_calloc(cfg->n_listen ? cfg->n_listen : 1, sizeof(**plans));
        for (size_t i = 0; i < cfg->n_listen; i++) {
            plans[w][i].fd = -1;
        }
        for (size_t i = 0; i < cfg->n_listen; i++) {
            const struct mk_listen_addr *a = &cfg->listen[i];
            struct mk_listen_plan *p = &plans[w][i];
            p->spec = mk_strdup(a->spec);
            p->transport = mk_plugins_transport(&srv->plugins, a->transport);
            p->options = mk_server_options(srv, a->options);
            p->proxy = a->proxy_protocol;
            if (mk_find_listen(old, a->spec)) {
                continue; /* the owner keeps its socket */
            }
            p->fd = mk_listener_socket(cfg, a, reuseport, err, errlen);
            if (p->fd < 0) {
                mk_plans_free(plans, owners, cfg->n_listen);
                return NULL;
            }
        }
    }
    return plans;
}

/* ---- start --------------------------------------------------------------- */

int mk_server_start(struct mk_server *srv, char *err, size_t errlen)
{
    struct mk_listen_plan **plans = NULL;
    sigset_t all, old;
    int owners;

    mk_plugins_bind(srv);
    if (srv->running) {
        ERRF("the server is already running");
        return MK_ERR;
    }
    srv->cfg = mk_server_load_config(srv, err, errlen);
    if (!srv->cfg) {
        return MK_ERR;
    }
    struct mk_config *cfg = srv->cfg;
    if (mk_config_check_files(cfg, NULL, err, errlen) != MK_OK) {
        goto fail_cfg;
    }
    mk_log_set_owner(mk_process_user_uid(cfg)); /* reopened after the switch to User */
    if (cfg->log_path && mk_log_open(cfg->log_path) != MK_OK) {
        ERRF("Log %s: %s", cfg->log_path, strerror(errno));
        goto fail_cfg;
    }
    mk_log_set_level((enum mk_log_level) cfg->log_level);
    mk_log_fallback(&srv->log); /* the plugins' own threads log here */

    if (mk_plugins_load(&srv->plugins, cfg, err, errlen) != MK_OK) {
        goto fail_cfg;
    }
    if (mk_server_check_transports(&srv->plugins, cfg, err, errlen) != MK_OK) {
        goto fail_plugins;
    }
    mk_process_limits(srv, cfg);

    owners = MK_FAIR(cfg) ? 1 : cfg->workers;
    plans = mk_server_plans(srv, NULL, cfg, owners, err, errlen);
    if (!plans) {
        goto fail_plugins;
    }
#ifdef MK_HAVE_METRICS
    /* before the plugins declare their histograms: those of default bounds take these */
    mk_metrics_set_bounds(cfg->metrics_bounds, cfg->n_metrics_bounds);
#endif
    if (mk_plugins_init(&srv->plugins, srv, cfg, err, errlen) != MK_OK) {
        goto fail_plans;
    }
    if (mk_plugins_sites(&srv->plugins, cfg, err, errlen) != MK_OK ||
        mk_server_check_sites(&srv->plugins, cfg, err, errlen) != MK_OK) {
        goto fail_init;
    }
    if (mk_process_drop_privileges(cfg, err, errlen) != MK_OK ||
        mk_process_pidfile(srv, err, errlen) != MK_OK) {
        goto fail_init;
    }

    srv->stop_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    srv->n_workers = cfg->workers;
    srv->workers = mk_calloc((size_t) srv->n_workers, sizeof(*srv->workers));
    for (int i = 0; i < srv->n_workers; i++) {
        if (mk_worker_setup(&srv->workers[i], srv, i) != MK_OK) {
            ERRF("worker %d: %s", i, strerror(errno));
            for (int j = 0; j <= i; j++) {
                mk_worker_teardown(&srv->workers[j]);
            }
            mk_free(srv->workers);
            srv->workers = NULL;
            goto fail_init;
        }
        if (!MK_FAIR(cfg)) {
            srv->workers[i].msg_plan = plans[i];
            srv->workers[i].msg_plan_len = cfg->n_listen;
            plans[i] = NULL;
        }
    }

#ifdef MK_HAVE_METRICS
    mk_metrics_assign(&srv->metrics, srv->workers, srv->n_workers, cfg);
    atomic_store_explicit(&srv->reloads, 0, memory_order_relaxed); /* since this start */
    atomic_store_explicit(&srv->reload_failures, 0, memory_order_relaxed);
#endif
    /*
     * The workers are set up: their counters may be read (api->stats) from
     * the first request on, which a worker may serve before the others run.
     */
    srv->started = time(NULL);
    atomic_store_explicit(&srv->stats_ready, true, memory_order_release);

    /* Server threads never take signals: the embedding program does. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    bool threads_ok = true;
#ifdef MK_HAVE_FAIR
    if (MK_FAIR(cfg) && mk_listener_acceptor_start(srv, plans[0], cfg->n_listen) != MK_OK) {
        ERRF("cannot start the acceptor thread: %s", strerror(errno));
        threads_ok = false;
    }
#endif
    atomic_store(&srv->workers_alive, (unsigned) srv->n_workers);
    for (int i = 0; threads_ok && i < srv->n_workers; i++) {
        if (mk_worker_spawn(&srv->workers[i]) != MK_OK) {
            ERRF("cannot start worker %d: %s", i, strerror(errno));
            threads_ok = false;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    mk_plans_free(plans, owners, cfg->n_listen);
    plans = NULL;
    if (!threads_ok) {
        /* Stop what did start; mk_server_finish() releases the rest. */
        srv->running = true;
        mk_server_signal_workers(srv, MK_WCTL_HALT);
        mk_server_finish(srv);
        return MK_ERR;
    }

    srv->running = true;
    for (size_t i = 0; i < cfg->n_listen; i++) {
        mk_info("listening on %s (%s), %d %s, %s balancing", cfg->listen[i].spec,
                cfg->listen[i].transport, cfg->workers,
                mk_plural((unsigned) cfg->workers, "worker", "workers"),
                MK_FAIR(cfg) ? "fair" : "reuseport");
    }
    return MK_OK;

fail_init:
    for (size_t i = 0; i < srv->plugins.count; i++) {
        if (srv->plugins.list[i]->exit) {
            srv->plugins.list[i]->exit();
        }
    }
fail_plans:
    mk_plans_free(plans, owners, cfg->n_listen);
fail_plugins:
    /* The configuration first: its site data is freed by plugin code. */
    mk_config_unref(srv->cfg);
    srv->cfg = NULL;
    mk_plugins_unload(&srv->plugins);
    return MK_ERR;
fail_cfg:
    mk_config_unref(srv->cfg);
    srv->cfg = NULL;
    return MK_ERR;
}

/* ---- reload -------------------------------------------------------------- */

static bool mk_same_plugins(const struct mk_config *a, const struct mk_config *b)
{
    if (a->n_plugins != b->n_plugins) {
        return false;
    }
    for (size_t i = 0; i < a->n_plugins; i++) {
        if (strcmp(a->plugins[i].spec, b->plugins[i].spec) != 0) {
            return false;
        }
    }
    return true;
}

static int mk_server_reload_apply(struct mk_server *srv, char *err, size_t errlen);

int mk_server_reload(struct mk_server *srv, char *err, size_t errlen)
{
    int rc = mk_server_reload_apply(srv, err, errlen);

#ifdef MK_HAVE_METRICS
    atomic_fetch_add_explicit(rc == MK_OK ? &srv->reloads : &srv->reload_failures, 1,
                              memory_order_relaxed);
#endif
    return rc;
}

/* The reload itself: MK_OK in force, MK_ERR refused (err says why). */
static int mk_server_reload_apply(struct mk_server *srv, char *err, size_t errlen)
{
    struct mk_config *old = srv->cfg, *cfg;
    struct mk_listen_plan **plans;
    int owners;

    mk_plugins_bind(srv);
    if (!srv->running) {
        ERRF("the server is not running");
        return MK_ERR;
    }
    cfg = mk_server_load_config(srv, err, errlen);
    if (!cfg) {
        return MK_ERR;
    }
    /* What only a restart can change is kept as it is. */ if (cfg->workers != old->workers) {
        mk_warn("reload: Workers changes only on restart (keeping %d)", old->workers);
        mk_config_force_workers(cfg, old->workers);
    }
    if (cfg->balancing != old->balancing) {
        mk_warn("reload: Balancing changes only on restart");
        cfg->balancing = old->balancing;
    }
    if (!mk_same_plugins(cfg, old)) {
        mk_warn("reload: plugins.load changes only on restart");
    }
    if ((cfg->user || old->user) && (!cfg->user || !old->user || strcmp(cfg->user, old->user))) {
        mk_warn("reload: User changes only on restart");
    }
#ifdef MK_HAVE_METRICS
    if (cfg->n_metrics_bounds != old->n_metrics_bounds ||
        memcmp(cfg->metrics_bounds, old->metrics_bounds,
               cfg->n_metrics_bounds * sizeof(cfg->metrics_bounds[0])) != 0) {
        mk_warn("reload: MetricsBuckets changes only on restart"); /* counted buckets stay */
    }
#endif
    if (mk_server_check_transports(&srv->plugins, cfg, err, errlen) != MK_OK ||
        mk_config_check_files(cfg, old, err, errlen) != MK_OK) {
        mk_config_unref(cfg);
        return MK_ERR;
    }
    /*
     * Nothing may change before everything is known to be valid: plugins
     * read their files into a pending state first (site sections may refer
     * to it), the sites are built, the new sockets bound; only then do the
     * plugins and the server switch.
     */
    if (mk_plugins_reload_prepare(&srv->plugins, err, errlen) != MK_OK) {
        mk_config_unref(cfg);
        return MK_ERR;
    }
    plans = NULL;
    owners = MK_FAIR(cfg) ? 1 : cfg->workers;
    if (mk_plugins_sites(&srv->plugins, cfg, err, errlen) != MK_OK ||
        mk_server_check_sites(&srv->plugins, cfg, err, errlen) != MK_OK ||
        !(plans = mk_server_plans(srv, old, cfg, owners, err, errlen))) {
        mk_config_unref(cfg); /* site data first: plugin code frees it */
        mk_plugins_reload_commit(&srv->plugins, false);
        return MK_ERR;
    }
    if (cfg->log_path && (!old->log_path || strcmp(cfg->log_path, old->log_path) != 0)) {
        if (mk_log_open(cfg->log_path) != MK_OK) {
            mk_warn("reload: Log %s: %s", cfg->log_path, strerror(errno));
        }
    }
    mk_log_set_level((enum mk_log_level) cfg->log_level);
    mk_process_limits(srv, cfg);
#ifdef MK_HAVE_METRICS
    mk_metrics_assign(&srv->metrics, srv->workers, srv->n_workers,
                      cfg); /* before any worker has cfg */
#endif
    pthread_mutex_lock(&srv->cfg_lock);
    srv->cfg = cfg;
    pthread_mutex_unlock(&srv->cfg_lock);
    mk_plugins_reload_commit(&srv->plugins, true);
    for (int i = 0; i < srv->n_workers; i++) {
        struct mk_listen_plan *plan = NULL;
        if (!MK_FAIR(cfg)) {
            plan = plans[i];
            plans[i] = NULL;
        }
        mk_worker_post(&srv->workers[i], MK_WCTL_CONFIG, mk_config_ref(cfg), plan, cfg->n_listen);
    }
#ifdef MK_HAVE_FAIR
    if (MK_FAIR(cfg)) {
        mk_listener_acceptor_post(srv, plans[0], cfg->n_listen);
        plans[0] = NULL;
    }
#endif
    mk_plans_free(plans, owners, cfg->n_listen);
    /* In force means for every new request: the workers switch on their
       next control event, which comes at once unless a hook blocks. */
    for (int i = 0; i < srv->n_workers; i++) {
        if (!mk_worker_wait_config(&srv->workers[i], cfg, MK_RELOAD_WAIT_MS)) {
            mk_warn("reload: worker %d has not switched to the new configuration yet", i);
        }
    }
    mk_config_unref(old);
    mk_info("configuration reloaded");
    return MK_OK;
}

void mk_server_reopen_logs(struct mk_server *srv)
{
    mk_plugins_bind(srv);
    if (mk_log_reopen() != MK_OK) {
        mk_warn("cannot reopen the log: %s", strerror(errno));
    }
    for (size_t i = 0; i < srv->plugins.count; i++) {
        if (srv->plugins.list[i]->reopen_logs) {
            srv->plugins.list[i]->reopen_logs();
        }
    }
}

/* ---- stop ---------------------------------------------------------------- */

void mk_server_signal_workers(struct mk_server *srv, unsigned flags)
{
#ifdef MK_HAVE_FAIR
    mk_listener_acceptor_stop(srv);
#endif
    for (int i = 0; i < srv->n_workers; i++) {
        if (srv->workers[i].running) {
            mk_worker_post(&srv->workers[i], flags, NULL, NULL, 0);
        }
    }
}

/*
 * Join the workers and release everything start() acquired. Order matters:
 * task threads and plugins' exit() may still hand suspended requests back to
 * workers, so both run after the workers stopped and before their memory
 * goes (the teardown gives those requests a NULL continuation); the
 * configuration goes before the plugins are unloaded, since plugin code
 * frees its site data.
 */
void mk_server_finish(struct mk_server *srv)
{
    mk_plugins_bind(srv);
    atomic_store_explicit(&srv->stats_ready, false, memory_order_release);
    for (int i = 0; i < srv->n_workers; i++) {
        if (srv->workers[i].running) {
            pthread_join(srv->workers[i].thread, NULL);
            srv->workers[i].running = false;
        }
    }
    mk_task_pool_stop(srv);
    for (size_t i = 0; i < srv->plugins.count; i++) {
        if (srv->plugins.list[i]->exit) {
            srv->plugins.list[i]->exit();
        }
    }
    for (int i = 0; i < srv->n_workers; i++) {
        mk_worker_teardown(&srv->workers[i]);
    }
    mk_free(srv->workers);
    srv->workers = NULL;
    srv->n_workers = 0;
#ifdef MK_HAVE_METRICS
    mk_metrics_labels_free(&srv->metrics);
    mk_pmetrics_free(&srv->pmetrics);
#endif
#ifdef MK_HAVE_FAIR
    if (srv->acceptor_ctl >= 0) {
        close(srv->acceptor_ctl);
        srv->acceptor_ctl = -1;
        mk_event_loop_destroy(&srv->acceptor_loop);
    }
    mk_listener_guard_release(&srv->acceptor_guard); /* an acceptor that never ran */
    mk_listener_plan_free(srv->acceptor_plan, srv->acceptor_plan_len);
    srv->acceptor_plan = NULL;
#endif
    if (srv->pidfile_written && srv->cfg->pidfile) {
        unlink(srv->cfg->pidfile);
        srv->pidfile_written = false;
    }
    if (srv->stop_efd >= 0) {
        close(srv->stop_efd);
        srv->stop_efd = -1;
    }
    pthread_mutex_lock(&srv->cfg_lock);
    struct mk_config *cfg = srv->cfg;
    srv->cfg = NULL;
    pthread_mutex_unlock(&srv->cfg_lock);
    mk_config_unref(cfg);
    mk_plugins_unload(&srv->plugins);
    srv->tasks.stop = false;
    srv->running = false;
}

void mk_server_stop(struct mk_server *srv)
{
    if (!srv->running) {
        return;
    }
    mk_server_signal_workers(srv, MK_WCTL_STOP);
    mk_server_finish(srv);
}

void mk_server_destroy(struct mk_server *srv)
{
    if (!srv) {
        return;
    }
    mk_server_stop(srv);
    for (size_t i = 0; i < srv->n_overrides; i++) {
        mk_free((char *) srv->overrides[i].key);
        mk_free((char *) srv->overrides[i].value);
    }
    mk_free(srv->overrides);
    for (size_t i = 0; i < srv->n_options; i++) {
        mk_free(srv->options[i]);
    }
    mk_free(srv->options);
    mk_free(srv->confdir);
    mk_free(srv->serve_dir);
#ifdef MK_HAVE_LIBMONKEY
    mk_lib_free(srv);
#endif
    mk_plugins_bind(NULL); /* this thread no longer acts for srv, nor logs to it */
    mk_log_sink_release(&srv->log);
#ifdef MK_HAVE_FAIR
    pthread_mutex_destroy(&srv->acceptor_lock);
#endif
    pthread_mutex_destroy(&srv->cfg_lock);
#ifdef MK_HAVE_RULES
    mk_keycount_free(atomic_load(&srv->per_client)); /* the workers are gone */
#endif
    pthread_mutex_destroy(&srv->cmd_lock);
    pthread_cond_destroy(&srv->cmd_cond);
    pthread_mutex_destroy(&srv->tasks.lock);
    pthread_cond_destroy(&srv->tasks.cond);
    mk_free(srv);
}
