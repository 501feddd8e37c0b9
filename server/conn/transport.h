/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * transport.h: the server's side of the transport seam (struct
 * mk_transport in mk_plugin.h).
 *
 * Every read and write of a connection goes through mk_conn_read() and
 * mk_conn_writev(): they clear the direction the transport may ask for
 * (api->conn_io_want) before the call, so after an EAGAIN c->io_want holds
 * what this very call asked for, and mk_conn_want_mask() turns it into the
 * event to wait for. mk_conn_pending() is what the transport holds that
 * the socket will not signal: a reader goes on while it is not 0.
 *
 * The protocol a connection speaks is chosen by name, from the ALPN result
 * of its transport's handshake (the find of the protocol set conn.c is
 * given at start: mk_proto_find, proto/proto.c): "http/1.1" is HTTP/1; a
 * transport that negotiated nothing gets HTTP/1 too.
 *
 * Threads: a transport's calls and the functions below run on the worker
 * that owns the connection; the state a transport keeps for it
 * (c->transport_data) is that worker's too. The copies mk_transport_adopt
 * makes belong to the plugin set: made on the controlling thread as the
 * plugins load, read-only afterwards.
 */
#ifndef MK_SERVER_TRANSPORT_H
#define MK_SERVER_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <monkey/mk_plugin.h>

#include "../../core/event.h"
#include "conn.h"

struct mk_proto;

/*
 * The plaintext of a full TLS record: what a transport whose sendfile
 * copies (TLS without kTLS) encrypts and writes at a time. HTTP/1 corks a
 * file body above it, HTTP/2 holds back the part of a batch of frames
 * that would end in a short record.
 */
#define MK_TRANSPORT_RECORD 16384u

static inline ssize_t mk_conn_read(struct mk_conn *c, void *buf, size_t len)
{
    c->io_want = 0;
    return c->transport->read(c, buf, len);
}

static inline ssize_t mk_conn_writev(struct mk_conn *c, const struct iovec *iov, int iovcnt,
                                     int flags)
{
    c->io_want = 0;
    return c->transport->writev(c, iov, iovcnt, flags);
}

/*
 * Hold partial TCP segments back while a batch of writes goes out
 * (TCP_CORK, on), then send what is held (off). A batch of many small
 * writes (HTTP/2 DATA frames, a sendfile(2) each; TLS records, a write(2)
 * each) then leaves in full segments, each waking the client once, instead
 * of a segment and a wakeup per write. Whoever corks uncorks before the
 * worker waits again: the kernel would hold a partial segment up to 200 ms.
 * Errors are ignored (a socket that is not TCP is not corked).
 */
void mk_conn_cork(struct mk_conn *c, bool on);

/* The event to wait for after an EAGAIN of a call whose own direction is
   `own` (MK_EV_READ or MK_EV_WRITE). */
static inline uint32_t mk_conn_want_mask(const struct mk_conn *c, uint32_t own)
{
    if (c->io_want == MK_IO_WANT_WRITE) {
        return MK_EV_WRITE;
    }
    if (c->io_want == MK_IO_WANT_READ) {
        return MK_EV_READ;
    }
    return own;
}

/* Bytes the transport holds that read() returns without the socket. */
static inline size_t mk_conn_pending(struct mk_conn *c)
{
    return c->transport->pending ? c->transport->pending(c) : 0;
}

/*
 * The transport of `p` as this server reads it, for mk_plugin_set: a copy
 * in which the fields of a newer ABI minor than the plugin's are NULL
 * (see "Versions" at struct mk_transport). NULL when p has none.
 */
struct mk_transport *mk_transport_adopt(const struct mk_plugin *p);

/*
 * Check the options of a Listen line for its transport: MK_OK, or MK_ERR
 * with the transport's reason (or "takes no options") in `reason`.
 */
int mk_transport_check_options(const struct mk_transport *t, const char *options, char *reason,
                               size_t len);

/* api->conn_alpn, conn_server_name, conn_local_addr, conn_io_want, ... */
const char *mk_conn_alpn(struct mk_conn *c, size_t *len);
const char *mk_conn_server_name(struct mk_conn *c, size_t *len);
const char *mk_conn_transport_var(struct mk_conn *c, const char *name, size_t *len);
int mk_conn_local_addr(const struct mk_conn *c, struct sockaddr_storage *out, socklen_t *len);
void mk_conn_io_want(struct mk_conn *c, unsigned dir);
const char *mk_conn_listen_options(const struct mk_conn *c);

#endif
