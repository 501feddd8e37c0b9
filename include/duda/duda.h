/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda.h: the Duda web service API. A service sees only this header.
 *
 * A service is a shared object, NAME.duda, that the duda plugin loads for
 * every [WEB_SERVICE] section of a site naming it. It declares itself once
 * with DUDA_REGISTER("Title", "name") and defines
 *
 *     int duda_main(void);     map the routes; 0, or -1 to refuse the load
 *     void duda_exit(void);    optional: the service is unloaded (a stop, the
 *                              old copy after a reload, the end of monkey -t)
 *
 * After duda_main() the service reaches the framework through global
 * objects (names from the original Duda I/O): request, response, router,
 * param, qs, cookie, session, gc, global, worker, event, console, logger,
 * data, conf, fconf, xtime. Each callback gets the request it serves, a
 * duda_request_t, valid until the response has ended (see response->end).
 *
 * Threads: callbacks run on the worker thread that serves the request and
 * must never block (a worker serves thousands of connections). Blocking
 * work goes to the task threads with worker->task(), or the request waits
 * (response->wait) for an event and continues (response->cont).
 *
 * Misuse (a NULL request, ending twice, writing after the end, a bad
 * header or cookie) never aborts the server: the call returns -1, the
 * framework logs it with the service's name and the request is answered
 * 500 if it has not been sent yet.
 *
 * ABI: DUDA_ABI_MAJOR changes when a built service would misread these
 * tables; the plugin refuses a service built for another major. The minor
 * grows when functions are appended to an object: a service checks with
 * DUDA_HAS(obj, fn) before calling a function newer than its plugin.
 */
#ifndef DUDA_DUDA_H
#define DUDA_DUDA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define DUDA_ABI_MAJOR 1
#define DUDA_ABI_MINOR 4

/*
 * Packages (include/duda/duda_package.h): NAME.dpkg files of PackagesRoot
 * that a service loads in duda_main() with duda_load_package(obj, "NAME").
 * The package ABI is versioned like the service ABI: the plugin refuses a
 * package built for another DUDA_PACKAGE_ABI_MAJOR.
 */
#define DUDA_PACKAGE_ABI_MAJOR 1
#define DUDA_PACKAGE_ABI_MINOR 0

typedef struct duda_request duda_request_t;

/*
 * Since service ABI 1.1: a connection taken over after 101 Switching
 * Protocols (response->takeover), for WebSocket and the like. Its
 * callbacks run on the connection's worker, one at a time, with the
 * service current. on_open (optional) runs once the 101 went out, before
 * any on_read; on_writable (optional) once what was written went out after
 * socket_write answered DUDA_AGAIN; on_close exactly once, last (s NULL
 * when the 101 never went out), after which s is gone.
 */
typedef struct duda_socket duda_socket_t;
struct duda_socket_ops {
    void (*on_open)(duda_socket_t *s, void *arg);
    void (*on_read)(duda_socket_t *s, const void *data, size_t len, void *arg);
    void (*on_writable)(duda_socket_t *s, void *arg);
    void (*on_close)(duda_socket_t *s, void *arg);
};

/* A route's callback: answer with response->..., then response->end(). */
typedef void (*duda_callback_t)(duda_request_t *dr);

/* Methods of router->map (a GET route answers HEAD too). */
#define DUDA_GET 0x0002u
#define DUDA_HEAD 0x0004u
#define DUDA_POST 0x0008u
#define DUDA_PUT 0x0010u
#define DUDA_DELETE 0x0020u
#define DUDA_OPTIONS 0x0040u
#define DUDA_PATCH 0x0080u
#define DUDA_ANY 0xffffffffu

/* Cookie attributes of cookie->set. */
#define DUDA_COOKIE_SECURE 0x1u
#define DUDA_COOKIE_HTTPONLY 0x2u
#define DUDA_COOKIE_SAMESITE_LAX 0x4u
#define DUDA_COOKIE_SAMESITE_STRICT 0x8u
#define DUDA_COOKIE_SAMESITE_NONE 0x10u /* needs DUDA_COOKIE_SECURE */

/* Results of response->flush. */
#define DUDA_OK 0
#define DUDA_ERR (-1)
#define DUDA_AGAIN (-2) /* taken, but the client is slow: write again later */

/* Results of session->lookup (since ABI 1.3). */
#define DUDA_SESSION_NONE 0
#define DUDA_SESSION_FOUND 1
#define DUDA_SESSION_UNAVAILABLE (-3) /* the store could not be asked: answer 503, not 401 */

