/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * task.c: the task threads behind api->task().
 *
 * Workers must never block; some plugin work does (hashing a password with
 * bcrypt, reading a directory of ten thousand entries). A task runs such
 * work on one of a few threads, then hands the suspended request back to its
 * worker, which runs the plugin's continuation. The threads start with the
 * first task, one per worker, and live until the server stops.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "../core/log.h"
#include "server.h"

static void *mk_task_main(void *arg)
{
    struct mk_task_pool *pool = arg;

    for (;;) {
        pthread_mutex_lock(&pool->lock);
        while (!pool->head && !pool->stop) {
            pthread_cond_wait(&pool->cond, &pool->lock);
        }
        struct mk_suspended *s = pool->head;
        if (!s) {
            pthread_mutex_unlock(&pool->lock);
            return NULL; /* stopping and nothing left */
        }
        pool->head = s->next;
        if (!pool->head) {
            pool->tail = NULL;
        }
        pthread_mutex_unlock(&pool->lock);

        s->work(s->arg);
        mk_worker_resume_post(s->worker, s);
    }
}

/* Start the threads; called with the lock held. */
static int mk_task_start(struct mk_server *srv)
{
    struct mk_task_pool *pool = &srv->tasks;
    int n = srv->n_workers > 1 ? srv->n_workers : 2;
    sigset_t all, old;

    pool->threads = mk_calloc((size_t) n, sizeof(*pool->threads));
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (int i = 0; i < n; i++) {
        int rc = pthread_create(&pool->threads[pool->n_threads], NULL, mk_task_main, pool);
        if (rc != 0) {
            mk_err("cannot start a task thread: %s", strerror(rc));
            break;
        }
        pool->n_threads++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return pool->n_threads > 0 ? MK_OK : MK_ERR;
}

int mk_task_submit(struct mk_server *srv, struct mk_suspended *s)
{
    struct mk_task_pool *pool = &srv->tasks;
    int rc = MK_OK;

    pthread_mutex_lock(&pool->lock);
    if (pool->stop) {
        rc = MK_ERR;
    }
    else if (pool->n_threads == 0) {
        rc = mk_task_start(srv);
    }
    if (rc == MK_OK) {
        s->next = NULL;
        if (pool->tail) {
            pool->tail->next = s;
        }
        else {
            pool->head = s;
        }
        pool->tail = s;
        pthread_cond_signal(&pool->cond);
    }
    pthread_mutex_unlock(&pool->lock);
    return rc;
}

/*
 * Let the threads finish what is queued and exit. Called after the workers
 * have stopped: continuations then find their worker gone and are drained
 * by the caller with a NULL request.
 */
void mk_task_pool_stop(struct mk_server *srv)
{
    struct mk_task_pool *pool = &srv->tasks;

    pthread_mutex_lock(&pool->lock);
    pool->stop = true;
    pthread_cond_broadcast(&pool->cond);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 0; i < pool->n_threads; i++) {
        pthread_join(pool->threads[i], NULL);
    }
    mk_free(pool->threads);
    pool->threads = NULL;
    pool->n_threads = 0;
}
