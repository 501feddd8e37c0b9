/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * timer.c: see timer.h. Queues are kept in creation order; finding the
 * queue for a duration is a walk over a handful of them.
 */
#include "timer.h"

#include "memory.h"

void mk_timers_init(struct mk_timers *t)
{
    mk_list_init(&t->queues);
    t->n_queues = 0;
    t->last[0] = t->last[1] = NULL;
    t->next_due = MK_TIMER_NEVER;
    t->next_prune = MK_TIMER_NEVER;
}

void mk_timers_destroy(struct mk_timers *t)
{
    while (!mk_list_is_empty(&t->queues)) {
        struct mk_timer_queue *q = mk_list_entry(t->queues.next, struct mk_timer_queue, node);
        while (!mk_list_is_empty(&q->entries)) {
            mk_list_del(q->entries.next);
        }
        mk_list_del(&q->node);
        mk_free(q);
    }
    t->n_queues = 0;
    t->last[0] = t->last[1] = NULL;
    t->next_due = MK_TIMER_NEVER;
}

void mk_timer_init(struct mk_timer *e)
{
    mk_list_init(&e->node);
    e->deadline = 0;
}

/* The queue of entries armed for `ms`, created when there is none. */
struct mk_timer_queue *mk_timers_queue(struct mk_timers *t, uint64_t ms)
{
    struct mk_list *it;

    mk_list_foreach (it, &t->queues) {
        struct mk_timer_queue *q = mk_list_entry(it, struct mk_timer_queue, node);
        if (q->ms == ms) {
            t->last[1] = t->last[0];
            return t->last[0] = q;
        }
    }
    struct mk_timer_queue *q = mk_alloc(sizeof(*q));
    t->last[1] = t->last[0];
    t->last[0] = q;
    q->ms = ms;
    q->last_armed = 0;
    mk_list_init(&q->entries);
    mk_list_add_tail(&q->node, &t->queues);
    t->n_queues++;
    return q;
}

void mk_timer_disarm(struct mk_timer *e)
{
    mk_list_del(&e->node);
}

bool mk_timers_empty(const struct mk_timers *t)
{
    return mk_timers_any(t) == NULL;
}

struct mk_timer *mk_timers_any(const struct mk_timers *t)
{
    const struct mk_list *it;

    mk_list_foreach (it, &t->queues) {
        const struct mk_timer_queue *q = mk_list_entry(it, struct mk_timer_queue, node);
        if (!mk_list_is_empty(&q->entries)) {
            return mk_list_entry(q->entries.next, struct mk_timer, node);
        }
    }
    return NULL;
}

uint64_t mk_timers_next(const struct mk_timers *t)
{
    const struct mk_list *it;
    uint64_t next = MK_TIMER_NEVER;

    mk_list_foreach (it, &t->queues) {
        const struct mk_timer_queue *q = mk_list_entry(it, struct mk_timer_queue, node);
        if (!mk_list_is_empty(&q->entries)) {
            const struct mk_timer *e = mk_list_entry(q->entries.next, struct mk_timer, node);
            if (e->deadline < next) {
                next = e->deadline;
            }
        }
    }
    return next;
}

/* Free the queues that have been empty and unused for a while. */
static void mk_timers_prune(struct mk_timers *t, uint64_t now)
{
    struct mk_list *it, *tmp;

    t->next_prune = MK_TIMER_NEVER;
    mk_list_foreach_safe (it, tmp, &t->queues) {
        struct mk_timer_queue *q = mk_list_entry(it, struct mk_timer_queue, node);
        if (!mk_list_is_empty(&q->entries)) {
            continue;
        }
        if (now - q->last_armed < MK_TIMER_QUEUE_IDLE) {
            if (q->last_armed + MK_TIMER_QUEUE_IDLE < t->next_prune) {
                t->next_prune = q->last_armed + MK_TIMER_QUEUE_IDLE;
            }
        }
        else {
            if (t->last[0] == q) {
                t->last[0] = t->last[1];
                t->last[1] = NULL;
            }
            else if (t->last[1] == q) {
                t->last[1] = NULL;
            }
            mk_list_del(&q->node);
            mk_free(q);
            t->n_queues--;
        }
    }
}

/* mk_timers_expire() found something due, or an idle queue to free. */
size_t mk_timers_expire_walk(struct mk_timers *t, uint64_t now,
                             void (*fn)(struct mk_timer *e, void *arg), void *arg)
{
    struct mk_list *it;
    size_t n = 0;

    /* fn may create queues (at the tail, visited too); none is freed before the end. */
    mk_list_foreach (it, &t->queues) {
        struct mk_timer_queue *q = mk_list_entry(it, struct mk_timer_queue, node);
        while (!mk_list_is_empty(&q->entries)) {
            struct mk_timer *e = mk_list_entry(q->entries.next, struct mk_timer, node);
            if (e->deadline > now) {
                break;
            }
            fn(e, arg);
            n++;
            /* e may be freed once unlinked: look at it only if still the head. */
            if (q->entries.next == &e->node && e->deadline <= now) {
                mk_timer_disarm(e); /* fn broke its contract: do not spin */
            }
        }
    }
    mk_timers_prune(t, now);
    t->next_due = mk_timers_next(t); /* exact again: every entry left is due later */
    return n;
}

void mk_timers_each(struct mk_timers *t, void (*fn)(struct mk_timer *e, void *arg), void *arg)
{
    struct mk_list *it, *e, *tmp;

    mk_list_foreach (it, &t->queues) {
        struct mk_timer_queue *q = mk_list_entry(it, struct mk_timer_queue, node);
        mk_list_foreach_safe (e, tmp, &q->entries) {
            fn(mk_list_entry(e, struct mk_timer, node), arg);
        }
    }
}
