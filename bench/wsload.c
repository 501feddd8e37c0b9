/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * wsload.c: `mk-wsload`, the WebSocket load client of bench/websocket.py
 * (bench/README.md, "WebSocket").
 *
 *   mk-wsload -p PORT -u PATH [-a ADDR] [-m echo|fanout] [-c CONNS]
 *             [-d SECONDS] [-r ROUNDS] [-n FANOUTS] [-s BYTES] [-w]
 *
 * One thread, one epoll set, CONNS connections to ADDR:PORT (IPv4, default
 * 127.0.0.1), each upgraded with an RFC 6455 client handshake on PATH; the
 * server's Sec-WebSocket-Accept is checked. Every message sent is a text
 * frame of BYTES bytes (default 32) masked with a fresh key. The payloads
 * are distinct: a connection number, a sequence number and a pattern that
 * depends on both.
 *
 *   echo    (default) every connection sends a message and waits for its
 *           echo before sending the next, for SECONDS (default 10), or
 *           with -r until ROUNDS echoes have come back (a fixed load for
 *           tracers: no message is sent past ROUNDS): one message
 *           outstanding per connection. An echo that is not the same bytes
 *           as the message counts as an error.
 *   fanout  half a second after the handshakes (the time for a server to
 *           join each connection to its room), the first connection sends
 *           a message; every connection (the sender too) must receive it
 *           before the next of FANOUTS (default 200) is sent. A wrong, stale or repeated delivery
 *           counts as an error; a fan-out not complete after 10 s counts its
 *           missing deliveries as errors and ends the run.
 *
 * -w: once every connection is open, print "open" and wait for a line on
 * the standard input before the measured phase; after the result, wait for
 * the end of the standard input before closing the connections. The caller
 * then samples the server over the measured phase only (not over the
 * handshakes nor the closes).
 *
 * Output: one JSON object on the standard output once the measured phase
 * ends, before any connection is closed (mk_wsload_report); the first
 * errors in words on the standard error. Exit status: 0 when every
 * connection opened, 1 when one did not or on a bad argument.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "ws_accept.h"

#define MK_WSLOAD_MIN_BYTES 24 /* the connection and sequence numbers fit */
#define MK_WSLOAD_MAX_BYTES (1 << 20)
#define MK_WSLOAD_OPEN_BATCH 100    /* connections handshaking at once */
#define MK_WSLOAD_OPEN_TIMEOUT 10.0 /* seconds for one batch */
#define MK_WSLOAD_FANOUT_TIMEOUT 10.0
/* Fan-out: seconds between the last handshake and the first message, for a
 * server that joins a connection to its room after answering the handshake. */
#define MK_WSLOAD_SETTLE 0.5
#define MK_WSLOAD_ERROR_LINES 10 /* errors described on stderr */
#define MK_WSLOAD_EVENTS 256

enum mk_wsload_state { MK_WSLOAD_HANDSHAKE, MK_WSLOAD_OPEN, MK_WSLOAD_DEAD };

struct mk_wsload_conn {
    int fd;
    enum mk_wsload_state state;
    uint32_t id;
    uint64_t seq;      /* echo: the number of the outstanding message */
    uint64_t got;      /* fanout: 1 + the last fan-out received, 0 for none */
    int want_out;      /* EPOLLOUT is in the interest set */
    char key[32];      /* Sec-WebSocket-Key: base64 of 16 random bytes */
    unsigned char *in; /* read, not yet parsed; in_cap bytes */
    size_t in_len;
    unsigned char *out; /* framed, not yet written; out_cap bytes */
    size_t out_len, out_off;
};

struct mk_wsload {
    /* settings */
    struct sockaddr_in addr;
    const char *path;
    int fanout; /* 0: echo */
    unsigned conns;
    double seconds;
    uint64_t rounds; /* echo: stop after this many echoes; 0: after SECONDS */
    unsigned fanouts;
    size_t bytes;
    int wait_go;
    /* state */
    int ep;
    struct mk_wsload_conn *c;
    size_t in_cap, out_cap;
    unsigned opened, open, dead;
    uint64_t rng;
    unsigned char *expect; /* a payload to compare with; bytes long */
    int running;
    double t0, end;
    /* fan-out */
    uint64_t fan;  /* the fan-out under way */
    unsigned left; /* its deliveries still to come */
    double fan_t0;
    double *fan_ms; /* the duration of each fan-out */
    /* results */
    uint64_t ops;      /* intact echoes, or deliveries */
    uint64_t sent;     /* echo: messages sent in the measured phase */
    uint64_t received; /* echo: echoes received in it (with -r) */
    uint64_t errors;
    unsigned described;
};

