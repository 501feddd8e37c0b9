/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/session_parse.c: the pure parsers of the session stores: a store
 * address (SessionStore, the redis package's connect) and the name=value
 * pairs of a Cookie header (also cookie->get's). No I/O, no allocation, no globals
 * (tests/unit/duda/test_session_parse.c, tests/fuzz/fuzz_duda_session.c).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session_parse.h"

int duda_session_parse_redis_url(const char *url, char *host, size_t hostlen, int *port, int *db,
                                 char *err, size_t errlen)
{
    const char *p, *end;
    size_t n;

    *port = 6379;
    *db = 0;
    if (!url || strncmp(url, "redis://", 8) != 0) {
        snprintf(err, errlen, "'%s' is not a redis://host[:port][/db] address", url ? url : "");
        return -1;
    }
    p = url + 8;
    if (*p == '[') {
        end = strchr(p, ']');
        if (!end) {
            snprintf(err, errlen, "'%s': no ']' after the IPv6 address", url);
            return -1;
        }
        n = (size_t) (end - p - 1);
        p++;
        end++;
    }
    else {
        end = p + strcspn(p, ":/");
        n = (size_t) (end - p);
    }
    if (n == 0 || n >= hostlen) {
        snprintf(err, errlen, "'%s': no host, or a host too long", url);
        return -1;
    }
    memcpy(host, p, n);
    host[n] = '\0';
    p = end;
    if (*p == ':') {
        char *e;
        long v = strtol(p + 1, &e, 10);
        if (e == p + 1 || v < 1 || v > 65535 || (*e && *e != '/')) {
            snprintf(err, errlen, "'%s': the port is not a number from 1 to 65535", url);
            return -1;
        }
        *port = (int) v;
        p = e;
    }
    if (*p == '/' && p[1]) {
        char *e;
        long v = strtol(p + 1, &e, 10);
        if (e == p + 1 || *e || v < 0 || v > 1000000) {
            snprintf(err, errlen, "'%s': the database is not a number from 0", url);
            return -1;
        }
        *db = (int) v;
        p = e;
    }
    else if (*p == '/') {
        p++;
    }
    if (*p) {
        snprintf(err, errlen, "'%s': unexpected '%s' after the host", url, p);
        return -1;
    }
    return 0;
}

/*
 * The next name=value pair of the Cookie header rest [*h, *h + *n) into
 * out, moving past it: false when none is left. Pieces without '=' or with
 * an empty name are skipped; ' ', '\t' and ';' separate pieces.
 */
static bool duda_cookie_next(const char **h, size_t *n, struct duda_cookie_pair *out)
{
    while (*n) {
        while (*n && (**h == ' ' || **h == ';' || **h == '\t')) {
            (*h)++, (*n)--;
        }
        const char *semi = memchr(*h, ';', *n);
        size_t pn = semi ? (size_t) (semi - *h) : *n;
        const char *eq = memchr(*h, '=', pn);
        const char *piece = *h;
        *h += pn;
        *n -= pn;
        if (eq && eq > piece) {
            out->name = piece;
            out->name_len = (size_t) (eq - piece);
            out->value = eq + 1;
            out->value_len = pn - out->name_len - 1;
            return true;
        }
    }
    return false;
}

size_t duda_session_parse_cookie_pairs(const char *h, size_t n, struct duda_cookie_pair *out,
                                       size_t max)
{
    size_t found = 0;

    while (found < max && duda_cookie_next(&h, &n, &out[found])) {
        found++;
    }
    return found;
}

const char *duda_session_parse_cookie_find(const char *h, size_t n, const char *name,
                                           size_t name_len, size_t *value_len)
{
    struct duda_cookie_pair p;

    while (duda_cookie_next(&h, &n, &p)) {
        if (p.name_len == name_len && memcmp(p.name, name, name_len) == 0) {
            *value_len = p.value_len;
            return p.value;
        }
    }
    return NULL;
}
