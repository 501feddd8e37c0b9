/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls.c: HTTPS, an OpenSSL 3 transport for "Listen PORT tls".
 *
 * What it guarantees:
 *   - TLS 1.2 and 1.3 only, a modern-intermediate cipher list (ECDHE with
 *     AES-GCM or ChaCha20-Poly1305, DHE as the last resort) in the
 *     server's order for TLS 1.2 (PreferServerCiphers; TLS 1.3 suites are
 *     the client's choice), no renegotiation, no compression, early data
 *     (0-RTT) refused.
 *   - Certificates per site, from the [TLS] section of its site file
 *     (Certificate, CertificateKey, optional CertificateChain; up to one
 *     pair per key type, RSA and ECDSA side by side: tls_certs.c). The files
 *     are read and checked (readable, the key matches the certificate) when
 *     a configuration is built: start, reload and `monkey -t` alike, and a
 *     refusal names the file and line. A reload therefore brings new
 *     certificates; connections keep the one they started with.
 *   - SNI picks the site's certificate and client-certificate settings
 *     with the rules Host uses (exact names without case, "*.example.com"
 *     wildcards, a trailing dot ignored); a client without SNI, or naming
 *     no site or a site without a certificate, gets the default site's,
 *     and when the default site has none, the first site's (in name
 *     order) that has one, as nginx falls back to its first server's
 *     (logged once per configuration). A configuration with a TLS
 *     listener and no certificate at all is refused at start, reload and
 *     `monkey -t`, naming the Listen line (tls_check_sites).
 *   - A request is served by a site only if its connection's handshake met
 *     that site's TLS requirements (tls_request, tls_site_allows), checked
 *     for every request and HTTP/2 stream on the site Host, :authority or
 *     an absolute target chose: with SNI, the site SNI named; for a site
 *     with ClientCertificate, a handshake under that site's verify id
 *     (mode, depth, ClientCA certificates: tls_verify.c), which a
 *     connection without SNI, made for another site, resumed from another
 *     site's session, or opened before a reload that changed them lacks,
 *     and a plain connection never has. Otherwise 421 Misdirected Request,
 *     without the site's HSTS.
 *   - ALPN: the first of "h2", "http/1.1" the client offers and the server
 *     speaks (api->protocol_known); no ALPN means HTTP/1.1.
 *   - A connection whose first byte is not a TLS handshake record (plain
 *     HTTP on the TLS port) gets a 400 page and is closed. Handshake
 *     failures are logged at info with the peer's address; the head
 *     Timeout bounds the whole handshake (the server's transport seam).
 *   - Reads: OpenSSL reads ahead (one read(2) per burst of records, not
 *     two per record); records waiting undecrypted count as pending.
 *   - Writes (tls_send.c): a head and a small file body in one record,
 *     file bodies with SSL_sendfile under kTLS (KTLS auto, the default,
 *     when the kernel has the tls ULP), else in blocks of 64 KiB sent
 *     with one system call each.
 *
 * Client certificates and the connection's named properties are in
 * tls_verify.c, OCSP stapling in tls_ocsp.c, HSTS and the redirect of
 * plain HTTP in tls_site.c (tls.h).
 *
 * Threads: the SSL_CTX of each site is built on the controlling thread
 * (the schema's finish()) and only read afterwards; each SSL belongs to
 * its connection's worker. Protocols, ciphers and session resumption are
 * the plugin's own file's (tls_conf.c, tls_session.c), the counters
 * tls_stats.c's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <monkey/mk_plugin.h>

#include "tls.h"
#include "tls_parse.h"

/* Marks our per-connection state (transport data of other transports differs). */
#define TLS_MAGIC 0x4d4b544cu

static const struct mk_api *api;
const struct mk_api *tls_api;

/* KTLS: the values, in the order of their index. */
enum { TLS_KTLS_AUTO, TLS_KTLS_OFF };
static const char *const tls_ktls_words[] = {"auto", "off", NULL};

/* ---- contexts ------------------------------------------------------------ */

/* The peer's address as text into buf. */
static const char *tls_peer(int fd, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);

    snprintf(buf, len, "?");
    if (getpeername(fd, (struct sockaddr *) &ss, &sl) == 0) {
        const void *a = ss.ss_family == AF_INET6
                            ? (const void *) &((struct sockaddr_in6 *) &ss)->sin6_addr
                            : (const void *) &((struct sockaddr_in *) &ss)->sin_addr;
        inet_ntop(ss.ss_family, a, buf, (socklen_t) len);
    }
    return buf;
}

/*
 * ALPN: the server's preference among what the client offers, only
 * protocols the server speaks. None in common: no ALPN (HTTP/1.1).
 */
static int tls_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                           const unsigned char *in, unsigned int inlen, void *arg)
{
    static const char *const prefs[] = {"h2", "http/1.1", NULL};
    const struct tls_conn *t = SSL_get_app_data(ssl);

    (void) arg;
    if (t && t->acme_alpn) {
        /* an ACME validation (RFC 8737): its protocol, then the end of the connection */
        const unsigned char *found = tls_alpn_find(in, inlen, "acme-tls/1", 10);
        if (!found) {
            return SSL_TLSEXT_ERR_ALERT_FATAL;
        }
        *out = found;
        *outlen = 10;
        return SSL_TLSEXT_ERR_OK;
    }
    for (size_t p = 0; prefs[p]; p++) {
        size_t plen = strlen(prefs[p]);
        if (!api->protocol_known(prefs[p], plen)) {
            continue;
        }
        const unsigned char *found = tls_alpn_find(in, inlen, prefs[p], plen);
        if (found) {
            *out = found;
            *outlen = (unsigned char) plen;
            return SSL_TLSEXT_ERR_OK;
        }
    }
    return SSL_TLSEXT_ERR_NOACK;
}

