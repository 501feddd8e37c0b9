/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_metrics_plugin.c: unit tests of server/request/metrics_plugin.c, the
 * metrics plugins declare: the checks of a declaration, the same ids for
 * the same declaration, counts per worker and from other threads summed,
 * histogram buckets at their bounds, callback gauges, workers set up after
 * the declarations, the limit of series, -1 taken everywhere.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server/process/server.h"
#include "server/request/metrics.h"
#include "server/request/metrics_plugin.h"

#define N_WORKERS 2

static struct mk_pmetrics pm;
static struct mk_worker workers[N_WORKERS];

static const char *const by_backend[] = {"backend", NULL};

static void setup(void)
{
    memset(&pm, 0, sizeof(pm));
    memset(workers, 0, sizeof(workers));
    for (int i = 0; i < N_WORKERS; i++) {
        mk_pmetrics_worker_init(&pm, &workers[i].pmetrics);
    }
}

static void teardown(void)
{
    for (int i = 0; i < N_WORKERS; i++) {
        mk_pmetrics_cells_free(&workers[i].pmetrics);
    }
    mk_pmetrics_free(&pm);
}

static int family(const char *name, int kind, const char *const *labels)
{
    return mk_pmetrics_family(&pm, name, kind, "Help.", labels, NULL, 0);
}

