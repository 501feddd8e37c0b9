/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls_acme.c: a site's certificate from an ACME CA (RFC 8555), obtained,
 * stored, renewed and installed by the server itself.
 *
 * What it guarantees:
 *   - Keys: ACME (a directory URL, or "letsencrypt" with ACMEStaging),
 *     ACMEEmail, ACMEKeyType, ACMECACertificate, ACMEEABKeyID/ACMEEABKey,
 *     ACMEStateDir, ACMERetry, checked with the file and line; the names
 *     are the site's ServerNames, a wildcard refused. `monkey -t` does no
 *     network: it checks the keys and the state directory only.
 *   - State: ACMEStateDir is 0700 (made so when missing; one that others
 *     may read or enter is refused at start), its files 0600: the account
 *     key per directory (account-HASH.key, reused across restarts), and
 *     per site NAME.crt (the chain), NAME.key and NAME.lock. A stored
 *     certificate that covers the names and is not due is used at start
 *     and no order is made.
 *   - One renewer thread per server (never a worker): blocking sockets with
 *     timeouts (tls_acme_client.c). A site's work runs under flock() of its
 *     lock file, and the stored certificate is read again once the lock is
 *     held: two servers sharing a state directory order one certificate;
 *     the second installs the first one's.
 *   - Order: newAccount (an existing account for the key is returned by
 *     the CA, RFC 8555 7.3.1), newOrder for the names, HTTP-01 for every
 *     authorization, finalize with a CSR of a fresh key, polling with
 *     Retry-After, the chain downloaded; badNonce retried.
 *   - HTTP-01: GET /.well-known/acme-challenge/TOKEN on a plain listener is
 *     answered by the early hook, before the site's rules, redirects and
 *     authentication, while the renewer waits for that challenge; every
 *     other request pays one relaxed atomic load.
 *   - Installing: a new certificate goes into a new context; handshakes
 *     take the newest context from then on (tls_switch), connections keep
 *     theirs (each SSL holds a reference to its context, as after a
 *     SIGHUP reload). Until a site has a certificate, its handshakes get a
 *     self-signed stand-in (7 days, O=monkey ACME stand-in) and the log says
 *     what the order waits for.
 *   - Renewal at two thirds of the lifetime less a jitter of up to a
 *     thirtieth of it; after a failure, ACMERetry doubled at each failure up
 *     to a day; the certificate in use stays until a new one is installed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "tls.h"
#include "tls_acme.h"
#include "tls_acme_client.h"

#define ACME_LE "https://acme-v02.api.letsencrypt.org/directory"
#define ACME_LE_STAGING "https://acme-staging-v02.api.letsencrypt.org/directory"
#define ACME_CHALLENGE "/.well-known/acme-challenge/"
#define ACME_POLLS 60 /* polls of an authorization or an order */
#define ACME_BACKOFF_MAX 86400000LL

const char *const tls_acme_key_words[] = {"ecdsa", "rsa", NULL};

/* HTTP-01 answers waiting, in every server of the process: 0 makes the early hook free. */
static atomic_uint acme_tokens_live;
/* TLS-ALPN-01 certificates waiting, likewise for the ClientHello. */
static atomic_uint acme_alpn_live;

/* One TLS-ALPN-01 answer: a handshake for name offering acme-tls/1 gets cert. */
struct acme_alpn {
    struct acme_alpn *next;
    char name[256];
    X509 *cert;
    EVP_PKEY *key;
};

/* One HTTP-01 answer: GET ACME_CHALLENGE token gets keyauth. */
struct acme_token {
    struct acme_token *next;
    char token[128];
    char keyauth[256];
};

/* The ACME part of a server (tls_self). */
struct tls_acme_state {
    pthread_mutex_t lock; /* sites, refs, tokens, stop */
    pthread_cond_t cond;
    pthread_t thread;
    bool started;
    atomic_bool stop;
    struct tls_acme_site *sites;
    struct acme_token *tokens;
    struct acme_alpn *alpn;
    struct mk_server *server;
};

/* ---- keys ------------------------------------------------------------------ */

int tls_acme_check_url(const char *value, char *reason, size_t len)
{
    struct acme_url u;

    if (strcasecmp(value, "letsencrypt") == 0 || acme_url_parse(value, &u) == MK_OK) {
        return MK_OK;
    }
    snprintf(reason, len, "ACME '%s': an https:// directory URL, or letsencrypt", value);
    return MK_ERR;
}

int tls_acme_check_email(const char *value, char *reason, size_t len)
{
    const char *at = strchr(value, '@');

    for (const char *p = value; *p; p++) {
        if ((unsigned char) *p <= 0x20 || (unsigned char) *p >= 0x7f || *p == '"' || *p == '\\' ||
            *p == ',') {
            at = NULL;
            break;
        }
    }
    if (at && at > value && at[1] && !strchr(at + 1, '@')) {
        return MK_OK;
    }
    snprintf(reason, len, "ACMEEmail '%s' is not an address (user@domain)", value);
    return MK_ERR;
}

int tls_acme_check_token(const char *value, char *reason, size_t len)
{
    for (const char *p = value; *p; p++) {
        if ((unsigned char) *p <= 0x20 || (unsigned char) *p >= 0x7f || *p == '"' || *p == '\\') {
            snprintf(reason, len, "ACMEEABKeyID: printable ASCII without quotes only");
            return MK_ERR;
        }
    }
    return MK_OK;
}

int tls_acme_check_eab_key(const char *value, char *reason, size_t len)
{
    unsigned char k[768];

    if (acme_b64url_decode(value, strlen(value), k, sizeof(k)) <= 0) {
        snprintf(reason, len, "ACMEEABKey: not base64url (the CA's HMAC key, as it gave it)");
        return MK_ERR;
    }
    OPENSSL_cleanse(k, sizeof(k));
    return MK_OK;
}

int tls_acme_finish(struct tls_site *ts, const char **key, char *reason, size_t len)
{
    const struct tls_acme_conf *ac = &ts->acme_conf;
    static const char *const alone[] = {"Certificate", "CertificateKey", "CertificateChain",
                                        "ClientCertificate", "OCSPResponse"};
    bool set[] = {ts->certs.n_cert > 0, ts->certs.n_key > 0, ts->chain != NULL,
                  ts->client_cert != 0, ts->ocsp != NULL};

    if (!ac->directory) {
        const char *k = ac->email       ? "ACMEEmail"
                        : ac->ca        ? "ACMECACertificate"
                        : ac->eab_kid   ? "ACMEEABKeyID"
                        : ac->eab_key   ? "ACMEEABKey"
                        : ac->state_dir ? "ACMEStateDir"
                        : ac->staging   ? "ACMEStaging"
                                        : NULL;
        if (k) {
            *key = k;
            snprintf(reason, len, "%s without ACME", k);
            return MK_ERR;
        }
        return MK_DECLINED;
    }
    for (size_t i = 0; i < sizeof(set) / sizeof(set[0]); i++) {
        if (set[i]) {
            *key = alone[i];
            snprintf(reason, len, "%s and ACME together: ACME obtains the site's certificate",
                     alone[i]);
            return MK_ERR;
        }
    }
    *key = "ACMEStaging";
    if (ac->staging && strcasecmp(ac->directory, "letsencrypt") != 0) {
        snprintf(reason, len, "ACMEStaging goes with ACME letsencrypt (a URL names its own CA)");
        return MK_ERR;
    }
    *key = "ACMEEABKey";
    if (!ac->eab_kid != !ac->eab_key) {
        *key = ac->eab_kid ? "ACMEEABKeyID" : "ACMEEABKey";
        snprintf(reason, len, "ACMEEABKeyID and ACMEEABKey go together");
        return MK_ERR;
    }
    *key = "ACMECACertificate";
    if (ac->ca && access(ac->ca, R_OK) != 0) {
        snprintf(reason, len, "ACMECACertificate %s: %s", ac->ca, strerror(errno));
        return MK_ERR;
    }
    *key = "ACME";
    ts->ctx = tls_ctx_new();
    if (!ts->ctx) {
        snprintf(reason, len, "OpenSSL cannot make a context");
        return MK_ERR;
    }
    return MK_OK;
}

/* ---- the state directory ---------------------------------------------------- */

