/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * takeover.h: a connection handed to a plugin after 101 Switching
 * Protocols (api->takeover), or one HTTP/2 stream handed to it after the
 * 200 of an extended CONNECT (RFC 8441, h2_tunnel.c). See takeover.c.
 *
 * Ownership: the takeover record (c->takeover) belongs to its connection
 * and its worker: the plugin's callbacks run on that worker, and it is
 * freed (the configuration it held let go) once on_close has returned.
 */
#ifndef MK_SERVER_TAKEOVER_H
#define MK_SERVER_TAKEOVER_H

#include <stddef.h>
#include <stdint.h>

#include <monkey/mk_plugin.h>

struct mk_conn;
struct mk_request;

#include "../request/upgrade.h"

/*
 * How a takeover's bytes travel, behind the plugin's handle: the whole
 * connection (takeover.c) or one HTTP/2 stream (h2_tunnel.c). The api's
 * takeover_write, takeover_close, takeover_conn and takeover_hold call these.
 */
struct mk_takeover_carrier {
    int (*write)(struct mk_takeover *t, const void *data, size_t len);
    void (*close)(struct mk_takeover *t);
    struct mk_conn *(*conn)(struct mk_takeover *t);
    void (*hold)(struct mk_takeover *t, int hold);
};

/* What every takeover record begins with: the handle the plugin holds. */
struct mk_takeover {
    const struct mk_takeover_carrier *carrier;
};

/* The protocol of a taken-over connection (c->proto). */
extern const struct mk_proto mk_proto_takeover;

/* api->takeover_write, takeover_close, takeover_conn, takeover_hold. */
int mk_takeover_write(struct mk_takeover *t, const void *data, size_t len);
void mk_takeover_close(struct mk_takeover *t);
struct mk_conn *mk_takeover_conn(struct mk_takeover *t);
void mk_takeover_hold(struct mk_takeover *t, int hold);

/*
 * The protocol sent the 101 of a request with `up` and freed the request:
 * release the protocol's state and give the connection to the plugin;
 * `data` are bytes the client sent after the request head (copied, handed
 * to on_read first). On the connection's worker; the connection may be
 * closed when this returns.
 */
void mk_takeover_start(struct mk_conn *c, const struct mk_upgrade *up, const char *data,
                       size_t len);

#endif
