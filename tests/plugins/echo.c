/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * echo.c: a test plugin for connection takeover (api->takeover). It
 * answers `GET /echo` with `Upgrade: echo` by 101 Switching Protocols and
 * then sends back every byte it receives, through the connection's
 * transport, until the client closes. Query options:
 *   idle=MS   the taken-over connection's idle timeout (default 0: the
 *             server's KeepAliveTimeout)
 * A received piece that is exactly "CLOSE" makes it answer "BYE" and close
 * (api->takeover_close). GET /echo-stats answers "open=N closed=N
 * paused=N\n": connections taken over now, on_close calls so far (also
 * those before the switch), and MK_AGAIN answers of takeover_write
 * (back-pressure seen).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <monkey/mk_plugin.h>

static const struct mk_api *api;
static atomic_int n_open, n_closed, n_paused;

static void echo_on_read(struct mk_takeover *t, const void *data, size_t len, void *arg)
{
    (void) arg;
    if (len == 5 && memcmp(data, "CLOSE", 5) == 0) {
        api->takeover_write(t, "BYE", 3);
        api->takeover_close(t);
        return;
    }
    /* MK_AGAIN: taken, and the server stops reading until it is out. */
    if (api->takeover_write(t, data, len) == MK_AGAIN) {
        atomic_fetch_add(&n_paused, 1);
    }
}

static void echo_on_close(struct mk_takeover *t, void *arg)
{
    (void) t; /* NULL when the 101 never went out */
    (void) arg;
    atomic_fetch_sub(&n_open, 1);
    atomic_fetch_add(&n_closed, 1);
}

static void echo_on_writable(struct mk_takeover *t, void *arg)
{
    (void) t;
    (void) arg;
}

static const struct mk_takeover_ops echo_ops = {
    .on_read = echo_on_read,
    .on_writable = echo_on_writable,
    .on_close = echo_on_close,
};

static int echo_init(const struct mk_api *server_api, const char *conf_dir)
{
    (void) conf_dir;
    api = server_api;
    if (!MK_API_HAS(api, takeover)) {
        api->log(MK_PLUGIN_LOG_ERROR, "echo: needs a server with plugin ABI 3.2");
        return MK_ERR;
    }
    return MK_OK;
}

static int echo_stats(struct mk_request *r)
{
    char body[128];
    int n = snprintf(body, sizeof(body), "open=%d closed=%d paused=%d\n", atomic_load(&n_open),
                     atomic_load(&n_closed), atomic_load(&n_paused));
    api->set_status(r, 200);
    api->set_content_type(r, "text/plain");
    return api->set_body(r, body, (size_t) n) == MK_OK ? MK_OK : 503;
}

static int echo_content(struct mk_request *r)
{
    size_t len, ulen = 0, qlen = 0;
    const char *path = api->path(r, &len);

    if (len == 11 && memcmp(path, "/echo-stats", 11) == 0) {
        return echo_stats(r);
    }
    if (len != 5 || memcmp(path, "/echo", 5) != 0) {
        return MK_DECLINED;
    }
    const char *up = api->header(r, "Upgrade", &ulen);
    if (!up || ulen != 4 || memcmp(up, "echo", 4) != 0) {
        api->add_header(r, "Upgrade", "echo");
        return 426; /* Upgrade Required */
    }
    uint32_t idle = 0;
    const char *q = api->query(r, &qlen);
    if (q && qlen > 5 && memcmp(q, "idle=", 5) == 0) {
        idle = (uint32_t) strtoul(q + 5, NULL, 10);
    }
    if (api->takeover(r, &echo_ops, NULL, idle) != MK_OK) {
        return 400; /* HTTP/1.0, or a request body */
    }
    atomic_fetch_add(&n_open, 1);
    api->add_header(r, "Upgrade", "echo");
    api->add_header(r, "Connection", "Upgrade");
    return MK_OK;
}

MK_EXPORT const struct mk_plugin mk_plugin = {
    MK_PLUGIN_ABI_INIT, .name = "echo",
    .version = "1.0",   .description = "test plugin: takes connections over after 101 and echoes",
    .init = echo_init,  .content = echo_content,
};
