/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * metrics.c: the Prometheus endpoint, MetricsPath: the server's counters in
 * the text exposition format 0.0.4, or in OpenMetrics 1.0.0 when the
 * scraper's Accept names application/openmetrics-text. Every figure comes
 * from the API (the status document's own counters), summed at the scrape;
 * labels come from the configuration (the sites' names) and the fixed
 * classes, never from a request. Worker threads; nothing kept between calls.
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "control.h"

#define CONTROL_TEXT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define CONTROL_OM_TYPE "application/openmetrics-text; version=1.0.0; charset=utf-8"

static const char *const control_protos[MK_METRICS_PROTOS] = {"http/1.1", "h2"};
static const char *const control_methods[MK_METRICS_METHODS] = {"GET", "POST", "other"};
static const char *const control_codes[MK_METRICS_STATUSES] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
static const uint64_t control_default_bounds_us[MK_METRICS_BUCKETS - 1] = MK_METRICS_BOUNDS_US;

/* A document in one of the two formats. */
struct control_expo {
    struct mk_json *b;
    bool om; /* OpenMetrics: counter families without _total, # EOF */
};

/*
 * The HELP and TYPE lines of a family. `name` is the sample name; a
 * counter's ends in _total, which OpenMetrics leaves out of the family.
 */
static void control_family(struct control_expo *e, const char *name, const char *type,
                           const char *help)
{
    size_t len = strlen(name);

    if (e->om && strcmp(type, "counter") == 0 && len > 6 && !strcmp(name + len - 6, "_total")) {
        len -= 6;
    }
    control_buf_printf(e->b, "# HELP %.*s %s\n# TYPE %.*s %s\n", (int) len, name, help, (int) len,
                       name, type);
}

/* A label value, escaped as the format asks (backslash, quote, newline). */
static void control_label(struct mk_json *b, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"') {
            control_buf_add(b, "\\", 1);
            control_buf_add(b, v, 1);
        }
        else if (*v == '\n') {
            control_buf_str(b, "\\n");
        }
        else {
            control_buf_add(b, v, 1);
        }
    }
}

/* One sample without labels. */
static void control_sample(struct control_expo *e, const char *name, const char *type,
                           const char *help, uint64_t value)
{
    control_family(e, name, type, help);
    control_buf_printf(e->b, "%s %" PRIu64 "\n", name, value);
}

/* monkey_connections_in_state: the open connections by state (ABI 3.18). */
static void control_conn_states(struct control_expo *e)
{
    static const char *const names[MK_CSTATES] = {"reading",   "writing",  "idle",
                                                  "handshake", "takeover", "closing"};
    unsigned in[MK_CSTATES];

    if (!MK_API_HAS(control_api, conn_states) ||
        control_api->conn_states(in, MK_CSTATES) != MK_OK) {
        return;
    }
    control_family(e, "monkey_connections_in_state", "gauge",
                   "Connections open now, by state: reading a request, writing a response, idle "
                   "between requests, in the TLS handshake, taken over after a 101, closing.");
    for (unsigned k = 0; k < MK_CSTATES; k++) {
        control_buf_printf(e->b, "monkey_connections_in_state{state=\"%s\"} %u\n", names[k], in[k]);
    }
}

/*
 * monkey_ratelimit_*: the RateLimit tables of the configuration in force
 * (ABI 3.19); none without request rules. A reload starts them again.
 */
static void control_ratelimit(struct control_expo *e)
{
    struct mk_ratelimit_stats rl;

    if (!MK_API_HAS(control_api, ratelimit_stats) || control_api->ratelimit_stats(&rl) != MK_OK) {
        return;
    }
    control_sample(e, "monkey_ratelimit_limits", "gauge",
                   "Request rules with a RateLimit in the configuration in force.", rl.limits);
    control_sample(e, "monkey_ratelimit_keys", "gauge",
                   "Keys the RateLimit tables hold at most, summed over the rules.", rl.keys);
    control_sample(e, "monkey_ratelimit_evictions_total", "counter",
                   "Keys evicted from a RateLimit table while their bucket still held a limit "
                   "(raise keys=); a reload starts the count again.",
                   rl.evictions);
}

/* The tls plugin's handshake counters, from its stats hook (ABI 3.3). */
struct control_tls {
    uint64_t handshakes, resumptions, failures;
    /* its ACME counters (plugins/tls/README.md), when built with them */
    uint64_t acme_sites, acme_waiting, acme_failing, acme_obtained, acme_failures;
    uint64_t acme_expiry, acme_renewal;
};

