/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/console.c: the console object: debug lines (to the server's log,
 * the last DUDA_CONSOLE_LINES of each service kept for the dashboard) and
 * the dashboard, a page of the service's routes, counters and those lines
 * (console->dashboard maps its route, router_object.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "duda_internal.h"

void duda_console_note(struct duda_service *svc, const char *line)
{
    pthread_mutex_lock(&svc->console_lock);
    snprintf(svc->console[svc->console_next % DUDA_CONSOLE_LINES], sizeof(svc->console[0]), "%s",
             line);
    svc->console_next++;
    pthread_mutex_unlock(&svc->console_lock);
}

static void duda_console_debug(duda_request_t *dr, const char *fmt, ...)
{
    char msg[160];
    va_list ap;
    struct duda_service *svc = dr ? dr->svc : duda_current;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    duda_mk->log(MK_PLUGIN_LOG_INFO, "duda: %s: %s", svc ? svc->name : "?", msg);
    if (svc) {
        duda_console_note(svc, msg);
    }
}

const struct duda_console_api duda_console_obj = {
    .size = sizeof(struct duda_console_api),
    .debug = duda_console_debug,
    .dashboard = duda_router_object_dashboard,
};

/* Resident memory of the process in KiB, from /proc/self/statm. */
static long duda_rss_kib(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2) {
            rss = 0;
        }
        fclose(f);
    }
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* The service's requests: its metric, the counter MetricsPath shows (0 without metrics). */
static unsigned long duda_service_requests(const struct duda_service *svc)
{
    struct mk_metric_value v;
    return duda_mk->metric_read(svc->m_requests, &v) == MK_OK ? (unsigned long) v.value : 0;
}

static void duda_html(duda_request_t *dr, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<':
            duda_response_obj.print(dr, "&lt;", 4);
            break;
        case '>':
            duda_response_obj.print(dr, "&gt;", 4);
            break;
        case '&':
            duda_response_obj.print(dr, "&amp;", 5);
            break;
        default:
            duda_response_obj.print(dr, s, 1);
        }
    }
}

void duda_console_dashboard(duda_request_t *dr)
{
    struct duda_service *svc = dr->svc;
    const struct duda_response_api *res = &duda_response_obj;

    res->http_content_type(dr, "text/html; charset=utf-8");
    res->printf(dr, "<!DOCTYPE html>\n<title>%s</title>\n<h1>", svc->name);
    duda_html(dr, svc->title);
    res->printf(dr, "</h1>\n<p>service <b>%s</b> at <code>/%s</code>, file <code>", svc->name,
                svc->root ? "" : svc->name);
    duda_html(dr, svc->file);
    res->printf(dr, "</code></p>\n<h2>Routes</h2>\n<ul>\n");
    for (size_t i = 0; i < svc->n_routes; i++) {
        res->printf(dr, "<li><code>%s%s", svc->root ? "" : "/", svc->root ? "" : svc->name);
        duda_html(dr, svc->routes[i].pattern);
        res->printf(dr, "</code> methods 0x%x%s</li>\n", svc->routes[i].methods,
                    svc->routes[i].dashboard ? " (dashboard)" : "");
    }
    res->printf(dr,
                "</ul>\n<h2>Memory</h2>\n<p>resident: %ld KiB (the whole server)</p>\n"
                "<h2>Counters</h2>\n<p>requests: %lu, API misuses: %lu</p>\n"
                "<h2>Console</h2>\n<pre>\n",
                duda_rss_kib(), duda_service_requests(svc), atomic_load(&svc->misuses));
    pthread_mutex_lock(&svc->console_lock);
    unsigned first =
        svc->console_next > DUDA_CONSOLE_LINES ? svc->console_next - DUDA_CONSOLE_LINES : 0;
    for (unsigned i = first; i < svc->console_next; i++) {
        duda_html(dr, svc->console[i % DUDA_CONSOLE_LINES]);
        res->print(dr, "\n", 1);
    }
    pthread_mutex_unlock(&svc->console_lock);
    res->printf(dr, "</pre>\n");
    res->end(dr, NULL);
}
