/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * conn.h: one client connection (struct mk_conn), its states and timers,
 * and its life whatever its protocol (conn.c; its timer and turns:
 * conn_timer.c).
 *
 * Ownership: a connection and its buffers belong to the worker that
 * accepted it (or received it from the acceptor) and are touched by no
 * other thread. The struct is recycled through the worker's free list: its
 * `gen` tells the reuses apart. The protocol's state rides inside it
 * (c->h1, read by the HTTP/1 code only; c->h2, by the HTTP/2 code); reads
 * and writes go through the transport (transport.h). conn.c calls the
 * protocol only through c->proto and the set it is given at start (struct
 * mk_proto_set below); of the protocol's doings it reads the connection's
 * state and flags, which the protocol sets (MK_CONN_WRITE with
 * MK_CONN_HANDLER_WAIT, MK_CONN_SUSPENDED: a hang-up then closes).
 */
#ifndef MK_SERVER_CONN_H
#define MK_SERVER_CONN_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdint.h>

#include <monkey/mk_plugin.h>

#include "../../core/event.h"
#include "../../core/list.h"
#include "../../core/timer.h"
#include "../http/proxy_protocol.h"
#include "../proto/h1.h"

struct mk_h2;
struct mk_proto;
struct mk_takeover;
struct mk_worker;

enum mk_conn_state {
    MK_CONN_READ_HEAD = 0, /* waiting for or reading a request head */
    MK_CONN_SUSPENDED,     /* a plugin holds the request (api->suspend) */
    MK_CONN_READ_BODY,     /* buffering a body for a content handler */
    MK_CONN_WRITE,         /* sending a response */
    MK_CONN_DISCARD,       /* skipping the rest of a request body */
    MK_CONN_LINGER,        /* write side shut: draining input until EOF */
    MK_CONN_CLOSED,        /* waiting for the end of the event batch */
    MK_CONN_HANDSHAKE,     /* the transport's handshake runs (conn.c) */
    MK_CONN_TAKEOVER,      /* a plugin owns the bytes after a 101 (takeover.c) */
#ifdef MK_HAVE_REALIP
    MK_CONN_PROXY_HEAD, /* reading the PROXY header of a proxy_protocol listener (conn.c) */
#endif
};

enum mk_timer_kind {
    MK_TIMER_NONE = 0,
    MK_TIMER_READ,      /* Timeout: head (from its first byte) and body */
    MK_TIMER_KEEPALIVE, /* KeepAliveTimeout: idle between requests */
    MK_TIMER_SEND,      /* SendTimeout: no write progress */
    MK_TIMER_LINGER,    /* lingering close */
    MK_TIMER_IDLE,      /* a taken-over connection's own idle timeout */
    MK_TIMER_KINDS
};

/* Connection flags */
#define MK_CONN_REFUSED 0x01u /* over the connection limit: answering 503 */
#define MK_CONN_CLOSE 0x02u   /* close once the current response is sent */
#define MK_CONN_STARTED 0x04u /* accept hooks ran: close hooks will run */
#define MK_CONN_H2C 0x08u     /* its listener allows cleartext HTTP/2 (Listen ... h2c) */
/* In WRITE, a streamed response waits for its handler (h1.c): an event can
   only be input or a hang-up, and a hang-up closes the connection (conn.c). */
#define MK_CONN_HANDLER_WAIT 0x10u
#define MK_CONN_PROXY 0x20u   /* its listener says proxy_protocol: a PROXY header comes first */
#define MK_CONN_CLIENT 0x40u  /* c->client holds the client the PROXY header named */
#define MK_CONN_COUNTED 0x80u /* counted for its client (MaxConnectionsPerClient) */

struct mk_conn {
    struct mk_event ev; /* first: the event loop hands back this pointer */
    uint8_t state;      /* enum mk_conn_state */
    uint8_t timer;      /* enum mk_timer_kind */
    uint8_t flags;
    uint8_t io_want; /* MK_IO_WANT_* the transport's last EAGAIN asked for, 0: its own */
#ifdef MK_HAVE_METRICS
    uint8_t counted; /* 1 + the MK_CSTATE_* it is counted in (conn_count.h), 0: none */
#endif
    uint32_t requests; /* responses completed */
    uint64_t gen;      /* distinguishes reuses of this struct */
    const struct mk_proto *proto;
    struct mk_worker *worker;
    const struct mk_transport *transport;
    void *transport_data;
    const char *listen_options;   /* the transport's options of its Listen line, or NULL */
    struct mk_takeover *takeover; /* set while a plugin owns the connection (takeover.c) */
    struct mk_list node;          /* closing or free list once closed */
    struct mk_list turn;          /* in the worker's turns while it waits for its next one */
    struct mk_timer expiry;       /* in the worker's timers while a timer is armed */