static double mk_wsload_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Count one error and describe it on stderr while fewer than
 * MK_WSLOAD_ERROR_LINES have been. */
__attribute__((format(printf, 2, 3))) static void mk_wsload_error(struct mk_wsload *l,
                                                                  const char *fmt, ...)
{
    va_list ap;

    l->errors++;
    if (l->described++ >= MK_WSLOAD_ERROR_LINES) {
        return;
    }
    va_start(ap, fmt);
    fputs("mk-wsload: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static uint64_t mk_wsload_random(struct mk_wsload *l)
{
    l->rng ^= l->rng << 13;
    l->rng ^= l->rng >> 7;
    l->rng ^= l->rng << 17;
    return l->rng;
}

/* Write v in `width` decimal digits, zeros first (v < 10^width): past them. */
static unsigned char *mk_wsload_digits(unsigned char *p, uint64_t v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        p[i] = (unsigned char) ('0' + v % 10);
        v /= 10;
    }
    return p + width;
}

/* The payload of message seq of connection id: BYTES of printable ASCII
 * (valid UTF-8), every byte depending on both numbers: "c%07u s%012llu "
 * (the numbers cut to fit) and a run of letters. Formatted by hand: the
 * client makes two per round trip and must cost less than the servers. */
static void mk_wsload_payload(const struct mk_wsload *l, unsigned char *p, uint32_t id,
                              uint64_t seq)
{
    unsigned char *q = p;
    unsigned r;

    *q++ = 'c';
    q = mk_wsload_digits(q, id % 10000000u, 7);
    *q++ = ' ';
    *q++ = 's';
    q = mk_wsload_digits(q, seq % 1000000000000ull, 12);
    *q++ = ' ';
    r = (unsigned) ((seq + id + (uint64_t) (q - p)) % 26);
    for (size_t i = q - p; i < l->bytes; i++) {
        p[i] = (unsigned char) ('a' + r);
        r = r == 25 ? 0 : r + 1;
    }
}

/* Drop a connection: counted as an error, its descriptor closed. */
__attribute__((format(printf, 3, 4))) static void
mk_wsload_fail(struct mk_wsload *l, struct mk_wsload_conn *c, const char *fmt, ...)
{
    char why[256];
    va_list ap;

    if (c->state == MK_WSLOAD_DEAD) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    mk_wsload_error(l, "connection %u: %s", c->id, why);
    if (c->state == MK_WSLOAD_OPEN) {
        l->open--;
        /* A fan-out under way no longer waits for it: its loss is the error above. */
        if (l->fanout && l->running && l->left > 0 && c->got != l->fan + 1) {
            l->left--;
        }
    }
    c->state = MK_WSLOAD_DEAD;
    l->dead++;
    if (c->fd >= 0) {
        close(c->fd);
    }
    c->fd = -1;
}

static void mk_wsload_interest(struct mk_wsload *l, struct mk_wsload_conn *c, int want_out)
{
    struct epoll_event ev = {.events = EPOLLIN | (want_out ? EPOLLOUT : 0), .data.ptr = c};

    if (c->want_out == want_out) {
        return;
    }
    c->want_out = want_out;
    if (epoll_ctl(l->ep, EPOLL_CTL_MOD, c->fd, &ev) < 0) {
        mk_wsload_fail(l, c, "epoll_ctl: %s", strerror(errno));
    }
}

/* Write what is queued on c; what the socket does not take waits for EPOLLOUT. */
static void mk_wsload_flush(struct mk_wsload *l, struct mk_wsload_conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN) {
                mk_wsload_interest(l, c, 1);
                return;
            }
            mk_wsload_fail(l, c, "send: %s", strerror(errno));
            return;
        }
        c->out_off += w;
    }
    c->out_off = c->out_len = 0;
    mk_wsload_interest(l, c, 0);
}

