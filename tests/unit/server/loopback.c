/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * loopback.c: a server driven without sockets or threads (see loopback.h).
 *
 * The connection's descriptor is an eventfd that never becomes readable: it
 * only gives the event loop something to register when the codec waits for
 * more input. The bytes go through the transport below: read() hands out
 * the test's input and then says EAGAIN (the client waits), writev() and
 * sendfile() append to the output and always take everything, so a
 * response is complete when the codec returns.
 */
#include "loopback.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <monkey/monkey.h>

#include "server/config/conf.h"
#include "server/process/process.h"

/* The connection run() drives: one at a time, on the test's thread. */
static struct {
    const char *in;
    size_t in_len, in_pos;
    char *out;
    size_t out_len, out_cap;
    struct mk_conn *conn;
    const char *alpn;
} lb_io;

static void lb_die(const char *what, const char *detail)
{
    fprintf(stderr, "loopback: %s: %s\n", what, detail);
    abort();
}

static void lb_append(const void *data, size_t len)
{
    if (lb_io.out_len + len + 1 > lb_io.out_cap) {
        lb_io.out_cap = (lb_io.out_len + len + 1) * 2;
        lb_io.out = realloc(lb_io.out, lb_io.out_cap);
        if (!lb_io.out) {
            lb_die("output", "out of memory");
        }
    }
    memcpy(lb_io.out + lb_io.out_len, data, len);
    lb_io.out_len += len;
    lb_io.out[lb_io.out_len] = '\0';
}

/* ---- the transport --------------------------------------------------------- */

static int lb_open(struct mk_conn *c)
{
    lb_io.conn = c;
    return MK_OK;
}

static ssize_t lb_read(struct mk_conn *c, void *buf, size_t len)
{
    (void) c;
    size_t left = lb_io.in_len - lb_io.in_pos;
    if (left == 0) {
        errno = EAGAIN;
        return -1;
    }
    if (len > left) {
        len = left;
    }
    memcpy(buf, lb_io.in + lb_io.in_pos, len);
    lb_io.in_pos += len;
    return (ssize_t) len;
}

static ssize_t lb_writev(struct mk_conn *c, const struct iovec *iov, int iovcnt, int flags)
{
    size_t n = 0;

    (void) c;
    (void) flags;
    for (int i = 0; i < iovcnt; i++) {
        lb_append(iov[i].iov_base, iov[i].iov_len);
        n += iov[i].iov_len;
    }
    return (ssize_t) n;
}

static ssize_t lb_sendfile(struct mk_conn *c, int fd, off_t *offset, size_t len)
{
    char buf[16384];

    (void) c;
    if (len > sizeof(buf)) {
        len = sizeof(buf);
    }
    ssize_t n = pread(fd, buf, len, *offset);
    if (n > 0) {
        lb_append(buf, (size_t) n);
        *offset += n;
    }
    return n;
}

static int lb_shutdown(struct mk_conn *c)
{
    (void) c;
    return 0;
}

static const struct mk_transport lb_transport = {
    .name = "loopback",
    .open = lb_open,
    .read = lb_read,
    .writev = lb_writev,
    .sendfile = lb_sendfile,
    .shutdown = lb_shutdown,
};

/* The same with a handshake that at once "negotiated" lb_io.alpn. */
static int lb_handshake(struct mk_conn *c)
{
    (void) c;
    return MK_OK;
}

static const char *lb_alpn(struct mk_conn *c, size_t *len)
{
    (void) c;
    *len = lb_io.alpn ? strlen(lb_io.alpn) : 0;
    return lb_io.alpn;
}

static const struct mk_transport lb_transport_alpn = {
    .name = "loopback",
    .open = lb_open,
    .read = lb_read,
    .writev = lb_writev,
    .sendfile = lb_sendfile,
    .shutdown = lb_shutdown,
    .handshake = lb_handshake,
    .alpn = lb_alpn,
};

/* ---- configuration directories ---------------------------------------------- */

void mk_loopback_file(const char *dir, const char *rel, const char *text)
{
    char path[PATH_MAX * 2];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    for (char *s = path + strlen(dir) + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        if (mkdir(path, 0755) < 0 && errno != EEXIST) {
            lb_die(path, strerror(errno));
        }
        *s = '/';
    }
    f = fopen(path, "w");
    if (!f || fwrite(text, 1, strlen(text), f) != strlen(text) || fclose(f) != 0) {
        lb_die(path, strerror(errno));
    }
}

