/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * h1.h: the HTTP/1.x codec behind the protocol table (proto.h).
 *
 * The state below is the HTTP/1 part of a connection: its input and output
 * buffers, the head scanner, the body framing and the one request in
 * progress (HTTP/1 answers requests in order, one at a time). Only h1.c
 * and h1_out.c read or write it (h1_internal.h); request.c and plugins see
 * requests only.
 *
 * Ownership: the state is part of struct mk_conn (c->h1) and belongs to
 * the connection's worker; its buffers are chunks of that worker's pool
 * (or a larger block for a long head), attached only while needed.
 */
#ifndef MK_SERVER_H1_H
#define MK_SERVER_H1_H

#include <stdbool.h>
#include <stdint.h>

#include "../http/http.h"
#include "proto.h"
#include "../http/send_rate.h"

struct mk_conn;
struct mk_request;

enum mk_body_mode {
    MK_BODY_NONE = 0, /* no body, or completely consumed */
    MK_BODY_DISCARD,  /* skip it once the response is sent */
    MK_BODY_BUFFER,   /* collect it for the content handler */
    MK_BODY_STREAM,   /* hand it to the content handler as it arrives (body.h) */
};

struct mk_h1 {
    struct mk_request *req; /* the request in progress, NULL between requests */
    /* input: a pool chunk (or a larger malloc block) attached while needed */
    char *in;
    uint32_t in_size;
    uint32_t in_len;
    /* output: response head bytes not yet written */
    char *out;
    uint32_t out_size;
    uint32_t out_len;
    uint32_t out_pos;

    struct mk_http_scan scan;
    uint32_t head_len;       /* bytes of the current request head at the start of `in` */
    uint8_t body_mode;       /* enum mk_body_mode */
    uint8_t prev_state;      /* the connection state to return to on resume */
    bool chunked_body;       /* the body is framed by chunked coding */
    uint64_t body_remaining; /* Content-Length bytes not yet consumed */
    uint64_t body_seen;      /* decoded body bytes consumed so far */
    uint64_t body_in;        /* body bytes received, framing included (BodyMinRate) */
    uint64_t body_start;     /* head end, or a handler asking for the body (worker ms clock) */
    struct mk_chunked chunked;
    uint64_t body_paused;          /* when a streamed body's window closed (worker ms clock) */
    struct mk_send_rate send_rate; /* SendMinRate while a response waits for the client */
    uint8_t eager; /* credit of eager reads after a response (h1.c, mk_h1_on_input) */
};

extern const struct mk_proto mk_proto_h1;

/*
 * Write a complete minimal HTTP/1.1 response with `status` in one attempt,
 * outside any request (503 over the connection limit, 408 on a head
 * timeout). Best effort: a full socket buffer loses the courtesy.
 */
void mk_h1_send_raw(struct mk_conn *c, int status);

/*
 * The keep-alive decision for a request as received: the configuration
 * allows it (KeepAlive, MaxKeepAliveRequests counting `served` earlier
 * responses), the server is not stopping, and the version and Connection
 * header ask for it. Pure.
 */
bool mk_h1_keepalive(const struct mk_http_head *h, bool allowed, uint32_t max_requests,
                     uint32_t served);

#endif
