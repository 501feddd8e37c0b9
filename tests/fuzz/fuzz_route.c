/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_route.c: libFuzzer target for server/http/route.c, a site's route table:
 * the patterns handlers register (mk_route_parse, mk_routes_finish) and the
 * request path and method matched against them (mk_routes_match,
 * mk_route_param), which the client chooses.
 *
 * Input: a method byte (enum mk_http_method, modulo 10), then route lines
 * up to the first NUL, each a byte of MK_ROUTE_* bits (shifted right by
 * one: GET is bit 0; none is GET) followed by a pattern, separated by '\n'
 * (12 routes at most); what follows the
 * NUL is the path. Invariants (each a crash when broken):
 *  - a pattern is accepted exactly when a model of route.h's rules says so
 *    (a leading '/', at most 512 bytes, '*' only as a last "/ *" segment,
 *    at most 8 ":name" segments, each name 1+ of [A-Za-z0-9_] and
 *    distinct), with the kind, the number of parameters and the weight
 *    (literal bytes) the model gives;
 *  - mk_routes_finish refuses a table exactly when two routes have the same
 *    shape (the pattern with every ":name" as ':') and a method in common;
 *  - matching agrees with a model that compares segments (split at '/'):
 *    allow is the union of the methods of the routes whose pattern matches
 *    the path, and the route taken is the one of highest precedence (exact,
 *    then segments, then prefix; more literal bytes; registration order)
 *    among those whose methods hold the method (GET for HEAD);
 *  - each parameter of the route taken is a non-empty slice of the path
 *    without '/', the path segment the model finds for it, and
 *    mk_route_param gives it by name.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <monkey/mk_common.h>

#include "server/http/http.h"
#include "server/http/route.h"

#include "fuzz_check.h"

#define MAX_ROUTES 12

/* ---- the model ------------------------------------------------------------------------ */

/* The n-th '/'-separated segment of s[0, len) (the first is before the first '/'). */
static bool segment(const char *s, size_t len, unsigned n, const char **seg, size_t *seg_len)
{
    size_t start = 0;
    for (unsigned k = 0; k < n; k++) {
        const char *slash = memchr(s + start, '/', len - start);
        if (!slash) {
            return false;
        }
        start = (size_t) (slash - s) + 1;
    }
    const char *slash = memchr(s + start, '/', len - start);
    *seg = s + start;
    *seg_len = slash ? (size_t) (slash - (s + start)) : len - start;
    return true;
}

static unsigned count_slashes(const char *s, size_t len)
{
    unsigned c = 0;
    for (size_t i = 0; i < len; i++) {
        c += s[i] == '/';
    }
    return c;
}

static bool is_param(const char *seg, size_t len)
{
    return len >= 1 && seg[0] == ':';
}

/* The pattern's part matched as text: without the '*' of a prefix pattern. */
static size_t model_base(const char *pattern, bool *prefix)
{
    size_t len = strlen(pattern);
    *prefix = len >= 2 && pattern[len - 1] == '*' && pattern[len - 2] == '/';
    return *prefix ? len - 1 : len;
}

/* Does route.h accept the pattern? Its parameters and weight when it does. */
static bool model_accepts(const char *pattern, unsigned *n_params, unsigned *weight)
{
    bool prefix;
    size_t len = strlen(pattern);
    size_t base = model_base(pattern, &prefix);

    if (len == 0 || pattern[0] != '/' || len > MK_ROUTE_PATTERN_MAX || memchr(pattern, '*', base)) {
        return false;
    }
    *n_params = 0;
    *weight = (unsigned) base;
    unsigned segs = count_slashes(pattern, base) + 1;
    for (unsigned k = 1; k < segs; k++) {
        const char *seg;
        size_t sl;
        segment(pattern, base, k, &seg, &sl);
        if (!is_param(seg, sl)) {
            continue;
        }
        if (sl == 1 || ++*n_params > MK_ROUTE_PARAMS_MAX) {
            return false;
        }
        for (size_t i = 1; i < sl; i++) {
            char c = seg[i];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_')) {
                return false;
            }
        }
        for (unsigned j = 1; j < k; j++) {
            const char *other;
            size_t ol;
            segment(pattern, base, j, &other, &ol);
            if (ol == sl && memcmp(other, seg, sl) == 0) {
                return false; /* a repeated name */
            }
        }
        *weight -= (unsigned) sl;
    }
    return true;
}

