/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * process.c: what the server does as a process rather than as a library:
 * raising the descriptor limit, dropping privileges to User, writing the
 * PidFile (all three called by mk_server_start), and the binary's control
 * loop (mk_server_loop, mk_server_run) that turns signals and the plugins'
 * commands (api->command) into reload, log reopening and stop.
 *
 * Signals: SIGTERM and SIGINT stop gracefully (a second one stops at once),
 * SIGQUIT stops gracefully (and never at once), SIGHUP reloads, SIGUSR1
 * reopens the logs. They are blocked in every
 * thread and read from a signalfd by the controlling thread only, so no
 * handler ever runs inside a worker.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <monkey/monkey.h>

#include "../../core/clock.h"
#include "../../core/log.h"
#include "process.h"
#include "server.h"
#include "supervisor.h"
#include "../runtime/systemd.h"
#include "../../core/keycount.h"

#define ERRF(...) snprintf(err, errlen, __VA_ARGS__)

/* ---- process setup ------------------------------------------------------- */

/* Raise the descriptor limit and derive the connection limit from it. */
void mk_process_limits(struct mk_server *srv, const struct mk_config *cfg)
{
    struct rlimit rl;
    unsigned avail = 1024;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        if (rl.rlim_cur < rl.rlim_max) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
            getrlimit(RLIMIT_NOFILE, &rl);
        }
        avail = rl.rlim_cur > 10000000 ? 10000000 : (unsigned) rl.rlim_cur;
    }
    /* Each connection may hold a socket and a file; keep room for the rest. */
    unsigned reserve = 64 + 8 * (unsigned) cfg->workers + 4 * (unsigned) cfg->n_listen +
                       (unsigned) cfg->workers * cfg->file_cache;
    unsigned fit = avail > reserve ? (avail - reserve) / 2 : 16;
    if (cfg->max_connections) {
        srv->max_conns = cfg->max_connections;
        if (cfg->max_connections > fit) {
            /* More would run the process out of descriptors: accepts fail, nothing is answered. */
            mk_warn("MaxConnections %u exceeds what %u descriptors allow: %u connections at most "
                    "(raise the open files limit: ulimit -n, or LimitNOFILE= under systemd)",
                    cfg->max_connections, avail, fit);
            srv->max_conns = fit;
        }
    }
    else {
        srv->max_conns = fit;
    }
#ifdef MK_HAVE_RULES
    if (cfg->max_conns_per_client && !atomic_load(&srv->per_client)) {
        atomic_store(&srv->per_client, mk_keycount_new());
    }
    atomic_store(&srv->max_per_client, cfg->max_conns_per_client);
#endif
}

uid_t mk_process_user_uid(const struct mk_config *cfg)
{
    const struct passwd *pw = cfg->user && geteuid() == 0 ? getpwnam(cfg->user) : NULL;

    return pw && pw->pw_uid != 0 ? pw->pw_uid : (uid_t) -1;
}

int mk_process_drop_privileges(const struct mk_config *cfg, char *err, size_t errlen)
{
    struct passwd *pw;

    if (!cfg->user) {
        return MK_OK;
    }
    if (geteuid() != 0) {
        mk_info("User %s ignored: not started as root", cfg->user);
        return MK_OK;
    }
    pw = getpwnam(cfg->user);
    if (!pw) {
        ERRF("User: no such user '%s'", cfg->user);
        return MK_ERR;
    }
    if (initgroups(pw->pw_name, pw->pw_gid) < 0 || setgid(pw->pw_gid) < 0 ||
        setuid(pw->pw_uid) < 0) {
        ERRF("User %s: cannot switch: %s", cfg->user, strerror(errno));
        return MK_ERR;
    }
    return MK_OK;
}

