/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/packages/redis/redis.c: the redis package (API in redis.h).
 *
 * A duda_redis_t is one server for one service. Its per-worker state (the
 * command connection, the pub/sub connection and this worker's
 * subscriptions) is a `global` value of the service, made on the worker's
 * first use and released when the service is unloaded. The connections
 * are duda/redis_loop.c (the library duda-redis-loop, which the plugin's
 * Redis session store links too) on Duda's event object (watches and
 * timers of the service, on the worker).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <duda/duda_package.h>

#include "redis.h"
#include "redis_loop.h"
#include "session_parse.h"

struct duda_redis {
    char url[300];
    char host[256];
    int port, db;
    duda_global_t key; /* the service's: struct duda_redis_worker per worker */
    struct duda_redis *next;
};

struct duda_redis_worker;

struct duda_redis_sub {
    struct duda_redis_worker *w;
    char *channel;
    duda_redis_message_cb cb;
    void *data;
    bool gone; /* unsubscribed: freed at Redis's "unsubscribe" answer */
    struct duda_redis_sub *next;
};

struct duda_redis_worker {
    duda_redis_t *r;
    struct duda_redis_loop *cmd, *sub;
    struct duda_redis_sub *subs;
    pthread_t owner; /* the worker */
    bool closing;    /* the service is unloaded: answers reach nobody */
};

/* One command's callback. */
struct duda_redis_call {
    struct duda_redis_worker *w;
    duda_request_t *dr;
    duda_redis_cb cb;
    void *data;
};

/* Every server handed out, freed when the package is unloaded. */
static struct duda_redis *duda_redis_all;

/* ---- Duda's event object as redis_loop sees it ---------------------------------------- */

static void *duda_redis_watch(int fd, unsigned mask, void (*cb)(int fd, unsigned ready, void *arg),
                              void *arg)
{
    return event->add(fd, mask, cb, arg); /* DUDA_EVENT_* are DUDA_REDIS_LOOP_* */
}

static void duda_redis_unwatch(void *w)
{
    event->del(w);
}

/* A connection's timer (redis_loop.h): a kept timer of the service and the callback it calls. */
struct duda_redis_timer {
    duda_timer_t *t;
    void (*cb)(void *arg);
    void *arg;
};

static void duda_redis_timer_fire(duda_request_t *dr, void *cb_data)
{
    struct duda_redis_timer *t = cb_data;

    (void) dr;
    t->cb(t->arg); /* may free t */
}

static void *duda_redis_timer_new(void (*cb)(void *arg), void *arg)
{
    struct duda_redis_timer *t = malloc(sizeof(*t));

    if (!t) {
        return NULL;
    }
    *t = (struct duda_redis_timer){.cb = cb, .arg = arg};
    t->t = event->timer_new(NULL, duda_redis_timer_fire, t);
    if (!t->t) {
        free(t);
        return NULL;
    }
    return t;
}

static int duda_redis_timer_arm(void *p, unsigned ms)
{
    struct duda_redis_timer *t = p;
    return event->timer_arm(t->t, ms);
}

static void duda_redis_timer_disarm(void *p)
{
    struct duda_redis_timer *t = p;
    event->timer_disarm(t->t);
}

static void duda_redis_timer_free(void *p)
{
    struct duda_redis_timer *t = p;
    event->timer_del(t->t);
    free(t);
}

static void duda_redis_log(const char *fmt, ...)
{
    char line[160];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    /* console->debug names Duda and the service already. */
    console->debug(NULL, "%s", strncmp(line, "duda: ", 6) ? line : line + 6);
}

static const struct duda_redis_loop_ops duda_redis_ops = {
    .watch = duda_redis_watch,
    .modify = NULL,
    .unwatch = duda_redis_unwatch,
    .timer_new = duda_redis_timer_new,
    .timer_arm = duda_redis_timer_arm,
    .timer_disarm = duda_redis_timer_disarm,
    .timer_free = duda_redis_timer_free,
    .log = duda_redis_log,
};

/* ---- per worker --------------------------------------------------------------------------- */

static void duda_redis_sub_free(struct duda_redis_sub *s)
{
    struct duda_redis_worker *w = s->w;

    for (struct duda_redis_sub **pp = &w->subs; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    }
    free(s->channel);
    free(s);
}

/*
 * The value of the service's global: released by its worker when the
 * worker stops, or on the controlling thread when the service is unloaded
 * while the workers run (a reload), where the loop is out of reach.
 */
