/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * request.h: one request on a connection (struct mk_request), its flags and
 * stages, and the functions of request.c (stages, plugins, request
 * objects), response.c (what a response is, whatever the protocol that
 * sends it) and static.c (static files).
 *
 * A request is its own object, from the worker's free list (HTTP/1.1 has
 * one at a time, HTTP/2 may have several); the protocol (proto.h) creates
 * and ends it. It belongs to its connection's worker and is touched by no
 * other thread: a suspension handle (task.h) only names it, and the
 * struct stays allocated while such handles are out.
 */
#ifndef MK_SERVER_REQUEST_H
#define MK_SERVER_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <monkey/mk_plugin.h>

#include "../../core/list.h"
#include "../../core/memory.h"
#include "body.h"
#include "../http/http.h"
#include "../http/proxy_protocol.h"
#include "../http/route.h"

struct mk_config;
struct mk_conn;
struct mk_file;
struct mk_suspended;
struct mk_upgrade;
struct mk_site;
struct mk_worker;
struct mk_zentry;

/* Response body source. The two that read a file come last (>= MK_RESP_FILE). */
enum mk_resp_body {
    MK_RESP_NONE = 0,
    MK_RESP_MEM,
    MK_RESP_STREAM, /* pieces queued by the handler (api->stream_*) */
    MK_RESP_FILE,
    MK_RESP_PARTS, /* multipart/byteranges: runs of memory and of the file (struct mk_parts) */
};

/*
 * A multipart/byteranges body (static_ranges.h builds it in the request's
 * arena): runs in order, each from memory (a part's head, the closing
 * delimiter, a slice of a body compressed on the fly) or from the file of
 * r->fd (a part's bytes). A cursor tells what is sent; r->body_left counts
 * the bytes still to send. The protocols walk it with mk_response_parts_*.
 */
struct mk_parts_run {
    const char *mem; /* NULL: bytes of r->fd from `off` */
    uint64_t off;
    uint64_t len; /* never 0 */
};
struct mk_parts {
    unsigned n;    /* runs */
    unsigned i;    /* the current one */
    uint64_t done; /* its bytes already sent */
    struct mk_parts_run run[];
};

/* A queued piece of a streamed body: framing room, data, "\r\n". */
#define MK_PIECE_HDR 18 /* room for a chunk-size line ("%x\r\n") */
struct mk_piece {
    struct mk_piece *next;
    size_t len;        /* data bytes (the last piece: trailer bytes) */
    char *start, *end; /* bytes still to write, once framed */
    bool last;         /* the end of the body */
    bool framed;       /* start/end set by the protocol */
    char buf[];        /* MK_PIECE_HDR bytes, data, 2 bytes */
};

/* Request flags */
#define MK_REQ_KEEPALIVE 0x01u /* the connection stays open after this response */
#define MK_REQ_HEAD 0x02u      /* HEAD: headers only */
#define MK_REQ_CFG_REF 0x04u   /* counted in its worker's config users */
#define MK_REQ_CONTINUE_SENT 0x08u
#define MK_REQ_ACTIVE 0x10u       /* begun and not yet finished */
#define MK_REQ_BODY_READ 0x40u    /* the body asked for by a handler is complete */
#define MK_REQ_SUSPENDING 0x80u   /* the running hook called api->suspend() */
#define MK_REQ_COMPLETE 0x100u    /* the whole announced response was sent */
#define MK_REQ_PARKED 0x200u      /* suspended: waiting for api->resume() */
#define MK_REQ_ZOMBIE 0x400u      /* ended while handles were out: freed by the last resume */
#define MK_REQ_STREAM_END 0x800u  /* the streaming handler called stream_end */
#define MK_REQ_IDLE 0x1000u       /* a stream's queue is empty: waiting for its handler */
#define MK_REQ_PROCEEDING 0x2000u /* inside the stream's proceed callback */
#define MK_REQ_REDIRECTED 0x4000u /* started again by an internal redirect: a GET without body */
#define MK_REQ_FALLBACK 0x8000u   /* the path is the site's Fallback (applied once per start) */

/* Internal redirects (api->internal_redirect) one request may take: past it, 500. */
#define MK_REDIRECTS_MAX 10

