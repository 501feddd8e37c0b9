/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * server.h: the runtime structures shared by the files of server/.
 *
 *   struct mk_server    the process: configuration, listeners, workers
 *   struct mk_worker    one thread with its own event loop, timers, memory
 *   struct mk_conn      one client connection, owned by one worker
 *   struct mk_request   one request on a connection: its own object, from
 *                       the worker's free list (HTTP/1.1 has one at a time,
 *                       HTTP/2 may have several); the protocol (proto.h)
 *                       creates and ends it
 *
 * Ownership: a connection, its buffers and its request belong to the worker
 * that accepted it (or received it from the acceptor) and are touched by no
 * other thread. Cross-thread traffic is limited to the counters marked
 * atomic and to the control message of each worker (mutex + eventfd).
 */
#ifndef MK_SERVER_SERVER_H
#define MK_SERVER_SERVER_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <monkey/mk_plugin.h>

#include "../core/event.h"
#include "../core/list.h"
#include "../core/memory.h"
#include "../core/timer.h"
#include "body.h"
#include "conf.h"
#include "file_cache.h"
#include "h1.h"
#include "http.h"
#include "proto.h"
#include "route.h"
#include "task_queue.h"

struct mk_server;
struct mk_worker;

/* ---- plugins ------------------------------------------------------------- */

struct mk_plugin_set {
    const struct mk_plugin **list; /* in plugins.load order */
    void **handles;                /* dlopen handles (NULL for built-in) */
    size_t count;
    /* The plugins' own structs (MK_PLUGIN_SELF); list[i] is a full-size
       copy of own[i] when the plugin was built for an older ABI minor. */
    const struct mk_plugin **own;
    /* Hooks present, in order, so the request path skips plugins without them. */
    const struct mk_plugin **accept, **request, **content, **done, **close, **batch;
    size_t n_accept, n_request, n_content, n_done, n_close, n_batch;
    /* transports[i]: list[i]'s transport as this server reads it (the fields
       newer than the plugin's ABI minor NULL), or NULL when it has none. */
    struct mk_transport **transports;
    struct mk_routes routes; /* registered by init(): every site's */
    void **self;             /* each plugin's context for this server (api->self_set) */
};

/* A request's slot for one plugin (api->ctx_set). */
struct mk_req_ctx {
    void *ctx;
    void (*cleanup)(void *ctx);
};

/* A suspended request (see api->suspend), or a task around one. */
struct mk_suspended {
    struct mk_worker *worker;
    struct mk_request *req;  /* kept allocated while this handle is out */
    uint64_t gen;            /* the request's generation when suspended */
    void (*work)(void *arg); /* a task's work, run on a task thread */
    mk_resume_cb cb;
    void *arg;
    struct mk_suspended *next; /* in a worker's resume queue */
    struct mk_task_entry task; /* a task's place in the task queue (under its lock) */
};

struct mk_task_pool {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct mk_task_queue queue; /* valid while n_threads > 0 */
    pthread_t *threads;
    int n_threads;
    bool stop;
    time_t warned[2]; /* when a refusal of each kind was last logged */
};

/* ---- listeners ----------------------------------------------------------- */

struct mk_listener {
    struct mk_event ev; /* first */
    int fd;
    char *spec; /* the Listen value, identifies the address */
    const struct mk_transport *transport;
    const char *options;      /* the transport's options (interned, see mk_server_options) */
    struct mk_worker *worker; /* the owner, or NULL for the acceptor's */
    struct mk_server *server;
    struct mk_list node;
};

/* ---- connections --------------------------------------------------------- */

enum mk_conn_state {
    MK_CONN_READ_HEAD = 0, /* waiting for or reading a request head */
    MK_CONN_SUSPENDED,     /* a plugin holds the request (api->suspend) */
    MK_CONN_READ_BODY,     /* buffering a body for a content handler */
    MK_CONN_WRITE,         /* sending a response */
    MK_CONN_DISCARD,       /* skipping the rest of a request body */
    MK_CONN_LINGER,        /* write side shut: draining input until EOF */
    MK_CONN_CLOSED,        /* waiting for the end of the event batch */
    MK_CONN_HANDSHAKE,     /* the transport's handshake runs (conn.c) */
    MK_CONN_TAKEOVER,      /* a plugin owns the bytes after a 101 (takeover.c) */
};

