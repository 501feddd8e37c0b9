/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls_acme.h: certificates from an ACME CA (RFC 8555), obtained and
 * renewed by the tls plugin itself (tls_acme.c, tls_acme_client.c,
 * tls_acme_crypto.c). Built with MK_ACME (TLS_HAVE_ACME).
 *
 * Threads: the site keys are read on the controlling thread (configuration
 * build); one renewer thread per server does every network exchange, with
 * blocking sockets and timeouts, never a worker; workers read the HTTP-01
 * tokens (early hook) and each ACME site's current context (tls_switch),
 * both under a mutex held for a copy or a reference, never across I/O.
 */
#ifndef MK_TLS_ACME_H
#define MK_TLS_ACME_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>

struct mk_conf;
struct mk_site;
struct mk_request;
struct tls_site;

/* ACMEKeyType */
enum { ACME_KEY_ECDSA, ACME_KEY_RSA };

/* A site's ACME keys ([TLS] of its site file), inside struct tls_site. */
struct tls_acme_conf {
    char *directory; /* ACME: the directory URL, or "letsencrypt" */
    bool staging;    /* ACMEStaging: Let's Encrypt's staging directory */
    char *email;     /* ACMEEmail */
    int key_type;    /* ACMEKeyType */
    char *ca;        /* ACMECACertificate: CAs trusted for the directory's HTTPS */
    char *eab_kid;   /* ACMEEABKeyID */
    char *eab_key;   /* ACMEEABKey, base64url */
    char *state_dir; /* ACMEStateDir */
    long long retry; /* ACMERetry: the first back-off, ms */
};

/* The most names one ACME site orders a certificate for. */
#define ACME_NAMES_MAX 32

/*
 * One ACME site of a server, shared by every configuration that has it (a
 * reload keeps it, found by its site file, names and directory), alive
 * while a configuration refers to it (refs) and the renewer knows it.
 */
struct tls_acme_site {
    struct tls_acme_site *next;
    /* One for the renewer's list, one per configuration (site_init) that
       holds it; the last to drop it frees it (tls_acme_site_release). */
    atomic_uint refs;
    char *key;  /* site file, directory and names: what finds it again */
    char *file; /* the site file, for messages */
    char *names[ACME_NAMES_MAX];
    unsigned n_names;
    struct tls_acme_conf conf; /* copied strings */
    char *directory;           /* the URL, staging resolved */
    char *base;                /* STATEDIR/FIRSTNAME: .crt, .key, .lock beside */
    bool ktls;                 /* KTLS auto, and the kernel has it */

    pthread_mutex_t lock; /* what follows */
    SSL_CTX *ctx;         /* the context handshakes of the site get now */
    bool temporary;       /* ctx has the self-signed stand-in */
    time_t not_after;     /* of the certificate in ctx (0: none) */
    time_t not_before;
    time_t next_try;   /* when the renewer works on it next (wall clock) */
    long long backoff; /* ms of the next failure's wait; 0: ACMERetry */
    char error[512];   /* the last failure, "" when the last attempt succeeded */
    bool force;        /* renew now (monkey-ctl acme renew) */
    unsigned obtained; /* certificates obtained by this server */
    unsigned failures; /* attempts that failed */
};

/* The keys of struct tls_acme_conf, spliced into tls.c's table. */
#define TLS_ACME_KEYS                                                                              \
    {"ACME",                                                                                       \
     MK_CONF_STRING,                                                                               \
     MK_CONF_SITE,                                                                                 \
     MK_CONF_FIELD(struct tls_site, acme_conf.directory),                                          \
     0,                                                                                            \
     1023,                                                                                         \
     .check = tls_acme_check_url,                                                                  \
     .doc = "get the certificate from this ACME directory (an https URL, or letsencrypt)"},        \
        {"ACMEStaging",                                                                            \
         MK_CONF_BOOL,                                                                             \
         MK_CONF_SITE,                                                                             \
         MK_CONF_FIELD(struct tls_site, acme_conf.staging),                                        \
         0,                                                                                        \
         0,                                                                                        \
         "off",                                                                                    \
         .doc = "with ACME letsencrypt: Let's Encrypt's staging directory"},                       \
        {"ACMEEmail",                                                                              \
         MK_CONF_STRING,                                                                           \
         MK_CONF_SITE,                                                                             \
         MK_CONF_FIELD(struct tls_site, acme_conf.email),                                          \
         0,                                                                                        \
         254,                                                                                      \
         .check = tls_acme_check_email,                                                            \
         .doc = "the contact address of the ACME account"},                                        \
        {"ACMEKeyType",                                                                            \
         MK_CONF_ENUM,                                                                             \
         MK_CONF_SITE,                                                                             \
         MK_CONF_FIELD(struct tls_site, acme_conf.key_type),                                       \
         0,                                                                                        \
         0,                                                                                        \
         "ecdsa",                                                                                  \
         tls_acme_key_words,                                                                       \
         .doc = "the certificate's key: ecdsa (P-256) or rsa (2048 bits)"},                        \
        {"ACMECACertificate", MK_CONF_PATH, MK_CONF_SITE,                                          \
         MK_CONF_FIELD(struct tls_site, acme_conf.ca),                                             \
         .doc = "the CAs (PEM) trusted for the ACME directory's HTTPS; default: the system's"},    \
        {"ACMEEABKeyID",                                                                           \
         MK_CONF_STRING,                                                                           \
         MK_CONF_SITE,                                                                             \
         MK_CONF_FIELD(struct tls_site, acme_conf.eab_kid),                                        \
         0,                                                                                        \
         255,                                                                                      \
         .check = tls_acme_check_token,                                                            \
         .doc = "external account binding: the key id"},                                           \
        {"ACMEEABKey",                                                                             \
         MK_CONF_STRING,                                                                           \
         MK_CONF_SITE,                                                                             \
         MK_CONF_FIELD(struct tls_site, acme_conf.eab_key),                                        \
         0,                                                                                        \
         1023,                                                                                     \
         .check = tls_acme_check_eab_key,                                                          \
         .doc = "external account binding: the HMAC key, base64url"},                              \
        {"ACMEStateDir", MK_CONF_PATH, MK_CONF_SITE,                                               \
         MK_CONF_FIELD(struct tls_site, acme_conf.state_dir),                                      \
         .doc = "where account key, certificates and locks are kept (0700)"},                      \
        {"ACMERetry",                                                                              \
         MK_CONF_DURATION,                                                                         \
         MK_CONF_SITE,                                                                             \
         MK_CONF_FIELD(struct tls_site, acme_conf.retry),                                          \
         1000,                                                                                     \
         86400000,                                                                                 \
         "1m",                                                                                     \
         .doc = "the first wait after a failed order; each failure doubles it, up to 1d"},

