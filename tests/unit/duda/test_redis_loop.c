/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_redis_loop.c: unit tests of duda/redis_loop.c, the hiredis adapter,
 * on a fake event loop (watches polled with poll(2), timers of 0 ms fired
 * at each turn) against a fake Redis server on a loopback socket that the
 * test drives by hand: it accepts, answers, closes or resets.
 *
 * Most cases close the connection from inside one of its own callbacks,
 * on each path the adapter enters hiredis by (a read, the coalesced
 * write, the connection being established or refused, a close that fails
 * pending commands): the adapter must not touch the connection after the
 * callback freed it (ASan reports it), and every watch and timer of the
 * connection must be gone at the end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "duda/redis_loop.c"

/* ---- the fake loop -------------------------------------------------------------------- */

#define SLOTS 16

struct fake_watch {
    int fd;
    unsigned mask;
    void (*cb)(int fd, unsigned ready, void *arg);
    void *arg;
};

struct fake_timer {
    void (*cb)(void *arg);
    void *arg;
    bool armed;
    unsigned ms;
};

static struct fake_watch *watches[SLOTS];
static struct fake_timer *timers[SLOTS];

static void *fake_watch(int fd, unsigned mask, void (*cb)(int fd, unsigned ready, void *arg),
                        void *arg)
{
    for (int i = 0; i < SLOTS; i++) {
        if (!watches[i]) {
            watches[i] = malloc(sizeof(*watches[i]));
            *watches[i] = (struct fake_watch){fd, mask, cb, arg};
            return watches[i];
        }
    }
    return NULL;
}

static int fake_modify(void *w, unsigned mask)
{
    ((struct fake_watch *) w)->mask = mask;
    return 0;
}

static void fake_unwatch(void *w)
{
    for (int i = 0; i < SLOTS; i++) {
        if (watches[i] == w) {
            watches[i] = NULL;
        }
    }
    free(w);
}

static void *fake_timer_new(void (*cb)(void *arg), void *arg)
{
    for (int i = 0; i < SLOTS; i++) {
        if (!timers[i]) {
            timers[i] = malloc(sizeof(*timers[i]));
            *timers[i] = (struct fake_timer){.cb = cb, .arg = arg};
            return timers[i];
        }
    }
    return NULL;
}

static int fake_timer_arm(void *p, unsigned ms)
{
    struct fake_timer *t = p;
    t->armed = true;
    t->ms = ms;
    return 0;
}

static void fake_timer_disarm(void *p)
{
    ((struct fake_timer *) p)->armed = false;
}

static void fake_timer_free(void *p)
{
    for (int i = 0; i < SLOTS; i++) {
        if (timers[i] == p) {
            timers[i] = NULL;
        }
    }
    free(p);
}

static unsigned log_lines;

static void fake_log(const char *fmt, ...)
{
    (void) fmt;
    log_lines++;
}

static const struct duda_redis_loop_ops fake_ops = {
    .watch = fake_watch,
    .modify = fake_modify,
    .unwatch = fake_unwatch,
    .timer_new = fake_timer_new,
    .timer_arm = fake_timer_arm,
    .timer_disarm = fake_timer_disarm,
    .timer_free = fake_timer_free,
    .log = fake_log,
};

/* Fire the armed 0 ms timers (a slot may be freed by a callback). */
static void fire_timers(void)
{
    for (int i = 0; i < SLOTS; i++) {
        struct fake_timer *t = timers[i];
        if (t && t->armed && t->ms == 0) {
            t->armed = false;
            t->cb(t->arg);
        }
    }
}

/* Wait up to 1 s for one watch to be ready and call it (an error or a hang-up: both ways). */
static bool poll_watches(void)
{
    struct pollfd p[SLOTS];
    struct fake_watch *w[SLOTS];
    nfds_t n = 0;

    for (int i = 0; i < SLOTS; i++) {
        if (watches[i] && watches[i]->mask) {
            w[n] = watches[i];
            p[n] =
                (struct pollfd){.fd = watches[i]->fd,
                                .events = (watches[i]->mask & DUDA_REDIS_LOOP_READ ? POLLIN : 0) |
                                          (watches[i]->mask & DUDA_REDIS_LOOP_WRITE ? POLLOUT : 0)};
            n++;
        }
    }
    if (n == 0 || poll(p, n, 1000) <= 0) {
        return false;
    }
    for (nfds_t i = 0; i < n; i++) {
        if (!p[i].revents) {
            continue;
        }
        bool fail = p[i].revents & (POLLERR | POLLHUP);
        unsigned ready = (p[i].revents & POLLIN || fail ? DUDA_REDIS_LOOP_READ : 0) |
                         (p[i].revents & POLLOUT || fail ? DUDA_REDIS_LOOP_WRITE : 0);
        w[i]->cb(w[i]->fd, ready, w[i]->arg);
        return true; /* the others may be gone */
    }
    return false;
}

