/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * socket.c: the control socket's file (a stale one is replaced, ours is
 * removed at exit) and the thread that serves its clients: up to
 * CONTROL_CLIENTS at once, each with CONTROL_IO_MS to send its line and to
 * read the reply.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "control.h"

/* Milliseconds of the monotonic clock, for client deadlines. */
static int64_t control_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Close cl's connection (if any) and free its slot. */
static void control_client_close(struct control_client *cl)
{
    if (cl->state != CONTROL_FREE) {
        close(cl->fd);
    }
    control_buf_free(&cl->reply);
    memset(cl, 0, sizeof(*cl));
    cl->fd = -1;
}

/* Is the line printable ASCII (tabs allowed)? NUL bytes and the like are refused. */
static bool control_line_ok(const char *line, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) line[i];
        if ((c < 0x20 && c != '\t') || c >= 0x7f) {
            return false;
        }
    }
    return true;
}

/* The request line is complete: answer it and start sending. */
static void control_client_answer(struct control_client *cl)
{
    if (cl->line_len > 0 && cl->line[cl->line_len - 1] == '\r') {
        cl->line_len--;
    }
    cl->line[cl->line_len] = '\0';
    if (!control_line_ok(cl->line, cl->line_len)) {
        control_reply_error(&cl->reply, "", false, "malformed request line (ASCII words expected)");
    }
    else {
        control_answer(cl);
    }
    if (cl->reply.failed) {
        control_buf_free(&cl->reply);
        control_buf_str(&cl->reply, "ERR out of memory\n");
    }
    cl->state = CONTROL_WRITING;
    cl->sent = 0;
    cl->deadline = control_now_ms() + CONTROL_IO_MS; /* the action may have taken long */
}

/* Read what the client sent; MK_ERR: close it. */
static int control_client_read(struct control_client *cl)
{
    char buf[CONTROL_LINE_MAX];
    ssize_t n = recv(cl->fd, buf, sizeof(buf), 0);

    if (n < 0) {
        return errno == EAGAIN || errno == EINTR ? MK_OK : MK_ERR;
    }
    if (n == 0) {
        return MK_ERR; /* gone before a complete line (a liveness probe, say) */
    }
    char *lf = memchr(buf, '\n', (size_t) n);
    size_t take = lf ? (size_t) (lf - buf) : (size_t) n;
    if (cl->line_len + take >= CONTROL_LINE_MAX) {
        control_reply_error(&cl->reply, "", false, "request line too long");
        cl->state = CONTROL_WRITING;
        cl->sent = 0;
        return MK_OK;
    }
    memcpy(cl->line + cl->line_len, buf, take);
    cl->line_len += take;
    if (lf) {
        control_client_answer(cl);
    }
    return MK_OK;
}

/*
 * Discard what the client sent beyond its line, so that closing does not
 * reset the connection before it has read the reply.
 */
static void control_client_drain(struct control_client *cl)
{
    char buf[4096];

    shutdown(cl->fd, SHUT_WR);
    for (int i = 0; i < 16 && recv(cl->fd, buf, sizeof(buf), 0) > 0; i++) {
    }
}

/* Send the rest of the reply; MK_ERR: close it. */
static int control_client_write(struct control_client *cl)
{
    while (cl->sent < cl->reply.len) {
        ssize_t n = send(cl->fd, cl->reply.data + cl->sent, cl->reply.len - cl->sent, MSG_NOSIGNAL);
        if (n < 0) {
            return errno == EAGAIN || errno == EINTR ? MK_OK : MK_ERR;
        }
        cl->sent += (size_t) n;
    }
    if (!cl->hold) {
        control_client_drain(cl);
        return MK_ERR; /* done: one exchange per connection */
    }
    control_buf_free(&cl->reply); /* the client sees EOF once the server is gone */
    cl->state = CONTROL_HOLDING;
    return MK_OK;
}

/* Accept one connection into a free slot, if any. */
static void control_accept(struct control_self *self)
{
    int fd = accept4(self->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

    if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE) {
            control_api->log(MK_PLUGIN_LOG_WARN, "control: accept: %s", strerror(errno));
            struct pollfd p = {self->wake_fd, POLLIN, 0};
            poll(&p, 1, 100); /* the connection waits in the backlog */
        }
        return;
    }
    for (int i = 0; i < CONTROL_CLIENTS; i++) {
        struct control_client *cl = &self->clients[i];
        if (cl->state == CONTROL_FREE) {
            cl->state = CONTROL_READING;
            cl->fd = fd;
            cl->deadline = control_now_ms() + CONTROL_IO_MS;
            return;
        }
    }
    close(fd); /* not reached: the socket is not polled while every slot is busy */
}