/* Check (and, serving, make) the state directory: MK_OK or MK_ERR with err. */
static int acme_state_dir(const char *dir, bool make, char *err, size_t errlen)
{
    struct stat st;

    if (stat(dir, &st) != 0) {
        if (errno != ENOENT) {
            snprintf(err, errlen, "ACMEStateDir %s: %s", dir, strerror(errno));
            return MK_ERR;
        }
        if (!make) {
            return MK_OK; /* monkey -t: made at start */
        }
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s", dir);
        for (char *p = path + 1; *p; p++) {
            if (*p == '/') {
                *p = '\0';
                if (mkdir(path, 0755) != 0 && errno != EEXIST) {
                    snprintf(err, errlen, "ACMEStateDir %.200s: making %.200s: %s", dir, path,
                             strerror(errno));
                    return MK_ERR;
                }
                *p = '/';
            }
        }
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "ACMEStateDir %s: %s", dir, strerror(errno));
            return MK_ERR;
        }
        if (stat(dir, &st) != 0) {
            snprintf(err, errlen, "ACMEStateDir %s: %s", dir, strerror(errno));
            return MK_ERR;
        }
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "ACMEStateDir %s is not a directory", dir);
        return MK_ERR;
    }
    if (st.st_mode & 077) {
        snprintf(err, errlen,
                 "ACMEStateDir %s has mode %04o: others may read the keys in it (chmod 700 %s)",
                 dir, (unsigned) (st.st_mode & 07777), dir);
        return MK_ERR;
    }
    if (st.st_uid != geteuid()) {
        snprintf(err, errlen, "ACMEStateDir %s belongs to uid %u, not to the server's (%u)", dir,
                 (unsigned) st.st_uid, (unsigned) geteuid());
        return MK_ERR;
    }
    return MK_OK;
}

/* Write data to path through a temporary file, 0600, renamed in place: MK_OK or MK_ERR. */
static int acme_write_file(const char *path, const void *data, size_t len)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s.tmp%ld", path, (long) getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        return MK_ERR;
    }
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n <= 0) {
            close(fd);
            unlink(tmp);
            return MK_ERR;
        }
        p += n;
        len -= (size_t) n;
    }
    if (fsync(fd) != 0 || close(fd) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return MK_ERR;
    }
    return MK_OK;
}

/* A PEM private key of `pkey` as a malloc'd text (len in *len), or NULL. */
static char *acme_key_pem(EVP_PKEY *pkey, size_t *len)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *data, *out = NULL;

    if (b && PEM_write_bio_PrivateKey(b, pkey, NULL, NULL, 0, NULL, NULL) == 1) {
        long n = BIO_get_mem_data(b, &data);
        out = malloc((size_t) n + 1);
        if (out) {
            memcpy(out, data, (size_t) n);
            out[n] = '\0';
            *len = (size_t) n;
        }
    }
    BIO_free(b);
    return out;
}

static EVP_PKEY *acme_read_key(const char *path)
{
    FILE *f = fopen(path, "r");
    EVP_PKEY *k = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
    if (f) {
        fclose(f);
    }
    ERR_clear_error();
    return k;
}

/* ---- contexts --------------------------------------------------------------- */

/*
 * A site context with the certificate chain of `pem_path` (or x509 and key
 * given) and `key`: NULL on failure. tc: the configuration's protocols and
 * ciphers, or NULL (site_init applies them).
 */
static SSL_CTX *acme_ctx_build(X509 *cert, STACK_OF(X509) * chain, EVP_PKEY *key,
                               const struct tls_conf *tc, bool ktls)
{
    SSL_CTX *ctx = tls_ctx_new();

    if (!ctx || SSL_CTX_use_certificate(ctx, cert) != 1 || SSL_CTX_use_PrivateKey(ctx, key) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        goto fail;
    }
    for (int i = 0; chain && i < sk_X509_num(chain); i++) {
        X509 *c = sk_X509_value(chain, i);
        if (X509_up_ref(c) != 1 || SSL_CTX_add0_chain_cert(ctx, c) != 1) {
            goto fail;
        }
    }
    if (ktls) {
        SSL_CTX_set_options(ctx, SSL_OP_ENABLE_KTLS);
    }
    if (tc && tls_conf_site_ctx(tc, ctx) != MK_OK) {
        goto fail;
    }
    return ctx;
fail:
    SSL_CTX_free(ctx);
    ERR_clear_error();
    return NULL;
}

/* Read a chain file: the leaf and the rest; MK_OK or MK_ERR. */
static int acme_read_chain(const char *path, X509 **leaf, STACK_OF(X509) * *rest)
{
    FILE *f = fopen(path, "r");
    X509 *x;

    *leaf = NULL;
    *rest = NULL;
    if (!f) {
        return MK_ERR;
    }
    *leaf = PEM_read_X509(f, NULL, NULL, NULL);
    *rest = sk_X509_new_null();
    while (*leaf && *rest && (x = PEM_read_X509(f, NULL, NULL, NULL)) != NULL) {
        sk_X509_push(*rest, x);
    }
    fclose(f);
    ERR_clear_error();
    if (!*leaf || !*rest) {
        X509_free(*leaf);
        sk_X509_pop_free(*rest, X509_free);
        *leaf = NULL;
        *rest = NULL;
        return MK_ERR;
    }
    return MK_OK;
}

/* When the renewer works on a certificate of these times next: 2/3 of its life, less jitter. */
static time_t acme_renew_at(time_t nb, time_t na)
{
    time_t life = na > nb ? na - nb : 0;
    uint32_t r = 0;
    RAND_bytes((unsigned char *) &r, sizeof(r));
    time_t jitter = life / 30 ? (time_t) (r % (uint32_t) (life / 30 + 1)) : 0;
    return nb + life * 2 / 3 - jitter;
}

/*
 * The stored certificate of as, when it covers its names and is still
 * valid: MK_OK with the leaf, chain and key (the caller frees), else MK_ERR.
 */
static int acme_stored(const struct tls_acme_site *as, X509 **leaf, STACK_OF(X509) * *rest,
                       EVP_PKEY **key)
{
    char path[PATH_MAX];
    time_t nb, na;

    snprintf(path, sizeof(path), "%s.crt", as->base);
    if (acme_read_chain(path, leaf, rest) != MK_OK) {
        return MK_ERR;
    }
    snprintf(path, sizeof(path), "%s.key", as->base);
    *key = acme_read_key(path);
    acme_cert_times(*leaf, &nb, &na);
    if (*key && X509_check_private_key(*leaf, *key) == 1 && na > time(NULL) &&
        acme_cert_covers(*leaf, as->names, as->n_names)) {
        return MK_OK;
    }
    ERR_clear_error();
    X509_free(*leaf);
    sk_X509_pop_free(*rest, X509_free);
    EVP_PKEY_free(*key);
    *leaf = NULL;
    *rest = NULL;
    *key = NULL;
    return MK_ERR;
}

/*
 * Make as's context the one built from this certificate (renewer thread):
 * handshakes take it from now on, connections keep the one they have.
 */
static int acme_install(struct tls_acme_site *as, X509 *leaf, STACK_OF(X509) * rest, EVP_PKEY *key)
{
    struct mk_config *cfg = tls_api->config_get();
    const struct tls_conf *tc =
        cfg ? tls_api->plugin_conf(tls_api->config_site(cfg, 0), MK_PLUGIN_SELF(tls)) : NULL;
    SSL_CTX *ctx = acme_ctx_build(leaf, rest, key, tc, as->ktls);
    time_t nb, na;

    if (cfg) {
        tls_api->config_put(cfg);
    }
    if (!ctx) {
        return MK_ERR;
    }
    acme_cert_times(leaf, &nb, &na);
    pthread_mutex_lock(&as->lock);
    SSL_CTX *old = as->ctx;
    as->ctx = ctx;
    as->temporary = false;
    as->not_before = nb;
    as->not_after = na;
    pthread_mutex_unlock(&as->lock);
    SSL_CTX_free(old); /* freed by OpenSSL once the last connection with it is gone */
    return MK_OK;
}

SSL_CTX *tls_acme_ctx(struct tls_acme_site *as)
{
    pthread_mutex_lock(&as->lock);
    SSL_CTX *ctx = as->ctx;
    SSL_CTX_up_ref(ctx);
    pthread_mutex_unlock(&as->lock);
    return ctx;
}

/* ---- the ACME exchange -------------------------------------------------------- */

/* One order's exchange with the CA. */
struct acme_run {
    struct tls_acme_site *as;
    struct tls_acme_state *st;
    SSL_CTX *tls;
    EVP_PKEY *account;
    char thumb[64];
    char kid[1024];
    char nonce[256];
    char new_nonce[1024], new_account[1024], new_order[1024];
    char renewal_info[1024]; /* ARI (RFC 9773): "" when the CA has none */
    bool http;               /* the server has a plain listener: HTTP-01 */
    bool alpn;               /* and a TLS listener: TLS-ALPN-01 */
    char err[512];
};

