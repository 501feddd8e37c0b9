/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * event_epoll.c: the epoll(7) backend of event.h.
 */
#include "event.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <monkey/mk_common.h>

#include "memory.h"
#include "sys.h"

static uint32_t mk_epoll_mask(uint32_t mask)
{
    uint32_t e = 0;
    /* A half-closed peer is reported only to those reading: a writer would
       be woken for it again and again (level triggered). */
    if (mask & MK_EV_READ) {
        e |= EPOLLIN | EPOLLRDHUP;
    }
    if (mask & MK_EV_HANGUP) {
        e |= EPOLLRDHUP;
    }
    if (mask & MK_EV_WRITE) {
        e |= EPOLLOUT;
    }
    return e;
}

int mk_event_loop_init(struct mk_event_loop *loop, int capacity)
{
    loop->fd = epoll_create1(EPOLL_CLOEXEC);
    if (loop->fd < 0) {
        return MK_ERR;
    }
    loop->capacity = capacity;
    loop->events = mk_calloc((size_t) capacity, sizeof(struct epoll_event));
    return MK_OK;
}

void mk_event_loop_destroy(struct mk_event_loop *loop)
{
    if (loop->fd >= 0) {
        close(loop->fd);
        loop->fd = -1;
    }
    mk_free(loop->events);
    loop->events = NULL;
}

int mk_event_add(struct mk_event_loop *loop, struct mk_event *event, int fd, uint32_t mask,
                 mk_event_cb cb)
{
    struct epoll_event ev = {.events = mk_epoll_mask(mask), .data.ptr = event};

    event->fd = fd;
    event->mask = mask;
    event->cb = cb;
    if (epoll_ctl(loop->fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        event->fd = -1;
        return MK_ERR;
    }
    return MK_OK;
}

int mk_event_change(struct mk_event_loop *loop, struct mk_event *event, uint32_t mask)
{
    struct epoll_event ev = {.events = mk_epoll_mask(mask), .data.ptr = event};

    if (event->mask == mask) {
        return MK_OK;
    }
    if (epoll_ctl(loop->fd, event->mask ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, event->fd, &ev) < 0) {
        return MK_ERR;
    }
    event->mask = mask;
    return MK_OK;
}

int mk_event_unwatch(struct mk_event_loop *loop, struct mk_event *event)
{
    if (event->fd < 0 || event->mask == 0) {
        return MK_OK;
    }
    event->mask = 0;
    return epoll_ctl(loop->fd, EPOLL_CTL_DEL, event->fd, NULL) < 0 ? MK_ERR : MK_OK;
}

int mk_event_del(struct mk_event_loop *loop, struct mk_event *event)
{
    int ret = MK_OK;

    if (event->fd < 0) {
        return MK_OK;
    }
    if (epoll_ctl(loop->fd, EPOLL_CTL_DEL, event->fd, NULL) < 0) {
        ret = MK_ERR;
    }
    event->fd = -1;
    event->mask = 0;
    return ret;
}

int mk_event_wait(struct mk_event_loop *loop, int timeout_ms)
{
    int n = mk_sys_epoll_wait(loop->fd, loop->events, loop->capacity, timeout_ms);
    if (n < 0) {
        return errno == EINTR ? 0 : MK_ERR;
    }
    return n;
}

void mk_event_dispatch(struct mk_event_loop *loop, int n)
{
    struct epoll_event *events = loop->events;

    for (int i = 0; i < n; i++) {
        struct mk_event *event = events[i].data.ptr;
        uint32_t e = events[i].events;
        uint32_t ready = 0;

        if (event->fd < 0) {
            continue; /* closed earlier in this batch */
        }
        if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) {
            ready |= MK_EV_READ;
        }
        if (e & EPOLLOUT) {
            ready |= MK_EV_WRITE;
        }
        if (e & (EPOLLERR | EPOLLHUP)) {
            ready |= MK_EV_ERROR;
        }
        if (e & (EPOLLRDHUP | EPOLLHUP)) {
            ready |= MK_EV_HANGUP;
        }
        event->cb(event, ready);
    }
}
