/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * timer.h: deadlines in whole seconds, in FIFO queues of one duration each.
 *
 * An entry armed for `seconds` goes to the tail of the queue for that
 * duration (created on first use). Every entry of a queue was armed with the
 * same duration and a later or equal `now`, so each queue is in deadline
 * order and expiry looks only at queue heads. When a duration changes (a reload lowers Timeout, for
 * instance) new entries go to a new queue at once; the entries armed with the
 * old duration keep their deadline and leave their queue as usual.
 *
 * Arming, disarming and expiring cost O(1) plus a walk over the queues,
 * whose number is the number of distinct durations in use (a handful). A
 * queue left empty and unused for MK_TIMER_QUEUE_IDLE seconds is freed by
 * mk_timers_expire(), so steady traffic allocates nothing.
 *
 * Not thread safe: a struct mk_timers belongs to one thread (a worker).
 */
#ifndef MK_CORE_TIMER_H
#define MK_CORE_TIMER_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "list.h"

#define MK_TIMER_QUEUE_IDLE 60 /* seconds an empty queue is kept for reuse */

/* Embedded in whatever has a deadline; self-linked while not armed. */
struct mk_timer {
    struct mk_list node; /* in its queue's entries */
    time_t deadline;
};

struct mk_timer_queue {
    int seconds;
    time_t last_armed;
    struct mk_list entries; /* struct mk_timer, oldest (earliest deadline) first */
    struct mk_list node;    /* in mk_timers.queues */
};

struct mk_timers {
    struct mk_list queues;
    size_t n_queues;
};

void mk_timers_init(struct mk_timers *t);
/* Free the queues. Entries still armed are unlinked (left self-linked). */
void mk_timers_destroy(struct mk_timers *t);

/* Prepare an entry: not armed. */
void mk_timer_init(struct mk_timer *e);

/*
 * (Re)arm `e` to expire `seconds` after `now` (seconds >= 0). `now` should
 * not be earlier than in earlier calls on `t`: if the clock steps back, the
 * entries armed after the step may expire late by up to the step. Aborts only
 * if a new queue cannot be allocated (see mk_alloc).
 */
void mk_timer_arm(struct mk_timers *t, struct mk_timer *e, time_t now, int seconds);

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

/*
 * Call fn(e, arg) for every entry whose deadline is before `now` (a deadline
 * of `now` is not yet due: with whole seconds, it may be less than a second
 * away), earliest first within each queue. fn must disarm e or re-arm it (to
 * a later deadline); an entry it leaves due is disarmed. fn may arm and disarm
 * other entries. Then free the queues idle for MK_TIMER_QUEUE_IDLE seconds.
 * Returns the number of entries fn was called for.
 */
size_t mk_timers_expire(struct mk_timers *t, time_t now, void (*fn)(struct mk_timer *e, void *arg),
                        void *arg);

/* Call fn(e, arg) once for every armed entry; fn may disarm e, and arm nothing. */
void mk_timers_each(struct mk_timers *t, void (*fn)(struct mk_timer *e, void *arg), void *arg);

#endif
