/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fastcgi_responder.c: a small standalone FastCGI 1.0 responder, the kind
 * of application the fastcgi plugin sends requests to (see README.md).
 * Plain C and the C library only: the record layer is written out here.
 *
 *   fastcgi-responder [-n NAME] unix:/path/app.sock
 *   fastcgi-responder [-n NAME] 127.0.0.1:9000
 *
 * The listening process accepts connections and forks one child per
 * connection (as php-fpm's workers each serve one connection at a time);
 * a child answers the requests of its connection one after the other, and
 * keeps the connection while the web server asks for it (FCGI_KEEP_CONN).
 * Children are reaped by the kernel (SIGCHLD ignored).
 *
 * Each request is answered with a plain text page: the name, the request's
 * number on its connection, a few of its parameters, and the length and
 * FNV-1a hash of its body. The query may ask for more: `lines=N` adds N
 * numbered lines (a body of several STDOUT records), `log=TEXT` writes TEXT
 * to STDERR (the server's error log).
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

/* ---- the record layer (the FastCGI 1.0 specification, section 3 and 8) ---- */

#define FCGI_VERSION_1 1
#define FCGI_HEADER_LEN 8
#define FCGI_CONTENT_MAX 65535

enum {
    FCGI_BEGIN_REQUEST = 1,
    FCGI_ABORT_REQUEST = 2,
    FCGI_END_REQUEST = 3,
    FCGI_PARAMS = 4,
    FCGI_STDIN = 5,
    FCGI_STDOUT = 6,
    FCGI_STDERR = 7,
    FCGI_DATA = 8,
    FCGI_GET_VALUES = 9,
    FCGI_GET_VALUES_RESULT = 10,
    FCGI_UNKNOWN_TYPE = 11,
};

#define FCGI_RESPONDER 1
#define FCGI_KEEP_CONN 1
#define FCGI_REQUEST_COMPLETE 0
#define FCGI_CANT_MPX_CONN 1
#define FCGI_UNKNOWN_ROLE 3

/* The parameters kept of a request: the PARAMS stream, whole, up to this. */
#define PARAMS_MAX 65536

/* One record as read: its type, request id and content. */
struct record {
    int type;
    unsigned id;
    size_t len;
    uint8_t content[FCGI_CONTENT_MAX + 255]; /* content, then its padding */
};

/* Read exactly n bytes: 0, or -1 at the end of the connection or on an error. */
static int read_full(int fd, void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t got = read(fd, p, n);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got <= 0) {
            return -1;
        }
        p += got;
        n -= (size_t) got;
    }
    return 0;
}

/* Write the whole of iov[0..cnt): 0, or -1 (the connection is gone). */
static int write_full(int fd, struct iovec *iov, int cnt)
{
    while (cnt > 0) {
        ssize_t n = writev(fd, iov, cnt);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return -1;
        }
        while (cnt > 0 && (size_t) n >= iov->iov_len) {
            n -= (ssize_t) iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (uint8_t *) iov->iov_base + n;
            iov->iov_len -= (size_t) n;
        }
    }
    return 0;
}

/* The next record of the connection: 0, or -1 (the connection ended or broke the protocol). */
static int record_read(int fd, struct record *rec)
{
    uint8_t h[FCGI_HEADER_LEN];
    if (read_full(fd, h, sizeof(h)) != 0 || h[0] != FCGI_VERSION_1) {
        return -1;
    }
    rec->type = h[1];
    rec->id = (unsigned) (h[2] << 8 | h[3]);
    rec->len = (size_t) (h[4] << 8 | h[5]);
    return read_full(fd, rec->content, rec->len + h[6]);
}

/* A record header for len content bytes, no padding. */
static void record_header(uint8_t h[FCGI_HEADER_LEN], int type, unsigned id, size_t len)
{
    h[0] = FCGI_VERSION_1;
    h[1] = (uint8_t) type;
    h[2] = (uint8_t) (id >> 8);
    h[3] = (uint8_t) id;
    h[4] = (uint8_t) (len >> 8);
    h[5] = (uint8_t) len;
    h[6] = 0;
    h[7] = 0;
}