static void acme_fail(struct acme_run *run, const char *fmt, const char *a, const char *b)
{
    snprintf(run->err, sizeof(run->err), fmt, a ? a : "", b ? b : "");
}

static bool acme_copy(char *dst, size_t cap, const char *src)
{
    if (!src || strlen(src) >= cap) {
        return false;
    }
    memcpy(dst, src, strlen(src) + 1);
    return true;
}

/* The JSON body of a reply, parsed (cJSON_Delete), or NULL. */
static cJSON *acme_json(const struct acme_reply *rep)
{
    return rep->resp.body ? cJSON_ParseWithLength(rep->resp.body, rep->resp.body_len) : NULL;
}

/* "type: detail" of an ACME problem document into run->err. */
static void acme_problem(struct acme_run *run, const char *what, const struct acme_reply *rep)
{
    cJSON *j = acme_json(rep);
    const char *type = j ? cJSON_GetStringValue(cJSON_GetObjectItem(j, "type")) : NULL;
    const char *detail = j ? cJSON_GetStringValue(cJSON_GetObjectItem(j, "detail")) : NULL;
    snprintf(run->err, sizeof(run->err), "%s: HTTP %d%s%s%s%s", what, rep->resp.status,
             type ? " " : "", type ? type : "", detail ? ": " : "", detail ? detail : "");
    cJSON_Delete(j);
}

static int acme_get_nonce(struct acme_run *run)
{
    struct acme_reply rep;

    if (acme_request(run->tls, run->new_nonce, NULL, &rep, run->err, sizeof(run->err)) != MK_OK) {
        return MK_ERR;
    }
    bool ok = acme_copy(run->nonce, sizeof(run->nonce), rep.resp.nonce);
    acme_reply_free(&rep);
    if (!ok) {
        acme_fail(run, "newNonce: no Replay-Nonce%s%s", NULL, NULL);
        return MK_ERR;
    }
    return MK_OK;
}

/*
 * POST a JWS of payload (NULL: POST-as-GET) to url, with the jwk (no kid
 * yet) or the kid: MK_OK with the reply (any status but a badNonce, which
 * is retried with the nonce it brought), MK_ERR with run->err.
 */
static int acme_post(struct acme_run *run, const char *url, const char *payload,
                     struct acme_reply *rep)
{
    for (int attempt = 0; attempt < 5; attempt++) {
        if (!run->nonce[0] && acme_get_nonce(run) != MK_OK) {
            return MK_ERR;
        }
        char *jws = acme_jws(run->account, run->kid[0] ? run->kid : NULL, run->nonce, url, payload);
        run->nonce[0] = '\0';
        if (!jws) {
            acme_fail(run, "cannot sign a request%s%s", NULL, NULL);
            return MK_ERR;
        }
        int rc = acme_request(run->tls, url, jws, rep, run->err, sizeof(run->err));
        free(jws);
        if (rc != MK_OK) {
            return MK_ERR;
        }
        acme_copy(run->nonce, sizeof(run->nonce), rep->resp.nonce);
        if (rep->resp.status == 400) {
            cJSON *j = acme_json(rep);
            const char *type = j ? cJSON_GetStringValue(cJSON_GetObjectItem(j, "type")) : NULL;
            bool bad = type && strcmp(type, "urn:ietf:params:acme:error:badNonce") == 0;
            cJSON_Delete(j);
            if (bad) {
                acme_reply_free(rep);
                continue;
            }
        }
        return MK_OK;
    }
    acme_fail(run, "the CA refused five nonces in a row%s%s", NULL, NULL);
    return MK_ERR;
}

static bool acme_stopping(const struct acme_run *run)
{
    return atomic_load(&run->st->stop);
}

/* Sleep `secs` seconds (at least 1, at most 10), waking for a stop: false when stopping. */
static bool acme_pause(struct acme_run *run, long secs)
{
    secs = secs < 1 ? 1 : secs > 10 ? 10 : secs;
    for (long i = 0; i < secs * 10; i++) {
        if (acme_stopping(run)) {
            return false;
        }
        usleep(100000);
    }
    return true;
}

static int acme_directory(struct acme_run *run)
{
    struct acme_reply rep;
    int ok = MK_ERR;

    if (acme_request(run->tls, run->as->directory, NULL, &rep, run->err, sizeof(run->err)) !=
        MK_OK) {
        return MK_ERR;
    }
    cJSON *j = rep.resp.status == 200 ? acme_json(&rep) : NULL;
    if (j &&
        acme_copy(run->new_nonce, sizeof(run->new_nonce),
                  cJSON_GetStringValue(cJSON_GetObjectItem(j, "newNonce"))) &&
        acme_copy(run->new_account, sizeof(run->new_account),
                  cJSON_GetStringValue(cJSON_GetObjectItem(j, "newAccount"))) &&
        acme_copy(run->new_order, sizeof(run->new_order),
                  cJSON_GetStringValue(cJSON_GetObjectItem(j, "newOrder")))) {
        ok = MK_OK;
        run->renewal_info[0] = '\0';
        acme_copy(run->renewal_info, sizeof(run->renewal_info),
                  cJSON_GetStringValue(cJSON_GetObjectItem(j, "renewalInfo")));
    }
    else {
        snprintf(run->err, sizeof(run->err), "the directory %.300s (HTTP %d) is no ACME directory",
                 run->as->directory, rep.resp.status);
    }
    cJSON_Delete(j);
    acme_reply_free(&rep);
    return ok;
}

/* The account key for the directory: read, or made and stored once (O_EXCL). */
static int acme_account_key(struct acme_run *run)
{
    char path[PATH_MAX];
    unsigned char md[32];
    char hex[17];

    EVP_Digest(run->as->directory, strlen(run->as->directory), md, NULL, EVP_sha256(), NULL);
    for (int i = 0; i < 8; i++) {
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    }
    snprintf(path, sizeof(path), "%s/account-%s.key", run->as->conf.state_dir, hex);
    run->account = acme_read_key(path);
    if (!run->account) {
        EVP_PKEY *k = acme_key_new(false);
        size_t len = 0;
        char *pem = k ? acme_key_pem(k, &len) : NULL;
        int fd = pem ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
        if (fd >= 0) {
            bool ok = write(fd, pem, len) == (ssize_t) len && fsync(fd) == 0;
            close(fd);
            if (ok) {
                run->account = k;
                k = NULL;
            }
            else {
                unlink(path);
            }
        }
        else if (errno == EEXIST) {
            run->account = acme_read_key(path); /* another server made it meanwhile */
        }
        EVP_PKEY_free(k);
        free(pem);
    }
    if (!run->account || EVP_PKEY_get_base_id(run->account) != EVP_PKEY_EC ||
        acme_thumbprint(run->account, run->thumb) != MK_OK) {
        acme_fail(run, "the account key %.300s cannot be read or made%s", path, NULL);
        return MK_ERR;
    }
    return MK_OK;
}

static int acme_account(struct acme_run *run)
{
    struct acme_reply rep;
    cJSON *p = cJSON_CreateObject();
    char *payload;

    cJSON_AddBoolToObject(p, "termsOfServiceAgreed", 1);
    if (run->as->conf.email) {
        char mail[300];
        snprintf(mail, sizeof(mail), "mailto:%s", run->as->conf.email);
        cJSON *c = cJSON_AddArrayToObject(p, "contact");
        cJSON_AddItemToArray(c, cJSON_CreateString(mail));
    }
    if (run->as->conf.eab_kid) {
        char *eab = acme_eab_jws(run->account, run->as->conf.eab_kid, run->as->conf.eab_key,
                                 run->new_account);
        cJSON *e = eab ? cJSON_Parse(eab) : NULL;
        free(eab);
        if (!e) {
            cJSON_Delete(p);
            acme_fail(run, "cannot sign the external account binding%s%s", NULL, NULL);
            return MK_ERR;
        }
        cJSON_AddItemToObject(p, "externalAccountBinding", e);
    }
    payload = cJSON_PrintUnformatted(p);
    cJSON_Delete(p);
    if (!payload) {
        acme_fail(run, "out of memory%s%s", NULL, NULL);
        return MK_ERR;
    }
    run->kid[0] = '\0';
    int rc = acme_post(run, run->new_account, payload, &rep);
    free(payload);
    if (rc != MK_OK) {
        return MK_ERR;
    }
    if ((rep.resp.status != 200 && rep.resp.status != 201) ||
        !acme_copy(run->kid, sizeof(run->kid), rep.resp.location)) {
        acme_problem(run, "newAccount", &rep);
        acme_reply_free(&rep);
        return MK_ERR;
    }
    acme_reply_free(&rep);
    return MK_OK;
}

