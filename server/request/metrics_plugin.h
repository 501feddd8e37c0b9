/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * metrics_plugin.h: the metrics plugins declare (api->metric_family and
 * what follows, ABI 3.20; MK_HAVE_METRICS): families, their series (label
 * values from the configuration) and each series' cells in every worker.
 *
 * A series has one cell (a counter, a gauge of deltas), none (a gauge read
 * by a callback), or the buckets of a histogram and their sum; its cells
 * never straddle a page. A metric id is the series' index: the series and
 * their cells only grow, while the server lives, so an id handed out stays
 * valid and its counts never go back.
 *
 * Ownership: the registry is the server's (struct mk_server), written by
 * the controlling thread only (declarations: plugin init, site_init,
 * reload_prepare), read by any thread: every record is complete before the
 * count that publishes it (release), records never move (pages of records
 * and of cells, pointers set once). Each worker's cells are its own,
 * written by its thread alone with relaxed stores; a thread that is no
 * worker adds atomically into the registry's shared cells. A sum at a
 * scrape reads each cell once.
 */
#ifndef MK_SERVER_REQUEST_METRICS_PLUGIN_H
#define MK_SERVER_REQUEST_METRICS_PLUGIN_H

#include <stdatomic.h>
#include <stdint.h>

#include <monkey/mk_plugin.h>

#define MK_PMETRIC_FAMILIES_MAX 256u
#define MK_PMETRIC_SERIES_PAGE 128u /* series records per page */
#define MK_PMETRIC_SERIES_PAGES 64u
#define MK_PMETRIC_SERIES_MAX (MK_PMETRIC_SERIES_PAGE * MK_PMETRIC_SERIES_PAGES)
#define MK_PMETRIC_CELL_PAGE 512u /* cells per page: 4 KiB */
#define MK_PMETRIC_CELL_PAGES 256u
#define MK_PMETRIC_NO_CELL UINT32_MAX /* a callback gauge's */

struct mk_worker;

/* One series: its family, its first cell, its label values or callback. */
struct mk_pmetric_series {
    uint32_t family;
    uint32_t cell;
    /* metric_add's cell: `cell` for a counter or a gauge of deltas, MK_PMETRIC_NO_CELL for a
       histogram or a callback (metric_add does nothing there) */
    uint32_t add_cell;
    /* metric_observe's bounds: the family's for a histogram, NULL otherwise (nothing done) */
    const uint64_t *bounds;
    unsigned n_bounds;
    char *values[MK_METRIC_LABELS_MAX];
    mk_metric_read_cb cb;
    void *arg;
};

/* One family: what was declared, its cells per series and its series' ids. */
struct mk_pmetric_family {
    struct mk_metric_info info; /* n_series is the published count below */
    char *name, *help, *labels[MK_METRIC_LABELS_MAX];
    unsigned cells; /* per series: 1, 0 (callback gauges only), n_bounds + 2 (histogram) */
    atomic_uint n_series;
    uint32_t *ids[MK_PMETRIC_SERIES_PAGES]; /* its series' ids, MK_PMETRIC_SERIES_PAGE per page */
};

/* A set of cells: a worker's own, or the registry's shared ones. */
struct mk_pmetric_cells {
    _Atomic(atomic_ullong *) pages[MK_PMETRIC_CELL_PAGES];
};

/* The registry of one server. Zeroed: empty. */
struct mk_pmetrics {
    _Atomic(struct mk_pmetric_family *) families[MK_PMETRIC_FAMILIES_MAX];
    atomic_uint n_families;
    _Atomic(struct mk_pmetric_series *) series[MK_PMETRIC_SERIES_PAGES];
    atomic_uint n_series;
    unsigned n_cells;              /* cells handed out (controlling thread) */
    struct mk_pmetric_cells other; /* counts from threads that are no worker (atomic adds) */
};

/*
 * Declarations (controlling thread): the family's index, the series' id,
 * or -1 after logging why. `workers` (n of them, NULL before they are set
 * up) get the pages a new series needs.
 */