/* Queue one masked client frame (FIN set) and write it. */
static void mk_wsload_send(struct mk_wsload *l, struct mk_wsload_conn *c, unsigned opcode,
                           const unsigned char *p, size_t n)
{
    unsigned char *f = c->out + c->out_len;
    unsigned char mask[4];
    uint32_t key = (uint32_t) mk_wsload_random(l);
    size_t h = 0;

    if (c->state != MK_WSLOAD_OPEN) {
        return;
    }
    if (c->out_len + n + 14 > l->out_cap) {
        mk_wsload_fail(l, c, "the server does not read: %zu bytes queued", c->out_len);
        return;
    }
    f[h++] = 0x80 | opcode;
    if (n < 126) {
        f[h++] = 0x80 | n;
    }
    else if (n < 65536) {
        f[h++] = 0x80 | 126;
        f[h++] = n >> 8;
        f[h++] = n & 0xff;
    }
    else {
        f[h++] = 0x80 | 127;
        for (int i = 7; i >= 0; i--) {
            f[h++] = (uint64_t) n >> (8 * i);
        }
    }
    memcpy(mask, &key, 4);
    memcpy(f + h, mask, 4);
    h += 4;
    size_t i = 0;
    uint64_t m8 = (uint64_t) key << 32 | key, w; /* the mask twice, in memory order */
    for (; n - i >= 8; i += 8) {
        memcpy(&w, p + i, 8);
        w ^= m8;
        memcpy(f + h + i, &w, 8);
    }
    for (; i < n; i++) {
        f[h + i] = p[i] ^ mask[i & 3];
    }
    c->out_len += h + n;
    mk_wsload_flush(l, c);
}

/* Echo: send connection c's message number c->seq, unless ROUNDS are sent. */
static void mk_wsload_echo_send(struct mk_wsload *l, struct mk_wsload_conn *c)
{
    if (l->rounds && l->sent == l->rounds) {
        return;
    }
    l->sent++;
    mk_wsload_payload(l, l->expect, c->id, c->seq);
    mk_wsload_send(l, c, 0x1, l->expect, l->bytes);
}

/* Fan-out: start fan-out l->fan from the first open connection; every open
 * connection must receive it. */
static void mk_wsload_fan_start(struct mk_wsload *l)
{
    for (unsigned i = 0; i < l->conns; i++) {
        if (l->c[i].state == MK_WSLOAD_OPEN) {
            l->left = l->open;
            l->fan_t0 = mk_wsload_now();
            mk_wsload_payload(l, l->expect, UINT32_MAX, l->fan);
            mk_wsload_send(l, &l->c[i], 0x1, l->expect, l->bytes);
            return;
        }
    }
    mk_wsload_error(l, "fan-out %llu: no connection left open", (unsigned long long) l->fan);
    l->running = 0;
}

static void mk_wsload_echo_message(struct mk_wsload *l, struct mk_wsload_conn *c,
                                   const unsigned char *p, size_t n)
{
    if (!l->running) {
        return; /* an echo after the measured phase: not counted */
    }
    mk_wsload_payload(l, l->expect, c->id, c->seq);
    if (n != l->bytes || memcmp(p, l->expect, n) != 0) {
        mk_wsload_error(l, "connection %u: echo of message %llu differs (%zu bytes: %.*s)", c->id,
                        (unsigned long long) c->seq, n, (int) (n < 40 ? n : 40), p);
    }
    else {
        l->ops++;
    }
    c->seq++;
    if (l->rounds && ++l->received == l->rounds) {
        l->running = 0;
        return;
    }
    mk_wsload_echo_send(l, c);
}

static void mk_wsload_fan_message(struct mk_wsload *l, struct mk_wsload_conn *c,
                                  const unsigned char *p, size_t n)
{
    if (!l->running || l->left == 0) {
        mk_wsload_error(l, "connection %u: a message outside a fan-out", c->id);
        return;
    }
    /* l->expect holds the payload of fan-out l->fan (mk_wsload_fan_start). */
    if (n != l->bytes || memcmp(p, l->expect, n) != 0) {
        mk_wsload_error(l, "connection %u: fan-out %llu delivered %zu bytes: %.*s", c->id,
                        (unsigned long long) l->fan, n, (int) (n < 40 ? n : 40), p);
        return;
    }
    if (c->got == l->fan + 1) {
        mk_wsload_error(l, "connection %u: fan-out %llu delivered twice", c->id,
                        (unsigned long long) l->fan);
        return;
    }
    c->got = l->fan + 1;
    l->ops++;
    l->left--;
}

