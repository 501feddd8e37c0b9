/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * control.c: the control socket (the original Monkey's "Cheetah"). A unix
 * socket answers short queries about the running server (uptime, workers
 * and their connections, requests served, bytes sent, sites, plugins, the
 * configuration in force) and carries out reload, log reopening and a
 * graceful stop. monkey-ctl (monkey-ctl.c) is its client; the optional HTTP
 * path serves the status document as JSON to configured addresses.
 *
 * Guarantees:
 * - The socket is served by one thread of the plugin, started in init()
 *   (never under `monkey -t`) and joined in exit(). Workers never wait for
 *   it and share nothing with it: the HTTP settings are declared keys
 *   (control_keys), which the server reads into every configuration it
 *   builds; a request reads those of its own configuration, without locks.
 * - One request line per connection, one reply, then the connection is
 *   closed (after a stop: once the server has finished). A client gets
 *   CONTROL_IO_MS to send its line and again to read the reply; a line
 *   longer than CONTROL_LINE_MAX is refused. Up to CONTROL_CLIENTS are served
 *   at once, so a few stalled clients delay nobody. The socket answers once
 *   the server has started; earlier connections wait in the backlog.
 * - A stale socket file (nobody answers) is replaced at start; a socket a
 *   live server answers on, a path that is not a socket, or a directory
 *   that is missing or not writable stop the server with the configuration
 *   file and line. The file is removed at exit only if it is still ours.
 * - JSON documents are valid: strings are escaped, invalid UTF-8 becomes
 *   U+FFFD.
 *
 * The line protocol is described in README.md.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <monkey/mk_json.h>
#include <monkey/mk_plugin.h>
#include <monkey/mk_util.h>

#define CONTROL_DEFAULT_SOCKET "monkey.sock"
#define CONTROL_DEFAULT_MODE 0600
#define CONTROL_LINE_MAX 256         /* a request line, its end included */
#define CONTROL_IO_MS 3000           /* to send the line, and to read the reply */
#define CONTROL_CLIENTS 16           /* connections served at once */
#define CONTROL_REPLY_MAX (4u << 20) /* the largest reply built */
#define CONTROL_ALLOW_MAX 64         /* HttpAllow entries */
#define CONTROL_HTTP_PATH_MAX 200    /* HttpPath length */
#define CONTROL_WHERE_MAX (PATH_MAX + 32)

/* An address block of HttpAllow. */
/* What control.conf says. */
struct control_settings {
    char socket_path[PATH_MAX];           /* resolved against the conf dir */
    char socket_where[CONTROL_WHERE_MAX]; /* "file:line" of Socket, for errors */
    mode_t mode;
    char http_path[CONTROL_HTTP_PATH_MAX + 1]; /* "": no HTTP status */
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

static const struct mk_api *api;

MK_PLUGIN_DECLARE(control);

/* Set in init(), read-only afterwards (the socket cannot move on reload). */
static struct control_settings control_running;

/* The socket thread. */
static int control_listen_fd = -1;
static int control_wake_fd = -1;
static bool control_thread_started;
static pthread_t control_thread;
static dev_t control_sock_dev;
static ino_t control_sock_ino;
static struct control_client control_clients[CONTROL_CLIENTS];

/* ---- buffers and JSON ------------------------------------------------------ */

/* Append n bytes; on failure (memory, CONTROL_REPLY_MAX) mark the buffer. */
static void control_buf_add(struct mk_json *b, const char *s, size_t n)
{
    if (!b->max) {
        b->max = CONTROL_REPLY_MAX; /* a zeroed buffer */
    }
    mk_json_raw(b, s, n);
}

/* Append the string s. */
static void control_buf_str(struct mk_json *b, const char *s)
{
    control_buf_add(b, s, strlen(s));
}

__attribute__((format(printf, 2, 3))) static void control_buf_printf(struct mk_json *b,
                                                                     const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;

    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if ((size_t) n < sizeof(tmp)) {
        control_buf_add(b, tmp, (size_t) n);
        return;
    }
    char *big = malloc((size_t) n + 1);
    if (!big) {
        b->failed = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t) n + 1, fmt, ap);
    va_end(ap);
    control_buf_add(b, big, (size_t) n);
    free(big);
}

/* Release b's memory and make it empty (and usable) again. */
static void control_buf_free(struct mk_json *b)
{
    mk_json_free(b);
    memset(b, 0, sizeof(*b));
}

/* Append s as a JSON string, quotes included; NULL is appended as null. */
static void control_buf_json(struct mk_json *b, const char *s)
{
    if (!s) {
        control_buf_str(b, "null");
        return;
    }
    control_buf_add(b, "\"", 1);
    mk_json_escape(b, s, strlen(s));
    control_buf_add(b, "\"", 1);
}

/* ---- the documents ----------------------------------------------------------- */

/*
 * The server's statistics, or MK_ERR while the workers do not exist yet
 * (during start); worker_stats() is the call that checks that. A worker may
 * serve a request a moment before the start time is set: then it is now.
 */
static int control_stats(struct mk_server_stats *st)
{
    struct mk_worker_stats ws;

    if (api->worker_stats(0, &ws) != MK_OK) {
        return MK_ERR;
    }
    api->stats(st);
    if (!st->started) {
        st->started = time(NULL);
    }
    return MK_OK;
}

/* Append a byte count for people: "123456 (120.6 KiB)". */
static void control_bytes_text(struct mk_json *b, uint64_t n)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double) n;
    unsigned u = 0;

    control_buf_printf(b, "%" PRIu64, n);
    if (n < 1024) {
        return;
    }
    v /= 1024;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    control_buf_printf(b, " (%.1f %s)", v, units[u]);
}

