/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls.h: what the parts of the tls plugin share.
 *
 *   tls.c          the life cycle, contexts, the [TLS] keys, the handshake,
 *                  reads and SNI
 *   tls_send.c     writes: writev and sendfile (kTLS or staged blocks) and
 *                  the batching BIO that sends a block's records at once
 *   tls_certs.c    the Certificate and CertificateKey lines of a site: up to
 *                  one pair per key type (RSA, ECDSA, ...), checked line by
 *                  line
 *   tls_conf.c     the plugin's own file (plugins/tls.conf): protocols,
 *                  ciphers and session settings, and the context every
 *                  connection of a configuration starts from
 *   tls_session.c  session resumption: ticket keys (rotated, or from
 *                  TicketKeyFile), the ClientHello callback that moves a
 *                  connection to its site and gives it the site's session
 *                  id context
 *   tls_stats.c    the per-server counters and the stats hook
 *   tls_verify.c   client certificates (mTLS) and the connection's named
 *                  properties (api->conn_transport_var)
 *   tls_ocsp.c     OCSP stapling from a file
 *   tls_site.c     Strict-Transport-Security and the redirect of plain HTTP
 *   tls_parse.c    what a client sends, read without OpenSSL (pure, its own
 *                  header tls_parse.h): SNI, ALPN, the redirect's Host and
 *                  path
 *
 * Lifetimes: a struct tls_site belongs to its configuration (the schema
 * fills and frees it); its SSL_CTX is reference counted and outlives the
 * configuration while connections hold it, so whatever a handshake reads
 * (OCSP bytes, the verify settings) lives on the SSL_CTX, never in the
 * struct tls_site.
 *
 * Threads: a tls_conf and its contexts are built on the controlling thread
 * and only read afterwards (they belong to a configuration); struct
 * tls_self belongs to a server and is shared by its workers: its ticket
 * keys under `lock`, its counters atomic. Everything in struct tls_conn
 * belongs to the connection's worker.
 */
#ifndef MONKEY_PLUGIN_TLS_H
#define MONKEY_PLUGIN_TLS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include <openssl/err.h>
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
    int tickets_per_handshake; /* TLS 1.3 tickets after a full handshake */
    long long ticket_rotation; /* ms; rotation of the server's own keys */
    /* TicketKeyFile keys in the order given: the first encrypts. */
    struct tls_ticket_key file_keys[TLS_TICKET_FILE_KEYS];
    unsigned n_file_keys;
    bool prefer_server; /* PreferServerCiphers: the server's order of Ciphers (TLS 1.2) */
    SSL_CTX *base;      /* every connection of this configuration starts here */
};

/* The server's own ticket keys: `cur` encrypts, both decrypt. */
struct tls_ticket_ring {
    pthread_mutex_t lock;
    struct tls_ticket_key cur, prev;
    bool have_cur, have_prev;
    int64_t cur_made; /* CLOCK_MONOTONIC milliseconds */
};

/*
 * The counters of one worker (tls_stats.c): a cache line of its own, so that
 * no two workers write the same line; atomic because the stats hook reads
 * them from another thread (and past TLS_STATS_SLOTS workers share slots).
 */
#define TLS_STATS_SLOTS 64
struct tls_counts {
    _Alignas(64) atomic_uint_fast64_t full; /* handshakes completed in full */
    atomic_uint_fast64_t resumed;           /* completed, resuming a session */
    atomic_uint_fast64_t failed;            /* a TLS record came, the handshake never finished */
    atomic_uint_fast64_t plain_http;        /* answered 400: plain HTTP on the TLS port */
};

/* The plugin's state in one server (api->self_set; aligned_alloc). */
struct tls_self {
    struct tls_ticket_ring ring;
    struct tls_counts counts[TLS_STATS_SLOTS]; /* by worker_id() % TLS_STATS_SLOTS */
    /* AES-256-CBC, fetched once: EVP_aes_256_cbc() would be fetched anew at
       every ticket sealed or opened (tls_session.c). */
    EVP_CIPHER *ticket_cipher;
    struct mk_server *server;    /* api->server() at init: NULL in monkey -t */
    struct tls_acme_state *acme; /* ACME sites and their renewer (tls_acme.c); NULL: none */
};

