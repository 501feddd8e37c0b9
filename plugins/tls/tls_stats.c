/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls_stats.c: the plugin's counters, one set per server (in its context,
 * api->self), counted by the workers with relaxed atomic additions and
 * published through the stats hook (plugin ABI 3.3), which the control
 * plugin shows under "tls" in its status:
 *
 *   handshakes   handshakes completed, full and resumed
 *   resumptions  of those, the ones that resumed a session
 *   failures     connections that sent a TLS record but whose handshake
 *                never completed (an error, the head Timeout, the client
 *                leaving)
 *   plain_http   plain HTTP requests on the TLS port, answered 400
 */
#include "tls.h"

static struct tls_self *tls_stats_self(void)
{
    return tls_api->self(MK_PLUGIN_SELF(tls));
}

void tls_stats_handshake(SSL *ssl)
{
    struct tls_self *self = tls_stats_self();

    if (!self) {
        return;
    }
    atomic_fetch_add_explicit(&self->handshakes, 1, memory_order_relaxed);
    if (SSL_session_reused(ssl)) {
        atomic_fetch_add_explicit(&self->resumptions, 1, memory_order_relaxed);
    }
}

void tls_stats_failure(void)
{
    struct tls_self *self = tls_stats_self();

    if (self) {
        atomic_fetch_add_explicit(&self->failures, 1, memory_order_relaxed);
    }
}

void tls_stats_plain_http(void)
{
    struct tls_self *self = tls_stats_self();

    if (self) {
        atomic_fetch_add_explicit(&self->plain_http, 1, memory_order_relaxed);
    }
}

/* The stats hook: any thread; reads the counters only. */
void tls_stats(mk_stats_emit_cb emit, void *arg)
{
    struct tls_self *self = tls_stats_self();

    if (!self) {
        return;
    }
    emit(arg, "handshakes", atomic_load_explicit(&self->handshakes, memory_order_relaxed));
    emit(arg, "resumptions", atomic_load_explicit(&self->resumptions, memory_order_relaxed));
    emit(arg, "failures", atomic_load_explicit(&self->failures, memory_order_relaxed));
    emit(arg, "plain_http", atomic_load_explicit(&self->plain_http, memory_order_relaxed));
}
