/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * broadcaster.c: the broadcaster package (broadcaster.h, README.md).
 *
 * Every worker has its own table of channels (thread-local), holding the
 * connections of that worker only. send() makes one message, counted once
 * per worker it is handed to, and passes it to each worker with
 * worker->call(); there each worker writes it to its own members through
 * the websocket package, and the last one frees it. So no socket is ever
 * written by a thread that does not own it, and no lock guards a channel.
 * A worker runs its calls in order, so the messages of one sender arrive
 * in order, each once.
 *
 * A delivery runs the members' callbacks: websocket->send() that drops a
 * slow reader calls its on_error, which may leave() or join() channels.
 * While a channel is being delivered to (busy), a member leaving it only
 * empties its slot, and the channel is compacted, or freed when no one is
 * left, once the delivery is over; so the loop neither skips a member nor
 * reads a freed channel.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <duda/duda_package.h>

#include "broadcaster.h"

struct bc_channel {
    char name[BROADCASTER_CHANNEL_MAX + 1];
    websocket_t **members; /* n slots, `holes` of them NULL (left while busy) */
    size_t n, cap, holes;
    unsigned busy; /* deliveries in progress on this channel */
    struct bc_channel *next;
};

/* One worker's channels. */
struct bc_worker {
    struct bc_channel *channels;
    unsigned long dropped;
};

struct bc_msg {
    atomic_int refs; /* workers that still have to deliver it */
    char channel[BROADCASTER_CHANNEL_MAX + 1];
    int type;
    size_t len;
    char bytes[];
};

static const struct duda_websocket_api *websocket;
static __thread struct bc_worker bc_here;

static bool bc_name_ok(const char *name)
{
    return name && name[0] && strlen(name) <= BROADCASTER_CHANNEL_MAX;
}

static struct bc_channel *bc_find(const char *name)
{
    for (struct bc_channel *c = bc_here.channels; c; c = c->next) {
        if (strcmp(c->name, name) == 0) {
            return c;
        }
    }
    return NULL;
}

static bool bc_member_of_any(websocket_t *ws)
{
    for (struct bc_channel *c = bc_here.channels; c; c = c->next) {
        for (size_t i = 0; i < c->n; i++) {
            if (c->members[i] == ws) {
                return true;
            }
        }
    }
    return false;
}

/* Free channel c, which has no member left, and take it off this worker's list. */
static void bc_channel_free(struct bc_channel *c)
{
    struct bc_channel **pp = &bc_here.channels;

    while (*pp != c) {
        pp = &(*pp)->next;
    }
    *pp = c->next;
    free(c->members);
    free(c);
}

/*
 * Remove ws from channel c: whether it was there. While c is busy its slot
 * is only emptied (bc_settle() compacts); otherwise the last member's
 * leaving frees c.
 */
static bool bc_remove(struct bc_channel *c, websocket_t *ws)
{
    for (size_t i = 0; i < c->n; i++) {
        if (c->members[i] != ws) {
            continue;
        }
        if (c->busy) {
            c->members[i] = NULL;
            c->holes++;
            return true;
        }
        c->members[i] = c->members[--c->n];
        if (c->n == 0) {
            bc_channel_free(c);
        }
        return true;
    }
    return false;
}

/* A delivery to c is over: drop the slots emptied meanwhile (in order), or c when no one is left.
 */
static void bc_settle(struct bc_channel *c)
{
    if (--c->busy > 0 || c->holes == 0) {
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++) {
        if (c->members[i]) {
            c->members[k++] = c->members[i];
        }
    }
    c->n = k;
    c->holes = 0;
    if (c->n == 0) {
        bc_channel_free(c);
    }
}

/* The websocket package's close hook: ws leaves every channel of its worker. */
static void bc_on_close(websocket_t *ws, void *arg)
{
    struct bc_channel *c = bc_here.channels;

    (void) arg;
    while (c) {
        struct bc_channel *next = c->next;
        bc_remove(c, ws);
        c = next;
    }
}

