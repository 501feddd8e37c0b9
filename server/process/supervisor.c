/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * supervisor.c: the supervisor process, and what its child learns from it.
 *
 * An event-driven server is one process: a crash in any worker or plugin
 * takes everything down. With Supervisor On (or monkey -S) the process
 * started stays small: it reads the configuration without loading a plugin,
 * binds every listening socket (with Balancing reuseport one per worker and
 * address, as the server would), and runs the server as its child: this
 * binary again (/proc/self/exe, the same arguments), the sockets passed as
 * descriptors 3, 4, ... with LISTEN_FDS and LISTEN_PID, the convention of
 * socket activation the server already follows (systemd.c). Since the
 * supervisor keeps the sockets open, the kernel goes on queueing connections
 * while no child runs: a crash resets the connections the child held, and
 * refuses none.
 *
 * Guarantees:
 * - A child that dies from a signal is logged (signal, core dump) and a new
 *   one started at once; crashes in a row back off (0, 100 ms, 200 ms, ...
 *   up to MK_SUPERVISOR_BACKOFF_MAX_MS), and SupervisorCrashLimit crashes
 *   within SupervisorCrashWindow end the supervisor with status 1.
 * - A child that exits ends the supervisor with the child's exit status,
 *   except a restart that fails (a child that exits with a non-zero status
 *   before it is ready, after an earlier one served): the files on disk no
 *   longer start a server, so the supervisor keeps the sockets and tries
 *   again (100 ms, 200 ms, ... up to MK_SUPERVISOR_RETRY_MAX_MS) until one
 *   starts or a stop comes. The child tells why it could not start
 *   (MK_SUPERVISOR_NOTIFY_ERROR on the readiness socket) and the supervisor
 *   logs it.
 * - HUP, USR1, TERM, INT and QUIT are passed on to the child (INT and QUIT
 *   typed at a terminal already reach it: the terminal signals the whole
 *   process group); after TERM, INT or QUIT the supervisor ends when the
 *   child does, starting none again.
 * - Readiness (sd_notify) comes from the supervisor: the child's messages
 *   arrive on a socket of the supervisor's ($NOTIFY_SOCKET of the child) and
 *   go on to the service manager with MAINPID the supervisor's pid.
 * - PidFile holds the supervisor's pid, written when the first child is
 *   ready and removed when the supervisor ends; the child writes none.
 * - The child learns the supervisor's pid, the restarts so far and the last
 *   crash from MK_SUPERVISOR_* variables (api->supervisor_stats).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <monkey/mk_common.h>
#include <monkey/mk_util.h>

#include "../../core/clock.h"
#include "../../core/log.h"
#include "../../core/memory.h"
#include "../config/conf.h"
#include "../runtime/listener.h"
#include "process.h"
#include "supervisor.h"
#include "../runtime/systemd.h"

#define ERRF(...) snprintf(err, errlen, __VA_ARGS__)

#define MK_LISTEN_FDS_START 3

/* One listening socket the supervisor holds. */
struct mk_sup_socket {
    char *spec; /* the Listen value */
    bool reuseport;
    int fd;
};

struct mk_supervisor {
    struct mk_server *srv;
    struct mk_supervisor_opts *opts;
    struct mk_sup_socket *socks;
    size_t n_socks;
    int sfd;                /* signalfd */
    int nfd;                /* the child's readiness messages */
    char notify_name[64];   /* its name, "@monkey-supervisor-..." */
    sigset_t old_mask;      /* the mask to give the child */
    pid_t child;            /* 0: none running */
    bool child_ready;       /* the child running has been ready */
    char child_error[512];  /* why it could not start, as it said ("": nothing said) */
    unsigned failed_starts; /* starts in a row that failed, since a child was last ready */
    bool ever_ready;        /* a child has been ready (PidFile, -D told) */
    bool stopping;          /* TERM, INT or QUIT came: start no child again */
    uint64_t restart_at_ms; /* when to start the next child; 0: none due */
    char *pidfile;
    bool pidfile_written;
    struct mk_supervisor_stats stats; /* what the next child is told */
    struct mk_crash_window crashes;
};