/* The worker table, as text lines or as a JSON array. */
static void control_doc_worker_list(struct mk_json *b, unsigned workers, bool json)
{
    if (json) {
        control_buf_str(b, "[");
    }
    else {
        control_buf_str(b, "worker  connections  requests        bytes sent\n");
    }
    for (unsigned i = 0; i < workers; i++) {
        struct mk_worker_stats ws;
        if (api->worker_stats(i, &ws) != MK_OK) {
            memset(&ws, 0, sizeof(ws));
        }
        if (json) {
            control_buf_printf(b,
                               "%s{\"id\":%u,\"connections\":%u,\"requests\":%" PRIu64
                               ",\"bytes_sent\":%" PRIu64 "}",
                               i ? "," : "", i, ws.connections, ws.requests, ws.bytes_out);
        }
        else {
            control_buf_printf(b, "%-7u %-12u %-15" PRIu64 " ", i, ws.connections, ws.requests);
            control_bytes_text(b, ws.bytes_out);
            control_buf_str(b, "\n");
        }
    }
    if (json) {
        control_buf_str(b, "]");
    }
}

/* "status": the whole server, then the workers. */
static int control_doc_status(struct mk_json *b, bool json, char *err, size_t errlen)
{
    struct mk_server_stats st;
    char when[64];
    struct tm tm;

    if (control_stats(&st) != MK_OK) {
        snprintf(err, errlen, "the server is still starting");
        return MK_ERR;
    }
    time_t now = time(NULL);
    long long uptime = now > st.started ? (long long) (now - st.started) : 0;
    gmtime_r(&st.started, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (json) {
        control_buf_printf(b,
                           "{\"pid\":%ld,\"started\":%lld,\"started_utc\":\"%s\",\"uptime\":%lld,"
                           "\"workers\":%u,\"connections\":%u,\"requests\":%" PRIu64
                           ",\"bytes_sent\":%" PRIu64 ",\"per_worker\":",
                           (long) getpid(), (long long) st.started, when, uptime, st.workers,
                           st.connections, st.requests, st.bytes_out);
        control_doc_worker_list(b, st.workers, true);
        control_buf_str(b, "}\n");
        return MK_OK;
    }
    control_buf_printf(b, "pid          %ld\n", (long) getpid());
    control_buf_printf(b, "started      %s\n", when);
    control_buf_printf(b, "uptime       %lld s (%lldd %02lld:%02lld:%02lld)\n", uptime,
                       uptime / 86400, uptime / 3600 % 24, uptime / 60 % 60, uptime % 60);
    control_buf_printf(b, "workers      %u\n", st.workers);
    control_buf_printf(b, "connections  %u\n", st.connections);
    control_buf_printf(b, "requests     %" PRIu64 "\n", st.requests);
    control_buf_str(b, "bytes sent   ");
    control_bytes_text(b, st.bytes_out);
    control_buf_str(b, "\n\n");
    control_doc_worker_list(b, st.workers, false);
    return MK_OK;
}

/* "workers": one entry per worker thread. */
static int control_doc_workers(struct mk_json *b, bool json, char *err, size_t errlen)
{
    struct mk_server_stats st;

    if (control_stats(&st) != MK_OK) {
        snprintf(err, errlen, "the server is still starting");
        return MK_ERR;
    }
    if (json) {
        control_buf_str(b, "{\"workers\":");
        control_doc_worker_list(b, st.workers, true);
        control_buf_str(b, "}\n");
        return MK_OK;
    }
    control_doc_worker_list(b, st.workers, false);
    return MK_OK;
}

/* "sites": the virtual hosts of the configuration in force. */
static int control_doc_sites(struct mk_json *b, bool json, char *err, size_t errlen)
{
    struct mk_config *cfg = api->config_get();

    if (!cfg) {
        snprintf(err, errlen, "no configuration in force");
        return MK_ERR;
    }
    unsigned n = api->config_sites(cfg);
    if (json) {
        control_buf_str(b, "{\"sites\":[");
    }
    for (unsigned i = 0; i < n; i++) {
        const struct mk_site *s = api->config_site(cfg, i);
        const char *name;
        if (json) {
            control_buf_str(b, i ? ",{\"names\":[" : "{\"names\":[");
            for (unsigned j = 0; (name = api->site_name(s, j)) != NULL; j++) {
                control_buf_str(b, j ? "," : "");
                control_buf_json(b, name);
            }
            control_buf_str(b, "],\"document_root\":");
            control_buf_json(b, api->site_docroot(s));
            control_buf_str(b, ",\"file\":");
            control_buf_json(b, api->site_file(s));
            control_buf_str(b, "}");
            continue;
        }
        control_buf_str(b, i ? "\nsite" : "site");
        if (!api->site_name(s, 0)) {
            control_buf_str(b, " (no ServerName)");
        }
        for (unsigned j = 0; (name = api->site_name(s, j)) != NULL; j++) {
            control_buf_printf(b, " %s", name);
        }
        control_buf_printf(b, "\n    document root  %s\n    file           %s\n",
                           api->site_docroot(s), api->site_file(s));
    }
    if (json) {
        control_buf_str(b, "]}\n");
    }
    api->config_put(cfg);
    return MK_OK;
}

/* "plugins": the loaded plugins in plugins.load order. */
static int control_doc_plugins(struct mk_json *b, bool json, char *err, size_t errlen)
{
    unsigned n = api->plugin_count();

    (void) err;
    (void) errlen;
    if (json) {
        control_buf_str(b, "{\"plugins\":[");
    }
    for (unsigned i = 0; i < n; i++) {
        const struct mk_plugin *p = api->plugin_at(i);
        if (!p) {
            continue;
        }
        const char *name = p->name ? p->name : "";
        const char *version = p->version ? p->version : "";
        const char *description = p->description ? p->description : "";
        if (json) {
            control_buf_str(b, i ? ",{\"name\":" : "{\"name\":");
            control_buf_json(b, name);
            control_buf_str(b, ",\"version\":");
            control_buf_json(b, version);
            control_buf_str(b, ",\"description\":");
            control_buf_json(b, description);
            control_buf_str(b, "}");
        }
        else {
            control_buf_printf(b, "%-12s %-8s %s\n", name, version, description);
        }
    }
    if (json) {
        control_buf_str(b, "]}\n");
    }
    return MK_OK;
}

/* "config": every [SERVER] key with its values in force, defaults included. */
static int control_doc_config(struct mk_json *b, bool json, char *err, size_t errlen)
{
    struct mk_config *cfg = api->config_get();
    const char *key;

    if (!cfg) {
        snprintf(err, errlen, "no configuration in force");
        return MK_ERR;
    }
    control_buf_str(b, json ? "{\"config\":{" : "[SERVER]\n");
    for (unsigned i = 0; (key = api->config_key(i)) != NULL; i++) {
        const char *value;
        if (json) {
            control_buf_str(b, i ? "," : "");
            control_buf_json(b, key);
            control_buf_str(b, ":[");
        }
        for (unsigned j = 0; (value = api->config_value(cfg, key, j)) != NULL; j++) {
            if (json) {
                control_buf_str(b, j ? "," : "");
                control_buf_json(b, value);
            }
            else {
                control_buf_printf(b, "    %s %s\n", key, value);
            }
        }
        if (json) {
            control_buf_str(b, "]");
        }
    }
    if (json) {
        control_buf_str(b, "}}\n");
    }
    api->config_put(cfg);
    return MK_OK;
}

/* ---- the requests of the socket ---------------------------------------------- */

struct control_command {
    const char *name;
    int (*doc)(struct mk_json *b, bool json, char *err, size_t errlen);
    int cmd;          /* MK_CMD_* for actions, 0 for documents */
    const char *done; /* what an action did, for the reply */
};

static const struct control_command control_commands[] = {
    {"status", control_doc_status, 0, NULL},
    {"workers", control_doc_workers, 0, NULL},
    {"sites", control_doc_sites, 0, NULL},
    {"plugins", control_doc_plugins, 0, NULL},
    {"config", control_doc_config, 0, NULL},
    {"reload", NULL, MK_CMD_RELOAD, "configuration reloaded"},
    {"reopen", NULL, MK_CMD_REOPEN_LOGS, "log files reopened"},
    {"stop", NULL, MK_CMD_STOP, "server stopped"},
};

/* Replace control characters of an error line so the reply stays one line. */
static void control_one_line(char *s)
{
    for (; *s; s++) {
        if ((unsigned char) *s < 0x20 || *s == 0x7f) {
            *s = ' ';
        }
    }
}

/* The reply "ERR reason" (with a JSON body when asked for JSON). */
static void control_reply_error(struct mk_json *b, const char *command, bool json,
                                const char *reason)
{
    char line[1024];

    snprintf(line, sizeof(line), "%s", reason);
    control_one_line(line);
    control_buf_free(b);
    control_buf_printf(b, "ERR %s\n", line);
    if (json) {
        control_buf_str(b, "{\"ok\":false,\"command\":");
        control_buf_json(b, command);
        control_buf_str(b, ",\"error\":");
        control_buf_json(b, line);
        control_buf_str(b, "}\n");
    }
}

/* Who is at the other end of fd, for the log. */
static void control_peer(int fd, char *out, size_t len)
{
    struct ucred cred;
    socklen_t clen = sizeof(cred);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) {
        snprintf(out, len, "uid %u, pid %ld", (unsigned) cred.uid, (long) cred.pid);
    }
    else {
        snprintf(out, len, "an unknown peer");
    }
}

