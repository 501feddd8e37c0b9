/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * http.h: HTTP/1.1 message syntax (RFC 9110, RFC 9112) as pure functions.
 *
 * Nothing in http_parser.c or http_fields.c performs I/O, allocates or
 * touches globals: they take bytes and return a result, so they are unit
 * tested as tables and fuzzed directly. Parsed strings are views into the
 * caller's buffer (zero copy); they stay valid while that buffer does.
 *
 * Reading a request head is two steps:
 *   1. mk_http_scan() finds where the head ends (resumable, bounded) and
 *      counts its lines, so the caller can size the header array exactly;
 *   2. mk_http_parse() parses the complete head strictly.
 * Either step returns bytes consumed, MK_AGAIN (need more input) or MK_ERR
 * with the HTTP status to answer in `status`.
 */
#ifndef MK_SERVER_HTTP_H
#define MK_SERVER_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "../../core/strings.h"

enum mk_http_method {
    MK_METHOD_UNKNOWN = 0, /* a valid token we do not know: 501 unless a plugin takes it */
    MK_METHOD_GET,
    MK_METHOD_HEAD,
    MK_METHOD_POST,
    MK_METHOD_PUT,
    MK_METHOD_DELETE,
    MK_METHOD_OPTIONS,
    MK_METHOD_PATCH,
    MK_METHOD_TRACE,
    MK_METHOD_CONNECT,
};

enum mk_http_target_form {
    MK_TARGET_ORIGIN = 0, /* /path?query */
    MK_TARGET_ABSOLUTE,   /* http://host/path?query */
    MK_TARGET_AUTHORITY,  /* host:port (CONNECT only) */
    MK_TARGET_ASTERISK,   /* * (OPTIONS only) */
};

/* Flags of a parsed head. */
#define MK_HEAD_CONN_CLOSE 0x01u      /* Connection: close */
#define MK_HEAD_CONN_KEEPALIVE 0x02u  /* Connection: keep-alive */
#define MK_HEAD_CHUNKED 0x04u         /* Transfer-Encoding: chunked */
#define MK_HEAD_CONTENT_LENGTH 0x08u  /* a Content-Length was given */
#define MK_HEAD_EXPECT_CONTINUE 0x10u /* Expect: 100-continue */
#define MK_HEAD_HOST 0x20u            /* a Host header was given */
#define MK_HEAD_TLS 0x40u             /* came over TLS: set by the request rules for Scheme */

struct mk_http_header {
    struct mk_str name;
    struct mk_str value; /* trimmed of surrounding whitespace */
};

/* Headers the parser indexes while it reads them (the static handler's, and Cookie). */
enum mk_http_known {
    MK_HDR_IF_MATCH = 0,
    MK_HDR_IF_NONE_MATCH,
    MK_HDR_IF_MODIFIED_SINCE,
    MK_HDR_IF_UNMODIFIED_SINCE,
    MK_HDR_IF_RANGE,
    MK_HDR_RANGE,
    MK_HDR_COOKIE, /* several: one field once mk_http_cookie_join ran */
    MK_HDR_KNOWN_COUNT
};

struct mk_http_limits {
    size_t max_line;      /* request line bytes; beyond: 414 */
    size_t max_head;      /* request line + headers bytes; beyond: 431 */
    unsigned max_headers; /* header lines; beyond: 431 */
};

/* Progress of mk_http_scan() between calls; zero it before the first call. */
struct mk_http_scan {
    size_t pos;        /* bytes already examined */
    size_t line_start; /* start of the line being examined */
    size_t head_start; /* first byte after leading empty lines */
    unsigned lines;    /* complete non-empty lines seen (request line included) */
    int status;        /* on MK_ERR: 400, 414 or 431 */
};

