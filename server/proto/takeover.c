/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * takeover.c: a connection handed to a plugin after 101 Switching
 * Protocols (api->takeover), for WebSocket and the like.
 *
 *   content hook: api->takeover(r, ops, arg, idle_ms), returns MK_OK
 *     ──▶ the protocol sends the 101 and frees the request
 *     ──▶ mk_takeover_start: the protocol's state is released, the
 *         connection's protocol becomes mk_proto_takeover (state TAKEOVER)
 *     ──▶ bytes read through the transport go to ops->on_read, bytes the
 *         plugin writes (api->takeover_write) go out through it
 *     ──▶ peer closed, error, idle timeout, server stop, takeover_close
 *         ──▶ ops->on_close once ──▶ closed (lingering after takeover_close)
 *
 * The connection holds the configuration of the request that asked for it
 * (mk_config_use_hold) from api->takeover until on_close has returned: a
 * reload in between frees nothing the plugin's callbacks still use.
 *
 * It is a protocol like HTTP/1 (proto.h), with the connection-level
 * entries only: conn.c sees no difference. Everything runs on the
 * connection's worker.
 *
 * Back-pressure: what the socket does not take at once is copied into a
 * queue; while more than MK_TAKEOVER_HIGH bytes wait, the connection's
 * input is not read (so on_read is not called) and takeover_write answers
 * MK_AGAIN; once the queue is out, on_writable is called and reading goes
 * on. An echo therefore holds at most about MK_TAKEOVER_HIGH plus one read
 * however slowly its client reads. The plugin may also hold the input
 * itself (takeover_hold: its own destination is full); released, bytes
 * the transport or the early buffer still hold, which no event would
 * announce, are read from a 0 ms timer (`kick`), never inside the call.
 *
 * No callback closes the connection under the plugin's feet: failures and
 * takeover_close() only mark it, and the close happens when the callback
 * in progress has returned, or from the loop (a 0 ms timer) when the
 * plugin called from elsewhere (its own timer). So on_close never runs
 * inside a takeover_* call.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "../config/conf.h"
#include "../conn/conn.h"
#include "../conn/conn_count.h"
#include "proto.h"
#include "../request/request.h"
#include "takeover.h"
#include "../conn/transport.h"
#include "../runtime/worker.h"

#define MK_TAKEOVER_HIGH (64u << 10) /* queued bytes past which input pauses */
#define MK_TAKEOVER_READ 16384       /* bytes read per call */

struct mk_tk_piece {
    struct mk_tk_piece *next;
    size_t len, off;
    char data[];
};

struct mk_tk_conn {
    struct mk_takeover base; /* first: the plugin's handle */
    struct mk_conn *conn;
    struct mk_config *cfg; /* held until on_close has returned */
    const struct mk_takeover_ops *ops;
    void *arg;
    uint32_t idle_ms;
    char *early; /* bytes the client sent after the upgrade request's head */
    size_t early_len;
    struct mk_tk_piece *q_head, *q_tail;
    size_t queued;
    uint32_t read_mask;  /* the event the last read waits for */
    uint32_t write_mask; /* the event the queue waits for */
    bool busy;           /* inside mk_takeover_run: settle at its end */
    bool closing;        /* takeover_close(): close once the queue is out */
    bool failed;         /* peer closed or I/O error: close now */
    bool notify;         /* takeover_write said MK_AGAIN: on_writable once drained */
    bool progress;       /* a byte moved: re-arm the idle timer */
    bool held;           /* takeover_hold(): the plugin takes no input now */
    bool kick;           /* released with bytes no event announces: read from the loop */
};

/* ---- output -------------------------------------------------------------- */

static void mk_takeover_pop(struct mk_tk_conn *t)
{
    struct mk_tk_piece *p = t->q_head;

    t->q_head = p->next;
    if (!t->q_head) {
        t->q_tail = NULL;
    }
    mk_free(p);
}

/* Write the queue: MK_OK (empty), MK_AGAIN (socket full), MK_ERR (failed). */
static int mk_takeover_flush(struct mk_tk_conn *t)
{
    struct mk_conn *c = t->conn;

    while (t->q_head) {
        struct iovec iov[16];
        int cnt = 0;
        for (struct mk_tk_piece *p = t->q_head; p && cnt < 16; p = p->next) {
            iov[cnt].iov_base = p->data + p->off;
            iov[cnt++].iov_len = p->len - p->off;
        }
        ssize_t n = mk_conn_writev(c, iov, cnt, 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                t->write_mask = mk_conn_want_mask(c, MK_EV_WRITE);
                return MK_AGAIN;
            }
            t->failed = true;
            return MK_ERR;
        }
        t->progress = t->progress || n > 0;
        t->queued -= (size_t) n;
        while (n > 0) {
            struct mk_tk_piece *p = t->q_head;
            size_t take = p->len - p->off < (size_t) n ? p->len - p->off : (size_t) n;
            p->off += take;
            n -= (ssize_t) take;
            if (p->off == p->len) {
                mk_takeover_pop(t);
            }
        }
        t->write_mask = MK_EV_WRITE;
    }
    return MK_OK;
}

