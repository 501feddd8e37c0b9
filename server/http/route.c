/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * route.c: route patterns, the precedence order of a site's table, and
 * matching a request path against it (see route.h for the rules). Pure:
 * matching allocates nothing and keeps no state.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/memory.h"
#include "http.h"
#include "route.h"

_Static_assert(MK_ROUTE_GET == 1u << MK_METHOD_GET, "MK_ROUTE_GET");
_Static_assert(MK_ROUTE_HEAD == 1u << MK_METHOD_HEAD, "MK_ROUTE_HEAD");
_Static_assert(MK_ROUTE_POST == 1u << MK_METHOD_POST, "MK_ROUTE_POST");
_Static_assert(MK_ROUTE_PUT == 1u << MK_METHOD_PUT, "MK_ROUTE_PUT");
_Static_assert(MK_ROUTE_DELETE == 1u << MK_METHOD_DELETE, "MK_ROUTE_DELETE");
_Static_assert(MK_ROUTE_OPTIONS == 1u << MK_METHOD_OPTIONS, "MK_ROUTE_OPTIONS");
_Static_assert(MK_ROUTE_PATCH == 1u << MK_METHOD_PATCH, "MK_ROUTE_PATCH");
_Static_assert(MK_ROUTE_TRACE == 1u << MK_METHOD_TRACE, "MK_ROUTE_TRACE");

/* ---- patterns ------------------------------------------------------------ */

/* Does the parameter name at p (n bytes) occur among rt's earlier ones? */
static bool mk_route_name_seen(const char *pattern, const char *p, size_t n)
{
    for (const char *q = pattern; q < p; q++) {
        if (q[0] == '/' && q[1] == ':' && strncmp(q + 2, p, n) == 0 &&
            (q[2 + n] == '/' || q[2 + n] == '\0') && q + 2 != p) {
            return true;
        }
    }
    return false;
}

/* Letters, digits and '_' only. */
static bool mk_route_name_ok(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_')) {
            return false;
        }
    }
    return true;
}

int mk_route_parse(struct mk_route *rt, const char *pattern, char *err, size_t errlen)
{
    size_t len = pattern ? strlen(pattern) : 0;

    memset(rt, 0, sizeof(*rt));
    if (len == 0 || pattern[0] != '/') {
        snprintf(err, errlen, "route pattern '%s' does not start with '/'", pattern ? pattern : "");
        return MK_ERR;
    }
    if (len > MK_ROUTE_PATTERN_MAX) {
        snprintf(err, errlen, "route pattern longer than %d bytes", MK_ROUTE_PATTERN_MAX);
        return MK_ERR;
    }
    rt->kind = MK_ROUTE_EXACT;
    rt->lit_len = (uint16_t) len;
    if (len >= 2 && pattern[len - 1] == '*' && pattern[len - 2] == '/') {
        rt->kind = MK_ROUTE_PREFIX;
        len--;
        rt->lit_len = (uint16_t) len;
    }
    rt->len = (uint16_t) len;
    rt->weight = (uint16_t) len;
    for (size_t i = 0; i < len; i++) {
        if (pattern[i] == '*') {
            snprintf(err, errlen, "route pattern '%s': '*' only as its last segment", pattern);
            return MK_ERR;
        }
        if (pattern[i] != ':' || pattern[i - 1] != '/') {
            continue;
        }
        size_t n = strcspn(pattern + i + 1, "/");
        if (i + 1 + n > len) {
            n = len - i - 1;
        }
        if (n == 0 || !mk_route_name_ok(pattern + i + 1, n) ||
            mk_route_name_seen(pattern, pattern + i + 1, n)) {
            snprintf(err, errlen, "route pattern '%s': %s parameter name", pattern,
                     n == 0                                 ? "an empty"
                     : mk_route_name_ok(pattern + i + 1, n) ? "a repeated"
                                                            : "an invalid");
            return MK_ERR;
        }
        if (rt->n_params == MK_ROUTE_PARAMS_MAX) {
            snprintf(err, errlen, "route pattern '%s': more than %d parameters", pattern,
                     MK_ROUTE_PARAMS_MAX);
            return MK_ERR;
        }
        if (rt->n_params++ == 0) {
            rt->lit_len = (uint16_t) i;
        }
        rt->weight = (uint16_t) (rt->weight - n - 1);
        if (rt->kind == MK_ROUTE_EXACT) {
            rt->kind = MK_ROUTE_SEGMENTS;
        }
        i += n;
    }
    rt->pattern = mk_strdup(pattern);
    return MK_OK;
}

