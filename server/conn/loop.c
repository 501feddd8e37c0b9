/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * loop.c: the plugins' share of a worker's event loop (api->timer_start,
 * api->fd_watch, api->child_watch).
 *
 * Everything here belongs to the worker that created it and is touched only
 * on that worker's thread: a call from another thread is refused (EPERM or
 * MK_ERR), so a plugin on a task thread goes through api->worker_call().
 *
 * Timers live in the worker's `plugin_timers` queues (core/timer.h) while
 * armed, apart from the connections' so that expiry knows what it holds; the
 * worker sleeps until the nearest deadline of both. The timers of
 * timer_new(), which outlive their firing, are also on its `loop_kept`
 * list, so that the worker's exit finds those that are not armed. Descriptor and child watches
 * embed a `struct mk_event` in the worker's loop. An unwatched record may still have an event
 * pending in the current batch: mk_event_del() marks it (the dispatcher skips it) and it is freed
 * only after the batch (mk_loop_reap). Children are watched through a pidfd (Linux 5.3 or later):
 * readable once the child exited, then waitpid() reaps it on the worker that watches it.
 *
 * What the plugins leave running when their worker exits is released
 * (mk_loop_release) after their worker_exit() hooks: no callback runs then.
 * A worker keeps up to MK_LOOP_FREE_TIMERS_MAX freed timer records for its
 * next timers (a proxied or gateway request starts and stops one), freed
 * by mk_loop_release too.
 *
 * The loop also knows which worker runs on this thread (mk_loop_worker):
 * the one thing about workers that the layers below the worker threads
 * (connections, requests, the plugin API) ask.
 */
#include <errno.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../core/clock.h"
#include "../../core/log.h"
#include "loop.h"
#include "../runtime/worker.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* the same number on every architecture */
#endif

__thread struct mk_worker *mk_loop_current;

void mk_loop_worker_set(struct mk_worker *w)
{
    mk_loop_current = w;
}

_Static_assert(MK_LOOP_READ == MK_EV_READ && MK_LOOP_WRITE == MK_EV_WRITE &&
                   MK_LOOP_ERROR == MK_EV_ERROR,
               "the plugin API shares the event loop's readiness bits");

struct mk_loop_timer {
    struct mk_timer entry; /* in the worker's plugin_timers while armed */
    struct mk_worker *worker;
    uint32_t ms;
    bool repeat;
    bool kept;    /* timer_new(): stays after firing, on the worker's loop_kept */
    bool firing;  /* its callback runs now */
    bool stopped; /* timer_stop() during the callback: freed after it */
    mk_loop_timer_cb cb;
    void *arg;
    struct mk_list node; /* a kept timer: in loop_kept */
};

/* What fd and child watches share; the event first (the loop hands it back). */
struct mk_loop_watch {
    struct mk_event ev;
    struct mk_worker *worker;
    struct mk_list node; /* loop_watches while watched, then loop_dead */
    bool is_child;
};

struct mk_loop_fd {
    struct mk_loop_watch w; /* first */
    int fd;                 /* the plugin's descriptor (ev.fd is -1 once unwatched) */
    mk_loop_fd_cb cb;
    void *arg;
};

struct mk_loop_child {
    struct mk_loop_watch w; /* first; ev.fd is the pidfd */
    pid_t pid;
    mk_loop_child_cb cb; /* NULL after child_unwatch(): reap quietly */
    void *arg;
};

/* The calling thread's worker, or NULL with errno EPERM. */
static struct mk_worker *mk_loop_owner(void)
{
    struct mk_worker *w = mk_loop_worker();

    if (!w) {
        errno = EPERM;
    }
    return w;
}

/* ---- timers -------------------------------------------------------------- */

/* Timer records a worker keeps for the next ones: a request's timer is one start and one stop. */
#define MK_LOOP_FREE_TIMERS_MAX 64

