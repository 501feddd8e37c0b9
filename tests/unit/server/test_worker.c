/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_worker.c: unit tests of server/runtime/worker.c's control channel: a
 * listener plan posted to a worker that has not taken the previous one yet
 * (its thread has not started, or two reloads came in a row) keeps the
 * sockets the new plan says to keep.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "server/process/server.h"

/* A worker as mk_worker_post() sees it: its lock and its control eventfd. */
static void worker_init(struct mk_worker *w)
{
    memset(w, 0, sizeof(*w));
    pthread_mutex_init(&w->msg_lock, NULL);
    w->ctl_ev.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    assert_true(w->ctl_ev.fd >= 0);
}

static void worker_destroy(struct mk_worker *w)
{
    mk_listener_plan_free(w->msg_plan, w->msg_plan_len);
    close(w->ctl_ev.fd);
    pthread_mutex_destroy(&w->msg_lock);
}

static int open_socket(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    return fd;
}

static bool fd_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0;
}

/* A plan of n addresses; fds[i] >= 0 is a new socket, -1 says "keep". */
static struct mk_listen_plan *plan_new(const char *const *specs, const int *fds, size_t n)
{
    struct mk_listen_plan *p = mk_calloc(n, sizeof(*p));
    for (size_t i = 0; i < n; i++) {
        p[i].spec = mk_strdup(specs[i]);
        p[i].fd = fds[i];
    }
    return p;
}

/*
 * The reload race of a reuseport worker: the start plan (a new socket for
 * 2001) is still pending when a reload posts a plan that keeps 2001. The
 * socket must survive and be in the plan the worker will take.
 */
static void test_post_before_start_keeps_socket(void **state)
{
    (void) state;
    struct mk_worker w;
    const char *specs[] = {"2001"};
    int fd = open_socket();

    worker_init(&w);
    mk_worker_post(&w, MK_WCTL_CONFIG, NULL, plan_new(specs, (int[]){fd}, 1), 1);
    mk_worker_post(&w, MK_WCTL_CONFIG, NULL, plan_new(specs, (int[]){-1}, 1), 1);

    assert_true(fd_open(fd));
    assert_non_null(w.msg_plan);
    assert_int_equal(w.msg_plan_len, 1);
    assert_int_equal(w.msg_plan[0].fd, fd);
    worker_destroy(&w);
    assert_false(fd_open(fd)); /* freeing the plan closes what nobody adopted */
}

/* Many reloads before the worker runs: still the one socket, never closed. */
static void test_many_posts_keep_socket(void **state)
{
    (void) state;
    struct mk_worker w;
    const char *specs[] = {"2001"};
    int fd = open_socket();

    worker_init(&w);
    mk_worker_post(&w, MK_WCTL_CONFIG, NULL, plan_new(specs, (int[]){fd}, 1), 1);
    for (int i = 0; i < 50; i++) {
        mk_worker_post(&w, MK_WCTL_CONFIG, NULL, plan_new(specs, (int[]){-1}, 1), 1);
    }
    assert_true(fd_open(fd));
    assert_int_equal(w.msg_plan[0].fd, fd);
    worker_destroy(&w);
}

/*
 * A pending plan adds 2002; the next one drops 2002 and adds 2003 while
 * keeping 2001: 2001's socket moves over, 2002's is closed, 2003's is new.
 */
static void test_post_drops_and_adds(void **state)
{
    (void) state;
    struct mk_worker w;
    int a = open_socket(), b = open_socket(), c = open_socket();

    worker_init(&w);
    mk_worker_post(&w, MK_WCTL_CONFIG, NULL,
                   plan_new((const char *const[]){"2001", "2002"}, (int[]){a, b}, 2), 2);
    mk_worker_post(&w, MK_WCTL_CONFIG, NULL,
                   plan_new((const char *const[]){"2001", "2003"}, (int[]){-1, c}, 2), 2);

    assert_int_equal(w.msg_plan_len, 2);
    assert_string_equal(w.msg_plan[0].spec, "2001");
    assert_int_equal(w.msg_plan[0].fd, a);
    assert_string_equal(w.msg_plan[1].spec, "2003");
    assert_int_equal(w.msg_plan[1].fd, c);
    assert_true(fd_open(a));
    assert_false(fd_open(b));
    assert_true(fd_open(c));
    worker_destroy(&w);
}

/* A message without a plan (stop, halt) leaves the pending plan alone. */
static void test_post_without_plan_keeps_pending(void **state)
{
    (void) state;
    struct mk_worker w;
    int fd = open_socket();

    worker_init(&w);
    mk_worker_post(&w, MK_WCTL_CONFIG, NULL,
                   plan_new((const char *const[]){"2001"}, (int[]){fd}, 1), 1);
    mk_worker_post(&w, MK_WCTL_STOP, NULL, NULL, 0);
    assert_int_equal(w.msg_plan[0].fd, fd);
    assert_true(w.msg_flags & MK_WCTL_STOP);
    assert_true(fd_open(fd));
    worker_destroy(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_post_before_start_keeps_socket),
        cmocka_unit_test(test_many_posts_keep_socket),
        cmocka_unit_test(test_post_drops_and_adds),
        cmocka_unit_test(test_post_without_plan_keeps_pending),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
