/*
 * redis_counter: a page hit counter in Redis, and a pub/sub fan-out of a
 * Redis channel to the service's clients (WebSocket, or server-sent
 * events).
 *
 *   GET  /redis_counter/             the page (html/index.html)
 *   GET  /redis_counter/hit          INCR redis_counter:hits: {"hits":N}
 *   GET  /redis_counter/ws           WebSocket: every message of the channel as a text
 *                                    message; a text message sent is published on it
 *   POST /redis_counter/publish      PUBLISH the body on the channel: {"receivers":N}
 *   GET  /redis_counter/events       text/event-stream: every message of the channel
 *
 * Redis's address and the channel are in conf/redis.conf. Messages come
 * from anything that publishes on the channel (redis-cli PUBLISH
 * redis_counter hello, the page, another server). Each worker subscribes
 * once (pre_loop) and hands each message to its own WebSocket clients (a
 * client leaves the list as it closes), and keeps the last messages for
 * its event-stream clients, whose own timer sends each what arrived since
 * its last turn. 503 while Redis cannot be reached.
 */
#include <stdlib.h>
#include <string.h>

#include <duda/duda.h>
#include <duda/packages/redis.h>
#include <duda/packages/websocket.h>

DUDA_REGISTER("Redis hit counter and fan-out", "redis_counter");

#define BACKLOG 128    /* messages a worker keeps for clients that lag */
#define TICK_MS 20     /* how often a client looks for new messages */
#define HEARTBEAT 1500 /* ticks (30 s) between comments that find gone clients */
#define BODY_MAX 4096

static const struct duda_redis_api *redis;
static const struct duda_websocket_api *websocket;
static duda_redis_t *db;
static char channel[128];
static duda_global_t inbox; /* per worker: struct inbox */

struct inbox {
    unsigned long seq; /* messages received by this worker */
    char *text[BACKLOG];
    websocket_t **sockets; /* this worker's WebSocket clients */
    size_t n_sockets, cap_sockets;
};

struct client {
    unsigned long seen;
    unsigned idle;
};

static void json(duda_request_t *dr, int status, const char *key, long long n)
{
    response->http_status(dr, status);
    response->http_content_type(dr, "application/json");
    response->http_header(dr, "Cache-Control", "no-store");
    response->printf(dr, "{\"%s\":%lld}\n", key, n);
    response->end(dr, NULL);
}

static void unavailable(duda_request_t *dr)
{
    response->http_status(dr, 503);
    response->http_content_type(dr, "application/json");
    response->printf(dr, "{\"error\":\"redis unreachable\"}\n");
    response->end(dr, NULL);
}

/* INCR and PUBLISH both answer a number. */
static void on_number(duda_request_t *dr, const redisReply *rep, void *key)
{
    if (rep && rep->type == REDIS_REPLY_INTEGER) {
        json(dr, 200, key, rep->integer);
    }
    else {
        unavailable(dr);
    }
    response->cont(dr);
}

static void cb_hit(duda_request_t *dr)
{
    if (redis->command(db, dr, on_number, "hits", "INCR redis_counter:hits") != 0) {
        unavailable(dr);
        return;
    }
    response->wait(dr);
}

static void cb_publish(duda_request_t *dr)
{
    size_t len;
    const char *body = request->body(dr, &len);

    if (!body || len == 0 || len > BODY_MAX || memchr(body, '\n', len) || memchr(body, '\r', len)) {
        response->http_status(dr, 400);
        response->http_content_type(dr, "application/json");
        response->printf(dr, "{\"error\":\"a message is 1 to %d bytes on one line\"}\n", BODY_MAX);
        response->end(dr, NULL);
        return;
    }
    if (redis->command(db, dr, on_number, "receivers", "PUBLISH %s %b", channel, body, len) != 0) {
        unavailable(dr);
        return;
    }
    response->wait(dr);
}

/* A message of the channel, on this worker: kept for this worker's clients. */
static void on_message(const char *ch, const char *msg, size_t len, void *unused)
{
    struct inbox *in = global->get(&inbox);
    char *copy = strndup(msg, len);

    (void) ch;
    (void) unused;
    if (!in || !copy) {
        free(copy);
        return;
    }
    /* Backwards: a client dropped by its send (too slow) leaves the list meanwhile. */
    for (size_t i = in->n_sockets; i-- > 0;) {
        if (i < in->n_sockets) {
            websocket->send(in->sockets[i], WEBSOCKET_TEXT, msg, len);
        }
    }
    free(in->text[in->seq % BACKLOG]);
    in->text[in->seq % BACKLOG] = copy;
    in->seq++;
}

