/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/request.c: the request's life, and the request object that reads it.
 *
 * A duda_request is made by the route's handler on the request's worker
 * and kept in the plugin's context slot; it is freed once nothing refers
 * to it: the request's end (the slot's cleanup), an unfinished wait() and
 * a running stream each hold a reference. The response is built in the
 * duda_request (status, headers, body) and handed to the server in one
 * go when it ends (response.c), so nothing a service does reaches the
 * server's request before it is complete or streamed.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "duda_internal.h"

MK_PLUGIN_DECLARE(duda);

bool duda_request_live(duda_request_t *dr, const char *what)
{
    if (!dr) {
        duda_misuse(NULL, "%s() without a request", what);
        return false;
    }
    if (!dr->r) {
        return false; /* the request is gone: nothing to write to */
    }
    return true;
}

/* ---- the request's life ----------------------------------------------------- */

static void duda_request_free(duda_request_t *dr)
{
    struct duda_header *h = dr->headers;
    while (h) {
        struct duda_header *next = h->next;
        free(h->name);
        free(h->value);
        free(h);
        h = next;
    }
    struct duda_gc_item *g = dr->gc;
    while (g) {
        struct duda_gc_item *next = g->next;
        g->fn(g->p);
        free(g);
        g = next;
    }
    if (dr->file_fd >= 0) {
        close(dr->file_fd);
    }
    free(dr->body);
    free(dr->ctype);
    free(dr->method);
    free(dr->path);
#ifdef DUDA_HAVE_HIREDIS
    duda_session_redis_release(dr);
#endif
    free(dr);
}

void duda_request_unref(duda_request_t *dr)
{
    if (--dr->refs == 0) {
        duda_request_free(dr);
    }
}

/* The request ended (after every request_done hook): the slot's cleanup. */
static void duda_request_end(void *ctx)
{
    duda_request_t *dr = ctx;
    struct duda_service *saved = duda_current;

    duda_current = dr->svc;
    bool had_timers = dr->timers != NULL;
    duda_event_timers_stop(dr);
    if (dr->end_cb) {
        dr->end_cb(dr);
    }
    dr->r = NULL;
    duda_current = saved;
    /* Its timers were the only ones to continue it: continue it now (a no-op then). */
    if (dr->waiting && had_timers && atomic_exchange(&dr->cont_done, 1) == 0) {
        duda_mk->resume(dr->susp, duda_request_continue, dr);
    }
    duda_request_unref(dr);
}

static duda_request_t *duda_request_new(struct mk_request *r, const struct duda_route *rt)
{
    size_t n;
    duda_request_t *dr = calloc(1, sizeof(*dr));

    if (!dr) {
        return NULL;
    }
    dr->r = r;
    dr->svc = rt->svc;
    dr->route = rt;
    dr->refs = 1;
    dr->status = 200;
    dr->file_fd = -1;
    dr->headers_tail = &dr->headers;
    const char *m = duda_mk->method(r, &n);
    dr->method = strndup(m, n);
    const char *p = duda_mk->path(r, &n);
    dr->path = strndup(p, n);
    if (!dr->method || !dr->path ||
        duda_mk->ctx_set(r, MK_PLUGIN_SELF(duda), dr, duda_request_end) != MK_OK) {
        duda_request_free(dr);
        return NULL;
    }
    return dr;
}

/* Does the request carry a body to read? */
static bool duda_has_body(struct mk_request *r)
{
    size_t n, te;
    const char *cl = duda_mk->header(r, "Content-Length", &n);
    if (duda_mk->header(r, "Transfer-Encoding", &te)) {
        return true;
    }
    if (!cl) {
        return false;
    }
    /* the server accepted a list of equal decimals ("0, 0", "00"): a body
       when the first has a digit other than 0 */
    for (size_t i = 0; i < n && cl[i] != ','; i++) {
        if (cl[i] >= '1' && cl[i] <= '9') {
            return true;
        }
    }
    return false;
}

/* What the handler returns once the service's code returned. */
int duda_request_finish(duda_request_t *dr)
{
    /* Suspended (by worker->task or wait()): the continuation decides, even if cont()
       already ran on another thread. */
    if (dr->tasking) {
        dr->tasking = false;
        return MK_SUSPENDED;
    }
    if (dr->waiting) {
        return MK_SUSPENDED;
    }
    if (dr->misuse && !dr->streaming) {
        return 500;
    }
    if (dr->body_streaming && !dr->ended) {
        return MK_AGAIN;
    }
    if (dr->streaming) {
        return MK_OK;
    }
    if (!dr->ended) {
        duda_misuse(dr, "the callback returned without response->end() or wait()");
        return 500;
    }
#ifdef DUDA_HAVE_HIREDIS
    /* Sessions created or destroyed: the response waits for the store's answer. */
    int held = duda_session_redis_hold(dr, duda_request_continue);
    if (held != 0) {
        return held > 0 ? MK_SUSPENDED : 503;
    }
#endif
    return duda_response_commit(dr);
}

