/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * task_queue.c: the bounded, fair queue in front of the task threads (see
 * task_queue.h).
 *
 * The jobs of a client are counted by walking the queue: it holds at most
 * TaskQueuePerPlugin jobs per plugin, a few hundred, and a walk of that many
 * entries costs less than the cheapest job it guards.
 */
#include "task_queue.h"

#include <string.h>

#include <monkey/mk_common.h>
#include <monkey/mk_util.h>

#include "../../core/memory.h"

_Static_assert(MK_TASK_KEY_LEN == 16, "a task key is mk_cidr_client()'s key");

void mk_task_key(const struct sockaddr *sa, uint8_t key[MK_TASK_KEY_LEN])
{
    int family;

    mk_cidr_client(sa, key, &family);
    if (family == AF_INET6) {
        memset(key + 8, 0, 8); /* one host has a whole /64: the prefix is the client */
    }
}

void mk_task_queue_init(struct mk_task_queue *q, size_t n_shares)
{
    memset(q, 0, sizeof(*q));
    q->n_shares = n_shares ? n_shares : 1;
    q->fifo = mk_calloc(q->n_shares, sizeof(*q->fifo));
    q->count = mk_calloc(q->n_shares, sizeof(*q->count));
    for (size_t i = 0; i < q->n_shares; i++) {
        mk_list_init(&q->fifo[i]);
    }
    mk_list_init(&q->running);
}

void mk_task_queue_destroy(struct mk_task_queue *q)
{
    mk_free(q->fifo);
    mk_free(q->count);
    memset(q, 0, sizeof(*q));
}

/* Jobs of `key` on `list`, added to *n, stopping at `cap`. */
static void mk_task_count_list(const struct mk_list *list, const uint8_t *key, unsigned *n,
                               unsigned cap)
{
    const struct mk_list *it;

    for (it = list->next; it != list && *n < cap; it = it->next) {
        const struct mk_task_entry *e = mk_list_entry(it, struct mk_task_entry, node);
        if (memcmp(e->key, key, MK_TASK_KEY_LEN) == 0) {
            (*n)++;
        }
    }
}

/* Jobs of `key` waiting or running, counted up to `cap` at most. */
static unsigned mk_task_count_client(const struct mk_task_queue *q, const uint8_t *key,
                                     unsigned cap)
{
    unsigned n = 0;

    mk_task_count_list(&q->running, key, &n, cap);
    for (size_t i = 0; i < q->n_shares && n < cap; i++) {
        mk_task_count_list(&q->fifo[i], key, &n, cap);
    }
    return n;
}

unsigned mk_task_queue_client(const struct mk_task_queue *q, const uint8_t key[MK_TASK_KEY_LEN])
{
    return mk_task_count_client(q, key, q->total);
}

int mk_task_queue_push(struct mk_task_queue *q, struct mk_task_entry *e, size_t share,
                       const uint8_t key[MK_TASK_KEY_LEN], unsigned share_max, unsigned client_max)
{
    if (share >= q->n_shares) {
        share = q->n_shares - 1;
    }
    if (q->count[share] >= share_max) {
        return MK_TASK_SHARE_FULL;
    }
    if (mk_task_count_client(q, key, client_max) >= client_max) {
        return MK_TASK_CLIENT_FULL;
    }
    memcpy(e->key, key, MK_TASK_KEY_LEN);
    e->share = (uint32_t) share;
    e->state = MK_TASK_WAITING;
    mk_list_add_tail(&e->node, &q->fifo[share]);
    q->count[share]++;
    q->total++;
    return MK_OK;
}

/* The job of a non-empty `fifo` to run next: the oldest of a client with none running. */
static struct mk_task_entry *mk_task_pick(const struct mk_task_queue *q, struct mk_list *fifo)
{
    struct mk_list *it;

    mk_list_foreach (it, fifo) {
        struct mk_task_entry *e = mk_list_entry(it, struct mk_task_entry, node);
        unsigned running = 0;
        mk_task_count_list(&q->running, e->key, &running, 1);
        if (running == 0) {
            return e;
        }
    }
    return mk_list_entry(fifo->next, struct mk_task_entry, node);
}

struct mk_task_entry *mk_task_queue_pop(struct mk_task_queue *q)
{
    for (size_t i = 0; i < q->n_shares; i++) {
        size_t share = (q->next + i) % q->n_shares;
        struct mk_list *fifo = &q->fifo[share];
        if (mk_list_is_empty(fifo)) {
            continue;
        }
        struct mk_task_entry *e = mk_task_pick(q, fifo);
        mk_list_move_tail(&e->node, &q->running);
        e->state = MK_TASK_RUNNING;
        q->next = (share + 1) % q->n_shares;
        return e;
    }
    return NULL;
}

/* `e` leaves the queue (waiting or running). */
static void mk_task_queue_remove(struct mk_task_queue *q, struct mk_task_entry *e)
{
    mk_list_del(&e->node);
    e->state = MK_TASK_IDLE;
    q->count[e->share]--;
    q->total--;
}

void mk_task_queue_done(struct mk_task_queue *q, struct mk_task_entry *e)
{
    if (e->state == MK_TASK_RUNNING) {
        mk_task_queue_remove(q, e);
    }
}

bool mk_task_queue_cancel(struct mk_task_queue *q, struct mk_task_entry *e)
{
    if (e->state != MK_TASK_WAITING) {
        return false;
    }
    mk_task_queue_remove(q, e);
    return true;
}