const struct tls_site *tls_site_for(struct mk_config *cfg, const char *name)
{
    const struct mk_site *any = api->config_site(cfg, 0);
    const struct mk_site *dflt = api->site_lookup(any, NULL, 0);
    const struct mk_site *site = name ? api->site_lookup(any, name, strlen(name)) : dflt;
    const struct tls_site *ts = api->site_conf(site, MK_PLUGIN_SELF(tls));

    if (!ts || !ts->ctx) {
        ts = api->site_conf(dflt, MK_PLUGIN_SELF(tls));
    }
    if (!ts || !ts->ctx) {
        const struct tls_site_data *sd = api->site_data(dflt, MK_PLUGIN_SELF(tls));
        ts = sd ? sd->fallback : NULL;
    }
    return ts && ts->ctx ? ts : NULL;
}

/*
 * check_sites, once the sites of a configuration with a TLS listener are
 * built: a configuration without any certificate is refused (every
 * handshake would fail); when the default site has none, the first site
 * that has one serves the clients that name no site with a certificate,
 * and the log says so. Controlling thread, before any connection sees cfg.
 */
static int tls_check_sites(const struct mk_config *cfg, char *reason, size_t len)
{
    unsigned n = api->config_sites(cfg);
    const struct mk_site *dflt = api->site_lookup(api->config_site(cfg, 0), NULL, 0);
    const struct tls_site *ts = api->site_conf(dflt, MK_PLUGIN_SELF(tls));
    struct tls_site_data *sd = api->site_data(dflt, MK_PLUGIN_SELF(tls));

    if (ts && ts->ctx) {
        return MK_OK;
    }
    for (unsigned i = 0; i < n; i++) {
        const struct mk_site *site = api->config_site(cfg, i);
        ts = api->site_conf(site, MK_PLUGIN_SELF(tls));
        if (!ts || !ts->ctx) {
            continue;
        }
        if (sd) {
            sd->fallback = ts;
        }
        const char *name = api->site_name(site, 0);
        api->log(MK_PLUGIN_LOG_WARN,
                 "tls: %s, the default site, has no certificate ([TLS] Certificate): clients "
                 "without SNI, or naming a site without one, get the certificate of %s%s%s%s",
                 api->site_file(dflt), api->site_file(site), name ? " (" : "", name ? name : "",
                 name ? ")" : "");
        return MK_OK;
    }
    snprintf(reason, len,
             "no site has a certificate, so no TLS handshake could succeed: give the default site "
             "(%s) a [TLS] section with Certificate and CertificateKey",
             api->site_file(dflt));
    return MK_ERR;
}

void tls_switch(SSL *ssl, const struct tls_site *ts)
{
    struct tls_conn *t = SSL_get_app_data(ssl);

    SSL_CTX *ctx = ts->ctx;
#ifdef TLS_HAVE_ACME
    /* An ACME site: the newest certificate the renewer installed. */
    ctx = ts->acme ? tls_acme_ctx(ts->acme) : ctx;
#endif
    SSL_set_SSL_CTX(ssl, ctx); /* takes its own reference */
    tls_verify_apply(ssl, ctx);
    if (t) {
        memcpy(t->verify_id, ts->verify_id, sizeof(t->verify_id));
        t->switched = true;
    }
    /* kTLS as the site says: options stay the connection's own. */
    if (SSL_CTX_get_options(ctx) & SSL_OP_ENABLE_KTLS) {
        SSL_set_options(ssl, SSL_OP_ENABLE_KTLS);
    }
    else {
        SSL_clear_options(ssl, SSL_OP_ENABLE_KTLS);
    }
#ifdef TLS_HAVE_ACME
    if (ts->acme) {
        SSL_CTX_free(ctx); /* the SSL holds its own */
    }
#endif
}