/* Every object starts with its size: DUDA_HAS(obj, fn) tells whether the plugin has `fn`. */
#define DUDA_HAS(obj, fn) (offsetof(__typeof__(*(obj)), fn) + sizeof((obj)->fn) <= (obj)->size)

struct duda_request_api {
    size_t size;
    /* The method ("GET") and the decoded, normalised path, NUL terminated. */
    const char *(*method)(duda_request_t *dr);
    const char *(*path)(duda_request_t *dr);
    int (*is_get)(duda_request_t *dr);
    int (*is_head)(duda_request_t *dr);
    int (*is_post)(duda_request_t *dr);
    int (*is_put)(duda_request_t *dr);
    int (*is_delete)(duda_request_t *dr);
    /* A request header (first of the name; NUL terminated, freed at the end), or NULL. */
    const char *(*header_get)(duda_request_t *dr, const char *name);
    /* Whether Content-Type is `type` (parameters such as charset ignored, no case). */
    int (*is_content_type)(duda_request_t *dr, const char *type);
    /*
     * The body of a route mapped with router->map: read whole before the
     * callback ("" with *len 0: none). NULL for router->map_stream routes.
     */
    const char *(*body)(duda_request_t *dr, size_t *len);
    /*
     * For router->map_stream routes, in the callback: deliver the body to
     * on_data(dr, data, len) as it arrives, then on_data(dr, NULL, 0) once
     * it is complete; end the response from there. 0 or -1.
     */
    int (*body_stream)(duda_request_t *dr,
                       void (*on_data)(duda_request_t *dr, const char *data, size_t len));
    /* The client's address as text. */
    const char *(*remote_addr)(duda_request_t *dr);
    /* The service's own pointer for this request (NULL until set; never freed by Duda). */
    int (*set_ctx)(duda_request_t *dr, void *ctx);
    void *(*ctx)(duda_request_t *dr);

    /* ---- since service ABI 1.4 (check with DUDA_HAS) ---- */

    /* The HTTP version: 10, 11, or 20 for HTTP/2. */
    int (*version)(duda_request_t *dr);
    /*
     * The :protocol of an HTTP/2 extended CONNECT (RFC 8441: "websocket"),
     * which reaches the route as a GET of its path; NULL for any other
     * request. response->takeover() on such a request answers 200 and the
     * socket is that HTTP/2 stream (no Upgrade, no Sec-WebSocket-Accept).
     */
    const char *(*protocol)(duda_request_t *dr);
};