MK_PLUGIN_DECLARE(tls);

struct tls_acme_state;
#ifdef TLS_HAVE_ACME
#include "tls_acme.h"
#endif

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

/* The length of a site's session id context and of its verify id (SHA-256). */
#define TLS_SITE_ID 32
/* What site_init() keeps for each site of a configuration (api->site_data). */
struct tls_site_data {
    unsigned char id[TLS_SITE_ID]; /* tls_session_site_id() of the site */
    /*
     * On the default site when it has no certificate: the [TLS] settings
     * of the first site (in name order) that has one, which serve the
     * handshakes of clients without SNI or naming a site without one
     * (tls_check_sites, tls_site_for). NULL otherwise.
     */
    const struct tls_site *fallback;
};
/*
 * A site's session id context: SHA-256 of its names and of its verify id
 * (struct tls_site). Computed once per site and configuration
 * (site_init), not per ClientHello.
 */
void tls_session_site_id(const struct mk_site *site, unsigned char id[TLS_SITE_ID]);
int tls_session_init(const struct mk_api *server_api, struct tls_self *self);
void tls_session_exit(struct tls_self *self);
/* Set up resumption on a configuration's base context: MK_OK or MK_ERR. */
int tls_session_setup(SSL_CTX *base, const struct tls_conf *tc);

/* tls_stats.c */
void tls_stats_handshake(SSL *ssl);
void tls_stats_failure(void);
void tls_stats_plain_http(void);
void tls_stats(mk_stats_emit_cb emit, void *arg);

/* ---- tls_certs.c ----------------------------------------------------------- */

/* The most certificates a site has: one per key type (RSA and ECDSA). */
#define TLS_CERTS_MAX 2

/*
 * A site's certificates as its Certificate and CertificateKey lines gave
 * them, in order: pair i is the i-th Certificate with the i-th
 * CertificateKey. Each file is read and checked on its line; a pair is
 * checked (the key matches) on the line that completes it.
 */
struct tls_certs {
    size_t n_cert, n_key;
    char *cert[TLS_CERTS_MAX]; /* absolute paths */
    char *key[TLS_CERTS_MAX];
    X509 *x509[TLS_CERTS_MAX];
    EVP_PKEY *pkey[TLS_CERTS_MAX];
};

/* MK_CONF_CUSTOM set() of Certificate and CertificateKey (MK_CONF_MULTI). */
int tls_certs_set_cert(void *obj, const struct mk_conf_key *key, const char *value,
                       const struct mk_conf_origin *origin, char *reason, size_t len);
int tls_certs_set_key(void *obj, const struct mk_conf_key *key, const char *value,
                      const struct mk_conf_origin *origin, char *reason, size_t len);
/* Both lists the same length: MK_OK, or MK_ERR with the key to blame. */
int tls_certs_check(const struct tls_certs *tc, const char **key, char *reason, size_t len);
/*
 * Load pair i into ctx: the certificate file (with intermediates after
 * it) and the key. MK_OK or MK_ERR with the reason.
 */
int tls_certs_use(const struct tls_certs *tc, size_t i, SSL_CTX *ctx, char *reason, size_t len);
void tls_certs_free(struct tls_certs *tc);
/* The name of a key's type for messages: "RSA", "ECDSA", ... */
const char *tls_certs_type_name(const EVP_PKEY *pkey);

/* ---- tls_send.c ------------------------------------------------------------ */

/* The most plaintext one staged write carries: four full records. */
#define TLS_SEND_BLOCK 65536
/* The batch buffer: a block's records with their headers and tags. */
#define TLS_BATCH_SIZE (TLS_SEND_BLOCK + 1024)
/* A head written with MK_IO_MORE up to this size waits for the body. */
#define TLS_HOLD_MAX 16384