enum mk_timer_kind {
    MK_TIMER_NONE = 0,
    MK_TIMER_READ,      /* Timeout: head (from its first byte) and body */
    MK_TIMER_KEEPALIVE, /* KeepAliveTimeout: idle between requests */
    MK_TIMER_SEND,      /* SendTimeout: no write progress */
    MK_TIMER_LINGER,    /* lingering close */
    MK_TIMER_IDLE,      /* a taken-over connection's own idle timeout */
    MK_TIMER_KINDS
};

/* Response body source. */
enum mk_resp_body {
    MK_RESP_NONE = 0,
    MK_RESP_MEM,
    MK_RESP_FILE,
    MK_RESP_STREAM, /* pieces queued by the handler (api->stream_*) */
};

/* A queued piece of a streamed body: framing room, data, "\r\n". */
#define MK_PIECE_HDR 18 /* room for a chunk-size line ("%x\r\n") */
struct mk_piece {
    struct mk_piece *next;
    size_t len;        /* data bytes (the last piece: trailer bytes) */
    char *start, *end; /* bytes still to write, once framed */
    bool last;         /* the end of the body */
    bool framed;       /* start/end set by the protocol */
    char buf[];        /* MK_PIECE_HDR bytes, data, 2 bytes */
};

/* Request flags */
#define MK_REQ_KEEPALIVE 0x01u /* the connection stays open after this response */
#define MK_REQ_HEAD 0x02u      /* HEAD: headers only */
#define MK_REQ_CFG_REF 0x04u   /* counted in its worker's config users */
#define MK_REQ_CONTINUE_SENT 0x08u
#define MK_REQ_ACTIVE 0x10u       /* begun and not yet finished */
#define MK_REQ_NO_BODY 0x20u      /* status forbids a body (1xx, 204, 304) */
#define MK_REQ_BODY_READ 0x40u    /* the body asked for by a handler is complete */
#define MK_REQ_SUSPENDING 0x80u   /* the running hook called api->suspend() */
#define MK_REQ_COMPLETE 0x100u    /* the whole announced response was sent */
#define MK_REQ_PARKED 0x200u      /* suspended: waiting for api->resume() */
#define MK_REQ_ZOMBIE 0x400u      /* ended while handles were out: freed by the last resume */
#define MK_REQ_STREAM_END 0x800u  /* the streaming handler called stream_end */
#define MK_REQ_IDLE 0x1000u       /* a stream's queue is empty: waiting for its handler */
#define MK_REQ_PROCEEDING 0x2000u /* inside the stream's proceed callback */

/* Where a suspended request resumes. */
enum mk_stage {
    MK_STAGE_REQUEST = 1, /* request hook `stage_index` */
    MK_STAGE_CONTENT,     /* content hook `stage_index` */
    MK_STAGE_BODY,        /* r->handler, called again with the body */
    MK_STAGE_ROUTE,       /* the handler of r->route.route */
};

struct mk_request {
    struct mk_conn *conn;
    uint64_t gen;        /* distinguishes reuses of this struct (resume checks it) */
    uint32_t handles;    /* suspension handles not yet resumed: the struct must stay */
    struct mk_list node; /* in the worker's free or zombie list when not in use */
    struct mk_config *cfg;
    struct mk_vhost *vhost;
    struct mk_arena arena;
    struct mk_http_head head;
    char *path; /* decoded, normalised (arena); NULL until known */
    size_t path_len;
    uint16_t flags;
    uint8_t stage; /* enum mk_stage while suspended */
    uint16_t stage_index;
    int status;
    struct timespec start;  /* head complete, wall clock (when a plugin logs) */
    uint64_t start_mono_us; /* the same instant, monotonic */
                            /* body buffered for a content handler (malloc, freed at the end) */
    char *body;
    size_t body_len;
    size_t body_cap;
    const struct mk_plugin *handler; /* content plugin waiting for the body */
    const struct mk_plugin *plugin;  /* the plugin whose hook runs (or is suspended) */
    struct mk_suspended *task;       /* the queued task of a suspended hook, if any */