/* ---- the table ----------------------------------------------------------- */

int mk_routes_add(struct mk_routes *t, const struct mk_route *rt)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 8;
        t->v = mk_realloc(t->v, cap * sizeof(*t->v));
        t->cap = cap;
    }
    t->v[t->n] = *rt;
    t->v[t->n].order = (unsigned) t->n;
    t->n++;
    return MK_OK;
}

int mk_routes_copy(struct mk_routes *t, const struct mk_routes *from)
{
    for (size_t i = 0; from && i < from->n; i++) {
        struct mk_route rt = from->v[i];
        rt.pattern = mk_strdup(rt.pattern);
        mk_routes_add(t, &rt);
    }
    return MK_OK;
}

static int mk_route_cmp(const void *a, const void *b)
{
    const struct mk_route *x = a, *y = b;

    if (x->kind != y->kind) {
        return x->kind < y->kind ? -1 : 1;
    }
    if (x->weight != y->weight) {
        return x->weight > y->weight ? -1 : 1;
    }
    return x->order < y->order ? -1 : (x->order > y->order);
}

/* Same pattern but for the names of parameters? */
static bool mk_route_same_shape(const struct mk_route *a, const struct mk_route *b)
{
    const char *p = a->pattern, *q = b->pattern;

    if (a->kind != b->kind || a->n_params != b->n_params) {
        return false;
    }
    while (*p && *q) {
        if (p[0] == ':' && q[0] == ':' && p[-1] == '/' && q[-1] == '/') {
            p += strcspn(p, "/");
            q += strcspn(q, "/");
            continue;
        }
        if (*p++ != *q++) {
            return false;
        }
    }
    return *p == *q;
}

int mk_routes_finish(struct mk_routes *t, char *err, size_t errlen)
{
    if (t->n > 1) {
        qsort(t->v, t->n, sizeof(*t->v), mk_route_cmp);
    }
    for (size_t i = 0; i < t->n; i++) {
        for (size_t j = i + 1; j < t->n; j++) {
            const struct mk_route *a = &t->v[i], *b = &t->v[j];
            if ((a->methods & b->methods) && mk_route_same_shape(a, b)) {
                snprintf(err, errlen,
                         "routes '%s' (plugin %s) and '%s' (plugin %s) take the same method",
                         a->pattern, a->plugin ? a->plugin->name : "?", b->pattern,
                         b->plugin ? b->plugin->name : "?");
                return MK_ERR;
            }
        }
    }
    return MK_OK;
}

void mk_routes_free(struct mk_routes *t)
{
    if (!t) {
        return;
    }
    for (size_t i = 0; i < t->n; i++) {
        mk_free(t->v[i].pattern);
    }
    mk_free(t->v);
    memset(t, 0, sizeof(*t));
}

/* ---- matching ------------------------------------------------------------ */

/*
 * Match the pattern's segments from its first parameter on. Parameters go
 * to m (m->n_params counts them). True when the whole pattern matched: the
 * whole path too, or for a prefix, the path up to the pattern's end.
 */
static bool mk_route_match_segments(const struct mk_route *rt, const char *path, size_t len,
                                    struct mk_route_match *m)
{
    const char *p = rt->pattern + rt->lit_len, *pend = rt->pattern + rt->len;
    size_t i = rt->lit_len;

