/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * cgi_job.c: one running script. The script is spawned with posix_spawn in
 * its own directory and its own process group, with three non-blocking
 * pipes watched on the request's worker:
 *   stdin   the request body, streamed (api->body_stream) through a buffer
 *           of at most CGI_WINDOW bytes: when the script does not read, the
 *           buffer fills, the server stops reading the client, and TCP
 *           holds the client back;
 *   stdout  first the header block (the request waits suspended, or its
 *           body is still streaming), then the body, streamed to the client
 *           (api->stream_write); when the client's queue reaches its
 *           high-water mark the pipe is no longer read until it drains, so
 *           the script blocks in write() and memory stays bounded;
 *   stderr  logged line by line (api->log, with the script's name).
 * A script with no header block within Timeout gets 504, a malformed one
 * 502. When the request ends before the script's output did (the client
 * went away, a timeout, the server's own Timeout while the request waits
 * for the header block: cgi_cancel), its process group gets SIGTERM at
 * once and, KillGrace later, SIGKILL. Every child is reaped (api->child_watch); a job is freed
 * once its child was reaped and its request is over, whichever comes last.
 * Jobs live on their worker's list, so that worker_exit releases them.
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

enum cgi_state {
    CGI_SPOOL,    /* a body of unknown length is kept whole before the script starts */
    CGI_BODY,     /* the request body streams to stdin; the head may be read meanwhile */
    CGI_HEAD,     /* suspended: waiting for the header block */
    CGI_RESUMING, /* resume() called: the continuation comes */
    CGI_STREAM,   /* the response body streams to the client */
    CGI_OVER,     /* the request is over for this job */
};

struct cgi_job {
    struct cgi_job *next, **pprev; /* the worker's list */
    struct cgi_self *self;
    uint64_t timeout_ms, kill_grace_ms;
    uint64_t start_ms; /* spawned (api->now_ms), for the upstream_ms note */
    enum cgi_state state;
    struct mk_request *r; /* while the body streams or the response does */
    struct mk_suspended *susp;
    pid_t pid;
    struct mk_loop_child *child;
    int in_fd, out_fd, err_fd;
    struct mk_loop_fd *in_w, *out_w, *err_w;
    struct mk_loop_timer *timer;      /* the header block's Timeout */
    struct mk_loop_timer *kill_timer; /* SIGKILL, KillGrace after SIGTERM */
    int fail;                    /* status to answer instead of the script (502, 504) */
    bool nph, head_ready, body_done, reaped, killed, out_paused;
    bool orphan; /* its worker exited while its continuation was pending */
    /* inside stream_write(): proceed() calls are noted, not acted on */
    bool in_write, drained, gone;
    size_t owed;  /* body bytes kept (MK_AGAIN), given back once the buffer drains */
    char *in_buf; /* body bytes waiting for stdin */
    size_t in_len, in_off;
    char *head; /* stdout until the header block is complete */
    size_t head_len;
    struct mk_gw_head h;
    struct mk_gw_log log; /* stderr, and the script's name for the logs */
    /* a body of unknown length (chunked, HTTP/2), kept whole first */
    struct mk_gw_spool spool;
    struct cgi_target target; /* while spooling: the script to start then */
    const struct cgi_conf *conf;
    char content_length[24];
};

#define CGI_HEAD_BUF (MK_GW_HEAD_MAX + 16384)
#define CGI_READ 16384

/* The jobs of this worker thread, for worker_exit. */
static __thread struct cgi_job *cgi_jobs;

static void cgi_out_cb(struct mk_loop_fd *h, int fd, uint32_t ready, void *arg);
static void cgi_job_maybe_free(struct cgi_job *j);

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

static void cgi_timer_stop(struct cgi_job *j)
{
    if (j->timer) {
        cgi_api->timer_stop(j->timer);
        j->timer = NULL;
    }
}

/* ---- stderr -------------------------------------------------------------- */

