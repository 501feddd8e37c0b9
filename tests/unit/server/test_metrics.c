/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_metrics.c: unit tests of server/request/metrics.c and the count of
 * metrics_count.h: slots by label across reloads, the overflow slot, the
 * classes a request counts under, the histograms' buckets at their bounds,
 * the sums over workers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server/process/server.h"
#include "server/request/metrics_count.h"

#define N_WORKERS 2

static struct mk_metrics_labels labels;
static struct mk_worker workers[N_WORKERS];

static void setup_workers(void)
{
    memset(&labels, 0, sizeof(labels));
    memset(workers, 0, sizeof(workers));
    for (int i = 0; i < N_WORKERS; i++) {
        mk_metrics_worker_init(&workers[i].metrics);
    }
}

static void teardown_workers(void)
{
    for (int i = 0; i < N_WORKERS; i++) {
        mk_metrics_worker_free(&workers[i].metrics);
    }
    mk_metrics_labels_free(&labels);
}

/* A configuration of n sites, the i-th named names[i] (NULL: no ServerName). */
struct fake_cfg {
    struct mk_config cfg;
    struct mk_site *sites[8];
    struct mk_site site[8];
    char *name[8];
};

static void fake_cfg(struct fake_cfg *f, const char *const *names, size_t n)
{
    memset(f, 0, sizeof(*f));
    for (size_t i = 0; i < n; i++) {
        f->sites[i] = &f->site[i];
        f->name[i] = (char *) names[i];
        f->site[i].names = names[i] ? &f->name[i] : NULL;
        f->site[i].n_names = names[i] ? 1 : 0;
    }
    f->cfg.sites = f->sites;
    f->cfg.n_sites = n;
}

static void test_slots_follow_labels_across_reloads(void **state)
{
    static struct fake_cfg a, b;
    static const char *const first[] = {"a.test", "b.test", NULL};
    static const char *const second[] = {"c.test", "b.test", "a.test"};
    struct mk_site_metrics m;

    (void) state;
    setup_workers();
    fake_cfg(&a, first, 3);
    mk_metrics_assign(&labels, workers, N_WORKERS, &a.cfg);
    assert_int_equal(a.site[0].metrics_slot, 1);
    assert_int_equal(a.site[1].metrics_slot, 2);
    assert_int_equal(a.site[2].metrics_slot, 3);
    /* A reload: the same names keep their slots whatever their order, a new one comes last. */
    fake_cfg(&b, second, 3);
    mk_metrics_assign(&labels, workers, N_WORKERS, &b.cfg);
    assert_int_equal(b.site[0].metrics_slot, 4);
    assert_int_equal(b.site[1].metrics_slot, 2);
    assert_int_equal(b.site[2].metrics_slot, 1);
    assert_int_equal(mk_metrics_read(&labels, workers, N_WORKERS, 0, &m), MK_OK);
    assert_string_equal(m.site, "(overflow)");
    assert_int_equal(mk_metrics_read(&labels, workers, N_WORKERS, 3, &m), MK_OK);
    assert_string_equal(m.site, "");
    assert_int_equal(mk_metrics_read(&labels, workers, N_WORKERS, 4, &m), MK_OK);
    assert_string_equal(m.site, "c.test");
    assert_int_equal(mk_metrics_read(&labels, workers, N_WORKERS, 5, &m), MK_ERR);
    teardown_workers();
}

static void count(int worker, struct mk_site *site, int version, int method, int status,
                  uint64_t bytes, uint64_t first_us, uint64_t last_us)
{
    static struct mk_request r;

    memset(&r, 0, sizeof(r));
    r.site = site;
    r.head.version = version;
    r.head.method = method;
    r.status = status;
    r.bytes_sent = bytes;
    r.start_us = 1000000;
    r.first_byte_us = first_us ? r.start_us + first_us : 0;
    mk_metrics_count(&workers[worker], &r, r.start_us + last_us);
}

static void test_classes_and_sums_over_workers(void **state)
{
    static struct fake_cfg a;
    static const char *const names[] = {"a.test"};
    struct mk_site_metrics m;
    struct mk_site *s = &a.site[0];

    (void) state;
    setup_workers();
    fake_cfg(&a, names, 1);
    mk_metrics_assign(&labels, workers, N_WORKERS, &a.cfg);
    count(0, s, 11, MK_METHOD_GET, 200, 100, 1, 2);
    count(1, s, 11, MK_METHOD_HEAD, 204, 50, 1, 2);
    count(0, s, 20, MK_METHOD_POST, 404, 10, 1, 2);
    count(1, s, 10, MK_METHOD_DELETE, 503, 7, 1, 2);
    count(0, s, 11, MK_METHOD_UNKNOWN, 101, 3, 1, 2);
    count(0, s, 11, MK_METHOD_GET, 302, 1, 1, 2);
    count(1, s, 11, MK_METHOD_GET, 0, 1, 0, 2); /* no status the server sends: 5xx */
    assert_int_equal(mk_metrics_read(&labels, workers, N_WORKERS, 1, &m), MK_OK);
    assert_int_equal(m.requests[0][0][1], 2); /* HTTP/1.x GET and HEAD 2xx, both workers */
    assert_int_equal(m.bytes[0][0][1], 150);
    assert_int_equal(m.requests[1][1][3], 1); /* h2 POST 4xx */
    assert_int_equal(m.requests[0][2][4], 1); /* DELETE 5xx */
    assert_int_equal(m.requests[0][2][0], 1); /* an unknown method, 1xx */
    assert_int_equal(m.requests[0][0][2], 1);
    assert_int_equal(m.requests[0][0][4], 1);
    uint64_t requests, bytes, all = 0;
    for (int i = 0; i < N_WORKERS; i++) {
        mk_metrics_worker_totals(&workers[i].metrics, &requests, &bytes);
        all += requests;
    }
    assert_int_equal(all, 7);
    /* The one without a response counts in the duration only. */
    assert_int_equal(m.first_byte.buckets[0], 6);
    assert_int_equal(m.last_byte.buckets[0], 7);
    assert_int_equal(m.last_byte.sum_us, 14);
    teardown_workers();
}

