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
 * reload hands either one a listener plan (mk_listener_apply_all).
 *
 * Options set on the listening socket are inherited by accepted ones
 * (TCP_NODELAY), which saves a system call per connection. A port-only
 * Listen binds one dual-stack IPv6 socket, or IPv4 where IPv6 is missing.
 * Before SO_REUSEPORT sockets are bound to an address, a probe without it
 * (mk_listener_probe) checks that no other program listens there.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <monkey/mk_util.h>

#include "../../core/clock.h"
#include "../../core/log.h"
#include "../../core/sys.h"
#include "listener.h"
#include "../conn/loop.h"
#include "../process/server.h"
#include "systemd.h"

#define MK_ACCEPT_PAUSE_MS 100 /* out of descriptors: the listeners rest this long */
#define MK_ACCEPT_SHED_MAX 64  /* connections answered 503 with the reserve, per pause */
#define MK_ACCEPT_WARN_MS 1000 /* out of descriptors: one warning a second at most */
#define MK_ACCEPT_BATCH 64     /* accepts per listener event */
#define MK_ACCEPT_SHARED 8     /* the same when other events wait in the batch */
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

bool mk_listener_addr_overlap(const struct mk_listen_addr *a, const struct mk_listen_addr *b)
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
 * it so the dispatcher skips it). mk_listener_reap() frees it afterwards.
 */
static void mk_listener_remove(struct mk_event_loop *loop, struct mk_listener *l,
                               struct mk_list *dead)
{
    mk_event_del(loop, &l->ev);
    close(l->fd);
    l->fd = -1;
    mk_list_move_tail(&l->node, dead);
}

void mk_listener_close_all(struct mk_list *listeners, struct mk_event_loop *loop,
                           struct mk_list *dead)
{
    while (!mk_list_is_empty(listeners)) {
        mk_listener_remove(loop, mk_list_entry(listeners->next, struct mk_listener, node), dead);
    }
}

void mk_listener_reap(struct mk_list *dead)
{
    while (!mk_list_is_empty(dead)) {
        struct mk_listener *l = mk_list_entry(dead->next, struct mk_listener, node);
        mk_list_del(&l->node);
        mk_free(l->spec);
        mk_free(l);
    }
}

void mk_listener_apply_all(struct mk_list *listeners, struct mk_event_loop *loop,
                           struct mk_list *dead, struct mk_listen_plan *plan, size_t n,
                           mk_event_cb cb, struct mk_worker *w, struct mk_server *srv)
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
                l->proxy = plan[i].proxy;
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
        l->proxy = plan[i].proxy;
        l->worker = w;
        l->server = srv;
        if (mk_event_add(loop, &l->ev, l->fd, MK_EV_READ, cb) != MK_OK) {
            mk_err("cannot watch the listener %s: %s", l->spec, strerror(errno));
        }
        mk_list_add_tail(&l->node, listeners);
    }
}

void mk_listener_plan_free(struct mk_listen_plan *plan, size_t n)
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

struct mk_listen_plan *mk_listener_plan_supersede(struct mk_listen_plan *prev, size_t prev_len,
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
    mk_listener_plan_free(prev, prev_len);
    return next;
}

/* ---- out of descriptors -------------------------------------------------- */

/*
 * When accept4 fails with EMFILE (the process's limit) or ENFILE (the
 * system's), the connection stays in the listener's queue, and the level
 * triggered listener reports it again at once: without care the thread
 * spins, logging a line per attempt, and the waiting clients get nothing.
 * Instead (as nginx disables its accept events):
 *   - each accepting thread keeps a reserve descriptor (/dev/null). It
 *     gives it up to accept a waiting connection, answers it 503 (plain
 *     listeners; a TLS client cannot be answered without a handshake, so
 *     it is only closed), closes it and takes the reserve back: the queue
 *     is emptied, up to MK_ACCEPT_SHED_MAX connections, rather than left
 *     to time out;
 *   - then its listeners are not watched for MK_ACCEPT_PAUSE_MS (a worker
 *     timer; the acceptor's wait timeout), so the thread goes on serving
 *     the connections it has, whose closing frees descriptors;
 *   - the warning goes out at most once a second, with the pauses and the
 *     connections answered since the last one.
 */

void mk_listener_guard_init(struct mk_accept_guard *g)
{
    g->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
    g->paused = false;
    g->resume_ms = 0;
}

