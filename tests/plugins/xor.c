/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * xor.c: a TEST FIXTURE, not a security layer. A toy transport ("Listen
 * PORT xor [options]") with the shape of TLS, so the integration tests
 * (tests/integration/conn/test_transport.py) can drive every part of the
 * transport seam with raw sockets:
 *
 *   handshake  the client sends one byte N, then N bytes of a server name
 *              (its "SNI"); the server answers one byte 'K'. The step that
 *              answers first asks to be called when the socket is writable
 *              (api->conn_io_want), as TLS does when its output is blocked.
 *   records    every byte after the handshake, both ways, is XORed with the
 *              key.
 *   buffering  read() takes everything the socket has into a buffer of its
 *              own and returns at most `chunk` bytes per call: the rest is
 *              pending(), which no socket event will announce.
 *   ALPN       the handshake "negotiates" the protocol named by the option
 *              alpn= (default http/1.1).
 *
 * Options (the rest of the Listen line, checked at configuration time):
 *   key=N      1..255, the XOR key (default 90)
 *   chunk=N    1..65536, the most bytes one read() returns (default 65536)
 *   alpn=NAME  the protocol the handshake reports; "none": no ALPN
 *   stall      a read() that refilled the buffer from the socket first
 *              answers EAGAIN asking for writability (a TLS read that must
 *              write): the server must wait for the direction asked for
 *
 * GET /xor-info answers "alpn=... sni=... port=... options=...\n" from the
 * server's accessors (api->conn_alpn, conn_server_name, conn_local_addr,
 * conn_listen_options).
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <monkey/mk_plugin.h>

#define XOR_BUF 65536

static const struct mk_api *api;

struct xor_opts {
    unsigned key;
    size_t chunk;
    char alpn[32];
    bool stall;
};

struct xor_conn {
    struct xor_opts o;
    int stage; /* 0: length, 1: name, 2: answer, 3: done */
    unsigned char name_len;
    size_t name_got;
    char name[256];
    bool stalled; /* the current buffer already answered EAGAIN once */
    size_t pos, len;
    unsigned char buf[XOR_BUF];
};

/* Parse the options; MK_ERR with a reason. */
static int xor_parse(const char *options, struct xor_opts *o, char *reason, size_t len)
{
    char word[64];
    const char *p = options;

    o->key = 90;
    o->chunk = XOR_BUF;
    snprintf(o->alpn, sizeof(o->alpn), "http/1.1");
    o->stall = false;
    while (p && *p) {
        size_t n = strcspn(p, " ");
        if (n >= sizeof(word)) {
            snprintf(reason, len, "option too long");
            return MK_ERR;
        }
        memcpy(word, p, n);
        word[n] = '\0';
        p += n;
        p += strspn(p, " ");
        char *end;
        if (strncmp(word, "key=", 4) == 0) {
            unsigned long v = strtoul(word + 4, &end, 10);
            if (*end || v < 1 || v > 255) {
                snprintf(reason, len, "key must be 1..255, got '%s'", word + 4);
                return MK_ERR;
            }
            o->key = (unsigned) v;
        }
        else if (strncmp(word, "chunk=", 6) == 0) {
            unsigned long v = strtoul(word + 6, &end, 10);
            if (*end || v < 1 || v > XOR_BUF) {
                snprintf(reason, len, "chunk must be 1..%d, got '%s'", XOR_BUF, word + 6);
                return MK_ERR;
            }
            o->chunk = v;
        }
        else if (strncmp(word, "alpn=", 5) == 0 && n > 5 && n - 5 < sizeof(o->alpn)) {
            memcpy(o->alpn, word + 5, n - 5 + 1);
        }
        else if (strcmp(word, "stall") == 0) {
            o->stall = true;
        }
        else {
            snprintf(reason, len, "xor: unknown option '%s'", word);
            return MK_ERR;
        }
    }
    return MK_OK;
}

static int xor_check_options(const char *options, char *reason, size_t len)
{
    struct xor_opts o;
    return xor_parse(options, &o, reason, len);
}

static int xor_open(struct mk_conn *c)
{
    char reason[128];
    struct xor_conn *x = calloc(1, sizeof(*x));

    if (!x) {
        return MK_ERR;
    }
    if (xor_parse(api->conn_listen_options(c), &x->o, reason, sizeof(reason)) != MK_OK) {
        free(x); /* checked at configuration time: cannot happen */
        return MK_ERR;
    }
    *api->conn_transport_data(c) = x;
    return MK_OK;
}

static void xor_close(struct mk_conn *c)
{
    void **slot = api->conn_transport_data(c);
    free(*slot);
    *slot = NULL;
}

/* recv() that maps "would block" to MK_AGAIN and the rest to MK_ERR. */
static int xor_recv_exact(int fd, void *buf, size_t want, size_t *got)
{
    ssize_t n = recv(fd, (char *) buf + *got, want - *got, 0);
    if (n > 0) {
        *got += (size_t) n;
        return *got == want ? MK_OK : MK_AGAIN;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return MK_AGAIN;
    }
    return MK_ERR;
}