/* Read what stderr holds, into the log (the site's while j->r is set). */
static void cgi_err_read(struct cgi_job *j)
{
    char buf[4096];
    for (;;) {
        ssize_t n = read(j->err_fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            if (n == 0 || errno != EAGAIN) {
                /* the last line ends; held while the request is suspended */
                mk_gw_log_feed(cgi_api, &j->log, j->r, "\n", 1);
                cgi_close(&j->err_fd, &j->err_w);
            }
            return;
        }
        mk_gw_log_feed(cgi_api, &j->log, j->r, buf, (size_t) n);
    }
}

/* stdout ended while the request is still here: what stderr holds goes to its site's log. */
static void cgi_err_drain(struct cgi_job *j)
{
    if (j->err_fd >= 0) {
        cgi_err_read(j);
    }
    mk_gw_log_flush(cgi_api, &j->log, j->r);
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
    struct cgi_job *j = arg;
    (void) t;
    j->kill_timer = NULL;
    if (!j->reaped) {
        kill(-j->pid, SIGKILL);
    }
}

/*
 * Give the script up: SIGTERM to its group, SIGKILL KillGrace later. The
 * kill timer is a timer of its own: what follows a kill (the 504 of a
 * Timeout, a header block ending) stops the header block's timer, never
 * this one.
 */
static void cgi_kill(struct cgi_job *j)
{
    cgi_close(&j->in_fd, &j->in_w);
    if (j->reaped || j->killed) {
        return;
    }
    j->killed = true;
    atomic_fetch_add_explicit(&j->self->killed, 1, memory_order_relaxed);
    kill(-j->pid, SIGTERM);
    cgi_timer_stop(j);
    j->kill_timer = cgi_api->timer_start((uint32_t) j->kill_grace_ms, 0, cgi_kill_cb, j);
    if (!j->kill_timer) {
        kill(-j->pid, SIGKILL);
    }
}

static void cgi_child_cb(pid_t pid, int status, void *arg)
{
    struct cgi_job *j = arg;
    (void) pid;
    (void) status;
    j->child = NULL;
    j->reaped = true;
    atomic_fetch_sub_explicit(&j->self->running, 1, memory_order_relaxed);
    if (j->err_fd >= 0) {
        cgi_err_read(j);
    }
    cgi_job_maybe_free(j);
}

/* The request is over for this job: stop the script if it still runs. */
static void cgi_request_over(struct cgi_job *j)
{
    j->state = CGI_OVER;
    j->r = NULL;
    cgi_close(&j->out_fd, &j->out_w);
    cgi_kill(j);
    cgi_job_maybe_free(j);
}

/* Release what j holds on its worker (timers, pipes, watches) and unlink it. */
static void cgi_job_release(struct cgi_job *j)
{
    cgi_timer_stop(j);
    if (j->kill_timer) {
        cgi_api->timer_stop(j->kill_timer);
        j->kill_timer = NULL;
    }
    cgi_close(&j->in_fd, &j->in_w);
    cgi_close(&j->out_fd, &j->out_w);
    cgi_close(&j->err_fd, &j->err_w);
    if (j->child) {
        cgi_api->child_unwatch(j->child);
        j->child = NULL;
    }
    if (j->next) {
        j->next->pprev = j->pprev;
    }
    *j->pprev = j->next;
}

static void cgi_job_free(struct cgi_job *j)
{
    mk_gw_log_flush(cgi_api, &j->log, NULL); /* the request is over: the server log */
    cgi_job_release(j);
    free(j->in_buf);
    free(j->head);
    mk_gw_spool_free(&j->spool);
    free(j);
}

static void cgi_job_maybe_free(struct cgi_job *j)
{
    if (j->reaped && j->state == CGI_OVER) {
        if (j->err_fd >= 0) {
            cgi_err_read(j);
        }
        cgi_job_free(j);
    }
}

/* ---- the response ------------------------------------------------------- */

static void cgi_out_pause(struct cgi_job *j, bool pause)
{
    if (j->out_w && j->out_paused != pause) {
        cgi_api->fd_modify(j->out_w, pause ? 0 : MK_LOOP_READ);
        j->out_paused = pause;
    }
}

