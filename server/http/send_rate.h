/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * send_rate.h: SendMinRate, the lowest rate at which a client must take a
 * response while the server waits for it (see docs/configuration.md). The
 * mirror of BodyMinRate for what goes out; pure, for h1.c (a response
 * waiting for writability) and h2.c (a connection whose output is stalled,
 * a stream whose window the client keeps shut).
 *
 * The rate is measured over windows of SendTimeout: a window starts when
 * the server begins to wait for the client (mk_send_rate_start) and ends at
 * the first check at least SendTimeout later, where the bytes the client
 * took during it must average SendMinRate a second; then the next window
 * starts. A fast start buys no more than its own window, so a client cannot
 * bank a burst and trickle for hours after. A client that takes nothing
 * meets SendTimeout instead.
 */
#ifndef MK_SERVER_SEND_RATE_H
#define MK_SERVER_SEND_RATE_H

#include <stdbool.h>
#include <stdint.h>

struct mk_send_rate {
    uint64_t since; /* worker ms: the start of the window; 0: none (not waiting) */
    uint64_t base;  /* the bytes sent then */
};

/* The server starts waiting for the client, `sent` bytes sent so far. */
static inline void mk_send_rate_start(struct mk_send_rate *w, uint64_t sent, uint64_t now_ms)
{
    w->since = now_ms ? now_ms : 1;
    w->base = sent;
}

/* It no longer waits for the client (the output went out, or the handler has nothing). */
static inline void mk_send_rate_stop(struct mk_send_rate *w)
{
    w->since = 0;
}

/*
 * A check at now_ms with `sent` bytes sent: true when a window of at least
 * window_ms (SendTimeout) is over and moved less than min_rate bytes a
 * second on average (drop the client); otherwise false, and a window that
 * is over gives way to the next. min_rate 0: the check is off.
 */
static inline bool mk_send_rate_short(struct mk_send_rate *w, uint64_t sent, uint64_t now_ms,
                                      uint32_t window_ms, uint64_t min_rate)
{
    if (!min_rate || !w->since || now_ms < w->since || now_ms - w->since < window_ms) {
        return false;
    }
    uint64_t elapsed = now_ms - w->since, moved = sent - w->base;
    if (moved < min_rate * elapsed / 1000) {
        return true;
    }
    w->since = now_ms;
    w->base = sent;
    return false;
}

/* When the current window is over (UINT64_MAX: none, or the check is off). */
static inline uint64_t mk_send_rate_due(const struct mk_send_rate *w, uint32_t window_ms,
                                        uint64_t min_rate)
{
    return min_rate && w->since ? w->since + window_ms : UINT64_MAX;
}

#endif
