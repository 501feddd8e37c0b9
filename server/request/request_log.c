/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * request_log.c: a line about a request for its site's error log
 * (api->error_log): formatted and bounded here, then offered to the
 * plugins' error_log hooks in plugins.load order; none takes it: the
 * server's log. And the line of every 5xx (mk_request_log_5xx).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../../core/log.h"
#include "../conn/conn.h"
#include "../process/server.h"
#include "request.h"

/*
 * Format a message of request r into one line for its site's error log
 * (api->error_log): at most MK_ERROR_LOG_LINE bytes, cut with "...",
 * control bytes as spaces. The first error_log hook that takes it ends
 * it; none does: the server log.
 */
void mk_request_error_log(struct mk_request *r, const char *fmt, ...)
{
    char line[MK_ERROR_LOG_LINE + 1];
    va_list ap;

    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n < 0) {
        return;
    }
    size_t len = (size_t) n;
    if (len > MK_ERROR_LOG_LINE) {
        len = MK_ERROR_LOG_LINE;
        memcpy(line + len - 3, "...", 3);
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char) line[i];
        if (ch < 0x20 || ch == 0x7f) {
            line[i] = ' ';
        }
    }
    const struct mk_plugin_set *ps = r ? &r->conn->worker->server->plugins : NULL;
    for (size_t i = 0; ps && i < ps->n_errlog; i++) {
        if (ps->errlog[i]->error_log(r, line, len) == MK_OK) {
            return;
        }
    }
    mk_err("%s", line);
}

/*
 * The line of a 5xx, as its head goes out: "request ID answered STATUS
 * (site LABEL, upstream N us): METHOD TARGET". The ID is r's (RequestId),
 * else one made for this response (mk_request_trace_id: the note
 * request_id too, so that the access log's line names it); a server built
 * without request IDs writes "request answered ...". The upstream part
 * when r waited on one (a proxy's server, a gateway's backend:
 * api->upstream_wait), with the time waited; the target as the client sent
 * it, last, so that a long one is what a cut takes.
 */
void mk_request_log_5xx(struct mk_request *r)
{
    char up[48] = "";
    const struct mk_str *method = &r->head.method_name, *target = &r->head.target;
    const char *site = r->site && r->site->n_names ? r->site->names[0] : "-";
    const char *id = "", *sep = "";
    int id_len = 0;

#ifdef MK_HAVE_REQID
    struct mk_str rid = mk_request_trace_id(r);
    id = rid.p ? rid.p : "";
    id_len = (int) rid.len;
    sep = rid.len ? " " : "";
#endif
    if (r->client_method.len) {
        method = &r->client_method;
        target = &r->client_target; /* before an internal redirect */
    }
    if (r->upstream_any) {
        uint64_t us = r->upstream_us;
        if (r->upstream_since) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            us += (uint64_t) now.tv_sec * 1000000u + (uint64_t) now.tv_nsec / 1000u -
                  r->upstream_since;
        }
        snprintf(up, sizeof(up), ", upstream %" PRIu64 " us", us);
    }
    mk_request_error_log(r, "request%s%.*s answered %d (site %s%s): %.*s %.*s", sep, id_len, id,
                         r->status, site, up, method->len ? (int) method->len : 1,
                         method->len ? method->p : "-", target->len ? (int) target->len : 1,
                         target->len ? target->p : "-");
}