/*
 * PreferServerCiphers, once the version is chosen and before the cipher
 * is (OpenSSL negotiates the version first, calls this callback, then
 * picks a TLS 1.2 cipher): the server's order of Ciphers for TLS 1.2, with
 * ChaCha20 first for a client that lists it first (one without AES
 * hardware); TLS 1.3 keeps the client's choice among Ciphersuites, every
 * one of which is an AEAD with forward secrecy. The setting rides on the
 * site contexts (tls_conf_site_ctx), like the cipher lists.
 */
static void tls_cipher_order(SSL *ssl, SSL_CTX *ctx)
{
    const uint64_t order = SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA;

    if ((SSL_CTX_get_options(ctx) & SSL_OP_CIPHER_SERVER_PREFERENCE) &&
        SSL_version(ssl) < TLS1_3_VERSION) {
        SSL_set_options(ssl, order);
    }
    else {
        SSL_clear_options(ssl, order);
    }
}

/*
 * Called for every ClientHello, with SNI or without, after the ClientHello
 * callback (tls_session.c), which has moved the connection to its site's
 * context and given it that site's session id context: that choice stands
 * (a reload between the two callbacks does not split a connection between
 * two configurations). Without it, move the connection to the context
 * holding the certificate of its site, in the configuration in force now.
 * Then set the cipher order for the version chosen.
 */
static int tls_servername(SSL *ssl, int *alert, void *arg)
{
    struct tls_conn *t = SSL_get_app_data(ssl);
    SSL_CTX *ctx = NULL;

    (void) arg;
    if (t && t->switched) {
        ctx = SSL_get_SSL_CTX(ssl);
    }
    else {
        struct mk_config *cfg = api->config_get();
        if (cfg) {
            const struct tls_site *ts =
                tls_site_for(cfg, SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name));
            if (ts) {
                tls_switch(ssl, ts);
                ctx = ts->ctx;
            }
            api->config_put(cfg);
        }
    }
    if (!ctx) {
        if (t) {
            t->why = "no site of the configuration in force has a certificate for it";
        }
        *alert = SSL_AD_UNRECOGNIZED_NAME;
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    tls_cipher_order(ssl, ctx);
    return SSL_TLSEXT_ERR_OK;
}

/*
 * A context with the server's fixed settings and no certificate. The
 * versions, ciphers and session settings come from the configuration's
 * base context every SSL starts with (tls_conf.c); site contexts carry
 * the certificate and the callbacks.
 */
SSL_CTX *tls_ctx_new(void)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

    if (!ctx) {
        return NULL;
    }
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
        SSL_CTX_set_cipher_list(ctx, TLS_CIPHERS) != 1 ||
        SSL_CTX_set_session_id_context(ctx, (const unsigned char *) "monkey", 6) != 1) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                 SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_max_early_data(ctx, 0);
    SSL_CTX_set_dh_auto(ctx, 1);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    /* One read(2) takes whatever has arrived (a record's header and body,
       or the client's last flight with its first request) instead of two
       per record; tls_pending() then reports what waits in the buffer. */
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_alpn_select_cb(ctx, tls_alpn_select, NULL);
    SSL_CTX_set_tlsext_servername_callback(ctx, tls_servername);
    return ctx;
}

/* The first OpenSSL error as text (the queue is cleared), or `fallback`. */
static const char *tls_error_text(char *buf, size_t len, const char *fallback)
{
    unsigned long e = ERR_get_error();

    ERR_clear_error();
    if (!e) {
        snprintf(buf, len, "%s", fallback);
        return buf;
    }
    ERR_error_string_n(e, buf, len);
    return buf;
}

/* Add the certificates of the PEM file `path` to the context's chain. */
static bool tls_load_chain(SSL_CTX *ctx, const char *path, char *reason, size_t len)
{
    FILE *f = fopen(path, "r");
    X509 *x;
    int n = 0;
    char why[160];

    if (!f) {
        snprintf(reason, len, "CertificateChain %s: %s", path, strerror(errno));
        return false;
    }
    while ((x = PEM_read_X509(f, NULL, NULL, NULL)) != NULL) {
        if (SSL_CTX_add0_chain_cert(ctx, x) != 1) {
            X509_free(x);
            fclose(f);
            snprintf(reason, len, "CertificateChain %s: %s", path,
                     tls_error_text(why, sizeof(why), "not accepted"));
            return false;
        }
        n++;
    }
    fclose(f);
    ERR_clear_error(); /* the end of the file */
    if (n == 0) {
        snprintf(reason, len, "CertificateChain %s: no PEM certificate in it", path);
        return false;
    }
    return true;
}