static void control_tls_emit(void *arg, const char *name, uint64_t value)
{
    struct control_tls *t = arg;

    if (strcmp(name, "handshakes") == 0) {
        t->handshakes = value;
    }
    else if (strcmp(name, "resumptions") == 0) {
        t->resumptions = value;
    }
    else if (strcmp(name, "failures") == 0) {
        t->failures = value;
    }
    else if (strcmp(name, "acme_sites") == 0) {
        t->acme_sites = value;
    }
    else if (strcmp(name, "acme_sites_waiting") == 0) {
        t->acme_waiting = value;
    }
    else if (strcmp(name, "acme_sites_failing") == 0) {
        t->acme_failing = value;
    }
    else if (strcmp(name, "acme_obtained") == 0) {
        t->acme_obtained = value;
    }
    else if (strcmp(name, "acme_failures") == 0) {
        t->acme_failures = value;
    }
    else if (strcmp(name, "acme_first_expiry") == 0) {
        t->acme_expiry = value;
    }
    else if (strcmp(name, "acme_next_renewal") == 0) {
        t->acme_renewal = value;
    }
}

/* The tls plugin's ACME figures, when it has ACME sites. */
static void control_tls_acme(struct control_expo *e, const struct control_tls *t)
{
    if (!t->acme_sites) {
        return;
    }
    control_family(e, "monkey_tls_acme_sites", "gauge",
                   "Sites whose certificate comes from an ACME CA, by state: all of them, those "
                   "still on the temporary self-signed certificate, those whose last attempt "
                   "failed.");
    control_buf_printf(e->b,
                       "monkey_tls_acme_sites{state=\"all\"} %" PRIu64
                       "\nmonkey_tls_acme_sites{state=\"waiting\"} %" PRIu64
                       "\nmonkey_tls_acme_sites{state=\"failing\"} %" PRIu64 "\n",
                       t->acme_sites, t->acme_waiting, t->acme_failing);
    control_family(e, "monkey_tls_acme_certificates_total", "counter",
                   "Certificates obtained from the ACME CA by this server.");
    control_buf_printf(e->b, "monkey_tls_acme_certificates_total %" PRIu64 "\n", t->acme_obtained);
    control_family(e, "monkey_tls_acme_failures_total", "counter",
                   "ACME attempts that failed (each followed by a longer wait).");
    control_buf_printf(e->b, "monkey_tls_acme_failures_total %" PRIu64 "\n", t->acme_failures);
    control_family(e, "monkey_tls_acme_expiry_timestamp_seconds", "gauge",
                   "When the first ACME certificate in use expires (Unix time; 0: none yet).");
    control_buf_printf(e->b, "monkey_tls_acme_expiry_timestamp_seconds %" PRIu64 "\n",
                       t->acme_expiry);
    control_family(e, "monkey_tls_acme_next_attempt_timestamp_seconds", "gauge",
                   "When the ACME renewer works on a site next (Unix time).");
    control_buf_printf(e->b, "monkey_tls_acme_next_attempt_timestamp_seconds %" PRIu64 "\n",
                       t->acme_renewal);
}

/*
 * monkey_tls_handshakes_total by result, when the tls plugin is loaded: its
 * handshakes are full and resumed together, each read once by its hook, so
 * that the difference never goes below zero.
 */
static void control_tls_handshakes(struct control_expo *e)
{
    unsigned n = control_api->plugin_count();

    for (unsigned i = 0; i < n; i++) {
        const struct mk_plugin *p = control_api->plugin_at(i);
        if (!p || !p->stats || !p->name || strcmp(p->name, "tls") != 0) {
            continue;
        }
        struct control_tls t = {0};
        p->stats(control_tls_emit, &t);
        uint64_t full = t.handshakes >= t.resumptions ? t.handshakes - t.resumptions : 0;
        control_family(e, "monkey_tls_handshakes_total", "counter",
                       "TLS handshakes, by result: completed in full, completed resuming a "
                       "session, or failed (a TLS record came, the handshake never completed).");
        control_buf_printf(e->b,
                           "monkey_tls_handshakes_total{result=\"full\"} %" PRIu64
                           "\nmonkey_tls_handshakes_total{result=\"resumed\"} %" PRIu64
                           "\nmonkey_tls_handshakes_total{result=\"failed\"} %" PRIu64 "\n",
                           full, t.resumptions, t.failures);
        control_tls_acme(e, &t);
        return;
    }
}

