/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * proxy_protocol.c: the PROXY protocol header, versions 1 and 2 (see
 * proxy_protocol.h). Pure: no I/O, no allocation, no globals.
 */
#include "proxy_protocol.h"

#include <arpa/inet.h>
#include <string.h>

#include <monkey/mk_common.h>

static const char mk_proxy_v1_sig[6] = {'P', 'R', 'O', 'X', 'Y', ' '};
static const uint8_t mk_proxy_v2_sig[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                            0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};

/* Version 2 families (high nibble of byte 13) and transports (low nibble). */
#define MK_PP2_AF_UNSPEC 0x0
#define MK_PP2_AF_INET 0x1
#define MK_PP2_AF_INET6 0x2
#define MK_PP2_AF_UNIX 0x3
#define MK_PP2_TRANS_UNSPEC 0x0
#define MK_PP2_TRANS_STREAM 0x1

#define MK_PP2_CMD_LOCAL 0x0
#define MK_PP2_CMD_PROXY 0x1

/* TLV types */
#define MK_PP2_TYPE_ALPN 0x01
#define MK_PP2_TYPE_AUTHORITY 0x02
#define MK_PP2_TYPE_UNIQUE_ID 0x05
#define MK_PP2_TYPE_SSL 0x20
#define MK_PP2_SUBTYPE_SSL_VERSION 0x21
#define MK_PP2_CLIENT_SSL 0x01
#define MK_PP2_UNIQUE_ID_MAX 128

/* ---- version 1 ------------------------------------------------------------ */

/* Next field of the line [*p, end), up to a single space or the end. */
static bool mk_proxy_v1_field(const char **p, const char *end, struct mk_str *out, bool last)
{
    const char *s = *p;
    const char *e = s;

    while (e < end && *e != ' ') {
        e++;
    }
    if (e == s || (last ? e != end : e == end)) {
        return false;
    }
    *out = mk_str_make(s, (size_t) (e - s));
    *p = last ? e : e + 1;
    return true;
}

/* An address of `family` as written in a version 1 line. */
static bool mk_proxy_v1_addr(struct mk_str text, int family, union mk_inet_addr *out)
{
    char buf[INET6_ADDRSTRLEN];

    if (text.len >= sizeof(buf)) {
        return false;
    }
    memcpy(buf, text.p, text.len);
    buf[text.len] = '\0';
    memset(out, 0, sizeof(*out));
    if (family == AF_INET) {
        out->in.sin_family = AF_INET;
        return inet_pton(AF_INET, buf, &out->in.sin_addr) == 1;
    }
    out->in6.sin6_family = AF_INET6;
    return inet_pton(AF_INET6, buf, &out->in6.sin6_addr) == 1;
}

/* A port: 0 to 65535, decimal, no leading zero. */
static bool mk_proxy_v1_port(struct mk_str text, uint16_t *port)
{
    uint64_t v;

    if (text.len > 5 || (text.len > 1 && text.p[0] == '0') ||
        !mk_str_to_u64(text.p, text.len, 65535, &v)) {
        return false;
    }
    *port = htons((uint16_t) v);
    return true;
}

