/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/response.c: the response object. The response is built in the
 * duda_request (status, headers, a body or a file) and handed to the
 * server in one go when the callback is done with it (duda_response_commit, from
 * request.c), so nothing a service does reaches the server's request
 * before it is complete; response->flush() hands the head over at once
 * and streams the body instead, the stream holding a reference on the
 * duda_request while it runs. wait() parks the request and cont()
 * continues it (request.c's continuation). takeover() and the socket
 * entries are socket.c's.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "duda_internal.h"

/* Hand the response's status and headers to the server. */
static int duda_commit_head(duda_request_t *dr)
{
    struct mk_request *r = dr->r;

    duda_mk->set_status(r, dr->status);
    for (struct duda_header *h = dr->headers; h; h = h->next) {
        if (duda_mk->add_header(r, h->name, h->value) != MK_OK) {
            return 503;
        }
    }
    if (dr->ctype) {
        duda_mk->set_content_type(r, dr->ctype);
    }
    return MK_OK;
}

/* Hand the finished response to the server. */
int duda_response_commit(duda_request_t *dr)
{
    struct mk_request *r = dr->r;

    if (duda_commit_head(dr) != MK_OK) {
        return 503;
    }
    if (dr->upgraded) {
        return MK_OK; /* 101: the server sends the head alone */
    }
    if (dr->file_fd >= 0) {
        duda_mk->set_body_file(r, dr->file_fd, dr->file_off, dr->file_len);
        dr->file_fd = -1; /* the server closes it */
        return MK_OK;
    }
    if (dr->len) {
        duda_mk->set_body_owned(r, dr->body, dr->len);
        dr->body = NULL;
        dr->len = dr->cap = 0;
    }
    else {
        duda_mk->set_body_static(r, "", 0);
    }
    return MK_OK;
}

/* May the service still change the response's head or body? */
bool duda_response_writable(duda_request_t *dr, const char *what, bool head)
{
    if (!duda_request_live(dr, what)) {
        return false;
    }
    if (dr->ended) {
        duda_misuse(dr, "%s() after response->end()", what);
        return false;
    }
    if (head && dr->streaming) {
        duda_misuse(dr, "%s() after the first response->flush()", what);
        return false;
    }
    return true;
}

static int duda_http_status(duda_request_t *dr, int status)
{
    if (!duda_response_writable(dr, "response->http_status", true)) {
        return -1;
    }
    if (status < 200 || status > 599) {
        /* 1xx is no final answer; 101 comes with response->takeover */
        duda_misuse(dr, "response->http_status(%d): not a final HTTP status", status);
        return -1;
    }
    dr->status = status;
    return 0;
}

bool duda_response_header_name_ok(const char *s)
{
    if (!*s) {
        return false;
    }
    for (; *s; s++) {
        if ((unsigned char) *s <= ' ' || *s == ':' || *s == 0x7f) {
            return false;
        }
    }
    return true;
}

static bool duda_text(const char *s)
{
    for (; *s; s++) {
        if (*s == '\r' || *s == '\n' || *s == '\0') {
            return false;
        }
    }
    return true;
}

static int duda_http_header(duda_request_t *dr, const char *name, const char *value)
{
    if (!duda_response_writable(dr, "response->http_header", true)) {
        return -1;
    }
    if (!name || !value || !duda_response_header_name_ok(name) || !duda_text(value)) {
        duda_misuse(dr, "response->http_header(): a bad name or a line break in the value");
        return -1;
    }
    struct duda_header *h = calloc(1, sizeof(*h));
    if (!h || !(h->name = strdup(name)) || !(h->value = strdup(value))) {
        if (h) {
            free(h->name);
        }
        free(h);
        return -1;
    }
    *dr->headers_tail = h;
    dr->headers_tail = &h->next;
    return 0;
}

static int duda_content_type(duda_request_t *dr, const char *type)
{
    if (!duda_response_writable(dr, "response->http_content_type", true)) {
        return -1;
    }
    if (!type || !duda_text(type)) {
        duda_misuse(dr, "response->http_content_type(): a bad type");
        return -1;
    }
    char *t = strdup(type);
    if (!t) {
        return -1;
    }
    free(dr->ctype);
    dr->ctype = t;
    return 0;
}

static int duda_print(duda_request_t *dr, const char *data, size_t len)
{
    if (!duda_response_writable(dr, "response->print", false)) {
        return -1;
    }
    if (dr->file_fd >= 0) {
        duda_misuse(dr, "response->print() after response->sendfile()");
        return -1;
    }
    if (len == 0) { /* nothing to copy, and dr->body may still be NULL */
        return 0;
    }
    if (dr->len + len > dr->cap) {
        size_t cap = dr->cap ? dr->cap : 512;
        while (cap < dr->len + len) {
            cap *= 2;
        }
        char *b = realloc(dr->body, cap);
        if (!b) {
            return -1;
        }
        dr->body = b;
        dr->cap = cap;
    }
    memcpy(dr->body + dr->len, data, len);
    dr->len += len;
    return 0;
}

static int duda_printf(duda_request_t *dr, const char *fmt, ...)
{
    char small[512];
    va_list ap;

    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) {
        return -1;
    }
    if ((size_t) n < sizeof(small)) {
        return duda_print(dr, small, (size_t) n);
    }
    char *big = malloc((size_t) n + 1);
    if (!big) {
        return -1;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t) n + 1, fmt, ap);
    va_end(ap);
    int rc = duda_print(dr, big, (size_t) n);
    free(big);
    return rc;
}