static bool control_site_used(const struct mk_site_metrics *m)
{
    for (unsigned b = 0; b < MK_METRICS_BUCKETS; b++) {
        if (m->last_byte.buckets[b]) {
            return true;
        }
    }
    return false;
}

/* The requests or the bytes of every site, one sample per class seen. */
static void control_site_counters(struct control_expo *e, const struct mk_site_metrics *sites,
                                  unsigned n, bool bytes)
{
    const char *name = bytes ? "monkey_http_response_bytes_total" : "monkey_http_requests_total";

    control_family(e, name, "counter",
                   bytes ? "Response bytes sent (head and body), by site, method, status class and "
                           "protocol."
                         : "Requests completed, by site, method, status class and protocol.");
    for (unsigned i = 0; i < n; i++) {
        for (unsigned p = 0; p < MK_METRICS_PROTOS; p++) {
            for (unsigned m = 0; m < MK_METRICS_METHODS; m++) {
                for (unsigned c = 0; c < MK_METRICS_STATUSES; c++) {
                    if (!sites[i].requests[p][m][c]) {
                        continue;
                    }
                    control_buf_printf(e->b, "%s{site=\"", name);
                    control_label(e->b, sites[i].site);
                    control_buf_printf(
                        e->b, "\",method=\"%s\",code=\"%s\",protocol=\"%s\"} %" PRIu64 "\n",
                        control_methods[m], control_codes[c], control_protos[p],
                        bytes ? sites[i].bytes[p][m][c] : sites[i].requests[p][m][c]);
                }
            }
        }
    }
}

/* The histograms' bounds (MetricsBuckets, ABI 3.19; the fixed ones before): how many. */
static unsigned control_bounds(uint64_t *bounds)
{
    unsigned n = 0;

    if (MK_API_HAS(control_api, metrics_bounds)) {
        n = control_api->metrics_bounds(bounds, MK_METRICS_BUCKETS - 1);
    }
    if (n == 0 || n > MK_METRICS_BUCKETS - 1) {
        memcpy(bounds, control_default_bounds_us, sizeof(control_default_bounds_us));
        n = MK_METRICS_BUCKETS - 1;
    }
    return n;
}

/* A histogram of every site: cumulative buckets, the sum in seconds, the count. */
static void control_site_histogram(struct control_expo *e, const struct mk_site_metrics *sites,
                                   unsigned n, bool first, const char *name, const char *help)
{
    uint64_t bounds[MK_METRICS_BUCKETS - 1];
    unsigned n_bounds = control_bounds(bounds);

    control_family(e, name, "histogram", help);
    for (unsigned i = 0; i < n; i++) {
        const struct mk_metrics_histogram *h = first ? &sites[i].first_byte : &sites[i].last_byte;
        uint64_t total = 0;
        for (unsigned b = 0; b <= n_bounds; b++) {
            total += h->buckets[b];
            control_buf_printf(e->b, "%s_bucket{site=\"", name);
            control_label(e->b, sites[i].site);
            if (b < n_bounds) {
                control_buf_printf(e->b, "\",le=\"%g\"} %" PRIu64 "\n", (double) bounds[b] / 1e6,
                                   total);
            }
            else {
                control_buf_printf(e->b, "\",le=\"+Inf\"} %" PRIu64 "\n", total);
            }
        }
        control_buf_printf(e->b, "%s_sum{site=\"", name);
        control_label(e->b, sites[i].site);
        control_buf_printf(e->b, "\"} %" PRIu64 ".%06" PRIu64 "\n", h->sum_us / 1000000u,
                           h->sum_us % 1000000u);
        control_buf_printf(e->b, "%s_count{site=\"", name);
        control_label(e->b, sites[i].site);
        control_buf_printf(e->b, "\"} %" PRIu64 "\n", total);
    }
}

/*
 * The sites' counters, in the order of their metrics index; the overflow
 * slot (index 0) only once it counted something. NULL: none (the server
 * was built without metrics, or is not serving).
 */
static struct mk_site_metrics *control_sites(unsigned *n)
{
    struct mk_site_metrics *sites = NULL, one;
    unsigned cap = 0;