    union {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
    } peer;
    /* The address it arrived on, asked of the kernel once (api->conn_local_addr:
       the gateways want it for every request); local_len 0: not yet. */
    union {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
    } local;
    socklen_t local_len;
#ifdef MK_HAVE_REALIP
    /* The client a PROXY header named (MK_CONN_CLIENT); else unused. */
    union mk_inet_addr client;
    /* The bytes of a PROXY header that came in several reads, while it is
       read (a pool chunk); NULL otherwise. */
    char *proxy_head;
    uint16_t proxy_len;
    /* A version 2 PROXY header's SSL TLV: the TLS version the client spoke
       to the balancer ("TLSv1.3"; "TLS" when it named none), the transport
       variable "protocol" of a transport that has none; "": none. */
    char proxy_tls[16];
#endif

    struct mk_h1 h1; /* the HTTP/1 codec's state: h1*.c only */
#ifdef MK_HAVE_H2
    struct mk_h2 *h2; /* HTTP/2's state while it speaks HTTP/2: h2*.c only */
#endif
};

/*
 * The protocols, as the protocol layer gives them to the connections at
 * start (mk_conn_protocols; proto/proto.c): conn.c calls up only through
 * this table and the connection's c->proto.
 */
struct mk_proto_set {
    const struct mk_proto *first; /* what a new connection speaks (HTTP/1) */
    /* The protocol a handshake negotiated by ALPN name, or NULL: not spoken. */
    const struct mk_proto *(*find)(const char *name, size_t len);
    /* Answer `status` on a connection refused before any protocol ran. */
    void (*refuse)(struct mk_conn *c, int status);
};
/* Give the connections their protocols; once, before the first one starts. */
void mk_conn_protocols(const struct mk_proto_set *set);

/* conn_timer.c: the connection's timer, in its worker's timer queues */
void mk_conn_timer_set(struct mk_conn *c, enum mk_timer_kind kind);
/* Arm the connection's MK_TIMER_IDLE for `ms` milliseconds. */
void mk_conn_timer_idle(struct mk_conn *c, uint32_t ms);
/*
 * Arm the connection's timer as `kind` for `ms` milliseconds rather than
 * the configured duration of the kind (HTTP/2: the next deadline of its
 * streams). Each distinct `ms` is a timer queue of the worker: use few.
 */
void mk_conn_timer_arm(struct mk_conn *c, enum mk_timer_kind kind, uint32_t ms);
/*
 * c used up its turn with work left that no event will announce (input in
 * its buffer): its protocol's proceed() runs once the worker has dispatched
 * the rest of its current batch of events; queued again from that turn, it
 * waits for the next batch (the wait before it does not sleep). Harmless
 * when already queued; closing c takes it out.
 */
void mk_conn_next_turn(struct mk_conn *c);

/*
 * The client's address: the one the PROXY header named, else the TCP peer
 * (c->peer, which stays what accept(2) gave). Requests have their own,
 * which may be learned from a trusted proxy's field (mk_request_client).
 */
static inline const struct sockaddr *mk_conn_client(const struct mk_conn *c)
{
#ifdef MK_HAVE_REALIP
    return (c->flags & MK_CONN_CLIENT) ? &c->client.sa : &c->peer.sa;
#else
    return &c->peer.sa;
#endif
}

/* conn.c: the connection's life, whatever its protocol */
void mk_conn_start(struct mk_conn *c);
void mk_conn_close(struct mk_conn *c);
void mk_conn_on_event(struct mk_event *ev, uint32_t ready);
void mk_conn_expire(struct mk_conn *c);
void mk_conn_refuse(struct mk_conn *c);
/*
 * MaxConnectionsPerClient: count a new connection from `peer` for its
 * client (an IPv4 address, an IPv6 /64). False: the client has the most
 * already; true: counted (the caller sets MK_CONN_COUNTED, and the close
 * counts it out), or the bound is off (*counted false). Any worker.
 */
#ifdef MK_HAVE_RULES
bool mk_conn_client_acquire(struct mk_server *srv, const struct sockaddr *peer, bool *counted);
#endif
/* The server stops: close c unless a request is in progress on it. */
void mk_conn_go_away(struct mk_conn *c);
#ifdef MK_HAVE_H2
/* The configuration was reloaded: proto->reload, once past the handshake (HTTP/2's). */
void mk_conn_reload(struct mk_conn *c);
#endif
/* Close after a response: shut the write side, drain input, then close. */
void mk_conn_linger(struct mk_conn *c);
/* Stats counters are written by their worker only: no locked instruction. */
#define MK_STAT_ADD(var, n)                                                                        \
    atomic_store_explicit(&(var), atomic_load_explicit(&(var), memory_order_relaxed) + (n),        \
                          memory_order_relaxed)
extern const struct mk_transport mk_conn_transport_plain;

#endif