/* The field names the server writes itself (mk_response_add_known). */
enum mk_resp_name {
    MK_RESP_ETAG = 0,
    MK_RESP_LAST_MODIFIED,
    MK_RESP_ACCEPT_RANGES,
    MK_RESP_CONTENT_RANGE,
    MK_RESP_ALLOW,
    MK_RESP_CACHE_CONTROL,
    MK_RESP_EXPIRES,
    MK_RESP_VARY,
    MK_RESP_CONTENT_ENCODING,
    MK_RESP_RETRY_AFTER,
};

/* Where a suspended request resumes. */
enum mk_stage {
    MK_STAGE_REQUEST = 1, /* request hook `stage_index` */
    MK_STAGE_CONTENT,     /* content hook `stage_index` */
    MK_STAGE_BODY,        /* r->handler, called again with the body */
    MK_STAGE_ROUTE,       /* the handler of r->route.route */
    MK_STAGE_STATIC,      /* the static handler (a file being compressed: static_compress.h) */
    MK_STAGE_RULES,       /* the site's rules again, after a RateLimit's delay (request_limit.c) */
};

/* A request's slot for one plugin (api->ctx_set). */
struct mk_req_ctx {
    void *ctx;
    void (*cleanup)(void *ctx);
};

/*
 * A request's trailer fields (body.c): "name: value\r\n" lines; while `raw`,
 * HTTP/1's trailer section as it came, until its end.
 */
struct mk_req_trailers {
    char *p;
    size_t len, cap;
    bool raw;
};

struct mk_request {
    struct mk_conn *conn;
    uint64_t gen;        /* distinguishes reuses of this struct (resume checks it) */
    uint32_t handles;    /* suspension handles not yet resumed: the struct must stay */
    struct mk_list node; /* in the worker's free or zombie list when not in use */
    struct mk_config *cfg;
    struct mk_site *site; /* never NULL: the default site until the Host is known */
    struct mk_arena arena;
    struct mk_http_head head;
    char *path; /* decoded, normalised (arena); NULL until known */
    size_t path_len;
    uint16_t flags;
    uint8_t stage; /* enum mk_stage while suspended */
    uint16_t stage_index;
    int status;
    struct timespec start;  /* head complete, wall clock (when a plugin logs) */
    uint64_t start_mono_us; /* the same instant, monotonic */
    /* api->upstream_wait: the microseconds waited on upstreams, the start
       of the wait under way (0: none), whether r waited at all */
    uint64_t upstream_us, upstream_since;
    bool upstream_any;
#ifdef MK_HAVE_METRICS
    /* the worker's loop clock (now_us) when r began and when its response
       started (0: not yet), for the histograms of runtime/metrics.h */
    uint64_t start_us, first_byte_us;
#endif
    /* body buffered for a content handler (malloc, freed at the end) */
    char *body;
    size_t body_len;
    size_t body_cap;
    const struct mk_plugin *handler; /* content plugin waiting for the body */
    const struct mk_plugin *plugin;  /* the plugin whose hook runs (or is suspended) */
    struct mk_suspended *task;       /* the queued task of a suspended hook, if any */

    /* response */
    const char *content_type;
    size_t content_type_len;
    char *extra_headers; /* "Name: value\r\n"..., arena */
    size_t extra_len;
    size_t extra_cap;
    struct mk_resp_field *fields; /* one per line of extra_headers, in order (arena) */
    unsigned n_fields, fields_cap;
    enum mk_resp_body body_type;
    const char *mem;
    size_t mem_len;
    struct mk_file *file; /* a file cache entry the body comes from (fd borrowed) */
#ifdef MK_HAVE_COMPRESS
    /* a compressed body (static_compress.h) the memory body points into, held;
       never set together with `file` */
    struct mk_zentry *zbody;
#endif
    struct mk_parts *parts; /* the runs of a MK_RESP_PARTS body (arena); else unused */
    void *owned;            /* a body buffer to free() at the end */
    int fd;
    off_t file_off;
    uint64_t body_left; /* body bytes still to send */
    uint64_t content_length;
    uint64_t bytes_sent; /* head and body */
    uint32_t head_bytes; /* of which the response head */
    /* streamed body: pieces in order, bytes queued, the handler's callback */
    struct mk_piece *q_head, *q_tail;
    size_t queued;
    struct mk_piece *spare; /* api->stream_buffer()'s, not yet committed */
    mk_proceed_cb proceed;
    void *proceed_arg;
    bool chunked; /* framed with chunked coding (the protocol decides) */
    /* api->stream_length(): the stream's length is content_length, announced
       as such; stream_left of it is still to be queued */
    bool stream_sized;
    uint64_t stream_left;
    /* api->interim(), HTTP/1: the bytes of an interim answer the socket did
       not take, written before the response head (arena) */
    char *interim_rest;
    size_t interim_rest_len;

