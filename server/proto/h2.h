/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * h2.h: HTTP/2 (RFC 9113) behind the protocol table (proto.h), with
 * nghttp2 doing the framing, HPACK and flow control (built when
 * MK_HAVE_H2 is defined: the CMake option MK_H2).
 *
 * A connection speaks HTTP/2 when its TLS handshake negotiated "h2"
 * (ALPN), or when it opened with the connection preface on a listener
 * whose Listen line allows cleartext HTTP/2 (`Listen 2001 h2c`; HTTP/1 is
 * served there too), or asked for it there with `Upgrade: h2c` in its first
 * request (h2_upgrade.c). Each stream becomes one ordinary request
 * (mk_request_new) that goes through request.c exactly like an HTTP/1
 * request; h2*.c turn its HEADERS into a request head and its response
 * into HEADERS and DATA frames. The state (struct mk_h2, h2*.c only) is
 * allocated when the connection starts speaking HTTP/2 and freed by
 * proto->release.
 *
 * Ownership: the state, its nghttp2 session and its streams belong to the
 * connection's worker and are touched by no other thread (h2_mem.h: their
 * blocks come from that worker's free lists). Other threads read only the
 * worker's atomic HTTP/2 counters this code moves (api->h2_stats).
 */
#ifndef MK_SERVER_H2_H
#define MK_SERVER_H2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

struct mk_conn;
struct mk_http_head;

/* The client connection preface (RFC 9113 section 3.4) */
#define MK_H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define MK_H2_PREFACE_LEN 24

#ifdef MK_HAVE_H2
extern const struct mk_proto mk_proto_h2;

/*
 * c (an HTTP/1 connection on an h2c listener, no request served yet)
 * opened with the connection preface: it speaks HTTP/2 from now on.
 * `data` (len bytes, the preface first) is what was read so far; the
 * caller's buffers may be released once this returns.
 */
void mk_h2_start(struct mk_conn *c, const char *data, size_t len);

/* The largest HTTP2-Settings payload taken (decoded): 64 settings. */
#define MK_H2_UPGRADE_SETTINGS_MAX (64 * 6)

/*
 * h2_upgrade.c (pure): does `head` ask to continue in cleartext HTTP/2
 * (HTTP/1.1, `Upgrade: h2c`, `Connection: Upgrade, HTTP2-Settings`, exactly
 * one HTTP2-Settings holding a base64url SETTINGS payload), without a
 * request body? Then true with the decoded payload in settings (cap bytes)
 * and its length in *len. A request with a body is answered over HTTP/1.1.
 */
bool mk_h2_upgrade_wanted(const struct mk_http_head *head, uint8_t *settings, size_t cap,
                          size_t *len);

/*
 * c (an HTTP/1 connection on an h2c listener, no request served yet) got
 * `head`, which mk_h2_upgrade_wanted accepted: answer 101, speak HTTP/2
 * from now on, and serve head as stream 1 (RFC 7540 section 3.2). `rest`
 * (rest_len bytes) is what was read after the head (the client's preface
 * may have begun). The caller's buffers may be released once this returns.
 */
void mk_h2_start_upgrade(struct mk_conn *c, const struct mk_http_head *head,
                         const uint8_t *settings, size_t settings_len, const char *rest,
                         size_t rest_len);
#endif

/* Whether HTTP/2 is built in. */
static inline bool mk_h2_available(void)
{
#ifdef MK_HAVE_H2
    return true;
#else
    return false;
#endif
}

#endif