void mk_loopback_dir(char *dir, const char *load, const char *server_keys)
{
    char text[4096];

    snprintf(dir, PATH_MAX, "/tmp/mk-loopback-XXXXXX");
    if (!mkdtemp(dir)) {
        lb_die("mkdtemp", strerror(errno));
    }
    snprintf(text, sizeof(text), "[SERVER]\n    Listen 2001\n%s", server_keys ? server_keys : "");
    mk_loopback_file(dir, "monkey.conf", text);
    snprintf(text, sizeof(text), "[PLUGINS]\n%s", load ? load : "");
    mk_loopback_file(dir, "plugins.load", text);
    mk_loopback_file(dir, "sites/default",
                     "[HOST]\n    ServerName localhost\n    DocumentRoot htdocs\n");
    mk_loopback_file(dir, "htdocs/index.html", "<p>hello</p>\n");
}

static int lb_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st;
    (void) flag;
    (void) ftw;
    return remove(path);
}

void mk_loopback_dir_free(const char *dir)
{
    nftw(dir, lb_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- the server ---------------------------------------------------------------- */

int mk_loopback_open(struct mk_loopback *lb, const char *confdir, char *err, size_t errlen)
{
    struct mk_config *cfg;

    memset(lb, 0, sizeof(*lb));
    lb->srv = mk_server_create();
    mk_server_set_confdir(lb->srv, confdir);
    cfg = mk_config_load(confdir, NULL, 0, err, errlen);
    if (!cfg) {
        goto fail_srv;
    }
    if (mk_plugins_load(&lb->srv->plugins, cfg, err, errlen) != MK_OK) {
        goto fail_cfg;
    }
    if (mk_plugins_init(&lb->srv->plugins, lb->srv, cfg, err, errlen) != MK_OK) {
        goto fail_plugins;
    }
    if (mk_plugins_sites(&lb->srv->plugins, cfg, err, errlen) != MK_OK) {
        goto fail_init;
    }
    lb->srv->cfg = cfg;
    mk_process_limits(lb->srv, cfg);
    if (mk_worker_setup(&lb->worker, lb->srv, 0) != MK_OK) {
        snprintf(err, errlen, "worker: %s", strerror(errno));
        mk_worker_teardown(&lb->worker);
        lb->srv->cfg = NULL;
        goto fail_init;
    }
    mk_worker_bind(&lb->worker);
    return MK_OK;

fail_init:
    for (size_t i = 0; i < lb->srv->plugins.count; i++) {
        if (lb->srv->plugins.list[i]->exit) {
            lb->srv->plugins.list[i]->exit();
        }
    }
fail_plugins:
    mk_config_unref(cfg); /* site data first: plugin code frees it */
    cfg = NULL;
    mk_plugins_unload(&lb->srv->plugins);
fail_cfg:
    mk_config_unref(cfg);
fail_srv:
    mk_server_destroy(lb->srv);
    lb->srv = NULL;
    return MK_ERR;
}

char *mk_loopback_run(struct mk_loopback *lb, const char *input, size_t *len)
{
    return mk_loopback_run_bytes(lb, input, strlen(input), NULL, len);
}

char *mk_loopback_run_bytes(struct mk_loopback *lb, const void *input, size_t in_len,
                            const char *alpn, size_t *len)
{
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(40000)};
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

    if (fd < 0) {
        lb_die("eventfd", strerror(errno));
    }
    peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    memset(&lb_io, 0, sizeof(lb_io));
    lb_io.in = input;
    lb_io.in_len = in_len;
    lb_io.alpn = alpn;
    lb_append("", 0);

    mk_worker_bind(&lb->worker); /* the clocks of this moment */
    mk_worker_accept_fd(&lb->worker, fd, (const struct sockaddr *) &peer, sizeof(peer),
                        alpn ? &lb_transport_alpn : &lb_transport, NULL, false);
    if (lb_io.conn && lb_io.conn->state != MK_CONN_CLOSED) {
        mk_conn_close(lb_io.conn);
    }
    mk_worker_recycle(&lb->worker);
    *len = lb_io.out_len;
    return lb_io.out;
}

void mk_loopback_close(struct mk_loopback *lb)
{
    struct mk_server *srv = lb->srv;

    mk_worker_recycle(&lb->worker);
    /* Like mk_server_finish(): the plugins' exit, then the worker and the configuration. */
    for (size_t i = 0; i < srv->plugins.count; i++) {
        if (srv->plugins.list[i]->exit) {
            srv->plugins.list[i]->exit();
        }
    }
    mk_worker_teardown(&lb->worker);
    mk_worker_bind(NULL);
    mk_config_unref(srv->cfg);
    srv->cfg = NULL;
    mk_plugins_unload(&srv->plugins);
    mk_server_destroy(srv);
    lb->srv = NULL;
}