    struct mk_body_stream bs; /* the body streamed to its handler (body.c) */
    /* the trailer fields after the body (api->request_trailers; body.c),
       in the arena; NULL until one comes */
    struct mk_req_trailers *trailers;
    /* the plugins' context slots (api->ctx_set), one per loaded plugin, in
       the arena; NULL until a plugin stores one, cleared at the end */
    struct mk_req_ctx *ctx;
    /* the site's route table: the route that took the request (its handler
       is in charge while route.route is set), its parameters, and the
       methods of every route matching the path (the Allow of a 405) */
    struct mk_route_match route;
    /* api->takeover(): who gets the connection once the 101 is sent (arena) */
    struct mk_upgrade *upgrade;
    /* the protocol's own state of r (HTTP/2: its stream), or NULL */
    void *proto_data;
    /* the :protocol of an HTTP/2 extended CONNECT (RFC 8441), which runs as
       a GET of its :path (api->request_protocol); empty for any other request */
    struct mk_str protocol;
    /* api->note_set(): named values for the logs, newest first (arena) */
    struct mk_note *notes;
    /* api->internal_redirect(): the new target ("/path?query", arena) and its
       normalised path, set until the hook's MK_OK starts the request again */
    char *redirect;
    size_t redirect_len;
    char *redirect_path;
    size_t redirect_path_len;
    uint8_t redirects; /* internal redirects taken, at most MK_REDIRECTS_MAX */
    /* the head's method and target as the client sent them, kept by the
       first internal redirect (api->client_method, client_target) */
    struct mk_str client_method, client_target;
#ifdef MK_HAVE_RULES
    /* the site rule whose ResponseHeader lines the response gets when it
       is sent (request_rules.c); NULL: none */
    const struct mk_rule *rule_headers;
    /* the rule whose RateLimit held r back (its delay), and until when (ms,
       monotonic): the rules asked again do not count r twice */
    const struct mk_rule *rule_counted;
    uint64_t limit_due_ms;
    /* the site rule that took r when it has per-path settings (IndexFiles,
       CacheControl, MaxRequestBody, Timeout, SendTimeout: mk_request_index_files,
       static_cache.c, mk_request_max_body, mk_request_timeout); NULL: none */
    const struct mk_rule *rule_settings;
#endif
#ifdef MK_HAVE_REALIP
    /* the client a trusted proxy's field named (RealIPFrom, RealIPHeader),
       in the arena; NULL: the connection's (mk_request_client) */
    union mk_inet_addr *real_ip;
#endif
#ifdef MK_HAVE_REQID
    /* RequestId: r's ID (its field's value: the note request_id's copy),
       empty when off */
    struct mk_str req_id;
#endif
};

/* ---- request.c ----------------------------------------------------------- */

/* A new request on c, from the worker's free list: active, holding the worker's configuration. */
struct mk_request *mk_request_new(struct mk_conn *c);
/* End r (if still active) and give it back; kept while suspension handles are out. */
void mk_request_free(struct mk_request *r);
/* Free the worker's spare and zombie requests (worker teardown). */
void mk_request_pool_destroy(struct mk_worker *w);
void mk_request_run(struct mk_request *r);
#ifdef MK_HAVE_RULES
/*
 * The first of r's site rules that takes r (request_rules.c; the site has
 * rules, r a path): MK_DECLINED when none does; MK_OK when the response is
 * set up (Redirect, Return: the caller sends it); MK_AGAIN when r's path
 * was rewritten (ask again); MK_SUSPENDED when a RateLimit holds r back
 * (the caller parks it at MK_STAGE_RULES); else the error status to answer
 * with.
 */
int mk_request_rules(struct mk_request *r);
/* Apply r->rule_headers to r's response, once, as it is sent. */
void mk_request_rule_headers(struct mk_request *r);
/* The most body bytes r may send: its rule's MaxRequestBody, else the server's. */
uint64_t mk_request_max_body(const struct mk_request *r);
/* Its rule's DirectoryListing: 1 On, 0 Off, -1 none (the site's settings). */
int mk_request_listing(const struct mk_request *r);
/*
 * Its rule's SendTimeout (send) or Timeout, in ms; 0: it has none, the
 * server's applies. The protocols ask where r waits for its body, a
 * plugin or the client, never on the path of a request without a body
 * whose answer goes out at once.
 */
