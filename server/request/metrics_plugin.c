/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * metrics_plugin.c: the metrics plugins declare (metrics_plugin.h): the
 * checks of a declaration, the records and cells it adds, the counts and
 * their sums.
 */
#include <stdbool.h>
#include <string.h>

#include "../../core/log.h"
#include "../../core/memory.h"
#include "../runtime/worker.h"
#include "metrics.h"
#include "metrics_plugin.h"

/* Names of the server's own families (plugins/control/metrics.c): not a plugin's. */
static const char *const mk_pmetrics_reserved[] = {
    "process_",      "monkey_build",   "monkey_workers", "monkey_connections", "monkey_http_",
    "monkey_http2_", "monkey_reloads", "monkey_tls_",    "monkey_supervisor",  NULL};

static bool mk_pmetrics_name_ok(const char *s, bool colon)
{
    if (!s || !*s || (*s >= '0' && *s <= '9')) {
        return false;
    }
    for (; *s; s++) {
        bool ok = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                  (*s >= '0' && *s <= '9') || *s == '_' || (colon && *s == ':');
        if (!ok) {
            return false;
        }
    }
    return true;
}

static bool mk_pmetrics_ends(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n > t && strcmp(s + n - t, tail) == 0;
}

/* Why the declaration of family `name` is refused, or NULL. */
static const char *mk_pmetrics_check(const char *name, int kind, const char *help,
                                     const char *const *labels, const uint64_t *bounds_us,
                                     unsigned n_bounds)
{
    if (!mk_pmetrics_name_ok(name, true)) {
        return "not a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)";
    }
    for (unsigned i = 0; mk_pmetrics_reserved[i]; i++) {
        if (strncmp(name, mk_pmetrics_reserved[i], strlen(mk_pmetrics_reserved[i])) == 0) {
            return "a name of the server's own metrics";
        }
    }
    if (kind == MK_METRIC_COUNTER && !mk_pmetrics_ends(name, "_total")) {
        return "a counter's name ends in _total";
    }
    if (kind == MK_METRIC_HISTOGRAM && !mk_pmetrics_ends(name, "_seconds")) {
        return "a histogram's name ends in _seconds";
    }
    if (kind != MK_METRIC_COUNTER && mk_pmetrics_ends(name, "_total")) {
        return "only a counter's name ends in _total";
    }
    if (kind < MK_METRIC_COUNTER || kind > MK_METRIC_HISTOGRAM) {
        return "not a kind of metric";
    }
    if (!help || strchr(help, '\n') || strchr(help, '\\')) {
        return "no help text, or one with a newline or a backslash";
    }
    for (unsigned i = 0; labels && labels[i]; i++) {
        if (i == MK_METRIC_LABELS_MAX) {
            return "too many labels";
        }
        if (!mk_pmetrics_name_ok(labels[i], false) || strncmp(labels[i], "__", 2) == 0 ||
            strcmp(labels[i], "le") == 0) {
            return "not a label name ([a-zA-Z_][a-zA-Z0-9_]*, not le, not __*)";
        }
        for (unsigned j = 0; j < i; j++) {
            if (strcmp(labels[i], labels[j]) == 0) {
                return "a label named twice";
            }
        }
    }
    if (kind != MK_METRIC_HISTOGRAM && (bounds_us || n_bounds)) {
        return "bounds for a metric that is no histogram";
    }
    if (n_bounds > MK_METRIC_BOUNDS_MAX || (n_bounds && !bounds_us) || (!n_bounds && bounds_us)) {
        return "bad histogram bounds";
    }
    for (unsigned i = 1; i < n_bounds; i++) {
        if (bounds_us[i] <= bounds_us[i - 1]) {
            return "histogram bounds not increasing";
        }
    }
    return NULL;
}

static unsigned mk_pmetrics_count_labels(const char *const *labels)
{
    unsigned n = 0;
    while (labels && labels[n]) {
        n++;
    }
    return n;
}

/* The family of name, or NULL. */
static struct mk_pmetric_family *mk_pmetrics_find(const struct mk_pmetrics *pm, const char *name,
                                                  unsigned *index)
{
    unsigned n = atomic_load_explicit(&pm->n_families, memory_order_relaxed);

    for (unsigned i = 0; i < n; i++) {
        struct mk_pmetric_family *f = atomic_load_explicit(&pm->families[i], memory_order_relaxed);
        if (strcmp(f->name, name) == 0) {
            *index = i;
            return f;
        }
    }
    return NULL;
}

