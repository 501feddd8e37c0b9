/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * route.h: the route table of a site. Content handlers register a method
 * set and a path pattern (api->route_add); a request's decoded, normalised
 * path is matched against the table after the request hooks and before the
 * content hooks (request.c).
 *
 * Patterns (checked by mk_route_parse):
 *   /status              exact: that path only
 *   /users/:id/posts     segments: a ":name" segment matches one non-empty
 *                        segment of the path and is read back by name
 *   /files/ *            prefix (written without the space): "/files/" and
 *                        every path beneath it; may follow ":name" segments
 * Precedence: exact over segments over prefix; within a kind the longer
 * pattern (more literal bytes) first; then registration order. The first
 * route in that order whose pattern matches the path and whose method set
 * holds the method wins (a GET route also takes HEAD). When patterns match
 * the path but no method set holds the method, the union of their methods
 * is the Allow of the 405 (or of the answer to OPTIONS).
 *
 * Matching is pure: no allocation, no I/O; a table without routes costs one
 * comparison, and each route rejects a path on its literal head first.
 *
 * Ownership: a table belongs to its site in one configuration. It is
 * filled on the controlling thread while that configuration is built (the
 * plugins' routes hooks and site_init), then only read, by any worker,
 * until the configuration is freed with it.
 */
#ifndef MK_SERVER_ROUTE_H
#define MK_SERVER_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <monkey/mk_plugin.h>

#define MK_ROUTE_PARAMS_MAX 8    /* ":name" segments in one pattern */
#define MK_ROUTE_PATTERN_MAX 512 /* bytes of a pattern */

enum mk_route_kind {
    MK_ROUTE_EXACT = 0,
    MK_ROUTE_SEGMENTS, /* with ":name" segments */
    MK_ROUTE_PREFIX,   /* ends with "/ *": the path and everything beneath */
};

struct mk_route {
    char *pattern;    /* as registered (owned by the table) */
    uint16_t len;     /* bytes of the pattern matched as text (prefix: without the '*') */
    uint16_t lit_len; /* bytes before the first ":name" (all of them when none) */
    uint16_t weight;  /* literal bytes: longer patterns are tried first */
    uint8_t kind;     /* enum mk_route_kind */
    uint8_t n_params; /* ":name" segments */
    uint32_t methods; /* MK_ROUTE_* bits */
    unsigned order;   /* registration order, for ties */
    const struct mk_plugin *plugin;
    mk_route_cb handler;
    void *arg;
};

/* A site's routes, in precedence order once mk_routes_finish() ran. */
struct mk_routes {
    struct mk_route *v;
    size_t n, cap;
};

/* What mk_routes_match() found. */
struct mk_route_match {
    const struct mk_route *route; /* NULL: no route takes the method */
    uint32_t allow;               /* methods of the routes whose pattern matches the path */
    uint8_t n_params;
    struct {
        uint16_t off, len; /* a parameter's value in the path */
    } param[MK_ROUTE_PARAMS_MAX];
};

/* The MK_ROUTE_* bit of method `m` (enum mk_http_method). */
static inline uint32_t mk_route_method_bit(unsigned m)
{
    return 1u << m;
}

/*
 * Check `pattern` and fill rt's pattern fields (rt->pattern is a copy the
 * caller frees, or the table once added). MK_OK, or MK_ERR with the reason
 * in err: no leading '/', an empty or repeated ":name", a '*' anywhere but
 * after the last '/', too long, too many parameters.
 */
int mk_route_parse(struct mk_route *rt, const char *pattern, char *err, size_t errlen);

/* Append a parsed route (the table takes its pattern). MK_OK or MK_ERR (memory). */
int mk_routes_add(struct mk_routes *t, const struct mk_route *rt);
/* Append copies of every route of `from` (global routes into a site's table). */
int mk_routes_copy(struct mk_routes *t, const struct mk_routes *from);

/*
 * Sort t in precedence order and check it: two routes of the same shape
 * (their ":name"s aside) with a method in common are an error (MK_ERR,
 * err names both patterns and their plugins).
 */
int mk_routes_finish(struct mk_routes *t, char *err, size_t errlen);
void mk_routes_free(struct mk_routes *t);

/*
 * Match the normalised path[0, len) and `method` (enum mk_http_method)
 * against t (finished). Returns true when a route takes the request (m->route,
 * m->param set); false otherwise, with m->allow non-zero when patterns match
 * the path for other methods. m->allow is always the union over every
 * pattern that matches the path.
 */
bool mk_routes_match(const struct mk_routes *t, unsigned method, const char *path, size_t len,
                     struct mk_route_match *m);

/*
 * The value of parameter `name` of the match (a slice of `path`, not NUL
 * terminated), NULL when the route has no such parameter.
 */
const char *mk_route_param(const struct mk_route_match *m, const char *path, const char *name,
                           size_t *len);

/*
 * Write an Allow value for method set `allow` ("GET, HEAD, POST, OPTIONS"):
 * GET brings HEAD, OPTIONS always comes last. Returns its length (buf has at
 * least 80 bytes).
 */
size_t mk_route_allow_format(uint32_t allow, char *buf, size_t len);

#endif
