/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * server.h: the process (struct mk_server) and the umbrella over the
 * runtime structures shared by the files of server/, one header a subject:
 *
 *   struct mk_server    the process: configuration, listeners, workers
 *                       (here)
 *   struct mk_worker    one thread with its own event loop, timers, memory
 *                       (worker.h; the plugins' timers and watches: loop.h)
 *   struct mk_conn      one client connection, owned by one worker
 *                       (conn.h)
 *   struct mk_request   one request on a connection: its own object, from
 *                       the worker's free list (HTTP/1.1 has one at a time,
 *                       HTTP/2 may have several); the protocol (proto.h)
 *                       creates and ends it (request.h)
 *   plugins.h           the plugin set, the loader and the API table
 *   task.h              suspended requests and the task threads
 *   listener.h          listening sockets, plans, the acceptor thread
 *
 * Including this header brings in all of them; a file that needs one
 * subject may include that header alone.
 *
 * Ownership: a connection, its buffers and its request belong to the worker
 * that accepted it (or received it from the acceptor) and are touched by no
 * other thread. Cross-thread traffic is limited to the counters marked
 * atomic and to the control message of each worker (mutex + eventfd).
 */
#ifndef MK_SERVER_SERVER_H
#define MK_SERVER_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <monkey/mk_plugin.h>

#include "../../core/event.h"
#include "../../core/list.h"
#include "../../core/log.h"
#include "../../core/memory.h"
#include "../../core/timer.h"
#include "../request/body.h"
#include "../config/conf.h"
#include "../conn/conn.h"
#include "../request/file_cache.h"
#include "../proto/h1.h"
#include "../http/http.h"
#include "../runtime/listener.h"
#include "../conn/loop.h"
#include "../plugin/plugins.h"
#include "../proto/proto.h"
#include "../request/request.h"
#include "../http/route.h"
#include "../request/task.h"
#include "../request/task_queue.h"
#include "../runtime/worker.h"

struct mk_lib;

struct mk_server {
    struct mk_config *cfg; /* current */
    char *confdir;         /* NULL: serve_dir or built-in */
    char *serve_dir;
    struct mk_config_override *overrides;
    size_t n_overrides;

    struct mk_plugin_set plugins;
    struct mk_worker *workers;
    int n_workers;

#ifdef MK_HAVE_FAIR
    /* fair balancing */
    pthread_t acceptor;
    struct mk_event_loop acceptor_loop;
    struct mk_list acceptor_listeners;
    struct mk_list acceptor_dead;
    int acceptor_ctl; /* eventfd */
    struct mk_event acceptor_ctl_ev;
    pthread_mutex_t acceptor_lock; /* guards the plan below */
    struct mk_listen_plan *acceptor_plan;
    size_t acceptor_plan_len;
    atomic_bool acceptor_stop;
    bool acceptor_running;
    struct mk_accept_guard acceptor_guard;
#endif

    /* accepting out of descriptors (listener.c): the warning, once a second,
       and the connections answered 503 with a reserve descriptor since it */
    struct mk_log_gate fd_gate;
    atomic_uint fd_shed;

    /* connection limit: n_conns served, n_refused answered 503 and lingering */
    atomic_uint n_conns;
    atomic_uint n_refused;
    unsigned max_conns;
    /* MaxConnectionsPerClient: the open connections of each client address
       (conn.c); made by the first configuration that asks, kept to the end */
    struct mk_keycount *_Atomic per_client;
    atomic_uint max_per_client; /* 0: not counted */
    atomic_uint workers_alive;
    atomic_bool stats_ready;  /* workers[] may be read by other threads (api->stats) */
    pthread_mutex_t cfg_lock; /* guards the `cfg` pointer for other threads */
    struct mk_task_pool tasks;

    /* api->command(): one command at a time, carried out by mk_server_loop() */
    pthread_mutex_t cmd_lock;
    pthread_cond_t cmd_cond;
    int cmd_efd;
    int cmd; /* pending MK_CMD_*, 0: none */
    bool cmd_done;
    int cmd_rc;
    char cmd_err[512];
    bool loop_running;
    bool loop_coming; /* mk_server_run: the loop runs once the start is over */
    int stop_efd;     /* eventfd signalled when the last worker exits */
    time_t started;
    bool running;
    bool pidfile_written;
    /* every Listen options text ever configured, kept until the server is
       destroyed: connections point to them (mk_server_options) */
    char **options;
    size_t n_options;
#ifdef MK_HAVE_LIBMONKEY
    struct mk_lib *lib; /* the program's sites and routes (lib.c); NULL: none */
#endif
    struct mk_log_sink log; /* this server's Log and LogLevel (core/log.h) */
#ifdef MK_HAVE_METRICS
    struct mk_metrics_labels metrics;       /* the sites' labels by slot (request/metrics.h) */
    struct mk_pmetrics pmetrics;            /* the plugins' metrics (request/metrics_plugin.h) */
    atomic_ullong reloads, reload_failures; /* mk_server_reload's outcomes */
#endif
};

/* process.c: api->command(): carried out by mk_server_loop(), waited for. */
int mk_process_command(struct mk_server *srv, int cmd, char *err, size_t errlen);

#endif
