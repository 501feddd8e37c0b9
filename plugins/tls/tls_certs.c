/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls_certs.c: a site's certificates, one per key type.
 *
 * A site may give Certificate and CertificateKey twice: an RSA and an
 * ECDSA certificate side by side. OpenSSL keeps one certificate per key
 * type in a context and picks the one the client's cipher suites and
 * signature algorithms allow (a TLS 1.2 client offering only ECDHE-RSA
 * suites gets the RSA certificate). The i-th Certificate goes with the
 * i-th CertificateKey.
 *
 * What it guarantees: every file is read and checked on its own line (so
 * an error names that line): readable, PEM, a certificate or a private
 * key. The line that completes a pair checks that the key matches the
 * certificate and that no other pair has the same key type. A third
 * Certificate or CertificateKey line is refused.
 *
 * Threads: the controlling thread (configuration builds) only.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "tls.h"

/* The struct the key's field names, inside the site's struct. */
static struct tls_certs *tls_certs_of(void *obj, const struct mk_conf_key *key)
{
    return (struct tls_certs *) (void *) ((char *) obj + key->offset);
}

/* `value` made absolute against the configuration directory; NULL: no memory. */
static char *tls_certs_path(const char *value, const struct mk_conf_origin *origin)
{
    char buf[PATH_MAX];

    if (value[0] == '/' || !origin->confdir) {
        return strdup(value);
    }
    if ((size_t) snprintf(buf, sizeof(buf), "%s/%s", origin->confdir, value) >= sizeof(buf)) {
        return NULL;
    }
    return strdup(buf);
}

/* The first OpenSSL error as text (the queue is cleared), or `fallback`. */
static const char *tls_certs_error(char *buf, size_t len, const char *fallback)
{
    unsigned long e = ERR_get_error();

    ERR_clear_error();
    if (!e) {
        return fallback;
    }
    ERR_error_string_n(e, buf, len);
    return buf;
}

const char *tls_certs_type_name(const EVP_PKEY *pkey)
{
    switch (EVP_PKEY_get_base_id(pkey)) {
    case EVP_PKEY_RSA:
        return "RSA";
    case EVP_PKEY_RSA_PSS:
        return "RSA-PSS";
    case EVP_PKEY_EC:
        return "ECDSA";
    case EVP_PKEY_ED25519:
        return "Ed25519";
    case EVP_PKEY_ED448:
        return "Ed448";
    case EVP_PKEY_DSA:
        return "DSA";
    default:
        return "unknown";
    }
}

/*
 * Check pair i once both of its lines were read, on the line that read
 * the key (on_key) or the certificate: the key matches the certificate,
 * and no other pair has its key type. The reason starts with the file of
 * that line (the server puts the key's name before it).
 */
static int tls_certs_pair(const struct tls_certs *tc, size_t i, bool on_key, char *reason,
                          size_t len)
{
    const char *mine = on_key ? tc->key[i] : tc->cert[i];

    if (i >= tc->n_cert || i >= tc->n_key) {
        return MK_OK; /* the other half has not come yet */
    }
    if (X509_check_private_key(tc->x509[i], tc->pkey[i]) != 1) {
        ERR_clear_error();
        snprintf(reason, len, "%s does not match %s %s", mine,
                 on_key ? "Certificate" : "CertificateKey", on_key ? tc->cert[i] : tc->key[i]);
        return MK_ERR;
    }
    for (size_t j = 0; j < i; j++) {
        if (EVP_PKEY_get_base_id(tc->pkey[j]) == EVP_PKEY_get_base_id(tc->pkey[i])) {
            snprintf(reason, len,
                     "%s: a second %s certificate (after Certificate %s); a site has at most one "
                     "per key type",
                     mine, tls_certs_type_name(tc->pkey[i]), tc->cert[j]);
            return MK_ERR;
        }
    }
    return MK_OK;
}

/*
 * Read the first PEM certificate (or private key) of `path`: NULL with the
 * reason when it fails.
 */
