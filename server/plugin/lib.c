/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * lib.c: the program's own handlers (include/monkey/mk_lib.h).
 *
 * The program's sites and routes live in srv->lib. Every configuration the
 * server builds gets those sites (mk_lib_configure) and loads the internal
 * plugin "lib" (mk_lib_plugin), whose routes hook registers the routes in
 * each site's route table, so the program's handlers run exactly where a
 * plugin's route handler would: on the workers, after the request hooks.
 *
 * One `struct mk_http` per request a handler took, kept in the plugin's
 * context slot of the request. It is built on the plugin API (suspend and
 * resume, response streams, body streams, worker calls) and owned by
 * counted references: the program's (from the handler to mk_http_done),
 * the request's (until the request ends: its slot's cleanup), a response
 * stream's (until proceed(NULL) or an ended stream's request end), a body
 * stream's (until END or ABORT), and one per posted call in flight. The
 * last one frees it, so a late mk_http_post() or mk_http_done() never
 * touches freed memory.
 *
 * Threads: everything but mk_http_post() and mk_http_gone() runs on the
 * request's worker; posts are queued under the handle's lock and run by a
 * worker call; a parked request is resumed first, so a post always runs
 * where the request may still be answered (the continuation of the hook).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <monkey/monkey.h>

#include "../../core/log.h"
#include "../../core/strings.h"
#include "lib.h"
#include "../process/server.h"

#define ERRF(...) snprintf(err, errlen, __VA_ARGS__)

/* Bytes a handler may send before its answer becomes a stream. */
#define MK_LIB_WHOLE_MAX (64 * 1024)

struct mk_lib_site {
    char *names; /* as given: space separated */
    char *docroot;
};

struct mk_lib_route {
    struct mk_server *srv;
    char *site; /* NULL: every site */
    uint32_t methods;
    char *pattern;
    mk_http_cb cb;
    void *data;
};

struct mk_lib {
    struct mk_lib_site *sites;
    size_t n_sites;
    struct mk_lib_route **routes;
    size_t n_routes;
    atomic_uint next_worker; /* mk_server_post(-1) */
};

/* A function queued by mk_http_post(). */
struct mk_lib_post {
    mk_http_post_cb fn;
    void *arg;
    struct mk_lib_post *next;
};

enum mk_lib_body {
    MK_LIB_BODY_NONE = 0,
    MK_LIB_BODY_WHOLE, /* asked for: the handler runs again once it is read */
    MK_LIB_BODY_STREAM,
    MK_LIB_BODY_STARTED, /* the server reads it */
};

struct mk_http {
    struct mk_request *r;     /* NULL once the request ended */
    struct mk_worker *worker; /* compared, never followed: freed at the server's stop */
    int worker_id;
    struct mk_server *srv;
    struct mk_lib_route *route;
    atomic_uint refs;
    atomic_bool gone;

    pthread_mutex_t lock; /* guards the post queue */
    struct mk_lib_post *head, *tail;

    struct mk_suspended *susp; /* parked: the handle to resume */
    bool answering;            /* in the handler or a continuation: may start a stream */
    bool done;                 /* mk_http_done() was called */
    bool streaming;            /* the response is a stream */
    bool stream_ended;         /* ... and stream_end() took its end */
    bool stream_ref;           /* the stream holds a reference */
    enum mk_lib_body body;
    mk_http_body_cb body_cb;
    void *body_arg;
    size_t body_window;
    mk_http_writable_cb writable;
    void *writable_arg;
    char *buf; /* the answer so far, while it is not a stream (malloc) */
    size_t len, cap;
};

static const struct mk_api *api = &mk_plugin_api;

/* ---- references ---------------------------------------------------------- */

static void mk_http_ref(struct mk_http *h)
{
    atomic_fetch_add(&h->refs, 1);
}

static void mk_http_unref(struct mk_http *h)
{
    if (atomic_fetch_sub(&h->refs, 1) != 1) {
        return;
    }
    while (h->head) {
        struct mk_lib_post *p = h->head;
        h->head = p->next;
        free(p);
    }
    pthread_mutex_destroy(&h->lock);
    free(h->buf);
    free(h);
}

