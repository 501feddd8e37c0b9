/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fcgi_conf.c: the FastCGI plugin's declared keys. fastcgi.conf holds the
 * limits shared by every site; a site's [FASTCGI] section names its
 * backends and which paths they run. Backends are checked for form only
 * (monkey -t does not need them up): a unix socket path, or an IP address
 * (or localhost) and a port.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

#include "fastcgi.h"

/* "unix:/path", "HOST:PORT", "[IPV6]:PORT" into *a; NULL or why not. */
static const char *fcgi_parse_addr(const char *v, struct fcgi_addr *a)
{
    memset(a, 0, sizeof(*a));
    if (strncmp(v, "unix:", 5) == 0) {
        struct sockaddr_un *un = (struct sockaddr_un *) &a->sa;
        const char *path = v + 5;
        if (path[0] != '/') {
            return "a unix socket needs an absolute path";
        }
        if (strlen(path) >= sizeof(un->sun_path)) {
            return "the unix socket path is too long";
        }
        un->sun_family = AF_UNIX;
        strcpy(un->sun_path, path);
        a->len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1);
        return NULL;
    }
    const char *colon = strrchr(v, ':');
    if (!colon || colon == v) {
        return "expected unix:/path or HOST:PORT";
    }
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || port < 1 || port > 65535) {
        return "bad port";
    }
    char host[64];
    size_t hlen = (size_t) (colon - v);
    if (v[0] == '[') {
        if (hlen < 3 || v[hlen - 1] != ']') {
            return "bad [IPv6] address";
        }
        v++;
        hlen -= 2;
    }
    if (hlen >= sizeof(host)) {
        return "bad address";
    }
    memcpy(host, v, hlen);
    host[hlen] = '\0';
    struct sockaddr_in *in4 = (struct sockaddr_in *) &a->sa;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &a->sa;
    if (strcasecmp(host, "localhost") == 0 || inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        if (strcasecmp(host, "localhost") == 0) {
            in4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        }
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t) port);
        a->len = sizeof(*in4);
        return NULL;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t) port);
        a->len = sizeof(*in6);
        return NULL;
    }
    return "not an IP address, localhost or unix:/path";
}

static int fcgi_set_backend(void *obj, const struct mk_conf_key *k, const char *value,
                            const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct fcgi_site_conf *sc = obj;
    struct fcgi_addr a;

    (void) k;
    (void) origin;
    const char *why = fcgi_parse_addr(value, &a);
    if (why) {
        snprintf(reason, len, "%s: '%s'", why, value);
        return MK_ERR;
    }
    if (sc->n_backends == FCGI_BACKENDS_MAX) {
        snprintf(reason, len, "more than %d backends", FCGI_BACKENDS_MAX);
        return MK_ERR;
    }
    struct fcgi_addr *v = realloc(sc->backends, (sc->n_backends + 1) * sizeof(*v));
    if (!v || !(a.text = strdup(value))) {
        if (v) {
            sc->backends = v;
        }
        snprintf(reason, len, "out of memory");
        return MK_ERR;
    }
    sc->backends = v;
    v[sc->n_backends++] = a;
    return MK_OK;
}

static int fcgi_set_match(void *obj, const struct mk_conf_key *k, const char *value,
                          const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct fcgi_site_conf *sc = obj;

    (void) k;
    (void) origin;
    return mk_gw_match_add(&sc->matches, &sc->n_matches, value, reason, len);
}

static void fcgi_schema_free(void *obj, int site)
{
    struct fcgi_site_conf *sc = obj;

    if (!site) {
        return;
    }
    for (size_t i = 0; i < sc->n_backends; i++) {
        free(sc->backends[i].text);
    }
    free(sc->backends);
    for (size_t i = 0; i < sc->n_matches; i++) {
        regfree(&sc->matches[i]);
    }
    free(sc->matches);
}

/* A site with Match needs a Backend, and the other way round. */
static int fcgi_schema_finish(void *obj, int site, const char **key, char *reason, size_t len)
{
    const struct fcgi_site_conf *sc = obj;

    if (!site || (sc->n_backends > 0) == (sc->n_matches > 0)) {
        return MK_OK;
    }
    *key = sc->n_backends ? "Backend" : "Match";
    snprintf(reason, len, "%s",
             sc->n_backends ? "a Backend without Match runs nothing"
                            : "Match needs at least one Backend");
    return MK_ERR;
}

#define FCGI_G(m) MK_CONF_FIELD(struct fcgi_conf, m)

static const struct mk_conf_key fcgi_keys[] = {
    {"MaxConnections", MK_CONF_INT, 0, FCGI_G(max_conns), 0, 4096, "0",
     .doc = "connections to one backend, all workers together; more requests wait in a queue. "
            "0: as many as the backend says it takes (FCGI_GET_VALUES), else 32 checked or 4"},
    {"AcceptTimeout", MK_CONF_DURATION, 0, FCGI_G(accept_ms), 1, 3600000, "3",
     .doc = "time a new connection may wait for the backend to take it; past it, closed unused "
            "and the backend's limit lowered"},
    {"QueueTimeout", MK_CONF_DURATION, 0, FCGI_G(queue_timeout_ms), 1, 3600000, "5",
     .doc = "time a request waits for a connection; past it 503"},
    {"Timeout", MK_CONF_DURATION, 0, FCGI_G(timeout_ms), 1, 3600000, "30",
     .doc = "time the backend may stay silent; past it 504"},
    {"DownTime", MK_CONF_DURATION, 0, FCGI_G(down_ms), 1, 3600000, "5",
     .doc = "time a backend that refused is skipped"},
    {"Backend", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI, 0, 0, 0, 0, NULL,
     .set = fcgi_set_backend, .doc = "unix:/path or HOST:PORT of a FastCGI application"},
    {"Match", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI, 0, 0, 0, 0, NULL, .set = fcgi_set_match,
     .doc = "regular expression of script paths under the document root"},
    {"XSendfile", MK_CONF_BOOL, MK_CONF_SITE, MK_CONF_FIELD(struct fcgi_site_conf, xsendfile), 0, 0,
     "Off",
     .doc = "answer X-Sendfile (a file path) and X-Accel-Redirect (a URL path) with that file of "
            "the document root"},
    {NULL},
};

const struct mk_conf_schema fcgi_schema = {
    .section = "FASTCGI",
    .file = "fastcgi.conf",
    .keys = fcgi_keys,
    .size = sizeof(struct fcgi_conf),
    .site_size = sizeof(struct fcgi_site_conf),
    .free = fcgi_schema_free,
    .finish = fcgi_schema_finish,
};