/* ---- the child's side ---------------------------------------------------- */

static struct mk_supervisor_stats mk_supervisor_info;
static bool mk_supervisor_child;

bool mk_supervisor_child_init(const char *argv0)
{
    const char *pid = getenv(MK_SUPERVISOR_ENV_PID);

    if (pid &&
        mk_supervisor_env_parse(pid, getenv(MK_SUPERVISOR_ENV_RESTARTS),
                                getenv(MK_SUPERVISOR_ENV_CRASH), &mk_supervisor_info) == MK_OK) {
        /* A stale variable (a monkey started by a CGI script of a supervised
           one) names a process that is not our parent. */
        mk_supervisor_child = mk_supervisor_info.pid == (long) getppid();
    }
    unsetenv(MK_SUPERVISOR_ENV_PID);
    unsetenv(MK_SUPERVISOR_ENV_RESTARTS);
    unsetenv(MK_SUPERVISOR_ENV_CRASH);
    mk_config_supervised_set(mk_supervisor_child); /* its PidFile is the supervisor's */
    if (mk_supervisor_child && argv0) {
        /* Run as /proc/self/exe, the process would be called "exe" in ps. */
        const char *slash = strrchr(argv0, '/');
        prctl(PR_SET_NAME, slash ? slash + 1 : argv0);
    }
    return mk_supervisor_child;
}

bool mk_supervisor_is_child(void)
{
    return mk_supervisor_child;
}

void mk_supervisor_child_failed(const char *err)
{
    char msg[1024];

    if (!mk_supervisor_child) {
        return;
    }
    mk_supervisor_notify_error_format(err, msg, sizeof(msg));
    mk_systemd_notify(msg);
}

int mk_supervisor_stats_get(struct mk_supervisor_stats *out)
{
    if (!mk_supervisor_child) {
        return MK_DECLINED;
    }
    *out = mk_supervisor_info;
    return MK_OK;
}

/* ---- listening sockets --------------------------------------------------- */

static void mk_sup_socket_close(struct mk_sup_socket *s)
{
    close(s->fd);
    mk_free(s->spec);
}

/* Whether one of the n sockets in `socks` is for Listen address a. */
static bool mk_supervisor_holds(const struct mk_sup_socket *socks, size_t n,
                                const struct mk_listen_addr *a)
{
    for (size_t j = 0; j < n; j++) {
        if (strcmp(socks[j].spec, a->spec) == 0) {
            return true;
        }
    }
    return false;
}

/*
 * Refuse, before binding any, an address of cfg another program listens on
 * (mk_listener_probe; reuseport sockets would share it silently). Addresses
 * that may meet one of the n sockets kept in `socks` are not probed: the
 * probe would find the supervisor's own socket.
 */
static int mk_supervisor_probe(const struct mk_config *cfg, const struct mk_sup_socket *socks,
                               size_t n, char *err, size_t errlen)
{
    for (size_t i = 0; i < cfg->n_listen; i++) {
        bool held = false;
        for (size_t j = 0; j < cfg->n_listen && !held; j++) {
            held = mk_supervisor_holds(socks, n, &cfg->listen[j]) &&
                   mk_listener_addr_overlap(&cfg->listen[i], &cfg->listen[j]);
        }
        if (!held && mk_listener_probe(&cfg->listen[i], err, errlen) != MK_OK) {
            return MK_ERR;
        }
    }
    return MK_OK;
}

/*
 * Make the held sockets match cfg: as many per Listen address as the server
 * will take (one per worker with reuseport, else one). Sockets of the same
 * address and kind are kept, so their queues survive; the others are closed
 * before new ones are bound (a fair socket would refuse reuseport ones
 * beside it); with reuseport the new addresses are probed first. MK_OK, or
 * MK_ERR with the reason in err (the sockets of the failed address, or all
 * new ones when a probe failed, are then missing; the child binds them or
 * reports).
 */
