/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * request_limit.c: a request against the RateLimit of the rule that took
 * it (http/ratelimit.h, core/ratelimit.h). The key is the client's address
 * (the one RealIPFrom or the PROXY protocol learned, mk_request_client; an
 * IPv6 address by its /64, as TaskQueuePerClient counts), a field, a
 * cookie or the normalised path; a request without the field or cookie is
 * not counted (nginx's empty key). The table is the rule's, so the
 * configuration's: every worker counts in it, and the request's reference
 * on its configuration keeps it alive until the request ends. With delay,
 * a request taken ahead of the rate is parked until the rate allows it,
 * then its rules are asked again (request.c, MK_STAGE_RULES).
 */
#include "request_limit.h"

#include <stdio.h>
#include <string.h>

#include <monkey/mk_common.h>

#include "../../core/log.h"
#include "../../core/ratelimit.h"
#include "../http/ratelimit.h"
#include "../http/rules.h"
#include "../conn/loop.h"
#include "../process/server.h"

#define MK_LIMIT_TICK_MS 10 /* how often a held request looks at the clock */

/* The digest of r's key for limit l; false: r has none and is not counted. */
static bool mk_request_limit_key(struct mk_request *r, const struct mk_rate_limit *l, uint64_t *key)
{
    const struct mk_str *v;
    struct mk_str c;
    uint8_t addr[MK_TASK_KEY_LEN];

    switch (l->key) {
    case MK_RATE_KEY_HEADER:
        if (!(v = mk_http_header_get(&r->head, l->name))) {
            return false;
        }
        *key = mk_ratelimit_key(l->table, v->p, v->len);
        return true;
    case MK_RATE_KEY_COOKIE:
        v = mk_http_known_get(&r->head, MK_HDR_COOKIE);
        if (!v || !mk_rate_cookie(*v, l->name, l->name_len, &c)) {
            return false;
        }
        *key = mk_ratelimit_key(l->table, c.p, c.len);
        return true;
    case MK_RATE_KEY_PATH:
        *key = mk_ratelimit_key(l->table, r->path, r->path_len);
        return true;
    default:
        mk_task_key(mk_request_client(r), addr);
        *key = mk_ratelimit_key(l->table, addr, sizeof(addr));
        return true;
    }
}

/* A held request's resume (r NULL: it is gone): its rules are asked again. */
static int mk_request_limit_resumed(struct mk_request *r, void *arg)
{
    (void) r;
    (void) arg;
    return MK_OK;
}

/*
 * Every MK_LIMIT_TICK_MS while a request is held back: resume it once its
 * time has come. One duration for every delay keeps the worker's timer
 * queues few (core/timer.h); a request goes on at most a tick late. The
 * handle keeps the request struct (a zombie, if it ended meanwhile), so
 * its limit_due_ms stays readable.
 */
static void mk_request_limit_tick(struct mk_loop_timer *t, void *arg)
{
    struct mk_suspended *s = arg;

    if (mk_loop_now_ms() < s->req->limit_due_ms) {
        return;
    }
    mk_loop_timer_stop(t);
    atomic_store_explicit(&s->resumed, true, memory_order_release);
    s->cb = mk_request_limit_resumed;
    s->arg = NULL;
    mk_task_resume_post(s);
}

/*
 * Hold r back for `us` microseconds: MK_SUSPENDED, or MK_DECLINED (no
 * memory: it goes on at once).
 */
static int mk_request_limit_delay(struct mk_request *r, const struct mk_rule *rule, uint64_t us)
{
    struct mk_suspended *s = mk_request_suspend(r);

    if (!s) {
        return MK_DECLINED;
    }
    r->limit_due_ms = r->conn->worker->now_ms + (us + 999u) / 1000u;
    if (!mk_loop_timer_start(MK_LIMIT_TICK_MS, 1, mk_request_limit_tick, s)) {
        mk_request_unsuspend(r, s);
        return MK_DECLINED;
    }
    r->rule_counted = rule;
    return MK_SUSPENDED;
}

int mk_request_limit(struct mk_request *r, const struct mk_rule *rule)
{
    const struct mk_rate_limit *l = rule->limit;
    uint64_t key, ahead, evicted;
    char secs[24];

    if (r->rule_counted == rule) {
        r->rule_counted = NULL; /* counted before its delay */
        return MK_DECLINED;
    }
    if (!mk_request_limit_key(r, l, &key)) {
        return MK_DECLINED;
    }
    /* the worker reads the monotonic clock once per loop iteration */
    uint64_t now = r->conn->worker->now_ms * 1000u;
    bool ok = mk_ratelimit_take(l->table, key, now, l->interval_us,
                                (uint64_t) l->burst * l->interval_us, &ahead);
    if (MK_UNLIKELY(mk_ratelimit_report(l->table, now, &evicted))) {
        mk_warn("%s:%d: RateLimit: %llu keys evicted from its table of %zu while still limited "
                "(raise keys=)",
                r->site->file, l->line, (unsigned long long) evicted,
                mk_ratelimit_capacity(l->table));
    }
    if (ok) {
        uint64_t free_us = (uint64_t) l->delay_free * l->interval_us;
        return l->delay && ahead > free_us ? mk_request_limit_delay(r, rule, ahead - free_us)
                                           : MK_DECLINED;
    }
    /* the seconds until a request would be taken, rounded up */
    int n =
        snprintf(secs, sizeof(secs), "%llu", (unsigned long long) ((ahead + 999999u) / 1000000u));
    if (mk_response_add_header(r, "Retry-After", 11, secs, (size_t) n) != MK_OK) {
        mk_response_error(r, 503);
        return MK_OK;
    }
    mk_response_error(r, 429);
    return MK_OK;
}