uint32_t mk_request_rule_timeout(const struct mk_request *r, bool send);
#define mk_request_timeout(r, send) ((r)->rule_settings ? mk_request_rule_timeout((r), (send)) : 0u)
/* The index files of r: its rule's IndexFiles, else its site's, else the server's. */
char *const *mk_request_index_files(const struct mk_request *r, size_t *n);
#else
#define mk_request_index_files(r, n) mk_conf_site_index_files((r)->site, (r)->cfg, (n))
#define mk_request_max_body(r) ((r)->cfg->max_body)
#define mk_request_listing(r) ((void) (r), -1)
#define mk_request_timeout(r, send) ((void) (r), (void) (send), 0u)
#endif
/* A request head given as its parts, not as text (an HTTP/2 header block). */
struct mk_request_parts {
    int version;                    /* the protocol's (20): the head keeps it */
    int refused;                    /* a status to answer at once (431, 503), or 0 */
    struct mk_str method, target;   /* :method; :path, or :authority for CONNECT */
    struct mk_http_header *headers; /* the n fields, Host first (from :authority) */
    unsigned n;
    bool names_are_tokens; /* as for mk_http_head_build */
};
/*
 * Run r from the parts of its head: answered `refused` at once when that
 * is set (the protocol could not keep the header block); otherwise its head
 * is built from the parts (mk_http_head_build: the rules and limits of an
 * HTTP/1.1 head) and r runs, or is answered with the status the build
 * chose. Whatever the outcome, r->head.version is the protocol's (the
 * build leaves 11), for every hook and log line. The views in `p` must
 * outlive r; `p` itself need not.
 */
void mk_request_run_parts(struct mk_request *r, const struct mk_request_parts *p);
struct mk_suspended *mk_request_suspend(struct mk_request *r);
/* Take back handle s of r, never given out (its task was refused). */
void mk_request_unsuspend(struct mk_request *r, struct mk_suspended *s);
void mk_request_resume(struct mk_suspended *s);
/* Free handle s once settled (its request no longer counts it); on its worker's thread. */
void mk_request_handle_free(struct mk_suspended *s);
/*
 * Worker teardown, after the plugins' exit() hooks and the last resumes:
 * free the handles never resumed (a plugin kept them past its request's
 * timeout, or past the stop). Their requests are zombies, freed next.
 */
void mk_request_handles_reclaim(struct mk_worker *w);
/* The suspended request is given up: drop its task if that has not started. */
void mk_request_drop_task(struct mk_request *r);
/*
 * The server gives r up (`why`: MK_CANCEL_TIMEOUT or MK_CANCEL_GONE): run
 * the cancel callbacks of its handles not yet resumed (api->suspend_cancel),
 * each once. Returns the status the first of them asked for with
 * MK_CANCEL_TIMEOUT, else 0. On r's worker.
 */
int mk_request_cancel(struct mk_request *r, int why);
/*
 * Timeout ended the wait of a parked request (a plugin, or a compression
 * job, holds it): drop its task, tell its holders, answer for them (503,
 * or the status their cancel callback chose). The one decision for every
 * protocol.
 */
void mk_request_expire_held(struct mk_request *r);
void mk_request_body_ready(struct mk_request *r);
/* A streamed body's handler stopped it with `rc` (a status, MK_ERR): handle it as
   the handler's result. */
void mk_request_body_result(struct mk_request *r, int rc);
void mk_request_error(struct mk_request *r, int status);
void mk_request_end(struct mk_request *r);
/* api->internal_redirect (the contract is in mk_plugin.h). */
int mk_request_redirect(struct mk_request *r, const char *location);

#ifdef MK_HAVE_REQID
/* ---- request_trace.c: RequestId, TraceContext ----------------------------- */

/*
 * Give r its request ID and trace context (the server keys RequestId,
 * RequestIdFrom, TraceContext): the fields are set in r's head, so that
 * every reader of its fields (the gateways, the proxy, Duda) sees them.
 * MK_OK, or MK_ERR when memory is short (answer 503).
 */
