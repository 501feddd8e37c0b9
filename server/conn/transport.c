/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * transport.c: what the server knows of transports beyond reading and
 * writing (see transport.h): the versioned copy of a plugin's transport,
 * Listen options, the accessors plugins use (ALPN, SNI, local address,
 * the direction wanted) and the table of protocols by ALPN name.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "../../core/memory.h"
#include "transport.h"

/* The bytes of struct mk_transport a plugin built for ABI 3.<minor> has. */
static size_t mk_transport_size(unsigned minor)
{
    if (minor < 2) {
        return offsetof(struct mk_transport, handshake);
    }
    if (minor < 3) {
        return offsetof(struct mk_transport, var);
    }
    if (minor < 10) {
        return offsetof(struct mk_transport, check_sites);
    }
    return sizeof(struct mk_transport);
}

struct mk_transport *mk_transport_adopt(const struct mk_plugin *p)
{
    struct mk_transport *t;

    if (!p->transport) {
        return NULL;
    }
    t = mk_calloc(1, sizeof(*t));
    memcpy(t, p->transport, mk_transport_size(p->abi_minor));
    return t;
}

int mk_transport_check_options(const struct mk_transport *t, const char *options, char *reason,
                               size_t len)
{
    if (!options) {
        return MK_OK;
    }
    if (!t->check_options) {
        snprintf(reason, len, "the transport '%s' takes no options", t->name);
        return MK_ERR;
    }
    reason[0] = '\0';
    if (t->check_options(options, reason, len) != MK_OK) {
        if (!reason[0]) {
            snprintf(reason, len, "the transport '%s' refused the options '%s'", t->name, options);
        }
        return MK_ERR;
    }
    return MK_OK;
}

const char *mk_conn_alpn(struct mk_conn *c, size_t *len)
{
    return c->transport->alpn ? c->transport->alpn(c, len) : NULL;
}

const char *mk_conn_server_name(struct mk_conn *c, size_t *len)
{
    return c->transport->server_name ? c->transport->server_name(c, len) : NULL;
}

/*
 * The transport's property `name`; for a transport without one, "protocol"
 * is the TLS version a PROXY header said the client spoke to the balancer
 * (c->proxy_tls), so that a request the balancer decrypted counts as HTTPS
 * (the gateways' HTTPS, the logger's %{ssl_protocol}x).
 */
const char *mk_conn_transport_var(struct mk_conn *c, const char *name, size_t *len)
{
#ifdef MK_HAVE_REALIP
    const char *v = c->transport->var && name ? c->transport->var(c, name, len) : NULL;

    if (!v && name && c->proxy_tls[0] && strcmp(name, "protocol") == 0) {
        *len = strlen(c->proxy_tls);
        return c->proxy_tls;
    }
    return v;
#else
    return c->transport->var && name ? c->transport->var(c, name, len) : NULL;
#endif
}

int mk_conn_local_addr(const struct mk_conn *c, struct sockaddr_storage *out, socklen_t *len)
{
    /* A cache of the connection's own, written on its worker: the accessor stays const. */
    struct mk_conn *m = (struct mk_conn *) c;

    if (m->local_len == 0) {
        socklen_t l = sizeof(m->local);
        if (getsockname(c->ev.fd, &m->local.sa, &l) != 0) {
            return MK_ERR;
        }
        if (l > sizeof(m->local)) {
            /* another family (a unix socket): not kept */
            return getsockname(c->ev.fd, (struct sockaddr *) out, len) == 0 ? MK_OK : MK_ERR;
        }
        m->local_len = l;
    }
    memcpy(out, &m->local, *len < m->local_len ? *len : m->local_len);
    *len = m->local_len;
    return MK_OK;
}

void mk_conn_cork(struct mk_conn *c, bool on)
{
    int v = on;

    (void) setsockopt(c->ev.fd, IPPROTO_TCP, TCP_CORK, &v, sizeof(v));
}

void mk_conn_io_want(struct mk_conn *c, unsigned dir)
{
    c->io_want = (uint8_t) (dir & (MK_IO_WANT_READ | MK_IO_WANT_WRITE));
}

const char *mk_conn_listen_options(const struct mk_conn *c)
{
    return c->listen_options;
}
