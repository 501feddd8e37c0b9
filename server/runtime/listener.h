/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * listener.h: the listening sockets and both accept paths (listener.c):
 * each worker's own listeners in reuseport mode, and the acceptor thread of
 * Balancing fair, which hands connections to workers through their pipes.
 *
 * A listener belongs to the thread whose loop watches it (its worker, or
 * the acceptor); a plan is built by the controlling thread and handed over
 * whole (mk_worker_post, mk_listener_acceptor_post). The acceptor functions are
 * called by the controlling thread only.
 */
#ifndef MK_SERVER_LISTENER_H
#define MK_SERVER_LISTENER_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "../../core/event.h"
#include "../../core/list.h"

struct mk_config;
struct mk_listen_addr;
struct mk_server;
struct mk_transport;
struct mk_worker;

struct mk_listener {
    struct mk_event ev; /* first */
    int fd;
    char *spec; /* the Listen value, identifies the address */
    const struct mk_transport *transport;
    const char *options;      /* the transport's options (interned, see mk_server_options) */
    bool proxy;               /* proxy_protocol: its connections start with a PROXY header */
    struct mk_worker *worker; /* the owner, or NULL for the acceptor's */
    struct mk_server *server;
    struct mk_list node;
    uint8_t eager;     /* credit of eager accepts (listener.c, mk_listener_accept_cb) */
    uint32_t accepted; /* connections accepted, for the probes of eager accepts */
};

/* A listener change sent to a reuseport worker on reload. */
struct mk_listen_plan {
    char *spec;
    int fd; /* new socket, or -1: keep the worker's socket for spec */
    const struct mk_transport *transport;
    const char *options; /* interned */
    bool proxy;          /* proxy_protocol */
};

#ifdef MK_HAVE_FAIR
/* Handoff record written to a worker's pipe by the acceptor (fair mode). */
struct mk_handoff {
    int fd;
    socklen_t addrlen;
    const struct mk_transport *transport;
    const char *options;
    bool proxy;
    union {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
    } peer;
};
#endif

/*
 * What an accepting thread (a reuseport worker, the acceptor) keeps for
 * running out of descriptors (listener.c): a spare descriptor, given up to
 * accept a waiting connection, answer it 503 and close it; and the pause
 * of its listeners, which would otherwise report the same connections
 * again at once.
 */
struct mk_accept_guard {
    int reserve;        /* /dev/null, kept open; -1: none (taken, not got back yet) */
    bool paused;        /* the listeners are not watched */
    uint64_t resume_ms; /* when to watch them again (mono ms) */
};

/* ---- listening sockets --------------------------------------------------- */

/*
 * A listening socket for a (owned by the caller): the service manager's
 * when it passed one (socket activation), else one bound here, with
 * SO_REUSEPORT when reuseport. -1 on failure, with
 * "file:line: Listen SPEC: reason" in err.
 */
int mk_listener_socket(const struct mk_config *cfg, const struct mk_listen_addr *a, bool reuseport,
                       char *err, size_t errlen);
/*
 * Whether another socket already listens on a's address, before the server
 * binds its SO_REUSEPORT sockets there (which the kernel would let share the
 * port with any program of the same user that sets SO_REUSEPORT too): a
 * socket is bound there without SO_REUSEPORT (with SO_REUSEADDR, as the
 * real ones, so connections in TIME_WAIT do not count) and closed at once.
 * MK_OK when the bind succeeds, or when the service manager passed a socket
 * for a (nothing is probed); MK_ERR otherwise, with the same message as
 * mk_listener_socket() ("...: Address already in use" when busy). Start and
 * reload only: the caller must not hold a socket on a itself (see
 * mk_listener_addr_overlap).
 */
int mk_listener_probe(const struct mk_listen_addr *a, char *err, size_t errlen);
/*
 * Whether sockets bound to a and b may stand in each other's way: the same
 * port, and the same address or a wildcard on either side (erring towards
 * yes, so a probe is never refused by the server's own socket).
 */
bool mk_listener_addr_overlap(const struct mk_listen_addr *a, const struct mk_listen_addr *b);
void mk_listener_accept_cb(struct mk_event *ev, uint32_t ready);
/* Take the guard's reserve descriptor (worker or acceptor setup). */
void mk_listener_guard_init(struct mk_accept_guard *g);
/* Close the reserve (teardown). */
void mk_listener_guard_release(struct mk_accept_guard *g);
/*
 * Make `listeners` (watched by `loop`) match `plan`: keep the sockets whose
 * spec the plan lists with fd -1, adopt the plan's new sockets (their fd
 * becomes -1 in the plan), close the others. New listeners get callback cb
 * and owner w (reuseport) or srv (the acceptor).
 */
void mk_listener_apply_all(struct mk_list *listeners, struct mk_event_loop *loop,
                           struct mk_list *dead, struct mk_listen_plan *plan, size_t n,
                           mk_event_cb cb, struct mk_worker *w, struct mk_server *srv);
/* Close every listener; the structs go to `dead` (see mk_listener_reap). */
void mk_listener_close_all(struct mk_list *listeners, struct mk_event_loop *loop,
                           struct mk_list *dead);
/* Free listeners removed during an event batch, once the batch is over. */
void mk_listener_reap(struct mk_list *dead);
/* Free a plan, closing the sockets nobody adopted. */
void mk_listener_plan_free(struct mk_listen_plan *plan, size_t n);
/*
 * `next` replaces `prev`, a plan its owner has not applied yet. `next` was
 * built against the configuration `prev` belongs to, so where it says
 * "keep" (fd -1) the owner may not hold the socket yet: it is in `prev`.
 * Such sockets move into `next`; `prev` is freed, closing the sockets of
 * addresses `next` no longer lists. Returns `next` (or `prev` when `next`
 * is NULL: a message without a plan leaves the pending one in place).
 */
struct mk_listen_plan *mk_listener_plan_supersede(struct mk_listen_plan *prev, size_t prev_len,
                                                  struct mk_listen_plan *next, size_t next_len);

#ifdef MK_HAVE_FAIR
/* ---- the acceptor thread of Balancing fair (for server.c) ---------------- */

/*
 * Start the acceptor thread on the n listeners of `plan` (taken over).
 * MK_OK, or MK_ERR (the server's teardown releases what was set up).
 */
int mk_listener_acceptor_start(struct mk_server *srv, struct mk_listen_plan *plan, size_t n);
/*
 * Hand the acceptor a new plan (reload; taken over, superseding one it has
 * not taken yet), or with plan NULL only wake it up.
 */
void mk_listener_acceptor_post(struct mk_server *srv, struct mk_listen_plan *plan, size_t n);
/* Stop the acceptor thread and wait for it; nothing when it does not run. */
void mk_listener_acceptor_stop(struct mk_server *srv);
#endif

#endif
