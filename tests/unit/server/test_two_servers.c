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
 *
 * Then two servers that both load the logger and control plugins (shared
 * objects: one copy of their code, a state per server): each access log
 * gets its own server's requests only, each control socket answers with
 * its own server's status (from the plugin's own thread, api->thread_serve),
 * and both stop and start again.
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
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <monkey/monkey.h>

#include "loopback.h"
#include "tcp.h"

/* GET `path` from 127.0.0.1:port on a new connection; the body, malloc'ed. */
static char *get(int port, const char *path)
{
    char req[256];
    int fd = tcp_dial(port, 5);
    int rl = snprintf(req, sizeof(req),
                      "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", path);
    tcp_send_all(fd, req, (size_t) rl);
    char *res = tcp_read_all(fd);
    assert_true(strncmp(res, "HTTP/1.1 200 OK\r\n", 17) == 0);
    char *body = strstr(res, "\r\n\r\n");
    assert_non_null(body);
    body = strdup(body + 4);
    free(res);
    return body;
}

/* A server of the configuration in confdir on a free port (*port), started. */
static struct mk_server *serve(const char *confdir, const char *name, int *port)
{
    char err[1024] = "";
    struct mk_server *srv = mk_server_create();

    assert_non_null(srv);
    mk_server_set_confdir(srv, confdir);
    *port = tcp_listen_local(srv);
    if (mk_server_start(srv, err, sizeof(err)) != MK_OK) {
        fail_msg("server %s on %d: %s", name, *port, err);
    }
    return srv;
}

struct instance {
    char dir[PATH_MAX];
    int port;
    struct mk_server *srv;
};

static void start(struct instance *in, const char *message)
{
    char conf[300];

    mk_loopback_dir(in->dir, "    Load skeleton\n", "    Workers 1\n");
    snprintf(conf, sizeof(conf), "[SKELETON]\n    Message %s\n", message);
    mk_loopback_file(in->dir, "plugins/skeleton.conf", conf);
    in->srv = serve(in->dir, message, &in->port);
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

/* ---- logger and control in both ---------------------------------------- */

/* A server with the logger and control plugins, its log and socket in its own directory. */
struct logged {
    char dir[PATH_MAX];
    char log[PATH_MAX + 16];
    char sock[PATH_MAX + 16];
    const char *name; /* "A", "B": in the query of each request it is sent */
    int port;
    struct mk_server *srv;
};

static void logged_setup(struct logged *in, const char *name)
{
    char load[2 * PATH_MAX], conf[PATH_MAX + 64];

    in->name = name;
    /* The shared objects, or the plugins built in (MK_SHARED_PLUGINS=none). */
    if (access(MK_BUILD_DIR "/plugins/monkey-logger.so", F_OK) == 0) {
        snprintf(load, sizeof(load),
                 "    Load %s/plugins/monkey-logger.so\n"
                 "    Load %s/plugins/monkey-control.so\n",
                 MK_BUILD_DIR, MK_BUILD_DIR);
    }
    else {
        snprintf(load, sizeof(load), "    Load logger\n    Load control\n");
    }
    mk_loopback_dir(in->dir, load, "    Workers 2\n");
    snprintf(in->log, sizeof(in->log), "%s/access.log", in->dir);
    snprintf(in->sock, sizeof(in->sock), "%s/ctl.sock", in->dir);
    snprintf(conf, sizeof(conf), "[LOGGER]\n    AccessLog %s\n", in->log);
    mk_loopback_file(in->dir, "plugins/logger.conf", conf);
    snprintf(conf, sizeof(conf), "[CONTROL]\n    Socket %s\n", in->sock);
    mk_loopback_file(in->dir, "plugins/control.conf", conf);
}

static void logged_start(struct logged *in)
{
    in->srv = serve(in->dir, in->name, &in->port);
}

static void logged_stop(struct logged *in)
{
    mk_server_stop(in->srv);
    mk_server_destroy(in->srv);
    in->srv = NULL;
}

/* n requests to in, each "GET /index.html?server=NAME". */
static void logged_get(struct logged *in, int n)
{
    char path[64];

    snprintf(path, sizeof(path), "/index.html?server=%s", in->name);
    for (int i = 0; i < n; i++) {
        free(get(in->port, path));
    }
}

/* The reply of in's control socket to "status", malloc'ed. */
static char *control_status(const struct logged *in)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    assert_true(strlen(in->sock) < sizeof(a.sun_path));
    memcpy(a.sun_path, in->sock, strlen(in->sock) + 1);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *) &a, sizeof(a)) != 0) {
        fail_msg("connect to %s: %s", in->sock, strerror(errno));
    }
    tcp_send_all(fd, "status\n", 7);
    return tcp_read_all(fd);
}

/* The "requests" figure of in's status, as its control socket gives it. */
static long control_requests(const struct logged *in)
{
    char *st = control_status(in);
    const char *p = strstr(st, "\nrequests ");
    long n = p ? strtol(p + 10, NULL, 10) : -1;

    if (!p) {
        fail_msg("no requests line in the status of %s: %s", in->name, st);
    }
    free(st);
    return n;
}

/* Wait (2 s at most) until in's control socket counts `want` requests; the last count. */
static long control_requests_wait(const struct logged *in, long want)
{
    long got = -1;

    for (int i = 0; i < 200 && (got = control_requests(in)) != want; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return got;
}

/* The lines of in's access log (the server stopped: all written): how many, all its own? */
static int log_lines_own(const struct logged *in)
{
    char line[4096], want[64], other[64];
    FILE *f = fopen(in->log, "r");
    int n = 0;

    assert_non_null(f);
    snprintf(want, sizeof(want), "GET /index.html?server=%s ", in->name);
    snprintf(other, sizeof(other), "?server=");
    while (fgets(line, sizeof(line), f)) {
        if (!strstr(line, want)) {
            fclose(f);
            fail_msg("%s's access log has another's line: %s", in->name, line);
        }
        assert_non_null(strstr(line, other));
        n++;
    }
    fclose(f);
    return n;
}

static void test_two_servers_logger_control(void **state)
{
    struct logged a, b;

    (void) state;
    logged_setup(&a, "A");
    logged_setup(&b, "B");
    for (int round = 1; round <= 2; round++) {
        logged_start(&a);
        logged_start(&b);
        logged_get(&a, 3);
        logged_get(&b, 2);
        /* Each socket answers for its own server, whichever started last. */
        assert_int_equal(control_requests_wait(&a, 3), 3);
        assert_int_equal(control_requests_wait(&b, 2), 2);
        logged_get(&b, 2);
        assert_int_equal(control_requests_wait(&b, 4), 4);
        assert_int_equal(control_requests(&a), 3);

        logged_stop(&a);
        /* B serves on, its socket too; A's socket file is gone. */
        assert_int_equal(access(a.sock, F_OK), -1);
        logged_get(&b, 1);
        assert_int_equal(control_requests_wait(&b, 5), 5);
        logged_stop(&b);

        /* Each log holds its own server's requests, the earlier rounds' too. */
        assert_int_equal(log_lines_own(&a), 3 * round);
        assert_int_equal(log_lines_own(&b), 5 * round);
    }
    mk_loopback_dir_free(a.dir);
    mk_loopback_dir_free(b.dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_servers_own_state),
        cmocka_unit_test(test_two_servers_logger_control),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