/*
 * Does the pattern match path[0, len)? A prefix pattern matches the path
 * up to as many '/' as it has. Parameters' slices go to off/plen in order.
 */
static bool model_match(const char *pattern, const char *path, size_t len, size_t *off,
                        size_t *plen)
{
    bool prefix;
    size_t base = model_base(pattern, &prefix);
    unsigned segs = count_slashes(pattern, base) + 1;
    unsigned n = 0;

    if (prefix) {
        /* the path up to and including its (segs - 1)-th '/' */
        size_t cut = 0;
        for (unsigned k = 0; k + 1 < segs; k++) {
            const char *slash = memchr(path + cut, '/', len - cut);
            if (!slash) {
                return false;
            }
            cut = (size_t) (slash - path) + 1;
        }
        len = cut;
    }
    if (count_slashes(path, len) + 1 != segs) {
        return false;
    }
    for (unsigned k = 0; k < segs; k++) {
        const char *ps, *xs;
        size_t pl, xl;
        segment(pattern, base, k, &ps, &pl);
        segment(path, len, k, &xs, &xl);
        if (k > 0 && is_param(ps, pl)) {
            if (xl == 0) {
                return false;
            }
            off[n] = (size_t) (xs - path);
            plen[n] = xl;
            n++;
        }
        else if (pl != xl || memcmp(ps, xs, pl) != 0) {
            return false;
        }
    }
    return true;
}

/* The pattern with each ":name" segment as ':' (into out, NUL terminated). */
static void model_shape(const char *pattern, char *out)
{
    size_t o = 0;
    for (size_t i = 0; pattern[i];) {
        if (pattern[i] == ':' && i > 0 && pattern[i - 1] == '/') {
            out[o++] = ':';
            while (pattern[i] && pattern[i] != '/') {
                i++;
            }
            continue;
        }
        out[o++] = pattern[i++];
    }
    out[o] = '\0';
}

/* Is a of higher precedence than b? */
static bool precedes(const struct mk_route *a, const struct mk_route *b)
{
    if (a->kind != b->kind) {
        return a->kind < b->kind;
    }
    if (a->weight != b->weight) {
        return a->weight > b->weight;
    }
    return a->order < b->order;
}

