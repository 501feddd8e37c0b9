/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * report.c: what mk-watch reads from the load tool and what it writes.
 *
 * mk_watch_load_scan() recognises the request count and rate that wrk, ab
 * and h2load print; it is pure (no I/O, no allocation). The writers stream
 * samples as CSV and JSON while the run goes on, so a run cut short still
 * leaves its samples behind, and sum the run up in text and in JSON.
 * Numbers are written in the C locale; JSON has null where a value is not
 * known, never NaN.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "watch.h"

/* Longest line of load output that is looked at; the summary lines are short. */
#define MK_WATCH_LINE_MAX 512

/* text past prefix if text starts with it, NULL otherwise. */
static const char *mk_watch_after(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(text, prefix, n) == 0 ? text + n : NULL;
}

/* An unsigned count at p (blanks first); false if there is none. */
static bool mk_watch_count(const char *p, uint64_t *out)
{
    char *end;

    while (*p == ' ' || *p == '\t') {
        p++;
    }
    if (!isdigit((unsigned char) *p)) {
        return false;
    }
    errno = 0;
    *out = strtoull(p, &end, 10);
    return errno == 0 && end != p;
}

/* A non-negative rate at p (blanks first); false if there is none. */
static bool mk_watch_rate(const char *p, double *out)
{
    char *end;

    while (*p == ' ' || *p == '\t') {
        p++;
    }
    if (!isdigit((unsigned char) *p)) {
        return false;
    }
    *out = strtod(p, &end);
    return end != p && isfinite(*out);
}

static void mk_watch_set_requests(struct mk_watch_load *load, const char *tool, uint64_t n)
{
    load->tool = tool;
    load->requests = n;
    load->have_requests = true;
}

static void mk_watch_set_rps(struct mk_watch_load *load, double rps)
{
    load->rps = rps;
    load->have_rps = true;
}

void mk_watch_load_scan(struct mk_watch_load *load, const char *line, size_t len)
{
    char buf[MK_WATCH_LINE_MAX];
    const char *s = buf, *p;
    uint64_t total, started, done, ok;
    double rps;
    int end = -1;

    if (len >= sizeof(buf)) {
        len = sizeof(buf) - 1;
    }
    memcpy(buf, line, len);
    buf[len] = '\0';
    while (*s == ' ' || *s == '\t') {
        s++;
    }

    /* wrk: "  12345 requests in 10.00s, 1.23MB read" and "Requests/sec:  1234.56" */
    if (isdigit((unsigned char) *s) && sscanf(s, "%" SCNu64 " requests in %n", &total, &end) == 1 &&
        end > 0) {
        mk_watch_set_requests(load, "wrk", total);
        return;
    }
    if ((p = mk_watch_after(s, "Requests/sec:")) != NULL && mk_watch_rate(p, &rps)) {
        mk_watch_set_rps(load, rps);
        return;
    }
    /* ab: "Complete requests:      1000" and "Requests per second:    1234.56 [#/sec] (mean)" */
    if ((p = mk_watch_after(s, "Complete requests:")) != NULL && mk_watch_count(p, &total)) {
        mk_watch_set_requests(load, "ab", total);
        return;
    }
    if ((p = mk_watch_after(s, "Requests per second:")) != NULL && mk_watch_rate(p, &rps)) {
        mk_watch_set_rps(load, rps);
        return;
    }
    /*
     * h2load: "requests: 1000 total, 1000 started, 1000 done, 998 succeeded, 2 failed, ..."
     * counts the succeeded ones (a response came back, like wrk's count), and
     * "finished in 1.23s, 812.34 req/s, 1.20MB/s".
     */
    if (sscanf(s,
               "requests: %" SCNu64 " total, %" SCNu64 " started, %" SCNu64 " done, %" SCNu64
               " succeeded",
               &total, &started, &done, &ok) == 4) {
        mk_watch_set_requests(load, "h2load", ok);
        return;
    }
    if (sscanf(s, "finished in %*[^,], %lf req/s", &rps) == 1 && isfinite(rps) && rps >= 0) {
        mk_watch_set_rps(load, rps);
    }
}

