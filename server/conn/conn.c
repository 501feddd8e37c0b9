/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * conn.c: the life of a client connection, whatever protocol it speaks.
 *
 *   accept ──▶ transport open, conn_accept hooks ──▶ HANDSHAKE (if the
 *      transport has one) ──▶ protocol (c->proto, by ALPN) ──▶ ...
 *      ──▶ lingering close (write side shut, input drained) ──▶ CLOSED
 *
 * This file owns the socket, the transport (the built-in "plain" one is
 * here), the conn_accept/conn_close hooks and the closing; how bytes become
 * requests is the protocol's business (proto.h). Events and timer
 * expiries are handed to the protocol except in the states that belong to
 * the connection itself (HANDSHAKE, LINGER, CLOSED) and while a plugin
 * holds the request: SUSPENDED, or WRITE with MK_CONN_HANDLER_WAIT (a
 * streamed response waits for its handler), both set by the protocol; a
 * hang-up then closes the connection here, and other events only narrow
 * the interest. The handshake has the head Timeout, counted from the
 * accept. The protocol is reached through c->proto and the set given at
 * start (mk_conn_protocols): the first protocol of a connection, the one
 * its ALPN names, and the answer to a connection refused before any ran.
 *
 * A connection of a proxy_protocol listener starts in PROXY_HEAD: the
 * PROXY header is read first, before the transport opens (so before a TLS
 * handshake) and before the conn_accept hooks (which then see the client
 * it names), within the head Timeout from the accept. It is peeked at and
 * only its own bytes are taken from the socket, so the transport and the
 * protocol find the stream as the client sent it. A missing, malformed or
 * too long header closes the connection.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <monkey/mk_util.h>

#include "../../core/keycount.h"
#include "../../core/log.h"
#include "../../core/sys.h"
#include "../proto/h2.h"
#include "../process/server.h"
#include "conn_count.h"
#include "transport.h"

#define MK_LINGER_READS 8

/* Whether c reads its PROXY header (never in a build without MK_REALIP). */
#ifdef MK_HAVE_REALIP
#define MK_CONN_IN_PROXY_HEAD(c) ((c)->state == MK_CONN_PROXY_HEAD)
#else
#define MK_CONN_IN_PROXY_HEAD(c) false
#endif

/* ---- the built-in transport: plain sockets -------------------------------- */

static ssize_t mk_plain_read(struct mk_conn *c, void *buf, size_t len)
{
    ssize_t n;
    do {
        n = mk_sys_read(c->ev.fd, buf, len);
    } while (n < 0 && errno == EINTR);
    return n;
}

/* One buffer goes with sendto (a WebSocket frame, a small response): the
   kernel then copies in no msghdr and no iovec array. */
static ssize_t mk_plain_writev(struct mk_conn *c, const struct iovec *iov, int iovcnt, int flags)
{
    struct msghdr msg = {.msg_iov = (struct iovec *) iov, .msg_iovlen = (size_t) iovcnt};
    int f = MSG_NOSIGNAL | ((flags & MK_IO_MORE) ? MSG_MORE : 0);
    ssize_t n;
    do {
        n = iovcnt == 1 ? mk_sys_sendto(c->ev.fd, iov[0].iov_base, iov[0].iov_len, f)
                        : mk_sys_sendmsg(c->ev.fd, &msg, f);
    } while (n < 0 && errno == EINTR);
    return n;
}

static ssize_t mk_plain_sendfile(struct mk_conn *c, int fd, off_t *offset, size_t len)
{
    ssize_t n;
    do {
        n = sendfile(c->ev.fd, fd, offset, len);
    } while (n < 0 && errno == EINTR);
    return n;
}

/* The one option of a plain listener: h2c, cleartext HTTP/2 beside HTTP/1. */
static int mk_plain_check_options(const char *options, char *reason, size_t len)
{
    if (strcmp(options, "h2c") != 0) {
        snprintf(reason, len, "the transport 'plain' takes no options (except h2c)");
        return MK_ERR;
    }
    if (!mk_h2_available()) {
        snprintf(reason, len, "h2c: this server was built without HTTP/2");
        return MK_ERR;
    }
    return MK_OK;
}

