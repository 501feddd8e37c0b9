/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * evloop.c: a test plugin for the worker's event loop API (timer_start,
 * fd_watch, child_watch). Each route suspends its request, waits for a loop
 * event and resumes it from the callback, answering what it saw:
 *
 *   /loop/timer?ms=N   a one-shot timer: "timer N fired after M ms"
 *   /loop/repeat       a 10 ms repeating timer that stops itself after 5 ticks
 *   /loop/kept         a timer of timer_new() armed again and again (see
 *                      evloop_kept_cb): "kept fired 3 ..."
 *   /loop/child        spawns /bin/sh -c 'exit 3': "pid P status 3"
 *   /loop/pipe         reads a pipe fed by a child until EOF and reaps the child
 *   /loop/batch        two pipes ready in the same batch: the first callback
 *                      unwatches and closes both; the other must not run
 *   /loop/refused      whether starts from init() and from a task thread were
 *                      refused with EPERM
 *   /loop/leave        leaves a one-hour timer, a kept timer armed for an hour,
 *                      one not armed and a watched pipe behind: the worker
 *                      releases them when it exits
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <monkey/mk_plugin.h>

extern char **environ;

static const struct mk_api *api;
static int refused_in_init; /* 1: the starts from init() were refused with EPERM */

/* One suspended request and what its loop events found. */
struct job {
    struct mk_suspended *s;
    char reply[256];
    uint64_t started_ms;
    int ticks;
    struct mk_loop_timer *kept;
    int checks;
    int fds[2];
    int callbacks;
    struct mk_loop_fd *watch[2];
    pid_t pid;
    int status;
    int done; /* events still awaited */
    size_t got;
    char data[128];
};

static int evloop_reply(struct mk_request *r, void *arg)
{
    struct job *j = arg;
    int rc = MK_OK;

    if (r) {
        api->set_status(r, 200);
        api->set_content_type(r, "text/plain");
        rc = api->set_body(r, j->reply, strlen(j->reply)) == MK_OK ? MK_OK : 503;
    }
    free(j);
    return rc;
}

static void evloop_finish(struct job *j)
{
    api->resume(j->s, evloop_reply, j);
}

static struct job *evloop_job(struct mk_request *r)
{
    struct job *j = calloc(1, sizeof(*j));
    if (!j) {
        return NULL;
    }
    j->fds[0] = j->fds[1] = -1;
    j->started_ms = api->now_ms();
    j->s = api->suspend(r);
    if (!j->s) {
        free(j);
        return NULL;
    }
    return j;
}

/* ---- timers ---------------------------------------------------------------- */

static void evloop_timer_cb(struct mk_loop_timer *t, void *arg)
{
    struct job *j = arg;
    (void) t;
    snprintf(j->reply, sizeof(j->reply), "timer %d fired after %llu ms on worker %d\n", j->ticks,
             (unsigned long long) (api->now_ms() - j->started_ms), api->worker_id());
    evloop_finish(j);
}

static void evloop_repeat_cb(struct mk_loop_timer *t, void *arg)
{
    struct job *j = arg;

    if (++j->ticks < 5) {
        return;
    }
    int stopped = api->timer_stop(t);
    snprintf(j->reply, sizeof(j->reply), "ticks %d stop %d after %llu ms\n", j->ticks, stopped,
             (unsigned long long) (api->now_ms() - j->started_ms));
    evloop_finish(j);
}

/*
 * /loop/kept: armed for 1 s, then moved to 5 ms, so it fires once, early.
 * Its first two calls arm it again at once, for 0 ms (the second from the
 * queue it is armed in again: it must not be lost); the third leaves it
 * disarmed and a check 30 ms later sees no fourth. The check then arms
 * and disarms it (no call), and 20 ms later arms it for good: the fourth
 * call stops it inside its callback and answers.
 */
static void evloop_kept_check(struct mk_loop_timer *t, void *arg);