static int bc_join(websocket_t *ws, const char *channel)
{
    if (!ws || !bc_name_ok(channel) || websocket->worker(ws) != worker->id()) {
        return -1;
    }
    struct bc_channel *c = bc_find(channel);
    if (c) {
        for (size_t i = 0; i < c->n; i++) {
            if (c->members[i] == ws) {
                return 0;
            }
        }
    }
    bool hooked = bc_member_of_any(ws);
    if (!c) {
        c = calloc(1, sizeof(*c));
        if (!c) {
            return -1;
        }
        strcpy(c->name, channel);
        c->next = bc_here.channels;
        bc_here.channels = c;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        websocket_t **m = realloc(c->members, cap * sizeof(*m));
        if (!m) {
            return -1;
        }
        c->members = m;
        c->cap = cap;
    }
    if (!hooked && websocket->on_close_hook(ws, bc_on_close, NULL) != 0) {
        return -1;
    }
    c->members[c->n++] = ws;
    return 0;
}

static int bc_leave(websocket_t *ws, const char *channel)
{
    struct bc_channel *c = bc_name_ok(channel) ? bc_find(channel) : NULL;

    return c && bc_remove(c, ws) ? 0 : -1;
}

static void bc_msg_unref(struct bc_msg *m)
{
    if (atomic_fetch_sub(&m->refs, 1) == 1) {
        free(m);
    }
}

/* On each worker: write the message to this worker's members (those who join meanwhile too). */
static void bc_deliver(void *arg)
{
    struct bc_msg *m = arg;
    struct bc_channel *c = worker->id() >= 0 ? bc_find(m->channel) : NULL;

    if (c) {
        c->busy++; /* a send may run on_error, which may leave(): see bc_remove() */
        for (size_t i = 0; i < c->n; i++) {
            if (c->members[i] &&
                websocket->send(c->members[i], m->type, m->bytes, m->len) == DUDA_ERR) {
                bc_here.dropped++;
            }
        }
        bc_settle(c);
    }
    bc_msg_unref(m);
}

static int bc_send(const char *channel, int type, const void *bytes, size_t len)
{
    if (!bc_name_ok(channel) || (type != WEBSOCKET_TEXT && type != WEBSOCKET_BINARY) ||
        (!bytes && len)) {
        return -1;
    }
    int workers = worker->count();
    struct bc_msg *m = malloc(sizeof(*m) + len);
    if (!m || workers <= 0) {
        free(m);
        return -1;
    }
    atomic_init(&m->refs, workers + 1); /* +1: ours, until every call is made */
    strcpy(m->channel, channel);
    m->type = type;
    m->len = len;
    if (len) {
        memcpy(m->bytes, bytes, len);
    }
    for (int w = 0; w < workers; w++) {
        if (worker->call(w, bc_deliver, m) != 0) {
            bc_msg_unref(m);
        }
    }
    bc_msg_unref(m);
    return 0;
}

static int bc_send_text(const char *channel, const char *text)
{
    return text ? bc_send(channel, WEBSOCKET_TEXT, text, strlen(text)) : -1;
}

static size_t bc_members_here(const char *channel)
{
    struct bc_channel *c = bc_name_ok(channel) ? bc_find(channel) : NULL;
    return c ? c->n - c->holes : 0;
}

static unsigned long bc_dropped_here(void)
{
    return bc_here.dropped;
}

static int bc_init(const struct duda_api *api)
{
    (void) api;
    if (!DUDA_HAS(worker, call)) {
        return -1;
    }
    duda_load_package(websocket, "websocket");
    return websocket ? 0 : -1;
}

static const struct duda_broadcaster_api bc_api = {
    .size = sizeof(struct duda_broadcaster_api),
    .join = bc_join,
    .leave = bc_leave,
    .send = bc_send,
    .send_text = bc_send_text,
    .members_here = bc_members_here,
    .dropped_here = bc_dropped_here,
};

DUDA_PACKAGE("broadcaster", "1.0", &bc_api, bc_init, NULL);
