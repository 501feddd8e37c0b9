/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * proto.c: the protocols by name (the ALPN table), and the set of them the
 * connections below this layer are given at start (mk_conn_protocols): a
 * new connection speaks HTTP/1, a transport's handshake may choose another
 * by ALPN, and a connection refused before any protocol ran is answered in
 * HTTP/1.
 */
#include <string.h>

#include "../conn/conn.h"
#include "h1.h"
#include "h2.h"
#include "proto.h"

/*
 * The protocols a connection can speak, by ALPN name. "h2" is here when
 * HTTP/2 is built in (MK_H2); without it protocol_known("h2") tells a
 * transport not to offer it.
 */
static const struct {
    const char *name;
    const struct mk_proto *proto;
} mk_protos[] = {
    {"http/1.1", &mk_proto_h1},
    {"http/1.0", &mk_proto_h1},
#ifdef MK_HAVE_H2
    {"h2", &mk_proto_h2},
#endif
};

const struct mk_proto *mk_proto_find(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(mk_protos) / sizeof(mk_protos[0]); i++) {
        if (strlen(mk_protos[i].name) == len && memcmp(mk_protos[i].name, name, len) == 0) {
            return mk_protos[i].proto;
        }
    }
    return NULL;
}

int mk_proto_known(const char *name, size_t len)
{
    return name && mk_proto_find(name, len) != NULL;
}

const struct mk_proto_set mk_proto_table = {
    .first = &mk_proto_h1,
    .find = mk_proto_find,
    .refuse = mk_h1_send_raw,
};
