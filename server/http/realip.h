/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * realip.h: the client's address from the field a trusted proxy adds
 * (RealIPFrom, RealIPHeader): X-Forwarded-For, Forwarded (RFC 7239) or
 * X-Real-IP. Pure: no I/O, no allocation, no globals.
 *
 * Each proxy appends the address it received the request from, so the
 * list reads from the right: the walk skips the addresses of trusted
 * proxies, and the first address from the right that is not trusted is the
 * client (nginx's real_ip_recursive on). Everything to its left was written
 * by the client or by proxies nobody vouches for and is never looked at.
 * When every address is trusted the leftmost one is the client. When the
 * walk meets an element that is no address ("unknown", an obfuscated
 * Forwarded identifier, garbage) before an untrusted address, the client
 * cannot be told and nothing is learned (the connection's address stays).
 *
 * The field may come on several lines: they are one list, in order
 * (RFC 9110 section 5.3). The walker is fed the lines one by one
 * (mk_realip_feed, left to right, in the order received) and keeps the
 * answer so far, so nothing is stored.
 */
#ifndef MK_SERVER_REALIP_H
#define MK_SERVER_REALIP_H

#include <stdbool.h>
#include <stddef.h>

#include <monkey/mk_util.h>

#include "proxy_protocol.h"

/* The field RealIPHeader names (the order of its words in conf.c). */
enum mk_realip_field {
    MK_REALIP_X_FORWARDED_FOR = 0, /* a, b, c: addresses, optionally with a port */
    MK_REALIP_FORWARDED,           /* RFC 7239: for=a, for="[b]:port";proto=https */
    MK_REALIP_X_REAL_IP,           /* one address, set by the nearest proxy */
};

struct mk_realip_walk {
    enum mk_realip_field field;
    const struct mk_cidr *trusted; /* the RealIPFrom blocks */
    size_t n_trusted;
    /* The rightmost element read so far that is not a trusted address (it
       decides unless a later one does), and the leftmost address read. */
    int stop; /* 0: none yet, 1: an untrusted address, -1: not an address */
    union mk_inet_addr stop_addr;
    bool have_first;
    union mk_inet_addr first;
};

/* Start a walk over `field` with the trusted blocks (held, not copied). */
void mk_realip_begin(struct mk_realip_walk *w, enum mk_realip_field field,
                     const struct mk_cidr *trusted, size_t n_trusted);
/* One more line of the field (its value, trimmed or not). */
void mk_realip_feed(struct mk_realip_walk *w, const char *value, size_t len);
/*
 * The client the lines fed say: MK_OK with *out set (port 0 when the
 * element gave none), or MK_DECLINED when they name none (no line, only
 * empty elements, or an element that is no address where the walk
 * stopped).
 */
int mk_realip_end(const struct mk_realip_walk *w, union mk_inet_addr *out);

/* Is sa (IPv4 or IPv6, IPv4-mapped as IPv4) inside one of the blocks? */
bool mk_realip_trusted(const struct sockaddr *sa, const struct mk_cidr *trusted, size_t n);

/*
 * An address as an element writes it: "192.0.2.1", "192.0.2.1:8080",
 * "2001:db8::1", "[2001:db8::1]" or "[2001:db8::1]:8080". True with *out
 * set (port 0 without one).
 */
bool mk_realip_addr_parse(const char *p, size_t len, union mk_inet_addr *out);

#endif
