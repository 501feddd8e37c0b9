/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * gw_head.h: the header block a gateway script or application answers with
 * (RFC 3875 section 6: CGI, and FastCGI responders, which use the same
 * block), parsed without I/O, allocation or globals, so that it is unit
 * tested and fuzzed as it is. Shared by plugins/cgi and plugins/fastcgi.
 */
#ifndef MK_GW_HEAD_H
#define MK_GW_HEAD_H

#include <stddef.h>

#include <monkey/mk_common.h>

/* The largest header block accepted: a longer one is malformed (502). */
#define MK_GW_HEAD_MAX 16384
/* Header fields other than Status, Location and Content-Type kept. */
#define MK_GW_FIELDS_MAX 64

/* A slice of the parsed buffer (not NUL terminated). */
struct mk_gw_slice {
    const char *p;
    size_t len;
};

struct mk_gw_field {
    struct mk_gw_slice name, value;
};

/*
 * A parsed header block. Slices point into the buffer given to the parser
 * and are valid as long as it is.
 */
struct mk_gw_head {
    int status;                  /* Status (or the NPH status line), 200..599; 0 when absent */
    struct mk_gw_slice location; /* Location, len 0 when absent */
    struct mk_gw_slice content_type;
    struct mk_gw_field fields[MK_GW_FIELDS_MAX]; /* the other fields, in order */
    unsigned n_fields;
    size_t head_len; /* bytes of the block, its empty line included */
    const char *why; /* on MK_ERR: what is wrong, for the log (a static string) */
};

/*
 * Parse the header block at the start of buf[0..len).
 *   MK_OK     complete: *h filled, the body starts at buf + h->head_len;
 *   MK_AGAIN  no empty line yet (and fewer than MK_GW_HEAD_MAX bytes);
 *   MK_ERR    malformed: a line without ':' or with a bad name, a control
 *             character in a value, a bad Status (not three digits, or
 *             not a final status 200 to 599: a 1xx is refused, the
 *             gateway answers 502), more than
 *             MK_GW_FIELDS_MAX fields, no Status, Location nor
 *             Content-Type, or no end within MK_GW_HEAD_MAX bytes.
 * On MK_ERR, h->why says what is wrong ("a 1xx status, which is no final
 * response"), for the log. Lines end with LF or CRLF. When `nph` is true the block starts with an
 * HTTP status line ("HTTP/1.1 200 OK") that sets h->status, and no field
 * is required (a non-parsed-header script's answer).
 */
int mk_gw_head_parse(const char *buf, size_t len, int nph, struct mk_gw_head *h);

/*
 * One field into h as mk_gw_head_parse puts a line's: Status, Location and
 * Content-Type into their places (each at most once, Location not empty,
 * Status a final one), any other into h->fields. For a head parsed
 * elsewhere (the proxy's upstream response): the caller vouches that the
 * name is a token and the value trimmed and free of control bytes, as the
 * parser checks them. MK_OK, or MK_ERR with h->why set.
 */
int mk_gw_head_field(struct mk_gw_head *h, struct mk_gw_slice name, struct mk_gw_slice value);

/*
 * Whether a field the script sent is one the server frames itself and
 * therefore drops (Content-Length, Transfer-Encoding, Connection,
 * Keep-Alive, Date, Server, Upgrade, Trailer, TE, Proxy-Connection).
 */
int mk_gw_field_is_framing(const struct mk_gw_slice *name);

/* Whether a Location is local (starts with '/' and not "//"), RFC 3875 6.2.2. */
int mk_gw_location_is_local(const struct mk_gw_slice *location);

/* ---- pure helpers of the meta-variables (gw.c) ---- */

#define MK_GW_DEC_MAX 24 /* a decimal of 64 bits and its NUL */

/*
 * CONTENT_LENGTH of a Content-Length value (RFC 3875 4.1.2: the decimal
 * length of the body): the value is a list of equal decimals ("3, 3" is
 * 3, RFC 9110 8.6), written without leading zeros into out (NUL
 * terminated). Its length, or 0 when v is no such list (items that
 * differ, not digits, more than 2^63 - 1, empty).
 */
size_t mk_gw_content_length(const char *v, size_t len, char out[MK_GW_DEC_MAX]);

/*
 * An absolute-form request target ("http://a.test:8080/p?q", RFC 9112
 * 3.2.2) split into its authority ("a.test:8080") and what follows it
 * ("/p?q", or "?q" or "" for a target without a path, whose origin form
 * is "/" before that). Returns 1 for such a target (one the server
 * accepted: http or https, then the authority up to '/', '?' or the end),
 * 0 for any other form (the slices are then not set).
 */
int mk_gw_target_absolute(const char *t, size_t len, struct mk_gw_slice *authority,
                          struct mk_gw_slice *rest);

#endif
