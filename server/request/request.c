/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * request.c: the stages of a request, from a parsed head to a response,
 * whatever protocol carried it: the protocol (c->proto, see proto.h) creates
 * the request, parses its head, and is called back to send the response,
 * read the body or park the request; nothing here knows HTTP/1 framing.
 *
 *   mk_request_new/free   a request object from the worker's free list
 *   mk_request_run        head parsed: virtual host, several Cookie fields joined
 *                         into one, path normalisation, the site's rules
 *                         (request_rules.c: a redirect, an answer, a rewrite)
 *                         (and 404 for hidden names when the site hides
 *                         them), then the plugins' request hooks, the
 *                         site's route table (route.h: a route's handler,
 *                         or 405/OPTIONS with the routes' Allow), and for
 *                         the requests no route takes a directory's index
 *                         file, the site's Fallback and the content hooks
 *                         (plugins first, static files last)
 *   mk_request_redirect   api->internal_redirect: once the content hook's
 *                         MK_OK comes, the request starts again as a GET
 *                         of the new target, from the hidden-name check on
 *   mk_request_body_ready the body a content handler asked for has arrived
 *   mk_request_resume     a suspended hook's continuation ran: go on from
 *                         the stage and plugin that suspended
 *   mk_request_end        the response is done (or failed): request_done
 *                         hooks, statistics, every request resource released
 *
 * Every hook result goes through one function per stage, so a result that
 * comes back later from a continuation is handled exactly like one returned
 * at once. The response is started exactly once, by mk_request_respond() or
 * mk_request_error().
 *
 * A suspension handle holds its request: a request that ends while handles
 * are out (timed out, connection lost) stays allocated, as a zombie, until
 * the last of them comes back, so a late resume never touches freed memory.
 * The zombie keeps its configuration too (a reload cannot free the site
 * data a plugin's state points into), and the plugins that asked to be
 * told (api->suspend_cancel) are told at once (mk_request_cancel), so they
 * release their timers, backend connections and processes then, not when
 * their own timeouts come.
 * Handles never given back are freed at the worker's teardown
 * (mk_request_handles_reclaim), after the plugins' exit() hooks, with the
 * up to MK_FREE_HANDLES_MAX freed ones a worker keeps for its next
 * suspensions (a request of a gateway or the proxy suspends once).
 * A request given up while a task of its hook is still queued (the client
 * hung up, it timed out, the server stops) takes the task out of the queue
 * first (mk_request_drop_task): that work never runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../core/log.h"
#include "../http/path.h"
#ifdef MK_HAVE_RULES
#include "../http/rules.h"
#endif
#include "../process/server.h"
#include "../proto/takeover.h"
#ifdef MK_HAVE_METRICS
#include "metrics_count.h"
#endif

static const struct mk_request_files *mk_request_files_of;

void mk_request_files(const struct mk_request_files *files)
{
    mk_request_files_of = files;
}

static void mk_request_request_hooks(struct mk_request *r, size_t from);
static void mk_request_content(struct mk_request *r, size_t from);
static void mk_request_route(struct mk_request *r);
static void mk_request_redirect_run(struct mk_request *r);

#define MK_FREE_REQS_MAX 1024 /* spare requests a worker keeps */

/* ---- request objects ----------------------------------------------------- */

struct mk_request *mk_request_new(struct mk_conn *c)
{
    struct mk_worker *w = c->worker;
    struct mk_request *r;

    if (!mk_list_is_empty(&w->free_reqs)) {
        r = mk_list_entry(w->free_reqs.next, struct mk_request, node);
        mk_list_del(&r->node);
        w->n_free_reqs--;
    }
    else {
        r = mk_alloc(sizeof(*r));
    }
    memset(r, 0, sizeof(*r));
    mk_list_init(&r->node);
    r->conn = c;
    r->gen = ++w->next_gen;
    r->fd = -1;
    mk_arena_init(&r->arena, &w->pool);
    r->cfg = w->use.cfg;
    r->site = w->use.cfg->default_site; /* until the Host is known, for early errors */
    w->use.users++;
    r->flags = MK_REQ_ACTIVE | MK_REQ_CFG_REF;
    r->status = 200;
#ifdef MK_HAVE_METRICS
    r->start_us = w->now_us;
#endif
    return r;
}

/* Let go of r's configuration, once (a zombie keeps it until its last handle is back). */
static void mk_request_cfg_drop(struct mk_worker *w, struct mk_request *r)
{
    if (r->flags & MK_REQ_CFG_REF) {
        mk_config_use_release(&w->use, r->cfg);
        r->flags &= (uint16_t) ~MK_REQ_CFG_REF;
    }
}

/* Keep r for reuse, or free it when the worker has enough spares. */
static void mk_request_recycle(struct mk_worker *w, struct mk_request *r)
{
    mk_request_cfg_drop(w, r);
    if (w->n_free_reqs < MK_FREE_REQS_MAX) {
        mk_list_add_head(&r->node, &w->free_reqs);
        w->n_free_reqs++;
    }
    else {
        mk_free(r);
    }
}

void mk_request_free(struct mk_request *r)
{
    struct mk_worker *w = r->conn->worker;

    if (r->task) {
        mk_request_drop_task(r); /* given up: a task not yet started never runs */
    }
    if (r->handles) {
        mk_request_cancel(r, MK_CANCEL_GONE); /* the plugins holding it let go now */
    }
    mk_request_end(r);
    r->flags &= (uint16_t) ~MK_REQ_PARKED;
    if (r->handles) {
        r->flags |= MK_REQ_ZOMBIE;
        mk_list_add_tail(&r->node, &w->zombies);
        return;
    }
    mk_request_recycle(w, r);
}

void mk_request_pool_destroy(struct mk_worker *w)
{
    struct mk_list *lists[] = {&w->free_reqs, &w->zombies};

    for (size_t i = 0; i < 2; i++) {
        while (!mk_list_is_empty(lists[i])) {
            struct mk_request *r = mk_list_entry(lists[i]->next, struct mk_request, node);
            mk_list_del(&r->node);
            mk_free(r);
        }
    }
    w->n_free_reqs = 0;
}

/* The response_head hooks: the last moment to add headers to any response. */
static void mk_request_head_hooks(struct mk_request *r)
{
    const struct mk_plugin_set *ps = &r->conn->worker->server->plugins;

#ifdef MK_HAVE_RULES
    if (r->rule_headers) {
        mk_request_rule_headers(r);
    }
#endif
#ifdef MK_HAVE_REQID
    if (r->req_id.len) {
        mk_request_trace_respond(r);
    }
#endif
    if (__builtin_expect(r->status >= 500, 0)) {
        mk_request_log_5xx(r); /* whatever RequestId says: the one compare of other requests */
    }
    for (size_t i = 0; i < ps->n_head; i++) {
        ps->head[i]->response_head(r);
    }
}

/* Start sending the response that has been set up. */
static void mk_request_respond(struct mk_request *r)
{
#ifdef MK_HAVE_METRICS
    r->first_byte_us = r->conn->worker->now_us;
#endif
    mk_request_head_hooks(r);
    r->conn->proto->respond(r, false);
}

void mk_request_error(struct mk_request *r, int status)
{
    mk_body_stream_abort(r); /* the server answers: a streamed body ends here */
    mk_response_error(r, status);
#ifdef MK_HAVE_METRICS
    r->first_byte_us = r->conn->worker->now_us;
#endif
    mk_request_head_hooks(r);
    r->conn->proto->respond(r, true);
}

/* ---- suspension ---------------------------------------------------------- */

/* Suspension handles a worker keeps for the next ones (mk_request_handle_free). */
#define MK_FREE_HANDLES_MAX 64

struct mk_suspended *mk_request_suspend(struct mk_request *r)
{
    struct mk_worker *w = r->conn->worker;
    struct mk_suspended *s = w->free_handles;

    if (s) {
        w->free_handles = s->next;
        w->n_free_handles--;
    }
    else if (!(s = mk_try_alloc(sizeof(*s)))) {
        return NULL;
    }
    memset(s, 0, sizeof(*s));
    s->worker = w;
    s->req = r;
    s->gen = r->gen;
    mk_list_add_tail(&s->out, &s->worker->handles);
    r->handles++;
    r->flags |= MK_REQ_SUSPENDING;
    return s;
}

void mk_request_unsuspend(struct mk_request *r, struct mk_suspended *s)
{
    r->handles--;
    r->flags &= (uint16_t) ~MK_REQ_SUSPENDING;
    mk_request_handle_free(s);
}

/* A hook (p; NULL: the static handler) returned MK_SUSPENDED: park the request until the resume. */
static void mk_request_park(struct mk_request *r, const struct mk_plugin *p, enum mk_stage stage,
                            size_t index)
{
    if (!(r->flags & MK_REQ_SUSPENDING)) {
        mk_err("plugin %s: returned MK_SUSPENDED without suspending the request",
               p ? p->name : "(static)");
        mk_request_error(r, 500);
        return;
    }
    r->flags &= (uint16_t) ~MK_REQ_SUSPENDING;
    r->stage = (uint8_t) stage;
    r->stage_index = (uint16_t) index;
    r->flags |= MK_REQ_PARKED;
    r->conn->proto->park(r);
}

void mk_request_drop_task(struct mk_request *r)
{
    struct mk_suspended *s = r->task;

    if (!s) {
        return;
    }
    r->task = NULL;
    if (!mk_task_cancel(r->conn->worker->server, s)) {
        return; /* running or done: its resume comes back and finds the request gone */
    }
    /* Never started: the handle is settled here; the continuation only releases arg. */
    r->handles--;
    s->cb(NULL, s->arg);
    mk_request_handle_free(s);
}

void mk_request_handle_free(struct mk_suspended *s)
{
    struct mk_worker *w = s->worker; /* the handle's worker: its thread, or its teardown */

    mk_list_del(&s->out);
    if (w->n_free_handles < MK_FREE_HANDLES_MAX) {
        s->next = w->free_handles;
        w->free_handles = s;
        w->n_free_handles++;
        return;
    }
    mk_free(s);
}

int mk_request_cancel(struct mk_request *r, int why)
{
    struct mk_worker *w = r->conn->worker;
    int status = 0;
    bool again = r->handles > 0;

    while (again) {
        struct mk_list *it;
        again = false;
        mk_list_foreach (it, &w->handles) {
            struct mk_suspended *s = mk_list_entry(it, struct mk_suspended, out);
            if (s->req != r || s->gen != r->gen || !s->cancel ||
                atomic_load_explicit(&s->resumed, memory_order_acquire)) {
                continue;
            }
            mk_cancel_cb cancel = s->cancel;
            s->cancel = NULL;
            int rc = cancel(s, why, s->cancel_arg);
            if (why == MK_CANCEL_TIMEOUT && status == 0 && rc >= 400 && rc <= 599) {
                status = rc;
            }
            again = true; /* the callback may have changed the list: look again */
            break;
        }
    }
    return status;
}

void mk_request_expire_held(struct mk_request *r)
{
    const struct mk_plugin *p = r->stage == MK_STAGE_STATIC ? NULL : r->plugin;

    mk_warn("a request held by %s timed out", p ? p->name : "a file compressed on the fly");
    mk_request_drop_task(r);
    int status = mk_request_cancel(r, MK_CANCEL_TIMEOUT);
    r->flags &= (uint16_t) ~MK_REQ_PARKED;
    mk_request_error(r, status ? status : 503);
}

void mk_request_handles_reclaim(struct mk_worker *w)
{
    while (!mk_list_is_empty(&w->handles)) {
        struct mk_suspended *s = mk_list_entry(w->handles.next, struct mk_suspended, out);
        s->req->handles--;
        mk_request_handle_free(s);
    }
    while (w->free_handles) {
        struct mk_suspended *s = w->free_handles;
        w->free_handles = s->next;
        mk_free(s);
    }
    w->n_free_handles = 0;
}

/* ---- stages -------------------------------------------------------------- */

/*
 * The handler wants the body: the protocol reads it, then calls the handler
 * again. A request started again by an internal redirect has none: the
 * handler is called again at once with an empty body (the client's, read or
 * not, was the first handler's; what is left of it is skipped after the
 * response).
 */
static void mk_request_wait_body(struct mk_request *r, const struct mk_plugin *p)
{
    r->handler = p;
    if (r->flags & MK_REQ_REDIRECTED) {
        mk_request_body_ready(r);
        return;
    }
    r->conn->proto->read_body(r);
}

/* The result of request hook `index`. */
static void mk_request_request_result(struct mk_request *r, size_t index, int rc)
{
    const struct mk_plugin_set *ps = &r->conn->worker->server->plugins;
    const struct mk_plugin *p = ps->request[index];

    if (rc == MK_OK) {
        mk_request_request_hooks(r, index + 1);
    }
    else if (rc == MK_SUSPENDED) {
        mk_request_park(r, p, MK_STAGE_REQUEST, index);
    }
    else if (rc >= 100 && rc <= 599) {
        mk_request_error(r, rc);
    }
    else {
        mk_warn("plugin %s: request hook failed; closing the connection", p->name);
        r->conn->proto->abort(r);
    }
}

/*
 * The site's Fallback (a front controller such as /index.php): whether r's
 * path names no file and no directory under the document root (and does
 * not pass through a file, as /index.php/a/b does), so that it was
 * replaced by the fallback's path. Asked after the routes (a path a route
 * takes is never replaced), once per start of the request. The request
 * target and the query stay the client's (REQUEST_URI keeps the pretty
 * URL). One open() per request, on sites with a Fallback only.
 */
static bool mk_request_fallback(struct mk_request *r)
{
    const struct mk_site *vh = r->site;

    if (!vh->fallback || !r->path || (r->flags & MK_REQ_FALLBACK)) {
        return false;
    }
    int fd = mk_conf_site_open(vh, r->path_len > 1 ? r->path + 1 : ".",
                               O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        return false;
    }
    if (errno != ENOENT) {
        /* ENOTDIR: the path passes through a file (/index.php/a/b: PATH_INFO);
           others (403, 500): there is something, with its usual answer */
        return false;
    }
    char *path = mk_arena_alloc(&r->arena, vh->fallback_len + 1);
    if (!path) {
        return false;
    }
    memcpy(path, vh->fallback, vh->fallback_len + 1);
    r->path = path;
    r->path_len = vh->fallback_len;
    r->flags |= MK_REQ_FALLBACK;
    return true;
}

/*
 * Start r's pipeline for its path (normalised, or NULL for "*" and
 * authority targets): 404 for a hidden name when the site hides them,
 * else the request hooks, then the routes, the Fallback and the content
 * hooks.
 */
static void mk_request_begin(struct mk_request *r)
{
    if (r->path && r->site->hide_dotfiles && mk_path_is_hidden(r->path, r->path_len)) {
        /* Decoded, so "/%2egit" is caught too; before any plugin, so none serves it. */
        mk_request_error(r, 404);
        return;
    }
    mk_request_request_hooks(r, 0);
}

/*
 * Start r again for a new path (a directory's index file, the Fallback's,
 * an internal redirect's), as a request for it: the plugins' context slots
 * of the earlier start are emptied first (their cleanups run), so that its
 * request hooks start afresh, and whatever route took it is forgotten.
 */
static void mk_request_restart(struct mk_request *r)
{
    mk_request_ctx_clear(r);
    memset(&r->route, 0, sizeof(r->route));
    mk_request_begin(r);
}

/*
 * No route took r (or the one that did declined). A path ending in '/'
 * that names a directory with an index file becomes the index file's path
 * (mk_static_index), and a path that names nothing the site's Fallback:
 * either way r starts again for the new path, as a request for it (its
 * request hooks check that path: access rules and authentication apply to
 * it as to a request for it; the routes and the gateways' Match see it),
 * keeping its method, its body and the client's target, as nginx's index
 * and try_files do. Otherwise the content hooks. A file's path pays one
 * comparison for the index step.
 */
static void mk_request_unrouted(struct mk_request *r)
{
    if (r->path && r->path[r->path_len - 1] == '/') {
        int rc = mk_request_files_of->index(r);
        if (rc == MK_OK) {
            mk_request_restart(r);
            return;
        }
        if (rc != MK_DECLINED) {
            mk_request_error(r, rc);
            return;
        }
    }
    if (mk_request_fallback(r)) {
        mk_request_restart(r);
        return;
    }
    mk_request_content(r, 0);
}

static void mk_request_request_hooks(struct mk_request *r, size_t from)
{
    const struct mk_plugin_set *ps = &r->conn->worker->server->plugins;

    if (from < ps->n_request) {
        r->plugin = ps->request[from];
        mk_request_request_result(r, from, ps->request[from]->request(r));
        return;
    }
    mk_request_route(r);
}

/*
 * The result of content hook `p` (at `index`, or the body handler when
 * stage is MK_STAGE_BODY).
 */
static void mk_request_content_result(struct mk_request *r, const struct mk_plugin *p,
                                      enum mk_stage stage, size_t index, int rc)
{
    if (rc == MK_OK && r->redirect) {
        mk_request_redirect_run(r);
    }
    else if (rc == MK_OK) {
        mk_request_respond(r);
    }
    else if (rc == MK_SUSPENDED) {
        mk_request_park(r, p, stage, index);
    }
    else if (rc == MK_AGAIN && (stage == MK_STAGE_CONTENT || stage == MK_STAGE_ROUTE)) {
        mk_request_wait_body(r, p);
    }
    else if (rc >= 100 && rc <= 599) {
        mk_request_error(r, rc);
    }
    else if (rc == MK_DECLINED && stage == MK_STAGE_CONTENT) {
        mk_request_content(r, index + 1);
    }
    else if (rc == MK_DECLINED && stage == MK_STAGE_ROUTE) {
        r->route.route = NULL; /* as if no route had taken it */
        mk_request_unrouted(r);
    }
    else if (rc == MK_DECLINED || rc == MK_AGAIN) {
        mk_err("plugin %s: content hook returned %d after taking the body", p->name, rc);
        mk_request_error(r, 500);
    }
    else {
        mk_warn("plugin %s: content hook failed; closing the connection", p->name);
        r->conn->proto->abort(r);
    }
}

/* The static handler's result: an answer, a status, or parked (a file compressed on the fly). */
static void mk_request_static_result(struct mk_request *r, int rc)
{
    if (rc == MK_OK) {
        mk_request_respond(r);
    }
    else if (rc == MK_SUSPENDED) {
        mk_request_park(r, NULL, MK_STAGE_STATIC, 0);
    }
    else {
        mk_request_error(r, rc > 0 ? rc : 500);
    }
}

static void mk_request_content(struct mk_request *r, size_t from)
{
    const struct mk_plugin_set *ps = &r->conn->worker->server->plugins;

    if (from < ps->n_content) {
        const struct mk_plugin *p = ps->content[from];
        r->plugin = p;
        mk_request_content_result(r, p, MK_STAGE_CONTENT, from, p->content(r));
        return;
    }
    int rc = mk_request_files_of->serve(r);
    if (rc == MK_OK) {
        mk_request_respond(r); /* the common case, without a call more */
        return;
    }
    mk_request_static_result(r, rc);
}

/*
 * The site's route table, between the request hooks and the content hooks.
 * No route, or none for this path: the content hooks. A route that takes
 * the path and the method: its handler. Routes for the path but not for
 * the method: 405 (501 for a method the server does not know) with their
 * methods in Allow, or for OPTIONS, 204 with that Allow.
 */
static void mk_request_route(struct mk_request *r)
{
    const struct mk_routes *t = r->site->routes;

    if (!t || t->n == 0 || !r->path) {
        mk_request_unrouted(r);
        return;
    }
    if (mk_routes_match(t, r->head.method, r->path, r->path_len, &r->route)) {
        const struct mk_route *rt = r->route.route;
        r->plugin = rt->plugin;
        mk_request_content_result(r, rt->plugin, MK_STAGE_ROUTE, 0, rt->handler(r, rt->arg));
        return;
    }
    if (!r->route.allow) {
        mk_request_unrouted(r);
        return;
    }
    if (r->head.method == MK_METHOD_OPTIONS) {
        char allow[96];
        size_t n = mk_route_allow_format(r->route.allow, allow, sizeof(allow));
        mk_response_add_known(r, MK_RESP_ALLOW, allow, n);
        r->status = 204;
        mk_request_respond(r);
        return;
    }
    mk_request_error(r, r->head.method == MK_METHOD_UNKNOWN ? 501 : 405);
}

const struct sockaddr *mk_request_client(const struct mk_request *r)
{
#ifdef MK_HAVE_REALIP
    return r->real_ip ? &r->real_ip->sa : mk_conn_client(r->conn);
#else
    return mk_conn_client(r->conn);
#endif
}

#ifdef MK_HAVE_REALIP
/* The field names of RealIPHeader, by enum mk_realip_field. */
static const char *const mk_request_realip_names[] = {"X-Forwarded-For", "Forwarded", "X-Real-IP"};

/*
 * RealIPFrom: when the connection's client is a trusted proxy, the client
 * its RealIPHeader field names (realip.h: from the right, past trusted
 * proxies) becomes r's. Nothing changes when the field names none.
 */
static void mk_request_real_ip(struct mk_request *r)
{
    const struct mk_config *cfg = r->cfg;
    const char *name = mk_request_realip_names[cfg->realip_header];
    struct mk_realip_walk w;
    union mk_inet_addr a;

    if (!mk_realip_trusted(mk_conn_client(r->conn), cfg->realip_from, cfg->n_realip_from)) {
        return;
    }
    mk_realip_begin(&w, (enum mk_realip_field) cfg->realip_header, cfg->realip_from,
                    cfg->n_realip_from);
    for (unsigned i = 0; i < r->head.n_headers; i++) {
        const struct mk_http_header *f = &r->head.headers[i];
        if (mk_str_ieq(f->name.p, f->name.len, name)) {
            mk_realip_feed(&w, f->value.p, f->value.len);
        }
    }
    if (mk_realip_end(&w, &a) == MK_OK && (r->real_ip = mk_arena_alloc(&r->arena, sizeof(a)))) {
        *r->real_ip = a;
    }
}
#endif

#ifdef MK_HAVE_RULES
/*
 * The rules of r's site, when it has any: MK_DECLINED when r goes on to its
 * pipeline; else r is answered, failed or parked here.
 */
static int mk_request_start_rules(struct mk_request *r, const struct mk_rules *rules)
{
    int rc = MK_DECLINED;

    if (r->path) {
        while ((rc = mk_request_rules(r)) == MK_AGAIN) {
        }
        if (rc == MK_SUSPENDED) {
            mk_request_park(r, NULL, MK_STAGE_RULES, 0);
            return MK_OK;
        }
    }
    /* the length the request's rule allows (mk_request_run left it to here),
       before any byte of the body is read */
    if (rules->max_body && (r->head.flags & MK_HEAD_CONTENT_LENGTH) &&
        r->head.content_length > mk_request_max_body(r)) {
        mk_request_error(r, 413);
        return MK_OK;
    }
    if (rc == MK_OK) {
        mk_request_respond(r);
    }
    else if (rc != MK_DECLINED) {
        mk_request_error(r, rc);
    }
    return rc == MK_DECLINED ? MK_DECLINED : MK_OK;
}
#endif

/*
 * The plugins' early hooks (ABI 3.20), then the site's rules for r's path
 * (request_rules.c), then its pipeline;
 * again when a RateLimit's delay is over.
 */
static void mk_request_start(struct mk_request *r)
{
    const struct mk_plugin_set *ps = &r->conn->worker->server->plugins;

    /* one test when no plugin has an early hook */
    for (size_t i = 0; i < ps->n_early; i++) {
        int rc = ps->early[i]->early(r);
        if (rc == MK_DECLINED) {
            continue;
        }
        if (rc == MK_OK) {
            mk_request_respond(r);
        }
        else {
            mk_request_error(r, rc >= 100 && rc <= 599 ? rc : 500);
        }
        return;
    }
#ifdef MK_HAVE_RULES
    if (r->site->rules && mk_request_start_rules(r, r->site->rules) != MK_DECLINED) {
        return;
    }
#endif
    mk_request_begin(r);
}

void mk_request_run(struct mk_request *r)
{
    struct mk_conn *c = r->conn;
    const struct mk_plugin_set *ps = &c->worker->server->plugins;
    const struct mk_http_head *h = &r->head;

    r->site = mk_conf_site_lookup(r->cfg, h->host.p, h->host.len);
#ifdef MK_HAVE_REALIP
    if (r->cfg->n_realip_from) {
        mk_request_real_ip(r);
    }
#endif
#ifdef MK_HAVE_REQID
    /* one flag check when off: RequestId and TraceContext both set it */
    if (r->cfg->trace_any && mk_request_trace(r) != MK_OK) {
        mk_request_error(r, 503);
        return;
    }
#endif
    if (h->method == MK_METHOD_HEAD) {
        r->flags |= MK_REQ_HEAD;
    }
    if (ps->n_done) {
        /* For logs: the wall clock to the second (the worker's), a precise duration. */
        struct timespec mono;
        r->start.tv_sec = c->worker->now;
        r->start.tv_nsec = 0;
        clock_gettime(CLOCK_MONOTONIC, &mono);
        r->start_mono_us = (uint64_t) mono.tv_sec * 1000000u + (uint64_t) mono.tv_nsec / 1000u;
    }
    if ((h->flags & MK_HEAD_CONTENT_LENGTH) &&
        h->content_length > r->cfg->max_body
#ifdef MK_HAVE_RULES
        /* a rule's MaxRequestBody may raise it: asked once the rule is known */
        && !(r->site->rules && r->site->rules->max_body)
#endif
    ) {
        mk_request_error(r, 413);
        return;
    }
    if (mk_http_known_repeated(h, MK_HDR_COOKIE)) {
        /* HTTP/2's cookie crumbs, repeated HTTP/1 lines: one field for every
           reader (api->header, header_at), joined with "; " (RFC 9113 8.2.3) */
        char *joined = mk_arena_alloc(&r->arena, mk_http_cookie_join_len(h) + 1);
        if (!joined) {
            mk_request_error(r, 503);
            return;
        }
        mk_http_cookie_join(&r->head, joined);
    }

    if (h->form == MK_TARGET_ORIGIN || h->form == MK_TARGET_ABSOLUTE) {
        r->path = mk_arena_alloc(&r->arena, h->path.len + 2);
        if (!r->path) {
            mk_request_error(r, 503);
            return;
        }
        ssize_t n = mk_path_normalize(h->path.p, h->path.len, r->path);
        if (n < 0) {
            r->path = NULL;
            mk_request_error(r, 400);
            return;
        }
        r->path_len = (size_t) n;
    }
    mk_request_start(r);
}

void mk_request_run_parts(struct mk_request *r, const struct mk_request_parts *p)
{
    int status = p->refused;

    if (!status && mk_http_head_build(&r->head, p->method, p->target, p->headers, p->n,
                                      p->names_are_tokens, &r->cfg->limits) != MK_OK) {
        status = r->head.status;
    }
    r->head.version = p->version;
    if (status) {
        mk_request_error(r, status);
        return;
    }
    mk_request_run(r);
}

int mk_request_redirect(struct mk_request *r, const char *location)
{
    if (!r || !location || !(r->flags & MK_REQ_ACTIVE) || r->upgrade ||
        r->body_type == MK_RESP_STREAM || mk_body_streaming(&r->bs)) {
        return MK_ERR;
    }
    if (r->redirects >= MK_REDIRECTS_MAX) {
        mk_err("%.*s: more than %d internal redirects for one request", (int) r->head.target.len,
               r->head.target.p, MK_REDIRECTS_MAX);
        return 500;
    }
    size_t len = strcspn(location, "#"); /* a fragment is the client's business */
    if (len == 0 || location[0] != '/' || (len > 1 && location[1] == '/')) {
        return MK_ERR; /* a path, never "//authority" */
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char) location[i];
        if (ch <= 0x20 || ch >= 0x7f) {
            return MK_ERR; /* what a request target may not hold */
        }
    }
    const char *q = memchr(location, '?', len);
    size_t plen = q ? (size_t) (q - location) : len;
    char *target = mk_arena_alloc(&r->arena, len + 1);
    char *path = mk_arena_alloc(&r->arena, plen + 2);
    if (!target || !path) {
        return 503;
    }
    ssize_t n = mk_path_normalize(location, plen, path);
    if (n < 0) {
        return MK_ERR;
    }
    memcpy(target, location, len);
    target[len] = '\0';
    r->redirect = target;
    r->redirect_len = len;
    r->redirect_path = path;
    r->redirect_path_len = (size_t) n;
    return MK_OK;
}

