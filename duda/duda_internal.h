/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/duda_internal.h: what the parts of the duda plugin share.
 *
 * Each object X of the service API (include/duda/duda.h) is duda/X.c,
 * which defines its table duda_X_obj: request, response, param, cookie,
 * session, gc, global, worker, event, console (and the dashboard), logger
 * (and its thread), data, conf, fconf, xtime and package. router and qs
 * are router_object.c and qs_object.c, since router.c and qs.c are their
 * pure parts. A function exported from a file is named for it: duda_X_*
 * in X.c (duda.c's are duda_*). The other files:
 *
 *   duda.c           the plugin: settings, [WEB_SERVICE] sections, misuse reports
 *   service.c        loading NAME.duda (ABI check, duda_main), adding its routes
 *   request.c        the request's life too, from the route's handler to its end
 *   static.c         the service's static files (DocumentRoot)
 *   socket.c         response->takeover and its socket
 *   session_redis.c  the Redis session store (with hiredis)
 *   router.c, qs.c, session_parse.c  pure parsers and checks, tested alone
 *   redis_loop.c     a hiredis connection on a worker's loop (with hiredis)
 *
 * session_parse.c and redis_loop.c are libraries (duda.cmake,
 * duda_library()) that the redis package links too.
 *
 * Threads: services are loaded on the controlling thread (site_init);
 * a request's duda_request lives on its worker. The thread-local current
 * service tells the objects whose callback runs.
 */
#ifndef DUDA_INTERNAL_H
#define DUDA_INTERNAL_H

/* A package sees the plugin through duda_package.h's tables and the libraries of duda.cmake. */
#ifdef DUDA_PACKAGE_BUILD
#error "duda_internal.h is the plugin's: a package uses duda_package.h and duda_library() code"
#endif

#define DUDA_PLUGIN_INTERNAL
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <duda/duda.h>
#include <monkey/mk_plugin.h>

#include "router.h"

#define DUDA_GLOBALS_MAX 64
#define DUDA_CONSOLE_LINES 16

extern const struct mk_api *duda_mk;
extern const struct duda_api duda_api_table;

/* [DUDA] of conf/plugins/duda.conf. */
struct duda_conf {
    char *services_root;
    char *packages_root;
    char *session_store; /* "memory" or redis://host:port/db */
};

struct duda_service;
struct duda_package;

/* One mapped route (router->map, root, dashboard). */
struct duda_route {
    char pattern[DUDA_PATTERN_MAX]; /* as the service mapped it */
    uint32_t methods;
    duda_callback_t cb;
    bool stream;    /* map_stream: the body is the callback's */
    bool dashboard; /* the console's page */
    bool root;      /* router->root */
    struct duda_service *svc;
};

/* A loaded service on one site of one configuration. */
struct duda_service {
    char *name;
    const char *title;
    bool root; /* Root on: no /name prefix */
    char *docroot, *confdir, *datadir, *logdir;
    char *file;                     /* ServicesRoot/NAME.duda */
    char *packages_root;            /* PackagesRoot of its configuration */
    struct duda_package **packages; /* the packages it loaded (one reference each) */
    size_t n_packages;
    void *dl;
    void (*exit_fn)(void);
    struct duda_route *routes;
    size_t n_routes, cap_routes;
    char map_err[320]; /* the first bad route of duda_main() */
    void (*pre_loop)(void);
    duda_global_t *globals[DUDA_GLOBALS_MAX];
    unsigned n_globals;
    unsigned workers;
    void **gvalues;            /* [worker * DUDA_GLOBALS_MAX + id] */
    unsigned char *gready;     /* the same shape: made yet? */
    unsigned char *loop_ready; /* [worker]: pre_loop ran */
    int docroot_fd;            /* -1: no DocumentRoot */
    atomic_ulong misuses;
    /* its requests: a series of monkey_duda_service_requests_total (ABI 3.19), -1: none */
    int m_requests;
    /*
     * Holders of the service (duda_service_hold/put): its site until the
     * configuration is freed, and what may still run its code after that:
     * worker-bound timers and watches, taken-over sockets, worker calls in
     * flight, spawned threads. The last one frees it (and unmaps its code).
     */
    atomic_long refs;
    bool unloaded; /* duda_service_unload ran: exit_fn and the values are gone */
    pthread_mutex_t console_lock;
    char console[DUDA_CONSOLE_LINES][160];
    unsigned console_next;
    struct duda_logger **logs;
    size_t n_logs;
    char *session_store; /* redis://...: sessions in Redis (session_redis.c); NULL: in process */
    struct duda_service *live_next; /* the services with per-worker values (global.c) */
    bool live;
};

/* What site_init() stores for a site. */
struct duda_site {
    struct duda_service **svc;
    size_t n;
};

/* A request-bound or worker-bound timer. */
struct duda_timer {
    struct mk_loop_timer *t;
    duda_request_t *dr; /* NULL: bound to the worker */
    struct duda_service *svc;
    void (*cb)(duda_request_t *dr, void *data);
    void *data;
    bool repeat, firing, deleted;
    bool kept;               /* event->timer_new(): stays after its call */
    struct duda_timer *next; /* in dr->timers */
};

struct duda_header {
    char *name, *value;
    struct duda_header *next;
};

struct duda_gc_item {
    void *p;
    void (*fn)(void *p); /* free, or gc->add_fn's */
    struct duda_gc_item *next;
};

/* A session of the Redis store as a request sees it (session_redis.c). */
struct duda_session_redis {
    char *name; /* the cookie's */
    char id[33];
    char *value;        /* NULL: none (or destroyed) */
    bool failed;        /* the store could not be asked, or its answer was lost */
    duda_request_t *dr; /* while its lookup is pending */
    struct duda_session_redis *next;
};

/* A request as a service sees it. Lives from the route's handler until the request's end. */
struct duda_request {
    struct mk_request *r; /* NULL once the request is gone */
    struct duda_service *svc;
    const struct duda_route *route;
    int refs; /* the request's own, a wait, a stream: on the worker */
    int status;
    char *ctype;
    struct duda_header *headers, **headers_tail;
    char *body;
    size_t len, cap;
    int file_fd;
    off_t file_off;
    uint64_t file_len;
    bool ended, streaming, stream_ended, waiting, tasking, misuse, called, body_streaming;
    atomic_int cont_done;
    struct mk_suspended *susp;
    void (*end_cb)(duda_request_t *dr);
    void (*on_data)(duda_request_t *dr, const char *data, size_t len);
    struct duda_gc_item *gc;
    struct duda_timer *timers;
    char *method, *path;
    void *user;    /* request->set_ctx */
    bool upgraded; /* response->takeover: the answer is a 101 without a body */
    /* The Redis session store: what it found, and the commands still unanswered. */
    struct duda_session_redis *sessions;
    int session_pending;
    bool session_failed; /* a write was refused or lost: the response is 503 */
    struct mk_suspended *session_susp;
    mk_resume_cb session_resume;
};

/* The plugin's context in one server (api->self). */
struct duda_self {
    const struct duda_conf *conf;
    char conf_dir[4096];
    atomic_ulong generation; /* names of loaded copies */
    atomic_ulong requests;   /* taken by a service's route */
    atomic_ulong misuses;    /* of the API, by every service */
    int m_family;            /* monkey_duda_service_requests_total{site,service} */
};

/* The service whose code runs on this thread (NULL: none). */
extern __thread struct duda_service *duda_current;
/* The request whose callback runs on this thread (NULL: none): misuse without a dr marks it. */
extern __thread duda_request_t *duda_current_request;

struct duda_self *duda_self(void);

/* Log a misuse of the API by the current service; the request answers 500. */
void duda_misuse(duda_request_t *dr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* service.c */
int duda_service_load(struct duda_service *svc, char *err, size_t errlen);
/*
 * The service's configuration is freed: its exit_fn runs and its per-worker
 * values and loggers go; its code stays mapped, and the struct allocated,
 * while holders remain. Then duda_service_put() drops the site's reference.
 */
void duda_service_unload(struct duda_service *svc);
/* One more holder of svc (any thread): give it back with duda_service_put. */
void duda_service_hold(struct duda_service *svc);
/* A holder is done (any thread); the last one unmaps the code and frees svc. */
void duda_service_put(struct duda_service *svc);
/* The service's per-worker values and their tracking: MK_OK or MK_ERR (memory). */
int duda_service_globals(struct duda_service *svc, char *err, size_t errlen);
/*
 * The service's routes, added to its site's table `t` (the plugin's
 * routes hook): its handlers under /NAME (or / for Root On), and its
 * DocumentRoot's files. MK_OK, or MK_ERR with the reason.
 */
int duda_service_routes(struct mk_route_table *t, struct duda_service *svc, char *err,
                        size_t errlen);

/* package.c: drop the service's references; the last one runs exit() and closes the package. */
void duda_package_release(struct duda_service *svc);

/* request.c: the request's life */
/* The route's handler (arg: the duda_route): runs its callback, on the request's worker. */
int duda_request_handler(struct mk_request *r, void *arg);
/* What the handler returns once the service's code returned (or continued it). */
int duda_request_finish(duda_request_t *dr);
/* Drop a reference; the last one frees dr. */
void duda_request_unref(duda_request_t *dr);
/* A parked request continues (wait/cont, worker->task). r is NULL when it is gone. */
int duda_request_continue(struct mk_request *r, void *arg);
/* dr is a request (a misuse if not) whose server request is still there. */
bool duda_request_live(duda_request_t *dr, const char *what);

/* response.c */
/* Hand the finished response to the server: what the handler returns. */
int duda_response_commit(duda_request_t *dr);
/* May the service still change the response's head (head) or body? A misuse if not. */
bool duda_response_writable(duda_request_t *dr, const char *what, bool head);
/* Whether s is a header name: not empty, no control byte, space or ':'. */
bool duda_response_header_name_ok(const char *s);

/* gc.c */
void *duda_gc_alloc(duda_request_t *dr, size_t size);
char *duda_gc_strndup(duda_request_t *dr, const char *s, size_t n);

/* router_object.c: console->dashboard, mapping the dashboard's route */
int duda_router_object_dashboard(const char *path);

/* static.c: the route of the service's DocumentRoot (arg: the duda_service) */
int duda_static_handler(struct mk_request *r, void *arg);

/* session.c */
void duda_session_shutdown(void);
unsigned long duda_session_count(void);
/* SessionStore: "memory" or a redis:// address (the check of the schema key). */
int duda_session_store_check(const char *value, char *reason, size_t len);

/*
 * session_redis.c: the Redis store (built with hiredis). prefetch() looks
 * up the sessions of dr's cookies: 0 (nothing to wait for), 1 (suspended:
 * resume(r, dr) follows, which drops one reference) or -1. hold() suspends
 * the same way while writes are unanswered, and is -1 once one failed.
 */
bool duda_session_redis_enabled(const duda_request_t *dr);
int duda_session_redis_prefetch(duda_request_t *dr, mk_resume_cb resume);
int duda_session_redis_hold(duda_request_t *dr, mk_resume_cb resume);
int duda_session_redis_create(duda_request_t *dr, const char *name, const char *id,
                              const char *value, long expires);
const char *duda_session_redis_get(duda_request_t *dr, const char *name);
/* session->lookup for the Redis store: DUDA_SESSION_* (*value its, not copied). */
int duda_session_redis_lookup(duda_request_t *dr, const char *name, const char **value);
int duda_session_redis_destroy(duda_request_t *dr, const char *name);
void duda_session_redis_release(duda_request_t *dr);
void duda_session_redis_worker_exit(void);

/* worker.c */
/* This worker runs svc's code: its pre_loop runs first, once per worker. */
void duda_worker_enter(struct duda_service *svc);
/* worker->call: fn(arg) on that worker, with the current service held until it ran. */
int duda_worker_call(int worker, void (*fn)(void *arg), void *arg);

/* event.c: the request ends, its timers are stopped (one firing frees itself after its call). */
void duda_event_timers_stop(duda_request_t *dr);

/* global.c */
void duda_global_release(struct duda_service *svc); /* destroy() every value made */
/* The service's per-worker values exist: released by a stopping worker or at the unload. */
void duda_global_track(struct duda_service *svc);
/* On a stopping worker: destroy() the values it made, of every service, while its loop lives. */
void duda_global_worker_exit(int worker);

/* logger.c */
void duda_logger_release(struct duda_service *svc);
void duda_logger_shutdown(void);
void duda_logger_reopen(void); /* SIGUSR1 */

/* console.c */
/* Keep a line for the dashboard (any thread). */
void duda_console_note(struct duda_service *svc, const char *line);
/* The dashboard's page, as the answer of dr (the route mapped by console->dashboard). */
void duda_console_dashboard(duda_request_t *dr);

/* conf.c: the current service's ConfDir, or NULL */
const char *duda_conf_path(void);

/* socket.c: response->takeover and its socket (ABI 1.1) */
int duda_socket_takeover(duda_request_t *dr, const struct duda_socket_ops *ops, void *arg,
                         unsigned idle_ms);
int duda_socket_write(duda_socket_t *s, const void *data, size_t len);
int duda_socket_close(duda_socket_t *s);
const char *duda_socket_remote_addr(duda_socket_t *s);

extern const struct duda_request_api duda_request_obj;
extern const struct duda_response_api duda_response_obj;
extern const struct duda_router_api duda_router_obj;
extern const struct duda_param_api duda_param_obj;
extern const struct duda_qs_api duda_qs_obj;
extern const struct duda_cookie_api duda_cookie_obj;
extern const struct duda_session_api duda_session_obj;
extern const struct duda_gc_api duda_gc_obj;
extern const struct duda_global_api duda_global_obj;
extern const struct duda_worker_api duda_worker_obj;
extern const struct duda_event_api duda_event_obj;
extern const struct duda_console_api duda_console_obj;
extern const struct duda_logger_api duda_logger_obj;
extern const struct duda_data_api duda_data_obj;
extern const struct duda_conf_api duda_conf_obj;
extern const struct duda_fconf_api duda_fconf_obj;
extern const struct duda_xtime_api duda_xtime_obj;
extern const struct duda_package_api duda_package_obj;

#endif