/*
 * Build the site's context from its files (checked line by line when they
 * were read): MK_OK, or MK_ERR with the key to blame in *key and the
 * reason. CertificateChain goes with the first certificate.
 */
static int tls_site_build(struct tls_site *ts, const char **key, char *reason, size_t len)
{
    char why[160];

    *key = "Certificate";
    ts->ctx = tls_ctx_new();
    if (!ts->ctx) {
        snprintf(reason, len, "%s", tls_error_text(why, sizeof(why), "out of memory"));
        return MK_ERR;
    }
    for (size_t i = 0; i < ts->certs.n_cert; i++) {
        if (tls_certs_use(&ts->certs, i, ts->ctx, reason, len) != MK_OK) {
            return MK_ERR;
        }
        if (i == 0 && ts->chain) {
            *key = "CertificateChain";
            if (!tls_load_chain(ts->ctx, ts->chain, reason, len)) {
                return MK_ERR;
            }
            *key = "Certificate";
        }
    }
    if (ts->ktls == TLS_KTLS_AUTO && tls_ktls_available()) {
        SSL_CTX_set_options(ts->ctx, SSL_OP_ENABLE_KTLS);
    }
    if (tls_verify_build(ts, key, reason, len) != MK_OK) {
        return MK_ERR;
    }
    *key = "OCSPResponse";
    return ts->ocsp ? tls_ocsp_build(ts, reason, len) : MK_OK;
}

/* ---- configuration --------------------------------------------------------- */

static const char *const tls_client_words[] = {"off", "optional", "required", NULL};

static const struct mk_conf_key tls_keys[] = {
    {"Certificate", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI,
     MK_CONF_FIELD(struct tls_site, certs), .set = tls_certs_set_cert,
     .doc = "the site's certificate (PEM), with its chain after it if wanted; twice for RSA and "
            "ECDSA"},
    {"CertificateKey", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI,
     MK_CONF_FIELD(struct tls_site, certs), .set = tls_certs_set_key,
     .doc = "the private key (PEM) of the Certificate of the same rank"},
    {"CertificateChain", MK_CONF_PATH, MK_CONF_SITE, MK_CONF_FIELD(struct tls_site, chain),
     .doc = "intermediate certificates (PEM) sent after the first certificate"},
    {"ClientCertificate", MK_CONF_ENUM, MK_CONF_SITE, MK_CONF_FIELD(struct tls_site, client_cert),
     .fallback = "off", .words = tls_client_words,
     .doc = "ask clients for a certificate: off, optional or required"},
    {"ClientCA", MK_CONF_PATH, MK_CONF_SITE, MK_CONF_FIELD(struct tls_site, client_ca),
     .doc = "the CAs (PEM) client certificates are checked against and that are named to clients"},
    {"ClientVerifyDepth", MK_CONF_INT, MK_CONF_SITE, MK_CONF_FIELD(struct tls_site, verify_depth),
     1, 20, "1", .doc = "the most intermediate CAs between a client certificate and a ClientCA"},
    {"OCSPResponse", MK_CONF_PATH, MK_CONF_SITE, MK_CONF_FIELD(struct tls_site, ocsp),
     .doc = "a DER OCSP response for the certificate, stapled when the client asks"},
    {"HSTS", MK_CONF_STRING, MK_CONF_SITE, MK_CONF_FIELD(struct tls_site, hsts), 0, 255,
     .check = tls_site_check_hsts,
     .doc = "the Strict-Transport-Security value sent on every response over TLS"},
    {"RedirectHTTPS", MK_CONF_BOOL, MK_CONF_SITE, MK_CONF_FIELD(struct tls_site, redirect), 0, 0,
     "off", .doc = "answer plain HTTP requests with 308 to the same URL over HTTPS"},
    {"RedirectPort", MK_CONF_INT, MK_CONF_SITE, MK_CONF_FIELD(struct tls_site, redirect_port), 0,
     65535, "0", .doc = "the HTTPS port of redirects; 0: the first TLS listener's"},
    /* plugins/tls.conf (tls_conf.c) */
    {"Protocols", MK_CONF_WORDS, 0, MK_CONF_FIELD(struct tls_conf, protocols),
     .fallback = "TLSv1.2 TLSv1.3", .check = tls_conf_protocol_check,
     .doc = "the TLS versions accepted: TLSv1.2 and/or TLSv1.3"},
    {"Ciphers", MK_CONF_STRING, 0, MK_CONF_FIELD(struct tls_conf, ciphers), .fallback = TLS_CIPHERS,
     .check = tls_conf_ciphers_check, .doc = "the TLS 1.2 cipher list (OpenSSL's syntax)"},
    {"Ciphersuites", MK_CONF_STRING, 0, MK_CONF_FIELD(struct tls_conf, ciphersuites),
     .fallback = TLS_CIPHERSUITES, .check = tls_conf_ciphersuites_check,
     .doc = "the TLS 1.3 cipher suites (OpenSSL's syntax)"},
    {"PreferServerCiphers", MK_CONF_BOOL, 0, MK_CONF_FIELD(struct tls_conf, prefer_server), 0, 0,
     "On", .doc = "TLS 1.2 takes the first cipher of Ciphers the client offers; Off: the client's"},
    {"SessionCache", MK_CONF_INT, 0, MK_CONF_FIELD(struct tls_conf, session_cache), 0, 1000000,
     "20480", .doc = "sessions the server-side cache holds (0: no cache)"},
    {"SessionTimeout", MK_CONF_DURATION, 0, MK_CONF_FIELD(struct tls_conf, session_timeout), 1000,
     604800000, "1h", .doc = "how long a session resumes (ticket or cache entry)"},
    {"SessionTickets", MK_CONF_BOOL, 0, MK_CONF_FIELD(struct tls_conf, tickets), 0, 0, "On",
     .doc = "issue and accept session tickets"},
    {"TicketsPerHandshake", MK_CONF_INT, 0, MK_CONF_FIELD(struct tls_conf, tickets_per_handshake),
     1, 10, "1", .doc = "TLS 1.3 session tickets sent after a full handshake"},
    {"TicketKeyRotation", MK_CONF_DURATION, 0, MK_CONF_FIELD(struct tls_conf, ticket_rotation),
     1000, 604800000, "1h", .doc = "how often the server makes a new ticket key"},
    {"TicketKeyFile", MK_CONF_CUSTOM, MK_CONF_MULTI, 0, 0, .set = tls_conf_ticket_file_set,
     .doc = "a file of 80-byte ticket keys shared by servers; the first key seals"},
    {"KTLS", MK_CONF_ENUM, MK_CONF_SITE, MK_CONF_FIELD(struct tls_site, ktls), 0, 0, "auto",
     tls_ktls_words, .doc = "auto: the kernel encrypts (kTLS, SSL_sendfile) when it can; off"},
#ifdef TLS_HAVE_ACME
    TLS_ACME_KEYS
#endif
    {NULL},
};

