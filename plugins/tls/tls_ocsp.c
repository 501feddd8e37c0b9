/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls_ocsp.c: OCSP stapling from a file (OCSPResponse, per site).
 *
 * What it guarantees:
 *   - The file is read and checked whenever a configuration is built
 *     (start, reload, monkey -t): it must be a DER OCSP response whose
 *     status is successful, with a single response for the site's
 *     certificate (its serial number and its issuer's name), within its
 *     validity (thisUpdate not ahead, nextUpdate not past, 5 minutes of
 *     slack). Anything else refuses the configuration; a reload therefore
 *     brings a new response, as it brings new certificates.
 *   - The response is stapled only to handshakes whose client asked for it
 *     (status_request), from the site's context, so SNI picks the right one.
 *   - The bytes live on the SSL_CTX (ex_data freed with it), never in the
 *     configuration: a handshake that outlives a reload reads valid memory.
 *
 * Threads: tls_ocsp_init() in init(), tls_ocsp_build() on the controlling
 * thread; the status callback on the connection's worker (read only).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ocsp.h>
#include <openssl/x509.h>

#include "tls.h"

#define TLS_OCSP_MAX (1024 * 1024) /* a response larger than this is not one */
#define TLS_OCSP_SLACK 300         /* seconds of clock skew accepted */

/* A response's DER bytes, on a context (ex_data). */
struct tls_ocsp {
    size_t len;
    unsigned char der[];
};

static int tls_ocsp_index = -1;

static void tls_ocsp_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
                          void *argp)
{
    (void) parent;
    (void) ad;
    (void) idx;
    (void) argl;
    (void) argp;
    free(ptr);
}

int tls_ocsp_init(void)
{
    if (tls_ocsp_index < 0) {
        tls_ocsp_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, tls_ocsp_free);
    }
    return tls_ocsp_index < 0 ? MK_ERR : MK_OK;
}

/* The client asked for the certificate's status: staple the site's response. */
static int tls_ocsp_status(SSL *ssl, void *arg)
{
    const struct tls_ocsp *o = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), tls_ocsp_index);
    unsigned char *copy;

    (void) arg;
    if (!o) {
        return SSL_TLSEXT_ERR_NOACK;
    }
    copy = OPENSSL_malloc(o->len);
    if (!copy) {
        return SSL_TLSEXT_ERR_NOACK;
    }
    memcpy(copy, o->der, o->len);
    SSL_set_tlsext_status_ocsp_resp(ssl, copy, (long) o->len); /* takes it */
    return SSL_TLSEXT_ERR_OK;
}

/* Read the whole file into a new struct tls_ocsp; NULL with the reason. */
static struct tls_ocsp *tls_ocsp_read(const char *path, char *reason, size_t len)
{
    FILE *f = fopen(path, "rb");
    struct tls_ocsp *o;
    size_t n;

    if (!f) {
        snprintf(reason, len, "OCSPResponse %s: %s", path, strerror(errno));
        return NULL;
    }
    o = malloc(sizeof(*o) + TLS_OCSP_MAX + 1);
    if (!o) {
        fclose(f);
        snprintf(reason, len, "OCSPResponse %s: out of memory", path);
        return NULL;
    }
    n = fread(o->der, 1, TLS_OCSP_MAX + 1, f);
    fclose(f);
    if (n == 0 || n > TLS_OCSP_MAX) {
        free(o);
        snprintf(reason, len, "OCSPResponse %s: %s", path,
                 n ? "larger than 1 MiB" : "empty or unreadable");
        return NULL;
    }
    o->len = n;
    return o;
}

/* Whether the single response `sr` names `cert`: its serial and its issuer's name hash. */
static bool tls_ocsp_names(OCSP_SINGLERESP *sr, X509 *cert)
{
    ASN1_OCTET_STRING *name_hash = NULL;
    ASN1_OBJECT *md_oid = NULL;
    ASN1_INTEGER *serial = NULL;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    const EVP_MD *digest;

    if (OCSP_id_get0_info(&name_hash, &md_oid, NULL, &serial,
                          (OCSP_CERTID *) OCSP_SINGLERESP_get0_id(sr)) != 1 ||
        ASN1_INTEGER_cmp(serial, X509_get0_serialNumber(cert)) != 0) {
        return false;
    }
    digest = EVP_get_digestbyobj(md_oid);
    if (!digest || X509_NAME_digest(X509_get_issuer_name(cert), digest, md, &n) != 1) {
        return false;
    }
    return (unsigned) ASN1_STRING_length(name_hash) == n &&
           memcmp(ASN1_STRING_get0_data(name_hash), md, n) == 0;
}

/* Check the response's bytes for `cert`: MK_OK, or MK_ERR with the reason. */
static int tls_ocsp_check(const struct tls_ocsp *o, X509 *cert, const char *path, char *reason,
                          size_t len)
{
    const unsigned char *p = o->der;
    OCSP_RESPONSE *resp = d2i_OCSP_RESPONSE(NULL, &p, (long) o->len);
    OCSP_BASICRESP *basic = NULL;
    int rc = MK_ERR;

    if (!resp || p != o->der + o->len) {
        snprintf(reason, len, "OCSPResponse %s: not a DER OCSP response", path);
        goto out;
    }
    int status = OCSP_response_status(resp);
    if (status != OCSP_RESPONSE_STATUS_SUCCESSFUL) {
        snprintf(reason, len, "OCSPResponse %s: the responder answered '%s'", path,
                 OCSP_response_status_str(status));
        goto out;
    }
    basic = OCSP_response_get1_basic(resp);
    if (!basic) {
        snprintf(reason, len, "OCSPResponse %s: not a basic OCSP response", path);
        goto out;
    }
    for (int i = 0; i < OCSP_resp_count(basic); i++) {
        OCSP_SINGLERESP *sr = OCSP_resp_get0(basic, i);
        ASN1_GENERALIZEDTIME *this_upd = NULL, *next_upd = NULL;
        if (!tls_ocsp_names(sr, cert)) {
            continue;
        }
        OCSP_single_get0_status(sr, NULL, NULL, &this_upd, &next_upd);
        if (OCSP_check_validity(this_upd, next_upd, TLS_OCSP_SLACK, -1) != 1) {
            snprintf(reason, len, "OCSPResponse %s: out of date (or not valid yet)", path);
            goto out;
        }
        rc = MK_OK;
        goto out;
    }
    snprintf(reason, len, "OCSPResponse %s: not a response for the site's certificate", path);
out:
    OCSP_BASICRESP_free(basic);
    OCSP_RESPONSE_free(resp);
    ERR_clear_error();
    return rc;
}

int tls_ocsp_build(struct tls_site *ts, char *reason, size_t len)
{
    struct tls_ocsp *o = tls_ocsp_read(ts->ocsp, reason, len);

    if (!o) {
        return MK_ERR;
    }
    if (tls_ocsp_check(o, SSL_CTX_get0_certificate(ts->ctx), ts->ocsp, reason, len) != MK_OK) {
        free(o);
        return MK_ERR;
    }
    if (SSL_CTX_set_ex_data(ts->ctx, tls_ocsp_index, o) != 1) {
        free(o);
        snprintf(reason, len, "OCSPResponse %s: out of memory", ts->ocsp);
        return MK_ERR;
    }
    SSL_CTX_set_tlsext_status_cb(ts->ctx, tls_ocsp_status);
    return MK_OK;
}
