/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/event.c: the event object: timers and descriptor watches on the
 * worker's loop, and signal_all (a call on every worker through
 * worker->call). A timer bound to a request is stopped at the request's
 * end; one bound to the worker, and every watch, holds the service until
 * it is deleted.
 */
#include <stdlib.h>

#include "duda_internal.h"

static void duda_timer_unlink(struct duda_timer *t)
{
    if (t->dr) {
        for (struct duda_timer **pp = &t->dr->timers; *pp; pp = &(*pp)->next) {
            if (*pp == t) {
                *pp = t->next;
                break;
            }
        }
    }
    else {
        duda_service_put(t->svc);
    }
}

static void duda_timer_fire(struct mk_loop_timer *lt, void *arg)
{
    struct duda_timer *t = arg;
    struct duda_service *saved = duda_current;
    duda_request_t *dr = t->dr;

    (void) lt;
    if (dr) {
        dr->refs++; /* the request may end inside the callback (a flush to a gone client) */
    }
    duda_current = t->svc;
    t->firing = true;
    t->cb(dr, t->data);
    t->firing = false;
    duda_current = saved;
    if (t->deleted || (!t->repeat && !t->kept)) {
        duda_timer_unlink(t);
        free(t);
    }
    if (dr) {
        duda_request_unref(dr);
    }
}

/* A timer of the current service: started (timer_add) or kept, not armed (timer_new). */
static duda_timer_t *duda_timer_make(duda_request_t *dr, unsigned ms, int repeat, bool kept,
                                     void (*cb)(duda_request_t *dr, void *data), void *data)
{
    struct duda_timer *t = calloc(1, sizeof(*t));
    if (!t) {
        return NULL;
    }
    *t = (struct duda_timer){
        .dr = dr, .svc = duda_current, .cb = cb, .data = data, .repeat = repeat != 0, .kept = kept};
    t->t = kept ? duda_mk->timer_new(duda_timer_fire, t)
                : duda_mk->timer_start(ms, repeat, duda_timer_fire, t);
    if (!t->t) {
        free(t);
        return NULL;
    }
    if (dr) {
        t->next = dr->timers;
        dr->timers = t;
    }
    else {
        duda_service_hold(t->svc);
    }
    return t;
}

static duda_timer_t *duda_timer_add(duda_request_t *dr, unsigned ms, int repeat,
                                    void (*cb)(duda_request_t *dr, void *data), void *data)
{
    if (!duda_current || !cb || (dr && !dr->r)) {
        duda_misuse(dr, "event->timer_add(): no callback, or the request is gone");
        return NULL;
    }
    return duda_timer_make(dr, ms, repeat, false, cb, data);
}

static duda_timer_t *duda_timer_new(duda_request_t *dr, void (*cb)(duda_request_t *dr, void *data),
                                    void *data)
{
    if (!duda_current || !cb || (dr && !dr->r)) {
        duda_misuse(dr, "event->timer_new(): no callback, or the request is gone");
        return NULL;
    }
    return duda_timer_make(dr, 0, 0, true, cb, data);
}

static int duda_timer_arm(duda_timer_t *t, unsigned ms)
{
    if (!t || t->deleted || !t->kept) {
        return -1;
    }
    return duda_mk->timer_arm(t->t, ms) == MK_OK ? 0 : -1;
}

static int duda_timer_disarm(duda_timer_t *t)
{
    if (!t || t->deleted || !t->kept) {
        return -1;
    }
    return duda_mk->timer_disarm(t->t) == MK_OK ? 0 : -1;
}

static int duda_timer_del(duda_timer_t *t)
{
    if (!t || t->deleted) {
        return -1;
    }
    duda_mk->timer_stop(t->t);
    t->deleted = true;
    if (!t->firing) {
        duda_timer_unlink(t);
        free(t);
    }
    return 0;
}

void duda_event_timers_stop(duda_request_t *dr)
{
    while (dr->timers) {
        duda_timer_del(dr->timers);
        if (dr->timers && dr->timers->deleted) {
            /* firing: it frees itself after its callback; it is off the list now */
            struct duda_timer *t = dr->timers;
            dr->timers = t->next;
            t->dr = NULL;
            duda_service_hold(t->svc);
        }
    }
}

struct duda_watch {
    struct mk_loop_fd *h;
    struct duda_service *svc;
    void (*cb)(int fd, unsigned ready, void *data);
    void *data;
};

static void duda_watch_fire(struct mk_loop_fd *h, int fd, uint32_t ready, void *arg)
{
    struct duda_watch *w = arg;
    struct duda_service *saved = duda_current;

    (void) h;
    duda_current = w->svc;
    w->cb(fd,
          (ready & MK_LOOP_READ ? DUDA_EVENT_READ : 0) |
              (ready & (MK_LOOP_WRITE | MK_LOOP_ERROR) ? DUDA_EVENT_WRITE : 0),
          w->data);
    duda_current = saved;
}

static duda_watch_t *duda_watch_add(int fd, unsigned mask,
                                    void (*cb)(int fd, unsigned ready, void *data), void *data)
{
    if (!duda_current || !cb || fd < 0) {
        duda_misuse(NULL, "event->add(): no callback or no descriptor");
        return NULL;
    }
    struct duda_watch *w = calloc(1, sizeof(*w));
    if (!w) {
        return NULL;
    }
    *w = (struct duda_watch){.svc = duda_current, .cb = cb, .data = data};
    uint32_t m =
        (mask & DUDA_EVENT_READ ? MK_LOOP_READ : 0) | (mask & DUDA_EVENT_WRITE ? MK_LOOP_WRITE : 0);
    w->h = duda_mk->fd_watch(fd, m, duda_watch_fire, w);
    if (!w->h) {
        free(w);
        return NULL;
    }
    duda_service_hold(w->svc);
    return w;
}

static int duda_watch_del(duda_watch_t *w)
{
    if (!w) {
        return -1;
    }
    duda_mk->fd_unwatch(w->h);
    duda_service_put(w->svc);
    free(w);
    return 0;
}

/* Each worker's turn through worker->call(), as the current service. */
static int duda_signal_all(void (*cb)(void *data), void *data)
{
    if (!duda_current || !cb) {
        duda_misuse(NULL, "event->signal_all(): no callback");
        return -1;
    }
    int sent = 0;
    for (int w = 0; w < (int) duda_current->workers; w++) {
        if (duda_worker_call(w, cb, data) != 0) {
            break; /* past the last worker, or memory short */
        }
        sent++;
    }
    return sent > 0 ? 0 : -1;
}

const struct duda_event_api duda_event_obj = {.size = sizeof(struct duda_event_api),
                                              .timer_add = duda_timer_add,
                                              .timer_del = duda_timer_del,
                                              .add = duda_watch_add,
                                              .del = duda_watch_del,
                                              .signal_all = duda_signal_all,
                                              .timer_new = duda_timer_new,
                                              .timer_arm = duda_timer_arm,
                                              .timer_disarm = duda_timer_disarm};
