/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/redis_loop.h: one hiredis asynchronous connection on a worker's
 * event loop, with reconnection. The library duda-redis-loop (duda.cmake),
 * linked by the plugin (the Redis session store, on the plugin event-loop
 * API) and by the redis package (on Duda's event object): each hands it
 * its loop as a table of functions.
 *
 * A connection belongs to the worker that opened it: every function here
 * runs on that worker only. It connects at once, queues commands while
 * connecting, and when the server cannot be reached or the link drops it
 * fails what was pending (callbacks get a NULL reply), logs it and tries
 * again after a back-off that doubles from 100 ms up to 5 s.
 *
 * Writes are coalesced: commands issued during one loop iteration go out
 * in one write at the next iteration (a 0 ms timer), without touching
 * the descriptor's interest; a write interest is registered only when the
 * socket is full or the connection is still being established. The
 * connection makes its two timers (that write, the next attempt) once,
 * when it is opened, and arms them again each time.
 */
#ifndef DUDA_REDIS_LOOP_H
#define DUDA_REDIS_LOOP_H

#include <stdbool.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#define DUDA_REDIS_LOOP_READ 0x1u
#define DUDA_REDIS_LOOP_WRITE 0x2u

#define DUDA_REDIS_LOOP_BACKOFF_MIN_MS 100u
#define DUDA_REDIS_LOOP_BACKOFF_MAX_MS 5000u

/* The worker's loop, as the user of a connection sees it. */
struct duda_redis_loop_ops {
    /* Watch fd for DUDA_REDIS_LOOP_* (mask may be 0); NULL on failure. */
    void *(*watch)(int fd, unsigned mask, void (*cb)(int fd, unsigned ready, void *arg), void *arg);
    /* Change the interest: 0 or -1 (NULL: the connection unwatches and watches again). */
    int (*modify)(void *w, unsigned mask);
    void (*unwatch)(void *w);
    /*
     * A timer made once per connection and armed again and again: not
     * armed at first (NULL on failure); timer_arm() calls cb(arg) once in
     * `ms` (0: at the next loop iteration), moving an armed one (0 or -1);
     * timer_disarm() cancels the call; timer_free() frees it, also inside
     * its callback.
     */
    void *(*timer_new)(void (*cb)(void *arg), void *arg);
    int (*timer_arm)(void *t, unsigned ms);
    void (*timer_disarm)(void *t);
    void (*timer_free)(void *t);
    /* A line in the server's log (an error or a notice). */
    void (*log)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
};

enum duda_redis_loop_state {
    DUDA_REDIS_LOOP_DOWN,       /* waiting for the next attempt */
    DUDA_REDIS_LOOP_CONNECTING, /* commands are queued */
    DUDA_REDIS_LOOP_UP,
};

struct duda_redis_loop;

/* Called on the worker each time the connection is up (again): re-subscribe here. */
typedef void (*duda_redis_loop_up_cb)(struct duda_redis_loop *c, void *arg);

struct duda_redis_loop {
    const struct duda_redis_loop_ops *ops;
    redisAsyncContext *ac; /* NULL while down */
    enum duda_redis_loop_state state;
    char host[256];
    int port, db;
    const char *who; /* for the log: "session store", "redis package" */
    void *watch;
    unsigned mask; /* the interest registered */
    bool want_read, want_write;
    bool flushing;                   /* inside the coalesced write */
    void *flush_timer, *retry_timer; /* made at open, freed at close */
    bool flush_armed, retry_armed;
    unsigned backoff_ms, failures;
    duda_redis_loop_up_cb on_up;
    void *up_arg;
    bool closing;            /* duda_redis_loop_close() or _abandon(): no reconnection */
    bool released;           /* duda_redis_loop_close() ran: c is freed when depth is back to 0 */
    unsigned depth;          /* the adapter's calls into hiredis on the stack */
    redisAsyncContext *dead; /* closed where hiredis still used it: freed when depth is 0 */
    struct duda_redis_loop *next; /* on the list of abandoned ones */
};

/* Start a connection (on the current worker); it reconnects by itself. NULL: out of memory
   (the connection or its timers). */
struct duda_redis_loop *duda_redis_loop_open(const struct duda_redis_loop_ops *ops,
                                             const char *host, int port, int db, const char *who,
                                             duda_redis_loop_up_cb on_up, void *up_arg);

/* The context to send commands on, or NULL while the server is unreachable. */
redisAsyncContext *duda_redis_loop_ctx(struct duda_redis_loop *c);

/*
 * Close, on the connection's worker: pending callbacks get a NULL reply
 * (they run inside this call, or when the callback that closed returns);
 * c is freed. Also from inside one of the connection's callbacks (a reply,
 * "up"): then c is freed when the adapter's call that ran the callback
 * returns. Either way the caller must not use c again; calling it again
 * meanwhile (from a NULL reply) does nothing.
 */
void duda_redis_loop_close(struct duda_redis_loop *c);

/*
 * Close from another thread, whose calls the worker's loop refuses (a
 * service unloaded at a reload while its workers run): the socket is
 * closed, so its watch never fires again, and pending callbacks get a
 * NULL reply. The watch and a pending timer stay with the worker, which
 * may still call them: c is kept (they find it closed and do nothing),
 * on a list of the process, and never freed.
 */
void duda_redis_loop_abandon(struct duda_redis_loop *c);

#endif
