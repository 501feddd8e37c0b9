/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * lib.h: between lib.c (the program's handlers, include/monkey/mk_lib.h)
 * and the rest of the server.
 *
 * The program's sites and routes are kept in srv->lib; each configuration
 * the server builds gets the sites (mk_lib_configure) and loads the
 * internal plugin "lib", whose routes hook puts the routes in each site's
 * route table. Controlling thread only. A server built without library
 * mode (MK_LIBMONKEY=OFF) has no lib.c and no such plugin: the program
 * has no sites or routes to add.
 */
#ifndef MK_SERVER_LIB_H
#define MK_SERVER_LIB_H

#include <stddef.h>

#include <monkey/mk_plugin.h>

struct mk_config;
struct mk_server;

#ifdef MK_HAVE_LIBMONKEY
/* The internal plugin that runs the program's handlers (found by plugin.c). */
extern const struct mk_plugin mk_lib_plugin;

/*
 * Add the program's sites to `cfg` (just loaded) and, when it made a site
 * or a route, the plugin "lib". MK_OK, or MK_ERR with the reason in err.
 */
int mk_lib_configure(struct mk_server *srv, struct mk_config *cfg, char *err, size_t errlen);
/* The docroot of the program's first site, NULL when it created none. */
const char *mk_lib_first_docroot(const struct mk_server *srv);
/* Release what mk_server_site()/mk_server_route() stored (mk_server_destroy). */
void mk_lib_free(struct mk_server *srv);
#endif

#endif
