/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * mk_plugin.h: the plugin API. A plugin sees only this header.
 *
 * A plugin is one exported constant `struct mk_plugin`, named `mk_plugin`
 * in a shared object (listed in plugins.load as a path) or
 * `mk_plugin_<name>` when built into the binary (listed by name). The server
 * refuses a plugin whose `abi` differs from MK_PLUGIN_ABI.
 *
 * The server calls a plugin only through the hooks below and a plugin
 * reaches the server only through the `struct mk_api` table it receives in
 * init(). Requests and connections are opaque.
 *
 * Threads: init(), exit() and reload() run on the thread that controls the
 * server, while no request is being served by this plugin's hooks for the
 * configuration being replaced; every other hook runs on a worker thread,
 * several workers at once. Hooks must not block: a worker serves thousands of
 * connections.
 *
 * Stages of a request, in order (every hook is optional):
 *   conn_accept    a connection was accepted       MK_OK, or MK_ERR to close it
 *   request        a request head was parsed       MK_OK to go on, an HTTP status
 *                                                  (>= 400) to answer with it, or
 *                                                  MK_ERR to close the connection
 *   content        produce the response            MK_DECLINED (not mine),
 *                                                  MK_OK (response set up),
 *                                                  MK_AGAIN (call me again once
 *                                                  the request body is read), an
 *                                                  HTTP status, or MK_ERR
 *   request_done   the response was sent (or the   -
 *                  connection failed while sending)
 *   conn_close     the connection is closing       -
 * Plugins are called in plugins.load order; the first content hook that does
 * not decline owns the response. The built-in static file handler runs last.
 *
 * Transport: a plugin may provide `transport`, a named byte layer that a
 * listener selects with a second word on its Listen line
 * ("Listen 8443 tls"). Plain sockets are the built-in transport "plain".
 */
#ifndef MONKEY_MK_PLUGIN_H
#define MONKEY_MK_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "mk_common.h"

/* Bump on any change to the structs or the order of function pointers. */
#define MK_PLUGIN_ABI 1

struct mk_request;
struct mk_conn;
struct mk_conf; /* a parsed configuration file (the indented format) */

enum mk_plugin_log_level {
    MK_PLUGIN_LOG_ERROR = 0,
    MK_PLUGIN_LOG_WARN,
    MK_PLUGIN_LOG_INFO,
    MK_PLUGIN_LOG_DEBUG
};

/* Flags of transport writes. */
#define MK_IO_MORE 0x1 /* more data follows at once: hold back a partial segment */

/*
 * A byte layer under HTTP. Each call returns a byte count, 0 for end of
 * stream (read), or -1 with errno set; EAGAIN means "wait for readiness in
 * the same direction". The connection's descriptor is api->conn_fd(c).
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
};

/* The server's functions, passed to init(). Valid for the process lifetime. */
struct mk_api {
    uint32_t abi;

    /* diagnostics */
    void (*log)(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

    /* the request */
    const char *(*method)(const struct mk_request *r, size_t *len); /* "GET" */
    const char *(*path)(const struct mk_request *r, size_t *len);   /* decoded, normalised */
    const char *(*target)(const struct mk_request *r, size_t *len); /* as received */
    const char *(*query)(const struct mk_request *r, size_t *len);  /* NULL: none */
    const char *(*host)(const struct mk_request *r, size_t *len);
    int (*version)(const struct mk_request *r); /* 10 or 11 */
    /* Value of a request header (first of that name), NULL if absent. */
    const char *(*header)(const struct mk_request *r, const char *name, size_t *len);
    /* Number of request headers and the i-th one. */
    unsigned (*header_count)(const struct mk_request *r);
    int (*header_at)(const struct mk_request *r, unsigned i, const char **name, size_t *name_len,
                     const char **value, size_t *value_len);
    /* The request body: NULL until it has been read, that is until content()
       is called again after returning MK_AGAIN ("" with len 0: no body). */
    const char *(*body)(const struct mk_request *r, size_t *len);
    /* The site's document root (absolute path). */
    const char *(*docroot)(const struct mk_request *r);
    /* The client address as text ("192.0.2.1", "2001:db8::1"). */
    const char *(*remote_addr)(const struct mk_request *r, char *buf, size_t len);
    struct mk_conn *(*conn)(const struct mk_request *r);

    /* the response */
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
     * section names come without brackets. conf_where() formats "file:line"
     * for messages about an entry.
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
};

struct mk_plugin {
    uint32_t abi; /* MK_PLUGIN_ABI */
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
    /* SIGHUP: re-read the plugin's configuration. MK_ERR keeps the old one. */
    int (*reload)(void);
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
#define MK_PLUGIN_DEFINE(name) MK_EXPORT const struct mk_plugin MK_PLUGIN_SYMBOL(name)

#endif