    *n = 0;
    if (!MK_API_HAS(control_api, site_metrics)) {
        return NULL;
    }
    for (unsigned i = 0; control_api->site_metrics(i, &one) == MK_OK; i++) {
        if (i == 0 && !control_site_used(&one)) {
            continue;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            struct mk_site_metrics *more = realloc(sites, cap * sizeof(*sites));
            if (!more) {
                free(sites);
                *n = 0;
                return NULL;
            }
            sites = more;
        }
        sites[(*n)++] = one;
    }
    return sites;
}

/* Open descriptors of the process: the entries of /proc/self/fd, its own excluded. */
static uint64_t control_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    uint64_t n = 0;

    if (!d) {
        return 0;
    }
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        n += de->d_name[0] != '.';
    }
    closedir(d);
    return n ? n - 1 : 0;
}

/* Resident memory in bytes (/proc/self/statm, its second field in pages). */
static uint64_t control_resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    unsigned long long size = 0, resident = 0;

    if (!f) {
        return 0;
    }
    if (fscanf(f, "%llu %llu", &size, &resident) != 2) {
        resident = 0;
    }
    fclose(f);
    return (uint64_t) resident * (uint64_t) sysconf(_SC_PAGESIZE);
}

/* The process' own figures, named as Prometheus' client libraries name them. */
static void control_process(struct control_expo *e, time_t started)
{
    struct rusage ru;
    struct rlimit rl;

    getrusage(RUSAGE_SELF, &ru);
    uint64_t cpu_us = (uint64_t) ru.ru_utime.tv_sec * 1000000u + (uint64_t) ru.ru_utime.tv_usec +
                      (uint64_t) ru.ru_stime.tv_sec * 1000000u + (uint64_t) ru.ru_stime.tv_usec;
    control_family(e, "process_cpu_seconds_total", "counter",
                   "User and system CPU time of the process, in seconds.");
    control_buf_printf(e->b, "process_cpu_seconds_total %" PRIu64 ".%06" PRIu64 "\n",
                       cpu_us / 1000000u, cpu_us % 1000000u);
    control_sample(e, "process_resident_memory_bytes", "gauge", "Resident memory, in bytes.",
                   control_resident_bytes());
    control_sample(e, "process_open_fds", "gauge", "Open file descriptors.", control_open_fds());
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        control_sample(e, "process_max_fds", "gauge", "The limit of open file descriptors.",
                       (uint64_t) rl.rlim_cur);
    }
    control_sample(e, "process_start_time_seconds", "gauge",
                   "When the server started, in seconds since the Unix epoch.", (uint64_t) started);
}

/* The label set of a plugin's series, "{a=\"x\",b=\"y\"" without the closing brace; "" without
 * labels. */
static void control_plugin_labels(struct mk_json *b, const struct mk_metric_info *f,
                                  const struct mk_metric_value *v)
{
    for (unsigned k = 0; k < f->n_labels; k++) {
        control_buf_printf(b, "%s%s=\"", k ? "," : "{", f->labels[k]);
        control_label(b, v->values[k]);
        control_buf_str(b, "\"");
    }
}

/* Microseconds as seconds, exact: "1.250000". */
static void control_seconds(struct mk_json *b, uint64_t us)
{
    control_buf_printf(b, "%" PRIu64 ".%06" PRIu64, us / 1000000u, us % 1000000u);
}

/* One series of a plugin's family f (ABI 3.20). */
static void control_plugin_series(struct control_expo *e, const struct mk_metric_info *f,
                                  const struct mk_metric_value *v)
{
    if (f->kind != MK_METRIC_HISTOGRAM) {
        control_buf_str(e->b, f->name);
        control_plugin_labels(e->b, f, v);
        if (f->kind == MK_METRIC_GAUGE) {
            control_buf_printf(e->b, "%s %" PRId64 "\n", f->n_labels ? "}" : "",
                               (int64_t) v->value);
        }
        else {
            control_buf_printf(e->b, "%s %" PRIu64 "\n", f->n_labels ? "}" : "", v->value);
        }
        return;
    }
    uint64_t total = 0;
    for (unsigned b = 0; b <= f->n_bounds; b++) {
        total += v->buckets[b];
        control_buf_printf(e->b, "%s_bucket", f->name);
        control_plugin_labels(e->b, f, v);
        control_buf_str(e->b, f->n_labels ? ",le=\"" : "{le=\"");
        if (b < f->n_bounds) {
            control_buf_printf(e->b, "%g", (double) f->bounds_us[b] / 1e6);
        }
        else {
            control_buf_str(e->b, "+Inf");
        }
        control_buf_printf(e->b, "\"} %" PRIu64 "\n", total);
    }
    control_buf_printf(e->b, "%s_sum", f->name);
    control_plugin_labels(e->b, f, v);
    control_buf_str(e->b, f->n_labels ? "} " : " ");
    control_seconds(e->b, v->sum_us);
    control_buf_printf(e->b, "\n%s_count", f->name);
    control_plugin_labels(e->b, f, v);
    control_buf_printf(e->b, "%s %" PRIu64 "\n", f->n_labels ? "}" : "", total);
}

