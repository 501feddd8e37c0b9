/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * <duda/packages/redis.h>: the redis package (duda/packages/redis/README.md).
 *
 *     #include <duda/packages/redis.h>
 *     static const struct duda_redis_api *redis;
 *     static duda_redis_t *db;
 *     ...in duda_main():
 *     duda_load_package(redis, "redis");
 *     db = redis->connect("redis://127.0.0.1:6379/0");
 *
 * Redis through hiredis's asynchronous API on each worker's event loop:
 * a worker never blocks on Redis. Each worker opens its own connection to
 * a server on first use (one per worker and server, plus one for pub/sub
 * when the service subscribes), sends the commands issued during one
 * loop iteration in one write (pipelining), and when Redis goes away it
 * fails what was pending (callbacks get a NULL reply), logs it and
 * reconnects with a back-off from 100 ms to 5 s, subscriptions included.
 *
 * Threads: every function runs on a worker (a callback, a timer, a watch,
 * pre_loop) except connect(), which runs in duda_main(). Callbacks run on
 * the worker that issued the command.
 */
#ifndef DUDA_PACKAGES_REDIS_H
#define DUDA_PACKAGES_REDIS_H

#include <duda/duda.h>
#include <hiredis/hiredis.h>

typedef struct duda_redis duda_redis_t;

/*
 * The answer to a command: reply is hiredis's (type REDIS_REPLY_STRING,
 * _INTEGER, _ARRAY, _NIL, _STATUS or _ERROR), valid during the call only;
 * NULL when the connection was lost before the answer. dr is the request
 * given to command() (NULL for none).
 */
typedef void (*duda_redis_cb)(duda_request_t *dr, const redisReply *reply, void *data);

/* A message published on a subscribed channel (message: len bytes, not NUL terminated). */
typedef void (*duda_redis_message_cb)(const char *channel, const char *message, size_t len,
                                      void *data);

struct duda_redis_api {
    size_t size;
    /*
     * In duda_main(): a server, "redis://host[:port][/db]" (port 6379, db
     * 0). Connections are opened by each worker when it first uses it.
     * NULL (and the reason logged) for a bad address.
     */
    duda_redis_t *(*connect)(const char *url);
    /*
     * Send a command on this worker's connection: fmt as hiredis's
     * redisCommand ("SET %s %b", key, value, len). cb (may be NULL) gets
     * the reply on this worker. 0, or -1 when Redis is unreachable now (no
     * callback then: answer 503). With a request, the usual pattern is
     * response->wait(dr) after command() and, in cb, end() then cont().
     */
    int (*command)(duda_redis_t *r, duda_request_t *dr, duda_redis_cb cb, void *data,
                   const char *fmt, ...);
    /* The same with the arguments as argc strings of lens[i] bytes (binary safe). */
    int (*command_argv)(duda_redis_t *r, duda_request_t *dr, duda_redis_cb cb, void *data, int argc,
                        const char **argv, const size_t *lens);
    /*
     * Subscribe this worker to `channel`: cb(channel, message, len, data)
     * for each message, on this worker, until unsubscribe(); kept across
     * reconnections. Subscribing again to a channel replaces its callback.
     * Call it on every worker that serves the subscribers (worker->pre_loop).
     * 0 or -1.
     */
    int (*subscribe)(duda_redis_t *r, const char *channel, duda_redis_message_cb cb, void *data);
    int (*unsubscribe)(duda_redis_t *r, const char *channel);
    /* Whether this worker's command connection is up (1) or not (0). */
    int (*connected)(duda_redis_t *r);
};

#endif