/* Run an action through api->command(); it waits for the controlling thread. */
static void control_run_action(struct control_client *cl, const struct control_command *c,
                               bool json)
{
    char err[512] = "", peer[64], reason[640];

    control_peer(cl->fd, peer, sizeof(peer));
    api->log(MK_PLUGIN_LOG_INFO, "control: %s requested by %s", c->name, peer);
    if (api->command(c->cmd, err, sizeof(err)) != MK_OK) {
        snprintf(reason, sizeof(reason), "%s refused: %s", c->name,
                 err[0] ? err : "no reason given");
        control_reply_error(&cl->reply, c->name, json, reason);
        return;
    }
    control_buf_str(&cl->reply, "OK\n");
    if (json) {
        control_buf_str(&cl->reply, "{\"ok\":true,\"command\":");
        control_buf_json(&cl->reply, c->name);
        control_buf_str(&cl->reply, ",\"message\":");
        control_buf_json(&cl->reply, c->done);
        control_buf_str(&cl->reply, "}\n");
    }
    else {
        control_buf_printf(&cl->reply, "%s\n", c->done);
    }
    cl->hold = c->cmd == MK_CMD_STOP;
}

/* Build the reply to the request line held by cl (NUL-terminated, no LF). */
static void control_answer(struct control_client *cl)
{
    char word[CONTROL_LINE_MAX], format[CONTROL_LINE_MAX], extra[CONTROL_LINE_MAX];
    char err[512] = "";
    int n = sscanf(cl->line, "%255s %255s %255s", word, format, extra);
    bool json = false;

    if (n < 1) {
        control_reply_error(&cl->reply, "", false, "empty request");
        return;
    }
    if (n == 3) {
        control_reply_error(&cl->reply, word, false, "too many words (COMMAND [text|json])");
        return;
    }
    if (n == 2) {
        if (strcasecmp(format, "json") == 0) {
            json = true;
        }
        else if (strcasecmp(format, "text") != 0) {
            control_reply_error(&cl->reply, word, false, "unknown format (text or json)");
            return;
        }
    }
    for (size_t i = 0; i < sizeof(control_commands) / sizeof(control_commands[0]); i++) {
        const struct control_command *c = &control_commands[i];
        if (strcasecmp(word, c->name) != 0) {
            continue;
        }
        if (c->cmd) {
            control_run_action(cl, c, json);
            return;
        }
        struct mk_json body = {0};
        if (c->doc(&body, json, err, sizeof(err)) != MK_OK) {
            control_buf_free(&body);
            control_reply_error(&cl->reply, c->name, json, err);
            return;
        }
        if (body.failed) {
            control_buf_free(&body);
            control_reply_error(&cl->reply, c->name, json, "reply too large or out of memory");
            return;
        }
        control_buf_str(&cl->reply, "OK\n");
        control_buf_add(&cl->reply, body.data ? body.data : "", body.len);
        control_buf_free(&body);
        return;
    }
    control_reply_error(&cl->reply, "", json,
                        "unknown command (status, workers, sites, plugins, config, reload, "
                        "reopen, stop)");
}