/* The families the plugins declared (api->metric_family, ABI 3.20), those with a series. */
static void control_plugin_metrics(struct control_expo *e)
{
    static const char *const kinds[] = {"counter", "gauge", "histogram"};
    struct mk_metric_info f;
    struct mk_metric_value v;

    if (!MK_API_HAS(control_api, metric_family_info)) {
        return;
    }
    for (unsigned i = 0; control_api->metric_family_info(i, &f) == MK_OK; i++) {
        if (!f.n_series) {
            continue;
        }
        control_family(e, f.name, kinds[f.kind], f.help);
        for (unsigned s = 0; s < f.n_series && control_api->metric_value(i, s, &v) == MK_OK; s++) {
            control_plugin_series(e, &f, &v);
        }
    }
}

/* RFC 9113 7, by code; the last one stands for every code past them. */
static const char *const control_h2_errors[MK_METRICS_H2_ERRORS] = {"NO_ERROR",
                                                                    "PROTOCOL_ERROR",
                                                                    "INTERNAL_ERROR",
                                                                    "FLOW_CONTROL_ERROR",
                                                                    "SETTINGS_TIMEOUT",
                                                                    "STREAM_CLOSED",
                                                                    "FRAME_SIZE_ERROR",
                                                                    "REFUSED_STREAM",
                                                                    "CANCEL",
                                                                    "COMPRESSION_ERROR",
                                                                    "CONNECT_ERROR",
                                                                    "ENHANCE_YOUR_CALM",
                                                                    "INADEQUATE_SECURITY",
                                                                    "HTTP_1_1_REQUIRED",
                                                                    "other"};

/* The HTTP/2 resets both ways, and the GOAWAYs sent by code (NO_ERROR and those seen). */
static void control_h2_frames(struct control_expo *e, const struct mk_server_metrics *sm)
{
    control_family(e, "monkey_http2_resets_total", "counter",
                   "HTTP/2 RST_STREAM frames, sent and received.");
    control_buf_printf(e->b,
                       "monkey_http2_resets_total{direction=\"sent\"} %" PRIu64
                       "\nmonkey_http2_resets_total{direction=\"received\"} %" PRIu64 "\n",
                       sm->h2_resets_sent, sm->h2_resets_received);
    control_family(e, "monkey_http2_goaways_sent_total", "counter",
                   "HTTP/2 GOAWAY frames sent, by error code.");
    for (unsigned k = 0; k < MK_METRICS_H2_ERRORS; k++) {
        if (k == 0 || sm->h2_goaways_sent[k]) {
            control_buf_printf(e->b, "monkey_http2_goaways_sent_total{reason=\"%s\"} %" PRIu64 "\n",
                               control_h2_errors[k], sm->h2_goaways_sent[k]);
        }
    }
    uint64_t received[MK_METRICS_H2_ERRORS];
    if (!MK_API_HAS(control_api, h2_goaways_received) ||
        control_api->h2_goaways_received(received, MK_METRICS_H2_ERRORS) != MK_OK) {
        return;
    }
    control_family(e, "monkey_http2_goaways_received_total", "counter",
                   "HTTP/2 GOAWAY frames received from clients, by error code.");
    for (unsigned k = 0; k < MK_METRICS_H2_ERRORS; k++) {
        if (k == 0 || received[k]) {
            control_buf_printf(e->b,
                               "monkey_http2_goaways_received_total{reason=\"%s\"} %" PRIu64 "\n",
                               control_h2_errors[k], received[k]);
        }
    }
}