int mk_request_trace(struct mk_request *r);
/* Before the head of r, which has an ID, goes out: echo it (RequestIdEcho). */
void mk_request_trace_respond(struct mk_request *r);
/*
 * r's request ID, one made now (the worker's next, as RequestId makes them)
 * when it has none (RequestId Off), also set as its note request_id for the
 * access log; empty when memory is short. For a 5xx's error-log line.
 */
struct mk_str mk_request_trace_id(struct mk_request *r);
#endif

/* ---- response.c: what a response is, whatever the protocol that sends it - */

/* Forget the response body file: release a cache entry or close a descriptor, and
   release a compressed body. */
void mk_response_drop_file(struct mk_request *r);
/* Add "Name: value" to r's response: MK_OK, or MK_ERR for a name or value that would
   break the head (empty name, CR, LF, a colon in the name) or no memory. */
int mk_response_add_header(struct mk_request *r, const char *name, size_t name_len,
                           const char *value, size_t value_len);
/* Add a field the server writes itself: the value was made by the server or checked
   when it was configured (no CR or LF), so it is not checked again. MK_OK or MK_ERR
   (no memory). */
int mk_response_add_known(struct mk_request *r, enum mk_resp_name name, const char *value,
                          size_t value_len);
/* Append complete lines ("Name: value\r\n"...) the server wrote itself, with
   their records `fields` (n of them, offsets from `lines`): nothing is
   checked. MK_OK, or MK_ERR when memory is short. */
int mk_response_add_lines(struct mk_request *r, const char *lines, size_t len,
                          const struct mk_resp_field *fields, unsigned n);
void mk_response_error(struct mk_request *r, int status);
#ifdef MK_HAVE_RULES
/* Drop the extra fields named `name` (len bytes, any case) from r's response. */
void mk_response_field_remove(struct mk_request *r, const char *name, size_t len);
#endif
/* Forget the response set up so far (status, type, headers, body): r answers afresh. */
void mk_response_reset(struct mk_request *r);
/* Whether r's status forbids a body (1xx, 204, 304): its head announces none. */
static inline bool mk_response_no_body(const struct mk_request *r)
{
    return r->status < 200 || r->status == 204 || r->status == 304;
}
/* Let go of r's body source (mk_response_omit_body): r->body_type becomes MK_RESP_NONE. */
void mk_response_drop_body(struct mk_request *r);
/*
 * Whether r's response goes out as its head alone: a HEAD request, a status
 * that forbids a body (mk_response_no_body), no body source, or an empty
 * body of known length. Then the body source is let go (a stream's handler
 * is told, a file released) and r->body_type is MK_RESP_NONE. Asked once
 * the head is built, which reads the body's kind (chunked or a length).
 * The one decision for every protocol.
 */
static inline bool mk_response_omit_body(struct mk_request *r)
{
    /* 200 first: the common answer costs one comparison of its status */
    if (!(r->flags & MK_REQ_HEAD) && (r->status == 200 || !mk_response_no_body(r)) &&
        r->body_type != MK_RESP_NONE && (r->content_length > 0 || r->body_type == MK_RESP_STREAM)) {
        return false;
    }
    mk_response_drop_body(r);
    return true;
}
/* Streams (api->stream_*): see mk_plugin.h for the contracts. */
#define MK_STREAM_HIGH_WATER (64u * 1024u) /* queued body bytes per request */
int mk_response_stream_start(struct mk_request *r, mk_proceed_cb proceed, void *arg);
int mk_response_stream_length(struct mk_request *r, uint64_t len);
/* api->interim (the contract is in mk_plugin.h). */
int mk_response_interim(struct mk_request *r, int status, const char *fields);
int mk_response_stream_write(struct mk_request *r, const void *data, size_t len);
int mk_response_stream_end(struct mk_request *r, const char *trailers);
void *mk_response_stream_buffer(struct mk_request *r, size_t len);
int mk_response_stream_commit(struct mk_request *r, size_t n);
/* Free the queue; a handler that had not ended gets proceed(NULL, arg). */
void mk_response_stream_cancel(struct mk_request *r);
/* Free the first piece, written in full. */
void mk_response_stream_pop(struct mk_request *r);
/* Copy the next `len` bytes of r's multipart body (at most r->body_left)
   into buf, moving its cursor and r->body_left on: MK_OK, or MK_ERR when
   the file shrank. */