static void test_declarations_checked(void **state)
{
    static const char *const le[] = {"le", NULL};
    static const char *const dunder[] = {"__x", NULL};
    static const char *const twice[] = {"a", "a", NULL};
    static const char *const many[] = {"a", "b", "c", "d", "e", NULL};
    static const uint64_t down[] = {10, 5};
    (void) state;
    setup();
    assert_int_equal(family("monkey_x_total", MK_METRIC_COUNTER, NULL), 0);
    assert_int_equal(family("monkey_y_seconds", MK_METRIC_HISTOGRAM, by_backend), 1);
    assert_int_equal(family("monkey_z", MK_METRIC_GAUGE, by_backend), 2);
    /* the same again: the same index; another kind or labels: refused */
    assert_int_equal(family("monkey_x_total", MK_METRIC_COUNTER, NULL), 0);
    assert_int_equal(family("monkey_z", MK_METRIC_COUNTER, by_backend), -1);
    assert_int_equal(family("monkey_z", MK_METRIC_GAUGE, NULL), -1);
    /* names */
    assert_int_equal(family("monkey_x", MK_METRIC_COUNTER, NULL), -1);       /* no _total */
    assert_int_equal(family("monkey_g_total", MK_METRIC_GAUGE, NULL), -1);   /* only counters */
    assert_int_equal(family("monkey_h", MK_METRIC_HISTOGRAM, NULL), -1);     /* no _seconds */
    assert_int_equal(family("9monkey_total", MK_METRIC_COUNTER, NULL), -1);  /* a digit first */
    assert_int_equal(family("monkey-x_total", MK_METRIC_COUNTER, NULL), -1); /* a dash */
    assert_int_equal(family("monkey_http_x_total", MK_METRIC_COUNTER, NULL), -1); /* the server's */
    assert_int_equal(family("process_x", MK_METRIC_GAUGE, NULL), -1);
    assert_int_equal(family("monkey_w", 7, NULL), -1);
    /* labels */
    assert_int_equal(family("monkey_l1", MK_METRIC_GAUGE, le), -1);
    assert_int_equal(family("monkey_l2", MK_METRIC_GAUGE, dunder), -1);
    assert_int_equal(family("monkey_l3", MK_METRIC_GAUGE, twice), -1);
    assert_int_equal(family("monkey_l4", MK_METRIC_GAUGE, many), -1);
    /* help and bounds */
    assert_int_equal(mk_pmetrics_family(&pm, "monkey_h1", MK_METRIC_GAUGE, "a\nb", NULL, NULL, 0),
                     -1);
    assert_int_equal(
        mk_pmetrics_family(&pm, "monkey_b_seconds", MK_METRIC_HISTOGRAM, "H.", NULL, down, 2), -1);
    assert_int_equal(mk_pmetrics_family(&pm, "monkey_c", MK_METRIC_GAUGE, "H.", NULL, down, 1), -1);
    /* series: a value per label, not too long */
    const char *v[] = {"127.0.0.1:9000"};
    char longer[MK_METRIC_LABEL_VALUE_MAX + 2];
    memset(longer, 'a', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    const char *lv[] = {longer};
    assert_int_equal(mk_pmetrics_series(&pm, workers, N_WORKERS, 1, NULL, NULL, NULL), -1);
    assert_int_equal(mk_pmetrics_series(&pm, workers, N_WORKERS, 1, lv, NULL, NULL), -1);
    assert_int_equal(mk_pmetrics_series(&pm, workers, N_WORKERS, 9, v, NULL, NULL), -1);
    assert_int_equal(mk_pmetrics_series(&pm, workers, N_WORKERS, -1, v, NULL, NULL), -1);
    int a = mk_pmetrics_series(&pm, workers, N_WORKERS, 1, v, NULL, NULL);
    assert_true(a >= 0);
    assert_int_equal(mk_pmetrics_series(&pm, workers, N_WORKERS, 1, v, NULL, NULL), a);
    /* a callback only for a gauge */
    assert_int_equal(
        mk_pmetrics_series(&pm, workers, N_WORKERS, 0, NULL, (mk_metric_read_cb) 1, NULL), -1);
    teardown();
}

static int64_t level_read(void *arg)
{
    return *(int64_t *) arg;
}

static void test_counts_summed(void **state)
{
    struct mk_metric_value v;
    struct mk_metric_info info;
    int64_t level = -3;
    (void) state;
    setup();
    int fc = family("monkey_req_total", MK_METRIC_COUNTER, by_backend);
    int fg = family("monkey_open", MK_METRIC_GAUGE, by_backend);
    const char *a[] = {"a"}, *b[] = {"b"};
    int ca = mk_pmetrics_series(&pm, workers, N_WORKERS, fc, a, NULL, NULL);
    int cb = mk_pmetrics_series(&pm, workers, N_WORKERS, fc, b, NULL, NULL);
    int ga = mk_pmetrics_series(&pm, workers, N_WORKERS, fg, a, NULL, NULL);
    int gl = mk_pmetrics_series(&pm, workers, N_WORKERS, fg, b, level_read, &level);
    mk_pmetrics_add_own(&pm, &workers[0].pmetrics, ca, 2);
    mk_pmetrics_add_own(&pm, &workers[1].pmetrics, ca, 3);
    mk_pmetrics_add(&pm, ca, 10); /* another thread's */
    mk_pmetrics_add_own(&pm, &workers[1].pmetrics, cb, 1);
    /* a gauge of deltas: up on one worker, down on another */
    mk_pmetrics_add_own(&pm, &workers[0].pmetrics, ga, 2);
    mk_pmetrics_add_own(&pm, &workers[1].pmetrics, ga, -1);
    /* nothing for -1, an unknown id, a callback gauge, observe on a counter */
    mk_pmetrics_add_own(&pm, &workers[0].pmetrics, -1, 5);
    mk_pmetrics_add_own(&pm, &workers[0].pmetrics, 99, 5);
    mk_pmetrics_add_own(&pm, &workers[0].pmetrics, gl, 5);
    mk_pmetrics_observe_own(&pm, &workers[0].pmetrics, ca, 5);
    assert_int_equal(mk_pmetrics_read(&pm, workers, N_WORKERS, ca, &v), MK_OK);
    assert_int_equal(v.value, 15);
    assert_string_equal(v.values[0], "a");
    assert_int_equal(mk_pmetrics_read(&pm, workers, N_WORKERS, cb, &v), MK_OK);
    assert_int_equal(v.value, 1);
    assert_int_equal(mk_pmetrics_read(&pm, workers, N_WORKERS, ga, &v), MK_OK);
    assert_int_equal((int64_t) v.value, 1);
    assert_int_equal(mk_pmetrics_read(&pm, workers, N_WORKERS, gl, &v), MK_OK);
    assert_int_equal((int64_t) v.value, -3);
    assert_int_equal(mk_pmetrics_read(&pm, workers, N_WORKERS, -1, &v), MK_ERR);
    assert_int_equal(mk_pmetrics_read(&pm, workers, N_WORKERS, 99, &v), MK_ERR);
    /* enumeration: families in order, their series in order */
    assert_int_equal(mk_pmetrics_info(&pm, (unsigned) fc, &info), MK_OK);
    assert_string_equal(info.name, "monkey_req_total");
    assert_int_equal(info.n_series, 2);
    assert_int_equal(info.n_labels, 1);
    assert_string_equal(info.labels[0], "backend");
    assert_int_equal(mk_pmetrics_value(&pm, workers, N_WORKERS, (unsigned) fc, 1, &v), MK_OK);
    assert_string_equal(v.values[0], "b");
    assert_int_equal(mk_pmetrics_value(&pm, workers, N_WORKERS, (unsigned) fc, 2, &v), MK_ERR);
    assert_int_equal(mk_pmetrics_info(&pm, 2, &info), MK_ERR);
    teardown();
}

static void test_histogram_buckets(void **state)
{
    static const uint64_t bounds[] = {100, 1000};
    struct mk_metric_value v;
    (void) state;
    setup();
    int f = mk_pmetrics_family(&pm, "monkey_t_seconds", MK_METRIC_HISTOGRAM, "H.", by_backend,
                               bounds, 2);
    int fd = family("monkey_d_seconds", MK_METRIC_HISTOGRAM, by_backend);
    const char *a[] = {"a"};
    int h = mk_pmetrics_series(&pm, workers, N_WORKERS, f, a, NULL, NULL);
    int hd = mk_pmetrics_series(&pm, workers, N_WORKERS, fd, a, NULL, NULL);
    const uint64_t us[] = {0, 100, 101, 1000, 1001, 5000000};
    for (unsigned i = 0; i < 6; i++) {
        mk_pmetrics_observe_own(&pm, &workers[i % N_WORKERS].pmetrics, h, us[i]);
    }
    mk_pmetrics_observe(&pm, h, 50);
    mk_pmetrics_add_own(&pm, &workers[0].pmetrics, h, 7); /* add on a histogram: nothing */
    assert_int_equal(mk_pmetrics_read(&pm, workers, N_WORKERS, h, &v), MK_OK);
    assert_int_equal(v.buckets[0], 3); /* 0, 100 (its bound included), 50 */
    assert_int_equal(v.buckets[1], 2); /* 101, 1000 */
    assert_int_equal(v.buckets[2], 2); /* past every bound */
    assert_int_equal(v.count, 7);
    assert_int_equal(v.sum_us, 0 + 100 + 101 + 1000 + 1001 + 5000000 + 50);
    /* the default bounds: MK_METRICS_BOUNDS_US */
    struct mk_metric_info info;
    assert_int_equal(mk_pmetrics_info(&pm, (unsigned) fd, &info), MK_OK);
    assert_int_equal(info.n_bounds, MK_METRICS_BUCKETS - 1);
    assert_int_equal(info.bounds_us[0], 5000);
    mk_pmetrics_observe_own(&pm, &workers[0].pmetrics, hd, 5001);
    assert_int_equal(mk_pmetrics_read(&pm, workers, N_WORKERS, hd, &v), MK_OK);
    assert_int_equal(v.buckets[1], 1);
    /* MetricsBuckets set before: a family of default bounds takes the server's; declared
       again (a reload) it is the same family */
    static const uint64_t three[] = {50000, 200000, 2000000};
    mk_metrics_set_bounds(three, 3);
    int fm = family("monkey_m_seconds", MK_METRIC_HISTOGRAM, by_backend);
    assert_true(fm >= 0);
    assert_int_equal(family("monkey_m_seconds", MK_METRIC_HISTOGRAM, by_backend), fm);
    assert_int_equal(mk_pmetrics_info(&pm, (unsigned) fm, &info), MK_OK);
    assert_int_equal(info.n_bounds, 3);
    assert_int_equal(info.bounds_us[0], 50000);
    assert_int_equal(info.bounds_us[2], 2000000);
    int hm = mk_pmetrics_series(&pm, workers, N_WORKERS, fm, a, NULL, NULL);
    mk_pmetrics_observe_own(&pm, &workers[0].pmetrics, hm, 300000);
    mk_pmetrics_observe_own(&pm, &workers[1].pmetrics, hm, 3000000);
    assert_int_equal(mk_pmetrics_read(&pm, workers, N_WORKERS, hm, &v), MK_OK);
    assert_int_equal(v.buckets[2], 1); /* 300 ms: (200 ms, 2 s] */
    assert_int_equal(v.buckets[3], 1); /* past the last bound */
    assert_int_equal(v.count, 2);
    static const uint64_t fixed[] = MK_METRICS_BOUNDS_US;
    mk_metrics_set_bounds(fixed, MK_METRICS_BUCKETS - 1); /* for the tests after this one */
    /* the family keeps the bounds it was declared with */
    assert_int_equal(mk_pmetrics_info(&pm, (unsigned) fm, &info), MK_OK);
    assert_int_equal(info.n_bounds, 3);
    teardown();
}

/* Series declared before the workers exist (plugin init) get their cells at the workers' setup;
   many series spread over pages of cells, up to the limit. */
static void test_cells_before_workers_and_limit(void **state)
{
    struct mk_metric_value v;
    char name[32];
    (void) state;
    memset(&pm, 0, sizeof(pm));
    memset(workers, 0, sizeof(workers));
    uint64_t bounds[MK_METRIC_BOUNDS_MAX];
    for (unsigned i = 0; i < MK_METRIC_BOUNDS_MAX; i++) {
        bounds[i] = 10 * (i + 1);
    }
    int f = mk_pmetrics_family(&pm, "monkey_n_seconds", MK_METRIC_HISTOGRAM, "H.", by_backend,
                               bounds, MK_METRIC_BOUNDS_MAX);
    int last = -1, n = 0;
    for (;;) {
        snprintf(name, sizeof(name), "b%d", n);
        const char *val[] = {name};
        int id = mk_pmetrics_series(&pm, NULL, 0, f, val, NULL, NULL);
        if (id < 0) {
            break;
        }
        last = id;
        n++;
    }
    /* 17 cells each (16 buckets and the sum), 30 on a page of 512 (none straddles two): the
       cells of 256 pages run out before the 8192 series */
    assert_int_equal(n, (MK_PMETRIC_CELL_PAGE / 17) * MK_PMETRIC_CELL_PAGES);
    for (int i = 0; i < N_WORKERS; i++) {
        mk_pmetrics_worker_init(&pm, &workers[i].pmetrics);
    }
    mk_pmetrics_observe_own(&pm, &workers[1].pmetrics, last, 1);
    mk_pmetrics_observe_own(&pm, &workers[0].pmetrics, 0, 1);
    assert_int_equal(mk_pmetrics_read(&pm, workers, N_WORKERS, last, &v), MK_OK);
    assert_int_equal(v.count, 1);
    assert_int_equal(mk_pmetrics_read(&pm, workers, N_WORKERS, 0, &v), MK_OK);
    assert_int_equal(v.count, 1);
    teardown();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_declarations_checked),
        cmocka_unit_test(test_counts_summed),
        cmocka_unit_test(test_histogram_buckets),
        cmocka_unit_test(test_cells_before_workers_and_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