    /* response */
    const char *content_type;
    size_t content_type_len;
    char *extra_headers; /* "Name: value\r\n"..., arena */
    size_t extra_len;
    size_t extra_cap;
    enum mk_resp_body body_type;
    const char *mem;
    size_t mem_len;
    struct mk_file *file; /* a file cache entry the body comes from (fd borrowed) */
    void *owned;          /* a body buffer to free() at the end */
    int fd;
    off_t file_off;
    uint64_t body_left; /* body bytes still to send */
    uint64_t content_length;
    uint64_t bytes_sent; /* head and body */
    uint32_t head_bytes; /* of which the response head */
    /* streamed body: pieces in order, bytes queued, the handler's callback */
    struct mk_piece *q_head, *q_tail;
    size_t queued;
    mk_proceed_cb proceed;
    void *proceed_arg;
    bool chunked; /* framed with chunked coding (the protocol decides) */

    struct mk_body_stream bs; /* the body streamed to its handler (body.c) */
    /* the plugins' context slots (api->ctx_set), one per loaded plugin, in
       the arena; NULL until a plugin stores one, cleared at the end */
    struct mk_req_ctx *ctx;
    /* the site's route table: the route that took the request (its handler
       is in charge while route.route is set), its parameters, and the
       methods of every route matching the path (the Allow of a 405) */
    struct mk_route_match route;
    /* api->takeover(): who gets the connection once the 101 is sent (arena) */
    struct mk_upgrade *upgrade;
};

/* Connection flags */
#define MK_CONN_REFUSED 0x01u /* over the connection limit: answering 503 */
#define MK_CONN_CLOSE 0x02u   /* close once the current response is sent */
#define MK_CONN_STARTED 0x04u /* accept hooks ran: close hooks will run */

struct mk_conn {
    struct mk_event ev; /* first: the event loop hands back this pointer */
    uint8_t state;      /* enum mk_conn_state */
    uint8_t timer;      /* enum mk_timer_kind */
    uint8_t flags;
    uint8_t io_want;   /* MK_IO_WANT_* the transport's last EAGAIN asked for, 0: its own */
    uint32_t requests; /* responses completed */
    uint64_t gen;      /* distinguishes reuses of this struct */
    const struct mk_proto *proto;
    struct mk_worker *worker;
    const struct mk_transport *transport;
    void *transport_data;
    const char *listen_options;   /* the transport's options of its Listen line, or NULL */
    struct mk_takeover *takeover; /* set while a plugin owns the connection (takeover.c) */
    struct mk_list node;          /* closing or free list once closed */
    struct mk_timer expiry;       /* in the worker's timers while a timer is armed */

    union {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
    } peer;

    struct mk_h1 h1; /* the HTTP/1 codec's state: h1.c only */
};

/* ---- workers ------------------------------------------------------------- */

#define MK_WCTL_CONFIG 0x1u /* switch to the configuration in `msg` */
#define MK_WCTL_STOP 0x2u   /* graceful stop */
#define MK_WCTL_HALT 0x4u   /* stop now */

struct mk_retired_cfg {
    struct mk_config *cfg;
    unsigned users;
    struct mk_list node;
};

/* A listener change sent to a reuseport worker on reload. */
struct mk_listen_plan {
    char *spec;
    int fd; /* new socket, or -1: keep the worker's socket for spec */
    const struct mk_transport *transport;
    const char *options; /* interned */
};

struct mk_worker {
    int id;
    pthread_t thread;
    struct mk_server *server;
    struct mk_event_loop loop;
    struct mk_config *cfg; /* current; the worker holds one reference */
    unsigned cfg_users;    /* requests in flight on cfg */
    struct mk_list retired;

    /* control channel */
    struct mk_event ctl_ev;
    pthread_mutex_t msg_lock;
    unsigned msg_flags;
    struct mk_config *msg_cfg;
    struct mk_listen_plan *msg_plan;
    size_t msg_plan_len;
    struct mk_suspended *resumes; /* resumed requests to continue (under msg_lock) */
    struct mk_worker_call *calls; /* api->worker_call() functions (under msg_lock) */
    /* The configuration new requests get (NULL once the loop ended): for
       mk_worker_wait_config() on the controlling thread. */
    _Atomic(const struct mk_config *) cfg_serving;
    uint64_t next_gen;

