/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/session_parse.h: pure parsers for the session stores: the library
 * duda-session-parse (duda.cmake), linked by the plugin and by the redis
 * package (redis->connect takes the same addresses).
 */
#ifndef DUDA_SESSION_PARSE_H
#define DUDA_SESSION_PARSE_H

#include <stddef.h>

/*
 * Parse "redis://host[:port][/db]" ("[v6addr]" for an IPv6 host; port
 * 6379 and db 0 by default) into host (NUL terminated), port and db: 0,
 * or -1 with the reason in err.
 */
int duda_session_parse_redis_url(const char *url, char *host, size_t hostlen, int *port, int *db,
                                 char *err, size_t errlen);

/* One name=value pair of a Cookie header; spans into the header, not NUL terminated. */
struct duda_cookie_pair {
    const char *name, *value;
    size_t name_len, value_len;
};

/*
 * Split a Cookie header of n bytes into at most max pairs (pieces without
 * '=' or with an empty name are skipped): the number stored in out.
 */
size_t duda_session_parse_cookie_pairs(const char *h, size_t n, struct duda_cookie_pair *out,
                                       size_t max);

/*
 * The value of the first pair named `name` (name_len bytes, compared
 * exactly) of a Cookie header of n bytes, split as
 * duda_session_parse_cookie_pairs does: a span into the header of
 * *value_len bytes, or NULL.
 */
const char *duda_session_parse_cookie_find(const char *h, size_t n, const char *name,
                                           size_t name_len, size_t *value_len);

#endif
