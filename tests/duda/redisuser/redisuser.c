/*
 * Drives the redis package for duda/test_duda_redis.py. Redis's address is
 * in ConfDir/redis.conf ([REDIS] Url redis://...).
 *
 *   GET /redisuser/set/:key/:value   SET: "OK"
 *   GET /redisuser/get/:key          GET: the value, or 404
 *   GET /redisuser/incr/:key         INCR: the number
 *   GET /redisuser/pipeline/:key     DEL, RPUSH a, RPUSH b, LRANGE in one go: "0 1 2 a,b"
 *   GET /redisuser/bad               an unknown command: 502 with Redis's error
 *   GET /redisuser/publish/:ch/:msg  PUBLISH: the number of receivers
 *   GET /redisuser/events            server-sent events: each message of channel "news"
 *   GET /redisuser/up                "1" when this worker's connection is up, else "0"
 * 503 when Redis cannot be reached.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <duda/duda.h>
#include <duda/packages/redis.h>

DUDA_REGISTER("Redis package user", "redisuser");

static const struct duda_redis_api *redis;
static duda_redis_t *db;
static duda_global_t news; /* per worker: the messages of "news" so far */

#define NEWS_MAX 256

struct news_log {
    unsigned long seq; /* messages received on this worker */
    char *text[NEWS_MAX];
};

struct client {
    unsigned long seen;
    unsigned idle; /* ticks without news: a comment every second finds a client gone */
};

static void reply(duda_request_t *dr, int status, const char *text, size_t len)
{
    response->http_status(dr, status);
    response->http_content_type(dr, "text/plain");
    response->print(dr, text, len);
    response->print(dr, "\n", 1);
    response->end(dr, NULL);
}

/* The answer to one command ends the request: status or string, integer, nil, error. */
static void on_reply(duda_request_t *dr, const redisReply *rep, void *data)
{
    char num[32];

    (void) data;
    if (!rep) {
        reply(dr, 503, "redis went away", 15);
    }
    else if (rep->type == REDIS_REPLY_ERROR) {
        reply(dr, 502, rep->str, rep->len);
    }
    else if (rep->type == REDIS_REPLY_NIL) {
        reply(dr, 404, "nil", 3);
    }
    else if (rep->type == REDIS_REPLY_INTEGER) {
        int n = snprintf(num, sizeof(num), "%lld", rep->integer);
        reply(dr, 200, num, (size_t) n);
    }
    else {
        reply(dr, 200, rep->str, rep->len);
    }
    response->cont(dr);
}

static void unreachable(duda_request_t *dr)
{
    reply(dr, 503, "redis unreachable", 17);
}

static void cb_set(duda_request_t *dr)
{
    if (redis->command(db, dr, on_reply, NULL, "SET %s %s", param->get(dr, "key"),
                       param->get(dr, "value")) != 0) {
        unreachable(dr);
        return;
    }
    response->wait(dr);
}

static void cb_get(duda_request_t *dr)
{
    if (redis->command(db, dr, on_reply, NULL, "GET %s", param->get(dr, "key")) != 0) {
        unreachable(dr);
        return;
    }
    response->wait(dr);
}

static void cb_incr(duda_request_t *dr)
{
    const char *argv[] = {"INCR", param->get(dr, "key")};
    const size_t lens[] = {4, strlen(argv[1])};

    if (redis->command_argv(db, dr, on_reply, NULL, 2, argv, lens) != 0) {
        unreachable(dr);
        return;
    }
    response->wait(dr);
}

/* Pipelining: four commands in one write; each answer is printed, the last ends. */
static void on_piece(duda_request_t *dr, const redisReply *rep, void *data)
{
    int last = data != NULL;

    if (!rep) {
        if (last) {
            reply(dr, 503, "redis went away", 15);
            response->cont(dr);
        }
        return;
    }
    if (rep->type == REDIS_REPLY_INTEGER) {
        response->printf(dr, "%lld ", rep->integer);
    }
    else if (rep->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < rep->elements; i++) {
            response->printf(dr, "%s%s", i ? "," : "", rep->element[i]->str);
        }
    }
    if (last) {
        response->print(dr, "\n", 1);
        response->end(dr, NULL);
        response->cont(dr);
    }
}

