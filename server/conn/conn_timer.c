/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * conn_timer.c: a connection's one timer and its turns (conn.h).
 *
 * Every open connection has one timer armed, in its worker's timer queues
 * (core/timer.h): one FIFO queue per distinct duration, so each stays
 * sorted by deadline and a reload that changes a timeout applies to new
 * waits at once, however long the waits armed before it. A connection that
 * used up its turn (a budget of work per loop turn) waits for the next
 * turn in its worker's list; the worker runs the turns (worker.c).
 */
#include "../runtime/worker.h"
#include "../config/conf.h"
#include "conn.h"
#include "conn_count.h"

/* The lingering close: how long a connection's last bytes may take to drain. */
#define MK_LINGER_MS 5000

static uint32_t mk_timer_ms(const struct mk_worker *w, enum mk_timer_kind kind)
{
    switch (kind) {
    case MK_TIMER_READ:
        return w->use.cfg->timeout_ms;
    case MK_TIMER_KEEPALIVE:
        return w->use.cfg->keepalive_timeout_ms;
    case MK_TIMER_SEND:
        return w->use.cfg->send_timeout_ms;
    case MK_TIMER_LINGER:
        return MK_LINGER_MS;
    default:
        return 0;
    }
}

#ifdef MK_HAVE_METRICS
/* The class of each enum mk_conn_state (MK_COUNT_*), READ_HEAD's before its timer is looked at. */
static const uint8_t mk_conn_classes[] = {
    [MK_CONN_READ_HEAD] = MK_COUNT_READING,
    [MK_CONN_SUSPENDED] = 1 + MK_CSTATE_WRITING,
    [MK_CONN_READ_BODY] = MK_COUNT_READING,
    [MK_CONN_WRITE] = 1 + MK_CSTATE_WRITING,
    [MK_CONN_DISCARD] = MK_COUNT_READING,
    [MK_CONN_LINGER] = 1 + MK_CSTATE_CLOSING,
    [MK_CONN_CLOSED] = MK_COUNT_NONE,
    [MK_CONN_HANDSHAKE] = 1 + MK_CSTATE_HANDSHAKE,
    [MK_CONN_TAKEOVER] = 1 + MK_CSTATE_TAKEOVER,
#ifdef MK_HAVE_REALIP
    [MK_CONN_PROXY_HEAD] = MK_COUNT_READING,
#endif
};

/* The class c is in now (conn_count.h). */
static uint8_t mk_conn_class(const struct mk_conn *c)
{
    uint8_t k = mk_conn_classes[c->state];

    if (c->flags & MK_CONN_REFUSED) {
        return k == MK_COUNT_NONE ? MK_COUNT_NONE : MK_COUNT_REFUSED;
    }
    if (c->state == MK_CONN_READ_HEAD && c->timer == MK_TIMER_KEEPALIVE) {
        return 1 + MK_CSTATE_IDLE;
    }
    return k;
}

void mk_conn_recount(struct mk_conn *c)
{
    uint8_t k = mk_conn_class(c), was = c->counted;

    if (k == was) {
        return;
    }
    c->counted = k;
    /* reading and none are not stored: a move between them costs nothing */
    if (was > MK_COUNT_READING) {
        MK_STAT_ADD(c->worker->conns_in[was], -1u);
    }
    if (k > MK_COUNT_READING) {
        MK_STAT_ADD(c->worker->conns_in[k], 1u);
    }
}
#endif

/*
 * (Re)arm the connection's timer of `kind` for the duration the worker's
 * configuration gives it now; MK_TIMER_NONE disarms. A closed connection
 * stays disarmed (its struct is about to be recycled).
 */
void mk_conn_timer_set(struct mk_conn *c, enum mk_timer_kind kind)
{
    struct mk_worker *w = c->worker;

    if (kind == MK_TIMER_NONE || c->state == MK_CONN_CLOSED) {
        mk_timer_disarm(&c->expiry);
#ifdef MK_HAVE_METRICS
        if (c->timer == MK_TIMER_KEEPALIVE) {
            c->timer = MK_TIMER_NONE;
            mk_conn_recount(c);
            return;
        }
#endif
        c->timer = MK_TIMER_NONE;
        return;
    }
#ifdef MK_HAVE_METRICS
    /* idle is READ_HEAD under KEEPALIVE: a recount when the timer enters or leaves it */
    if (__builtin_expect(c->timer == MK_TIMER_KEEPALIVE || kind == MK_TIMER_KEEPALIVE, 0) &&
        c->timer != kind) {
        c->timer = (uint8_t) kind;
        mk_conn_recount(c);
    }
    else
#endif
    {
        c->timer = (uint8_t) kind;
    }
    mk_timer_arm(&w->timers, &c->expiry, w->now_ms, mk_timer_ms(w, kind));
}

void mk_conn_next_turn(struct mk_conn *c)
{
    if (mk_list_is_empty(&c->turn) && c->state != MK_CONN_CLOSED) {
        mk_list_add_tail(&c->turn, &c->worker->turns);
    }
}

void mk_conn_timer_idle(struct mk_conn *c, uint32_t ms)
{
    struct mk_worker *w = c->worker;

    if (c->state == MK_CONN_CLOSED) {
        return;
    }
#ifdef MK_HAVE_METRICS
    bool idle_changes = c->timer == MK_TIMER_KEEPALIVE;
#endif
    c->timer = MK_TIMER_IDLE;
#ifdef MK_HAVE_METRICS
    if (idle_changes) {
        mk_conn_recount(c);
    }
#endif
    mk_timer_arm(&w->timers, &c->expiry, w->now_ms, ms);
}

void mk_conn_timer_arm(struct mk_conn *c, enum mk_timer_kind kind, uint32_t ms)
{
    struct mk_worker *w = c->worker;

    if (c->state == MK_CONN_CLOSED) {
        return;
    }
#ifdef MK_HAVE_METRICS
    bool idle_changes = (c->timer == MK_TIMER_KEEPALIVE) != (kind == MK_TIMER_KEEPALIVE);
#endif
    c->timer = (uint8_t) kind;
#ifdef MK_HAVE_METRICS
    if (idle_changes) {
        mk_conn_recount(c);
    }
#endif
    mk_timer_arm(&w->timers, &c->expiry, w->now_ms, ms);
}
