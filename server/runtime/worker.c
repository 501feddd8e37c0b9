/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * worker.c: a worker thread: its event loop, its connections, its timers.
 *
 * Timers: every open connection has one timer armed, in the worker's timer
 * queues (core/timer.h): one FIFO queue per distinct duration, so each stays
 * sorted by deadline and a reload that changes a timeout applies to new
 * waits at once, however long the waits armed before it. Expiry looks at the
 * queue heads only. Arming, disarming and expiring are O(1) plus a walk over
 * the few queues.
 *
 * The clocks are read once per loop iteration (vDSO calls): CLOCK_MONOTONIC
 * in milliseconds for deadlines (now_ms), the wall clock for the Date header
 * (refreshed when the second changes). The wait lasts until the nearest
 * deadline of the connections' and the plugins' timers (or the graceful
 * stop), so timeouts keep millisecond precision; a worker with nothing armed
 * sleeps without a timeout.
 *
 * The plugins' timers, watched descriptors and child processes (loop.c)
 * ride on the same loop.
 *
 * Connections are recycled: a closed connection is parked on `closing` until
 * the current event batch ends (its event may still be pending in the batch)
 * and then kept on a free list for the next accept.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <time.h>

#include "../../core/clock.h"
#include "../../core/log.h"
#include "../conn/conn_count.h"
#include "../process/server.h"

#define MK_WORKER_EVENTS 256   /* events per epoll_wait */
#define MK_FREE_CONNS_MAX 1024 /* recycled connection structs kept per worker */
#define MK_POOL_CACHED_MAX 256 /* 4 KiB chunks kept per worker (1 MiB) */

/* ---- configuration in use ------------------------------------------------ */

static void mk_worker_head_lines(struct mk_worker *w);

static void mk_worker_cfg_switch(struct mk_worker *w, struct mk_config *cfg)
{
    mk_config_use_switch(&w->use, cfg);
    atomic_store_explicit(&w->cfg_serving, cfg, memory_order_release);
    mk_worker_head_lines(w);
    /* Index files, symlink policy or roots may have changed. */
    mk_file_cache_destroy(&w->fcache);
    mk_file_cache_init(&w->fcache, cfg->file_cache);
}

/* ---- timers -------------------------------------------------------------- */

/* The connections that used up their turn in an earlier loop turn. */
static void mk_worker_run_turns(struct mk_worker *w)
{
    struct mk_list due;

    if (mk_list_is_empty(&w->turns)) {
        return;
    }
    /* Those queued again meanwhile wait for the next loop turn. */
    mk_list_init(&due);
    due.next = w->turns.next;
    due.prev = w->turns.prev;
    due.next->prev = &due;
    due.prev->next = &due;
    mk_list_init(&w->turns);
    while (!mk_list_is_empty(&due)) {
        struct mk_conn *c = mk_list_entry(due.next, struct mk_conn, turn);
        mk_list_del(&c->turn);
        mk_list_init(&c->turn);
        c->proto->proceed(c);
    }
}

/* Expiry of one connection: it always disarms or re-arms (later) its timer. */
static void mk_worker_expire_cb(struct mk_timer *e, void *arg)
{
    (void) arg;
    mk_conn_expire(mk_container_of(e, struct mk_conn, expiry));
}

/* Expire the connections' timers, then the plugins' (their callbacks run here). */
static void mk_worker_expire(struct mk_worker *w)
{
    mk_timers_expire(&w->timers, w->now_ms, mk_worker_expire_cb, NULL);
    mk_loop_expire(w);
}

/* The Server and Date lines together, for the configuration in force. */
static void mk_worker_head_lines(struct mk_worker *w)
{
    size_t n = w->use.cfg ? w->use.cfg->server_header_len : 0;

    if (n) {
        memcpy(w->head_lines, w->use.cfg->server_header, n);
    }
    memcpy(w->head_lines + n, w->date, w->date_len);
    w->head_lines_len = n + w->date_len;
}

/* The wall clock moved to second `now`: a new Date header. */
static void mk_worker_tick(struct mk_worker *w, time_t now)
{
    char date[MK_HTTP_DATE_LEN];

    w->now = now;
    mk_http_date_format(now, date);
    memcpy(w->date, "Date: ", 6);
    memcpy(w->date + 6, date, MK_HTTP_DATE_LEN);
    memcpy(w->date + 6 + MK_HTTP_DATE_LEN, "\r\n", 2);
    w->date_len = 6 + MK_HTTP_DATE_LEN + 2;
    mk_worker_head_lines(w);
}

