/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * gw_job.h: one gateway request, from the content hook to the end of its
 * response: the request side that every gateway plugin shares, as
 * lighttpd's gw_handler_ctx serves mod_fastcgi, mod_scgi and mod_proxy. A
 * plugin is a backend of the job: a table of functions (struct
 * mk_gw_backend) that does the upstream side (plugins/cgi: a script's
 * process and its pipes; plugins/fastcgi: a pooled connection and its
 * records), while the job does the rest:
 *   - a body of unknown length kept whole first (gw_spool.c), so that the
 *     backend learns its CONTENT_LENGTH;
 *   - the wait for the backend (a connection of a pool at its limit), with
 *     its queue timeout;
 *   - the request body streamed to the backend through a window: bytes the
 *     backend keeps hold the client back until it says they are gone;
 *   - the header block, collected and parsed (gw_head.c), the request
 *     suspended meanwhile, and given up early when the server cancels it
 *     (its own Timeout, the client gone: api->suspend_cancel);
 *   - the response body streamed to the client, reading paused at the
 *     queue's high-water mark, with what a read held that the queue did not
 *     take kept aside (the spill);
 *   - the backend's Timeout (for its header block, or for any silence);
 *   - the end: the request over, the job freed once the backend lets go of
 *     it; the jobs of a worker that exits, and their pending continuations;
 *   - the counters a gateway reports (struct mk_gw_stats).
 *
 * Threads: a job lives on the worker of its request; every function here
 * and every function of the table runs there. Ownership: the backend's own
 * struct starts with the job (its first member), allocated by
 * mk_gw_job_new and freed by the job (free(j)) once the request is over
 * and the backend's over() or mk_gw_job_free said so.
 */
#ifndef MK_GW_JOB_H
#define MK_GW_JOB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <monkey/mk_plugin.h>

#include "gw.h"

/* mk_gw_job_out() and its kin: the request went away inside the call. */
#define MK_GW_GONE (-100)

enum mk_gw_state {
    MK_GW_START,    /* not started yet: the content hook (or a continuation) runs */
    MK_GW_SPOOL,    /* a body of unknown length is kept whole before the backend starts */
    MK_GW_QUEUED,   /* suspended: waiting for the backend (mk_gw_job_ready) */
    MK_GW_BODY,     /* the request body streams to the backend; the head may come meanwhile */
    MK_GW_HEAD,     /* suspended: waiting for the header block */
    MK_GW_RESUMING, /* resume() called: the continuation comes */
    MK_GW_STREAM,   /* the response body streams to the client */
    MK_GW_OVER,     /* the request is over; the backend still holds the job */
};

/* How the backend's Timeout (mk_gw_job.timeout_ms) counts. */
enum mk_gw_timeout {
    /* For the header block, from the end of the request body (a long
       upload is not held against it); none once the head is in (CGI). */
    MK_GW_TIMEOUT_HEAD,
    /* For any silence of the backend: no byte read or written while the
       client is not the one holding things back (or the backend reads on
       regardless: reads_paused), before the head (504) and after it (the
       response cut short); checked 4 times a Timeout. */
    MK_GW_TIMEOUT_IDLE,
};

/*
 * The counters of a gateway, in the plugin's state (api->self), shared by
 * its workers; the plugin's stats hook gives them its own names.
 */
struct mk_gw_stats {
    atomic_uint_fast64_t timeouts;       /* 504: the backend's Timeout, or the server's first */
    atomic_uint_fast64_t bad_gateway;    /* 502 for the backend (mk_gw_job_fail, a bad head) */
    atomic_uint_fast64_t queue_timeouts; /* 503: the wait for the backend ran past queue_ms */
    atomic_uint_fast64_t upstream_ms;    /* the requests' upstream times, summed at their end */
};

/* What the client is told of the length of the backend's answer (j->length_is). */
enum mk_gw_length {
    /* What came: a whole answer (it ended with its head) goes with its
       Content-Length, a streamed one chunked (or up to the close). */
    MK_GW_LENGTH_CAME,
    /* j->length, announced (api->stream_length) even when none of it
       comes (the answer to a HEAD): a streamed answer cut short of it is
       cut for the client too. */
    MK_GW_LENGTH_KNOWN,
    /* Not known, not to be guessed from what came (the answer to a HEAD
       that announced no length): streamed, without Content-Length. */
    MK_GW_LENGTH_UNKNOWN,
};