#define CGI_GONE (-100)

/*
 * api->stream_write() for j, or api->stream_commit() of the first len bytes
 * of its stream buffer when data is NULL. The server may write at once
 * and, inside the call, run proceed(r) (the queue drained) or
 * proceed(NULL) (the client is gone): cgi_proceed only notes them then.
 * MK_OK, MK_AGAIN (at the mark and not drained meanwhile), MK_ERR, or
 * CGI_GONE (the caller ends the job's request with cgi_request_over).
 */
static int cgi_stream_write(struct cgi_job *j, const void *data, size_t len)
{
    j->in_write = true;
    j->drained = false;
    int rc = data ? cgi_api->stream_write(j->r, data, len) : cgi_api->stream_commit(j->r, len);
    j->in_write = false;
    if (j->gone) {
        j->r = NULL;
        return CGI_GONE;
    }
    return rc == MK_AGAIN && j->drained ? MK_OK : rc;
}

static void cgi_proceed(struct mk_request *r, void *arg)
{
    struct cgi_job *j = arg;
    if (j->in_write) {
        j->gone |= !r;
        j->drained |= r != NULL;
        return;
    }
    if (!r) {
        cgi_request_over(j); /* the client went away (or HEAD) */
        return;
    }
    cgi_out_pause(j, false);
}

/*
 * The continuation of the content stage once the header block is in (or
 * failed): the response's status and headers, then the start of the
 * stream. Returns what the content hook would.
 */
static int cgi_begin(struct cgi_job *j, struct mk_request *r)
{
    cgi_timer_stop(j);
    mk_gw_log_feed(cgi_api, &j->log, r, NULL, 0); /* what came while suspended */
    mk_gw_note_upstream(cgi_api, r, j->start_ms); /* the head's time; the end's replaces it */
    if (j->fail) {
        int status = j->fail;
        cgi_request_over(j);
        return status;
    }
    int rc = mk_gw_head_apply(cgi_api, r, &j->h, j->nph);
    if (rc == MK_DECLINED) {
        /* A local redirect (RFC 3875 6.2.2): the script's body is discarded. */
        size_t len = j->h.location.len;
        char *loc = cgi_api->alloc(r, len + 1);
        if (!loc) {
            cgi_request_over(j);
            return 500;
        }
        memcpy(loc, j->h.location.p, len);
        loc[len] = '\0';
        cgi_request_over(j);
        return cgi_local_redirect(r, loc);
    }
    if (rc == MK_ERR) {
        atomic_fetch_add_explicit(&j->self->bad_heads, 1, memory_order_relaxed);
        cgi_request_over(j);
        return 502;
    }
    if (j->out_fd < 0) {
        /* The whole output is in: a body of known length, sent with the
           head in one write. The head buffer becomes the body. */
        size_t len = j->head_len - j->h.head_len;
        memmove(j->head, j->head + j->h.head_len, len);
        cgi_api->set_body_owned(r, j->head, len);
        j->head = NULL;
        j->r = r;
        cgi_err_drain(j);
        j->r = NULL;
        j->state = CGI_OVER;
        cgi_job_maybe_free(j);
        return MK_OK;
    }
    if (cgi_api->stream_start(r, cgi_proceed, j) != MK_OK) {
        cgi_request_over(j);
        return 500;
    }
    j->r = r;
    j->state = CGI_STREAM;
    size_t rest = j->head_len - j->h.head_len;
    int wrc = rest > 0 ? cgi_stream_write(j, j->head + j->h.head_len, rest) : MK_OK;
    free(j->head);
    j->head = NULL;
    if (wrc == MK_ERR || wrc == CGI_GONE) {
        cgi_request_over(j);
        return MK_OK;
    }
    cgi_out_pause(j, wrc == MK_AGAIN);
    return MK_OK;
}