static void test_buckets_at_their_bounds(void **state)
{
    static struct fake_cfg a;
    static const char *const names[] = {"a.test"};
    static const uint64_t bounds[] = MK_METRICS_BOUNDS_US;
    struct mk_site_metrics m;

    (void) state;
    setup_workers();
    fake_cfg(&a, names, 1);
    mk_metrics_assign(&labels, workers, N_WORKERS, &a.cfg);
    for (unsigned b = 0; b < MK_METRICS_BUCKETS - 1; b++) {
        count(0, &a.site[0], 11, MK_METHOD_GET, 200, 0, bounds[b], bounds[b] + 1);
    }
    count(0, &a.site[0], 11, MK_METHOD_GET, 200, 0, 0, 3600u * 1000000u);
    assert_int_equal(mk_metrics_read(&labels, workers, N_WORKERS, 1, &m), MK_OK);
    for (unsigned b = 0; b < MK_METRICS_BUCKETS - 1; b++) {
        assert_int_equal(m.first_byte.buckets[b], 1); /* a bound is in its own bucket */
        assert_int_equal(m.last_byte.buckets[b + 1], b + 1 < MK_METRICS_BUCKETS - 1 ? 1 : 2);
    }
    assert_int_equal(m.last_byte.buckets[0], 0);
    teardown_workers();
}

/* MetricsBuckets: fewer bounds; a duration past the last is in the bucket after it. */
static void test_configured_bounds(void **state)
{
    static struct fake_cfg a;
    static const char *const names[] = {"a.test"};
    static const uint64_t fixed[] = MK_METRICS_BOUNDS_US;
    static const uint64_t three[] = {100000, 300000, 2000000};
    struct mk_site_metrics m;

    (void) state;
    setup_workers();
    mk_metrics_set_bounds(three, 3);
    assert_int_equal(mk_metrics_n_bounds, 3);
    fake_cfg(&a, names, 1);
    mk_metrics_assign(&labels, workers, N_WORKERS, &a.cfg);
    count(0, &a.site[0], 11, MK_METHOD_GET, 200, 0, 100000, 100001);            /* bucket 0, 1 */
    count(1, &a.site[0], 11, MK_METHOD_GET, 200, 0, 300000, 300000);            /* 1, 1 */
    count(0, &a.site[0], 11, MK_METHOD_GET, 200, 0, 2000001, 3600u * 1000000u); /* 3, 3 */
    mk_metrics_set_bounds(fixed, MK_METRICS_BUCKETS - 1); /* for the tests after this one */
    assert_int_equal(mk_metrics_read(&labels, workers, N_WORKERS, 1, &m), MK_OK);
    assert_int_equal(m.first_byte.buckets[0], 1);
    assert_int_equal(m.first_byte.buckets[1], 1);
    assert_int_equal(m.first_byte.buckets[2], 0);
    assert_int_equal(m.first_byte.buckets[3], 1);
    assert_int_equal(m.last_byte.buckets[0], 0);
    assert_int_equal(m.last_byte.buckets[1], 2);
    assert_int_equal(m.last_byte.buckets[3], 1);
    for (unsigned b = 4; b < MK_METRICS_BUCKETS; b++) {
        assert_int_equal(m.first_byte.buckets[b] + m.last_byte.buckets[b], 0);
    }
    teardown_workers();
}

static void test_overflow_slot(void **state)
{
    static struct fake_cfg f;
    static char names[MK_METRICS_SLOTS_MAX + 8][16];
    const char *one[1];
    struct mk_site_metrics m;

    (void) state;
    setup_workers();
    /* Every slot taken, one configuration at a time (a reload each). */
    for (unsigned i = 0; i < MK_METRICS_SLOTS_MAX + 2; i++) {
        snprintf(names[i], sizeof(names[i]), "s%u.test", i);
        one[0] = names[i];
        fake_cfg(&f, one, 1);
        mk_metrics_assign(&labels, workers, N_WORKERS, &f.cfg);
        assert_int_equal(f.site[0].metrics_slot, i + 1 < MK_METRICS_SLOTS_MAX ? i + 1 : 0);
    }
    count(1, &f.site[0], 11, MK_METHOD_GET, 200, 9, 1, 1);
    assert_int_equal(mk_metrics_read(&labels, workers, N_WORKERS, 0, &m), MK_OK);
    assert_string_equal(m.site, "(overflow)");
    assert_int_equal(m.requests[0][0][1], 1);
    assert_int_equal(mk_metrics_read(&labels, workers, N_WORKERS, MK_METRICS_SLOTS_MAX - 1, &m),
                     MK_OK);
    assert_int_equal(mk_metrics_read(&labels, workers, N_WORKERS, MK_METRICS_SLOTS_MAX, &m),
                     MK_ERR);
    teardown_workers();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slots_follow_labels_across_reloads),
        cmocka_unit_test(test_classes_and_sums_over_workers),
        cmocka_unit_test(test_buckets_at_their_bounds),
        cmocka_unit_test(test_configured_bounds),
        cmocka_unit_test(test_overflow_slot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