/* ---- the socket thread ---------------------------------------------------------- */

/* Milliseconds of the monotonic clock, for client deadlines. */
static int64_t control_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Close cl's connection (if any) and free its slot. */
static void control_client_close(struct control_client *cl)
{
    if (cl->state != CONTROL_FREE) {
        close(cl->fd);
    }
    control_buf_free(&cl->reply);
    memset(cl, 0, sizeof(*cl));
    cl->fd = -1;
}

/* Is the line printable ASCII (tabs allowed)? NUL bytes and the like are refused. */
static bool control_line_ok(const char *line, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) line[i];
        if ((c < 0x20 && c != '\t') || c >= 0x7f) {
            return false;
        }
    }
    return true;
}

/* The request line is complete: answer it and start sending. */
static void control_client_answer(struct control_client *cl)
{
    if (cl->line_len > 0 && cl->line[cl->line_len - 1] == '\r') {
        cl->line_len--;
    }
    cl->line[cl->line_len] = '\0';
    if (!control_line_ok(cl->line, cl->line_len)) {
        control_reply_error(&cl->reply, "", false, "malformed request line (ASCII words expected)");
    }
    else {
        control_answer(cl);
    }
    if (cl->reply.failed) {
        control_buf_free(&cl->reply);
        control_buf_str(&cl->reply, "ERR out of memory\n");
    }
    cl->state = CONTROL_WRITING;
    cl->sent = 0;
    cl->deadline = control_now_ms() + CONTROL_IO_MS; /* the action may have taken long */
}

/* Read what the client sent; MK_ERR: close it. */
static int control_client_read(struct control_client *cl)
{
    char buf[CONTROL_LINE_MAX];
    ssize_t n = recv(cl->fd, buf, sizeof(buf), 0);

    if (n < 0) {
        return errno == EAGAIN || errno == EINTR ? MK_OK : MK_ERR;
    }
    if (n == 0) {
        return MK_ERR; /* gone before a complete line (a liveness probe, say) */
    }
    char *lf = memchr(buf, '\n', (size_t) n);
    size_t take = lf ? (size_t) (lf - buf) : (size_t) n;
    if (cl->line_len + take >= CONTROL_LINE_MAX) {
        control_reply_error(&cl->reply, "", false, "request line too long");
        cl->state = CONTROL_WRITING;
        cl->sent = 0;
        return MK_OK;
    }
    memcpy(cl->line + cl->line_len, buf, take);
    cl->line_len += take;
    if (lf) {
        control_client_answer(cl);
    }
    return MK_OK;
}

/*
 * Discard what the client sent beyond its line, so that closing does not
 * reset the connection before it has read the reply.
 */
static void control_client_drain(struct control_client *cl)
{
    char buf[4096];

    shutdown(cl->fd, SHUT_WR);
    for (int i = 0; i < 16 && recv(cl->fd, buf, sizeof(buf), 0) > 0; i++) {
    }
}

/* Send the rest of the reply; MK_ERR: close it. */
static int control_client_write(struct control_client *cl)
{
    while (cl->sent < cl->reply.len) {
        ssize_t n = send(cl->fd, cl->reply.data + cl->sent, cl->reply.len - cl->sent, MSG_NOSIGNAL);
        if (n < 0) {
            return errno == EAGAIN || errno == EINTR ? MK_OK : MK_ERR;
        }
        cl->sent += (size_t) n;
    }
    if (!cl->hold) {
        control_client_drain(cl);
        return MK_ERR; /* done: one exchange per connection */
    }
    control_buf_free(&cl->reply); /* the client sees EOF once the server is gone */
    cl->state = CONTROL_HOLDING;
    return MK_OK;
}

