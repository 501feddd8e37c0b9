/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * metrics.c: the request counters of each site, per worker (metrics.h):
 * the slots by label and the sums at a scrape (the count at a request's end
 * is metrics_count.h's, inline on the request path).
 */
#include <string.h>

#include "../../core/memory.h"
#include "../config/conf.h"
#include "../runtime/worker.h"
#include "metrics.h"

#define MK_METRICS_OVERFLOW "(overflow)"

_Static_assert(MK_CONF_METRICS_BOUNDS == MK_METRICS_BUCKETS - 1,
               "MetricsBuckets: a bucket a bound");

uint64_t mk_metrics_bounds[MK_METRICS_BUCKETS - 1] = MK_METRICS_BOUNDS_US;
unsigned mk_metrics_n_bounds = MK_METRICS_BUCKETS - 1;

void mk_metrics_set_bounds(const uint64_t *bounds, unsigned n)
{
    for (unsigned b = 0; b < MK_METRICS_BUCKETS - 1; b++) {
        mk_metrics_bounds[b] = b < n ? bounds[b] : UINT64_MAX; /* past the last: never passed */
    }
    mk_metrics_n_bounds = n;
}

/* The slot of label `name`, added when new; 0 when the table is full. */
static unsigned mk_metrics_slot_of(struct mk_metrics_labels *labels, const char *name)
{
    unsigned n = atomic_load_explicit(&labels->n, memory_order_relaxed);

    for (unsigned i = 1; i < n; i++) {
        if (strcmp(labels->names[i], name) == 0) {
            return i;
        }
    }
    if (n >= MK_METRICS_SLOTS_MAX) {
        return 0;
    }
    labels->names[n] = mk_strdup(name);
    return n;
}

/* Make sure every worker has the page of slot i (before any label reaches it). */
static void mk_metrics_page(struct mk_worker *workers, int n, unsigned slot)
{
    unsigned page = slot / MK_METRICS_PAGE;
    size_t size = sizeof(struct mk_metrics_slot) * MK_METRICS_PAGE;

    for (int w = 0; w < n; w++) {
        struct mk_metrics_worker *m = &workers[w].metrics;
        if (atomic_load_explicit(&m->pages[page], memory_order_relaxed)) {
            continue;
        }
        atomic_store_explicit(&m->pages[page], mk_calloc_aligned(64, size), memory_order_release);
    }
}

void mk_metrics_assign(struct mk_metrics_labels *labels, struct mk_worker *workers, int n,
                       struct mk_config *cfg)
{
    unsigned used = atomic_load_explicit(&labels->n, memory_order_relaxed);

    if (!used) {
        labels->names[0] = mk_strdup(MK_METRICS_OVERFLOW);
        mk_metrics_page(workers, n, 0);
        used = 1;
        atomic_store_explicit(&labels->n, used, memory_order_release);
    }
    for (size_t i = 0; i < cfg->n_sites; i++) {
        struct mk_site *s = cfg->sites[i];
        unsigned slot = mk_metrics_slot_of(labels, s->n_names ? s->names[0] : "");
        if (slot == used) {
            mk_metrics_page(workers, n, slot);
            atomic_store_explicit(&labels->n, ++used, memory_order_release);
        }
        s->metrics_slot = slot;
    }
}

/* Slot i of worker m, or NULL when it has none (yet). */
static const struct mk_metrics_slot *mk_metrics_at(const struct mk_metrics_worker *m, unsigned i)
{
    const struct mk_metrics_slot *p =
        atomic_load_explicit(&m->pages[i / MK_METRICS_PAGE], memory_order_acquire);
    return p ? &p[i % MK_METRICS_PAGE] : NULL;
}

static void mk_metrics_hist_add(struct mk_metrics_histogram *out, const struct mk_metrics_hist *h)
{
    for (unsigned b = 0; b < MK_METRICS_BUCKETS; b++) {
        out->buckets[b] += atomic_load_explicit(&h->buckets[b], memory_order_relaxed);
    }
    out->sum_us += atomic_load_explicit(&h->sum_us, memory_order_relaxed);
}

int mk_metrics_read(const struct mk_metrics_labels *labels, const struct mk_worker *workers, int n,
                    unsigned i, struct mk_site_metrics *out)
{
    memset(out, 0, sizeof(*out));
    if (i >= atomic_load_explicit(&labels->n, memory_order_acquire)) {
        return MK_ERR;
    }
    out->site = labels->names[i];
    for (int w = 0; w < n; w++) {
        const struct mk_metrics_slot *s = mk_metrics_at(&workers[w].metrics, i);
        if (!s) {
            continue;
        }
        for (unsigned p = 0; p < MK_METRICS_PROTOS; p++) {
            for (unsigned m = 0; m < MK_METRICS_METHODS; m++) {
                for (unsigned c = 0; c < MK_METRICS_STATUSES; c++) {
                    out->requests[p][m][c] +=
                        atomic_load_explicit(&s->requests[p][m][c], memory_order_relaxed);
                    out->bytes[p][m][c] +=
                        atomic_load_explicit(&s->bytes[p][m][c], memory_order_relaxed);
                }
            }
        }
        mk_metrics_hist_add(&out->first_byte, &s->first_byte);
        mk_metrics_hist_add(&out->last_byte, &s->last_byte);
    }
    return MK_OK;
}

void mk_metrics_worker_totals(const struct mk_metrics_worker *m, uint64_t *requests,
                              uint64_t *bytes)
{
    *requests = 0;
    *bytes = 0;
    for (unsigned page = 0; page < MK_METRICS_PAGES; page++) {
        const struct mk_metrics_slot *p =
            atomic_load_explicit(&m->pages[page], memory_order_acquire);
        if (!p) {
            break; /* pages are made in order */
        }
        for (unsigned i = 0; i < MK_METRICS_PAGE; i++) {
            const atomic_ullong *rq = &p[i].requests[0][0][0];
            const atomic_ullong *by = &p[i].bytes[0][0][0];
            for (unsigned k = 0; k < MK_METRICS_PROTOS * MK_METRICS_METHODS * MK_METRICS_STATUSES;
                 k++) {
                *requests += atomic_load_explicit(&rq[k], memory_order_relaxed);
                *bytes += atomic_load_explicit(&by[k], memory_order_relaxed);
            }
        }
    }
}

void mk_metrics_worker_init(struct mk_metrics_worker *m)
{
    size_t size = sizeof(struct mk_metrics_slot) * MK_METRICS_PAGE;

    atomic_store_explicit(&m->pages[0], mk_calloc_aligned(64, size), memory_order_release);
}

void mk_metrics_worker_free(struct mk_metrics_worker *m)
{
    for (unsigned page = 0; page < MK_METRICS_PAGES; page++) {
        mk_free(atomic_load_explicit(&m->pages[page], memory_order_relaxed));
        atomic_store_explicit(&m->pages[page], NULL, memory_order_relaxed);
    }
}

void mk_metrics_labels_free(struct mk_metrics_labels *labels)
{
    unsigned n = atomic_load_explicit(&labels->n, memory_order_relaxed);

    for (unsigned i = 0; i < n; i++) {
        mk_free(labels->names[i]);
        labels->names[i] = NULL;
    }
    atomic_store_explicit(&labels->n, 0, memory_order_relaxed);
}