/* Publish (or, keyauth NULL, withdraw) an HTTP-01 answer for the early hook. */
static void acme_token_set(struct tls_acme_state *st, const char *token, const char *keyauth)
{
    pthread_mutex_lock(&st->lock);
    for (struct acme_token **pp = &st->tokens; *pp; pp = &(*pp)->next) {
        if (strcmp((*pp)->token, token) == 0) {
            struct acme_token *t = *pp;
            *pp = t->next;
            free(t);
            atomic_fetch_sub(&acme_tokens_live, 1);
            break;
        }
    }
    if (keyauth) {
        struct acme_token *t = calloc(1, sizeof(*t));
        if (t) {
            snprintf(t->token, sizeof(t->token), "%s", token);
            snprintf(t->keyauth, sizeof(t->keyauth), "%s", keyauth);
            t->next = st->tokens;
            st->tokens = t;
            atomic_fetch_add(&acme_tokens_live, 1);
        }
    }
    pthread_mutex_unlock(&st->lock);
}

/* Publish (cert non-NULL) or withdraw a TLS-ALPN-01 certificate for name. */
static void acme_alpn_set(struct tls_acme_state *st, const char *name, X509 *cert, EVP_PKEY *key)
{
    pthread_mutex_lock(&st->lock);
    for (struct acme_alpn **pp = &st->alpn; *pp; pp = &(*pp)->next) {
        if (strcasecmp((*pp)->name, name) == 0) {
            struct acme_alpn *a = *pp;
            *pp = a->next;
            X509_free(a->cert);
            EVP_PKEY_free(a->key);
            free(a);
            atomic_fetch_sub(&acme_alpn_live, 1);
            break;
        }
    }
    struct acme_alpn *a = cert ? calloc(1, sizeof(*a)) : NULL;
    if (a && X509_up_ref(cert) == 1 && EVP_PKEY_up_ref(key) == 1) {
        snprintf(a->name, sizeof(a->name), "%s", name);
        a->cert = cert;
        a->key = key;
        a->next = st->alpn;
        st->alpn = a;
        atomic_fetch_add(&acme_alpn_live, 1);
    }
    else if (a) {
        free(a); /* up_ref of an object we hold does not fail */
    }
    pthread_mutex_unlock(&st->lock);
}

bool tls_acme_alpn_hello(SSL *ssl, const char *sni)
{
    static const unsigned char only[] = {0,   11,  10,  'a', 'c', 'm', 'e',
                                         '-', 't', 'l', 's', '/', '1'};
    const unsigned char *p;
    size_t len;
    bool done = false;

    if (atomic_load_explicit(&acme_alpn_live, memory_order_relaxed) == 0 || !sni ||
        SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &p,
                                  &len) != 1 ||
        len != sizeof(only) || memcmp(p, only, len) != 0) {
        return false;
    }
    struct tls_self *self = tls_api->self(MK_PLUGIN_SELF(tls));
    struct tls_acme_state *st = self ? self->acme : NULL;
    if (!st) {
        return false;
    }
    pthread_mutex_lock(&st->lock);
    for (struct acme_alpn *a = st->alpn; a; a = a->next) {
        if (strcasecmp(a->name, sni) == 0) {
            done = SSL_use_certificate(ssl, a->cert) == 1 && SSL_use_PrivateKey(ssl, a->key) == 1;
            break;
        }
    }
    pthread_mutex_unlock(&st->lock);
    ERR_clear_error();
    struct tls_conn *t = SSL_get_app_data(ssl);
    if (done && t) {
        t->acme_alpn = true;
    }
    return done;
}

/* POST-as-GET url until its "status" leaves pending/processing: the last body, or NULL. */
static cJSON *acme_poll(struct acme_run *run, const char *url, const char *what)
{
    for (int i = 0; i < ACME_POLLS; i++) {
        struct acme_reply rep;
        if (acme_post(run, url, NULL, &rep) != MK_OK) {
            return NULL;
        }
        if (rep.resp.status != 200) {
            acme_problem(run, what, &rep);
            acme_reply_free(&rep);
            return NULL;
        }
        cJSON *j = acme_json(&rep);
        long wait = rep.resp.retry_after;
        acme_reply_free(&rep);
        const char *status = j ? cJSON_GetStringValue(cJSON_GetObjectItem(j, "status")) : NULL;
        if (!status) {
            cJSON_Delete(j);
            acme_fail(run, "%s: no status in the CA's answer%s", what, NULL);
            return NULL;
        }
        if (strcmp(status, "pending") != 0 && strcmp(status, "processing") != 0) {
            return j;
        }
        cJSON_Delete(j);
        if (!acme_pause(run, wait > 0 ? wait : 1)) {
            acme_fail(run, "%s: the server stops%s", what, NULL);
            return NULL;
        }
    }
    acme_fail(run, "%s: still pending after %s polls", what, "60");
    return NULL;
}

/* The error of a failed authorization's challenge, into run->err. */
static void acme_authz_error(struct acme_run *run, cJSON *authz, const char *name)
{
    cJSON *ch;
    cJSON_ArrayForEach(ch, cJSON_GetObjectItem(authz, "challenges"))
    {
        cJSON *e = cJSON_GetObjectItem(ch, "error");
        const char *d = e ? cJSON_GetStringValue(cJSON_GetObjectItem(e, "detail")) : NULL;
        if (d) {
            snprintf(run->err, sizeof(run->err), "%s for %s failed: %.400s",
                     cJSON_GetStringValue(cJSON_GetObjectItem(ch, "type")), name, d);
            return;
        }
    }
    acme_fail(run, "the authorization for %s is %s", name,
              cJSON_GetStringValue(cJSON_GetObjectItem(authz, "status")));
}

/* Have one authorization validated by HTTP-01: MK_OK or MK_ERR. */
static int acme_authorize(struct acme_run *run, const char *url)
{
    struct acme_reply rep;
    char keyauth[256], ch_url[1024], token[128];
    int ok = MK_ERR;

    if (acme_post(run, url, NULL, &rep) != MK_OK) {
        return MK_ERR;
    }
    cJSON *authz = rep.resp.status == 200 ? acme_json(&rep) : NULL;
    if (!authz) {
        acme_problem(run, "authorization", &rep);
        acme_reply_free(&rep);
        return MK_ERR;
    }
    acme_reply_free(&rep);
    const char *status = cJSON_GetStringValue(cJSON_GetObjectItem(authz, "status"));
    cJSON *ident = cJSON_GetObjectItem(authz, "identifier");
    const char *name = ident ? cJSON_GetStringValue(cJSON_GetObjectItem(ident, "value")) : NULL;
    name = name ? name : "?";
    if (status && strcmp(status, "valid") == 0) {
        cJSON_Delete(authz);
        return MK_OK;
    }
    /* The challenge the listeners allow: HTTP-01 with a plain listener, else TLS-ALPN-01. */
    cJSON *ch, *http01 = NULL, *alpn01 = NULL;
    cJSON_ArrayForEach(ch, cJSON_GetObjectItem(authz, "challenges"))
    {
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(ch, "type"));
        if (type && strcmp(type, "http-01") == 0 && run->http) {
            http01 = ch;
        }
        else if (type && strcmp(type, "tls-alpn-01") == 0 && run->alpn) {
            alpn01 = ch;
        }
    }
    cJSON *chosen = http01 ? http01 : alpn01;
    const char *tok = chosen ? cJSON_GetStringValue(cJSON_GetObjectItem(chosen, "token")) : NULL;
    if (!tok || !acme_copy(token, sizeof(token), tok) ||
        strspn(token, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") !=
            strlen(token) ||
        !acme_copy(ch_url, sizeof(ch_url),
                   cJSON_GetStringValue(cJSON_GetObjectItem(chosen, "url")))) {
        acme_fail(run, "the CA offers no challenge the listeners allow for %s (%s)", name,
                  run->http   ? "http-01"
                  : run->alpn ? "tls-alpn-01"
                              : "no listener");
        cJSON_Delete(authz);
        return MK_ERR;
    }
    snprintf(keyauth, sizeof(keyauth), "%s.%s", token, run->thumb);
    EVP_PKEY *alpn_key = NULL;
    X509 *alpn_cert = NULL;
    if (http01) {
        acme_token_set(run->st, token, keyauth);
        tls_api->log(MK_PLUGIN_LOG_INFO,
                     "tls: acme: %s: waiting for the CA to fetch http://%s" ACME_CHALLENGE "%s",
                     run->as->file, name, token);
    }
    else {
        alpn_key = acme_key_new(false);
        alpn_cert = alpn_key ? acme_alpn_cert(alpn_key, name, keyauth) : NULL;
        if (!alpn_cert) {
            EVP_PKEY_free(alpn_key);
            acme_fail(run, "cannot make the tls-alpn-01 certificate for %s%s", name, NULL);
            cJSON_Delete(authz);
            return MK_ERR;
        }
        acme_alpn_set(run->st, name, alpn_cert, alpn_key);
        tls_api->log(MK_PLUGIN_LOG_INFO,
                     "tls: acme: %s: waiting for the CA's acme-tls/1 handshake for %s",
                     run->as->file, name);
    }
    if (acme_post(run, ch_url, "{}", &rep) == MK_OK) {
        if (rep.resp.status == 200) {
            cJSON *done = acme_poll(run, url, "authorization");
            const char *st =
                done ? cJSON_GetStringValue(cJSON_GetObjectItem(done, "status")) : NULL;
            if (st && strcmp(st, "valid") == 0) {
                ok = MK_OK;
            }
            else if (done) {
                acme_authz_error(run, done, name);
            }
            cJSON_Delete(done);
        }
        else {
            acme_problem(run, "challenge", &rep);
        }
        acme_reply_free(&rep);
    }
    if (http01) {
        acme_token_set(run->st, token, NULL);
    }
    else {
        acme_alpn_set(run->st, name, NULL, NULL);
        X509_free(alpn_cert);
        EVP_PKEY_free(alpn_key);
    }
    cJSON_Delete(authz);
    return ok;
}