int mk_pmetrics_family(struct mk_pmetrics *pm, const char *name, int kind, const char *help,
                       const char *const *labels, const uint64_t *bounds_us, unsigned n_bounds)
{
    const char *why = mk_pmetrics_check(name, kind, help, labels, bounds_us, n_bounds);
    unsigned n_labels = mk_pmetrics_count_labels(labels), index;

    if (why) {
        mk_err("metrics: family '%s' refused: %s", name ? name : "(null)", why);
        return -1;
    }
    if (kind == MK_METRIC_HISTOGRAM && !n_bounds) {
        /* the server's: MetricsBuckets, fixed from the start (a reload keeps them, and so the
           same declaration again is the same family) */
        bounds_us = mk_metrics_bounds;
        n_bounds = mk_metrics_n_bounds;
    }
    struct mk_pmetric_family *f = mk_pmetrics_find(pm, name, &index);
    if (f) {
        bool same = f->info.kind == kind && f->info.n_labels == n_labels &&
                    f->info.n_bounds == n_bounds &&
                    (!n_bounds || !memcmp(f->info.bounds_us, bounds_us, n_bounds * 8));
        for (unsigned i = 0; same && i < n_labels; i++) {
            same = strcmp(f->labels[i], labels[i]) == 0;
        }
        if (!same) {
            mk_err("metrics: family '%s' declared again with another kind, labels or bounds", name);
            return -1;
        }
        return (int) index;
    }
    index = atomic_load_explicit(&pm->n_families, memory_order_relaxed);
    if (index == MK_PMETRIC_FAMILIES_MAX) {
        mk_err("metrics: family '%s' refused: more than %u families", name,
               MK_PMETRIC_FAMILIES_MAX);
        return -1;
    }
    f = mk_calloc(1, sizeof(*f));
    f->name = mk_strdup(name);
    f->help = mk_strdup(help);
    f->info.name = f->name;
    f->info.help = f->help;
    f->info.kind = kind;
    f->info.n_labels = n_labels;
    for (unsigned i = 0; i < n_labels; i++) {
        f->labels[i] = mk_strdup(labels[i]);
        f->info.labels[i] = f->labels[i];
    }
    f->info.n_bounds = n_bounds;
    if (n_bounds) {
        memcpy(f->info.bounds_us, bounds_us, n_bounds * sizeof(*bounds_us));
    }
    f->cells = kind == MK_METRIC_HISTOGRAM ? n_bounds + 2 : 1;
    atomic_store_explicit(&pm->families[index], f, memory_order_relaxed);
    atomic_store_explicit(&pm->n_families, index + 1, memory_order_release);
    return (int) index;
}

static struct mk_pmetric_series *mk_pmetrics_at(const struct mk_pmetrics *pm, unsigned id)
{
    return &atomic_load_explicit(&pm->series[id / MK_PMETRIC_SERIES_PAGE],
                                 memory_order_relaxed)[id % MK_PMETRIC_SERIES_PAGE];
}

static void mk_pmetrics_page(struct mk_pmetric_cells *c, unsigned page)
{
    if (!atomic_load_explicit(&c->pages[page], memory_order_relaxed)) {
        atomic_store_explicit(&c->pages[page],
                              mk_calloc_aligned(64, MK_PMETRIC_CELL_PAGE * sizeof(atomic_ullong)),
                              memory_order_release);
    }
}

/* Cells for a series of k: the first, on one page; pages made for every set of cells. */
static uint32_t mk_pmetrics_cells(struct mk_pmetrics *pm, struct mk_worker *workers, int n,
                                  unsigned k)
{
    unsigned first = pm->n_cells;

    if (first % MK_PMETRIC_CELL_PAGE + k > MK_PMETRIC_CELL_PAGE) {
        first += MK_PMETRIC_CELL_PAGE - first % MK_PMETRIC_CELL_PAGE;
    }
    if (first + k > MK_PMETRIC_CELL_PAGE * MK_PMETRIC_CELL_PAGES) {
        return MK_PMETRIC_NO_CELL;
    }
    unsigned page = first / MK_PMETRIC_CELL_PAGE;
    mk_pmetrics_page(&pm->other, page);
    for (int w = 0; workers && w < n; w++) {
        mk_pmetrics_page(&workers[w].pmetrics, page);
    }
    pm->n_cells = first + k;
    return first;
}

