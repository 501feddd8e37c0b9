/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls_acme_client.c: one exchange with an ACME server over HTTPS, on the
 * renewer thread: a blocking socket with a timeout on connect, each read
 * and each write (ACME_IO_TIMEOUT), one connection per request
 * ("Connection: close"), the server's certificate verified against
 * ACMECACertificate (else the system's CAs) and its name, the response
 * read to its end (at most ACME_RESP_MAX bytes) and parsed by
 * acme_http_parse (tls_acme_parse.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <monkey/mk_common.h>

#include "tls_acme_client.h"

#define ACME_IO_TIMEOUT 10      /* seconds, per connect, read or write */
#define ACME_RESP_MAX (1 << 20) /* the largest response read */

SSL_CTX *acme_client_ctx(const char *ca_file, char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

    if (!ctx) {
        snprintf(err, errlen, "OpenSSL cannot make a client context");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    int ok = ca_file ? SSL_CTX_load_verify_locations(ctx, ca_file, NULL)
                     : SSL_CTX_set_default_verify_paths(ctx);
    if (ok != 1) {
        snprintf(err, errlen, "cannot load the CAs %s", ca_file ? ca_file : "of the system");
        SSL_CTX_free(ctx);
        ERR_clear_error();
        return NULL;
    }
    return ctx;
}

/* A connected TCP socket to host:port within the timeout, or -1 with err. */
static int acme_connect(const struct acme_url *u, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int fd = -1, rc = getaddrinfo(u->host, u->port, &hints, &res);

    if (rc != 0) {
        snprintf(err, errlen, "%s: %s", u->host, gai_strerror(rc));
        return -1;
    }
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 || errno == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int soerr = 0;
            socklen_t sl = sizeof(soerr);
            if (poll(&p, 1, ACME_IO_TIMEOUT * 1000) == 1 &&
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0) {
                break;
            }
            errno = soerr ? soerr : ETIMEDOUT;
        }
        snprintf(err, errlen, "connect to %s port %s: %s", u->host, u->port, strerror(errno));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd >= 0) {
        struct timeval tv = {.tv_sec = ACME_IO_TIMEOUT};
        int fl = fcntl(fd, F_GETFL);
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    }
    return fd;
}

/* Write all of buf over ssl: MK_OK or MK_ERR. */
static int acme_write_all(SSL *ssl, const char *buf, size_t len)
{
    while (len > 0) {
        int n = SSL_write(ssl, buf, len > 65536 ? 65536 : (int) len);
        if (n <= 0) {
            return MK_ERR;
        }
        buf += n;
        len -= (size_t) n;
    }
    return MK_OK;
}

int acme_request(SSL_CTX *tls, const char *url, const char *body, struct acme_reply *out, char *err,
                 size_t errlen)
{
    struct acme_url u;
    SSL *ssl = NULL;
    char *head = NULL;
    int fd = -1, ok = MK_ERR;
    size_t cap = 16384, len = 0;

    memset(out, 0, sizeof(*out));
    if (acme_url_parse(url, &u) != MK_OK) {
        snprintf(err, errlen, "not an https URL: %.200s", url);
        return MK_ERR;
    }
    fd = acme_connect(&u, err, errlen);
    if (fd < 0) {
        return MK_ERR;
    }
    ssl = SSL_new(tls);
    /* An address is checked against the certificate's IP names, and sent as no SNI. */
    unsigned char ip[16];
    bool literal = inet_pton(AF_INET, u.host, ip) == 1 || inet_pton(AF_INET6, u.host, ip) == 1;
    if (!ssl || SSL_set_fd(ssl, fd) != 1 ||
        (literal ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), u.host) != 1
                 : SSL_set_tlsext_host_name(ssl, u.host) != 1 || SSL_set1_host(ssl, u.host) != 1)) {
        snprintf(err, errlen, "OpenSSL cannot make a connection");
        goto done;
    }
    if (SSL_connect(ssl) != 1) {
        long v = SSL_get_verify_result(ssl);
        snprintf(err, errlen, "TLS with %s port %s: %s", u.host, u.port,
                 v != X509_V_OK ? X509_verify_cert_error_string(v) : "handshake failed");
        goto done;
    }
    size_t blen = body ? strlen(body) : 0;
    char host[300];
    bool v6 = strchr(u.host, ':') != NULL;
    if (strcmp(u.port, "443") == 0) {
        snprintf(host, sizeof(host), v6 ? "[%s]" : "%s", u.host);
    }
    else {
        snprintf(host, sizeof(host), v6 ? "[%s]:%s" : "%s:%s", u.host, u.port);
    }
    size_t hcap = strlen(u.path) + strlen(u.host) + 256;
    head = malloc(hcap);
    if (!head) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    int hn = body ? snprintf(head, hcap,
                             "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: monkey-acme\r\n"
                             "Content-Type: application/jose+json\r\nContent-Length: %zu\r\n"
                             "Connection: close\r\n\r\n",
                             u.path, host, blen)
                  : snprintf(head, hcap,
                             "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: monkey-acme\r\n"
                             "Connection: close\r\n\r\n",
                             u.path, host);
    if (acme_write_all(ssl, head, (size_t) hn) != MK_OK ||
        (body && acme_write_all(ssl, body, blen) != MK_OK)) {
        snprintf(err, errlen, "sending to %s: %s", u.host, strerror(errno));
        goto done;
    }
    out->buf = malloc(cap + 1);
    if (!out->buf) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    for (;;) {
        if (len == cap) {
            if (cap >= ACME_RESP_MAX) {
                snprintf(err, errlen, "the response of %s is over %d bytes", u.host, ACME_RESP_MAX);
                goto done;
            }
            char *nb = realloc(out->buf, cap * 2 + 1);
            if (!nb) {
                snprintf(err, errlen, "out of memory");
                goto done;
            }
            out->buf = nb;
            cap *= 2;
        }
        int n = SSL_read(ssl, out->buf + len, (int) (cap - len));
        if (n > 0) {
            len += (size_t) n;
            continue;
        }
        int e = SSL_get_error(ssl, n);
        if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0) ||
            (e == SSL_ERROR_SSL && len > 0)) {
            break; /* the end (a server that closes without close_notify included) */
        }
        snprintf(err, errlen, "reading from %s: %s", u.host,
                 errno == EAGAIN ? "timed out" : "connection failed");
        goto done;
    }
    if (acme_http_parse(out->buf, len, &out->resp) != MK_OK) {
        snprintf(err, errlen, "a malformed HTTP response from %s", u.host);
        goto done;
    }
    ok = MK_OK;
done:
    ERR_clear_error();
    if (ssl) {
        SSL_shutdown(ssl);
        SSL_free(ssl);
    }
    if (fd >= 0) {
        close(fd);
    }
    free(head);
    if (ok != MK_OK) {
        acme_reply_free(out);
    }
    return ok;
}

void acme_reply_free(struct acme_reply *r)
{
    free(r->buf);
    memset(r, 0, sizeof(*r));
}