/* True on h's worker while the request lives: the answer calls may run. */
static bool mk_http_here(const struct mk_http *h)
{
    return mk_loop_worker() == h->worker && h->r;
}

/* ---- the internal plugin --------------------------------------------------- */

static int mk_lib_route_run(struct mk_request *r, void *arg);

/* Is `name` one of the names of `site`? */
static bool mk_lib_site_named(const struct mk_site *site, const char *name)
{
    const char *n;

    for (unsigned i = 0; (n = api->site_name(site, i)) != NULL; i++) {
        if (strcasecmp(n, name) == 0) {
            return true;
        }
    }
    return false;
}

static int mk_lib_add(struct mk_route_table *t, struct mk_lib_route *rt, char *err, size_t errlen)
{
    char why[256];

    if (api->route_table_add(t, rt->methods, rt->pattern, mk_lib_route_run, rt, why, sizeof(why)) !=
        MK_OK) {
        ERRF("mk_server_route: route '%s'%s%s: %s", rt->pattern, rt->site ? " of site " : "",
             rt->site ? rt->site : "", why);
        return MK_ERR;
    }
    return MK_OK;
}

/*
 * The routes of `site` (those of every site, and those naming it), for
 * each configuration built: a reload registers the routes added since.
 * Every site's are added per site too (not with site NULL), since the
 * program may add routes between configurations.
 */
static int mk_lib_routes(const struct mk_site *site, struct mk_route_table *t, char *err,
                         size_t errlen)
{
    struct mk_server *srv = mk_plugins_server();

    if (!site || !srv || !srv->lib) {
        return MK_OK;
    }
    for (size_t i = 0; i < srv->lib->n_routes; i++) {
        struct mk_lib_route *rt = srv->lib->routes[i];
        if ((!rt->site || mk_lib_site_named(site, rt->site)) &&
            mk_lib_add(t, rt, err, errlen) != MK_OK) {
            return MK_ERR;
        }
    }
    return MK_OK;
}

const struct mk_plugin mk_lib_plugin = {
    MK_PLUGIN_ABI_INIT,
    .name = "lib",
    .version = MK_VERSION_STR,
    .description = "the embedding program's handlers (monkey.h, mk_lib.h)",
    .routes = mk_lib_routes,
};

/* ---- the request's side ----------------------------------------------------- */

static int mk_lib_resume(struct mk_request *r, void *arg);
static void mk_lib_drain(struct mk_http *h);

/* The request ended (its context slot's cleanup, on the worker). */
static void mk_lib_request_gone(void *ctx)
{
    struct mk_http *h = ctx;

    h->r = NULL;
    atomic_store(&h->gone, true);
    if (h->susp) {
        /* Parked when it ended: hand the handle back so the request can go;
           the continuation (r NULL) runs what was posted. */
        struct mk_suspended *s = h->susp;
        h->susp = NULL;
        mk_http_ref(h);
        api->resume(s, mk_lib_resume, h);
    }
    else {
        mk_lib_drain(h); /* posts that waited for a body's END see the request gone */
    }
    if (h->stream_ref && h->stream_ended) {
        h->stream_ref = false; /* no proceed(NULL) follows an ended stream */
        mk_http_unref(h);
    }
    mk_http_unref(h);
}

static struct mk_http *mk_lib_http_new(struct mk_request *r, struct mk_lib_route *rt)
{
    struct mk_http *h = calloc(1, sizeof(*h));

    if (!h) {
        return NULL;
    }
    h->r = r;
    h->worker = mk_loop_worker();
    h->worker_id = h->worker->id;
    h->srv = rt->srv;
    h->route = rt;
    atomic_init(&h->refs, 2); /* the program's and the request's */
    pthread_mutex_init(&h->lock, NULL);
    if (api->ctx_set(r, &mk_lib_plugin, h, mk_lib_request_gone) != MK_OK) {
        pthread_mutex_destroy(&h->lock);
        free(h);
        return NULL;
    }
    return h;
}

/* Take the oldest posted function, NULL when none is left. */
static struct mk_lib_post *mk_lib_post_pop(struct mk_http *h)
{
    pthread_mutex_lock(&h->lock);
    struct mk_lib_post *p = h->head;
    if (p) {
        h->head = p->next;
        if (!h->head) {
            h->tail = NULL;
        }
    }
    pthread_mutex_unlock(&h->lock);
    return p;
}