/* ---- the target ----------------------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mk_routes t = {0};
    char err[1024];

    if (size < 1) {
        return 0;
    }
    unsigned method = data[0] % 10;
    const char *in = (const char *) data + 1;
    size_t n = size - 1;
    const char *nul = memchr(in, '\0', n);
    size_t routes_len = nul ? (size_t) (nul - in) : n;
    size_t path_len = nul ? n - routes_len - 1 : 0;
    /* the path in a buffer of its exact size: a read past it is seen */
    char *path = malloc(path_len ? path_len : 1);
    memcpy(path, nul ? nul + 1 : in, path_len);

    const char *line = in, *end = in + routes_len;
    while (line < end && t.n < MAX_ROUTES) {
        const char *lf = memchr(line, '\n', (size_t) (end - line));
        size_t ll = lf ? (size_t) (lf - line) : (size_t) (end - line);
        if (ll >= 1) {
            char pattern[MK_ROUTE_PATTERN_MAX + 8];
            size_t pl = ll - 1 < sizeof(pattern) - 1 ? ll - 1 : sizeof(pattern) - 1;
            memcpy(pattern, line + 1, pl);
            pattern[pl] = '\0';
            struct mk_route rt;
            unsigned n_params = 0, weight = 0;
            bool want = model_accepts(pattern, &n_params, &weight);
            int rc = mk_route_parse(&rt, pattern, err, sizeof(err));
            MK_FUZZ_CHECK((rc == MK_OK) == want);
            if (rc == MK_OK) {
                bool prefix;
                model_base(pattern, &prefix);
                MK_FUZZ_CHECK(rt.n_params == n_params && rt.weight == weight);
                MK_FUZZ_CHECK(rt.kind == (prefix     ? MK_ROUTE_PREFIX
                                          : n_params ? MK_ROUTE_SEGMENTS
                                                     : MK_ROUTE_EXACT));
                MK_FUZZ_CHECK(strcmp(rt.pattern, pattern) == 0);
                rt.methods = (uint32_t) (unsigned char) line[0] << 1;
                rt.methods = rt.methods ? rt.methods : MK_ROUTE_GET;
                mk_routes_add(&t, &rt);
            }
        }
        line += ll + 1;
    }

    /* the same shape with a method in common: refused */
    bool clash = false;
    for (size_t i = 0; i < t.n; i++) {
        for (size_t j = i + 1; j < t.n; j++) {
            char a[MK_ROUTE_PATTERN_MAX + 8], b[MK_ROUTE_PATTERN_MAX + 8];
            model_shape(t.v[i].pattern, a);
            model_shape(t.v[j].pattern, b);
            clash |= (t.v[i].methods & t.v[j].methods) && t.v[i].kind == t.v[j].kind &&
                     strcmp(a, b) == 0;
        }
    }
    int fin = mk_routes_finish(&t, err, sizeof(err));
    MK_FUZZ_CHECK((fin != MK_OK) == clash);
    if (fin != MK_OK) {
        mk_routes_free(&t);
        free(path);
        return 0;
    }

    struct mk_route_match m;
    uint32_t bit = mk_route_method_bit(method) | (method == MK_METHOD_HEAD ? MK_ROUTE_GET : 0);
    bool found = mk_routes_match(&t, method, path, path_len, &m);
    uint32_t allow = 0;
    const struct mk_route *best = NULL;
    size_t best_off[MK_ROUTE_PARAMS_MAX], best_len[MK_ROUTE_PARAMS_MAX];
    for (size_t i = 0; i < t.n; i++) {
        size_t off[MK_ROUTE_PARAMS_MAX], plen[MK_ROUTE_PARAMS_MAX];
        /* the matcher reads paths of up to 65535 bytes with parameters */
        if (!model_match(t.v[i].pattern, path, path_len, off, plen) ||
            (t.v[i].n_params && path_len > UINT16_MAX)) {
            continue;
        }
        allow |= t.v[i].methods;
        if ((t.v[i].methods & bit) && (!best || precedes(&t.v[i], best))) {
            best = &t.v[i];
            memcpy(best_off, off, sizeof(off));
            memcpy(best_len, plen, sizeof(plen));
        }
    }
    MK_FUZZ_CHECK(m.allow == allow);
    MK_FUZZ_CHECK(found == (best != NULL) && m.route == best);
    if (best) {
        MK_FUZZ_CHECK(m.n_params == best->n_params);
        const char *p = best->pattern;
        for (unsigned k = 0; k < m.n_params; k++) {
            MK_FUZZ_CHECK(m.param[k].off == best_off[k] && m.param[k].len == best_len[k]);
            MK_FUZZ_CHECK(m.param[k].len > 0 &&
                          !memchr(path + m.param[k].off, '/', m.param[k].len));
            /* the k-th ":name" of the pattern, by name */
            while (!(p[0] == '/' && p[1] == ':')) {
                p++;
            }
            p += 2;
            size_t nl = strcspn(p, "/*");
            char name[MK_ROUTE_PATTERN_MAX];
            memcpy(name, p, nl);
            name[nl] = '\0';
            size_t vlen = 0;
            const char *v = mk_route_param(&m, path, name, &vlen);
            MK_FUZZ_CHECK(v == path + best_off[k] && vlen == best_len[k]);
        }
    }
    MK_FUZZ_CHECK(mk_route_param(&m, path, "", NULL) == NULL);
    mk_routes_free(&t);
    free(path);
    return 0;
}
