/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls_session.c: session resumption, shared by every worker of a server.
 *
 * What it guarantees:
 *   - Session tickets (TLS 1.2 tickets, TLS 1.3 PSK tickets) are sealed
 *     with AES-256-CBC and HMAC-SHA256 under a key of the server's. Without
 *     TicketKeyFile the server makes its keys with RAND_bytes and keeps two
 *     in its context (api->self): the current one seals, it and the
 *     previous one open. A new key replaces the current one once that is
 *     older than TicketKeyRotation, at the next ticket sealed or opened (no
 *     thread of its own); a key therefore opens tickets for one to two
 *     periods. A ticket opened with the previous key is renewed (a new
 *     ticket under the current key).
 *   - With TicketKeyFile the keys are the file's (several servers share
 *     them): the first key seals, every key opens, a ticket opened with
 *     another than the first is renewed, and the server rotates nothing.
 *     They are those of the configuration in force, so a reload with a new
 *     file takes effect for the next ticket.
 *   - Session ids: OpenSSL's server-side cache on the configuration's base
 *     context (SessionCache entries; a reload starts an empty one).
 *   - No resumption across sites: every connection gets a session id
 *     context made from the names of the site its ClientHello's SNI
 *     selects, set in the ClientHello callback, before OpenSSL looks a
 *     session up. (The servername callback comes too late for TLS 1.2,
 *     and SSL_set_SSL_CTX would not change it: the sessions live on the
 *     base context, OpenSSL's "session_ctx", whatever the site context.)
 *   - Early data (0-RTT) stays off: tickets allow none.
 *
 * Threads: the callbacks run on workers; the ring of keys is read and
 * rotated under its mutex, and only copied out under it.
 */
#include <string.h>
#include <time.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "tls.h"
#include "tls_parse.h"

/* TicketKeyRotation in milliseconds when no configuration is in force. */
#define TLS_ROTATION_FALLBACK 3600000

/* CLOCK_MONOTONIC in milliseconds. */
static int64_t tls_session_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int tls_session_init(const struct mk_api *server_api, struct tls_self *self)
{
    tls_api = server_api;
    self->ticket_cipher = EVP_CIPHER_fetch(NULL, "AES-256-CBC", NULL);
    if (!self->ticket_cipher) {
        return MK_ERR;
    }
    if (pthread_mutex_init(&self->ring.lock, NULL) != 0) {
        EVP_CIPHER_free(self->ticket_cipher);
        self->ticket_cipher = NULL;
        return MK_ERR;
    }
    return MK_OK;
}

void tls_session_exit(struct tls_self *self)
{
    OPENSSL_cleanse(&self->ring.cur, sizeof(self->ring.cur));
    OPENSSL_cleanse(&self->ring.prev, sizeof(self->ring.prev));
    pthread_mutex_destroy(&self->ring.lock);
    EVP_CIPHER_free(self->ticket_cipher);
    self->ticket_cipher = NULL;
}

/* A fresh random key: MK_OK, or MK_ERR when the random generator fails. */
static int tls_ticket_key_make(struct tls_ticket_key *k)
{
    if (RAND_bytes(k->name, sizeof(k->name)) != 1 || RAND_bytes(k->hmac, sizeof(k->hmac)) != 1 ||
        RAND_bytes(k->aes, sizeof(k->aes)) != 1) {
        return MK_ERR;
    }
    return MK_OK;
}

/*
 * Make the ring current: a first key, or a new one once the current is
 * `every` milliseconds old (the current one becomes the previous; after two
 * periods without a ticket both go). Called with the ring locked.
 */
static int tls_ring_rotate(struct tls_ticket_ring *ring, int64_t now, int64_t every)
{
    if (ring->have_cur && now - ring->cur_made < every) {
        return MK_OK;
    }
    if (ring->have_cur && now - ring->cur_made < 2 * every) {
        ring->prev = ring->cur;
        ring->have_prev = true;
    }
    else {
        OPENSSL_cleanse(&ring->prev, sizeof(ring->prev));
        ring->have_prev = false;
    }
    if (tls_ticket_key_make(&ring->cur) != MK_OK) {
        ring->have_cur = false;
        return MK_ERR;
    }
    ring->have_cur = true;
    ring->cur_made = now;
    return MK_OK;
}

/* The key named `name` among `keys` (the first `n`), or -1. */
static int tls_ticket_key_index(const struct tls_ticket_key *keys, unsigned n,
                                const unsigned char *name)
{
    for (unsigned i = 0; i < n; i++) {
        if (memcmp(keys[i].name, name, TLS_TICKET_NAME) == 0) {
            return (int) i;
        }
    }
    return -1;
}

/* The server's own ring: the key to seal with, or the one named `name`. */
static int tls_ring_key(int enc, const unsigned char *name, int64_t every,
                        struct tls_ticket_key *out, bool *current)
{
    struct tls_self *self = tls_api->self(MK_PLUGIN_SELF(tls));
    struct tls_ticket_ring *ring;
    int rc = MK_DECLINED;

    if (!self) {
        return MK_ERR;
    }
    ring = &self->ring;
    pthread_mutex_lock(&ring->lock);
    if (tls_ring_rotate(ring, tls_session_now(), every) != MK_OK) {
        rc = MK_ERR;
    }
    else if (enc || memcmp(ring->cur.name, name, TLS_TICKET_NAME) == 0) {
        *out = ring->cur;
        *current = true;
        rc = MK_OK;
    }
    else if (ring->have_prev && memcmp(ring->prev.name, name, TLS_TICKET_NAME) == 0) {
        *out = ring->prev;
        *current = false;
        rc = MK_OK;
    }
    pthread_mutex_unlock(&ring->lock);
    return rc;
}

/*
 * The key to seal a ticket with (enc), or the key named `name` to open
 * one, copied into *out; *current tells whether it is the sealing key.
 * MK_OK, MK_DECLINED (no such key: a full handshake) or MK_ERR.
 */
static int tls_ticket_key_find(int enc, const unsigned char *name, struct tls_ticket_key *out,
                               bool *current)
{
    struct mk_config *cfg = tls_api->config_get();
    int64_t every = TLS_ROTATION_FALLBACK;

    if (cfg) {
        const struct tls_conf *tc =
            tls_api->plugin_conf(tls_api->config_site(cfg, 0), MK_PLUGIN_SELF(tls));
        if (tc && tc->n_file_keys) {
            int i = enc ? 0 : tls_ticket_key_index(tc->file_keys, tc->n_file_keys, name);
            if (i >= 0) {
                *out = tc->file_keys[i];
                *current = i == 0;
            }
            tls_api->config_put(cfg);
            return i >= 0 ? MK_OK : MK_DECLINED;
        }
        if (tc) {
            every = tc->ticket_rotation;
        }
        tls_api->config_put(cfg);
    }
    return tls_ring_key(enc, name, every, out, current);
}

/*
 * OpenSSL's ticket key callback (on the base context, which OpenSSL uses
 * for tickets whatever the site's context): seal with the current key, or
 * open with the key the ticket names. Returns 1 (done), 2 (opened with an
 * older key: renew the ticket), 0 (unknown key: full handshake) or -1.
 */
static int tls_ticket_cb(SSL *ssl, unsigned char *key_name, unsigned char *iv, EVP_CIPHER_CTX *cctx,
                         EVP_MAC_CTX *hctx, int enc)
{
    const struct tls_self *self = tls_api->self(MK_PLUGIN_SELF(tls));
    struct tls_ticket_key k;
    bool current = false;
    OSSL_PARAM params[3];
    int rc;

    (void) ssl;
    if (!self) {
        return -1;
    }
    const EVP_CIPHER *aes = self->ticket_cipher;
    rc = tls_ticket_key_find(enc, key_name, &k, &current);
    if (rc != MK_OK) {
        return rc == MK_DECLINED ? 0 : -1;
    }
    params[0] = OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, k.hmac, sizeof(k.hmac));
    params[1] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0);
    params[2] = OSSL_PARAM_construct_end();
    if (enc) {
        rc = RAND_bytes(iv, EVP_CIPHER_get_iv_length(aes)) == 1 &&
                     EVP_EncryptInit_ex(cctx, aes, NULL, k.aes, iv) == 1 &&
                     EVP_MAC_CTX_set_params(hctx, params) == 1
                 ? 1
                 : -1;
        if (rc == 1) {
            memcpy(key_name, k.name, TLS_TICKET_NAME);
        }
    }
    else {
        rc = EVP_MAC_CTX_set_params(hctx, params) == 1 &&
                     EVP_DecryptInit_ex(cctx, aes, NULL, k.aes, iv) == 1
                 ? (current ? 1 : 2)
                 : -1;
    }
    OPENSSL_cleanse(&k, sizeof(k));
    return rc;
}

