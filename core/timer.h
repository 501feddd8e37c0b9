/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * timer.h: deadlines in milliseconds of a monotonic clock, in FIFO queues of
 * one duration each.
 *
 * An entry armed for `ms` milliseconds goes to the tail of the queue for that
 * duration (created on first use). Every entry of a queue was armed with the
 * same duration and a later or equal `now`, so each queue is in deadline
 * order and expiry looks only at queue heads. When a duration changes (a reload lowers Timeout, for
 * instance) new entries go to a new queue at once; the entries armed with the
 * old duration keep their deadline and leave their queue as usual.
 *
 * Arming, disarming and expiring cost O(1) plus a walk over the queues,
 * whose number is the number of distinct durations in use (a handful). A
 * queue left empty and unused for MK_TIMER_QUEUE_IDLE ms is freed by
 * mk_timers_expire(), so steady traffic allocates nothing. Many distinct
 * durations make many queues: the structure suits a few durations used
 * over and over (connection timeouts, a plugin's polling period).
 *
 * The clock is the caller's: `now` is any monotonic count of milliseconds
 * (the workers read CLOCK_MONOTONIC once per loop iteration).
 *
 * Not thread safe: a struct mk_timers belongs to one thread (a worker).
 */
#ifndef MK_CORE_TIMER_H
#define MK_CORE_TIMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "list.h"

#define MK_TIMER_QUEUE_IDLE 60000 /* ms an empty queue is kept for reuse */
#define MK_TIMER_NEVER UINT64_MAX /* mk_timers_next() when nothing is armed */

/* Embedded in whatever has a deadline; self-linked while not armed. */
struct mk_timer {
    struct mk_list node; /* in its queue's entries */
    uint64_t deadline;   /* ms */
};

struct mk_timer_queue {
    uint64_t ms; /* the duration of every entry */
    uint64_t last_armed;
    struct mk_list entries; /* struct mk_timer, oldest (earliest deadline) first */
    struct mk_list node;    /* in mk_timers.queues */
};

struct mk_timers {
    struct mk_list queues;
    size_t n_queues;
    /* the two queues armed last, latest first: a connection alternates
       between two durations (request, keep-alive), so most arms find theirs */
    struct mk_timer_queue *last[2];
    uint64_t next_due;   /* no entry is due before this (a lower bound) */
    uint64_t next_prune; /* no empty queue may be freed before this */
};

void mk_timers_init(struct mk_timers *t);
/* Free the queues. Entries still armed are unlinked (left self-linked). */
void mk_timers_destroy(struct mk_timers *t);

/* The queue of duration `ms`, created if need be (for mk_timer_arm). */
struct mk_timer_queue *mk_timers_queue(struct mk_timers *t, uint64_t ms);

/* Prepare an entry: not armed. */
void mk_timer_init(struct mk_timer *e);

/*
 * (Re)arm `e` to expire `ms` after `now` (deadline now + ms). `now` should
 * not be earlier than in earlier calls on `t`: if the clock steps back, the
 * entries armed after the step may expire late by up to the step. Aborts only
 * if a new queue cannot be allocated (see mk_alloc).
 */
static inline void mk_timer_arm(struct mk_timers *t, struct mk_timer *e, uint64_t now, uint64_t ms)
{
    struct mk_timer_queue *q = t->last[0];

    if (!q || q->ms != ms) {
        q = t->last[1];
        if (q && q->ms == ms) {
            t->last[1] = t->last[0];
            t->last[0] = q;
        }
        else {
            q = mk_timers_queue(t, ms);
        }
    }
    q->last_armed = now;
    e->deadline = now + ms;
    mk_list_move_tail(&e->node, &q->entries);
    if (e->deadline < t->next_due) {
        t->next_due = e->deadline;
    }
}

/* Disarm `e`; harmless when it is not armed. */
void mk_timer_disarm(struct mk_timer *e);

static inline bool mk_timer_armed(const struct mk_timer *e)
{
    return !mk_list_is_empty(&e->node);
}

/* True when no entry is armed. */
bool mk_timers_empty(const struct mk_timers *t);

/* Some armed entry, or NULL (for closing everything). */
struct mk_timer *mk_timers_any(const struct mk_timers *t);

/* The earliest deadline armed, or MK_TIMER_NEVER: how long a loop may sleep. */
uint64_t mk_timers_next(const struct mk_timers *t);

/*
 * Call fn(e, arg) for every entry whose deadline is at or before `now`,
 * earliest first within each queue. fn must disarm e or re-arm it (to a
 * later deadline); an entry it leaves due is disarmed. Once e is disarmed fn
 * may free it. fn may arm and disarm other entries. Then free the queues
 * idle for MK_TIMER_QUEUE_IDLE ms. Returns the number of entries fn was
 * called for.
 *
 * Cost: most calls find nothing due and return at once, inline, without a walk:
 * the set keeps a lower bound of the earliest deadline (lowered by every
 * arm, made exact by every walk) and of the earliest moment an empty queue
 * may be freed. A queue emptied by disarming rather than by expiry is freed
 * at a later walk.
 */
size_t mk_timers_expire_walk(struct mk_timers *t, uint64_t now,
                             void (*fn)(struct mk_timer *e, void *arg), void *arg);
static inline size_t mk_timers_expire(struct mk_timers *t, uint64_t now,
                                      void (*fn)(struct mk_timer *e, void *arg), void *arg)
{
    if (now < t->next_due && now < t->next_prune) {
        return 0; /* the usual case, once per loop iteration: no call */
    }
    return mk_timers_expire_walk(t, now, fn, arg);
}

/* Call fn(e, arg) once for every armed entry; fn may disarm e, and arm nothing. */
void mk_timers_each(struct mk_timers *t, void (*fn)(struct mk_timer *e, void *arg), void *arg);

#endif
