/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * request_rules.c: what a request's site rule does (http/rules.h for the
 * matching and the targets): a Redirect's Location and status, a Return's
 * answer, a Rewrite's new path and query, a Cors line's preflight answer
 * and fields, its Allow and Deny lines, and the rule whose per-path
 * settings (IndexFiles, CacheControl, MaxRequestBody, Timeout,
 * SendTimeout) the static handler, the body readers and the protocols'
 * timers take. Asked once the Host chose the
 * site and the path is normalised, before any plugin sees the request
 * (request.c); a site without rules never comes here.
 *
 * A Rewrite changes the path (and the query) the rest of the request sees,
 * routes, plugins and the static handler alike; the request target stays
 * the client's (the logger, the gateways' REQUEST_URI, api->client_target).
 * The rules are then tried again for the new path; a request rewritten
 * more than MK_REDIRECTS_MAX times (internal redirects included) is a 500,
 * logged.
 */
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>

#include "../../core/log.h"
#include "../http/path.h"
#include "../http/rules.h"
#include "../conn/transport.h"
#include "../process/server.h"
#include "../proto/proto.h"
#include "request_limit.h"

/* The request's side of a template: variables, and the groups of the match. */
static void mk_request_rule_vars(struct mk_request *r, const struct mk_rule *rule,
                                 const size_t *groups, char *port, struct mk_rule_vars *v)
{
    const struct mk_http_head *h = &r->head;
    size_t len;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    unsigned p = 0;

    memset(v, 0, sizeof(*v));
    bool tls = mk_conn_transport_var(r->conn, "protocol", &len) != NULL;
    v->scheme = tls ? mk_str_make("https", 5) : mk_str_make("http", 4);
    v->host = h->host;
    if (v->host.len == 0 && r->site->n_names) {
        v->host = mk_str_make(r->site->names[0], strlen(r->site->names[0]));
    }
    if (mk_conn_local_addr(r->conn, &ss, &sl) == MK_OK) {
        if (ss.ss_family == AF_INET) {
            p = ntohs(((const struct sockaddr_in *) (void *) &ss)->sin_port);
        }
        else if (ss.ss_family == AF_INET6) {
            p = ntohs(((const struct sockaddr_in6 *) (void *) &ss)->sin6_port);
        }
    }
    int n = snprintf(port, 8, "%u", p);
    v->port = mk_str_make(port, (size_t) n);
    v->path = mk_str_make(r->path, r->path_len);
    v->query = h->query;
    v->uri = h->path;
    v->subject = r->path;
    v->groups = groups;
    v->n_groups = rule->n_groups;
}

/* Expand rule's target for r into request memory: NULL on failure (500, logged). */
static char *mk_request_rule_target(struct mk_request *r, const struct mk_rule *rule,
                                    const size_t *groups, size_t *len)
{
    char port[8], buf[MK_RULE_TARGET_MAX];
    struct mk_rule_vars v;

    mk_request_rule_vars(r, rule, groups, port, &v);
    ssize_t n = mk_rule_expand(&rule->target, &v, buf, sizeof(buf));
    if (n < 0) {
        mk_err("%s:%d: the target '%s' cannot be built for %.*s", r->site->file, rule->line,
               rule->target.text, (int) r->head.target.len, r->head.target.p);
        return NULL;
    }
    char *out = mk_arena_alloc(&r->arena, (size_t) n + 1);
    if (out) {
        memcpy(out, buf, (size_t) n + 1);
        *len = (size_t) n;
    }
    return out;
}

/* Rewrite r to `t` (len bytes, "/path?query"): MK_AGAIN, or an error status. */
static int mk_request_rewrite(struct mk_request *r, const struct mk_rule *rule, char *t, size_t len)
{
    struct mk_http_head *h = &r->head;
    const char *q = memchr(t, '?', len);
    size_t plen = q ? (size_t) (q - t) : len;
    char *path = mk_arena_alloc(&r->arena, plen + 2);

    if (!path) {
        return 503;
    }
    ssize_t n = mk_path_normalize(t, plen, path);
    if (n < 0) {
        mk_err("%s:%d: Rewrite of %.*s gives '%s', not a path", r->site->file, rule->line,
               (int) h->target.len, h->target.p, t);
        return 500;
    }
    if (r->redirects == 0) {
        /* what api->client_method and client_target give, should a plugin redirect it later */
        r->client_method = h->method_name;
        r->client_target = h->target;
    }
    r->redirects++;
    h->path = mk_str_make(t, plen);
    h->query = q ? mk_str_make(q + 1, len - plen - 1) : mk_str_make(NULL, 0);
    r->path = path;
    r->path_len = (size_t) n;
    return MK_AGAIN;
}

