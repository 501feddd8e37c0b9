/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls_conf.c: the tls plugin's own file, conf/plugins/tls.conf ([TLS]):
 * Protocols, Ciphers, Ciphersuites, PreferServerCiphers and the session
 * keys, checked whenever a configuration is built (start, reload, `monkey
 * -t`), and the context every connection of that configuration starts
 * from.
 *
 * Why server-wide and not per site: OpenSSL picks the protocol version
 * before the SNI callback runs, and SSL_set_SSL_CTX (the switch to a
 * site's certificate) carries neither versions nor ciphers from the site's
 * context; so every site behind one listener shares one policy. The base
 * context belongs to its configuration: a reload brings new settings to
 * new connections, connections keep theirs (each SSL holds a reference to
 * its context).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/err.h>

#include "tls.h"

/* A Protocols word: TLSv1.2 or TLSv1.3; anything older is refused by name. */
int tls_conf_protocol_check(const char *value, char *reason, size_t len)
{
    static const char *const old[] = {"SSLv2", "SSLv3", "TLSv1", "TLSv1.0", "TLSv1.1", NULL};

    if (strcasecmp(value, "TLSv1.2") == 0 || strcasecmp(value, "TLSv1.3") == 0) {
        return MK_OK;
    }
    for (size_t i = 0; old[i]; i++) {
        if (strcasecmp(value, old[i]) == 0) {
            snprintf(reason, len, "%s is not accepted: it is insecure (TLSv1.2 and TLSv1.3 are)",
                     value);
            return MK_ERR;
        }
    }
    snprintf(reason, len, "unknown protocol '%s' (TLSv1.2 and TLSv1.3 are accepted)", value);
    return MK_ERR;
}

/* Whether OpenSSL takes `value` as a cipher list (TLS 1.2) or suite list (TLS 1.3). */
static int tls_conf_list_check(const char *value, bool suites, char *reason, size_t len)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    int ok;

    if (!ctx) {
        snprintf(reason, len, "OpenSSL cannot make a context");
        return MK_ERR;
    }
    ok = suites ? SSL_CTX_set_ciphersuites(ctx, value) : SSL_CTX_set_cipher_list(ctx, value);
    /* An empty suite list is accepted by OpenSSL, and leaves TLS 1.3 without a suite. */
    if (ok == 1 && suites && sk_SSL_CIPHER_num(SSL_CTX_get_ciphers(ctx)) > 0) {
        const STACK_OF(SSL_CIPHER) *all = SSL_CTX_get_ciphers(ctx);
        bool any13 = false;
        for (int i = 0; i < sk_SSL_CIPHER_num(all); i++) {
            any13 |= strcmp(SSL_CIPHER_get_version(sk_SSL_CIPHER_value(all, i)), "TLSv1.3") == 0;
        }
        ok = any13;
    }
    SSL_CTX_free(ctx);
    ERR_clear_error();
    if (ok != 1) {
        snprintf(reason, len, "OpenSSL accepts no %s in '%s'", suites ? "TLS 1.3 suite" : "cipher",
                 value);
        return MK_ERR;
    }
    return MK_OK;
}

int tls_conf_ciphers_check(const char *value, char *reason, size_t len)
{
    return tls_conf_list_check(value, false, reason, len);
}

int tls_conf_ciphersuites_check(const char *value, char *reason, size_t len)
{
    return tls_conf_list_check(value, true, reason, len);
}

/*
 * A TicketKeyFile line: read the file now (relative to the configuration
 * directory) and append its keys. nginx's format: one or more 80-byte keys,
 * each 16 bytes of name, 32 of HMAC secret and 32 of AES key.
 */
int tls_conf_ticket_file_set(void *obj, const struct mk_conf_key *key, const char *value,
                             const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct tls_conf *tc = obj;
    unsigned char buf[TLS_TICKET_FILE_KEY * TLS_TICKET_FILE_KEYS + 1];
    char path[PATH_MAX];
    size_t n;
    FILE *f;

    (void) key;
    if (value[0] != '/' && origin->confdir) {
        snprintf(path, sizeof(path), "%s/%s", origin->confdir, value);
    }
    else {
        snprintf(path, sizeof(path), "%s", value);
    }
    f = fopen(path, "rb");
    if (!f) {
        snprintf(reason, len, "TicketKeyFile %s: %s", path, strerror(errno));
        return MK_ERR;
    }
    n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    if (n == 0 || n % TLS_TICKET_FILE_KEY != 0 || n == sizeof(buf)) {
        snprintf(reason, len,
                 "TicketKeyFile %s: %zu bytes; the file holds 80-byte keys (16 bytes of name, "
                 "32 of HMAC secret, 32 of AES key), 1 to %d of them",
                 path, n, TLS_TICKET_FILE_KEYS);
        return MK_ERR;
    }
    if (tc->n_file_keys + n / TLS_TICKET_FILE_KEY > TLS_TICKET_FILE_KEYS) {
        snprintf(reason, len, "TicketKeyFile %s: more than %d ticket keys in all", path,
                 TLS_TICKET_FILE_KEYS);
        return MK_ERR;
    }
    for (size_t off = 0; off < n; off += TLS_TICKET_FILE_KEY) {
        struct tls_ticket_key *k = &tc->file_keys[tc->n_file_keys++];
        memcpy(k->name, buf + off, TLS_TICKET_NAME);
        memcpy(k->hmac, buf + off + TLS_TICKET_NAME, TLS_TICKET_SECRET);
        memcpy(k->aes, buf + off + TLS_TICKET_NAME + TLS_TICKET_SECRET, TLS_TICKET_SECRET);
    }
    OPENSSL_cleanse(buf, sizeof(buf));
    return MK_OK;
}

