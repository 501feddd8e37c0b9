/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls_site.c: what a site's [TLS] section asks of HTTP:
 * Strict-Transport-Security and the redirect of plain HTTP to HTTPS.
 *
 * What it guarantees:
 *   - HSTS: every response sent over TLS by a site with an HSTS value
 *     carries "Strict-Transport-Security: <value>" (files, plugin answers,
 *     error pages, the parser's refusals: through the response_head hook);
 *     never a response over plain HTTP (RFC 6797 section 7.2), nor one on
 *     a connection that may not serve the site (tls_site_allows: its 421).
 *   - RedirectHTTPS: a request of that site arriving on a plain listener
 *     is answered 308 Permanent Redirect (the method and body are kept, RFC
 *     9110 section 15.4.9) to https://HOST[:PORT]/path?query. HOST is the
 *     request's Host only when it is one of the site's names; otherwise
 *     the site's first name (never an open redirect). The path is the
 *     normalised path, percent-encoded again; the query is kept as
 *     received (the parser refused control bytes and spaces in it). The
 *     port is RedirectPort, else the server's first TLS listener's, and is
 *     left out when it is 443. Requests over TLS are never redirected.
 *
 * Threads: the hooks run on the request's worker and only read the
 * request's configuration.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tls.h"
#include "tls_parse.h"

#define TLS_HTTPS_PORT 443

int tls_site_check_hsts(const char *value, char *reason, size_t len)
{
    const char *p = value;

    for (; *p; p++) {
        if ((unsigned char) *p < 0x20 || (unsigned char) *p >= 0x7f) {
            snprintf(reason, len, "HSTS: only printable ASCII is allowed");
            return MK_ERR;
        }
    }
    for (p = value; (p = strcasestr(p, "max-age")) != NULL; p += 7) {
        const char *q = p + 7;
        while (*q == ' ') {
            q++;
        }
        if (*q == '=' && (p == value || p[-1] == ' ' || p[-1] == ';')) {
            q++;
            q += *q == '"';
            if (*q >= '0' && *q <= '9') {
                return MK_OK;
            }
        }
    }
    snprintf(reason, len, "HSTS '%s' has no max-age=SECONDS (RFC 6797 section 6.1.1)", value);
    return MK_ERR;
}

/* The site's [TLS] settings, NULL when it has none. */
static const struct tls_site *tls_site_of(const struct mk_request *r)
{
    const struct mk_site *site = tls_api->site(r);
    return site ? tls_api->site_conf(site, MK_PLUGIN_SELF(tls)) : NULL;
}

void tls_site_response_head(struct mk_request *r)
{
    const struct tls_site *ts;

    if (!tls_conn_of(tls_api->conn(r))) {
        return;
    }
    ts = tls_site_of(r);
    /* Not on the 421 of a site this connection may not serve (tls_request):
       nothing of that site goes out on it. */
    if (ts && ts->hsts && tls_site_allows(tls_api->conn(r), tls_api->site(r))) {
        tls_api->add_header(r, "Strict-Transport-Security", ts->hsts);
    }
}

/*
 * The host of the Location into out (NUL terminated): the request's when
 * the site has that name, else the site's first name that is no wildcard,
 * else the first name without its "*.". NULL when the site has no name.
 */
static const char *tls_site_host(const struct mk_request *r, char *out, size_t cap)
{
    const struct mk_site *site = tls_api->site(r);
    size_t len = 0;
    const char *host = tls_api->host(r, &len);
    const char *colon = host && len && host[0] != '[' ? memchr(host, ':', len) : NULL;
    const char *name;

    if (colon) {
        len = (size_t) (colon - host);
    }
    if (host && tls_host_ok(host, len) && len < cap) {
        for (unsigned i = 0; (name = tls_api->site_name(site, i)) != NULL; i++) {
            if (tls_name_matches(name, host, len)) {
                memcpy(out, host, len);
                out[len] = '\0';
                return out;
            }
        }
    }
    const char *wild = NULL;
    for (unsigned i = 0; (name = tls_api->site_name(site, i)) != NULL; i++) {
        if (name[0] != '*') {
            snprintf(out, cap, "%s", name);
            return out;
        }
        wild = wild ? wild : name + 2;
    }
    if (!wild) {
        return NULL;
    }
    snprintf(out, cap, "%s", wild);
    return out;
}

/* The port of the server's first "Listen ADDRESS tls" line; 443 when there is none. */
static int tls_site_https_port(void)
{
    struct mk_config *cfg = tls_api->config_get();
    const char *v;
    int port = TLS_HTTPS_PORT;

    if (!cfg) {
        return port;
    }
    for (unsigned i = 0; (v = tls_api->config_value(cfg, "Listen", i)) != NULL; i++) {
        const char *sp = strchr(v, ' ');
        if (!sp || strncmp(sp + 1, "tls", 3) != 0 || (sp[4] != '\0' && sp[4] != ' ')) {
            continue;
        }
        const char *p = sp;
        while (p > v && p[-1] >= '0' && p[-1] <= '9') {
            p--;
        }
        port = atoi(p);
        break;
    }
    tls_api->config_put(cfg);
    return port > 0 && port <= 65535 ? port : TLS_HTTPS_PORT;
}

int tls_site_redirect(struct mk_request *r)
{
    const struct tls_site *ts = tls_site_of(r);
    char host[256], port[8] = "";
    size_t plen = 0, qlen = 0;
    const char *path, *query;

    if (!ts || !ts->redirect) {
        return MK_OK;
    }
    if (!tls_site_host(r, host, sizeof(host))) {
        return MK_OK; /* a site without a name: nowhere to send the client */
    }
    int p = ts->redirect_port ? ts->redirect_port : tls_site_https_port();
    if (p != TLS_HTTPS_PORT) {
        snprintf(port, sizeof(port), ":%d", p);
    }
    path = tls_api->path(r, &plen);
    if (!path || plen == 0) {
        path = "/";
        plen = 1;
    }
    query = tls_api->query(r, &qlen);
    size_t cap = 8 + strlen(host) + strlen(port) + plen * 3 + (query ? qlen + 1 : 0) + 1;
    char *loc = tls_api->alloc(r, cap);
    if (!loc) {
        return 503;
    }
    size_t n = (size_t) snprintf(loc, cap, "https://%s%s", host, port);
    n += tls_path_encode(path, plen, loc + n);
    if (query) {
        loc[n++] = '?';
        memcpy(loc + n, query, qlen);
        n += qlen;
    }
    loc[n] = '\0';
    if (tls_api->add_header(r, "Location", loc) != MK_OK) {
        return 500;
    }
    return 308;
}
