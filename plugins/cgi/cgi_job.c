/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * cgi_job.c: one running script, the cgi backend of the gateway job
 * (plugins/gateway/gw_job.h), which does the request's side: the body
 * kept whole when its length is unknown, its window, the header block and
 * the wait for it, the response stream and its back-pressure, Timeout and
 * the server's cancel. What is the script's is here. It is spawned with
 * posix_spawn in its own directory and its own process group (at most
 * MaxScripts at once, in the whole server), with three non-blocking pipes
 * watched on the request's worker:
 *   stdin   the request body: written at once while the pipe takes it,
 *           else kept in a buffer of at most CGI_WINDOW bytes (the job's
 *           window then holds the client back) until the pipe drains;
 *   stdout  the header block, read straight into the job's head buffer,
 *           then the body, read straight into pieces of the client's queue
 *           (api->stream_buffer); the job stops the reads while the queue
 *           is at its mark, so the script blocks in write() and memory
 *           stays bounded;
 *   stderr  logged line by line (gw_log.c: the site's error log while the
 *           request is at hand).
 * A script given up (the client went away, a timeout, the server's cancel:
 * drop) gets SIGTERM to its group at once and, KillGrace later, SIGKILL; a
 * script whose header block was bad is stopped so when its request ends.
 * Every child is reaped (api->child_watch); a job is freed once its child
 * was reaped and its request is over, whichever comes last.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgi.h"

struct cgi_job {
    struct mk_gw_job job; /* first: the gateway job */
    struct cgi_self *self;
    const struct cgi_conf *conf;
    const char *interpreter; /* NULL: run the script itself */
    pid_t pid;
    struct mk_loop_child *child;
    int in_fd, out_fd, err_fd;
    struct mk_loop_fd *in_w, *out_w, *err_w;
    struct mk_loop_timer *kill_timer; /* SIGKILL, KillGrace after SIGTERM */
    bool reaped, killed, out_paused;
    char *in_buf; /* body bytes waiting for stdin */
    size_t in_len, in_off;
};

#define CGI_HEAD_BUF (MK_GW_HEAD_MAX + 16384)
#define CGI_READ 16384

static void cgi_out_cb(struct mk_loop_fd *h, int fd, uint32_t ready, void *arg);

static struct cgi_job *cgi_of(struct mk_gw_job *j)
{
    return (struct cgi_job *) j;
}

