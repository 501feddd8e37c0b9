/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * worker.h: one worker thread (struct mk_worker) with its own event loop,
 * timers, memory and free lists; its control messages; the functions of
 * worker.c.
 *
 * Ownership: everything in a worker is its own thread's, except the
 * counters marked atomic and its control message (msg_lock + the eventfd
 * of ctl_ev), the only cross-thread traffic: another thread posts a
 * configuration, a listener plan, a stop, a resumed request or a call, and
 * the worker picks it up in its loop.
 */
#ifndef MK_SERVER_WORKER_H
#define MK_SERVER_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "../../core/event.h"
#include "../../core/list.h"
#include "../../core/memory.h"
#include "../../core/timer.h"
#include "../config/config_use.h"
#ifdef MK_HAVE_COMPRESS
#include "../request/compress_cache.h"
#endif
#include "../request/file_cache.h"
#include "listener.h"
#ifdef MK_HAVE_METRICS
#include "../request/metrics.h"
#include "../request/metrics_plugin.h"
#endif

struct mk_config;
struct mk_listen_plan;
struct mk_loop_timer;
struct mk_server;
struct mk_suspended;
struct mk_transport;
struct mk_worker_call;

#ifdef MK_HAVE_METRICS
/* The classes a connection is counted in (c->counted, conn_count.h). */
#define MK_COUNT_NONE 0u                          /* closed, or not placed yet */
#define MK_COUNT_READING (1u + MK_CSTATE_READING) /* not stored: mk_conn_reading() */
#define MK_COUNT_REFUSED (1u + MK_CSTATES)        /* over MaxConnections: in no state */
#define MK_COUNTS (MK_COUNT_REFUSED + 1u)         /* conns_in's size */
_Static_assert(MK_CSTATE_READING == 0, "reading is the first class: the others are stored");
#endif
#define MK_WCTL_CONFIG 0x1u /* switch to the configuration in `msg` */
#define MK_WCTL_STOP 0x2u   /* graceful stop */
#define MK_WCTL_HALT 0x4u   /* stop now */

struct mk_worker {
    int id;
    pthread_t thread;
    struct mk_server *server;
    struct mk_event_loop loop;
    int batch_n;              /* events of the batch being dispatched (0 outside the loop) */
    struct mk_list turns;     /* connections waiting for their next turn (mk_conn_next_turn) */
    struct mk_config_use use; /* use.cfg: the configuration in force here */

    /* control channel */
    struct mk_event ctl_ev;
    pthread_mutex_t msg_lock;
    unsigned msg_flags;
    struct mk_config *msg_cfg;
    struct mk_listen_plan *msg_plan;
    size_t msg_plan_len;
    struct mk_suspended *resumes; /* resumed requests to continue (under msg_lock) */
    /* resumed on this worker's own thread (a loop callback): continued after
       the batch of events, without the lock or the eventfd; newest first */
    struct mk_suspended *local_resumes;
    struct mk_worker_call *calls; /* api->worker_call() functions (under msg_lock) */
    /* The configuration new requests get (NULL once the loop ended): for
       mk_worker_wait_config() on the controlling thread. */
    _Atomic(const struct mk_config *) cfg_serving;
    uint64_t next_gen;

#ifdef MK_HAVE_FAIR
    /* fair balancing: connections handed over by the acceptor */
    struct mk_event handoff_ev;
    int handoff[2];
#endif

    struct mk_list listeners;
    struct mk_list dead_listeners;    /* closed during this batch, freed after it */
    struct mk_accept_guard accept;    /* out of descriptors: reserve, pause (listener.c) */
    struct mk_loop_timer *accept_due; /* the end of the pause; NULL until a first one */
    /* every open connection, by deadline */
    struct mk_timers timers;
    struct mk_list closing; /* closed during this batch, recycled after it */
    struct mk_list zombies; /* requests ended while a suspension handle points to them */
    struct mk_list handles; /* suspension handles of its requests not yet freed */
    struct mk_list free_conns;
    unsigned n_free;
    struct mk_list free_reqs; /* requests to reuse (mk_request_new) */
    unsigned n_free_reqs;
    struct mk_suspended *free_handles; /* suspension handles to reuse, linked by `next` */
    unsigned n_free_handles;
    struct mk_pool pool;
    struct mk_file_cache fcache;
#ifdef MK_HAVE_COMPRESS
    struct mk_zcache zcache; /* files compressed on the fly (static_compress.h) */
#endif
#ifdef MK_HAVE_REQID
    /* RequestId, TraceContext (request_trace.c): the last request ID made
       (a random prefix, '-', a counter, as text; MK_REQID_GEN_LEN bytes),
       a xorshift128+ state for span and trace ids; seeded from getrandom(2)
       once, at the first request that needs them */
    char reqid_text[33];
    uint64_t trace_rng[2];
    bool reqid_seeded;
#endif