const struct mk_transport mk_conn_transport_plain = {
    .name = "plain",
    .read = mk_plain_read,
    .writev = mk_plain_writev,
    .sendfile = mk_plain_sendfile,
    .check_options = mk_plain_check_options,
};

/* ---- closing ------------------------------------------------------------- */

#ifdef MK_HAVE_RULES
/* A client's key: mk_cidr_client's, an IPv6 address cut to its /64 (as mk_task_key). */
static void mk_conn_client_key(const struct sockaddr *sa, uint8_t key[MK_KEYCOUNT_KEY_LEN])
{
    int family;

    mk_cidr_client(sa, key, &family);
    if (family == AF_INET6) {
        memset(key + 8, 0, 8);
    }
}
#endif

void mk_conn_close(struct mk_conn *c)
{
    struct mk_worker *w = c->worker;
    struct mk_plugin_set *ps = &w->server->plugins;
    int fd = c->ev.fd;

    if (c->state == MK_CONN_CLOSED) {
        return;
    }
#ifdef MK_HAVE_REALIP
    if (c->proxy_head) {
        mk_pool_put(&w->pool, c->proxy_head);
        c->proxy_head = NULL;
    }
#endif
    c->proto->release(c);
    if (c->flags & MK_CONN_STARTED) {
        for (size_t i = 0; i < ps->n_close; i++) {
            ps->close[i]->conn_close(c);
        }
        if (c->transport->close) {
            c->transport->close(c);
        }
    }
    /*
     * Out of the interest list before the close when it was registered:
     * close() removes it only with the last reference to the open socket,
     * and a child that another thread is spawning (posix_spawn, fork: CGI,
     * plugins) holds a copy of the descriptor table until it execs. Left
     * in the list, the closed socket would go on reporting its hang-up for
     * this struct, which by then may serve a new connection (that one would
     * be closed for it). A connection answered at once was never
     * registered and costs no system call.
     */
    if (c->ev.mask) {
        mk_event_del(&w->loop, &c->ev);
    }
    mk_event_forget(&c->ev);
    if (fd >= 0) {
        mk_sys_close(fd);
    }
    c->state = MK_CONN_CLOSED;
#ifdef MK_HAVE_METRICS
    mk_conn_uncount(c); /* closed: in no class, whatever the timer (mk_conn_state's move, inline) */
#endif
    mk_conn_timer_set(c, MK_TIMER_NONE);
    if (!mk_list_is_empty(&c->turn)) {
        mk_list_del(&c->turn);
        mk_list_init(&c->turn);
    }
    mk_list_move_tail(&c->node, &w->closing);
    atomic_fetch_sub_explicit(&w->n_conns, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit((c->flags & MK_CONN_REFUSED) ? &w->server->n_refused
                                                           : &w->server->n_conns,
                              1, memory_order_relaxed);
#ifdef MK_HAVE_RULES
    if (c->flags & MK_CONN_COUNTED) {
        uint8_t key[MK_KEYCOUNT_KEY_LEN];
        mk_conn_client_key(&c->peer.sa, key);
        mk_keycount_release(atomic_load(&w->server->per_client), key);
        c->flags &= (uint8_t) ~MK_CONN_COUNTED;
    }
#endif
}

/*
 * Close without losing the response: shut the write side, then read and
 * drop whatever the client still sends until it closes or LINGER expires.
 * Closing a socket with unread input would reset the connection and could
 * destroy the response before the client reads it.
 */
void mk_conn_linger(struct mk_conn *c)
{
    int rc;

    c->proto->release(c);
    if (c->transport->shutdown) {
        rc = c->transport->shutdown(c);
    }
    else {
        rc = shutdown(c->ev.fd, SHUT_WR);
    }
    if (rc != 0) {
        mk_conn_close(c);
        return;
    }
    mk_conn_state(c, MK_CONN_LINGER);
    mk_event_mod(&c->worker->loop, &c->ev, MK_EV_READ);
    mk_conn_timer_set(c, MK_TIMER_LINGER);
}

/*
 * Drop what a lingering client still sends, at most MK_LINGER_READS reads
 * an event: the loop is level triggered, so it comes back for the rest
 * after the other connections. Close at the client's end of stream or an
 * error; the LINGER timer bounds the whole drain. Closing with input still
 * arriving would reset the connection, and a client still sending its body
 * (an upload answered early) would lose the response.
 */
static void mk_conn_linger_read(struct mk_conn *c)
{
    char buf[16384];

    for (int i = 0; i < MK_LINGER_READS; i++) {
        ssize_t n = mk_conn_read(c, buf, sizeof(buf));
        if (n > 0) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return;
        }
        mk_conn_close(c); /* the client's end of stream, or an error */
        return;
    }
}