/*
 * A connection's body writes. Staged bytes are plaintext in `stage`: the
 * first `reported` of them were already counted as written to the server
 * (a held head), the rest are the body bytes of the call in progress,
 * counted once SSL_write took them all and the batching BIO sent them.
 * The stage and the batch buffer exist only while a body is being sent.
 */
struct tls_send {
    unsigned char *stage; /* TLS_SEND_BLOCK bytes, or NULL */
    size_t held;          /* a head held from a MK_IO_MORE writev, at stage[0] */
    size_t len;           /* bytes staged for the write in progress; 0: none */
    size_t pos;           /* of them, taken by SSL_write */
    size_t reported;      /* of them, already reported as written (the head) */
    int fd;               /* the file the staged body came from; -1: writev */
    off_t off;            /* its offset */
    bool ktls;            /* the kernel encrypts what we send (kTLS) */
    bool batching;        /* the BIO keeps records in `batch` instead of sending */
    BIO *bio;             /* the batching BIO over the socket's while a body is sent, or NULL */
    unsigned char *batch; /* TLS_BATCH_SIZE bytes of records after the stage, or NULL */
    size_t batch_len;     /* bytes of records in it */
    size_t batch_off;     /* of them, sent */
    bool wbatch;          /* a writev of several records goes through the BIO (not staged) */
    size_t wpos;          /* of its bytes, taken by SSL_write; reported once all are out */
};

/* Values of ClientCertificate. */
enum tls_client_cert {
    TLS_CLIENT_OFF = 0,  /* no certificate asked */
    TLS_CLIENT_OPTIONAL, /* asked; none or a failed one passes (client_verify tells) */
    TLS_CLIENT_REQUIRED, /* asked; the handshake fails without a valid one */
};

/* A site's [TLS] keys, and the context built from them (NULL: no certificate). */
struct tls_site {
    struct tls_certs certs; /* Certificate and CertificateKey, one pair per key type */
    char *chain;
    int ktls; /* KTLS: TLS_KTLS_* (tls.c) */
    SSL_CTX *ctx;
    /* client certificates (tls_verify.c) */
    int client_cert; /* enum tls_client_cert */
    char *client_ca;
    int verify_depth;
    /*
     * What a handshake under this site's context verified a client
     * certificate against: SHA-256 of the mode, the depth and the ClientCA
     * certificates (tls_verify_build). All zero when ClientCertificate is
     * off. Equal ids verify alike, whichever site or configuration.
     */
    unsigned char verify_id[TLS_SITE_ID];
    /* OCSP stapling (tls_ocsp.c) */
    char *ocsp;
    /* HTTP (tls_site.c) */
    char *hsts;
    bool redirect;
    int redirect_port; /* 0: the port of the server's first TLS listener */
#ifdef TLS_HAVE_ACME
    /* ACME (tls_acme.c): the keys, and the site's state shared across configurations */
    struct tls_acme_conf acme_conf;
    struct tls_acme_site *acme; /* NULL: the site's certificate comes from its files */
#endif
};

/* One connection. */
struct tls_conn {
    uint32_t magic;   /* TLS_MAGIC: first, see tls_conn_of() */
    bool peeked;      /* the first byte was checked to be a handshake record */
    bool established; /* the handshake is done */
    bool shut;        /* close_notify was sent (or may not be) */
    bool plain;       /* plain HTTP came instead of a handshake */
    bool switched;    /* tls_switch() moved it to its site's context */
    bool acme_alpn;   /* an ACME TLS-ALPN-01 validation (tls_acme_alpn_hello) */
    int retry_len;    /* a write that must be repeated with this many bytes; 0: none */
    SSL *ssl;         /* its app data is this struct (tls_switch) */
    /*
     * The verify id of the site context the handshake ran under (set by
     * tls_switch() in the ClientHello callback; all zero for a context
     * without client certificates). A resumed session was verified under
     * the same id: the session id context, set with it, holds it.
     */
    unsigned char verify_id[TLS_SITE_ID];
    const char *why; /* why the handshake failed, when it is ours (a static text); NULL */
    char *subject;   /* client_subject, made once when asked (malloc) */
    char *verify;    /* client_verify when it is FAILED:reason (malloc) */
    struct tls_send send;
};