static void cgi_close(int *fd, struct mk_loop_fd **w)
{
    if (*w) {
        cgi_api->fd_unwatch(*w);
        *w = NULL;
    }
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* ---- stderr -------------------------------------------------------------- */

/* Read what stderr holds, into the log (the site's while the job's request is at hand). */
static void cgi_err_read(struct cgi_job *c)
{
    char buf[4096];
    for (;;) {
        ssize_t n = read(c->err_fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            if (n == 0 || errno != EAGAIN) {
                /* the last line ends; held while the request is suspended */
                mk_gw_log_feed(cgi_api, &c->job.log, c->job.r, "\n", 1);
                cgi_close(&c->err_fd, &c->err_w);
            }
            return;
        }
        mk_gw_log_feed(cgi_api, &c->job.log, c->job.r, buf, (size_t) n);
    }
}

static void cgi_err_cb(struct mk_loop_fd *h, int fd, uint32_t ready, void *arg)
{
    (void) h;
    (void) fd;
    (void) ready;
    cgi_err_read(arg);
}

/* ---- the process ----------------------------------------------------------- */

static void cgi_kill_cb(struct mk_loop_timer *t, void *arg)
{
    struct cgi_job *c = arg;
    (void) t;
    c->kill_timer = NULL;
    if (!c->reaped) {
        kill(-c->pid, SIGKILL);
    }
}

/* Give the script up: SIGTERM to its group, SIGKILL KillGrace later. */
static void cgi_kill(struct cgi_job *c)
{
    cgi_close(&c->in_fd, &c->in_w);
    if (c->reaped || c->killed) {
        return;
    }
    c->killed = true;
    atomic_fetch_add_explicit(&c->self->killed, 1, memory_order_relaxed);
    kill(-c->pid, SIGTERM);
    c->kill_timer = cgi_api->timer_start((uint32_t) c->conf->kill_grace_ms, 0, cgi_kill_cb, c);
    if (!c->kill_timer) {
        kill(-c->pid, SIGKILL);
    }
}

/* Whether c may go: its child was reaped (what stderr still holds is read first). */
static bool cgi_may_free(struct cgi_job *c)
{
    if (!c->reaped) {
        return false;
    }
    if (c->err_fd >= 0) {
        cgi_err_read(c);
    }
    return true;
}

static void cgi_child_cb(pid_t pid, int status, void *arg)
{
    struct cgi_job *c = arg;
    (void) pid;
    (void) status;
    c->child = NULL;
    c->reaped = true;
    atomic_fetch_sub_explicit(&c->self->running, 1, memory_order_relaxed);
    if (c->err_fd >= 0) {
        cgi_err_read(c);
    }
    if (c->job.state == MK_GW_OVER && cgi_may_free(c)) {
        mk_gw_job_free(&c->job);
    }
}

/* ---- the response ------------------------------------------------------- */

static void cgi_out_pause(struct cgi_job *c, bool pause)
{
    if (c->out_w && c->out_paused != pause) {
        cgi_api->fd_modify(c->out_w, pause ? 0 : MK_LOOP_READ);
        c->out_paused = pause;
    }
}

/* stdout before the head is complete: into the job's head buffer. */
static void cgi_out_head(struct cgi_job *c)
{
    size_t room;
    char *p = mk_gw_job_head_room(&c->job, &room);
    if (!p) {
        return; /* memory short: the job answers 500 */
    }
    ssize_t n = read(c->out_fd, p, room);
    if (n < 0) {
        if (errno != EAGAIN && errno != EINTR) {
            mk_gw_job_fail(&c->job, 502);
        }
        return;
    }
    if (n == 0) {
        cgi_close(&c->out_fd, &c->out_w); /* EOF: whatever came is all there is */
        mk_gw_job_end(&c->job);
        return;
    }
    mk_gw_job_head_more(&c->job, (size_t) n);
}

/*
 * stdout while streaming: one read, one write into the client's queue. The
 * read goes straight into a piece of the queue (api->stream_buffer), which
 * takes it without a copy; into a buffer of its own on an older server.
 */
static void cgi_out_body(struct cgi_job *c)
{
    char own[CGI_READ];
    char *piece =
        MK_API_HAS(cgi_api, stream_buffer) ? cgi_api->stream_buffer(c->job.r, CGI_READ) : NULL;
    ssize_t n = read(c->out_fd, piece ? piece : own, CGI_READ);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) {
            return; /* the piece waits for the next read (or the end of the request) */
        }
        n = 0;
    }
    if (n == 0 && piece) {
        cgi_api->stream_commit(c->job.r, 0); /* unused: released */
    }
    if (n == 0) {
        cgi_close(&c->out_fd, &c->out_w);
        if (c->err_fd >= 0) {
            cgi_err_read(c); /* stdout ended: what stderr holds goes to the site's log */
        }
        mk_gw_job_end(&c->job);
        return;
    }
    int rc = mk_gw_job_out(&c->job, piece ? piece : own, (size_t) n, piece != NULL);
    if (rc == MK_ERR || rc == MK_GW_GONE) {
        mk_gw_job_over(&c->job, false);
    }
}

static void cgi_out_cb(struct mk_loop_fd *h, int fd, uint32_t ready, void *arg)
{
    struct cgi_job *c = arg;
    (void) h;
    (void) fd;
    (void) ready;
    if (c->job.state == MK_GW_STREAM) {
        cgi_out_body(c);
    }
    else if (!c->job.head_ready && !c->job.fail) {
        cgi_out_head(c);
    }
}

/* ---- the request body ------------------------------------------------------ */

/* Write what the buffer holds to stdin; MK_OK when it is empty. */
static int cgi_in_drain(struct cgi_job *c)
{
    while (c->in_off < c->in_len) {
        ssize_t n = write(c->in_fd, c->in_buf + c->in_off, c->in_len - c->in_off);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno == EAGAIN) {
            return MK_AGAIN;
        }
        if (n < 0) {
            /* The script closed its stdin: the rest of the body is dropped. */
            cgi_close(&c->in_fd, &c->in_w);
            break;
        }
        c->in_off += (size_t) n;
    }
    c->in_off = c->in_len = 0;
    return MK_OK;
}

static void cgi_in_cb(struct mk_loop_fd *h, int fd, uint32_t ready, void *arg);

/* stdin is full: be told when it takes more. */
static void cgi_in_wait(struct cgi_job *c)
{
    if (!c->in_w) {
        c->in_w = cgi_api->fd_watch(c->in_fd, MK_LOOP_WRITE, cgi_in_cb, c);
    }
    else {
        cgi_api->fd_modify(c->in_w, MK_LOOP_WRITE);
    }
}