/*
 * The content hook that called api->internal_redirect() returned MK_OK: r
 * starts again as a GET (a HEAD stays a HEAD) of the new target, as if the
 * client had asked for it, through every check (mk_request_begin). What the
 * first handler set up of the response is dropped; the request has no body
 * any more (api->header() hides its body fields); the notes stay.
 * Recursion is bounded: MK_REDIRECTS_MAX starts at most.
 */
static void mk_request_redirect_run(struct mk_request *r)
{
    struct mk_http_head *h = &r->head;
    const char *t = r->redirect;
    size_t len = r->redirect_len;
    const char *q = memchr(t, '?', len);

    r->redirect = NULL;
    if (r->redirects++ == 0) {
        r->client_method = h->method_name;
        r->client_target = h->target;
    }
    r->flags |= MK_REQ_REDIRECTED;
    r->flags &= (uint16_t) ~(MK_REQ_BODY_READ | MK_REQ_FALLBACK);
    mk_response_reset(r);
    mk_free(r->body);
    r->body = NULL;
    r->body_len = r->body_cap = 0;
    r->trailers = NULL;
    r->handler = NULL;
    if (h->method != MK_METHOD_HEAD) {
        h->method = MK_METHOD_GET;
        h->method_name = MK_STR("GET");
    }
    h->form = MK_TARGET_ORIGIN;
    h->target = mk_str_make(t, len);
    h->path = mk_str_make(t, q ? (size_t) (q - t) : len);
    h->query = q ? mk_str_make(q + 1, len - (size_t) (q - t) - 1) : mk_str_make(NULL, 0);
    r->path = r->redirect_path;
    r->path_len = r->redirect_path_len;
    mk_request_restart(r);
}