/* Accept one connection into a free slot, if any. */
static void control_accept(void)
{
    int fd = accept4(control_listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

    if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE) {
            api->log(MK_PLUGIN_LOG_WARN, "control: accept: %s", strerror(errno));
            struct pollfd p = {control_wake_fd, POLLIN, 0};
            poll(&p, 1, 100); /* the connection waits in the backlog */
        }
        return;
    }
    for (int i = 0; i < CONTROL_CLIENTS; i++) {
        struct control_client *cl = &control_clients[i];
        if (cl->state == CONTROL_FREE) {
            cl->state = CONTROL_READING;
            cl->fd = fd;
            cl->deadline = control_now_ms() + CONTROL_IO_MS;
            return;
        }
    }
    close(fd); /* not reached: the socket is not polled while every slot is busy */
}

/*
 * Wait until the server has started (its port may accept connections before
 * the plugins are initialised): connections made earlier wait in the
 * backlog. False when exit() asked the thread to end.
 */
static bool control_wait_running(void)
{
    for (;;) {
        struct mk_worker_stats ws;
        struct mk_server_stats st;
        if (api->worker_stats(0, &ws) == MK_OK) {
            api->stats(&st);
            if (st.started) {
                return true;
            }
        }
        struct pollfd p = {control_wake_fd, POLLIN, 0};
        if (poll(&p, 1, 10) > 0) {
            return false;
        }
    }
}

/* The socket thread: serve clients until exit() writes to control_wake_fd. */
static void *control_thread_main(void *arg)
{
    struct pollfd pfd[CONTROL_CLIENTS + 2];
    struct control_client *polled[CONTROL_CLIENTS + 2];

    (void) arg;
    if (!control_wait_running()) {
        return NULL;
    }
    for (;;) {
        int64_t now = control_now_ms(), next = -1;
        int n = 0, busy = 0;

        pfd[n++] = (struct pollfd){control_wake_fd, POLLIN, 0};
        for (int i = 0; i < CONTROL_CLIENTS; i++) {
            struct control_client *cl = &control_clients[i];
            if (cl->state == CONTROL_FREE) {
                continue;
            }
            busy++;
            if (cl->state == CONTROL_HOLDING) {
                continue;
            }
            if (now >= cl->deadline) {
                control_client_close(cl); /* too slow */
                busy--;
                continue;
            }
            if (next < 0 || cl->deadline < next) {
                next = cl->deadline;
            }
            polled[n] = cl;
            pfd[n++] = (struct pollfd){cl->fd, cl->state == CONTROL_READING ? POLLIN : POLLOUT, 0};
        }
        if (busy < CONTROL_CLIENTS) {
            polled[n] = NULL;
            pfd[n++] = (struct pollfd){control_listen_fd, POLLIN, 0};
        }
        int timeout = next < 0 ? -1 : (int) (next - now);
        if (poll(pfd, (nfds_t) n, timeout) < 0) {
            if (errno == EINTR) {
                continue;
            }
            api->log(MK_PLUGIN_LOG_ERROR, "control: poll: %s", strerror(errno));
            break;
        }
        if (pfd[0].revents) {
            break;
        }
        for (int i = 1; i < n; i++) {
            if (!pfd[i].revents) {
                continue;
            }
            struct control_client *cl = polled[i];
            if (!cl) {
                control_accept();
                continue;
            }
            int rc = cl->state == CONTROL_READING ? control_client_read(cl) : MK_OK;
            if (rc == MK_OK && cl->state == CONTROL_WRITING) {
                rc = control_client_write(cl);
            }
            if (rc != MK_OK) {
                control_client_close(cl);
            }
        }
    }
    return NULL;
}

/* ---- configuration ----------------------------------------------------------- */

/* The default HttpAllow: loopback only. */
static void control_allow_loopback(struct control_settings *s)
{
    mk_cidr_parse("127.0.0.0/8", 11, &s->allow[0]);
    mk_cidr_parse("::1/128", 7, &s->allow[1]);
    s->n_allow = 2;
}

/* Is p an HttpPath: "/" then printable characters, no space, '?', '#', '%'? */
static bool control_http_path_ok(const char *path)
{
    size_t len = strlen(path);

    if (path[0] != '/' || len > CONTROL_HTTP_PATH_MAX) {
        return false;
    }
    for (const char *p = path; *p; p++) {
        if (*p <= ' ' || *p >= 0x7f || *p == '?' || *p == '#' || *p == '%') {
            return false;
        }
    }
    if (strstr(path, "//") || strstr(path, "/./") || strstr(path, "/../")) {
        return false;
    }
    /* A trailing "/." or "/.." is not normalised either. */
    return !(len >= 2 && strcmp(path + len - 2, "/.") == 0) &&
           !(len >= 3 && strcmp(path + len - 3, "/..") == 0);
}