void mk_listener_guard_release(struct mk_accept_guard *g)
{
    if (g->reserve >= 0) {
        close(g->reserve);
        g->reserve = -1;
    }
}

/*
 * A connection accepted with the reserve: answered 503 (when `answer`) and
 * closed at once, since no descriptor is left to serve it. What the client
 * sent already is read first, so the close is a FIN: closing with unread
 * input would reset the connection, and a reset may destroy the answer
 * before the client reads it.
 */
static void mk_accept_refuse(int fd, bool answer)
{
    static const char msg[] = "HTTP/1.1 503 Service Unavailable\r\n"
                              "Retry-After: 1\r\n"
                              "Content-Length: 0\r\n"
                              "Connection: close\r\n\r\n";
    char sink[4096];

    if (answer) {
        ssize_t ignored = send(fd, msg, sizeof(msg) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void) ignored;
        shutdown(fd, SHUT_WR);
    }
    for (int i = 0; i < 4 && mk_sys_read(fd, sink, sizeof(sink)) > 0; i++) {
    }
    close(fd);
}

/*
 * accept4 on l failed with `err`, EMFILE or ENFILE: answer what waits
 * with the reserve, and warn (once a second).
 */
static void mk_accept_out_of_fds(struct mk_server *srv, struct mk_accept_guard *g,
                                 const struct mk_listener *l, int err, uint64_t now_ms)
{
    bool answer = l->transport == &mk_conn_transport_plain;
    unsigned shed = 0, skipped;

    while (g->reserve >= 0 && shed < MK_ACCEPT_SHED_MAX) {
        close(g->reserve);
        int fd = mk_sys_accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            mk_accept_refuse(fd, answer);
            shed++;
        }
        /* -1 when another thread took the descriptor meanwhile: back at the resume */
        g->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            break; /* the queue is empty (EAGAIN), or no descriptor was free after all */
        }
    }
    atomic_fetch_add_explicit(&srv->fd_shed, shed, memory_order_relaxed);
    if (mk_log_gate_pass(&srv->fd_gate, now_ms, MK_ACCEPT_WARN_MS, &skipped)) {
        unsigned answered = atomic_exchange_explicit(&srv->fd_shed, 0, memory_order_relaxed);
        mk_warn("accept: %s: accepting paused for %u ms (since the last message: %u more "
                "%s, %u %s answered 503 and closed; raise the open files limit, or "
                "lower MaxConnections)",
                strerror(err), MK_ACCEPT_PAUSE_MS, skipped, mk_plural(skipped, "pause", "pauses"),
                answered, mk_plural(answered, "connection", "connections"));
    }
}

/* Stop watching `listeners` until g->resume_ms. */
static void mk_accept_pause(struct mk_accept_guard *g, struct mk_list *listeners,
                            struct mk_event_loop *loop, uint64_t now_ms)
{
    struct mk_list *it;

    mk_list_foreach (it, listeners) {
        mk_event_unwatch(loop, &mk_list_entry(it, struct mk_listener, node)->ev);
    }
    g->paused = true;
    g->resume_ms = now_ms + MK_ACCEPT_PAUSE_MS;
}

/* The pause is over: watch `listeners` again, take the reserve back if it was lost. */
static void mk_accept_resume(struct mk_accept_guard *g, struct mk_list *listeners,
                             struct mk_event_loop *loop)
{
    struct mk_list *it;

    g->paused = false;
    if (g->reserve < 0) {
        g->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    mk_list_foreach (it, listeners) {
        struct mk_listener *l = mk_list_entry(it, struct mk_listener, node);
        if (mk_event_mod(loop, &l->ev, MK_EV_READ) != MK_OK) {
            mk_err("cannot watch the listener %s again: %s", l->spec, strerror(errno));
        }
    }
}

/* A worker's pause is over (its timer). */
static void mk_listener_resume_cb(struct mk_loop_timer *t, void *arg)
{
    struct mk_worker *w = arg;
    (void) t;

    if (!w->stopping) {
        mk_accept_resume(&w->accept, &w->listeners, &w->loop);
    }
}

/* A worker's accept found no descriptor left: shed, warn, rest its listeners. */
static void mk_listener_out_of_fds(struct mk_worker *w, const struct mk_listener *l, int err)
{
    mk_accept_out_of_fds(w->server, &w->accept, l, err, w->now_ms);
    if (w->accept.paused) {
        return; /* another of its listeners, reported in the same batch */
    }
    if (!w->accept_due) {
        w->accept_due = mk_loop_timer_new(mk_listener_resume_cb, w);
    }
    /* Without a timer (memory), no pause: the reserve and the warning still hold. */
    if (w->accept_due && mk_loop_timer_arm(w->accept_due, MK_ACCEPT_PAUSE_MS) == MK_OK) {
        mk_accept_pause(&w->accept, &w->listeners, &w->loop, w->now_ms);
    }
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
                mk_listener_out_of_fds(w, l, errno);
                return;
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
        mk_worker_accept_fd(w, fd, &addr.sa, len, l->transport, l->options, l->proxy);
    }
}