/* Finalize the order with a CSR of key and download the chain (malloc'd PEM) into *pem. */
static int acme_finalize(struct acme_run *run, const char *order_url, cJSON *order, EVP_PKEY *key,
                         char **pem)
{
    struct acme_reply rep;
    char fin[1024], cert_url[1024];
    char *csr = acme_csr(key, run->as->names, run->as->n_names);

    if (!csr || !acme_copy(fin, sizeof(fin),
                           cJSON_GetStringValue(cJSON_GetObjectItem(order, "finalize")))) {
        free(csr);
        acme_fail(run, "the order has no finalize URL, or the CSR cannot be made%s%s", NULL, NULL);
        return MK_ERR;
    }
    size_t n = strlen(csr) + 16;
    char *payload = malloc(n);
    if (!payload) {
        free(csr);
        return MK_ERR;
    }
    snprintf(payload, n, "{\"csr\":\"%s\"}", csr);
    free(csr);
    int rc = acme_post(run, fin, payload, &rep);
    free(payload);
    if (rc != MK_OK) {
        return MK_ERR;
    }
    if (rep.resp.status != 200) {
        acme_problem(run, "finalize", &rep);
        acme_reply_free(&rep);
        return MK_ERR;
    }
    acme_reply_free(&rep);
    cJSON *done = acme_poll(run, order_url, "order");
    const char *st = done ? cJSON_GetStringValue(cJSON_GetObjectItem(done, "status")) : NULL;
    if (!st || strcmp(st, "valid") != 0 ||
        !acme_copy(cert_url, sizeof(cert_url),
                   cJSON_GetStringValue(cJSON_GetObjectItem(done, "certificate")))) {
        if (done) {
            acme_fail(run, "the order is %s, not valid%s", st ? st : "?", NULL);
        }
        cJSON_Delete(done);
        return MK_ERR;
    }
    cJSON_Delete(done);
    if (acme_post(run, cert_url, NULL, &rep) != MK_OK) {
        return MK_ERR;
    }
    if (rep.resp.status != 200 || !rep.resp.body_len) {
        acme_problem(run, "certificate", &rep);
        acme_reply_free(&rep);
        return MK_ERR;
    }
    *pem = strndup(rep.resp.body, rep.resp.body_len);
    acme_reply_free(&rep);
    return *pem ? MK_OK : MK_ERR;
}

/* A whole order for as's names: MK_OK with the chain stored and installed. */
static int acme_order(struct acme_run *run)
{
    struct acme_reply rep;
    char order_url[1024];
    char *pem = NULL;
    int ok = MK_ERR;

    if (acme_directory(run) != MK_OK || acme_account_key(run) != MK_OK ||
        acme_account(run) != MK_OK) {
        return MK_ERR;
    }
    cJSON *p = cJSON_CreateObject();
    cJSON *ids = cJSON_AddArrayToObject(p, "identifiers");
    for (unsigned i = 0; i < run->as->n_names; i++) {
        cJSON *id = cJSON_CreateObject();
        cJSON_AddStringToObject(id, "type", "dns");
        cJSON_AddStringToObject(id, "value", run->as->names[i]);
        cJSON_AddItemToArray(ids, id);
    }
    char *payload = cJSON_PrintUnformatted(p);
    cJSON_Delete(p);
    int rc = payload ? acme_post(run, run->new_order, payload, &rep) : MK_ERR;
    free(payload);
    if (rc != MK_OK) {
        return MK_ERR;
    }
    cJSON *order = rep.resp.status == 201 ? acme_json(&rep) : NULL;
    if (!order || !acme_copy(order_url, sizeof(order_url), rep.resp.location)) {
        acme_problem(run, "newOrder", &rep);
        acme_reply_free(&rep);
        cJSON_Delete(order);
        return MK_ERR;
    }
    acme_reply_free(&rep);
    cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItem(order, "authorizations"))
    {
        const char *url = cJSON_GetStringValue(a);
        if (!url || acme_authorize(run, url) != MK_OK) {
            if (!url) {
                acme_fail(run, "newOrder: an authorization without a URL%s%s", NULL, NULL);
            }
            cJSON_Delete(order);
            return MK_ERR;
        }
    }
    EVP_PKEY *key = acme_key_new(run->as->conf.key_type == ACME_KEY_RSA);
    if (!key) {
        cJSON_Delete(order);
        acme_fail(run, "cannot make the certificate's key%s%s", NULL, NULL);
        return MK_ERR;
    }
    if (acme_finalize(run, order_url, order, key, &pem) == MK_OK) {
        char path[PATH_MAX];
        size_t klen = 0;
        char *kpem = acme_key_pem(key, &klen);
        X509 *leaf = NULL;
        STACK_OF(X509) *rest = NULL;
        snprintf(path, sizeof(path), "%s.key", run->as->base);
        if (!kpem || acme_write_file(path, kpem, klen) != MK_OK) {
            acme_fail(run, "cannot store %.300s: %s", path, strerror(errno));
        }
        else {
            snprintf(path, sizeof(path), "%s.crt", run->as->base);
            if (acme_write_file(path, pem, strlen(pem)) != MK_OK) {
                acme_fail(run, "cannot store %.300s: %s", path, strerror(errno));
            }
            else if (acme_read_chain(path, &leaf, &rest) != MK_OK ||
                     X509_check_private_key(leaf, key) != 1 ||
                     acme_install(run->as, leaf, rest, key) != MK_OK) {
                acme_fail(run, "the certificate from the CA (%.300s) cannot be used%s", path, NULL);
            }
            else {
                ok = MK_OK;
            }
        }
        X509_free(leaf);
        sk_X509_pop_free(rest, X509_free);
        if (kpem) {
            OPENSSL_cleanse(kpem, klen);
        }
        free(kpem);
    }
    ERR_clear_error();
    free(pem);
    EVP_PKEY_free(key);
    cJSON_Delete(order);
    return ok;
}

/* An RFC 3339 time (UTC "Z" or an offset; fractions ignored) as time_t; 0 when malformed. */
static time_t acme_rfc3339(const char *s)
{
    struct tm tm = {0};
    const char *p = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;

    if (!p) {
        return 0;
    }
    if (*p == '.') {
        p += 1 + strspn(p + 1, "0123456789");
    }
    time_t t = timegm(&tm);
    if (*p == 'Z' || *p == 'z') {
        return t;
    }
    int hh, mm;
    if ((*p == '+' || *p == '-') && sscanf(p + 1, "%2d:%2d", &hh, &mm) == 2) {
        long off = (hh * 60L + mm) * 60L;
        return *p == '+' ? t - off : t + off;
    }
    return 0;
}

/*
 * ARI (RFC 9773): when the CA suggests renewing leaf, a random moment of
 * its suggested window, with its Retry-After in *retry (seconds, -1:
 * none); 0 when the CA has no renewal information or the exchange failed
 * (then the lifetime alone decides).
 */