/* A site's keys together: both files or none, then the context built from them. */
static int tls_finish(void *obj, int site, const char **key, char *reason, size_t len)
{
    struct tls_site *ts = obj;

    if (!site) {
        return tls_conf_finish(obj, key, reason, len);
    }
#ifdef TLS_HAVE_ACME
    int rc = tls_acme_finish(ts, key, reason, len);
    if (rc != MK_DECLINED) {
        return rc;
    }
#endif
    if (!ts->certs.n_cert && !ts->certs.n_key && !ts->chain) {
        if (ts->client_cert || ts->client_ca || ts->ocsp) {
            *key = ts->ocsp ? "OCSPResponse" : ts->client_ca ? "ClientCA" : "ClientCertificate";
            snprintf(reason, len, "%s without a Certificate", *key);
            return MK_ERR;
        }
        return MK_OK;
    }
    if (!ts->certs.n_cert && !ts->certs.n_key) {
        *key = "CertificateChain";
        snprintf(reason, len, "[TLS] without a Certificate");
        return MK_ERR;
    }
    if (tls_certs_check(&ts->certs, key, reason, len) != MK_OK) {
        return MK_ERR;
    }
    return tls_site_build(ts, key, reason, len);
}

static void tls_free(void *obj, int site)
{
    struct tls_site *ts = obj;

    if (!site) {
        tls_conf_free(obj);
        return;
    }
    tls_certs_free(&ts->certs);
#ifdef TLS_HAVE_ACME
    tls_acme_site_release(ts);
#endif
    if (ts->ctx) {
        SSL_CTX_free(ts->ctx);
        ts->ctx = NULL;
    }
}

/*
 * Each site of each configuration built: its context gets the
 * configuration's protocols and ciphers (plugins/tls.conf), which the
 * schema's finish() of a site cannot see, and its session id context is
 * computed once for the ClientHellos (struct tls_site_data, freed by
 * tls_site_free()).
 */