static int cgi_resumed(struct mk_request *r, void *arg)
{
    struct cgi_job *j = arg;
    if (j->orphan) {
        free(j); /* its worker is gone: everything else was released then */
        return r ? 503 : MK_OK;
    }
    j->susp = NULL;
    if (!r) {
        cgi_request_over(j);
        return MK_OK;
    }
    return cgi_begin(j, r);
}

/* The head is in, or failed: answer once the content stage may. */
static void cgi_head_done(struct cgi_job *j, int fail)
{
    if (fail && !j->fail) {
        j->fail = fail;
        if (fail == 502) {
            atomic_fetch_add_explicit(&j->self->bad_heads, 1, memory_order_relaxed);
        }
    }
    j->head_ready = true;
    cgi_timer_stop(j);
    cgi_out_pause(j, true);
    if (j->state == CGI_HEAD) {
        j->state = CGI_RESUMING;
        cgi_api->resume(j->susp, cgi_resumed, j);
    }
}

/* stdout before the head is complete: collect and parse. */
static void cgi_out_head(struct cgi_job *j)
{
    if (!j->head && !(j->head = malloc(CGI_HEAD_BUF))) {
        cgi_head_done(j, 500);
        return;
    }
    ssize_t n = read(j->out_fd, j->head + j->head_len, CGI_HEAD_BUF - j->head_len);
    if (n < 0) {
        if (errno != EAGAIN && errno != EINTR) {
            cgi_head_done(j, 502);
        }
        return;
    }
    j->head_len += (size_t) n;
    int rc = mk_gw_head_parse(j->head, j->head_len, j->nph, &j->h);
    if (n == 0) {
        cgi_close(&j->out_fd, &j->out_w); /* EOF: whatever came is all there is */
    }
    if (rc == MK_OK) {
        cgi_head_done(j, 0);
    }
    else if (rc == MK_ERR || n == 0) {
        cgi_api->log(MK_PLUGIN_LOG_ERROR, "cgi: %s: %s%s", j->log.name,
                     !j->head_len   ? "no output"
                     : rc == MK_ERR ? "malformed header block: "
                                    : "incomplete header block",
                     rc == MK_ERR && j->head_len && j->h.why ? j->h.why : "");
        cgi_head_done(j, 502);
    }
}

/*
 * stdout while streaming: one read, one write into the client's queue. The
 * read goes straight into a piece of the queue (api->stream_buffer), which
 * takes it without a copy; into a buffer of its own on an older server.
 */
static void cgi_out_body(struct cgi_job *j)
{
    char own[CGI_READ];
    char *piece =
        MK_API_HAS(cgi_api, stream_buffer) ? cgi_api->stream_buffer(j->r, CGI_READ) : NULL;
    ssize_t n = read(j->out_fd, piece ? piece : own, CGI_READ);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) {
            return; /* the piece waits for the next read (or the end of the request) */
        }
        n = 0;
    }
    if (n == 0 && piece) {
        cgi_api->stream_commit(j->r, 0); /* unused: released */
    }
    if (n == 0) {
        cgi_close(&j->out_fd, &j->out_w);
        mk_gw_note_upstream(cgi_api, j->r, j->start_ms);
        cgi_err_drain(j);
        cgi_api->stream_end(j->r, NULL);
        j->state = CGI_OVER;
        j->r = NULL;
        cgi_job_maybe_free(j);
        return;
    }
    int rc = cgi_stream_write(j, piece ? NULL : own, (size_t) n);
    if (rc == MK_ERR || rc == CGI_GONE) {
        cgi_request_over(j);
    }
    else if (rc == MK_AGAIN) {
        cgi_out_pause(j, true); /* proceed() reads on */
    }
}

static void cgi_out_cb(struct mk_loop_fd *h, int fd, uint32_t ready, void *arg)
{
    struct cgi_job *j = arg;
    (void) h;
    (void) fd;
    (void) ready;
    if (j->state == CGI_STREAM) {
        cgi_out_body(j);
    }
    else if (!j->head_ready) {
        cgi_out_head(j);
    }
}

