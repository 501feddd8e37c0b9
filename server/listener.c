/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * listener.c: listening sockets, and both ways of accepting on them.
 *
 * Balancing reuseport: each worker has its own listening sockets and
 * accepts on them in its own loop (mk_listener_accept_cb). Balancing fair:
 * one acceptor thread accepts on the only set of sockets and writes each
 * connection into the pipe of the worker with the fewest connections
 * (mk_acceptor_*); the worker then takes it with mk_worker_accept_fd. A
 * reload hands either one a listener plan (mk_listeners_apply).
 *
 * Options set on the listening socket are inherited by accepted ones
 * (TCP_NODELAY), which saves a system call per connection. A port-only
 * Listen binds one dual-stack IPv6 socket, or IPv4 where IPv6 is missing.
 * Before SO_REUSEPORT sockets are bound to an address, a probe without it
 * (mk_listener_probe) checks that no other program listens there.
 */
#include <errno.h>
#include <pthread.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../core/log.h"
#include "../core/sys.h"
#include "listener.h"
#include "server.h"
#include "systemd.h"

#define MK_ACCEPT_BATCH 64 /* accepts per listener event */
#define MK_ACCEPT_SHARED 8 /* the same when other events wait in the batch */
#define MK_ACCEPT_EAGER_MAX 7
#define MK_ACCEPT_EAGER_PROBE 16u

/*
 * A socket of sa's family bound to sa as every listening socket is:
 * SO_REUSEADDR (a restart is not refused by connections in TIME_WAIT), a
 * port-only Listen (any) dual-stack, and SO_REUSEPORT when asked. Returns
 * the socket, or -1 with errno.
 */
static int mk_listener_bind(const struct sockaddr *sa, socklen_t len, bool any, bool reuseport)
{
    int one = 1, zero = 0;
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        return -1;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0) ||
        (sa->sa_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, any ? &zero : &one, sizeof(int)) < 0) ||
        bind(fd, sa, len) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

/*
 * mk_listener_bind() for a Listen address: a port-only one falls back to
 * every IPv4 address on a host without IPv6.
 */
static int mk_listener_bind_addr(const struct mk_listen_addr *a, bool reuseport)
{
    int fd = mk_listener_bind((const struct sockaddr *) &a->addr, a->addrlen, a->any, reuseport);

    if (fd < 0 && a->any && (errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL)) {
        struct sockaddr_in in4 = {.sin_family = AF_INET,
                                  .sin_port = ((const struct sockaddr_in6 *) &a->addr)->sin6_port,
                                  .sin_addr.s_addr = htonl(INADDR_ANY)};
        fd = mk_listener_bind((const struct sockaddr *) &in4, sizeof(in4), false, reuseport);
    }
    return fd;
}

/* The options of a bound socket, then listen(): 0, or -1 with errno. */
static int mk_listener_listen(const struct mk_config *cfg, int fd)
{
    int one = 1;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (cfg->defer_accept) {
        /*
         * Wake us only when the request has arrived (h2o and nginx's
         * "deferred" do the same): a connection answered at once then costs
         * no epoll registration or wake-up. One second of deferral; a client
         * that sends nothing is handed over after it and meets Timeout.
         */
        int secs = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &secs, sizeof(secs));
    }
    if (cfg->tcp_fastopen > 0) {
        int qlen = cfg->tcp_fastopen;
        if (setsockopt(fd, IPPROTO_TCP, TCP_FASTOPEN, &qlen, sizeof(qlen)) < 0) {
            mk_warn("TCPFastOpen: %s (check /proc/sys/net/ipv4/tcp_fastopen)", strerror(errno));
        }
    }
    return listen(fd, cfg->backlog);
}

static void mk_listener_error(const struct mk_listen_addr *a, int error, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s: Listen %s: %s", a->where ? a->where : "Listen", a->spec,
             strerror(error));
}

