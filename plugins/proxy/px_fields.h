/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * px_fields.h: the rewriting of request and response fields the proxy
 * does, without I/O, allocation or globals (unit tested and fuzzed as it
 * is): the prefix of a Location or of a Refresh's URL (Redirect), a
 * Set-Cookie's Path and Domain attributes (CookiePath, CookieDomain), the
 * element the proxy adds to Forwarded (RFC 7239), and which field names a
 * RequestHeader or ResponseHeader line may not touch.
 *
 * Every writer copies the value into out[0..cap) rewritten (or as it was
 * when no map applies) and returns its length, or -1 when it does not fit
 * (out is then garbage). Values are bytes as the upstream sent them; what
 * is written holds no byte that was not in the value or a map.
 */
#ifndef MK_PX_FIELDS_H
#define MK_PX_FIELDS_H

#include <stdbool.h>
#include <stddef.h>

/* A mapping of FROM to TO: a prefix (Redirect) or a whole value (CookiePath, CookieDomain). */
struct px_map {
    const char *from, *to;
    size_t from_len, to_len;
};

/*
 * A Location value: the first map (in order) whose `from` is a prefix of
 * v (bytes compared as they are) has that prefix replaced by its `to`.
 */
long px_location_rewrite(const char *v, size_t len, const struct px_map *m, size_t n, char *out,
                         size_t cap);

/*
 * A Refresh value ("5; url=http://a/b", "0;URL='/x'", "3, http://a/"):
 * its URL part, the rest of the value after the delay, the separator (';'
 * or ','), white space and an optional "url=" (any case, white space
 * around '='), without its quotes when it has them, rewritten as a
 * Location is. A value without a URL part is copied.
 */
long px_refresh_rewrite(const char *v, size_t len, const struct px_map *m, size_t n, char *out,
                        size_t cap);

/*
 * A Set-Cookie value: the value of its Path attribute (the name in any
 * case, white space around the value trimmed) equal to a `paths` map's
 * `from` byte for byte becomes that map's `to`; the value of its Domain
 * attribute equal to a `domains` map's `from` without regard to case
 * becomes its `to`. The first map that matches wins; the cookie's own
 * name=value pair and every other byte are kept as they were.
 */
long px_cookie_rewrite(const char *v, size_t len, const struct px_map *paths, size_t np,
                       const struct px_map *domains, size_t nd, char *out, size_t cap);

/*
 * The element the proxy adds to Forwarded (RFC 7239 section 4):
 * "for=NODE;proto=PROTO;host=HOST". NODE is the client's address as text:
 * an IPv4 address as it is, an IPv6 address quoted and bracketed
 * ("for=\"[2001:db8::1]\""), "unknown" for anything else ("-", empty).
 * proto: "http" or "https" (any token; NULL: left out). host (NULL: left
 * out): a token as it is, else a quoted string with '"' and '\' escaped;
 * a host holding a control byte is left out.
 */
long px_forwarded_element(const char *addr, const char *proto, const char *host, size_t hlen,
                          char *out, size_t cap);

/* Whether name[0..len) is a field name (a non-empty token, RFC 9110 5.6.2). */
bool px_field_name_ok(const char *name, size_t len);

/* Whether a value is one a field may carry: no control byte but HTAB (so no CR, LF, NUL). */
bool px_field_value_ok(const char *v, size_t len);

/*
 * Why a RequestHeader (`response` false) or ResponseHeader line may not
 * set or remove the field `name`, or NULL when it may: hop-by-hop fields
 * and the message's framing (Connection, Keep-Alive, TE, Trailer,
 * Transfer-Encoding, Upgrade, Proxy-*, Content-Length) both ways; Host
 * (the Host key) and Expect upstream; Date, Server and Status (the
 * server's own) downstream.
 */
const char *px_field_refused(const char *name, size_t len, bool response);

#endif