/*
 * The host name of the ClientHello's server_name extension into buf, NUL
 * terminated (tls_sni_host); false when there is none or it is malformed.
 */
static bool tls_hello_sni(SSL *ssl, char *buf, size_t size)
{
    const unsigned char *p;
    size_t len;

    return SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p, &len) &&
           tls_sni_host(p, len, buf, size);
}

/*
 * A site's session id context: SHA-256 of its names (the same on every
 * server naming it so), and of its verify id when it asks for client
 * certificates (the mode, the depth, the ClientCA certificates), so a
 * session made without a client certificate, or verified under other
 * settings, never skips the check.
 */
_Static_assert(TLS_SITE_ID == SHA256_DIGEST_LENGTH, "a site id is a SHA-256 digest");

void tls_session_site_id(const struct mk_site *site, unsigned char id[TLS_SITE_ID])
{
    const struct tls_site *ts = tls_api->site_conf(site, MK_PLUGIN_SELF(tls));
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    const char *name;
    unsigned n = 0;

    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(md);
        memset(id, 0, TLS_SITE_ID);
        return;
    }
    EVP_DigestUpdate(md, "monkey-site", 11);
    for (unsigned j = 0; (name = tls_api->site_name(site, j)) != NULL; j++) {
        EVP_DigestUpdate(md, name, strlen(name) + 1);
        n++;
    }
    if (n == 0) { /* a site without ServerName: the default one */
        EVP_DigestUpdate(md, "\0default", 8);
    }
    if (ts && tls_verify_on(ts->verify_id)) {
        EVP_DigestUpdate(md, "\0mtls", 5);
        EVP_DigestUpdate(md, ts->verify_id, sizeof(ts->verify_id));
    }
    EVP_DigestFinal_ex(md, id, NULL);
    EVP_MD_CTX_free(md);
}