int mk_listener_socket(const struct mk_config *cfg, const struct mk_listen_addr *a, bool reuseport,
                       char *err, size_t errlen)
{
    int fd = mk_systemd_listen_fd((const struct sockaddr *) &a->addr, a->addrlen);

    if (fd >= 0) {
        return fd; /* passed by the service manager (socket activation) */
    }
    fd = mk_listener_bind_addr(a, reuseport);
    if (fd >= 0 && mk_listener_listen(cfg, fd) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        fd = -1;
    }
    if (fd < 0) {
        mk_listener_error(a, errno, err, errlen);
    }
    return fd;
}

/* ---- probing an address before sharing it -------------------------------- */

static in_port_t mk_addr_port(const struct mk_listen_addr *a)
{
    return a->addr.ss_family == AF_INET ? ((const struct sockaddr_in *) &a->addr)->sin_port
                                        : ((const struct sockaddr_in6 *) &a->addr)->sin6_port;
}

static bool mk_addr_wildcard(const struct mk_listen_addr *a)
{
    if (a->addr.ss_family == AF_INET) {
        return ((const struct sockaddr_in *) &a->addr)->sin_addr.s_addr == htonl(INADDR_ANY);
    }
    return a->any || IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *) &a->addr)->sin6_addr);
}

bool mk_listen_addr_overlap(const struct mk_listen_addr *a, const struct mk_listen_addr *b)
{
    if (mk_addr_port(a) != mk_addr_port(b)) {
        return false;
    }
    return mk_addr_wildcard(a) || mk_addr_wildcard(b) ||
           (a->addrlen == b->addrlen && memcmp(&a->addr, &b->addr, a->addrlen) == 0);
}

int mk_listener_probe(const struct mk_listen_addr *a, char *err, size_t errlen)
{
    if (mk_systemd_passed((const struct sockaddr *) &a->addr, a->addrlen)) {
        return MK_OK; /* the service manager's socket: ours to share */
    }
    int fd = mk_listener_bind_addr(a, false);
    if (fd < 0) {
        mk_listener_error(a, errno, err, errlen);
        return MK_ERR;
    }
    close(fd);
    return MK_OK;
}

/* ---- listener sets --------------------------------------------------------- */

/*
 * Stop watching and close, but keep the struct on `dead`: its event may
 * still be pending later in the batch being dispatched (mk_event_del() marks
 * it so the dispatcher skips it). mk_listeners_reap() frees it afterwards.
 */
static void mk_listener_remove(struct mk_event_loop *loop, struct mk_listener *l,
                               struct mk_list *dead)
{
    mk_event_del(loop, &l->ev);
    close(l->fd);
    l->fd = -1;
    mk_list_move_tail(&l->node, dead);
}

void mk_listeners_close(struct mk_list *listeners, struct mk_event_loop *loop, struct mk_list *dead)
{
    while (!mk_list_is_empty(listeners)) {
        mk_listener_remove(loop, mk_list_entry(listeners->next, struct mk_listener, node), dead);
    }
}

void mk_listeners_reap(struct mk_list *dead)
{
    while (!mk_list_is_empty(dead)) {
        struct mk_listener *l = mk_list_entry(dead->next, struct mk_listener, node);
        mk_list_del(&l->node);
        mk_free(l->spec);
        mk_free(l);
    }
}

void mk_listeners_apply(struct mk_list *listeners, struct mk_event_loop *loop, struct mk_list *dead,
                        struct mk_listen_plan *plan, size_t n, mk_event_cb cb, struct mk_worker *w,
                        struct mk_server *srv)
{
    struct mk_list *it, *tmp;

    mk_list_foreach_safe (it, tmp, listeners) {
        struct mk_listener *l = mk_list_entry(it, struct mk_listener, node);
        bool keep = false;
        for (size_t i = 0; i < n; i++) {
            if (plan[i].fd < 0 && strcmp(plan[i].spec, l->spec) == 0) {
                keep = true;
                l->transport = plan[i].transport;
                l->options = plan[i].options;
            }
        }
        if (!keep) {
            mk_listener_remove(loop, l, dead);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (plan[i].fd < 0) {
            continue;
        }
        struct mk_listener *l = mk_calloc(1, sizeof(*l));
        l->fd = plan[i].fd;
        plan[i].fd = -1; /* adopted */
        l->spec = mk_strdup(plan[i].spec);
        l->transport = plan[i].transport;
        l->options = plan[i].options;
        l->worker = w;
        l->server = srv;
        if (mk_event_add(loop, &l->ev, l->fd, MK_EV_READ, cb) != MK_OK) {
            mk_err("cannot watch the listener %s: %s", l->spec, strerror(errno));
        }
        mk_list_add_tail(&l->node, listeners);
    }
}

void mk_listen_plan_free(struct mk_listen_plan *plan, size_t n)
{
    if (!plan) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (plan[i].fd >= 0) {
            close(plan[i].fd);
        }
        mk_free(plan[i].spec);
    }
    mk_free(plan);
}