/* The fields of a request body, which a request started again by an internal redirect has not. */
static bool mk_request_body_field(const char *name)
{
    return strcasecmp(name, "Content-Length") == 0 || strcasecmp(name, "Transfer-Encoding") == 0 ||
           strcasecmp(name, "Content-Type") == 0;
}

const char *mk_request_header(const struct mk_request *r, const char *name, size_t *len)
{
    const struct mk_str *v = mk_http_header_get(&r->head, name);
    if (v && (r->flags & MK_REQ_REDIRECTED) && mk_request_body_field(name)) {
        v = NULL;
    }
    if (!v) {
        *len = 0;
        return NULL;
    }
    *len = v->len;
    return v->p;
}

/* An internal redirect to a file of r's site (api->serve_file): see mk_plugin.h. */
int mk_request_serve_file(struct mk_request *r, const char *path)
{
    size_t len = path ? strlen(path) : 0;
    if (len == 0 || path[0] != '/') {
        return MK_ERR;
    }
    char *p = mk_arena_alloc(&r->arena, len + 1);
    if (!p) {
        return 503;
    }
    ssize_t n = mk_path_normalize(path, len, p);
    if (n < 0) {
        return MK_ERR;
    }
    bool hide = r->site->hide_dotfiles;
    if (hide && mk_path_is_hidden(p, (size_t) n)) {
        return 404;
    }
    r->path = p;
    r->path_len = (size_t) n;
    if (p[n - 1] == '/') {
        /* a directory: its index file, as for a request for it */
        int rc = mk_request_files_of->index(r);
        if (rc == MK_OK && hide && mk_path_is_hidden(r->path, r->path_len)) {
            return 404;
        }
        if (rc != MK_OK && rc != MK_DECLINED) {
            return rc;
        }
    }
    if (r->head.method != MK_METHOD_HEAD) {
        r->head.method = MK_METHOD_GET;
    }
    return mk_request_files_of->serve(r);
}

