/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * conn_count.h: the connections of a worker by state (api->conn_states,
 * MK_CSTATE_*), counted where a connection's state or timer changes: every
 * write of c->state goes through mk_conn_state(), which recounts when the
 * state changes, the timer functions (conn_timer.c) recount when the
 * keep-alive timer starts or stops (idle is a head awaited under it),
 * mk_conn_start() and mk_conn_refuse() place a new connection, and
 * mk_conn_close() takes it out of its class (mk_conn_uncount) as it sets
 * MK_CONN_CLOSED, whose class is none.
 *
 * Each connection notes the class it is counted in (c->counted, MK_COUNT_*)
 * and a change of class moves it between the worker's conns_in counters
 * (worker.h), written only by its thread with relaxed atomic stores (plain
 * moves), read by a scrape from any thread. Reading is not stored: it is
 * what the worker's open connections (n_conns) leave once the stored
 * classes are taken out (mk_conn_reading), so that the start of every
 * connection, and the whole life of one answered at once and closed (a
 * small response written within its read, then Connection: close: it
 * never leaves READ_HEAD), cost no store; the refused connections (over
 * MaxConnections), which are in no state but are open, have a stored
 * class of their own for that sum. A closed connection is in none; the
 * worker forgets any count a closed struct still holds before it recycles
 * it (mk_conn_uncount). Without metrics (MK_METRICS) mk_conn_state() is
 * the plain store.
 */
#ifndef MK_SERVER_CONN_COUNT_H
#define MK_SERVER_CONN_COUNT_H

#include "../runtime/worker.h"
#include "conn.h"

#ifdef MK_HAVE_METRICS
/* Move c's count to the class it is in now (conn_timer.c). */
void mk_conn_recount(struct mk_conn *c);

/* Before a closed struct is recycled: in no class. */
static inline void mk_conn_uncount(struct mk_conn *c)
{
    if (c->counted > MK_COUNT_READING) {
        MK_STAT_ADD(c->worker->conns_in[c->counted], -1u);
    }
    c->counted = MK_COUNT_NONE;
}

/*
 * The connections of worker w reading now: its open ones but those in a
 * stored class. Any thread: a sum of counters read one by one, so a
 * moment's count may be off by the connections changing meanwhile (never
 * below 0).
 */
static inline unsigned mk_conn_reading(const struct mk_worker *w)
{
    long n = (long) atomic_load_explicit(&w->n_conns, memory_order_relaxed);

    for (unsigned k = MK_COUNT_READING + 1; k < MK_COUNTS; k++) {
        n -= (long) atomic_load_explicit(&w->conns_in[k], memory_order_relaxed);
    }
    return n > 0 ? (unsigned) n : 0;
}
#endif

static inline void mk_conn_state(struct mk_conn *c, enum mk_conn_state state)
{
#ifdef MK_HAVE_METRICS
    if (c->state != state) {
        c->state = (uint8_t) state;
        mk_conn_recount(c);
    }
#else
    c->state = (uint8_t) state;
#endif
}

#endif
