/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * http.c: the HTTP status page, the status document as JSON on HttpPath
 * to the addresses of HttpAllow. Worker threads; the settings are those of
 * the request's own configuration.
 */
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
int control_content(struct mk_request *r)
{
    size_t len, mlen;
    const char *path = control_api->path(r, &len);
    const struct mk_site *site = control_api->site(r);
    /* The settings of the request's own configuration: no lock, no reload race. */
    const struct control_settings *s =
        site ? control_api->plugin_conf(site, MK_PLUGIN_SELF(control)) : NULL;

    if (!s || !s->http_path[0] || strlen(s->http_path) != len ||
        memcmp(path, s->http_path, len) != 0) {
        return MK_DECLINED;
    }
    if (!control_http_allowed(s, r)) {
        return 403;
    }
    const char *method = control_api->method(r, &mlen);
    if (!(mlen == 3 && memcmp(method, "GET", 3) == 0) &&
        !(mlen == 4 && memcmp(method, "HEAD", 4) == 0)) {
        control_api->add_header(r, "Allow", "GET, HEAD");
        return 405;
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
