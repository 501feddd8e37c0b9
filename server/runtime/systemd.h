/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * systemd.h: readiness notification and socket activation, without
 * libsystemd (see systemd.c). A server built without them (MK_SYSTEMD=OFF)
 * has the functions below as stubs that send nothing and find no socket.
 *
 * Threads: the controlling thread calls these (the control loop's
 * notifications, the listener plans of a start or a reload), and the
 * supervisor's loop passes its child's messages on; no worker does. The
 * passed sockets are the process's, open for its whole life.
 */
#ifndef MK_SERVER_SYSTEMD_H
#define MK_SERVER_SYSTEMD_H

#include <stdbool.h>
#include <sys/socket.h>

#include <monkey/mk_common.h>

#ifdef MK_HAVE_SYSTEMD

/*
 * Send `state` ("READY=1", "STOPPING=1", ...) to $NOTIFY_SOCKET as one
 * datagram. MK_OK when sent, MK_DECLINED when the variable is not set (not
 * started by systemd), MK_ERR when sending failed (logged once per call).
 */
int mk_systemd_notify(const char *state);

/* "READY=1" with MAINPID (the pid changes with -D): the server serves. */
int mk_systemd_notify_ready(void);

/* "RELOADING=1" with MONOTONIC_USEC, as systemd wants before a reload. */
int mk_systemd_notify_reloading(void);

/*
 * A listening socket passed by the service manager (LISTEN_FDS and
 * LISTEN_PID naming this process, descriptors from 3) bound to exactly
 * `sa`, duplicated for the caller (close-on-exec, non-blocking, owned by
 * the caller); -1 when none matches. A port-only Listen (the IPv6 any
 * address) also matches an IPv4 socket on every address. Of several
 * sockets of one address (a supervisor passes one per reuseport worker),
 * the one handed out least so far is taken. The passed
 * descriptors stay open for the process's life, so a reload that drops and
 * later restores a Listen line adopts the same socket again. Call from the
 * controlling thread.
 */
int mk_systemd_listen_fd(const struct sockaddr *sa, socklen_t len);

/*
 * Whether the service manager passed a socket that mk_systemd_listen_fd()
 * would hand out for `sa` (nothing is taken). Such a socket was bound by
 * whoever passed it: the server neither binds nor probes its address.
 */
bool mk_systemd_passed(const struct sockaddr *sa, socklen_t len);

#else /* built without systemd support (MK_SYSTEMD=OFF): nothing sent, nothing passed */

static inline int mk_systemd_notify(const char *state)
{
    (void) state;
    return MK_DECLINED;
}

static inline int mk_systemd_notify_ready(void)
{
    return MK_DECLINED;
}

static inline int mk_systemd_notify_reloading(void)
{
    return MK_DECLINED;
}

static inline int mk_systemd_listen_fd(const struct sockaddr *sa, socklen_t len)
{
    (void) sa;
    (void) len;
    return -1;
}

static inline bool mk_systemd_passed(const struct sockaddr *sa, socklen_t len)
{
    (void) sa;
    (void) len;
    return false;
}
#endif

#endif
