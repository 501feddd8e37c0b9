/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/worker.c: the worker object: threads of the service (spawn, which
 * hold the service while they run), the function each worker runs before
 * its first request for a service (pre_loop), work handed to the server's
 * task threads (task), and the workers' messaging (id, count, call,
 * service ABI 1.1): a call runs on the worker it names, with the service
 * current and held until it ran.
 */
#include <stdlib.h>
#include <string.h>

#include "duda_internal.h"

void duda_worker_enter(struct duda_service *svc)
{
    int w = duda_mk->worker_id();

    if (w < 0 || (unsigned) w >= svc->workers || svc->loop_ready[w]) {
        return;
    }
    svc->loop_ready[w] = 1;
    if (svc->pre_loop) {
        svc->pre_loop();
    }
}

struct duda_thread {
    struct duda_service *svc;
    void *(*fn)(void *);
    void *arg;
};

static void *duda_thread_main(void *p)
{
    struct duda_thread t = *(struct duda_thread *) p;
    free(p);
    duda_current = t.svc;
    void *rc = t.fn(t.arg);
    duda_service_put(t.svc);
    return rc;
}

static int duda_spawn(void *(*fn)(void *), void *arg)
{
    pthread_t tid;
    pthread_attr_t attr;

    if (!duda_current || !fn) {
        duda_misuse(NULL, "worker->spawn() outside a service");
        return -1;
    }
    if (duda_mk->checking()) {
        return 0;
    }
    struct duda_thread *t = malloc(sizeof(*t));
    if (!t) {
        return -1;
    }
    *t = (struct duda_thread){duda_current, fn, arg};
    duda_service_hold(duda_current);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&tid, &attr, duda_thread_main, t);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        duda_service_put(duda_current);
        free(t);
        return -1;
    }
    return 0;
}

static int duda_pre_loop(void (*fn)(void))
{
    if (!duda_current || duda_current->workers) {
        duda_misuse(NULL, "worker->pre_loop() outside duda_main()");
        return -1;
    }
    duda_current->pre_loop = fn;
    return 0;
}

struct duda_task {
    duda_request_t *dr;
    struct duda_service *svc;
    void (*work)(void *arg);
    void (*done)(duda_request_t *dr, void *arg);
    void *arg;
};

static void duda_task_work(void *p)
{
    struct duda_task *t = p;
    duda_current = t->svc;
    t->work(t->arg);
    duda_current = NULL;
}

static int duda_task_done(struct mk_request *r, void *p)
{
    struct duda_task *t = p;
    duda_request_t *dr = t->dr;
    struct duda_service *saved = duda_current;
    int rc = MK_OK;

    duda_current = t->svc;
    if (!r || !dr->r) {
        t->done(NULL, t->arg);
    }
    else {
        t->done(dr, t->arg);
        rc = duda_request_finish(dr);
    }
    duda_current = saved;
    duda_request_unref(dr);
    free(t);
    return rc;
}

static int duda_task(duda_request_t *dr, void (*work)(void *arg),
                     void (*done)(duda_request_t *dr, void *arg), void *arg)
{
    if (!dr || !dr->r || !work || !done || dr->tasking || dr->waiting || dr->ended) {
        duda_misuse(dr, "worker->task(): no request, no function, or the request is not open");
        return -1;
    }
    struct duda_task *t = malloc(sizeof(*t));
    if (!t) {
        return -1;
    }
    *t = (struct duda_task){dr, dr->svc, work, done, arg};
    dr->refs++;
    int rc = duda_mk->task(dr->r, duda_task_work, duda_task_done, t);
    if (rc != MK_SUSPENDED) {
        dr->refs--;
        free(t);
        return -1;
    }
    dr->tasking = true;
    return 0;
}

static int duda_worker_id(void)
{
    return duda_mk->worker_id();
}

static int duda_worker_count(void)
{
    struct mk_server_stats st;

    memset(&st, 0, sizeof(st));
    duda_mk->stats(&st);
    return (int) st.workers;
}

struct duda_call {
    struct duda_service *svc;
    void (*fn)(void *arg);
    void *arg;
};

static void duda_call_run(void *p)
{
    struct duda_call *c = p;
    struct duda_service *saved = duda_current;

    duda_current = c->svc;
    c->fn(c->arg);
    duda_current = saved;
    duda_service_put(c->svc);
    free(c);
}

int duda_worker_call(int worker, void (*fn)(void *arg), void *arg)
{
    struct duda_service *svc = duda_current;

    if (!svc || !fn) {
        duda_misuse(NULL, "worker->call(): no service or no function");
        return -1;
    }
    struct duda_call *c = malloc(sizeof(*c));
    if (!c) {
        return -1;
    }
    *c = (struct duda_call){svc, fn, arg};
    duda_service_hold(svc);
    if (duda_mk->worker_call(worker, duda_call_run, c) != MK_OK) {
        duda_service_put(svc);
        free(c);
        return -1;
    }
    return 0;
}

const struct duda_worker_api duda_worker_obj = {.size = sizeof(struct duda_worker_api),
                                                .spawn = duda_spawn,
                                                .pre_loop = duda_pre_loop,
                                                .task = duda_task,
                                                .id = duda_worker_id,
                                                .count = duda_worker_count,
                                                .call = duda_worker_call};
