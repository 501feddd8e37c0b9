/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls_stats.c: the plugin's counters, one set per worker (struct tls_counts
 * in the plugin's context, api->self), each counted by its own worker with
 * relaxed atomic additions to a cache line no other worker writes, and
 * published summed through the stats hook (plugin ABI 3.3), which the
 * control plugin shows under "tls" in its status and serves as
 * monkey_tls_handshakes_total at its MetricsPath:
 *
 *   handshakes   handshakes completed, full and resumed
 *   resumptions  of those, the ones that resumed a session
 *   failures     connections that sent a TLS record but whose handshake
 *                never completed (an error, the head Timeout, the client
 *                leaving)
 *   plain_http   plain HTTP requests on the TLS port, answered 400
 *
 * Full and resumed handshakes are counted apart and each read once, so that
 * handshakes - resumptions is the full ones exactly, at any instant.
 */
#include "tls.h"

/* The counters of the calling worker; NULL before the plugin's init. */
static struct tls_counts *tls_stats_mine(void)
{
    struct tls_self *self = tls_api->self(MK_PLUGIN_SELF(tls));
    int w = tls_api->worker_id();

    if (!self) {
        return NULL;
    }
    return &self->counts[w < 0 ? 0 : (unsigned) w % TLS_STATS_SLOTS];
}

static void tls_stats_add(atomic_uint_fast64_t *counter)
{
    atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

void tls_stats_handshake(SSL *ssl)
{
    struct tls_counts *c = tls_stats_mine();

    if (c) {
        tls_stats_add(SSL_session_reused(ssl) ? &c->resumed : &c->full);
    }
}

void tls_stats_failure(void)
{
    struct tls_counts *c = tls_stats_mine();

    if (c) {
        tls_stats_add(&c->failed);
    }
}

void tls_stats_plain_http(void)
{
    struct tls_counts *c = tls_stats_mine();

    if (c) {
        tls_stats_add(&c->plain_http);
    }
}

/* The stats hook: any thread; reads the counters only, each once. */
void tls_stats(mk_stats_emit_cb emit, void *arg)
{
    struct tls_self *self = tls_api->self(MK_PLUGIN_SELF(tls));
    uint64_t full = 0, resumed = 0, failed = 0, plain_http = 0;

    if (!self) {
        return;
    }
    for (unsigned i = 0; i < TLS_STATS_SLOTS; i++) {
        const struct tls_counts *c = &self->counts[i];
        full += atomic_load_explicit(&c->full, memory_order_relaxed);
        resumed += atomic_load_explicit(&c->resumed, memory_order_relaxed);
        failed += atomic_load_explicit(&c->failed, memory_order_relaxed);
        plain_http += atomic_load_explicit(&c->plain_http, memory_order_relaxed);
    }
    emit(arg, "handshakes", full + resumed);
    emit(arg, "resumptions", resumed);
    emit(arg, "failures", failed);
    emit(arg, "plain_http", plain_http);
#ifdef TLS_HAVE_ACME
    tls_acme_stats(emit, arg);
#endif
}