int mk_pmetrics_family(struct mk_pmetrics *pm, const char *name, int kind, const char *help,
                       const char *const *labels, const uint64_t *bounds_us, unsigned n_bounds);
int mk_pmetrics_series(struct mk_pmetrics *pm, struct mk_worker *workers, int n, int family,
                       const char *const *values, mk_metric_read_cb cb, void *arg);
/* Count into id from a thread that is no worker (atomic adds into the shared cells). */
void mk_pmetrics_add(struct mk_pmetrics *pm, int id, int64_t n);
void mk_pmetrics_observe(struct mk_pmetrics *pm, int id, uint64_t us);

/* Series id, or NULL (-1, or not declared). Any thread. */
static inline const struct mk_pmetric_series *mk_pmetrics_get(const struct mk_pmetrics *pm, int id)
{
    if ((unsigned) id >= atomic_load_explicit(&pm->n_series, memory_order_acquire)) {
        return NULL; /* -1 too */
    }
    return &atomic_load_explicit(&pm->series[(unsigned) id / MK_PMETRIC_SERIES_PAGE],
                                 memory_order_relaxed)[(unsigned) id % MK_PMETRIC_SERIES_PAGE];
}

/* Cell i of c: its page exists for every series declared (made before the id is handed out). */
static inline atomic_ullong *mk_pmetrics_at_cell(const struct mk_pmetric_cells *c, uint32_t i)
{
    return &atomic_load_explicit(&c->pages[i / MK_PMETRIC_CELL_PAGE],
                                 memory_order_relaxed)[i % MK_PMETRIC_CELL_PAGE];
}

static inline void mk_pmetrics_bump_own(atomic_ullong *p, uint64_t n)
{
    atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* Count n into id from the worker whose cells are c: plain relaxed stores, its own. */
static inline void mk_pmetrics_add_own(const struct mk_pmetrics *pm, struct mk_pmetric_cells *c,
                                       int id, int64_t n)
{
    const struct mk_pmetric_series *s = mk_pmetrics_get(pm, id);

    if (s && s->add_cell != MK_PMETRIC_NO_CELL) {
        mk_pmetrics_bump_own(mk_pmetrics_at_cell(c, s->add_cell), (uint64_t) n);
    }
}

/* A duration of histogram id from the worker whose cells are c. */
static inline void mk_pmetrics_observe_own(const struct mk_pmetrics *pm, struct mk_pmetric_cells *c,
                                           int id, uint64_t us)
{
    const struct mk_pmetric_series *s = mk_pmetrics_get(pm, id);
    unsigned b = 0;

    if (!s || !s->bounds) {
        return;
    }
    while (b < s->n_bounds && us > s->bounds[b]) {
        b++;
    }
    atomic_ullong *p = mk_pmetrics_at_cell(c, s->cell);
    mk_pmetrics_bump_own(&p[b], 1);
    mk_pmetrics_bump_own(&p[s->n_bounds + 1], us);
}
/* Sums over the n workers (any thread): MK_OK, or MK_ERR (out zeroed). */
int mk_pmetrics_read(const struct mk_pmetrics *pm, const struct mk_worker *workers, int n, int id,
                     struct mk_metric_value *out);
int mk_pmetrics_info(const struct mk_pmetrics *pm, unsigned f, struct mk_metric_info *out);
int mk_pmetrics_value(const struct mk_pmetrics *pm, const struct mk_worker *workers, int n,
                      unsigned f, unsigned s, struct mk_metric_value *out);
/* A worker's cells for every series declared so far (its setup); freed at its teardown. */
void mk_pmetrics_worker_init(const struct mk_pmetrics *pm, struct mk_pmetric_cells *c);
void mk_pmetrics_cells_free(struct mk_pmetric_cells *c);
/* Free the registry (the server stops; the workers' cells are freed): empty again. */
void mk_pmetrics_free(struct mk_pmetrics *pm);

#endif
