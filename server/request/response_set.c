/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * response_set.c: what a handler sets of its response (api->set_status,
 * set_content_type, set_body and its kinds, stream_abort), checked here
 * for every caller: a status that is no final one is the handler's
 * mistake (500, logged), a media type with a line break is dropped, a
 * body set replaces the one before it (a file held is let go).
 */
#include <string.h>

#include "../../core/log.h"
#include "../conn/conn.h"
#include "../proto/proto.h"
#include "request.h"

/*
 * A final status, 200 to 599: a 1xx is no answer (RFC 9110 15.2), and 101
 * is the server's own, for a request api->takeover() accepted. Anything
 * else is the plugin's mistake: 500, logged.
 */
void mk_response_set_status(struct mk_request *r, int status)
{
    if ((status < 200 && !(status == 101 && r->upgrade)) || status > 599) {
        mk_err("%.*s: a plugin set status %d, which is no final status: 500 instead",
               (int) r->head.target.len, r->head.target.p, status);
        status = 500;
    }
    r->status = status;
}

void mk_response_set_type(struct mk_request *r, const char *type)
{
    size_t len = strlen(type);
    char *copy = memchr(type, '\n', len) || memchr(type, '\r', len)
                     ? NULL
                     : mk_arena_strndup(&r->arena, type, len);
    r->content_type = copy;
    r->content_type_len = copy ? len : 0;
}

void mk_response_set_body_static(struct mk_request *r, const void *data, size_t len)
{
    mk_response_drop_file(r);
    r->body_type = MK_RESP_MEM;
    r->mem = data;
    r->mem_len = len;
    r->content_length = len;
}

int mk_response_set_body(struct mk_request *r, const void *data, size_t len)
{
    char *copy = mk_arena_alloc(&r->arena, len ? len : 1);
    if (!copy) {
        return MK_ERR;
    }
    memcpy(copy, data, len);
    mk_response_set_body_static(r, copy, len);
    return MK_OK;
}

void mk_response_set_body_file(struct mk_request *r, int fd, off_t offset, uint64_t len)
{
    if (r->file || r->fd != fd) {
        mk_response_drop_file(r);
    }
    r->fd = fd;
    r->body_type = MK_RESP_FILE;
    r->file_off = offset;
    r->body_left = len;
    r->content_length = len;
}

void mk_response_set_body_owned(struct mk_request *r, void *data, size_t len)
{
    mk_response_drop_file(r);
    mk_free(r->owned);
    r->owned = data;
    r->body_type = MK_RESP_MEM;
    r->mem = data;
    r->mem_len = len;
    r->content_length = len;
}

/*
 * A streamed response that cannot be completed (its upstream broke): the
 * connection closes at once, without the end of the body, so the client
 * sees it cut short rather than complete. proceed(NULL, arg) runs inside.
 */
int mk_response_stream_abort(struct mk_request *r)
{
    if (!r || r->body_type != MK_RESP_STREAM || (r->flags & MK_REQ_STREAM_END)) {
        return MK_ERR;
    }
    r->conn->proto->abort(r);
    return MK_OK;
}