/* Socket PATH: absolute, or relative to the configuration directory. */
static int control_set_socket(void *obj, const struct mk_conf_key *k, const char *value,
                              const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct control_settings *s = obj;
    int n;

    (void) k;
    if (value[0] == '/' || !origin->confdir) {
        n = snprintf(s->socket_path, sizeof(s->socket_path), "%s", value);
    }
    else {
        n = snprintf(s->socket_path, sizeof(s->socket_path), "%s/%s", origin->confdir, value);
    }
    size_t plen = strlen(s->socket_path);
    if (n < 0 || (size_t) n >= sizeof(s->socket_path) || plen == 0 ||
        s->socket_path[plen - 1] == '/') {
        snprintf(reason, len, "'%s': not a file path", value);
        return MK_ERR;
    }
    if (strncmp(origin->where, "built-in default", 16) == 0) {
        snprintf(s->socket_where, sizeof(s->socket_where), "%s%s (default Socket %s)",
                 origin->confdir ? origin->confdir : "control",
                 origin->confdir ? "/plugins/control.conf" : "", value);
    }
    else {
        snprintf(s->socket_where, sizeof(s->socket_where), "%s", origin->where);
    }
    return MK_OK;
}

/* Mode: octal digits, at most 0777. */
static int control_set_mode(void *obj, const struct mk_conf_key *k, const char *value,
                            const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct control_settings *s = obj;
    unsigned v = 0;
    bool ok = *value && strlen(value) <= 4;

    (void) k;
    (void) origin;
    for (const char *p = value; ok && *p; p++) {
        ok = *p >= '0' && *p <= '7';
        v = v * 8 + (unsigned) (*p - '0');
    }
    if (!ok || v > 0777) {
        snprintf(reason, len, "'%s': octal permissions expected (0000 to 0777)", value);
        return MK_ERR;
    }
    s->mode = (mode_t) v;
    return MK_OK;
}

static int control_set_http_path(void *obj, const struct mk_conf_key *k, const char *value,
                                 const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct control_settings *s = obj;

    (void) k;
    (void) origin;
    if (!control_http_path_ok(value)) {
        snprintf(reason, len, "'%s': a normalised path starting with '/' expected", value);
        return MK_ERR;
    }
    snprintf(s->http_path, sizeof(s->http_path), "%s", value);
    return MK_OK;
}

/* HttpAllow BLOCK...: the first line replaces the loopback default, later ones add. */
static int control_set_allow(void *obj, const struct mk_conf_key *k, const char *value,
                             const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct control_settings *s = obj;
    char list[1024], *save = NULL;

    (void) k;
    (void) origin;
    if (!s->allow_given) {
        s->n_allow = 0;
    }
    s->allow_given = true;
    snprintf(list, sizeof(list), "%s", value);
    for (char *tok = strtok_r(list, " \t,", &save); tok; tok = strtok_r(NULL, " \t,", &save)) {
        if (s->n_allow == CONTROL_ALLOW_MAX) {
            snprintf(reason, len, "more than %d address blocks", CONTROL_ALLOW_MAX);
            return MK_ERR;
        }
        if (mk_cidr_parse(tok, strlen(tok), &s->allow[s->n_allow]) != MK_CIDR_OK) {
            snprintf(reason, len, "'%s': an address or ADDRESS/BITS expected", tok);
            return MK_ERR;
        }
        s->n_allow++;
    }
    return MK_OK;
}

/* The keys together: HttpAllow needs HttpPath and an address. */
static int control_finish(void *obj, int site, const char **key, char *reason, size_t len)
{
    struct control_settings *s = obj;

    (void) site;
    if (!s->allow_given) {
        control_allow_loopback(s);
        return MK_OK;
    }
    *key = "HttpAllow";
    if (!s->http_path[0]) {
        snprintf(reason, len, "HttpAllow without HttpPath");
        return MK_ERR;
    }
    if (s->n_allow == 0) {
        snprintf(reason, len, "HttpAllow lists no address");
        return MK_ERR;
    }
    return MK_OK;
}

/*
 * control.conf, read by the server into every configuration it builds (a
 * missing file: every default). Socket and Mode are used at start only.
 */
static const struct mk_conf_key control_keys[] = {
    {"Socket", MK_CONF_CUSTOM, 0, 0, 0, 0, 0, CONTROL_DEFAULT_SOCKET, .set = control_set_socket},
    {"Mode", MK_CONF_CUSTOM, 0, 0, 0, 0, 0, "0600", .set = control_set_mode},
    {"HttpPath", MK_CONF_CUSTOM, 0, 0, 0, 0, 0, NULL, .set = control_set_http_path},
    {"HttpAllow", MK_CONF_CUSTOM, MK_CONF_MULTI, 0, 0, 0, 0, NULL, .set = control_set_allow},
    {NULL},
};

static const struct mk_conf_schema control_schema = {
    .section = "CONTROL",
    .file = "control.conf",
    .keys = control_keys,
    .size = sizeof(struct control_settings),
    .finish = control_finish,
};

/* ---- the socket file ------------------------------------------------------------ */

/*
 * Fill addr for `path`. A path longer than sun_path goes through its
 * directory, opened in *dirfd (close it after use; -1 when not needed).
 */
static int control_sockaddr(const char *path, struct sockaddr_un *addr, int *dirfd)
{
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    *dirfd = -1;
    if (strlen(path) < sizeof(addr->sun_path)) {
        memcpy(addr->sun_path, path, strlen(path) + 1);
        return MK_OK;
    }
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    size_t dlen = slash ? (size_t) (slash - path) : 0;
    if (!slash || dlen >= sizeof(dir)) {
        errno = ENAMETOOLONG;
        return MK_ERR;
    }
    memcpy(dir, path, dlen);
    dir[dlen] = '\0';
    *dirfd = open(dlen ? dir : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*dirfd < 0) {
        return MK_ERR;
    }
    int n =
        snprintf(addr->sun_path, sizeof(addr->sun_path), "/proc/self/fd/%d/%s", *dirfd, slash + 1);
    if (n < 0 || (size_t) n >= sizeof(addr->sun_path)) {
        close(*dirfd);
        *dirfd = -1;
        errno = ENAMETOOLONG;
        return MK_ERR;
    }
    return MK_OK;
}