/*
 * Outside a callback of ours: make the loop do what the state says: close
 * soon (a 0 ms timer), or watch the directions needed and re-arm the idle
 * timer after progress.
 */
static void mk_takeover_settle(struct mk_tk_conn *t)
{
    struct mk_conn *c = t->conn;
    uint32_t mask = 0;

    if (t->busy) {
        return;
    }
    if (t->failed || (t->closing && !t->q_head) || t->kick) {
        mk_conn_timer_idle(c, 0);
        return;
    }
    if (t->progress) {
        t->progress = false;
        mk_conn_timer_idle(c, t->idle_ms);
    }
    if (!t->closing && !t->held && t->queued < MK_TAKEOVER_HIGH) {
        mask |= t->read_mask;
    }
    if (t->q_head) {
        mask |= t->write_mask;
    }
    int rc = mask ? mk_event_mod(&c->worker->loop, &c->ev, mask)
                  : mk_event_unwatch(&c->worker->loop, &c->ev);
    if (rc != MK_OK) {
        t->failed = true;
        mk_conn_timer_idle(c, 0);
    }
}

static int mk_tk_conn_write(struct mk_takeover *base, const void *data, size_t len)
{
    struct mk_tk_conn *t = (struct mk_tk_conn *) base;
    struct mk_conn *c = t->conn;
    size_t off = 0;

    if (t->closing || t->failed) {
        return MK_ERR;
    }
    if (len == 0) {
        return MK_OK;
    }
    if (!t->q_head) {
        struct iovec iov = {(void *) data, len};
        ssize_t n = mk_conn_writev(c, &iov, 1, 0);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                t->failed = true;
                mk_takeover_settle(t);
                return MK_ERR;
            }
            n = 0;
        }
        t->progress = t->progress || n > 0;
        off = (size_t) n;
        t->write_mask = mk_conn_want_mask(c, MK_EV_WRITE);
    }
    if (off < len) {
        struct mk_tk_piece *p = mk_try_alloc(sizeof(*p) + len - off);
        if (!p) {
            return MK_ERR;
        }
        p->next = NULL;
        p->len = len - off;
        p->off = 0;
        memcpy(p->data, (const char *) data + off, len - off);
        if (t->q_tail) {
            t->q_tail->next = p;
        }
        else {
            t->q_head = p;
        }
        t->q_tail = p;
        t->queued += len - off;
    }
    int rc = MK_OK;
    if (t->queued >= MK_TAKEOVER_HIGH) {
        t->notify = true;
        rc = MK_AGAIN;
    }
    mk_takeover_settle(t);
    return rc;
}

static void mk_tk_conn_close(struct mk_takeover *base)
{
    struct mk_tk_conn *t = (struct mk_tk_conn *) base;

    t->closing = true;
    mk_takeover_settle(t);
}

static struct mk_conn *mk_tk_conn_conn(struct mk_takeover *base)
{
    return ((struct mk_tk_conn *) base)->conn;
}

static void mk_tk_conn_hold(struct mk_takeover *base, int hold)
{
    struct mk_tk_conn *t = (struct mk_tk_conn *) base;

    if (t->held == (hold != 0)) {
        return;
    }
    t->held = hold != 0;
    if (!t->held && !t->closing && !t->failed && (t->early || mk_conn_pending(t->conn) > 0)) {
        t->kick = true; /* bytes that no event of the socket will announce */
    }
    mk_takeover_settle(t);
}

static const struct mk_takeover_carrier mk_tk_conn_carrier = {
    .write = mk_tk_conn_write,
    .close = mk_tk_conn_close,
    .conn = mk_tk_conn_conn,
    .hold = mk_tk_conn_hold,
};

int mk_takeover_write(struct mk_takeover *t, const void *data, size_t len)
{
    return t->carrier->write(t, data, len);
}

void mk_takeover_close(struct mk_takeover *t)
{
    t->carrier->close(t);
}

struct mk_conn *mk_takeover_conn(struct mk_takeover *t)
{
    return t->carrier->conn(t);
}

void mk_takeover_hold(struct mk_takeover *t, int hold)
{
    t->carrier->hold(t, hold);
}

/* ---- the protocol --------------------------------------------------------- */

