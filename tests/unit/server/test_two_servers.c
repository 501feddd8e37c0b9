/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_two_servers.c: two servers in one process (library mode, monkey.h)
 * each have their own plugin state. Both load the skeleton plugin with a
 * different Message; each answers with its own, and the plugin's counters
 * (its context per server, api->self_set/self) count each server's
 * connections apart. Both stop cleanly (the unit tests also run under
 * ASan: nothing leaks, nothing is freed twice).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include <monkey/monkey.h>

#include "loopback.h"

/* A loopback TCP port that was free a moment ago. */
static int free_port(void)
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

/* GET `path` from 127.0.0.1:port on a new connection; the body, malloc'ed. */
static char *get(int port, const char *path)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t) port)};
    char req[256], buf[8192];
    size_t len = 0;
    ssize_t n;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(fd >= 0);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *) &a, sizeof(a)) != 0) {
        fail_msg("connect to %d: %s", port, strerror(errno));
    }
    int rl = snprintf(req, sizeof(req),
                      "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", path);
    assert_int_equal(write(fd, req, (size_t) rl), rl);
    while ((n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0) {
        len += (size_t) n;
    }
    close(fd);
    buf[len] = '\0';
    assert_true(strncmp(buf, "HTTP/1.1 200 OK\r\n", 17) == 0);
    char *body = strstr(buf, "\r\n\r\n");
    assert_non_null(body);
    return strdup(body + 4);
}

struct instance {
    char dir[PATH_MAX];
    int port;
    struct mk_server *srv;
};

static void start(struct instance *in, const char *message)
{
    char keys[128], conf[300], err[1024] = "";

    in->port = free_port();
    snprintf(keys, sizeof(keys), "    Workers 1\n");
    mk_loopback_dir(in->dir, "    Load skeleton\n", keys);
    snprintf(conf, sizeof(conf), "[SKELETON]\n    Message %s\n", message);
    mk_loopback_file(in->dir, "plugins/skeleton.conf", conf);
    in->srv = mk_server_create();
    assert_non_null(in->srv);
    mk_server_set_confdir(in->srv, in->dir);
    char listen[32];
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", in->port);
    mk_server_set(in->srv, "Listen", listen);
    if (mk_server_start(in->srv, err, sizeof(err)) != MK_OK) {
        fail_msg("server on %d: %s", in->port, err);
    }
}

static void stop(struct instance *in)
{
    mk_server_stop(in->srv);
    mk_server_destroy(in->srv);
    mk_loopback_dir_free(in->dir);
}

static void test_two_servers_own_state(void **state)
{
    struct instance a, b;
    char *body;

    (void) state;
    start(&a, "server A");
    start(&b, "server B");

    body = get(a.port, "/skeleton");
    assert_string_equal(body, "server A\n");
    free(body);
    body = get(b.port, "/skeleton");
    assert_string_equal(body, "server B\n");
    free(body);
    body = get(a.port, "/skeleton");
    assert_string_equal(body, "server A\n");
    free(body);

    /* conn_accept counted in each server's own context: A saw 3, B 2. */
    body = get(a.port, "/skeleton/stats");
    assert_non_null(strstr(body, " connections 3 "));
    free(body);
    body = get(b.port, "/skeleton/stats");
    assert_non_null(strstr(body, " connections 2 "));
    free(body);

    stop(&a);
    /* B goes on serving with its own state once A is gone. */
    body = get(b.port, "/skeleton");
    assert_string_equal(body, "server B\n");
    free(body);
    stop(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_servers_own_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