/* A JSON string, escaped. */
static void mk_watch_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *) s; *p != '\0'; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        default:
            if (*p < 0x20) {
                fprintf(f, "\\u%04x", *p);
            }
            else {
                fputc(*p, f);
            }
        }
    }
    fputc('"', f);
}

/* A JSON number with the given decimals, or null if it is not finite. */
static void mk_watch_json_num(FILE *f, double v, int decimals)
{
    if (!isfinite(v)) {
        fputs("null", f);
        return;
    }
    fprintf(f, "%.*f", decimals, v);
}

void mk_watch_out_begin(struct mk_watch_out *out, unsigned interval_ms)
{
    if (out->csv != NULL) {
        fputs("time_s,processes,threads,fds,rss_kb,pss_kb,cpu_user_s,cpu_system_s,"
              "ctx_voluntary,ctx_involuntary\n",
              out->csv);
    }
    if (out->json != NULL) {
        fprintf(out->json, "{\"tool\": \"mk-watch\", \"interval_ms\": %u, \"samples\": [",
                interval_ms);
    }
    out->json_rows = 0;
}

void mk_watch_out_sample(struct mk_watch_out *out, const struct mk_watch_sample *s)
{
    if (out->csv != NULL) {
        fprintf(out->csv,
                "%.3f,%u,%u,%u,%" PRIu64 ",%" PRIu64 ",%.2f,%.2f,%" PRIu64 ",%" PRIu64 "\n", s->t,
                s->processes, s->threads, s->fds, s->rss_kb, s->pss_kb, s->cpu_user_s,
                s->cpu_system_s, s->ctx_voluntary, s->ctx_involuntary);
    }
    if (out->json != NULL) {
        fprintf(out->json,
                "%s\n  {\"t\": %.3f, \"processes\": %u, \"threads\": %u, \"fds\": %u, "
                "\"rss_kb\": %" PRIu64 ", \"pss_kb\": %" PRIu64 ", \"cpu_user_s\": %.2f, "
                "\"cpu_system_s\": %.2f, \"ctx_voluntary\": %" PRIu64
                ", \"ctx_involuntary\": %" PRIu64 "}",
                out->json_rows ? "," : "", s->t, s->processes, s->threads, s->fds, s->rss_kb,
                s->pss_kb, s->cpu_user_s, s->cpu_system_s, s->ctx_voluntary, s->ctx_involuntary);
        out->json_rows++;
    }
}

void mk_watch_out_end(struct mk_watch_out *out)
{
    if (out->json != NULL) {
        fputs(out->json_rows ? "\n]}\n" : "]}\n", out->json);
    }
}

static void mk_watch_peak(struct mk_watch_sample *peak, const struct mk_watch_sample *s)
{
    peak->processes = s->processes > peak->processes ? s->processes : peak->processes;
    peak->threads = s->threads > peak->threads ? s->threads : peak->threads;
    peak->fds = s->fds > peak->fds ? s->fds : peak->fds;
    peak->rss_kb = s->rss_kb > peak->rss_kb ? s->rss_kb : peak->rss_kb;
    peak->pss_kb = s->pss_kb > peak->pss_kb ? s->pss_kb : peak->pss_kb;
}

void mk_watch_summary_add(struct mk_watch_summary *sum, const struct mk_watch_sample *s)
{
    if (sum->samples == 0) {
        sum->first = *s;
        sum->peak = *s;
    }
    mk_watch_peak(&sum->peak, s);
    sum->last = *s;
    sum->rss_sum_kb += (double) s->rss_kb;
    sum->pss_sum_kb += (double) s->pss_kb;
    sum->samples++;
}

/* The figures derived from the samples; NAN where not known. */
struct mk_watch_figures {
    double duration_s;
    double user_s;
    double system_s;
    double rss_avg_kb;
    double pss_avg_kb;
    bool have_requests;
    uint64_t requests;
    const char *requests_source;
    double rps;
    double us_per_request;
    double cpu_percent;
};

