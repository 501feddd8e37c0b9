/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * ws_floor.c: `mk-wsfloor`, the least a WebSocket server can do per message
 * on this machine: the floor against which bench/wscost.py sets Monkey and
 * node (bench/README.md, "WebSocket cost per message").
 *
 *   mk-wsfloor -p PORT [-a ADDR]
 *
 * One thread, one level-triggered epoll set, no timers. An upgrade request
 * is answered 101 with its Sec-WebSocket-Accept (SHA-1 and base64 from
 * libcrypto) and nothing is checked besides the key. Then, on each readable
 * event, one read; every whole frame in the buffer is unmasked:
 *   - on a path ending in "/room" a data frame goes, as one write per
 *     connection, to every open connection on such a path (the sender too);
 *   - elsewhere the data frames of one read are echoed in one write.
 * A ping is answered with a pong, a close frame with a close frame and the
 * connection is closed. A write the socket does not take whole drops the
 * connection: there is no output queue (mk-wsload has one message
 * outstanding per connection, so it never happens under its load).
 * Fragmented messages, extensions and limits are not handled: frames of
 * more than 64 KiB drop the connection.
 *
 * It is a measuring tool, not a server to use: it trusts its client.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ws_accept.h"

#define MK_WSFLOOR_IN ((64 << 10) + 16) /* a frame of up to 64 KiB and its head */
#define MK_WSFLOOR_EVENTS 256

struct mk_wsfloor_conn {
    int fd;
    int open;  /* upgraded */
    int room;  /* on a path ending in /room */
    int index; /* in the room's array, while room */
    size_t in_len;
    unsigned char in[MK_WSFLOOR_IN];
    unsigned char out[MK_WSFLOOR_IN];
};

static int mk_wsfloor_ep;
static struct mk_wsfloor_conn **mk_wsfloor_room;
static int mk_wsfloor_members, mk_wsfloor_room_cap;

static void mk_wsfloor_close(struct mk_wsfloor_conn *c)
{
    if (c->room) {
        struct mk_wsfloor_conn *last = mk_wsfloor_room[--mk_wsfloor_members];
        mk_wsfloor_room[c->index] = last;
        last->index = c->index;
    }
    close(c->fd); /* the only reference: it leaves the epoll set */
    free(c);
}

/* Write len bytes at once: 0, or -1 when the socket did not take them whole. */
static int mk_wsfloor_write(struct mk_wsfloor_conn *c, const void *p, size_t len)
{
    return send(c->fd, p, len, MSG_NOSIGNAL) == (ssize_t) len ? 0 : -1;
}

/* A server frame head for len bytes with opcode op into h: its length. */
static size_t mk_wsfloor_head(unsigned char *h, unsigned op, size_t len)
{
    h[0] = 0x80 | op;
    if (len < 126) {
        h[1] = (unsigned char) len;
        return 2;
    }
    h[1] = 126;
    h[2] = (unsigned char) (len >> 8);
    h[3] = (unsigned char) len;
    return 4;
}

/* The 101 answer to the request head in c->in: 0, or -1 (no key, or not written). */
static int mk_wsfloor_upgrade(struct mk_wsfloor_conn *c, const char *end)
{
    const char *head = (const char *) c->in, *key = NULL, *line, *eol, *sp;
    char answer[256], accept[MK_WS_ACCEPT_SIZE];
    size_t key_len = 0;
    int n, room;

    sp = memchr(head, ' ', end - head);
    eol = sp ? memchr(sp + 1, ' ', end - sp - 1) : NULL;
    if (!eol) {
        return -1;
    }
    room = eol - sp - 1 >= 5 && memcmp(eol - 5, "/room", 5) == 0;
    for (line = head; line < end; line = eol + 2) {
        eol = memmem(line, end + 2 - line, "\r\n", 2);
        if (eol - line > 18 && strncasecmp(line, "Sec-WebSocket-Key:", 18) == 0) {
            key = line + 18;
            while (*key == ' ') {
                key++;
            }
            key_len = eol - key;
        }
    }
    if (!key || mk_ws_accept(key, key_len, accept) < 0) {
        return -1;
    }
    n = snprintf(answer, sizeof(answer),
                 "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                 "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
                 accept);
    if (mk_wsfloor_write(c, answer, n) < 0) {
        return -1;
    }
    c->open = 1;
    if (room) {
        if (mk_wsfloor_members == mk_wsfloor_room_cap) {
            int cap = mk_wsfloor_room_cap ? 2 * mk_wsfloor_room_cap : 1024;
            void *m = realloc(mk_wsfloor_room, cap * sizeof(*mk_wsfloor_room));
            if (!m) {
                return -1;
            }
            mk_wsfloor_room = m;
            mk_wsfloor_room_cap = cap;
        }
        c->room = 1; /* only now: mk_wsfloor_close takes it out of the room */
        c->index = mk_wsfloor_members;
        mk_wsfloor_room[mk_wsfloor_members++] = c;
    }
    return 0;
}