/*
 * Wait until the server has started (its port may accept connections before
 * the plugins are initialised): connections made earlier wait in the
 * backlog. False when exit() asked the thread to end.
 */
static bool control_wait_running(struct control_self *self)
{
    for (;;) {
        struct mk_worker_stats ws;
        struct mk_server_stats st;
        if (control_api->worker_stats(0, &ws) == MK_OK) {
            control_api->stats(&st);
            if (st.started) {
                return true;
            }
        }
        struct pollfd p = {self->wake_fd, POLLIN, 0};
        if (poll(&p, 1, 10) > 0) {
            return false;
        }
    }
}

/* The socket thread: serve clients until exit() writes to self->wake_fd. */
void *control_thread_main(void *arg)
{
    struct control_self *self = arg;
    struct pollfd pfd[CONTROL_CLIENTS + 2];
    struct control_client *polled[CONTROL_CLIENTS + 2];

    /* Its documents and log lines are its server's, not the one started last. */
    if (self->server && MK_API_HAS(control_api, thread_serve)) {
        control_api->thread_serve(self->server);
    }
    if (!control_wait_running(self)) {
        return NULL;
    }
    for (;;) {
        int64_t now = control_now_ms(), next = -1;
        int n = 0, busy = 0;

        pfd[n++] = (struct pollfd){self->wake_fd, POLLIN, 0};
        for (int i = 0; i < CONTROL_CLIENTS; i++) {
            struct control_client *cl = &self->clients[i];
            if (cl->state == CONTROL_FREE) {
                continue;
            }
            busy++;
            if (cl->state == CONTROL_HOLDING) {
                continue;
            }
            if (now >= cl->deadline) {
                control_client_close(cl); /* too slow */
                busy--;
                continue;
            }
            if (next < 0 || cl->deadline < next) {
                next = cl->deadline;
            }
            polled[n] = cl;
            pfd[n++] = (struct pollfd){cl->fd, cl->state == CONTROL_READING ? POLLIN : POLLOUT, 0};
        }
        if (busy < CONTROL_CLIENTS) {
            polled[n] = NULL;
            pfd[n++] = (struct pollfd){self->listen_fd, POLLIN, 0};
        }
        int timeout = next < 0 ? -1 : (int) (next - now);
        if (poll(pfd, (nfds_t) n, timeout) < 0) {
            if (errno == EINTR) {
                continue;
            }
            control_api->log(MK_PLUGIN_LOG_ERROR, "control: poll: %s", strerror(errno));
            break;
        }
        if (pfd[0].revents) {
            break;
        }
        for (int i = 1; i < n; i++) {
            if (!pfd[i].revents) {
                continue;
            }
            struct control_client *cl = polled[i];
            if (!cl) {
                control_accept(self);
                continue;
            }
            int rc = cl->state == CONTROL_READING ? control_client_read(cl) : MK_OK;
            if (rc == MK_OK && cl->state == CONTROL_WRITING) {
                rc = control_client_write(cl);
            }
            if (rc != MK_OK) {
                control_client_close(cl);
            }
        }
    }
    return NULL;
}

/*
 * Fill addr for `path`. A path longer than sun_path goes through its
 * directory, opened in *dirfd (close it after use; -1 when not needed).
 */
static int control_sockaddr(const char *path, struct sockaddr_un *addr, int *dirfd)
{
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    *dirfd = -1;
    if (strlen(path) < sizeof(addr->sun_path)) {
        memcpy(addr->sun_path, path, strlen(path) + 1);
        return MK_OK;
    }
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    size_t dlen = slash ? (size_t) (slash - path) : 0;
    if (!slash || dlen >= sizeof(dir)) {
        errno = ENAMETOOLONG;
        return MK_ERR;
    }
    memcpy(dir, path, dlen);
    dir[dlen] = '\0';
    *dirfd = open(dlen ? dir : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*dirfd < 0) {
        return MK_ERR;
    }
    int n =
        snprintf(addr->sun_path, sizeof(addr->sun_path), "/proc/self/fd/%d/%s", *dirfd, slash + 1);
    if (n < 0 || (size_t) n >= sizeof(addr->sun_path)) {
        close(*dirfd);
        *dirfd = -1;
        errno = ENAMETOOLONG;
        return MK_ERR;
    }
    return MK_OK;
}