/* Readable or writable: write what waits, read what comes, settle. */
static void mk_takeover_run(struct mk_conn *c)
{
    struct mk_tk_conn *t = (struct mk_tk_conn *) c->takeover;
    char buf[MK_TAKEOVER_READ];

    t->busy = true;
    if (t->q_head && mk_takeover_flush(t) == MK_OK && t->notify && !t->failed) {
        t->notify = false;
        if (t->ops->on_writable) {
            t->ops->on_writable(&t->base, t->arg);
        }
    }
    if (t->early && !t->failed && !t->held) {
        char *early = t->early;
        t->early = NULL;
        t->progress = true;
        t->ops->on_read(&t->base, early, t->early_len, t->arg);
        mk_free(early);
    }
    /*
     * Read while there may be more: a read that filled the buffer, or bytes
     * the transport holds (pending). A shorter read took what the socket
     * had; the loop is level triggered, so what comes later is signalled,
     * and the read that would only say EAGAIN is saved.
     */
    while (!t->failed && !t->closing && !t->held && t->queued < MK_TAKEOVER_HIGH) {
        ssize_t n = mk_conn_read(c, buf, sizeof(buf));
        if (n > 0) {
            t->progress = true;
            t->ops->on_read(&t->base, buf, (size_t) n, t->arg);
            if ((size_t) n < sizeof(buf) && !t->failed && mk_conn_pending(c) == 0) {
                t->read_mask = MK_EV_READ;
                break;
            }
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            t->read_mask = mk_conn_want_mask(c, MK_EV_READ);
            break;
        }
        t->failed = true; /* the peer closed, or an error */
    }
    t->busy = false;
    mk_takeover_settle(t);
}

/* The idle timeout, or a close decided outside a callback. */
static void mk_takeover_expire(struct mk_conn *c)
{
    struct mk_tk_conn *t = (struct mk_tk_conn *) c->takeover;

    if (t->kick && !t->failed && !(t->closing && !t->q_head)) {
        t->kick = false;
        t->progress = true; /* the idle timer, re-armed by the run's settle */
        mk_takeover_run(c);
        return;
    }
    t->kick = false;
    if (t->closing && !t->failed && !t->q_head) {
        mk_conn_linger(c); /* do not reset what was sent away */
        return;
    }
    mk_conn_close(c);
}

/*
 * A continuation that called api->takeover() switched the connection to
 * this protocol while its result was handled (the 101 went out at once);
 * the request code then asks the protocol to go on: the takeover reads on
 * its own from mk_takeover_start, so there is nothing to do.
 */
static void mk_takeover_proceed(struct mk_conn *c)
{
    (void) c;
}

static void mk_takeover_go_away(struct mk_conn *c)
{
    mk_conn_close(c);
}

static void mk_takeover_release(struct mk_conn *c)
{
    struct mk_tk_conn *t = (struct mk_tk_conn *) c->takeover;

    if (!t) {
        return;
    }
    c->takeover = NULL;
    while (t->q_head) {
        mk_takeover_pop(t);
    }
    mk_free(t->early);
    t->ops->on_close(&t->base, t->arg);
    mk_config_use_release(&c->worker->use,
                          t->cfg); /* after on_close: it may use the plugin's state */
    mk_free(t);
}

const struct mk_proto mk_proto_takeover = {
    .name = "takeover",
    .on_input = mk_takeover_run,
    .on_writable = mk_takeover_run,
    .proceed = mk_takeover_proceed,
    .expire = mk_takeover_expire,
    .go_away = mk_takeover_go_away,
    .release = mk_takeover_release,
};

void mk_takeover_start(struct mk_conn *c, const struct mk_upgrade *up, const char *data, size_t len)
{
    struct mk_tk_conn *t = mk_try_alloc(sizeof(*t));

    if (t) {
        memset(t, 0, sizeof(*t));
        if (len) {
            t->early = mk_try_alloc(len);
            if (!t->early) {
                mk_free(t);
                t = NULL;
            }
            else {
                memcpy(t->early, data, len);
                t->early_len = len;
            }
        }
    }
    if (!t) {
        mk_upgrade_cancel(c, up);
        mk_conn_close(c);
        return;
    }
    t->base.carrier = &mk_tk_conn_carrier;
    t->conn = c;
    t->cfg = up->cfg;
    t->ops = up->ops;
    t->arg = up->arg;
    t->idle_ms = up->idle_ms;
    t->read_mask = MK_EV_READ;
    t->write_mask = MK_EV_WRITE;
    t->progress = true;
    c->proto->release(c); /* the protocol that carried the upgrade lets go */
    c->proto = &mk_proto_takeover;
    mk_conn_state(c, MK_CONN_TAKEOVER);
    c->takeover = &t->base;
    if (up->on_open) {
        t->busy = true; /* a close asked for in on_open waits for its end */
        up->on_open(&t->base, t->arg);
        t->busy = false;
    }
    mk_takeover_run(c);
}