void mk_conn_expire(struct mk_conn *c)
{
    if (c->state == MK_CONN_LINGER || c->state == MK_CONN_HANDSHAKE || MK_CONN_IN_PROXY_HEAD(c)) {
        mk_conn_close(c);
        return;
    }
    c->proto->expire(c);
}

void mk_conn_go_away(struct mk_conn *c)
{
    if (c->state == MK_CONN_HANDSHAKE || MK_CONN_IN_PROXY_HEAD(c)) {
        mk_conn_close(c);
        return;
    }
    c->proto->go_away(c);
}

#ifdef MK_HAVE_H2
void mk_conn_reload(struct mk_conn *c)
{
    if (c->state == MK_CONN_HANDSHAKE || c->state == MK_CONN_LINGER || MK_CONN_IN_PROXY_HEAD(c) ||
        !c->proto->reload) {
        return;
    }
    c->proto->reload(c);
}
#endif

/* ---- starting ------------------------------------------------------------ */

static const struct mk_proto_set *mk_conn_protos;

void mk_conn_protocols(const struct mk_proto_set *set)
{
    mk_conn_protos = set;
}

/* The protocol the handshake chose (ALPN); none chosen: HTTP/1.1. */
static int mk_conn_choose_proto(struct mk_conn *c)
{
    size_t len = 0;
    const char *name = mk_conn_alpn(c, &len);
    const struct mk_proto *p;

    if (!name) {
        return MK_OK;
    }
    p = mk_conn_protos->find(name, len);
    if (!p) {
        mk_debug("transport %s negotiated the protocol '%.*s', which this server does not speak",
                 c->transport->name, (int) len, name);
        return MK_ERR;
    }
    c->proto = p;
    return MK_OK;
}

/* Run the transport's handshake one step; once done, hand over to the protocol. */
static void mk_conn_handshake(struct mk_conn *c)
{
    int rc;

    c->io_want = 0;
    rc = c->transport->handshake(c);
    if (rc == MK_AGAIN) {
        if (mk_event_mod(&c->worker->loop, &c->ev, mk_conn_want_mask(c, MK_EV_READ)) != MK_OK) {
            mk_conn_close(c);
        }
        return;
    }
    if (rc != MK_OK || mk_conn_choose_proto(c) != MK_OK) {
        mk_conn_close(c);
        return;
    }
    mk_conn_state(c, MK_CONN_READ_HEAD);
    c->proto->on_input(c);
}

/* The transport opens, the accept hooks run, then the handshake or the protocol. */
static void mk_conn_begin(struct mk_conn *c)
{
    struct mk_worker *w = c->worker;
    struct mk_plugin_set *ps = &w->server->plugins;

    mk_conn_state(c, MK_CONN_READ_HEAD);
    if (c->transport->open && c->transport->open(c) != MK_OK) {
        mk_conn_close(c);
        return;
    }
    c->flags |= MK_CONN_STARTED;
    for (size_t i = 0; i < ps->n_accept; i++) {
        if (ps->accept[i]->conn_accept(c) != MK_OK) {
            mk_conn_close(c);
            return;
        }
    }
    if (c->timer != MK_TIMER_READ) {
        mk_conn_timer_set(c, MK_TIMER_READ); /* after a PROXY header: still from the accept */
    }
    if (c->transport->handshake) {
        mk_conn_state(c, MK_CONN_HANDSHAKE);
        mk_conn_handshake(c);
        return;
    }
    c->proto->on_input(c);
}

#ifdef MK_HAVE_REALIP
static void mk_conn_proxy_fail(struct mk_conn *c, const char *why)
{
    char peer[MK_ADDR_TEXT_LEN];

    mk_addr_text(&c->peer.sa, peer);
    mk_info("PROXY header from %s: %s: connection closed", peer[0] ? peer : "-", why);
    mk_conn_close(c);
}

