/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * gw_log.c: what scripts write to stderr (CGI) and FastCGI STDERR records,
 * line by line into the error log of the request's site (api->error_log,
 * ABI 3.4), or the server log when there is no request to name. Lines are
 * bounded (MK_GW_LOG_LINE); what arrives while the request is suspended is
 * held in a bounded buffer until it is back. No allocation.
 */
#include <stdio.h>
#include <string.h>

#include "gw.h"

void mk_gw_log_init(struct mk_gw_log *l, const char *who, const char *name, size_t name_len)
{
    l->who = who;
    l->len = l->held_len = 0;
    if (name_len >= sizeof(l->name)) {
        name_len = sizeof(l->name) - 1;
    }
    memcpy(l->name, name, name_len);
    l->name[name_len] = '\0';
}

/* One line out: the site's error log with r, the server log without. */
static void gw_log_emit(const struct mk_api *api, const struct mk_gw_log *l, struct mk_request *r,
                        const char *line, size_t len)
{
    if (r && MK_API_HAS(api, error_log)) {
        api->error_log(r, "%s: %s: %.*s", l->who, l->name, (int) len, line);
        return;
    }
    api->log(MK_PLUGIN_LOG_ERROR, "%s: %s: %.*s", l->who, l->name, (int) len, line);
}

/* The held lines, in order, then none. */
static void gw_log_release(const struct mk_api *api, struct mk_gw_log *l, struct mk_request *r)
{
    size_t off = 0;
    while (off < l->held_len) {
        const char *nl = memchr(l->held + off, '\n', l->held_len - off);
        size_t n = (size_t) (nl - (l->held + off));
        gw_log_emit(api, l, r, l->held + off, n);
        off += n + 1;
    }
    l->held_len = 0;
}

/* The collected line is whole: out now, or held while r is out of reach. */
static void gw_log_line(const struct mk_api *api, struct mk_gw_log *l, struct mk_request *r)
{
    if (l->len == 0) {
        return;
    }
    if (r || l->held_len + l->len + 1 > sizeof(l->held)) {
        gw_log_emit(api, l, r, l->line, l->len);
    }
    else {
        memcpy(l->held + l->held_len, l->line, l->len);
        l->held_len += l->len;
        l->held[l->held_len++] = '\n';
    }
    l->len = 0;
}

void mk_gw_log_feed(const struct mk_api *api, struct mk_gw_log *l, struct mk_request *r,
                    const void *data, size_t len)
{
    const char *p = data;
    if (r && l->held_len > 0) {
        gw_log_release(api, l, r);
    }
    for (size_t i = 0; i < len; i++) {
        if (p[i] == '\n') {
            gw_log_line(api, l, r);
            continue;
        }
        if (l->len == sizeof(l->line)) {
            gw_log_line(api, l, r); /* a long line goes out in pieces */
        }
        l->line[l->len++] = p[i] == '\r' ? ' ' : p[i];
    }
}

void mk_gw_log_flush(const struct mk_api *api, struct mk_gw_log *l, struct mk_request *r)
{
    gw_log_release(api, l, r);
    if (l->len > 0) {
        gw_log_emit(api, l, r, l->line, l->len);
        l->len = 0;
    }
}