static int mk_supervisor_bind(struct mk_supervisor *s, const struct mk_config *cfg, char *err,
                              size_t errlen)
{
    bool reuseport = cfg->balancing == MK_BALANCE_REUSEPORT;
    size_t each = reuseport ? (size_t) cfg->workers : 1, n = 0;
    struct mk_sup_socket *next = mk_calloc(cfg->n_listen * each + 1, sizeof(*next));
    int rc = MK_OK;

    for (size_t i = 0; i < cfg->n_listen; i++) {
        for (size_t k = 0; k < each; k++) {
            for (size_t j = 0; j < s->n_socks; j++) {
                struct mk_sup_socket *old = &s->socks[j];
                if (old->fd >= 0 && old->reuseport == reuseport &&
                    strcmp(old->spec, cfg->listen[i].spec) == 0) {
                    next[n++] = *old;
                    old->fd = -1;
                    break;
                }
            }
        }
    }
    for (size_t j = 0; j < s->n_socks; j++) {
        if (s->socks[j].fd >= 0) {
            mk_sup_socket_close(&s->socks[j]);
        }
    }
    mk_free(s->socks);
    if (reuseport && mk_supervisor_probe(cfg, next, n, err, errlen) != MK_OK) {
        s->socks = next;
        s->n_socks = n;
        return MK_ERR;
    }
    for (size_t i = 0; i < cfg->n_listen; i++) {
        size_t have = 0;
        for (size_t j = 0; j < n; j++) {
            have += strcmp(next[j].spec, cfg->listen[i].spec) == 0;
        }
        for (; have < each && rc == MK_OK; have++) {
            int fd = mk_listener_socket(cfg, &cfg->listen[i], reuseport, err, errlen);
            if (fd < 0) {
                rc = MK_ERR;
                break;
            }
            next[n++] = (struct mk_sup_socket){mk_strdup(cfg->listen[i].spec), reuseport, fd};
        }
    }
    s->socks = next;
    s->n_socks = n;
    return rc;
}

/* ---- readiness ----------------------------------------------------------- */

/* The socket the child's sd_notify messages come to (abstract, credentials on). */
static int mk_supervisor_notify_open(struct mk_supervisor *s)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    struct timespec ts;
    int one = 1;

    s->nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s->nfd < 0) {
        return MK_ERR;
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(s->notify_name, sizeof(s->notify_name), "@monkey-supervisor-%ld-%lx", (long) getpid(),
             (unsigned long) ts.tv_nsec);
    size_t n = strlen(s->notify_name);
    memcpy(sun.sun_path, s->notify_name, n);
    sun.sun_path[0] = '\0';
    if (setsockopt(s->nfd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0 ||
        bind(s->nfd, (struct sockaddr *) &sun,
             (socklen_t) (offsetof(struct sockaddr_un, sun_path) + n)) < 0) {
        return MK_ERR;
    }
    return MK_OK;
}

static void mk_supervisor_write_pidfile(struct mk_supervisor *s)
{
    char err[PATH_MAX + 64];

    if (!s->pidfile) {
        return;
    }
    if (mk_process_pidfile_write(s->pidfile, err, sizeof(err)) != MK_OK) {
        mk_err("supervisor: %s", err);
        return;
    }
    s->pidfile_written = true;
}

/* The first child is ready, or none will be (err). */
static void mk_supervisor_tell(struct mk_supervisor *s, const char *err)
{
    if (s->ever_ready) {
        return;
    }
    s->ever_ready = true;
    if (!err) {
        mk_supervisor_write_pidfile(s);
    }
    if (s->opts->ready) {
        s->opts->ready(s->opts->ready_arg, err);
    }
}

/* A datagram on the notify socket: the child's, passed on; others dropped. */
static void mk_supervisor_notify_read(struct mk_supervisor *s)
{
    char in[1024], out[1100];
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(struct ucred))];
    } ctl;
    struct iovec iov = {in, sizeof(in) - 1};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl, .msg_controllen = sizeof(ctl)};
    bool ready;
    ssize_t len;

    while ((len = recvmsg(s->nfd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)) >= 0) {
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        struct ucred cred = {0};
        if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
            memcpy(&cred, CMSG_DATA(c), sizeof(cred));
        }
        if (s->child > 0 && cred.pid == s->child) {
            mk_supervisor_notify_error(in, (size_t) len, s->child_error, sizeof(s->child_error));
        }
        if (s->child > 0 && cred.pid == s->child &&
            mk_supervisor_notify_rewrite(in, (size_t) len, (long) getpid(), out, sizeof(out),
                                         &ready) > 0) {
            mk_systemd_notify(out);
            if (ready) {
                s->child_ready = true;
            }
            if (ready && !s->ever_ready) {
                mk_info("supervisor: the server (pid %ld) is ready", (long) s->child);
                mk_supervisor_tell(s, NULL);
            }
            else if (ready && s->failed_starts > 0) {
                mk_info("supervisor: the server (pid %ld) is ready again, after %u failed starts",
                        (long) s->child, s->failed_starts);
            }
            else if (ready && s->stats.restarts > 0) {
                mk_debug("supervisor: the server (pid %ld) is ready", (long) s->child);
            }
            if (ready) {
                s->failed_starts = 0;
            }
        }
        msg.msg_controllen = sizeof(ctl);
    }
}