static void evloop_kept_cb(struct mk_loop_timer *t, void *arg)
{
    struct job *j = arg;

    j->ticks++;
    if (j->ticks < 3) {
        api->timer_arm(t, 0);
        return;
    }
    if (j->ticks == 3) {
        if (!api->timer_start(30, 0, evloop_kept_check, j)) {
            api->timer_arm(t, 0);
        }
        return;
    }
    int stopped = api->timer_stop(t);
    int refused = api->timer_arm(t, 0) == MK_ERR; /* stopped: freed once this returns */
    snprintf(j->reply, sizeof(j->reply),
             "kept fired %d checks %d stop %d refused %d after %llu ms\n", j->ticks, j->checks,
             stopped, refused, (unsigned long long) (api->now_ms() - j->started_ms));
    evloop_finish(j);
}

static void evloop_kept_check(struct mk_loop_timer *t, void *arg)
{
    struct job *j = arg;

    (void) t;
    j->checks = j->checks * 10 + j->ticks;
    if (j->checks < 10) {
        int a = api->timer_arm(j->kept, 0), d = api->timer_disarm(j->kept);
        if (a != MK_OK || d != MK_OK || !api->timer_start(20, 0, evloop_kept_check, j)) {
            api->timer_arm(j->kept, 0);
        }
        return;
    }
    api->timer_arm(j->kept, 0);
}

/* ---- children -------------------------------------------------------------- */

