/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls.h: what the parts of the tls plugin share.
 *
 *   tls.c         the transport, the certificates, SNI, ALPN, the schema
 *   tls_verify.c  client certificates (mTLS) and the connection's named
 *                 properties (api->conn_transport_var)
 *   tls_ocsp.c    OCSP stapling from a file
 *   tls_site.c    Strict-Transport-Security and the redirect of plain HTTP
 *
 * Lifetimes: a struct tls_site belongs to its configuration (the schema
 * fills and frees it); its SSL_CTX is reference counted and outlives the
 * configuration while connections hold it, so whatever a handshake reads
 * (OCSP bytes, the verify settings) lives on the SSL_CTX, never in the
 * struct tls_site.
 */
#ifndef MK_PLUGIN_TLS_H
#define MK_PLUGIN_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include <monkey/mk_plugin.h>

/* Values of ClientCertificate. */
enum tls_client_cert {
    TLS_CLIENT_OFF = 0,  /* no certificate asked */
    TLS_CLIENT_OPTIONAL, /* asked; none or a failed one passes (client_verify tells) */
    TLS_CLIENT_REQUIRED, /* asked; the handshake fails without a valid one */
};

/* A site's [TLS] keys, and the context built from them (NULL: no certificate). */
struct tls_site {
    char *cert;
    char *key;
    char *chain;
    SSL_CTX *ctx;
    /* client certificates (tls_verify.c) */
    int client_cert; /* enum tls_client_cert */
    char *client_ca;
    int verify_depth;
    /* OCSP stapling (tls_ocsp.c) */
    char *ocsp;
    /* HTTP (tls_site.c) */
    char *hsts;
    bool redirect;
    int redirect_port; /* 0: the port of the server's first TLS listener */
};

/* One connection. */
struct tls_conn {
    uint32_t magic;   /* TLS_MAGIC: first, see tls_conn_of() */
    bool peeked;      /* the first byte was checked to be a handshake record */
    bool established; /* the handshake is done */
    bool shut;        /* close_notify was sent (or may not be) */
    int retry_len;    /* a write that must be repeated with this many bytes; 0: none */
    SSL *ssl;
    char *subject; /* client_subject, made once when asked (malloc) */
    char *verify;  /* client_verify when it is FAILED:reason (malloc) */
};

/* The server's functions, set by init(). */
extern const struct mk_api *tls_api;

MK_PLUGIN_DECLARE(tls);

/* The connection's TLS state, NULL when it arrived through another transport. */
struct tls_conn *tls_conn_of(struct mk_conn *c);
/* The site context of the SNI's site in cfg, else the default site's; NULL if neither has one. */
SSL_CTX *tls_ctx_for(struct mk_config *cfg, const char *name);

/* ---- tls_verify.c ---- */

/*
 * Set up client certificates on the site's context from ClientCertificate,
 * ClientCA and ClientVerifyDepth (controlling thread, at configuration
 * build): MK_OK, or MK_ERR with the key to blame in *key and the reason.
 */
int tls_verify_build(struct tls_site *ts, const char **key, char *reason, size_t len);
/*
 * The ClientHello callback: move the connection to its site's context
 * before OpenSSL looks for a session to resume, so that the site's session
 * id context decides (the servername callback comes after that lookup).
 */
int tls_verify_hello(SSL *ssl, int *alert, void *arg);
/*
 * Give `ssl` the verify settings of `ctx`, the site context SNI chose
 * (SSL_set_SSL_CTX carries the certificate, not the verify mode).
 */
void tls_verify_apply(SSL *ssl, SSL_CTX *ctx);
/* The transport's `var`: "protocol", "cipher", "server_name", "client_subject", "client_verify". */
const char *tls_var(struct mk_conn *c, const char *name, size_t *len);
/* Release what tls_var() cached on the connection. */
void tls_verify_release(struct tls_conn *t);

/* ---- tls_ocsp.c ---- */

/* Make the ex_data slot that holds OCSP responses on contexts; MK_OK or MK_ERR. Once, in init(). */
int tls_ocsp_init(void);
/*
 * Read OCSPResponse, check it (an OCSP response, successful, for the
 * site's certificate, not expired) and staple it from the site's context:
 * MK_OK, or MK_ERR with the reason. Controlling thread.
 */
int tls_ocsp_build(struct tls_site *ts, char *reason, size_t len);

/* ---- tls_site.c ---- */

/* The HSTS value: MK_OK, or MK_ERR with the reason (schema check). */
int tls_site_check_hsts(const char *value, char *reason, size_t len);
/* response_head hook: Strict-Transport-Security on responses sent over TLS. */
void tls_site_response_head(struct mk_request *r);
/*
 * On a plain connection of a site with RedirectHTTPS: answer 308 with a
 * Location on HTTPS. MK_OK when nothing is to be done, else the status.
 */
int tls_site_redirect(struct mk_request *r);

#endif