static void cgi_timeout_cb(struct mk_loop_timer *t, void *arg)
{
    struct cgi_job *j = arg;
    (void) t;
    j->timer = NULL;
    if (j->head_ready) {
        return;
    }
    if (j->state == CGI_BODY && !j->body_done) {
        /* the body still arrives: Timeout counts from its end (cgi_body_end) */
        j->timer = cgi_api->timer_start((uint32_t) j->timeout_ms, 0, cgi_timeout_cb, j);
        return;
    }
    cgi_api->log(MK_PLUGIN_LOG_ERROR, "cgi: %s: no header block within the Timeout", j->log.name);
    atomic_fetch_add_explicit(&j->self->timeouts, 1, memory_order_relaxed);
    cgi_kill(j);
    cgi_head_done(j, 504);
}

/* ---- the request body ------------------------------------------------------ */

/* Write what the buffer holds to stdin; MK_OK when it is empty. */
static int cgi_in_drain(struct cgi_job *j)
{
    while (j->in_off < j->in_len) {
        ssize_t n = write(j->in_fd, j->in_buf + j->in_off, j->in_len - j->in_off);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno == EAGAIN) {
            return MK_AGAIN;
        }
        if (n < 0) {
            /* The script closed its stdin: the rest of the body is dropped. */
            cgi_close(&j->in_fd, &j->in_w);
            break;
        }
        j->in_off += (size_t) n;
    }
    j->in_off = j->in_len = 0;
    return MK_OK;
}

static void cgi_in_cb(struct mk_loop_fd *h, int fd, uint32_t ready, void *arg);

/*
 * Give the script its spooled body: the window's worth at a time through
 * in_buf, the rest when stdin is writable again; stdin closes at the end.
 */
static void cgi_spool_feed(struct cgi_job *j)
{
    while (j->in_fd >= 0) {
        if (j->in_len == 0) {
            if (!j->in_buf && !(j->in_buf = malloc(CGI_WINDOW + CGI_READ))) {
                cgi_close(&j->in_fd, &j->in_w);
                return;
            }
            ssize_t n = mk_gw_spool_read(&j->spool, j->in_buf, CGI_WINDOW);
            if (n <= 0) {
                if (n < 0) {
                    cgi_api->log(MK_PLUGIN_LOG_ERROR, "cgi: %s: the spooled body: %s", j->log.name,
                                 strerror(errno));
                }
                cgi_close(&j->in_fd, &j->in_w); /* the end of the body */
                return;
            }
            j->in_len = (size_t) n;
            j->in_off = 0;
        }
        if (cgi_in_drain(j) == MK_AGAIN) {
            if (!j->in_w) {
                j->in_w = cgi_api->fd_watch(j->in_fd, MK_LOOP_WRITE, cgi_in_cb, j);
            }
            else {
                cgi_api->fd_modify(j->in_w, MK_LOOP_WRITE);
            }
            return;
        }
    }
}

static void cgi_in_cb(struct mk_loop_fd *h, int fd, uint32_t ready, void *arg)
{
    struct cgi_job *j = arg;
    (void) h;
    (void) fd;
    (void) ready;
    if (cgi_in_drain(j) != MK_OK) {
        return;
    }
    if (j->spool.size > 0) {
        cgi_spool_feed(j);
        return;
    }
    if (j->in_w) {
        cgi_api->fd_modify(j->in_w, 0);
    }
    if (j->body_done) {
        cgi_close(&j->in_fd, &j->in_w);
    }
    else if (j->owed > 0 && j->r) {
        size_t owed = j->owed;
        j->owed = 0;
        cgi_api->body_consume(j->r, owed);
    }
}

/*
 * The server gave the suspended request up (its own Timeout, the client
 * gone, the server stopping): stop the script now, not at this plugin's
 * Timeout, so its MaxScripts place comes back within KillGrace. The
 * server's Timeout waiting for a header block is a gateway timeout: 504.
 */