static int tls_site_init(const struct mk_site *site, const struct mk_conf *conf, void **data,
                         char *err, size_t errlen)
{
    const struct tls_site *ts = api->site_conf(site, MK_PLUGIN_SELF(tls));

    struct tls_site_data *sd;

    (void) conf;
    *data = NULL;
#ifdef TLS_HAVE_ACME
    /* The schema's struct of the configuration being built (this thread's alone). */
    if (ts && ts->acme_conf.directory &&
        tls_acme_site_init((struct tls_site *) ts, site, conf, err, errlen) != MK_OK) {
        return MK_ERR;
    }
#endif
    if (ts && ts->ctx &&
        tls_conf_site_ctx(api->plugin_conf(site, MK_PLUGIN_SELF(tls)), ts->ctx) != MK_OK) {
        snprintf(err, errlen, "%s: tls: OpenSSL refuses the protocols or ciphers",
                 api->site_file(site));
        return MK_ERR;
    }
    sd = calloc(1, sizeof(*sd));
    if (!sd) {
        snprintf(err, errlen, "%s: tls: out of memory", api->site_file(site));
        return MK_ERR;
    }
    tls_session_site_id(site, sd->id);
    *data = sd;
    return MK_OK;
}

static void tls_site_free(void *data)
{
    free(data);
}

static const struct mk_conf_schema tls_schema = {
    .section = "TLS",
    .file = "tls.conf",
    .keys = tls_keys,
    .size = sizeof(struct tls_conf),
    .site_size = sizeof(struct tls_site),
    .free = tls_free,
    .finish = tls_finish,
};

/* ---- the transport ---------------------------------------------------------- */

struct tls_conn *tls_conn_of(struct mk_conn *c)
{
    struct tls_conn *t = *api->conn_transport_data(c);
    return t && t->magic == TLS_MAGIC ? t : NULL;
}

static int tls_open(struct mk_conn *c)
{
    SSL_CTX *base = tls_conf_base();
    struct tls_conn *t = calloc(1, sizeof(*t));

    if (!t || !base) {
        SSL_CTX_free(base);
        free(t);
        return MK_ERR;
    }
    t->magic = TLS_MAGIC;
    t->ssl = SSL_new(base);
    SSL_CTX_free(base); /* the SSL holds its own reference */
    if (!t->ssl || SSL_set_fd(t->ssl, api->conn_fd(c)) != 1) {
        ERR_clear_error();
        SSL_free(t->ssl);
        free(t);
        return MK_ERR;
    }
    SSL_set_app_data(t->ssl, t); /* for tls_switch() in the handshake's callbacks */
    SSL_set_accept_state(t->ssl);
    *api->conn_transport_data(c) = t;
    return MK_OK;
}

/* Send close_notify once, when the handshake was done: the client then
   knows the response was complete, and may keep the session. */
static void tls_close_notify(struct tls_conn *t)
{
    if (t->established && !t->shut) {
        t->shut = true;
        tls_err_reset();
        SSL_shutdown(t->ssl);
        tls_err_reset();
    }
}

/*
 * The server closes without a lingering close too (a response that ended
 * with Connection: close and no input left, the keep-alive timeout, the
 * server stopping): close_notify goes out best effort, without waiting.
 */
static void tls_close(struct mk_conn *c)
{
    void **slot = api->conn_transport_data(c);
    struct tls_conn *t = *slot;

    if (t) {
        if (t->peeked && !t->plain && !t->established) {
            tls_stats_failure();
        }
        /* close_notify also keeps the session in the cache: OpenSSL drops
           the session of a connection that was not shut down on SSL_free. */
        tls_close_notify(t);
        SSL_free(t->ssl);
        tls_verify_release(t);
        tls_send_release(t);
        free(t);
    }
    *slot = NULL;
}

/*
 * Plain HTTP on the TLS port: answer 400 in clear text as nginx does. The
 * request's bytes are read first, so that closing does not reset the
 * connection before the client reads the answer.
 */
static void tls_plain_http(struct mk_conn *c)
{
    static const char page[] = "<html><head><title>400 Bad Request</title></head><body>\n"
                               "<h1>400 Bad Request</h1>\n"
                               "<p>The plain HTTP request was sent to an HTTPS port.</p>\n"
                               "</body></html>\n";
    char head[256], drain[4096], peer[INET6_ADDRSTRLEN];
    int fd = api->conn_fd(c);
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 400 Bad Request\r\nContent-Type: text/html\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     sizeof(page) - 1);
    struct iovec iov[2] = {{head, (size_t) n}, {(void *) page, sizeof(page) - 1}};
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};

    while (recv(fd, drain, sizeof(drain), MSG_DONTWAIT) > 0) {
    }
    if (sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) > 0) {
        shutdown(fd, SHUT_WR);
    }
    api->log(MK_PLUGIN_LOG_INFO, "tls: plain HTTP from %s on a TLS port: 400",
             tls_peer(fd, peer, sizeof(peer)));
}

/*
 * The result of an SSL call that returned `rc` <= 0: MK_AGAIN with the
 * direction wanted set, 0 for a clean end, MK_ERR otherwise.
 */