    /* fair balancing: connections handed over by the acceptor */
    struct mk_event handoff_ev;
    int handoff[2];

    struct mk_list listeners;
    struct mk_list dead_listeners; /* closed during this batch, freed after it */
    /* every open connection, by deadline */
    struct mk_timers timers;
    struct mk_list closing; /* closed during this batch, recycled after it */
    struct mk_list zombies; /* requests ended while a suspension handle points to them */
    struct mk_list free_conns;
    unsigned n_free;
    struct mk_list free_reqs; /* requests to reuse (mk_request_new) */
    unsigned n_free_reqs;
    struct mk_pool pool;
    struct mk_file_cache fcache;

    atomic_uint n_conns;
    atomic_ulong n_requests;
    atomic_ullong bytes_out;

    time_t now;
    char date[48]; /* "Date: ...\r\n" */
    size_t date_len;
    bool stopping;
    uint64_t stop_deadline; /* ms, on the now_ms clock */
    bool running;

    uint64_t now_ms; /* CLOCK_MONOTONIC ms, read once per loop iteration */
    /* the plugins' event loop (loop.c): api->timer_start, fd_watch, child_watch */
    struct mk_timers plugin_timers;
    struct mk_list loop_watches; /* struct mk_loop_fd and mk_loop_child, live */
    struct mk_list loop_dead;    /* unwatched during this batch, freed after it */
};

/* A function another thread asked a worker to run (api->worker_call). */
struct mk_worker_call {
    void (*fn)(void *arg);
    void *arg;
    struct mk_worker_call *next;
};

/* Handoff record written to a worker's pipe by the acceptor (fair mode). */
struct mk_handoff {
    int fd;
    socklen_t addrlen;
    const struct mk_transport *transport;
    const char *options;
    union {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
    } peer;
};

/* ---- the server ---------------------------------------------------------- */

struct mk_server {
    struct mk_config *cfg; /* current */
    char *confdir;         /* NULL: serve_dir or built-in */
    char *serve_dir;
    struct mk_config_override *overrides;
    size_t n_overrides;

    struct mk_plugin_set plugins;
    struct mk_worker *workers;
    int n_workers;

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

    /* connection limit: n_conns served, n_refused answered 503 and lingering */
    atomic_uint n_conns;
    atomic_uint n_refused;
    unsigned max_conns;
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
    int stop_efd; /* eventfd signalled when the last worker exits */
    time_t started;
    bool running;
    bool pidfile_written;
    /* every Listen options text ever configured, kept until the server is
       destroyed: connections point to them (mk_server_options) */
    char **options;
    size_t n_options;
};

/* ---- functions shared inside server/ ------------------------------------- */

/* worker.c */
int mk_worker_setup(struct mk_worker *w, struct mk_server *srv, int id);
int mk_worker_spawn(struct mk_worker *w);
/*
 * Wait up to timeout_ms until worker w gives new requests `cfg` (or has
 * ended). True when it does. Controlling thread; cfg must stay referenced.
 */
bool mk_worker_wait_config(struct mk_worker *w, const struct mk_config *cfg, int timeout_ms);
void mk_worker_post(struct mk_worker *w, unsigned flags, struct mk_config *cfg,
                    struct mk_listen_plan *plan, size_t plan_len);
void mk_worker_teardown(struct mk_worker *w);
struct mk_worker *mk_worker_current(void);
/*
 * Make the calling thread act as worker w (NULL: as none) and read its
 * clocks, without running its loop: for driving a worker step by step
 * (tests/unit/server/loopback.c).
 */
void mk_worker_bind(struct mk_worker *w);
/* After an event batch: recycle the connections closed during it. */
void mk_worker_recycle(struct mk_worker *w);
void mk_worker_accept_fd(struct mk_worker *w, int fd, const struct sockaddr *sa, socklen_t len,
                         const struct mk_transport *transport, const char *options);