/* Keep the TLS version of an SSL TLV: printable, short, else "TLS". */
static void mk_conn_proxy_tls(struct mk_conn *c, const struct mk_str *v)
{
    bool ok = v->len > 0 && v->len < sizeof(c->proxy_tls);

    for (size_t i = 0; ok && i < v->len; i++) {
        ok = v->p[i] > 0x20 && v->p[i] < 0x7f;
    }
    if (!ok) {
        memcpy(c->proxy_tls, "TLS", 4);
        return;
    }
    memcpy(c->proxy_tls, v->p, v->len);
    c->proxy_tls[v->len] = '\0';
}

/*
 * Read the PROXY header (state PROXY_HEAD): peek at what has arrived,
 * parse it with what earlier reads kept, and take from the socket the
 * header's bytes only. A header cut across reads is kept in a pool chunk
 * (c->proxy_head) until it is whole: every byte of an incomplete header is
 * the header's (mk_proxy_parse), so those reads take all they see. Once
 * complete, the client it names becomes the connection's (a LOCAL or
 * UNKNOWN header keeps the TCP peer) and the connection begins.
 */
static void mk_conn_proxy_read(struct mk_conn *c)
{
    char buf[MK_PROXY_MAX];
    struct mk_proxy_info info;
    size_t have = c->proxy_len;
    ssize_t n, rc;

    if (have) {
        memcpy(buf, c->proxy_head, have);
    }
    do {
        n = recv(c->ev.fd, buf + have, sizeof(buf) - have, MSG_PEEK);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (mk_event_mod(&c->worker->loop, &c->ev, MK_EV_READ) != MK_OK) {
            mk_conn_close(c);
        }
        return;
    }
    if (n <= 0) {
        mk_conn_proxy_fail(c, n == 0 ? "the connection ended before it" : strerror(errno));
        return;
    }
    rc = mk_proxy_parse(buf, have + (size_t) n, &info);
    if (rc == MK_ERR) {
        mk_conn_proxy_fail(c, "missing, malformed or too long");
        return;
    }
    size_t take = rc == MK_AGAIN ? (size_t) n : (size_t) rc - have;
    ssize_t got;
    do {
        got = mk_sys_read(c->ev.fd, buf + have, take);
    } while (got < 0 && errno == EINTR);
    if (got != (ssize_t) take) {
        mk_conn_close(c); /* peeked bytes are there to read: the socket failed */
        return;
    }
    if (rc == MK_AGAIN) {
        if (!c->proxy_head && !(c->proxy_head = mk_pool_get(&c->worker->pool))) {
            mk_conn_close(c);
            return;
        }
        memcpy(c->proxy_head + have, buf + have, take);
        c->proxy_len = (uint16_t) (have + take);
        if (mk_event_mod(&c->worker->loop, &c->ev, MK_EV_READ) != MK_OK) {
            mk_conn_close(c);
        }
        return;
    }
    if (c->proxy_head) {
        mk_pool_put(&c->worker->pool, c->proxy_head);
        c->proxy_head = NULL;
    }
    c->proxy_len = 0;
    if (!info.local) {
        c->client = info.src;
        c->flags |= MK_CONN_CLIENT;
    }
    if (info.ssl) {
        mk_conn_proxy_tls(c, &info.ssl_version);
    }
    mk_conn_begin(c);
}

_Static_assert(MK_PROXY_MAX <= MK_CHUNK_SIZE, "a PROXY header is kept in one pool chunk");
#endif