/* Fan-out: the one under way has reached every connection; start the next. */
static void mk_wsload_fan_done(struct mk_wsload *l)
{
    l->fan_ms[l->fan] = (mk_wsload_now() - l->fan_t0) * 1e3;
    if (++l->fan == l->fanouts) {
        l->running = 0;
        return;
    }
    mk_wsload_fan_start(l);
}

/* One whole server frame: b0 is its first byte, p its payload. */
static void mk_wsload_frame(struct mk_wsload *l, struct mk_wsload_conn *c, unsigned b0,
                            const unsigned char *p, size_t n)
{
    unsigned opcode = b0 & 0x0f;

    if (b0 & 0x70) {
        mk_wsload_fail(l, c, "a frame with RSV bits 0x%x", b0 & 0x70);
        return;
    }
    switch (opcode) {
    case 0x1:
    case 0x2:
        if (!(b0 & 0x80)) {
            mk_wsload_fail(l, c, "a fragmented message (not expected of %zu bytes)", l->bytes);
            return;
        }
        if (l->fanout) {
            mk_wsload_fan_message(l, c, p, n);
        }
        else {
            mk_wsload_echo_message(l, c, p, n);
        }
        return;
    case 0x8:
        mk_wsload_fail(l, c, "closed by the server (code %u)", n >= 2 ? (p[0] << 8 | p[1]) : 1005);
        return;
    case 0x9:
        mk_wsload_send(l, c, 0xA, p, n);
        return;
    case 0xA:
        return;
    default:
        mk_wsload_fail(l, c, "a frame with opcode 0x%x", opcode);
    }
}

/* Take every complete frame off c->in. */
static void mk_wsload_frames(struct mk_wsload *l, struct mk_wsload_conn *c)
{
    size_t i = 0;

    while (c->state == MK_WSLOAD_OPEN && c->in_len - i >= 2) {
        const unsigned char *f = c->in + i;
        size_t avail = c->in_len - i, h = 2;
        uint64_t n = f[1] & 0x7f;

        if (f[1] & 0x80) {
            mk_wsload_fail(l, c, "a masked server frame");
            return;
        }
        if (n == 126) {
            if (avail < 4) {
                break;
            }
            n = (uint64_t) f[2] << 8 | f[3];
            h = 4;
        }
        else if (n == 127) {
            if (avail < 10) {
                break;
            }
            n = 0;
            for (int k = 2; k < 10; k++) {
                n = n << 8 | f[k];
            }
            h = 10;
        }
        if (n > l->in_cap - h) {
            mk_wsload_fail(l, c, "a frame of %llu bytes", (unsigned long long) n);
            return;
        }
        if (avail < h + n) {
            break;
        }
        mk_wsload_frame(l, c, f[0], f + h, n);
        i += h + n;
    }
    if (c->state != MK_WSLOAD_DEAD) {
        memmove(c->in, c->in + i, c->in_len - i);
        c->in_len -= i;
    }
}

/* Parse the handshake answer once whole: the connection is open, or failed. */
static void mk_wsload_handshake(struct mk_wsload *l, struct mk_wsload_conn *c)
{
    const char *head = (const char *) c->in;
    const char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    const char *line, *eol;
    char want[MK_WS_ACCEPT_SIZE];
    size_t used;
    int accepted = 0;

    if (!end) {
        if (c->in_len == l->in_cap) {
            mk_wsload_fail(l, c, "a handshake answer over %zu bytes", l->in_cap);
        }
        return;
    }
    if (end - head < 13 || memcmp(head, "HTTP/1.1 101 ", 13) != 0) {
        eol = memchr(head, '\r', end - head);
        mk_wsload_fail(l, c, "handshake answered %.*s", (int) (eol - head), head);
        return;
    }
    mk_ws_accept(c->key, strlen(c->key), want);
    for (line = (const char *) memmem(head, end + 2 - head, "\r\n", 2) + 2; line < end;
         line = eol + 2) {
        eol = memmem(line, end + 2 - line, "\r\n", 2);
        if (eol - line > 21 && strncasecmp(line, "Sec-WebSocket-Accept:", 21) == 0) {
            const char *v = line + 21;
            while (*v == ' ' || *v == '\t') {
                v++;
            }
            accepted = (size_t) (eol - v) == strlen(want) && memcmp(v, want, eol - v) == 0;
        }
    }
    if (!accepted) {
        mk_wsload_fail(l, c, "no Sec-WebSocket-Accept: %s in the handshake answer", want);
        return;
    }
    used = end + 4 - head;
    memmove(c->in, c->in + used, c->in_len - used);
    c->in_len -= used;
    c->state = MK_WSLOAD_OPEN;
    l->open++;
    mk_wsload_frames(l, c);
}

