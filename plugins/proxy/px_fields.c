/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * px_fields.c: the rewriting of Location, Refresh and Set-Cookie, the
 * proxy's Forwarded element, and the fields RequestHeader and
 * ResponseHeader may not touch (px_fields.h). Pure: no I/O, no
 * allocation, no globals.
 */
#include <string.h>
#include <strings.h>

#include "px_fields.h"
#include "px_http.h"

/* An output buffer: bytes appended while they fit; `over` once one did not. */
struct px_out {
    char *p;
    size_t len, cap;
    bool over;
};

static void px_out_put(struct px_out *o, const char *s, size_t n)
{
    if (!o->over && !px_push(o->p, o->cap, &o->len, s, n)) {
        o->over = true;
    }
}

static long px_out_end(const struct px_out *o)
{
    return o->over ? -1 : (long) o->len;
}

static bool px_ws(char c)
{
    return c == ' ' || c == '\t';
}

/* The URL u[0..len) with the first matching prefix map applied, into o. */
static void px_prefix_put(struct px_out *o, const char *u, size_t len, const struct px_map *m,
                          size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (m[i].from_len <= len && memcmp(u, m[i].from, m[i].from_len) == 0) {
            px_out_put(o, m[i].to, m[i].to_len);
            px_out_put(o, u + m[i].from_len, len - m[i].from_len);
            return;
        }
    }
    px_out_put(o, u, len);
}

long px_location_rewrite(const char *v, size_t len, const struct px_map *m, size_t n, char *out,
                         size_t cap)
{
    struct px_out o = {out, 0, cap, false};
    px_prefix_put(&o, v, len, m, n);
    return px_out_end(&o);
}

long px_refresh_rewrite(const char *v, size_t len, const struct px_map *m, size_t n, char *out,
                        size_t cap)
{
    struct px_out o = {out, 0, cap, false};
    size_t i = 0;

    while (i < len && v[i] != ';' && v[i] != ',') {
        i++; /* the delay */
    }
    if (i == len) {
        px_out_put(&o, v, len);
        return px_out_end(&o);
    }
    i++;
    while (i < len && px_ws(v[i])) {
        i++;
    }
    if (len - i >= 3 && strncasecmp(v + i, "url", 3) == 0) {
        size_t k = i + 3;
        while (k < len && px_ws(v[k])) {
            k++;
        }
        if (k < len && v[k] == '=') {
            k++;
            while (k < len && px_ws(v[k])) {
                k++;
            }
            i = k;
        }
    }
    size_t end = len;
    if (i < len && (v[i] == '\'' || v[i] == '"')) {
        const char *close = memchr(v + i + 1, v[i], len - i - 1);
        i++;
        if (close) {
            end = (size_t) (close - v);
        }
    }
    px_out_put(&o, v, i);
    px_prefix_put(&o, v + i, end - i, m, n);
    px_out_put(&o, v + end, len - end);
    return px_out_end(&o);
}

/* The map whose `from` equals s[0..len) (any case when `nocase`), or NULL. */
static const struct px_map *px_exact(const char *s, size_t len, const struct px_map *m, size_t n,
                                     bool nocase)
{
    for (size_t i = 0; i < n; i++) {
        if (m[i].from_len == len &&
            (nocase ? strncasecmp(s, m[i].from, len) == 0 : memcmp(s, m[i].from, len) == 0)) {
            return &m[i];
        }
    }
    return NULL;
}

