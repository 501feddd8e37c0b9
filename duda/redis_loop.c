/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/redis_loop.c: the hiredis adapter for a worker's event loop and
 * the reconnection logic (see redis_loop.h for the contract).
 *
 * hiredis drives the adapter through five hooks: addRead/delRead and
 * addWrite/delWrite say which readiness it waits for, cleanup says the
 * context is going away (after its pending callbacks got a NULL reply).
 * The adapter keeps one watch on the socket and registers write interest
 * only while connecting or when a write could not finish; otherwise a
 * 0 ms timer writes what the commands of one loop iteration queued. That
 * timer and the one of the next attempt are made with the connection and
 * armed again each time: no allocation per write.
 *
 * Closing from a callback. hiredis runs the users' callbacks (replies,
 * the NULL replies of a lost connection, "up") from inside the adapter's
 * calls into it: a watch, the coalesced write, an attempt, a close. Each
 * of those counts itself in c->depth while it runs; duda_redis_loop_close()
 * with depth > 0 detaches the context and frees c only when the
 * outermost of them returns (redis's deferred free of a client still on
 * the stack), so no adapter frame touches a freed connection. The
 * context goes at once when hiredis guards the callback (REDIS_IN_CALLBACK:
 * it frees it itself when the callback returns), else (hiredis 0.14's
 * connect callback) when the outermost call returns too.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis_loop.h"

static void duda_redis_loop_connect(struct duda_redis_loop *c);

/* Register the interest hiredis asked for. */
static void duda_redis_loop_io(int fd, unsigned ready, void *arg);

static void duda_redis_loop_update(struct duda_redis_loop *c)
{
    unsigned m =
        (c->want_read ? DUDA_REDIS_LOOP_READ : 0) | (c->want_write ? DUDA_REDIS_LOOP_WRITE : 0);

    if (!c->ac) {
        return;
    }
    if (!c->watch) {
        c->watch = c->ops->watch(c->ac->c.fd, m, duda_redis_loop_io, c);
        c->mask = m;
        if (!c->watch) {
            c->ops->log("duda: redis %s:%d (%s): cannot watch the socket", c->host, c->port,
                        c->who);
        }
        return;
    }
    if (m == c->mask) {
        return;
    }
    if (c->ops->modify) {
        c->ops->modify(c->watch, m);
    }
    else {
        c->ops->unwatch(c->watch);
        c->watch = c->ops->watch(c->ac->c.fd, m, duda_redis_loop_io, c);
    }
    c->mask = m;
}

/* The adapter calls into hiredis, which may run callbacks that close c: c stays until _leave(). */
static void duda_redis_loop_enter(struct duda_redis_loop *c)
{
    c->depth++;
}

static void duda_redis_loop_release(struct duda_redis_loop *c);

/* The outermost call finishes a close made meanwhile: c is freed then, and must not be used. */
static void duda_redis_loop_leave(struct duda_redis_loop *c)
{
    if (--c->depth == 0 && c->released) {
        duda_redis_loop_release(c);
    }
}

static void duda_redis_loop_io(int fd, unsigned ready, void *arg)
{
    struct duda_redis_loop *c = arg;

    (void) fd;
    if (!__atomic_load_n(&c->ac, __ATOMIC_ACQUIRE)) {
        return; /* abandoned */
    }
    duda_redis_loop_enter(c);
    if (c->ac && (ready & DUDA_REDIS_LOOP_READ)) {
        redisAsyncHandleRead(c->ac); /* may free the context: cleanup clears c->ac */
    }
    if (c->ac && (ready & DUDA_REDIS_LOOP_WRITE) && c->want_write) {
        redisAsyncHandleWrite(c->ac);
    }
    duda_redis_loop_leave(c);
}

static void duda_redis_loop_flush(void *arg)
{
    struct duda_redis_loop *c = arg;

    c->flush_armed = false;
    if (!__atomic_load_n(&c->ac, __ATOMIC_ACQUIRE)) {
        return; /* closed or abandoned */
    }
    duda_redis_loop_enter(c);
    c->flushing = true;
    redisAsyncHandleWrite(c->ac);
    c->flushing = false;
    duda_redis_loop_leave(c);
}

/* Disarm timer t (flush_timer or retry_timer) if it is armed (*armed). */
static void duda_redis_loop_timer_disarm(struct duda_redis_loop *c, void *t, bool *armed)
{
    if (*armed) {
        c->ops->timer_disarm(t);
        *armed = false;
    }
}

static void duda_redis_loop_add_read(void *priv)
{
    struct duda_redis_loop *c = priv;
    if (c && !c->want_read) {
        c->want_read = true;
        duda_redis_loop_update(c);
    }
}

