/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * control.c: the control socket (the original Monkey's "Cheetah"). A unix
 * socket answers short queries about the running server (uptime, workers
 * and their connections, requests served, bytes sent, sites, plugins, the
 * configuration in force) and carries out reload, log reopening and a
 * graceful stop. monkey-ctl (monkey-ctl.c) is its client; the optional HTTP
 * path serves the status document as JSON to configured addresses.
 *
 * Guarantees:
 * - The socket is served by one thread of the plugin, started in init()
 *   (never under `monkey -t`) and joined in exit(). Workers never wait for
 *   it and share nothing with it: the HTTP settings are declared keys
 *   (control_keys), which the server reads into every configuration it
 *   builds; a request reads those of its own configuration, without locks.
 * - One request line per connection, one reply, then the connection is
 *   closed (after a stop: once the server has finished). A client gets
 *   CONTROL_IO_MS to send its line and again to read the reply; a line
 *   longer than CONTROL_LINE_MAX is refused. Up to CONTROL_CLIENTS are served
 *   at once, so a few stalled clients delay nobody. The socket answers once
 *   the server has started; earlier connections wait in the backlog.
 * - A stale socket file (nobody answers) is replaced at start; a socket a
 *   live server answers on, a path that is not a socket, or a directory
 *   that is missing or not writable stop the server with the configuration
 *   file and line; a server started as root makes a missing directory
 *   under an existing parent, owned by its User (socket.c). The file is
 *   removed at exit only if it is still ours.
 * - JSON documents are valid: strings are escaped, invalid UTF-8 becomes
 *   U+FFFD.
 *
 * The line protocol is described in README.md.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <stdlib.h>
#include <sys/eventfd.h>

#include "control.h"

const struct mk_api *control_api;

/* init(), the server running: the socket, its eventfd and the thread. */
static int control_start(struct control_self *self)
{
    const struct control_settings *s = &self->running;
    sigset_t all, old;

    if (control_listen(self, s) != MK_OK) {
        return MK_ERR;
    }
    self->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (self->wake_fd < 0) {
        control_api->log(MK_PLUGIN_LOG_ERROR, "control: eventfd: %s", strerror(errno));
        return MK_ERR;
    }
    /* The thread takes no signals: the server handles them. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&self->thread, NULL, control_thread_main, self);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        control_api->log(MK_PLUGIN_LOG_ERROR, "control: cannot start the socket thread: %s",
                         strerror(rc));
        return MK_ERR;
    }
    self->thread_started = true;
    control_api->log(MK_PLUGIN_LOG_INFO, "control: listening on %s (mode %04o)%s%s", s->socket_path,
                     (unsigned) s->mode, s->http_path[0] ? ", HTTP status on " : "", s->http_path);
    return MK_OK;
}

static int control_init(const struct mk_api *server_api, const char *conf_dir)
{
    struct control_self *self;

    (void) conf_dir;
    control_api = server_api;
    self = calloc(1, sizeof(*self));
    if (!self) {
        control_api->log(MK_PLUGIN_LOG_ERROR, "control: out of memory");
        return MK_ERR;
    }
    self->listen_fd = -1;
    self->wake_fd = -1;
    for (int i = 0; i < CONTROL_CLIENTS; i++) {
        self->clients[i].fd = -1;
    }
    /* control.conf as the server read it for the configuration being started. */
    self->running =
        *(const struct control_settings *) control_api->plugin_conf(NULL, MK_PLUGIN_SELF(control));
    self->server = MK_API_HAS(control_api, server) ? control_api->server() : NULL;
    if (control_check_dir(&self->running) != MK_OK) {
        free(self);
        return MK_ERR;
    }
    if (control_api->checking()) {
        free(self);
        return MK_OK; /* validated; no socket, no thread */
    }
    if (control_api->self_set(MK_PLUGIN_SELF(control), self) != MK_OK ||
        control_start(self) != MK_OK) {
        control_shutdown(self);
        control_api->self_set(MK_PLUGIN_SELF(control), NULL);
        free(self);
        return MK_ERR;
    }
    return MK_OK;
}

/* Server stop: end the thread, remove the socket, close held clients. */
static void control_exit(void)
{
    struct control_self *self = control_api->self(MK_PLUGIN_SELF(control));

    if (self) {
        control_shutdown(self);
        free(self);
    }
}

/* Reload, step one: the server reads control.conf itself; nothing to set aside. */
static int control_reload_prepare(char *err, size_t errlen)
{
    (void) err;
    (void) errlen;
    return MK_OK;
}

/*
 * Reload, step two: the new HttpPath and HttpAllow are in force with the
 * new configuration already; Socket and Mode need a restart: say so.
 */
static void control_reload_commit(int commit)
{
    const struct control_self *self = control_api->self(MK_PLUGIN_SELF(control));
    struct mk_config *cfg;

    if (!commit || !self || !(cfg = control_api->config_get())) {
        return;
    }
    const struct control_settings *s =
        control_api->config_sites(cfg)
            ? control_api->plugin_conf(control_api->config_site(cfg, 0), MK_PLUGIN_SELF(control))
            : NULL;
    if (s &&
        (strcmp(s->socket_path, self->running.socket_path) != 0 || s->mode != self->running.mode)) {
        control_api->log(MK_PLUGIN_LOG_WARN,
                         "control: Socket and Mode change only on restart (keeping %s)",
                         self->running.socket_path);
    }
    control_api->config_put(cfg);
}

MK_PLUGIN_DEFINE(control) = {
    MK_PLUGIN_ABI_INIT,
    .name = "control",
    .version = "1.0",
    .description = "control socket for monkey-ctl, and HTTP status",
    .init = control_init,
    .exit = control_exit,
    .reload_prepare = control_reload_prepare,
    .reload_commit = control_reload_commit,
    .routes = control_routes,
    .conf_schema = &control_schema,
};
