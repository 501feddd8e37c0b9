/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * upgrade.c: a request whose handler asked to take its connection over
 * after 101 Switching Protocols (api->takeover, api->takeover_on_open):
 * what the request records (struct mk_upgrade) until its protocol has sent
 * the 101 and given the connection to the plugin (proto/takeover.c), or
 * until the request ends without the switch (on_close(NULL)). The record
 * holds the request's configuration for the plugin from the start: the
 * taken-over connection keeps it (takeover.c).
 */
#include "../../core/memory.h"
#include "../config/conf.h"
#include "../conn/conn.h"
#include "../proto/proto.h"
#include "../runtime/worker.h"
#include "request.h"
#include "upgrade.h"

int mk_upgrade_request(struct mk_request *r, const struct mk_takeover_ops *ops, void *arg,
                       uint32_t idle_ms)
{
    struct mk_conn *c = r->conn;
    struct mk_upgrade *up;

    if (!ops || !ops->on_read || !ops->on_close || r->upgrade || !c->proto->takeover ||
        c->proto->takeover(r) != MK_OK) {
        return MK_ERR;
    }
    up = mk_arena_alloc(&r->arena, sizeof(*up));
    if (!up) {
        return MK_ERR;
    }
    up->ops = ops;
    up->arg = arg;
    up->idle_ms = idle_ms ? idle_ms : r->cfg->keepalive_timeout_ms;
    up->on_open = NULL;
    /* The plugin's state (a Duda service, its routes) belongs to the
       request's configuration: a reload must not free it under the
       connection, which lives on after the request. */
    up->cfg = mk_config_use_hold(&c->worker->use, r->cfg);
    r->upgrade = up;
    r->status = 101;
    return MK_OK;
}

int mk_upgrade_on_open(struct mk_request *r, void (*on_open)(struct mk_takeover *t, void *arg))
{
    if (!r || !r->upgrade) {
        return MK_ERR;
    }
    r->upgrade->on_open = on_open;
    return MK_OK;
}

void mk_upgrade_cancel(struct mk_conn *c, const struct mk_upgrade *up)
{
    up->ops->on_close(NULL, up->arg);
    mk_config_use_release(&c->worker->use, up->cfg);
}