/* Read both clocks (once per loop iteration). */
static void mk_worker_clock(struct mk_worker *w)
{
    time_t now = time(NULL);

    w->now_us = mk_clock_mono_us();
    w->now_ms = w->now_us / 1000u;
    if (now != w->now) {
        mk_worker_tick(w, now);
    }
}

void mk_worker_bind(struct mk_worker *w)
{
    mk_loop_worker_set(w);
    if (w) {
        mk_worker_clock(w);
    }
}

/*
 * How long the next wait may last, in ms: until the nearest deadline of a
 * timer or of the graceful stop; -1 (forever) when nothing is armed. The
 * timers' next_due is a lower bound (a timer moved later or disarmed leaves
 * it early), read without walking the queues: at worst the loop wakes once
 * early, and the expiry that follows makes it exact again.
 */
static int mk_worker_wait_ms(const struct mk_worker *w)
{
    uint64_t next = w->timers.next_due;
    uint64_t plugin = w->plugin_timers.next_due;

    if (plugin < next) {
        next = plugin;
    }
    if (w->stopping && w->stop_deadline < next) {
        next = w->stop_deadline;
    }
    if (w->local_resumes || !mk_list_is_empty(&w->turns)) {
        return 0; /* resumed after the last batch (batch_done, a timer), or a turn due */
    }
    if (next == MK_TIMER_NEVER) {
        return -1;
    }
    if (next <= w->now_ms) {
        return 0;
    }
    return next - w->now_ms > INT_MAX ? INT_MAX : (int) (next - w->now_ms);
}

/* ---- connections --------------------------------------------------------- */

static struct mk_conn *mk_conn_get(struct mk_worker *w)
{
    struct mk_conn *c;

    if (!mk_list_is_empty(&w->free_conns)) {
        c = mk_list_entry(w->free_conns.next, struct mk_conn, node);
        mk_list_del(&c->node);
        w->n_free--;
    }
    else {
        c = mk_alloc(sizeof(*c));
    }
    memset(c, 0, sizeof(*c));
    c->gen = ++w->next_gen;
    c->ev.fd = -1;
    c->worker = w;
    mk_list_init(&c->node);
    mk_list_init(&c->turn);
    mk_timer_init(&c->expiry);
    return c;
}

/*
 * Move the connections closed during the last batch to the free list, and
 * free the listeners closed during it.
 */
void mk_worker_recycle(struct mk_worker *w)
{
    if (!mk_list_is_empty(&w->dead_listeners)) {
        mk_listener_reap(&w->dead_listeners);
    }
    if (!mk_list_is_empty(&w->loop_dead)) {
        mk_loop_reap(w);
    }
    while (!mk_list_is_empty(&w->closing)) {
        struct mk_conn *c = mk_list_entry(w->closing.next, struct mk_conn, node);
        mk_list_del(&c->node);
#ifdef MK_HAVE_METRICS
        mk_conn_uncount(c);
#endif
        if (w->n_free < MK_FREE_CONNS_MAX) {
            mk_list_add_head(&c->node, &w->free_conns);
            w->n_free++;
        }
        else {
            mk_free(c);
        }
    }
}

void mk_worker_accept_fd(struct mk_worker *w, int fd, const struct sockaddr *sa, socklen_t len,
                         const struct mk_transport *transport, const char *options, bool proxy)
{
    struct mk_server *srv = w->server;
    bool refuse = false, counted = false;

    if (atomic_fetch_add_explicit(&srv->n_conns, 1, memory_order_relaxed) >= srv->max_conns
#ifdef MK_HAVE_RULES
        /* a PROXY listener's peer is the balancer: its clients are not counted */
        || (!proxy && !mk_conn_client_acquire(srv, sa, &counted))
#endif
    ) {
        atomic_fetch_sub_explicit(&srv->n_conns, 1, memory_order_relaxed);
        /* Over the limit: a few get a 503, the rest not even that (it takes memory). */
        unsigned margin = srv->max_conns / 16 + 16;
#ifdef MK_HAVE_METRICS
        MK_STAT_ADD(w->conns_refused, 1);
#endif
        if (atomic_fetch_add_explicit(&srv->n_refused, 1, memory_order_relaxed) >= margin) {
            atomic_fetch_sub_explicit(&srv->n_refused, 1, memory_order_relaxed);
            close(fd);
            return;
        }
        refuse = true;
    }
#ifdef MK_HAVE_METRICS
    else {
        MK_STAT_ADD(w->conns_accepted, 1);
    }
#endif
    struct mk_conn *c = mk_conn_get(w);
    c->ev.fd = fd;
    c->transport = transport;
    c->listen_options = options;
    c->flags = (proxy ? MK_CONN_PROXY : 0) | (counted ? MK_CONN_COUNTED : 0);
    if (len > sizeof(c->peer)) {
        len = sizeof(c->peer);
    }
    memcpy(&c->peer, sa, len);
    c->local_len = 0;
    atomic_fetch_add_explicit(&w->n_conns, 1, memory_order_relaxed);
    if (refuse) {
        mk_conn_refuse(c);
        return;
    }
    mk_conn_start(c);
}