/* The connection's TLS state, NULL when it arrived through another transport. */
struct tls_conn *tls_conn_of(struct mk_conn *c);
/*
 * The [TLS] settings whose context serves the SNI `name` in cfg: the
 * named site's when it has a context, else the default site's, else
 * (the default site has no certificate) the first site's that has one;
 * NULL when no site has one (a configuration tls_check_sites refused).
 */
const struct tls_site *tls_site_for(struct mk_config *cfg, const char *name);
/*
 * Move ssl to ts's context (the site SNI chose), with what SSL_set_SSL_CTX
 * does not carry: the client-certificate settings and the site's kTLS
 * choice; and record ts's verify id on the connection. Called with the
 * configuration of ts held.
 */
void tls_switch(SSL *ssl, const struct tls_site *ts);
/*
 * Whether connection c may serve a request of `site` (of a configuration
 * the caller holds): over TLS, the SNI, when there was one, names that
 * site, and when the site asks for client certificates the handshake ran
 * under its verify id; over any other transport, the site asks for none.
 */
bool tls_site_allows(struct mk_conn *c, const struct mk_site *site);

/* ---- tls_verify.c ---- */

/*
 * Set up client certificates on the site's context from ClientCertificate,
 * ClientCA and ClientVerifyDepth (controlling thread, at configuration
 * build): MK_OK, or MK_ERR with the key to blame in *key and the reason.
 */
int tls_verify_build(struct tls_site *ts, const char **key, char *reason, size_t len);
/* Whether a verify id is a site's that asks for client certificates (not all zero). */
bool tls_verify_on(const unsigned char id[TLS_SITE_ID]);
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

/*
 * Whether the kernel offers kTLS (`tls` in tcp_available_ulp), read anew
 * at each call: each configuration build asks (`modprobe tls` and a reload
 * bring kTLS in).
 */
bool tls_ktls_available(void);
/* The batching BIO's method, on the controlling thread: MK_OK or MK_ERR. */
int tls_send_init(void);
void tls_send_exit(void);
/* After the handshake: note whether kTLS sends (the batching BIO comes per body). */
void tls_send_established(struct tls_conn *t);
/* Release what the connection's writes hold (the SSL is freed by the caller). */
void tls_send_release(struct tls_conn *t);
/* The transport's writev and sendfile (struct mk_transport). */
ssize_t tls_writev(struct mk_conn *c, const struct iovec *iov, int iovcnt, int flags);
ssize_t tls_sendfile(struct mk_conn *c, int fd, off_t *offset, size_t len);
/* 1 when tls_sendfile reads the file into the process (no kTLS), else 0. */
int tls_sendfile_copies(struct mk_conn *c);
/*
 * Empty this thread's OpenSSL error queue before an SSL call whose result
 * SSL_get_error() reads (an error left by earlier code would be taken for
 * the call's own). ERR_clear_error() walks the whole queue and costs about
 * 800 instructions even when it is empty, a look at the queue a tenth of
 * that: twice per keep-alive request, it was 7% of one.
 */
static inline void tls_err_reset(void)
{
    if (ERR_peek_error() != 0) {
        ERR_clear_error();
    }
}

/*
 * The result of an SSL call on t that returned rc <= 0 (tls.c): MK_AGAIN
 * with the direction wanted set, 0 for a clean end, MK_ERR otherwise.
 */
int tls_result(struct mk_conn *c, struct tls_conn *t, int rc);

#endif