/* A stream's bytes (STDOUT, STDERR) as records of at most 65535 bytes each: 0 or -1. */
static int stream_write(int fd, int type, unsigned id, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len > 0) {
        uint8_t h[FCGI_HEADER_LEN];
        size_t n = len < FCGI_CONTENT_MAX ? len : FCGI_CONTENT_MAX;
        record_header(h, type, id, n);
        struct iovec iov[2] = {{h, sizeof(h)}, {(void *) p, n}};
        if (write_full(fd, iov, 2) != 0) {
            return -1;
        }
        p += n;
        len -= n;
    }
    return 0;
}

/*
 * The end of request id: the empty STDOUT record that closes the stream
 * (when `out`), then END_REQUEST with the statuses. 0 or -1.
 */
static int request_end(int fd, unsigned id, bool out, uint32_t app_status, int protocol_status)
{
    uint8_t b[2 * FCGI_HEADER_LEN + 8], *p = b;
    if (out) {
        record_header(p, FCGI_STDOUT, id, 0);
        p += FCGI_HEADER_LEN;
    }
    record_header(p, FCGI_END_REQUEST, id, 8);
    p += FCGI_HEADER_LEN;
    memset(p, 0, 8);
    p[0] = (uint8_t) (app_status >> 24);
    p[1] = (uint8_t) (app_status >> 16);
    p[2] = (uint8_t) (app_status >> 8);
    p[3] = (uint8_t) app_status;
    p[4] = (uint8_t) protocol_status;
    struct iovec iov = {b, (size_t) (p + 8 - b)};
    return write_full(fd, &iov, 1);
}

/* A name-value pair's length at *pos of buf[0..len) (1 or 4 bytes): the length, or -1. */
static long pair_length(const uint8_t *buf, size_t len, size_t *pos)
{
    if (*pos >= len) {
        return -1;
    }
    if (buf[*pos] < 128) {
        return buf[(*pos)++];
    }
    if (len - *pos < 4) {
        return -1;
    }
    const uint8_t *b = buf + *pos;
    *pos += 4;
    return (long) (((uint32_t) (b[0] & 0x7f) << 24) | (uint32_t) b[1] << 16 | (uint32_t) b[2] << 8 |
                   b[3]);
}

/*
 * The value of parameter `name` in a PARAMS stream (name-value pairs):
 * copied into out (NUL terminated, cut to cap - 1 bytes), or "" when absent.
 */
static const char *param(const uint8_t *buf, size_t len, const char *name, char *out, size_t cap)
{
    size_t pos = 0, want = strlen(name);
    out[0] = '\0';
    while (pos < len) {
        long nlen = pair_length(buf, len, &pos);
        long vlen = pair_length(buf, len, &pos);
        if (nlen < 0 || vlen < 0 || (size_t) nlen + (size_t) vlen > len - pos) {
            break;
        }
        if ((size_t) nlen == want && memcmp(buf + pos, name, want) == 0) {
            size_t n = (size_t) vlen < cap - 1 ? (size_t) vlen : cap - 1;
            memcpy(out, buf + pos + nlen, n);
            out[n] = '\0';
            break;
        }
        pos += (size_t) nlen + (size_t) vlen;
    }
    return out;
}

/* The value of `key` in a query string (undecoded), into out: "" when absent. */
static const char *query_arg(const char *query, const char *key, char *out, size_t cap)
{
    size_t klen = strlen(key);
    out[0] = '\0';
    for (const char *p = query; *p;) {
        const char *end = strchr(p, '&');
        size_t len = end ? (size_t) (end - p) : strlen(p);
        if (len > klen && memcmp(p, key, klen) == 0 && p[klen] == '=') {
            size_t n = len - klen - 1 < cap - 1 ? len - klen - 1 : cap - 1;
            memcpy(out, p + klen + 1, n);
            out[n] = '\0';
            break;
        }
        p += len + (end ? 1 : 0);
    }
    return out;
}

/* ---- the application ---------------------------------------------------------- */

/* One request on a connection. */
struct request {
    unsigned id; /* 0: none open */
    bool keep;   /* FCGI_KEEP_CONN: the connection serves more requests */
    uint8_t *params;
    size_t params_len;
    bool params_done;
    uint64_t body_len;
    uint32_t body_hash; /* FNV-1a */
};

static const char *app_name = "fastcgi-responder";