static ssize_t mk_proxy_v1(const char *buf, size_t len, struct mk_proxy_info *info)
{
    /* the "\r" of the longest line is its byte MK_PROXY_V1_MAX - 2 */
    size_t scan = len < MK_PROXY_V1_MAX - 1 ? len : MK_PROXY_V1_MAX - 1;
    size_t cr = sizeof(mk_proxy_v1_sig);

    while (cr < scan && buf[cr] != '\r') {
        if ((unsigned char) buf[cr] < 0x20 || (unsigned char) buf[cr] > 0x7e) {
            return MK_ERR;
        }
        cr++;
    }
    if (cr == scan) {
        return len < MK_PROXY_V1_MAX - 1 ? MK_AGAIN : MK_ERR;
    }
    if (cr + 1 == len) {
        return MK_AGAIN;
    }
    if (buf[cr + 1] != '\n') {
        return MK_ERR;
    }

    const char *p = buf + sizeof(mk_proxy_v1_sig), *end = buf + cr;
    struct mk_str proto, src, dst, sport, dport;
    info->version = 1;
    if ((size_t) (end - p) >= 7 && memcmp(p, "UNKNOWN", 7) == 0 && (end - p == 7 || p[7] == ' ')) {
        info->local = true; /* the rest of the line is ignored (spec 2.1) */
        return (ssize_t) (cr + 2);
    }
    if (!mk_proxy_v1_field(&p, end, &proto, false) || proto.len != 4 ||
        (memcmp(proto.p, "TCP4", 4) != 0 && memcmp(proto.p, "TCP6", 4) != 0)) {
        return MK_ERR;
    }
    int family = proto.p[3] == '4' ? AF_INET : AF_INET6;
    if (!mk_proxy_v1_field(&p, end, &src, false) || !mk_proxy_v1_field(&p, end, &dst, false) ||
        !mk_proxy_v1_field(&p, end, &sport, false) || !mk_proxy_v1_field(&p, end, &dport, true) ||
        !mk_proxy_v1_addr(src, family, &info->src) || !mk_proxy_v1_addr(dst, family, &info->dst)) {
        return MK_ERR;
    }
    uint16_t *sp = family == AF_INET ? &info->src.in.sin_port : &info->src.in6.sin6_port;
    uint16_t *dp = family == AF_INET ? &info->dst.in.sin_port : &info->dst.in6.sin6_port;
    if (!mk_proxy_v1_port(sport, sp) || !mk_proxy_v1_port(dport, dp)) {
        return MK_ERR;
    }
    return (ssize_t) (cr + 2);
}

/* ---- version 2 ------------------------------------------------------------ */

static uint16_t mk_proxy_be16(const uint8_t *p)
{
    return (uint16_t) ((p[0] << 8) | p[1]);
}

/* The sub-TLVs of an SSL TLV: only the protocol version is kept. */
static bool mk_proxy_v2_ssl(const uint8_t *p, const uint8_t *end, struct mk_proxy_info *info)
{
    while (p < end) {
        if (end - p < 3) {
            return false;
        }
        uint16_t l = mk_proxy_be16(p + 1);
        if (l > end - p - 3) {
            return false;
        }
        if (p[0] == MK_PP2_SUBTYPE_SSL_VERSION) {
            info->ssl_version = mk_str_make((const char *) p + 3, l);
        }
        p += 3 + l;
    }
    return true;
}

static bool mk_proxy_v2_tlvs(const uint8_t *p, const uint8_t *end, struct mk_proxy_info *info)
{
    while (p < end) {
        if (end - p < 3) {
            return false;
        }
        uint8_t type = p[0];
        uint16_t l = mk_proxy_be16(p + 1);
        const uint8_t *v = p + 3;
        if (l > end - v) {
            return false;
        }
        switch (type) {
        case MK_PP2_TYPE_ALPN:
            info->alpn = mk_str_make((const char *) v, l);
            break;
        case MK_PP2_TYPE_AUTHORITY:
            info->authority = mk_str_make((const char *) v, l);
            break;
        case MK_PP2_TYPE_UNIQUE_ID:
            if (l > MK_PP2_UNIQUE_ID_MAX) {
                return false;
            }
            info->unique_id = mk_str_make((const char *) v, l);
            break;
        case MK_PP2_TYPE_SSL:
            /* client (1 byte), verify (4 bytes), then sub-TLVs */
            if (l < 5 || !mk_proxy_v2_ssl(v + 5, v + l, info)) {
                return false;
            }
            info->ssl = (v[0] & MK_PP2_CLIENT_SSL) != 0;
            break;
        default:
            break; /* CRC32C, NOOP, NETNS and the rest: skipped */
        }
        p = v + l;
    }
    return true;
}