struct duda_response_api {
    size_t size;
    /* The status, a final one: 200 to 599 (a 1xx is misuse; 101 comes with takeover). */
    int (*http_status)(duda_request_t *dr, int status);
    /* Add a header (copied). -1: bad characters, or the head is out. */
    int (*http_header)(duda_request_t *dr, const char *name, const char *value);
    int (*http_content_type)(duda_request_t *dr, const char *type);
    /* Append to the body (copied). */
    int (*print)(duda_request_t *dr, const char *data, size_t len);
    int (*printf)(duda_request_t *dr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
    /* The whole body is a file of the service (relative to its DataDir, or absolute). */
    int (*sendfile)(duda_request_t *dr, const char *path);
    int (*sendfile_range)(duda_request_t *dr, const char *path, off_t offset, size_t len);
    /*
     * Streaming: the first flush sends the status and headers (chunked, no
     * Content-Length) and what was printed; later ones send what was
     * printed since. DUDA_OK, DUDA_AGAIN (taken; the client is slow),
     * DUDA_ERR (dropped: the client is gone or far behind).
     */
    int (*flush)(duda_request_t *dr);
    /*
     * Park the request (no I/O) until cont(): the callback returns and an
     * event (a timer, an fd, a thread) produces the answer. Between wait()
     * and cont() only the party holding the result writes to dr.
     */
    int (*wait)(duda_request_t *dr);
    /*
     * Resume a request parked by wait(), from any thread: what the service
     * printed and ended goes out. Once per wait(); a no-op when the request
     * is already gone (timed out or the client left).
     */
    int (*cont)(duda_request_t *dr);
    /*
     * The response is complete: it goes out when the callback returns (or
     * at cont() for a waiting request). end_cb (optional) runs once it was
     * sent or the request failed. Ending twice is misuse (-1, logged).
     */
    int (*end)(duda_request_t *dr, void (*end_cb)(duda_request_t *dr));

    /* ---- since service ABI 1.1 (check with DUDA_HAS) ---- */

    /*
     * In a route's callback, for a request that asks for an Upgrade
     * (HTTP/1.1 without a body): the response becomes 101 Switching
     * Protocols; add Upgrade and Connection headers, then end() it. Once it
     * went out the connection's bytes go to ops (arg is theirs), with
     * `idle_ms` of silence closing it (0: the server's KeepAliveTimeout).
     * 0, or -1 when the request cannot be taken over (HTTP/1.0, HTTP/2, a
     * body): answer something else then.
     */
    int (*takeover)(duda_request_t *dr, const struct duda_socket_ops *ops, void *arg,
                    unsigned idle_ms);
    /*
     * Send bytes (copied) on the socket's worker: DUDA_OK; DUDA_AGAIN taken,
     * but more than 64 KiB wait to go out (reading pauses until on_writable);
     * DUDA_ERR not taken (closing).
     */
    int (*socket_write)(duda_socket_t *s, const void *data, size_t len);
    /* Close once what was written went out; on_close follows from the loop. */
    int (*socket_close)(duda_socket_t *s);
    /* The client's address as text (valid as long as s). */
    const char *(*socket_remote_addr)(duda_socket_t *s);
};

struct duda_router_api {
    size_t size;
    /*
     * Map `pattern` ("/users/:id", "/files/ *" without the space) under the
     * service's prefix (/name, or the site's root with Root on) for the
     * DUDA_* methods. From duda_main() only; -1 for a bad pattern or
     * method set (the load then fails with the reason).
     */
    int (*map)(const char *pattern, uint32_t methods, duda_callback_t cb);
    /* The same, with the body left to request->body_stream(). */
    int (*map_stream)(const char *pattern, uint32_t methods, duda_callback_t cb);
    /* The callback of the service's root, /name and /name/ (GET and HEAD). */
    int (*root)(duda_callback_t cb);
};

struct duda_param_api {
    size_t size;
    /* The value of `:name` in the route that took dr (NUL terminated, freed at the end), or NULL.
     */
    const char *(*get)(duda_request_t *dr, const char *name);
    /* The same as a number: 0, or -1 when absent or not a whole number. */
    int (*get_number)(duda_request_t *dr, const char *name, long *out);
};

struct duda_qs_api {
    size_t size;
    /* The decoded value of query key `key` (first one; '+' is a space), or NULL. */
    const char *(*get)(duda_request_t *dr, const char *key);
    /* The value as received (not decoded, not NUL terminated), or NULL. */
    const char *(*get_raw)(duda_request_t *dr, const char *key, size_t *len);
    /* Number of key=value pairs. */
    int (*count)(duda_request_t *dr);
};

struct duda_cookie_api {
    size_t size;
    /* Set-Cookie: `expires` seconds from now (0: a session cookie), DUDA_COOKIE_* flags. */
    int (*set)(duda_request_t *dr, const char *name, const char *value, long expires,
               unsigned flags);
    /* The value the client sent (NUL terminated, freed at the end), or NULL. */
    const char *(*get)(duda_request_t *dr, const char *name);
    /* Tell the client to drop the cookie. */
    int (*destroy)(duda_request_t *dr, const char *name);
};

/*
 * Sessions: a store shared by every worker, with expiry, and nothing to set
 * up. The id is 128 random bits in a cookie named `name`; the value is
 * text the service stores.
 */
struct duda_session_api {
    size_t size;
    /* Start a session holding `value` for `expires` seconds; sets the cookie.
       0, or -1 (also when the store cannot be reached: answer 503). */
    int (*create)(duda_request_t *dr, const char *name, const char *value, long expires);
    /* The value of the client's live session (freed at the end), or NULL:
       no session, or a store that could not be asked (lookup tells which). */
    const char *(*get)(duda_request_t *dr, const char *name);
    int (*isset)(duda_request_t *dr, const char *name);
    /* End the session and drop its cookie. 0, or -1 when there was none. */
    int (*destroy)(duda_request_t *dr, const char *name);
    /*
     * Since ABI 1.3: the client's session, telling "no session" from "the
     * store could not be asked" (a Redis store down, its answer lost):
     * DUDA_SESSION_FOUND (*value, when value is not NULL, the session's,
     * freed at the end), DUDA_SESSION_NONE (no cookie, or no live session
     * for it: not logged in, 401), DUDA_SESSION_UNAVAILABLE (the client may
     * well be logged in: answer 503, never 401), or DUDA_ERR (misuse).
     */
    int (*lookup)(duda_request_t *dr, const char *name, const char **value);
};

/* Memory released when the request ends. */
struct duda_gc_api {
    size_t size;
    void *(*alloc)(duda_request_t *dr, size_t size); /* zeroed; NULL when short */
    int (*add)(duda_request_t *dr, void *p);         /* free(p) at the end */
    /* Service ABI 1.1: fn(p) at the end (newest first), e.g. a package's own destructor. */
    int (*add_fn)(duda_request_t *dr, void (*fn)(void *p), void *p);
};

/* Per-worker values: one per worker thread, made by make() on first use there. */
typedef struct duda_global {
    void *(*make)(void);
    void (*destroy)(void *value);
    int id;
} duda_global_t;

struct duda_global_api {
    size_t size;
    /*
     * In duda_main(): declare a key. make (may be NULL) makes each worker's
     * first value; destroy (may be NULL) releases each value made, once: on
     * its worker when that worker stops (its loop still there), else when
     * the service is unloaded (on the controlling thread, after duda_exit).
     */
    int (*init)(duda_global_t *key, void *(*make)(void), void (*destroy)(void *value));
    void *(*get)(duda_global_t *key);
    int (*set)(duda_global_t *key, void *value);
};

struct duda_worker_api {
    size_t size;
    /* A thread of the service's own, detached. 0 or -1. Under monkey -t: 0, and no thread. */
    int (*spawn)(void *(*fn)(void *), void *arg);
    /* In duda_main(): fn runs on each worker before its first request for the service. */
    int (*pre_loop)(void (*fn)(void));
    /*
     * Blocking work: work(arg) runs on a task thread, then done(dr, arg) on
     * the request's worker (dr NULL when the request is gone: release arg
     * only). The callback returns after this; done() ends the response.
     */
    int (*task)(duda_request_t *dr, void (*work)(void *arg),
                void (*done)(duda_request_t *dr, void *arg), void *arg);