/*
 * The socket's directory `dir` is missing: whether a server started as root
 * makes it (see control_check_dir). Only the last component is made, under
 * a parent that exists: a path with a typo further up stays an error.
 */
static bool control_dir_is_ours_to_make(const char *dir)
{
    char parent[PATH_MAX];
    struct stat st;
    const char *slash = strrchr(dir, '/');

    if (geteuid() != 0 || !slash || slash[1] == '\0') {
        return false;
    }
    snprintf(parent, sizeof(parent), "%.*s", slash == dir ? 1 : (int) (slash - dir), dir);
    return stat(parent, &st) == 0 && S_ISDIR(st.st_mode);
}

/*
 * Make the socket's directory (mode 0755), owned by the server's User when
 * it has one, which the server switches to once the plugins are started:
 * then it may still remove the socket at stop, and write a PidFile beside
 * it. What systemd's RuntimeDirectory= and tmpfiles.d do, for a server
 * started as root without them (a container, a host without systemd).
 */
static int control_make_dir(const struct control_settings *s, const char *dir)
{
    struct mk_config *cfg = control_api->config_get();
    const char *user = cfg ? control_api->config_value(cfg, "User", 0) : NULL;
    const struct passwd *pw = user && *user ? getpwnam(user) : NULL;
    int rc = MK_OK;

    if ((mkdir(dir, 0755) != 0 && errno != EEXIST) || chmod(dir, 0755) != 0) { /* umask */
        control_api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: cannot create directory %s: %s",
                         s->socket_where, s->socket_path, dir, strerror(errno));
        rc = MK_ERR;
    }
    else if (pw && chown(dir, pw->pw_uid, pw->pw_gid) != 0) {
        control_api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: cannot give directory %s to %s: %s",
                         s->socket_where, s->socket_path, dir, user, strerror(errno));
        rc = MK_ERR;
    }
    else {
        control_api->log(MK_PLUGIN_LOG_INFO,
                         "control: created the socket's directory %s (owner %s)", dir,
                         pw ? user : "root");
    }
    if (cfg) {
        control_api->config_put(cfg);
    }
    return rc;
}

/*
 * Check that the socket's directory exists and that we may create files in
 * it. A missing directory whose parent exists is made when the server runs
 * as root (control_make_dir); `monkey -t` (checking) accepts it then and
 * creates nothing.
 */
int control_check_dir(const struct control_settings *s)
{
    char dir[PATH_MAX];
    struct stat st;
    const char *slash = strrchr(s->socket_path, '/');

    if (!slash) {
        snprintf(dir, sizeof(dir), ".");
    }
    else if (slash == s->socket_path) {
        snprintf(dir, sizeof(dir), "/");
    }
    else {
        snprintf(dir, sizeof(dir), "%.*s", (int) (slash - s->socket_path), s->socket_path);
    }
    if (stat(dir, &st) != 0 && errno == ENOENT && control_dir_is_ours_to_make(dir)) {
        if (control_api->checking()) {
            return MK_OK; /* a start creates it */
        }
        if (control_make_dir(s, dir) != MK_OK) {
            return MK_ERR;
        }
    }
    if (stat(dir, &st) != 0) {
        control_api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: directory %s: %s", s->socket_where,
                         s->socket_path, dir, strerror(errno));
        return MK_ERR;
    }
    if (!S_ISDIR(st.st_mode)) {
        control_api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: %s is not a directory",
                         s->socket_where, s->socket_path, dir);
        return MK_ERR;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        control_api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: directory %s is not writable: %s",
                         s->socket_where, s->socket_path, dir, strerror(errno));
        return MK_ERR;
    }
    return MK_OK;
}

/*
 * A file already at the socket path: remove it when it is a socket nobody
 * answers on (left by a crashed server); MK_ERR when a server answers on it
 * or it is not a socket.
 */
