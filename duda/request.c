/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/request.c: the request's life and the objects that act on it
 * (request, response, router, param, qs, cookie, gc).
 *
 * A duda_request is made by the route's handler on the request's worker
 * and kept in the plugin's context slot; it is freed once nothing refers
 * to it: the request's end (the slot's cleanup), an unfinished wait() and
 * a running stream each hold a reference. The response is built in the
 * duda_request (status, headers, body) and handed to the server in one
 * go when it ends, so nothing a service does reaches the server's request
 * before it is complete or streamed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "duda_internal.h"
#include "qs.h"
#include "session_parse.h"

MK_PLUGIN_DECLARE(duda);

static bool duda_live(duda_request_t *dr, const char *what)
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

/* ---- gc -------------------------------------------------------------------- */

static int duda_gc_add(duda_request_t *dr, void *p)
{
    if (!dr) {
        duda_misuse(NULL, "gc->add() without a request");
        return -1;
    }
    struct duda_gc_item *it = malloc(sizeof(*it));
    if (!it) {
        return -1;
    }
    it->p = p;
    it->fn = free;
    it->next = dr->gc;
    dr->gc = it;
    return 0;
}

static int duda_gc_add_fn(duda_request_t *dr, void (*fn)(void *p), void *p)
{
    if (!fn || duda_gc_add(dr, p) != 0) {
        if (!fn) {
            duda_misuse(dr, "gc->add_fn() without a function");
        }
        return -1;
    }
    dr->gc->fn = fn;
    return 0;
}

