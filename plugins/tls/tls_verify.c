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
 *   - The settings are those of the site SNI chose: they are copied onto
 *     the SSL in the servername callback (SSL_set_SSL_CTX carries the
 *     certificate and the store, not the verify mode or the CA names).
 *   - A site that asks for certificates has a session id context of its
 *     own (a digest of its certificate, ClientCA and mode): its sessions,
 *     which carry the client's verification, never resume on another site,
 *     and other sites' sessions never resume on it.
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
    return MK_OK;
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