int mk_pmetrics_series(struct mk_pmetrics *pm, struct mk_worker *workers, int n, int family,
                       const char *const *values, mk_metric_read_cb cb, void *arg)
{
    unsigned nf = atomic_load_explicit(&pm->n_families, memory_order_relaxed);

    if (family < 0 || (unsigned) family >= nf) {
        return -1; /* its declaration was refused, and logged */
    }
    struct mk_pmetric_family *f = atomic_load_explicit(&pm->families[family], memory_order_relaxed);
    if (cb && f->info.kind != MK_METRIC_GAUGE) {
        mk_err("metrics: '%s' is no gauge: no callback", f->name);
        return -1;
    }
    for (unsigned i = 0; i < f->info.n_labels; i++) {
        if (!values || !values[i] || strlen(values[i]) > MK_METRIC_LABEL_VALUE_MAX) {
            mk_err("metrics: '%s': label %s missing or longer than %d bytes", f->name, f->labels[i],
                   MK_METRIC_LABEL_VALUE_MAX);
            return -1;
        }
    }
    unsigned ns = atomic_load_explicit(&f->n_series, memory_order_relaxed);
    for (unsigned i = 0; i < ns; i++) {
        uint32_t id = f->ids[i / MK_PMETRIC_SERIES_PAGE][i % MK_PMETRIC_SERIES_PAGE];
        const struct mk_pmetric_series *s = mk_pmetrics_at(pm, id);
        bool same = (s->cb != NULL) == (cb != NULL);
        for (unsigned k = 0; same && k < f->info.n_labels; k++) {
            same = strcmp(s->values[k], values[k]) == 0;
        }
        if (same) {
            return (int) id;
        }
    }
    unsigned id = atomic_load_explicit(&pm->n_series, memory_order_relaxed);
    uint32_t cell = cb ? MK_PMETRIC_NO_CELL : mk_pmetrics_cells(pm, workers, n, f->cells);
    if (id == MK_PMETRIC_SERIES_MAX || (!cb && cell == MK_PMETRIC_NO_CELL)) {
        mk_err("metrics: '%s': the server's limit of series is reached", f->name);
        return -1;
    }
    unsigned page = id / MK_PMETRIC_SERIES_PAGE;
    if (!atomic_load_explicit(&pm->series[page], memory_order_relaxed)) {
        atomic_store_explicit(&pm->series[page],
                              mk_calloc(MK_PMETRIC_SERIES_PAGE, sizeof(struct mk_pmetric_series)),
                              memory_order_relaxed);
    }
    struct mk_pmetric_series *s = mk_pmetrics_at(pm, id);
    s->family = (uint32_t) family;
    s->cell = cell;
    s->add_cell = f->info.kind == MK_METRIC_HISTOGRAM ? MK_PMETRIC_NO_CELL : cell;
    if (f->info.kind == MK_METRIC_HISTOGRAM) {
        s->bounds = f->info.bounds_us; /* the family's record never moves */
        s->n_bounds = f->info.n_bounds;
    }
    for (unsigned k = 0; k < f->info.n_labels; k++) {
        s->values[k] = mk_strdup(values[k]);
    }
    s->cb = cb;
    s->arg = arg;
    if (!f->ids[ns / MK_PMETRIC_SERIES_PAGE]) {
        f->ids[ns / MK_PMETRIC_SERIES_PAGE] = mk_calloc(MK_PMETRIC_SERIES_PAGE, sizeof(uint32_t));
    }
    f->ids[ns / MK_PMETRIC_SERIES_PAGE][ns % MK_PMETRIC_SERIES_PAGE] = id;
    atomic_store_explicit(&pm->n_series, id + 1, memory_order_release);
    atomic_store_explicit(&f->n_series, ns + 1, memory_order_release);
    return (int) id;
}

void mk_pmetrics_add(struct mk_pmetrics *pm, int id, int64_t n)
{
    const struct mk_pmetric_series *s = mk_pmetrics_get(pm, id);

    if (s && s->add_cell != MK_PMETRIC_NO_CELL) {
        atomic_fetch_add_explicit(mk_pmetrics_at_cell(&pm->other, s->add_cell), (uint64_t) n,
                                  memory_order_relaxed);
    }
}