static void duda_redis_worker_free(void *value)
{
    struct duda_redis_worker *w = value;

    if (!w) {
        return;
    }
    w->closing = true;
    if (pthread_equal(w->owner, pthread_self())) {
        duda_redis_loop_close(w->cmd);
        duda_redis_loop_close(w->sub);
    }
    else {
        duda_redis_loop_abandon(w->cmd);
        duda_redis_loop_abandon(w->sub);
    }
    while (w->subs) {
        duda_redis_sub_free(w->subs);
    }
    free(w);
}

/* This worker's state for r, made on first use. NULL off a worker or when memory is short. */
static struct duda_redis_worker *duda_redis_here(duda_redis_t *r)
{
    if (!r) {
        return NULL;
    }
    struct duda_redis_worker *w = global->get(&r->key);
    if (w) {
        return w;
    }
    w = calloc(1, sizeof(*w));
    if (!w) {
        return NULL;
    }
    w->r = r;
    w->owner = pthread_self();
    w->cmd =
        duda_redis_loop_open(&duda_redis_ops, r->host, r->port, r->db, "redis package", NULL, NULL);
    if (!w->cmd || global->set(&r->key, w) != 0) {
        duda_redis_loop_close(w->cmd);
        free(w);
        return NULL;
    }
    return w;
}

/* ---- commands ----------------------------------------------------------------------------- */

static void duda_redis_answer(redisAsyncContext *ac, void *reply, void *arg)
{
    struct duda_redis_call *call = arg;

    (void) ac;
    if (!call->w->closing && call->cb) {
        call->cb(call->dr, reply, call->data);
    }
    free(call);
}

static struct duda_redis_call *duda_redis_call_new(struct duda_redis_worker *w, duda_request_t *dr,
                                                   duda_redis_cb cb, void *cb_data)
{
    struct duda_redis_call *call = malloc(sizeof(*call));

    if (call) {
        *call = (struct duda_redis_call){w, dr, cb, cb_data};
    }
    return call;
}

static int duda_redis_command(duda_redis_t *r, duda_request_t *dr, duda_redis_cb cb, void *cb_data,
                              const char *fmt, ...)
{
    struct duda_redis_worker *w = duda_redis_here(r);
    redisAsyncContext *ac = w ? duda_redis_loop_ctx(w->cmd) : NULL;

    if (!ac || !fmt) {
        return -1;
    }
    struct duda_redis_call *call = duda_redis_call_new(w, dr, cb, cb_data);
    if (!call) {
        return -1;
    }
    va_list ap;
    va_start(ap, fmt);
    int rc = redisvAsyncCommand(ac, duda_redis_answer, call, fmt, ap);
    va_end(ap);
    if (rc != REDIS_OK) {
        free(call);
        return -1;
    }
    return 0;
}

static int duda_redis_command_argv(duda_redis_t *r, duda_request_t *dr, duda_redis_cb cb,
                                   void *cb_data, int argc, const char **argv, const size_t *lens)
{
    struct duda_redis_worker *w = duda_redis_here(r);
    redisAsyncContext *ac = w ? duda_redis_loop_ctx(w->cmd) : NULL;

    if (!ac || argc < 1 || !argv) {
        return -1;
    }
    struct duda_redis_call *call = duda_redis_call_new(w, dr, cb, cb_data);
    if (!call) {
        return -1;
    }
    if (redisAsyncCommandArgv(ac, duda_redis_answer, call, argc, argv, lens) != REDIS_OK) {
        free(call);
        return -1;
    }
    return 0;
}

static int duda_redis_connected(duda_redis_t *r)
{
    struct duda_redis_worker *w = duda_redis_here(r);
    return w && w->cmd->state == DUDA_REDIS_LOOP_UP;
}

/* ---- pub/sub ------------------------------------------------------------------------------ */

/* Every message of a channel, Redis's confirmations, and NULL when the connection goes. */
static void duda_redis_sub_reply(redisAsyncContext *ac, void *reply, void *arg)
{
    struct duda_redis_sub *s = arg;
    const redisReply *rep = reply;

    (void) ac;
    if (!rep) {
        if (s->gone) {
            duda_redis_sub_free(s);
        }
        return; /* subscribed again when the connection is back */
    }
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 3 ||
        rep->element[0]->type != REDIS_REPLY_STRING) {
        return;
    }
    const char *kind = rep->element[0]->str;
    if (!strcmp(kind, "message") && !s->gone && !s->w->closing &&
        rep->element[2]->type == REDIS_REPLY_STRING) {
        s->cb(s->channel, rep->element[2]->str, rep->element[2]->len, s->data);
    }
    else if (!strcmp(kind, "unsubscribe") && s->gone) {
        duda_redis_sub_free(s);
    }
}