/* Check that the socket's directory exists and that we may create files in it. */
static int control_check_dir(const struct control_settings *s)
{
    char dir[PATH_MAX];
    struct stat st;
    const char *slash = strrchr(s->socket_path, '/');

    if (!slash) {
        snprintf(dir, sizeof(dir), ".");
    }
    else if (slash == s->socket_path) {
        snprintf(dir, sizeof(dir), "/");
    }
    else {
        snprintf(dir, sizeof(dir), "%.*s", (int) (slash - s->socket_path), s->socket_path);
    }
    if (stat(dir, &st) != 0) {
        api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: directory %s: %s", s->socket_where,
                 s->socket_path, dir, strerror(errno));
        return MK_ERR;
    }
    if (!S_ISDIR(st.st_mode)) {
        api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: %s is not a directory", s->socket_where,
                 s->socket_path, dir);
        return MK_ERR;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: directory %s is not writable: %s",
                 s->socket_where, s->socket_path, dir, strerror(errno));
        return MK_ERR;
    }
    return MK_OK;
}

/*
 * A file already at the socket path: remove it when it is a socket nobody
 * answers on (left by a crashed server); MK_ERR when a server answers on it
 * or it is not a socket.
 */
static int control_clear_stale(const struct control_settings *s)
{
    struct stat st;
    struct sockaddr_un addr;
    int dirfd;

    if (lstat(s->socket_path, &st) != 0) {
        if (errno == ENOENT) {
            return MK_OK;
        }
        api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: %s", s->socket_where, s->socket_path,
                 strerror(errno));
        return MK_ERR;
    }
    if (!S_ISSOCK(st.st_mode)) {
        api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: the file exists and is not a socket",
                 s->socket_where, s->socket_path);
        return MK_ERR;
    }
    if (control_sockaddr(s->socket_path, &addr, &dirfd) != MK_OK) {
        api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: %s", s->socket_where, s->socket_path,
                 strerror(errno));
        return MK_ERR;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int rc = fd < 0 ? -1 : connect(fd, (struct sockaddr *) &addr, sizeof(addr));
    int saved = errno;
    if (fd >= 0) {
        close(fd);
    }
    if (dirfd >= 0) {
        close(dirfd);
    }
    if (rc == 0 || saved == EAGAIN || saved == EINPROGRESS) {
        api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: another server answers on this socket",
                 s->socket_where, s->socket_path);
        return MK_ERR;
    }
    if (saved != ECONNREFUSED) {
        api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: cannot check the existing socket: %s",
                 s->socket_where, s->socket_path, strerror(saved));
        return MK_ERR;
    }
    if (unlink(s->socket_path) != 0 && errno != ENOENT) {
        api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: cannot remove the stale socket: %s",
                 s->socket_where, s->socket_path, strerror(errno));
        return MK_ERR;
    }
    api->log(MK_PLUGIN_LOG_INFO, "control: replaced the stale socket %s", s->socket_path);
    return MK_OK;
}

/* Create, bind and listen on the socket of s; sets control_listen_fd. */
static int control_listen(const struct control_settings *s)
{
    struct sockaddr_un addr;
    struct stat st;
    int dirfd;

    if (control_clear_stale(s) != MK_OK) {
        return MK_ERR;
    }
    if (control_sockaddr(s->socket_path, &addr, &dirfd) != MK_OK) {
        api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: %s", s->socket_where, s->socket_path,
                 strerror(errno));
        return MK_ERR;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *) &addr, sizeof(addr)) != 0) {
        api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: %s", s->socket_where, s->socket_path,
                 strerror(errno));
        goto fail;
    }
    /* Not listening yet: nobody can connect before the mode is in place. */
    if (chmod(s->socket_path, s->mode) != 0 || listen(fd, CONTROL_CLIENTS) != 0 ||
        lstat(s->socket_path, &st) != 0) {
        api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: %s", s->socket_where, s->socket_path,
                 strerror(errno));
        unlink(s->socket_path);
        goto fail;
    }
    if (dirfd >= 0) {
        close(dirfd);
    }
    control_sock_dev = st.st_dev;
    control_sock_ino = st.st_ino;
    control_listen_fd = fd;
    return MK_OK;

fail:
    if (fd >= 0) {
        close(fd);
    }
    if (dirfd >= 0) {
        close(dirfd);
    }
    return MK_ERR;
}

/* Remove the socket file if it is still the one we created. */
static void control_unlink_ours(void)
{
    struct stat st;

    if (lstat(control_running.socket_path, &st) == 0 && st.st_dev == control_sock_dev &&
        st.st_ino == control_sock_ino) {
        unlink(control_running.socket_path);
    }
}

/* Release what init() set up; safe to call in any state. */
static void control_shutdown(void)
{
    if (control_thread_started) {
        uint64_t one = 1;
        ssize_t ignored = write(control_wake_fd, &one, sizeof(one));
        (void) ignored;
        pthread_join(control_thread, NULL);
        control_thread_started = false;
    }
    if (control_listen_fd >= 0) {
        control_unlink_ours();
        close(control_listen_fd);
        control_listen_fd = -1;
    }
    /* Clients still held (a stop) learn here that the server is done. */
    for (int i = 0; i < CONTROL_CLIENTS; i++) {
        control_client_close(&control_clients[i]);
    }
    if (control_wake_fd >= 0) {
        close(control_wake_fd);
        control_wake_fd = -1;
    }
}