int mk_process_pidfile_write(const char *path, char *err, size_t errlen)
{
    char tmp[PATH_MAX], buf[32];
    int fd = -1, n = snprintf(buf, sizeof(buf), "%ld\n", (long) getpid());

    /*
     * A name of its own beside the file, created with O_EXCL (which never
     * follows a link: neither does O_NOFOLLOW on top), then renamed over the
     * path: whatever was planted at the path (a link to a file of root's) is
     * replaced, never written through, and a reader never sees a half
     * written file.
     */
    for (int tries = 0; fd < 0 && tries < 16; tries++) {
        uint32_t r;
        if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t) sizeof(r)) {
            r = (uint32_t) mk_clock_mono_ms() * 2654435761u + (uint32_t) tries;
        }
        if (snprintf(tmp, sizeof(tmp), "%s.%08x.tmp", path, r) >= (int) sizeof(tmp)) {
            ERRF("PidFile %s: %s", path, strerror(ENAMETOOLONG));
            return MK_ERR;
        }
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) {
            break;
        }
    }
    if (fd < 0) {
        ERRF("PidFile %s: %s", path, strerror(errno));
        return MK_ERR;
    }
    /* 0644 whatever the umask: readers of the file need not be root. */
    if (fchmod(fd, 0644) < 0 || write(fd, buf, (size_t) n) != n || close(fd) < 0 ||
        rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        ERRF("PidFile %s: %s", path, strerror(e));
        return MK_ERR;
    }
    return MK_OK;
}

int mk_process_pidfile(struct mk_server *srv, char *err, size_t errlen)
{
    const char *path = srv->cfg->pidfile;

    if (!path || mk_supervisor_is_child()) {
        return MK_OK; /* a supervisor's child: the supervisor writes its own pid */
    }
    if (mk_process_pidfile_write(path, err, errlen) != MK_OK) {
        return MK_ERR;
    }
    srv->pidfile_written = true;
    return MK_OK;
}

/* ---- the binary's main loop ---------------------------------------------- */

void mk_process_signal_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGQUIT);
    sigaddset(set, SIGHUP);
    sigaddset(set, SIGUSR1);
    sigaddset(set, SIGPIPE);
}

/* ---- commands from plugins (api->command) -------------------------------- */

int mk_process_command(struct mk_server *srv, int cmd, char *err, size_t errlen)
{
    uint64_t one = 1;
    int rc;

    if (cmd != MK_CMD_RELOAD && cmd != MK_CMD_REOPEN_LOGS && cmd != MK_CMD_STOP) {
        ERRF("unknown command %d", cmd);
        return MK_ERR;
    }
    pthread_mutex_lock(&srv->cmd_lock);
    /* A command that comes while the server starts (the control plugin
       listens before the workers are up) waits for the loop. */
    while ((srv->cmd && srv->loop_running) || (srv->loop_coming && !srv->loop_running)) {
        pthread_cond_wait(&srv->cmd_cond, &srv->cmd_lock); /* one at a time */
    }
    if (!srv->loop_running) {
        pthread_mutex_unlock(&srv->cmd_lock);
        ERRF("the server does not run its control loop (library mode)");
        return MK_ERR;
    }
    srv->cmd = cmd;
    srv->cmd_done = false;
    ssize_t ignored = write(srv->cmd_efd, &one, sizeof(one));
    (void) ignored;
    while (!srv->cmd_done && srv->loop_running) {
        pthread_cond_wait(&srv->cmd_cond, &srv->cmd_lock);
    }
    rc = srv->cmd_done ? srv->cmd_rc : MK_ERR;
    snprintf(err, errlen, "%s", srv->cmd_done ? srv->cmd_err : "the server stopped");
    srv->cmd = 0;
    pthread_cond_broadcast(&srv->cmd_cond);
    pthread_mutex_unlock(&srv->cmd_lock);
    return rc;
}

/* Carry out the pending command on the controlling thread. */
static void mk_server_run_command(struct mk_server *srv, bool *stopping)
{
    char err[512] = "";
    uint64_t v;
    int cmd, rc = MK_OK;

    ssize_t ignored = read(srv->cmd_efd, &v, sizeof(v));
    (void) ignored;
    pthread_mutex_lock(&srv->cmd_lock);
    cmd = srv->cmd_done ? 0 : srv->cmd;
    pthread_mutex_unlock(&srv->cmd_lock);
    switch (cmd) {
    case MK_CMD_RELOAD:
        mk_systemd_notify_reloading();
        rc = mk_server_reload(srv, err, sizeof(err));
        mk_systemd_notify("READY=1");
        if (rc != MK_OK) {
            mk_err("reload failed, the running configuration stays: %s", err);
        }
        break;
    case MK_CMD_REOPEN_LOGS:
        mk_server_reopen_logs(srv);
        break;
    case MK_CMD_STOP:
        if (!*stopping) {
            mk_systemd_notify("STOPPING=1");
            mk_info("stopping: finishing the responses in progress");
            *stopping = true;
            mk_server_signal_workers(srv, MK_WCTL_STOP);
        }
        break;
    default:
        return;
    }
    pthread_mutex_lock(&srv->cmd_lock);
    srv->cmd_rc = rc;
    snprintf(srv->cmd_err, sizeof(srv->cmd_err), "%s", err);
    srv->cmd_done = true;
    pthread_cond_broadcast(&srv->cmd_cond);
    pthread_mutex_unlock(&srv->cmd_lock);
}