extern const char *const tls_acme_key_words[];
int tls_acme_check_url(const char *value, char *reason, size_t len);
int tls_acme_check_email(const char *value, char *reason, size_t len);
int tls_acme_check_token(const char *value, char *reason, size_t len);
int tls_acme_check_eab_key(const char *value, char *reason, size_t len);

/*
 * The site's [TLS] keys together (schema finish()): the keys that go with
 * ACME and the ones that cannot (Certificate, ClientCertificate, ...), and
 * the site's context made (no certificate yet: site_init gives it one).
 * MK_OK, or MK_ERR with the key to blame.
 */
int tls_acme_finish(struct tls_site *ts, const char **key, char *reason, size_t len);
/*
 * site_init of a site with ACME: its names checked (no wildcard; "file:line"
 * errors), the state directory checked (0700, created when missing, except
 * in `monkey -t`), its shared state found or made, and its current
 * certificate (the stored one, else a temporary self-signed one) put in
 * ts->ctx. The renewer thread starts with the first ACME site of a
 * serving server. MK_OK, or MK_ERR with the reason in err.
 */
int tls_acme_site_init(struct tls_site *ts, const struct mk_site *site, const struct mk_conf *conf,
                       char *err, size_t errlen);
/* The configuration that held ts is gone. */
void tls_acme_site_release(struct tls_site *ts);
/*
 * The context a handshake for the ACME site gets now, with a reference
 * the caller drops (SSL_CTX_free). Any thread.
 */
SSL_CTX *tls_acme_ctx(struct tls_acme_site *as);
/*
 * The ClientHello of ssl, after its switch to the site's context: when it
 * offers only ALPN "acme-tls/1" for an SNI name whose TLS-ALPN-01
 * challenge is waiting, give ssl the challenge's certificate: true (the
 * ALPN callback then selects acme-tls/1 and the connection ends after its
 * handshake), else false. One relaxed atomic load when no such challenge
 * waits. Workers.
 */
bool tls_acme_alpn_hello(SSL *ssl, const char *sni);
/* The early hook: the HTTP-01 answers on plain connections. */
int tls_acme_early(struct mk_request *r);
/* The ACME counters for the stats hook: per site expiry, next renewal, failures. */
void tls_acme_stats(void (*emit)(void *arg, const char *name, uint64_t value), void *arg);
/* The control hook (control_name "acme"): "status", "renew NAME". */
int tls_acme_control(const char *args, char *out, size_t cap);
/* Stop the renewer of this server (exit()). */
void tls_acme_exit(void);

/* ---- tls_acme_crypto.c: keys, JWS, CSR, certificates (no I/O) ---- */

/* A new ECDSA P-256 key (or RSA 2048 with rsa), NULL on failure. */
EVP_PKEY *acme_key_new(bool rsa);
/* The JWK of an EC P-256 key ({"crv","kty","x","y"}, in that order) into out. */
int acme_jwk(EVP_PKEY *key, char *out, size_t cap);
/* The RFC 7638 thumbprint of that JWK, base64url, into out (44 bytes). */
int acme_thumbprint(EVP_PKEY *key, char out[64]);
/*
 * A flattened JWS (ES256) of `payload` (NULL: the empty payload of a
 * POST-as-GET) for `url` with `nonce`, with the key's JWK (kid NULL) or
 * the account URL `kid`: a malloc'd JSON text, or NULL.
 */
char *acme_jws(EVP_PKEY *key, const char *kid, const char *nonce, const char *url,
               const char *payload);
/* The EAB inner JWS (HS256 over the account key's JWK): malloc'd JSON, or NULL. */
char *acme_eab_jws(EVP_PKEY *key, const char *eab_kid, const char *eab_key, const char *url);
/* A CSR (DER, base64url, malloc'd) for names signed by key, or NULL. */
char *acme_csr(EVP_PKEY *key, char *const *names, unsigned n);
/* A self-signed certificate for names, valid for `days`, or NULL. */
X509 *acme_self_signed(EVP_PKEY *key, char *const *names, unsigned n, int days);
/*
 * The TLS-ALPN-01 certificate for name (RFC 8737): self-signed by key, the
 * name as its only SAN, the critical acmeIdentifier extension with the
 * SHA-256 of the key authorization. NULL on failure.
 */
X509 *acme_alpn_cert(EVP_PKEY *key, const char *name, const char *keyauth);
/* A certificate's validity as time_t. */
void acme_cert_times(X509 *x, time_t *not_before, time_t *not_after);
/* Whether the certificate's SANs hold every name. */
bool acme_cert_covers(X509 *x, char *const *names, unsigned n);

#endif