struct mk_gw_job;

/*
 * A backend: what the job asks of the upstream side. Every function gets
 * the job (the first member of the backend's struct) and runs on its
 * worker. The job's functions that a backend calls may call the table in
 * turn (mk_gw_job_fail calls drop and want, mk_gw_job_out want, the end of
 * a request over and release): a backend's function must not hold state
 * of j in locals across such a call.
 */
struct mk_gw_backend {
    const char *who;  /* "cgi", "fastcgi": the logs' prefix (a static string) */
    size_t size;      /* the backend's struct, the job its first member */
    size_t cleared;   /* its first bytes zeroed by mk_gw_job_new (0: all): a buffer at
                         the struct's end filled before it is read need not be */
    size_t window;    /* the request body's window (api->body_stream) */
    size_t head_cap;  /* the head buffer: the header block and what came with it */
    size_t spill_cap; /* the most one read of the response holds (mk_gw_job_out) */
    enum mk_gw_timeout timeout;
    /* A body of unknown length streams to the backend as it comes (j->has_body set, the
       backend frames it: the proxy's chunked coding) instead of being kept whole first. */
    bool stream_unsized;

    /*
     * Get what the request needs (a process slot, a connection). MK_OK
     * (got it: begin follows), MK_AGAIN (wait: the job suspends the
     * request until the backend calls mk_gw_job_ready, or its queue_ms
     * passes: 503), or a status to answer (502 counted as bad_gateway);
     * nothing of the request was sent. Called again from the continuation
     * once the wait ended (j->waited set): MK_OK or a status then.
     */
    int (*acquire)(struct mk_gw_job *j, struct mk_request *r);
    /*
     * Start the request upstream: spawn, or put the request's head in the
     * connection's buffer (its parameters, j->script, r's headers). It is
     * sent with the body's first bytes or its end (body, body_end) where
     * that saves a write. MK_OK, or a status (the job ends: over()).
     */
    int (*begin)(struct mk_gw_job *j, struct mk_request *r);
    /*
     * A piece of the request body (valid during the call only): MK_OK
     * (written, or dropped because the backend does not want the rest),
     * MK_AGAIN (kept: it counts against the window until the backend calls
     * mk_gw_job_body_drained), or a status (the job answers it).
     */
    int (*body)(struct mk_gw_job *j, const char *data, size_t len);
    /*
     * The body is complete: streamed (j->has_body), kept whole
     * (j->spooled: read it from j->spool as the upstream takes it), or
     * there is none. Send its end (r's trailers, api->request_trailers,
     * where the backend passes them on). MK_OK or a status.
     */
    int (*body_end)(struct mk_gw_job *j, struct mk_request *r);
    /* j->paused changed: read the backend's answer, or stop until it is clear again. */
    void (*want)(struct mk_gw_job *j);
    /*
     * The header block j->h is in (the continuation, r at hand): put it on
     * r's response (mk_gw_head_apply, or what the backend does instead).
     * MK_AGAIN: set, the body follows (streamed, or whole when j->ended);
     * MK_ERR: it cannot be (502, counted); anything else is the answer
     * itself (a redirect's MK_OK, a file's result, a status): the job ends
     * and returns it.
     */
    int (*head)(struct mk_gw_job *j, struct mk_request *r);
    /*
     * The backend's answer is not wanted any more, or it failed: `status`
     * is the failure (500, 502, 503, 504; 504 also when the server's
     * Timeout came first), 0 when the request went away. Stop the
     * upstream work that would go on for nothing (a connection that
     * cannot be reused is closed, a script given up is killed). Called
     * from mk_gw_job_fail too.
     */
    void (*drop)(struct mk_gw_job *j, int status);
    /*
     * The request is over (j->r NULL, state MK_GW_OVER): `done`, the
     * backend's answer ended (mk_gw_job_end) and all of it went out; else
     * it was given up. Let go of the upstream (a clean connection back to
     * its pool). Whether j may be freed now; false: the backend frees it
     * later with mk_gw_job_free (a child process not reaped yet).
     */
    bool (*over)(struct mk_gw_job *j, bool done);
    /* Free what the backend holds for j (its watches, buffers, connection): j goes. */
    void (*release)(struct mk_gw_job *j);
    /* The request leaves the wait of acquire() (cancelled, timed out). NULL: it never waits. */
    void (*unqueue)(struct mk_gw_job *j);
    /*
     * MK_GW_TIMEOUT_IDLE: the backend's Timeout passed in silence. true:
     * the backend took it over (it tries the request again elsewhere, and
     * moved last_io_ms); false: the job fails the request (504), as it
     * does when this is NULL.
     */
    bool (*timed_out)(struct mk_gw_job *j);
};

