/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * mk_plugin.h: the plugin API. A plugin sees only this header.
 *
 * A plugin is one exported constant `struct mk_plugin`, named `mk_plugin`
 * in a shared object (listed in plugins.load as a path) or
 * `mk_plugin_<name>` when built into the binary (listed by name). It starts
 * with MK_PLUGIN_ABI_INIT: the ABI version it was built for and the size of
 * the struct it saw (see "ABI versions" below and docs/plugin-api.md).
 *
 * The server calls a plugin only through the hooks below and a plugin
 * reaches the server only through the `struct mk_api` table it receives in
 * init(). Requests and connections are opaque.
 *
 * Threads: init(), exit(), reload_prepare(), reload_commit(), site_init()
 * and site_free() run on the thread that controls the server; every other
 * hook runs on a worker thread, several workers at once. Hooks must not
 * block: a worker serves thousands of connections. A reload runs while the
 * workers go on serving, requests of the old configuration included: so
 * request hooks read settings from their request's configuration (the site
 * data site_init() built for it, see api->site_data), never from state
 * that reload_commit() changes. A request then sees one configuration for
 * its whole life, and a reload writes nothing a worker reads.
 *
 * Stages of a request, in order (every hook is optional):
 *   conn_accept    a connection was accepted       MK_OK, or MK_ERR to close it
 *   request        a request head was parsed       MK_OK to go on, an HTTP status
 *                                                  (>= 400) to answer with it, or
 *                                                  MK_ERR to close the connection
 *   content        produce the response            MK_DECLINED (not mine),
 *                                                  MK_OK (response set up),
 *                                                  MK_AGAIN (call me again once
 *                                                  the request body is read, or,
 *                                                  after api->body_stream, hand
 *                                                  it to my callback as it
 *                                                  arrives), an HTTP status, or
 *                                                  MK_ERR
 *   request_done   the response was sent (or the   -
 *                  connection failed while sending)
 *   conn_close     the connection is closing       -
 * Plugins are called in plugins.load order. Between the request and the
 * content stage the site's route table (api->route_add) runs the handler
 * of the route that takes the path and method; for the other requests the
 * first content hook that does not decline owns the response. The built-in
 * static file handler runs last. A directory's path with an index file
 * (IndexFiles) never reaches the content hooks: the request starts again
 * for the index file's path first (request hooks, routes), keeping its
 * method and body.
 *
 * A request or content hook may also suspend the request (api->suspend(),
 * then return MK_SUSPENDED) to finish its work elsewhere (a thread, another
 * event source) and resume it later with api->resume(); api->task() does both
 * around a function run on the server's task threads. The continuation runs
 * on the request's worker and its return value counts as the hook's.
 *
 * State: two servers may run in one process (monkey.h), with the same
 * plugins. A plugin keeps its mutable state in a context the server stores
 * for it, one per server (api->self_set in init(), api->self in every later
 * hook), not in file statics; what it carries from one hook of a request to
 * the next goes in the request's context slot (api->ctx_set, ctx_get),
 * released when the request ends.
 *
 * Configuration: a plugin declares its keys (conf_schema, see
 * mk_schema.h); the server reads and checks its file and its site
 * sections for every configuration it builds and hands it typed structs
 * (api->plugin_conf, api->site_conf) that live and die with that
 * configuration.
 *
 * Sites: a plugin lists the site-file sections it reads (site_sections);
 * site_init() is called for every site of every configuration built (start
 * and reload) and stores what the request hooks need; api->site_data()
 * returns it for the request's site.
 *
 * Reload is all or nothing: every plugin reads its own files into a pending
 * state (reload_prepare), the server builds the new configuration (site_init
 * for every site, which copies what requests need from the pending state)
 * and binds its sockets, and only when all of that succeeded does anything
 * change: every plugin's reload_commit(1) makes its pending state the one
 * later configurations are built from, and the new configuration goes in
 * force: once the reload has returned, every new request gets it. If
 * anything failed, reload_commit(0) discards it and the running
 * configuration stays whole.
 *
 * Transport: a plugin may provide `transport`, a named byte layer that a
 * listener selects with a second word on its Listen line
 * ("Listen 8443 tls"); the rest of the line are the listener's options for
 * it ("Listen 8443 xor key=7" for the test transport tests/plugins/xor.c;
 * the tls plugin takes none). Plain sockets are the built-in transport
 * "plain", whose one option is "h2c". A transport may have a handshake, keep bytes of its own
 * (pending) and need the other direction than the call it serves (see
 * struct mk_transport).
 *
 * Takeover: after answering 101 Switching Protocols (api->takeover) a
 * plugin owns the connection's bytes (WebSocket and the like): it reads
 * and writes them through the transport, on the owning worker, with its
 * own idle timeout; HTTP is out of the picture from then on.
 *
 * Event loop: a hook may start timers (api->timer_start), watch its own
 * descriptors (api->fd_watch: pipes, upstream sockets) and wait for child
 * processes (api->child_watch) on the loop of the worker it runs on. The
 * callbacks run on that worker, between events, and must not block either.
 * Handles belong to that worker: calls from any other thread (init(), a
 * task, another worker) are refused; go through api->worker_call() to reach
 * a worker from elsewhere. What is still running when the worker exits is
 * released after worker_exit() without callbacks; watched descriptors are
 * not closed (they stay the plugin's). To answer a request from a callback,
 * suspend the request in its hook and resume it from the callback.
 */
#ifndef MONKEY_MK_PLUGIN_H
#define MONKEY_MK_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "mk_common.h"
#include "mk_schema.h"

/* off_t and time_t cross this API (sendfile, set_body_file, now, started):
   the server is built with 64-bit ones on every target, and so must a plugin
   be (on 32-bit targets such as armhf: -D_FILE_OFFSET_BITS=64 -D_TIME_BITS=64). */
_Static_assert(sizeof(off_t) == 8, "build Monkey plugins with -D_FILE_OFFSET_BITS=64");
_Static_assert(sizeof(time_t) == 8, "build Monkey plugins with -D_TIME_BITS=64");

/*
 * ABI versions. The major changes when a built plugin would misread the
 * structs (a field removed, moved or changed): the server refuses a plugin
 * of another major. The minor changes when fields are only appended to
 * struct mk_plugin or struct mk_api: such a plugin loads on any server of
 * the same major.
 * - A plugin built for an older minor has a smaller struct mk_plugin (its
 *   `size`): the hooks past it count as NULL.
 * - A plugin built for a newer minor loads only if it leaves every hook
 *   this server does not know NULL (zero bytes past the server's struct).
 * - A plugin that calls a function of struct mk_api added in a later minor
 *   checks it first with MK_API_HAS(api, name): an older server lacks it.
 */
#define MK_PLUGIN_ABI_MAJOR 3
#define MK_PLUGIN_ABI_MINOR 20

/* The first fields of every plugin's struct mk_plugin (see MK_PLUGIN_DEFINE). */
#define MK_PLUGIN_ABI_INIT                                                                         \
    .abi_major = MK_PLUGIN_ABI_MAJOR, .abi_minor = MK_PLUGIN_ABI_MINOR,                            \
    .size = sizeof(struct mk_plugin)

/* True when the server's function table has `fn` (a field of struct mk_api). */
#define MK_API_HAS(api, fn)                                                                        \
    (offsetof(struct mk_api, fn) + sizeof((api)->fn) <= (api)->size && (api)->fn != NULL)

/* A request or content hook handed the request over (see api->suspend). */
#define MK_SUSPENDED (-4)

/* Readiness and interest bits of api->fd_watch(). */
#define MK_LOOP_READ 0x01u  /* readable, or the peer hung up (a read tells) */
#define MK_LOOP_WRITE 0x02u /* writable */
#define MK_LOOP_ERROR 0x04u /* reported only: error or hang-up on the descriptor */

struct mk_loop_timer; /* api->timer_start() */
struct mk_loop_fd;    /* api->fd_watch() */
struct mk_loop_child; /* api->child_watch() */

/* A timer fired; `t` may be stopped here (a repeating timer stops itself so). */
typedef void (*mk_loop_timer_cb)(struct mk_loop_timer *t, void *arg);
/* `fd` is ready (MK_LOOP_* bits); `h` may be modified or unwatched here. */
typedef void (*mk_loop_fd_cb)(struct mk_loop_fd *h, int fd, uint32_t ready, void *arg);
/*
 * Child `pid` exited and was reaped: `status` as waitpid(2) gives it
 * (WIFEXITED, WEXITSTATUS...), or -1 when something else reaped it.
 */
typedef void (*mk_loop_child_cb)(pid_t pid, int status, void *arg);

struct mk_request;
struct mk_conn;
struct mk_conf;      /* a parsed configuration file (the indented format) */
struct mk_config;    /* a configuration of the server (see config_get) */
struct mk_server;    /* a server of the process (api->server, thread_serve) */
struct mk_site;      /* a virtual host of a configuration */
struct mk_suspended; /* a suspended request, until it is resumed */
struct mk_plugin;

/*
 * The continuation of a suspended request. It runs on the request's worker;
 * what it returns counts as the result of the hook that suspended. `r` is
 * NULL when the request is gone (timed out, connection lost): the
 * continuation must then only release `arg`.
 */
typedef int (*mk_resume_cb)(struct mk_request *r, void *arg);

/* Why the server gave up a suspended request (api->suspend_cancel, ABI 3.9). */
#define MK_CANCEL_TIMEOUT 1 /* Timeout ended the wait: the server answers the client now */
#define MK_CANCEL_GONE 2    /* the client hung up or reset the stream, or the server stops */
/*
 * The server gave up the request of handle `s` (see api->suspend_cancel).
 * With MK_CANCEL_TIMEOUT the return value is the status the server answers
 * (504 from a gateway whose backend is silent; 0 for the default, 503);
 * otherwise it is ignored.
 */
typedef int (*mk_cancel_cb)(struct mk_suspended *s, int why, void *arg);

/*
 * A streamed response's callback (api->stream_start). It runs on the
 * request's worker when the queue has drained and the connection can take
 * more: write pieces (stream_write) until it returns MK_AGAIN, or end the
 * body (stream_end), or write nothing and come back later from another
 * event. `r` is NULL when the request is gone before stream_end (connection
 * lost, HEAD, 304): the callback must then only release `arg`.
 */
typedef void (*mk_proceed_cb)(struct mk_request *r, void *arg);

/* Events of a streamed request body (api->body_stream). */
#define MK_BODY_DATA 0  /* `data`, `len`: the next decoded bytes */
#define MK_BODY_END 1   /* the body is complete (no data) */
#define MK_BODY_ABORT 2 /* the body will not complete: r is NULL */

/*
 * A streamed request body's callback (api->body_stream), on the request's
 * worker. MK_BODY_DATA: `data` is valid during the call only. Return MK_OK
 * (consumed: the bytes leave the window), MK_AGAIN (kept: they count
 * against the window until api->body_consume()), or an HTTP status or
 * MK_ERR to stop reading and answer with it (no further call).
 * MK_BODY_END: the whole body was delivered; the result counts as the
 * content hook's (MK_OK, a status, MK_SUSPENDED, MK_ERR). MK_BODY_ABORT,
 * with r NULL, once: the request ends first (the client stopped sending or
 * hung up, a body over MaxRequestBody, bad chunked framing, the server
 * stops); release `arg` and stop anything that would use the request.
 */
typedef int (*mk_body_cb)(struct mk_request *r, int event, const char *data, size_t len, void *arg);

/*
 * A route's handler (api->route_add): called instead of the content hooks
 * for a request whose path and method the route takes, with the `arg`
 * given to route_add(). It returns what a content hook returns: MK_OK,
 * MK_AGAIN (call me again once the body is read), MK_SUSPENDED, an HTTP
 * status, MK_ERR, or MK_DECLINED (as if no route had matched: a directory's
 * index file, the site's Fallback, then the content hooks and static files).
 */
typedef int (*mk_route_cb)(struct mk_request *r, void *arg);

/* Where a plugin's routes go while its routes hook runs (ABI 3.11; api->route_table_add). */
struct mk_route_table;

/* Method sets of api->route_add(). A GET route answers HEAD too. */
#define MK_ROUTE_GET 0x0002u
#define MK_ROUTE_HEAD 0x0004u
#define MK_ROUTE_POST 0x0008u
#define MK_ROUTE_PUT 0x0010u
#define MK_ROUTE_DELETE 0x0020u
#define MK_ROUTE_OPTIONS 0x0040u /* without it the server answers OPTIONS from the table */
#define MK_ROUTE_PATCH 0x0080u
#define MK_ROUTE_TRACE 0x0100u
#define MK_ROUTE_ANY 0xffffffffu /* every method, unknown ones included */

/* Statistics of the whole server and of each worker (api->stats). */
struct mk_server_stats {
    time_t started;       /* when the server started */
    unsigned workers;     /* worker threads */
    unsigned connections; /* open now (refused ones excluded) */
    uint64_t requests;    /* completed since start */
    uint64_t bytes_out;   /* response bytes sent since start */
};

struct mk_worker_stats {
    unsigned connections;
    uint64_t requests;
    uint64_t bytes_out;
};

/* HTTP/2 of the whole server (api->h2_stats, ABI 3.3): all zero without it. */
struct mk_h2_stats {
    unsigned connections;   /* speaking HTTP/2 now */
    unsigned streams;       /* their streams open now */
    uint64_t streams_total; /* streams opened since start */
};

/*
 * Static files compressed on the fly, the whole server's
 * (api->compress_stats, ABI 3.8): what the workers' caches hold now and
 * what happened since start. All zero when no site compresses.
 */
struct mk_compress_stats {
    uint64_t bytes;        /* held, against CompressCache (per worker) */
    unsigned entries;      /* files (per coding) held or being compressed */
    uint64_t hits;         /* answers from a compressed copy kept */
    uint64_t compressions; /* files compressed (each once per worker and coding) */
    uint64_t waits;        /* requests that waited for another's compression */
    uint64_t evictions;    /* copies dropped to make room */
    uint64_t skipped;      /* answers sent unencoded: no room, task queue full */
};

/*
 * The supervisor that runs this server as its child (api->supervisor_stats,
 * ABI 3.4): its pid, how many times it restarted the server after a crash,
 * and when and why the last one happened (last_crash 0 and an empty reason
 * before the first).
 */
struct mk_supervisor_stats {
    long pid;
    unsigned restarts;
    time_t last_crash;
    char last_crash_reason[96]; /* "signal 11 (SIGSEGV), core dumped" */
};

/*
 * The request counters of one site (api->site_metrics, ABI 3.17), summed over
 * the workers. The classes: protocol 0 HTTP/1.x, 1 HTTP/2; method 0 GET and
 * HEAD, 1 POST, 2 any other; status 0..4 for 1xx..5xx. The histograms have
 * the upper bounds MK_METRICS_BOUNDS_US (microseconds) and a last bucket
 * without bound; each bucket counts its own requests (not cumulative).
 */
#define MK_METRICS_PROTOS 2
#define MK_METRICS_METHODS 3
#define MK_METRICS_STATUSES 5
#define MK_METRICS_BOUNDS_US                                                                       \
    {                                                                                              \
        5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000     \
    }
#define MK_METRICS_BUCKETS 12 /* the 11 bounds and the last */

struct mk_metrics_histogram {
    uint64_t buckets[MK_METRICS_BUCKETS];
    uint64_t sum_us; /* of every duration counted */
};

struct mk_site_metrics {
    const char *site; /* its label: the first ServerName; valid while the server lives */
    uint64_t requests[MK_METRICS_PROTOS][MK_METRICS_METHODS][MK_METRICS_STATUSES];
    uint64_t bytes[MK_METRICS_PROTOS][MK_METRICS_METHODS][MK_METRICS_STATUSES]; /* head and body */
    struct mk_metrics_histogram first_byte; /* from the request's first byte to the response's */
    struct mk_metrics_histogram last_byte;  /* to the request's end */
};

#define MK_METRICS_H2_ERRORS 15 /* the 14 error codes of RFC 9113 and "other" */

/*
 * Connections and reloads of the whole server since start
 * (api->server_metrics, ABI 3.17).
 */
struct mk_server_metrics {
    uint64_t accepted;        /* connections taken in and served */
    uint64_t refused;         /* over MaxConnections: answered 503, or closed at once */
    uint64_t reloads;         /* reloads put in force */
    uint64_t reload_failures; /* reloads refused (the configuration in force stays) */
    /* HTTP/2 (zeros without it): RST_STREAM frames sent and received, and
       GOAWAY frames sent by their error code (RFC 9113 7: NO_ERROR 0 to
       HTTP_1_1_REQUIRED 13; MK_METRICS_H2_ERRORS - 1: any other) */
    uint64_t h2_resets_sent;
    uint64_t h2_resets_received;
    uint64_t h2_goaways_sent[MK_METRICS_H2_ERRORS];
};

/*
 * The states of api->conn_states (ABI 3.18), the indexes of its array:
 * reading a request (a new connection's first head, a head, a body, a body
 * skipped, a PROXY header), writing (a response under way, a plugin holding
 * the request included), idle (between requests, KeepAliveTimeout running),
 * in the transport's handshake (TLS), taken over by a plugin after a 101
 * (WebSocket), closing (the lingering close). HTTP/2 connections count by
 * the same rule: idle once their streams are done.
 */
#define MK_CSTATE_READING 0
#define MK_CSTATE_WRITING 1
#define MK_CSTATE_IDLE 2
#define MK_CSTATE_HANDSHAKE 3
#define MK_CSTATE_TAKEOVER 4
#define MK_CSTATE_CLOSING 5
#define MK_CSTATES 6

/*
 * The rate limits of the configuration in force (api->ratelimit_stats, ABI
 * 3.19): the RateLimit lines of its [RULE] sections, each one table for all
 * the workers, summed. A reload makes new tables: the counts start again.
 */
struct mk_ratelimit_stats {
    unsigned limits;    /* rules with a RateLimit */
    uint64_t keys;      /* the keys their tables hold at most */
    uint64_t evictions; /* keys evicted while their bucket still held a limit */
};

/*
 * A plugin's own metrics (api->metric_family and what follows, ABI 3.20).
 * A family is a name, a kind, a help text and a fixed list of label names;
 * its series are the label values, which come from the configuration (an
 * upstream group, a backend's address), never from a request. Declared on
 * the controlling thread (init, site_init, reload_prepare), they live as
 * long as the server: declaring them again gives the same ids, so a reload
 * only adds some. The counts are kept per worker (no lock, no shared cache
 * line) and summed when read.
 *
 * An id of -1 (a refused declaration, a server without MK_METRICS, a
 * configuration only checked) is taken by every call, which then does
 * nothing: a plugin never needs to test it.
 */
#define MK_METRIC_COUNTER 0   /* only goes up: the name ends in _total */
#define MK_METRIC_GAUGE 1     /* a level: per-worker deltas summed, or read by a callback */
#define MK_METRIC_HISTOGRAM 2 /* durations in microseconds, shown in seconds (_seconds) */

#define MK_METRIC_LABELS_MAX 4        /* label names of a family */
#define MK_METRIC_BOUNDS_MAX 15       /* upper bounds of a histogram, the +Inf bucket apart */
#define MK_METRIC_LABEL_VALUE_MAX 256 /* bytes of a label value, the NUL apart */

/* A gauge's level, read at the scrape (api->metric_gauge_cb): any thread, must not block. */
typedef int64_t (*mk_metric_read_cb)(void *arg);

/* A family as declared (api->metric_family_info). Valid while the server lives. */
struct mk_metric_info {
    const char *name; /* "monkey_proxy_upstream_requests_total" */
    const char *help;
    int kind;          /* MK_METRIC_* */
    unsigned n_labels; /* names in labels[] */
    const char *labels[MK_METRIC_LABELS_MAX];
    unsigned n_bounds;                        /* histograms: bounds_us[] in use */
    uint64_t bounds_us[MK_METRIC_BOUNDS_MAX]; /* increasing, microseconds */
    unsigned n_series;                        /* series declared so far */
};

/* A series summed over the workers (api->metric_value, api->metric_read). */
struct mk_metric_value {
    const char *values[MK_METRIC_LABELS_MAX]; /* its label values, as the family's labels */
    uint64_t value; /* counter; a gauge as int64_t (two's complement of the sum) */
    /* histograms: each bucket's own count (not cumulative), the last one
       past every bound (index n_bounds); the sum of the durations */
    uint64_t buckets[MK_METRIC_BOUNDS_MAX + 1];
    uint64_t sum_us;
    uint64_t count; /* histograms: the durations counted */
};

/* Commands of api->command(). */
#define MK_CMD_RELOAD 1      /* like SIGHUP */
#define MK_CMD_REOPEN_LOGS 2 /* like SIGUSR1 */
#define MK_CMD_STOP 3        /* like SIGTERM: graceful */

enum mk_plugin_log_level {
    MK_PLUGIN_LOG_ERROR = 0,
    MK_PLUGIN_LOG_WARN,
    MK_PLUGIN_LOG_INFO,
    MK_PLUGIN_LOG_DEBUG
};

/* Flags of transport writes. */
#define MK_IO_MORE 0x1 /* more data follows at once: hold back a partial segment */

/* Directions a transport waits for (api->conn_io_want). */
#define MK_IO_WANT_READ 0x1u  /* the call can go on once the socket is readable */
#define MK_IO_WANT_WRITE 0x2u /* the call can go on once the socket is writable */

/*
 * A byte layer under HTTP. Each call returns a byte count, 0 for end of
 * stream (read), or -1 with errno set. EAGAIN means "call again once the
 * socket is ready": in the same direction as the call, unless the
 * transport said otherwise with api->conn_io_want(c, MK_IO_WANT_*) before
 * returning (a TLS read that must write first). The connection's
 * descriptor is api->conn_fd(c).
 *
 * Versions: the fields after `close` were added in ABI 3.2, `var` and
 * `sendfile_copies` in 3.3, `check_sites` in 3.10. The server reads a
 * field only from a plugin built for its minor or later (its abi_minor):
 * for an older plugin it counts as NULL, whatever its struct holds. Later
 * fields will be appended the same way, never inserted.
 */
struct mk_transport {
    const char *name;
    /* Set up per-connection state; MK_OK or MK_ERR (connection closed). */
    int (*open)(struct mk_conn *c);
    ssize_t (*read)(struct mk_conn *c, void *buf, size_t len);
    ssize_t (*writev)(struct mk_conn *c, const struct iovec *iov, int iovcnt, int flags);
    /* Send `len` bytes of file `fd` from *offset, advancing it. NULL: the
       server reads the file and uses writev. */
    ssize_t (*sendfile)(struct mk_conn *c, int fd, off_t *offset, size_t len);
    /* Stop sending (lingering close); NULL: shutdown(2) of the write side. */
    int (*shutdown)(struct mk_conn *c);
    /* Release per-connection state; the server closes the descriptor. */
    void (*close)(struct mk_conn *c);

    /* ---- added in ABI 3.2 (read only from plugins built for 3.2 or later) ---- */

    /*
     * The handshake, run after open() and the conn_accept hooks and before
     * the protocol sees a byte: MK_OK (done), MK_AGAIN (call again once the
     * socket is ready in the direction given with api->conn_io_want(),
     * readable when none is given), MK_ERR (the connection is closed). The
     * whole handshake must end within the head Timeout. NULL: no handshake.
     */
    int (*handshake)(struct mk_conn *c);
    /*
     * Bytes the transport holds that read() would return without touching
     * the socket (decrypted TLS records). The server keeps reading while
     * this is not 0, since the socket will not signal them. NULL: none.
     */
    size_t (*pending)(struct mk_conn *c);
    /* The protocol chosen by the handshake (ALPN: "http/1.1", "h2"), NULL
       when none was negotiated: the server then speaks HTTP/1.1. */
    const char *(*alpn)(struct mk_conn *c, size_t *len);
    /* The server name the client asked for in the handshake (SNI), or NULL. */
    const char *(*server_name)(struct mk_conn *c, size_t *len);
    /*
     * Validate a listener's options, the words after the transport's name
     * on its Listen line (one space between words), when a configuration
     * is built (start, reload, monkey -t): MK_OK, or MK_ERR with a reason
     * (the server adds file, line and address). NULL: the transport takes
     * no options. At run time api->conn_listen_options() gives them.
     */
    int (*check_options)(const char *options, char *reason, size_t len);

    /* ---- added in ABI 3.3 (read only from plugins built for 3.3 or later) ---- */

    /*
     * A named property of the connection as text, for plugins and the
     * logger (api->conn_transport_var): "protocol" ("TLSv1.3"), "cipher",
     * "server_name", "client_subject", "client_verify" for TLS. NULL when
     * the transport has no such property for this connection. The text
     * (not NUL terminated; *len set) stays valid as long as the connection.
     */
    const char *(*var)(struct mk_conn *c, const char *name, size_t *len);
    /*
     * Whether sendfile() reads the file through user space on this
     * connection (TLS encrypted in the process, not by the kernel): 1 or
     * 0. A protocol that frames the bytes itself (HTTP/2) then reads file
     * data into its own buffer and writes whole batches of frames instead
     * of a small write and a sendfile per frame. NULL: sendfile does not
     * copy.
     */
    int (*sendfile_copies)(struct mk_conn *c);

    /* ---- added in ABI 3.10 (read only from plugins built for 3.10 or later) ---- */

    /*
     * Can the transport's listeners serve the sites of `cfg`? Called once
     * per configuration built (start, reload, monkey -t) that has a Listen
     * line with this transport, after every site's site_init(), on the
     * controlling thread, before any connection sees the configuration:
     * MK_OK, or MK_ERR with a reason (the server adds the file, line and
     * address of the first such Listen line, and refuses the
     * configuration). It may warn with api->log() and keep what it finds
     * in its site data (api->site_data()). NULL: nothing to check.
     */
    int (*check_sites)(const struct mk_config *cfg, char *reason, size_t len);
};

/*
 * A connection taken over after 101 Switching Protocols (api->takeover),
 * or an HTTP/2 stream after the 200 of an extended CONNECT (the same
 * callbacks: "connection" below is then the stream; the client's
 * END_STREAM or RST_STREAM is its close). Its callbacks run on the
 * connection's worker:
 *   on_read      bytes arrived (through the transport). Not called while
 *                more than 64 KiB written with takeover_write() wait to
 *                go out: the client's input then waits too (back-pressure);
 *                nor while the plugin holds the input (takeover_hold).
 *   on_writable  everything written went out after a takeover_write()
 *                returned MK_AGAIN (optional).
 *   on_close     the connection ends: the peer closed it or failed, the
 *                idle timeout passed, the server stops, or the plugin
 *                called takeover_close(). Called exactly once; `t` is
 *                invalid after it returns. `t` is NULL when the
 *                connection ended before the switch (the 101 could not be
 *                sent): release `arg` only.
 */
struct mk_takeover;
struct mk_takeover_ops {
    void (*on_read)(struct mk_takeover *t, const void *data, size_t len, void *arg);
    void (*on_writable)(struct mk_takeover *t, void *arg);
    void (*on_close)(struct mk_takeover *t, void *arg);
};

/* The server's functions, passed to init(). Valid for the process lifetime. */
struct mk_api {
    uint16_t abi_major; /* MK_PLUGIN_ABI_MAJOR of the server */
    uint16_t abi_minor; /* MK_PLUGIN_ABI_MINOR of the server */
    uint32_t size;      /* sizeof(struct mk_api) in the server: see MK_API_HAS */

    /* diagnostics */
    void (*log)(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

    /* the request */
    const char *(*method)(const struct mk_request *r, size_t *len); /* "GET" */
    const char *(*path)(const struct mk_request *r, size_t *len);   /* decoded, normalised */
    const char *(*target)(const struct mk_request *r, size_t *len); /* as received */
    const char *(*query)(const struct mk_request *r, size_t *len);  /* NULL: none */
    const char *(*host)(const struct mk_request *r, size_t *len);
    int (*version)(const struct mk_request *r); /* 10, 11, or 20 for HTTP/2 */
    /* Value of a request header (first of that name), NULL if absent. Several
       Cookie fields (HTTP/2 crumbs, repeated lines) are one, joined with "; ". */
    const char *(*header)(const struct mk_request *r, const char *name, size_t *len);
    /* Number of request headers and the i-th one. */
    unsigned (*header_count)(const struct mk_request *r);
    int (*header_at)(const struct mk_request *r, unsigned i, const char **name, size_t *name_len,
                     const char **value, size_t *value_len);
    /* The request body: NULL until it has been read, that is until content()
       is called again after returning MK_AGAIN ("" with len 0: no body).
       Always NULL for a body streamed with body_stream(). */
    const char *(*body)(const struct mk_request *r, size_t *len);
    /* The site's document root (absolute path). */
    const char *(*docroot)(const struct mk_request *r);
    /*
     * The client address as text into buf (len bytes, NUL terminated):
     * "192.0.2.1", "2001:db8::1"; an IPv4 client of a dual-stack socket in
     * IPv4 form, as mk_addr_text() of mk_util.h gives it. A buffer of
     * MK_ADDR_TEXT_LEN bytes (mk_util.h) always holds it; "-" for a client
     * that is not IP, or an address a shorter buf cannot hold. Returns buf.
     * Behind a load balancer the client is the one its PROXY header named
     * (Listen ... proxy_protocol) or a trusted proxy's field named
     * (RealIPFrom); the TCP peer is getpeername() of conn_fd(conn(r)).
     */
    const char *(*remote_addr)(const struct mk_request *r, char *buf, size_t len);
    struct mk_conn *(*conn)(const struct mk_request *r);

    /* the response */
    /* A final status, 200 to 599 (101 only after takeover()); another is 500, logged. */
    void (*set_status)(struct mk_request *r, int status);
    /* Add a response header; name and value are copied. MK_OK or MK_ERR. */
    int (*add_header)(struct mk_request *r, const char *name, const char *value);
    void (*set_content_type)(struct mk_request *r, const char *type);
    /* Body from memory, copied (MK_ERR when memory is short). */
    int (*set_body)(struct mk_request *r, const void *data, size_t len);
    /* Body from memory the plugin keeps valid until request_done. */
    void (*set_body_static)(struct mk_request *r, const void *data, size_t len);
    /* Body from an open file; the server closes fd when done. */
    void (*set_body_file)(struct mk_request *r, int fd, off_t offset, uint64_t len);
    /* Request-scoped memory, released after request_done. NULL when short. */
    void *(*alloc)(struct mk_request *r, size_t size);
    /* Status and bytes sent so far (after request_done: the totals). */
    int (*status)(const struct mk_request *r);
    uint64_t (*bytes_sent)(const struct mk_request *r);

    /* the connection */
    int (*conn_fd)(const struct mk_conn *c);
    void **(*conn_transport_data)(struct mk_conn *c);

    /*
     * The configuration reader, for a plugin's own files. conf_load() returns
     * NULL with "file:line: reason" in err. conf_next() walks every entry in
     * file order (*cursor starts NULL) and returns 0 after the last one;
     * section names come without brackets. conf_path() names the file, for
     * "file:line" messages.
     */
    struct mk_conf *(*conf_load)(const char *path, char *err, size_t errlen);
    void (*conf_free)(struct mk_conf *conf);
    int (*conf_next)(const struct mk_conf *conf, void **cursor, const char **section,
                     const char **key, const char **value, int *line);
    const char *(*conf_path)(const struct mk_conf *conf);

    /* time: seconds since the epoch, cached per worker loop iteration */
    time_t (*now)(void);
    /* The worker running this hook (0..workers-1), or -1 off worker threads. */
    int (*worker_id)(void);

    /* ---- added in ABI 2 ---- */

    /* The client address as a socket address (the same client as remote_addr's;
       the port 0 when a proxy's field named none). */
    const struct sockaddr *(*remote_sockaddr)(const struct mk_request *r, socklen_t *len);
    /*
     * When the request's head was complete (wall clock, to the second) and
     * how long ago that was in microseconds (monotonic clock): for logs.
     */
    void (*request_time)(const struct mk_request *r, struct timespec *start, uint64_t *elapsed_us);
    /* Body from memory allocated with malloc(); the server frees it. */
    void (*set_body_owned)(struct mk_request *r, void *data, size_t len);
    /*
     * Open `rel` (relative, normalised, no leading '/') beneath the site's
     * document root with the site's rules for symbolic links. -1 with errno.
     */
    int (*open_beneath)(const struct mk_request *r, const char *rel, int flags);
    /* The i-th index file name of the request's site (its IndexFiles, else the
       server's), NULL past the last. */
    const char *(*index_file)(const struct mk_request *r, unsigned i);

    /* sites */
    const struct mk_site *(*site)(const struct mk_request *r);
    /* The i-th ServerName of a site, NULL past the last. */
    const char *(*site_name)(const struct mk_site *s, unsigned i);
    const char *(*site_docroot)(const struct mk_site *s);
    /* The site file ("built-in" for -o). */
    const char *(*site_file)(const struct mk_site *s);
    /* What `plugin`'s site_init() stored for this site (NULL if nothing). */
    void *(*site_data)(const struct mk_site *s, const struct mk_plugin *plugin);

    /*
     * Suspension. suspend() returns a handle (NULL when memory is short);
     * the hook then returns MK_SUSPENDED. The connection does no I/O until
     * resume(), which any thread may call, exactly once per handle, and
     * which runs cb(r, arg) on the request's worker. A request not resumed
     * within Timeout is abandoned, and so is one whose client hangs up
     * (closes or half-closes its connection) meanwhile: cb then gets
     * r == NULL. The handle is the server's: the plugin holds it from
     * suspend() to resume(), also after its request was abandoned, and the
     * request's memory stays allocated until then. Handles still out when
     * the server stops, once every plugin's exit() has returned, are freed
     * by the server: resume() must not be called after the plugin's exit().
     */
    struct mk_suspended *(*suspend)(struct mk_request *r);
    void (*resume)(struct mk_suspended *s, mk_resume_cb cb, void *arg);
    /*
     * Run work(arg) on one of the server's task threads, then done(r, arg)
     * on the request's worker as above. For blocking work: hashing
     * passwords, reading large directories. Returns
     *   MK_SUSPENDED  queued: return it from the hook;
     *   503           refused by a bound of the queue (the calling plugin
     *                 has TaskQueuePerPlugin tasks waiting or running, or
     *                 the client TaskQueuePerClient); `Retry-After` has been
     *                 added to the response: return 503 from the hook;
     *   MK_ERR        nothing was started (stopping, memory short).
     * Each plugin has its own share of the queue and the threads serve the
     * plugins in turn. A task whose request is abandoned before the task
     * starts (timeout, hang-up, stop) never runs: done(NULL, arg) is then
     * called without work(arg), and must release what the hook gave arg.
     * A task already running finishes, and done gets r == NULL.
     */
    int (*task)(struct mk_request *r, void (*work)(void *arg), mk_resume_cb done, void *arg);

    /*
     * The server, for status and control plugins; any thread may call these.
     * config_get() returns the configuration in force, referenced: release it
     * with config_put(). config_value() gives the i-th value in force of a
     * [SERVER] key as text (defaults included), NULL past the last;
     * config_key() names the i-th key.
     */
    void (*stats)(struct mk_server_stats *out);
    int (*worker_stats)(unsigned worker, struct mk_worker_stats *out);
    struct mk_config *(*config_get)(void);
    void (*config_put)(struct mk_config *cfg);
    const char *(*config_key)(unsigned i);
    const char *(*config_value)(const struct mk_config *cfg, const char *key, unsigned i);
    unsigned (*config_sites)(const struct mk_config *cfg);
    const struct mk_site *(*config_site)(const struct mk_config *cfg, unsigned i);
    /* The loaded plugins, in plugins.load order. */
    unsigned (*plugin_count)(void);
    const struct mk_plugin *(*plugin_at)(unsigned i);
    /*
     * Carry out MK_CMD_* as the signal would, and wait for the result:
     * MK_OK, or MK_ERR with the reason in err (a reload refused). Only
     * while the server runs its signal loop (the monkey binary); never from
     * a hook that the command itself calls (reload, reopen_logs, exit). A
     * reload waits for every worker to take the new configuration: called
     * from a worker's hook it waits for that worker up to 2 s in vain.
     */
    int (*command)(int cmd, char *err, size_t errlen);
    /*
     * True while `monkey -t` only checks the configuration: init() and
     * site_init() then validate without side effects (no threads, no
     * sockets, no files created).
     */
    int (*checking)(void);
    /*
     * The line of the [SECTION] header of the entry conf_next() last
     * returned through `cursor`: two sections of the same name in a row
     * have different header lines. Entries of one section also share the
     * same `section` pointer.
     */
    int (*conf_section_line)(const void *cursor);
    /* Whether the site follows symbolic links (its [HOST] Symlinks). */
    int (*site_symlinks)(const struct mk_site *s);
    /* Response body bytes sent so far (bytes_sent() counts the head too). */
    uint64_t (*body_bytes_sent)(const struct mk_request *r);
    /* True once the whole announced response has been sent. */
    int (*response_complete)(const struct mk_request *r);
    /*
     * Run fn(arg) on worker `worker`'s thread soon (any thread may ask):
     * to hand a worker data without locks. MK_ERR: no such running worker.
     * Calls still queued when the server stops run during the stop, on the
     * controlling thread, so fn can release arg.
     */
    int (*worker_call)(int worker, void (*fn)(void *arg), void *arg);
    /*
     * Whether the site answers 404 for paths with a segment starting with
     * '.' (its [HOST] HideDotFiles; "/.well-known/" excepted). Such requests
     * never reach a plugin's request or content hook.
     */
    int (*site_hide_dotfiles)(const struct mk_site *s);

    /*
     * The worker's event loop (see "Event loop" at the top). Every function
     * below runs only on a worker thread, in a hook or a loop callback; from
     * another thread the starts return NULL with errno EPERM and the others
     * MK_ERR. Handles are valid on the worker that made them.
     *
     * timer_start(): call cb(t, arg) in `ms` milliseconds (0: at the next
     * loop iteration), and then every `ms` (> 0) if `repeat`. NULL with
     * errno (EINVAL, ENOMEM) when not started. A one-shot timer's handle is
     * freed when its callback returns; timer_stop() is valid before that
     * (also inside the callback) and frees it. Precision: the worker's clock
     * (CLOCK_MONOTONIC, read once per loop iteration) in milliseconds; a busy
     * worker fires late, never early. Each distinct duration costs a small
     * queue (freed after a minute unused): use a few durations.
     */
    struct mk_loop_timer *(*timer_start)(uint32_t ms, int repeat, mk_loop_timer_cb cb, void *arg);
    int (*timer_stop)(struct mk_loop_timer *t);
    /*
     * fd_watch(): call cb(h, fd, ready, arg) while `fd` is ready for `mask`
     * (MK_LOOP_READ | MK_LOOP_WRITE; 0: registered later with fd_modify).
     * Level triggered: a callback that leaves input unread is called again.
     * The descriptor stays the plugin's; make it non-blocking. fd_modify()
     * changes the interest (0: pause). fd_unwatch() ends the watch and frees
     * the handle; it is safe inside any callback, even when the descriptor
     * still has an event pending in the same batch (it is skipped). Unwatch
     * before closing the descriptor.
     */
    struct mk_loop_fd *(*fd_watch)(int fd, uint32_t mask, mk_loop_fd_cb cb, void *arg);
    int (*fd_modify)(struct mk_loop_fd *h, uint32_t mask);
    int (*fd_unwatch)(struct mk_loop_fd *h);
    /*
     * child_watch(): reap child process `pid` (of this process, for instance
     * from posix_spawn()) on this worker when it exits, then call
     * cb(pid, status, arg) once (cb may be NULL: reap only). The handle is
     * freed before the callback runs. child_unwatch() cancels the callback
     * (the child is still reaped, so no zombie stays) and frees the handle.
     * Needs Linux 5.3 or later (pidfd_open): NULL with errno ENOSYS before;
     * ESRCH when there is no such process. Do not reap the child elsewhere.
     */
    struct mk_loop_child *(*child_watch)(pid_t pid, mk_loop_child_cb cb, void *arg);
    int (*child_unwatch)(struct mk_loop_child *h);
    /* Milliseconds of the monotonic clock: the worker's cached reading (the
       timers' clock), or a fresh one off worker threads. */
    uint64_t (*now_ms)(void);
    /*
     * The typed settings `plugin` declared in its conf_schema (see
     * mk_schema.h), as the server filled them for one configuration.
     * plugin_conf(): the plugin-wide struct of the configuration `site`
     * belongs to (in hooks: api->site(r)); with `site` NULL, inside init()
     * only, the configuration being started or checked. site_conf(): the
     * struct of the site's MK_CONF_SITE keys. Both stay valid as long as
     * the site does (a request's whole life, site data included) and are
     * NULL when the plugin declares no such keys.
     */
    const void *(*plugin_conf)(const struct mk_site *site, const struct mk_plugin *plugin);
    const void *(*site_conf)(const struct mk_site *site, const struct mk_plugin *plugin);

    /* ---- added in ABI 3.1 (check with MK_API_HAS) ---- */

    /*
     * Streaming responses, for a body of unknown length produced piece by
     * piece (h2o's generator model). From a content hook (or its
     * continuation): stream_start(), then return MK_OK; the status and
     * headers set so far go out with the first bytes, without a
     * Content-Length: HTTP/1.1 frames the body with chunked coding,
     * HTTP/1.0 ends it by closing the connection. stream_write() copies a
     * piece into the request's queue: MK_OK (write more), MK_AGAIN (taken,
     * but the queue reached its high-water mark, 64 KiB: wait for proceed),
     * MK_ERR (not taken: the queue was already full, memory is short, or
     * the stream has ended). proceed(r, arg) runs each time the queue has
     * been written out; the handler writes more there or from any later
     * event on the worker (a write then wakes the connection up), but
     * within SendTimeout. stream_end() ends the body, with optional trailer
     * lines ("Name: value\r\n"..., chunked only): MK_OK or MK_ERR. Whole
     * bodies (set_body*, set_body_file) stay the zero-copy path.
     */
    int (*stream_start)(struct mk_request *r, mk_proceed_cb proceed, void *arg);
    int (*stream_write)(struct mk_request *r, const void *data, size_t len);
    int (*stream_end)(struct mk_request *r, const char *trailers);

    /* ---- added in ABI 3.2 (check with MK_API_HAS) ---- */

    /*
     * Streaming the request body: instead of waiting for the whole body
     * (content() returning MK_AGAIN alone, then api->body()), a content
     * hook (or its continuation) calls body_stream() and returns MK_AGAIN;
     * cb then gets the body as it arrives, decoded (Content-Length or
     * chunked), see mk_body_cb. `window` (0: 64 KiB) bounds the bytes
     * delivered but not yet consumed: at the window the server stops
     * reading from the client (HTTP/1: the socket, so TCP pushes back;
     * HTTP/2 would withhold WINDOW_UPDATE) until body_consume() gives
     * bytes back; a piece may pass the window by at most one input buffer.
     * "100 Continue" goes out when the body is first asked for, never
     * before. MaxRequestBody, Timeout and BodyMinRate apply as for a
     * buffered body (the time the window is closed does not count against
     * the client's rate, but Timeout still runs). MK_OK, or MK_ERR (no
     * cb, called twice, the body already read, or off r's worker). A
     * DATA callback that answers mid-body leaves the rest unread: the
     * connection closes after the answer. api->body() stays NULL.
     * body_consume(): n bytes kept (MK_AGAIN) are done; delivery resumes
     * from the worker's loop, never inside this call. MK_OK, or MK_ERR when
     * r streams no body.
     */
    int (*body_stream)(struct mk_request *r, size_t window, mk_body_cb cb, void *arg);
    int (*body_consume)(struct mk_request *r, size_t n);

    /*
     * The plugin's own context, one per server: what would otherwise be
     * file statics (counters, caches, handles), so that two servers in one
     * process (monkey.h) keep apart. self_set() stores `self` for the server
     * whose init() runs (call it from init(); MK_ERR elsewhere or for a
     * plugin that server has not loaded). self() returns what the plugin
     * stored for the server whose hook or callback runs on this thread: any
     * hook (a worker's, the controlling thread's: exit(), reload, site_init,
     * site_free), a loop callback, a task's work function; NULL if nothing
     * was stored. The server never frees it: exit() does (it runs last).
     */
    int (*self_set)(const struct mk_plugin *plugin, void *self);
    void *(*self)(const struct mk_plugin *plugin);
    /*
     * Per-request context slots, one per plugin (nginx's module ctx,
     * lighttpd's plugin_ctx): what a plugin carries from one hook of a
     * request to the next. ctx_set() stores `ctx` in `plugin`'s slot of r
     * (replacing, without cleanup, what was there): MK_OK, or MK_ERR when
     * memory is short or the server has not loaded `plugin`. When the
     * request ends, after every request_done hook, cleanup(ctx) runs (if not
     * NULL) and the slot is cleared. ctx_get() returns the slot, NULL when
     * empty. On the request's worker only.
     */
    int (*ctx_set)(struct mk_request *r, const struct mk_plugin *plugin, void *ctx,
                   void (*cleanup)(void *ctx));
    void *(*ctx_get)(const struct mk_request *r, const struct mk_plugin *plugin);

    /*
     * Routes. route_add() registers `handler` for the requests whose
     * decoded, normalised path matches `pattern` and whose method is in
     * `methods` (MK_ROUTE_* bits):
     *   "/status"            exactly that path
     *   "/users/:id/posts"   ":name" matches one non-empty segment
     *   "/files/" + "*"      "/files/" and every path beneath it
     * Plugins built for ABI 3.11 or later add their routes from their
     * `routes` hook, to the table it is given (route_table_add, below);
     * route_add() is kept for older plugins: from init() with `site` NULL,
     * every site of every configuration, for the server's life; from
     * site_init() with its `site`, that site of that configuration (a
     * reload replaces such routes with the new configuration, at once for
     * every request). Elsewhere it is refused.
     * MK_OK, or MK_ERR with errno: EINVAL (bad pattern or method set; the
     * reason is logged), EPERM (not in init or site_init). Two routes of
     * one site with the same pattern and a common method refuse the
     * configuration. Precedence: exact, then ":name" patterns, then
     * prefixes; longer patterns first; then registration order. Request
     * hooks run before the routes; content hooks and static files after,
     * for requests no route takes. A path that routes match for other
     * methods gets 405 with their methods in Allow (OPTIONS: 204 with it).
     * route_param() returns the value of parameter `name` of the route
     * that took r (a slice of the decoded path, not NUL terminated; *len
     * set), or NULL.
     */
    int (*route_add)(const struct mk_site *site, uint32_t methods, const char *pattern,
                     mk_route_cb handler, void *arg);
    const char *(*route_param)(const struct mk_request *r, const char *name, size_t *len);

    /*
     * For transports, inside read, writev, sendfile or handshake, before
     * returning EAGAIN (MK_AGAIN): the direction (MK_IO_WANT_READ or
     * MK_IO_WANT_WRITE) the socket must be ready in before the server calls
     * again. Without it the server waits for the call's own direction.
     */
    void (*conn_io_want)(struct mk_conn *c, unsigned dir);
    /* What the transport's handshake gave: the ALPN protocol and the SNI
       server name (NULL when none, or the transport has no such thing). */
    const char *(*conn_alpn)(struct mk_conn *c, size_t *len);
    const char *(*conn_server_name)(struct mk_conn *c, size_t *len);
    /* The address the connection arrived on: MK_OK, or MK_ERR with errno.
     *len is the size of `out` on entry, of the address on return. */
    int (*conn_local_addr)(const struct mk_conn *c, struct sockaddr_storage *out, socklen_t *len);
    /* The options of the connection's Listen line after its transport's
       name ("key=7" for "Listen 8443 xor key=7"), NULL when none. Valid as long
       as the connection. */
    const char *(*conn_listen_options)(const struct mk_conn *c);
    /* Whether the server speaks protocol `name` (an ALPN name such as
       "http/1.1"), for a transport choosing what to negotiate. Any thread. */
    int (*protocol_known)(const char *name, size_t len);
    /*
     * Connection takeover, from a content hook (or its continuation): the
     * response becomes 101 Switching Protocols (add Upgrade and
     * Connection: Upgrade yourself) and, once it has been sent, the
     * connection's bytes go to `ops` (see struct mk_takeover_ops) instead
     * of HTTP; the hook returns MK_OK. `idle_ms`: the connection is closed
     * after that long without a byte read or written (0: the server's
     * KeepAliveTimeout). MK_ERR when the protocol cannot hand the
     * connection over (HTTP/1.0, a request body not read, a stream
     * started, an HTTP/2 stream that is no extended CONNECT); answer
     * something else then. On an HTTP/2 extended CONNECT (RFC 8441,
     * request_protocol()) the stream is handed over instead: the answer
     * goes out as 200 and the ops carry the stream's DATA (ABI 3.12).
     */
    int (*takeover)(struct mk_request *r, const struct mk_takeover_ops *ops, void *arg,
                    uint32_t idle_ms);
    /*
     * Send bytes on a taken-over connection (copied). MK_OK; MK_AGAIN:
     * taken, but more than 64 KiB wait to go out: on_read pauses until
     * on_writable; MK_ERR: not taken (memory short, closing).
     */
    int (*takeover_write)(struct mk_takeover *t, const void *data, size_t len);
    /* Close once what was written went out; on_close follows, from the
       loop (never inside this call or another takeover_* call). */
    void (*takeover_close)(struct mk_takeover *t);
    /* The connection, for conn_* accessors. */
    struct mk_conn *(*takeover_conn)(struct mk_takeover *t);

    /*
     * The site of the configuration `site` belongs to that `name` names,
     * by the rules Host follows (exact and "*.example.com" ServerNames,
     * without case, a trailing dot ignored), or that configuration's
     * default site when no site has the name (or name is NULL); NULL for a
     * NULL site. Any thread holding the configuration (a request's site, or
     * config_get()).
     */
    const struct mk_site *(*site_lookup)(const struct mk_site *site, const char *name, size_t len);

    /* ---- added in ABI 3.3 (check with MK_API_HAS) ---- */

    /*
     * A named property of the connection's transport (its `var` field):
     * "protocol", "cipher", "client_subject", ... as text, not NUL
     * terminated, valid as long as the connection; NULL when the transport
     * has none (always on plain connections). On the connection's worker.
     */
    const char *(*conn_transport_var)(struct mk_conn *c, const char *name, size_t *len);

    /* HTTP/2 connections and streams (zeros when HTTP/2 is not built in or
       the server is not running). Any thread. */
    void (*h2_stats)(struct mk_h2_stats *out);
    /*
     * End a streamed response that cannot be completed (its upstream
     * broke mid-body): the connection closes at once, without the end of
     * the body (no last chunk), so the client sees the response cut short
     * instead of complete. proceed(NULL, arg) runs inside this call; r is
     * gone when it returns. MK_OK, or MK_ERR when r streams no response or
     * its stream was ended. On the request's worker, outside its hooks
     * (from a loop callback).
     */
    int (*stream_abort)(struct mk_request *r);
    /*
     * Notes: named values a plugin attaches to a request for another to
     * read, the logger's %{NAME}n above all (Apache's notes): the gateway
     * plugins' "upstream_ms", an authentication's MK_NOTE_REMOTE_USER and
     * MK_NOTE_AUTH_TYPE (below). note_set() copies name and value into the
     * request's memory (a later note of the same name hides an earlier
     * one): MK_OK, or MK_ERR (memory short, empty name). note() returns the
     * value (NUL terminated; *len set when len is not NULL), NULL when r
     * has no such note. Notes live until the request ends, after its
     * request_done hooks. On the request's worker.
     */
    int (*note_set)(struct mk_request *r, const char *name, const char *value);
    const char *(*note)(const struct mk_request *r, const char *name, size_t *len);

    /* ---- added in ABI 3.4 (check with MK_API_HAS) ---- */

    /*
     * The sections named `section` of `site`'s file, as the server filled
     * them from the plugin's section_schemas (one typed struct each, in
     * file order, with the line of each header): *n of them, NULL when
     * there is none. They live as long as the site's configuration. From
     * site_init() or any thread holding the configuration.
     */
    const struct mk_conf_instance *(*site_sections)(const struct mk_site *site,
                                                    const struct mk_plugin *plugin,
                                                    const char *section, size_t *n);

    /*
     * After takeover() on the same request: on_open(t, arg) runs once the
     * 101 went out and the connection is the plugin's, before any on_read
     * (so the plugin holds `t` at once: to greet, or to register the
     * connection for writes that do not answer a read). Not called when
     * the 101 never goes out (on_close(NULL, arg) then). MK_OK, or MK_ERR
     * when takeover() was not called on r.
     */
    int (*takeover_on_open)(struct mk_request *r,
                            void (*on_open)(struct mk_takeover *t, void *arg));

    /*
     * The supervisor of this server (Supervisor On, monkey -S): MK_OK with
     * *out filled, or MK_DECLINED when the server runs without one. Any
     * thread.
     */
    int (*supervisor_stats)(struct mk_supervisor_stats *out);

    /*
     * A message about request r for its site's error log (a script's
     * stderr, a backend's complaint), printf-style. It is formatted into
     * one line of at most MK_ERROR_LOG_LINE bytes (a longer one is cut and
     * ends in "..."; line breaks and other control bytes become spaces) and
     * offered to the plugins' error_log hooks in plugins.load order (the
     * logger writes it to the site's ErrorLog); when none takes it, it goes
     * to the server log as an error. On the request's worker, while r is
     * live: in one of its hooks, or from a loop callback while the request
     * streams its body or its response (not while it is suspended).
     */
    void (*error_log)(struct mk_request *r, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
    /*
     * Answer r with a file of its site as the static file handler does, for
     * a privileged internal redirect (a FastCGI backend's X-Sendfile or
     * X-Accel-Redirect): `path` is a URL path (percent-encoded, starting
     * with '/', no query), decoded and normalised like a request's and
     * opened beneath the document root by the site's rules (HideDotFiles,
     * symlinks). No request hook, route or content hook runs for it: the
     * access rules and authentication of that path are not checked, since
     * the calling plugin vouches for the file (a backend sending a file the
     * client may not ask for is what X-Sendfile is for). For a redirect
     * the client's request could not make by itself, use internal_redirect()
     * instead. The request counts as a GET
     * (a HEAD stays a HEAD) of that path: Content-Type by the file's
     * extension, ETag and Last-Modified, conditional and range requests,
     * an index file for a directory path ending in '/'. MK_OK (the response
     * is set up: return MK_OK from the hook), an HTTP status to answer
     * with (404, 403, 304 is MK_OK), or MK_ERR for a malformed path. From a
     * content hook or its continuation, on the request's worker.
     */
    int (*serve_file)(struct mk_request *r, const char *path);

    /*
     * A thread the plugin starts itself acts for no server: api->self(),
     * config_get(), stats() and log() there would reach the server started
     * last. server() returns the server whose hook runs on the calling
     * thread (call it in init(): that server; NULL in monkey -t), an opaque
     * handle valid until the plugin's exit() for that server returns.
     * thread_serve(srv) makes the calling thread act for srv from then on,
     * as that server's own threads do (its plugin contexts, configuration,
     * status and log); NULL undoes it. Call it first thing on the plugin's
     * thread, and end that thread in exit().
     */
    struct mk_server *(*server)(void);
    void (*thread_serve)(struct mk_server *srv);

    /* ---- added in ABI 3.5 (check with MK_API_HAS) ---- */

    /*
     * A streamed body without the copy of stream_write(), for a handler
     * that reads its pieces from a descriptor (a pipe, a backend's socket):
     * stream_buffer() gives a buffer of `len` bytes in the form of the
     * queue's own pieces, the handler fills it (a read() straight into
     * it), and stream_commit() queues its first `n` bytes (at most `len`)
     * as stream_write() queues a copy: the same results (MK_OK, MK_AGAIN,
     * MK_ERR) and the same proceed() calls, which may run inside the call.
     * stream_commit() releases the buffer whatever it returns: with n 0 it
     * queues nothing (MK_OK while the stream is open); with n past `len`,
     * or no buffer given, it is MK_ERR. One buffer per request at a time:
     * stream_buffer() releases an earlier one not committed, and so does
     * the end of the request. stream_buffer() returns NULL when `len` is 0,
     * when stream_write() would take nothing (no stream started, ended, the
     * queue over its mark) or memory is short. On the request's worker,
     * where stream_write() may be called.
     */
    void *(*stream_buffer)(struct mk_request *r, size_t len);
    int (*stream_commit)(struct mk_request *r, size_t n);

    /* ---- added in ABI 3.6 (check with MK_API_HAS) ---- */

    /*
     * An internal redirect (a CGI script's local redirect, RFC 3875 6.2.2):
     * r is answered as the server would answer a GET (a HEAD stays a HEAD)
     * of `location`, a URL path with an optional query ("/a/b?x=1",
     * percent-encoded; a "#fragment" is dropped). Once the hook returns
     * MK_OK (at once, or from its continuation), the request starts again
     * for it through the whole pipeline, as a request from the client:
     * HideDotFiles, the request hooks (so access rules and authentication
     * check the new path), the site's routes and Fallback, the content hooks
     * and the static files. For the new start:
     *   - method() is "GET" (or "HEAD"), target() the location, query() and
     *     path() its query and decoded, normalised path (client_method()
     *     and client_target() still give what the client sent);
     *   - the request has no body: header() finds no Content-Length,
     *     Transfer-Encoding nor Content-Type, and a handler that asks for
     *     the body (MK_AGAIN, body_stream()) gets an empty one at once;
     *   - what was set up of the response (status, headers, body) is
     *     dropped, the context slots are emptied (their cleanups run);
     *     notes stay.
     * Returns MK_OK (return MK_OK from the hook), MK_ERR for a location that
     * is not such a path (characters a request target may not hold, "//",
     * ".." above the root) or when r streams its body or response or took
     * over its connection (answer 502 or 500), 500 past 10 internal
     * redirects of one request (a loop; logged), 503 when memory is short.
     * From a content hook, a route's handler or their continuation, on the
     * request's worker.
     */
    int (*internal_redirect)(struct mk_request *r, const char *location);
    /*
     * The method and the target as the client sent them: what method() and
     * target() return, except after internal_redirect(), which changes
     * those (the access log's request line, %r, shows these). Not NUL
     * terminated; "" with *len 0 when no method could be read.
     */
    const char *(*client_method)(const struct mk_request *r, size_t *len);
    const char *(*client_target)(const struct mk_request *r, size_t *len);

    /* ---- added in ABI 3.7 (check with MK_API_HAS) ---- */

    /*
     * A timer the plugin keeps and arms again and again without an
     * allocation each time (a write coalesced to the next loop iteration,
     * a timeout pushed back). timer_new(): a one-shot timer, not armed;
     * NULL with errno (EPERM off a worker, EINVAL without cb, ENOMEM).
     * timer_arm(): call cb(t, arg) once in `ms` milliseconds (0: at the
     * next loop iteration); a timer armed already is moved (only the new
     * time counts). timer_disarm(): no call until it is armed again
     * (harmless when it is not armed). After its callback the timer stays,
     * not armed, unless the callback armed it again (then 0 counts as 1:
     * a timer never runs twice in one loop iteration). timer_stop() frees
     * it, also inside its callback. timer_arm() and timer_disarm() return
     * MK_OK, or MK_ERR for a timer of timer_start(), one stopped, or a call
     * off its worker. The rest is as for timer_start(): the clock, a queue
     * per duration, the release at the worker's exit.
     */
    struct mk_loop_timer *(*timer_new)(mk_loop_timer_cb cb, void *arg);
    int (*timer_arm)(struct mk_loop_timer *t, uint32_t ms);
    int (*timer_disarm)(struct mk_loop_timer *t);

    /* ---- added in ABI 3.8 (check with MK_API_HAS) ---- */

    /* Static files compressed on the fly (zeros when the server is not
       running). Any thread. */
    void (*compress_stats)(struct mk_compress_stats *out);

    /* ---- added in ABI 3.9 (check with MK_API_HAS) ---- */

    /*
     * Be told at once when the server gives up the request of handle `s`
     * (from suspend(), on the request's worker, before resume() was called):
     * its Timeout ends the wait, its client hangs up or resets the stream,
     * or the server stops. cancel(s, why, arg) then runs once, on the
     * worker, before the server answers or frees anything of the request.
     *
     * The contract of a plugin that holds a request:
     *   - From cancel on, it must not use the request; it releases at once
     *     what it holds for it: timers, backend connections (back to a pool
     *     only if they are clean), child processes (SIGTERM, then SIGKILL),
     *     queue places.
     *   - It still gives the handle back with resume(s, cb, arg), exactly
     *     once: from cancel itself (the continuation then runs after the
     *     callback, with r == NULL) or later.
     *   - While it holds a handle, the request's configuration (its site,
     *     the site's data and the plugin's site configuration) stays valid
     *     even across reloads; what the plugin keeps past both the request
     *     and its handles must not point into that configuration.
     * A plugin that resumes from another thread must itself make sure that
     * cancel and that resume do not both release the same state. Not for
     * the handles of api->task(): the server takes a task that has not
     * started out of the queue, and one already running finishes.
     */
    void (*suspend_cancel)(struct mk_suspended *s, mk_cancel_cb cancel, void *arg);
    /*
     * Open a log file of the plugin's as the server opens its own Log:
     * `flags` (O_WRONLY|O_APPEND|O_CREAT...) with O_CLOEXEC, O_NOCTTY and
     * O_NOFOLLOW (a symbolic link at the path is refused with ELOOP: the
     * log directory may be writable by the User), created with `mode`.
     * In a server started as root that switches to a User, a file root owns
     * is given to that User, so that a reopen after the switch (SIGUSR1)
     * can open it; one of root's with several links (a hard link planted in
     * the User's directory) is refused (EMLINK). The descriptor, or -1 with
     * errno. Any thread.
     */
    int (*log_file_open)(const char *path, int flags, mode_t mode);

    /* ---- added in ABI 3.11 (check with MK_API_HAS) ---- */

    /*
     * Add a route to `t`, the table the plugin's routes hook was given (see
     * the hook): the pattern and methods as for route_add() above. MK_OK, or
     * MK_ERR with the reason in err (a bad pattern, no handler, no method).
     * Only inside the routes hook that got `t`.
     */
    int (*route_table_add)(struct mk_route_table *t, uint32_t methods, const char *pattern,
                           mk_route_cb handler, void *arg, char *err, size_t errlen);

    /* ---- added in ABI 3.12 (check with MK_API_HAS) ---- */

    /*
     * The :protocol of an HTTP/2 extended CONNECT (RFC 8441: "websocket"),
     * which the server runs as a GET of its :path (version() is 20), not
     * NUL terminated; NULL for any other request. takeover() on such a
     * request opens a tunnel on its stream: the answer goes out as 200,
     * not 101, and the takeover ops carry the stream's DATA both ways.
     */
    const char *(*request_protocol)(const struct mk_request *r, size_t *len);

    /* ---- added in ABI 3.13 (check with MK_API_HAS) ---- */

    /*
     * A streamed response of known length (a backend's Content-Length):
     * after stream_start() and before the head goes out (in the same hook
     * or continuation), the body is to be exactly `len` bytes. The head
     * announces them with Content-Length (HTTP/1.x and HTTP/2 alike)
     * instead of chunked coding or the close, so an HTTP/1.0 client keeps
     * its connection too; a HEAD request (or a status without a body) gets
     * the head alone with that length, the stream dropped as for any
     * stream not sent (proceed(NULL)). A piece past the length is not
     * taken (stream_write, stream_commit: MK_ERR), and stream_end() before
     * all of it was queued is MK_ERR: a handler whose source ends short
     * calls stream_abort(), and the client sees the body cut. Trailers go
     * out on HTTP/2 only. MK_OK, or MK_ERR when r streams no response, or
     * once a piece was queued or the head went out.
     */
    int (*stream_length)(struct mk_request *r, uint64_t len);

    /* ---- added in ABI 3.14 (check with MK_API_HAS) ---- */

    /*
     * Hold a taken-over connection's input back (hold non-zero: no
     * on_read until takeover_hold(t, 0)), for a plugin that passes the
     * bytes on and whose own destination is full (the proxy's tunnel to
     * its upstream). On HTTP/1 the socket is not read, so the client's
     * TCP window shuts; on an HTTP/2 stream its DATA is kept without being
     * consumed, so the stream's window shuts. Released, what came
     * meanwhile goes to on_read from the loop, never inside this call.
     * The idle timeout still counts. On the connection's worker.
     */
    void (*takeover_hold)(struct mk_takeover *t, int hold);

    /* ---- added in ABI 3.15 (check with MK_API_HAS) ---- */

    /*
     * An interim response before r's final one (RFC 9110 section 15.2):
     * `status` 100 to 199 but 101 (103 Early Hints: `Link` fields), with
     * `fields` as "Name: value\r\n" lines (NULL: none; names tokens,
     * values without CR, LF or NUL, at most MK_INTERIM_MAX bytes), sent at
     * once: over HTTP/1.1 a status line, the fields and the empty line
     * (what the socket does not take goes before the final head), over
     * HTTP/2 a HEADERS frame without END_STREAM. From a hook, a body
     * callback, or any callback of the worker while the plugin holds a
     * suspension handle of r that was not cancelled; any number of times
     * before the final head. MK_OK (sent); MK_DECLINED (the client cannot
     * take one: HTTP/1.0, never sent a 1xx, whatever the time); MK_AGAIN (the connection could
     * take nothing now: not sent, the response unharmed); MK_ERR (a bad
     * status or field, the final head went out or was set going, the
     * stream is gone). The server's own 100 Continue stays its own.
     */
    int (*interim)(struct mk_request *r, int status, const char *fields);

    /* ---- added in ABI 3.16 (check with MK_API_HAS; or mk_api_conf_at) ---- */

    /*
     * The file that line `line` of `conf` is in, and its line there in
     * *file_line. Lines as conf_next(), conf_section_line() and
     * mk_conf_instance.line give them number the lines of every file read
     * for `conf`, the files it includes ("Include") in between: for a file
     * without Include the file is conf_path() and the line stays the same.
     */
    const char *(*conf_where)(const struct mk_conf *conf, int line, int *file_line);

    /* ---- added in ABI 3.17 (check with MK_API_HAS) ---- */

    /*
     * The counters of the site with metrics index i (0 and up, in the order
     * the server first met each site's label; indexes never change while
     * the server lives, and a reload only adds some) into out: MK_OK, or
     * MK_ERR past the last one, before the start, or when the server was
     * built without metrics (MK_METRICS). Index 0 is "(overflow)", the sites
     * past the server's limit of labels. Any thread; each counter is read
     * once, the set is not one instant.
     */
    int (*site_metrics)(unsigned i, struct mk_site_metrics *out);
    /*
     * The connections and reloads since start into out: MK_OK, or MK_ERR
     * (zeros) before the start or when built without metrics. Any thread.
     */
    int (*server_metrics)(struct mk_server_metrics *out);

    /* ---- added in ABI 3.18 (check with MK_API_HAS) ---- */

    /*
     * The connections open now by state (MK_CSTATE_*) into out[0..n-1],
     * summed over the workers (entries past this server's MK_CSTATES are
     * 0): MK_OK, or MK_ERR (zeros) before the start or when built without
     * metrics. Any thread; each worker's counts are read once, the set is
     * not one instant. Refused connections (over MaxConnections) are in
     * none, like in the open connections of stats().
     */
    int (*conn_states)(unsigned *out, unsigned n);

    /* ---- added in ABI 3.19 (check with MK_API_HAS) ---- */

    /*
     * The rate limits of the configuration in force into out: MK_OK, or
     * MK_ERR (zeros) before the start or when built without request rules
     * (MK_RULES). Any thread; each table's count is read once.
     */
    int (*ratelimit_stats)(struct mk_ratelimit_stats *out);
    /*
     * The DirectoryListing of the request rule that took r (a [RULE] of its
     * site, docs/configuration.md): 1 On, 0 Off, -1 when no rule says
     * (then the plugin's own per-site settings decide), and -1 from a
     * server built without request rules. The listing plugin's; any
     * plugin may read it. Worker, during r's hooks.
     */
    int (*listing)(const struct mk_request *r);
    /*
     * The trailer fields the client sent after r's body: an HTTP/1.1
     * chunked body's trailer section, an HTTP/2 request's trailing HEADERS.
     * "Name: value\r\n" lines (HTTP/2 names in lower case), the
     * whitespace around each value removed, in the order they came; *len
     * their bytes. NULL (*len 0) when there are none, or not yet: they are
     * complete when the body is (MK_BODY_END of a streamed body, the call
     * with a buffered one), and valid until r ends. The server held them to
     * the rules of header fields (a bad one is a 400, or a malformed
     * HTTP/2 stream) and bounds them to 16 KiB, but drops no name: a
     * plugin that passes them on removes what a trailer may not carry.
     * On r's worker.
     */
    const char *(*request_trailers)(struct mk_request *r, size_t *len);
    /*
     * The upper bounds of the histograms of site_metrics() (MetricsBuckets),
     * microseconds, ascending, into out[0..n-1]; returns how many there are
     * (1 to MK_METRICS_BUCKETS - 1): bucket [count] is the one without bound
     * and the buckets after it stay 0. 0 when built without metrics. Any
     * thread; the same for the server's life (a reload keeps them).
     */
    unsigned (*metrics_bounds)(uint64_t *out, unsigned n);
    /*
     * HTTP/2 GOAWAY frames received since start by their error code into
     * out[0..n-1] (as h2_goaways_sent of struct mk_server_metrics; entries
     * past MK_METRICS_H2_ERRORS are 0): MK_OK, or MK_ERR (zeros) before the
     * start or when built without metrics or HTTP/2. Any thread.
     */
    int (*h2_goaways_received)(uint64_t *out, unsigned n);
    /*
     * The time r waits on an upstream (a proxy's server, a gateway's
     * backend), for logs (the logger's %{upstream}D): upstream_wait(r, 1)
     * when the plugin starts waiting (its connection or request to the
     * upstream begun), upstream_wait(r, 0) when the wait ends (the
     * upstream's response head came, or it failed); the waits add up (a
     * retry on another server counts both). A wait not ended counts up to
     * the moment upstream_time() is read. upstream_time() returns the
     * microseconds (monotonic clock), or -1 when r never waited. On r's
     * worker, or from a task of r's plugin while it holds r.
     */
    void (*upstream_wait)(struct mk_request *r, int waiting);
    int64_t (*upstream_time)(const struct mk_request *r);

    /* ---- added in ABI 3.20 (check with MK_API_HAS) ---- */

    /*
     * Declare a family of metrics (see MK_METRIC_*): `name` as Prometheus
     * names them ([a-zA-Z_:][a-zA-Z0-9_:]*; a counter's ends in _total, a
     * histogram's in _seconds), `labels` NULL or a NULL-terminated list of
     * at most MK_METRIC_LABELS_MAX names ([a-zA-Z_][a-zA-Z0-9_]*, not "le",
     * not starting with "__"), a histogram's `bounds_us` (n_bounds of them,
     * at most MK_METRIC_BOUNDS_MAX, increasing; NULL and 0: the server's
     * bounds, its MetricsBuckets fixed at its start, MK_METRICS_BOUNDS_US
     * when not set), `help` one line without a backslash. The
     * family's index, the same for the same name declared again with the
     * same kind, labels and bounds (two plugins may share a family); -1
     * (logged) for a bad declaration, a name of the server's own metrics,
     * too many families, or none kept (a configuration only checked, a
     * server without metrics). Controlling thread only (init, site_init,
     * reload_prepare).
     */
    int (*metric_family)(const char *name, int kind, const char *help, const char *const *labels,
                         const uint64_t *bounds_us, unsigned n_bounds);
    /*
     * The series of `family` with label values `values` (one per label
     * name, each at most MK_METRIC_LABEL_VALUE_MAX bytes, copied; NULL for a
     * family without labels): its metric id, the same for the same values
     * declared again, or -1 (logged: a bad family, a value too long, the
     * server's limit of series reached). Its counts start at zero on every
     * worker. Controlling thread only.
     */
    int (*metric_series)(int family, const char *const *values);
    /*
     * The same for a gauge whose level is read at the scrape: cb(arg) on
     * the thread that reads it (any; it must not block), arg valid while
     * the server lives. Declared again with the same values, the first
     * callback stays. metric_add() on its id does nothing.
     */
    int (*metric_gauge_cb)(int family, const char *const *values, mk_metric_read_cb cb, void *arg);
    /*
     * Count n into metric `id`: a counter's n is not negative, a gauge's is
     * a change of its level (+1, -1). On a worker, a store into that
     * worker's own cells; on another thread, an atomic addition into a
     * shared cell (correct, slower). Any thread.
     */
    void (*metric_add)(int id, int64_t n);
    /* A duration of histogram `id`, in microseconds. Any thread, as metric_add. */
    void (*metric_observe)(int id, uint64_t us);
    /*
     * Metric `id` summed over the workers (a callback gauge read now) into
     * out: MK_OK, or MK_ERR (zeros) for an id of -1 or unknown. The
     * plugin's own status figures read their counters so, and the metrics
     * endpoint shows the same. Any thread; each cell is read once, the set
     * is not one instant.
     */
    int (*metric_read)(int id, struct mk_metric_value *out);
    /*
     * Family f (0 and up, in the order of declaration) into out: MK_OK, or
     * MK_ERR past the last one. Any thread.
     */
    int (*metric_family_info)(unsigned f, struct mk_metric_info *out);
    /* Series s (0 and up) of family f, summed, into out: MK_OK, or MK_ERR past the last one. */
    int (*metric_value)(unsigned f, unsigned s, struct mk_metric_value *out);
};

/* Room for a "file:line" of mk_api_conf_at(): a path (PATH_MAX) and a line. */
#define MK_CONF_AT_LEN (4096 + 16)

/*
 * Write "file:line" for line `line` of `cf` (see conf_where) into buf and
 * return buf: with a server older than ABI 3.16, conf_path() and the line.
 */
static inline const char *mk_api_conf_at(const struct mk_api *api, const struct mk_conf *cf,
                                         int line, char *buf, size_t len)
{
    int file_line = line;
    const char *file =
        MK_API_HAS(api, conf_where) ? api->conf_where(cf, line, &file_line) : api->conf_path(cf);
    snprintf(buf, len, "%s:%d", file, file_line);
    return buf;
}

/* The most bytes of fields one api->interim() call may carry. */
#define MK_INTERIM_MAX 8192

/* The longest line of api->error_log(), without the newline. */
#define MK_ERROR_LOG_LINE 1024

/*
 * Well-known request notes (api->note_set(), ABI 3.3). A plugin that
 * authenticated a request (verified its credentials; the auth plugin, for
 * HTTP Basic) notes the user and the scheme before the content stage; any
 * plugin may read them: the cgi and fastcgi plugins pass them on as
 * REMOTE_USER and AUTH_TYPE (RFC 3875 4.1.1, 4.1.11), the logger prints
 * the user with %u. Absent: the server did not authenticate the request.
 */
#define MK_NOTE_REMOTE_USER "remote_user" /* the user, as authenticated */
#define MK_NOTE_AUTH_TYPE "auth_type"     /* the scheme that did it: "Basic" */
/*
 * Notes the server sets before any hook (server keys RequestId and
 * TraceContext; absent when off): the request's ID, and the 32 lowercase
 * hex digits of its W3C trace id.
 */
#define MK_NOTE_REQUEST_ID "request_id"
#define MK_NOTE_TRACE_ID "trace_id"

/* One counter of a plugin's stats hook: its name (letters, digits, '_') and value. */
typedef void (*mk_stats_emit_cb)(void *arg, const char *name, uint64_t value);

struct mk_plugin {
    /* MK_PLUGIN_ABI_INIT fills these three. */
    uint16_t abi_major; /* MK_PLUGIN_ABI_MAJOR the plugin was built with */
    uint16_t abi_minor; /* MK_PLUGIN_ABI_MINOR the plugin was built with */
    uint32_t size;      /* sizeof(struct mk_plugin) the plugin was built with */
    const char *name;
    const char *version;
    const char *description;

    /*
     * Process start, after the configuration was read. `conf_dir` is the
     * configuration directory (NULL when serving with built-in defaults).
     * MK_ERR stops the server, after the plugin logged why.
     */
    int (*init)(const struct mk_api *api, const char *conf_dir);
    void (*exit)(void);
    /*
     * Reload (SIGHUP, MK_CMD_RELOAD), in two steps (ABI 3; it replaced
     * reload()). reload_prepare() reads the plugin's files into a pending
     * state, leaving the state in force untouched: MK_OK, or MK_ERR with
     * "file:line: reason" in err, which refuses the whole reload. The
     * site_init() calls of the new configuration follow and read the pending
     * state. Every reload_prepare() that returned MK_OK is followed by one
     * reload_commit(): with commit true the pending state goes in force
     * (requests of the new configuration see it), with false it is
     * discarded (the reload was refused, here or elsewhere). Define both or
     * neither (the server refuses one alone); without them a plugin keeps
     * what init() read until a restart.
     */
    int (*reload_prepare)(char *err, size_t errlen);
    void (*reload_commit)(int commit);
    /* SIGUSR1: reopen log files. */
    void (*reopen_logs)(void);
    /* A worker thread starts and stops (worker_init runs on that thread). */
    int (*worker_init)(int worker_id);
    void (*worker_exit)(int worker_id);

    int (*conn_accept)(struct mk_conn *c);
    int (*request)(struct mk_request *r);
    int (*content)(struct mk_request *r);
    void (*request_done)(struct mk_request *r);
    void (*conn_close)(struct mk_conn *c);

    const struct mk_transport *transport;

    /* ---- added in ABI 2 ---- */

    /* Sections of site files this plugin reads, NULL terminated. */
    const char *const *site_sections;
    /*
     * Each site of each configuration built (start, reload), on the
     * controlling thread. Read this plugin's sections of the site file from
     * `conf` and store what the hooks need in *data. MK_ERR with
     * "file:line: reason" in err refuses the whole configuration.
     */
    int (*site_init)(const struct mk_site *site, const struct mk_conf *conf, void **data, char *err,
                     size_t errlen);
    /* Release what site_init() stored (the configuration is gone). */
    void (*site_free)(void *data);
    /* After each batch of events a worker handled: a moment to flush buffers. */
    void (*batch_done)(int worker_id);

    /*
     * The plugin's configuration keys (see mk_schema.h), or NULL. The
     * server reads them for every configuration it builds (start, reload,
     * monkey -t): plugin-wide keys from conf_dir/plugins/<schema->file>
     * (a missing file means every default), MK_CONF_SITE keys from the
     * [<schema->section>] sections of each site file (the section needs no
     * entry in site_sections). Any error refuses the configuration with
     * "file:line: reason"; a refused reload changes nothing. The typed
     * structs belong to the configuration (api->plugin_conf, site_conf)
     * and are freed with it, so a plugin with only declared keys needs no
     * reload_prepare/reload_commit.
     */
    const struct mk_conf_schema *conf_schema;

    /* ---- added in ABI 3.3 ---- */

    /*
     * Every response that has a request object is about to be sent: its
     * status (api->status) and body are set, and the hook may still add
     * headers (api->add_header). It runs once per response, for handlers'
     * answers, static files and error answers alike (a request refused by
     * the parser included; its site is then the default site), on the
     * request's worker; not for the short answers the server sends without
     * a request (503 when overloaded, 408 on a connection that sent
     * nothing).
     */
    void (*response_head)(struct mk_request *r);

    /*
     * The plugin's counters, for the server's status (the control plugin
     * shows them under the plugin's name): call emit(arg, name, value) once
     * per counter, the same names in the same order every time. Any thread
     * (the control plugin's own among them), at any time between init()
     * and exit(): read atomics, take no lock a worker holds, never block.
     * api->self() gives the server's context as in any other hook.
     */
    void (*stats)(mk_stats_emit_cb emit, void *arg);

    /* ---- added in ABI 3.4 ---- */

    /*
     * Schemas of repeated site sections, NULL terminated: each names its
     * section (schema->section), declares MK_CONF_SITE keys and its
     * site_size. Every such section of a site file ([WEB_SERVICE], once per
     * service) is filled into a struct of its own, with the checks,
     * defaults and "file:line: reason" errors of any declared key (a
     * key given twice in one section is an error; the same key in two
     * sections is not), before site_init(); api->site_sections() returns
     * them. The sections need no entry in site_sections.
     */
    const struct mk_conf_schema *const *section_schemas;

    /*
     * A line for the error log of r's site (api->error_log): `len` bytes,
     * NUL terminated, no line break. MK_OK when the plugin wrote it (no
     * other plugin sees it then), MK_DECLINED to leave it to the next one
     * and in the end to the server log (the site has no error log of this
     * plugin's). On the request's worker; must not block.
     */
    int (*error_log)(struct mk_request *r, const char *line, size_t len);

    /* ---- added in ABI 3.11 ---- */

    /*
     * The plugin's routes, added to `t` with api->route_table_add(): once
     * with `site` NULL after init(), for every site of every configuration
     * for the server's life, then once per site of each configuration
     * built, after its site_init() (the site's data is there:
     * api->site_data), for that site of that configuration. MK_OK, or
     * MK_ERR with the reason in err (the server names the plugin and the
     * site file). The table is given, not found: nothing else may add to it.
     */
    int (*routes)(const struct mk_site *site, struct mk_route_table *t, char *err, size_t errlen);

    /* ---- added in ABI 3.20 ---- */

    /*
     * Every request, once its site is chosen and its path normalised, before
     * the site's rules ([RULE]: redirects, answers, rewrites, limits), the
     * request hooks and the routes: for answers that no site setting may
     * change, such as the tls plugin's ACME HTTP-01 challenges. MK_DECLINED:
     * nothing to do (the next early hook, then the rules); MK_OK: the hook
     * set the response (status, body), which is sent; an HTTP status: that
     * error answer. On the request's worker; must not block or suspend. A
     * server whose plugins define none pays one test per request.
     */
    int (*early)(struct mk_request *r);
    /*
     * A command of the control plugin's protocol for this plugin: a request
     * line whose first word is control_name ("acme renew example.com":
     * `monkey-ctl acme renew example.com`) is given to control() with the
     * words after the name in `args`. Write the reply, lines of text, NUL
     * ended, into out (cap bytes): MK_OK, or MK_ERR with the reason in out
     * (one line). The control plugin's socket thread, acting for the
     * server (api->self() works); must not block on the network.
     */
    const char *control_name;
    int (*control)(const char *args, char *out, size_t cap);
};

/*
 * Declare a plugin. In a shared object the symbol is `mk_plugin`; built into
 * the binary (MK_PLUGIN_BUILTIN defined by the build) it is mk_plugin_<name>.
 */
#ifdef MK_PLUGIN_BUILTIN
#define MK_PLUGIN_SYMBOL(name) mk_plugin_##name
#else
#define MK_PLUGIN_SYMBOL(name) mk_plugin
#endif
/*
 * MK_PLUGIN_DEFINE(hello) = {
 *     MK_PLUGIN_ABI_INIT,
 *     .name = "hello",
 *     ...
 * };
 */
#define MK_PLUGIN_DEFINE(name) MK_EXPORT const struct mk_plugin MK_PLUGIN_SYMBOL(name)
/* The plugin's own descriptor, for api->site_data(). Declare it first. */
#define MK_PLUGIN_DECLARE(name) extern const struct mk_plugin MK_PLUGIN_SYMBOL(name)
#define MK_PLUGIN_SELF(name) (&MK_PLUGIN_SYMBOL(name))

#endif