/* One read on a readable connection, then what it completes. */
static void mk_wsload_read(struct mk_wsload *l, struct mk_wsload_conn *c)
{
    ssize_t r;

    if (c->in_len == l->in_cap) {
        mk_wsload_fail(l, c, "%zu bytes of incomplete frames", c->in_len);
        return;
    }
    r = recv(c->fd, c->in + c->in_len, l->in_cap - c->in_len, 0);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
        return;
    }
    if (r <= 0) {
        mk_wsload_fail(l, c, "%s", r == 0 ? "closed by the server" : strerror(errno));
        return;
    }
    c->in_len += r;
    if (c->state == MK_WSLOAD_HANDSHAKE) {
        mk_wsload_handshake(l, c);
    }
    else {
        mk_wsload_frames(l, c);
    }
}

/* Wait for events until deadline (or once, deadline 0) and handle them. */
static void mk_wsload_poll(struct mk_wsload *l, double deadline)
{
    struct epoll_event ev[MK_WSLOAD_EVENTS];
    double left = deadline - mk_wsload_now();
    int ms = left > 0 ? (int) (left * 1e3) + 1 : 0;
    int n = epoll_wait(l->ep, ev, MK_WSLOAD_EVENTS, ms);

    for (int i = 0; i < n; i++) {
        struct mk_wsload_conn *c = ev[i].data.ptr;
        if (c->state != MK_WSLOAD_DEAD && (ev[i].events & EPOLLOUT)) {
            mk_wsload_flush(l, c);
        }
        if (c->state != MK_WSLOAD_DEAD && (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
            mk_wsload_read(l, c);
        }
    }
}

/* Connect c and send its handshake; 0, or -1 with the connection failed. */
static int mk_wsload_connect(struct mk_wsload *l, struct mk_wsload_conn *c)
{
    unsigned char raw[16];
    char req[1024];
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    int one = 1, n;

    c->state = MK_WSLOAD_HANDSHAKE;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        mk_wsload_fail(l, c, "socket: %s", strerror(errno));
        return -1;
    }
    if (connect(c->fd, (struct sockaddr *) &l->addr, sizeof(l->addr)) < 0) {
        mk_wsload_fail(l, c, "connect: %s", strerror(errno));
        return -1;
    }
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (getrandom(raw, sizeof(raw), 0) != sizeof(raw)) {
        mk_wsload_fail(l, c, "getrandom: %s", strerror(errno));
        return -1;
    }
    EVP_EncodeBlock((unsigned char *) c->key, raw, sizeof(raw));
    n = snprintf(req, sizeof(req),
                 "GET %s HTTP/1.1\r\nHost: %s:%u\r\nUpgrade: websocket\r\n"
                 "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                 "Sec-WebSocket-Version: 13\r\n\r\n",
                 l->path, inet_ntoa(l->addr.sin_addr), ntohs(l->addr.sin_port), c->key);
    if (n < 0 || (size_t) n >= sizeof(req) || send(c->fd, req, n, MSG_NOSIGNAL) != n) {
        mk_wsload_fail(l, c, "the handshake request was not sent");
        return -1;
    }
    if (fcntl(c->fd, F_SETFL, O_NONBLOCK) < 0 || epoll_ctl(l->ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
        mk_wsload_fail(l, c, "fcntl/epoll_ctl: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* Open every connection, MK_WSLOAD_OPEN_BATCH handshakes at a time: 0 when
 * all of them are open. */
static int mk_wsload_open_all(struct mk_wsload *l)
{
    while (l->opened < l->conns) {
        unsigned batch = l->conns - l->opened;
        double deadline = mk_wsload_now() + MK_WSLOAD_OPEN_TIMEOUT;

        if (batch > MK_WSLOAD_OPEN_BATCH) {
            batch = MK_WSLOAD_OPEN_BATCH;
        }
        for (unsigned i = 0; i < batch; i++) {
            mk_wsload_connect(l, &l->c[l->opened++]);
        }
        while (l->open + l->dead < l->opened && mk_wsload_now() < deadline) {
            mk_wsload_poll(l, deadline);
        }
        for (unsigned i = 0; i < l->opened; i++) {
            if (l->c[i].state == MK_WSLOAD_HANDSHAKE) {
                mk_wsload_fail(l, &l->c[i], "no handshake answer in %.0f s",
                               MK_WSLOAD_OPEN_TIMEOUT);
            }
        }
        if (l->dead) {
            return -1;
        }
    }
    return 0;
}

static int mk_wsload_cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

/* The measured phase: from the first message until SECONDS have passed
 * (echo) or the last fan-out is complete. */
static void mk_wsload_run(struct mk_wsload *l)
{
    l->running = 1;
    l->t0 = mk_wsload_now();
    if (!l->fanout) {
        l->end = l->t0 + (l->rounds ? 3600 : l->seconds);
        for (unsigned i = 0; i < l->conns; i++) {
            mk_wsload_echo_send(l, &l->c[i]);
        }
        while (l->running) {
            mk_wsload_poll(l, l->end);
            if ((!l->rounds && mk_wsload_now() >= l->end) || l->open == 0) {
                l->running = 0;
            }
        }
    }
    else {
        mk_wsload_fan_start(l);
        while (l->running) {
            mk_wsload_poll(l, l->fan_t0 + MK_WSLOAD_FANOUT_TIMEOUT);
            if (l->running && l->left == 0) {
                mk_wsload_fan_done(l);
            }
            else if (l->running && mk_wsload_now() - l->fan_t0 > MK_WSLOAD_FANOUT_TIMEOUT) {
                l->errors += l->left - 1; /* and one more by mk_wsload_error */
                mk_wsload_error(l, "fan-out %llu: %u deliveries missing after %.0f s",
                                (unsigned long long) l->fan, l->left, MK_WSLOAD_FANOUT_TIMEOUT);
                l->running = 0;
            }
        }
    }
    l->end = mk_wsload_now();
}

/* The JSON result of the measured phase. */
static void mk_wsload_report(struct mk_wsload *l)
{
    double elapsed = l->end - l->t0;

    if (!l->fanout) {
        printf("{\"mode\": \"echo\", \"connections\": %u, \"bytes\": %zu, \"seconds\": %.3f, "
               "\"round_trips\": %llu, \"errors\": %llu, \"failed\": %u}\n",
               l->conns, l->bytes, elapsed, (unsigned long long) l->ops,
               (unsigned long long) l->errors, l->dead);
    }
    else {
        double median = 0, max = 0;
        if (l->fan > 0) {
            qsort(l->fan_ms, l->fan, sizeof(double), mk_wsload_cmp_double);
            median = l->fan_ms[l->fan / 2];
            max = l->fan_ms[l->fan - 1];
        }
        printf("{\"mode\": \"fanout\", \"connections\": %u, \"bytes\": %zu, \"seconds\": %.3f, "
               "\"fanouts\": %llu, \"deliveries\": %llu, \"errors\": %llu, \"failed\": %u, "
               "\"median_ms\": %.3f, \"max_ms\": %.3f}\n",
               l->conns, l->bytes, elapsed, (unsigned long long) l->fan,
               (unsigned long long) l->ops, (unsigned long long) l->errors, l->dead, median, max);
    }
    fflush(stdout);
}

static void mk_wsload_usage(void)
{
    fputs("usage: mk-wsload -p PORT -u PATH [-a ADDR] [-m echo|fanout] [-c CONNS]\n"
          "                 [-d SECONDS] [-r ROUNDS] [-n FANOUTS] [-s BYTES] [-w]\n",
          stderr);
    exit(1);
}

static void mk_wsload_options(struct mk_wsload *l, int argc, char **argv)
{
    const char *addr = "127.0.0.1";
    long port = 0;
    int opt;

    l->conns = 64;
    l->seconds = 10;
    l->fanouts = 200;
    l->bytes = 32;
    while ((opt = getopt(argc, argv, "a:p:u:m:c:d:r:n:s:w")) != -1) {
        switch (opt) {
        case 'a':
            addr = optarg;
            break;
        case 'p':
            port = strtol(optarg, NULL, 10);
            break;
        case 'u':
            l->path = optarg;
            break;
        case 'm':
            if (strcmp(optarg, "fanout") == 0) {
                l->fanout = 1;
            }
            else if (strcmp(optarg, "echo") != 0) {
                mk_wsload_usage();
            }
            break;
        case 'c':
            l->conns = strtoul(optarg, NULL, 10);
            break;
        case 'd':
            l->seconds = strtod(optarg, NULL);
            break;
        case 'r':
            l->rounds = strtoull(optarg, NULL, 10);
            break;
        case 'n':
            l->fanouts = strtoul(optarg, NULL, 10);
            break;
        case 's':
            l->bytes = strtoul(optarg, NULL, 10);
            break;
        case 'w':
            l->wait_go = 1;
            break;
        default:
            mk_wsload_usage();
        }
    }
    l->addr.sin_family = AF_INET;
    l->addr.sin_port = htons((uint16_t) port);
    if (port < 1 || port > 65535 || !l->path || l->path[0] != '/' || strlen(l->path) > 512 ||
        inet_pton(AF_INET, addr, &l->addr.sin_addr) != 1 || l->conns == 0 || l->conns > 1000000 ||
        l->seconds <= 0 || l->fanouts == 0 || l->bytes < MK_WSLOAD_MIN_BYTES ||
        l->bytes > MK_WSLOAD_MAX_BYTES || optind != argc) {
        mk_wsload_usage();
    }
}

int main(int argc, char **argv)
{
    struct mk_wsload l = {0};
    char line[64];

    mk_wsload_options(&l, argc, argv);
    if (getrandom(&l.rng, sizeof(l.rng), 0) != sizeof(l.rng) || l.rng == 0) {
        l.rng = 0x9e3779b97f4a7c15ull;
    }
    l.in_cap = 2 * (l.bytes + 14) < 8192 ? 8192 : 2 * (l.bytes + 14);
    l.out_cap = 2 * (l.bytes + 14) + 256;
    l.ep = epoll_create1(EPOLL_CLOEXEC);
    l.c = calloc(l.conns, sizeof(*l.c));
    l.expect = malloc(l.bytes);
    l.fan_ms = calloc(l.fanouts, sizeof(double));
    if (l.ep < 0 || !l.c || !l.expect || !l.fan_ms) {
        perror("mk-wsload");
        return 1;
    }
    for (unsigned i = 0; i < l.conns; i++) {
        l.c[i].id = i;
        l.c[i].fd = -1;
        l.c[i].in = malloc(l.in_cap);
        l.c[i].out = malloc(l.out_cap);
        if (!l.c[i].in || !l.c[i].out) {
            perror("mk-wsload");
            return 1;
        }
    }
    if (mk_wsload_open_all(&l) < 0) {
        fprintf(stderr, "mk-wsload: %u of %u connections did not open\n", l.dead, l.conns);
        return 1;
    }
    if (l.fanout) {
        double settled = mk_wsload_now() + MK_WSLOAD_SETTLE;
        while (mk_wsload_now() < settled) {
            mk_wsload_poll(&l, settled);
        }
    }
    if (l.wait_go) {
        puts("open");
        fflush(stdout);
        if (!fgets(line, sizeof(line), stdin)) {
            return 1;
        }
    }
    mk_wsload_run(&l);
    mk_wsload_report(&l);
    while (l.wait_go && fgets(line, sizeof(line), stdin)) {
        /* the caller samples the server and closes our standard input */
    }
    for (unsigned i = 0; i < l.conns; i++) {
        if (l.c[i].fd >= 0) {
            close(l.c[i].fd);
        }
        free(l.c[i].in);
        free(l.c[i].out);
    }
    free(l.c);
    free(l.expect);
    free(l.fan_ms);
    close(l.ep);
    return 0;
}
