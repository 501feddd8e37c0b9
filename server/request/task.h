/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * task.h: suspended requests (api->suspend, api->resume) and the task
 * threads behind api->task() (task.c; the queue itself is task_queue.h).
 *
 * A suspension handle may travel to any thread; resuming it queues it for
 * the request's worker (mk_task_resume_post), which alone touches the
 * request. The pool's fields are guarded by its lock while its threads
 * run; a task's place in the queue is read and written under that lock.
 */
#ifndef MK_SERVER_TASK_H
#define MK_SERVER_TASK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <monkey/mk_plugin.h>

#include "../../core/list.h"
#include "task_queue.h"

struct mk_request;
struct mk_server;
struct mk_worker;

/*
 * A suspended request (see api->suspend), or a task around one. The server
 * allocates it; it is freed when its resume has run on the worker, or at
 * the worker's teardown when it never came back (mk_request_handles_reclaim).
 */
struct mk_suspended {
    struct mk_worker *worker;
    struct mk_request *req;  /* kept allocated while this handle is out */
    struct mk_list out;      /* in worker->handles until freed (that worker's thread only) */
    uint64_t gen;            /* the request's generation when suspended */
    void (*work)(void *arg); /* a task's work, run on a task thread */
    mk_resume_cb cb;
    void *arg;
    mk_cancel_cb cancel; /* api->suspend_cancel, or NULL; cleared when called */
    void *cancel_arg;
    atomic_bool resumed;       /* resume() was called (any thread): no cancel then */
    struct mk_suspended *next; /* in a worker's resume queue */
    struct mk_task_entry task; /* a task's place in the task queue (under its lock) */
};

struct mk_task_pool {
    /* Run first on each task thread, with the pool's server: it binds the
       thread to the server's plugins (api->self in a task's work) and log.
       Set by the process layer when the server is made. */
    void (*thread_start)(struct mk_server *srv);
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct mk_task_queue queue; /* valid while n_threads > 0 */
    pthread_t *threads;
    int n_threads;
    bool stop;
    time_t warned[2]; /* when a refusal of each kind was last logged */
};

/*
 * Queue task `s` of request `r` in the share of r->plugin. MK_OK; 503 when
 * a bound of r's configuration refuses it (TaskQueuePerPlugin,
 * TaskQueuePerClient); MK_ERR when stopping or no thread could start.
 */
int mk_task_submit(struct mk_server *srv, struct mk_request *r, struct mk_suspended *s);
/*
 * Queue the server's own task `s` for r (a static file compressed on the
 * fly) in the share no plugin uses, bounded by TaskQueuePerPlugin alone:
 * MK_OK; 503 (quietly: the caller answers otherwise) or MK_ERR as above.
 */
int mk_task_submit_server(struct mk_server *srv, struct mk_request *r, struct mk_suspended *s);
/*
 * Queue handle s, resumed (api->resume) or its task done, for its
 * request's worker, which runs its continuation (any thread; from the
 * worker itself it is continued after the current batch of events).
 */
void mk_task_resume_post(struct mk_suspended *s);
/* Take a task out of the queue if it has not started: true if it will not run. */
bool mk_task_cancel(struct mk_server *srv, struct mk_suspended *s);
/* Stop the threads after their current task; queued tasks are handed back unrun. */
void mk_task_pool_stop(struct mk_server *srv);

#endif
