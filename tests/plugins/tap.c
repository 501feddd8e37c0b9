/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * tap.c: a test plugin that provides a transport ("Listen PORT tap"). It
 * wraps plain sockets and counts the bytes it reads per connection, and
 * answers GET /tap with that count, which proves requests on such a
 * listener travelled through the plugin's transport.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <monkey/mk_plugin.h>

static const struct mk_api *api;

struct tap_state {
    unsigned long bytes_in;
};

static int tap_open(struct mk_conn *c)
{
    struct tap_state *s = calloc(1, sizeof(*s));
    if (!s) {
        return MK_ERR;
    }
    *api->conn_transport_data(c) = s;
    return MK_OK;
}

static ssize_t tap_read(struct mk_conn *c, void *buf, size_t len)
{
    struct tap_state *s = *api->conn_transport_data(c);
    ssize_t n = recv(api->conn_fd(c), buf, len, 0);
    if (n > 0) {
        s->bytes_in += (unsigned long) n;
    }
    return n;
}

static ssize_t tap_writev(struct mk_conn *c, const struct iovec *iov, int iovcnt, int flags)
{
    struct msghdr msg = {.msg_iov = (struct iovec *) iov, .msg_iovlen = (size_t) iovcnt};
    return sendmsg(api->conn_fd(c), &msg, MSG_NOSIGNAL | ((flags & MK_IO_MORE) ? MSG_MORE : 0));
}

static void tap_close(struct mk_conn *c)
{
    void **slot = api->conn_transport_data(c);
    free(*slot);
    *slot = NULL;
}

/* No sendfile: the server falls back to read + writev through this layer. */
static const struct mk_transport tap_transport = {
    .name = "tap",
    .open = tap_open,
    .read = tap_read,
    .writev = tap_writev,
    .close = tap_close,
};

static int tap_init(const struct mk_api *server_api, const char *conf_dir)
{
    (void) conf_dir;
    api = server_api;
    return MK_OK;
}

static int tap_content(struct mk_request *r)
{
    size_t len;
    const char *path = api->path(r, &len);
    if (len != 4 || memcmp(path, "/tap", 4) != 0) {
        return MK_DECLINED;
    }
    struct tap_state *s = *api->conn_transport_data(api->conn(r));
    char buf[64];
    int n = snprintf(buf, sizeof(buf), "%lu\n", s ? s->bytes_in : 0UL);
    api->set_status(r, 200);
    api->set_content_type(r, "text/plain");
    return api->set_body(r, buf, (size_t) n) == MK_OK ? MK_OK : 503;
}

MK_EXPORT const struct mk_plugin mk_plugin = {
    MK_PLUGIN_ABI_INIT,
    .name = "tap",
    .version = "1.0",
    .description = "test transport that counts bytes read",
    .init = tap_init,
    .content = tap_content,
    .transport = &tap_transport,
};