#ifdef MK_HAVE_FAIR
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
            if ((errno == EMFILE || errno == ENFILE) && !srv->acceptor_guard.paused) {
                uint64_t now = mk_clock_mono_ms();
                mk_accept_out_of_fds(srv, &srv->acceptor_guard, l, errno, now);
                mk_accept_pause(&srv->acceptor_guard, &srv->acceptor_listeners, &srv->acceptor_loop,
                                now); /* mk_acceptor_main resumes */
            }
            return;
        }
        h.fd = fd;
        h.addrlen = len;
        h.transport = l->transport;
        h.options = l->options;
        h.proxy = l->proxy;

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
        mk_listener_apply_all(&srv->acceptor_listeners, &srv->acceptor_loop, &srv->acceptor_dead,
                              plan, n, mk_acceptor_accept_cb, NULL, srv);
        mk_listener_plan_free(plan, n);
    }
}

void mk_listener_acceptor_post(struct mk_server *srv, struct mk_listen_plan *plan, size_t n)
{
    uint64_t one = 1;
    pthread_mutex_lock(&srv->acceptor_lock);
    if (plan) {
        srv->acceptor_plan =
            mk_listener_plan_supersede(srv->acceptor_plan, srv->acceptor_plan_len, plan, n);
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
        struct mk_accept_guard *g = &srv->acceptor_guard;
        int timeout = -1;
        if (g->paused) { /* out of descriptors (mk_acceptor_accept_cb) */
            uint64_t now = mk_clock_mono_ms();
            if (now >= g->resume_ms) {
                mk_accept_resume(g, &srv->acceptor_listeners, &srv->acceptor_loop);
            }
            else {
                timeout = (int) (g->resume_ms - now);
            }
        }
        int n = mk_event_wait(&srv->acceptor_loop, timeout);
        if (n < 0) {
            mk_err("acceptor: event wait failed: %s", strerror(errno));
            break;
        }
        mk_event_dispatch(&srv->acceptor_loop, n);
        mk_listener_reap(&srv->acceptor_dead);
    }
    mk_listener_close_all(&srv->acceptor_listeners, &srv->acceptor_loop, &srv->acceptor_dead);
    mk_listener_reap(&srv->acceptor_dead);
    mk_listener_guard_release(&srv->acceptor_guard);
    return NULL;
}

int mk_listener_acceptor_start(struct mk_server *srv, struct mk_listen_plan *plan, size_t n)
{
    mk_listener_guard_init(
        &srv->acceptor_guard); /* released as the thread ends, or by the teardown */
    if (mk_event_loop_init(&srv->acceptor_loop, 64) != MK_OK) {
        return MK_ERR;
    }
    srv->acceptor_ctl = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (srv->acceptor_ctl < 0 ||
        mk_event_add(&srv->acceptor_loop, &srv->acceptor_ctl_ev, srv->acceptor_ctl, MK_EV_READ,
                     mk_acceptor_ctl_cb) != MK_OK) {
        return MK_ERR;
    }
    mk_listener_apply_all(&srv->acceptor_listeners, &srv->acceptor_loop, &srv->acceptor_dead, plan,
                          n, mk_acceptor_accept_cb, NULL, srv);
    if (pthread_create(&srv->acceptor, NULL, mk_acceptor_main, srv) != 0) {
        return MK_ERR;
    }
    srv->acceptor_running = true;
    return MK_OK;
}

void mk_listener_acceptor_stop(struct mk_server *srv)
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
#endif