/* ---- hooks ------------------------------------------------------------------------ */

static int control_init(const struct mk_api *server_api, const char *conf_dir)
{
    struct control_settings s;
    sigset_t all, old;

    (void) conf_dir;
    api = server_api;
    for (int i = 0; i < CONTROL_CLIENTS; i++) {
        control_clients[i].fd = -1;
    }
    /* control.conf as the server read it for the configuration being started. */
    s = *(const struct control_settings *) api->plugin_conf(NULL, MK_PLUGIN_SELF(control));
    if (control_check_dir(&s) != MK_OK) {
        return MK_ERR;
    }
    control_running = s;
    if (api->checking()) {
        return MK_OK; /* validated; no socket, no thread */
    }
    if (control_listen(&s) != MK_OK) {
        return MK_ERR;
    }
    control_wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (control_wake_fd < 0) {
        api->log(MK_PLUGIN_LOG_ERROR, "control: eventfd: %s", strerror(errno));
        control_shutdown();
        return MK_ERR;
    }
    /* The thread takes no signals: the server handles them. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&control_thread, NULL, control_thread_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        api->log(MK_PLUGIN_LOG_ERROR, "control: cannot start the socket thread: %s", strerror(rc));
        control_shutdown();
        return MK_ERR;
    }
    control_thread_started = true;
    api->log(MK_PLUGIN_LOG_INFO, "control: listening on %s (mode %04o)%s%s", s.socket_path,
             (unsigned) s.mode, s.http_path[0] ? ", HTTP status on " : "", s.http_path);
    return MK_OK;
}

/* Server stop: end the thread, remove the socket, close held clients. */
static void control_exit(void)
{
    control_shutdown();
}

/* Reload, step one: the server reads control.conf itself; nothing to set aside. */
static int control_reload_prepare(char *err, size_t errlen)
{
    (void) err;
    (void) errlen;
    return MK_OK;
}

/*
 * Reload, step two: the new HttpPath and HttpAllow are in force with the
 * new configuration already; Socket and Mode need a restart: say so.
 */
static void control_reload_commit(int commit)
{
    struct mk_config *cfg;

    if (!commit || !(cfg = api->config_get())) {
        return;
    }
    const struct control_settings *s =
        api->config_sites(cfg) ? api->plugin_conf(api->config_site(cfg, 0), MK_PLUGIN_SELF(control))
                               : NULL;
    if (s && (strcmp(s->socket_path, control_running.socket_path) != 0 ||
              s->mode != control_running.mode)) {
        api->log(MK_PLUGIN_LOG_WARN, "control: Socket and Mode change only on restart (keeping %s)",
                 control_running.socket_path);
    }
    api->config_put(cfg);
}

/* Is the client of r in the HttpAllow of `s`? */
static bool control_http_allowed(const struct control_settings *s, const struct mk_request *r)
{
    socklen_t len;
    const struct sockaddr *sa = api->remote_sockaddr(r, &len);
    uint8_t key[16];
    int family;

    if (!sa) {
        return false;
    }
    mk_cidr_client(sa, key, &family); /* IPv4 clients of a dual-stack socket are IPv4 */
    for (unsigned i = 0; i < s->n_allow; i++) {
        if (mk_cidr_match(&s->allow[i], key, family)) {
            return true;
        }
    }
    return false;
}

/* GET HttpPath: the status document as JSON, to the addresses of HttpAllow. */
static int control_content(struct mk_request *r)
{
    size_t len, mlen;
    const char *path = api->path(r, &len);
    const struct mk_site *site = api->site(r);
    /* The settings of the request's own configuration: no lock, no reload race. */
    const struct control_settings *s =
        site ? api->plugin_conf(site, MK_PLUGIN_SELF(control)) : NULL;

    if (!s || !s->http_path[0] || strlen(s->http_path) != len ||
        memcmp(path, s->http_path, len) != 0) {
        return MK_DECLINED;
    }
    if (!control_http_allowed(s, r)) {
        return 403;
    }
    const char *method = api->method(r, &mlen);
    if (!(mlen == 3 && memcmp(method, "GET", 3) == 0) &&
        !(mlen == 4 && memcmp(method, "HEAD", 4) == 0)) {
        api->add_header(r, "Allow", "GET, HEAD");
        return 405;
    }
    struct mk_json b = {0};
    char err[128];
    if (control_doc_status(&b, true, err, sizeof(err)) != MK_OK || b.failed) {
        control_buf_free(&b);
        return 503;
    }
    api->set_status(r, 200);
    api->set_content_type(r, "application/json");
    api->add_header(r, "Cache-Control", "no-store");
    api->set_body_owned(r, b.data, b.len);
    return MK_OK;
}

MK_PLUGIN_DEFINE(control) = {
    MK_PLUGIN_ABI_INIT,
    .name = "control",
    .version = "1.0",
    .description = "control socket for monkey-ctl, and HTTP status",
    .init = control_init,
    .exit = control_exit,
    .reload_prepare = control_reload_prepare,
    .reload_commit = control_reload_commit,
    .content = control_content,
    .conf_schema = &control_schema,
};
