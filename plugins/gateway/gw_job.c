/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * gw_job.c: the request side of a gateway request, shared by the gateway
 * plugins through their backend tables (gw_job.h). The states:
 *
 *   START ─┬─ body of unknown length ─> SPOOL ─ its end ─┐
 *          └──────────────────────────────────────────────┴─> acquire()
 *   acquire() ─ MK_AGAIN ─> QUEUED ─ mk_gw_job_ready ─> RESUMING ─> acquire()
 *             ─ MK_OK ─> begin() ─┬─ a body ─> BODY ─ its end ─┐
 *                                 └─────────────────────────────┴─> body_end()
 *   body_end() ─ head in or failed ─> the response (the continuation's work, at once)
 *              ─ else ─> HEAD (suspended) ─ head in, failed, cancelled ─> RESUMING
 *   the response ─ whole (the backend ended with the head) ─> OVER
 *                ─ else ─> STREAM ─ end, client gone, failure ─> OVER
 *
 * The head may come while the body still streams (BODY): reading then
 * pauses until the body is in and the response can start. A job is freed
 * as soon as its request is over and the backend lets go of it (over(), or
 * mk_gw_job_free later); until then it lives on its worker's list, which
 * is shared by the backends compiled into one object (a built-in server
 * has cgi and fastcgi in one) and sorted out by the job's table.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_job.h"

/* The jobs of this worker thread, for worker_exit. */
static __thread struct mk_gw_job *gw_jobs;
/* The last job freed on this worker, kept for the next of the same backend (one malloc and
   free of the job, the backend's buffers with it, less per request); freed, and no more kept,
   at the worker's exit (mk_gw_job_worker_exit). */
static __thread struct mk_gw_job *gw_spare;
static __thread bool gw_spare_off;
/* Likewise a head buffer (of gw_spare_head_cap bytes) no job holds any more. */
static __thread char *gw_spare_head;
static __thread size_t gw_spare_head_cap;

/* Bodies up to this size that came whole with the head are copied into request memory
   (api->set_body), the head buffer kept for the next job; a larger one becomes the body. */
#define GW_BODY_COPY_MAX 4096

/* Let go of j's head buffer: kept as this worker's spare, or freed. */
static void gw_job_head_drop(struct mk_gw_job *j)
{
    if (j->head && !gw_spare_off && !gw_spare_head) {
        gw_spare_head = j->head;
        gw_spare_head_cap = j->be->head_cap;
    }
    else {
        free(j->head);
    }
    j->head = NULL;
}

static int gw_job_resumed(struct mk_request *r, void *arg);
static int gw_job_run(struct mk_gw_job *j, struct mk_request *r);
static void gw_job_timer_cb(struct mk_loop_timer *t, void *arg);

void mk_gw_job_log(const struct mk_gw_job *j, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    j->api->log(MK_PLUGIN_LOG_ERROR, "%s: %.*s: %s", j->be->who, (int) j->script.name_len,
                j->script.name, msg);
}

static void gw_job_timer_stop(struct mk_gw_job *j)
{
    if (j->timer) {
        j->api->timer_stop(j->timer);
        j->timer = NULL;
    }
}

static void gw_job_count(struct mk_gw_job *j, int status)
{
    if (status == 502) {
        atomic_fetch_add_explicit(&j->stats->bad_gateway, 1, memory_order_relaxed);
    }
    else if (status == 504) {
        atomic_fetch_add_explicit(&j->stats->timeouts, 1, memory_order_relaxed);
    }
}

static void gw_job_unlink(struct mk_gw_job *j)
{
    if (j->next) {
        j->next->pprev = j->pprev;
    }
    *j->pprev = j->next;
}

/* ---- the job's life ---------------------------------------------------------- */

struct mk_gw_job *mk_gw_job_new(const struct mk_gw_backend *be, const struct mk_api *api,
                                struct mk_request *r, const struct mk_gw_script *s,
                                struct mk_gw_stats *stats)
{
    struct mk_gw_job *j = gw_spare;
    if (j && j->be == be) {
        gw_spare = NULL;
    }
    else if (!(j = malloc(be->size))) {
        return NULL;
    }
    memset(j, 0, offsetof(struct mk_gw_job, h)); /* h and log (5 KB) need no zeroes */
    size_t cleared = be->cleared ? be->cleared : be->size;
    memset((char *) j + sizeof(*j), 0, cleared - sizeof(*j));
    j->be = be;
    j->api = api;
    j->stats = stats;
    j->script = *s;
    /* the request's framing fields, looked up once for has_body and mk_gw_job_start */
    size_t cl_len, te_len;
    const char *cl = api->header(r, "Content-Length", &cl_len);
    j->req_cl = cl != NULL;
    j->req_te = !cl && api->header(r, "Transfer-Encoding", &te_len) != NULL;
    j->has_body = mk_gw_has_body_of(cl, cl_len, j->req_te);
    j->start_ms = api->now_ms();
    mk_gw_log_init(&j->log, be->who, s->name, s->name_len);
    j->next = gw_jobs;
    if (gw_jobs) {
        gw_jobs->pprev = &j->next;
    }
    j->pprev = &gw_jobs;
    gw_jobs = j;
    return j;
}

void mk_gw_job_free(struct mk_gw_job *j)
{
    mk_gw_log_flush(j->api, &j->log, NULL); /* the request is over: the server log */
    gw_job_timer_stop(j);
    gw_job_unlink(j);
    j->be->release(j);
    gw_job_head_drop(j);
    free(j->spill);
    mk_gw_spool_free(&j->spool);
    if (gw_spare_off) {
        free(j);
        return;
    }
    free(gw_spare);
    gw_spare = j;
}

void mk_gw_job_over(struct mk_gw_job *j, bool done)
{
    if (j->state == MK_GW_QUEUED) {
        j->be->unqueue(j);
    }
    j->state = MK_GW_OVER;
    j->r = NULL;
    gw_job_timer_stop(j);
    uint64_t ms = (j->ended_ms ? j->ended_ms : j->api->now_ms()) - j->start_ms;
    atomic_fetch_add_explicit(&j->stats->upstream_ms, ms, memory_order_relaxed);
    if (j->be->over(j, done)) {
        mk_gw_job_free(j);
    }
}

/* ---- suspension -------------------------------------------------------------- */

/*
 * The server gave the suspended request up (its own Timeout, the client
 * gone, the server stopping): let go of the backend now, not at its
 * Timeout (drop: its connection, or its script, whose place comes back). A
 * request still waiting for the backend is answered 503 (the backends are
 * busy, not silent), one waiting for its header block 504.
 */
static int gw_job_cancel(struct mk_suspended *s, int why, void *arg)
{
    struct mk_gw_job *j = arg;
    bool queued = j->state == MK_GW_QUEUED;

    (void) s;
    gw_job_timer_stop(j);
    if (queued) {
        j->be->unqueue(j);
        if (why == MK_CANCEL_TIMEOUT) {
            atomic_fetch_add_explicit(&j->stats->queue_timeouts, 1, memory_order_relaxed);
        }
    }
    else if (why == MK_CANCEL_TIMEOUT) {
        mk_gw_job_log(j, j->be->timeout == MK_GW_TIMEOUT_HEAD
                             ? "no header block within the server's Timeout"
                             : "no answer from the backend within the server's Timeout");
        gw_job_count(j, 504);
    }
    j->be->drop(j, why == MK_CANCEL_TIMEOUT && !queued ? 504 : 0);
    j->state = MK_GW_RESUMING;
    j->api->resume(j->susp, gw_job_resumed, j); /* with r NULL: over */
    return queued ? 503 : 504;
}

/* Suspend r for j, to be told when the server gives it up: the handle, or NULL. */
static struct mk_suspended *gw_job_suspend(struct mk_gw_job *j, struct mk_request *r)
{
    struct mk_suspended *s = j->api->suspend(r);

    if (s && MK_API_HAS(j->api, suspend_cancel)) {
        j->api->suspend_cancel(s, gw_job_cancel, j);
    }
    return s;
}

static void gw_job_resume(struct mk_gw_job *j)
{
    j->state = MK_GW_RESUMING;
    j->api->resume(j->susp, gw_job_resumed, j);
}

/* The continuation of a request whose job went with its worker. */
static int gw_job_resumed_orphan(struct mk_request *r, void *arg)
{
    (void) arg;
    return r ? 503 : MK_OK;
}

void mk_gw_job_worker_exit(const struct mk_gw_backend *be)
{
    struct mk_gw_job **pp = &gw_jobs;

    gw_spare_off = true;
    free(gw_spare);
    gw_spare = NULL;
    free(gw_spare_head);
    gw_spare_head = NULL;

    while (*pp) {
        struct mk_gw_job *j = *pp;
        if (j->be != be) {
            pp = &j->next;
            continue;
        }
        if ((j->state == MK_GW_HEAD || j->state == MK_GW_QUEUED) && j->susp) {
            j->api->resume(j->susp, gw_job_resumed_orphan, NULL); /* every handle resumed once */
        }
        if (j->state == MK_GW_RESUMING) {
            /* its continuation is still to run (with r NULL, at the worker's
               teardown): release all but j itself, which it frees */
            j->orphan = true;
            gw_job_timer_stop(j);
            gw_job_unlink(j);
            be->release(j);
            free(j->head);
            free(j->spill);
            mk_gw_spool_free(&j->spool);
            j->head = j->spill = NULL;
            continue;
        }
        mk_gw_job_free(j);
    }
}

/* ---- the response ---------------------------------------------------------- */

int mk_gw_job_interim(struct mk_gw_job *j, int status, const char *fields)
{
    /* HEAD: the handle is held and not cancelled (a cancel moves the state on) */
    struct mk_request *r = j->state == MK_GW_BODY ? j->r : j->state == MK_GW_HEAD ? j->held : NULL;
    if (!r || !MK_API_HAS(j->api, interim)) {
        return MK_DECLINED;
    }
    return j->api->interim(r, status, fields);
}

static void gw_job_proceed(struct mk_request *r, void *arg);

/*
 * api->stream_write() for j, or api->stream_commit() of the first len
 * bytes of its stream buffer when data is NULL. The server may write at
 * once and, inside the call, run proceed(r) (the queue drained) or
 * proceed(NULL) (the client is gone): gw_job_proceed only notes them then.
 * MK_OK, MK_AGAIN (the queue is at its mark and was not drained meanwhile:
 * wait for proceed), MK_ERR, or MK_GW_GONE (the request went away: j->r
 * is NULL, the caller ends j).
 */
static int gw_job_write(struct mk_gw_job *j, const void *data, size_t len)
{
    j->in_write = true;
    j->drained = false;
    int rc = data ? j->api->stream_write(j->r, data, len) : j->api->stream_commit(j->r, len);
    j->in_write = false;
    if (j->gone) {
        j->r = NULL;
        return MK_GW_GONE;
    }
    return rc == MK_AGAIN && j->drained ? MK_OK : rc;
}

int mk_gw_job_out(struct mk_gw_job *j, const void *data, size_t len, bool in_buffer)
{
    if (j->paused || j->spill_len > 0) {
        if (j->spill_len + len > j->be->spill_cap) {
            return MK_ERR; /* cannot happen: reading stops while paused */
        }
        if (!j->spill && !(j->spill = malloc(j->be->spill_cap))) {
            return MK_ERR;
        }
        memcpy(j->spill + j->spill_len, data, len);
        j->spill_len += len;
        if (in_buffer) {
            j->api->stream_commit(j->r, 0); /* copied: released */
        }
        return MK_OK;
    }
    int rc = gw_job_write(j, in_buffer ? NULL : data, len);
    if (rc == MK_AGAIN) {
        j->paused = true;
        j->be->want(j);
        return MK_OK;
    }
    return rc;
}

/* The backend's answer ended and everything is out: end the body. */
static void gw_job_finish(struct mk_gw_job *j)
{
    /* the note counts to now: from a start later by the time since an answer that ended first */
    uint64_t late = j->ended_ms ? j->api->now_ms() - j->ended_ms : 0;
    mk_gw_note_upstream(j->api, j->r, j->start_ms + late);
    mk_gw_log_flush(j->api, &j->log, j->r);
    if (!j->trailers || j->api->stream_end(j->r, j->trailers) != MK_OK) {
        j->api->stream_end(j->r, NULL); /* trailers the server refuses: the end alone */
    }
    j->r = NULL;
    mk_gw_job_over(j, true);
}

static void gw_job_proceed(struct mk_request *r, void *arg)
{
    struct mk_gw_job *j = arg;
    if (j->aborting) {
        return; /* inside stream_abort: its caller ends j */
    }
    if (j->in_write) {
        /* inside gw_job_write: noted, acted on when it returns */
        j->gone |= !r;
        j->drained |= r != NULL;
        return;
    }
    if (!r) {
        mk_gw_job_over(j, false); /* the client went away (or HEAD) */
        return;
    }
    j->paused = false;
    if (j->spill_len > 0) {
        int rc = gw_job_write(j, j->spill, j->spill_len);
        j->spill_len = 0;
        if (rc == MK_GW_GONE) {
            mk_gw_job_over(j, false);
            return;
        }
        if (rc == MK_ERR) {
            j->aborting = true;
            j->api->stream_abort(r);
            mk_gw_job_over(j, false);
            return;
        }
        j->paused = rc == MK_AGAIN;
    }
    if (j->ended && !j->paused) {
        gw_job_finish(j);
        return;
    }
    j->be->want(j);
}

/*
 * The continuation once the header block is in (or failed): status and
 * headers, then the body, whole or streamed. What the content hook would
 * return.
 */
static int gw_job_respond(struct mk_gw_job *j, struct mk_request *r)
{
    if (j->be->timeout == MK_GW_TIMEOUT_HEAD) {
        gw_job_timer_stop(j); /* the head is in: no Timeout any more */
    }
    mk_gw_note_upstream(j->api, r, j->start_ms); /* the head's time; the end's replaces it */
    mk_gw_log_feed(j->api, &j->log, r, NULL, 0); /* what came while suspended */
    if (j->fail) {
        int status = j->fail;
        mk_gw_log_flush(j->api, &j->log, r);
        mk_gw_job_over(j, false);
        return status;
    }
    int rc = j->be->head(j, r);
    if (rc == MK_ERR) {
        gw_job_count(j, 502);
        j->be->drop(j, 502);
        mk_gw_job_over(j, false);
        return 502;
    }
    if (rc != MK_AGAIN) {
        mk_gw_log_flush(j->api, &j->log, r);
        mk_gw_job_over(j, false); /* the rest of the answer is not wanted */
        return rc;
    }
    size_t rest = j->head_len - j->h.head_len;
    if (j->ended && !j->trailers &&
        (j->length_is == MK_GW_LENGTH_CAME ||
         (j->length_is == MK_GW_LENGTH_KNOWN && rest == j->length))) {
        /* The whole answer is in (it ended with the head, as most pages
           do): a body of known length, sent with the head in one write,
           keep-alive even for HTTP/1.0. A small body is copied (the head
           buffer serves the next job), a larger one is the head buffer. */
        size_t len = rest;
        if (len > GW_BODY_COPY_MAX || j->api->set_body(r, j->head + j->h.head_len, len) != MK_OK) {
            memmove(j->head, j->head + j->h.head_len, len);
            j->api->set_body_owned(r, j->head, len);
            j->head = NULL;
        }
        mk_gw_log_flush(j->api, &j->log, r);
        mk_gw_job_over(j, true);
        return MK_OK;
    }
    if (j->api->stream_start(r, gw_job_proceed, j) != MK_OK) {
        mk_gw_job_over(j, false);
        return 500;
    }
    if (j->length_is == MK_GW_LENGTH_KNOWN && MK_API_HAS(j->api, stream_length)) {
        /* right after stream_start it cannot fail; an older server frames it chunked */
        j->api->stream_length(r, j->length);
    }
    j->r = r;
    j->state = MK_GW_STREAM;
    j->paused = false; /* the queue takes the body now: what came with the head goes there */
    if (rest > 0 && mk_gw_job_out(j, j->head + j->h.head_len, rest, false) != MK_OK) {
        mk_gw_job_over(j, false); /* gone, or not taken */
        return MK_OK;
    }
    gw_job_head_drop(j);
    if (j->ended && j->trailers) {
        /* it came whole, but streams for its trailers: its end now, or at proceed */
        if (!j->paused && j->spill_len == 0) {
            gw_job_finish(j);
        }
        return MK_OK;
    }
    j->be->want(j);
    return MK_OK;
}

static int gw_job_resumed(struct mk_request *r, void *arg)
{
    struct mk_gw_job *j = arg;
    if (j->orphan) {
        free(j); /* its worker is gone: everything else was released then */
        return r ? 503 : MK_OK;
    }
    j->susp = NULL;
    if (!r) {
        mk_gw_job_over(j, false);
        return MK_OK;
    }
    if (!j->fail && !j->head_ready) {
        /* the wait for the backend is over (mk_gw_job_ready) */
        int rc = j->be->acquire(j, r);
        if (rc != MK_OK) {
            gw_job_count(j, rc);
            j->fail = rc == MK_AGAIN ? 503 : rc;
        }
    }
    if (j->fail || j->head_ready) {
        return gw_job_respond(j, r);
    }
    return gw_job_run(j, r);
}

/* The head is in: answer once the content stage may. */
static void gw_job_head_done(struct mk_gw_job *j)
{
    j->head_ready = true;
    if (j->be->timeout == MK_GW_TIMEOUT_HEAD) {
        gw_job_timer_stop(j);
    }
    j->paused = true; /* until the response starts */
    j->be->want(j);
    if (j->state == MK_GW_HEAD) {
        gw_job_resume(j);
    }
}

void mk_gw_job_upstream(struct mk_gw_job *j, struct mk_request *r, bool waiting)
{
    if (!r) {
        r = j->r ? j->r : j->held;
    }
    if (r && MK_API_HAS(j->api, upstream_wait)) {
        j->api->upstream_wait(r, waiting);
    }
}

void mk_gw_job_fail(struct mk_gw_job *j, int status)
{
    mk_gw_job_upstream(j, NULL, false);
    j->be->drop(j, status);
    gw_job_count(j, status);
    if (!j->fail) {
        j->fail = status;
    }
    if (j->be->timeout == MK_GW_TIMEOUT_HEAD) {
        gw_job_timer_stop(j);
    }
    j->paused = true;
    j->be->want(j);
    switch (j->state) {
    case MK_GW_BODY:
        break; /* answered from the next body callback */
    case MK_GW_QUEUED:
        j->be->unqueue(j);
        /* fall through */
    case MK_GW_HEAD:
        gw_job_resume(j);
        break;
    case MK_GW_START:    /* the backend starts: its caller answers */
    case MK_GW_SPOOL:    /* the backend has not started: nothing can fail */
    case MK_GW_RESUMING: /* answered by the continuation */
    case MK_GW_OVER:
        break;
    case MK_GW_STREAM:
        mk_gw_job_log(j, "the backend failed mid-response (%d)", status);
        j->aborting = true;
        j->api->stream_abort(j->r);
        mk_gw_job_over(j, false);
        break;
    }
}

char *mk_gw_job_head_room(struct mk_gw_job *j, size_t *room)
{
    if (!j->head && gw_spare_head && gw_spare_head_cap == j->be->head_cap) {
        j->head = gw_spare_head;
        gw_spare_head = NULL;
    }
    if (!j->head && !(j->head = malloc(j->be->head_cap))) {
        mk_gw_job_fail(j, 500);
        return NULL;
    }
    *room = j->be->head_cap - j->head_len;
    return j->head + j->head_len;
}

void mk_gw_job_head_more(struct mk_gw_job *j, size_t n)
{
    j->head_len += n;
    if (j->head_ready) {
        return; /* body bytes after the head, read in the same piece */
    }
    int rc = mk_gw_head_parse(j->head, j->head_len, j->nph, &j->h);
    if (rc == MK_OK) {
        gw_job_head_done(j);
    }
    else if (rc == MK_ERR) {
        mk_gw_job_log(j, "malformed header block: %s", j->h.why ? j->h.why : "?");
        mk_gw_job_fail(j, 502);
    }
}

void mk_gw_job_head_given(struct mk_gw_job *j)
{
    if (!j->head_ready && !j->fail) {
        gw_job_head_done(j);
    }
}

void mk_gw_job_head_data(struct mk_gw_job *j, const void *data, size_t len)
{
    size_t room;
    char *p = mk_gw_job_head_room(j, &room);
    if (!p) {
        return;
    }
    if (len > room) {
        mk_gw_job_fail(j, 502);
        return;
    }
    memcpy(p, data, len);
    mk_gw_job_head_more(j, len);
}

void mk_gw_job_end(struct mk_gw_job *j)
{
    mk_gw_job_upstream(j, NULL, false);
    j->ended = true;
    if (j->state == MK_GW_STREAM) {
        if (!j->paused && j->spill_len == 0) {
            gw_job_finish(j);
        }
        return;
    }
    if (!j->head_ready) {
        mk_gw_job_log(j, "%s", j->head_len ? "incomplete header block" : "no output");
        mk_gw_job_fail(j, 502);
    }
}

/* ---- timeouts ---------------------------------------------------------------- */

static void gw_job_timer_cb(struct mk_loop_timer *t, void *arg)
{
    struct mk_gw_job *j = arg;
    (void) t;

    if (j->state == MK_GW_QUEUED) {
        gw_job_timer_stop(j);
        j->be->unqueue(j);
        atomic_fetch_add_explicit(&j->stats->queue_timeouts, 1, memory_order_relaxed);
        j->fail = 503;
        gw_job_resume(j);
        return;
    }
    if (j->be->timeout == MK_GW_TIMEOUT_IDLE) {
        uint64_t now = j->api->now_ms();
        if (j->paused && j->state == MK_GW_STREAM && !j->reads_paused) {
            j->last_io_ms = now; /* the client is slow, not the backend */
            return;
        }
        if (j->state == MK_GW_RESUMING || now - j->last_io_ms < j->timeout_ms) {
            return;
        }
        if (j->be->timed_out && j->be->timed_out(j)) {
            return;
        }
        mk_gw_job_log(j, "no answer from the backend within Timeout");
        gw_job_timer_stop(j);
        mk_gw_job_fail(j, 504);
        return;
    }
    j->timer = NULL; /* a one-shot timer is freed when this returns */
    if (j->head_ready) {
        return;
    }
    if (j->state == MK_GW_BODY && !j->body_done) {
        /* the body still arrives: Timeout counts from its end (gw_job_body_end) */
        j->timer = j->api->timer_start((uint32_t) j->timeout_ms, 0, gw_job_timer_cb, j);
        return;
    }
    mk_gw_job_log(j, "no header block within the Timeout");
    mk_gw_job_fail(j, 504);
}

/* The backend's Timeout starts (not again after a wait). MK_OK, or MK_ERR (memory). */
static int gw_job_timer_arm(struct mk_gw_job *j)
{
    if (j->timer) {
        return MK_OK;
    }
    if (j->be->timeout == MK_GW_TIMEOUT_IDLE) {
        uint32_t period = (uint32_t) (j->timeout_ms / 4 + 1);
        j->timer = j->api->timer_start(period, 1, gw_job_timer_cb, j);
    }
    else {
        j->timer = j->api->timer_start((uint32_t) j->timeout_ms, 0, gw_job_timer_cb, j);
    }
    return j->timer ? MK_OK : MK_ERR;
}

/* ---- the request body ------------------------------------------------------ */

void mk_gw_job_body_drained(struct mk_gw_job *j)
{
    if (j->owed > 0 && j->state == MK_GW_BODY && j->r) {
        size_t owed = j->owed;
        j->owed = 0;
        j->api->body_consume(j->r, owed);
    }
}

/* The body is in: answer, or wait for the head. What the content stage returns. */
static int gw_job_body_end(struct mk_gw_job *j, struct mk_request *r)
{
    j->body_done = true;
    if (j->be->timeout == MK_GW_TIMEOUT_HEAD && j->timer && !j->head_ready) {
        /* Timeout counts from the end of the body: an upload takes its time */
        gw_job_timer_stop(j);
        j->timer = j->api->timer_start((uint32_t) j->timeout_ms, 0, gw_job_timer_cb, j);
    }
    if (j->fail || j->head_ready) {
        return gw_job_respond(j, r);
    }
    if (!(j->susp = gw_job_suspend(j, r))) {
        mk_gw_job_over(j, false);
        return 500;
    }
    j->state = MK_GW_HEAD;
    j->held = r;
    j->r = NULL;
    return MK_SUSPENDED;
}

static int gw_job_body_cb(struct mk_request *r, int event, const char *data, size_t len, void *arg)
{
    struct mk_gw_job *j = arg;

    if (event == MK_BODY_ABORT) {
        mk_gw_job_over(j, false);
        return MK_OK;
    }
    if (event == MK_BODY_END) {
        int rc = j->be->body_end(j, r);
        if (rc != MK_OK) {
            mk_gw_job_over(j, false);
            return rc;
        }
        return gw_job_body_end(j, r);
    }
    if (j->fail) {
        int status = j->fail;
        mk_gw_job_over(j, false);
        return status; /* the backend failed or timed out: answer now */
    }
    int rc = j->be->body(j, data, len);
    if (rc == MK_OK) {
        return MK_OK;
    }
    if (rc != MK_AGAIN) {
        mk_gw_job_over(j, false);
        return rc;
    }
    if (j->be->timeout == MK_GW_TIMEOUT_IDLE) {
        j->last_io_ms = j->api->now_ms(); /* a slow upload is the client's, not the backend's */
    }
    j->owed += len; /* the whole piece is kept until mk_gw_job_body_drained */
    return MK_AGAIN;
}

/* ---- starting ------------------------------------------------------------------ */

/* The backend has what the request needs: begin it, then the body. */
static int gw_job_run(struct mk_gw_job *j, struct mk_request *r)
{
    int rc = j->be->begin(j, r);
    if (rc == MK_OK && gw_job_timer_arm(j) != MK_OK) {
        rc = 500;
    }
    if (rc != MK_OK) {
        mk_gw_job_over(j, false);
        return rc;
    }
    if (j->has_body && !j->spooled) {
        if (j->api->body_stream(r, j->be->window, gw_job_body_cb, j) != MK_OK) {
            mk_gw_job_over(j, false);
            return 500;
        }
        j->state = MK_GW_BODY;
        j->r = r;
        return MK_AGAIN;
    }
    /* none, or kept whole: its end goes with the request */
    rc = j->be->body_end(j, r);
    if (rc != MK_OK) {
        mk_gw_job_over(j, false);
        return rc;
    }
    return gw_job_body_end(j, r);
}

/* Acquire, then begin, or wait for the backend. As the content stage returns. */
static int gw_job_launch(struct mk_gw_job *j, struct mk_request *r)
{
    mk_gw_job_upstream(j, r, true); /* the wait for the backend counts, as start_ms does */
    int rc = j->be->acquire(j, r);
    if (rc == MK_OK) {
        return gw_job_run(j, r);
    }
    if (rc != MK_AGAIN) {
        gw_job_count(j, rc);
        mk_gw_job_free(j);
        return rc;
    }
    j->waited = true;
    j->state = MK_GW_QUEUED;
    j->timer = j->api->timer_start((uint32_t) j->queue_ms, 1, gw_job_timer_cb, j);
    if (!(j->susp = gw_job_suspend(j, r)) || !j->timer) {
        j->be->unqueue(j);
        if (j->susp) {
            j->fail = 503;
            gw_job_resume(j);
            return MK_SUSPENDED;
        }
        mk_gw_job_free(j);
        return 503;
    }
    return MK_SUSPENDED;
}

void mk_gw_job_ready(struct mk_gw_job *j)
{
    gw_job_timer_stop(j); /* the queue's: the backend's starts with the request */
    gw_job_resume(j);
}

/* A body of unknown length arrives: keep it; start the backend at its end. */
static int gw_job_spool_cb(struct mk_request *r, int event, const char *data, size_t len, void *arg)
{
    struct mk_gw_job *j = arg;

    if (event == MK_BODY_ABORT) {
        mk_gw_job_over(j, false);
        return MK_OK;
    }
    if (event == MK_BODY_DATA) {
        if (mk_gw_spool_add(&j->spool, data, len) != MK_OK) {
            mk_gw_job_log(j, "cannot keep the request body: %s", strerror(errno));
            mk_gw_job_over(j, false);
            return 500;
        }
        return MK_OK;
    }
    snprintf(j->content_length, sizeof(j->content_length), "%llu",
             (unsigned long long) j->spool.size);
    j->script.content_length = j->content_length;
    j->spooled = true;
    j->r = NULL;
    j->start_ms = j->api->now_ms();
    return gw_job_launch(j, r);
}

int mk_gw_job_start(struct mk_gw_job *j, struct mk_request *r)
{
    if (!mk_gw_body_unsized_of(j->api, r, j->req_cl, j->req_te)) {
        return gw_job_launch(j, r);
    }
    if (j->be->stream_unsized) {
        j->has_body = true; /* HTTP/2 without content-length included */
        return gw_job_launch(j, r);
    }
    /* Chunked, or HTTP/2 without content-length: a script wants
       CONTENT_LENGTH (php-fpm reads no body without it), so the body is
       kept whole first, as nginx does, then the backend starts. */
    if (j->api->body_stream(r, j->be->window, gw_job_spool_cb, j) != MK_OK) {
        mk_gw_job_free(j);
        return 500;
    }
    j->state = MK_GW_SPOOL;
    j->r = r;
    return MK_AGAIN;
}