static int duda_run(duda_request_t *dr);
#ifdef DUDA_HAVE_HIREDIS
static int duda_sessions_loaded(struct mk_request *r, void *arg);
#endif

static void duda_call(duda_request_t *dr, duda_callback_t cb)
{
    struct duda_service *saved = duda_current;
    duda_request_t *saved_dr = duda_current_request;

    duda_current = dr->svc;
    duda_current_request = dr;
    duda_worker_enter(dr->svc);
    dr->called = true;
    cb(dr);
    duda_current = saved;
    duda_current_request = saved_dr;
}

int duda_request_handler(struct mk_request *r, void *arg)
{
    const struct duda_route *rt = arg;
    duda_request_t *dr = duda_mk->ctx_get(r, MK_PLUGIN_SELF(duda));

    if (!dr) {
        dr = duda_request_new(r, rt);
        if (!dr) {
            return 503;
        }
        duda_mk->metric_add(rt->svc->m_requests, 1);
        atomic_fetch_add_explicit(&duda_self()->requests, 1, memory_order_relaxed);
        if (!rt->stream && duda_has_body(r)) {
            size_t n;
            if (!duda_mk->body(r, &n)) {
                return MK_AGAIN; /* called again with the body read */
            }
        }
    }
    else if (dr->called) {
        return duda_request_finish(dr);
    }
#ifdef DUDA_HAVE_HIREDIS
    if (!rt->dashboard && duda_session_redis_enabled(dr)) {
        int rc = duda_session_redis_prefetch(dr, duda_sessions_loaded);
        if (rc != 0) {
            return rc > 0 ? MK_SUSPENDED : 503;
        }
    }
#endif
    return duda_run(dr);
}

/* The route's callback (or the dashboard), then what the handler returns. */
static int duda_run(duda_request_t *dr)
{
    if (dr->route->dashboard) {
        duda_console_dashboard(dr);
    }
    else {
        duda_call(dr, dr->route->cb);
    }
    return duda_request_finish(dr);
}

#ifdef DUDA_HAVE_HIREDIS
/* The Redis store answered the lookups of the request's sessions. r is NULL when it is gone. */
static int duda_sessions_loaded(struct mk_request *r, void *arg)
{
    duda_request_t *dr = arg;
    int rc = MK_OK;

    if (r && dr->r) {
        rc = duda_run(dr);
    }
    duda_request_unref(dr);
    return rc;
}
#endif

/* A parked request continues (wait/cont, worker->task). r is NULL when it is gone. */
int duda_request_continue(struct mk_request *r, void *arg)
{
    duda_request_t *dr = arg;

    dr->waiting = false;
    if (!r || !dr->r) {
        duda_request_unref(dr); /* the reference of wait() */
        return MK_OK;
    }
    int rc = duda_request_finish(dr);
    duda_request_unref(dr);
    return rc;
}

/* ---- request ---------------------------------------------------------------- */

static const char *duda_req_method(duda_request_t *dr)
{
    return dr ? dr->method : NULL;
}

static const char *duda_req_path(duda_request_t *dr)
{
    return dr ? dr->path : NULL;
}

static int duda_is(duda_request_t *dr, const char *m)
{
    return dr && strcmp(dr->method, m) == 0;
}

static int duda_is_get(duda_request_t *dr)
{
    return duda_is(dr, "GET");
}

static int duda_is_head(duda_request_t *dr)
{
    return duda_is(dr, "HEAD");
}

static int duda_is_post(duda_request_t *dr)
{
    return duda_is(dr, "POST");
}

static int duda_is_put(duda_request_t *dr)
{
    return duda_is(dr, "PUT");
}

static int duda_is_delete(duda_request_t *dr)
{
    return duda_is(dr, "DELETE");
}

static const char *duda_header_get(duda_request_t *dr, const char *name)
{
    size_t n;
    if (!duda_request_live(dr, "request->header_get") || !name) {
        return NULL;
    }
    const char *v = duda_mk->header(dr->r, name, &n);
    return v ? duda_gc_strndup(dr, v, n) : NULL;
}