/*
 * Give the script its spooled body: the window's worth at a time through
 * in_buf, the rest when stdin is writable again; stdin closes at the end.
 */
static void cgi_spool_feed(struct cgi_job *c)
{
    while (c->in_fd >= 0) {
        if (c->in_len == 0) {
            if (!c->in_buf && !(c->in_buf = malloc(CGI_WINDOW + CGI_READ))) {
                cgi_close(&c->in_fd, &c->in_w);
                return;
            }
            ssize_t n = mk_gw_spool_read(&c->job.spool, c->in_buf, CGI_WINDOW);
            if (n <= 0) {
                if (n < 0) {
                    cgi_api->log(MK_PLUGIN_LOG_ERROR, "cgi: %s: the spooled body: %s",
                                 c->job.log.name, strerror(errno));
                }
                cgi_close(&c->in_fd, &c->in_w); /* the end of the body */
                return;
            }
            c->in_len = (size_t) n;
            c->in_off = 0;
        }
        if (cgi_in_drain(c) == MK_AGAIN) {
            cgi_in_wait(c);
            return;
        }
    }
}

static void cgi_in_cb(struct mk_loop_fd *h, int fd, uint32_t ready, void *arg)
{
    struct cgi_job *c = arg;
    (void) h;
    (void) fd;
    (void) ready;
    if (cgi_in_drain(c) != MK_OK) {
        return;
    }
    if (c->job.spool.size > 0) {
        cgi_spool_feed(c);
        return;
    }
    if (c->in_w) {
        cgi_api->fd_modify(c->in_w, 0);
    }
    if (c->job.body_done) {
        cgi_close(&c->in_fd, &c->in_w);
    }
    else {
        mk_gw_job_body_drained(&c->job);
    }
}

/* ---- starting a script ------------------------------------------------------ */

struct cgi_env {
    char **v;
    size_t n, cap;
};

static int cgi_env_add(void *arg, const char *name, size_t name_len, const char *value,
                       size_t value_len)
{
    struct cgi_env *e = arg;
    if (memchr(value, '\0', value_len)) {
        return MK_OK; /* a value with a NUL cannot be passed: leave it out */
    }
    if (e->n + 2 > e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 64;
        char **v = realloc(e->v, cap * sizeof(*v));
        if (!v) {
            return MK_ERR;
        }
        e->v = v;
        e->cap = cap;
    }
    char *s = malloc(name_len + 1 + value_len + 1);
    if (!s) {
        return MK_ERR;
    }
    memcpy(s, name, name_len);
    s[name_len] = '=';
    memcpy(s + name_len + 1, value, value_len);
    s[name_len + 1 + value_len] = '\0';
    e->v[e->n++] = s;
    e->v[e->n] = NULL;
    return MK_OK;
}

static void cgi_env_free(struct cgi_env *e)
{
    for (size_t i = 0; i < e->n; i++) {
        free(e->v[i]);
    }
    free(e->v);
}

/* The three pipes: [0] the parent's end, [1] the child's, per stream. */
static int cgi_pipes(int in[2], int out[2], int err[2])
{
    in[0] = in[1] = out[0] = out[1] = err[0] = err[1] = -1;
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
        return MK_ERR;
    }
    /* pipe2 gives [0] read, [1] write: stdin's parent end is the write end. */
    int t = in[0];
    in[0] = in[1];
    in[1] = t;
    for (int i = 0; i < 2; i++) {
        fcntl(i == 0 ? in[0] : out[0], F_SETFL, O_NONBLOCK);
    }
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    return MK_OK;
}

static void cgi_pipes_close(int in[2], int out[2], int err[2])
{
    int *all[] = {in, out, err};
    for (int i = 0; i < 3; i++) {
        for (int k = 0; k < 2; k++) {
            if (all[i][k] >= 0) {
                close(all[i][k]);
            }
        }
    }
}

/*
 * posix_spawn the script `filename` (run by `interpreter`, when not NULL): its own process group,
 * the script's directory as working directory, default signal dispositions and an empty mask (the
 * server blocks and ignores some), the pipes as 0, 1 and 2.
 */