static bool mk_lib_post_waiting(struct mk_http *h)
{
    pthread_mutex_lock(&h->lock);
    bool waiting = h->head != NULL;
    pthread_mutex_unlock(&h->lock);
    return waiting;
}

/* Run every posted function, in order (on the worker, or at the server's stop). */
static void mk_lib_drain(struct mk_http *h)
{
    struct mk_lib_post *p;

    while ((p = mk_lib_post_pop(h)) != NULL) {
        p->fn(h, p->arg);
        free(p);
    }
}

static int mk_lib_body_start(struct mk_http *h);
static int mk_lib_stream(struct mk_http *h);
static void mk_lib_call(void *arg);

/* Have the worker run what is posted, from its loop (a worker call). */
static void mk_lib_kick(struct mk_http *h)
{
    if (!mk_lib_post_waiting(h)) {
        return;
    }
    mk_http_ref(h);
    if (mk_worker_call(h->srv, h->worker_id, mk_lib_call, h) != MK_OK) {
        mk_http_unref(h); /* stopping: the request's end runs them */
    }
}

/*
 * The end of a call into the program that may answer (the handler, a
 * continuation, the body's END): what the hook returns to the server.
 */
static int mk_lib_result(struct mk_http *h)
{
    struct mk_request *r = h->r;

    if (h->body == MK_LIB_BODY_WHOLE) {
        h->body = MK_LIB_BODY_STARTED;
        return MK_AGAIN; /* the server reads the body and runs the handler again */
    }
    if (h->body == MK_LIB_BODY_STREAM) {
        return mk_lib_body_start(h);
    }
    while (!h->streaming && !h->done && mk_lib_post_waiting(h)) {
        h->answering = true;
        mk_lib_drain(h);
        h->answering = false;
    }
    if (h->streaming || h->done) {
        mk_lib_kick(h); /* posts that waited for a body's END */
    }
    if (h->streaming) {
        return MK_OK;
    }
    if (h->done && h->len == 0) {
        api->set_body_static(r, "", 0);
        return MK_OK;
    }
    if (h->done) {
        api->set_body_owned(r, h->buf, h->len);
        h->buf = NULL;
        h->len = h->cap = 0;
        return MK_OK;
    }
    if (h->len) {
        /* Sent without done, and the call returned: the rest comes later. */
        return mk_lib_stream(h) == MK_ERR ? 500 : MK_OK;
    }
    h->susp = api->suspend(r);
    return h->susp ? MK_SUSPENDED : 503;
}

/* A streamed request body's event (api->body_stream). */
static int mk_lib_body_event(struct mk_request *r, int event, const char *data, size_t len,
                             void *arg)
{
    struct mk_http *h = arg;
    int rc;

    (void) r;
    if (event == MK_BODY_DATA) {
        rc = h->body_cb(h, MK_HTTP_BODY_DATA, data, len, h->body_arg);
        if (rc == MK_OK || rc == MK_AGAIN) {
            return rc;
        }
        mk_http_unref(h); /* no further call */
        return rc >= 400 && rc <= 599 ? rc : MK_ERR;
    }
    if (event == MK_BODY_ABORT) {
        atomic_store(&h->gone, true);
        h->body_cb(h, MK_HTTP_BODY_ABORT, NULL, 0, h->body_arg);
        mk_http_unref(h);
        return MK_ERR;
    }
    h->answering = true;
    h->body_cb(h, MK_HTTP_BODY_END, NULL, 0, h->body_arg);
    h->answering = false;
    rc = mk_lib_result(h);
    mk_http_unref(h);
    return rc;
}

/* Start reading a streamed body; MK_AGAIN for the hook, or an error status. */
static int mk_lib_body_start(struct mk_http *h)
{
    h->body = MK_LIB_BODY_STARTED;
    mk_http_ref(h);
    if (api->body_stream(h->r, h->body_window, mk_lib_body_event, h) != MK_OK) {
        mk_http_unref(h);
        return 500;
    }
    return MK_AGAIN;
}

