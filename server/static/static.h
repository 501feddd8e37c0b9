/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * static.h: the static handler (static.c), the last content handler of
 * every request: its entries, and the table the request layer is given.
 *
 * Threads: the entries run on the request's worker and use that worker's
 * file cache; the table is constant, given once at start (server.c).
 */
#ifndef MK_SERVER_STATIC_H
#define MK_SERVER_STATIC_H

#include "../config/conf.h"
#include "../request/request.h"

int mk_static_serve(struct mk_request *r);
/*
 * r's path ends in '/': when it names a directory with an index file (the
 * first of IndexFiles that is a regular file in it, opened by the site's
 * rules; remembered in the file cache under the directory's path), make
 * r's path the index file's (in r's arena) and return MK_OK. MK_DECLINED
 * when there is none (no such directory, no index file: r is unchanged and
 * its handlers answer for the directory), 503 when memory is short. The
 * only place a directory becomes its index file: the static handler
 * answers a path ending in '/' with 403 or 404.
 */
int mk_static_index(struct mk_request *r);

/* serve and index, as the request layer is given them (mk_request_files). */
extern const struct mk_request_files mk_static_files;

/* The static handler's [HOST] keys, as the configuration is given them (static_site.c). */
extern const struct mk_site_keys mk_static_site_keys;

#endif
