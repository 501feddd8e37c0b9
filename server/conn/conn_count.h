/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * conn_count.h: the connections of a worker by state (api->conn_states,
 * MK_CSTATE_*), counted where a connection's state or timer changes: every
 * write of c->state goes through mk_conn_state(), which recounts when the
 * state changes, the timer functions (conn_timer.c) recount when the
 * keep-alive timer starts or stops (idle is a head awaited under it), and
 * mk_conn_start() counts a new connection. The counts are the worker's own
 * (worker.h, conns_in), written only by its thread with relaxed atomic
 * stores (plain moves), read by a scrape from any thread. A closed
 * connection is in none; the worker forgets any count a closed struct
 * still holds before it recycles it (mk_conn_uncount). Without metrics
 * (MK_METRICS) mk_conn_state() is the plain store.
 */
#ifndef MK_SERVER_CONN_COUNT_H
#define MK_SERVER_CONN_COUNT_H

#include "../runtime/worker.h"
#include "conn.h"

#ifdef MK_HAVE_METRICS
/* Move c's count to the state it is in now (conn_timer.c). */
void mk_conn_recount(struct mk_conn *c);

/* Before a closed struct is recycled: in no state. */
static inline void mk_conn_uncount(struct mk_conn *c)
{
    if (c->counted) {
        MK_STAT_ADD(c->worker->conns_in[c->counted], -1u);
        c->counted = 0;
    }
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