#ifdef MK_HAVE_FAIR
/* Fair mode: connections handed over by the acceptor. */
static void mk_worker_handoff_cb(struct mk_event *ev, uint32_t ready)
{
    struct mk_worker *w = mk_container_of(ev, struct mk_worker, handoff_ev);
    struct mk_handoff batch[32];
    (void) ready;

    ssize_t n = read(w->handoff[0], batch, sizeof(batch));
    if (n <= 0) {
        return;
    }
    for (size_t i = 0; i < (size_t) n / sizeof(batch[0]); i++) {
        if (w->stopping) {
            close(batch[i].fd);
            continue;
        }
        mk_worker_accept_fd(w, batch[i].fd, &batch[i].peer.sa, batch[i].addrlen, batch[i].transport,
                            batch[i].options, batch[i].proxy);
    }
}
#endif

/* ---- stopping ------------------------------------------------------------ */

#ifdef MK_HAVE_H2
/* A reload reached this worker: let each connection's protocol react (HTTP/2's GOAWAY). */
static void mk_worker_reload_cb(struct mk_timer *e, void *arg)
{
    (void) arg;
    mk_conn_reload(mk_container_of(e, struct mk_conn, expiry));
}
#endif

/* Close a connection that waits for a request and has received none of it. */
static void mk_worker_close_idle_cb(struct mk_timer *e, void *arg)
{
    struct mk_conn *c = mk_container_of(e, struct mk_conn, expiry);
    (void) arg;

    mk_conn_go_away(c);
}

static void mk_worker_begin_stop(struct mk_worker *w)
{
    if (w->stopping) {
        return;
    }
    w->stopping = true;
    w->stop_deadline = w->now_ms + w->use.cfg->graceful_timeout_ms;
    mk_listener_close_all(&w->listeners, &w->loop, &w->dead_listeners);
    mk_timers_each(&w->timers, mk_worker_close_idle_cb, NULL);
}

static void mk_worker_close_all(struct mk_worker *w)
{
    struct mk_timer *e;

    while ((e = mk_timers_any(&w->timers)) != NULL) {
        mk_conn_close(mk_container_of(e, struct mk_conn, expiry)); /* disarms it */
    }
}

/* ---- resumed requests ---------------------------------------------------- */

/* A list, newest first, turned oldest first. */
static struct mk_suspended *mk_worker_fifo(struct mk_suspended *list)
{
    struct mk_suspended *fifo = NULL;

    while (list) {
        struct mk_suspended *next = list->next;
        list->next = fifo;
        fifo = list;
        list = next;
    }
    return fifo;
}

/* Continue the requests resumed on the worker's own thread, oldest first,
   and those their continuations resume in turn. */
static void mk_worker_run_local_resumes(struct mk_worker *w)
{
    while (w->local_resumes) {
        struct mk_suspended *s = mk_worker_fifo(w->local_resumes);
        w->local_resumes = NULL;
        while (s) {
            struct mk_suspended *next = s->next;
            mk_request_resume(s);
            s = next;
        }
    }
}

/* Take the queue, oldest first. */
static struct mk_suspended *mk_worker_take_resumes(struct mk_worker *w)
{
    struct mk_suspended *list;

    pthread_mutex_lock(&w->msg_lock);
    list = w->resumes;
    w->resumes = NULL;
    pthread_mutex_unlock(&w->msg_lock);
    return mk_worker_fifo(list);
}

