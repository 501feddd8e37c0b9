/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * metrics_count.h: the count of one request into its worker's slot of its
 * site (metrics.h), inline at the request's end (request.c). Worker thread:
 * plain relaxed stores into the worker's own memory, read by any thread.
 */
#ifndef MK_SERVER_REQUEST_METRICS_COUNT_H
#define MK_SERVER_REQUEST_METRICS_COUNT_H

#include "../runtime/worker.h"
#include "metrics.h"
#include "request.h"

#define MK_METRICS_ADD(var, n)                                                                     \
    atomic_store_explicit(&(var), atomic_load_explicit(&(var), memory_order_relaxed) + (n),        \
                          memory_order_relaxed)

/* Count a duration into h: the first bucket whose bound it does not pass. */
static inline void mk_metrics_observe(struct mk_metrics_hist *h, uint64_t us)
{
    unsigned b = 0;

    while (b < MK_METRICS_BUCKETS - 1 && us > mk_metrics_bounds[b]) {
        b++;
    }
    MK_METRICS_ADD(h->buckets[b], 1);
    MK_METRICS_ADD(h->sum_us, us);
}

/* Count r, ending now (now_us: the worker's loop clock), on its worker w. */
static inline void mk_metrics_count(struct mk_worker *w, const struct mk_request *r,
                                    uint64_t now_us)
{
    unsigned slot = r->site->metrics_slot;
    struct mk_metrics_slot *s = &atomic_load_explicit(&w->metrics.pages[slot / MK_METRICS_PAGE],
                                                      memory_order_relaxed)[slot % MK_METRICS_PAGE];
    unsigned m = (unsigned) r->head.method - MK_METHOD_GET; /* GET 0, HEAD 1, POST 2 */
    unsigned method = m < 2 ? 0 : m == 2 ? 1 : 2;
    int st = r->status;
    /* the classes by comparison (no division); a status outside 100..599,
       which the server never sends, counts as 5xx: the sums stay whole */
    unsigned status = (unsigned) (st - 200) < 100   ? 1
                      : (unsigned) (st - 100) < 100 ? 0
                      : (unsigned) (st - 300) < 100 ? 2
                      : (unsigned) (st - 400) < 100 ? 3
                                                    : 4;
    unsigned proto = r->head.version == 20;

    MK_METRICS_ADD(s->requests[proto][method][status], 1);
    MK_METRICS_ADD(s->bytes[proto][method][status], r->bytes_sent);
    if (r->first_byte_us) {
        mk_metrics_observe(&s->first_byte, r->first_byte_us - r->start_us);
    }
    mk_metrics_observe(&s->last_byte, now_us - r->start_us);
}

#endif