static int duda_redis_sub_send(struct duda_redis_sub *s)
{
    redisAsyncContext *ac = duda_redis_loop_ctx(s->w->sub);
    if (!ac || s->w->sub->state != DUDA_REDIS_LOOP_UP) {
        return 0; /* sent when the connection is up */
    }
    return redisAsyncCommand(ac, duda_redis_sub_reply, s, "SUBSCRIBE %s", s->channel) == REDIS_OK
               ? 0
               : -1;
}

/* The pub/sub connection is up (again): subscribe to every channel. */
static void duda_redis_sub_up(struct duda_redis_loop *c, void *arg)
{
    struct duda_redis_worker *w = arg;

    (void) c;
    for (struct duda_redis_sub *s = w->subs; s; s = s->next) {
        if (!s->gone) {
            duda_redis_sub_send(s);
        }
    }
}

static int duda_redis_subscribe(duda_redis_t *r, const char *channel, duda_redis_message_cb cb,
                                void *cb_data)
{
    struct duda_redis_worker *w = duda_redis_here(r);

    if (!w || !channel || !*channel || !cb) {
        return -1;
    }
    for (struct duda_redis_sub *s = w->subs; s; s = s->next) {
        if (!s->gone && !strcmp(s->channel, channel)) {
            s->cb = cb;
            s->data = cb_data;
            return 0;
        }
    }
    struct duda_redis_sub *s = calloc(1, sizeof(*s));
    if (!s || !(s->channel = strdup(channel))) {
        free(s);
        return -1;
    }
    *s = (struct duda_redis_sub){w, s->channel, cb, cb_data, false, w->subs};
    w->subs = s;
    if (!w->sub) {
        w->sub = duda_redis_loop_open(&duda_redis_ops, r->host, r->port, r->db,
                                      "redis package pub/sub", duda_redis_sub_up, w);
        return w->sub ? 0 : -1;
    }
    return duda_redis_sub_send(s);
}

static int duda_redis_unsubscribe(duda_redis_t *r, const char *channel)
{
    struct duda_redis_worker *w = duda_redis_here(r);

    if (!w || !channel) {
        return -1;
    }
    for (struct duda_redis_sub *s = w->subs; s; s = s->next) {
        if (s->gone || strcmp(s->channel, channel) != 0) {
            continue;
        }
        s->gone = true;
        redisAsyncContext *ac = duda_redis_loop_ctx(w->sub);
        if (!ac || w->sub->state != DUDA_REDIS_LOOP_UP ||
            redisAsyncCommand(ac, NULL, NULL, "UNSUBSCRIBE %s", channel) != REDIS_OK) {
            duda_redis_sub_free(s); /* not subscribed on this connection */
        }
        return 0;
    }
    return -1;
}

/* ---- the package -------------------------------------------------------------------------- */

static duda_redis_t *duda_redis_connect(const char *url)
{
    char err[256];
    duda_redis_t *r = calloc(1, sizeof(*r));

    if (!r) {
        return NULL;
    }
    if (duda_session_parse_redis_url(url, r->host, sizeof(r->host), &r->port, &r->db, err,
                                     sizeof(err)) != 0) {
        console->debug(NULL, "redis->connect(): %s", err);
        free(r);
        return NULL;
    }
    snprintf(r->url, sizeof(r->url), "%s", url);
    if (global->init(&r->key, NULL, duda_redis_worker_free) != 0) {
        free(r);
        return NULL;
    }
    r->next = duda_redis_all;
    duda_redis_all = r;
    return r;
}

/* The connections' timers are event->timer_new()'s (service ABI 1.2). */
static int duda_redis_init(const struct duda_api *api)
{
    (void) api;
    return DUDA_HAS(event, timer_disarm) ? 0 : -1;
}

static void duda_redis_exit(void)
{
    while (duda_redis_all) {
        duda_redis_t *r = duda_redis_all;
        duda_redis_all = r->next;
        free(r);
    }
}

static const struct duda_redis_api duda_redis_pkg = {
    .size = sizeof(struct duda_redis_api),
    .connect = duda_redis_connect,
    .command = duda_redis_command,
    .command_argv = duda_redis_command_argv,
    .subscribe = duda_redis_subscribe,
    .unsubscribe = duda_redis_unsubscribe,
    .connected = duda_redis_connected,
};

DUDA_PACKAGE("redis", "1.0", &duda_redis_pkg, duda_redis_init, duda_redis_exit);