int mk_worker_call(struct mk_server *srv, int worker, void (*fn)(void *arg), void *arg)
{
    uint64_t one = 1;

    if (!atomic_load_explicit(&srv->stats_ready, memory_order_acquire) || worker < 0 ||
        worker >= srv->n_workers) {
        return MK_ERR;
    }
    struct mk_worker *w = &srv->workers[worker];
    struct mk_worker_call *call = mk_try_alloc(sizeof(*call));
    if (!call) {
        return MK_ERR;
    }
    call->fn = fn;
    call->arg = arg;
    pthread_mutex_lock(&w->msg_lock);
    call->next = w->calls;
    w->calls = call;
    pthread_mutex_unlock(&w->msg_lock);
    ssize_t ignored = write(w->ctl_ev.fd, &one, sizeof(one));
    (void) ignored;
    return MK_OK;
}

/* Run the queued calls, oldest first (on the worker, or at teardown). */
static void mk_worker_run_calls(struct mk_worker *w)
{
    struct mk_worker_call *list, *fifo = NULL;

    pthread_mutex_lock(&w->msg_lock);
    list = w->calls;
    w->calls = NULL;
    pthread_mutex_unlock(&w->msg_lock);
    while (list) {
        struct mk_worker_call *next = list->next;
        list->next = fifo;
        fifo = list;
        list = next;
    }
    while (fifo) {
        struct mk_worker_call *next = fifo->next;
        fifo->fn(fifo->arg);
        mk_free(fifo);
        fifo = next;
    }
}

void mk_worker_resume_drain(struct mk_worker *w)
{
    mk_worker_run_calls(w);
    struct mk_suspended *lists[2] = {mk_worker_fifo(w->local_resumes), mk_worker_take_resumes(w)};
    w->local_resumes = NULL;
    for (int i = 0; i < 2; i++) {
        struct mk_suspended *s = lists[i];
        while (s) {
            struct mk_suspended *next = s->next;
            s->cb(NULL, s->arg);
            mk_request_handle_free(s);
            s = next;
        }
    }
}

/* ---- control channel ----------------------------------------------------- */

bool mk_worker_wait_config(struct mk_worker *w, const struct mk_config *cfg, int timeout_ms)
{
    const struct timespec step = {0, 100 * 1000};

    for (int waited_us = 0;; waited_us += 100) {
        const struct mk_config *now = atomic_load_explicit(&w->cfg_serving, memory_order_acquire);
        if (now == cfg || now == NULL) {
            return true;
        }
        if (waited_us >= timeout_ms * 1000) {
            return false;
        }
        nanosleep(&step, NULL);
    }
}

void mk_worker_post(struct mk_worker *w, unsigned flags, struct mk_config *cfg,
                    struct mk_listen_plan *plan, size_t plan_len)
{
    uint64_t one = 1;

    pthread_mutex_lock(&w->msg_lock);
    if (flags & MK_WCTL_CONFIG) {
        if (w->msg_cfg) { /* an earlier reload not yet applied: superseded */
            mk_config_unref(w->msg_cfg);
        }
        w->msg_cfg = cfg;
        if (plan) {
            /* Sockets of a plan not yet taken (the thread has not started,
               or an earlier reload) must not be closed under a "keep". */
            w->msg_plan = mk_listener_plan_supersede(w->msg_plan, w->msg_plan_len, plan, plan_len);
            w->msg_plan_len = plan_len;
        }
    }
    w->msg_flags |= flags;
    pthread_mutex_unlock(&w->msg_lock);
    ssize_t ignored = write(w->ctl_ev.fd, &one, sizeof(one));
    (void) ignored;
}

static void mk_worker_ctl_cb(struct mk_event *ev, uint32_t ready)
{
    struct mk_worker *w = mk_container_of(ev, struct mk_worker, ctl_ev);
    struct mk_config *cfg;
    struct mk_listen_plan *plan;
    size_t plan_len;
    unsigned flags;
    uint64_t v;
    (void) ready;

    ssize_t ignored = read(w->ctl_ev.fd, &v, sizeof(v));
    (void) ignored;
    pthread_mutex_lock(&w->msg_lock);
    flags = w->msg_flags;
    cfg = w->msg_cfg;
    plan = w->msg_plan;
    plan_len = w->msg_plan_len;
    w->msg_flags = 0;
    w->msg_cfg = NULL;
    w->msg_plan = NULL;
    w->msg_plan_len = 0;
    pthread_mutex_unlock(&w->msg_lock);

    if ((flags & MK_WCTL_CONFIG) && cfg) {
        if (plan && !w->stopping) {
            mk_listener_apply_all(&w->listeners, &w->loop, &w->dead_listeners, plan, plan_len,
                                  mk_listener_accept_cb, w, NULL);
        }
        mk_worker_cfg_switch(w, cfg);
#ifdef MK_HAVE_H2
        if (!w->stopping) {
            mk_timers_each(&w->timers, mk_worker_reload_cb, NULL);
        }
#endif
    }
    mk_listener_plan_free(plan, plan_len);
    if (flags & MK_WCTL_STOP) {
        mk_worker_begin_stop(w);
    }
    if (flags & MK_WCTL_HALT) {
        mk_worker_begin_stop(w);
        w->stop_deadline = 0;
    }
    struct mk_suspended *s = mk_worker_take_resumes(w);
    while (s) {
        struct mk_suspended *next = s->next;
        mk_request_resume(s);
        s = next;
    }
    mk_worker_run_calls(w);
}

