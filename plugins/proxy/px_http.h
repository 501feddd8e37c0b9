/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * px_http.h: what the proxy reads from an upstream, parsed without I/O,
 * allocation or globals (unit tested and fuzzed as it is): the response's
 * status line and fields, the framing of its body, and the chunked coding.
 * Strict: anything a request parser would refuse (a bare CR, obs-fold, a
 * space before a field's colon, Content-Length with Transfer-Encoding, a
 * coding other than chunked, a bad status) is malformed, a 502 for the
 * proxy, so that what an upstream sends can never be read two ways.
 */
#ifndef MK_PX_HTTP_H
#define MK_PX_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <monkey/mk_common.h>

/* The largest response head accepted: a longer one is malformed. */
#define PX_HEAD_MAX 16384
/* Fields one head may have. */
#define PX_FIELDS_MAX 64
/* Trailer bytes (after the last chunk) accepted, line ends aside. */
#define PX_TRAILER_MAX 8192
/* Room that keeps any trailer section accepted (its lines, each ended with CRLF). */
#define PX_TRAILER_KEEP (3 * PX_TRAILER_MAX)

struct px_slice {
    const char *p;
    size_t len;
};

struct px_field {
    struct px_slice name, value;
};

/* How the body of a response ends. */
enum px_framing {
    PX_BODY_NONE,    /* no body: HEAD, 1xx, 204, 304, Content-Length: 0 */
    PX_BODY_LENGTH,  /* Content-Length bytes */
    PX_BODY_CHUNKED, /* Transfer-Encoding: chunked */
    PX_BODY_CLOSE,   /* neither: up to the end of the connection */
};

/* What a response field is to the proxy, by its name (any case): px_resp.kind. */
enum px_kind {
    PX_K_OTHER,
    PX_K_LENGTH,     /* Content-Length */
    PX_K_TRANSFER,   /* Transfer-Encoding */
    PX_K_CONNECTION, /* Connection */
    PX_K_HOP,        /* the other hop-by-hop fields: Keep-Alive, TE, Trailer, Upgrade, Proxy-* */
    PX_K_STATUS,     /* Status */
    PX_K_LOCATION,   /* Location */
    PX_K_REFRESH,    /* Refresh */
    PX_K_SET_COOKIE, /* Set-Cookie */
};

/* A parsed response head; slices point into the parsed buffer. */
struct px_resp {
    int status; /* 100..599 */
    int minor;  /* HTTP/1.<minor>: 0 or 1 */
    bool close; /* the connection ends after this response */
    enum px_framing framing;
    uint64_t length;     /* PX_BODY_LENGTH; the value of Content-Length whatever the framing */
    bool has_length;     /* a Content-Length came (a HEAD's answer included) */
    bool has_connection; /* a Connection field came (px_resp_conn_names may name one) */
    struct px_field fields[PX_FIELDS_MAX]; /* not zeroed by px_resp_parse: up to n_fields */
    unsigned char kind[PX_FIELDS_MAX];     /* each field's enum px_kind, up to n_fields */
    unsigned n_fields;
    size_t head_len; /* bytes of the head, its empty line included */
    const char *why; /* on MK_ERR: what is wrong (a static string) */
};

/*
 * Parse the response head at the start of buf[0..len). `head_request`:
 * the request was HEAD (no body, whatever the fields say).
 *   MK_OK     complete: *r filled, the body starts at buf + r->head_len;
 *   MK_AGAIN  no empty line yet, fewer than PX_HEAD_MAX bytes;
 *   MK_ERR    malformed (r->why says why).
 * Lines end with CRLF or LF. A 1xx head is returned as any other (the
 * caller skips it); it has no body.
 */
int px_resp_parse(const char *buf, size_t len, bool head_request, struct px_resp *r);

/* Whether c may stand in a token (RFC 9110 section 5.6.2: a field's name). */
bool px_tchar(unsigned char c);

/*
 * Append s[0..n) to buf (cap bytes, *len of them used) when it fits: true;
 * false, with nothing written, when it does not. The proxy's fixed buffers
 * (a rewritten field, the trailers kept) fill through it.
 */
static inline bool px_push(char *buf, size_t cap, size_t *len, const char *s, size_t n)
{
    if (n > cap - *len) {
        return false;
    }
    if (n) {
        memcpy(buf + *len, s, n);
    }
    *len += n;
    return true;
}

/*
 * The status of the response head at buf[0..len): the first 12 bytes are
 * "HTTP/1.0 " or "HTTP/1.1 " and three digits of 100..599; 0 when they are
 * not (or fewer came). What follows the digits is not looked at: enough for
 * a health check's answer, px_resp_parse checks the whole line.
 */
int px_resp_status(const char *buf, size_t len);

/* Whether the Connection fields of r name `name` (len bytes, any case). */
bool px_resp_conn_names(const struct px_resp *r, const char *name, size_t len);

/*
 * Whether a field is hop-by-hop for the proxy, in either direction:
 * Connection, Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding,
 * Upgrade and every Proxy-* field.
 */
bool px_hop_by_hop(const char *name, size_t len);

/* The chunked decoder's state; zeroed: at the first chunk's size. */
struct px_chunked {
    int state;
    uint64_t left; /* data bytes of the current chunk still to come */
    unsigned digits;
    size_t trailer;
    bool done; /* the last chunk and the trailer section are in */
    /* Set by the caller to keep the trailer section: its lines as they came
       (none of the empty one), each ended with CRLF, in keep[0..keep_len);
       what does not fit in keep_cap sets keep_over (the section is then
       not to be used). NULL: dropped. */
    char *keep;
    size_t keep_cap, keep_len;
    bool keep_over;
};

/*
 * Decode in[0..len): consume framing bytes up to and including at most one
 * run of data, which *data and *dlen give (dlen 0: none in what was
 * consumed). Returns the bytes consumed, or -1 when the coding is
 * malformed (*why set). Bytes after the end (c->done) are not consumed.
 */
long px_chunked_step(struct px_chunked *c, const char *in, size_t len, const char **data,
                     size_t *dlen, const char **why);
/*
 * The trailer lines a px_chunked kept (in[0..len): "Name: value" lines,
 * each ended with CRLF) that may go on, as "Name: value\r\n" lines into
 * out (cap bytes, NUL-terminated): a line whose name is not a token
 * followed by a colon is dropped, and so are the hop-by-hop fields and
 * those a trailer may not carry (RFC 9110 section 6.5.1: Content-Length,
 * Content-Type, Content-Encoding, Host, Set-Cookie, Cache-Control, Date,
 * Location and the like); values trimmed; the lines that fit. The bytes
 * written (0: none).
 */
size_t px_trailers_filter(const char *in, size_t len, char *out, size_t cap);

/* Give back the last n bytes of the run the last step returned (not taken). */
void px_chunked_unread(struct px_chunked *c, size_t n);

#endif
