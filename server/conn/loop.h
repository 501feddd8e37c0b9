/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * loop.h: the plugins' timers and watches on a worker's event loop
 * (loop.c): api->timer_start, fd_watch, child_watch and the rest.
 *
 * The timers and watches of a worker live in it (w->plugin_timers,
 * w->loop_kept, w->loop_watches, w->loop_dead) and are touched only on that worker's
 * thread: a call from another thread is refused (a plugin on a task thread
 * goes through api->worker_call()).
 */
#ifndef MK_SERVER_LOOP_H
#define MK_SERVER_LOOP_H

#include <stdint.h>
#include <sys/types.h>

#include <monkey/mk_plugin.h>

struct mk_worker;

/* The worker running on this thread, or NULL (another thread): mk_loop_worker_set's. */
extern __thread struct mk_worker *mk_loop_current;
static inline struct mk_worker *mk_loop_worker(void)
{
    return mk_loop_current;
}
/* The worker thread says it is one (w), or no longer is (NULL). */
void mk_loop_worker_set(struct mk_worker *w);

struct mk_loop_timer *mk_loop_timer_start(uint32_t ms, int repeat, mk_loop_timer_cb cb, void *arg);
int mk_loop_timer_stop(struct mk_loop_timer *t);
struct mk_loop_timer *mk_loop_timer_new(mk_loop_timer_cb cb, void *arg);
int mk_loop_timer_arm(struct mk_loop_timer *t, uint32_t ms);
int mk_loop_timer_disarm(struct mk_loop_timer *t);
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

#endif