/* Return's answer: the text given, ReturnFile's file, or the status's usual answer. */
static int mk_request_return(struct mk_request *r, const struct mk_rule *rule)
{
    static const char type[] = "text/plain; charset=utf-8";

    if (!rule->body) {
        if (rule->status >= 400) {
            mk_response_error(r, rule->status);
        }
        else {
            r->status = rule->status;
            r->content_length = 0;
            r->body_type = MK_RESP_NONE;
        }
        return MK_OK;
    }
    r->status = rule->status;
    if (rule->body_file) { /* ReturnFile: the type of its extension */
        struct mk_str t = mk_mime_lookup(r->cfg->mime, rule->body_file, strlen(rule->body_file));
        r->content_type = t.p;
        r->content_type_len = t.len;
    }
    else {
        r->content_type = type;
        r->content_type_len = sizeof(type) - 1;
    }
    r->body_type = MK_RESP_MEM;
    r->mem = rule->body; /* the configuration outlives the request */
    r->mem_len = rule->body_len;
    r->content_length = rule->body_len;
    return MK_OK;
}

#define MK_FIELD(r, name, v, len) (void) mk_response_add_header(r, name, sizeof(name) - 1, v, len)

/* Whether r is a CORS preflight: OPTIONS, with Origin and Access-Control-Request-Method. */
static const struct mk_str *mk_request_preflight_method(const struct mk_request *r)
{
    const struct mk_str *m = mk_http_header_get(&r->head, "Access-Control-Request-Method");

    return r->head.method == MK_METHOD_OPTIONS ? m : NULL;
}

/* A preflight rule's Cors line answers: 204 with the fields of what it allows, else 403. */
static int mk_request_preflight(struct mk_request *r, const struct mk_rule_cors *c,
                                const struct mk_str *origin, const struct mk_str *method)
{
    const struct mk_str *fields = mk_http_header_get(&r->head, "Access-Control-Request-Headers");
    char age[16];

    if (!mk_rule_cors_origin(c, origin) || !mk_rule_cors_preflight(c, method, fields)) {
        mk_response_error(r, 403); /* without any Access-Control-Allow-* field */
        return MK_OK;
    }
    if (c->methods_text) {
        MK_FIELD(r, "Access-Control-Allow-Methods", c->methods_text, strlen(c->methods_text));
    }
    if (c->headers && strcmp(c->headers, "*") == 0) {
        if (fields) { /* "*" is no wildcard with credentials: the fields asked for */
            MK_FIELD(r, "Access-Control-Allow-Headers", fields->p, fields->len);
        }
    }
    else if (c->headers) {
        MK_FIELD(r, "Access-Control-Allow-Headers", c->headers, strlen(c->headers));
    }
    if (c->max_age >= 0) {
        MK_FIELD(r, "Access-Control-Max-Age", age,
                 (size_t) snprintf(age, sizeof(age), "%d", (int) c->max_age));
    }
    r->status = 204;
    r->content_length = 0;
    r->body_type = MK_RESP_NONE;
    return MK_OK;
}

/* The fields of a response to an allowed origin (errors and preflights included). */
static void mk_request_cors(struct mk_request *r, const struct mk_rule_cors *c)
{
    const struct mk_str *origin = mk_http_header_get(&r->head, "Origin");
    bool preflight = mk_request_preflight_method(r) != NULL;

    if (!origin) {
        return;
    }
    if (c->origins) {
        MK_FIELD(r, "Vary", "Origin", 6);
    }
    if (!mk_rule_cors_origin(c, origin) || (preflight && r->status >= 400)) {
        return;
    }
    if (c->origins) {
        MK_FIELD(r, "Access-Control-Allow-Origin", origin->p, origin->len);
    }
    else {
        MK_FIELD(r, "Access-Control-Allow-Origin", "*", 1);
    }
    if (c->credentials) {
        MK_FIELD(r, "Access-Control-Allow-Credentials", "true", 4);
    }
    if (c->expose && !preflight) {
        MK_FIELD(r, "Access-Control-Expose-Headers", c->expose, strlen(c->expose));
    }
}

