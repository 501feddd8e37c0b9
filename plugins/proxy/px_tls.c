/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * px_tls.c: TLS to upstreams (`tls://` servers), over OpenSSL.
 *
 * One client context per configuration (proxy.conf's TLS keys), made when
 * a site first resolves a route to a tls:// server: certificate
 * verification on by default (the system's store, or TLSCAFile), the name
 * verified the server's name= or its address (an IP address is verified
 * as one), SNI when the name is a DNS name, an optional client
 * certificate. A connection's SSL object lives as long as the connection,
 * in the pool too; it holds its context, so a reload that frees the
 * configuration leaves kept connections working until they close.
 *
 * Session reuse: each worker keeps the last session a server gave (the
 * context's new-session callback, TLS 1.2 and 1.3 tickets alike), and the
 * next connection to that server on that worker offers it, if it came
 * from the same context.
 *
 * Everything but px_tls_ctx() and the checks of the keys runs on a
 * worker; no lock is taken.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "proxy.h"

/* The last session of each server on this worker (allocated at its first). */
struct px_sess {
    SSL_CTX *ctx;
    SSL_SESSION *s;
};
static __thread struct px_sess *px_sess;

/* The index of a connection's server slot in its SSL's ex data. */
static int px_slot_idx = -1;

/* The text of the last OpenSSL error, or `dflt`. */
static void px_tls_why(char *why, size_t len, const char *dflt)
{
    unsigned long e = ERR_get_error();
    if (e) {
        ERR_error_string_n(e, why, len);
    }
    else {
        snprintf(why, len, "%s", dflt);
    }
    ERR_clear_error();
}

int px_tls_check(const char *kind, const char *path, char *reason, size_t len)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    int ok = 0;
    if (!ctx) {
        return px_oom(reason, len);
    }
    if (strcmp(kind, "ca") == 0) {
        ok = SSL_CTX_load_verify_locations(ctx, path, NULL);
    }
    else if (strcmp(kind, "cert") == 0) {
        ok = SSL_CTX_use_certificate_chain_file(ctx, path);
    }
    else {
        ok = SSL_CTX_use_PrivateKey_file(ctx, path, SSL_FILETYPE_PEM);
    }
    if (ok != 1) {
        char why[160];
        px_tls_why(why, sizeof(why), "unreadable");
        snprintf(reason, len, "%s: %s", path, why);
    }
    SSL_CTX_free(ctx);
    return ok == 1 ? MK_OK : MK_ERR;
}

static int px_tls_new_session(SSL *ssl, SSL_SESSION *s)
{
    void *slot = SSL_get_ex_data(ssl, px_slot_idx);
    if (!slot) {
        return 0;
    }
    if (!px_sess && !(px_sess = calloc(PX_SERVERS_MAX, sizeof(*px_sess)))) {
        return 0;
    }
    struct px_sess *e = &px_sess[(uintptr_t) slot - 1];
    if (e->s) {
        SSL_SESSION_free(e->s);
    }
    e->s = s; /* ours now: returning 1 keeps the reference */
    e->ctx = SSL_get_SSL_CTX(ssl);
    return 1;
}

int px_tls_ctx(struct px_conf *c, char *err, size_t errlen)
{
    if (c->tls_ctx) {
        return MK_OK;
    }
    if (px_slot_idx < 0) {
        px_slot_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    char why[160];
    if (!ctx || px_slot_idx < 0) {
        snprintf(err, errlen, "TLS to upstreams: out of memory");
        SSL_CTX_free(ctx);
        return MK_ERR;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, px_tls_new_session);
    SSL_CTX_set_verify(ctx, c->tls_verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    int ok = c->tls_ca ? SSL_CTX_load_verify_locations(ctx, c->tls_ca, NULL)
                       : SSL_CTX_set_default_verify_paths(ctx);
    if (ok == 1 && c->tls_cert) {
        ok = SSL_CTX_use_certificate_chain_file(ctx, c->tls_cert) == 1 &&
             SSL_CTX_use_PrivateKey_file(ctx, c->tls_key, SSL_FILETYPE_PEM) == 1 &&
             SSL_CTX_check_private_key(ctx) == 1;
    }
    if (ok != 1) {
        px_tls_why(why, sizeof(why), "the files cannot be read");
        snprintf(err, errlen, "TLS to upstreams: %s", why);
        SSL_CTX_free(ctx);
        return MK_ERR;
    }
    c->tls_ctx = ctx;
    return MK_OK;
}

void px_tls_ctx_free(struct px_conf *c)
{
    SSL_CTX_free(c->tls_ctx); /* connections that hold it keep it */
    c->tls_ctx = NULL;
}

/* Whether s is an IPv4 or IPv6 address. */
static bool px_is_ip(const char *s)
{
    unsigned char b[16];
    return inet_pton(AF_INET, s, b) == 1 || inet_pton(AF_INET6, s, b) == 1;
}

void px_tls_ctx_ref(void *ctx)
{
    SSL_CTX_up_ref(ctx);
}

void px_tls_ctx_unref(void *ctx)
{
    SSL_CTX_free(ctx);
}

void *px_tls_new(void *ctx, int fd, const struct px_addr *a, unsigned slot)
{
    SSL *ssl = SSL_new(ctx);
    if (!ssl) {
        return NULL;
    }
    const char *name = a->name;
    bool cache = slot < PX_SERVERS_MAX;
    bool ok = SSL_set_fd(ssl, fd) == 1 &&
              (!cache || SSL_set_ex_data(ssl, px_slot_idx, (void *) (uintptr_t) (slot + 1)) == 1);
    if (ok && px_is_ip(name)) {
        ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1;
    }
    else if (ok) {
        ok = SSL_set_tlsext_host_name(ssl, name) == 1 && SSL_set1_host(ssl, name) == 1;
    }
    if (!ok) {
        SSL_free(ssl);
        ERR_clear_error();
        return NULL;
    }
    if (cache && px_sess && px_sess[slot].s && px_sess[slot].ctx == ctx) {
        SSL_set_session(ssl, px_sess[slot].s);
    }
    SSL_set_connect_state(ssl);
    return ssl;
}

int px_tls_handshake(void *t, uint32_t *want, char *why, size_t len)
{
    SSL *ssl = t;
    int rc = SSL_do_handshake(ssl);
    if (rc == 1) {
        return MK_OK;
    }
    int e = SSL_get_error(ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        *want = e == SSL_ERROR_WANT_READ ? MK_LOOP_READ : MK_LOOP_WRITE;
        return MK_AGAIN;
    }
    long v = SSL_get_verify_result(ssl);
    if (v != X509_V_OK) {
        snprintf(why, len, "certificate verification failed: %s", X509_verify_cert_error_string(v));
        ERR_clear_error();
    }
    else if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
        snprintf(why, len, "TLS handshake: %s",
                 errno ? strerror(errno) : "the connection was closed");
    }
    else {
        char err[160];
        px_tls_why(err, sizeof(err), "failed");
        snprintf(why, len, "TLS handshake: %s", err);
    }
    return MK_ERR;
}

bool px_tls_resumed(void *t)
{
    return SSL_session_reused(t) == 1;
}

/* An SSL_read or SSL_write's failure as errno: EAGAIN to wait, else an error. */
static ssize_t px_tls_fail(SSL *ssl, int rc)
{
    int e = SSL_get_error(ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        errno = EAGAIN;
        return -1;
    }
    if (e == SSL_ERROR_ZERO_RETURN) {
        return 0; /* close_notify */
    }
    if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
        int saved = errno;
        ERR_clear_error();
        if (saved == 0) {
            return 0; /* closed without close_notify: the end, as for plain TCP */
        }
        errno = saved;
        return -1;
    }
    ERR_clear_error();
    errno = EPROTO;
    return -1;
}

ssize_t px_tls_send(void *t, const void *p, size_t n)
{
    SSL *ssl = t;
    ERR_clear_error();
    int rc = SSL_write(ssl, p, n > INT32_MAX ? INT32_MAX : (int) n);
    return rc > 0 ? rc : px_tls_fail(ssl, rc);
}

ssize_t px_tls_recv(void *t, void *p, size_t n)
{
    SSL *ssl = t;
    ERR_clear_error();
    int rc = SSL_read(ssl, p, n > INT32_MAX ? INT32_MAX : (int) n);
    return rc > 0 ? rc : px_tls_fail(ssl, rc);
}

bool px_tls_pending(void *t)
{
    return SSL_pending(t) > 0;
}

void px_tls_free(void *t, bool clean)
{
    SSL *ssl = t;
    if (clean) {
        SSL_shutdown(ssl); /* one close_notify, not waited for */
    }
    SSL_free(ssl);
    ERR_clear_error();
}

int px_ws_key(char key[PX_WS_KEY_LEN + 1])
{
    unsigned char raw[16];
    if (RAND_bytes(raw, sizeof(raw)) != 1) {
        ERR_clear_error();
        return MK_ERR;
    }
    EVP_EncodeBlock((unsigned char *) key, raw, sizeof(raw)); /* 24 characters and a NUL */
    return MK_OK;
}

bool px_ws_accept_ok(const char *key, const char *accept, size_t len)
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"; /* RFC 6455 1.3 */
    char in[PX_WS_KEY_LEN + sizeof(guid) - 1];
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    char want[32];

    memcpy(in, key, PX_WS_KEY_LEN);
    memcpy(in + PX_WS_KEY_LEN, guid, sizeof(guid) - 1);
    if (EVP_Digest(in, sizeof(in), md, &mdlen, EVP_sha1(), NULL) != 1 || mdlen != 20) {
        ERR_clear_error();
        return false;
    }
    EVP_EncodeBlock((unsigned char *) want, md, 20); /* 28 characters and a NUL */
    return len == 28 && memcmp(want, accept, 28) == 0;
}

void px_tls_worker_exit(void)
{
    if (px_sess) {
        for (unsigned i = 0; i < PX_SERVERS_MAX; i++) {
            SSL_SESSION_free(px_sess[i].s);
        }
        free(px_sess);
        px_sess = NULL;
    }
}
