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
/* 1 + the MK_CSTATE_* that c is in now, 0: none (conn_count.h). */
static uint8_t mk_conn_class(const struct mk_conn *c)
{
    if (c->flags & MK_CONN_REFUSED) {
        return 0;
    }
    switch (c->state) {
    case MK_CONN_READ_HEAD:
        return 1 + (c->timer == MK_TIMER_KEEPALIVE ? MK_CSTATE_IDLE : MK_CSTATE_READING);
    case MK_CONN_SUSPENDED:
    case MK_CONN_WRITE:
        return 1 + MK_CSTATE_WRITING;
    case MK_CONN_HANDSHAKE:
        return 1 + MK_CSTATE_HANDSHAKE;
    case MK_CONN_TAKEOVER:
        return 1 + MK_CSTATE_TAKEOVER;
    case MK_CONN_LINGER:
        return 1 + MK_CSTATE_CLOSING;
    case MK_CONN_CLOSED:
        return 0;
    default: /* READ_BODY, DISCARD, PROXY_HEAD */
        return 1 + MK_CSTATE_READING;
    }
}

void mk_conn_recount(struct mk_conn *c)
{
    uint8_t k = mk_conn_class(c);

    if (k != c->counted) {
        atomic_uint *in = c->worker->conns_in;
        MK_STAT_ADD(in[c->counted], -1u);
        MK_STAT_ADD(in[k], 1u);
        c->counted = k;
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
        bool was_idle = c->timer == MK_TIMER_KEEPALIVE;
#endif
        c->timer = MK_TIMER_NONE;
#ifdef MK_HAVE_METRICS
        if (was_idle) {
            mk_conn_recount(c);
        }
#endif
        return;
    }
#ifdef MK_HAVE_METRICS
    bool idle_changes = (c->timer == MK_TIMER_KEEPALIVE) != (kind == MK_TIMER_KEEPALIVE);
#endif
    c->timer = (uint8_t) kind;
#ifdef MK_HAVE_METRICS
    if (idle_changes) {
        mk_conn_recount(c); /* idle is READ_HEAD under KEEPALIVE */
    }
#endif
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