/* The route's handler: the program's callback, then what its calls decided. */
static int mk_lib_route_run(struct mk_request *r, void *arg)
{
    struct mk_lib_route *rt = arg;
    struct mk_http *h = api->ctx_get(r, &mk_lib_plugin);

    if (!h) {
        h = mk_lib_http_new(r, rt);
        if (!h) {
            return 503;
        }
    }
    h->answering = true;
    rt->cb(h, rt->data);
    h->answering = false;
    return mk_lib_result(h);
}

/* The continuation of a parked request: run what was posted, then decide again. */
static int mk_lib_resume(struct mk_request *r, void *arg)
{
    struct mk_http *h = arg;
    int rc = MK_ERR;

    if (!r) {
        mk_lib_drain(h); /* the request is gone: the functions see it so */
        mk_http_unref(h);
        return MK_ERR;
    }
    h->answering = true;
    mk_lib_drain(h);
    h->answering = false;
    rc = mk_lib_result(h);
    mk_http_unref(h);
    return rc;
}

/* A worker call of mk_http_post(): resume a parked request, else run the posts. */
static void mk_lib_call(void *arg)
{
    struct mk_http *h = arg;

    if (mk_loop_worker() != h->worker) {
        h->r = NULL; /* the server stops: nothing can be answered any more */
        atomic_store(&h->gone, true);
    }
    if (h->susp) {
        struct mk_suspended *s = h->susp;
        h->susp = NULL;
        api->resume(s, mk_lib_resume, h); /* our reference goes with it */
        return;
    }
    if (!h->r || h->streaming || h->done) {
        mk_lib_drain(h);
    }
    /* else: in the handler's body wait; mk_lib_result() runs them at the END */
    mk_http_unref(h);
}

/* The response stream's queue drained (r NULL: the request is gone). */
static void mk_lib_proceed(struct mk_request *r, void *arg)
{
    struct mk_http *h = arg;

    if (!r) {
        atomic_store(&h->gone, true);
        if (h->writable && !h->done) {
            h->writable(h, h->writable_arg);
        }
        if (h->stream_ref) {
            h->stream_ref = false;
            mk_http_unref(h);
        }
        return;
    }
    if (h->writable && !h->done) {
        h->writable(h, h->writable_arg);
    }
}

/* Make the answer a stream, with what was sent so far as its first piece. */
static int mk_lib_stream(struct mk_http *h)
{
    if (api->stream_start(h->r, mk_lib_proceed, h) != MK_OK) {
        return MK_ERR;
    }
    h->streaming = true;
    h->stream_ref = true;
    mk_http_ref(h);
    int rc = h->len ? api->stream_write(h->r, h->buf, h->len) : MK_OK;
    free(h->buf);
    h->buf = NULL;
    h->len = h->cap = 0;
    return rc;
}

/* ---- the program's calls ------------------------------------------------------- */

const char *mk_http_method(const struct mk_http *h, size_t *len)
{
    size_t ignored;

    return mk_http_here(h) ? api->method(h->r, len ? len : &ignored) : NULL;
}

const char *mk_http_path(const struct mk_http *h, size_t *len)
{
    size_t ignored;

    return mk_http_here(h) ? api->path(h->r, len ? len : &ignored) : NULL;
}

const char *mk_http_query(const struct mk_http *h, size_t *len)
{
    size_t ignored;

    return mk_http_here(h) ? api->query(h->r, len ? len : &ignored) : NULL;
}

const char *mk_http_request_header(const struct mk_http *h, const char *name, size_t *len)
{
    size_t ignored;

    return mk_http_here(h) ? api->header(h->r, name, len ? len : &ignored) : NULL;
}

int mk_http_request_header_at(const struct mk_http *h, unsigned i, const char **name,
                              size_t *name_len, const char **value, size_t *value_len)
{
    if (!mk_http_here(h) || i >= api->header_count(h->r)) {
        return MK_ERR;
    }
    return api->header_at(h->r, i, name, name_len, value, value_len);
}

const char *mk_http_param(const struct mk_http *h, const char *name, size_t *len)
{
    size_t ignored;

    return mk_http_here(h) ? api->route_param(h->r, name, len ? len : &ignored) : NULL;
}

