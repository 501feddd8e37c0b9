/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/router.h: the pure part of Duda's router. A service's patterns are
 * checked and placed under its prefix here (/name, or nothing with Root
 * on); the server's route table (api->route_add) does the matching. No
 * I/O, no allocation, no globals: unit tested in tests/unit/duda.
 */
#ifndef DUDA_ROUTER_H
#define DUDA_ROUTER_H

#include <stddef.h>
#include <stdint.h>

/* The longest pattern a service maps, prefix included. */
#define DUDA_PATTERN_MAX 256

/*
 * Whether `name` is a valid service name: 1 to 64 of [a-z A-Z 0-9 _ -]
 * (it is the first path segment and the file NAME.duda).
 */
int duda_router_name_ok(const char *name);

/*
 * Check a service's pattern and method set: MK_OK, or MK_ERR with the
 * reason in err. A pattern starts with '/', has no empty segment, "." or
 * ".." segment, its ":name" segments are non-empty [A-Za-z0-9_] and
 * distinct, and '*' may only be the whole last segment. Methods: not 0.
 */
int duda_router_check(const char *pattern, uint32_t methods, char *err, size_t errlen);

/*
 * The pattern the server's table gets: `prefix` ("/name", or "" for a
 * service with Root on) followed by `pattern`, with "/" mapping to the
 * prefix itself plus "/" ("/name/") or "/". MK_OK, or MK_ERR when out does
 * not hold it.
 */
int duda_router_join(const char *prefix, const char *pattern, char *out, size_t outlen);

#endif