static time_t acme_ari(struct acme_run *run, X509 *leaf, long *retry)
{
    const ASN1_OCTET_STRING *aki = X509_get0_authority_key_id(leaf);
    unsigned char *der = NULL;
    char url[2048], a[128], b[128];
    struct acme_reply rep;
    time_t when = 0;

    *retry = -1;
    int n = i2d_ASN1_INTEGER(X509_get0_serialNumber(leaf), &der);
    size_t hdr = n > 2 && (der[1] & 0x80) ? 2 + (size_t) (der[1] & 0x7f) : 2;
    if (!run->renewal_info[0] || !aki || ASN1_STRING_length(aki) > 64 || n <= (int) hdr ||
        (size_t) n - hdr > 64) {
        OPENSSL_free(der);
        return 0;
    }
    acme_b64url(ASN1_STRING_get0_data(aki), (size_t) ASN1_STRING_length(aki), a);
    acme_b64url(der + hdr, (size_t) n - hdr, b);
    OPENSSL_free(der);
    snprintf(url, sizeof(url), "%s/%s.%s", run->renewal_info, a, b);
    if (acme_request(run->tls, url, NULL, &rep, run->err, sizeof(run->err)) != MK_OK) {
        return 0;
    }
    cJSON *j = rep.resp.status == 200 ? acme_json(&rep) : NULL;
    cJSON *w = j ? cJSON_GetObjectItem(j, "suggestedWindow") : NULL;
    time_t start = w ? acme_rfc3339(cJSON_GetStringValue(cJSON_GetObjectItem(w, "start"))) : 0;
    time_t end = w ? acme_rfc3339(cJSON_GetStringValue(cJSON_GetObjectItem(w, "end"))) : 0;
    if (start && end >= start) {
        uint32_t r = 0;
        RAND_bytes((unsigned char *) &r, sizeof(r));
        when = start + (end > start ? (time_t) (r % (uint32_t) (end - start + 1)) : 0);
        *retry = rep.resp.retry_after;
    }
    cJSON_Delete(j);
    acme_reply_free(&rep);
    run->err[0] = '\0';
    return when;
}

/* Which challenges the server's listeners can answer: plain for HTTP-01, tls for TLS-ALPN-01. */
static void acme_listeners(struct acme_run *run)
{
    struct mk_config *cfg = tls_api->config_get();
    const char *v;

    for (unsigned i = 0; cfg && (v = tls_api->config_value(cfg, "Listen", i)) != NULL; i++) {
        const char *sp = strchr(v, ' ');
        bool tls = sp && strncmp(sp + 1, "tls", 3) == 0 && (sp[4] == '\0' || sp[4] == ' ');
        run->alpn |= tls;
        run->http |= !tls && !(sp && strstr(sp, "proxy_protocol"));
    }
    if (cfg) {
        tls_api->config_put(cfg);
    }
}

/*
 * The renewer's work on one site, under its lock file: the stored
 * certificate when it is there and not due, else an order. Sets the next
 * attempt and the error.
 */
static void acme_work(struct tls_acme_state *st, struct tls_acme_site *as)
{
    struct acme_run run = {.as = as, .st = st};
    char path[PATH_MAX];
    X509 *leaf = NULL;
    STACK_OF(X509) *rest = NULL;
    EVP_PKEY *key = NULL;
    time_t now, want_next = 0;
    int ok = MK_ERR;

    pthread_mutex_lock(&as->lock);
    bool force = as->force;
    as->force = false;
    time_t installed = as->temporary ? 0 : as->not_after;
    pthread_mutex_unlock(&as->lock);

    snprintf(path, sizeof(path), "%s.lock", as->base);
    int lock = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock < 0) {
        snprintf(run.err, sizeof(run.err), "%.300s: %s", path, strerror(errno));
        goto done;
    }
    while (flock(lock, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK || !acme_pause(&run, 1)) {
            snprintf(run.err, sizeof(run.err), "cannot lock %.300s", path);
            goto done;
        }
    }
    now = time(NULL);
    run.tls = acme_client_ctx(as->conf.ca, run.err, sizeof(run.err));
    if (acme_stored(as, &leaf, &rest, &key) == MK_OK) {
        time_t nb, na;
        acme_cert_times(leaf, &nb, &na);
        bool mine = na == installed;
        if (now < acme_renew_at(nb, na) && !(force && mine)) {
            /* Not due by its lifetime (or another server renewed it since):
               the CA's renewal information may say otherwise. */
            long retry = -1;
            time_t ari =
                run.tls && acme_directory(&run) == MK_OK ? acme_ari(&run, leaf, &retry) : 0;
            run.err[0] = '\0';
            if (ari && ari <= now) {
                tls_api->log(MK_PLUGIN_LOG_INFO,
                             "tls: acme: %s: the CA's renewal information (ARI) says renew now",
                             as->file);
            }
            else {
                ok = na == installed || acme_install(as, leaf, rest, key) == MK_OK ? MK_OK : MK_ERR;
                if (ok != MK_OK) {
                    snprintf(run.err, sizeof(run.err), "the stored certificate cannot be used");
                }
                want_next = ari;
                if (retry > 0 && (!want_next || now + retry < want_next)) {
                    want_next = now + (retry < 60 ? 60 : retry);
                }
                goto done;
            }
        }
    }
    acme_listeners(&run);
    if (run.tls) {
        tls_api->log(MK_PLUGIN_LOG_INFO, "tls: acme: %s: ordering a certificate for %s from %s",
                     as->file, as->names[0], as->directory);
        ok = acme_order(&run);
        want_next = now + 21600; /* the renewal information again in 6 hours at the latest */
    }
done:
    if (lock >= 0) {
        close(lock); /* and its flock */
    }
    X509_free(leaf);
    sk_X509_pop_free(rest, X509_free);
    EVP_PKEY_free(key);
    EVP_PKEY_free(run.account);
    SSL_CTX_free(run.tls);
    now = time(NULL);
    pthread_mutex_lock(&as->lock);
    if (ok == MK_OK) {
        bool fresh = as->not_after != installed;
        as->error[0] = '\0';
        as->backoff = 0;
        as->next_try = acme_renew_at(as->not_before, as->not_after);
        if (want_next && want_next < as->next_try) {
            as->next_try = want_next;
        }
        as->obtained += fresh && run.account ? 1 : 0;
        if (fresh) {
            tls_api->log(MK_PLUGIN_LOG_INFO,
                         "tls: acme: %s: certificate for %s installed, valid until %ld, renewal "
                         "from %ld",
                         as->file, as->names[0], (long) as->not_after, (long) as->next_try);
        }
    }
    else {
        long long wait = as->backoff ? as->backoff : as->conf.retry;
        as->backoff = wait * 2 > ACME_BACKOFF_MAX ? ACME_BACKOFF_MAX : wait * 2;
        as->next_try = now + (time_t) (wait / 1000);
        snprintf(as->error, sizeof(as->error), "%.500s", run.err[0] ? run.err : "failed");
        as->failures++;
        tls_api->log(MK_PLUGIN_LOG_ERROR, "tls: acme: %s: %s; next attempt in %llds%s", as->file,
                     as->error, wait / 1000,
                     as->temporary ? " (the site serves its temporary self-signed certificate)"
                                   : " (the current certificate stays)");
    }
    pthread_mutex_unlock(&as->lock);
}

/* ---- the renewer thread -------------------------------------------------------- */

static void acme_site_free(struct tls_acme_site *as)
{
    for (unsigned i = 0; i < as->n_names; i++) {
        free(as->names[i]);
    }
    free(as->key);
    free(as->file);
    free(as->directory);
    free(as->base);
    free(as->conf.email);
    free(as->conf.ca);
    free(as->conf.eab_kid);
    free(as->conf.eab_key);
    free(as->conf.state_dir);
    SSL_CTX_free(as->ctx);
    pthread_mutex_destroy(&as->lock);
    free(as);
}

/* Drop a reference to as: the last one frees it. */
static void acme_site_put(struct tls_acme_site *as)
{
    if (atomic_fetch_sub(&as->refs, 1) == 1) {
        acme_site_free(as);
    }
}

static void *acme_thread(void *arg)
{
    struct tls_acme_state *st = arg;

    if (st->server && MK_API_HAS(tls_api, thread_serve)) {
        tls_api->thread_serve(st->server);
    }
    pthread_mutex_lock(&st->lock);
    while (!atomic_load(&st->stop)) {
        time_t now = time(NULL), earliest = now + 3600;
        struct tls_acme_site *due = NULL;
        for (struct tls_acme_site **pp = &st->sites; *pp;) {
            struct tls_acme_site *as = *pp;
            if (atomic_load(&as->refs) == 1) {
                *pp = as->next; /* no configuration has it any more */
                acme_site_put(as);
                continue;
            }
            pthread_mutex_lock(&as->lock);
            time_t when = as->force ? now : as->next_try;
            pthread_mutex_unlock(&as->lock);
            if (when <= now && !due) {
                due = as;
            }
            earliest = when < earliest ? when : earliest;
            pp = &as->next;
        }
        if (due) {
            atomic_fetch_add(&due->refs, 1); /* kept while the lock is not held */
            pthread_mutex_unlock(&st->lock);
            acme_work(st, due);
            acme_site_put(due);
            pthread_mutex_lock(&st->lock);
            continue;
        }
        struct timespec ts = {.tv_sec = earliest};
        pthread_cond_timedwait(&st->cond, &st->lock, &ts);
    }
    pthread_mutex_unlock(&st->lock);
    return NULL;
}