const char *mk_http_body(const struct mk_http *h, size_t *len)
{
    size_t ignored;

    return mk_http_here(h) ? api->body(h->r, len ? len : &ignored) : NULL;
}

int mk_http_read_body(struct mk_http *h, mk_http_body_cb cb, void *arg, size_t window)
{
    if (!mk_http_here(h) || !h->answering || h->body != MK_LIB_BODY_NONE || h->done ||
        h->streaming) {
        return MK_ERR;
    }
    h->body = cb ? MK_LIB_BODY_STREAM : MK_LIB_BODY_WHOLE;
    h->body_cb = cb;
    h->body_arg = arg;
    h->body_window = window;
    return MK_OK;
}

int mk_http_body_consume(struct mk_http *h, size_t n)
{
    return mk_http_here(h) ? api->body_consume(h->r, n) : MK_ERR;
}

int mk_http_status(struct mk_http *h, int status)
{
    if (!mk_http_here(h) || h->streaming || status < 100 || status > 599) {
        return MK_ERR;
    }
    api->set_status(h->r, status);
    return MK_OK;
}

int mk_http_header(struct mk_http *h, const char *name, const char *value)
{
    if (!mk_http_here(h) || h->streaming || !name || !value) {
        return MK_ERR;
    }
    if (strcasecmp(name, "Content-Type") == 0) {
        if (strpbrk(value, "\r\n")) {
            return MK_ERR; /* no header lines smuggled in */
        }
        api->set_content_type(h->r, value);
        return MK_OK;
    }
    return api->add_header(h->r, name, value);
}

/* Keep `len` more bytes of a whole answer; false when memory is short. */
static bool mk_lib_buffer(struct mk_http *h, const void *data, size_t len)
{
    if (h->len + len > h->cap) {
        size_t cap = h->cap ? h->cap : 1024;
        while (cap < h->len + len) {
            cap *= 2;
        }
        char *buf = realloc(h->buf, cap);
        if (!buf) {
            return false;
        }
        h->buf = buf;
        h->cap = cap;
    }
    memcpy(h->buf + h->len, data, len);
    h->len += len;
    return true;
}

int mk_http_send(struct mk_http *h, const void *data, size_t len)
{
    if (!mk_http_here(h) || h->done) {
        return MK_ERR;
    }
    if (h->streaming) {
        return api->stream_write(h->r, data, len);
    }
    if (!h->answering) {
        return MK_ERR; /* a body callback's DATA: answer at END */
    }
    if (h->len + len <= MK_LIB_WHOLE_MAX) {
        return mk_lib_buffer(h, data, len) ? MK_OK : MK_ERR;
    }
    /* One piece of what was kept and this: a queue at its mark takes no second one. */
    if (!mk_lib_buffer(h, data, len)) {
        return MK_ERR;
    }
    return mk_lib_stream(h);
}

int mk_http_on_writable(struct mk_http *h, mk_http_writable_cb cb, void *arg)
{
    if (!mk_http_here(h)) {
        return MK_ERR;
    }
    h->writable = cb;
    h->writable_arg = arg;
    return MK_OK;
}

int mk_http_done(struct mk_http *h)
{
    if (mk_loop_worker() != h->worker) {
        if (!atomic_load(&h->gone)) {
            return MK_ERR;
        }
        mk_http_unref(h); /* the program's reference; the request's is gone */
        return MK_OK;
    }
    if (h->done) {
        return MK_ERR;
    }
    if (!h->r) {
        h->done = true;
        mk_http_unref(h);
        return MK_OK;
    }
    if (h->streaming) {
        h->stream_ended = api->stream_end(h->r, NULL) == MK_OK;
    }
    else if (!h->answering || h->body == MK_LIB_BODY_WHOLE || h->body == MK_LIB_BODY_STREAM) {
        return MK_ERR; /* a body callback's DATA, or a body asked for: answer at END */
    }
    h->done = true;
    mk_http_unref(h); /* the request's reference keeps h until the hook returns */
    return MK_OK;
}

