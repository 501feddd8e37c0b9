/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * upgrade.h: a request that asked for its connection after 101 Switching
 * Protocols (upgrade.c); the connection's side is proto/takeover.h.
 *
 * Ownership: the record lives in the request (r->upgrade), on its worker,
 * until the protocol sends the 101 and hands it to mk_takeover_start, or
 * the request ends without the switch (mk_upgrade_cancel).
 */
#ifndef MK_SERVER_UPGRADE_H
#define MK_SERVER_UPGRADE_H

#include <stdint.h>

#include <monkey/mk_plugin.h>

struct mk_config;
struct mk_conn;
struct mk_request;

/* What api->takeover() recorded on a request, until its 101 is sent. */
struct mk_upgrade {
    const struct mk_takeover_ops *ops;
    void *arg;
    uint32_t idle_ms;
    void (*on_open)(struct mk_takeover *t, void *arg); /* api->takeover_on_open, or NULL */
    struct mk_config *cfg; /* the request's, held for the plugin (mk_config_use_hold) */
};

/* api->takeover and api->takeover_on_open. */
int mk_upgrade_request(struct mk_request *r, const struct mk_takeover_ops *ops, void *arg,
                       uint32_t idle_ms);
int mk_upgrade_on_open(struct mk_request *r, void (*on_open)(struct mk_takeover *t, void *arg));
/* A request with `up` ended without the switch: on_close(NULL, arg), the configuration let go. */
void mk_upgrade_cancel(struct mk_conn *c, const struct mk_upgrade *up);

#endif