int control_doc_metrics(struct mk_json *b, bool om)
{
    struct control_expo e = {.b = b, .om = om};
    struct mk_server_stats st;
    struct mk_worker_stats ws;
    unsigned n;

    if (control_api->worker_stats(0, &ws) != MK_OK) {
        return MK_ERR; /* still starting */
    }
    control_api->stats(&st);
    if (!st.started) {
        st.started = time(NULL);
    }
    if (om) {
        control_buf_str(b, "# HELP monkey_build The version of the server and the parts it was "
                           "built with.\n# TYPE monkey_build info\n");
    }
    else {
        control_family(&e, "monkey_build_info", "gauge",
                       "The version of the server and the parts it was built with; always 1.");
    }
    control_buf_printf(b, "monkey_build_info{version=\"%s\",abi=\"%d.%d\",features=\"%s\"} 1\n",
                       MK_VERSION_STR, MK_PLUGIN_ABI_MAJOR, MK_PLUGIN_ABI_MINOR, CONTROL_FEATURES);
    control_sample(&e, "monkey_workers", "gauge", "Worker threads.", st.workers);
    control_sample(&e, "monkey_connections_open", "gauge", "Connections open now.", st.connections);
    control_conn_states(&e);
    control_ratelimit(&e);
    struct mk_h2_stats h2 = {0};
    if (MK_API_HAS(control_api, h2_stats)) {
        control_api->h2_stats(&h2);
    }
    control_sample(&e, "monkey_http2_connections_open", "gauge", "Connections speaking HTTP/2 now.",
                   h2.connections);
    control_sample(&e, "monkey_http2_streams_open", "gauge", "HTTP/2 streams open now.",
                   h2.streams);
    control_sample(&e, "monkey_http2_streams_opened_total", "counter", "HTTP/2 streams opened.",
                   h2.streams_total);
    struct mk_server_metrics sm;
    if (MK_API_HAS(control_api, server_metrics) && control_api->server_metrics(&sm) == MK_OK) {
        control_sample(&e, "monkey_connections_accepted_total", "counter",
                       "Connections taken in and served.", sm.accepted);
        control_sample(&e, "monkey_connections_refused_total", "counter",
                       "Connections refused over MaxConnections (answered 503, or closed).",
                       sm.refused);
        control_family(&e, "monkey_reloads_total", "counter",
                       "Reloads, by outcome: put in force, or refused.");
        control_buf_printf(b,
                           "monkey_reloads_total{outcome=\"done\"} %" PRIu64
                           "\nmonkey_reloads_total{outcome=\"refused\"} %" PRIu64 "\n",
                           sm.reloads, sm.reload_failures);
        control_h2_frames(&e, &sm);
    }
    control_tls_handshakes(&e);
    struct mk_supervisor_stats sv;
    if (MK_API_HAS(control_api, supervisor_stats) && control_api->supervisor_stats(&sv) == MK_OK) {
        control_sample(&e, "monkey_supervisor_restarts_total", "counter",
                       "Restarts of the server by its supervisor after a crash.", sv.restarts);
    }

    struct mk_site_metrics *sites = control_sites(&n);
    if (sites) {
        control_site_counters(&e, sites, n, false);
        control_site_counters(&e, sites, n, true);
        control_site_histogram(&e, sites, n, true, "monkey_http_time_to_first_byte_seconds",
                               "From the request's first byte to the start of its response, "
                               "by site, in seconds.");
        control_site_histogram(&e, sites, n, false, "monkey_http_request_duration_seconds",
                               "From the request's first byte to its end (the response's last "
                               "byte), by site, in seconds.");
        free(sites);
    }
    else {
        control_sample(&e, "monkey_http_requests_total", "counter", "Requests completed.",
                       st.requests);
        control_sample(&e, "monkey_http_response_bytes_total", "counter",
                       "Response bytes sent (head and body).", st.bytes_out);
    }
    control_plugin_metrics(&e);
    control_process(&e, st.started);
    if (om) {
        control_buf_str(b, "# EOF\n");
    }
    return MK_OK;
}

/* Does the Accept of r ask for OpenMetrics? */
bool control_wants_openmetrics(const struct mk_request *r)
{
    size_t len;
    const char *accept = control_api->header(r, "Accept", &len);
    static const char om[] = "application/openmetrics-text";

    if (!accept) {
        return false;
    }
    for (size_t i = 0; i + sizeof(om) - 1 <= len; i++) {
        if (strncasecmp(accept + i, om, sizeof(om) - 1) == 0) {
            return true;
        }
    }
    return false;
}

const char *control_metrics_type(bool om)
{
    return om ? CONTROL_OM_TYPE : CONTROL_TEXT_TYPE;
}