struct mk_http_head {
    enum mk_http_method method;
    enum mk_http_target_form form;
    uint8_t version; /* 10 or 11 */
    uint8_t flags;   /* MK_HEAD_* */
    int status;      /* on MK_ERR: the status to answer */
    struct mk_str method_name;
    struct mk_str target; /* as received */
    struct mk_str path;   /* still percent-encoded; "/" for absolute-form without path */
    struct mk_str query;  /* without '?'; p == NULL when there is no query */
    struct mk_str host;   /* lower-level authority host, port removed; empty when none */
    uint64_t content_length;
    struct mk_http_header *headers;
    unsigned n_headers;
    uint16_t known[MK_HDR_KNOWN_COUNT]; /* 1 + index of the first such header, 0: absent */
    uint8_t known_repeated;             /* bit k: more than one line of kind k */
};

/*
 * Find the end of a request head in buf[0, len). Leading empty lines are
 * skipped (they count toward the limits). Returns the total head length
 * (leading lines included) once "\r\n\r\n" (or "\n\n") has arrived, MK_AGAIN
 * while more input is needed, or MK_ERR with scan->status set (414/431/400).
 * `buf` may grow between calls but its first `scan->pos` bytes must not change.
 */
ssize_t mk_http_scan(struct mk_http_scan *scan, const char *buf, size_t len,
                     const struct mk_http_limits *lim);

/*
 * Parse the complete head buf[0, len) (as delimited by mk_http_scan; leading
 * empty lines allowed). `headers` has room for `cap` entries, at least the
 * number of lines scan counted minus one. Returns len or MK_ERR with
 * head->status set (400, 417, 501, 505).
 */
ssize_t mk_http_parse(struct mk_http_head *head, const char *buf, size_t len,
                      struct mk_http_header *headers, unsigned cap);

/*
 * Both steps at once for the usual case, a head that arrived whole: when
 * buf[0, len) starts with a complete head that mk_http_scan (from a zeroed
 * scan, with `lim`) and mk_http_parse (with `cap` entries) would both
 * accept, parse it into `head` exactly as they would, store the lines the
 * scan would count in *lines and return the head's length. Otherwise
 * (incomplete, refused, more than `cap` fields, empty lines first) return
 * MK_DECLINED, and the two steps decide.
 */
ssize_t mk_http_read_head(struct mk_http_head *head, const char *buf, size_t len,
                          const struct mk_http_limits *lim, struct mk_http_header *headers,
                          unsigned cap, unsigned *lines);

/*
 * Build a head from its parts, as an HTTP/2 header block gives them (no
 * text to parse): `method`, `target` (:path, or :authority for CONNECT)
 * and the n fields in `headers` (Host first when there was an :authority),
 * all views that must outlive the head. They are held to the rules and
 * limits mk_http_scan and mk_http_parse apply to the HTTP/1.1 request
 * "METHOD TARGET HTTP/1.1" with those fields: token method, target
 * characters and form, request line length (414), field count (431),
 * field names and values (values are trimmed in place), Host,
 * Content-Length, Transfer-Encoding, Expect. head->version is 11; the
 * caller sets its own. `names_are_tokens`: the caller found every field
 * name to be a token already (mk_http_name_class), and they are not
 * checked again; the result is the same as without it. Returns MK_OK, or
 * MK_ERR with head->status set (400, 414, 417, 431, 501).
 */
int mk_http_head_build(struct mk_http_head *head, struct mk_str method, struct mk_str target,
                       struct mk_http_header *headers, unsigned n, bool names_are_tokens,
                       const struct mk_http_limits *lim);

/* What a field name is made of (the values are bits: ANDed over its bytes). */
enum mk_http_name {
    MK_HTTP_NAME_BAD = 0,   /* empty, or a byte that is not a tchar */
    MK_HTTP_NAME_UPPER = 1, /* a token with an upper-case letter */
    MK_HTTP_NAME_LOWER = 3, /* a token without one */
};

/* The class of the field name p[0, len), by one table look-up a byte. */
enum mk_http_name mk_http_name_class(const char *p, size_t len);

/* Value of the first header named `name` (case-insensitive), or NULL. */
const struct mk_str *mk_http_header_get(const struct mk_http_head *head, const char *name);

/* The lower-case name of an indexed header kind ("if-none-match"). */
const char *mk_http_known_name(enum mk_http_known k);

