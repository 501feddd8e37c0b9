/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls_acme_crypto.c: the ACME client's cryptography with OpenSSL 3: keys
 * (the account's ECDSA P-256, a site's ECDSA P-256 or RSA 2048), the JWK
 * and its RFC 7638 thumbprint, JWS in the flattened JSON form with ES256
 * (the signature as r || s, 32 bytes each, RFC 7518 3.4), the HS256 JWS of
 * external account binding, the CSR, and the self-signed stand-in served
 * while a site has no certificate yet. No I/O.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <monkey/mk_common.h>

#include "tls_acme.h"
#include "tls_acme_parse.h"

EVP_PKEY *acme_key_new(bool rsa)
{
    return rsa ? EVP_RSA_gen(2048) : EVP_EC_gen("P-256");
}

/* x and y of an EC P-256 public key, base64url, into x[44] and y[44]. */
static int acme_ec_xy(EVP_PKEY *key, char x[48], char y[48])
{
    unsigned char pub[65];
    size_t n = 0;

    if (EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_PUB_KEY, pub, sizeof(pub), &n) != 1 ||
        n != 65 || pub[0] != 0x04) {
        ERR_clear_error();
        return MK_ERR;
    }
    acme_b64url(pub + 1, 32, x);
    acme_b64url(pub + 33, 32, y);
    return MK_OK;
}

int acme_jwk(EVP_PKEY *key, char *out, size_t cap)
{
    char x[48], y[48];

    if (acme_ec_xy(key, x, y) != MK_OK) {
        return MK_ERR;
    }
    int n =
        snprintf(out, cap, "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"%s\",\"y\":\"%s\"}", x, y);
    return n > 0 && (size_t) n < cap ? MK_OK : MK_ERR;
}

int acme_thumbprint(EVP_PKEY *key, char out[64])
{
    char jwk[256];
    unsigned char md[32];

    if (acme_jwk(key, jwk, sizeof(jwk)) != MK_OK ||
        EVP_Digest(jwk, strlen(jwk), md, NULL, EVP_sha256(), NULL) != 1) {
        return MK_ERR;
    }
    acme_b64url(md, sizeof(md), out);
    return MK_OK;
}

/* base64url of a NUL ended text, malloc'd. */
static char *acme_b64_text(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(ACME_B64_LEN(n) + 1);
    if (out) {
        acme_b64url((const unsigned char *) s, n, out);
    }
    return out;
}

/* ES256 over "protected.payload": the raw r || s signature, base64url, into sig[88]. */
static int acme_es256(EVP_PKEY *key, const char *in, char sig[96])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char der[80], raw[64];
    size_t dlen = sizeof(der);
    int ok = MK_ERR;

    if (md && EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) == 1 &&
        EVP_DigestSign(md, der, &dlen, (const unsigned char *) in, strlen(in)) == 1) {
        const unsigned char *p = der;
        ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long) dlen);
        if (es && BN_bn2binpad(ECDSA_SIG_get0_r(es), raw, 32) == 32 &&
            BN_bn2binpad(ECDSA_SIG_get0_s(es), raw + 32, 32) == 32) {
            acme_b64url(raw, sizeof(raw), sig);
            ok = MK_OK;
        }
        ECDSA_SIG_free(es);
    }
    EVP_MD_CTX_free(md);
    ERR_clear_error();
    return ok;
}

/* {"protected":..,"payload":..,"signature":..} of a protected header and payload text. */
static char *acme_jws_finish(const char *prot_json, const char *payload, EVP_PKEY *key,
                             const unsigned char *hmac_key, size_t hmac_len)
{
    char *prot = acme_b64_text(prot_json);
    char *pay = payload ? acme_b64_text(payload) : strdup("");
    char *signing = NULL, *out = NULL;
    char sig[96];

    if (!prot || !pay) {
        goto done;
    }
    size_t n = strlen(prot) + strlen(pay) + 2;
    signing = malloc(n);
    if (!signing) {
        goto done;
    }
    snprintf(signing, n, "%s.%s", prot, pay);
    if (key) {
        if (acme_es256(key, signing, sig) != MK_OK) {
            goto done;
        }
    }
    else {
        unsigned char md[32];
        unsigned int mlen = sizeof(md);
        if (!HMAC(EVP_sha256(), hmac_key, (int) hmac_len, (const unsigned char *) signing,
                  strlen(signing), md, &mlen)) {
            goto done;
        }
        acme_b64url(md, mlen, sig);
    }
    n = strlen(prot) + strlen(pay) + strlen(sig) + 64;
    out = malloc(n);
    if (out) {
        snprintf(out, n, "{\"protected\":\"%s\",\"payload\":\"%s\",\"signature\":\"%s\"}", prot,
                 pay, sig);
    }
done:
    free(prot);
    free(pay);
    free(signing);
    return out;
}

