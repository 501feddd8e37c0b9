/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls_acme_client.h: HTTPS requests to an ACME server (tls_acme_client.c),
 * blocking with timeouts: for the renewer thread only.
 */
#ifndef MK_TLS_ACME_CLIENT_H
#define MK_TLS_ACME_CLIENT_H

#include <stddef.h>

#include <openssl/ssl.h>

#include "tls_acme_parse.h"

/* A response: the buffer it was read into and what was parsed from it. */
struct acme_reply {
    char *buf;
    struct acme_http_resp resp;
};

/* A client context trusting ca_file (NULL: the system's CAs), or NULL with err. */
SSL_CTX *acme_client_ctx(const char *ca_file, char *err, size_t errlen);
/*
 * GET url (body NULL) or POST body to it as application/jose+json: MK_OK
 * with the response in out (free with acme_reply_free), whatever its
 * status; MK_ERR with the reason in err (name, connection, TLS, timeout,
 * a malformed response).
 */
int acme_request(SSL_CTX *tls, const char *url, const char *body, struct acme_reply *out, char *err,
                 size_t errlen);
void acme_reply_free(struct acme_reply *r);

#endif
