/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * documents.c: the documents the control socket and the HTTP status page
 * answer with (status, workers, sites, plugins, config), as text for people
 * or as JSON. Built from what the API reports; any thread.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control.h"

/*
 * The server's statistics, or MK_ERR while the workers do not exist yet
 * (during start); worker_stats() is the call that checks that. A worker may
 * serve a request a moment before the start time is set: then it is now.
 */
static int control_stats(struct mk_server_stats *st)
{
    struct mk_worker_stats ws;

    if (control_api->worker_stats(0, &ws) != MK_OK) {
        return MK_ERR;
    }
    control_api->stats(st);
    if (!st->started) {
        st->started = time(NULL);
    }
    return MK_OK;
}

/* Append a byte count for people: "123456 (120.6 KiB)". */
static void control_bytes_text(struct mk_json *b, uint64_t n)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double) n;
    unsigned u = 0;

    control_buf_printf(b, "%" PRIu64, n);
    if (n < 1024) {
        return;
    }
    v /= 1024;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    control_buf_printf(b, " (%.1f %s)", v, units[u]);
}

/* The worker table, as text lines or as a JSON array. */
static void control_doc_worker_list(struct mk_json *b, unsigned workers, bool json)
{
    if (json) {
        control_buf_str(b, "[");
    }
    else {
        control_buf_str(b, "worker  connections  requests        bytes sent\n");
    }
    for (unsigned i = 0; i < workers; i++) {
        struct mk_worker_stats ws;
        if (control_api->worker_stats(i, &ws) != MK_OK) {
            memset(&ws, 0, sizeof(ws));
        }
        if (json) {
            control_buf_printf(b,
                               "%s{\"id\":%u,\"connections\":%u,\"requests\":%" PRIu64
                               ",\"bytes_sent\":%" PRIu64 "}",
                               i ? "," : "", i, ws.connections, ws.requests, ws.bytes_out);
        }
        else {
            control_buf_printf(b, "%-7u %-12u %-15" PRIu64 " ", i, ws.connections, ws.requests);
            control_bytes_text(b, ws.bytes_out);
            control_buf_str(b, "\n");
        }
    }
    if (json) {
        control_buf_str(b, "]");
    }
}

/* Where the counters of one plugin's stats hook go. */
struct control_stats_out {
    struct mk_json *b;
    bool json;
    unsigned n; /* counters written so far */
};

static void control_stats_emit(void *arg, const char *name, uint64_t value)
{
    struct control_stats_out *out = arg;

    if (out->json) {
        control_buf_str(out->b, out->n ? "," : "");
        control_buf_json(out->b, name);
        control_buf_printf(out->b, ":%" PRIu64, value);
    }
    else {
        control_buf_printf(out->b, "    %-15s %" PRIu64 "\n", name, value);
    }
    out->n++;
}

/*
 * The counters of every plugin with a stats hook (ABI 3.3), under its name:
 * a JSON object of objects, or a text block per plugin.
 */
static void control_doc_plugin_stats(struct mk_json *b, bool json)
{
    unsigned n = control_api->plugin_count(), shown = 0;

    for (unsigned i = 0; i < n; i++) {
        const struct mk_plugin *p = control_api->plugin_at(i);
        if (!p || !p->stats) {
            continue;
        }
        struct control_stats_out out = {.b = b, .json = json};
        if (json) {
            control_buf_str(b, shown ? "," : "");
            control_buf_json(b, p->name ? p->name : "");
            control_buf_str(b, ":{");
        }
        else {
            control_buf_printf(b, "\nplugin %s\n", p->name ? p->name : "");
        }
        p->stats(control_stats_emit, &out);
        if (json) {
            control_buf_str(b, "}");
        }
        shown++;
    }
}