void mk_request_body_ready(struct mk_request *r)
{
    const struct mk_plugin *p = r->handler;

    const struct mk_route *rt = r->route.route;

    r->plugin = p;
    if (mk_body_streaming(&r->bs)) {
        mk_request_content_result(r, p, MK_STAGE_BODY, 0, mk_body_stream_end(r));
        return;
    }
    r->flags |= MK_REQ_BODY_READ;
    mk_request_content_result(r, p, MK_STAGE_BODY, 0, rt ? rt->handler(r, rt->arg) : p->content(r));
}

void mk_request_body_result(struct mk_request *r, int rc)
{
    mk_request_content_result(r, r->handler, MK_STAGE_BODY, 0, rc);
}

void mk_request_resume(struct mk_suspended *s)
{
    struct mk_request *r = s->req;
    struct mk_worker *w = s->worker;

    r->handles--;
    if (r->task == s) {
        r->task = NULL;
    }
    if (r->gen != s->gen || !(r->flags & MK_REQ_PARKED)) {
        s->cb(NULL, s->arg); /* the request is gone */
        mk_request_handle_free(s);
        if ((r->flags & MK_REQ_ZOMBIE) && r->handles == 0) {
            mk_list_del(&r->node);
            r->flags &= (uint16_t) ~MK_REQ_ZOMBIE;
            mk_request_recycle(w, r); /* now it may be reused */
        }
        return;
    }
    struct mk_conn *c = r->conn;
    const struct mk_plugin_set *ps = &w->server->plugins;

    r->flags &= (uint16_t) ~MK_REQ_PARKED;
    c->proto->unpark(r);
    int rc = s->cb(r, s->arg);
    mk_request_handle_free(s);

    switch (r->stage) {
    case MK_STAGE_REQUEST:
        mk_request_request_result(r, r->stage_index, rc);
        break;
    case MK_STAGE_CONTENT:
        mk_request_content_result(r, ps->content[r->stage_index], MK_STAGE_CONTENT, r->stage_index,
                                  rc);
        break;
    case MK_STAGE_ROUTE:
        mk_request_content_result(r, r->route.route->plugin, MK_STAGE_ROUTE, 0, rc);
        break;
    case MK_STAGE_STATIC:
        mk_request_static_result(r, rc);
        break;
    case MK_STAGE_RULES:
        mk_request_start(r);
        break;
    default:
        mk_request_content_result(r, r->handler, MK_STAGE_BODY, 0, rc);
        break;
    }
    c->proto->proceed(c); /* r may be gone by now */
}

