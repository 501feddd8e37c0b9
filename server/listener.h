/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * listener.h: the acceptor thread of Balancing fair (listener.c), for the
 * controlling thread (server.c). The listening sockets, listener plans and
 * the reuseport accept callback are declared in server.h.
 *
 * All three are called by the controlling thread only.
 */
#ifndef MK_SERVER_LISTENER_H
#define MK_SERVER_LISTENER_H

#include <stddef.h>

struct mk_server;
struct mk_listen_plan;

/*
 * Start the acceptor thread on the n listeners of `plan` (taken over).
 * MK_OK, or MK_ERR (the server's teardown releases what was set up).
 */
int mk_acceptor_start(struct mk_server *srv, struct mk_listen_plan *plan, size_t n);
/*
 * Hand the acceptor a new plan (reload; taken over, superseding one it has
 * not taken yet), or with plan NULL only wake it up.
 */
void mk_acceptor_post(struct mk_server *srv, struct mk_listen_plan *plan, size_t n);
/* Stop the acceptor thread and wait for it; nothing when it does not run. */
void mk_acceptor_stop(struct mk_server *srv);

#endif