static int control_clear_stale(const struct control_settings *s)
{
    struct stat st;
    struct sockaddr_un addr;
    int dirfd;

    if (lstat(s->socket_path, &st) != 0) {
        if (errno == ENOENT) {
            return MK_OK;
        }
        control_api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: %s", s->socket_where, s->socket_path,
                         strerror(errno));
        return MK_ERR;
    }
    if (!S_ISSOCK(st.st_mode)) {
        control_api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: the file exists and is not a socket",
                         s->socket_where, s->socket_path);
        return MK_ERR;
    }
    if (control_sockaddr(s->socket_path, &addr, &dirfd) != MK_OK) {
        control_api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: %s", s->socket_where, s->socket_path,
                         strerror(errno));
        return MK_ERR;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int rc = fd < 0 ? -1 : connect(fd, (struct sockaddr *) &addr, sizeof(addr));
    int saved = errno;
    if (fd >= 0) {
        close(fd);
    }
    if (dirfd >= 0) {
        close(dirfd);
    }
    if (rc == 0 || saved == EAGAIN || saved == EINPROGRESS) {
        control_api->log(MK_PLUGIN_LOG_ERROR,
                         "%s: Socket %s: another server answers on this socket", s->socket_where,
                         s->socket_path);
        return MK_ERR;
    }
    if (saved != ECONNREFUSED) {
        control_api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: cannot check the existing socket: %s",
                         s->socket_where, s->socket_path, strerror(saved));
        return MK_ERR;
    }
    if (unlink(s->socket_path) != 0 && errno != ENOENT) {
        control_api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: cannot remove the stale socket: %s",
                         s->socket_where, s->socket_path, strerror(errno));
        return MK_ERR;
    }
    control_api->log(MK_PLUGIN_LOG_INFO, "control: replaced the stale socket %s", s->socket_path);
    return MK_OK;
}

/* Create, bind and listen on the socket of s; sets self->listen_fd. */
int control_listen(struct control_self *self, const struct control_settings *s)
{
    struct sockaddr_un addr;
    struct stat st;
    int dirfd;

    if (control_clear_stale(s) != MK_OK) {
        return MK_ERR;
    }
    if (control_sockaddr(s->socket_path, &addr, &dirfd) != MK_OK) {
        control_api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: %s", s->socket_where, s->socket_path,
                         strerror(errno));
        return MK_ERR;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *) &addr, sizeof(addr)) != 0) {
        control_api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: %s", s->socket_where, s->socket_path,
                         strerror(errno));
        goto fail;
    }
    /* Not listening yet: nobody can connect before the mode is in place. The
       directory may be the User's: a link put at the path since the bind
       must not have root change its target's mode (AT_SYMLINK_NOFOLLOW
       refuses a link: EOPNOTSUPP). */
    if (fchmodat(AT_FDCWD, s->socket_path, s->mode, AT_SYMLINK_NOFOLLOW) != 0 ||
        listen(fd, CONTROL_CLIENTS) != 0 || lstat(s->socket_path, &st) != 0) {
        control_api->log(MK_PLUGIN_LOG_ERROR, "%s: Socket %s: %s", s->socket_where, s->socket_path,
                         strerror(errno));
        unlink(s->socket_path);
        goto fail;
    }
    if (dirfd >= 0) {
        close(dirfd);
    }
    self->sock_dev = st.st_dev;
    self->sock_ino = st.st_ino;
    self->listen_fd = fd;
    return MK_OK;

fail:
    if (fd >= 0) {
        close(fd);
    }
    if (dirfd >= 0) {
        close(dirfd);
    }
    return MK_ERR;
}

/* Remove the socket file if it is still the one we created. */
static void control_unlink_ours(const struct control_self *self)
{
    struct stat st;

    if (lstat(self->running.socket_path, &st) == 0 && st.st_dev == self->sock_dev &&
        st.st_ino == self->sock_ino) {
        unlink(self->running.socket_path);
    }
}

/* Release what init() set up; safe to call in any state. */
void control_shutdown(struct control_self *self)
{
    if (self->thread_started) {
        uint64_t one = 1;
        ssize_t ignored = write(self->wake_fd, &one, sizeof(one));
        (void) ignored;
        pthread_join(self->thread, NULL);
        self->thread_started = false;
    }
    if (self->listen_fd >= 0) {
        control_unlink_ours(self);
        close(self->listen_fd);
        self->listen_fd = -1;
    }
    /* Clients still held (a stop) learn here that the server is done. */
    for (int i = 0; i < CONTROL_CLIENTS; i++) {
        control_client_close(&self->clients[i]);
    }
    if (self->wake_fd >= 0) {
        close(self->wake_fd);
        self->wake_fd = -1;
    }
}
