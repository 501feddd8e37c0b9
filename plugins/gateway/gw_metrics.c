/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * gw_metrics.c: a gateway's metrics per backend (gw_job.h), declared
 * through the server's API (ABI 3.20) on the controlling thread, counted
 * per worker by the server.
 */
#include <stdio.h>

#include "gw_job.h"

static const char *const mk_gw_fail_names[MK_GW_FAILS] = {"connect", "timeout", "bad_gateway"};

void mk_gw_metrics_families(const struct mk_api *api, const char *gw, struct mk_gw_mfamilies *f)
{
    static const char *const by_backend[] = {"backend", NULL};
    static const char *const by_kind[] = {"backend", "kind", NULL};
    char name[96], help[256];

    *f = (struct mk_gw_mfamilies){-1, -1, -1};
    if (!MK_API_HAS(api, metric_family)) {
        return;
    }
    snprintf(name, sizeof(name), "monkey_%s_backend_requests_total", gw);
    snprintf(help, sizeof(help), "Requests sent to a %s backend, by backend.", gw);
    f->requests = api->metric_family(name, MK_METRIC_COUNTER, help, by_backend, NULL, 0);
    snprintf(name, sizeof(name), "monkey_%s_backend_failures_total", gw);
    snprintf(help, sizeof(help),
             "Failures of a %s backend, by kind: connect (it could not be reached or run), "
             "timeout (no answer within Timeout), bad_gateway (a broken or bad answer).",
             gw);
    f->failures = api->metric_family(name, MK_METRIC_COUNTER, help, by_kind, NULL, 0);
    snprintf(name, sizeof(name), "monkey_%s_backend_duration_seconds", gw);
    snprintf(help, sizeof(help),
             "The time of a request at a %s backend, from its start to the answer's end, by "
             "backend, in seconds.",
             gw);
    f->duration = api->metric_family(name, MK_METRIC_HISTOGRAM, help, by_backend, NULL, 0);
}

void mk_gw_metrics_series(const struct mk_api *api, const struct mk_gw_mfamilies *f,
                          const char *label, struct mk_gw_metrics *m)
{
    const char *v[] = {label};

    if (!MK_API_HAS(api, metric_series)) {
        *m = (struct mk_gw_metrics){-1, {-1, -1, -1}, -1};
        return;
    }
    m->requests = api->metric_series(f->requests, v);
    m->duration = api->metric_series(f->duration, v);
    for (unsigned k = 0; k < MK_GW_FAILS; k++) {
        const char *vk[] = {label, mk_gw_fail_names[k]};
        m->fail[k] = api->metric_series(f->failures, vk);
    }
}

bool mk_gw_metrics_figures(const struct mk_api *api, const struct mk_gw_metrics *m, unsigned kinds,
                           uint64_t *requests, uint64_t *failures)
{
    struct mk_metric_value v;

    *requests = *failures = 0;
    if (!MK_API_HAS(api, metric_read) || api->metric_read(m->requests, &v) != MK_OK) {
        return false;
    }
    *requests = v.value;
    for (unsigned k = 0; k < MK_GW_FAILS; k++) {
        if ((kinds & (1u << k)) && api->metric_read(m->fail[k], &v) == MK_OK) {
            *failures += v.value;
        }
    }
    return true;
}
