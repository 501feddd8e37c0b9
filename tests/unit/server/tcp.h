/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tcp.h: loopback TCP for the unit tests that start real servers in the
 * test's process (library mode, monkey.h): a free port, a server listening
 * on it, a connection to it, whole writes and reads. Static inline, so a
 * test includes it and links nothing more; failures fail the test
 * (cmocka: include <cmocka.h> first).
 */
#ifndef MK_TESTS_TCP_H
#define MK_TESTS_TCP_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <monkey/monkey.h>

/* A loopback TCP port that was free a moment ago. */
static inline int tcp_free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *) &a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *) &a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* Have srv listen on 127.0.0.1 at a free port (Listen); the port. */
static inline int tcp_listen_local(struct mk_server *srv)
{
    char listen[32];
    int port = tcp_free_port();

    snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
    mk_server_set(srv, "Listen", listen);
    return port;
}

/* A connection to 127.0.0.1:port whose reads give up after `seconds`. */
static inline int tcp_dial(int port, int seconds)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t) port)};
    struct timeval tv = {seconds, 0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *) &a, sizeof(a)) != 0) {
        fail_msg("connect to %d: %s", port, strerror(errno));
    }
    return fd;
}

static inline void tcp_send_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        assert_true(n > 0);
        p += n;
        len -= (size_t) n;
    }
}

/* Read to the end of the connection and close it; what came, malloc'ed and NUL terminated. */
static inline char *tcp_read_all(int fd)
{
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    ssize_t n;

    assert_non_null(buf);
    while ((n = read(fd, buf + len, cap - 1 - len)) > 0) {
        len += (size_t) n;
        if (cap - 1 - len == 0) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    close(fd);
    buf[len] = '\0';
    return buf;
}

#endif