/* ---- the child ----------------------------------------------------------- */

static void mk_setenv_num(const char *name, long long v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", v);
    setenv(name, buf, 1);
}

/*
 * After exec of /proc/self/exe failed with ENOEXEC in the forked child: the
 * kernel cannot run this binary, so a user-mode emulator runs it (an ARM
 * build started as "qemu-aarch64-static monkey ..." on x86-64, with no
 * binfmt_misc entry through which the kernel would start the emulator
 * itself). The emulator shows this process its own binary as
 * /proc/self/exe, but not the parent's, the same binary before the fork:
 * the kernel's /proc/PARENT/exe names the emulator. Run the binary through
 * it as binfmt_misc would: EMULATOR BINARY ARGV[1]... (the emulator's
 * options from the environment, QEMU_*, carry over; those of its command
 * line do not). Returns, errno set, when there is no such emulator or it
 * cannot be run.
 */
static void mk_supervisor_exec_emulated(char *const *argv, pid_t parent)
{
    char self[PATH_MAX], emu[PATH_MAX], link[64];
    size_t argc = 0, k = 2;
    ssize_t n, m;

    snprintf(link, sizeof(link), "/proc/%ld/exe", (long) parent);
    n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    m = readlink(link, emu, sizeof(emu) - 1);
    if (n <= 0 || m <= 0) {
        return;
    }
    self[n] = emu[m] = '\0';
    if (strcmp(self, emu) == 0) {
        errno = ENOEXEC; /* no emulator: the binary is not for this machine */
        return;
    }
    while (argv[argc]) {
        argc++;
    }
    char *args[argc + 3];
    args[0] = emu;
    args[1] = self;
    for (size_t i = 1; i < argc; i++) {
        args[k++] = argv[i];
    }
    args[k] = NULL;
    execv(emu, args);
}

/*
 * In the forked child, before exec: the sockets to 3, 4, ..., the
 * variables, the signal mask (the caller's, plus the server's signals).
 * Never returns.
 */
