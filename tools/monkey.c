/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * monkey.c: the `monkey` binary. It parses the command line and hands over
 * to the library (monkey.h); everything else lives in server/.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <monkey/mk_util.h>
#include <monkey/monkey.h>

#include "../server/process/process.h"
#include "../server/process/supervisor.h"

#ifndef MK_DEFAULT_CONFDIR
#define MK_DEFAULT_CONFDIR "/etc/monkey"
#endif
#ifndef MK_PLUGIN_DIR
#define MK_PLUGIN_DIR "/usr/local/lib/monkey/plugins"
#endif

#ifdef MK_HAVE_SUPERVISOR
#define MK_HELP_SUPERVISOR                                                                         \
    "  -S, --supervisor     run the server as the child of a supervisor that starts\n"             \
    "                       it again after a crash (as Supervisor On)\n"
#else
#define MK_HELP_SUPERVISOR "  -S, --supervisor     (this server was built without the supervisor)\n"
#endif

/*
 * The parts this server was built without (cmake/profile.cmake), for -v:
 * ", HTTP/2, the supervisor"; empty when it has them all.
 */
static const char mk_left_out[] = ""
#ifndef MK_HAVE_H2
                                  ", HTTP/2"
#endif
#ifndef MK_HAVE_COMPRESS
                                  ", compression on the fly"
#endif
#ifndef MK_HAVE_SUPERVISOR
                                  ", the supervisor"
#endif
#ifndef MK_HAVE_SYSTEMD
                                  ", systemd support"
#endif
#ifndef MK_HAVE_FAIR
                                  ", the fair balancing mode"
#endif
#ifndef MK_HAVE_REALIP
                                  ", the client's address behind a balancer"
#endif
#ifndef MK_HAVE_RULES
                                  ", request rules"
#endif
#ifndef MK_HAVE_LIBMONKEY
                                  ", library mode"
#endif
    ;

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: monkey [OPTION]...\n"
            "Monkey HTTP Server %s: a fast, small web server for Linux.\n"
            "\n"
            "  -c, --confdir DIR    configuration directory (default: %s)\n"
            "  -o, --serve DIR      serve DIR with built-in defaults, no configuration files\n"
            "  -p, --port PORT      listen on PORT (replaces every Listen line)\n"
            "  -w, --workers N      worker threads (0: one per CPU)\n"
            "  -t, --test           check the configuration and exit\n"
            "  -T, --test-dump      check it, print it after Include and variables, and exit\n"
            "  -D, --daemon         run in the background (stays in the foreground otherwise)\n"
            "%s"
            "  -v, --version        print the version (and the parts left out) and exit\n"
            "  -h, --help           print this help and exit\n"
            "\n"
            "Signals: TERM or INT stop after the responses in progress (twice: at once),\n"
            "QUIT stops after them, HUP reloads the configuration, USR1 reopens the log files.\n"
            "Plugins named in plugins.load and not built in: %s/monkey-NAME.so.\n"
            "Exit status: 0 on success, 1 on a configuration or start error, 2 on bad usage.\n",
            MK_VERSION_STR, MK_DEFAULT_CONFDIR, MK_HELP_SUPERVISOR, MK_PLUGIN_DIR);
}

/*
 * Run in the background. The parent stays until the child reports whether
 * the server started, so errors reach the terminal and the exit status.
 */
static int daemonize(int *report_fd)
{
    int fds[2];
    pid_t pid;

    if (pipe2(fds, O_CLOEXEC) < 0) {
        return -1;
    }
    pid = fork();
    if (pid < 0) {
        return -1;
    }
    if (pid > 0) {
        char msg[600];
        ssize_t n;
        close(fds[1]);
        n = read(fds[0], msg, sizeof(msg) - 1);
        if (n > 0 && msg[0] == 'K') {
            _exit(0);
        }
        if (n > 1) {
            msg[n] = '\0';
            fprintf(stderr, "monkey: %s\n", msg + 1);
        }
        waitpid(pid, NULL, WNOHANG);
        _exit(1);
    }
    close(fds[0]);
    if (setsid() < 0) {
        return -1;
    }
    *report_fd = fds[1];
    return 0;
}

/*
 * Tell the waiting parent of daemonize() whether the server started (fd -1:
 * a supervisor's child, whose errors go to standard error), and detach from
 * the terminal once it did.
 */
static void daemon_report(int fd, const char *err)
{
    char msg[600];
    int n = snprintf(msg, sizeof(msg), "%c%s", err ? 'E' : 'K', err ? err : "");
    if (fd < 0) {
        if (err) {
            fprintf(stderr, "monkey: %s\n", err);
        }
    }
    else {
        if (write(fd, msg, (size_t) n) < 0) {
            /* the parent is gone; nothing to tell */
        }
        close(fd);
    }
    if (!err) {
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, STDIN_FILENO);
            dup2(null, STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
            if (null > STDERR_FILENO) {
                close(null);
            }
        }
    }
}

/*
 * The server started (err NULL) or cannot (the supervisor's first child
 * serves, or none will): tell -D's parent, once.
 */
static void daemon_started(void *arg, const char *err)
{
    int *report = arg;

    daemon_report(*report, err);
    *report = -1;
}

#ifdef MK_HAVE_SUPERVISOR
/*
 * Run under a supervisor when -S or Supervisor On asks for it (never in the
 * supervisor's own child). Returns true with *status the exit status when
 * it did, false when the server is to start in this process.
 */