long px_cookie_rewrite(const char *v, size_t len, const struct px_map *paths, size_t np,
                       const struct px_map *domains, size_t nd, char *out, size_t cap)
{
    struct px_out o = {out, 0, cap, false};
    const char *semi = memchr(v, ';', len);
    size_t i = semi ? (size_t) (semi - v) : len;

    px_out_put(&o, v, i); /* the cookie's own name=value */
    while (i < len) {
        /* v[i] is the ';' that opens an attribute */
        size_t start = i + 1;
        const char *next = memchr(v + start, ';', len - start);
        size_t stop = next ? (size_t) (next - v) : len;
        size_t a = start;
        while (a < stop && px_ws(v[a])) {
            a++;
        }
        const char *eq = memchr(v + a, '=', stop - a);
        const struct px_map *hit = NULL;
        size_t vs = 0, ve = 0;
        if (eq) {
            size_t ne = (size_t) (eq - v);
            while (ne > a && px_ws(v[ne - 1])) {
                ne--;
            }
            vs = (size_t) (eq - v) + 1;
            while (vs < stop && px_ws(v[vs])) {
                vs++;
            }
            ve = stop;
            while (ve > vs && px_ws(v[ve - 1])) {
                ve--;
            }
            if (ne - a == 4 && strncasecmp(v + a, "path", 4) == 0) {
                hit = px_exact(v + vs, ve - vs, paths, np, false);
            }
            else if (ne - a == 6 && strncasecmp(v + a, "domain", 6) == 0) {
                hit = px_exact(v + vs, ve - vs, domains, nd, true);
            }
        }
        if (hit) {
            px_out_put(&o, v + i, vs - i);
            px_out_put(&o, hit->to, hit->to_len);
            px_out_put(&o, v + ve, stop - ve);
        }
        else {
            px_out_put(&o, v + i, stop - i);
        }
        i = stop;
    }
    return px_out_end(&o);
}

long px_forwarded_element(const char *addr, const char *proto, const char *host, size_t hlen,
                          char *out, size_t cap)
{
    struct px_out o = {out, 0, cap, false};
    size_t alen = addr ? strlen(addr) : 0;
    bool ip = alen > 0;

    for (size_t i = 0; i < alen; i++) {
        char c = addr[i];
        ip &= (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
              c == '.' || c == ':';
    }
    px_out_put(&o, "for=", 4);
    if (!ip) {
        px_out_put(&o, "unknown", 7);
    }
    else if (memchr(addr, ':', alen)) {
        px_out_put(&o, "\"[", 2);
        px_out_put(&o, addr, alen);
        px_out_put(&o, "]\"", 2);
    }
    else {
        px_out_put(&o, addr, alen);
    }
    if (proto) {
        px_out_put(&o, ";proto=", 7);
        px_out_put(&o, proto, strlen(proto));
    }
    if (host && hlen > 0 && px_field_value_ok(host, hlen) && !memchr(host, '\t', hlen)) {
        bool token = true;
        for (size_t i = 0; i < hlen && token; i++) {
            token = px_tchar((unsigned char) host[i]);
        }
        px_out_put(&o, ";host=", 6);
        if (token) {
            px_out_put(&o, host, hlen);
        }
        else {
            px_out_put(&o, "\"", 1);
            for (size_t i = 0; i < hlen; i++) {
                if (host[i] == '"' || host[i] == '\\') {
                    px_out_put(&o, "\\", 1);
                }
                px_out_put(&o, host + i, 1);
            }
            px_out_put(&o, "\"", 1);
        }
    }
    return px_out_end(&o);
}

bool px_field_name_ok(const char *name, size_t len)
{
    if (len == 0) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (!px_tchar((unsigned char) name[i])) {
            return false;
        }
    }
    return true;
}

bool px_field_value_ok(const char *v, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) v[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            return false;
        }
    }
    return true;
}

static bool px_is(const char *name, size_t len, const char *lit)
{
    return len == strlen(lit) && strncasecmp(name, lit, len) == 0;
}

const char *px_field_refused(const char *name, size_t len, bool response)
{
    if (px_hop_by_hop(name, len)) {
        return "a hop-by-hop field, the proxy's own on each connection";
    }
    if (px_is(name, len, "content-length")) {
        return "the message's framing, decided by the proxy";
    }
    if (!response && px_is(name, len, "host")) {
        return "Host is set with the Host key";
    }
    if (!response && px_is(name, len, "expect")) {
        return "Expect is answered by the server itself";
    }
    if (response && (px_is(name, len, "date") || px_is(name, len, "server"))) {
        return "the server sets it on every response";
    }
    if (response && px_is(name, len, "status")) {
        return "the status comes from the upstream's status line";
    }
    return NULL;
}