/*
 * The job. The backend reads its fields and sets those said to be its;
 * the rest change only through the functions below.
 */
struct mk_gw_job {
    const struct mk_gw_backend *be;
    const struct mk_api *api;
    struct mk_gw_stats *stats;
    struct mk_gw_job *next, **pprev; /* the worker's jobs */
    enum mk_gw_state state;
    struct mk_request *r;        /* while the body or the response streams */
    struct mk_suspended *susp;   /* while suspended (QUEUED, HEAD) */
    struct mk_request *held;     /* the request while it waits for the head (HEAD) */
    struct mk_loop_timer *timer; /* the queue's, then the backend's Timeout */
    uint64_t timeout_ms;         /* the backend's: set by it before mk_gw_job_start */
    uint64_t queue_ms;           /* the wait for acquire(): set by it before mk_gw_job_start */
    uint64_t start_ms;   /* the upstream time's start (api->now_ms); the backend may move it */
    uint64_t last_io_ms; /* MK_GW_TIMEOUT_IDLE: the last byte either way (set by the backend;
                            by the job for each body piece: a slow client is not silence) */
    int fail;            /* the status to answer instead of the backend (500, 502, 503, 504) */
    size_t owed;         /* body bytes the backend kept (MK_AGAIN), given back when drained */
    char *head;          /* the answer until the response starts: the header block first */
    size_t head_len;
    char *spill; /* response bytes the client's queue did not take */
    size_t spill_len;
    bool has_body;       /* the request has a body (mk_gw_has_body) */
    bool req_cl, req_te; /* a Content-Length, a Transfer-Encoding came (looked up once) */
    bool spooled;        /* it was kept whole: j->spool */
    bool body_done;      /* the body is complete */
    bool head_ready;     /* the header block is in j->h */
    bool ended;          /* the backend's answer ended (mk_gw_job_end) */
    bool paused;         /* the backend's answer is not to be read now (want) */
    /* Set by the backend: it reads its answer though paused (into a buffer of its own), so
       that its silence counts against MK_GW_TIMEOUT_IDLE even while the client is slow. */
    bool reads_paused;
    /* Set by a backend whose answer ended before the response did (a buffer of its own, still
       going to the client): the upstream time (stats, the upstream_ms note) ends there. */
    uint64_t ended_ms;
    bool nph;      /* the answer starts with a status line (set by the backend) */
    bool waited;   /* acquire() made the request wait */
    bool aborting; /* inside api->stream_abort */
    /* Set by the backend before its head is complete (MK_GW_LENGTH_CAME when not). */
    enum mk_gw_length length_is;
    uint64_t length; /* MK_GW_LENGTH_KNOWN */
    /* Set by the backend before mk_gw_job_end: the answer's trailer fields,
       "Name: value\r\n" lines (NUL-terminated, the backend's memory until
       release), sent with the body's end (api->stream_end: HTTP/1.1 chunked,
       HTTP/2); the answer then streams even when it came whole. NULL: none. */
    const char *trailers;
    bool orphan; /* its worker exited while its continuation was pending */
    /* inside stream_write(): proceed() calls are noted, not acted on */
    bool in_write, drained, gone;
    struct mk_gw_script script; /* the script the request runs (its CONTENT_LENGTH once spooled) */
    struct mk_gw_spool spool;   /* a body of unknown length, kept whole */
    char content_length[MK_GW_DEC_MAX];
    /* Not zeroed by mk_gw_job_new (5 KB): filled before use. */
    struct mk_gw_head h;  /* the parsed header block (slices into j->head) */
    struct mk_gw_log log; /* the backend's stderr, and the script's name for the logs */
};

/*
 * A job for request r of the backend `be`, running script s (copied), on
 * this worker's list: be->size bytes, zeroed but for h and log, the job
 * first. NULL when memory is short. The backend fills its part, then
 * calls mk_gw_job_start.
 */
struct mk_gw_job *mk_gw_job_new(const struct mk_gw_backend *be, const struct mk_api *api,
                                struct mk_request *r, const struct mk_gw_script *s,
                                struct mk_gw_stats *stats);
