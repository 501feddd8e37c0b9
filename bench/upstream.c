/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * upstream.c: `mk-pxupstream`, the upstream of bench/proxy.py: an HTTP/1.1
 * server that costs as little as it can per request, so that a reverse
 * proxy in front of it is what the benchmark measures (bench/README.md,
 * "The reverse proxy").
 *
 *   mk-pxupstream -p PORT [-a ADDR]
 *
 * One thread, one level-triggered epoll set, no timers. Answers, from
 * memory, with a Content-Length:
 *   GET /13      the 13 bytes "Hello World!\n" (text/plain)
 *   GET /100k    102400 bytes (application/octet-stream)
 *   GET /stats   {"accepts": A, "requests": R}: the connections accepted so
 *                far (the one asking included) and the requests answered
 *                (the /stats ones not counted)
 *   anything else 404. HEAD is answered without the body.
 * Connections are kept alive (HTTP/1.1, or HTTP/1.0 with "Connection:
 * keep-alive") until the client closes them or asks for "Connection:
 * close". Pipelined requests are answered in order: the next one is parsed
 * only once the previous answer is written whole (the socket is then
 * watched for writing instead of reading). A request body with a
 * Content-Length is read and dropped; a chunked one closes the connection.
 * A request head must fit in 16 KiB.
 *
 * It is a measuring tool, not a server to use: it trusts its client.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define MK_PXUP_IN (16 << 10)
#define MK_PXUP_EVENTS 256
#define MK_PXUP_BIG 102400

/* The answers: a resource's body, and its heads for each connection mode. */
enum mk_pxup_res { MK_PXUP_13, MK_PXUP_100K, MK_PXUP_404, MK_PXUP_STATS, MK_PXUP_NRES };
enum mk_pxup_mode { MK_PXUP_KEEP11, MK_PXUP_KEEP10, MK_PXUP_CLOSE, MK_PXUP_NMODES };

struct mk_pxup_conn {
    int fd;
    int closing; /* close once the answer is written */
    int writing; /* an answer is pending: watched for EPOLLOUT */
    size_t skip; /* request body bytes still to drop */
    size_t in_len;
    struct iovec out[2]; /* what is left of the answer: head, body */
    char stats[160];     /* the /stats answer, head and body */
    char in[MK_PXUP_IN];
};

static char mk_pxup_big[MK_PXUP_BIG];
static const char mk_pxup_hello[] = "Hello World!\n";
static const char mk_pxup_missing[] = "not found\n";
static char mk_pxup_heads[MK_PXUP_NRES][MK_PXUP_NMODES][160];
static int mk_pxup_ep;
static unsigned long mk_pxup_accepts, mk_pxup_requests;

static const char *mk_pxup_conn_field(int mode)
{
    if (mode == MK_PXUP_CLOSE)
        return "Connection: close\r\n";
    return mode == MK_PXUP_KEEP10 ? "Connection: keep-alive\r\n" : "";
}

/* The heads of the fixed answers, made once at start. */
static void mk_pxup_make_heads(void)
{
    static const struct {
        const char *status, *type;
        size_t len;
    } res[] = {
        [MK_PXUP_13] = {"200 OK", "text/plain", sizeof(mk_pxup_hello) - 1},
        [MK_PXUP_100K] = {"200 OK", "application/octet-stream", MK_PXUP_BIG},
        [MK_PXUP_404] = {"404 Not Found", "text/plain", sizeof(mk_pxup_missing) - 1},
    };
    for (int r = 0; r < MK_PXUP_STATS; r++)
        for (int m = 0; m < MK_PXUP_NMODES; m++)
            snprintf(mk_pxup_heads[r][m], sizeof(mk_pxup_heads[r][m]),
                     "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n",
                     res[r].status, res[r].type, res[r].len, mk_pxup_conn_field(m));
    for (size_t i = 0; i < MK_PXUP_BIG; i++)
        mk_pxup_big[i] = (char) ('a' + i % 26);
}

static void mk_pxup_close(struct mk_pxup_conn *c)
{
    epoll_ctl(mk_pxup_ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c);
}

static void mk_pxup_watch(struct mk_pxup_conn *c, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = c};
    epoll_ctl(mk_pxup_ep, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Whether the header line [p, end) is field name (lowercase, with colon);
 * *value is set to what follows the colon. */
static int mk_pxup_field(const char *p, const char *end, const char *name, const char **value)
{
    size_t n = strlen(name);
    if ((size_t) (end - p) < n || strncasecmp(p, name, n) != 0)
        return 0;
    *value = p + n;
    return 1;
}

/* Whether [p, end) holds word, case-insensitively. */
static int mk_pxup_has(const char *p, const char *end, const char *word)
{
    size_t n = strlen(word);
    for (; (size_t) (end - p) >= n; p++)
        if (strncasecmp(p, word, n) == 0)
            return 1;
    return 0;
}

/* Parse the request head c->in[0, head_len) and set up its answer in
 * c->out. Returns 0, or -1 to close the connection (a malformed request or
 * a chunked body). */
static int mk_pxup_answer(struct mk_pxup_conn *c, size_t head_len)
{
    const char *p = c->in, *end = c->in + head_len;
    const char *eol = memchr(p, '\n', (size_t) (end - p));
    const char *sp1 = eol ? memchr(p, ' ', (size_t) (eol - p)) : NULL;
    if (!sp1)
        return -1;
    const char *target = sp1 + 1;
    const char *sp2 = memchr(target, ' ', (size_t) (eol - target));
    if (!sp2)
        return -1;
    int head_only = (sp1 - p == 4 && memcmp(p, "HEAD", 4) == 0);
    int http10 = (eol - sp2 >= 9 && memcmp(sp2 + 1, "HTTP/1.0", 8) == 0);
    const char *qs = memchr(target, '?', (size_t) (sp2 - target));
    size_t plen = (size_t) ((qs ? qs : sp2) - target);
    int keep = !http10, res = MK_PXUP_404;
    if (plen == 3 && memcmp(target, "/13", 3) == 0)
        res = MK_PXUP_13;
    else if (plen == 5 && memcmp(target, "/100k", 5) == 0)
        res = MK_PXUP_100K;
    else if (plen == 6 && memcmp(target, "/stats", 6) == 0)
        res = MK_PXUP_STATS;

    c->skip = 0;
    for (p = eol + 1; p < end; p = eol + 1) {
        const char *v;
        eol = memchr(p, '\n', (size_t) (end - p));
        if (!eol)
            break;
        if (mk_pxup_field(p, eol, "connection:", &v)) {
            if (mk_pxup_has(v, eol, "close"))
                keep = 0;
            else if (mk_pxup_has(v, eol, "keep-alive"))
                keep = 1;
        }
        else if (mk_pxup_field(p, eol, "content-length:", &v)) {
            c->skip = strtoul(v, NULL, 10);
        }
        else if (mk_pxup_field(p, eol, "transfer-encoding:", &v)) {
            return -1;
        }
    }
    int mode = !keep ? MK_PXUP_CLOSE : http10 ? MK_PXUP_KEEP10 : MK_PXUP_KEEP11;
    c->closing = !keep;
    if (res == MK_PXUP_STATS) {
        char body[64];
        int blen = snprintf(body, sizeof(body), "{\"accepts\": %lu, \"requests\": %lu}",
                            mk_pxup_accepts, mk_pxup_requests);
        int hlen = snprintf(c->stats, sizeof(c->stats),
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                            "Content-Length: %d\r\n%s\r\n%s",
                            blen, mk_pxup_conn_field(mode), head_only ? "" : body);
        c->out[0] = (struct iovec){c->stats, (size_t) hlen};
        c->out[1] = (struct iovec){NULL, 0};
        return 0;
    }
    mk_pxup_requests++;
    c->out[0].iov_base = mk_pxup_heads[res][mode];
    c->out[0].iov_len = strlen(mk_pxup_heads[res][mode]);
    c->out[1].iov_base = (void *) (res == MK_PXUP_13     ? mk_pxup_hello
                                   : res == MK_PXUP_100K ? mk_pxup_big
                                                         : mk_pxup_missing);
    c->out[1].iov_len = head_only             ? 0
                        : res == MK_PXUP_13   ? sizeof(mk_pxup_hello) - 1
                        : res == MK_PXUP_100K ? MK_PXUP_BIG
                                              : sizeof(mk_pxup_missing) - 1;
    return 0;
}

/* Write what is left of the answer. Returns 1 when it is all written, 0
 * when the socket is full, -1 on an error. */
static int mk_pxup_flush(struct mk_pxup_conn *c)
{
    while (c->out[0].iov_len + c->out[1].iov_len > 0) {
        struct iovec *iov = c->out[0].iov_len ? &c->out[0] : &c->out[1];
        int cnt = (iov == &c->out[0] && c->out[1].iov_len) ? 2 : 1;
        ssize_t n = writev(c->fd, iov, cnt);
        if (n < 0)
            return errno == EAGAIN ? 0 : -1;
        for (size_t left = (size_t) n; left > 0;) {
            size_t take = left < iov->iov_len ? left : iov->iov_len;
            iov->iov_base = (char *) iov->iov_base + take;
            iov->iov_len -= take;
            left -= take;
            iov++;
        }
    }
    return 1;
}

/* Answer every whole request in c->in, in order, while the socket takes
 * the answers. Returns -1 once the connection is to be closed. */
static int mk_pxup_serve(struct mk_pxup_conn *c)
{
    for (;;) {
        if (c->writing) {
            int w = mk_pxup_flush(c);
            if (w < 0)
                return -1;
            if (w == 0)
                return 0;
            c->writing = 0;
            mk_pxup_watch(c, EPOLLIN);
            if (c->closing)
                return -1;
        }
        if (c->skip) {
            size_t take = c->skip < c->in_len ? c->skip : c->in_len;
            memmove(c->in, c->in + take, c->in_len - take);
            c->in_len -= take;
            c->skip -= take;
            if (c->skip)
                return 0;
        }
        char *crlf = memmem(c->in, c->in_len, "\r\n\r\n", 4);
        if (!crlf)
            return c->in_len == sizeof(c->in) ? -1 : 0;
        size_t head_len = (size_t) (crlf + 4 - c->in);
        if (mk_pxup_answer(c, head_len) < 0)
            return -1;
        memmove(c->in, c->in + head_len, c->in_len - head_len);
        c->in_len -= head_len;
        int w = mk_pxup_flush(c);
        if (w < 0)
            return -1;
        if (w == 0) {
            c->writing = 1;
            mk_pxup_watch(c, EPOLLOUT);
            return 0;
        }
        if (c->closing)
            return -1;
    }
}

static void mk_pxup_readable(struct mk_pxup_conn *c)
{
    ssize_t n = read(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len);
    if (n == 0 || (n < 0 && errno != EAGAIN)) {
        mk_pxup_close(c);
        return;
    }
    if (n > 0)
        c->in_len += (size_t) n;
    if (mk_pxup_serve(c) < 0)
        mk_pxup_close(c);
}

static void mk_pxup_accept(int lfd)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        struct mk_pxup_conn *c = calloc(1, sizeof(*c));
        if (!c) {
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->fd = fd;
        mk_pxup_accepts++;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(mk_pxup_ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close(fd);
            free(c);
        }
    }
}

int main(int argc, char **argv)
{
    const char *addr = "127.0.0.1";
    int port = 0, opt;
    while ((opt = getopt(argc, argv, "p:a:")) != -1) {
        if (opt == 'p')
            port = atoi(optarg);
        else if (opt == 'a')
            addr = optarg;
        else
            break;
    }
    if (port <= 0 || port > 65535) {
        fprintf(stderr, "usage: mk-pxupstream -p PORT [-a ADDR]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    mk_pxup_make_heads();

    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t) port)};
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
        fprintf(stderr, "mk-pxupstream: bad address %s\n", addr);
        return 2;
    }
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (lfd < 0 || bind(lfd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(lfd, 4096) < 0) {
        perror("mk-pxupstream: listen");
        return 1;
    }
    mk_pxup_ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
    if (mk_pxup_ep < 0 || epoll_ctl(mk_pxup_ep, EPOLL_CTL_ADD, lfd, &lev) < 0) {
        perror("mk-pxupstream: epoll");
        return 1;
    }
    struct epoll_event evs[MK_PXUP_EVENTS];
    for (;;) {
        int n = epoll_wait(mk_pxup_ep, evs, MK_PXUP_EVENTS, -1);
        if (n < 0 && errno != EINTR) {
            perror("mk-pxupstream: epoll_wait");
            return 1;
        }
        for (int i = 0; i < n; i++) {
            struct mk_pxup_conn *c = evs[i].data.ptr;
            if (!c)
                mk_pxup_accept(lfd);
            else if (c->writing && (evs[i].events & EPOLLOUT)) {
                if (mk_pxup_serve(c) < 0)
                    mk_pxup_close(c);
            }
            else
                mk_pxup_readable(c);
        }
    }
}