int mk_response_parts_copy(struct mk_request *r, char *buf, size_t len);
/* Move the cursor of r's multipart body and r->body_left `len` bytes on. */
void mk_response_parts_advance(struct mk_request *r, uint64_t len);
/* The bytes from the cursor of r's multipart body to the end of its next
   file run and the memory runs after it (the rest when no file run is
   left): what one HTTP/2 frame carries with a single file range. */
uint64_t mk_response_parts_span(const struct mk_request *r);

/* ---- request.c, request_log.c: what the plugin API asks of a request ------- */

/*
 * The client's address, the one every reader takes (api->remote_addr and
 * remote_sockaddr: the access rules, the logs, the gateways' REMOTE_ADDR,
 * Duda; the task queue's per-client bound): the address a trusted proxy's
 * field named (RealIPFrom), else the connection's (mk_conn_client: the
 * PROXY header's, else the TCP peer). Valid while r is.
 */
const struct sockaddr *mk_request_client(const struct mk_request *r);

/*
 * The value of r's first header field `name` (any case), NULL when absent;
 * a request started again by an internal redirect has no body fields
 * (Content-Length, Transfer-Encoding, Content-Type). (api->header)
 */
const char *mk_request_header(const struct mk_request *r, const char *name, size_t *len);
/* api->serve_file: r answered from a file of its site (see mk_plugin.h). */
int mk_request_serve_file(struct mk_request *r, const char *path);
/* api->error_log: a line of r's for its site's error log (see request_log.c). */
void mk_request_error_log(struct mk_request *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The error-log line of a 5xx r answers, as its head goes out (see request_log.c). */
void mk_request_log_5xx(struct mk_request *r) __attribute__((cold));

/* ---- response_set.c: what a handler sets of its response -------------------- */

void mk_response_set_status(struct mk_request *r, int status);
void mk_response_set_type(struct mk_request *r, const char *type);
void mk_response_set_body_static(struct mk_request *r, const void *data, size_t len);
int mk_response_set_body(struct mk_request *r, const void *data, size_t len);
void mk_response_set_body_file(struct mk_request *r, int fd, off_t offset, uint64_t len);
void mk_response_set_body_owned(struct mk_request *r, void *data, size_t len);
/* api->stream_abort: end r's streamed response cut short (MK_OK), MK_ERR if it is none. */
int mk_response_stream_abort(struct mk_request *r);

/* ---- request_ctx.c: what plugins keep on a request ------------------------ */

/* Plugin slot `slot`'s context of r (api->ctx_set): MK_OK, MK_ERR (no such slot, memory). */
int mk_request_ctx_set(struct mk_request *r, size_t slot, void *ctx, void (*cleanup)(void *ctx));
void *mk_request_ctx_get(const struct mk_request *r, size_t slot);
/* Run the cleanups of r's context slots and empty them (the request ends or starts again). */
void mk_request_ctx_clear(struct mk_request *r);
/*
 * Set note `name` of r (both copied into the request's memory); a later
 * note of the same name hides an earlier one. MK_ERR when memory is short
 * or name is empty. (api->note_set)
 */
int mk_request_note_set(struct mk_request *r, const char *name, const char *value);
/* Note `name` (nlen bytes, not empty) of r set to value[0, vlen): the value's
   copy (NUL terminated, as long as r's arena), NULL when memory is short. */
const char *mk_request_note_add(struct mk_request *r, const char *name, size_t nlen,
                                const char *value, size_t vlen);
/* The value of note `name` of r (NUL terminated, *len set), NULL when none. (api->note) */
const char *mk_request_note(const struct mk_request *r, const char *name, size_t *len);

/*
 * The site's files: the last content handler of every request, and what
 * makes a directory's path its index file's. The static handler gives them
 * to the request layer at start (mk_request_files; static/static.c), so
 * request.c calls up only through this table.
 */
struct mk_request_files {
    /* Answer r from its site's files: as a content hook returns. */
    int (*serve)(struct mk_request *r);
    /*
     * r's path ends in '/': when it names a directory with an index file,
     * make r's path the index file's and return MK_OK; MK_DECLINED when
     * there is none, 503 when memory is short.
     */
    int (*index)(struct mk_request *r);
};
/* Give the request layer the site's files; once, before the first request. */
void mk_request_files(const struct mk_request_files *files);

#endif
