/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/socket.c: connections taken over after 101 Switching Protocols
 * (response->takeover, socket_write, socket_close), service ABI 1.1.
 *
 * A duda_socket wraps the server's takeover (api->takeover): it exists
 * from response->takeover() until its on_close, holds one of the
 * reference on the service meanwhile (so the service stays mapped and
 * allocated while it has open sockets), and runs every callback with the service current. All
 * of it happens on the connection's worker; worker->call() is how other
 * threads reach it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duda_internal.h"

struct duda_socket {
    struct mk_takeover *t; /* NULL until on_open */
    struct duda_service *svc;
    const struct duda_socket_ops *ops;
    void *arg;
    char addr[64];
};

/* Run a callback of the service with the service current. */
#define DUDA_SOCKET_CALL(s, call)                                                                  \
    do {                                                                                           \
        struct duda_service *saved_ = duda_current;                                                \
        duda_current = (s)->svc;                                                                   \
        call;                                                                                      \
        duda_current = saved_;                                                                     \
    } while (0)

static duda_socket_t *duda_socket_of(struct mk_takeover *t, void *arg)
{
    duda_socket_t *s = arg;
    s->t = t;
    return s;
}

static void duda_tk_open(struct mk_takeover *t, void *arg)
{
    duda_socket_t *s = duda_socket_of(t, arg);
    if (s->ops->on_open) {
        DUDA_SOCKET_CALL(s, s->ops->on_open(s, s->arg));
    }
}

static void duda_tk_read(struct mk_takeover *t, const void *data, size_t len, void *arg)
{
    duda_socket_t *s = duda_socket_of(t, arg);
    DUDA_SOCKET_CALL(s, s->ops->on_read(s, data, len, s->arg));
}

static void duda_tk_writable(struct mk_takeover *t, void *arg)
{
    duda_socket_t *s = duda_socket_of(t, arg);
    if (s->ops->on_writable) {
        DUDA_SOCKET_CALL(s, s->ops->on_writable(s, s->arg));
    }
}

static void duda_tk_close(struct mk_takeover *t, void *arg)
{
    duda_socket_t *s = arg;
    struct duda_service *svc = s->svc;

    s->t = t;
    DUDA_SOCKET_CALL(s, s->ops->on_close(t ? s : NULL, s->arg));
    free(s);
    duda_service_put(svc);
}

static const struct mk_takeover_ops duda_tk_ops = {
    .on_read = duda_tk_read,
    .on_writable = duda_tk_writable,
    .on_close = duda_tk_close,
};

int duda_socket_takeover(duda_request_t *dr, const struct duda_socket_ops *ops, void *arg,
                         unsigned idle_ms)
{
    if (!dr || !dr->r || dr->ended || dr->waiting || dr->streaming || dr->upgraded) {
        duda_misuse(dr, "response->takeover(): the request is not in its callback");
        return -1;
    }
    if (!ops || !ops->on_read || !ops->on_close) {
        duda_misuse(dr, "response->takeover(): on_read and on_close are required");
        return -1;
    }
    if (!MK_API_HAS(duda_mk, takeover_on_open)) {
        return -1;
    }
    duda_socket_t *s = calloc(1, sizeof(*s));
    if (!s) {
        return -1;
    }
    s->svc = dr->svc;
    s->ops = ops;
    s->arg = arg;
    const char *addr = duda_request_obj.remote_addr(dr);
    snprintf(s->addr, sizeof(s->addr), "%s", addr ? addr : "");
    if (duda_mk->takeover(dr->r, &duda_tk_ops, s, idle_ms) != MK_OK) {
        free(s);
        return -1; /* HTTP/1.0, HTTP/2, a body: the service answers otherwise */
    }
    duda_mk->takeover_on_open(dr->r, duda_tk_open);
    duda_service_hold(s->svc); /* until on_close, which always follows */
    dr->upgraded = true;
    dr->status = 101;
    return 0;
}

int duda_socket_write(duda_socket_t *s, const void *data, size_t len)
{
    if (!s || !s->t) {
        return DUDA_ERR;
    }
    int rc = duda_mk->takeover_write(s->t, data, len);
    return rc == MK_OK ? DUDA_OK : rc == MK_AGAIN ? DUDA_AGAIN : DUDA_ERR;
}

int duda_socket_close(duda_socket_t *s)
{
    if (!s || !s->t) {
        return -1;
    }
    duda_mk->takeover_close(s->t);
    return 0;
}

const char *duda_socket_remote_addr(duda_socket_t *s)
{
    return s ? s->addr : NULL;
}