/* The answer to a complete request: STDOUT (and STDERR), then the end. 0 or -1. */
static int respond(int fd, const struct request *req, unsigned number)
{
    char method[16], script[256], path_info[256], query[1024], arg[256];
    char page[2048];
    const uint8_t *pp = req->params;
    size_t pl = req->params_len;

    param(pp, pl, "REQUEST_METHOD", method, sizeof(method));
    param(pp, pl, "SCRIPT_NAME", script, sizeof(script));
    param(pp, pl, "PATH_INFO", path_info, sizeof(path_info));
    param(pp, pl, "QUERY_STRING", query, sizeof(query));
    if (*query_arg(query, "log", arg, sizeof(arg))) {
        char line[300];
        int n = snprintf(line, sizeof(line), "%s: %s\n", app_name, arg);
        if (stream_write(fd, FCGI_STDERR, req->id, line, (size_t) n) != 0) {
            return -1;
        }
    }
    int n = snprintf(page, sizeof(page),
                     "Content-Type: text/plain; charset=utf-8\r\n"
                     "X-Responder: %s\r\n"
                     "\r\n"
                     "%s: request %u on this connection\n"
                     "REQUEST_METHOD=%s\nSCRIPT_NAME=%s\nPATH_INFO=%s\nQUERY_STRING=%s\n"
                     "stdin: %llu bytes, fnv1a %08x\n",
                     app_name, app_name, number, method, script, path_info, query,
                     (unsigned long long) req->body_len, (unsigned) req->body_hash);
    if (stream_write(fd, FCGI_STDOUT, req->id, page, (size_t) n) != 0) {
        return -1;
    }
    long lines = strtol(query_arg(query, "lines", arg, sizeof(arg)), NULL, 10);
    for (long i = 1; i <= lines && i <= 1000000; i++) {
        char line[32];
        n = snprintf(line, sizeof(line), "line %ld\n", i);
        if (stream_write(fd, FCGI_STDOUT, req->id, line, (size_t) n) != 0) {
            return -1;
        }
    }
    return request_end(fd, req->id, true, 0, FCGI_REQUEST_COMPLETE);
}

/*
 * FCGI_GET_VALUES: what this application can do. One request at a time on
 * a connection (no multiplexing); as many connections as the server makes,
 * a child for each, so no FCGI_MAX_CONNS or FCGI_MAX_REQS to give: a web
 * server that reads them as the application's whole capacity (the fastcgi
 * plugin does) would otherwise use one connection.
 */
static int get_values(int fd)
{
    static const char *const answers[][2] = {{"FCGI_MPXS_CONNS", "0"}};
    uint8_t b[FCGI_HEADER_LEN + 64];
    size_t len = 0;
    for (size_t i = 0; i < sizeof(answers) / sizeof(answers[0]); i++) {
        size_t nl = strlen(answers[i][0]), vl = strlen(answers[i][1]);
        b[FCGI_HEADER_LEN + len++] = (uint8_t) nl;
        b[FCGI_HEADER_LEN + len++] = (uint8_t) vl;
        memcpy(b + FCGI_HEADER_LEN + len, answers[i][0], nl);
        memcpy(b + FCGI_HEADER_LEN + len + nl, answers[i][1], vl);
        len += nl + vl;
    }
    record_header(b, FCGI_GET_VALUES_RESULT, 0, len);
    struct iovec iov = {b, FCGI_HEADER_LEN + len};
    return write_full(fd, &iov, 1);
}

/* A management record (request id 0) of a type this application does not know. */
static int unknown_type(int fd, int type)
{
    uint8_t b[FCGI_HEADER_LEN + 8] = {0};
    record_header(b, FCGI_UNKNOWN_TYPE, 0, 8);
    b[FCGI_HEADER_LEN] = (uint8_t) type;
    struct iovec iov = {b, sizeof(b)};
    return write_full(fd, &iov, 1);
}

