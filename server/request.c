/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * request.c: the stages of a request, from a parsed head to a response.
 *
 *   mk_request_run        head parsed: virtual host, keep-alive, body framing,
 *                         path normalisation (and 404 for hidden names when
 *                         the site hides them), then the plugins' request hooks
 *                         and the content handlers (plugins first, static
 *                         files last)
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
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../core/log.h"
#include "path.h"
#include "server.h"

static void mk_request_request_hooks(struct mk_request *r, size_t from);
static void mk_request_content(struct mk_request *r, size_t from);

/* Does the request, as received, allow the connection to stay open? */
static bool mk_request_keepalive(const struct mk_request *r)
{
    const struct mk_conn *c = r->conn;
    const struct mk_config *cfg = r->cfg;
    const struct mk_http_head *h = &r->head;

    if (!cfg->keepalive || c->worker->stopping || (c->flags & MK_CONN_CLOSE)) {
        return false;
    }
    if (cfg->max_keepalive_requests && c->requests + 1 >= cfg->max_keepalive_requests) {
        return false;
    }
    if (h->version == 11) {
        return !(h->flags & MK_HEAD_CONN_CLOSE);
    }
    return (h->flags & MK_HEAD_CONN_KEEPALIVE) && !(h->flags & MK_HEAD_CONN_CLOSE);
}

/* Start sending the response that has been set up. */
static void mk_request_respond(struct mk_request *r)
{
    struct mk_conn *c = r->conn;

    /*
     * A client that asked "Expect: 100-continue" and gets a final answer
     * instead may or may not send its body: the connection cannot be reused.
     */
    if (c->body_mode != MK_BODY_NONE && (r->head.flags & MK_HEAD_EXPECT_CONTINUE) &&
        !(r->flags & MK_REQ_CONTINUE_SENT)) {
        r->flags &= (uint16_t) ~MK_REQ_KEEPALIVE;
    }
    int rc = mk_response_start(r);
    if (rc == MK_AGAIN) {
        mk_conn_wait_write(c);
        return;
    }
    mk_conn_request_finished(c, rc == MK_OK);
}

void mk_request_error(struct mk_request *r, int status)
{
    /* Errors that leave the stream in doubt end the connection. */
    if (status == 400 || status == 408 || status == 413 || status == 414 || status == 431 ||
        status == 501 || status == 505 || status == 503) {
        r->conn->flags |= MK_CONN_CLOSE;
    }
    if (r->conn->flags & MK_CONN_CLOSE) {
        r->flags &= (uint16_t) ~MK_REQ_KEEPALIVE;
    }
    mk_response_error(r, status);
    mk_request_respond(r);
}

/* ---- suspension ---------------------------------------------------------- */

struct mk_suspended *mk_request_suspend(struct mk_request *r)
{
    struct mk_conn *c = r->conn;
    struct mk_suspended *s = mk_try_alloc(sizeof(*s));

    if (!s) {
        return NULL;
    }
    memset(s, 0, sizeof(*s));
    s->worker = c->worker;
    s->conn = c;
    s->gen = c->gen;
    c->handles++;
    r->flags |= MK_REQ_SUSPENDING;
    return s;
}

/* A hook returned MK_SUSPENDED: park the connection until the resume. */
static void mk_request_park(struct mk_request *r, const struct mk_plugin *p, enum mk_stage stage,
                            size_t index)
{
    struct mk_conn *c = r->conn;

    if (!(r->flags & MK_REQ_SUSPENDING)) {
        mk_err("plugin %s: returned MK_SUSPENDED without suspending the request", p->name);
        mk_request_error(r, 500);
        return;
    }
    r->flags &= (uint16_t) ~MK_REQ_SUSPENDING;
    r->stage = (uint8_t) stage;
    r->stage_index = (uint16_t) index;
    r->prev_state = c->state;
    c->state = MK_CONN_SUSPENDED;
    /* No I/O until the resume, but a hang-up gives the request up (see conn.c). */
    if (mk_event_mod(&c->worker->loop, &c->ev, MK_EV_HANGUP) != MK_OK) {
        mk_event_unwatch(&c->worker->loop, &c->ev);
    }
    mk_conn_timer_set(c, MK_TIMER_READ);
}

void mk_request_drop_task(struct mk_request *r)
{
    struct mk_suspended *s = r->task;
    struct mk_conn *c = r->conn;

    if (!s) {
        return;
    }
    r->task = NULL;
    if (!mk_task_cancel(c->worker->server, s)) {
        return; /* running or done: its resume comes back and finds the request gone */
    }
    /* Never started: the handle is settled here; the continuation only releases arg. */
    c->handles--;
    s->cb(NULL, s->arg);
    mk_free(s);
}

/* ---- stages -------------------------------------------------------------- */

/* The handler wants the body: read it, then call the handler again. */
static void mk_request_wait_body(struct mk_request *r, const struct mk_plugin *p)
{
    struct mk_conn *c = r->conn;

    r->handler = p;
    if (c->body_mode == MK_BODY_NONE) {
        mk_request_body_ready(r); /* no body: nothing to wait for */
        return;
    }
    c->body_mode = MK_BODY_BUFFER;
    if ((r->head.flags & MK_HEAD_EXPECT_CONTINUE) && c->in_len == c->head_len) {
        if (mk_conn_send_continue(c) != MK_OK) {
            mk_conn_close(c);
            return;
        }
        r->flags |= MK_REQ_CONTINUE_SENT;
    }
    c->state = MK_CONN_READ_BODY;
    c->body_start = c->worker->now_ms; /* BodyMinRate: the body may only start now (100) */
    mk_conn_timer_set(c, MK_TIMER_READ);
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
        mk_conn_close(r->conn);
    }
}

