/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * listener.c: listening sockets.
 *
 * Options set on the listening socket are inherited by accepted ones
 * (TCP_NODELAY), which saves a system call per connection. A port-only
 * Listen binds one dual-stack IPv6 socket, or IPv4 where IPv6 is missing.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../core/log.h"
#include "server.h"

static int mk_listener_open(const struct mk_config *cfg, const struct sockaddr *sa, socklen_t len,
                            bool any, bool reuseport)
{
    int one = 1, zero = 0;
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        return -1;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)) {
        goto fail;
    }
    if (sa->sa_family == AF_INET6 &&
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, any ? &zero : &one, sizeof(int)) < 0) {
        goto fail;
    }
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
    if (bind(fd, sa, len) < 0) {
        goto fail;
    }
    if (cfg->tcp_fastopen > 0) {
        int qlen = cfg->tcp_fastopen;
        if (setsockopt(fd, IPPROTO_TCP, TCP_FASTOPEN, &qlen, sizeof(qlen)) < 0) {
            mk_warn("TCPFastOpen: %s (check /proc/sys/net/ipv4/tcp_fastopen)", strerror(errno));
        }
    }
    if (listen(fd, cfg->backlog) < 0) {
        goto fail;
    }
    return fd;

fail : {
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}
}

int mk_listener_socket(const struct mk_config *cfg, const struct mk_listen_addr *a, bool reuseport,
                       char *err, size_t errlen)
{
    int fd =
        mk_listener_open(cfg, (const struct sockaddr *) &a->addr, a->addrlen, a->any, reuseport);

    if (fd < 0 && a->any && (errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL)) {
        /* No IPv6 on this host: every IPv4 address instead. */
        struct sockaddr_in in4 = {.sin_family = AF_INET,
                                  .sin_port = ((const struct sockaddr_in6 *) &a->addr)->sin6_port,
                                  .sin_addr.s_addr = htonl(INADDR_ANY)};
        fd = mk_listener_open(cfg, (const struct sockaddr *) &in4, sizeof(in4), false, reuseport);
    }
    if (fd < 0) {
        snprintf(err, errlen, "%s: Listen %s: %s", a->where ? a->where : "Listen", a->spec,
                 strerror(errno));
    }
    return fd;
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
