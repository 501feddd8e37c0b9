/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls_acme_parse.h: the pure parts of the ACME client (tls_acme_parse.c):
 * base64url, the https:// URLs of an ACME directory, and the HTTP/1.1
 * responses of an ACME server. No I/O, no globals, no allocation; the
 * fuzz target tests/fuzz/fuzz_acme.c drives them.
 */
#ifndef MK_TLS_ACME_PARSE_H
#define MK_TLS_ACME_PARSE_H

#include <stdbool.h>
#include <stddef.h>

/* The length base64url (no padding) makes of n bytes. */
#define ACME_B64_LEN(n) (((n) *4 + 2) / 3)

/* base64url of in[0..n) into out (ACME_B64_LEN(n) + 1 bytes, NUL ended); its length. */
size_t acme_b64url(const unsigned char *in, size_t n, char *out);
/*
 * Decode base64url (no padding; '=' at the end tolerated) into out (cap
 * bytes): the length, or -1 for a character outside the alphabet, a
 * length that no encoding has, or too little room.
 */
long acme_b64url_decode(const char *in, size_t n, unsigned char *out, size_t cap);

/* An https URL: host (without brackets), port, and the path with the query. */
struct acme_url {
    char host[256];
    char port[8];
    char path[1024];
};
/* Split `url`: MK_OK, or MK_ERR when it is no https://HOST[:PORT][/PATH] URL. */
int acme_url_parse(const char *url, struct acme_url *out);

/* What acme_http_parse found in a response. Pointers point into the buffer. */
struct acme_http_resp {
    int status;
    const char *nonce; /* Replay-Nonce, NUL ended in the buffer; NULL: none */
    const char *location;
    const char *content_type;
    long retry_after; /* seconds of Retry-After (delta form); -1: none */
    char *body;       /* NUL ended in the buffer (chunks joined in place) */
    size_t body_len;
};
/*
 * Parse the whole response `buf` of `len` bytes (read until the server
 * closed; buf has room for one more byte, the NUL): the status line, the
 * fields the client uses, and the body, by Content-Length, chunked
 * (decoded in place) or up to the end. The buffer is changed (fields NUL
 * ended). MK_OK, or MK_ERR for a malformed or truncated response.
 */
int acme_http_parse(char *buf, size_t len, struct acme_http_resp *out);

#endif
