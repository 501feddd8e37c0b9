/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * request_log.c: a line about a request for its site's error log
 * (api->error_log): formatted and bounded here, then offered to the
 * plugins' error_log hooks in plugins.load order; none takes it: the
 * server's log.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
