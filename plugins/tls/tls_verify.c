/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls_verify.c: client certificates (mTLS) per site, and the connection's
 * named properties for plugins and the logger (the transport's `var`).
 *
 * What it guarantees:
 *   - ClientCertificate required: the handshake fails unless the client
 *     sends a certificate that verifies against the site's ClientCA within
 *     ClientVerifyDepth intermediates. optional: a certificate is asked
 *     for, and the handshake goes on without one or with one that fails;
 *     client_verify says which (NONE, FAILED:reason) and client_subject is
 *     given only for a verified certificate.
 *   - The settings are those of the site SNI chose (without SNI, or
 *     naming no site, the default site's): they are copied onto the SSL
 *     in the ClientHello callback (SSL_set_SSL_CTX carries the certificate
 *     and the store, not the verify mode or the CA names).
 *   - Each site that asks for certificates has a verify id: SHA-256 of
 *     its mode, its ClientVerifyDepth and the certificates its ClientCA
 *     loaded, so two sites (or two configurations) verify alike exactly
 *     when their ids are equal. The connection records the id of the
 *     context its handshake ran under, and a request for a site that asks
 *     for certificates is served only on a connection with that site's id
 *     (tls_site_allows, tls.c): 421 otherwise, whatever Host, :authority
 *     or an absolute target names, and after a reload that changed the
 *     site's settings or the contents of its ClientCA file.
 *   - A site that asks for certificates has a session id context of its
 *     own (a digest of its names and its verify id): its sessions, which
 *     carry the client's verification, never resume on another site, nor
 *     under other settings, and other sites' sessions never resume on it.
 *
 * Threads: tls_verify_build() runs on the controlling thread while a
 * configuration is built; the rest on the connection's worker.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include "tls.h"

/*
 * Optional mode lets any chain through (the result stays in
 * SSL_get_verify_result for client_verify); required keeps OpenSSL's verdict.
 */
static int tls_verify_cb(int ok, X509_STORE_CTX *store)
{
    SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());

    if (ssl && !(SSL_get_verify_mode(ssl) & SSL_VERIFY_FAIL_IF_NO_PEER_CERT)) {
        return 1;
    }
    return ok;
}

/*
 * ts->verify_id from what the site's context verifies with: the mode, the
 * depth, and the SHA-256 of each certificate in its store (the ClientCA
 * certificates, in the store's order: the same for the same file). The
 * contents count, not the path: a reload with another CA in the same file
 * makes another id. MK_OK, or MK_ERR when OpenSSL cannot digest.
 */
_Static_assert(TLS_SITE_ID == SHA256_DIGEST_LENGTH, "a verify id is a SHA-256 digest");

static int tls_verify_digest(struct tls_site *ts)
{
    STACK_OF(X509_OBJECT) *objs = X509_STORE_get0_objects(SSL_CTX_get_cert_store(ts->ctx));
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char cert[EVP_MAX_MD_SIZE];
    unsigned n_certs = 0, n;
    char head[32];
    int ok;

    int hl = snprintf(head, sizeof(head), "monkey-verify %d %d", ts->client_cert, ts->verify_depth);
    ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 &&
         EVP_DigestUpdate(md, head, (size_t) hl + 1) == 1;
    for (int i = 0; ok && i < sk_X509_OBJECT_num(objs); i++) {
        X509 *x = X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objs, i));
        if (!x) {
            continue; /* a CRL: never checked (no CRL flags) */
        }
        ok = X509_digest(x, EVP_sha256(), cert, &n) == 1 && EVP_DigestUpdate(md, cert, n) == 1;
        n_certs++;
    }
    ok = ok && n_certs > 0 && EVP_DigestFinal_ex(md, ts->verify_id, NULL) == 1;
    EVP_MD_CTX_free(md);
    ERR_clear_error();
    if (!ok || !tls_verify_on(ts->verify_id)) {
        memset(ts->verify_id, 0, sizeof(ts->verify_id));
        return MK_ERR;
    }
    return MK_OK;
}