/* A timer record for w, not armed (one it kept, else a new one); NULL with errno ENOMEM. */
static struct mk_loop_timer *mk_loop_timer_alloc(struct mk_worker *w, mk_loop_timer_cb cb,
                                                 void *arg)
{
    struct mk_loop_timer *t = w->free_timers;

    if (t) {
        w->free_timers = t->arg;
        w->n_free_timers--;
    }
    else if (!(t = mk_try_alloc(sizeof(*t)))) {
        errno = ENOMEM;
        return NULL;
    }
    *t = (struct mk_loop_timer){.worker = w, .cb = cb, .arg = arg};
    mk_timer_init(&t->entry);
    return t;
}

static void mk_loop_timer_free(struct mk_loop_timer *t)
{
    struct mk_worker *w = t->worker;

    mk_timer_disarm(&t->entry);
    if (t->kept) {
        mk_list_del(&t->node);
    }
    if (w->n_free_timers < MK_LOOP_FREE_TIMERS_MAX) {
        t->arg = w->free_timers; /* kept for mk_loop_timer_alloc */
        w->free_timers = t;
        w->n_free_timers++;
        return;
    }
    mk_free(t);
}

struct mk_loop_timer *mk_loop_timer_start(uint32_t ms, int repeat, mk_loop_timer_cb cb, void *arg)
{
    struct mk_worker *w = mk_loop_owner();

    if (!w) {
        return NULL;
    }
    if (!cb || (repeat && ms == 0)) {
        errno = EINVAL;
        return NULL;
    }
    struct mk_loop_timer *t = mk_loop_timer_alloc(w, cb, arg);
    if (!t) {
        return NULL;
    }
    t->ms = ms;
    t->repeat = repeat != 0;
    mk_timer_arm(&w->plugin_timers, &t->entry, w->now_ms, ms);
    return t;
}

struct mk_loop_timer *mk_loop_timer_new(mk_loop_timer_cb cb, void *arg)
{
    struct mk_worker *w = mk_loop_owner();

    if (!w) {
        return NULL;
    }
    if (!cb) {
        errno = EINVAL;
        return NULL;
    }
    struct mk_loop_timer *t = mk_loop_timer_alloc(w, cb, arg);
    if (t) {
        t->kept = true;
        mk_list_add_tail(&t->node, &w->loop_kept);
    }
    return t;
}

int mk_loop_timer_arm(struct mk_loop_timer *t, uint32_t ms)
{
    if (!t || !t->kept || t->stopped || t->worker != mk_loop_worker()) {
        return MK_ERR;
    }
    mk_timer_arm(&t->worker->plugin_timers, &t->entry, t->worker->now_ms, ms);
    return MK_OK;
}

int mk_loop_timer_disarm(struct mk_loop_timer *t)
{
    if (!t || !t->kept || t->stopped || t->worker != mk_loop_worker()) {
        return MK_ERR;
    }
    mk_timer_disarm(&t->entry);
    return MK_OK;
}

int mk_loop_timer_stop(struct mk_loop_timer *t)
{
    if (!t || t->worker != mk_loop_worker()) {
        return MK_ERR;
    }
    mk_timer_disarm(&t->entry);
    if (t->firing) {
        t->stopped = true; /* the expiry below frees it when the callback returns */
        return MK_OK;
    }
    mk_loop_timer_free(t);
    return MK_OK;
}

/*
 * A plugin timer is due: run its callback, then, unless the callback
 * stopped it or armed it again (for 1 ms at least), re-arm a repeating
 * one, leave a kept one disarmed and free a one-shot.
 */