/* Run the request_done hooks and release every resource of r (once). */
void mk_request_end(struct mk_request *r)
{
    struct mk_worker *w = r->conn->worker;
    const struct mk_plugin_set *ps = &w->server->plugins;

    if (!(r->flags & MK_REQ_ACTIVE)) {
        return;
    }
    if (r->bs.cb || r->bs.wake) {
        mk_body_stream_abort(r); /* before request_done: the handler lets go of r */
    }
    for (size_t i = 0; i < ps->n_done; i++) {
        ps->done[i]->request_done(r);
    }
    if (r->ctx) {
        mk_request_ctx_clear(r);
    }
    r->flags &= (uint16_t) ~MK_REQ_ACTIVE;
#ifdef MK_HAVE_METRICS
    mk_metrics_count(w, r, w->now_us);
#else
    MK_STAT_ADD(w->n_requests, 1);
    MK_STAT_ADD(w->bytes_out, r->bytes_sent);
#endif
    mk_response_stream_cancel(r);
    mk_response_drop_file(r);
    if (r->upgrade) {
        /* api->takeover() was called but the switch never happened */
        struct mk_upgrade up = *r->upgrade;
        r->upgrade = NULL;
        mk_upgrade_cancel(r->conn, &up);
    }
    if (r->owned) {
        mk_free(r->owned);
        r->owned = NULL;
    }
    if (r->body) {
        mk_free(r->body);
        r->body = NULL;
    }
    mk_arena_reset(&r->arena);
    if (!r->handles) {
        /* Else a plugin still holds r: the configuration its state points
           into stays until the last handle is back (mk_request_recycle). */
        mk_request_cfg_drop(w, r);
    }
}
