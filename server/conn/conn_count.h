/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * conn_count.h: the connections of a worker by state (api->conn_states,
 * MK_CSTATE_*), counted where a connection's state or timer changes: every
 * write of c->state goes through mk_conn_state(), and the timer functions
 * (conn_timer.c) recount. Idle is a head awaited under the keep-alive
 * timer, so the timer matters too. The counts are the worker's own
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
    c->state = (uint8_t) state;
#ifdef MK_HAVE_METRICS
    mk_conn_recount(c);
#endif
}

#endif