/*
 * The ClientHello callback, before OpenSSL looks a session up: move the
 * connection to the context of the site its SNI selects (the default
 * site's without SNI) with that site's client-certificate settings, which
 * records the site's verify id on the connection, and give it the site's
 * session id context, so a session resumes on its own site, verified as
 * that site verifies now, only. The servername callback comes after the
 * lookup in TLS 1.2.
 */
static int tls_session_hello(SSL *ssl, int *alert, void *arg)
{
    unsigned char id[TLS_SITE_ID];
    char name[256];
    struct mk_config *cfg = tls_api->config_get();

    (void) arg;
    if (!cfg) {
        return SSL_CLIENT_HELLO_SUCCESS; /* the servername callback refuses it */
    }
    bool sni = tls_hello_sni(ssl, name, sizeof(name));
    const struct mk_site *site = tls_api->site_lookup(tls_api->config_site(cfg, 0),
                                                      sni ? name : NULL, sni ? strlen(name) : 0);
    const struct tls_site *ts = tls_site_for(cfg, sni ? name : NULL);
    if (ts) {
        tls_switch(ssl, ts);
#ifdef TLS_HAVE_ACME
        /* after the switch, which would replace the certificate */
        tls_acme_alpn_hello(ssl, sni ? name : NULL);
#endif
    }
    const struct tls_site_data *sd = tls_api->site_data(site, MK_PLUGIN_SELF(tls));
    if (sd) {
        memcpy(id, sd->id, sizeof(id));
    }
    else {
        tls_session_site_id(site, id);
    }
    tls_api->config_put(cfg);
    if (SSL_set_session_id_context(ssl, id, sizeof(id)) != 1) {
        *alert = SSL_AD_INTERNAL_ERROR;
        return SSL_CLIENT_HELLO_ERROR;
    }
    return SSL_CLIENT_HELLO_SUCCESS;
}

int tls_session_setup(SSL_CTX *base, const struct tls_conf *tc)
{
    SSL_CTX_set_timeout(base, (long) (tc->session_timeout / 1000));
    if (tc->session_cache) {
        SSL_CTX_set_session_cache_mode(base, SSL_SESS_CACHE_SERVER);
        SSL_CTX_sess_set_cache_size(base, (long) tc->session_cache);
    }
    else {
        SSL_CTX_set_session_cache_mode(base, SSL_SESS_CACHE_OFF);
    }
    /* Each ticket costs an encoding of the session and its encryption
       (about 160,000 instructions, 6% of a full handshake); OpenSSL's
       default is two. SSL_new() copies the count from this context. */
    SSL_CTX_set_num_tickets(base, (size_t) tc->tickets_per_handshake);
    if (!tc->tickets) {
        SSL_CTX_set_options(base, SSL_OP_NO_TICKET);
    }
    else if (SSL_CTX_set_tlsext_ticket_key_evp_cb(base, tls_ticket_cb) != 1) {
        return MK_ERR;
    }
    SSL_CTX_set_client_hello_cb(base, tls_session_hello, NULL);
    SSL_CTX_set_max_early_data(base, 0);
    return MK_OK;
}