    /* ---- since service ABI 1.1 (check with DUDA_HAS) ---- */

    /* The worker running the caller (0 .. count()-1), or -1 off the workers. */
    int (*id)(void);
    /* The server's worker threads. */
    int (*count)(void);
    /*
     * Run fn(arg) on worker `worker` soon, with the service current, from
     * any thread: how a worker hands another one data for its own
     * connections (calls to one worker run in the order they were made).
     * 0, or -1 (no such worker, memory short): then fn never runs. Calls
     * still queued when the server stops run during the stop, on the
     * controlling thread (id() is -1 there), so fn can release arg.
     */
    int (*call)(int worker, void (*fn)(void *arg), void *arg);
};

typedef struct duda_timer duda_timer_t;
typedef struct duda_watch duda_watch_t;

#define DUDA_EVENT_READ 0x1u
#define DUDA_EVENT_WRITE 0x2u

struct duda_event_api {
    size_t size;
    /*
     * A timer on the current worker: cb(dr, data) after `ms`, then every
     * `ms` when `repeat`. With a dr the timer belongs to that request and
     * stops when it ends; NULL otherwise.
     */
    duda_timer_t *(*timer_add)(duda_request_t *dr, unsigned ms, int repeat,
                               void (*cb)(duda_request_t *dr, void *data), void *data);
    int (*timer_del)(duda_timer_t *t);
    /* Watch a non-blocking fd on the current worker: cb(fd, DUDA_EVENT_* ready, data). */
    duda_watch_t *(*add)(int fd, unsigned mask, void (*cb)(int fd, unsigned ready, void *data),
                         void *data);
    int (*del)(duda_watch_t *w);
    /* Run cb(data) on every worker (the service's workers): 0 or -1. */
    int (*signal_all)(void (*cb)(void *data), void *data);

    /* ---- since service ABI 1.2 (check with DUDA_HAS) ---- */