    m->n_params = 0;
    while (p < pend) {
        if (*p == ':' && p[-1] == '/') {
            size_t n = 0;
            while (i + n < len && path[i + n] != '/') {
                n++;
            }
            if (n == 0) {
                return false;
            }
            m->param[m->n_params].off = (uint16_t) i;
            m->param[m->n_params].len = (uint16_t) n;
            m->n_params++;
            i += n;
            while (p < pend && *p != '/') {
                p++;
            }
            continue;
        }
        if (i >= len || path[i] != *p) {
            return false;
        }
        i++;
        p++;
    }
    return rt->kind == MK_ROUTE_PREFIX || i == len;
}

/* Does rt's pattern match path[0, len)? Parameters go to m. */
static bool mk_route_match_path(const struct mk_route *rt, const char *path, size_t len,
                                struct mk_route_match *m)
{
    if (len < rt->lit_len || memcmp(path, rt->pattern, rt->lit_len) != 0) {
        return false;
    }
    switch (rt->kind) {
    case MK_ROUTE_EXACT:
        return len == rt->len;
    case MK_ROUTE_PREFIX:
        if (rt->n_params == 0) {
            return true;
        }
        return len <= UINT16_MAX && mk_route_match_segments(rt, path, len, m);
    default:
        return len <= UINT16_MAX && mk_route_match_segments(rt, path, len, m);
    }
}

bool mk_routes_match(const struct mk_routes *t, unsigned method, const char *path, size_t len,
                     struct mk_route_match *m)
{
    uint32_t bit = mk_route_method_bit(method);
    struct mk_route_match scratch;

    m->route = NULL;
    m->allow = 0;
    if (method == MK_METHOD_HEAD) {
        bit |= MK_ROUTE_GET; /* a GET route answers HEAD too */
    }
    for (size_t i = 0; i < t->n; i++) {
        const struct mk_route *rt = &t->v[i];
        struct mk_route_match *into = m->route ? &scratch : m;
        if (!mk_route_match_path(rt, path, len, into)) {
            continue;
        }
        m->allow |= rt->methods;
        if (!m->route && (rt->methods & bit)) {
            m->route = rt;
            if (rt->n_params == 0) {
                m->n_params = 0;
            }
        }
    }
    return m->route != NULL;
}

const char *mk_route_param(const struct mk_route_match *m, const char *path, const char *name,
                           size_t *len)
{
    const struct mk_route *rt = m->route;
    size_t n = strlen(name);
    unsigned k = 0;

    if (!rt) {
        return NULL;
    }
    for (const char *p = rt->pattern + rt->lit_len; *p && k < m->n_params; p++) {
        if (p[0] != ':' || p[-1] != '/') {
            continue;
        }
        size_t plen = strcspn(p + 1, "/");
        if (plen == n && memcmp(p + 1, name, n) == 0) {
            if (len) {
                *len = m->param[k].len;
            }
            return path + m->param[k].off;
        }
        k++;
    }
    return NULL;
}

size_t mk_route_allow_format(uint32_t allow, char *buf, size_t len)
{
    static const struct {
        uint32_t bit;
        const char *name;
    } names[] = {
        {MK_ROUTE_GET, "GET"},     {MK_ROUTE_HEAD, "HEAD"},       {MK_ROUTE_POST, "POST"},
        {MK_ROUTE_PUT, "PUT"},     {MK_ROUTE_DELETE, "DELETE"},   {MK_ROUTE_PATCH, "PATCH"},
        {MK_ROUTE_TRACE, "TRACE"}, {MK_ROUTE_OPTIONS, "OPTIONS"},
    };
    size_t n = 0;

    if (allow & MK_ROUTE_GET) {
        allow |= MK_ROUTE_HEAD;
    }
    allow |= MK_ROUTE_OPTIONS;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (allow & names[i].bit) {
            int w = snprintf(buf + n, len - n, "%s%s", n ? ", " : "", names[i].name);
            if (w < 0 || (size_t) w >= len - n) {
                break;
            }
            n += (size_t) w;
        }
    }
    return n;
}