static void mk_loop_timer_fire(struct mk_timer *e, void *arg)
{
    struct mk_loop_timer *t = mk_container_of(e, struct mk_loop_timer, entry);
    struct mk_worker *w = arg;

    mk_timer_disarm(e);
    t->firing = true;
    t->cb(t, t->arg);
    t->firing = false;
    if (t->stopped) {
        mk_loop_timer_free(t);
        return;
    }
    if (mk_timer_armed(e)) {
        /* Armed again by its callback: never twice in one loop iteration
           (due now, the walk would run it again or drop it). */
        if (e->deadline <= w->now_ms) {
            mk_timer_arm(&w->plugin_timers, e, w->now_ms, 1);
        }
        return;
    }
    if (t->kept) {
        return;
    }
    if (t->repeat) {
        /* From now, not from the deadline: a late worker does not fire a burst. */
        mk_timer_arm(&w->plugin_timers, e, w->now_ms, t->ms);
        return;
    }
    mk_loop_timer_free(t);
}

void mk_loop_expire(struct mk_worker *w)
{
    mk_timers_expire(&w->plugin_timers, w->now_ms, mk_loop_timer_fire, w);
}

/* ---- descriptors --------------------------------------------------------- */

static void mk_loop_fd_event(struct mk_event *ev, uint32_t ready)
{
    struct mk_loop_fd *h = (struct mk_loop_fd *) ev;

    h->cb(h, h->fd, ready, h->arg); /* may unwatch h: not touched after */
}

/* Take a watch off the loop; it is freed after the current batch. */
static void mk_loop_watch_end(struct mk_loop_watch *lw)
{
    if (lw->ev.fd >= 0) {
        mk_event_del(&lw->worker->loop, &lw->ev);
    }
    lw->ev.fd = -1; /* the stale-event guard, also for an unregistered event */
    mk_list_del(&lw->node);
    mk_list_add_tail(&lw->node, &lw->worker->loop_dead);
}

struct mk_loop_fd *mk_loop_fd_watch(int fd, uint32_t mask, mk_loop_fd_cb cb, void *arg)
{
    struct mk_worker *w = mk_loop_owner();

    if (!w) {
        return NULL;
    }
    if (fd < 0 || !cb || (mask & ~(uint32_t) (MK_LOOP_READ | MK_LOOP_WRITE))) {
        errno = EINVAL;
        return NULL;
    }
    struct mk_loop_fd *h = mk_try_alloc(sizeof(*h));
    if (!h) {
        errno = ENOMEM;
        return NULL;
    }
    h->w.worker = w;
    h->w.is_child = false;
    h->fd = fd;
    h->cb = cb;
    h->arg = arg;
    mk_event_init(&h->w.ev, fd, mk_loop_fd_event);
    if (mask && mk_event_mod(&w->loop, &h->w.ev, mask) != MK_OK) {
        int saved = errno;
        mk_free(h);
        errno = saved;
        return NULL;
    }
    mk_list_add_tail(&h->w.node, &w->loop_watches);
    return h;
}

int mk_loop_fd_modify(struct mk_loop_fd *h, uint32_t mask)
{
    if (!h || h->w.worker != mk_loop_worker() || h->w.ev.fd < 0 ||
        (mask & ~(uint32_t) (MK_LOOP_READ | MK_LOOP_WRITE))) {
        return MK_ERR;
    }
    if (mask == 0) {
        return mk_event_unwatch(&h->w.worker->loop, &h->w.ev);
    }
    return mk_event_mod(&h->w.worker->loop, &h->w.ev, mask);
}

int mk_loop_fd_unwatch(struct mk_loop_fd *h)
{
    if (!h || h->w.worker != mk_loop_worker() || h->w.ev.fd < 0) {
        return MK_ERR;
    }
    mk_loop_watch_end(&h->w);
    return MK_OK;
}

/* ---- child processes ----------------------------------------------------- */

static void mk_loop_child_event(struct mk_event *ev, uint32_t ready)
{
    struct mk_loop_child *h = (struct mk_loop_child *) ev;
    int status = 0;
    (void) ready;

    pid_t r = waitpid(h->pid, &status, WNOHANG);
    if (r == 0 || (r < 0 && errno == EINTR)) {
        return; /* not exited yet: the pidfd stays readable until it has */
    }
    if (r < 0) {
        status = -1; /* reaped by someone else (ECHILD): the status is lost */
    }
    int pidfd = h->w.ev.fd;
    mk_loop_watch_end(&h->w);
    close(pidfd);
    if (h->cb) {
        h->cb(h->pid, status, h->arg);
    }
}

