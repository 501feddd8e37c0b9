/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * event.h: a small readiness event loop that knows nothing of HTTP.
 *
 * Anything watched by a loop embeds a `struct mk_event` (the server puts it
 * first in its connection struct) and names a callback. The loop is level
 * triggered: a callback that does not consume its input is called again.
 *
 * A loop belongs to one thread. The backend is one file (event_epoll.c); the
 * rest of the server sees only this header.
 *
 * Stale events: when a callback closes another watched object whose event is
 * still pending in the same batch, that object's memory must stay valid until
 * the batch ends (the server defers connection frees for this reason) and its
 * callback must recognise it is closed. mk_event_del() sets `fd` to -1 and the
 * dispatcher skips records whose `fd` is -1.
 */
#ifndef MK_CORE_EVENT_H
#define MK_CORE_EVENT_H

#include <stdint.h>

/* Interest and readiness bits. */
#define MK_EV_READ 0x01u  /* readable (or a peer hang-up: a read will tell) */
#define MK_EV_WRITE 0x02u /* writable */
#define MK_EV_ERROR 0x04u /* reported only: error or hang-up on the descriptor */
/*
 * Interest: the peer's hang-up only, without readability (for a descriptor
 * whose input must wait). Readiness: the peer closed its side or the
 * connection (reported whatever the interest).
 */
#define MK_EV_HANGUP 0x08u

struct mk_event;
typedef void (*mk_event_cb)(struct mk_event *event, uint32_t ready);

struct mk_event {
    int fd;        /* -1 when not registered */
    uint32_t mask; /* interest currently registered */
    mk_event_cb cb;
};

struct mk_event_loop {
    int fd;
    int capacity;
    void *events; /* backend-specific array of `capacity` entries */
};

int mk_event_loop_init(struct mk_event_loop *loop, int capacity);
void mk_event_loop_destroy(struct mk_event_loop *loop);

/* Watch `fd` with interest `mask`; `event` must outlive the registration. */
int mk_event_add(struct mk_event_loop *loop, struct mk_event *event, int fd, uint32_t mask,
                 mk_event_cb cb);
/* Change the interest to `mask` (a system call: use mk_event_mod). */
int mk_event_change(struct mk_event_loop *loop, struct mk_event *event, uint32_t mask);

/* Change the interest; a no-op (no call at all) when it is unchanged. */
static inline int mk_event_mod(struct mk_event_loop *loop, struct mk_event *event, uint32_t mask)
{
    return event->mask == mask ? 0 /* MK_OK */ : mk_event_change(loop, event, mask);
}

/*
 * Stop watching but keep `fd`: a later mk_event_mod() registers it again.
 * For a descriptor that must not be woken for a while.
 */
int mk_event_unwatch(struct mk_event_loop *loop, struct mk_event *event);

/*
 * Prepare `event` for `fd` without registering it: a later mk_event_mod()
 * registers it. For descriptors that may be done with before they ever
 * need to wait (a connection whose request is already there).
 */
static inline void mk_event_init(struct mk_event *event, int fd, mk_event_cb cb)
{
    event->fd = fd;
    event->mask = 0; /* 0: not in the kernel's interest list */
    event->cb = cb;
}
/* Stop watching; safe on an unregistered event. Does not close the fd. */
int mk_event_del(struct mk_event_loop *loop, struct mk_event *event);

/*
 * Mark `event` unregistered without a system call, for a descriptor about to
 * be closed that is not registered, or whose open file nothing else can hold:
 * closing removes a descriptor from the kernel's interest list only with the
 * last reference to its open file (a child forked by another thread holds
 * one until it execs), so a registered socket is deleted first (mk_event_del).
 */
static inline void mk_event_forget(struct mk_event *event)
{
    event->fd = -1;
    event->mask = 0;
}

/*
 * Wait up to `timeout_ms` (-1: forever) for events. Returns how many are
 * ready (0 on timeout or EINTR), or MK_ERR on another wait error. The caller
 * then runs mk_event_dispatch() with that count, and may do work in between
 * (read the clock, expire timers).
 */
int mk_event_wait(struct mk_event_loop *loop, int timeout_ms);
/* Run the callback of each of the `n` events the last wait returned. */
void mk_event_dispatch(struct mk_event_loop *loop, int n);

#endif
