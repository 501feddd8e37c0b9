/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * proxy_protocol.h: the PROXY protocol header a load balancer sends before
 * the client's bytes (HAProxy's proxy-protocol.txt, versions 1 and 2), as a
 * pure function: it takes the bytes received so far and says whether the
 * header is complete, incomplete or malformed. No I/O, no allocation, no
 * globals; the connection layer (server/conn/conn.c) reads the socket.
 *
 * Version 1 is one text line, "PROXY TCP4|TCP6|UNKNOWN ... \r\n", at most
 * 107 bytes. Version 2 is binary: a 12-byte signature, a version and
 * command byte, a family byte and a 16-bit length of what follows (the
 * addresses, then TLVs). Everything this parser accepts, and what it
 * refuses, is listed at mk_proxy_parse().
 */
#ifndef MK_SERVER_PROXY_PROTOCOL_H
#define MK_SERVER_PROXY_PROTOCOL_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "../../core/strings.h"

/* The longest version 1 header, "\r\n" included (the spec's 107 bytes). */
#define MK_PROXY_V1_MAX 107
/* The fixed part of a version 2 header: signature, command, family, length. */
#define MK_PROXY_V2_HEAD 16
/*
 * The longest header this server takes, of either version: a version 2
 * header with its addresses and the TLVs HAProxy sends (ALPN, authority,
 * unique id up to 128 bytes, SSL with version, cipher and client
 * certificate name) fits well inside it; a longer one is refused.
 */
#define MK_PROXY_MAX 1024

/* An IPv4 or IPv6 socket address (the client's, as a header gave it). */
union mk_inet_addr {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
};

/* What a complete header said. Views point into the caller's buffer. */
struct mk_proxy_info {
    uint8_t version; /* 1 or 2 */
    /*
     * The header names no client: a version 2 LOCAL command (the balancer's
     * own health check), a version 1 UNKNOWN, or a version 2 PROXY of a
     * family this server does not represent (AF_UNSPEC, AF_UNIX). The
     * connection keeps its TCP peer as the client address.
     */
    bool local;
    union mk_inet_addr src; /* the client, when !local (with its port) */
    union mk_inet_addr dst; /* the address the client connected to, when !local */
    /* Version 2 TLVs (empty when absent): */
    struct mk_str alpn;        /* PP2_TYPE_ALPN: the protocol the client negotiated */
    struct mk_str authority;   /* PP2_TYPE_AUTHORITY: the host name it asked for (SNI) */
    struct mk_str unique_id;   /* PP2_TYPE_UNIQUE_ID: at most 128 bytes */
    bool ssl;                  /* PP2_TYPE_SSL with PP2_CLIENT_SSL: the client spoke TLS */
    struct mk_str ssl_version; /* its PP2_SUBTYPE_SSL_VERSION ("TLSv1.3") */
};

/*
 * Read a PROXY header at the start of buf[0, len).
 *
 * Returns the header's length (the client's bytes start after it) with
 * *info filled; MK_AGAIN while the bytes so far are a prefix of a header
 * that may still be complete within MK_PROXY_MAX bytes (every byte of such
 * a prefix belongs to the header, so a reader may consume them); MK_ERR
 * for anything else: no header (the first bytes are neither "PROXY " nor
 * the version 2 signature), a malformed one, or one longer than
 * MK_PROXY_MAX.
 *
 * Version 1: single spaces, "TCP4" with two dotted-quad addresses, "TCP6"
 * with two IPv6 addresses (inet_pton's syntax), ports 0 to 65535 in
 * decimal without leading zeros, then "\r\n"; "UNKNOWN" may be followed by
 * anything up to "\r\n" (ignored). Version 2: version 2 with the command
 * LOCAL (0) or PROXY (1); families UNSPEC, INET, INET6, UNIX with
 * transport UNSPEC or STREAM (DGRAM is refused: this is a stream); a
 * length that holds the family's addresses; TLVs that fill the rest
 * exactly (a TLV cut short is refused); a unique id over 128 bytes or an
 * SSL TLV shorter than its 5 fixed bytes is refused. Unknown TLV types
 * are skipped, and CRC32C is not verified.
 */
ssize_t mk_proxy_parse(const char *buf, size_t len, struct mk_proxy_info *info);

#endif