static int duda_is_content_type(duda_request_t *dr, const char *type)
{
    size_t n;
    if (!duda_request_live(dr, "request->is_content_type") || !type) {
        return 0;
    }
    const char *v = duda_mk->header(dr->r, "Content-Type", &n);
    if (!v) {
        return 0;
    }
    size_t end = 0;
    while (end < n && v[end] != ';' && v[end] != ' ' && v[end] != '\t') {
        end++;
    }
    return end == strlen(type) && strncasecmp(v, type, end) == 0;
}

static const char *duda_body(duda_request_t *dr, size_t *len)
{
    size_t n = 0;
    if (len) {
        *len = 0;
    }
    if (!duda_request_live(dr, "request->body") || dr->route->stream) {
        return NULL;
    }
    const char *b = duda_mk->body(dr->r, &n);
    if (!b) {
        b = "";
        n = 0;
    }
    if (len) {
        *len = n;
    }
    return b;
}

static int duda_body_cb(struct mk_request *r, int event, const char *d, size_t len, void *arg)
{
    duda_request_t *dr = arg;
    struct duda_service *saved = duda_current;

    if (event == MK_BODY_ABORT) {
        duda_request_unref(dr);
        return MK_OK;
    }
    duda_current = dr->svc;
    dr->on_data(dr, event == MK_BODY_DATA ? d : NULL, event == MK_BODY_DATA ? len : 0);
    duda_current = saved;
    if (event == MK_BODY_DATA) {
        return dr->misuse ? 500 : MK_OK;
    }
    (void) r;
    dr->body_streaming = false;
    int rc = duda_request_finish(dr);
    duda_request_unref(dr);
    return rc;
}

static int duda_body_stream(duda_request_t *dr,
                            void (*on_data)(duda_request_t *dr, const char *data, size_t len))
{
    if (!duda_request_live(dr, "request->body_stream")) {
        return -1;
    }
    if (!dr->route->stream || !on_data || dr->body_streaming) {
        duda_misuse(dr, "request->body_stream() needs a router->map_stream route, once");
        return -1;
    }
    dr->on_data = on_data;
    if (!duda_has_body(dr->r)) {
        on_data(dr, NULL, 0);
        return 0;
    }
    if (duda_mk->body_stream(dr->r, 0, duda_body_cb, dr) != MK_OK) {
        duda_misuse(dr, "request->body_stream() refused by the server");
        return -1;
    }
    dr->refs++;
    dr->body_streaming = true;
    return 0;
}

static const char *duda_remote_addr(duda_request_t *dr)
{
    char buf[64];
    if (!duda_request_live(dr, "request->remote_addr")) {
        return NULL;
    }
    const char *a = duda_mk->remote_addr(dr->r, buf, sizeof(buf));
    return a ? duda_gc_strndup(dr, a, strlen(a)) : NULL;
}

static int duda_set_ctx(duda_request_t *dr, void *ctx)
{
    if (!dr) {
        duda_misuse(NULL, "request->set_ctx() without a request");
        return -1;
    }
    dr->user = ctx;
    return 0;
}

static void *duda_ctx(duda_request_t *dr)
{
    return dr ? dr->user : NULL;
}

static int duda_req_version(duda_request_t *dr)
{
    if (!duda_request_live(dr, "request->version")) {
        return -1;
    }
    return duda_mk->version(dr->r);
}

static const char *duda_req_protocol(duda_request_t *dr)
{
    size_t n;
    if (!duda_request_live(dr, "request->protocol") || !MK_API_HAS(duda_mk, request_protocol)) {
        return NULL;
    }
    const char *v = duda_mk->request_protocol(dr->r, &n);
    return v ? duda_gc_strndup(dr, v, n) : NULL;
}

const struct duda_request_api duda_request_obj = {
    .size = sizeof(struct duda_request_api),
    .method = duda_req_method,
    .path = duda_req_path,
    .is_get = duda_is_get,
    .is_head = duda_is_head,
    .is_post = duda_is_post,
    .is_put = duda_is_put,
    .is_delete = duda_is_delete,
    .header_get = duda_header_get,
    .is_content_type = duda_is_content_type,
    .body = duda_body,
    .body_stream = duda_body_stream,
    .remote_addr = duda_remote_addr,
    .set_ctx = duda_set_ctx,
    .ctx = duda_ctx,
    .version = duda_req_version,
    .protocol = duda_req_protocol,
};
