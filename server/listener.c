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
        int secs = cfg->timeout;
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