static void duda_redis_loop_del_read(void *priv)
{
    struct duda_redis_loop *c = priv;
    if (c && c->want_read) {
        c->want_read = false;
        duda_redis_loop_update(c);
    }
}

static void duda_redis_loop_add_write(void *priv)
{
    struct duda_redis_loop *c = priv;

    if (!c || c->want_write) {
        return;
    }
    /* Up and not inside a write that came short: one write at the next iteration. */
    if (c->state == DUDA_REDIS_LOOP_UP && !c->flushing) {
        if (!c->flush_armed && c->ops->timer_arm(c->flush_timer, 0) == 0) {
            c->flush_armed = true;
        }
        if (c->flush_armed) {
            return;
        }
    }
    c->want_write = true;
    duda_redis_loop_update(c);
}

static void duda_redis_loop_del_write(void *priv)
{
    struct duda_redis_loop *c = priv;

    if (!c) {
        return;
    }
    duda_redis_loop_timer_disarm(c, c->flush_timer, &c->flush_armed);
    if (c->want_write) {
        c->want_write = false;
        duda_redis_loop_update(c);
    }
}

/* The context goes away (its pending callbacks have run): forget it. */
static void duda_redis_loop_cleanup(void *priv)
{
    struct duda_redis_loop *c = priv;

    if (!c) {
        return;
    }
    duda_redis_loop_timer_disarm(c, c->flush_timer, &c->flush_armed);
    if (c->watch) {
        c->ops->unwatch(c->watch);
        c->watch = NULL;
    }
    c->mask = 0;
    c->want_read = c->want_write = false;
    c->ac = NULL;
    c->state = DUDA_REDIS_LOOP_DOWN;
}

static void duda_redis_loop_retry_fire(void *arg)
{
    struct duda_redis_loop *c = arg;

    c->retry_armed = false;
    if (__atomic_load_n(&c->closing, __ATOMIC_ACQUIRE)) {
        return; /* abandoned */
    }
    duda_redis_loop_enter(c);
    duda_redis_loop_connect(c);
    duda_redis_loop_leave(c);
}

/* Count a failure, log it (every one at first, then once a minute) and plan the next attempt. */
static void duda_redis_loop_retry(struct duda_redis_loop *c, const char *why)
{
    unsigned delay = c->backoff_ms;

    c->state = DUDA_REDIS_LOOP_DOWN;
    c->failures++;
    if (c->failures <= 6 || c->failures % 12 == 0) {
        c->ops->log("duda: redis %s:%d (%s): %s; attempt %u, next in %u ms", c->host, c->port,
                    c->who, why, c->failures, delay);
    }
    c->backoff_ms =
        delay * 2 > DUDA_REDIS_LOOP_BACKOFF_MAX_MS ? DUDA_REDIS_LOOP_BACKOFF_MAX_MS : delay * 2;
    if (!c->retry_armed && c->ops->timer_arm(c->retry_timer, delay) == 0) {
        c->retry_armed = true;
    }
}

static void duda_redis_loop_on_connect(const redisAsyncContext *ac, int status)
{
    struct duda_redis_loop *c = ac->data;

    if (!c || c->released) {
        return; /* closed by a callback: no next attempt */
    }
    if (status != REDIS_OK) {
        duda_redis_loop_retry(c, ac->errstr[0] ? ac->errstr : "cannot connect");
        return; /* hiredis frees the context next: cleanup */
    }
    if (c->failures) {
        c->ops->log("duda: redis %s:%d (%s): connected after %u failed attempts", c->host, c->port,
                    c->who, c->failures);
    }
    c->state = DUDA_REDIS_LOOP_UP;
    c->failures = 0;
    c->backoff_ms = DUDA_REDIS_LOOP_BACKOFF_MIN_MS;
    if (c->on_up) {
        c->on_up(c, c->up_arg);
    }
}

static void duda_redis_loop_on_disconnect(const redisAsyncContext *ac, int status)
{
    struct duda_redis_loop *c = ac->data;

    (void) status;
    if (!c) {
        return;
    }
    c->ac = NULL;
    if (c->released) {
        return; /* closed by a callback (a NULL reply): no next attempt */
    }
    duda_redis_loop_retry(c, ac->errstr[0] ? ac->errstr : "the server closed the connection");
}