int tls_result(struct mk_conn *c, struct tls_conn *t, int rc)
{
    switch (SSL_get_error(t->ssl, rc)) {
    case SSL_ERROR_WANT_READ:
        api->conn_io_want(c, MK_IO_WANT_READ);
        return MK_AGAIN;
    case SSL_ERROR_WANT_WRITE:
        api->conn_io_want(c, MK_IO_WANT_WRITE);
        return MK_AGAIN;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    default:
        t->shut = true; /* a failed connection gets no close_notify */
        return MK_ERR;
    }
}

static int tls_handshake(struct mk_conn *c)
{
    struct tls_conn *t = *api->conn_transport_data(c);
    int fd = api->conn_fd(c);
    char peer[INET6_ADDRSTRLEN], why[160];

    if (!t->peeked) {
        unsigned char first;
        ssize_t n = recv(fd, &first, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return MK_AGAIN;
        }
        if (n <= 0) {
            return MK_ERR;
        }
        t->peeked = true;
        if (first != 0x16) { /* not a TLS handshake record */
            t->plain = true;
            tls_stats_plain_http();
            tls_plain_http(c);
            return MK_ERR;
        }
    }
    tls_err_reset();
    int rc = SSL_do_handshake(t->ssl);
    if (rc == 1) {
        t->established = true;
        tls_stats_handshake(t->ssl);
        tls_send_established(t);
        return MK_OK;
    }
    int res = tls_result(c, t, rc);
    if (res == MK_AGAIN) {
        return MK_AGAIN;
    }
    /* A reason of our own (no certificate) first: OpenSSL's is "callback failed". */
    tls_error_text(why, sizeof(why), "the client closed the connection");
    if (t->why) {
        const char *sni = SSL_get_servername(t->ssl, TLSEXT_NAMETYPE_host_name);
        api->log(MK_PLUGIN_LOG_INFO, "tls: handshake with %s%s%s%s failed: %s",
                 tls_peer(fd, peer, sizeof(peer)), sni ? " (SNI " : " (no SNI", sni ? sni : "", ")",
                 t->why);
        return MK_ERR;
    }
    api->log(MK_PLUGIN_LOG_INFO, "tls: handshake with %s failed: %s",
             tls_peer(fd, peer, sizeof(peer)), why);
    return MK_ERR;
}

static ssize_t tls_read(struct mk_conn *c, void *buf, size_t len)
{
    struct tls_conn *t = *api->conn_transport_data(c);

    tls_err_reset();
    int n = SSL_read(t->ssl, buf, len > INT_MAX ? INT_MAX : (int) len);
    if (n > 0) {
        return n;
    }
    switch (tls_result(c, t, n)) {
    case MK_AGAIN:
        errno = EAGAIN;
        return -1;
    case 0:
        return 0;
    default:
        ERR_clear_error();
        errno = ECONNRESET;
        return -1;
    }
}

/* Send close_notify when the handshake was done, then stop sending. */
static int tls_shutdown(struct mk_conn *c)
{
    tls_close_notify(*api->conn_transport_data(c));
    return shutdown(api->conn_fd(c), SHUT_WR);
}

/*
 * Decrypted bytes waiting, or 1 when only records not yet decrypted wait
 * in the read-ahead buffer (a pipelined request): the socket signals
 * neither. A partial record reports 1 too; its read then ends in EAGAIN.
 */
static size_t tls_pending(struct mk_conn *c)
{
    struct tls_conn *t = *api->conn_transport_data(c);

    if (!t->established) {
        return 0;
    }
    int n = SSL_pending(t->ssl);
    if (n > 0) {
        return (size_t) n;
    }
    return SSL_has_pending(t->ssl) ? 1 : 0;
}

static const char *tls_alpn(struct mk_conn *c, size_t *len)
{
    struct tls_conn *t = *api->conn_transport_data(c);
    const unsigned char *p = NULL;
    unsigned int n = 0;

    SSL_get0_alpn_selected(t->ssl, &p, &n);
    if (!p || !n) {
        return NULL;
    }
    *len = n;
    return (const char *) p;
}

static const char *tls_server_name(struct mk_conn *c, size_t *len)
{
    struct tls_conn *t = *api->conn_transport_data(c);
    const char *name = SSL_get_servername(t->ssl, TLSEXT_NAMETYPE_host_name);

    if (!name) {
        return NULL;
    }
    *len = strlen(name);
    return name;
}

static const struct mk_transport tls_transport = {
    .name = "tls",
    .open = tls_open,
    .read = tls_read,
    .writev = tls_writev,
    .sendfile = tls_sendfile,
    .shutdown = tls_shutdown,
    .close = tls_close,
    .handshake = tls_handshake,
    .pending = tls_pending,
    .alpn = tls_alpn,
    .server_name = tls_server_name,
    .var = tls_var,
    .sendfile_copies = tls_sendfile_copies,
    .check_sites = tls_check_sites,
};