static void *tls_certs_read(const char *path, bool is_key, char *reason, size_t len)
{
    char why[160];
    FILE *f = fopen(path, "r");
    void *obj;

    if (!f) {
        snprintf(reason, len, "%s: %s", path, strerror(errno));
        return NULL;
    }
    ERR_clear_error();
    obj = is_key ? (void *) PEM_read_PrivateKey(f, NULL, NULL, NULL)
                 : (void *) PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    if (!obj) {
        snprintf(reason, len, "%s: not a PEM %s (%s)", path, is_key ? "private key" : "certificate",
                 tls_certs_error(why, sizeof(why), "unreadable"));
    }
    return obj;
}

int tls_certs_set_cert(void *obj, const struct mk_conf_key *key, const char *value,
                       const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct tls_certs *tc = tls_certs_of(obj, key);

    if (tc->n_cert == TLS_CERTS_MAX) {
        snprintf(reason, len, "at most %d certificates, one per key type (RSA and ECDSA)",
                 TLS_CERTS_MAX);
        return MK_ERR;
    }
    char *path = tls_certs_path(value, origin);
    if (!path) {
        snprintf(reason, len, "path too long");
        return MK_ERR;
    }
    X509 *x = tls_certs_read(path, false, reason, len);
    if (!x) {
        free(path);
        return MK_ERR;
    }
    size_t i = tc->n_cert++;
    tc->cert[i] = path;
    tc->x509[i] = x;
    return tls_certs_pair(tc, i, false, reason, len);
}

int tls_certs_set_key(void *obj, const struct mk_conf_key *key, const char *value,
                      const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct tls_certs *tc = tls_certs_of(obj, key);

    if (tc->n_key == TLS_CERTS_MAX) {
        snprintf(reason, len, "at most %d keys, one per key type (RSA and ECDSA)", TLS_CERTS_MAX);
        return MK_ERR;
    }
    char *path = tls_certs_path(value, origin);
    if (!path) {
        snprintf(reason, len, "path too long");
        return MK_ERR;
    }
    EVP_PKEY *pkey = tls_certs_read(path, true, reason, len);
    if (!pkey) {
        free(path);
        return MK_ERR;
    }
    size_t i = tc->n_key++;
    tc->key[i] = path;
    tc->pkey[i] = pkey;
    return tls_certs_pair(tc, i, true, reason, len);
}

int tls_certs_check(const struct tls_certs *tc, const char **key, char *reason, size_t len)
{
    if (tc->n_cert == 0) {
        *key = "CertificateKey";
        snprintf(reason, len, "[TLS] without a Certificate");
        return MK_ERR;
    }
    if (tc->n_key < tc->n_cert) {
        *key = "Certificate";
        snprintf(reason, len, "Certificate without a CertificateKey (%s)", tc->cert[tc->n_key]);
        return MK_ERR;
    }
    if (tc->n_cert < tc->n_key) {
        *key = "CertificateKey";
        snprintf(reason, len, "CertificateKey without a Certificate (%s)", tc->key[tc->n_cert]);
        return MK_ERR;
    }
    return MK_OK;
}

int tls_certs_use(const struct tls_certs *tc, size_t i, SSL_CTX *ctx, char *reason, size_t len)
{
    char why[160];

    ERR_clear_error();
    if (SSL_CTX_use_certificate_chain_file(ctx, tc->cert[i]) != 1) {
        snprintf(reason, len, "Certificate %s: not a PEM certificate (%s)", tc->cert[i],
                 tls_certs_error(why, sizeof(why), "unreadable"));
        return MK_ERR;
    }
    if (SSL_CTX_use_PrivateKey(ctx, tc->pkey[i]) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(reason, len, "CertificateKey %s: not usable with Certificate %s (%s)", tc->key[i],
                 tc->cert[i], tls_certs_error(why, sizeof(why), "refused"));
        return MK_ERR;
    }
    return MK_OK;
}

void tls_certs_free(struct tls_certs *tc)
{
    for (size_t i = 0; i < TLS_CERTS_MAX; i++) {
        free(tc->cert[i]);
        free(tc->key[i]);
        X509_free(tc->x509[i]);
        EVP_PKEY_free(tc->pkey[i]);
    }
    memset(tc, 0, sizeof(*tc));
}