static ssize_t mk_proxy_v2(const uint8_t *buf, size_t len, struct mk_proxy_info *info)
{
    if (len < MK_PROXY_V2_HEAD) {
        return MK_AGAIN;
    }
    uint8_t version = buf[12] >> 4, cmd = buf[12] & 0x0f;
    uint8_t af = buf[13] >> 4, trans = buf[13] & 0x0f;
    size_t total = MK_PROXY_V2_HEAD + mk_proxy_be16(buf + 14);
    size_t addrs = 0;

    if (version != 2 || (cmd != MK_PP2_CMD_LOCAL && cmd != MK_PP2_CMD_PROXY) ||
        total > MK_PROXY_MAX) {
        return MK_ERR;
    }
    if (cmd == MK_PP2_CMD_PROXY) {
        if (trans != MK_PP2_TRANS_UNSPEC && trans != MK_PP2_TRANS_STREAM) {
            return MK_ERR;
        }
        switch (af) {
        case MK_PP2_AF_UNSPEC:
            break;
        case MK_PP2_AF_INET:
            addrs = 12;
            break;
        case MK_PP2_AF_INET6:
            addrs = 36;
            break;
        case MK_PP2_AF_UNIX:
            addrs = 216;
            break;
        default:
            return MK_ERR;
        }
        if (total - MK_PROXY_V2_HEAD < addrs) {
            return MK_ERR;
        }
    }
    if (len < total) {
        return MK_AGAIN;
    }
    info->version = 2;
    /* LOCAL: the balancer speaks for itself; the block is skipped whole (spec 2.2). */
    info->local = cmd == MK_PP2_CMD_LOCAL || af == MK_PP2_AF_UNSPEC || af == MK_PP2_AF_UNIX;
    if (cmd == MK_PP2_CMD_LOCAL) {
        return (ssize_t) total;
    }
    const uint8_t *a = buf + MK_PROXY_V2_HEAD;
    if (af == MK_PP2_AF_INET) {
        info->src.in.sin_family = info->dst.in.sin_family = AF_INET;
        memcpy(&info->src.in.sin_addr, a, 4);
        memcpy(&info->dst.in.sin_addr, a + 4, 4);
        memcpy(&info->src.in.sin_port, a + 8, 2);
        memcpy(&info->dst.in.sin_port, a + 10, 2);
    }
    else if (af == MK_PP2_AF_INET6) {
        info->src.in6.sin6_family = info->dst.in6.sin6_family = AF_INET6;
        memcpy(&info->src.in6.sin6_addr, a, 16);
        memcpy(&info->dst.in6.sin6_addr, a + 16, 16);
        memcpy(&info->src.in6.sin6_port, a + 32, 2);
        memcpy(&info->dst.in6.sin6_port, a + 34, 2);
    }
    if (!mk_proxy_v2_tlvs(a + addrs, buf + total, info)) {
        return MK_ERR;
    }
    return (ssize_t) total;
}

/* ---- either --------------------------------------------------------------- */

ssize_t mk_proxy_parse(const char *buf, size_t len, struct mk_proxy_info *info)
{
    memset(info, 0, sizeof(*info));
    if (len == 0) {
        return MK_AGAIN;
    }
    if (buf[0] == 'P') {
        size_t n = len < sizeof(mk_proxy_v1_sig) ? len : sizeof(mk_proxy_v1_sig);
        if (memcmp(buf, mk_proxy_v1_sig, n) != 0) {
            return MK_ERR;
        }
        return n < sizeof(mk_proxy_v1_sig) ? MK_AGAIN : mk_proxy_v1(buf, len, info);
    }
    size_t n = len < sizeof(mk_proxy_v2_sig) ? len : sizeof(mk_proxy_v2_sig);
    if (memcmp(buf, mk_proxy_v2_sig, n) != 0) {
        return MK_ERR;
    }
    return mk_proxy_v2((const uint8_t *) buf, len, info);
}
