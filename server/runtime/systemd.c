/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * systemd.c: the two service-manager conventions the server follows, done
 * by hand (each is a few system calls, not worth a library):
 *
 * - readiness (sd_notify(3)): "KEY=VALUE" lines in one datagram to the
 *   unix socket named by $NOTIFY_SOCKET (a path, or an abstract name
 *   written with a leading '@');
 * - socket activation (sd_listen_fds(3)): listening sockets passed as
 *   descriptors 3, 4, ... with $LISTEN_FDS their count and $LISTEN_PID our
 *   pid. They are taken once, made close-on-exec and the variables removed,
 *   so no child process believes they are its own.
 *
 * Without the variables both are no-ops: nothing changes for a server not
 * started by systemd.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <monkey/mk_common.h>
#include <monkey/mk_util.h>

#include "../../core/log.h"
#include "../../core/memory.h"
#include "systemd.h"

#define MK_LISTEN_FDS_START 3
/* A bound, not a limit anyone meets: the supervisor passes one socket per
   worker and Listen address with Balancing reuseport. */
#define MK_LISTEN_FDS_MAX 16384

int mk_systemd_notify(const char *state)
{
    const char *name = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    size_t n;
    socklen_t len;
    int fd;
    ssize_t sent;

    if (!name || !name[0]) {
        return MK_DECLINED;
    }
    n = strlen(name);
    if ((name[0] != '/' && name[0] != '@') || n >= sizeof(sun.sun_path)) {
        mk_warn("NOTIFY_SOCKET %s: not a socket path or an abstract name", name);
        return MK_ERR;
    }
    memcpy(sun.sun_path, name, n);
    if (name[0] == '@') {
        sun.sun_path[0] = '\0'; /* abstract: no terminating NUL counted */
        len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + n);
    }
    else {
        len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + n + 1);
    }
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        mk_warn("NOTIFY_SOCKET: %s", strerror(errno));
        return MK_ERR;
    }
    sent = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *) &sun, len);
    if (sent < 0) {
        mk_warn("NOTIFY_SOCKET %s: %s", name, strerror(errno));
    }
    close(fd);
    return sent < 0 ? MK_ERR : MK_OK;
}

int mk_systemd_notify_ready(void)
{
    char msg[64];

    snprintf(msg, sizeof(msg), "READY=1\nMAINPID=%ld", (long) getpid());
    return mk_systemd_notify(msg);
}

int mk_systemd_notify_reloading(void)
{
    struct timespec ts;
    char msg[64];

    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
             (unsigned long long) ts.tv_sec * 1000000ULL + (unsigned long long) ts.tv_nsec / 1000);
    return mk_systemd_notify(msg);
}

/* ---- socket activation --------------------------------------------------- */

static int mk_listen_fds = -1; /* -1: not looked at yet */
/* How many times each passed socket was handed out, by fd - 3. */
static unsigned *mk_listen_taken;

/* Take the passed descriptors once; returns how many there are. */
static int mk_systemd_take_fds(void)
{
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    char *end;
    long n;

    if (mk_listen_fds >= 0) {
        return mk_listen_fds;
    }
    mk_listen_fds = 0;
    if (!pid || !fds || strtol(pid, &end, 10) != (long) getpid() || *end) {
        return 0;
    }
    n = strtol(fds, &end, 10);
    if (*end || n <= 0 || n > MK_LISTEN_FDS_MAX) {
        mk_warn("LISTEN_FDS=%s ignored", fds);
        return 0;
    }
    for (int fd = MK_LISTEN_FDS_START; fd < MK_LISTEN_FDS_START + n; fd++) {
        int flags = fcntl(fd, F_GETFD);
        if (flags >= 0) {
            fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
        }
    }
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    mk_listen_taken = mk_calloc((size_t) n, sizeof(*mk_listen_taken));
    mk_listen_fds = (int) n;
    mk_info("socket activation: %ld %s passed", n,
            mk_plural((unsigned long long) n, "socket", "sockets"));
    return mk_listen_fds;
}

static bool mk_is_any(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        return ((const struct sockaddr_in *) ss)->sin_addr.s_addr == htonl(INADDR_ANY);
    }
    return ss->ss_family == AF_INET6 &&
           IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *) ss)->sin6_addr);
}

static in_port_t mk_port(const struct sockaddr_storage *ss)
{
    return ss->ss_family == AF_INET ? ((const struct sockaddr_in *) ss)->sin_port
                                    : ((const struct sockaddr_in6 *) ss)->sin6_port;
}

/* Whether a passed socket bound to `got` serves a Listen of `want`. */
static bool mk_same_address(const struct sockaddr_storage *want, const struct sockaddr_storage *got)
{
    if ((got->ss_family != AF_INET && got->ss_family != AF_INET6) ||
        mk_port(want) != mk_port(got)) {
        return false;
    }
    if (want->ss_family == AF_INET6 && mk_is_any(want)) {
        return mk_is_any(got);
    }
    if (want->ss_family != got->ss_family) {
        return false;
    }
    if (want->ss_family == AF_INET) {
        return ((const struct sockaddr_in *) want)->sin_addr.s_addr ==
               ((const struct sockaddr_in *) got)->sin_addr.s_addr;
    }
    return memcmp(&((const struct sockaddr_in6 *) want)->sin6_addr,
                  &((const struct sockaddr_in6 *) got)->sin6_addr, sizeof(struct in6_addr)) == 0;
}

/*
 * The passed socket bound to sa handed out least so far (several sockets of
 * one address, a supervisor's one per reuseport worker, go out in turn, so
 * each worker gets its own and every socket has a worker); -1 when none.
 */
static int mk_systemd_find(const struct sockaddr *sa, socklen_t len)
{
    struct sockaddr_storage want = {0};
    int n = mk_systemd_take_fds();

    if (n == 0 || len > sizeof(want) || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)) {
        return -1;
    }
    memcpy(&want, sa, len);
    int best = -1;
    for (int fd = MK_LISTEN_FDS_START; fd < MK_LISTEN_FDS_START + n; fd++) {
        struct sockaddr_storage got = {0};
        socklen_t glen = sizeof(got);
        int type = 0, listening = 0;
        socklen_t ilen = sizeof(int);

        if (getsockname(fd, (struct sockaddr *) &got, &glen) < 0 ||
            getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &ilen) < 0 || type != SOCK_STREAM ||
            getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ilen) < 0 || !listening ||
            !mk_same_address(&want, &got)) {
            continue;
        }
        if (best < 0 || mk_listen_taken[fd - MK_LISTEN_FDS_START] <
                            mk_listen_taken[best - MK_LISTEN_FDS_START]) {
            best = fd;
        }
    }
    return best;
}

bool mk_systemd_passed(const struct sockaddr *sa, socklen_t len)
{
    return mk_systemd_find(sa, len) >= 0;
}

int mk_systemd_listen_fd(const struct sockaddr *sa, socklen_t len)
{
    int best = mk_systemd_find(sa, len);

    if (best < 0) {
        return -1;
    }
    int dup = fcntl(best, F_DUPFD_CLOEXEC, MK_LISTEN_FDS_START + mk_listen_fds);
    if (dup < 0) {
        return -1;
    }
    mk_listen_taken[best - MK_LISTEN_FDS_START]++;
    /* As a socket bound here would be (accepted sockets inherit it). */
    int one = 1;
    fcntl(dup, F_SETFL, fcntl(dup, F_GETFL) | O_NONBLOCK);
    setsockopt(dup, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return dup;
}