static void *duda_gc_alloc(duda_request_t *dr, size_t size)
{
    void *p = calloc(1, size ? size : 1);
    if (!p || duda_gc_add(dr, p) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

char *duda_gc_strndup(duda_request_t *dr, const char *s, size_t n)
{
    char *p = duda_gc_alloc(dr, n + 1);
    if (p) {
        memcpy(p, s, n);
    }
    return p;
}

const struct duda_gc_api duda_gc_obj = {.size = sizeof(struct duda_gc_api),
                                        .alloc = duda_gc_alloc,
                                        .add = duda_gc_add,
                                        .add_fn = duda_gc_add_fn};

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
    duda_sessions_release(dr);
#endif
    free(dr);
}

void duda_request_unref(duda_request_t *dr)
{
    if (--dr->refs == 0) {
        duda_request_free(dr);
    }
}

static int duda_continue(struct mk_request *r, void *arg);

/* The request ended (after every request_done hook): the slot's cleanup. */
static void duda_request_end(void *ctx)
{
    duda_request_t *dr = ctx;
    struct duda_service *saved = duda_current;

    duda_current = dr->svc;
    bool had_timers = dr->timers != NULL;
    duda_timers_stop(dr);
    if (dr->end_cb) {
        dr->end_cb(dr);
    }
    dr->r = NULL;
    duda_current = saved;
    /* Its timers were the only ones to continue it: continue it now (a no-op then). */
    if (dr->waiting && had_timers && atomic_exchange(&dr->cont_done, 1) == 0) {
        duda_mk->resume(dr->susp, duda_continue, dr);
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

/* Hand the response's status and headers to the server. */
static int duda_commit_head(duda_request_t *dr)
{
    struct mk_request *r = dr->r;

    duda_mk->set_status(r, dr->status);
    for (struct duda_header *h = dr->headers; h; h = h->next) {
        if (duda_mk->add_header(r, h->name, h->value) != MK_OK) {
            return 503;
        }
    }
    if (dr->ctype) {
        duda_mk->set_content_type(r, dr->ctype);
    }
    return MK_OK;
}

/* Hand the finished response to the server. */
static int duda_commit(duda_request_t *dr)
{
    struct mk_request *r = dr->r;

    if (duda_commit_head(dr) != MK_OK) {
        return 503;
    }
    if (dr->upgraded) {
        return MK_OK; /* 101: the server sends the head alone */
    }
    if (dr->file_fd >= 0) {
        duda_mk->set_body_file(r, dr->file_fd, dr->file_off, dr->file_len);
        dr->file_fd = -1; /* the server closes it */
        return MK_OK;
    }
    if (dr->len) {
        duda_mk->set_body_owned(r, dr->body, dr->len);
        dr->body = NULL;
        dr->len = dr->cap = 0;
    }
    else {
        duda_mk->set_body_static(r, "", 0);
    }
    return MK_OK;
}

/* What the handler returns once the service's code returned. */
int duda_finish(duda_request_t *dr)
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
    int held = duda_session_hold(dr, duda_continue);
    if (held != 0) {
        return held > 0 ? MK_SUSPENDED : 503;
    }
#endif
    return duda_commit(dr);
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
    duda_service_enter(dr->svc);
    dr->called = true;
    cb(dr);
    duda_current = saved;
    duda_current_request = saved_dr;
}

int duda_handler(struct mk_request *r, void *arg)
{
    const struct duda_route *rt = arg;
    duda_request_t *dr = duda_mk->ctx_get(r, MK_PLUGIN_SELF(duda));

    if (!dr) {
        dr = duda_request_new(r, rt);
        if (!dr) {
            return 503;
        }
        atomic_fetch_add(&rt->svc->requests, 1);
        atomic_fetch_add_explicit(&duda_self()->requests, 1, memory_order_relaxed);
        if (!rt->stream && duda_has_body(r)) {
            size_t n;
            if (!duda_mk->body(r, &n)) {
                return MK_AGAIN; /* called again with the body read */
            }
        }
    }
    else if (dr->called) {
        return duda_finish(dr);
    }
#ifdef DUDA_HAVE_HIREDIS
    if (!rt->dashboard && duda_session_remote(dr)) {
        int rc = duda_session_prefetch(dr, duda_sessions_loaded);
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
        duda_dashboard(dr);
    }
    else {
        duda_call(dr, dr->route->cb);
    }
    return duda_finish(dr);
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
static int duda_continue(struct mk_request *r, void *arg)
{
    duda_request_t *dr = arg;

    dr->waiting = false;
    if (!r || !dr->r) {
        duda_request_unref(dr); /* the reference of wait() */
        return MK_OK;
    }
    int rc = duda_finish(dr);
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
    if (!duda_live(dr, "request->header_get") || !name) {
        return NULL;
    }
    const char *v = duda_mk->header(dr->r, name, &n);
    return v ? duda_gc_strndup(dr, v, n) : NULL;
}

static int duda_is_content_type(duda_request_t *dr, const char *type)
{
    size_t n;
    if (!duda_live(dr, "request->is_content_type") || !type) {
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
    if (!duda_live(dr, "request->body") || dr->route->stream) {
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
    int rc = duda_finish(dr);
    duda_request_unref(dr);
    return rc;
}

static int duda_body_stream(duda_request_t *dr,
                            void (*on_data)(duda_request_t *dr, const char *data, size_t len))
{
    if (!duda_live(dr, "request->body_stream")) {
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
    if (!duda_live(dr, "request->remote_addr")) {
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
};

/* ---- response --------------------------------------------------------------- */

/* May the service still change the response's head or body? */
static bool duda_writable(duda_request_t *dr, const char *what, bool head)
{
    if (!duda_live(dr, what)) {
        return false;
    }
    if (dr->ended) {
        duda_misuse(dr, "%s() after response->end()", what);
        return false;
    }
    if (head && dr->streaming) {
        duda_misuse(dr, "%s() after the first response->flush()", what);
        return false;
    }
    return true;
}

static int duda_http_status(duda_request_t *dr, int status)
{
    if (!duda_writable(dr, "response->http_status", true)) {
        return -1;
    }
    if (status < 200 || status > 599) {
        /* 1xx is no final answer; 101 comes with response->takeover */
        duda_misuse(dr, "response->http_status(%d): not a final HTTP status", status);
        return -1;
    }
    dr->status = status;
    return 0;
}

static bool duda_token(const char *s)
{
    if (!*s) {
        return false;
    }
    for (; *s; s++) {
        if ((unsigned char) *s <= ' ' || *s == ':' || *s == 0x7f) {
            return false;
        }
    }
    return true;
}

static bool duda_text(const char *s)
{
    for (; *s; s++) {
        if (*s == '\r' || *s == '\n' || *s == '\0') {
            return false;
        }
    }
    return true;
}

static int duda_http_header(duda_request_t *dr, const char *name, const char *value)
{
    if (!duda_writable(dr, "response->http_header", true)) {
        return -1;
    }
    if (!name || !value || !duda_token(name) || !duda_text(value)) {
        duda_misuse(dr, "response->http_header(): a bad name or a line break in the value");
        return -1;
    }
    struct duda_header *h = calloc(1, sizeof(*h));
    if (!h || !(h->name = strdup(name)) || !(h->value = strdup(value))) {
        if (h) {
            free(h->name);
        }
        free(h);
        return -1;
    }
    *dr->headers_tail = h;
    dr->headers_tail = &h->next;
    return 0;
}

static int duda_content_type(duda_request_t *dr, const char *type)
{
    if (!duda_writable(dr, "response->http_content_type", true)) {
        return -1;
    }
    if (!type || !duda_text(type)) {
        duda_misuse(dr, "response->http_content_type(): a bad type");
        return -1;
    }
    char *t = strdup(type);
    if (!t) {
        return -1;
    }
    free(dr->ctype);
    dr->ctype = t;
    return 0;
}

static int duda_print(duda_request_t *dr, const char *data, size_t len)
{
    if (!duda_writable(dr, "response->print", false)) {
        return -1;
    }
    if (dr->file_fd >= 0) {
        duda_misuse(dr, "response->print() after response->sendfile()");
        return -1;
    }
    if (len == 0) { /* nothing to copy, and dr->body may still be NULL */
        return 0;
    }
    if (dr->len + len > dr->cap) {
        size_t cap = dr->cap ? dr->cap : 512;
        while (cap < dr->len + len) {
            cap *= 2;
        }
        char *b = realloc(dr->body, cap);
        if (!b) {
            return -1;
        }
        dr->body = b;
        dr->cap = cap;
    }
    memcpy(dr->body + dr->len, data, len);
    dr->len += len;
    return 0;
}

static int duda_printf(duda_request_t *dr, const char *fmt, ...)
{
    char small[512];
    va_list ap;

    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) {
        return -1;
    }
    if ((size_t) n < sizeof(small)) {
        return duda_print(dr, small, (size_t) n);
    }
    char *big = malloc((size_t) n + 1);
    if (!big) {
        return -1;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t) n + 1, fmt, ap);
    va_end(ap);
    int rc = duda_print(dr, big, (size_t) n);
    free(big);
    return rc;
}

static int duda_sendfile_range(duda_request_t *dr, const char *path, off_t offset, size_t len)
{
    char full[PATH_MAX];
    struct stat st;

    if (!duda_writable(dr, "response->sendfile", true)) {
        return -1;
    }
    if (!path || dr->len || dr->file_fd >= 0) {
        duda_misuse(dr, "response->sendfile(): no path, or a body was already given");
        return -1;
    }
    if (path[0] != '/') {
        if (!dr->svc->datadir) {
            duda_misuse(dr, "response->sendfile(%s): relative, and the service has no DataDir",
                        path);
            return -1;
        }
        snprintf(full, sizeof(full), "%s/%s", dr->svc->datadir, path);
        path = full;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || offset < 0 ||
        offset > st.st_size) {
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    uint64_t avail = (uint64_t) (st.st_size - offset);
    dr->file_fd = fd;
    dr->file_off = offset;
    dr->file_len = len == 0 || len > avail ? avail : len;
    return 0;
}

static int duda_sendfile(duda_request_t *dr, const char *path)
{
    return duda_sendfile_range(dr, path, 0, 0);
}

static void duda_proceed(struct mk_request *r, void *arg)
{
    duda_request_t *dr = arg;

    if (!r) {
        dr->stream_ended = true;
        duda_request_unref(dr); /* the stream's reference */
    }
}

static int duda_flush(duda_request_t *dr)
{
    if (!duda_writable(dr, "response->flush", false)) {
        return DUDA_ERR;
    }
    if (dr->waiting || dr->file_fd >= 0) {
        duda_misuse(dr, "response->flush() while waiting or after sendfile()");
        return DUDA_ERR;
    }
    if (!dr->streaming) {
        if (duda_commit_head(dr) != MK_OK) {
            return DUDA_ERR;
        }
        if (duda_mk->stream_start(dr->r, duda_proceed, dr) != MK_OK) {
            duda_misuse(dr, "response->flush(): the server refused to stream");
            return DUDA_ERR;
        }
        dr->streaming = true;
        dr->refs++;
    }
    if (dr->stream_ended) {
        return DUDA_ERR;
    }
    int rc = MK_OK;
    if (dr->len) {
        rc = duda_mk->stream_write(dr->r, dr->body, dr->len);
        dr->len = 0;
    }
    return rc == MK_OK ? DUDA_OK : rc == MK_AGAIN ? DUDA_AGAIN : DUDA_ERR;
}

static int duda_wait(duda_request_t *dr)
{
    if (!duda_writable(dr, "response->wait", false)) {
        return -1;
    }
    if (dr->waiting || dr->streaming || !dr->called) {
        duda_misuse(dr, "response->wait(): already waiting or streaming");
        return -1;
    }
    dr->susp = duda_mk->suspend(dr->r);
    if (!dr->susp) {
        return -1;
    }
    atomic_store(&dr->cont_done, 0);
    dr->waiting = true;
    dr->refs++;
    return 0;
}

static int duda_cont(duda_request_t *dr)
{
    if (!dr) {
        duda_misuse(NULL, "response->cont() without a request");
        return -1;
    }
    if (!dr->susp || atomic_exchange(&dr->cont_done, 1) != 0) {
        return -1; /* not waiting, continued already, or gone */
    }
    duda_mk->resume(dr->susp, duda_continue, dr);
    return 0;
}

static int duda_end(duda_request_t *dr, void (*end_cb)(duda_request_t *dr))
{
    if (!dr) {
        duda_misuse(NULL, "response->end() without a request");
        return -1;
    }
    if (dr->ended) {
        duda_misuse(dr, "response->end() twice");
        return -1;
    }
    dr->ended = true;
    dr->end_cb = end_cb;
    if (dr->streaming && dr->r && !dr->stream_ended) {
        if (dr->len) {
            duda_mk->stream_write(dr->r, dr->body, dr->len);
            dr->len = 0;
        }
        dr->stream_ended = true;
        duda_mk->stream_end(dr->r, NULL);
        duda_request_unref(dr); /* the stream's reference: no proceed follows */
    }
    return 0;
}

const struct duda_response_api duda_response_obj = {
    .size = sizeof(struct duda_response_api),
    .http_status = duda_http_status,
    .http_header = duda_http_header,
    .http_content_type = duda_content_type,
    .print = duda_print,
    .printf = duda_printf,
    .sendfile = duda_sendfile,
    .sendfile_range = duda_sendfile_range,
    .flush = duda_flush,
    .wait = duda_wait,
    .cont = duda_cont,
    .end = duda_end,
    .takeover = duda_socket_takeover,
    .socket_write = duda_socket_write,
    .socket_close = duda_socket_close,
    .socket_remote_addr = duda_socket_remote_addr,
};

/* ---- router ----------------------------------------------------------------- */

static struct duda_route *duda_route_new(const char *what)
{
    struct duda_service *svc = duda_current;

    if (!svc || svc->workers) {
        duda_misuse(NULL, "router->%s() outside duda_main()", what);
        return NULL;
    }
    if (svc->map_err[0]) {
        return NULL;
    }
    if (svc->n_routes == svc->cap_routes) {
        size_t cap = svc->cap_routes ? svc->cap_routes * 2 : 8;
        struct duda_route *v = realloc(svc->routes, cap * sizeof(*v));
        if (!v) {
            snprintf(svc->map_err, sizeof(svc->map_err), "out of memory");
            return NULL;
        }
        svc->routes = v;
        svc->cap_routes = cap;
    }
    struct duda_route *rt = &svc->routes[svc->n_routes++];
    *rt = (struct duda_route){.svc = svc};
    return rt;
}

static int duda_map_as(const char *pattern, uint32_t methods, duda_callback_t cb, bool stream,
                       bool dashboard)
{
    struct duda_service *svc = duda_current;
    char err[256];

    if (svc && !svc->workers && !svc->map_err[0]) {
        if (duda_router_check(pattern, methods, err, sizeof(err)) != MK_OK) {
            snprintf(svc->map_err, sizeof(svc->map_err), "%s", err);
            return -1;
        }
        if (!cb && !dashboard) {
            snprintf(svc->map_err, sizeof(svc->map_err), "route '%s': no callback", pattern);
            return -1;
        }
    }
    struct duda_route *rt = duda_route_new("map");
    if (!rt) {
        return -1;
    }
    snprintf(rt->pattern, sizeof(rt->pattern), "%s", pattern);
    rt->methods = methods;
    rt->cb = cb;
    rt->stream = stream;
    rt->dashboard = dashboard;
    return 0;
}

static int duda_map(const char *pattern, uint32_t methods, duda_callback_t cb)
{
    return duda_map_as(pattern, methods, cb, false, false);
}

static int duda_map_stream(const char *pattern, uint32_t methods, duda_callback_t cb)
{
    return duda_map_as(pattern, methods, cb, true, false);
}

static int duda_root(duda_callback_t cb)
{
    if (duda_map_as("/", MK_ROUTE_GET | MK_ROUTE_HEAD, cb, false, false) != 0) {
        return -1;
    }
    duda_current->routes[duda_current->n_routes - 1].root = true;
    return 0;
}

int duda_console_map(const char *path);
int duda_console_map(const char *path)
{
    return duda_map_as(path, MK_ROUTE_GET | MK_ROUTE_HEAD, NULL, false, true);
}

const struct duda_router_api duda_router_obj = {
    .size = sizeof(struct duda_router_api),
    .map = duda_map,
    .map_stream = duda_map_stream,
    .root = duda_root,
};

/* ---- param ------------------------------------------------------------------ */

static const char *duda_param_get(duda_request_t *dr, const char *name)
{
    size_t n;
    if (!duda_live(dr, "param->get") || !name) {
        return NULL;
    }
    const char *v = duda_mk->route_param(dr->r, name, &n);
    return v ? duda_gc_strndup(dr, v, n) : NULL;
}

static int duda_param_number(duda_request_t *dr, const char *name, long *out)
{
    const char *v = duda_param_get(dr, name);
    char *end;

    if (!v || !*v) {
        return -1;
    }
    errno = 0;
    long x = strtol(v, &end, 10);
    if (*end || errno) {
        return -1;
    }
    *out = x;
    return 0;
}

const struct duda_param_api duda_param_obj = {
    .size = sizeof(struct duda_param_api), .get = duda_param_get, .get_number = duda_param_number};

/* ---- qs --------------------------------------------------------------------- */

/* The value of query key `key` of dr's request (a span into the query), or NULL. */
static const char *duda_qs_value(duda_request_t *dr, const char *key, size_t *len)
{
    size_t qn;
    const char *q = duda_mk->query(dr->r, &qn);

    return duda_qs_find(q, q ? qn : 0, key, strlen(key), len);
}

static const char *duda_qs_raw(duda_request_t *dr, const char *key, size_t *len)
{
    if (!duda_live(dr, "qs->get_raw") || !key) {
        return NULL;
    }
    return duda_qs_value(dr, key, len);
}

static const char *duda_qs_get(duda_request_t *dr, const char *key)
{
    size_t n;
    if (!duda_live(dr, "qs->get") || !key) {
        return NULL;
    }
    const char *v = duda_qs_value(dr, key, &n);
    if (!v) {
        return NULL;
    }
    char *out = duda_gc_alloc(dr, n + 1);
    if (!out) {
        return NULL;
    }
    out[duda_qs_decode(v, n, out)] = '\0';
    return out;
}

static int duda_qs_count_get(duda_request_t *dr)
{
    size_t qn;
    if (!duda_live(dr, "qs->count")) {
        return 0;
    }
    const char *q = duda_mk->query(dr->r, &qn);
    size_t count = duda_qs_count(q, q ? qn : 0);
    return count > INT_MAX ? INT_MAX : (int) count;
}

const struct duda_qs_api duda_qs_obj = {.size = sizeof(struct duda_qs_api),
                                        .get = duda_qs_get,
                                        .get_raw = duda_qs_raw,
                                        .count = duda_qs_count_get};

/* ---- cookie ----------------------------------------------------------------- */

static bool duda_cookie_value_ok(const char *v)
{
    for (; *v; v++) {
        unsigned char c = (unsigned char) *v;
        if (c <= ' ' || c == '"' || c == ',' || c == ';' || c == '\\' || c >= 0x7f) {
            return false;
        }
    }
    return true;
}

static int duda_cookie_set(duda_request_t *dr, const char *name, const char *value, long expires,
                           unsigned flags)
{
    char buf[4096], date[40];

    if (!duda_writable(dr, "cookie->set", true)) {
        return -1;
    }
    if (!name || !value || !duda_token(name) || strpbrk(name, "()<>@,;\\\"/[]?={}") ||
        !duda_cookie_value_ok(value)) {
        duda_misuse(dr, "cookie->set(): a bad name or value");
        return -1;
    }
    if ((flags & DUDA_COOKIE_SAMESITE_NONE) && !(flags & DUDA_COOKIE_SECURE)) {
        duda_misuse(dr, "cookie->set(%s): SameSite=None needs Secure", name);
        return -1;
    }
    int n = snprintf(buf, sizeof(buf), "%s=%s; Path=/", name, value);
    if (expires != 0) {
        time_t when = time(NULL) + expires;
        duda_xtime_obj.http_date(when, date, sizeof(date));
        n += snprintf(buf + n, sizeof(buf) - (size_t) n, "; Expires=%s; Max-Age=%ld", date,
                      expires < 0 ? 0 : expires);
    }
    if ((size_t) n >= sizeof(buf) - 64) {
        duda_misuse(dr, "cookie->set(%s): too long", name);
        return -1;
    }
    const char *ss = flags & DUDA_COOKIE_SAMESITE_STRICT ? "; SameSite=Strict"
                     : flags & DUDA_COOKIE_SAMESITE_LAX  ? "; SameSite=Lax"
                     : flags & DUDA_COOKIE_SAMESITE_NONE ? "; SameSite=None"
                                                         : "";
    snprintf(buf + n, sizeof(buf) - (size_t) n, "%s%s%s", ss,
             flags & DUDA_COOKIE_SECURE ? "; Secure" : "",
             flags & DUDA_COOKIE_HTTPONLY ? "; HttpOnly" : "");
    return duda_http_header(dr, "Set-Cookie", buf);
}

static const char *duda_cookie_get(duda_request_t *dr, const char *name)
{
    size_t n, vn;
    if (!duda_live(dr, "cookie->get") || !name) {
        return NULL;
    }
    const char *h = duda_mk->header(dr->r, "Cookie", &n);
    const char *v = h ? duda_cookie_find(h, n, name, strlen(name), &vn) : NULL;
    return v ? duda_gc_strndup(dr, v, vn) : NULL;
}

static int duda_cookie_destroy(duda_request_t *dr, const char *name)
{
    return duda_cookie_set(dr, name, "deleted", -1, 0);
}

const struct duda_cookie_api duda_cookie_obj = {.size = sizeof(struct duda_cookie_api),
                                                .set = duda_cookie_set,
                                                .get = duda_cookie_get,
                                                .destroy = duda_cookie_destroy};

/* ---- the service's static files --------------------------------------------- */

static const char *duda_mime(const char *path)
{
    static const char *const table[][2] = {
        {".html", "text/html"},      {".htm", "text/html"},         {".css", "text/css"},
        {".js", "text/javascript"},  {".json", "application/json"}, {".txt", "text/plain"},
        {".png", "image/png"},       {".jpg", "image/jpeg"},        {".jpeg", "image/jpeg"},
        {".gif", "image/gif"},       {".svg", "image/svg+xml"},     {".ico", "image/x-icon"},
        {".xml", "application/xml"}, {".wasm", "application/wasm"}, {".pdf", "application/pdf"},
    };
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof(table) / sizeof(table[0]); i++) {
        if (!strcasecmp(dot, table[i][0])) {
            return table[i][1];
        }
    }
    return "application/octet-stream";
}

/* Open rel beneath the service's DocumentRoot, following no symbolic link. */
static int duda_open_beneath(int dirfd, const char *rel)
{
    char buf[PATH_MAX];
    int fd = dup(dirfd);

    snprintf(buf, sizeof(buf), "%s", rel);
    char *save = NULL;
    for (char *seg = strtok_r(buf, "/", &save); seg && fd >= 0; seg = strtok_r(NULL, "/", &save)) {
        int next = openat(fd, seg, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        close(fd);
        fd = next;
    }
    return fd;
}

int duda_static(struct mk_request *r, void *arg)
{
    const struct duda_service *svc = arg;
    char rel[PATH_MAX];
    struct stat st;
    size_t n;

    const char *p = duda_mk->path(r, &n);
    size_t skip = svc->root ? 0 : strlen(svc->name) + 1;
    if (n < skip || n - skip >= sizeof(rel) - 16) {
        return MK_DECLINED;
    }
    memcpy(rel, p + skip, n - skip);
    rel[n - skip] = '\0';
    if (rel[0] == '\0' || rel[strlen(rel) - 1] == '/') {
        strcat(rel, "index.html");
    }
    for (const char *s = rel; *s; s++) {
        if ((s == rel || s[-1] == '/') && s[0] == '.' && strncmp(s, ".well-known/", 12) != 0) {
            return MK_DECLINED; /* hidden names are never served from a service */
        }
    }
    int fd = duda_open_beneath(svc->docroot_fd, rel);
    if (fd < 0) {
        return MK_DECLINED;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return MK_DECLINED;
    }
    duda_mk->set_status(r, 200);
    duda_mk->set_content_type(r, duda_mime(rel));
    duda_mk->set_body_file(r, fd, 0, (uint64_t) st.st_size);
    return MK_OK;
}