struct mk_loop_child *mk_loop_child_watch(pid_t pid, mk_loop_child_cb cb, void *arg)
{
    struct mk_worker *w = mk_loop_owner();

    if (!w) {
        return NULL;
    }
    if (pid <= 0) {
        errno = EINVAL;
        return NULL;
    }
    struct mk_loop_child *h = mk_try_alloc(sizeof(*h));
    if (!h) {
        errno = ENOMEM;
        return NULL;
    }
    int pidfd = (int) syscall(SYS_pidfd_open, pid, 0); /* close-on-exec by design */
    if (pidfd < 0) {
        int saved = errno; /* ENOSYS: Linux older than 5.3; ESRCH: no such process */
        mk_free(h);
        errno = saved;
        return NULL;
    }
    h->w.worker = w;
    h->w.is_child = true;
    h->pid = pid;
    h->cb = cb;
    h->arg = arg;
    if (mk_event_add(&w->loop, &h->w.ev, pidfd, MK_EV_READ, mk_loop_child_event) != MK_OK) {
        int saved = errno;
        close(pidfd);
        mk_free(h);
        errno = saved;
        return NULL;
    }
    mk_list_add_tail(&h->w.node, &w->loop_watches);
    return h;
}

int mk_loop_child_unwatch(struct mk_loop_child *h)
{
    if (!h || h->w.worker != mk_loop_worker() || h->w.ev.fd < 0) {
        return MK_ERR;
    }
    h->cb = NULL; /* still reaped when it exits, quietly */
    h->arg = NULL;
    return MK_OK;
}

/* ---- the worker's side --------------------------------------------------- */

void mk_loop_reap(struct mk_worker *w)
{
    while (!mk_list_is_empty(&w->loop_dead)) {
        struct mk_loop_watch *lw = mk_list_entry(w->loop_dead.next, struct mk_loop_watch, node);
        mk_list_del(&lw->node);
        mk_free(lw);
    }
}

void mk_loop_release(struct mk_worker *w)
{
    struct mk_timer *e;

    while ((e = mk_timers_any(&w->plugin_timers)) != NULL) {
        mk_loop_timer_free(mk_container_of(e, struct mk_loop_timer, entry));
    }
    while (!mk_list_is_empty(&w->loop_kept)) {
        mk_loop_timer_free(mk_list_entry(w->loop_kept.next, struct mk_loop_timer, node));
    }
    while (!mk_list_is_empty(&w->loop_watches)) {
        struct mk_loop_watch *lw = mk_list_entry(w->loop_watches.next, struct mk_loop_watch, node);
        if (lw->is_child) {
            struct mk_loop_child *h = (struct mk_loop_child *) lw;
            int status;
            if (waitpid(h->pid, &status, WNOHANG) == 0) {
                mk_warn("worker %d exits before its child %d: no longer watched", w->id,
                        (int) h->pid);
            }
            int pidfd = lw->ev.fd;
            mk_event_forget(&lw->ev); /* closing the pidfd removes it from the loop */
            close(pidfd);
            mk_list_del(&lw->node);
            mk_free(lw);
            continue;
        }
        if (w->loop.fd >= 0) {
            mk_event_del(&w->loop, &lw->ev); /* the descriptor stays the plugin's */
        }
        mk_list_del(&lw->node);
        mk_free(lw);
    }
    mk_loop_reap(w);
    while (w->free_timers) {
        struct mk_loop_timer *t = w->free_timers;
        w->free_timers = t->arg;
        mk_free(t);
    }
    w->n_free_timers = 0;
}

uint64_t mk_loop_now_ms(void)
{
    struct mk_worker *w = mk_loop_worker();

    return w ? w->now_ms : mk_clock_mono_ms();
}