void mk_conn_start(struct mk_conn *c)
{
    c->state = MK_CONN_READ_HEAD;
#ifdef MK_HAVE_METRICS
    /* a new or recycled struct is in no class and not refused: reading,
       which is not stored (conn_count.h) */
    c->counted = MK_COUNT_READING;
#endif
    c->proto = mk_conn_protos->first;
#ifdef MK_HAVE_H2
    if (c->transport == &mk_conn_transport_plain && c->listen_options &&
        strcmp(c->listen_options, "h2c") == 0) {
        c->flags |= MK_CONN_H2C; /* HTTP/1 looks for the HTTP/2 preface (h1.c) */
    }
#endif
    /*
     * Read before registering: the request has usually arrived with the
     * connection, and a connection answered at once (Connection: close)
     * then never costs an epoll_ctl. The protocol registers it when it
     * has to wait.
     */
    mk_event_init(&c->ev, c->ev.fd, mk_conn_on_event);
#ifdef MK_HAVE_REALIP
    if (c->flags & MK_CONN_PROXY) {
        mk_conn_state(c, MK_CONN_PROXY_HEAD);
        mk_conn_timer_set(c, MK_TIMER_READ);
        mk_conn_proxy_read(c);
        return;
    }
#endif
    mk_conn_begin(c);
}

#ifdef MK_HAVE_RULES
bool mk_conn_client_acquire(struct mk_server *srv, const struct sockaddr *peer, bool *counted)
{
    unsigned max = atomic_load_explicit(&srv->max_per_client, memory_order_relaxed);
    uint8_t key[MK_KEYCOUNT_KEY_LEN];

    *counted = false;
    if (!max) {
        return true;
    }
    mk_conn_client_key(peer, key);
    if (!mk_keycount_acquire(atomic_load(&srv->per_client), key, max)) {
        return false;
    }
    *counted = true;
    return true;
}
#endif

void mk_conn_refuse(struct mk_conn *c)
{
    int fd = c->ev.fd;

    c->flags |= MK_CONN_REFUSED;
    mk_conn_state(c, MK_CONN_READ_HEAD);
#ifdef MK_HAVE_METRICS
    mk_conn_recount(c); /* a new struct is in READ_HEAD already: counted from here */
#endif
    c->proto = mk_conn_protos->first;
    /* A transport with a handshake (TLS) cannot answer without its state. */
    if (c->transport != &mk_conn_transport_plain ||
        mk_event_add(&c->worker->loop, &c->ev, fd, MK_EV_READ, mk_conn_on_event) != MK_OK) {
        c->ev.fd = fd;
        mk_conn_close(c);
        return;
    }
    mk_conn_protos->refuse(c, 503);
    mk_conn_linger(c);
}

/*
 * An event on a connection whose request waits for a plugin (suspended, or
 * a streamed response waiting for its handler), not for I/O. The client
 * hung up: nobody is left to answer, so give the request up at once;
 * freeing it drops its task if that has not started, and ends a streamed
 * response (its handler's abort path runs: a CGI script is killed). nginx
 * does the same with a closed client. A half-close counts too: it cannot be
 * told apart from a close until a write fails.
 */
static void mk_conn_waiting_event(struct mk_conn *c, uint32_t ready)
{
    if (ready & (MK_EV_HANGUP | MK_EV_ERROR)) {
        mk_conn_close(c);
        return;
    }
    /* Bytes to read (a pipelined request) or room to write: not now. Narrow
       the interest to hang-ups until the request goes on (mk_h1_park). */
    if (c->ev.mask != MK_EV_HANGUP &&
        mk_event_mod(&c->worker->loop, &c->ev, MK_EV_HANGUP) != MK_OK) {
        mk_event_unwatch(&c->worker->loop, &c->ev);
    }
}

void mk_conn_on_event(struct mk_event *ev, uint32_t ready)
{
    struct mk_conn *c = (struct mk_conn *) ev;

    switch (c->state) {
    case MK_CONN_WRITE:
        if (c->flags & MK_CONN_HANDLER_WAIT) {
            mk_conn_waiting_event(c, ready); /* a stream waits for its handler */
            return;
        }
        c->proto->on_writable(c);
        return;
    case MK_CONN_LINGER:
        mk_conn_linger_read(c);
        return;
    case MK_CONN_HANDSHAKE:
        mk_conn_handshake(c);
        return;
#ifdef MK_HAVE_REALIP
    case MK_CONN_PROXY_HEAD:
        mk_conn_proxy_read(c);
        return;
#endif
    case MK_CONN_SUSPENDED:
        mk_conn_waiting_event(c, ready);
        return;
    case MK_CONN_CLOSED:
        return;
    default:
        c->proto->on_input(c);
        return;
    }
}