static void mk_watch_figures(const struct mk_watch_summary *sum, struct mk_watch_figures *fig)
{
    double n = (double) sum->samples;

    memset(fig, 0, sizeof(*fig));
    fig->rss_avg_kb = fig->pss_avg_kb = NAN;
    fig->rps = fig->us_per_request = fig->cpu_percent = NAN;
    if (sum->samples > 0) {
        fig->duration_s = sum->last.t - sum->first.t;
        fig->user_s = sum->last.cpu_user_s - sum->first.cpu_user_s;
        fig->system_s = sum->last.cpu_system_s - sum->first.cpu_system_s;
        fig->rss_avg_kb = sum->rss_sum_kb / n;
        fig->pss_avg_kb = sum->pss_sum_kb / n;
    }
    if (fig->duration_s > 0) {
        fig->cpu_percent = 100.0 * (fig->user_s + fig->system_s) / fig->duration_s;
    }
    if (sum->requests_given) {
        fig->have_requests = true;
        fig->requests = sum->requests_override;
        fig->requests_source = "option";
    }
    else if (sum->load.have_requests) {
        fig->have_requests = true;
        fig->requests = sum->load.requests;
        fig->requests_source = sum->load.tool;
    }
    if (sum->load.have_rps) {
        fig->rps = sum->load.rps;
    }
    else if (fig->have_requests && fig->duration_s > 0) {
        fig->rps = (double) fig->requests / fig->duration_s;
    }
    if (fig->have_requests && fig->requests > 0 && sum->samples > 0) {
        fig->us_per_request = (fig->user_s + fig->system_s) * 1e6 / (double) fig->requests;
    }
}

static double mk_watch_mib(double kb)
{
    return kb / 1024.0;
}

void mk_watch_summary_print(FILE *f, const struct mk_watch_summary *sum)
{
    struct mk_watch_figures fig;

    mk_watch_figures(sum, &fig);
    if (sum->samples == 0) {
        fprintf(f, "mk-watch: PID %d: no samples taken\n", (int) sum->pid);
        return;
    }
    fprintf(f, "mk-watch: PID %d for %.2f s, %zu %s every %u ms\n", (int) sum->pid, fig.duration_s,
            sum->samples, sum->samples == 1 ? "sample" : "samples", sum->interval_ms);
    fprintf(f, "  memory     RSS peak %.1f MiB, avg %.1f MiB; PSS peak %.1f MiB, avg %.1f MiB%s\n",
            mk_watch_mib((double) sum->peak.rss_kb), mk_watch_mib(fig.rss_avg_kb),
            mk_watch_mib((double) sum->peak.pss_kb), mk_watch_mib(fig.pss_avg_kb),
            sum->pss_estimated ? " (estimated)" : "");
    fprintf(f, "  cpu        user %.2f s, system %.2f s, total %.2f s", fig.user_s, fig.system_s,
            fig.user_s + fig.system_s);
    if (isfinite(fig.cpu_percent)) {
        fprintf(f, " (%.1f%% of one CPU)", fig.cpu_percent);
    }
    fputc('\n', f);
    if (fig.have_requests) {
        fprintf(f, "  requests   %" PRIu64 " (%s)", fig.requests, fig.requests_source);
        if (isfinite(fig.rps)) {
            fprintf(f, ", %.1f req/s", fig.rps);
        }
        if (isfinite(fig.us_per_request)) {
            fprintf(f, ", %.1f us CPU per request", fig.us_per_request);
        }
        fputc('\n', f);
    }
    else if (sum->load_argv != NULL) {
        fputs("  requests   not reported by the load command (see --requests)\n", f);
    }
    fprintf(f, "  processes  peak %u (%zu seen), threads peak %u, fds peak %u%s\n",
            sum->peak.processes, sum->processes_seen, sum->peak.threads, sum->peak.fds,
            sum->fds_partial ? " (some unreadable)" : "");
    fprintf(f, "  switches   voluntary %" PRIu64 ", involuntary %" PRIu64 "\n",
            sum->last.ctx_voluntary - sum->first.ctx_voluntary,
            sum->last.ctx_involuntary - sum->first.ctx_involuntary);
    if (sum->load_status >= 0) {
        fprintf(f, "  load       exit status %d\n", sum->load_status);
    }
    if (sum->server_exited) {
        fputs("  warning    the server exited before the end of the run\n", f);
    }
}