static int xor_handshake(struct mk_conn *c)
{
    struct xor_conn *x = *api->conn_transport_data(c);
    int fd = api->conn_fd(c);
    size_t got = 0;
    int rc;

    switch (x->stage) {
    case 0:
        rc = xor_recv_exact(fd, &x->name_len, 1, &got);
        if (rc != MK_OK) {
            return rc;
        }
        x->stage = 1;
        /* fall through */
    case 1:
        if (x->name_len) {
            rc = xor_recv_exact(fd, x->name, x->name_len, &x->name_got);
            if (rc != MK_OK) {
                return rc;
            }
        }
        x->stage = 2;
        /* Like a TLS library with its answer not yet flushed: "when writable". */
        api->conn_io_want(c, MK_IO_WANT_WRITE);
        return MK_AGAIN;
    case 2:
        if (send(fd, "K", 1, MSG_NOSIGNAL) != 1) {
            return (errno == EAGAIN || errno == EWOULDBLOCK) ? MK_AGAIN : MK_ERR;
        }
        x->stage = 3;
        return MK_OK;
    default:
        return MK_OK;
    }
}

static ssize_t xor_read(struct mk_conn *c, void *buf, size_t len)
{
    struct xor_conn *x = *api->conn_transport_data(c);

    if (x->pos == x->len) {
        ssize_t n = recv(api->conn_fd(c), x->buf, sizeof(x->buf), 0);
        if (n <= 0) {
            return n;
        }
        for (ssize_t i = 0; i < n; i++) {
            x->buf[i] ^= (unsigned char) x->o.key;
        }
        x->pos = 0;
        x->len = (size_t) n;
        x->stalled = false;
    }
    if (x->o.stall && !x->stalled) {
        x->stalled = true;
        api->conn_io_want(c, MK_IO_WANT_WRITE);
        errno = EAGAIN;
        return -1;
    }
    size_t n = x->len - x->pos;
    n = n < len ? n : len;
    n = n < x->o.chunk ? n : x->o.chunk;
    memcpy(buf, x->buf + x->pos, n);
    x->pos += n;
    return (ssize_t) n;
}

static ssize_t xor_writev(struct mk_conn *c, const struct iovec *iov, int iovcnt, int flags)
{
    struct xor_conn *x = *api->conn_transport_data(c);
    unsigned char out[16384];
    size_t n = 0;

    (void) flags;
    for (int i = 0; i < iovcnt && n < sizeof(out); i++) {
        size_t take = iov[i].iov_len < sizeof(out) - n ? iov[i].iov_len : sizeof(out) - n;
        const unsigned char *src = iov[i].iov_base;
        for (size_t k = 0; k < take; k++) {
            out[n + k] = src[k] ^ (unsigned char) x->o.key;
        }
        n += take;
    }
    /* XOR has no state across bytes: a partial send needs no bookkeeping. */
    return send(api->conn_fd(c), out, n, MSG_NOSIGNAL);
}

static size_t xor_pending(struct mk_conn *c)
{
    struct xor_conn *x = *api->conn_transport_data(c);
    return x->len - x->pos;
}

static const char *xor_alpn(struct mk_conn *c, size_t *len)
{
    struct xor_conn *x = *api->conn_transport_data(c);
    if (strcmp(x->o.alpn, "none") == 0) {
        return NULL;
    }
    *len = strlen(x->o.alpn);
    return x->o.alpn;
}

static const char *xor_server_name(struct mk_conn *c, size_t *len)
{
    struct xor_conn *x = *api->conn_transport_data(c);
    if (!x->name_len) {
        return NULL;
    }
    *len = x->name_len;
    return x->name;
}

static const struct mk_transport xor_transport = {
    .name = "xor",
    .open = xor_open,
    .read = xor_read,
    .writev = xor_writev,
    .close = xor_close,
    .handshake = xor_handshake,
    .pending = xor_pending,
    .alpn = xor_alpn,
    .server_name = xor_server_name,
    .check_options = xor_check_options,
};

static int xor_init(const struct mk_api *server_api, const char *conf_dir)
{
    (void) conf_dir;
    api = server_api;
    if (!MK_API_HAS(api, takeover_conn)) {
        api->log(MK_PLUGIN_LOG_ERROR, "xor: needs a server with plugin ABI 3.2");
        return MK_ERR;
    }
    return MK_OK;
}

static int xor_content(struct mk_request *r)
{
    size_t len, alen = 0, slen = 0;
    const char *path = api->path(r, &len);
    struct mk_conn *c = api->conn(r);
    struct sockaddr_storage ss;
    socklen_t sslen = sizeof(ss);
    unsigned port = 0;
    char body[512];

    if (len != 9 || memcmp(path, "/xor-info", 9) != 0) {
        return MK_DECLINED;
    }
    const char *alpn = api->conn_alpn(c, &alen);
    const char *sni = api->conn_server_name(c, &slen);
    const char *opts = api->conn_listen_options(c);
    if (api->conn_local_addr(c, &ss, &sslen) == MK_OK) {
        port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *) &ss)->sin6_port)
                                        : ntohs(((struct sockaddr_in *) &ss)->sin_port);
    }
    int n = snprintf(body, sizeof(body), "alpn=%.*s sni=%.*s port=%u options=%s\n",
                     alpn ? (int) alen : 1, alpn ? alpn : "-", sni ? (int) slen : 1,
                     sni ? sni : "-", port, opts ? opts : "-");
    api->set_status(r, 200);
    api->set_content_type(r, "text/plain");
    return api->set_body(r, body, (size_t) n) == MK_OK ? MK_OK : 503;
}

MK_EXPORT const struct mk_plugin mk_plugin = {
    MK_PLUGIN_ABI_INIT,
    .name = "xor",
    .version = "1.0",
    .description = "test fixture: a toy transport with a handshake, buffering and ALPN",
    .init = xor_init,
    .content = xor_content,
    .transport = &xor_transport,
};