/* ---- thread -------------------------------------------------------------- */

int mk_worker_setup(struct mk_worker *w, struct mk_server *srv, int id)
{
    memset(w, 0, sizeof(*w));
    w->id = id;
    w->server = srv;
#ifdef MK_HAVE_METRICS
    mk_metrics_worker_init(&w->metrics);
    mk_pmetrics_worker_init(&srv->pmetrics, &w->pmetrics);
#endif
    mk_config_use_init(&w->use, mk_config_ref(srv->cfg));
    atomic_init(&w->cfg_serving, w->use.cfg);
#ifdef MK_HAVE_FAIR
    w->handoff[0] = w->handoff[1] = -1;
    w->handoff_ev.fd = -1;
#endif
    w->accept.reserve = -1;
    mk_list_init(&w->listeners);
    mk_list_init(&w->dead_listeners);
    mk_list_init(&w->closing);
    mk_list_init(&w->turns);
    mk_list_init(&w->zombies);
    mk_list_init(&w->handles);
    mk_list_init(&w->free_conns);
    mk_list_init(&w->free_reqs);
    mk_timers_init(&w->timers);
    mk_timers_init(&w->plugin_timers);
    mk_list_init(&w->loop_kept);
    mk_list_init(&w->loop_watches);
    mk_list_init(&w->loop_dead);
    mk_pool_init(&w->pool, MK_POOL_CACHED_MAX);
    mk_file_cache_init(&w->fcache, srv->cfg->file_cache);
#ifdef MK_HAVE_COMPRESS
    mk_compress_cache_init(&w->zcache);
#endif
    pthread_mutex_init(&w->msg_lock, NULL);
    w->ctl_ev.fd = -1;

    if (mk_event_loop_init(&w->loop, MK_WORKER_EVENTS) != MK_OK) {
        return MK_ERR;
    }
    int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (efd < 0 || mk_event_add(&w->loop, &w->ctl_ev, efd, MK_EV_READ, mk_worker_ctl_cb) != MK_OK) {
        if (efd >= 0) {
            close(efd);
        }
        return MK_ERR;
    }
    if (!MK_FAIR(srv->cfg)) {
        mk_listener_guard_init(&w->accept); /* it accepts on its own listeners */
    }
#ifdef MK_HAVE_FAIR
    if (MK_FAIR(srv->cfg)) {
        if (pipe2(w->handoff, O_NONBLOCK | O_CLOEXEC) < 0) {
            return MK_ERR;
        }
        fcntl(w->handoff[0], F_SETPIPE_SZ, 1 << 20);
        if (mk_event_add(&w->loop, &w->handoff_ev, w->handoff[0], MK_EV_READ,
                         mk_worker_handoff_cb) != MK_OK) {
            return MK_ERR;
        }
    }
#endif
    return MK_OK;
}

/* Give the worker its listening sockets (reuseport); it owns them after. */
static void mk_worker_take_listeners(struct mk_worker *w)
{
    struct mk_listen_plan *plan;
    size_t n;

    pthread_mutex_lock(&w->msg_lock);
    plan = w->msg_plan;
    n = w->msg_plan_len;
    w->msg_plan = NULL;
    w->msg_plan_len = 0;
    pthread_mutex_unlock(&w->msg_lock);
    if (plan) {
        mk_listener_apply_all(&w->listeners, &w->loop, &w->dead_listeners, plan, n,
                              mk_listener_accept_cb, w, NULL);
        mk_listener_plan_free(plan, n);
    }
}

