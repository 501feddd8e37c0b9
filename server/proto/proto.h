/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * proto.h: the protocol seam. A connection speaks one protocol at a time:
 * HTTP/1.x (h1*.c) or HTTP/2 (h2*.c), chosen when it starts, by ALPN on a TLS
 * listener or by the client preface on an h2c listener, or switched to
 * HTTP/2 by `Upgrade: h2c` on its first request (h2_upgrade.c). The
 * protocol turns bytes into requests and responses into bytes. conn.c (lifecycle, transport,
 * lingering close) and request.c (stages, plugins) reach it only through
 * this table, so neither knows how requests are framed on the wire, and a
 * protocol may carry many requests on one connection at once: every
 * request is its own object (mk_request_new) that points to its connection.
 *
 * Connection-level entries run when the event loop or a timer says so;
 * request-level entries are the calls request.c makes for one request. All
 * run on the connection's worker.
 */
#ifndef MK_SERVER_PROTO_H
#define MK_SERVER_PROTO_H

#include <stdbool.h>
#include <stddef.h>

struct mk_conn;
struct mk_request;

struct mk_proto {
    const char *name;

    /* ---- the connection ---- */
    /* The socket is readable (or was never watched yet): read and process. */
    void (*on_input)(struct mk_conn *c);
    /* The socket is writable again after a write that would block. */
    void (*on_writable)(struct mk_conn *c);
    /* The connection's timer expired (see mk_conn_timer_set). */
    void (*expire)(struct mk_conn *c);
    /* The server stops: close the connection if no request is in progress. */
    void (*go_away)(struct mk_conn *c);
    /*
     * The configuration was reloaded: have the client open new connections,
     * which take it (HTTP/2: GOAWAY with the last stream taken; the streams
     * in flight finish, then the connection closes). NULL: nothing to do
     * (an HTTP/1 request already takes the new configuration).
     */
    void (*reload)(struct mk_conn *c);
    /*
     * The connection closes (or lingers): end every request in progress
     * (request_done hooks run while the request's head is still readable),
     * then release the protocol's buffers.
     */
    void (*release)(struct mk_conn *c);

    /* ---- one request ---- */
    /*
     * Send the response set up in r (status, headers, body). `error`: it is
     * an error answer made by the server (mk_request_error), after which
     * the protocol decides whether the stream can still be trusted.
     */
    void (*respond)(struct mk_request *r, bool error);
    /* A content handler returned MK_AGAIN: collect the body, then call
       mk_request_body_ready(r) (at once when there is no body). */
    void (*read_body)(struct mk_request *r);
    /* A hook suspended r: do no I/O for it until unpark (Timeout applies),
       but let a client's hang-up be seen (conn.c then closes). */
    void (*park)(struct mk_request *r);
    /* r was resumed: undo park before its continuation runs. */
    void (*unpark)(struct mk_request *r);
    /* A resumed request's result was handled (r may be gone): go on with
       the connection's buffered input and wait for more. */
    void (*proceed)(struct mk_conn *c);
    /* A hook failed (MK_ERR): drop r; HTTP/1 closes the connection. */
    void (*abort)(struct mk_request *r);
    /* A streamed response's handler queued bytes while the protocol waited
       for it (MK_REQ_IDLE): write them (r may end, and be freed, here). */
    void (*wake)(struct mk_request *r);
    /* A handler asks to take the connection over after r's response
       (api->takeover): MK_OK when this protocol can hand it over once
       that response is sent (then it calls mk_takeover_start), MK_ERR
       when not. NULL: never. */
    int (*takeover)(struct mk_request *r);
    /*
     * An interim answer (api->interim: a 1xx other than 101, its fields
     * "Name: value\r\n" lines of `len` bytes, checked) before r's response
     * head, written at once: MK_OK (sent, or the rest of it goes before the
     * head), MK_DECLINED (the client cannot take one: HTTP/1.0), MK_AGAIN
     * (nothing could be written now: not sent), MK_ERR (the response
     * started, or the stream is gone). NULL: never sent (MK_DECLINED).
     */
    int (*interim)(struct mk_request *r, int status, const char *fields, size_t len);
    /* r's request rule set its own Timeout or SendTimeout (mk_request_timeout),
       as the rules chose it: arm what must come by them. NULL: the
       protocol asks mk_request_timeout where it waits (HTTP/1). */
    void (*timeouts)(struct mk_request *r);
};

/* The protocol named `name` (an ALPN name), or NULL when not spoken (proto.c). */
const struct mk_proto *mk_proto_find(const char *name, size_t len);
/* api->protocol_known: whether `name` is spoken (1) or not (0). */
int mk_proto_known(const char *name, size_t len);
/* The protocols as the connections get them (mk_conn_protocols). */
extern const struct mk_proto_set mk_proto_table;

#endif
