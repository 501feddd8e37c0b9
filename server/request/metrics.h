/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * metrics.h: the request counters of each site, per worker (MK_HAVE_METRICS):
 * requests and response bytes by protocol, method class and status class,
 * and the histograms of the time to the first and to the last byte.
 *
 * A site's counters sit in a slot, found by the site's label (its first
 * ServerName) in the server's table of labels, which only grows: a site
 * reloaded under the same name keeps its slot and its counts, so the totals
 * never go back. Slot 0 takes the sites beyond MK_METRICS_SLOTS_MAX (and a
 * site of a configuration no assignment reached, in unit tests), under
 * the label "(overflow)". Labels come from the configuration only.
 *
 * Ownership: each worker has its own pages of slots (64-byte aligned, never
 * shared), written by its thread alone with relaxed atomic stores, read by
 * any thread with relaxed loads (api->site_metrics sums them). The table of
 * labels and the pages are made by the controlling thread, before the
 * configuration that needs them reaches the workers (mk_metrics_assign), and
 * freed with the server.
 */
#ifndef MK_SERVER_REQUEST_METRICS_H
#define MK_SERVER_REQUEST_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <monkey/mk_plugin.h>

struct mk_config;
struct mk_worker;

#define MK_METRICS_PAGE 16u   /* slots per page */
#define MK_METRICS_PAGES 256u /* pages per worker at most */
#define MK_METRICS_SLOTS_MAX                                                                       \
    (MK_METRICS_PAGE * MK_METRICS_PAGES) /* the labels, slot 0 included                            \
                                          */

struct mk_metrics_hist {
    atomic_ullong buckets[MK_METRICS_BUCKETS]; /* one count per bucket, not cumulative */
    atomic_ullong sum_us;
};

/* One site's counters on one worker. */
struct mk_metrics_slot {
    atomic_ullong requests[MK_METRICS_PROTOS][MK_METRICS_METHODS][MK_METRICS_STATUSES];
    atomic_ullong bytes[MK_METRICS_PROTOS][MK_METRICS_METHODS][MK_METRICS_STATUSES];
    struct mk_metrics_hist first_byte, last_byte;
} __attribute__((aligned(64)));

/* A worker's slots: pages[slot / MK_METRICS_PAGE][slot % MK_METRICS_PAGE]. */
struct mk_metrics_worker {
    _Atomic(struct mk_metrics_slot *) pages[MK_METRICS_PAGES];
};

/* The server's labels, by slot (controlling thread; read by any). */
struct mk_metrics_labels {
    char *names[MK_METRICS_SLOTS_MAX];
    atomic_uint n; /* slots in use, 1 (overflow) and up */
};

/*
 * Give every site of cfg its slot (site->metrics_slot), adding labels and,
 * for each of the n workers, the pages they need. Controlling thread, before
 * cfg goes to the workers.
 */
void mk_metrics_assign(struct mk_metrics_labels *labels, struct mk_worker *workers, int n,
                       struct mk_config *cfg);
/* Sum slot i over the n workers into out: MK_OK, MK_ERR past the last slot. Any thread. */
int mk_metrics_read(const struct mk_metrics_labels *labels, const struct mk_worker *workers, int n,
                    unsigned i, struct mk_site_metrics *out);
/* Requests and response bytes of every slot on one worker (the status totals). Any thread. */
void mk_metrics_worker_totals(const struct mk_metrics_worker *m, uint64_t *requests,
                              uint64_t *bytes);
/* Give a new worker its first page: slot 0 counts a site no assignment reached. */
void mk_metrics_worker_init(struct mk_metrics_worker *m);
/* Free one worker's pages; the labels. */
void mk_metrics_worker_free(struct mk_metrics_worker *m);
void mk_metrics_labels_free(struct mk_metrics_labels *labels);
/*
 * The upper bounds of the histograms' buckets, in microseconds: the first
 * mk_metrics_n_bounds of them (MetricsBuckets; MK_METRICS_BOUNDS_US until
 * set), the rest UINT64_MAX, so that a duration past the last bound falls
 * in bucket mk_metrics_n_bounds (the one without bound) and the buckets
 * after it stay 0. Set by the controlling thread before any worker runs
 * (mk_metrics_set_bounds, n at most MK_METRICS_BUCKETS - 1, ascending);
 * read by any thread after.
 */
extern uint64_t mk_metrics_bounds[MK_METRICS_BUCKETS - 1];
extern unsigned mk_metrics_n_bounds;
void mk_metrics_set_bounds(const uint64_t *bounds, unsigned n);

#endif
