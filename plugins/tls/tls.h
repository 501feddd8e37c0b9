/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls.h: what the parts of the tls plugin share.
 *
 *   tls.c          the transport, the site certificates, SNI, ALPN, the hooks
 *   tls_conf.c     the plugin's own file (plugins/tls.conf): protocols,
 *                  ciphers and session settings, and the context every
 *                  connection of a configuration starts from
 *   tls_session.c  session resumption: ticket keys (rotated, or from
 *                  TicketKeyFile) and a session id context per site
 *   tls_stats.c    the per-server counters and the stats hook
 *
 * Threads: a tls_conf and its context are built on the controlling thread
 * and only read afterwards (they belong to a configuration); struct
 * tls_self belongs to a server and is shared by its workers: its ticket
 * keys under `lock`, its counters atomic.
 */
#ifndef MONKEY_PLUGIN_TLS_H
#define MONKEY_PLUGIN_TLS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <openssl/ssl.h>

#include <monkey/mk_plugin.h>

/* Mozilla's "intermediate" profile for TLS 1.2: the default of Ciphers. */
#define TLS_CIPHERS                                                                                \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"                                   \
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"                                   \
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"                                   \
    "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305"
/* OpenSSL's TLS 1.3 suites: the default of Ciphersuites. */
#define TLS_CIPHERSUITES                                                                           \
    "TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256"

/* A session ticket key in nginx's 80-byte file format. */
#define TLS_TICKET_NAME 16
#define TLS_TICKET_SECRET 32
#define TLS_TICKET_FILE_KEY (TLS_TICKET_NAME + 2 * TLS_TICKET_SECRET)
/* The most keys TicketKeyFile lines may give together. */
#define TLS_TICKET_FILE_KEYS 16

struct tls_ticket_key {
    unsigned char name[TLS_TICKET_NAME];
    unsigned char hmac[TLS_TICKET_SECRET];
    unsigned char aes[TLS_TICKET_SECRET];
};

/* The plugin-wide keys of one configuration ([TLS] in plugins/tls.conf). */
struct tls_conf {
    struct mk_conf_words protocols; /* TLSv1.2 and/or TLSv1.3 */
    char *ciphers;                  /* TLS 1.2, OpenSSL's cipher list syntax */
    char *ciphersuites;             /* TLS 1.3 */
    unsigned session_cache;         /* entries; 0: no server-side cache */
    long long session_timeout;      /* ms */
    bool tickets;
    long long ticket_rotation; /* ms; rotation of the server's own keys */
    /* TicketKeyFile keys in the order given: the first encrypts. */
    struct tls_ticket_key file_keys[TLS_TICKET_FILE_KEYS];
    unsigned n_file_keys;
    SSL_CTX *base; /* every connection of this configuration starts here */
};

/* The server's own ticket keys: `cur` encrypts, both decrypt. */
struct tls_ticket_ring {
    pthread_mutex_t lock;
    struct tls_ticket_key cur, prev;
    bool have_cur, have_prev;
    int64_t cur_made; /* CLOCK_MONOTONIC milliseconds */
};

/* The plugin's state in one server (api->self_set). */
struct tls_self {
    struct tls_ticket_ring ring;
    atomic_uint_fast64_t handshakes;  /* completed, full and resumed */
    atomic_uint_fast64_t resumptions; /* of those, resumed */
    atomic_uint_fast64_t failures;    /* a TLS record came, the handshake never finished */
    atomic_uint_fast64_t plain_http;  /* answered 400: plain HTTP on the TLS port */
};

MK_PLUGIN_DECLARE(tls);

/* The server's function table, for the parts besides tls.c (set by init()). */
extern const struct mk_api *tls_api;

/* tls.c: a context with the server's fixed settings and no certificate. */
SSL_CTX *tls_ctx_new(void);

/* tls_conf.c: the plugin-wide keys (spliced into the schema's table). */
int tls_conf_protocol_check(const char *value, char *reason, size_t len);
int tls_conf_ciphers_check(const char *value, char *reason, size_t len);
int tls_conf_ciphersuites_check(const char *value, char *reason, size_t len);
int tls_conf_ticket_file_set(void *obj, const struct mk_conf_key *key, const char *value,
                             const struct mk_conf_origin *origin, char *reason, size_t len);
int tls_conf_finish(struct tls_conf *tc, const char **key, char *reason, size_t len);
void tls_conf_free(struct tls_conf *tc);
/*
 * Give a site's context the configuration's versions and cipher lists:
 * after the SNI switch (SSL_set_SSL_CTX) OpenSSL reads the cipher lists
 * of the connection's current context, not of the one it started with.
 */
int tls_conf_site_ctx(const struct tls_conf *tc, SSL_CTX *ctx);
/* The context new connections start from now (the configuration in force); NULL: none. */
SSL_CTX *tls_conf_base(void);

/* tls_session.c */
int tls_session_init(const struct mk_api *server_api, struct tls_self *self);
void tls_session_exit(struct tls_self *self);
/* Set up resumption on a configuration's base context: MK_OK or MK_ERR. */
int tls_session_setup(SSL_CTX *base, const struct tls_conf *tc);

/* tls_stats.c */
void tls_stats_handshake(SSL *ssl);
void tls_stats_failure(void);
void tls_stats_plain_http(void);
void tls_stats(mk_stats_emit_cb emit, void *arg);

#endif