static void mk_watch_json_key(FILE *f, const char *key)
{
    fprintf(f, ",\n  \"%s\": ", key);
}

static void mk_watch_json_u64(FILE *f, const char *key, uint64_t v)
{
    mk_watch_json_key(f, key);
    fprintf(f, "%" PRIu64, v);
}

static void mk_watch_json_double(FILE *f, const char *key, double v, int decimals)
{
    mk_watch_json_key(f, key);
    mk_watch_json_num(f, v, decimals);
}

static void mk_watch_json_bool(FILE *f, const char *key, bool v)
{
    mk_watch_json_key(f, key);
    fputs(v ? "true" : "false", f);
}

static void mk_watch_json_string(FILE *f, const char *key, const char *v)
{
    mk_watch_json_key(f, key);
    if (v == NULL) {
        fputs("null", f);
        return;
    }
    mk_watch_json_str(f, v);
}

void mk_watch_summary_json(FILE *f, const struct mk_watch_summary *sum)
{
    struct mk_watch_figures fig;

    mk_watch_figures(sum, &fig);
    fprintf(f, "{\n  \"tool\": \"mk-watch\"");
    mk_watch_json_string(f, "version", MK_WATCH_VERSION);
    mk_watch_json_u64(f, "pid", (uint64_t) sum->pid);
    mk_watch_json_string(f, "server_command", sum->server_command);
    mk_watch_json_key(f, "load_command");
    if (sum->load_argv == NULL) {
        fputs("null", f);
    }
    else {
        fputc('[', f);
        for (size_t i = 0; sum->load_argv[i] != NULL; i++) {
            fputs(i ? ", " : "", f);
            mk_watch_json_str(f, sum->load_argv[i]);
        }
        fputc(']', f);
    }
    mk_watch_json_key(f, "load_exit_status");
    if (sum->load_status >= 0) {
        fprintf(f, "%d", sum->load_status);
    }
    else {
        fputs("null", f);
    }
    mk_watch_json_bool(f, "server_exited_early", sum->server_exited);
    mk_watch_json_u64(f, "interval_ms", sum->interval_ms);
    mk_watch_json_u64(f, "samples", sum->samples);
    mk_watch_json_double(f, "duration_s", fig.duration_s, 3);
    mk_watch_json_u64(f, "rss_peak_kb", sum->peak.rss_kb);
    mk_watch_json_double(f, "rss_avg_kb", fig.rss_avg_kb, 1);
    mk_watch_json_u64(f, "pss_peak_kb", sum->peak.pss_kb);
    mk_watch_json_double(f, "pss_avg_kb", fig.pss_avg_kb, 1);
    mk_watch_json_bool(f, "pss_estimated", sum->pss_estimated);
    mk_watch_json_double(f, "cpu_user_s", fig.user_s, 3);
    mk_watch_json_double(f, "cpu_system_s", fig.system_s, 3);
    mk_watch_json_double(f, "cpu_total_s", fig.user_s + fig.system_s, 3);
    mk_watch_json_double(f, "cpu_percent", fig.cpu_percent, 1);
    mk_watch_json_key(f, "requests");
    if (fig.have_requests) {
        fprintf(f, "%" PRIu64, fig.requests);
    }
    else {
        fputs("null", f);
    }
    mk_watch_json_string(f, "requests_source", fig.requests_source);
    mk_watch_json_double(f, "requests_per_s", fig.rps, 2);
    mk_watch_json_double(f, "cpu_us_per_request", fig.us_per_request, 2);
    mk_watch_json_u64(f, "processes_peak", sum->peak.processes);
    mk_watch_json_u64(f, "processes_seen", sum->processes_seen);
    mk_watch_json_u64(f, "threads_peak", sum->peak.threads);
    mk_watch_json_u64(f, "fds_peak", sum->peak.fds);
    mk_watch_json_bool(f, "fds_partial", sum->fds_partial);
    mk_watch_json_u64(f, "ctx_voluntary", sum->last.ctx_voluntary - sum->first.ctx_voluntary);
    mk_watch_json_u64(f, "ctx_involuntary", sum->last.ctx_involuntary - sum->first.ctx_involuntary);
    fputs("\n}\n", f);
}