/* The versions Protocols allows, as OpenSSL's minimum and maximum. */
static void tls_conf_versions(const struct tls_conf *tc, int *min, int *max)
{
    bool v12 = false, v13 = false;

    for (size_t i = 0; i < tc->protocols.n; i++) {
        v12 |= strcasecmp(tc->protocols.v[i], "TLSv1.2") == 0;
        v13 |= strcasecmp(tc->protocols.v[i], "TLSv1.3") == 0;
    }
    *min = v12 ? TLS1_2_VERSION : TLS1_3_VERSION;
    *max = v13 ? TLS1_3_VERSION : TLS1_2_VERSION;
}

/*
 * The keys together, then the configuration's base context: MK_OK, or
 * MK_ERR with the key to blame and the reason.
 */
int tls_conf_finish(struct tls_conf *tc, const char **key, char *reason, size_t len)
{
    int min, max;

    *key = "Protocols";
    if (tc->protocols.n == 0) {
        snprintf(reason, len, "no protocol (TLSv1.2 and/or TLSv1.3)");
        return MK_ERR;
    }
    tls_conf_versions(tc, &min, &max);
    tc->base = tls_ctx_new();
    if (!tc->base || SSL_CTX_set_min_proto_version(tc->base, min) != 1 ||
        SSL_CTX_set_max_proto_version(tc->base, max) != 1) {
        snprintf(reason, len, "OpenSSL cannot make a context");
        ERR_clear_error();
        return MK_ERR;
    }
    *key = "Ciphers";
    if (SSL_CTX_set_cipher_list(tc->base, tc->ciphers) != 1) {
        snprintf(reason, len, "OpenSSL accepts no cipher in '%s'", tc->ciphers);
        ERR_clear_error();
        return MK_ERR;
    }
    *key = "Ciphersuites";
    if (SSL_CTX_set_ciphersuites(tc->base, tc->ciphersuites) != 1) {
        snprintf(reason, len, "OpenSSL accepts no TLS 1.3 suite in '%s'", tc->ciphersuites);
        ERR_clear_error();
        return MK_ERR;
    }
    *key = NULL;
    if (tls_session_setup(tc->base, tc) != MK_OK) {
        snprintf(reason, len, "OpenSSL cannot set up session resumption");
        ERR_clear_error();
        return MK_ERR;
    }
    return MK_OK;
}

int tls_conf_site_ctx(const struct tls_conf *tc, SSL_CTX *ctx)
{
    int min, max;

    if (!tc) {
        return MK_OK;
    }
    tls_conf_versions(tc, &min, &max);
    if (SSL_CTX_set_min_proto_version(ctx, min) != 1 ||
        SSL_CTX_set_max_proto_version(ctx, max) != 1 ||
        SSL_CTX_set_cipher_list(ctx, tc->ciphers) != 1 ||
        SSL_CTX_set_ciphersuites(ctx, tc->ciphersuites) != 1) {
        ERR_clear_error();
        return MK_ERR;
    }
    /* Read by the servername callback, which sets the connection's order
       once the version is known (TLS 1.2 only: tls_cipher_order, tls.c). */
    if (tc->prefer_server) {
        SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
    }
    else {
        SSL_CTX_clear_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
    }
    return MK_OK;
}

void tls_conf_free(struct tls_conf *tc)
{
    SSL_CTX_free(tc->base);
    tc->base = NULL;
    OPENSSL_cleanse(tc->file_keys, sizeof(tc->file_keys));
    tc->n_file_keys = 0;
}

SSL_CTX *tls_conf_base(void)
{
    struct mk_config *cfg = tls_api->config_get();
    SSL_CTX *base = NULL;

    if (!cfg) {
        return NULL;
    }
    const struct tls_conf *tc =
        tls_api->plugin_conf(tls_api->config_site(cfg, 0), MK_PLUGIN_SELF(tls));
    if (tc && tc->base && SSL_CTX_up_ref(tc->base) == 1) {
        base = tc->base;
    }
    tls_api->config_put(cfg);
    return base;
}