/* Was a header of an indexed kind given on more than one line? */
static inline bool mk_http_known_repeated(const struct mk_http_head *head, enum mk_http_known k)
{
    return (head->known_repeated >> k) & 1u;
}

/* Value of the first header of an indexed kind, or NULL: no scan. */
static inline const struct mk_str *mk_http_known_get(const struct mk_http_head *head,
                                                     enum mk_http_known k)
{
    return head->known[k] ? &head->headers[head->known[k] - 1].value : NULL;
}

/* ---- chunked transfer coding (RFC 9112 section 7.1) ---------------------- */

struct mk_chunked {
    uint8_t state;
    uint8_t digits;
    uint64_t left;     /* bytes remaining in the current chunk */
    size_t line_bytes; /* bytes of the current size or trailer line so far */
    size_t trailer_bytes;
    /* after each mk_chunked_decode(): where in its buf the bytes of the
       trailer section it consumed begin (they end at the count it returned;
       equal to that count when it consumed none) */
    size_t trailer_off;
};

/* The most bytes of a request's trailer section (HTTP/1.1 chunked, HTTP/2). */
#define MK_CHUNK_TRAILER_MAX 16384

void mk_chunked_init(struct mk_chunked *c);

/*
 * Decode chunked data in place: reads buf[0, len), moves decoded bytes to the
 * front of buf and stores their count in *out. Returns the number of input
 * bytes consumed (everything, unless the message ended inside buf), or MK_ERR
 * on a malformed or oversized encoding (answer 400). mk_chunked_done() tells
 * when the final chunk and trailers have been read.
 */
ssize_t mk_chunked_decode(struct mk_chunked *c, char *buf, size_t len, size_t *out);
bool mk_chunked_done(const struct mk_chunked *c);

/*
 * The trailer section of a chunked body as mk_chunked_decode() accepted it
 * (raw[0, len): field lines, CRLF or LF ended, and the final empty line, as
 * given by trailer_off), written to out as "Name: value\r\n" lines, the
 * whitespace around each value removed. out has room for 2 * len bytes
 * (an LF-ended line grows by one). Returns the bytes written: 0 for a
 * section without fields.
 */
size_t mk_chunked_trailer_lines(const char *raw, size_t len, char *out);

/* ---- header field values ------------------------------------------------- */

/*
 * The most ranges one Range may ask for: past it the field is ignored and
 * the whole representation is sent (RFC 9110 section 14.2 lets a server
 * ignore a set of many small ranges). Each range of a multipart answer is
 * a part head and a sendfile(2) or an HTTP/2 frame of its own, so the
 * bound keeps one request's work near that of as many small files; the
 * clients that ask for several ranges (PDF viewers, download managers)
 * ask for a few at a time.
 */
#define MK_RANGES_MAX 32

/* The longest max-age a CacheControl may give: ten years, beyond it caches gain nothing. */
#define MK_HTTP_MAX_AGE_LIMIT 315360000
/*
 * Whether v (NUL-terminated) is a Cache-Control value (RFC 9111 section
 * 5.2), as CacheControl writes one; its max-age (at most
 * MK_HTTP_MAX_AGE_LIMIT) into *max_age, -1 without.
 */
bool mk_http_cache_control_check(const char *v, int64_t *max_age);

/* A satisfiable byte range: bytes first to last, both included. */
struct mk_range {
    uint64_t first, last;
};

enum mk_range_result {
    MK_RANGE_NONE = 0,      /* no usable Range: serve the whole representation */
    MK_RANGE_OK,            /* one satisfiable range or more */
    MK_RANGE_UNSATISFIABLE, /* 416 */
};