int mk_http_post(struct mk_http *h, mk_http_post_cb fn, void *arg)
{
    struct mk_lib_post *p = malloc(sizeof(*p));

    if (!p || !fn) {
        free(p);
        return MK_ERR;
    }
    p->fn = fn;
    p->arg = arg;
    p->next = NULL;
    mk_http_ref(h);
    pthread_mutex_lock(&h->lock);
    if (h->tail) {
        h->tail->next = p;
    }
    else {
        h->head = p;
    }
    h->tail = p;
    pthread_mutex_unlock(&h->lock);
    if (mk_worker_call(h->srv, h->worker_id, mk_lib_call, h) != MK_OK) {
        /* Not running: take it back (it is the last one queued, or already run). */
        pthread_mutex_lock(&h->lock);
        struct mk_lib_post **pp = &h->head, *prev = NULL;
        while (*pp && *pp != p) {
            prev = *pp;
            pp = &(*pp)->next;
        }
        bool found = *pp == p;
        if (found) {
            *pp = p->next;
            if (h->tail == p) {
                h->tail = prev;
            }
        }
        pthread_mutex_unlock(&h->lock);
        if (found) {
            free(p);
        }
        mk_http_unref(h);
        return MK_ERR;
    }
    return MK_OK;
}

int mk_http_gone(const struct mk_http *h)
{
    return atomic_load(&h->gone);
}

const char *mk_server_version(void)
{
    return MK_VERSION_STR;
}

/* ---- sites and routes ---------------------------------------------------------- */

static struct mk_lib *mk_lib_get(struct mk_server *srv)
{
    if (!srv->lib) {
        srv->lib = mk_calloc(1, sizeof(*srv->lib));
    }
    return srv->lib;
}

int mk_server_site(struct mk_server *srv, const char *names, const char *docroot)
{
    if (!names || !docroot || !docroot[0] || strspn(names, " \t") == strlen(names)) {
        return MK_ERR;
    }
    struct mk_lib *lib = mk_lib_get(srv);
    lib->sites = mk_realloc(lib->sites, (lib->n_sites + 1) * sizeof(*lib->sites));
    lib->sites[lib->n_sites].names = mk_strdup(names);
    lib->sites[lib->n_sites].docroot = mk_strdup(docroot);
    lib->n_sites++;
    return MK_OK;
}

int mk_server_route(struct mk_server *srv, const char *site, uint32_t methods, const char *pattern,
                    mk_http_cb cb, void *data)
{
    if (!cb || !methods || !pattern) {
        return MK_ERR;
    }
    struct mk_lib *lib = mk_lib_get(srv);
    struct mk_lib_route *rt = mk_calloc(1, sizeof(*rt));
    rt->srv = srv;
    rt->site = site ? mk_strdup(site) : NULL;
    rt->methods = methods;
    rt->pattern = mk_strdup(pattern);
    rt->cb = cb;
    rt->data = data;
    lib->routes = mk_realloc(lib->routes, (lib->n_routes + 1) * sizeof(*lib->routes));
    lib->routes[lib->n_routes++] = rt;
    return MK_OK;
}

int mk_server_post(struct mk_server *srv, int worker, void (*fn)(void *arg), void *arg)
{
    if (!fn || !srv->running || srv->n_workers <= 0) {
        return MK_ERR;
    }
    if (worker < 0) {
        worker =
            (int) (atomic_fetch_add(&mk_lib_get(srv)->next_worker, 1) % (unsigned) srv->n_workers);
    }
    return mk_worker_call(srv, worker, fn, arg);
}

const char *mk_lib_first_docroot(const struct mk_server *srv)
{
    return srv->lib && srv->lib->n_sites ? srv->lib->sites[0].docroot : NULL;
}