static int cgi_cancel(struct mk_suspended *s, int why, void *arg)
{
    struct cgi_job *j = arg;

    (void) s;
    if (why == MK_CANCEL_TIMEOUT) {
        cgi_api->log(MK_PLUGIN_LOG_ERROR, "cgi: %s: no header block within the server's Timeout",
                     j->log.name);
        atomic_fetch_add_explicit(&j->self->timeouts, 1, memory_order_relaxed);
    }
    cgi_kill(j);
    j->state = CGI_RESUMING;
    cgi_api->resume(j->susp, cgi_resumed, j); /* with r NULL: cgi_request_over */
    return 504;
}

/* What the content stage returns once the body is in: answer, or wait for the head. */
static int cgi_body_end(struct cgi_job *j, struct mk_request *r)
{
    j->body_done = true;
    if (j->timer && !j->head_ready && !j->killed) {
        /* Timeout counts from the end of the body: an upload takes its time */
        cgi_timer_stop(j);
        j->timer = cgi_api->timer_start((uint32_t) j->timeout_ms, 0, cgi_timeout_cb, j);
    }
    if (j->in_len == 0) {
        cgi_close(&j->in_fd, &j->in_w);
    }
    if (j->head_ready) {
        return cgi_begin(j, r);
    }
    if (!(j->susp = cgi_api->suspend(r))) {
        cgi_request_over(j);
        return 500;
    }
    if (MK_API_HAS(cgi_api, suspend_cancel)) {
        cgi_api->suspend_cancel(j->susp, cgi_cancel, j);
    }
    j->state = CGI_HEAD;
    j->r = NULL;
    return MK_SUSPENDED;
}