/* Serve one connection until the web server closes it (or no longer wants it kept). */
static void serve(int fd)
{
    static struct record rec;
    struct request req = {0};
    unsigned number = 0;

    if (!(req.params = malloc(PARAMS_MAX))) {
        return;
    }
    while (record_read(fd, &rec) == 0) {
        int rc = 0;
        if (rec.id == 0) {
            rc = rec.type == FCGI_GET_VALUES ? get_values(fd) : unknown_type(fd, rec.type);
        }
        else if (rec.type == FCGI_BEGIN_REQUEST) {
            unsigned role = rec.len >= 3 ? (unsigned) (rec.content[0] << 8 | rec.content[1]) : 0;
            if (req.id) {
                rc = request_end(fd, rec.id, false, 0, FCGI_CANT_MPX_CONN); /* one at a time */
            }
            else if (role != FCGI_RESPONDER) {
                rc = request_end(fd, rec.id, false, 0, FCGI_UNKNOWN_ROLE);
            }
            else {
                req.id = rec.id;
                req.keep = rec.content[2] & FCGI_KEEP_CONN;
                req.params_len = 0;
                req.params_done = false;
                req.body_len = 0;
                req.body_hash = 2166136261u;
            }
        }
        else if (rec.id != req.id) {
            continue; /* a record of no open request: ignored, as the specification says */
        }
        else if (rec.type == FCGI_ABORT_REQUEST) {
            rc = request_end(fd, req.id, true, 1, FCGI_REQUEST_COMPLETE);
            req.id = 0;
        }
        else if (rec.type == FCGI_PARAMS && !req.params_done) {
            size_t n =
                rec.len < PARAMS_MAX - req.params_len ? rec.len : PARAMS_MAX - req.params_len;
            memcpy(req.params + req.params_len, rec.content, n);
            req.params_len += n;
            req.params_done = rec.len == 0;
        }
        else if (rec.type == FCGI_STDIN && rec.len > 0) {
            for (size_t i = 0; i < rec.len; i++) {
                req.body_hash = (req.body_hash ^ rec.content[i]) * 16777619u;
            }
            req.body_len += rec.len;
        }
        else if (rec.type == FCGI_STDIN) {
            /* the body is whole: the request is complete */
            rc = respond(fd, &req, ++number);
            req.id = 0;
            if (!req.keep) {
                break;
            }
        }
        if (rc != 0) {
            break;
        }
    }
    free(req.params);
}

/* A listening socket on `address` (unix:/path, or HOST:PORT with a numeric IPv4 HOST): fd or -1. */
static int listen_on(const char *address)
{
    int fd;
    if (strncmp(address, "unix:", 5) == 0) {
        struct sockaddr_un sun = {.sun_family = AF_UNIX};
        if (strlen(address + 5) >= sizeof(sun.sun_path)) {
            fprintf(stderr, "%s: socket path too long\n", address);
            return -1;
        }
        strcpy(sun.sun_path, address + 5);
        unlink(sun.sun_path); /* a socket left by an earlier run */
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *) &sun, sizeof(sun)) != 0) {
            perror(address);
            return -1;
        }
    }
    else {
        struct sockaddr_in sin = {.sin_family = AF_INET};
        char host[64];
        const char *colon = strrchr(address, ':');
        if (!colon || (size_t) (colon - address) >= sizeof(host)) {
            fprintf(stderr, "%s: not unix:/path nor HOST:PORT\n", address);
            return -1;
        }
        memcpy(host, address, (size_t) (colon - address));
        host[colon - address] = '\0';
        sin.sin_port = htons((uint16_t) atoi(colon + 1));
        if (inet_pton(AF_INET, host, &sin.sin_addr) != 1) {
            fprintf(stderr, "%s: not a numeric IPv4 address\n", host);
            return -1;
        }
        int one = 1;
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0) {
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        }
        if (fd < 0 || bind(fd, (struct sockaddr *) &sin, sizeof(sin)) != 0) {
            perror(address);
            return -1;
        }
    }
    if (listen(fd, 128) != 0) {
        perror("listen");
        return -1;
    }
    return fd;
}

int main(int argc, char **argv)
{
    int opt;
    while ((opt = getopt(argc, argv, "n:")) != -1) {
        if (opt != 'n') {
            break;
        }
        app_name = optarg;
    }
    if (optind != argc - 1) {
        fprintf(stderr, "usage: %s [-n NAME] unix:/path | HOST:PORT\n", argv[0]);
        return 2;
    }
    int lfd = listen_on(argv[optind]);
    if (lfd < 0) {
        return 1;
    }
    signal(SIGCHLD, SIG_IGN); /* children are reaped by the kernel */
    signal(SIGPIPE, SIG_IGN); /* a closed connection is an error from write() */
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) {
                continue;
            }
            perror("accept");
            return 1;
        }
        pid_t pid = fork();
        if (pid == 0) {
            close(lfd);
            serve(fd);
            _exit(0);
        }
        if (pid < 0) {
            perror("fork");
        }
        close(fd);
    }
}