void mk_request_rule_headers(struct mk_request *r)
{
    const struct mk_rule *rule = r->rule_headers;
    bool error = r->status >= 400;

    r->rule_headers = NULL; /* once, should the response be started again */
    if (rule->cors) {
        mk_request_cors(r, rule->cors);
    }
    for (size_t i = 0; i < rule->n_headers; i++) {
        const struct mk_rule_header *h = &rule->headers[i];
        if (error && !h->always) {
            continue;
        }
        if (h->op != MK_RH_ADD) {
            mk_response_field_remove(r, h->name, h->name_len);
        }
        if (h->op != MK_RH_REMOVE) {
            /* no memory: the response goes without it, as without any extra field */
            (void) mk_response_add_header(r, h->name, h->name_len, h->value, h->value_len);
        }
    }
}

int mk_request_listing(const struct mk_request *r)
{
    const struct mk_rule *rule = r->rule_settings;

    return rule ? rule->listing : -1;
}

uint32_t mk_request_rule_timeout(const struct mk_request *r, bool send)
{
    const struct mk_rule *rule = r->rule_settings;

    return send ? rule->send_timeout_ms : rule->timeout_ms;
}

uint64_t mk_request_max_body(const struct mk_request *r)
{
    const struct mk_rule *rule = r->rule_settings;

    return rule && rule->max_body >= 0 ? (uint64_t) rule->max_body : r->cfg->max_body;
}

char *const *mk_request_index_files(const struct mk_request *r, size_t *n)
{
    const struct mk_rule *rule = r->rule_settings;

    if (rule && rule->index_files) {
        *n = rule->n_index_files;
        return rule->index_files;
    }
    return mk_conf_site_index_files(r->site, r->cfg, n);
}

int mk_request_rules(struct mk_request *r)
{
    size_t groups[2 * (MK_RULE_GROUPS_MAX + 1)];
    size_t len = 0;

    if (r->site->rules->scheme && mk_conn_transport_var(r->conn, "protocol", &len)) {
        r->head.flags |= MK_HEAD_TLS; /* for the rules' Scheme */
    }
    const struct mk_rule *rule =
        mk_rules_find(r->site->rules, &r->head, r->path, r->path_len, groups);
    char *t;

    r->rule_settings = NULL; /* the rule for the path as it is now, none included */
    if (!rule) {
        return MK_DECLINED;
    }
    if (mk_rule_sets(rule)) {
        r->rule_settings = rule;
        if ((rule->timeout_ms || rule->send_timeout_ms) && r->conn->proto->timeouts) {
            r->conn->proto->timeouts(r);
        }
    }
    if (rule->n_headers || rule->cors) {
        r->rule_headers = rule;
    }
    if (rule->access && !mk_rule_access_allows(rule, mk_request_client(r))) {
        return 403;
    }
    int rc;
    if (rule->limit && (rc = mk_request_limit(r, rule)) != MK_DECLINED) {
        return rc; /* 429, or held back */
    }
    const struct mk_str *origin, *method;
    if (rule->cors && (method = mk_request_preflight_method(r)) &&
        (origin = mk_http_header_get(&r->head, "Origin"))) {
        return mk_request_preflight(r, rule->cors, origin, method);
    }
    if (rule->n_req_headers) {
        struct mk_http_header *f =
            mk_arena_alloc(&r->arena, (r->head.n_headers + rule->n_req_headers) * sizeof(*f));
        if (!f) {
            return 503;
        }
        mk_rule_request_fields(rule, &r->head, f);
    }
    switch (rule->action) {
    case MK_RULE_PASS:
        return MK_DECLINED;
    case MK_RULE_REDIRECT:
        if (!(t = mk_request_rule_target(r, rule, groups, &len))) {
            return 500;
        }
        if (mk_response_add_header(r, "Location", 8, t, len) != MK_OK) {
            return 503;
        }
        mk_response_error(r, rule->status);
        return MK_OK;
    case MK_RULE_RETURN:
        return mk_request_return(r, rule);
    default:
        if (r->redirects >= MK_REDIRECTS_MAX) {
            mk_err("%s:%d: %.*s rewritten more than %d times", r->site->file, rule->line,
                   (int) r->head.target.len, r->head.target.p, MK_REDIRECTS_MAX);
            return 500;
        }
        if (!(t = mk_request_rule_target(r, rule, groups, &len))) {
            return 500;
        }
        return mk_request_rewrite(r, rule, t, len);
    }
}
