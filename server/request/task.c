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
 *
 * The queue is bounded and fair (task_queue.h): each plugin has its own
 * share of TaskQueuePerPlugin jobs, each client address at most
 * TaskQueuePerClient jobs; the threads serve the plugins in turn and,
 * within a plugin, a client with nothing running before one that has. A job
 * past a bound is refused at once (503 with Retry-After) rather than queued
 * behind work it cannot outlast. A task whose request is given up before it
 * started (the client hung up, the request timed out, the server stops) is
 * taken out of the queue and never runs; one already running finishes and
 * its continuation gets a NULL request.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <string.h>

#include <monkey/mk_util.h>

#include "../../core/log.h"
#include "../process/server.h"

void mk_task_resume_post(struct mk_suspended *s)
{
    struct mk_worker *w = s->worker;
    uint64_t one = 1;

    if (mk_loop_worker() == w) {
        /* From the worker itself (a plugin's loop callback): no wake-up to
           send, the loop continues it after this batch of events. */
        s->next = w->local_resumes;
        w->local_resumes = s;
        return;
    }

    pthread_mutex_lock(&w->msg_lock);
    s->next = w->resumes;
    w->resumes = s;
    pthread_mutex_unlock(&w->msg_lock);
    ssize_t ignored = write(w->ctl_ev.fd, &one, sizeof(one));
    (void) ignored;
}

static struct mk_suspended *mk_task_of(struct mk_task_entry *e)
{
    return mk_container_of(e, struct mk_suspended, task);
}

static void *mk_task_main(void *arg)
{
    struct mk_task_pool *pool = arg;

    /* api->self() in a task's work function: this server's contexts. */
    if (pool->thread_start) {
        pool->thread_start(mk_container_of(pool, struct mk_server, tasks));
    }
    for (;;) {
        struct mk_task_entry *e = NULL;

        pthread_mutex_lock(&pool->lock);
        while (!pool->stop && !(e = mk_task_queue_pop(&pool->queue))) {
            pthread_cond_wait(&pool->cond, &pool->lock);
        }
        pthread_mutex_unlock(&pool->lock);
        if (!e) {
            return NULL; /* stopping: what is still queued is handed back unrun */
        }

        struct mk_suspended *s = mk_task_of(e);
        s->work(s->arg);
        /* Done before the resume: once posted, the worker may free `s`. */
        pthread_mutex_lock(&pool->lock);
        mk_task_queue_done(&pool->queue, e);
        pthread_mutex_unlock(&pool->lock);
        mk_task_resume_post(s);
    }
}

/* Start the threads and set up the queue; called with the lock held. */
static int mk_task_start(struct mk_server *srv)
{
    struct mk_task_pool *pool = &srv->tasks;
    int n = srv->n_workers > 1 ? srv->n_workers : 2;
    sigset_t all, old;

    /* One share per plugin, and one for a task no plugin hook asked for. */
    mk_task_queue_init(&pool->queue, srv->plugins.count + 1);
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
    if (pool->n_threads == 0) {
        mk_task_queue_destroy(&pool->queue);
        mk_free(pool->threads);
        pool->threads = NULL;
        return MK_ERR;
    }
    return MK_OK;
}

/* The share of plugin `p`: its index in plugins.load, or the last one. */
static size_t mk_task_share(const struct mk_plugin_set *ps, const struct mk_plugin *p)
{
    for (size_t i = 0; i < ps->count; i++) {
        if (ps->list[i] == p) {
            return i;
        }
    }
    return ps->count;
}

/*
 * Say why a task was refused (MK_TASK_SHARE_FULL or MK_TASK_CLIENT_FULL),
 * at most once a second for each reason: an attack would flood the log.
 */
