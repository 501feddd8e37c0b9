/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * http.c: the HTTP status page, the status document as JSON on HttpPath,
 * and the metrics on MetricsPath (metrics.c), to the addresses of HttpAllow
 * (loopback by default). Each path is a route (GET, and so HEAD) of
 * every site, added by site_init() for each configuration: the server
 * matches the path and answers other methods (405, OPTIONS) itself. The
 * handler runs on worker threads with the settings of the request's own
 * configuration, its arg.
 */
#include <stdio.h>
#include <string.h>

#include "control.h"

/* Is the client of r in the HttpAllow of `s`? */
static bool control_http_allowed(const struct control_settings *s, const struct mk_request *r)
{
    socklen_t len;
    const struct sockaddr *sa = control_api->remote_sockaddr(r, &len);
    uint8_t key[16];
    int family;

    if (!sa) {
        return false;
    }
    mk_cidr_client(sa, key, &family); /* IPv4 clients of a dual-stack socket are IPv4 */
    for (unsigned i = 0; i < s->n_allow; i++) {
        if (mk_cidr_match(&s->allow[i], key, family)) {
            return true;
        }
    }
    return false;
}

/* GET HttpPath: the status document as JSON, to the addresses of HttpAllow. */
static int control_http_status(struct mk_request *r, void *arg)
{
    /* The settings of the request's own configuration: no lock, no reload race. */
    const struct control_settings *s = arg;

    if (!control_http_allowed(s, r)) {
        return 403;
    }
    struct mk_json b = {0};
    char err[128];
    if (control_doc_status(&b, true, err, sizeof(err)) != MK_OK || b.failed) {
        control_buf_free(&b);
        return 503;
    }
    control_api->set_status(r, 200);
    control_api->set_content_type(r, "application/json");
    control_api->add_header(r, "Cache-Control", "no-store");
    control_api->set_body_owned(r, b.data, b.len);
    return MK_OK;
}

#ifdef CONTROL_HAVE_METRICS
/* GET MetricsPath: the metrics, in the format the scraper's Accept asks for. */
static int control_http_metrics(struct mk_request *r, void *arg)
{
    const struct control_settings *s = arg;

    if (!control_http_allowed(s, r)) {
        return 403;
    }
    bool om = control_wants_openmetrics(r);
    struct mk_json b = {.max = CONTROL_METRICS_MAX};
    if (control_doc_metrics(&b, om) != MK_OK || b.failed) {
        control_buf_free(&b);
        return 503;
    }
    control_api->set_status(r, 200);
    control_api->set_content_type(r, control_metrics_type(om));
    control_api->add_header(r, "Cache-Control", "no-store");
    control_api->add_header(r, "Vary", "Accept");
    control_api->set_body_owned(r, b.data, b.len);
    return MK_OK;
}
#endif

int control_routes(const struct mk_site *site, struct mk_route_table *t, char *err, size_t errlen)
{
    const struct control_settings *s =
        site ? control_api->plugin_conf(site, MK_PLUGIN_SELF(control)) : NULL;
    char why[200];

    if (!s) {
        return MK_OK;
    }
    /* The settings live as long as the site: a safe arg for the handlers. */
    if (s->http_path[0] &&
        control_api->route_table_add(t, MK_ROUTE_GET, s->http_path, control_http_status, (void *) s,
                                     why, sizeof(why)) != MK_OK) {
        snprintf(err, errlen, "cannot route HttpPath %s: %s", s->http_path, why);
        return MK_ERR;
    }
#ifdef CONTROL_HAVE_METRICS
    if (s->metrics_path[0] &&
        control_api->route_table_add(t, MK_ROUTE_GET, s->metrics_path, control_http_metrics,
                                     (void *) s, why, sizeof(why)) != MK_OK) {
        snprintf(err, errlen, "cannot route MetricsPath %s: %s", s->metrics_path, why);
        return MK_ERR;
    }
#endif
    return MK_OK;
}