static int cgi_spawn(const char *filename, const char *interpreter, char *const envp[], int in,
                     int out, int err, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, deflt;
    char dir[4096];

    const char *slash = strrchr(filename, '/');
    size_t dlen = slash && slash != filename ? (size_t) (slash - filename) : 1;
    if (dlen >= sizeof(dir)) {
        return ENAMETOOLONG;
    }
    memcpy(dir, filename, dlen);
    dir[dlen] = '\0';
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in, STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, err, STDERR_FILENO);
    posix_spawn_file_actions_addchdir_np(&fa, dir);
    posix_spawnattr_init(&at);
    sigemptyset(&none);
    sigfillset(&deflt);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &deflt);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
    char *argv[3];
    const char *prog = interpreter ? interpreter : filename;
    argv[0] = (char *) prog;
    argv[1] = interpreter ? (char *) filename : NULL;
    argv[2] = NULL;
    int rc = posix_spawn(pid, prog, &fa, &at, argv, envp);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

/* Start the process of c with its pipes and watches: MK_OK or MK_ERR (logged). */
static int cgi_job_run(struct cgi_job *c, struct mk_request *r)
{
    struct cgi_env env = {0};
    int in[2], out[2], err[2];

    if (mk_gw_params(cgi_api, r, &c->job.script, cgi_env_add, &env) != MK_OK ||
        cgi_env_add(&env, "PATH", 4, "/usr/local/bin:/usr/bin:/bin", 28) != MK_OK) {
        cgi_env_free(&env);
        return MK_ERR;
    }
    if (cgi_pipes(in, out, err) != MK_OK) {
        cgi_api->log(MK_PLUGIN_LOG_ERROR, "cgi: %s: pipe: %s", c->job.log.name, strerror(errno));
        cgi_pipes_close(in, out, err);
        cgi_env_free(&env);
        return MK_ERR;
    }
    int rc =
        cgi_spawn(c->job.script.filename, c->interpreter, env.v, in[1], out[1], err[1], &c->pid);
    cgi_env_free(&env);
    close(in[1]);
    close(out[1]);
    close(err[1]);
    c->in_fd = in[0];
    c->out_fd = out[0];
    c->err_fd = err[0];
    if (rc != 0) {
        cgi_api->log(MK_PLUGIN_LOG_ERROR, "cgi: %s: cannot run: %s", c->job.script.filename,
                     strerror(rc));
        return MK_ERR;
    }
    atomic_fetch_add_explicit(&c->self->spawned, 1, memory_order_relaxed);
    if (!(c->child = cgi_api->child_watch(c->pid, cgi_child_cb, c))) {
        /* Not watched: it cannot be reaped on this loop, so do not let it run. */
        kill(-c->pid, SIGKILL);
        return MK_ERR;
    }
    c->out_w = cgi_api->fd_watch(c->out_fd, MK_LOOP_READ, cgi_out_cb, c);
    c->err_w = cgi_api->fd_watch(c->err_fd, MK_LOOP_READ, cgi_err_cb, c);
    if (!c->out_w || !c->err_w) {
        return MK_ERR;
    }
    return MK_OK;
}

/* ---- the backend table (gw_job.h) -------------------------------------------- */

/* A place among MaxScripts, in the whole server; 503 with Retry-After past it. */
static int cgi_acquire(struct mk_gw_job *j, struct mk_request *r)
{
    struct cgi_job *c = cgi_of(j);
    if (atomic_fetch_add_explicit(&c->self->running, 1, memory_order_relaxed) >=
        c->conf->max_scripts) {
        atomic_fetch_sub_explicit(&c->self->running, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&c->self->refused, 1, memory_order_relaxed);
        cgi_api->add_header(r, "Retry-After", "1");
        return 503;
    }
    return MK_OK;
}

static int cgi_begin(struct mk_gw_job *j, struct mk_request *r)
{
    struct cgi_job *c = cgi_of(j);
    c->reaped = false;
    j->start_ms = cgi_api->now_ms(); /* the upstream time is the script's */
    if (cgi_job_run(c, r) != MK_OK) {
        if (!c->child) {
            c->reaped = true; /* never started, or killed unwatched */
            atomic_fetch_sub_explicit(&c->self->running, 1, memory_order_relaxed);
        }
        return 500;
    }
    return MK_OK;
}