/* ---- WebSocket clients: on their worker's list while open --------------------------------- */

static void ws_open(websocket_t *ws)
{
    struct inbox *in = global->get(&inbox);

    if (!in) {
        websocket->close(ws, 1011, "no memory");
        return;
    }
    if (in->n_sockets == in->cap_sockets) {
        size_t cap = in->cap_sockets ? 2 * in->cap_sockets : 16;
        websocket_t **v = realloc(in->sockets, cap * sizeof(*v));
        if (!v) {
            websocket->close(ws, 1011, "no memory");
            return;
        }
        in->sockets = v;
        in->cap_sockets = cap;
    }
    in->sockets[in->n_sockets++] = ws;
}

static void ws_close(websocket_t *ws, int code)
{
    struct inbox *in = global->get(&inbox);

    (void) code;
    for (size_t i = 0; in && i < in->n_sockets; i++) {
        if (in->sockets[i] == ws) {
            in->sockets[i] = in->sockets[--in->n_sockets];
            break;
        }
    }
}

/* A client's text message is published on the channel (it comes back to everyone). */
static void ws_message(websocket_t *ws, int type, const void *msg, size_t len)
{
    if (type != WEBSOCKET_TEXT || len == 0 || len > BODY_MAX) {
        websocket->close(ws, 1003, "one line of text, up to 4096 bytes");
        return;
    }
    redis->command(db, NULL, NULL, NULL, "PUBLISH %s %b", channel, msg, len);
}

static const struct websocket_callbacks ws_callbacks = {
    .on_open = ws_open,
    .on_message = ws_message,
    .on_close = ws_close,
};

static void cb_ws(duda_request_t *dr)
{
    websocket->handshake(dr, &ws_callbacks, NULL, NULL);
}

static void tick(duda_request_t *dr, void *arg)
{
    struct client *c = arg;
    struct inbox *in = global->get(&inbox);

    if (!in) {
        return;
    }
    if (c->seen == in->seq) {
        if (++c->idle == HEARTBEAT) {
            c->idle = 0;
            response->printf(dr, ": still here\n\n");
            response->flush(dr);
        }
        return;
    }
    c->idle = 0;
    if (in->seq - c->seen > BACKLOG) {
        c->seen = in->seq - BACKLOG; /* too slow: the oldest ones are gone */
    }
    for (; c->seen < in->seq; c->seen++) {
        response->printf(dr, "data: %s\n\n", in->text[c->seen % BACKLOG]);
    }
    response->flush(dr);
}

static void cb_events(duda_request_t *dr)
{
    struct client *c = gc->alloc(dr, sizeof(*c));
    struct inbox *in = global->get(&inbox);

    if (!c || !in) {
        unavailable(dr);
        return;
    }
    c->seen = in->seq;
    response->http_content_type(dr, "text/event-stream");
    response->http_header(dr, "Cache-Control", "no-cache");
    response->printf(dr, ": listening to %s\n\n", channel);
    response->flush(dr);
    event->timer_add(dr, TICK_MS, 1, tick, c);
}

static void *inbox_make(void)
{
    return calloc(1, sizeof(struct inbox));
}

static void inbox_free(void *p)
{
    struct inbox *in = p;
    for (int i = 0; in && i < BACKLOG; i++) {
        free(in->text[i]);
    }
    if (in) {
        free(in->sockets);
    }
    free(in);
}

static void subscribe_worker(void)
{
    redis->subscribe(db, channel, on_message, NULL);
}

int duda_main(void)
{
    duda_fconf_t *f = fconf->read("redis.conf");
    const char *url = f ? fconf->get(f, "REDIS", "Url") : NULL;
    const char *ch = f ? fconf->get(f, "REDIS", "Channel") : NULL;

    snprintf(channel, sizeof(channel), "%s", ch ? ch : "redis_counter");
    int ok = url && duda_load_package(redis, "redis") &&
             duda_load_package(websocket, "websocket") && (db = redis->connect(url));
    if (f) {
        fconf->free(f);
    }
    if (!ok) {
        return -1;
    }
    global->init(&inbox, inbox_make, inbox_free);
    worker->pre_loop(subscribe_worker);
    router->map("/hit", DUDA_GET, cb_hit);
    router->map("/ws", DUDA_GET, cb_ws);
    router->map("/publish", DUDA_POST, cb_publish);
    router->map("/events", DUDA_GET, cb_events);
    return 0;
}
