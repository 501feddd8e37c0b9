/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * sys.h: the system calls of the request path, made with syscall(2).
 *
 * In a process with more than one thread, the C library's wrappers of the
 * calls that are thread cancellation points (read, sendmsg, epoll_wait,
 * accept4, close...) switch asynchronous cancellation on around the call
 * and off after it: two more function calls and about 80 instructions for
 * every system call, a tenth of what a small keep-alive request costs in
 * user space. Monkey never cancels a thread (threads stop when told to, at
 * points of their own), so the calls made for every request go through
 * syscall(2), which does none of that. Same results, same errno.
 *
 * Any thread may use them.
 */
#ifndef MK_CORE_SYS_H
#define MK_CORE_SYS_H

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/* Each falls back to the C library's wrapper where the system call has no
   number of its own (epoll_wait on arm64, socketcall architectures). */

static inline ssize_t mk_sys_read(int fd, void *buf, size_t len)
{
#ifdef SYS_read
    return syscall(SYS_read, fd, buf, len);
#else
    return read(fd, buf, len);
#endif
}

static inline ssize_t mk_sys_sendmsg(int fd, const struct msghdr *msg, int flags)
{
#ifdef SYS_sendmsg
    return syscall(SYS_sendmsg, fd, msg, flags);
#else
    return sendmsg(fd, msg, flags);
#endif
}

/* send(2) of one buffer: no msghdr or iovec for the kernel to copy in. */
static inline ssize_t mk_sys_sendto(int fd, const void *buf, size_t len, int flags)
{
#ifdef SYS_sendto
    return syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
#else
    return sendto(fd, buf, len, flags, NULL, 0);
#endif
}

static inline int mk_sys_epoll_wait(int epfd, struct epoll_event *events, int max, int timeout)
{
#ifdef SYS_epoll_wait
    return (int) syscall(SYS_epoll_wait, epfd, events, max, timeout);
#else
    return epoll_wait(epfd, events, max, timeout);
#endif
}

static inline int mk_sys_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
#ifdef SYS_accept4
    return (int) syscall(SYS_accept4, fd, addr, len, flags);
#else
    return accept4(fd, addr, len, flags);
#endif
}

static inline int mk_sys_close(int fd)
{
#ifdef SYS_close
    return (int) syscall(SYS_close, fd);
#else
    return close(fd);
#endif
}

#endif