/* The server's ACME state, made at the first ACME site. */
static struct tls_acme_state *acme_state(void)
{
    struct tls_self *self = tls_api->self(MK_PLUGIN_SELF(tls));

    if (!self) {
        return NULL;
    }
    if (!self->acme) {
        struct tls_acme_state *st = calloc(1, sizeof(*st));
        if (!st) {
            return NULL;
        }
        pthread_mutex_init(&st->lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_cond_init(&st->cond, &ca);
        pthread_condattr_destroy(&ca);
        st->server = self->server;
        self->acme = st;
    }
    return self->acme;
}

/* The line of the ACME key in the site's [TLS] section, for messages. */
static int acme_line(const struct mk_conf *conf)
{
    void *cursor = NULL;
    const char *section, *key, *value;
    int line = 0;

    while (conf && tls_api->conf_next(conf, &cursor, &section, &key, &value, &line)) {
        if (section && key && strcasecmp(section, "TLS") == 0 && strcasecmp(key, "ACME") == 0) {
            return line;
        }
    }
    return 0;
}

static char *acme_strdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

int tls_acme_site_init(struct tls_site *ts, const struct mk_site *site, const struct mk_conf *conf,
                       char *err, size_t errlen)
{
    const struct tls_acme_conf *ac = &ts->acme_conf;
    const char *file = tls_api->site_file(site);
    char at[MK_CONF_AT_LEN], why[512];
    const char *name;
    unsigned n = 0;
    bool checking = MK_API_HAS(tls_api, checking) && tls_api->checking();
    const char *dir = ac->state_dir ? ac->state_dir : TLS_ACME_STATEDIR;
    int line = acme_line(conf);

    if (conf && line) {
        mk_api_conf_at(tls_api, conf, line, at, sizeof(at));
    }
    else {
        snprintf(at, sizeof(at), "%s", file);
    }
    for (; (name = tls_api->site_name(site, n)) != NULL; n++) {
        if (strchr(name, '*')) {
            snprintf(err, errlen,
                     "%s: ACME: the site's name %s is a wildcard: HTTP-01 cannot prove it (a "
                     "wildcard needs DNS-01, which this server does not do)",
                     at, name);
            return MK_ERR;
        }
        if (strspn(name, "0123456789.:") == strlen(name)) {
            snprintf(err, errlen, "%s: ACME: the site's name %s is an address, not a DNS name", at,
                     name);
            return MK_ERR;
        }
    }
    if (n == 0 || n > ACME_NAMES_MAX) {
        snprintf(err, errlen, "%s: ACME: the site needs 1 to %d ServerNames (it has %u)", at,
                 ACME_NAMES_MAX, n);
        return MK_ERR;
    }
    if (acme_state_dir(dir, !checking, why, sizeof(why)) != MK_OK) {
        snprintf(err, errlen, "%s: %s", at, why);
        return MK_ERR;
    }
    struct tls_acme_state *st = acme_state();
    if (!st) {
        snprintf(err, errlen, "%s: ACME: out of memory", at);
        return MK_ERR;
    }
    const char *url = strcasecmp(ac->directory, "letsencrypt") == 0
                          ? (ac->staging ? ACME_LE_STAGING : ACME_LE)
                          : ac->directory;
    size_t klen = strlen(file) + strlen(url) + strlen(dir) + 16;
    for (unsigned i = 0; i < n; i++) {
        klen += strlen(tls_api->site_name(site, i)) + 1;
    }
    char *key = malloc(klen);
    if (!key) {
        snprintf(err, errlen, "%s: ACME: out of memory", at);
        return MK_ERR;
    }
    int off = snprintf(key, klen, "%s|%s|%s", file, url, dir);
    for (unsigned i = 0; i < n; i++) {
        off += snprintf(key + off, klen - (size_t) off, "|%s", tls_api->site_name(site, i));
    }

    pthread_mutex_lock(&st->lock);
    struct tls_acme_site *as = st->sites;
    while (as && strcmp(as->key, key) != 0) {
        as = as->next;
    }
    if (as) {
        atomic_fetch_add(&as->refs, 1);
        free(key);
    }
    else {
        as = calloc(1, sizeof(*as));
        char base[PATH_MAX];
        snprintf(base, sizeof(base), "%s/%s", dir, tls_api->site_name(site, 0));
        if (as) {
            as->key = key;
            as->file = strdup(file);
            as->directory = strdup(url);
            as->base = strdup(base);
            for (unsigned i = 0; i < n; i++) {
                as->names[i] = strdup(tls_api->site_name(site, i));
            }
            as->n_names = n;
            as->conf = *ac;
            as->conf.directory = NULL;
            as->conf.email = acme_strdup(ac->email);
            as->conf.ca = acme_strdup(ac->ca);
            as->conf.eab_kid = acme_strdup(ac->eab_kid);
            as->conf.eab_key = acme_strdup(ac->eab_key);
            as->conf.state_dir = strdup(dir);
            as->ktls = ts->ktls == 0 && tls_ktls_available();
            atomic_init(&as->refs, 2); /* the list's and this configuration's */
            pthread_mutex_init(&as->lock, NULL);
        }
        else {
            free(key);
        }
        bool ready = as && as->file && as->directory && as->base && as->conf.state_dir;
        for (unsigned i = 0; ready && i < n; i++) {
            ready = as->names[i] != NULL;
        }
        if (!ready) {
            if (as) {
                as->n_names = n;
                acme_site_free(as);
            }
            pthread_mutex_unlock(&st->lock);
            snprintf(err, errlen, "%s: ACME: out of memory", at);
            return MK_ERR;
        }
        as->next = st->sites;
        st->sites = as;
    }
    pthread_mutex_unlock(&st->lock);
    ts->acme = as;

    /* The site's context for this configuration: its current certificate,
       the stored one, or a stand-in. */
    X509 *leaf = NULL;
    STACK_OF(X509) *rest = NULL;
    EVP_PKEY *pkey = NULL;
    bool temporary = false;
    pthread_mutex_lock(&as->lock);
    if (as->ctx && !as->temporary) {
        leaf = SSL_CTX_get0_certificate(as->ctx);
        pkey = SSL_CTX_get0_privatekey(as->ctx);
        X509_up_ref(leaf);
        EVP_PKEY_up_ref(pkey);
        STACK_OF(X509) *c = NULL;
        SSL_CTX_get0_chain_certs(as->ctx, &c);
        rest = c ? X509_chain_up_ref(c) : sk_X509_new_null();
    }
    pthread_mutex_unlock(&as->lock);
    if (!leaf && acme_stored(as, &leaf, &rest, &pkey) != MK_OK) {
        pkey = acme_key_new(false);
        leaf = pkey ? acme_self_signed(pkey, as->names, as->n_names, 7) : NULL;
        rest = sk_X509_new_null();
        temporary = true;
    }
    SSL_CTX *ctx = leaf && pkey && rest ? acme_ctx_build(leaf, rest, pkey, NULL, as->ktls) : NULL;
    time_t nb = 0, na = 0;
    if (leaf) {
        acme_cert_times(leaf, &nb, &na);
    }
    X509_free(leaf);
    sk_X509_pop_free(rest, X509_free);
    EVP_PKEY_free(pkey);
    if (!ctx) {
        snprintf(err, errlen, "%s: ACME: OpenSSL cannot make the site's context", at);
        return MK_ERR;
    }
    SSL_CTX_free(ts->ctx);
    ts->ctx = ctx;
    pthread_mutex_lock(&as->lock);
    if (!as->ctx || (as->temporary && !temporary)) {
        /* the first configuration of the site (or a stored certificate that
           came since): the renewer's context until it installs one */
        SSL_CTX *old = as->ctx;
        SSL_CTX_up_ref(ctx);
        as->ctx = ctx;
        as->temporary = temporary;
        as->not_before = temporary ? 0 : nb;
        as->not_after = temporary ? 0 : na;
        as->next_try = 0; /* the renewer looks at once: the stored one, the CA's ARI */
        SSL_CTX_free(old);
    }
    pthread_mutex_unlock(&as->lock);
    if (temporary && !checking) {
        tls_api->log(MK_PLUGIN_LOG_WARN,
                     "tls: acme: %s: no certificate for %s yet: a temporary self-signed one "
                     "serves until the order at %s succeeds",
                     file, as->names[0], as->directory);
    }
    if (!checking && st->server && !st->started) {
        if (pthread_create(&st->thread, NULL, acme_thread, st) != 0) {
            snprintf(err, errlen, "%s: ACME: cannot start the renewer thread", at);
            return MK_ERR;
        }
        st->started = true;
    }
    pthread_cond_signal(&st->cond);
    return MK_OK;
}

void tls_acme_site_release(struct tls_site *ts)
{
    if (ts->acme) {
        acme_site_put(ts->acme);
        ts->acme = NULL;
    }
}

int tls_acme_early(struct mk_request *r)
{
    size_t len = 0;
    const char *path;

    if (atomic_load_explicit(&acme_tokens_live, memory_order_relaxed) == 0) {
        return MK_DECLINED;
    }
    path = tls_api->path(r, &len);
    if (!path || len <= sizeof(ACME_CHALLENGE) - 1 ||
        memcmp(path, ACME_CHALLENGE, sizeof(ACME_CHALLENGE) - 1) != 0 ||
        tls_conn_of(tls_api->conn(r))) {
        return MK_DECLINED;
    }
    struct tls_self *self = tls_api->self(MK_PLUGIN_SELF(tls));
    struct tls_acme_state *st = self ? self->acme : NULL;
    const char *token = path + sizeof(ACME_CHALLENGE) - 1;
    size_t tlen = len - (sizeof(ACME_CHALLENGE) - 1);
    char *answer = NULL;
    if (!st) {
        return MK_DECLINED;
    }
    pthread_mutex_lock(&st->lock);
    for (struct acme_token *t = st->tokens; t; t = t->next) {
        if (strlen(t->token) == tlen && memcmp(t->token, token, tlen) == 0) {
            size_t alen = strlen(t->keyauth);
            answer = tls_api->alloc(r, alen + 1);
            if (answer) {
                memcpy(answer, t->keyauth, alen + 1);
            }
            break;
        }
    }
    pthread_mutex_unlock(&st->lock);
    if (!answer) {
        return MK_DECLINED;
    }
    tls_api->set_status(r, 200);
    tls_api->set_content_type(r, "application/octet-stream");
    tls_api->set_body_static(r, answer, strlen(answer));
    return MK_OK;
}

void tls_acme_stats(void (*emit)(void *arg, const char *name, uint64_t value), void *arg)
{
    struct tls_self *self = tls_api->self(MK_PLUGIN_SELF(tls));
    struct tls_acme_state *st = self ? self->acme : NULL;
    uint64_t sites = 0, waiting = 0, obtained = 0, failures = 0, expiry = 0, next = 0, failing = 0;

    if (st) {
        pthread_mutex_lock(&st->lock);
        for (struct tls_acme_site *as = st->sites; as; as = as->next) {
            pthread_mutex_lock(&as->lock);
            sites++;
            waiting += as->temporary;
            failing += as->error[0] != '\0';
            obtained += as->obtained;
            failures += as->failures;
            if (!as->temporary && (!expiry || (uint64_t) as->not_after < expiry)) {
                expiry = (uint64_t) as->not_after;
            }
            if (!next || (uint64_t) as->next_try < next) {
                next = (uint64_t) as->next_try;
            }
            pthread_mutex_unlock(&as->lock);
        }
        pthread_mutex_unlock(&st->lock);
    }
    emit(arg, "acme_sites", sites);
    emit(arg, "acme_sites_waiting", waiting);
    emit(arg, "acme_sites_failing", failing);
    emit(arg, "acme_obtained", obtained);
    emit(arg, "acme_failures", failures);
    emit(arg, "acme_first_expiry", expiry);
    emit(arg, "acme_next_renewal", next);
}

/* Unix time as UTC text ("-" for 0). */
static const char *acme_time_text(time_t t, char *buf, size_t len)
{
    struct tm tm;

    if (!t || !gmtime_r(&t, &tm)) {
        snprintf(buf, len, "-");
        return buf;
    }
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

/* "status": one block per ACME site. */
static int acme_control_status(struct tls_acme_state *st, char *out, size_t cap)
{
    size_t off = 0;
    out[0] = '\0';
    if (!st) {
        return MK_OK;
    }
    pthread_mutex_lock(&st->lock);
    for (struct tls_acme_site *as = st->sites; as && off < cap; as = as->next) {
        char exp[32], next[32], names[1024] = "";
        if (atomic_load(&as->refs) < 2) {
            continue; /* no configuration has it any more */
        }
        for (unsigned i = 0, o = 0; i < as->n_names && o < sizeof(names); i++) {
            int w = snprintf(names + o, sizeof(names) - o, "%s%s", i ? " " : "", as->names[i]);
            o = w < 0 ? (unsigned) sizeof(names) : o + (unsigned) w;
        }
        pthread_mutex_lock(&as->lock);
        int n = snprintf(out + off, cap - off,
                         "site %s\n    names %s\n    directory %s\n    certificate %s\n"
                         "    expires %s\n    renewal %s\n    obtained %u\n    failures %u\n"
                         "    error %s\n",
                         as->file, names, as->directory,
                         as->temporary ? "temporary (self-signed)" : "from the CA",
                         acme_time_text(as->temporary ? 0 : as->not_after, exp, sizeof(exp)),
                         acme_time_text(as->force ? time(NULL) : as->next_try, next, sizeof(next)),
                         as->obtained, as->failures, as->error[0] ? as->error : "-");
        pthread_mutex_unlock(&as->lock);
        off = n < 0 ? cap : off + (size_t) n;
    }
    pthread_mutex_unlock(&st->lock);
    return MK_OK;
}

int tls_acme_control(const char *args, char *out, size_t cap)
{
    struct tls_self *self = tls_api->self(MK_PLUGIN_SELF(tls));
    struct tls_acme_state *st = self ? self->acme : NULL;
    char verb[16] = "", name[256] = "", extra[2] = "";
    int n = sscanf(args, "%15s %255s %1s", verb, name, extra);

    if (n == 1 && strcmp(verb, "status") == 0) {
        return acme_control_status(st, out, cap);
    }
    if (n != 2 || strcmp(verb, "renew") != 0) {
        snprintf(out, cap, "acme: status, or renew NAME");
        return MK_ERR;
    }
    bool found = false;
    if (st) {
        pthread_mutex_lock(&st->lock);
        for (struct tls_acme_site *as = st->sites; as; as = as->next) {
            bool match = false;
            for (unsigned i = 0; i < as->n_names; i++) {
                match = match || strcasecmp(as->names[i], name) == 0;
            }
            if (match && atomic_load(&as->refs) >= 2) {
                pthread_mutex_lock(&as->lock);
                as->force = true;
                pthread_mutex_unlock(&as->lock);
                found = true;
            }
        }
        pthread_cond_signal(&st->cond);
        pthread_mutex_unlock(&st->lock);
    }
    if (!found) {
        snprintf(out, cap, "acme: no ACME site is named %.200s", name);
        return MK_ERR;
    }
    tls_api->log(MK_PLUGIN_LOG_INFO, "tls: acme: renewal of %s asked for (control)", name);
    snprintf(out, cap, "renewal of %.200s started (acme status shows its end)\n", name);
    return MK_OK;
}

void tls_acme_exit(void)
{
    struct tls_self *self = tls_api->self(MK_PLUGIN_SELF(tls));
    struct tls_acme_state *st = self ? self->acme : NULL;

    if (!st) {
        return;
    }
    if (st->started) {
        pthread_mutex_lock(&st->lock);
        atomic_store(&st->stop, true);
        pthread_cond_signal(&st->cond);
        pthread_mutex_unlock(&st->lock);
        pthread_join(st->thread, NULL);
    }
    while (st->sites) {
        struct tls_acme_site *as = st->sites;
        st->sites = as->next;
        acme_site_put(as); /* configurations still built keep theirs */
    }
    while (st->tokens) {
        struct acme_token *t = st->tokens;
        st->tokens = t->next;
        free(t);
        atomic_fetch_sub(&acme_tokens_live, 1);
    }
    while (st->alpn) {
        acme_alpn_set(st, st->alpn->name, NULL, NULL);
    }
    pthread_cond_destroy(&st->cond);
    pthread_mutex_destroy(&st->lock);
    free(st);
    self->acme = NULL;
}