static bool supervise(struct mk_server *srv, bool force, char **argv, int *report, int *status)
{
    struct mk_supervisor_opts so = {
        .force = force,
        .argv = argv,
        .ready = *report >= 0 ? daemon_started : NULL,
        .ready_arg = report,
    };
    char err[1024];
    int rc = mk_supervisor_run(srv, &so, err, sizeof(err));

    if (rc == MK_DECLINED) {
        return false;
    }
    *status = so.status;
    if (rc != MK_OK) {
        if (*report >= 0) {
            daemon_report(*report, err);
        }
        else {
            fprintf(stderr, "monkey: %s\n", err);
        }
        *status = 1;
    }
    return true;
}
#endif

#if defined(__SANITIZE_ADDRESS__)
/*
 * AddressSanitizer builds (MK_SANITIZE): LeakSanitizer is told not to
 * follow __tls_get_addr. Up to GCC 13 its runtime takes a dynamic TLS
 * block that malloc placed 16 bytes past a page boundary for the header
 * glibc before 2.25 put there, reads the two words before it as the
 * block's bounds, and its tracer dies on them at the exit check ("Tracer
 * caught signal 11", google/sanitizers#1322): by chance of the layout,
 * for a plugin with __thread data (duda, the gateways) that the main
 * thread touched. The blocks are then not roots of the leak check.
 */
__attribute__((visibility("default"))) const char *__asan_default_options(void);
__attribute__((visibility("default"))) const char *__asan_default_options(void)
{
    return "intercept_tls_get_addr=0";
}
#endif

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"confdir", required_argument, NULL, 'c'},
        {"serve", required_argument, NULL, 'o'},
        {"port", required_argument, NULL, 'p'},
        {"workers", required_argument, NULL, 'w'},
        {"test", no_argument, NULL, 't'},
        {"test-dump", no_argument, NULL, 'T'},
        {"daemon", no_argument, NULL, 'D'},
        {"supervisor", no_argument, NULL, 'S'}, /* Supervisor On */
        {"version", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *confdir = MK_DEFAULT_CONFDIR, *serve = NULL, *port = NULL, *workers = NULL;
    bool test = false, dump = false, daemon_mode = false, supervisor = false;
    /* Before anything reads the environment: a supervisor's variables. */
    bool supervised = mk_supervisor_child_init(argv[0]);
    char err[1024], path[PATH_MAX];
    int opt, rc;

    while ((opt = getopt_long(argc, argv, "c:o:p:w:tTDSvh", opts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            confdir = optarg;
            break;
        case 'o':
            serve = optarg;
            break;
        case 'p':
            port = optarg;
            break;
        case 'w':
            workers = optarg;
            break;
        case 't':
            test = true;
            break;
        case 'T':
            test = dump = true;
            break;
        case 'D':
            daemon_mode = true;
            break;
        case 'S':
#ifndef MK_HAVE_SUPERVISOR
            fprintf(stderr, "monkey: -S: this server was built without the supervisor\n");
            return 2;
#endif
            supervisor = true;
            break;
        case 'v':
            printf("Monkey HTTP Server %s\n", MK_VERSION_STR);
            if (mk_left_out[0]) {
                printf("Built without %s.\n", mk_left_out + 2);
            }
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "monkey: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }

    struct mk_server *srv = mk_server_create();
    if (serve) {
        mk_server_set_docroot(srv, realpath(serve, path) ? path : serve);
    }
    else {
        mk_server_set_confdir(srv, realpath(confdir, path) ? path : confdir);
    }
    if (port) {
        mk_server_set(srv, "Listen", port);
    }
    if (workers) {
        mk_server_set(srv, "Workers", workers);
    }

    if (test) {
        /* -T: the configuration on stdout, the verdict on stderr (as nginx -T). */
        rc = dump ? mk_server_dump(srv, stdout, err, sizeof(err))
                  : mk_server_check(srv, err, sizeof(err));
        if (rc == MK_OK) {
            int n = mk_server_workers(srv);
            fprintf(dump ? stderr : stdout, "monkey: configuration %s is valid (%d %s)\n",
                    serve ? serve : confdir, n, mk_plural((unsigned) n, "worker", "workers"));
        }
        else {
            fprintf(stderr, "monkey: %s\n", err);
        }
        mk_server_destroy(srv);
        return rc == MK_OK ? 0 : 1;
    }

    int report = -1;
    if (daemon_mode && !supervised && daemonize(&report) < 0) {
        fprintf(stderr, "monkey: cannot run in the background: %s\n", strerror(errno));
        mk_server_destroy(srv);
        return 1;
    }
#ifdef MK_HAVE_SUPERVISOR
    if (!supervised) {
        int status;
        if (supervise(srv, supervisor, argv, &report, &status)) {
            mk_server_destroy(srv);
            return status;
        }
    }
#else
    (void) supervisor;
#endif
    if (daemon_mode) {
        rc = mk_process_run_notify(srv, daemon_started, &report, err, sizeof(err));
    }
    else {
        rc = mk_server_run(srv, err, sizeof(err));
        if (rc != MK_OK) {
            fprintf(stderr, "monkey: %s\n", err);
        }
    }
    if (rc != MK_OK) {
        mk_supervisor_child_failed(err); /* its Log has the reason: our stderr may go nowhere */
    }
    mk_server_destroy(srv);
    return rc == MK_OK ? 0 : 1;
}