static int cgi_body(struct mk_gw_job *j, const char *data, size_t len)
{
    struct cgi_job *c = cgi_of(j);
    if (c->in_fd < 0) {
        return MK_OK; /* the script does not read its stdin: drop the body */
    }
    if (c->in_len == 0) {
        ssize_t n = write(c->in_fd, data, len);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            cgi_close(&c->in_fd, &c->in_w);
            return MK_OK;
        }
        size_t done = n > 0 ? (size_t) n : 0;
        if (done == len) {
            return MK_OK;
        }
        data += done;
        len -= done;
    }
    /* Keep the rest (at most the window) until stdin drains. */
    if (!c->in_buf && !(c->in_buf = malloc(CGI_WINDOW + CGI_READ))) {
        return 500;
    }
    if (c->in_len + len > CGI_WINDOW + CGI_READ) {
        return 500;
    }
    memcpy(c->in_buf + c->in_len, data, len);
    c->in_len += len;
    cgi_in_wait(c);
    return MK_AGAIN; /* the whole piece is kept until stdin took it */
}

static int cgi_body_end(struct mk_gw_job *j, struct mk_request *r)
{
    struct cgi_job *c = cgi_of(j);

    (void) r; /* a CGI script's stdin has no trailers */
    if (j->spooled) {
        cgi_spool_feed(c);
    }
    else if (c->in_len == 0) {
        cgi_close(&c->in_fd, &c->in_w); /* else once the buffer drains */
    }
    return MK_OK;
}

static void cgi_want(struct mk_gw_job *j)
{
    cgi_out_pause(cgi_of(j), j->paused);
}

static int cgi_head(struct mk_gw_job *j, struct mk_request *r)
{
    int rc = mk_gw_head_apply(cgi_api, r, &j->h, j->nph);
    if (rc == MK_DECLINED) {
        /* A local redirect (RFC 3875 6.2.2): the script's body is discarded. */
        size_t len = j->h.location.len;
        char *loc = cgi_api->alloc(r, len + 1);
        if (!loc) {
            return 500;
        }
        memcpy(loc, j->h.location.p, len);
        loc[len] = '\0';
        return cgi_local_redirect(r, loc);
    }
    return rc == MK_ERR ? MK_ERR : MK_AGAIN;
}

/* A script given up (timeout, the request gone) is killed now; one whose head was bad, at its end.
 */
static void cgi_drop(struct mk_gw_job *j, int status)
{
    if (status == 504 || status == 0) {
        cgi_kill(cgi_of(j));
    }
}

static bool cgi_over(struct mk_gw_job *j, bool done)
{
    struct cgi_job *c = cgi_of(j);
    if (!done) {
        cgi_close(&c->out_fd, &c->out_w);
        cgi_kill(c); /* the request ended before the script's output did */
    }
    return cgi_may_free(c);
}

static void cgi_release(struct mk_gw_job *j)
{
    struct cgi_job *c = cgi_of(j);
    if (!c->reaped) {
        kill(-c->pid, SIGKILL); /* the worker exits: the child cannot be reaped any more */
    }
    if (c->kill_timer) {
        cgi_api->timer_stop(c->kill_timer);
        c->kill_timer = NULL;
    }
    cgi_close(&c->in_fd, &c->in_w);
    cgi_close(&c->out_fd, &c->out_w);
    cgi_close(&c->err_fd, &c->err_w);
    if (c->child) {
        cgi_api->child_unwatch(c->child);
        c->child = NULL;
    }
    free(c->in_buf);
    c->in_buf = NULL;
}

static const struct mk_gw_backend cgi_backend = {
    .who = "cgi",
    .size = sizeof(struct cgi_job),
    .window = CGI_WINDOW,
    .head_cap = CGI_HEAD_BUF,
    .spill_cap = CGI_READ,
    .timeout = MK_GW_TIMEOUT_HEAD,
    .acquire = cgi_acquire,
    .begin = cgi_begin,
    .body = cgi_body,
    .body_end = cgi_body_end,
    .want = cgi_want,
    .head = cgi_head,
    .drop = cgi_drop,
    .over = cgi_over,
    .release = cgi_release,
};

int cgi_job_start(struct mk_request *r, const struct cgi_target *t, const struct cgi_conf *conf,
                  struct cgi_self *self)
{
    struct mk_gw_job *j = mk_gw_job_new(&cgi_backend, cgi_api, r, &t->gw, &self->gw);
    if (!j) {
        return 500;
    }
    struct cgi_job *c = cgi_of(j);
    c->self = self;
    c->conf = conf;
    c->interpreter = t->interpreter;
    c->in_fd = c->out_fd = c->err_fd = -1;
    c->reaped = true; /* no process yet */
    j->timeout_ms = conf->timeout_ms;
    j->nph = t->nph;
    return mk_gw_job_start(j, r);
}

void cgi_job_worker_exit(void)
{
    mk_gw_job_worker_exit(&cgi_backend);
}
