/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * control.h: what the parts of the control plugin share.
 *
 *   control.c    the plugin's hooks: start, stop and reload
 *   config.c     control.conf: its declared keys and their checks
 *   socket.c     the socket file and the thread that serves its clients
 *   protocol.c   one request line of a client: commands and replies
 *   documents.c  the documents (status, workers, sites, plugins, config)
 *   json.c       the bounded reply buffer and JSON strings
 *   http.c       the HTTP status page (HttpPath) and the metrics (MetricsPath), routes of every
 * site metrics.c    the metrics in Prometheus' formats (MK_METRICS builds only)
 *
 * The socket thread (socket.c, protocol.c, documents.c) and the workers
 * (http.c, documents.c) share nothing mutable: what they read of the server
 * comes through the API, and the struct control_self of a server is written by init() only.
 */
#ifndef MONKEY_PLUGIN_CONTROL_H
#define MONKEY_PLUGIN_CONTROL_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <monkey/mk_json.h>
#include <monkey/mk_plugin.h>
#include <monkey/mk_util.h>

#define CONTROL_DEFAULT_SOCKET "monkey.sock"
#define CONTROL_DEFAULT_MODE 0600
#define CONTROL_LINE_MAX 256         /* a request line, its end included */
#define CONTROL_IO_MS 3000           /* to send the line, and to read the reply */
#define CONTROL_CLIENTS 16           /* connections served at once */
#define CONTROL_REPLY_MAX (4u << 20) /* the largest reply built */
/* the largest metrics document: every series of 4096 sites, with room */
#define CONTROL_METRICS_MAX (64u << 20)
#define CONTROL_ALLOW_MAX 64      /* HttpAllow entries */
#define CONTROL_HTTP_PATH_MAX 200 /* HttpPath length */
#define CONTROL_WHERE_MAX (PATH_MAX + 32)

/* What control.conf says. */
struct control_settings {
    char socket_path[PATH_MAX];           /* resolved against the conf dir */
    char socket_where[CONTROL_WHERE_MAX]; /* "file:line" of Socket, for errors */
    mode_t mode;
    char http_path[CONTROL_HTTP_PATH_MAX + 1];    /* "": no HTTP status */
    char metrics_path[CONTROL_HTTP_PATH_MAX + 1]; /* "": no metrics */
    struct mk_cidr allow[CONTROL_ALLOW_MAX];
    unsigned n_allow;
    bool allow_given; /* an HttpAllow line replaced the loopback default */
};

/*
 * A reply or a document under construction is a struct mk_json, the
 * server's JSON writer buffer (mk_json.h), bounded by CONTROL_REPLY_MAX;
 * `failed` sticks. A zeroed one is empty and ready (control_buf_add).
 */

enum control_client_state {
    CONTROL_FREE = 0,
    CONTROL_READING, /* waiting for the request line */
    CONTROL_WRITING, /* sending the reply */
    CONTROL_HOLDING  /* stop accepted: closed when the server is done */
};

struct control_client {
    enum control_client_state state;
    int fd;
    bool hold;        /* hold the connection once the reply is sent */
    int64_t deadline; /* monotonic ms */
    char line[CONTROL_LINE_MAX];
    size_t line_len;
    struct mk_json reply;
    size_t sent;
};

/* The server's functions, set by init(). */
extern const struct mk_api *control_api;

MK_PLUGIN_DECLARE(control);

/* ---- config.c ------------------------------------------------------------ */

/* control.conf, read by the server into every configuration it builds. */
extern const struct mk_conf_schema control_schema;

/* ---- socket.c ------------------------------------------------------------ */

/*
 * The plugin's state for one server (api->self): two servers of one process
 * each have their socket and thread. Set in init(); the thread owns the
 * clients; exit() ends the thread and frees it.
 */
struct control_self {
    struct control_settings running; /* read-only after init (the socket cannot move on reload) */
    struct mk_server *server;        /* the server the thread answers for (api->thread_serve) */
    int listen_fd;
    int wake_fd; /* exit() writes here to end the thread */
    bool thread_started;
    pthread_t thread;
    dev_t sock_dev; /* the socket file created, removed at exit if still ours */
    ino_t sock_ino;
    struct control_client clients[CONTROL_CLIENTS];
};

/* The socket thread of `arg` (a struct control_self): serve clients until exit(). */
void *control_thread_main(void *arg);
/* Check that the socket's directory exists and that we may create files in it. */
int control_check_dir(const struct control_settings *s);
/* Create, bind and listen on the socket of s; sets self->listen_fd. */
int control_listen(struct control_self *self, const struct control_settings *s);
/* Release what init() set up (not self itself); safe to call in any state. */
void control_shutdown(struct control_self *self);

/* ---- protocol.c ---------------------------------------------------------- */

/* Build the reply to the request line held by cl (NUL-terminated, no LF). */
void control_answer(struct control_client *cl);
/* The reply "ERR reason" (with a JSON body when asked for JSON). */
void control_reply_error(struct mk_json *b, const char *command, bool json, const char *reason);

/* ---- documents.c --------------------------------------------------------- */

/*
 * Each document, as text or as JSON, appended to b: MK_OK, or MK_ERR with
 * the reason in err (the server has not started yet). Any thread.
 */
int control_doc_status(struct mk_json *b, bool json, char *err, size_t errlen);
int control_doc_workers(struct mk_json *b, bool json, char *err, size_t errlen);
int control_doc_sites(struct mk_json *b, bool json, char *err, size_t errlen);
int control_doc_plugins(struct mk_json *b, bool json, char *err, size_t errlen);
int control_doc_config(struct mk_json *b, bool json, char *err, size_t errlen);

#ifdef CONTROL_HAVE_METRICS
/* ---- metrics.c ----------------------------------------------------------- */

/*
 * The metrics document, appended to b: Prometheus' text format 0.0.4, or
 * OpenMetrics 1.0.0 when `om`. MK_ERR while the server is still starting.
 * Any thread.
 */
int control_doc_metrics(struct mk_json *b, bool om);
/* Does the Accept of r name application/openmetrics-text? */
bool control_wants_openmetrics(const struct mk_request *r);
/* The Content-Type of the document in that format. */
const char *control_metrics_type(bool om);
#endif

/* ---- json.c -------------------------------------------------------------- */

/* Append n bytes; on failure (memory, CONTROL_REPLY_MAX) mark the buffer. */
void control_buf_add(struct mk_json *b, const char *s, size_t n);
/* Append the string s. */
void control_buf_str(struct mk_json *b, const char *s);
/* Append printf-formatted text. */
__attribute__((format(printf, 2, 3))) void control_buf_printf(struct mk_json *b, const char *fmt,
                                                              ...);
/* Release b's memory and make it empty (and usable) again. */
void control_buf_free(struct mk_json *b);
/* Append s as a JSON string, quotes included; NULL is appended as null. */
void control_buf_json(struct mk_json *b, const char *s);

/* ---- http.c -------------------------------------------------------------- */

/*
 * Route HttpPath (GET) on every site of each configuration to the status
 * document, and MetricsPath to the metrics, for the addresses of HttpAllow.
 */
int control_routes(const struct mk_site *site, struct mk_route_table *t, char *err, size_t errlen);

#endif
