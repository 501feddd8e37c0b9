/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * gw.h: the gateway core shared by plugins/cgi and plugins/fastcgi (as
 * lighttpd's gw_backend is by mod_cgi and mod_fastcgi): the request's
 * meta-variables (RFC 3875 section 4.1, with the PHP set) and the
 * application of a script's header block to the response. Both run on the
 * request's worker; neither blocks.
 */
#ifndef MK_GW_H
#define MK_GW_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <monkey/mk_plugin.h>

#include "gw_head.h"

/* The script a request runs, as the plugin resolved it. */
struct mk_gw_script {
    const char *name; /* SCRIPT_NAME: the URL path of the script */
    size_t name_len;
    const char *path_info; /* PATH_INFO: the rest of the path, "" when none */
    size_t path_info_len;
    const char *filename; /* SCRIPT_FILENAME: absolute, NUL terminated */
    const char *docroot;  /* DOCUMENT_ROOT, NUL terminated */
    /* CONTENT_LENGTH when the request's Content-Length does not give it (a
       chunked or HTTP/2 body spooled first), NUL terminated; NULL otherwise. */
    const char *content_length;
    /* Whether the credentials of the Authorization and Proxy-Authorization
       headers become HTTP_AUTHORIZATION and HTTP_PROXY_AUTHORIZATION
       (RFC 3875 4.1.18: a server should not pass them; false: left out). */
    bool pass_authorization, pass_proxy_authorization;
};

/* One variable: name and value, not NUL terminated. MK_OK, or MK_ERR to stop. */
typedef int (*mk_gw_param_cb)(void *arg, const char *name, size_t name_len, const char *value,
                              size_t value_len);

/*
 * Call cb once per meta-variable of request r: the RFC 3875 set
 * (AUTH_TYPE, CONTENT_LENGTH, CONTENT_TYPE, GATEWAY_INTERFACE, PATH_INFO,
 * PATH_TRANSLATED, QUERY_STRING, REMOTE_ADDR, REMOTE_HOST, REMOTE_PORT,
 * REMOTE_USER, REQUEST_METHOD, SCRIPT_NAME, SERVER_NAME, SERVER_PORT,
 * SERVER_PROTOCOL, SERVER_SOFTWARE; REMOTE_USER and AUTH_TYPE from the
 * notes of the server's authentication, MK_NOTE_REMOTE_USER and
 * MK_NOTE_AUTH_TYPE, and neither without them, whatever Authorization
 * header the client sent), the
 * usual additions (DOCUMENT_ROOT, SCRIPT_FILENAME, REQUEST_URI,
 * SERVER_ADDR, REQUEST_SCHEME, HTTPS under TLS, REDIRECT_STATUS for
 * php-cgi) and one HTTP_<NAME> per request header (repeated headers joined
 * with ", "; the server gives several Cookie fields as one, joined with
 * "; ", so HTTP_COOKIE has every cookie), except Proxy (no HTTP_PROXY: httpoxy), Authorization and
 * Proxy-Authorization unless s passes them (s->pass_authorization,
 * s->pass_proxy_authorization), Content-Type and Content-Length (they are
 * CONTENT_*), Transfer-Encoding (a script always reads a decoded body) and
 * names with bytes other than letters, digits and '-'. CONTENT_LENGTH is the
 * decimal of the request's Content-Length as the server read it
 * (RFC 3875 4.1.2: "3, 3" and "03" give 3), or s->content_length for a
 * body spooled first. REQUEST_URI is the target as received, in origin
 * form: an absolute-form target ("http://a.test/p?q") gives its path and
 * query, and its authority is HTTP_HOST, not a Host header the server
 * ignored choosing the site (RFC 9112 3.2.2). MK_OK, or MK_ERR when cb
 * refused one.
 */
int mk_gw_params(const struct mk_api *api, struct mk_request *r, const struct mk_gw_script *s,
                 mk_gw_param_cb cb, void *arg);

/*
 * Whether r has a body to give the script: a Content-Length above 0 (the
 * decimal the server read: "0, 0" and "00" are none), or a
 * Transfer-Encoding.
 */
bool mk_gw_has_body(const struct mk_api *api, struct mk_request *r);
/* The same of the fields looked up: r's Content-Length (cl, NULL: none), whether a
   Transfer-Encoding came (te). */
bool mk_gw_has_body_of(const char *cl, size_t cl_len, bool te);

/*
 * A Match line: compile `value` (a POSIX extended regular expression, no
 * submatches) and append it to the *n entries of *matches. MK_OK, or MK_ERR
 * with the reason (a bad expression, memory short).
 */
int mk_gw_match_add(regex_t **matches, size_t *n, const char *value, char *reason, size_t len);
/*
 * The script of `path` (decoded, normalised) under r's document root that
 * one of the n_re expressions selects: the shortest prefix of whole
 * segments that an expression matches and that is a regular file beneath
 * the document root (the rest is PATH_INFO: /index.php/a/b). A directory's
 * index file is not looked for here: the server makes a path ending in '/'
 * the index file's path before the content hooks (after checking it as a
 * request for it), so "/" with index.php comes as "/index.php" and runs
 * it rather than serving its source. MK_OK (*s filled, strings in r's
 * memory), MK_DECLINED (no script), or 500 (memory short).
 */
int mk_gw_map_match(const struct mk_api *api, struct mk_request *r, const regex_t *re, size_t n_re,
                    const char *path, size_t path_len, struct mk_gw_script *s);

/*
 * Put a parsed header block on r's response: the status (Status, the NPH
 * status line, 302 for a client redirect, else 200), Content-Type,
 * Location and the other fields (the ones the server frames itself
 * dropped). Returns the status set, MK_DECLINED for a local redirect
 * (a Location path without Status, RFC 3875 6.2.2: nothing was set, the
 * caller serves h->location itself), or MK_ERR when a field cannot be
 * added (memory short, a line break): answer 502.
 */
int mk_gw_head_apply(const struct mk_api *api, struct mk_request *r, const struct mk_gw_head *h,
                     int nph);

/*
 * An internal redirect to a file (XSendfile): when h has an X-Accel-Redirect
 * field (a URL path, a query ignored) or an X-Sendfile field (an absolute
 * file path, which must lie under the document root: 403 otherwise), put
 * the rest of h on r's response (that field, Status, Content-Type and
 * Location left out) and answer with the file as the static handler does
 * (api->serve_file, ABI 3.4). MK_DECLINED when h has neither field;
 * otherwise what the content stage returns (MK_OK, a status; 502 for a
 * malformed value).
 */
int mk_gw_sendfile(const struct mk_api *api, struct mk_request *r, struct mk_gw_head *h);

/*
 * Note the upstream time of r for the logs: "upstream_ms" (api->note_set,
 * the logger's %{upstream_ms}n), the milliseconds since `start_ms`
 * (api->now_ms()). Nothing when the server has no notes (before 3.3).
 */
void mk_gw_note_upstream(const struct mk_api *api, struct mk_request *r, uint64_t start_ms);

/* ---- gw_log.c: a script's stderr for the site's error log ---- */

#define MK_GW_LOG_LINE 512  /* a longer stderr line is split */
#define MK_GW_LOG_HELD 2048 /* whole lines kept while the request is out of reach */

/*
 * The stderr of one script (CGI) or the STDERR records of one FastCGI
 * request, cut into lines of at most MK_GW_LOG_LINE bytes, each logged as
 * "<who>: <script>: <line>" with api->error_log (the error log of the
 * request's site, ABI 3.4), or with api->log (the server log) when the
 * request is over or the server has no error_log. While the request is
 * suspended (no request to name), whole lines are held, up to
 * MK_GW_LOG_HELD bytes (more go to the server log), and written once the
 * request is back.
 */
struct mk_gw_log {
    const char *who; /* "cgi", "fastcgi": a static string */
    size_t len, held_len;
    char name[128];
    char line[MK_GW_LOG_LINE];
    char held[MK_GW_LOG_HELD]; /* whole lines, each ending in '\n' */
};

void mk_gw_log_init(struct mk_gw_log *l, const char *who, const char *name, size_t name_len);
/*
 * Take `len` bytes of stderr (none: only write the held lines). `r`: the
 * request, live on this worker (its hook, or a callback while its body or
 * response streams), or NULL while it is suspended or over.
 */
void mk_gw_log_feed(const struct mk_api *api, struct mk_gw_log *l, struct mk_request *r,
                    const void *data, size_t len);
/* stderr ended (or the request ends): the held lines and a partial last line go out. */
void mk_gw_log_flush(const struct mk_api *api, struct mk_gw_log *l, struct mk_request *r);

/* ---- gw_spool.c: a request body of unknown length, kept whole ---- */

#define MK_GW_SPOOL_MEM 65536 /* kept in memory up to this, then in a temporary file */

/*
 * A request body whose length is not known before it ends (chunked, or
 * HTTP/2 without content-length), kept whole so that a script can be
 * given CONTENT_LENGTH, as nginx does: the first MK_GW_SPOOL_MEM bytes in
 * memory, the rest in a temporary file of $TMPDIR (else /tmp) that has no
 * name (O_TMPFILE, or unlinked at once). The server bounds it by the
 * site's MaxRequestBody. Zeroed: empty.
 */
struct mk_gw_spool {
    char *mem;
    size_t mem_len;
    int fd;        /* the temporary file, -1 (or 0 when zeroed: see fd_open) */
    bool fd_open;  /* fd is the spool's */
    uint64_t size; /* bytes kept */
    uint64_t off;  /* the next byte mk_gw_spool_read gives */
};

/* Keep `len` more bytes: MK_OK, or MK_ERR with errno (memory, the disk). */
int mk_gw_spool_add(struct mk_gw_spool *s, const void *data, size_t len);
/* The next bytes, at most cap, into buf: their count, 0 at the end, -1 with errno. */
ssize_t mk_gw_spool_read(struct mk_gw_spool *s, void *buf, size_t cap);
/* Bytes mk_gw_spool_read has still to give. */
uint64_t mk_gw_spool_left(const struct mk_gw_spool *s);
void mk_gw_spool_free(struct mk_gw_spool *s);
/*
 * A temporary file that has no name, mode 0600, in dir (NULL: $TMPDIR,
 * else /tmp): O_TMPFILE, or on a file system without it a file named
 * `prefix`-XXXXXX unlinked at once. Its descriptor (close-on-exec), or -1
 * with errno.
 */
int mk_gw_tmpfile(const char *dir, const char *prefix);

/*
 * Whether r's body has a length only known at its end: chunked
 * (Transfer-Encoding), or HTTP/2 with no content-length on a method that
 * carries a body (not GET, HEAD, OPTIONS, DELETE, TRACE).
 */
bool mk_gw_body_unsized(const struct mk_api *api, struct mk_request *r);
/* The same of the fields looked up: whether a Content-Length (cl) and a
   Transfer-Encoding (te) came. */
bool mk_gw_body_unsized_of(const struct mk_api *api, struct mk_request *r, bool cl, bool te);

#endif
