/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * request.c: the stages of a request, from a parsed head to a response.
 *
 *   mk_request_run       head parsed: virtual host, keep-alive, body framing,
 *                        path normalisation, the plugins' request hooks, then
 *                        the content handlers (plugins first, static files last)
 *   mk_request_body_ready the body a content handler asked for has arrived
 *   mk_request_end       the response is done (or failed): request_done
 *                        hooks, statistics, every request resource released
 *
 * The status decided here is final: a response is started exactly once, by
 * mk_request_respond() or mk_request_error().
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "../core/log.h"
#include "path.h"
#include "server.h"

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
    mk_conn_timer_set(c, MK_TIMER_READ);
}

/* Act on a content or request hook's answer; true when the request moved on. */
static bool mk_request_hook_result(struct mk_request *r, const struct mk_plugin *p, int rc)
{
    if (rc == MK_OK) {
        mk_request_respond(r);
        return true;
    }
    if (rc == MK_AGAIN) {
        mk_request_wait_body(r, p);
        return true;
    }
    if (rc >= 100 && rc <= 599) {
        mk_request_error(r, rc);
        return true;
    }
    if (rc == MK_DECLINED) {
        return false;
    }
    mk_warn("plugin %s: content hook failed; closing the connection", p->name);
    mk_conn_close(r->conn);
    return true;
}

static void mk_request_content(struct mk_request *r)
{
    const struct mk_plugin_set *ps = &r->conn->worker->server->plugins;

    for (size_t i = 0; i < ps->n_content; i++) {
        const struct mk_plugin *p = ps->content[i];
        if (mk_request_hook_result(r, p, p->content(r))) {
            return;
        }
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
    }

    for (size_t i = 0; i < ps->n_request; i++) {
        const struct mk_plugin *p = ps->request[i];
        int rc = p->request(r);
        if (rc == MK_OK) {
            continue;
        }
        if (rc >= 100 && rc <= 599) {
            mk_request_error(r, rc);
        }
        else {
            mk_conn_close(c);
        }
        return;
    }
    mk_request_content(r);
}

void mk_request_body_ready(struct mk_request *r)
{
    const struct mk_plugin *p = r->handler;
    int rc;

    r->flags |= MK_REQ_BODY_READ;
    rc = p->content(r);

    if (rc == MK_AGAIN) {
        mk_err("plugin %s: content hook asked for the body twice", p->name);
        rc = 500;
    }
    if (!mk_request_hook_result(r, p, rc)) {
        mk_request_error(r, 500); /* declining after taking the body */
    }
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
    mk_free(r->body);
    r->body = NULL;
    mk_arena_reset(&r->arena);
    if (r->flags & MK_REQ_CFG_REF) {
        mk_worker_cfg_release(w, r->cfg);
        r->flags &= (uint16_t) ~MK_REQ_CFG_REF;
    }
}