static void mk_request_request_hooks(struct mk_request *r, size_t from)
{
    const struct mk_plugin_set *ps = &r->conn->worker->server->plugins;

    if (from < ps->n_request) {
        r->plugin = ps->request[from];
        mk_request_request_result(r, from, ps->request[from]->request(r));
        return;
    }
    mk_request_content(r, 0);
}

/*
 * The result of content hook `p` (at `index`, or the body handler when
 * stage is MK_STAGE_BODY).
 */
static void mk_request_content_result(struct mk_request *r, const struct mk_plugin *p,
                                      enum mk_stage stage, size_t index, int rc)
{
    if (rc == MK_OK) {
        mk_request_respond(r);
    }
    else if (rc == MK_SUSPENDED) {
        mk_request_park(r, p, stage, index);
    }
    else if (rc == MK_AGAIN && stage == MK_STAGE_CONTENT) {
        mk_request_wait_body(r, p);
    }
    else if (rc >= 100 && rc <= 599) {
        mk_request_error(r, rc);
    }
    else if (rc == MK_DECLINED && stage == MK_STAGE_CONTENT) {
        mk_request_content(r, index + 1);
    }
    else if (rc == MK_DECLINED || rc == MK_AGAIN) {
        mk_err("plugin %s: content hook returned %d after taking the body", p->name, rc);
        mk_request_error(r, 500);
    }
    else {
        mk_warn("plugin %s: content hook failed; closing the connection", p->name);
        mk_conn_close(r->conn);
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
    int rc = mk_static_serve(r);
    if (rc == MK_OK) {
        mk_request_respond(r);
    }
    else {
        mk_request_error(r, rc > 0 ? rc : 500);
    }
}

void mk_request_run(struct mk_request *r)
{
    struct mk_conn *c = r->conn;
    const struct mk_plugin_set *ps = &c->worker->server->plugins;
    const struct mk_http_head *h = &r->head;

    r->vhost = mk_vhost_lookup(r->cfg, h->host.p, h->host.len);
    if (mk_request_keepalive(r)) {
        r->flags |= MK_REQ_KEEPALIVE;
    }
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
    mk_conn_begin_body(c);
    if ((h->flags & MK_HEAD_CONTENT_LENGTH) && h->content_length > r->cfg->max_body) {
        mk_request_error(r, 413);
        return;
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
        /* Decoded, so "/%2egit" is caught too; before any plugin, so none serves it. */
        if (r->vhost && r->vhost->hide_dotfiles && mk_path_is_hidden(r->path, r->path_len)) {
            mk_request_error(r, 404);
            return;
        }
    }
    mk_request_request_hooks(r, 0);
}

void mk_request_body_ready(struct mk_request *r)
{
    const struct mk_plugin *p = r->handler;

    r->flags |= MK_REQ_BODY_READ;
    r->plugin = p;
    mk_request_content_result(r, p, MK_STAGE_BODY, 0, p->content(r));
}

void mk_request_resume(struct mk_suspended *s)
{
    struct mk_conn *c = s->conn;
    struct mk_request *r = &c->req;
    const struct mk_plugin_set *ps = &c->worker->server->plugins;

    c->handles--;
    if (r->task == s) {
        r->task = NULL;
    }
    if (c->gen != s->gen || c->state != MK_CONN_SUSPENDED) {
        s->cb(NULL, s->arg); /* the request is gone */
        mk_free(s);
        if (c->state == MK_CONN_CLOSED && c->handles == 0) {
            mk_list_move_tail(&c->node, &c->worker->closing); /* now it may be reused */
        }
        return;
    }
    c->state = r->prev_state;
    int rc = s->cb(r, s->arg);
    mk_free(s);

    switch (r->stage) {
    case MK_STAGE_REQUEST:
        mk_request_request_result(r, r->stage_index, rc);
        break;
    case MK_STAGE_CONTENT:
        mk_request_content_result(r, ps->content[r->stage_index], MK_STAGE_CONTENT, r->stage_index,
                                  rc);
        break;
    default:
        mk_request_content_result(r, r->handler, MK_STAGE_BODY, 0, rc);
        break;
    }
    mk_conn_continue(c);
}

void mk_request_end(struct mk_request *r)
{
    struct mk_worker *w = r->conn->worker;
    const struct mk_plugin_set *ps = &w->server->plugins;

    if (!(r->flags & MK_REQ_ACTIVE)) {
        return;
    }
    for (size_t i = 0; i < ps->n_done; i++) {
        ps->done[i]->request_done(r);
    }
    r->flags &= (uint16_t) ~MK_REQ_ACTIVE;
    MK_STAT_ADD(w->n_requests, 1);
    MK_STAT_ADD(w->bytes_out, r->bytes_sent);
    mk_response_drop_file(r);
    mk_free(r->owned);
    r->owned = NULL;
    mk_free(r->body);
    r->body = NULL;
    mk_arena_reset(&r->arena);
    if (r->flags & MK_REQ_CFG_REF) {
        mk_worker_cfg_release(w, r->cfg);
        r->flags &= (uint16_t) ~MK_REQ_CFG_REF;
    }
}