/* One turn: the 0 ms timers (the coalesced write) first, then one ready watch. */
static void turn(void)
{
    fire_timers();
    poll_watches();
}

static int live_watches(void)
{
    int n = 0;
    for (int i = 0; i < SLOTS; i++) {
        n += watches[i] != NULL;
    }
    return n;
}

static int live_timers(void)
{
    int n = 0;
    for (int i = 0; i < SLOTS; i++) {
        n += timers[i] != NULL;
    }
    return n;
}

/* ---- the fake server ------------------------------------------------------------------ */

static int listener = -1, peer = -1;
static int port;

static int listen_any(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *) &sa, &len), 0);
    port = ntohs(sa.sin_port);
    return fd;
}

/* A free port with nothing listening on it. */
static int port_refused(void)
{
    int fd = listen_any();
    close(fd);
    return port;
}

static void server_send(const char *s)
{
    assert_int_equal(write(peer, s, strlen(s)), (ssize_t) strlen(s));
}

/* Read what the client wrote until `what` is in it (1 s at most). */
static void server_expect(const char *what)
{
    char buf[4096];
    size_t n = 0;

    while (!memmem(buf, n, what, strlen(what))) {
        struct pollfd p = {.fd = peer, .events = POLLIN};
        assert_int_equal(poll(&p, 1, 1000), 1);
        ssize_t r = read(peer, buf + n, sizeof(buf) - 1 - n);
        assert_true(r > 0);
        n += (size_t) r;
    }
}