/* Set the names of site `vh` from `names` (space separated); false if one is taken. */
static bool mk_lib_site_names(struct mk_config *cfg, struct mk_site *vh, const char *names,
                              char *err, size_t errlen)
{
    char *copy = mk_strdup(names), *save = NULL;

    for (char *w = strtok_r(copy, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        for (char *c = w; *c; c++) {
            *c = mk_tolower(*c);
        }
        for (size_t k = 0; k < cfg->n_sites; k++) {
            for (size_t j = 0; j < cfg->sites[k]->n_names; j++) {
                if (strcmp(cfg->sites[k]->names[j], w) == 0) {
                    ERRF("mk_server_site: the name '%s' is already used by %s", w,
                         cfg->sites[k]->file);
                    mk_free(copy);
                    return false;
                }
            }
        }
        vh->names = mk_realloc(vh->names, (vh->n_names + 1) * sizeof(*vh->names));
        vh->names[vh->n_names++] = mk_strdup(w);
    }
    mk_free(copy);
    return true;
}

/* Does a site of cfg have the name `name`? */
static bool mk_lib_cfg_has_site(const struct mk_config *cfg, const char *name)
{
    for (size_t k = 0; k < cfg->n_sites; k++) {
        for (size_t j = 0; j < cfg->sites[k]->n_names; j++) {
            if (strcasecmp(cfg->sites[k]->names[j], name) == 0) {
                return true;
            }
        }
    }
    return false;
}

/* Append the program's site `s` to cfg (or name the default site it made). */
static int mk_lib_add_site(struct mk_server *srv, struct mk_config *cfg, size_t i, char *err,
                           size_t errlen)
{
    const struct mk_lib_site *s = &srv->lib->sites[i];
    struct mk_conf label = {.path = "mk_server_site"};

    if (i == 0 && !srv->confdir && !srv->serve_dir) {
        /* The configuration was built for this site's docroot: it is the default site. */
        return mk_lib_site_names(cfg, cfg->sites[0], s->names, err, errlen) ? MK_OK : MK_ERR;
    }
    struct mk_site *vh = mk_conf_site_new("mk_server_site", err, errlen);
    if (!vh) {
        return MK_ERR;
    }
    vh->conf = mk_conf_parse("mk_server_site", "", 0, err, errlen);
    if (!vh->conf || !mk_conf_site_set_docroot(vh, &label, 0, s->docroot, err, errlen) ||
        !mk_lib_site_names(cfg, vh, s->names, err, errlen)) {
        mk_conf_site_free(vh);
        return MK_ERR;
    }
    cfg->sites = mk_realloc(cfg->sites, (cfg->n_sites + 1) * sizeof(*cfg->sites));
    cfg->sites[cfg->n_sites++] = vh;
    return MK_OK;
}

int mk_lib_configure(struct mk_server *srv, struct mk_config *cfg, char *err, size_t errlen)
{
    struct mk_lib *lib = srv->lib;

    if (!lib) {
        return MK_OK;
    }
    for (size_t i = 0; i < lib->n_sites; i++) {
        if (mk_lib_add_site(srv, cfg, i, err, errlen) != MK_OK) {
            return MK_ERR;
        }
    }
    for (size_t i = 0; i < lib->n_routes; i++) {
        if (lib->routes[i]->site && !mk_lib_cfg_has_site(cfg, lib->routes[i]->site)) {
            ERRF("mk_server_route: route '%s': no site is named '%s'", lib->routes[i]->pattern,
                 lib->routes[i]->site);
            return MK_ERR;
        }
    }
    /* Loaded as soon as the program made a site or a route, so routes added
       later come with a reload (the plugins loaded never change). */
    for (size_t i = 0; i < cfg->n_plugins; i++) {
        if (strcmp(cfg->plugins[i].spec, mk_lib_plugin.name) == 0) {
            return MK_OK;
        }
    }
    cfg->plugins = mk_realloc(cfg->plugins, (cfg->n_plugins + 1) * sizeof(*cfg->plugins));
    cfg->plugins[cfg->n_plugins].spec = mk_strdup(mk_lib_plugin.name);
    cfg->plugins[cfg->n_plugins].where = mk_strdup("mk_server_route (built in)");
    cfg->n_plugins++;
    return MK_OK;
}

void mk_lib_free(struct mk_server *srv)
{
    struct mk_lib *lib = srv->lib;

    if (!lib) {
        return;
    }
    for (size_t i = 0; i < lib->n_sites; i++) {
        mk_free(lib->sites[i].names);
        mk_free(lib->sites[i].docroot);
    }
    for (size_t i = 0; i < lib->n_routes; i++) {
        mk_free(lib->routes[i]->site);
        mk_free(lib->routes[i]->pattern);
        mk_free(lib->routes[i]);
    }
    mk_free(lib->sites);
    mk_free(lib->routes);
    mk_free(lib);
    srv->lib = NULL;
}