static pid_t evloop_spawn(const char *script, int out_fd)
{
    posix_spawn_file_actions_t fa;
    char *argv[] = {"/bin/sh", "-c", (char *) script, NULL};
    pid_t pid;

    posix_spawn_file_actions_init(&fa);
    if (out_fd >= 0) {
        posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
    }
    int rc = posix_spawn(&pid, "/bin/sh", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    return rc == 0 ? pid : -1;
}

static void evloop_child_cb(pid_t pid, int status, void *arg)
{
    struct job *j = arg;

    snprintf(j->reply, sizeof(j->reply), "pid %d status %d on worker %d\n", (int) pid,
             WIFEXITED(status) ? WEXITSTATUS(status) : -1, api->worker_id());
    evloop_finish(j);
}

/* /loop/pipe: done when both the pipe reached EOF and the child was reaped. */
static void evloop_pipe_step(struct job *j)
{
    if (--j->done > 0) {
        return;
    }
    snprintf(j->reply, sizeof(j->reply), "read '%.*s' pid %d status %d\n", (int) j->got, j->data,
             (int) j->pid, WIFEXITED(j->status) ? WEXITSTATUS(j->status) : -1);
    evloop_finish(j);
}

static void evloop_pipe_child_cb(pid_t pid, int status, void *arg)
{
    struct job *j = arg;
    (void) pid;
    j->status = status;
    evloop_pipe_step(j);
}

static void evloop_pipe_cb(struct mk_loop_fd *h, int fd, uint32_t ready, void *arg)
{
    struct job *j = arg;
    (void) ready;

    ssize_t n = read(fd, j->data + j->got, sizeof(j->data) - j->got);
    if (n > 0) {
        j->got += (size_t) n;
        return; /* level triggered: called again while there is more */
    }
    if (n < 0 && errno == EAGAIN) {
        return;
    }
    api->fd_unwatch(h); /* inside its own callback */
    close(fd);
    evloop_pipe_step(j);
}

/* ---- the stale-event guard ------------------------------------------------- */

static void evloop_batch_reply(struct mk_loop_timer *t, void *arg)
{
    struct job *j = arg;
    (void) t;
    snprintf(j->reply, sizeof(j->reply), "callbacks %d\n", j->callbacks);
    evloop_finish(j);
}

static void evloop_batch_cb(struct mk_loop_fd *h, int fd, uint32_t ready, void *arg)
{
    struct job *j = arg;
    (void) h;
    (void) fd;
    (void) ready;

    j->callbacks++;
    /* Both are ready in this batch: end both, the other one's event is pending. */
    for (int i = 0; i < 2; i++) {
        api->fd_unwatch(j->watch[i]);
        close(j->fds[i]);
    }
    /* The reply waits a little, so a wrongly run second callback would count. */
    if (!api->timer_start(20, 0, evloop_batch_reply, j)) {
        evloop_batch_reply(NULL, j);
    }
}

/* ---- refusal off the worker -------------------------------------------------- */

static void evloop_noop_timer(struct mk_loop_timer *t, void *arg)
{
    (void) t;
    (void) arg;
}

static void evloop_noop_fd(struct mk_loop_fd *h, int fd, uint32_t ready, void *arg)
{
    (void) h;
    (void) fd;
    (void) ready;
    (void) arg;
}

/* 1 when every start is refused with EPERM (not on a worker thread). */
static int evloop_all_refused(void)
{
    int ok = 1;

    errno = 0;
    ok &= api->timer_start(10, 0, evloop_noop_timer, NULL) == NULL && errno == EPERM;
    errno = 0;
    ok &= api->timer_new(evloop_noop_timer, NULL) == NULL && errno == EPERM;
    ok &= api->timer_arm(NULL, 0) == MK_ERR && api->timer_disarm(NULL) == MK_ERR;
    errno = 0;
    ok &= api->fd_watch(0, MK_LOOP_READ, evloop_noop_fd, NULL) == NULL && errno == EPERM;
    errno = 0;
    ok &= api->child_watch(getpid(), NULL, NULL) == NULL && errno == EPERM;
    ok &= api->timer_stop(NULL) == MK_ERR;
    return ok;
}

static void evloop_task_work(void *arg)
{
    struct job *j = arg;
    snprintf(j->reply, sizeof(j->reply), "init refused %d task refused %d\n", refused_in_init,
             evloop_all_refused());
}

/* ---- routes ------------------------------------------------------------------ */

static int evloop_query_ms(struct mk_request *r)
{
    size_t qlen;
    const char *q = api->query(r, &qlen);
    char num[12];

    if (!q || qlen <= 3 || qlen >= 12 || memcmp(q, "ms=", 3) != 0) {
        return 50;
    }
    memcpy(num, q + 3, qlen - 3);
    num[qlen - 3] = '\0';
    return atoi(num);
}

static int evloop_start(struct mk_request *r, const char *route, size_t len)
{
    struct job *j = evloop_job(r);

    if (!j) {
        return 503;
    }
    if (len == 6 && memcmp(route, "/timer", 6) == 0) {
        j->ticks = evloop_query_ms(r);
        if (api->timer_start((uint32_t) j->ticks, 0, evloop_timer_cb, j)) {
            return MK_SUSPENDED;
        }
    }
    else if (len == 7 && memcmp(route, "/repeat", 7) == 0) {
        if (api->timer_start(10, 1, evloop_repeat_cb, j)) {
            return MK_SUSPENDED;
        }
    }
    else if (len == 5 && memcmp(route, "/kept", 5) == 0) {
        struct mk_loop_timer *once = api->timer_start(1000, 0, evloop_noop_timer, NULL);
        j->kept = api->timer_new(evloop_kept_cb, j);
        /* a timer of timer_start() is not armed again: 1 when refused */
        int refused =
            once && api->timer_arm(once, 5) == MK_ERR && api->timer_disarm(once) == MK_ERR;
        if (once) {
            api->timer_stop(once);
        }
        if (j->kept && refused && api->timer_arm(j->kept, 1000) == MK_OK &&
            api->timer_arm(j->kept, 5) == MK_OK) {
            return MK_SUSPENDED;
        }
        if (j->kept) {
            api->timer_stop(j->kept);
        }
    }
    else if (len == 6 && memcmp(route, "/child", 6) == 0) {
        pid_t pid = evloop_spawn("exit 3", -1);
        if (pid > 0 && api->child_watch(pid, evloop_child_cb, j)) {
            return MK_SUSPENDED;
        }
    }
    else if (len == 5 && memcmp(route, "/pipe", 5) == 0) {
        if (pipe2(j->fds, O_CLOEXEC) == 0) {
            fcntl(j->fds[0], F_SETFL, O_NONBLOCK);
            j->pid = evloop_spawn("printf hello; sleep 0.05; printf world", j->fds[1]);
            close(j->fds[1]);
            j->done = 2;
            struct mk_loop_child *ch = NULL;
            if (j->pid > 0) {
                ch = api->child_watch(j->pid, evloop_pipe_child_cb, j);
            }
            if (ch && api->fd_watch(j->fds[0], MK_LOOP_READ, evloop_pipe_cb, j)) {
                return MK_SUSPENDED;
            }
            if (ch) {
                api->child_unwatch(ch); /* reaped quietly; the job is answered below */
            }
            close(j->fds[0]);
        }
    }
    else if (len == 6 && memcmp(route, "/batch", 6) == 0) {
        int a[2], b[2];
        if (pipe2(a, O_CLOEXEC | O_NONBLOCK) == 0 && pipe2(b, O_CLOEXEC | O_NONBLOCK) == 0) {
            /* Both readable before the next wait: their events share a batch. */
            ssize_t w1 = write(a[1], "x", 1), w2 = write(b[1], "y", 1);
            (void) w1;
            (void) w2;
            close(a[1]);
            close(b[1]);
            j->fds[0] = a[0];
            j->fds[1] = b[0];
            j->watch[0] = api->fd_watch(a[0], MK_LOOP_READ, evloop_batch_cb, j);
            j->watch[1] = api->fd_watch(b[0], MK_LOOP_READ, evloop_batch_cb, j);
            if (j->watch[0] && j->watch[1]) {
                /* The reply is written by evloop_timer_cb: give it the count. */
                return MK_SUSPENDED;
            }
        }
    }
    else if (len == 6 && memcmp(route, "/leave", 6) == 0) {
        int p[2];
        struct mk_loop_timer *armed = api->timer_new(evloop_noop_timer, NULL);
        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0 &&
            api->timer_start(3600 * 1000, 0, evloop_noop_timer, NULL) && armed &&
            api->timer_arm(armed, 3600 * 1000) == MK_OK &&
            api->timer_new(evloop_noop_timer, NULL) &&
            api->fd_watch(p[0], MK_LOOP_READ, evloop_noop_fd, NULL)) {
            snprintf(j->reply, sizeof(j->reply), "left behind\n");
            evloop_finish(j);
            return MK_SUSPENDED;
        }
    }
    snprintf(j->reply, sizeof(j->reply), "not started: %s\n", strerror(errno));
    evloop_finish(j);
    return MK_SUSPENDED;
}

static int evloop_content(struct mk_request *r)
{
    size_t len;
    const char *path = api->path(r, &len);

    if (len < 5 || memcmp(path, "/loop", 5) != 0) {
        return MK_DECLINED;
    }
    if (len == 13 && memcmp(path + 5, "/refused", 8) == 0) {
        struct job *j = calloc(1, sizeof(*j));
        if (!j) {
            return 503;
        }
        int rc = api->task(r, evloop_task_work, evloop_reply, j);
        if (rc != MK_SUSPENDED) {
            free(j);
            return 503;
        }
        return MK_SUSPENDED;
    }
    return evloop_start(r, path + 5, len - 5);
}

static int evloop_init(const struct mk_api *a, const char *conf_dir)
{
    (void) conf_dir;
    api = a;
    refused_in_init = evloop_all_refused();
    return MK_OK;
}

MK_EXPORT const struct mk_plugin mk_plugin = {
    MK_PLUGIN_ABI_INIT,  .name = "evloop",
    .version = "1.0",    .description = "tests the worker event loop API",
    .init = evloop_init, .content = evloop_content,
};