__attribute__((noreturn)) static void mk_supervisor_exec(struct mk_supervisor *s, pid_t parent)
{
    int high[s->n_socks + 1];
    int base = MK_LISTEN_FDS_START + (int) s->n_socks;

    /* First out of the way of 3..3+n, then into place (dup2 clears CLOEXEC). */
    for (size_t i = 0; i < s->n_socks; i++) {
        high[i] = fcntl(s->socks[i].fd, F_DUPFD_CLOEXEC, base);
        if (high[i] < 0) {
            _exit(127);
        }
    }
    for (size_t i = 0; i < s->n_socks; i++) {
        if (dup2(high[i], MK_LISTEN_FDS_START + (int) i) < 0) {
            _exit(127);
        }
    }
    if (s->n_socks) {
        mk_setenv_num("LISTEN_FDS", (long long) s->n_socks);
        mk_setenv_num("LISTEN_PID", (long long) getpid());
    }
    else {
        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_PID");
    }
    unsetenv("LISTEN_FDNAMES");
    setenv("NOTIFY_SOCKET", s->notify_name, 1);
    mk_setenv_num(MK_SUPERVISOR_ENV_PID, (long long) parent);
    mk_setenv_num(MK_SUPERVISOR_ENV_RESTARTS, (long long) s->stats.restarts);
    if (s->stats.last_crash) {
        char crash[160];
        snprintf(crash, sizeof(crash), "%lld %s", (long long) s->stats.last_crash,
                 s->stats.last_crash_reason);
        setenv(MK_SUPERVISOR_ENV_CRASH, crash, 1);
    }
    /* A supervisor killed outright takes its server with it. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) {
        _exit(1);
    }
    /*
     * The signals the server reads from its signalfd stay blocked across
     * exec: one passed on while the child starts waits for its loop, rather
     * than killing a server that has not set up its signal mask yet (or
     * dumping its core, for QUIT).
     */
    sigset_t mask = s->old_mask;
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGQUIT);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGUSR1);
    sigprocmask(SIG_SETMASK, &mask, NULL);
    execv("/proc/self/exe", s->opts->argv);
    if (errno == ENOEXEC) {
        mk_supervisor_exec_emulated(s->opts->argv, parent);
    }
    fprintf(stderr, "monkey: supervisor: cannot run /proc/self/exe: %s\n", strerror(errno));
    _exit(127);
}

/* Start a child. MK_OK, or MK_ERR (logged). */
static int mk_supervisor_spawn(struct mk_supervisor *s)
{
    pid_t parent = getpid();
    pid_t pid;

    s->restart_at_ms = 0;
    s->child_ready = false;
    s->child_error[0] = '\0';
    pid = fork();
    if (pid < 0) {
        mk_err("supervisor: cannot start the server: %s", strerror(errno));
        return MK_ERR;
    }
    if (pid == 0) {
        mk_supervisor_exec(s, parent);
    }
    s->child = pid;
    if (s->stats.restarts) {
        mk_info("supervisor: started the server again (pid %ld, restart %u)", (long) pid,
                s->stats.restarts);
    }
    return MK_OK;
}

/*
 * Before a restart, the configuration may have changed (a reload the old
 * child took): hold the sockets the new child will want. On a
 * configuration that does not load, the sockets stay; the child reports it.
 */
static void mk_supervisor_rebind(struct mk_supervisor *s)
{
    char err[512];
    struct mk_config *cfg = mk_server_load_config(s->srv, err, sizeof(err));

    if (!cfg) {
        return;
    }
    if (mk_supervisor_bind(s, cfg, err, sizeof(err)) != MK_OK) {
        mk_warn("supervisor: %s (the server binds it itself)", err);
    }
    mk_config_unref(cfg);
}

/*
 * A restart (an earlier child served) whose child exited before it was
 * ready: the files on disk no longer start a server (a DocumentRoot
 * removed, a file being edited since the last start). The supervisor keeps
 * the sockets and tries again, backing off, so that the server is back as
 * soon as the files are; a stop ends the wait. Logged with the child's
 * reason.
 */
static void mk_supervisor_retry(struct mk_supervisor *s, long pid, int status)
{
    uint32_t wait_ms = mk_supervisor_retry_ms(++s->failed_starts);

    mk_err("supervisor: the server (pid %ld) could not start again (exit status %d)%s%s; "
           "trying again in %u ms",
           pid, status, s->child_error[0] ? ": " : "", s->child_error, wait_ms);
    s->stats.restarts++;
    mk_supervisor_rebind(s);
    s->restart_at_ms = mk_clock_mono_ms() + wait_ms;
}

/*
 * The child ended with `wstatus`. Returns true when the supervisor ends
 * too (s->opts->status set), false when a new child is due.
 */