char *acme_jws(EVP_PKEY *key, const char *kid, const char *nonce, const char *url,
               const char *payload)
{
    char jwk[256];
    size_t n = strlen(url) + strlen(nonce) + (kid ? strlen(kid) : 0) + sizeof(jwk) + 64;
    char *prot = malloc(n);
    char *out;

    if (!prot) {
        return NULL;
    }
    if (kid) {
        snprintf(prot, n, "{\"alg\":\"ES256\",\"kid\":\"%s\",\"nonce\":\"%s\",\"url\":\"%s\"}", kid,
                 nonce, url);
    }
    else {
        if (acme_jwk(key, jwk, sizeof(jwk)) != MK_OK) {
            free(prot);
            return NULL;
        }
        snprintf(prot, n, "{\"alg\":\"ES256\",\"jwk\":%s,\"nonce\":\"%s\",\"url\":\"%s\"}", jwk,
                 nonce, url);
    }
    out = acme_jws_finish(prot, payload, key, NULL, 0);
    free(prot);
    return out;
}

char *acme_eab_jws(EVP_PKEY *key, const char *eab_kid, const char *eab_key, const char *url)
{
    unsigned char hk[768];
    char jwk[256];
    long hlen = acme_b64url_decode(eab_key, strlen(eab_key), hk, sizeof(hk));
    size_t n = strlen(eab_kid) + strlen(url) + 64;
    char *prot = malloc(n);
    char *out = NULL;

    if (prot && hlen > 0 && acme_jwk(key, jwk, sizeof(jwk)) == MK_OK) {
        snprintf(prot, n, "{\"alg\":\"HS256\",\"kid\":\"%s\",\"url\":\"%s\"}", eab_kid, url);
        out = acme_jws_finish(prot, jwk, NULL, hk, (size_t) hlen);
    }
    OPENSSL_cleanse(hk, sizeof(hk));
    free(prot);
    return out;
}

/* "DNS:a,DNS:b" of the names (the SAN extension's value), malloc'd. */
static char *acme_san(char *const *names, unsigned n)
{
    size_t len = 1;
    for (unsigned i = 0; i < n; i++) {
        len += strlen(names[i]) + 5;
    }
    char *s = malloc(len);
    if (!s) {
        return NULL;
    }
    s[0] = '\0';
    for (unsigned i = 0; i < n; i++) {
        strcat(s, i ? ",DNS:" : "DNS:");
        strcat(s, names[i]);
    }
    return s;
}

char *acme_csr(EVP_PKEY *key, char *const *names, unsigned n)
{
    X509_REQ *req = X509_REQ_new();
    STACK_OF(X509_EXTENSION) *exts = sk_X509_EXTENSION_new_null();
    char *san = acme_san(names, n);
    unsigned char *der = NULL;
    char *out = NULL;
    X509_EXTENSION *ext = NULL;

    if (!req || !exts || !san || n == 0) {
        goto done;
    }
    X509_NAME *subj = X509_REQ_get_subject_name(req);
    if (X509_NAME_add_entry_by_txt(subj, "CN", MBSTRING_UTF8, (const unsigned char *) names[0], -1,
                                   -1, 0) != 1) {
        goto done;
    }
    ext = X509V3_EXT_conf_nid(NULL, NULL, NID_subject_alt_name, san);
    if (!ext || sk_X509_EXTENSION_push(exts, ext) <= 0) {
        X509_EXTENSION_free(ext);
        goto done;
    }
    if (X509_REQ_add_extensions(req, exts) != 1 || X509_REQ_set_pubkey(req, key) != 1 ||
        X509_REQ_sign(req, key, EVP_sha256()) <= 0) {
        goto done;
    }
    int len = i2d_X509_REQ(req, &der);
    if (len <= 0) {
        goto done;
    }
    out = malloc(ACME_B64_LEN((size_t) len) + 1);
    if (out) {
        acme_b64url(der, (size_t) len, out);
    }
done:
    OPENSSL_free(der);
    sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
    X509_REQ_free(req);
    free(san);
    ERR_clear_error();
    return out;
}

