/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * h1_internal.h: what the two files of the HTTP/1 codec give each other.
 * h1.c is the connection's state machine (heads, bodies, keep-alive, the
 * protocol table's entries); h1_out.c writes (the response head and body,
 * 100 Continue, the raw answers of h1.h). Private to them: the rest of the
 * server reaches HTTP/1 through mk_proto_h1 and h1.h.
 *
 * Everything runs on the connection's worker; the state written is the
 * connection's struct mk_h1 (h1.h) and the request in progress (c->h1.req).
 */
#ifndef MK_SERVER_H1_INTERNAL_H
#define MK_SERVER_H1_INTERNAL_H

#include "h1.h"

struct mk_conn;
struct mk_request;

/* ---- h1_out.c ------------------------------------------------------------ */

/*
 * Build r's response head into the connection's output buffer, drop a body
 * that does not go out (mk_response_omit_body) or read a small one into
 * that buffer, and write what the socket takes: MK_OK (all sent), MK_AGAIN
 * (socket full or this event's budget spent), MK_DECLINED (a streamed body
 * waits for its handler, MK_REQ_IDLE set), MK_ERR.
 */
int mk_h1_start(struct mk_request *r);
/* Write on what mk_h1_start began (the socket is writable, or a stream's
   handler queued bytes): the same results. */
int mk_h1_write(struct mk_request *r);
/* Write "100 Continue" in one attempt: MK_OK, or MK_ERR (not all of it went). */
int mk_h1_send_continue(struct mk_conn *c);
/* proto.h's interim for HTTP/1 (h1_out.c). */
int mk_h1_interim(struct mk_request *r, int status, const char *fields, size_t len);

#endif