static bool mk_supervisor_child_exit(struct mk_supervisor *s, int wstatus)
{
    char reason[96];
    long pid = (long) s->child;

    mk_supervisor_notify_read(s); /* what it said before it ended: why it could not start */
    s->child = 0;
    mk_supervisor_reason(wstatus, reason, sizeof(reason));
    if (WIFEXITED(wstatus)) {
        int status = WEXITSTATUS(wstatus);
        const char *why = s->child_error[0] ? s->child_error : NULL;
        if (status != 0 && !s->child_ready && s->ever_ready && !s->stopping) {
            mk_supervisor_retry(s, pid, status);
            return false;
        }
        if (status == 0) {
            mk_info("supervisor: the server (pid %ld) exited", pid);
        }
        else {
            mk_err("supervisor: the server (pid %ld) exited with status %d%s%s", pid, status,
                   why ? ": " : "", why ? why : "");
        }
        mk_supervisor_tell(s, why ? why : "the server did not start");
        s->opts->status = status;
        return true;
    }
    if (s->stopping) {
        mk_warn("supervisor: the server (pid %ld) ended while stopping: %s", pid, reason);
        s->opts->status = 128 + (WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0);
        return true;
    }
    unsigned n = mk_supervisor_crash_window_add(&s->crashes, mk_clock_mono_ms());
    s->stats.last_crash = time(NULL);
    snprintf(s->stats.last_crash_reason, sizeof(s->stats.last_crash_reason), "%s", reason);
    if (n >= s->crashes.limit) {
        mk_err("supervisor: the server (pid %ld) crashed: %s; giving up after %u %s "
               "within %u s (SupervisorCrashLimit, SupervisorCrashWindow)",
               pid, reason, n, mk_plural(n, "crash", "crashes"), s->crashes.window_ms / 1000);
        mk_supervisor_tell(s, "the server crashed at every start");
        s->opts->status = 1;
        return true;
    }
    uint32_t wait_ms = mk_supervisor_backoff_ms(n);
    s->stats.restarts++;
    if (wait_ms) {
        mk_err("supervisor: the server (pid %ld) crashed: %s; starting it again in %u ms", pid,
               reason, wait_ms);
    }
    else {
        mk_err("supervisor: the server (pid %ld) crashed: %s; starting it again", pid, reason);
    }
    mk_supervisor_rebind(s);
    s->restart_at_ms = mk_clock_mono_ms() + wait_ms;
    return false;
}

/* ---- the loop ------------------------------------------------------------ */

/* A signal for the supervisor. Returns true when it ends (no child left). */
static bool mk_supervisor_signal(struct mk_supervisor *s, const struct signalfd_siginfo *si)
{
    int sig = (int) si->ssi_signo;

    switch (sig) {
    case SIGTERM:
    case SIGINT:
    case SIGQUIT:
        s->stopping = true;
        s->restart_at_ms = 0;
        if (!s->child) {
            mk_info("supervisor: stopping (no server running)");
            s->opts->status = 0;
            return true;
        }
        break;
    case SIGUSR1:
        if (mk_log_reopen() != MK_OK) {
            mk_warn("supervisor: cannot reopen the log: %s", strerror(errno));
        }
        break;
    case SIGHUP:
        break;
    default:
        return false;
    }
    /* Typed at a terminal, the signal reached the child's process group. */
    if (s->child && si->ssi_code != SI_KERNEL) {
        kill(s->child, sig);
    }
    return false;
}

/* Reap children; true when the supervisor ends. */
static bool mk_supervisor_reap(struct mk_supervisor *s)
{
    int wstatus;
    pid_t pid;

    while ((pid = waitpid(-1, &wstatus, WNOHANG)) > 0) {
        if (pid == s->child && mk_supervisor_child_exit(s, wstatus)) {
            return true;
        }
    }
    return false;
}

static void mk_supervisor_loop(struct mk_supervisor *s)
{
    for (;;) {
        int timeout = -1;
        if (s->restart_at_ms) {
            uint64_t now = mk_clock_mono_ms();
            if (now >= s->restart_at_ms) {
                if (mk_supervisor_spawn(s) != MK_OK) {
                    mk_supervisor_tell(s, "cannot start the server");
                    s->opts->status = 1;
                    return;
                }
                continue;
            }
            timeout = (int) (s->restart_at_ms - now);
        }
        struct pollfd pfd[2] = {{s->sfd, POLLIN, 0}, {s->nfd, POLLIN, 0}};
        if (poll(pfd, 2, timeout) < 0) {
            if (errno == EINTR) {
                continue;
            }
            mk_err("supervisor: poll: %s", strerror(errno));
            s->opts->status = 1;
            return;
        }
        /* Readiness first: a message sent just before the child died. */
        if (pfd[1].revents) {
            mk_supervisor_notify_read(s);
        }
        struct signalfd_siginfo si;
        while (pfd[0].revents && read(s->sfd, &si, sizeof(si)) == (ssize_t) sizeof(si)) {
            bool done =
                si.ssi_signo == SIGCHLD ? mk_supervisor_reap(s) : mk_supervisor_signal(s, &si);
            if (done) {
                return;
            }
        }
    }
}

