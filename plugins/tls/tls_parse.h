/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tls_parse.h: the pure parts of the tls plugin that read what a client
 * sends: the ClientHello's server_name extension and ALPN list, and the
 * Host and path of a plain HTTP request redirected to HTTPS. No OpenSSL,
 * no I/O, no allocation, no globals (tests/fuzz/fuzz_tls.c).
 */
#ifndef MONKEY_PLUGIN_TLS_PARSE_H
#define MONKEY_PLUGIN_TLS_PARSE_H

#include <stdbool.h>
#include <stddef.h>

/*
 * The host name of a server_name extension's body (RFC 6066 section 3:
 * a 2-byte list length, then entries of a type byte and a 2-byte length),
 * its first host_name entry, into buf (size bytes, NUL terminated): false
 * when there is none, the list is malformed, or the name is empty, holds
 * a NUL or does not fit (OpenSSL refuses those itself later).
 */
bool tls_sni_host(const unsigned char *ext, size_t len, char *buf, size_t size);

/*
 * The entry of the ALPN list `in` (inlen bytes: a length byte, then that
 * many bytes, again and again) equal to `proto` (plen bytes): its first
 * byte, or NULL. A malformed tail ends the list.
 */
const unsigned char *tls_alpn_find(const unsigned char *in, unsigned inlen, const char *proto,
                                   size_t plen);

/* Whether `name` (len bytes, no port) is a host name: 1 to 253 letters, digits, '-' and '.'. */
bool tls_host_ok(const char *name, size_t len);

/*
 * Whether ServerName `pattern` ("example.com", "*.example.com"; a C string)
 * names `name` (len bytes): in any case, a final '.' of either ignored,
 * a wildcard standing for one label or more.
 */
bool tls_name_matches(const char *pattern, const char *name, size_t len);

/*
 * Percent-encode the decoded path (len bytes) into out (room for 3 * len
 * bytes, no NUL written): RFC 3986 pchar and '/' stay, every other byte is
 * %XX. Returns the length written.
 */
size_t tls_path_encode(const char *path, size_t len, char *out);

#endif