X509 *acme_self_signed(EVP_PKEY *key, char *const *names, unsigned n, int days)
{
    X509 *x = X509_new();
    char *san = acme_san(names, n);
    unsigned char serial[16];
    BIGNUM *bn = NULL;
    X509V3_CTX v3;

    if (!x || !san || n == 0 || RAND_bytes(serial, sizeof(serial)) != 1) {
        goto fail;
    }
    serial[0] &= 0x7f;
    bn = BN_bin2bn(serial, sizeof(serial), NULL);
    if (!bn || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) || X509_set_version(x, 2) != 1 ||
        !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
        !X509_gmtime_adj(X509_getm_notAfter(x), (long) days * 86400)) {
        goto fail;
    }
    X509_NAME *nm = X509_get_subject_name(x);
    if (X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_UTF8, (const unsigned char *) names[0], -1,
                                   -1, 0) != 1 ||
        X509_NAME_add_entry_by_txt(nm, "O", MBSTRING_UTF8,
                                   (const unsigned char *) "monkey ACME stand-in", -1, -1,
                                   0) != 1 ||
        X509_set_issuer_name(x, nm) != 1 || X509_set_pubkey(x, key) != 1) {
        goto fail;
    }
    X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, san);
    if (!ext || X509_add_ext(x, ext, -1) != 1) {
        X509_EXTENSION_free(ext);
        goto fail;
    }
    X509_EXTENSION_free(ext);
    if (X509_sign(x, key, EVP_sha256()) <= 0) {
        goto fail;
    }
    BN_free(bn);
    free(san);
    return x;
fail:
    BN_free(bn);
    free(san);
    X509_free(x);
    ERR_clear_error();
    return NULL;
}

/* An ASN1_TIME as time_t (0 when it cannot be read). */
static time_t acme_asn1_time(const ASN1_TIME *t)
{
    struct tm tm;

    if (!t || ASN1_TIME_to_tm(t, &tm) != 1) {
        return 0;
    }
    return timegm(&tm);
}

void acme_cert_times(X509 *x, time_t *not_before, time_t *not_after)
{
    *not_before = acme_asn1_time(X509_get0_notBefore(x));
    *not_after = acme_asn1_time(X509_get0_notAfter(x));
}

bool acme_cert_covers(X509 *x, char *const *names, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        if (X509_check_host(x, names[i], strlen(names[i]), X509_CHECK_FLAG_NO_WILDCARDS, NULL) !=
            1) {
            return false;
        }
    }
    return true;
}

X509 *acme_alpn_cert(EVP_PKEY *key, const char *name, const char *keyauth)
{
    char *names[1] = {(char *) name};
    X509 *x = acme_self_signed(key, names, 1, 7);
    unsigned char md[32], der[34];
    ASN1_OCTET_STRING *os = ASN1_OCTET_STRING_new();
    ASN1_OBJECT *oid = OBJ_txt2obj("1.3.6.1.5.5.7.1.31", 1); /* id-pe-acmeIdentifier */
    X509_EXTENSION *ext = NULL;

    if (!x || !os || !oid ||
        EVP_Digest(keyauth, strlen(keyauth), md, NULL, EVP_sha256(), NULL) != 1) {
        goto fail;
    }
    /* The extension's value: the DER of an OCTET STRING of the digest (RFC 8737 3). */
    der[0] = 0x04;
    der[1] = 32;
    memcpy(der + 2, md, 32);
    if (ASN1_OCTET_STRING_set(os, der, sizeof(der)) != 1 ||
        !(ext = X509_EXTENSION_create_by_OBJ(NULL, oid, 1, os)) || X509_add_ext(x, ext, -1) != 1 ||
        X509_sign(x, key, EVP_sha256()) <= 0) {
        goto fail;
    }
    X509_EXTENSION_free(ext);
    ASN1_OCTET_STRING_free(os);
    ASN1_OBJECT_free(oid);
    return x;
fail:
    X509_EXTENSION_free(ext);
    ASN1_OCTET_STRING_free(os);
    ASN1_OBJECT_free(oid);
    X509_free(x);
    ERR_clear_error();
    return NULL;
}