    /*
     * A timer made once and armed again and again without an allocation
     * each time (a write coalesced to the next loop iteration).
     * timer_new(): on the current worker, not armed; with a dr it belongs
     * to that request and goes when the request ends. timer_arm(): cb(dr,
     * data) once in `ms` (0: at the next loop iteration); an armed timer is
     * moved (only the new time counts). timer_disarm(): no call until it is
     * armed again. After its call the timer stays, not armed, unless the
     * callback armed it again (then 0 counts as 1 ms: never twice in one
     * loop iteration); timer_del() frees it (also inside its callback). Both return 0, or -1 for a
     * timer of timer_add() or one deleted, or off its worker.
     */
    duda_timer_t *(*timer_new)(duda_request_t *dr, void (*cb)(duda_request_t *dr, void *data),
                               void *data);
    int (*timer_arm)(duda_timer_t *t, unsigned ms);
    int (*timer_disarm)(duda_timer_t *t);
};

struct duda_console_api {
    size_t size;
    /* A debug message in the server's log, prefixed with the service's name. */
    void (*debug)(duda_request_t *dr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
    /* In duda_main(): serve a dashboard (the service, its routes, memory) at `path`. */
    int (*dashboard)(const char *path);
};

typedef struct duda_logger duda_logger_t;

struct duda_logger_api {
    size_t size;
    /* In duda_main(): a log file `name` in the service's LogDir. NULL on error. */
    duda_logger_t *(*create)(const char *name);
    /* Append a line (a newline is added); written by the logger thread, off the workers. */
    int (*print)(duda_logger_t *log, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
};

struct duda_data_api {
    size_t size;
    const char *(*get_path)(void); /* DataDir, or NULL */
    /* DataDir/name, allocated for the request (dr) or with malloc (dr NULL). */
    char *(*locate)(duda_request_t *dr, const char *name);
};

struct duda_conf_api {
    size_t size;
    const char *(*get_path)(void); /* ConfDir, or NULL */
};

/* An indented configuration file of ConfDir ([SECTION], then "    Key value" lines). */
typedef struct duda_fconf duda_fconf_t;

struct duda_fconf_api {
    size_t size;
    /* Read ConfDir/name; NULL with the reason (file:line) logged. */
    duda_fconf_t *(*read)(const char *name);
    /* The value of `key` in `section` (first one, no case), or NULL. */
    const char *(*get)(duda_fconf_t *f, const char *section, const char *key);
    void (*free)(duda_fconf_t *f);
};

struct duda_xtime_api {
    size_t size;
    time_t (*now)(void);             /* seconds since the epoch */
    time_t (*tomorrow)(void);        /* the next midnight, UTC */
    time_t (*next_hours)(int hours); /* now + hours */
    uint64_t (*monotonic_ms)(void);  /* a monotonic clock */
    /* An HTTP date ("Sun, 06 Nov 1994 08:49:37 GMT") into buf (30 bytes). */
    const char *(*http_date)(time_t t, char *buf, size_t len);
};

/* Since service ABI 1.1: packages (docs/duda.md, "Packages"). */
struct duda_package_api {
    size_t size;
    /*
     * In duda_main() (or a package's init): load package `name` from the
     * plugin's PackagesRoot, once per process (shared, refcounted, by every
     * service that loads it), and return its API struct. `abi_major` and
     * `abi_minor` are the caller's DUDA_PACKAGE_ABI_*. NULL when the file
     * is missing, is not a package, or was built for another package ABI
     * major: the service's load then fails with that reason, naming the
     * package. The package stays loaded until the service is unloaded.
     */
    const void *(*load)(const char *name, unsigned abi_major, unsigned abi_minor);
};

/* The tables the plugin hands a service at load. */
struct duda_api {
    uint16_t abi_major, abi_minor;
    uint32_t size;
    const struct duda_request_api *request;
    const struct duda_response_api *response;
    const struct duda_router_api *router;
    const struct duda_param_api *param;
    const struct duda_qs_api *qs;
    const struct duda_cookie_api *cookie;
    const struct duda_session_api *session;
    const struct duda_gc_api *gc;
    const struct duda_global_api *global;
    const struct duda_worker_api *worker;
    const struct duda_event_api *event;
    const struct duda_console_api *console;
    const struct duda_logger_api *logger;
    const struct duda_data_api *data;
    const struct duda_conf_api *conf;
    const struct duda_fconf_api *fconf;
    const struct duda_xtime_api *xtime;
    const struct duda_package_api *package; /* service ABI 1.1 */
};

/* What DUDA_REGISTER exports: read by the plugin before any service code runs. */
struct duda_service_info {
    uint16_t abi_major, abi_minor;
    const char *title;
    const char *name;
    void (*bind)(const struct duda_api *api);
};

#define DUDA_HIDDEN __attribute__((visibility("hidden")))
#define DUDA_EXPORT __attribute__((visibility("default")))

/* The plugin itself defines DUDA_PLUGIN_INTERNAL: the service's globals are not its own. */
#ifndef DUDA_PLUGIN_INTERNAL

extern DUDA_HIDDEN const struct duda_request_api *request;
extern DUDA_HIDDEN const struct duda_response_api *response;
extern DUDA_HIDDEN const struct duda_router_api *router;
extern DUDA_HIDDEN const struct duda_param_api *param;
extern DUDA_HIDDEN const struct duda_qs_api *qs;
extern DUDA_HIDDEN const struct duda_cookie_api *cookie;
extern DUDA_HIDDEN const struct duda_session_api *session;
extern DUDA_HIDDEN const struct duda_gc_api *gc;
extern DUDA_HIDDEN const struct duda_global_api *global;
extern DUDA_HIDDEN const struct duda_worker_api *worker;
extern DUDA_HIDDEN const struct duda_event_api *event;
extern DUDA_HIDDEN const struct duda_console_api *console;
extern DUDA_HIDDEN const struct duda_logger_api *logger;
extern DUDA_HIDDEN const struct duda_data_api *data;
extern DUDA_HIDDEN const struct duda_conf_api *conf;
extern DUDA_HIDDEN const struct duda_fconf_api *fconf;
extern DUDA_HIDDEN const struct duda_xtime_api *xtime;
extern DUDA_HIDDEN const struct duda_package_api *package;

/*
 * In duda_main(): obj = the API struct of package `name` (a pointer to the
 * package's struct, declared by its header <duda/packages/NAME.h>), or NULL
 * (the service's load then fails with the reason, see package->load).
 */
#define duda_load_package(obj, name)                                                               \
    ((obj) = package ? package->load((name), DUDA_PACKAGE_ABI_MAJOR, DUDA_PACKAGE_ABI_MINOR) : NULL)

DUDA_EXPORT int duda_main(void);
DUDA_EXPORT void duda_exit(void);

/*
 * The objects' definitions and the function that sets them from the
 * plugin's tables: shared by DUDA_REGISTER and DUDA_PACKAGE (a package has
 * its own copies). Not for direct use.
 */
#define DUDA_OBJECTS_DEFINE_(bind_fn)                                                              \
    const struct duda_request_api *request;                                                        \
    const struct duda_response_api *response;                                                      \
    const struct duda_router_api *router;                                                          \
    const struct duda_param_api *param;                                                            \
    const struct duda_qs_api *qs;                                                                  \
    const struct duda_cookie_api *cookie;                                                          \
    const struct duda_session_api *session;                                                        \
    const struct duda_gc_api *gc;                                                                  \
    const struct duda_global_api *global;                                                          \
    const struct duda_worker_api *worker;                                                          \
    const struct duda_event_api *event;                                                            \
    const struct duda_console_api *console;                                                        \
    const struct duda_logger_api *logger;                                                          \
    const struct duda_data_api *data;                                                              \
    const struct duda_conf_api *conf;                                                              \
    const struct duda_fconf_api *fconf;                                                            \
    const struct duda_xtime_api *xtime;                                                            \
    const struct duda_package_api *package;                                                        \
    static void bind_fn(const struct duda_api *a)                                                  \
    {                                                                                              \
        request = a->request, response = a->response, router = a->router;                          \
        param = a->param, qs = a->qs, cookie = a->cookie, session = a->session;                    \
        gc = a->gc, global = a->global, worker = a->worker, event = a->event;                      \
        console = a->console, logger = a->logger, data = a->data, conf = a->conf;                  \
        fconf = a->fconf, xtime = a->xtime;                                                        \
        package = a->size >= offsetof(struct duda_api, package) + sizeof(a->package) ? a->package  \
                                                                                     : NULL;       \
    }

/* Once per service, in one of its files: its title and name (the NAME of NAME.duda). */
#define DUDA_REGISTER(title, name)                                                                 \
    DUDA_OBJECTS_DEFINE_(duda_bind_)                                                               \
    DUDA_EXPORT const struct duda_service_info duda_service = {DUDA_ABI_MAJOR, DUDA_ABI_MINOR,     \
                                                               title, name, duda_bind_}

#endif /* DUDA_PLUGIN_INTERNAL */

#endif