/*
 * The content stage of j's request: spool a body of unknown length, then
 * (or at once) acquire, begin, and stream the body or wait for the head.
 * What the content hook returns (MK_AGAIN, MK_SUSPENDED, a status, MK_OK);
 * j is the job's from here on (freed on the error paths).
 */
int mk_gw_job_start(struct mk_gw_job *j, struct mk_request *r);

/* The wait of acquire() ended (a connection came, or none can): the continuation calls it again. */
void mk_gw_job_ready(struct mk_gw_job *j);
/* The backend took what it kept of the body: the window opens again. */
void mk_gw_job_body_drained(struct mk_gw_job *j);

/*
 * The backend's answer before the response starts. head_room: where the
 * next bytes go in the head buffer and how many fit (*room), NULL when
 * memory is short (j failed: 500); head_more: n bytes were put there.
 * head_data: a copy of len bytes (502 when they do not fit). Until the
 * block is complete it is parsed (malformed: logged, 502); bytes after it
 * stay in the buffer as the start of the body.
 */
char *mk_gw_job_head_room(struct mk_gw_job *j, size_t *room);
void mk_gw_job_head_more(struct mk_gw_job *j, size_t n);
void mk_gw_job_head_data(struct mk_gw_job *j, const void *data, size_t len);
/*
 * The head given parsed, not as text to parse: the backend filled j->h
 * (its status, and its fields with mk_gw_head_field) with slices into the
 * head buffer's first j->h.head_len bytes (head_room, j->head_len counting
 * them); the job takes it as it takes a block mk_gw_head_parse accepted.
 * Bytes put after them (head_more, head_data) are the start of the body.
 */
void mk_gw_job_head_given(struct mk_gw_job *j);

/*
 * An interim answer of the backend (103 Early Hints: api->interim, with
 * `fields` as "Name: value\r\n" lines) while the body streams or the
 * request waits for the head: what api->interim returns; MK_DECLINED when
 * the server has no such call, or the request is past that point.
 */
int mk_gw_job_interim(struct mk_gw_job *j, int status, const char *fields);

/*
 * Response bytes once the response streams: to the client's queue, or to
 * the spill while it is at its mark (reading then pauses: want). `in_buffer`:
 * data is the request's stream buffer (api->stream_buffer), queued without
 * a copy. MK_OK, MK_ERR (not taken), or MK_GW_GONE (the client went away:
 * the backend ends j with mk_gw_job_over).
 */
int mk_gw_job_out(struct mk_gw_job *j, const void *data, size_t len, bool in_buffer);
/*
 * The backend's answer ended (EOF, END_REQUEST): the response ends once
 * what waits is out (j may be freed inside); before a complete header
 * block, 502 (logged).
 */
void mk_gw_job_end(struct mk_gw_job *j);
/*
 * The backend failed (500, 502, 503, 504): drop() is called, and the
 * request answered with the status while the response has not started
 * (at once when it is suspended, from the next body callback while the
 * body streams), or the response cut short (api->stream_abort) once it
 * has, which ends j.
 */
void mk_gw_job_fail(struct mk_gw_job *j, int status);
/*
 * The request's upstream time (api->upstream_wait, ABI 3.19: the logger's
 * %{upstream}D) begins (`waiting`) or ends: r, or NULL for the job's
 * request (j->r, or the one held while suspended). The job begins it when
 * the backend is asked for (acquire) and ends it at mk_gw_job_end and
 * mk_gw_job_fail; a backend whose answer ended before mk_gw_job_end (a
 * buffer of its own: ended_ms) ends it there.
 */
void mk_gw_job_upstream(struct mk_gw_job *j, struct mk_request *r, bool waiting);
/* The request is over for the backend's side (the client went away, an error after the head). */
void mk_gw_job_over(struct mk_gw_job *j, bool done);
/* Free an over job that the backend held (over() returned false). */
void mk_gw_job_free(struct mk_gw_job *j);
/* Log "<who>: <script>: <message>" to the server log at level ERROR. */
void mk_gw_job_log(const struct mk_gw_job *j, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * The worker exits (the plugin's worker_exit): release every job of `be`
 * on this worker. A suspended request is resumed with an answer of 503;
 * a job whose continuation is pending keeps its memory until that runs.
 */
void mk_gw_job_worker_exit(const struct mk_gw_backend *be);

#endif