static int duda_sendfile_range(duda_request_t *dr, const char *path, off_t offset, size_t len)
{
    char full[PATH_MAX];
    struct stat st;

    if (!duda_response_writable(dr, "response->sendfile", true)) {
        return -1;
    }
    if (!path || dr->len || dr->file_fd >= 0) {
        duda_misuse(dr, "response->sendfile(): no path, or a body was already given");
        return -1;
    }
    if (path[0] != '/') {
        if (!dr->svc->datadir) {
            duda_misuse(dr, "response->sendfile(%s): relative, and the service has no DataDir",
                        path);
            return -1;
        }
        snprintf(full, sizeof(full), "%s/%s", dr->svc->datadir, path);
        path = full;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || offset < 0 ||
        offset > st.st_size) {
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    uint64_t avail = (uint64_t) (st.st_size - offset);
    dr->file_fd = fd;
    dr->file_off = offset;
    dr->file_len = len == 0 || len > avail ? avail : len;
    return 0;
}

static int duda_sendfile(duda_request_t *dr, const char *path)
{
    return duda_sendfile_range(dr, path, 0, 0);
}

static void duda_proceed(struct mk_request *r, void *arg)
{
    duda_request_t *dr = arg;

    if (!r) {
        dr->stream_ended = true;
        duda_request_unref(dr); /* the stream's reference */
    }
}

static int duda_flush(duda_request_t *dr)
{
    if (!duda_response_writable(dr, "response->flush", false)) {
        return DUDA_ERR;
    }
    if (dr->waiting || dr->file_fd >= 0) {
        duda_misuse(dr, "response->flush() while waiting or after sendfile()");
        return DUDA_ERR;
    }
    if (!dr->streaming) {
        if (duda_commit_head(dr) != MK_OK) {
            return DUDA_ERR;
        }
        if (duda_mk->stream_start(dr->r, duda_proceed, dr) != MK_OK) {
            duda_misuse(dr, "response->flush(): the server refused to stream");
            return DUDA_ERR;
        }
        dr->streaming = true;
        dr->refs++;
    }
    if (dr->stream_ended) {
        return DUDA_ERR;
    }
    int rc = MK_OK;
    if (dr->len) {
        rc = duda_mk->stream_write(dr->r, dr->body, dr->len);
        dr->len = 0;
    }
    return rc == MK_OK ? DUDA_OK : rc == MK_AGAIN ? DUDA_AGAIN : DUDA_ERR;
}

static int duda_wait(duda_request_t *dr)
{
    if (!duda_response_writable(dr, "response->wait", false)) {
        return -1;
    }
    if (dr->waiting || dr->streaming || !dr->called) {
        duda_misuse(dr, "response->wait(): already waiting or streaming");
        return -1;
    }
    dr->susp = duda_mk->suspend(dr->r);
    if (!dr->susp) {
        return -1;
    }
    atomic_store(&dr->cont_done, 0);
    dr->waiting = true;
    dr->refs++;
    return 0;
}

static int duda_cont(duda_request_t *dr)
{
    if (!dr) {
        duda_misuse(NULL, "response->cont() without a request");
        return -1;
    }
    if (!dr->susp || atomic_exchange(&dr->cont_done, 1) != 0) {
        return -1; /* not waiting, continued already, or gone */
    }
    duda_mk->resume(dr->susp, duda_request_continue, dr);
    return 0;
}

static int duda_end(duda_request_t *dr, void (*end_cb)(duda_request_t *dr))
{
    if (!dr) {
        duda_misuse(NULL, "response->end() without a request");
        return -1;
    }
    if (dr->ended) {
        duda_misuse(dr, "response->end() twice");
        return -1;
    }
    dr->ended = true;
    dr->end_cb = end_cb;
    if (dr->streaming && dr->r && !dr->stream_ended) {
        if (dr->len) {
            duda_mk->stream_write(dr->r, dr->body, dr->len);
            dr->len = 0;
        }
        dr->stream_ended = true;
        duda_mk->stream_end(dr->r, NULL);
        duda_request_unref(dr); /* the stream's reference: no proceed follows */
    }
    return 0;
}

const struct duda_response_api duda_response_obj = {
    .size = sizeof(struct duda_response_api),
    .http_status = duda_http_status,
    .http_header = duda_http_header,
    .http_content_type = duda_content_type,
    .print = duda_print,
    .printf = duda_printf,
    .sendfile = duda_sendfile,
    .sendfile_range = duda_sendfile_range,
    .flush = duda_flush,
    .wait = duda_wait,
    .cont = duda_cont,
    .end = duda_end,
    .takeover = duda_socket_takeover,
    .socket_write = duda_socket_write,
    .socket_close = duda_socket_close,
    .socket_remote_addr = duda_socket_remote_addr,
};