    atomic_uint n_conns;
#ifdef MK_HAVE_METRICS
    struct mk_metrics_worker metrics; /* requests and bytes by site and class (metrics.h) */
    struct mk_pmetric_cells pmetrics; /* the plugins' metrics (metrics_plugin.h) */
    atomic_ullong conns_accepted;     /* connections served since start */
    atomic_ullong conns_refused;      /* over MaxConnections: 503 or closed */
    /* open connections by class (conn_count.h, MK_COUNT_*): [1 + MK_CSTATE_*]
       but reading (derived from n_conns), and the refused ones */
    atomic_uint conns_in[MK_COUNTS];
#ifdef MK_HAVE_H2
    atomic_ullong h2_rst_sent, h2_rst_received;         /* RST_STREAM frames */
    atomic_ullong h2_goaway_sent[MK_METRICS_H2_ERRORS]; /* GOAWAY frames by error code */
    atomic_ullong h2_goaway_received[MK_METRICS_H2_ERRORS];
#endif
#else
    atomic_ulong n_requests;
    atomic_ullong bytes_out;
#endif
#ifdef MK_HAVE_H2
    atomic_uint n_h2_conns;   /* connections speaking HTTP/2 now */
    atomic_uint n_h2_streams; /* their streams open now */
    atomic_ulong h2_streams;  /* streams opened since start */
#endif

    time_t now;
    char date[48]; /* "Date: ...\r\n" */
    size_t date_len;
    /* The Server line of cfg (the configuration in force) and the Date line,
       as every HTTP/1 head starts after its status line (worker.c) */
    char head_lines[112];
    size_t head_lines_len;
    bool stopping;
    uint64_t stop_deadline; /* ms, on the now_ms clock */
    bool running;

    uint64_t now_ms; /* CLOCK_MONOTONIC ms, read once per loop iteration */
    uint64_t now_us; /* the same reading in microseconds */
    /* the plugins' event loop (loop.c): api->timer_start, fd_watch, child_watch */
    struct mk_timers plugin_timers;
    struct mk_list loop_kept;          /* struct mk_loop_timer of timer_new(), armed or not */
    struct mk_list loop_watches;       /* struct mk_loop_fd and mk_loop_child, live */
    struct mk_list loop_dead;          /* unwatched during this batch, freed after it */
    struct mk_loop_timer *free_timers; /* timer records to reuse (loop.c), linked by `arg` */
    unsigned n_free_timers;
};

/* A function another thread asked a worker to run (api->worker_call). */
struct mk_worker_call {
    void (*fn)(void *arg);
    void *arg;
    struct mk_worker_call *next;
};

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
/*
 * Make the calling thread act as worker w (NULL: as none) and read its
 * clocks, without running its loop: for driving a worker step by step
 * (tests/unit/server/loopback.c).
 */
void mk_worker_bind(struct mk_worker *w);
/* After an event batch: recycle the connections closed during it. */
void mk_worker_recycle(struct mk_worker *w);
void mk_worker_accept_fd(struct mk_worker *w, int fd, const struct sockaddr *sa, socklen_t len,
                         const struct mk_transport *transport, const char *options, bool proxy);
/* Give every queued resume a NULL request (the worker is gone). */
void mk_worker_resume_drain(struct mk_worker *w);
/* Queue fn(arg) to run on the worker (any thread). MK_ERR: no such worker. */
int mk_worker_call(struct mk_server *srv, int worker, void (*fn)(void *arg), void *arg);

#endif