void mk_conn_timer_set(struct mk_conn *c, enum mk_timer_kind kind);
/* Arm the connection's MK_TIMER_IDLE for `ms` milliseconds. */
void mk_conn_timer_idle(struct mk_conn *c, uint32_t ms);
/* Queue a resumed request for its worker (any thread). */
void mk_worker_resume_post(struct mk_worker *w, struct mk_suspended *s);
/* Give every queued resume a NULL request (the worker is gone). */
void mk_worker_resume_drain(struct mk_worker *w);
/* Queue fn(arg) to run on the worker (any thread). MK_ERR: no such worker. */
int mk_worker_call(struct mk_server *srv, int worker, void (*fn)(void *arg), void *arg);
void mk_worker_cfg_release(struct mk_worker *w, struct mk_config *cfg);

/* loop.c: the plugins' timers and watches (api->timer_start and the rest) */
struct mk_loop_timer *mk_loop_timer_start(uint32_t ms, int repeat, mk_loop_timer_cb cb, void *arg);
int mk_loop_timer_stop(struct mk_loop_timer *t);
struct mk_loop_fd *mk_loop_fd_watch(int fd, uint32_t mask, mk_loop_fd_cb cb, void *arg);
int mk_loop_fd_modify(struct mk_loop_fd *h, uint32_t mask);
int mk_loop_fd_unwatch(struct mk_loop_fd *h);
struct mk_loop_child *mk_loop_child_watch(pid_t pid, mk_loop_child_cb cb, void *arg);
int mk_loop_child_unwatch(struct mk_loop_child *h);
uint64_t mk_loop_now_ms(void);
/* Run the plugin timers due at w->now_ms (on the worker). */
void mk_loop_expire(struct mk_worker *w);
/* Free the watches ended during the batch that just finished. */
void mk_loop_reap(struct mk_worker *w);
/* Release every timer and watch of the worker, without callbacks (its exit). */
void mk_loop_release(struct mk_worker *w);

/* conn.c: the connection's life, whatever its protocol */
void mk_conn_start(struct mk_conn *c);
void mk_conn_close(struct mk_conn *c);
void mk_conn_on_event(struct mk_event *ev, uint32_t ready);
void mk_conn_expire(struct mk_conn *c);
void mk_conn_refuse(struct mk_conn *c);
/* The server stops: close c unless a request is in progress on it. */
void mk_conn_go_away(struct mk_conn *c);
/* Close after a response: shut the write side, drain input, then close. */
void mk_conn_linger(struct mk_conn *c);
/* Stats counters are written by their worker only: no locked instruction. */
#define MK_STAT_ADD(var, n)                                                                        \
    atomic_store_explicit(&(var), atomic_load_explicit(&(var), memory_order_relaxed) + (n),        \
                          memory_order_relaxed)
extern const struct mk_transport mk_transport_plain;

/* request.c */
/* A new request on c, from the worker's free list: active, holding the worker's configuration. */
struct mk_request *mk_request_new(struct mk_conn *c);
/* End r (if still active) and give it back; kept while suspension handles are out. */
void mk_request_free(struct mk_request *r);
/* Free the worker's spare and zombie requests (worker teardown). */
void mk_request_pool_destroy(struct mk_worker *w);
void mk_request_run(struct mk_request *r);
struct mk_suspended *mk_request_suspend(struct mk_request *r);
void mk_request_resume(struct mk_suspended *s);
/* The suspended request is given up: drop its task if that has not started. */
void mk_request_drop_task(struct mk_request *r);
void mk_request_body_ready(struct mk_request *r);
/* A streamed body's handler stopped it with `rc` (a status, MK_ERR): handle it as
   the handler's result. */
void mk_request_body_result(struct mk_request *r, int rc);
void mk_request_error(struct mk_request *r, int status);
void mk_request_end(struct mk_request *r);

/* response.c: what a response is, whatever the protocol that sends it */
/* Forget the response body file: release a cache entry or close a descriptor. */
void mk_response_drop_file(struct mk_request *r);
int mk_response_add_header(struct mk_request *r, const char *name, size_t name_len,
                           const char *value, size_t value_len);