static void duda_redis_loop_connect(struct duda_redis_loop *c)
{
    redisAsyncContext *ac = redisAsyncConnect(c->host, c->port);

    if (!ac || ac->err) {
        char why[160];
        snprintf(why, sizeof(why), "%s", ac ? ac->errstr : "out of memory");
        if (ac) {
            redisAsyncFree(ac);
        }
        duda_redis_loop_retry(c, why);
        return;
    }
    c->ac = ac;
    c->state = DUDA_REDIS_LOOP_CONNECTING;
    ac->data = c;
    ac->ev.data = c;
    ac->ev.addRead = duda_redis_loop_add_read;
    ac->ev.delRead = duda_redis_loop_del_read;
    ac->ev.addWrite = duda_redis_loop_add_write;
    ac->ev.delWrite = duda_redis_loop_del_write;
    ac->ev.cleanup = duda_redis_loop_cleanup;
    /* The connection is established at the first write event: the hooks must be in place. */
    redisAsyncSetConnectCallback(ac, duda_redis_loop_on_connect);
    redisAsyncSetDisconnectCallback(ac, duda_redis_loop_on_disconnect);
    if (c->db != 0) {
        redisAsyncCommand(ac, NULL, NULL, "SELECT %d", c->db);
    }
}

struct duda_redis_loop *duda_redis_loop_open(const struct duda_redis_loop_ops *ops,
                                             const char *host, int port, int db, const char *who,
                                             duda_redis_loop_up_cb on_up, void *up_arg)
{
    struct duda_redis_loop *c = calloc(1, sizeof(*c));

    if (!c) {
        return NULL;
    }
    c->ops = ops;
    snprintf(c->host, sizeof(c->host), "%s", host);
    c->port = port;
    c->db = db;
    c->who = who;
    c->on_up = on_up;
    c->up_arg = up_arg;
    c->backoff_ms = DUDA_REDIS_LOOP_BACKOFF_MIN_MS;
    c->flush_timer = ops->timer_new(duda_redis_loop_flush, c);
    c->retry_timer = ops->timer_new(duda_redis_loop_retry_fire, c);
    if (!c->flush_timer || !c->retry_timer) {
        if (c->flush_timer) {
            ops->timer_free(c->flush_timer);
        }
        if (c->retry_timer) {
            ops->timer_free(c->retry_timer);
        }
        free(c);
        return NULL;
    }
    duda_redis_loop_connect(c);
    return c;
}

redisAsyncContext *duda_redis_loop_ctx(struct duda_redis_loop *c)
{
    if (!c || !c->ac || c->closing) {
        return NULL;
    }
    return c->ac;
}

/* Free c, closed with no adapter call on the stack, and the context left to free then. */
static void duda_redis_loop_release(struct duda_redis_loop *c)
{
    redisAsyncContext *ac = c->dead;

    if (ac) {
        c->dead = NULL;
        duda_redis_loop_enter(c);
        redisAsyncFree(ac); /* its callbacks get a NULL reply, and may call close (nothing to do) */
        c->depth--;
    }
    c->ops->timer_free(c->flush_timer);
    c->ops->timer_free(c->retry_timer);
    free(c);
}

void duda_redis_loop_close(struct duda_redis_loop *c)
{
    if (!c || c->released) {
        return;
    }
    c->released = true;
    c->closing = true;
    duda_redis_loop_timer_disarm(c, c->retry_timer, &c->retry_armed);
    redisAsyncContext *ac = c->ac;
    if (ac) {
        duda_redis_loop_cleanup(c);
        /* hiredis may free it later (inside one of its callbacks): it must not reach c. */
        ac->data = NULL;
        ac->ev.data = NULL;
        if (c->depth > 0 && !(ac->c.flags & REDIS_IN_CALLBACK)) {
            c->dead = ac; /* hiredis uses it after this callback returns: freed by _release() */
        }
        else {
            duda_redis_loop_enter(c);
            redisAsyncFree(ac); /* inside a guarded callback, hiredis frees it when that returns */
            c->depth--;
        }
    }
    if (c->depth == 0) {
        duda_redis_loop_release(c);
    }
}

/* Abandoned connections: kept, since the worker may still call their watch or a timer. */
static pthread_mutex_t duda_redis_loop_abandoned_lock = PTHREAD_MUTEX_INITIALIZER;
static struct duda_redis_loop *duda_redis_loop_abandoned;

void duda_redis_loop_abandon(struct duda_redis_loop *c)
{
    if (!c) {
        return;
    }
    __atomic_store_n(&c->closing, true, __ATOMIC_RELEASE);
    redisAsyncContext *ac = c->ac;
    if (ac) {
        ac->data = NULL;
        ac->ev.data = NULL;
        ac->ev.addRead = ac->ev.delRead = ac->ev.addWrite = ac->ev.delWrite = NULL;
        ac->ev.cleanup = NULL;
        __atomic_store_n(&c->ac, NULL, __ATOMIC_RELEASE);
        redisAsyncFree(ac); /* closes the socket: its watch does not fire again */
    }
    pthread_mutex_lock(&duda_redis_loop_abandoned_lock);
    c->next = duda_redis_loop_abandoned;
    duda_redis_loop_abandoned = c;
    pthread_mutex_unlock(&duda_redis_loop_abandoned_lock);
}