int mk_server_loop(struct mk_server *srv)
{
    sigset_t set, old;
    bool stopping = false;
    int sfd;

    if (!srv->running) {
        return MK_ERR;
    }
    mk_process_signal_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    sfd = signalfd(-1, &set, SFD_CLOEXEC);
    srv->cmd_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (sfd < 0 || srv->cmd_efd < 0) {
        mk_err("signalfd: %s", strerror(errno));
        if (sfd >= 0) {
            close(sfd);
        }
        mk_server_stop(srv);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return MK_ERR;
    }
    pthread_mutex_lock(&srv->cmd_lock);
    srv->loop_running = true;
    srv->loop_coming = false;
    pthread_cond_broadcast(&srv->cmd_cond);
    pthread_mutex_unlock(&srv->cmd_lock);
    mk_systemd_notify_ready();

    for (;;) {
        struct pollfd pfd[3] = {
            {sfd, POLLIN, 0}, {srv->stop_efd, POLLIN, 0}, {srv->cmd_efd, POLLIN, 0}};
        if (poll(pfd, 3, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        if (pfd[1].revents) {
            break; /* every worker has exited */
        }
        if (pfd[2].revents) {
            mk_server_run_command(srv, &stopping);
        }
        if (!pfd[0].revents) {
            continue;
        }
        struct signalfd_siginfo si;
        if (read(sfd, &si, sizeof(si)) != (ssize_t) sizeof(si)) {
            continue;
        }
        switch (si.ssi_signo) {
        case SIGTERM:
        case SIGINT:
        case SIGQUIT:
            if (stopping && si.ssi_signo != SIGQUIT) {
                mk_info("stopping now");
                mk_server_signal_workers(srv, MK_WCTL_HALT);
            }
            else if (!stopping) {
                mk_systemd_notify("STOPPING=1");
                mk_info("stopping: finishing the responses in progress");
                stopping = true;
                mk_server_signal_workers(srv, MK_WCTL_STOP);
            }
            break;
        case SIGHUP: {
            char rerr[512];
            mk_systemd_notify_reloading();
            if (mk_server_reload(srv, rerr, sizeof(rerr)) != MK_OK) {
                mk_err("reload failed, the running configuration stays: %s", rerr);
            }
            mk_systemd_notify("READY=1");
            break;
        }
        case SIGUSR1:
            mk_server_reopen_logs(srv);
            break;
        default:
            break;
        }
    } /* Commands still waiting get an answer before the plugins go. */
    pthread_mutex_lock(&srv->cmd_lock);
    srv->loop_running = false;
    pthread_cond_broadcast(&srv->cmd_cond);
    pthread_mutex_unlock(&srv->cmd_lock);
    mk_server_finish(srv);
    close(srv->cmd_efd);
    srv->cmd_efd = -1;
    mk_info("stopped");
    close(sfd);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return MK_OK;
}

/* Whether mk_server_loop is to come: commands wait for it meanwhile. */
static void mk_server_loop_coming(struct mk_server *srv, bool coming)
{
    pthread_mutex_lock(&srv->cmd_lock);
    srv->loop_coming = coming;
    pthread_cond_broadcast(&srv->cmd_cond);
    pthread_mutex_unlock(&srv->cmd_lock);
}

int mk_process_run_notify(struct mk_server *srv, void (*started)(void *arg, const char *err),
                          void *arg, char *err, size_t errlen)
{
    sigset_t set, old;
    int rc;

    /* Blocked before the workers exist so no signal can slip in between. */
    mk_process_signal_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    mk_server_loop_coming(srv, true);
    rc = mk_server_start(srv, err, errlen);
    if (rc != MK_OK) {
        mk_server_loop_coming(srv, false);
    }
    if (started) {
        started(arg, rc == MK_OK ? NULL : err);
    }
    if (rc == MK_OK) {
        rc = mk_server_loop(srv);
        mk_server_loop_coming(srv, false); /* also when the loop could not start */
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

int mk_server_run(struct mk_server *srv, char *err, size_t errlen)
{
    return mk_process_run_notify(srv, NULL, NULL, err, errlen);
}