/* ---- entry --------------------------------------------------------------- */

static void mk_supervisor_release(struct mk_supervisor *s)
{
    for (size_t i = 0; i < s->n_socks; i++) {
        mk_sup_socket_close(&s->socks[i]);
    }
    mk_free(s->socks);
    if (s->pidfile_written) {
        unlink(s->pidfile);
    }
    mk_free(s->pidfile);
    if (s->sfd >= 0) {
        close(s->sfd);
    }
    if (s->nfd >= 0) {
        close(s->nfd);
    }
}

/* Take the settings the supervisor needs from cfg and hold its sockets. */
static int mk_supervisor_setup(struct mk_supervisor *s, const struct mk_config *cfg, char *err,
                               size_t errlen)
{
    sigset_t set;

    /* The server, once it switched to User, opens the same file again. */
    mk_log_set_owner(mk_process_user_uid(cfg));
    if (cfg->log_path && mk_log_open(cfg->log_path) != MK_OK) {
        ERRF("Log %s: %s", cfg->log_path, strerror(errno));
        return MK_ERR;
    }
    mk_log_set_level((enum mk_log_level) cfg->log_level);
    mk_supervisor_crash_window_init(&s->crashes, cfg->supervisor_crash_limit,
                                    cfg->supervisor_crash_window_ms);
    s->pidfile = cfg->pidfile ? mk_strdup(cfg->pidfile) : NULL;
    if (mk_supervisor_bind(s, cfg, err, errlen) != MK_OK) {
        return MK_ERR;
    }
    mk_process_signal_set(&set); /* the server's signals (PIPE read and dropped), and CHLD */
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, &s->old_mask);
    s->sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (s->sfd < 0 || mk_supervisor_notify_open(s) != MK_OK) {
        ERRF("supervisor: %s", strerror(errno));
        return MK_ERR;
    }
    return MK_OK;
}

int mk_supervisor_run(struct mk_server *srv, struct mk_supervisor_opts *o, char *err, size_t errlen)
{
    struct mk_supervisor *s;
    struct mk_config *cfg = mk_server_load_config(srv, err, errlen);
    int rc;

    if (!cfg) {
        return o->force ? MK_ERR : MK_DECLINED;
    }
    if (!o->force && !cfg->supervisor) {
        mk_config_unref(cfg);
        return MK_DECLINED;
    }
    s = mk_calloc(1, sizeof(*s));
    s->srv = srv;
    s->opts = o;
    s->sfd = s->nfd = -1;
    s->stats.pid = (long) getpid();
    sigprocmask(SIG_BLOCK, NULL, &s->old_mask);
    rc = mk_supervisor_setup(s, cfg, err, errlen);
    mk_config_unref(cfg);
    if (rc == MK_OK) {
        mk_info("supervisor: pid %ld, %zu listening sockets", (long) getpid(), s->n_socks);
        rc = mk_supervisor_spawn(s);
        if (rc != MK_OK) {
            ERRF("supervisor: cannot start the server: %s", strerror(errno));
        }
    }
    if (rc == MK_OK) {
        mk_supervisor_loop(s);
        if (s->child) { /* the loop failed: do not leave the server behind */
            kill(s->child, SIGTERM);
            waitpid(s->child, NULL, 0);
        }
        mk_info("supervisor: stopped (status %d)", o->status);
    }
    sigprocmask(SIG_SETMASK, &s->old_mask, NULL);
    mk_supervisor_release(s);
    mk_free(s);
    return rc;
}