static void cb_pipeline(duda_request_t *dr)
{
    const char *key = param->get(dr, "key");

    if (redis->command(db, dr, on_piece, NULL, "DEL %s", key) != 0) {
        unreachable(dr);
        return;
    }
    redis->command(db, dr, on_piece, NULL, "RPUSH %s a", key);
    redis->command(db, dr, on_piece, NULL, "RPUSH %s b", key);
    redis->command(db, dr, on_piece, (void *) 1, "LRANGE %s 0 -1", key);
    response->http_content_type(dr, "text/plain");
    response->wait(dr);
}

static void cb_bad(duda_request_t *dr)
{
    if (redis->command(db, dr, on_reply, NULL, "NOSUCHCOMMAND x") != 0) {
        unreachable(dr);
        return;
    }
    response->wait(dr);
}

static void cb_publish(duda_request_t *dr)
{
    if (redis->command(db, dr, on_reply, NULL, "PUBLISH %s %s", param->get(dr, "ch"),
                       param->get(dr, "msg")) != 0) {
        unreachable(dr);
        return;
    }
    response->wait(dr);
}

static void cb_up(duda_request_t *dr)
{
    reply(dr, 200, redis->connected(db) ? "1" : "0", 1);
}

/* ---- pub/sub to server-sent events ------------------------------------------------------- */

static void on_news(const char *channel, const char *msg, size_t len, void *data)
{
    struct news_log *log = global->get(&news);

    (void) channel;
    (void) data;
    char *copy = strndup(msg, len);
    if (!log || !copy) {
        free(copy);
        return;
    }
    free(log->text[log->seq % NEWS_MAX]);
    log->text[log->seq % NEWS_MAX] = copy;
    log->seq++;
}

/* Each client's own timer sends what arrived since its last turn (it stops when the client goes).
 */
static void tick(duda_request_t *dr, void *data)
{
    struct client *c = data;
    struct news_log *log = global->get(&news);

    if (!log || c->seen == log->seq) {
        if (++c->idle == 100) {
            c->idle = 0;
            response->printf(dr, ": ping\n\n");
            response->flush(dr);
        }
        return;
    }
    c->idle = 0;
    for (; c->seen < log->seq; c->seen++) {
        if (log->seq - c->seen <= NEWS_MAX) {
            response->printf(dr, "data: %s\n\n", log->text[c->seen % NEWS_MAX]);
        }
    }
    response->flush(dr);
}

static void cb_events(duda_request_t *dr)
{
    struct client *c = gc->alloc(dr, sizeof(*c));
    struct news_log *log = global->get(&news);

    if (!c || !log) {
        unreachable(dr);
        return;
    }
    c->seen = log->seq;
    response->http_content_type(dr, "text/event-stream");
    response->http_header(dr, "Cache-Control", "no-cache");
    response->printf(dr, ": subscribed\n\n");
    response->flush(dr);
    event->timer_add(dr, 10, 1, tick, c);
}

static void *news_make(void)
{
    return calloc(1, sizeof(struct news_log));
}

static void news_free(void *p)
{
    struct news_log *log = p;
    for (int i = 0; log && i < NEWS_MAX; i++) {
        free(log->text[i]);
    }
    free(log);
}

/* On each worker, before its first request: subscribe it. */
static void subscribe_worker(void)
{
    redis->subscribe(db, "news", on_news, NULL);
}

int duda_main(void)
{
    duda_fconf_t *f = fconf->read("redis.conf");
    const char *url = f ? fconf->get(f, "REDIS", "Url") : NULL;

    if (!url || !duda_load_package(redis, "redis") || !(db = redis->connect(url))) {
        if (f) {
            fconf->free(f);
        }
        return -1;
    }
    fconf->free(f);
    global->init(&news, news_make, news_free);
    worker->pre_loop(subscribe_worker);
    router->map("/set/:key/:value", DUDA_GET, cb_set);
    router->map("/get/:key", DUDA_GET, cb_get);
    router->map("/incr/:key", DUDA_GET, cb_incr);
    router->map("/pipeline/:key", DUDA_GET, cb_pipeline);
    router->map("/bad", DUDA_GET, cb_bad);
    router->map("/publish/:ch/:msg", DUDA_GET, cb_publish);
    router->map("/events", DUDA_GET, cb_events);
    router->map("/up", DUDA_GET, cb_up);
    return 0;
}