/*
 * Interpret a Range value against a representation of `size` bytes
 * (RFC 9110 section 14.1.2). MK_RANGE_OK: *n satisfiable ranges (1 to
 * MK_RANGES_MAX), the first of them, up to `max`, in ranges[]: in the
 * order given, which is ascending with no overlap (each starts after the
 * one before it ends); the unsatisfiable ranges of the set are left out
 * (section 15.3.7.2). A range set none of whose ranges overlap the
 * representation gives MK_RANGE_UNSATISFIABLE. MK_RANGE_NONE (a server
 * may ignore Range, section 14.2): invalid syntax anywhere in the set,
 * more than MK_RANGES_MAX ranges, or satisfiable ranges that overlap or
 * are out of order, the shapes of a broken client or of a denial of
 * service (many overlapping ranges would send the same bytes many times).
 * ranges[] may be written on any result; *n only with MK_RANGE_OK.
 */
enum mk_range_result mk_http_range_parse(const char *value, size_t len, uint64_t size,
                                         struct mk_range *ranges, unsigned max, unsigned *n);

/*
 * Is `value` (If-Range) exactly one strong entity-tag, with optional
 * whitespace around it, equal to `etag`? A weak tag, a list or anything
 * malformed is not (RFC 9110 section 13.1.5: strong comparison, one tag).
 */
bool mk_http_etag_is(const char *value, size_t len, const char *etag, size_t etag_len);

/*
 * Does the entity-tag list `value` (If-None-Match, If-Match) match `etag`
 * (a quoted strong tag such as "\"5f-1a\"")? "*" matches anything. With
 * `weak` the W/ prefix is ignored on both sides; otherwise a weak tag never
 * matches. Malformed lists match nothing.
 */
bool mk_http_etag_match(const char *value, size_t len, const char *etag, size_t etag_len,
                        bool weak);

/*
 * The Cookie fields of a head as one (RFC 9113 8.2.3: HTTP/2 sends each
 * cookie as a field of its own, "crumbs", and they are joined with "; ";
 * repeated HTTP/1 Cookie lines likewise, RFC 6265 5.4 allowing one):
 * mk_http_cookie_join_len() is the length of the joined value (empty
 * values left out), mk_http_cookie_join() writes it into buf (that many
 * bytes, not NUL terminated), makes it the value of the first Cookie
 * field and takes the others out of head->headers, the other fields
 * keeping their order and the index of each kind (known[]) following
 * them. Only for a head with several Cookie fields
 * (mk_http_known_repeated(head, MK_HDR_COOKIE)), which it clears. Pure.
 */
size_t mk_http_cookie_join_len(const struct mk_http_head *head);
void mk_http_cookie_join(struct mk_http_head *head, char *buf);

/* A request's priority (RFC 9218): urgency 0 (first) to 7, and whether it is incremental. */
struct mk_http_priority {
    uint8_t urgency;
    bool incremental;
};

#define MK_HTTP_URGENCY_DEFAULT 3 /* RFC 9218 section 4.1: without a `u` */

/*
 * Read a `priority` field value (RFC 9218 section 4: an RFC 8941
 * dictionary, optional whitespace at either end) over *prio: its `u`
 * member sets the urgency, its `i` member the incremental flag, other
 * members are checked and ignored; a member given twice counts by its last
 * value. Start from {MK_HTTP_URGENCY_DEFAULT, false}; several field lines,
 * each a dictionary, read one after the other give what their comma-joined
 * value gives.
 * Returns false, leaving *prio alone, when the value is not a dictionary or
 * a `u` is not an integer from 0 to 7 or an `i` not a boolean (the field is
 * then ignored, as nghttp2 does).
 */
bool mk_http_priority_parse(const char *value, size_t len, struct mk_http_priority *prio);

/*
 * A line of a response's extra headers (a request's extra_headers), so that a
 * protocol that does not send them as text (HTTP/2) need not parse them
 * back: where the line starts, its name's and value's lengths ("Name:
 * value\r\n"), and the name's lower-case spelling when the server added
 * a name it knows (static storage), else NULL.
 */
struct mk_resp_field {
    const char *lower;
    uint32_t off;
    uint32_t name_len, value_len;
};

/* Reason phrase of a status code ("Not Found"), or "Unknown". */
const char *mk_http_reason(int status);
/* Method token of a known method, or NULL for MK_METHOD_UNKNOWN. */
const char *mk_http_method_name(enum mk_http_method method);

#endif