static void mk_task_warn(struct mk_task_pool *pool, const struct mk_request *r, int why)
{
    const struct mk_conn *c = r->conn;
    time_t now = c->worker->now;
    time_t *last = &pool->warned[why == MK_TASK_SHARE_FULL ? 0 : 1];
    char addr[INET6_ADDRSTRLEN] = "?";

    if (*last == now) {
        return;
    }
    *last = now;
    if (why == MK_TASK_SHARE_FULL) {
        mk_warn("plugin %s has %u %s waiting or running (TaskQueuePerPlugin): answering 503",
                r->plugin ? r->plugin->name : "?", r->cfg->task_queue_per_plugin,
                mk_plural(r->cfg->task_queue_per_plugin, "task", "tasks"));
        return;
    }
    mk_addr_text(mk_request_client(r), addr);
    mk_warn("client %s has %u %s waiting or running (TaskQueuePerClient): answering 503", addr,
            r->cfg->task_queue_per_client,
            mk_plural(r->cfg->task_queue_per_client, "task", "tasks"));
}

/*
 * Queue s in share `share` under the bounds `per_share` and `per_client`:
 * MK_OK, 503 (a bound refuses it; said in the log when `warn`), MK_ERR.
 */
static int mk_task_push(struct mk_server *srv, struct mk_request *r, struct mk_suspended *s,
                        size_t share, unsigned per_share, unsigned per_client, bool warn)
{
    struct mk_task_pool *pool = &srv->tasks;
    uint8_t key[MK_TASK_KEY_LEN];
    int rc = MK_OK;

    mk_task_key(mk_request_client(r), key);
    pthread_mutex_lock(&pool->lock);
    if (pool->stop) {
        rc = MK_ERR;
    }
    else if (pool->n_threads == 0) {
        rc = mk_task_start(srv);
    }
    if (rc == MK_OK) {
        int why = mk_task_queue_push(&pool->queue, &s->task, share, key, per_share, per_client);
        if (why == MK_OK) {
            pthread_cond_signal(&pool->cond);
        }
        else {
            if (warn) {
                mk_task_warn(pool, r, why);
            }
            rc = 503;
        }
    }
    pthread_mutex_unlock(&pool->lock);
    return rc;
}

int mk_task_submit(struct mk_server *srv, struct mk_request *r, struct mk_suspended *s)
{
    return mk_task_push(srv, r, s, mk_task_share(&srv->plugins, r->plugin),
                        r->cfg->task_queue_per_plugin, r->cfg->task_queue_per_client, true);
}

int mk_task_submit_server(struct mk_server *srv, struct mk_request *r, struct mk_suspended *s)
{
    /* The last share: the one of the tasks no plugin asked for. Its work
       serves every later client alike, so only the share's bound applies. */
    return mk_task_push(srv, r, s, srv->plugins.count, r->cfg->task_queue_per_plugin,
                        r->cfg->task_queue_per_plugin, false);
}

bool mk_task_cancel(struct mk_server *srv, struct mk_suspended *s)
{
    struct mk_task_pool *pool = &srv->tasks;
    bool cancelled;

    pthread_mutex_lock(&pool->lock);
    cancelled = pool->n_threads > 0 && mk_task_queue_cancel(&pool->queue, &s->task);
    pthread_mutex_unlock(&pool->lock);
    return cancelled;
}

/*
 * Stop the threads once their current task is done. Called after the
 * workers have stopped: the tasks still queued (normally none: closing a
 * connection cancels its task) are handed to their workers unrun, where the
 * teardown gives their continuations a NULL request, like the late
 * continuations of the tasks that ran.
 */
void mk_task_pool_stop(struct mk_server *srv)
{
    struct mk_task_pool *pool = &srv->tasks;
    struct mk_task_entry *e;

    pthread_mutex_lock(&pool->lock);
    pool->stop = true;
    pthread_cond_broadcast(&pool->cond);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 0; i < pool->n_threads; i++) {
        pthread_join(pool->threads[i], NULL);
    }
    if (pool->n_threads > 0) {
        while ((e = mk_task_queue_pop(&pool->queue)) != NULL) {
            mk_task_queue_done(&pool->queue, e);
            mk_task_resume_post(mk_task_of(e));
        }
        mk_task_queue_destroy(&pool->queue);
    }
    mk_free(pool->threads);
    pool->threads = NULL;
    pool->n_threads = 0;
}