int tls_verify_build(struct tls_site *ts, const char **key, char *reason, size_t len)
{
    STACK_OF(X509_NAME) * names;
    int mode;

    if (ts->client_cert == TLS_CLIENT_OFF) {
        if (ts->client_ca) {
            *key = "ClientCA";
            snprintf(reason, len, "ClientCA without ClientCertificate optional or required");
            return MK_ERR;
        }
        return MK_OK;
    }
    *key = "ClientCertificate";
    if (!ts->client_ca) {
        snprintf(reason, len, "ClientCertificate %s needs a ClientCA",
                 ts->client_cert == TLS_CLIENT_REQUIRED ? "required" : "optional");
        return MK_ERR;
    }
    *key = "ClientCA";
    ERR_clear_error();
    names = SSL_load_client_CA_file(ts->client_ca);
    if (!names || sk_X509_NAME_num(names) == 0) {
        sk_X509_NAME_pop_free(names, X509_NAME_free);
        ERR_clear_error();
        snprintf(reason, len, "ClientCA %s: no readable PEM certificate in it", ts->client_ca);
        return MK_ERR;
    }
    SSL_CTX_set_client_CA_list(ts->ctx, names); /* takes it */
    if (SSL_CTX_load_verify_locations(ts->ctx, ts->client_ca, NULL) != 1) {
        ERR_clear_error();
        snprintf(reason, len, "ClientCA %s: not usable as a CA file", ts->client_ca);
        return MK_ERR;
    }
    mode = SSL_VERIFY_PEER | SSL_VERIFY_CLIENT_ONCE;
    if (ts->client_cert == TLS_CLIENT_REQUIRED) {
        mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    }
    SSL_CTX_set_verify(ts->ctx, mode, tls_verify_cb);
    SSL_CTX_set_verify_depth(ts->ctx, ts->verify_depth);
    if (tls_verify_digest(ts) != MK_OK) {
        snprintf(reason, len, "ClientCA %s: cannot digest its certificates", ts->client_ca);
        return MK_ERR;
    }
    return MK_OK;
}

bool tls_verify_on(const unsigned char id[TLS_SITE_ID])
{
    unsigned char any = 0;

    for (size_t i = 0; i < TLS_SITE_ID; i++) {
        any |= id[i];
    }
    return any != 0;
}

void tls_verify_apply(SSL *ssl, SSL_CTX *ctx)
{
    int mode = SSL_CTX_get_verify_mode(ctx);

    SSL_set_verify(ssl, mode, SSL_CTX_get_verify_callback(ctx));
    SSL_set_verify_depth(ssl, SSL_CTX_get_verify_depth(ctx));
    if (mode != SSL_VERIFY_NONE) {
        /* The SSL holds the base context's (empty) list, which wins over ctx's. */
        STACK_OF(X509_NAME) *names = SSL_dup_CA_list(SSL_CTX_get_client_CA_list(ctx));
        if (names) {
            SSL_set_client_CA_list(ssl, names);
        }
    }
}

/* The verified client certificate's subject, RFC 2253; NULL without one. */
static const char *tls_client_subject(struct tls_conn *t)
{
    X509 *peer;
    BIO *bio;
    char *data;
    long n;

    if (t->subject) {
        return t->subject;
    }
    peer = SSL_get0_peer_certificate(t->ssl);
    if (!peer || SSL_get_verify_result(t->ssl) != X509_V_OK) {
        return NULL;
    }
    bio = BIO_new(BIO_s_mem());
    if (!bio) {
        return NULL;
    }
    if (X509_NAME_print_ex(bio, X509_get_subject_name(peer), 0, XN_FLAG_RFC2253) >= 0 &&
        (n = BIO_get_mem_data(bio, &data)) > 0 && (t->subject = malloc((size_t) n + 1))) {
        memcpy(t->subject, data, (size_t) n);
        t->subject[n] = '\0';
    }
    BIO_free(bio);
    return t->subject;
}

/* SUCCESS, NONE (no certificate), or FAILED:reason. */
static const char *tls_client_verify(struct tls_conn *t)
{
    long res;
    int n;

    if (!SSL_get0_peer_certificate(t->ssl)) {
        return "NONE";
    }
    res = SSL_get_verify_result(t->ssl);
    if (res == X509_V_OK) {
        return "SUCCESS";
    }
    if (!t->verify) {
        const char *why = X509_verify_cert_error_string(res);
        n = snprintf(NULL, 0, "FAILED:%s", why);
        t->verify = malloc((size_t) n + 1);
        if (t->verify) {
            snprintf(t->verify, (size_t) n + 1, "FAILED:%s", why);
        }
    }
    return t->verify ? t->verify : "FAILED";
}

const char *tls_var(struct mk_conn *c, const char *name, size_t *len)
{
    struct tls_conn *t = tls_conn_of(c);
    const char *v = NULL;

    if (!t || !t->established) {
        return NULL;
    }
    if (strcmp(name, "protocol") == 0) {
        v = SSL_get_version(t->ssl);
    }
    else if (strcmp(name, "cipher") == 0) {
        v = SSL_get_cipher_name(t->ssl);
    }
    else if (strcmp(name, "server_name") == 0) {
        v = SSL_get_servername(t->ssl, TLSEXT_NAMETYPE_host_name);
    }
    else if (strcmp(name, "client_subject") == 0) {
        v = tls_client_subject(t);
    }
    else if (strcmp(name, "client_verify") == 0) {
        v = tls_client_verify(t);
    }
    if (v) {
        *len = strlen(v);
    }
    return v;
}

void tls_verify_release(struct tls_conn *t)
{
    free(t->subject);
    free(t->verify);
    t->subject = NULL;
    t->verify = NULL;
}