void mk_response_error(struct mk_request *r, int status);
/* Whether r's status forbids a body (1xx, 204, 304). */
bool mk_response_no_body(const struct mk_request *r);
/* Streams (api->stream_*): see mk_plugin.h for the contracts. */
#define MK_STREAM_HIGH_WATER (64u * 1024u) /* queued body bytes per request */
int mk_response_stream_start(struct mk_request *r, mk_proceed_cb proceed, void *arg);
int mk_response_stream_write(struct mk_request *r, const void *data, size_t len);
int mk_response_stream_end(struct mk_request *r, const char *trailers);
/* Free the queue; a handler that had not ended gets proceed(NULL, arg). */
void mk_response_stream_cancel(struct mk_request *r);
/* Free the first piece, written in full. */
void mk_response_stream_pop(struct mk_request *r);
/* Write the file body of r through the connection's transport: MK_OK (all
   sent), MK_AGAIN (socket full or budget spent), MK_ERR. */
int mk_response_send_file(struct mk_request *r, size_t budget);

/* static.c */
int mk_static_serve(struct mk_request *r);
int mk_static_open(const struct mk_vhost *vh, const char *rel, int flags);

/* listener.c */
int mk_listener_socket(const struct mk_config *cfg, const struct mk_listen_addr *a, bool reuseport,
                       char *err, size_t errlen);
void mk_listener_accept_cb(struct mk_event *ev, uint32_t ready);
/*
 * Make `listeners` (watched by `loop`) match `plan`: keep the sockets whose
 * spec the plan lists with fd -1, adopt the plan's new sockets (their fd
 * becomes -1 in the plan), close the others. New listeners get callback cb
 * and owner w (reuseport) or srv (the acceptor).
 */
void mk_listeners_apply(struct mk_list *listeners, struct mk_event_loop *loop, struct mk_list *dead,
                        struct mk_listen_plan *plan, size_t n, mk_event_cb cb, struct mk_worker *w,
                        struct mk_server *srv);
/* Close every listener; the structs go to `dead` (see mk_listeners_reap). */
void mk_listeners_close(struct mk_list *listeners, struct mk_event_loop *loop,
                        struct mk_list *dead);
/* Free listeners removed during an event batch, once the batch is over. */
void mk_listeners_reap(struct mk_list *dead);
/* Free a plan, closing the sockets nobody adopted. */
void mk_listen_plan_free(struct mk_listen_plan *plan, size_t n);
/*
 * `next` replaces `prev`, a plan its owner has not applied yet. `next` was
 * built against the configuration `prev` belongs to, so where it says
 * "keep" (fd -1) the owner may not hold the socket yet: it is in `prev`.
 * Such sockets move into `next`; `prev` is freed, closing the sockets of
 * addresses `next` no longer lists. Returns `next` (or `prev` when `next`
 * is NULL: a message without a plan leaves the pending one in place).
 */
struct mk_listen_plan *mk_listen_plan_supersede(struct mk_listen_plan *prev, size_t prev_len,
                                                struct mk_listen_plan *next, size_t next_len);

/* task.c: the task threads behind api->task() */
/*
 * Queue task `s` of request `r` in the share of r->plugin. MK_OK; 503 when
 * a bound of r's configuration refuses it (TaskQueuePerPlugin,
 * TaskQueuePerClient); MK_ERR when stopping or no thread could start.
 */
int mk_task_submit(struct mk_server *srv, struct mk_request *r, struct mk_suspended *s);
/* Take a task out of the queue if it has not started: true if it will not run. */
bool mk_task_cancel(struct mk_server *srv, struct mk_suspended *s);
/* Stop the threads after their current task; queued tasks are handed back unrun. */
void mk_task_pool_stop(struct mk_server *srv);

/* plugin.c */
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
/* api->command(): carried out by mk_server_loop(), waited for. */
int mk_server_command(struct mk_server *srv, int cmd, char *err, size_t errlen);
/* True while `monkey -t` checks a configuration. */
extern bool mk_plugins_checking;
void mk_plugins_unload(struct mk_plugin_set *set);
/*
 * The server whose plugins the calling thread acts for, when it is no
 * worker of it: the controlling thread at each entry of the library API,
 * a task thread at its start. api->self() and the server-wide API
 * functions use it (a worker thread uses its worker's server).
 */
void mk_plugins_bind(struct mk_server *srv);
/* Run the cleanups of r's context slots and clear them (request end). */
void mk_plugins_ctx_clear(struct mk_request *r);
const struct mk_transport *mk_plugins_transport(const struct mk_plugin_set *set, const char *name);
extern const struct mk_api mk_plugin_api;

#endif