/* Every whole frame in c->in: 0, or -1 to close c. */
static int mk_wsfloor_frames(struct mk_wsfloor_conn *c)
{
    size_t i = 0, out = 0;

    while (c->in_len - i >= 6) {
        unsigned char *f = c->in + i, *p;
        size_t n = f[1] & 0x7f, h = 2;
        unsigned op = f[0] & 0x0f;

        if (n == 127 || !(f[1] & 0x80)) {
            return -1;
        }
        if (n == 126) {
            if (c->in_len - i < 8) {
                break;
            }
            n = (size_t) f[2] << 8 | f[3];
            h = 4;
        }
        if (c->in_len - i < h + 4 + n) {
            break;
        }
        p = f + h + 4;
        for (size_t k = 0; k < n; k++) {
            p[k] ^= f[h + (k & 3)];
        }
        i += h + 4 + n;
        if (op == 0x8) {
            unsigned char close_frame[2] = {0x88, 0};
            mk_wsfloor_write(c, close_frame, 2);
            return -1;
        }
        if (op == 0x9 || (!c->room && (op == 0x1 || op == 0x2))) {
            out += mk_wsfloor_head(c->out + out, op == 0x9 ? 0xA : op, n);
            memcpy(c->out + out, p, n);
            out += n; /* a server frame is shorter than the client's: out fits */
        }
        else if (op == 0x1 || op == 0x2) {
            unsigned char frame[MK_WSFLOOR_IN];
            size_t len = mk_wsfloor_head(frame, op, n);
            memcpy(frame + len, p, n);
            len += n;
            for (int m = 0; m < mk_wsfloor_members; m++) {
                mk_wsfloor_write(mk_wsfloor_room[m], frame, len);
            }
        }
    }
    memmove(c->in, c->in + i, c->in_len - i);
    c->in_len -= i;
    return out && mk_wsfloor_write(c, c->out, out) < 0 ? -1 : 0;
}

/* One readable event on c: 0, or -1 to close c. */
static int mk_wsfloor_read(struct mk_wsfloor_conn *c)
{
    ssize_t r = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, 0);
    const char *end;

    if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
        return 0;
    }
    if (r <= 0) {
        return -1;
    }
    c->in_len += r;
    if (c->open) {
        return mk_wsfloor_frames(c);
    }
    end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    if (!end) {
        return c->in_len == sizeof(c->in) ? -1 : 0;
    }
    if (mk_wsfloor_upgrade(c, end) < 0) {
        return -1;
    }
    c->in_len -= end + 4 - (const char *) c->in;
    memmove(c->in, end + 4, c->in_len);
    return mk_wsfloor_frames(c);
}

static void mk_wsfloor_accept(int lfd)
{
    struct epoll_event ev = {.events = EPOLLIN};
    struct mk_wsfloor_conn *c;
    int one = 1;
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

    if (fd < 0) {
        return;
    }
    c = malloc(sizeof(*c));
    if (!c) {
        close(fd);
        return;
    }
    memset(c, 0, offsetof(struct mk_wsfloor_conn, in));
    c->fd = fd;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ev.data.ptr = c;
    if (epoll_ctl(mk_wsfloor_ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
        close(fd);
        free(c);
    }
}

int main(int argc, char **argv)
{
    struct sockaddr_in addr = {.sin_family = AF_INET};
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    struct epoll_event evs[MK_WSFLOOR_EVENTS];
    const char *host = "127.0.0.1";
    long port = 0;
    int opt, one = 1, lfd;

    while ((opt = getopt(argc, argv, "a:p:")) != -1) {
        if (opt == 'a') {
            host = optarg;
        }
        else if (opt == 'p') {
            port = strtol(optarg, NULL, 10);
        }
        else {
            break;
        }
    }
    addr.sin_port = htons((uint16_t) port);
    if (port < 1 || port > 65535 || optind != argc ||
        inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        fputs("usage: mk-wsfloor -p PORT [-a ADDR]\n", stderr);
        return 1;
    }
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    mk_wsfloor_ep = epoll_create1(EPOLL_CLOEXEC);
    if (lfd < 0 || mk_wsfloor_ep < 0 ||
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(lfd, (struct sockaddr *) &addr, sizeof(addr)) < 0 || listen(lfd, 4096) < 0 ||
        epoll_ctl(mk_wsfloor_ep, EPOLL_CTL_ADD, lfd, &ev) < 0) {
        perror("mk-wsfloor");
        return 1;
    }
    for (;;) {
        int n = epoll_wait(mk_wsfloor_ep, evs, MK_WSFLOOR_EVENTS, -1);
        for (int i = 0; i < n; i++) {
            struct mk_wsfloor_conn *c = evs[i].data.ptr;
            if (!c) {
                mk_wsfloor_accept(lfd);
            }
            else if (mk_wsfloor_read(c) < 0) {
                mk_wsfloor_close(c);
            }
        }
    }
}