static void *mk_worker_main(void *arg)
{
    struct mk_worker *w = arg;
    struct mk_plugin_set *ps = &w->server->plugins;

    mk_loop_worker_set(w);
    mk_log_bind(&w->server->log);
    mk_worker_clock(w);
    mk_worker_take_listeners(w);
    for (size_t i = 0; i < ps->count; i++) {
        if (ps->list[i]->worker_init && ps->list[i]->worker_init(w->id) != MK_OK) {
            mk_err("plugin %s: worker %d failed to start", ps->list[i]->name, w->id);
        }
    }

    for (;;) {
        int n = mk_event_wait(&w->loop, mk_worker_wait_ms(w));
        if (n < 0) {
            mk_err("worker %d: event wait failed: %s", w->id, strerror(errno));
            break;
        }
        /* The clock first: the wait may have lasted long. */
        mk_worker_clock(w);
        mk_worker_expire(w);
        w->batch_n = n;
        mk_event_dispatch(&w->loop, n);
        w->batch_n = 0;
        mk_worker_run_turns(w);
        mk_worker_run_local_resumes(w);
        for (size_t i = 0; i < ps->n_batch; i++) {
            ps->batch[i]->batch_done(w->id);
        }
        mk_worker_recycle(w);

        if (w->stopping) {
            if (w->now_ms >= w->stop_deadline) {
                mk_worker_close_all(w);
                mk_worker_recycle(w);
            }
            if (atomic_load(&w->n_conns) == 0) {
                break;
            }
        }
    }

    atomic_store_explicit(&w->cfg_serving, NULL, memory_order_release);
    mk_worker_close_all(w);
    mk_worker_recycle(w);
    mk_listener_close_all(&w->listeners, &w->loop, &w->dead_listeners);
    mk_listener_reap(&w->dead_listeners);
    mk_file_cache_destroy(&w->fcache);
    for (size_t i = 0; i < ps->count; i++) {
        if (ps->list[i]->worker_exit) {
            ps->list[i]->worker_exit(w->id);
        }
    }
    mk_loop_release(w); /* what the plugins left running */
    if (atomic_fetch_sub(&w->server->workers_alive, 1) == 1) {
        uint64_t one = 1;
        ssize_t ignored = write(w->server->stop_efd, &one, sizeof(one));
        (void) ignored;
    }
    mk_loop_worker_set(NULL);
    return NULL;
}

int mk_worker_spawn(struct mk_worker *w)
{
    pthread_attr_t attr;
    int rc;

    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    rc = pthread_create(&w->thread, &attr, mk_worker_main, w);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        errno = rc;
        return MK_ERR;
    }
    w->running = true;
    return MK_OK;
}

/* After the thread has exited (or never started): release everything. */
void mk_worker_teardown(struct mk_worker *w)
{
    mk_worker_resume_drain(w);
    mk_request_handles_reclaim(w);
    mk_request_pool_destroy(w);
    while (!mk_list_is_empty(&w->free_conns)) {
        struct mk_conn *c = mk_list_entry(w->free_conns.next, struct mk_conn, node);
        mk_list_del(&c->node);
        mk_free(c);
    }
    mk_listener_close_all(&w->listeners, &w->loop, &w->dead_listeners);
    mk_listener_reap(&w->dead_listeners);
    if (w->msg_cfg) {
        mk_config_unref(w->msg_cfg);
    }
    mk_listener_plan_free(w->msg_plan, w->msg_plan_len);
    mk_config_use_destroy(&w->use);
#ifdef MK_HAVE_METRICS
    mk_metrics_worker_free(&w->metrics);
    mk_pmetrics_cells_free(&w->pmetrics);
#endif
    if (w->ctl_ev.fd >= 0) {
        close(w->ctl_ev.fd);
    }
#ifdef MK_HAVE_FAIR
    for (int i = 0; i < 2; i++) {
        if (w->handoff[i] >= 0) {
            close(w->handoff[i]);
        }
    }
#endif
    mk_listener_guard_release(&w->accept);
    mk_event_loop_destroy(&w->loop);
    mk_file_cache_destroy(&w->fcache);
#ifdef MK_HAVE_COMPRESS
    mk_compress_cache_destroy(&w->zcache); /* after the drain: no job is left pending */
#endif
    mk_timers_destroy(&w->timers);
    mk_loop_release(w); /* a worker that never ran */
    mk_timers_destroy(&w->plugin_timers);
    mk_pool_destroy(&w->pool);
    pthread_mutex_destroy(&w->msg_lock);
}