void mk_pmetrics_observe(struct mk_pmetrics *pm, int id, uint64_t us)
{
    const struct mk_pmetric_series *s = mk_pmetrics_get(pm, id);
    unsigned b = 0;

    if (!s || !s->bounds) {
        return;
    }
    while (b < s->n_bounds && us > s->bounds[b]) {
        b++;
    }
    atomic_ullong *p = mk_pmetrics_at_cell(&pm->other, s->cell);
    atomic_fetch_add_explicit(&p[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p[s->n_bounds + 1], us, memory_order_relaxed);
}

/* Add the cells of series s of one set of cells into out. */
static void mk_pmetrics_sum(const struct mk_pmetric_family *f, const struct mk_pmetric_series *s,
                            const struct mk_pmetric_cells *c, struct mk_metric_value *out)
{
    const atomic_ullong *p =
        atomic_load_explicit(&c->pages[s->cell / MK_PMETRIC_CELL_PAGE], memory_order_acquire);

    if (!p) {
        return;
    }
    p += s->cell % MK_PMETRIC_CELL_PAGE;
    if (f->info.kind != MK_METRIC_HISTOGRAM) {
        out->value += atomic_load_explicit(p, memory_order_relaxed);
        return;
    }
    for (unsigned b = 0; b <= f->info.n_bounds; b++) {
        uint64_t v = atomic_load_explicit(&p[b], memory_order_relaxed);
        out->buckets[b] += v;
        out->count += v;
    }
    out->sum_us += atomic_load_explicit(&p[f->info.n_bounds + 1], memory_order_relaxed);
}

int mk_pmetrics_read(const struct mk_pmetrics *pm, const struct mk_worker *workers, int n, int id,
                     struct mk_metric_value *out)
{
    memset(out, 0, sizeof(*out));
    if (id < 0 || (unsigned) id >= atomic_load_explicit(&pm->n_series, memory_order_acquire)) {
        return MK_ERR;
    }
    const struct mk_pmetric_series *s = mk_pmetrics_at(pm, (unsigned) id);
    const struct mk_pmetric_family *f =
        atomic_load_explicit(&pm->families[s->family], memory_order_relaxed);
    for (unsigned k = 0; k < f->info.n_labels; k++) {
        out->values[k] = s->values[k];
    }
    if (s->cb) {
        out->value = (uint64_t) s->cb(s->arg);
        return MK_OK;
    }
    mk_pmetrics_sum(f, s, &pm->other, out);
    for (int w = 0; workers && w < n; w++) {
        mk_pmetrics_sum(f, s, &workers[w].pmetrics, out);
    }
    return MK_OK;
}

int mk_pmetrics_info(const struct mk_pmetrics *pm, unsigned f, struct mk_metric_info *out)
{
    memset(out, 0, sizeof(*out));
    if (f >= atomic_load_explicit(&pm->n_families, memory_order_acquire)) {
        return MK_ERR;
    }
    const struct mk_pmetric_family *fam =
        atomic_load_explicit(&pm->families[f], memory_order_relaxed);
    *out = fam->info;
    out->n_series = atomic_load_explicit(&fam->n_series, memory_order_acquire);
    return MK_OK;
}

int mk_pmetrics_value(const struct mk_pmetrics *pm, const struct mk_worker *workers, int n,
                      unsigned f, unsigned s, struct mk_metric_value *out)
{
    memset(out, 0, sizeof(*out));
    if (f >= atomic_load_explicit(&pm->n_families, memory_order_acquire)) {
        return MK_ERR;
    }
    const struct mk_pmetric_family *fam =
        atomic_load_explicit(&pm->families[f], memory_order_relaxed);
    if (s >= atomic_load_explicit(&fam->n_series, memory_order_acquire)) {
        return MK_ERR;
    }
    uint32_t id = fam->ids[s / MK_PMETRIC_SERIES_PAGE][s % MK_PMETRIC_SERIES_PAGE];
    return mk_pmetrics_read(pm, workers, n, (int) id, out);
}

void mk_pmetrics_worker_init(const struct mk_pmetrics *pm, struct mk_pmetric_cells *c)
{
    for (unsigned page = 0; page * MK_PMETRIC_CELL_PAGE < pm->n_cells; page++) {
        mk_pmetrics_page(c, page);
    }
}

void mk_pmetrics_cells_free(struct mk_pmetric_cells *c)
{
    for (unsigned page = 0; page < MK_PMETRIC_CELL_PAGES; page++) {
        mk_free(atomic_load_explicit(&c->pages[page], memory_order_relaxed));
        atomic_store_explicit(&c->pages[page], NULL, memory_order_relaxed);
    }
}

void mk_pmetrics_free(struct mk_pmetrics *pm)
{
    unsigned ns = atomic_load_explicit(&pm->n_series, memory_order_relaxed);
    unsigned nf = atomic_load_explicit(&pm->n_families, memory_order_relaxed);

    for (unsigned i = 0; i < ns; i++) {
        struct mk_pmetric_series *s = mk_pmetrics_at(pm, i);
        for (unsigned k = 0; k < MK_METRIC_LABELS_MAX; k++) {
            mk_free(s->values[k]);
        }
    }
    for (unsigned page = 0; page < MK_PMETRIC_SERIES_PAGES; page++) {
        mk_free(atomic_load_explicit(&pm->series[page], memory_order_relaxed));
    }
    for (unsigned i = 0; i < nf; i++) {
        struct mk_pmetric_family *f = atomic_load_explicit(&pm->families[i], memory_order_relaxed);
        mk_free(f->name);
        mk_free(f->help);
        for (unsigned k = 0; k < MK_METRIC_LABELS_MAX; k++) {
            mk_free(f->labels[k]);
        }
        for (unsigned page = 0; page < MK_PMETRIC_SERIES_PAGES; page++) {
            mk_free(f->ids[page]);
        }
        mk_free(f);
    }
    mk_pmetrics_cells_free(&pm->other);
    memset(pm, 0, sizeof(*pm));
}