/* Close the server's side: gracefully (EOF) or with a reset the client sees at once. */
static void server_close(bool reset, int client_fd)
{
    if (reset) {
        struct linger l = {.l_onoff = 1, .l_linger = 0};
        setsockopt(peer, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
    close(peer);
    peer = -1;
    struct pollfd p = {.fd = client_fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 1000), 1);
}

/* ---- the connection under test ------------------------------------------------------- */

static struct duda_redis_loop *conn;

struct call {
    bool called;
    bool got_reply;
    char str[32];
    bool close_it;   /* close conn from inside the callback */
    bool close_more; /* then close it again and ask for its context */
};

static void on_reply(redisAsyncContext *ac, void *reply, void *arg)
{
    struct call *k = arg;
    const redisReply *rep = reply;

    (void) ac;
    assert_false(k->called); /* once */
    k->called = true;
    k->got_reply = rep != NULL;
    if (rep && rep->str) {
        snprintf(k->str, sizeof(k->str), "%s", rep->str);
    }
    if (k->close_it) {
        duda_redis_loop_close(conn);
    }
    if (k->close_more) {
        /* Harmless: the connection is gone for the caller, freed when the adapter unwinds. */
        duda_redis_loop_close(conn);
        assert_null(duda_redis_loop_ctx(conn));
    }
}

static unsigned ups;
static bool close_when_up;

static void on_up(struct duda_redis_loop *c, void *arg)
{
    (void) arg;
    ups++;
    if (close_when_up) {
        duda_redis_loop_close(c);
    }
}

static void send_cmd(struct call *k, const char *cmd)
{
    redisAsyncContext *ac = duda_redis_loop_ctx(conn);
    assert_non_null(ac);
    assert_int_equal(redisAsyncCommand(ac, on_reply, k, cmd), REDIS_OK);
}

/* Open conn to the fake server and turn until it is up. */
static void open_up(void)
{
    listener = listen_any();
    conn = duda_redis_loop_open(&fake_ops, "127.0.0.1", port, 0, "test", on_up, NULL);
    assert_non_null(conn);
    peer = accept(listener, NULL, NULL);
    assert_true(peer >= 0);
    for (int i = 0; i < 50 && conn->state != DUDA_REDIS_LOOP_UP; i++) {
        turn();
    }
    assert_int_equal(conn->state, DUDA_REDIS_LOOP_UP);
}

/* Turn until k was called (2 s at most). */
static void turn_until(const struct call *k)
{
    for (int i = 0; i < 50 && !k->called; i++) {
        turn();
    }
    assert_true(k->called);
}

static int setup(void **state)
{
    (void) state;
    ups = 0;
    close_when_up = false;
    conn = NULL;
    return 0;
}

/* The connection closed itself: nothing of it is left on the loop. */
static int teardown(void **state)
{
    (void) state;
    assert_int_equal(live_watches(), 0);
    assert_int_equal(live_timers(), 0);
    if (peer >= 0) {
        close(peer);
        peer = -1;
    }
    if (listener >= 0) {
        close(listener);
        listener = -1;
    }
    return 0;
}

/* A reply's callback closes: the read that ran it ends; the later command gets NULL. */
static void test_close_in_read(void **state)
{
    struct call a = {.close_it = true}, b = {0};

    (void) state;
    open_up();
    send_cmd(&a, "PING");
    send_cmd(&b, "PING");
    turn(); /* the coalesced write */
    server_expect("PING\r\n*1\r\n$4\r\nPING");
    server_send("+PONG\r\n");
    turn_until(&a);
    assert_true(a.got_reply);
    assert_string_equal(a.str, "PONG");
    assert_true(b.called);
    assert_false(b.got_reply);
}

/* The coalesced write fails (a reset): the failed command's callback closes inside the flush. */
static void test_close_in_flush(void **state)
{
    struct call a = {.close_it = true};

    (void) state;
    open_up();
    int fd = conn->ac->c.fd;
    send_cmd(&a, "PING");
    server_close(true, fd);
    fire_timers(); /* the write, before the watch sees the reset */
    assert_true(a.called);
    assert_false(a.got_reply);
}

/* The server goes away with a command pending: its NULL reply closes, inside the read. */
static void test_close_on_disconnect(void **state)
{
    struct call a = {.close_it = true};

    (void) state;
    open_up();
    int fd = conn->ac->c.fd;
    send_cmd(&a, "PING");
    turn();
    server_expect("PING");
    server_close(false, fd);
    turn_until(&a);
    assert_false(a.got_reply);
    assert_int_equal(ups, 1);
}

/* The connection is refused: a command queued while connecting closes in its NULL reply. */
static void test_close_when_refused(void **state)
{
    struct call a = {.close_it = true};

    (void) state;
    conn = duda_redis_loop_open(&fake_ops, "127.0.0.1", port_refused(), 0, "test", on_up, NULL);
    assert_non_null(conn);
    send_cmd(&a, "PING");
    turn_until(&a);
    assert_false(a.got_reply);
    assert_int_equal(ups, 0);
}

/* The callback of "the connection is up" closes (it is where subscriptions are sent again). */
static void test_close_when_up(void **state)
{
    (void) state;
    close_when_up = true;
    listener = listen_any();
    conn = duda_redis_loop_open(&fake_ops, "127.0.0.1", port, 0, "test", on_up, NULL);
    assert_non_null(conn);
    peer = accept(listener, NULL, NULL);
    assert_true(peer >= 0);
    for (int i = 0; i < 50 && ups == 0; i++) {
        turn();
    }
    assert_int_equal(ups, 1);
}

/* A close from outside fails the pending command, whose callback closes again. */
static void test_close_twice(void **state)
{
    struct call a = {.close_it = true, .close_more = true}, b = {0};

    (void) state;
    open_up();
    send_cmd(&a, "PING");
    send_cmd(&b, "PING");
    duda_redis_loop_close(conn);
    assert_true(a.called && b.called);
    assert_false(a.got_reply || b.got_reply);
}

/* Without a close, a disconnection plans the next attempt and keeps the connection. */
static void test_reconnect_planned(void **state)
{
    struct call a = {0};

    (void) state;
    open_up();
    int fd = conn->ac->c.fd;
    send_cmd(&a, "PING");
    turn();
    server_expect("PING");
    server_close(false, fd);
    turn_until(&a);
    assert_false(a.got_reply);
    assert_int_equal(conn->state, DUDA_REDIS_LOOP_DOWN);
    assert_true(conn->retry_armed);
    assert_null(duda_redis_loop_ctx(conn));
    duda_redis_loop_close(conn);
}

/* argv[1]: run only the tests whose name matches it (cmocka's filter: '*' for any text). */
int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc > 1) {
        cmocka_set_test_filter(argv[1]);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_close_in_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_in_flush, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_on_disconnect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_when_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_when_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_twice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reconnect_planned, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