/* ---- hooks ------------------------------------------------------------------ */

bool tls_site_allows(struct mk_conn *c, const struct mk_site *site)
{
    const struct tls_conn *t = tls_conn_of(c);
    const struct tls_site *ts = api->site_conf(site, MK_PLUGIN_SELF(tls));
    size_t len = 0;

    if (t) {
        const char *sni = api->conn_server_name(c, &len);
        /* Both by the rules Host follows: a name no site has means the default site. */
        if (sni && api->site_lookup(site, sni, len) != site) {
            return false;
        }
    }
    if (!ts || !tls_verify_on(ts->verify_id)) {
        return true; /* the site asks nothing of the client */
    }
    return t && memcmp(t->verify_id, ts->verify_id, sizeof(t->verify_id)) == 0;
}

/*
 * A request is served by a site only if its connection's handshake met
 * that site's TLS requirements, whatever named the site (Host, HTTP/2's
 * :authority, an absolute target: api->site() is the site they chose),
 * on every request and stream of the connection:
 *   - with SNI, the request's site is the one SNI named (the certificate
 *     the client checked is that site's); a name no site has means the
 *     default site;
 *   - a site with ClientCertificate optional or required is served only
 *     on a connection whose handshake ran under its verify id (its mode,
 *     depth and ClientCA certificates now: a connection without SNI, or
 *     made before a reload that changed them, or a session resumed from
 *     another site, does not qualify), never on a plain connection.
 * Otherwise 421 Misdirected Request: the client may retry on a new
 * connection with the site's name as SNI. On a plain connection a site
 * with RedirectHTTPS is first sent to HTTPS.
 */
static int tls_request(struct mk_request *r)
{
    struct mk_conn *c = api->conn(r);

    if (!tls_conn_of(c)) {
        int rc = tls_site_redirect(r);
        if (rc != MK_OK) {
            return rc;
        }
    }
    return tls_site_allows(c, api->site(r)) ? MK_OK : 421;
}

static int tls_init(const struct mk_api *server_api, const char *conf_dir)
{
    struct tls_self *self;

    (void) conf_dir;
    api = server_api;
    tls_api = server_api;
    if (!MK_API_HAS(api, conn_transport_var)) {
        api->log(MK_PLUGIN_LOG_ERROR, "tls: needs a server with plugin ABI 3.3");
        return MK_ERR;
    }
    if (tls_ocsp_init() != MK_OK) {
        api->log(MK_PLUGIN_LOG_ERROR, "tls: cannot set up OpenSSL for OCSP stapling");
        return MK_ERR;
    }
    if (tls_send_init() != MK_OK) {
        api->log(MK_PLUGIN_LOG_ERROR, "tls: cannot set up OpenSSL for the writes");
        return MK_ERR;
    }
    self = aligned_alloc(_Alignof(struct tls_self), sizeof(*self));
    if (self) {
        memset(self, 0, sizeof(*self));
        self->server = MK_API_HAS(api, server) ? api->server() : NULL;
    }
    if (!self) {
        api->log(MK_PLUGIN_LOG_ERROR, "tls: out of memory");
        tls_send_exit();
        return MK_ERR;
    }
    if (tls_session_init(api, self) != MK_OK) {
        api->log(MK_PLUGIN_LOG_ERROR, "tls: cannot set up the ticket keys");
        free(self);
        tls_send_exit();
        return MK_ERR;
    }
    if (api->self_set(MK_PLUGIN_SELF(tls), self) != MK_OK) {
        api->log(MK_PLUGIN_LOG_ERROR, "tls: cannot keep the plugin's state");
        tls_session_exit(self);
        free(self);
        tls_send_exit();
        return MK_ERR;
    }
    return MK_OK;
}

static void tls_exit(void)
{
    struct tls_self *self = api->self(MK_PLUGIN_SELF(tls));

    if (self) {
#ifdef TLS_HAVE_ACME
        tls_acme_exit();
#endif
        tls_session_exit(self);
        free(self);
    }
    tls_send_exit();
}

MK_PLUGIN_DEFINE(tls) = {
    MK_PLUGIN_ABI_INIT,
    .name = "tls",
    .version = "1.0",
    .description = "HTTPS: an OpenSSL transport with a certificate per site, SNI and ALPN",
    .init = tls_init,
    .exit = tls_exit,
    .request = tls_request,
    .transport = &tls_transport,
    .site_init = tls_site_init,
    .site_free = tls_site_free,
    .conf_schema = &tls_schema,
    .response_head = tls_site_response_head,
    .stats = tls_stats,
#ifdef TLS_HAVE_ACME
    .early = tls_acme_early,
    .control_name = "acme",
    .control = tls_acme_control,
#endif
};