struct mk_listen_plan *mk_listen_plan_supersede(struct mk_listen_plan *prev, size_t prev_len,
                                                struct mk_listen_plan *next, size_t next_len)
{
    if (!next) {
        return prev;
    }
    for (size_t i = 0; prev && i < next_len; i++) {
        for (size_t j = 0; next[i].fd < 0 && j < prev_len; j++) {
            if (prev[j].fd >= 0 && strcmp(prev[j].spec, next[i].spec) == 0) {
                next[i].fd = prev[j].fd;
                prev[j].fd = -1;
            }
        }
    }
    mk_listen_plan_free(prev, prev_len);
    return next;
}

/* ---- balancing reuseport: each worker accepts ---------------------------- */

/*
 * Listener readiness (reuseport mode): accept, and serve at once, the
 * connections waiting. The event promises one; each further accept4 finds
 * another only when clients connect faster than the worker serves them (a
 * burst), and otherwise costs a system call for its EAGAIN: clients that
 * connect one after the other, each waiting for its answer, find nothing
 * more. So, as for HTTP/1's eager reads (h1.c), the listener keeps a credit:
 * a further accept that found a connection adds one (up to
 * MK_ACCEPT_EAGER_MAX), one that found none takes one away; without credit
 * only every MK_ACCEPT_EAGER_PROBE-th connection is followed by a try. A
 * connection left in the queue is not lost: the listener is level
 * triggered, so the next wait reports it at once. Each connection accepted
 * is served at once (its request has usually come with it), so when other
 * events wait in the same batch a listener event takes at most
 * MK_ACCEPT_SHARED connections before they get their turn.
 */
void mk_listener_accept_cb(struct mk_event *ev, uint32_t ready)
{
    struct mk_listener *l = (struct mk_listener *) ev;
    struct mk_worker *w = l->worker;
    int max = w->batch_n > 1 ? MK_ACCEPT_SHARED : MK_ACCEPT_BATCH;
    (void) ready;

    for (int i = 0; i < max && !w->stopping; i++) {
        union {
            struct sockaddr sa;
            struct sockaddr_in6 in6;
        } addr;
        socklen_t len = sizeof(addr);
        if (i > 0 && !l->eager && l->accepted % MK_ACCEPT_EAGER_PROBE != 0) {
            return;
        }
        int fd = mk_sys_accept4(l->fd, &addr.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) {
                mk_warn("accept: %s (raise the descriptor limit or lower MaxConnections)",
                        strerror(errno));
            }
            if (i > 0 && l->eager) {
                l->eager--;
            }
            return; /* EAGAIN: drained; other errors concern one connection */
        }
        if (i > 0 && l->eager < MK_ACCEPT_EAGER_MAX) {
            l->eager++;
        }
        l->accepted++;
        mk_worker_accept_fd(w, fd, &addr.sa, len, l->transport, l->options);
    }
}

/* ---- fair balancing: the acceptor thread --------------------------------- */

static void mk_acceptor_accept_cb(struct mk_event *ev, uint32_t ready)
{
    struct mk_listener *l = (struct mk_listener *) ev;
    struct mk_server *srv = l->server;
    (void) ready;

    for (int k = 0; k < 64; k++) {
        struct mk_handoff h;
        socklen_t len = sizeof(h.peer);
        int fd = accept4(l->fd, &h.peer.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            return;
        }
        h.fd = fd;
        h.addrlen = len;
        h.transport = l->transport;
        h.options = l->options;

        /* The seeds' scheduler: the worker with the fewest connections. */
        int best = 0;
        unsigned least = ~0u;
        for (int i = 0; i < srv->n_workers; i++) {
            unsigned n = atomic_load_explicit(&srv->workers[i].n_conns, memory_order_relaxed);
            if (n < least) {
                least = n;
                best = i;
            }
        }
        if (write(srv->workers[best].handoff[1], &h, sizeof(h)) != (ssize_t) sizeof(h)) {
            close(fd); /* the worker is far behind: shed the connection */
        }
    }
}

