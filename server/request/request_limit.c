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
 * on its configuration keeps it alive until the request ends.
 */
#include "request_limit.h"

#include <stdio.h>
#include <string.h>

#include <monkey/mk_common.h>

#include "../../core/clock.h"
#include "../../core/log.h"
#include "../../core/ratelimit.h"
#include "../http/ratelimit.h"
#include "../http/rules.h"
#include "../process/server.h"

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

int mk_request_limit(struct mk_request *r, const struct mk_rule *rule)
{
    const struct mk_rate_limit *l = rule->limit;
    uint64_t key, ahead, evicted;
    char secs[24];

    if (!mk_request_limit_key(r, l, &key)) {
        return MK_DECLINED;
    }
    uint64_t now = mk_clock_mono_ms() * 1000u;
    bool ok = mk_ratelimit_take(l->table, key, now, l->interval_us,
                                (uint64_t) l->burst * l->interval_us, &ahead);
    if (MK_UNLIKELY(mk_ratelimit_report(l->table, now, &evicted))) {
        mk_warn("%s:%d: RateLimit: %llu keys evicted from its table of %zu while still limited "
                "(raise keys=)",
                r->site->file, l->line, (unsigned long long) evicted,
                mk_ratelimit_capacity(l->table));
    }
    if (ok) {
        return MK_DECLINED;
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