/* The supervisor part of "status": null / nothing when there is none. */
static void control_doc_supervisor(struct mk_json *b, bool json)
{
    struct mk_supervisor_stats sv;
    char when[64] = "";
    struct tm tm;

    if (!MK_API_HAS(control_api, supervisor_stats) || control_api->supervisor_stats(&sv) != MK_OK) {
        if (json) {
            control_buf_str(b, "null");
        }
        return;
    }
    if (sv.last_crash) {
        gmtime_r(&sv.last_crash, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    if (json) {
        control_buf_printf(b, "{\"pid\":%ld,\"restarts\":%u,\"last_crash\":%lld,", sv.pid,
                           sv.restarts, (long long) sv.last_crash);
        control_buf_str(b, "\"last_crash_utc\":");
        control_buf_json(b, when);
        control_buf_str(b, ",\"last_crash_reason\":");
        control_buf_json(b, sv.last_crash_reason);
        control_buf_str(b, "}");
        return;
    }
    control_buf_printf(b, "supervisor   pid %ld, %u %s", sv.pid, sv.restarts,
                       mk_plural(sv.restarts, "restart", "restarts"));
    if (sv.last_crash) {
        control_buf_printf(b, ", last crash %s: %s", when, sv.last_crash_reason);
    }
    control_buf_str(b, "\n");
}

/* "status": the whole server, then the workers, then the plugins' counters. */
int control_doc_status(struct mk_json *b, bool json, char *err, size_t errlen)
{
    struct mk_server_stats st;
    char when[64];
    struct tm tm;

    if (control_stats(&st) != MK_OK) {
        snprintf(err, errlen, "the server is still starting");
        return MK_ERR;
    }
    time_t now = time(NULL);
    long long uptime = now > st.started ? (long long) (now - st.started) : 0;
    gmtime_r(&st.started, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    struct mk_h2_stats h2 = {0};
    if (MK_API_HAS(control_api, h2_stats)) {
        control_api->h2_stats(&h2);
    }
    struct mk_compress_stats z = {0};
    if (MK_API_HAS(control_api, compress_stats)) {
        control_api->compress_stats(&z);
    }
    struct mk_ratelimit_stats rl = {0};
    if (MK_API_HAS(control_api, ratelimit_stats)) {
        control_api->ratelimit_stats(&rl);
    }
    if (json) {
        control_buf_printf(b,
                           "{\"pid\":%ld,\"started\":%lld,\"started_utc\":\"%s\",\"uptime\":%lld,"
                           "\"workers\":%u,\"connections\":%u,\"requests\":%" PRIu64
                           ",\"bytes_sent\":%" PRIu64 ",\"h2_connections\":%u,\"h2_streams\":%u,"
                           "\"h2_streams_total\":%" PRIu64 ",\"compress\":{\"bytes\":%" PRIu64
                           ",\"entries\":%u,\"hits\":%" PRIu64 ",\"compressions\":%" PRIu64
                           ",\"waits\":%" PRIu64 ",\"evictions\":%" PRIu64 ",\"skipped\":%" PRIu64
                           "},\"ratelimit\":{\"limits\":%u,"
                           "\"keys\":%" PRIu64 ",\"evictions\":%" PRIu64 "},\"per_worker\":",
                           (long) getpid(), (long long) st.started, when, uptime, st.workers,
                           st.connections, st.requests, st.bytes_out, h2.connections, h2.streams,
                           h2.streams_total, z.bytes, z.entries, z.hits, z.compressions, z.waits,
                           z.evictions, z.skipped, rl.limits, rl.keys, rl.evictions);
        control_doc_worker_list(b, st.workers, true);
        control_buf_str(b, ",\"supervisor\":");
        control_doc_supervisor(b, true);
        control_buf_str(b, ",\"plugins\":{");
        control_doc_plugin_stats(b, true);
        control_buf_str(b, "}}\n");
        return MK_OK;
    }
    control_buf_printf(b, "pid          %ld\n", (long) getpid());
    control_doc_supervisor(b, false);
    control_buf_printf(b, "started      %s\n", when);
    control_buf_printf(b, "uptime       %lld s (%lldd %02lld:%02lld:%02lld)\n", uptime,
                       uptime / 86400, uptime / 3600 % 24, uptime / 60 % 60, uptime % 60);
    control_buf_printf(b, "workers      %u\n", st.workers);
    control_buf_printf(b, "connections  %u\n", st.connections);
    control_buf_printf(b, "http2        %u %s, %u %s (%" PRIu64 " since start)\n", h2.connections,
                       mk_plural(h2.connections, "connection", "connections"), h2.streams,
                       mk_plural(h2.streams, "stream", "streams"), h2.streams_total);
    control_buf_printf(b, "requests     %" PRIu64 "\n", st.requests);
    control_buf_str(b, "compressed   ");
    control_bytes_text(b, z.bytes);
    control_buf_printf(b,
                       " in %u %s; %" PRIu64 " %s, %" PRIu64 " %s, %" PRIu64 " %s, %" PRIu64
                       " %s, %" PRIu64 " skipped\n",
                       z.entries, mk_plural(z.entries, "entry", "entries"), z.hits,
                       mk_plural(z.hits, "hit", "hits"), z.compressions,
                       mk_plural(z.compressions, "compression", "compressions"), z.waits,
                       mk_plural(z.waits, "wait", "waits"), z.evictions,
                       mk_plural(z.evictions, "eviction", "evictions"), z.skipped);
    if (rl.limits) {
        control_buf_printf(
            b, "rate limits  %u, %" PRIu64 " keys at most, %" PRIu64 " %s while still limited\n",
            rl.limits, rl.keys, rl.evictions, mk_plural(rl.evictions, "eviction", "evictions"));
    }
    control_buf_str(b, "bytes sent   ");
    control_bytes_text(b, st.bytes_out);
    control_buf_str(b, "\n\n");
    control_doc_worker_list(b, st.workers, false);
    control_doc_plugin_stats(b, false);
    return MK_OK;
}

/* "workers": one entry per worker thread. */
int control_doc_workers(struct mk_json *b, bool json, char *err, size_t errlen)
{
    struct mk_server_stats st;

    if (control_stats(&st) != MK_OK) {
        snprintf(err, errlen, "the server is still starting");
        return MK_ERR;
    }
    if (json) {
        control_buf_str(b, "{\"workers\":");
        control_doc_worker_list(b, st.workers, true);
        control_buf_str(b, "}\n");
        return MK_OK;
    }
    control_doc_worker_list(b, st.workers, false);
    return MK_OK;
}

/* "sites": the virtual hosts of the configuration in force. */
int control_doc_sites(struct mk_json *b, bool json, char *err, size_t errlen)
{
    struct mk_config *cfg = control_api->config_get();

    if (!cfg) {
        snprintf(err, errlen, "no configuration in force");
        return MK_ERR;
    }
    unsigned n = control_api->config_sites(cfg);
    if (json) {
        control_buf_str(b, "{\"sites\":[");
    }
    for (unsigned i = 0; i < n; i++) {
        const struct mk_site *s = control_api->config_site(cfg, i);
        const char *name;
        if (json) {
            control_buf_str(b, i ? ",{\"names\":[" : "{\"names\":[");
            for (unsigned j = 0; (name = control_api->site_name(s, j)) != NULL; j++) {
                control_buf_str(b, j ? "," : "");
                control_buf_json(b, name);
            }
            control_buf_str(b, "],\"document_root\":");
            control_buf_json(b, control_api->site_docroot(s));
            control_buf_str(b, ",\"file\":");
            control_buf_json(b, control_api->site_file(s));
            control_buf_str(b, "}");
            continue;
        }
        control_buf_str(b, i ? "\nsite" : "site");
        if (!control_api->site_name(s, 0)) {
            control_buf_str(b, " (no ServerName)");
        }
        for (unsigned j = 0; (name = control_api->site_name(s, j)) != NULL; j++) {
            control_buf_printf(b, " %s", name);
        }
        control_buf_printf(b, "\n    document root  %s\n    file           %s\n",
                           control_api->site_docroot(s), control_api->site_file(s));
    }
    if (json) {
        control_buf_str(b, "]}\n");
    }
    control_api->config_put(cfg);
    return MK_OK;
}

/* "plugins": the loaded plugins in plugins.load order. */
int control_doc_plugins(struct mk_json *b, bool json, char *err, size_t errlen)
{
    unsigned n = control_api->plugin_count();

    (void) err;
    (void) errlen;
    if (json) {
        control_buf_str(b, "{\"plugins\":[");
    }
    for (unsigned i = 0; i < n; i++) {
        const struct mk_plugin *p = control_api->plugin_at(i);
        if (!p) {
            continue;
        }
        const char *name = p->name ? p->name : "";
        const char *version = p->version ? p->version : "";
        const char *description = p->description ? p->description : "";
        if (json) {
            control_buf_str(b, i ? ",{\"name\":" : "{\"name\":");
            control_buf_json(b, name);
            control_buf_str(b, ",\"version\":");
            control_buf_json(b, version);
            control_buf_str(b, ",\"description\":");
            control_buf_json(b, description);
            control_buf_str(b, "}");
        }
        else {
            control_buf_printf(b, "%-12s %-8s %s\n", name, version, description);
        }
    }
    if (json) {
        control_buf_str(b, "]}\n");
    }
    return MK_OK;
}

/* "config": every [SERVER] key with its values in force, defaults included. */
int control_doc_config(struct mk_json *b, bool json, char *err, size_t errlen)
{
    struct mk_config *cfg = control_api->config_get();
    const char *key;

    if (!cfg) {
        snprintf(err, errlen, "no configuration in force");
        return MK_ERR;
    }
    control_buf_str(b, json ? "{\"config\":{" : "[SERVER]\n");
    for (unsigned i = 0; (key = control_api->config_key(i)) != NULL; i++) {
        const char *value;
        if (json) {
            control_buf_str(b, i ? "," : "");
            control_buf_json(b, key);
            control_buf_str(b, ":[");
        }
        for (unsigned j = 0; (value = control_api->config_value(cfg, key, j)) != NULL; j++) {
            if (json) {
                control_buf_str(b, j ? "," : "");
                control_buf_json(b, value);
            }
            else {
                control_buf_printf(b, "    %s %s\n", key, value);
            }
        }
        if (json) {
            control_buf_str(b, "]");
        }
    }
    if (json) {
        control_buf_str(b, "}}\n");
    }
    control_api->config_put(cfg);
    return MK_OK;
}