static void mk_acceptor_ctl_cb(struct mk_event *ev, uint32_t ready)
{
    struct mk_server *srv = mk_container_of(ev, struct mk_server, acceptor_ctl_ev);
    uint64_t v;
    (void) ready;

    ssize_t ignored = read(srv->acceptor_ctl, &v, sizeof(v));
    (void) ignored;
    pthread_mutex_lock(&srv->acceptor_lock);
    struct mk_listen_plan *plan = srv->acceptor_plan;
    size_t n = srv->acceptor_plan_len;
    srv->acceptor_plan = NULL;
    srv->acceptor_plan_len = 0;
    pthread_mutex_unlock(&srv->acceptor_lock);
    if (plan) {
        mk_listeners_apply(&srv->acceptor_listeners, &srv->acceptor_loop, &srv->acceptor_dead, plan,
                           n, mk_acceptor_accept_cb, NULL, srv);
        mk_listen_plan_free(plan, n);
    }
}

void mk_acceptor_post(struct mk_server *srv, struct mk_listen_plan *plan, size_t n)
{
    uint64_t one = 1;
    pthread_mutex_lock(&srv->acceptor_lock);
    if (plan) {
        srv->acceptor_plan =
            mk_listen_plan_supersede(srv->acceptor_plan, srv->acceptor_plan_len, plan, n);
        srv->acceptor_plan_len = n;
    }
    pthread_mutex_unlock(&srv->acceptor_lock);
    ssize_t ignored = write(srv->acceptor_ctl, &one, sizeof(one));
    (void) ignored;
}

static void *mk_acceptor_main(void *arg)
{
    struct mk_server *srv = arg;

    mk_log_bind(&srv->log);
    while (!atomic_load(&srv->acceptor_stop)) {
        int n = mk_event_wait(&srv->acceptor_loop, -1);
        if (n < 0) {
            mk_err("acceptor: event wait failed: %s", strerror(errno));
            break;
        }
        mk_event_dispatch(&srv->acceptor_loop, n);
        mk_listeners_reap(&srv->acceptor_dead);
    }
    mk_listeners_close(&srv->acceptor_listeners, &srv->acceptor_loop, &srv->acceptor_dead);
    mk_listeners_reap(&srv->acceptor_dead);
    return NULL;
}

int mk_acceptor_start(struct mk_server *srv, struct mk_listen_plan *plan, size_t n)
{
    if (mk_event_loop_init(&srv->acceptor_loop, 64) != MK_OK) {
        return MK_ERR;
    }
    srv->acceptor_ctl = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (srv->acceptor_ctl < 0 ||
        mk_event_add(&srv->acceptor_loop, &srv->acceptor_ctl_ev, srv->acceptor_ctl, MK_EV_READ,
                     mk_acceptor_ctl_cb) != MK_OK) {
        return MK_ERR;
    }
    mk_listeners_apply(&srv->acceptor_listeners, &srv->acceptor_loop, &srv->acceptor_dead, plan, n,
                       mk_acceptor_accept_cb, NULL, srv);
    if (pthread_create(&srv->acceptor, NULL, mk_acceptor_main, srv) != 0) {
        return MK_ERR;
    }
    srv->acceptor_running = true;
    return MK_OK;
}

void mk_acceptor_stop(struct mk_server *srv)
{
    uint64_t one = 1;
    if (!srv->acceptor_running) {
        return;
    }
    atomic_store(&srv->acceptor_stop, true);
    ssize_t ignored = write(srv->acceptor_ctl, &one, sizeof(one));
    (void) ignored;
    pthread_join(srv->acceptor, NULL);
    srv->acceptor_running = false;
}
