/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * config.c: control.conf (Socket, Mode, HttpPath, MetricsPath, HttpAllow) as declared
 * keys, checked by the server with the file and line of every error.
 */
#include <stdio.h>
#include <string.h>

#include "control.h"

/* The default HttpAllow: loopback only. */
static void control_allow_loopback(struct control_settings *s)
{
    mk_cidr_parse("127.0.0.0/8", 11, &s->allow[0]);
    mk_cidr_parse("::1/128", 7, &s->allow[1]);
    s->n_allow = 2;
}

/*
 * Is p an HttpPath: "/" then printable characters, no space, '?', '#', '%'
 * or '*', no segment starting with ':' (it is a route: those would make a
 * pattern of it)?
 */
static bool control_http_path_ok(const char *path)
{
    size_t len = strlen(path);

    if (path[0] != '/' || len > CONTROL_HTTP_PATH_MAX) {
        return false;
    }
    for (const char *p = path; *p; p++) {
        if (*p <= ' ' || *p >= 0x7f || *p == '?' || *p == '#' || *p == '%' || *p == '*') {
            return false;
        }
    }
    if (strstr(path, "//") || strstr(path, "/./") || strstr(path, "/../") || strstr(path, "/:")) {
        return false;
    }
    /* A trailing "/." or "/.." is not normalised either. */
    return !(len >= 2 && strcmp(path + len - 2, "/.") == 0) &&
           !(len >= 3 && strcmp(path + len - 3, "/..") == 0);
}

/* Socket PATH: absolute, or relative to the configuration directory. */
static int control_set_socket(void *obj, const struct mk_conf_key *k, const char *value,
                              const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct control_settings *s = obj;
    int n;

    (void) k;
    if (value[0] == '/' || !origin->confdir) {
        n = snprintf(s->socket_path, sizeof(s->socket_path), "%s", value);
    }
    else {
        n = snprintf(s->socket_path, sizeof(s->socket_path), "%s/%s", origin->confdir, value);
    }
    size_t plen = strlen(s->socket_path);
    if (n < 0 || (size_t) n >= sizeof(s->socket_path) || plen == 0 ||
        s->socket_path[plen - 1] == '/') {
        snprintf(reason, len, "'%s': not a file path", value);
        return MK_ERR;
    }
    if (strncmp(origin->where, "built-in default", 16) == 0) {
        snprintf(s->socket_where, sizeof(s->socket_where), "%s%s (default Socket %s)",
                 origin->confdir ? origin->confdir : "control",
                 origin->confdir ? "/plugins/control.conf" : "", value);
    }
    else {
        snprintf(s->socket_where, sizeof(s->socket_where), "%s", origin->where);
    }
    return MK_OK;
}

/* Mode: octal digits, at most 0777. */
static int control_set_mode(void *obj, const struct mk_conf_key *k, const char *value,
                            const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct control_settings *s = obj;
    unsigned v = 0;
    bool ok = *value && strlen(value) <= 4;

    (void) k;
    (void) origin;
    for (const char *p = value; ok && *p; p++) {
        ok = *p >= '0' && *p <= '7';
        v = v * 8 + (unsigned) (*p - '0');
    }
    if (!ok || v > 0777) {
        snprintf(reason, len, "'%s': octal permissions expected (0000 to 0777)", value);
        return MK_ERR;
    }
    s->mode = (mode_t) v;
    return MK_OK;
}

static int control_set_http_path(void *obj, const struct mk_conf_key *k, const char *value,
                                 const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct control_settings *s = obj;

    (void) k;
    (void) origin;
    if (!control_http_path_ok(value)) {
        snprintf(reason, len, "'%s': a normalised path starting with '/' expected", value);
        return MK_ERR;
    }
    snprintf(s->http_path, sizeof(s->http_path), "%s", value);
    return MK_OK;
}

/* MetricsPath PATH: as HttpPath; refused by a build without metrics. */
static int control_set_metrics_path(void *obj, const struct mk_conf_key *k, const char *value,
                                    const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct control_settings *s = obj;

    (void) k;
    (void) origin;
#ifndef CONTROL_HAVE_METRICS
    (void) s;
    (void) value;
    snprintf(reason, len, "this server was built without metrics (MK_METRICS)");
    return MK_ERR;
#else
    if (!control_http_path_ok(value)) {
        snprintf(reason, len, "'%s': a normalised path starting with '/' expected", value);
        return MK_ERR;
    }
    snprintf(s->metrics_path, sizeof(s->metrics_path), "%s", value);
    return MK_OK;
#endif
}

/* HttpAllow BLOCK...: the first line replaces the loopback default, later ones add. */
static int control_set_allow(void *obj, const struct mk_conf_key *k, const char *value,
                             const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct control_settings *s = obj;
    char list[1024], *save = NULL;

    (void) k;
    (void) origin;
    if (!s->allow_given) {
        s->n_allow = 0;
    }
    s->allow_given = true;
    snprintf(list, sizeof(list), "%s", value);
    for (char *tok = strtok_r(list, " \t,", &save); tok; tok = strtok_r(NULL, " \t,", &save)) {
        if (s->n_allow == CONTROL_ALLOW_MAX) {
            snprintf(reason, len, "more than %d address blocks", CONTROL_ALLOW_MAX);
            return MK_ERR;
        }
        if (mk_cidr_parse(tok, strlen(tok), &s->allow[s->n_allow]) != MK_CIDR_OK) {
            snprintf(reason, len, "'%s': an address or ADDRESS/BITS expected", tok);
            return MK_ERR;
        }
        s->n_allow++;
    }
    return MK_OK;
}

/* The keys together: two paths apart; HttpAllow needs a path and an address. */
static int control_finish(void *obj, int site, const char **key, char *reason, size_t len)
{
    struct control_settings *s = obj;

    (void) site;
    if (s->http_path[0] && strcmp(s->http_path, s->metrics_path) == 0) {
        *key = "MetricsPath";
        snprintf(reason, len, "'%s' is the HttpPath too", s->metrics_path);
        return MK_ERR;
    }
    if (!s->allow_given) {
        control_allow_loopback(s);
        return MK_OK;
    }
    *key = "HttpAllow";
    if (!s->http_path[0] && !s->metrics_path[0]) {
        snprintf(reason, len, "HttpAllow without HttpPath or MetricsPath");
        return MK_ERR;
    }
    if (s->n_allow == 0) {
        snprintf(reason, len, "HttpAllow lists no address");
        return MK_ERR;
    }
    return MK_OK;
}

/*
 * control.conf, read by the server into every configuration it builds (a
 * missing file: every default). Socket and Mode are used at start only.
 */
static const struct mk_conf_key control_keys[] = {
    {"Socket", MK_CONF_CUSTOM, 0, 0, 0, 0, 0, CONTROL_DEFAULT_SOCKET, .set = control_set_socket},
    {"Mode", MK_CONF_CUSTOM, 0, 0, 0, 0, 0, "0600", .set = control_set_mode},
    {"HttpPath", MK_CONF_CUSTOM, 0, 0, 0, 0, 0, NULL, .set = control_set_http_path},
    {"MetricsPath", MK_CONF_CUSTOM, 0, 0, 0, 0, 0, NULL, .set = control_set_metrics_path},
    {"HttpAllow", MK_CONF_CUSTOM, MK_CONF_MULTI, 0, 0, 0, 0, NULL, .set = control_set_allow},
    {NULL},
};

const struct mk_conf_schema control_schema = {
    .section = "CONTROL",
    .file = "control.conf",
    .keys = control_keys,
    .size = sizeof(struct control_settings),
    .finish = control_finish,
};