static int cgi_body_cb(struct mk_request *r, int event, const char *data, size_t len, void *arg)
{
    struct cgi_job *j = arg;

    if (event == MK_BODY_ABORT) {
        cgi_request_over(j);
        return MK_OK;
    }
    if (event == MK_BODY_END) {
        return cgi_body_end(j, r);
    }
    if (j->fail) {
        int status = j->fail;
        cgi_request_over(j);
        return status; /* the script failed or timed out: answer now */
    }
    if (j->in_fd < 0) {
        return MK_OK; /* the script does not read its stdin: drop the body */
    }
    size_t piece = len;
    if (j->in_len == 0) {
        ssize_t n = write(j->in_fd, data, len);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            cgi_close(&j->in_fd, &j->in_w);
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
    if (!j->in_buf && !(j->in_buf = malloc(CGI_WINDOW + CGI_READ))) {
        cgi_request_over(j);
        return 500;
    }
    if (j->in_len + len > CGI_WINDOW + CGI_READ) {
        cgi_request_over(j);
        return 500;
    }
    memcpy(j->in_buf + j->in_len, data, len);
    j->in_len += len;
    j->owed += piece; /* the whole piece is kept until body_consume */
    if (!j->in_w) {
        j->in_w = cgi_api->fd_watch(j->in_fd, MK_LOOP_WRITE, cgi_in_cb, j);
    }
    else {
        cgi_api->fd_modify(j->in_w, MK_LOOP_WRITE);
    }
    return MK_AGAIN;
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
 * posix_spawn the script: its own process group, the script's directory
 * as working directory, default signal dispositions and an empty mask
 * (the server blocks and ignores some), the pipes as 0, 1 and 2.
 */
static int cgi_spawn(const struct cgi_target *t, char *const envp[], int in, int out, int err,
                     pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, deflt;
    char dir[4096];

    const char *slash = strrchr(t->gw.filename, '/');
    size_t dlen = slash && slash != t->gw.filename ? (size_t) (slash - t->gw.filename) : 1;
    if (dlen >= sizeof(dir)) {
        return ENAMETOOLONG;
    }
    memcpy(dir, t->gw.filename, dlen);
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
    const char *prog = t->interpreter ? t->interpreter : t->gw.filename;
    argv[0] = (char *) prog;
    argv[1] = t->interpreter ? (char *) t->gw.filename : NULL;
    argv[2] = NULL;
    int rc = posix_spawn(pid, prog, &fa, &at, argv, envp);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

static struct cgi_job *cgi_job_new(const struct cgi_target *t, const struct cgi_conf *conf,
                                   struct cgi_self *self)
{
    struct cgi_job *j = calloc(1, sizeof(*j));
    if (!j) {
        return NULL;
    }
    j->self = self;
    j->timeout_ms = conf->timeout_ms;
    j->kill_grace_ms = conf->kill_grace_ms;
    j->start_ms = cgi_api->now_ms();
    j->nph = t->nph;
    j->in_fd = j->out_fd = j->err_fd = -1;
    mk_gw_log_init(&j->log, "cgi", t->gw.name, t->gw.name_len);
    j->next = cgi_jobs;
    if (cgi_jobs) {
        cgi_jobs->pprev = &j->next;
    }
    j->pprev = &cgi_jobs;
    cgi_jobs = j;
    return j;
}

/* Start the process of j with its pipes and watches: MK_OK or MK_ERR (logged). */
static int cgi_job_run(struct cgi_job *j, struct mk_request *r, const struct cgi_target *t)
{
    struct cgi_env env = {0};
    int in[2], out[2], err[2];

    struct mk_gw_script gw = t->gw;
    if (mk_gw_params(cgi_api, r, &gw, cgi_env_add, &env) != MK_OK ||
        cgi_env_add(&env, "PATH", 4, "/usr/local/bin:/usr/bin:/bin", 28) != MK_OK) {
        cgi_env_free(&env);
        return MK_ERR;
    }
    if (cgi_pipes(in, out, err) != MK_OK) {
        cgi_api->log(MK_PLUGIN_LOG_ERROR, "cgi: %s: pipe: %s", j->log.name, strerror(errno));
        cgi_pipes_close(in, out, err);
        cgi_env_free(&env);
        return MK_ERR;
    }
    int rc = cgi_spawn(t, env.v, in[1], out[1], err[1], &j->pid);
    cgi_env_free(&env);
    close(in[1]);
    close(out[1]);
    close(err[1]);
    j->in_fd = in[0];
    j->out_fd = out[0];
    j->err_fd = err[0];
    if (rc != 0) {
        cgi_api->log(MK_PLUGIN_LOG_ERROR, "cgi: %s: cannot run: %s", t->gw.filename, strerror(rc));
        return MK_ERR;
    }
    atomic_fetch_add_explicit(&j->self->spawned, 1, memory_order_relaxed);
    if (!(j->child = cgi_api->child_watch(j->pid, cgi_child_cb, j))) {
        /* Not watched: it cannot be reaped on this loop, so do not let it run. */
        kill(-j->pid, SIGKILL);
        return MK_ERR;
    }
    j->out_w = cgi_api->fd_watch(j->out_fd, MK_LOOP_READ, cgi_out_cb, j);
    j->err_w = cgi_api->fd_watch(j->err_fd, MK_LOOP_READ, cgi_err_cb, j);
    j->timer = cgi_api->timer_start((uint32_t) j->timeout_ms, 0, cgi_timeout_cb, j);
    if (!j->out_w || !j->err_w || !j->timer) {
        return MK_ERR;
    }
    return MK_OK;
}

/* Whether the request has a body to give the script. */
static bool cgi_has_body(struct mk_request *r)
{
    return mk_gw_has_body(cgi_api, r);
}

/*
 * Start the script of t for r. `j`: the job that spooled r's body (its
 * CONTENT_LENGTH known now), or NULL (the body, if any, streams to the
 * script as it arrives). As cgi_job_start returns.
 */
static int cgi_job_launch(struct mk_request *r, const struct cgi_target *t,
                          const struct cgi_conf *conf, struct cgi_self *self, struct cgi_job *j)
{
    if (atomic_fetch_add_explicit(&self->running, 1, memory_order_relaxed) >= conf->max_scripts) {
        atomic_fetch_sub_explicit(&self->running, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&self->refused, 1, memory_order_relaxed);
        cgi_api->add_header(r, "Retry-After", "1");
        if (j) {
            cgi_request_over(j);
        }
        return 503;
    }
    bool spooled = j != NULL;
    if (!j && !(j = cgi_job_new(t, conf, self))) {
        atomic_fetch_sub_explicit(&self->running, 1, memory_order_relaxed);
        return 500;
    }
    j->reaped = false;
    j->start_ms = cgi_api->now_ms();
    if (cgi_job_run(j, r, t) != MK_OK) {
        if (!j->child) {
            j->reaped = true; /* never started, or killed unwatched */
            atomic_fetch_sub_explicit(&self->running, 1, memory_order_relaxed);
        }
        cgi_request_over(j);
        return 500;
    }
    if (spooled) {
        cgi_spool_feed(j);
        return cgi_body_end(j, r);
    }
    if (cgi_has_body(r)) {
        if (cgi_api->body_stream(r, CGI_WINDOW, cgi_body_cb, j) != MK_OK) {
            cgi_request_over(j);
            return 500;
        }
        j->state = CGI_BODY;
        j->r = r;
        return MK_AGAIN;
    }
    cgi_close(&j->in_fd, &j->in_w);
    return cgi_body_end(j, r);
}

/* A body of unknown length arrives: keep it; start the script at its end. */
static int cgi_spool_cb(struct mk_request *r, int event, const char *data, size_t len, void *arg)
{
    struct cgi_job *j = arg;

    if (event == MK_BODY_ABORT) {
        cgi_request_over(j);
        return MK_OK;
    }
    if (event == MK_BODY_DATA) {
        if (mk_gw_spool_add(&j->spool, data, len) != MK_OK) {
            cgi_api->log(MK_PLUGIN_LOG_ERROR, "cgi: %s: cannot keep the request body: %s",
                         j->log.name, strerror(errno));
            cgi_request_over(j);
            return 500;
        }
        return MK_OK;
    }
    snprintf(j->content_length, sizeof(j->content_length), "%llu",
             (unsigned long long) j->spool.size);
    j->target.gw.content_length = j->content_length;
    j->r = NULL;
    return cgi_job_launch(r, &j->target, j->conf, j->self, j);
}

int cgi_job_start(struct mk_request *r, const struct cgi_target *t, const struct cgi_conf *conf,
                  struct cgi_self *self)
{
    if (!mk_gw_body_unsized(cgi_api, r)) {
        return cgi_job_launch(r, t, conf, self, NULL);
    }
    /* Chunked, or HTTP/2 without content-length: CGI wants CONTENT_LENGTH,
       so the body is kept whole first (as nginx does), then the script runs. */
    struct cgi_job *j = cgi_job_new(t, conf, self);
    if (!j) {
        return 500;
    }
    j->reaped = true; /* no process yet */
    j->target = *t;
    j->conf = conf;
    if (cgi_api->body_stream(r, CGI_WINDOW, cgi_spool_cb, j) != MK_OK) {
        cgi_request_over(j);
        return 500;
    }
    j->state = CGI_SPOOL;
    j->r = r;
    return MK_AGAIN;
}

/* The continuation of a request whose job went with its worker. */
static int cgi_resumed_orphan(struct mk_request *r, void *arg)
{
    (void) arg;
    return r ? 503 : MK_OK;
}

void cgi_job_worker_exit(void)
{
    while (cgi_jobs) {
        struct cgi_job *j = cgi_jobs;
        if (!j->reaped) {
            kill(-j->pid, SIGKILL);
        }
        if (j->state == CGI_HEAD && j->susp) {
            cgi_api->resume(j->susp, cgi_resumed_orphan, NULL); /* every handle resumed once */
        }
        if (j->state == CGI_RESUMING) {
            /* its continuation is still to run (with r NULL, at the worker's
               teardown): release all but j itself, which it frees */
            j->orphan = true;
            free(j->in_buf);
            free(j->head);
            j->in_buf = j->head = NULL;
            cgi_job_release(j);
            continue;
        }
        cgi_job_free(j);
    }
}
