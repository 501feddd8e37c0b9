/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * mk-watch.c: the `mk-watch` command, the resource watcher.
 *
 * It watches a running process tree (--pid) or starts a server and watches
 * that (--run), runs an optional load command, samples /proc on a fixed
 * clock and sums the run up (see usage() and README.md).
 *
 * Guarantees: a server it started is stopped before it exits, by its PID
 * and by its process group (whose ID is that PID), SIGTERM first and
 * SIGKILL after the grace period; nothing is ever signalled by name. A
 * process given with --pid is never signalled. The load command is
 * signalled only when the run is cut short (--duration, SIGINT, SIGTERM).
 * Single-threaded: signal handlers only set a flag and wake the main loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "watch.h"

#define MK_WATCH_EXIT_ERROR 1
#define MK_WATCH_EXIT_USAGE 2

/* Longest load output line kept for recognition; longer ones are cut. */
#define MK_WATCH_LOAD_LINE 512

struct mk_watch_opts {
    pid_t pid;         /* --pid, 0 if not given */
    const char *run;   /* --run, NULL if not given */
    const char *ready; /* [HOST:]PORT */
    double ready_timeout_s;
    unsigned interval_ms;
    double duration_s; /* 0: no limit */
    bool duration_given;
    double grace_s;
    bool requests_given;
    uint64_t requests;
    const char *csv_path;
    const char *json_path;
    const char *summary_path;
    const char *load_output;
    const char *server_log;
    bool quiet;
    char **load_argv; /* NULL-terminated; NULL without a load command */
};

/* Everything one run owns. */
struct mk_watch_run {
    const struct mk_watch_opts *opt;
    struct addrinfo *ready_addr;
    pid_t server; /* started with --run; 0 otherwise */
    bool server_reaped;
    pid_t load; /* 0 until started */
    bool load_reaped;
    int load_status; /* exit code, once reaped */
    int load_fd;     /* read end of the load's standard output; -1 once closed */
    FILE *load_out;  /* where that output is passed on */
    FILE *summary_file;
    FILE *text_out; /* the human summary */
    char line[MK_WATCH_LOAD_LINE];
    size_t line_len;
    struct mk_watch_tree tree;
    struct mk_watch_out out;
    struct mk_watch_summary sum;
    double t0;
    bool tree_gone;
    bool failed; /* an error that makes the exit status 1 */
};

/* Written by the signal handler: the stop signal received, 0 if none. */
static volatile sig_atomic_t mk_watch_stop_sig;
/* Self-pipe: the handler writes a byte so that poll() in the main loop wakes. */
static int mk_watch_wake[2] = {-1, -1};

static void usage(FILE *out)
{
    fprintf(out, "NAME\n"
                 "    mk-watch - watch the memory and CPU of a server while a load tool runs\n"
                 "\n"
                 "SYNOPSIS\n"
                 "    mk-watch [OPTIONS] --pid PID [--] [LOAD COMMAND...]\n"
                 "    mk-watch [OPTIONS] --run \"SERVER COMMAND\" [--ready-port [HOST:]PORT]\n"
                 "             [--] [LOAD COMMAND...]\n"
                 "\n"
                 "DESCRIPTION\n"
                 "    mk-watch samples /proc for a process and all its descendants (the whole\n"
                 "    tree with every thread, found again at each sample) while a load command\n"
                 "    runs, then sums up what the tree used: memory (RSS and PSS), CPU time,\n"
                 "    threads, file descriptors and context switches.\n"
                 "\n"
                 "    With --pid it watches a running process and never signals it. With --run\n"
                 "    it starts SERVER COMMAND with /bin/sh -c in a process group of its own,\n"
                 "    waits until --ready-port accepts connections, and stops it at the end by\n"
                 "    its PID and process group: SIGTERM, then SIGKILL after --grace seconds.\n"
                 "    The server must stay in the foreground: one that daemonises leaves the\n"
                 "    tree (watch it with --pid instead).\n"
                 "\n"
                 "    The first sample is taken just before the load command starts and the\n"
                 "    last one just after it exits; without a load command, sampling lasts\n"
                 "    --duration seconds. CPU time and context switches are the difference\n"
                 "    between the last and the first sample. The load command runs without a\n"
                 "    shell; its standard output is passed on and read for the request count\n"
                 "    and rate that wrk, ab or h2load print, from which mk-watch computes the\n"
                 "    CPU time the tree spent per request.\n"
                 "\n"
                 "OPTIONS\n"
                 "    -p, --pid PID            watch the running process PID and its descendants\n"
                 "    -r, --run COMMAND        start COMMAND with /bin/sh -c and watch it\n"
                 "    -P, --ready-port [HOST:]PORT\n"
                 "                             with --run: wait until a TCP connection to PORT\n"
                 "                             succeeds (HOST: 127.0.0.1; [ADDR] for IPv6)\n"
                 "    -T, --ready-timeout SEC  give up waiting after SEC seconds (default 10)\n"
                 "    -i, --interval MS        sample every MS milliseconds (default 100)\n"
                 "    -d, --duration SEC       without a load command: sample for SEC seconds\n"
                 "                             (default 10; 0: until interrupted or the tree\n"
                 "                             exits); with one: interrupt it (SIGINT, which\n"
                 "                             makes load tools print their results) after SEC\n"
                 "    -g, --grace SEC          from SIGTERM (SIGINT for the load) to SIGKILL\n"
                 "                             (default 5)\n"
                 "    -n, --requests N         the run served N requests, for a load command\n"
                 "                             that does not print a count mk-watch knows\n"
                 "    -c, --csv FILE           write every sample as CSV to FILE\n"
                 "    -j, --json FILE          write every sample as JSON to FILE\n"
                 "    -s, --summary-json FILE  write the summary as JSON to FILE\n"
                 "    -o, --load-output FILE   pass the load command's output to FILE\n"
                 "    -l, --server-log FILE    with --run: the server's standard output and\n"
                 "                             error go to FILE (default: inherited)\n"
                 "    -q, --quiet              do not print the summary\n"
                 "    -V, --version            print the version and exit\n"
                 "    -h, --help               print this help and exit\n"
                 "\n"
                 "    FILE may be - for standard output; the load command's output and the\n"
                 "    summary then go to standard error.\n"
                 "\n"
                 "OUTPUT\n"
                 "    Samples, as CSV columns and JSON keys (JSON says t for time_s): time_s,\n"
                 "    processes, threads, fds, rss_kb, pss_kb, cpu_user_s, cpu_system_s,\n"
                 "    ctx_voluntary, ctx_involuntary. The last four are cumulative and include\n"
                 "    members of the tree that have exited, with the values last seen.\n"
                 "\n"
                 "    Summary JSON keys: tool, version, pid, server_command, load_command,\n"
                 "    load_exit_status, server_exited_early, interval_ms, samples, duration_s,\n"
                 "    rss_peak_kb, rss_avg_kb, pss_peak_kb, pss_avg_kb, pss_estimated,\n"
                 "    cpu_user_s, cpu_system_s, cpu_total_s, cpu_percent, requests,\n"
                 "    requests_source (wrk, ab, h2load or option), requests_per_s,\n"
                 "    cpu_us_per_request, processes_peak, processes_seen, threads_peak,\n"
                 "    fds_peak, fds_partial, ctx_voluntary, ctx_involuntary. Unknown is null.\n"
                 "\n"
                 "    RSS counts a page shared by several processes once in each; PSS divides\n"
                 "    it among them, so the tree's PSS is what it really costs. PSS comes from\n"
                 "    /proc/PID/smaps_rollup; where that is unreadable RSS stands in and\n"
                 "    pss_estimated is true. A process that starts and ends between two\n"
                 "    samples is not seen.\n"
                 "\n"
                 "EXAMPLES\n"
                 "    mk-watch --run 'build/bin/monkey -o htdocs -p 2001' --ready-port 2001 \\\n"
                 "        -- wrk -t2 -c50 -d10s http://127.0.0.1:2001/\n"
                 "    mk-watch --pid \"$(cat /run/nginx.pid)\" --summary-json nginx.json \\\n"
                 "        -- ab -n 10000 -c 50 http://127.0.0.1:8080/\n"
                 "    mk-watch --pid 1234 --duration 60 --interval 1000 --csv mem.csv\n"
                 "\n"
                 "EXIT STATUS\n"
                 "    0    the run completed and the load command, if any, exited with 0\n"
                 "    1    error: the server could not be started or never accepted a\n"
                 "         connection, PID not found, no sample taken, an output file could\n"
                 "         not be written, or the started server exited before the end\n"
                 "    2    bad usage\n"
                 "    N    otherwise the load command's exit status (128+S if a signal S\n"
                 "         ended it, 127 if it could not be run)\n");
}

static double mk_watch_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void mk_watch_on_signal(int sig)
{
    int saved = errno;

    if (sig != SIGCHLD) {
        mk_watch_stop_sig = sig;
    }
    if (write(mk_watch_wake[1], "", 1) < 0) {
        /* the pipe is full: the loop is already due to wake */
    }
    errno = saved;
}

/* Install the handlers and the self-pipe. MK_WATCH_EXIT_ERROR on failure, 0 otherwise. */
static int mk_watch_signals_init(void)
{
    struct sigaction sa;

    if (pipe2(mk_watch_wake, O_CLOEXEC | O_NONBLOCK) < 0) {
        fprintf(stderr, "mk-watch: pipe: %s\n", strerror(errno));
        return MK_WATCH_EXIT_ERROR;
    }
    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = mk_watch_on_signal;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    /* A closed standard output must not kill the watcher before it stops the server. */
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

static void mk_watch_wake_drain(void)
{
    char buf[64];

    while (read(mk_watch_wake[0], buf, sizeof(buf)) > 0) {
    }
}

/* In a child before exec: undo what the watcher changed for itself. */
static void mk_watch_child_reset(void)
{
    signal(SIGPIPE, SIG_DFL);
}

/* The exit code a shell would report for a wait status. */
static int mk_watch_exit_code(int status)
{
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    if (WIFSIGNALED(status)) {
        return 128 + WTERMSIG(status);
    }
    return MK_WATCH_EXIT_ERROR;
}

/* Collect the server and the load command if they have exited. Never blocks. */
static void mk_watch_reap(struct mk_watch_run *run)
{
    int status;

    if (run->server > 0 && !run->server_reaped &&
        waitpid(run->server, &status, WNOHANG) == run->server) {
        run->server_reaped = true;
    }
    if (run->load > 0 && !run->load_reaped && waitpid(run->load, &status, WNOHANG) == run->load) {
        run->load_reaped = true;
        run->load_status = mk_watch_exit_code(status);
    }
}

/* ---- the command line ---------------------------------------------------- */

static bool mk_watch_parse_uint(const char *s, unsigned long max, unsigned long *out)
{
    char *end;
    unsigned long v;

    if (*s < '0' || *s > '9') {
        return false;
    }
    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max) {
        return false;
    }
    *out = v;
    return true;
}

static bool mk_watch_parse_seconds(const char *s, double *out)
{
    char *end;
    double v;

    if ((*s < '0' || *s > '9') && *s != '.') {
        return false;
    }
    v = strtod(s, &end);
    if (*end != '\0' || !isfinite(v) || v < 0 || v > 1e7) {
        return false;
    }
    *out = v;
    return true;
}

static int mk_watch_bad_value(const char *opt, const char *value)
{
    fprintf(stderr, "mk-watch: bad value for %s: '%s' (see mk-watch --help)\n", opt, value);
    return MK_WATCH_EXIT_USAGE;
}

/*
 * Parse argv into *opt. Returns 0 to go on, -1 after --help or --version
 * (exit 0), or MK_WATCH_EXIT_USAGE after printing why.
 */
static int mk_watch_parse_args(int argc, char **argv, struct mk_watch_opts *opt)
{
    static const struct option longopts[] = {
        {"pid", required_argument, NULL, 'p'},
        {"run", required_argument, NULL, 'r'},
        {"ready-port", required_argument, NULL, 'P'},
        {"ready-timeout", required_argument, NULL, 'T'},
        {"interval", required_argument, NULL, 'i'},
        {"duration", required_argument, NULL, 'd'},
        {"grace", required_argument, NULL, 'g'},
        {"requests", required_argument, NULL, 'n'},
        {"csv", required_argument, NULL, 'c'},
        {"json", required_argument, NULL, 'j'},
        {"summary-json", required_argument, NULL, 's'},
        {"load-output", required_argument, NULL, 'o'},
        {"server-log", required_argument, NULL, 'l'},
        {"quiet", no_argument, NULL, 'q'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    unsigned long v;
    int c;

    opt->ready_timeout_s = 10;
    opt->interval_ms = 100;
    opt->duration_s = 10;
    opt->grace_s = 5;
    /* "+": stop at the first argument that is not an option, the load command. */
    while ((c = getopt_long(argc, argv, "+p:r:P:T:i:d:g:n:c:j:s:o:l:qVh", longopts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (!mk_watch_parse_uint(optarg, 0x7fffffff, &v) || v == 0) {
                return mk_watch_bad_value("--pid", optarg);
            }
            opt->pid = (pid_t) v;
            break;
        case 'r':
            opt->run = optarg;
            break;
        case 'P':
            opt->ready = optarg;
            break;
        case 'T':
            if (!mk_watch_parse_seconds(optarg, &opt->ready_timeout_s)) {
                return mk_watch_bad_value("--ready-timeout", optarg);
            }
            break;
        case 'i':
            if (!mk_watch_parse_uint(optarg, 3600000, &v) || v == 0) {
                return mk_watch_bad_value("--interval", optarg);
            }
            opt->interval_ms = (unsigned) v;
            break;
        case 'd':
            if (!mk_watch_parse_seconds(optarg, &opt->duration_s)) {
                return mk_watch_bad_value("--duration", optarg);
            }
            opt->duration_given = true;
            break;
        case 'g':
            if (!mk_watch_parse_seconds(optarg, &opt->grace_s)) {
                return mk_watch_bad_value("--grace", optarg);
            }
            break;
        case 'n':
            if (!mk_watch_parse_uint(optarg, ~0UL, &v)) {
                return mk_watch_bad_value("--requests", optarg);
            }
            opt->requests = v;
            opt->requests_given = true;
            break;
        case 'c':
            opt->csv_path = optarg;
            break;
        case 'j':
            opt->json_path = optarg;
            break;
        case 's':
            opt->summary_path = optarg;
            break;
        case 'o':
            opt->load_output = optarg;
            break;
        case 'l':
            opt->server_log = optarg;
            break;
        case 'q':
            opt->quiet = true;
            break;
        case 'V':
            printf("mk-watch %s\n", MK_WATCH_VERSION);
            return -1;
        case 'h':
            usage(stdout);
            return -1;
        default:
            fprintf(stderr, "mk-watch: see mk-watch --help\n");
            return MK_WATCH_EXIT_USAGE;
        }
    }
    if ((opt->pid != 0) == (opt->run != NULL)) {
        fprintf(stderr, "mk-watch: give exactly one of --pid and --run (see mk-watch --help)\n");
        return MK_WATCH_EXIT_USAGE;
    }
    if (opt->run == NULL && (opt->ready != NULL || opt->server_log != NULL)) {
        fprintf(stderr, "mk-watch: --ready-port and --server-log go with --run\n");
        return MK_WATCH_EXIT_USAGE;
    }
    if (optind < argc) {
        opt->load_argv = argv + optind;
    }
    if (opt->load_argv != NULL && !opt->duration_given) {
        opt->duration_s = 0;
    }
    return 0;
}

/*
 * Resolve [HOST:]PORT for --ready-port; "[ADDR]:PORT" for IPv6. Returns
 * false, after saying why, if it is not an address.
 */
static bool mk_watch_ready_resolve(const char *spec, struct addrinfo **out)
{
    struct addrinfo hints;
    char host[256] = "127.0.0.1";
    const char *port = spec, *colon = strrchr(spec, ':');
    unsigned long v;
    int rc;

    if (colon != NULL) {
        size_t len = (size_t) (colon - spec);
        if (len >= sizeof(host)) {
            len = sizeof(host) - 1;
        }
        memcpy(host, spec, len);
        host[len] = '\0';
        if (len >= 2 && host[0] == '[' && host[len - 1] == ']') {
            memmove(host, host + 1, len - 2);
            host[len - 2] = '\0';
        }
        port = colon + 1;
    }
    if (!mk_watch_parse_uint(port, 65535, &v) || v == 0) {
        fprintf(stderr, "mk-watch: bad value for --ready-port: '%s'\n", spec);
        return false;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    rc = getaddrinfo(host, port, &hints, out);
    if (rc != 0) {
        fprintf(stderr, "mk-watch: --ready-port %s: %s\n", spec, gai_strerror(rc));
        return false;
    }
    return true;
}

/* Open an output FILE ("-" is standard output). NULL, after saying why, on failure. */
static FILE *mk_watch_open_out(const char *path, const char *what)
{
    FILE *f;

    if (strcmp(path, "-") == 0) {
        return stdout;
    }
    f = fopen(path, "we");
    if (f == NULL) {
        fprintf(stderr, "mk-watch: cannot write %s %s: %s\n", what, path, strerror(errno));
    }
    return f;
}

/* Close an output opened by mk_watch_open_out(); false if writing it failed. */
static bool mk_watch_close_out(FILE *f, const char *path)
{
    bool ok;

    if (f == NULL) {
        return true;
    }
    if (f == stdout || f == stderr) {
        return fflush(f) == 0 || errno == EPIPE;
    }
    ok = !ferror(f);
    ok = fclose(f) == 0 && ok;
    if (!ok) {
        fprintf(stderr, "mk-watch: writing %s failed\n", path);
    }
    return ok;
}

static bool mk_watch_is_stdout(const char *path)
{
    return path != NULL && strcmp(path, "-") == 0;
}

/* Open every output the options name. MK_WATCH_EXIT_ERROR if one cannot be opened. */
static int mk_watch_outputs_open(struct mk_watch_run *run)
{
    const struct mk_watch_opts *opt = run->opt;
    bool machine_stdout = mk_watch_is_stdout(opt->csv_path) || mk_watch_is_stdout(opt->json_path) ||
                          mk_watch_is_stdout(opt->summary_path);

    run->text_out = machine_stdout ? stderr : stdout;
    run->load_out = machine_stdout ? stderr : stdout;
    if (opt->csv_path && !(run->out.csv = mk_watch_open_out(opt->csv_path, "the CSV file"))) {
        return MK_WATCH_EXIT_ERROR;
    }
    if (opt->json_path && !(run->out.json = mk_watch_open_out(opt->json_path, "the JSON file"))) {
        return MK_WATCH_EXIT_ERROR;
    }
    if (opt->summary_path &&
        !(run->summary_file = mk_watch_open_out(opt->summary_path, "the summary"))) {
        return MK_WATCH_EXIT_ERROR;
    }
    if (opt->load_output && !(run->load_out = mk_watch_open_out(opt->load_output, "load output"))) {
        return MK_WATCH_EXIT_ERROR;
    }
    return 0;
}

/* ---- the server ---------------------------------------------------------- */

/*
 * Start the --run command with /bin/sh -c as the leader of a new process
 * group. MK_WATCH_EXIT_ERROR if it cannot be started, 0 otherwise.
 */
static int mk_watch_server_start(struct mk_watch_run *run)
{
    const struct mk_watch_opts *opt = run->opt;
    int log_fd = -1, null_fd;
    pid_t pid;

    if (opt->server_log != NULL) {
        log_fd = open(opt->server_log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (log_fd < 0) {
            fprintf(stderr, "mk-watch: cannot write the server log %s: %s\n", opt->server_log,
                    strerror(errno));
            return MK_WATCH_EXIT_ERROR;
        }
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "mk-watch: cannot start the server: fork: %s\n", strerror(errno));
        if (log_fd >= 0) {
            close(log_fd);
        }
        return MK_WATCH_EXIT_ERROR;
    }
    if (pid == 0) {
        setpgid(0, 0);
        mk_watch_child_reset();
        /* Not in the terminal's foreground group: reading it would stop the server. */
        null_fd = open("/dev/null", O_RDONLY);
        if (null_fd >= 0) {
            dup2(null_fd, STDIN_FILENO);
        }
        if (log_fd >= 0) {
            dup2(log_fd, STDOUT_FILENO);
            dup2(log_fd, STDERR_FILENO);
        }
        execl("/bin/sh", "sh", "-c", opt->run, (char *) NULL);
        fprintf(stderr, "mk-watch: cannot run /bin/sh: %s\n", strerror(errno));
        _exit(127);
    }
    /* Both sides set the group, so that it exists whichever runs first. */
    setpgid(pid, pid);
    if (log_fd >= 0) {
        close(log_fd);
    }
    run->server = pid;
    return 0;
}

/* One non-blocking connection attempt, waiting at most 250 ms. */
static bool mk_watch_try_connect(const struct addrinfo *ai)
{
    struct pollfd pfd;
    int fd, err = 0;
    socklen_t len = sizeof(err);
    bool ok = false;

    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
        return false;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
        close(fd);
        return true;
    }
    if (errno == EINPROGRESS) {
        pfd.fd = fd;
        pfd.events = POLLOUT;
        if (poll(&pfd, 1, 250) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0) {
            ok = err == 0;
        }
    }
    close(fd);
    return ok;
}

/*
 * Wait until the ready address accepts a connection. MK_WATCH_EXIT_ERROR,
 * after saying why, if the server exits, the time runs out or a stop
 * signal arrives; 0 once it is ready.
 */
static int mk_watch_server_wait_ready(struct mk_watch_run *run)
{
    double deadline = mk_watch_now() + run->opt->ready_timeout_s;

    for (;;) {
        mk_watch_reap(run);
        if (run->server_reaped) {
            fprintf(stderr, "mk-watch: the server exited before accepting connections on %s\n",
                    run->opt->ready);
            return MK_WATCH_EXIT_ERROR;
        }
        if (mk_watch_stop_sig) {
            fprintf(stderr, "mk-watch: interrupted while waiting for the server\n");
            return MK_WATCH_EXIT_ERROR;
        }
        for (const struct addrinfo *ai = run->ready_addr; ai != NULL; ai = ai->ai_next) {
            if (mk_watch_try_connect(ai)) {
                return 0;
            }
        }
        if (mk_watch_now() >= deadline) {
            fprintf(stderr, "mk-watch: nothing accepted connections on %s within %.1f s\n",
                    run->opt->ready, run->opt->ready_timeout_s);
            return MK_WATCH_EXIT_ERROR;
        }
        poll(NULL, 0, 50);
    }
}

/* Whether this exact process (same start time) still runs; a zombie does not. */
static bool mk_watch_alive(pid_t pid, unsigned long long start)
{
    struct mk_watch_stat st;

    return mk_watch_stat_read(pid, &st) && st.start == start && st.state != 'Z' && st.state != 'X';
}

/* Send sig to the server's group and to each member of the tree that still runs. */
static void mk_watch_signal_tree(const struct mk_watch_run *run, const struct mk_watch_pids *pids,
                                 const unsigned long long *starts, int sig)
{
    kill(-run->server, sig);
    for (size_t i = 0; i < pids->n; i++) {
        if (pids->v[i] == run->server || !mk_watch_alive(pids->v[i], starts[i])) {
            continue;
        }
        kill(pids->v[i], sig);
    }
}

/*
 * True once the root is reaped and no member of the tree nor of the group
 * runs. Zombies do not count: whoever inherited them reaps them.
 */
static bool mk_watch_server_gone(struct mk_watch_run *run, const struct mk_watch_pids *pids,
                                 const unsigned long long *starts)
{
    mk_watch_reap(run);
    if (!run->server_reaped) {
        return false;
    }
    for (size_t i = 0; i < pids->n; i++) {
        if (pids->v[i] != run->server && mk_watch_alive(pids->v[i], starts[i])) {
            return false;
        }
    }
    return !mk_watch_group_alive(run->server);
}

/*
 * Stop the server started with --run and everything it started: SIGTERM
 * to its process group and to each process of its tree (a member that
 * left the group is still reached), SIGKILL to what is left after the
 * grace period. The root is reaped before this returns.
 */
static void mk_watch_server_stop(struct mk_watch_run *run)
{
    struct mk_watch_pids pids = {0};
    unsigned long long *starts;
    double deadline;
    int status;

    if (run->server <= 0) {
        return;
    }
    mk_watch_tree_list(run->server, &pids);
    starts = calloc(pids.n, sizeof(*starts));
    if (starts == NULL) {
        fprintf(stderr, "mk-watch: out of memory\n");
        abort();
    }
    for (size_t i = 0; i < pids.n; i++) {
        struct mk_watch_stat st;
        starts[i] = mk_watch_stat_read(pids.v[i], &st) ? st.start : 0;
    }
    mk_watch_signal_tree(run, &pids, starts, SIGTERM);
    deadline = mk_watch_now() + run->opt->grace_s;
    while (!mk_watch_server_gone(run, &pids, starts) && mk_watch_now() < deadline) {
        poll(NULL, 0, 20);
    }
    if (!mk_watch_server_gone(run, &pids, starts)) {
        fprintf(stderr, "mk-watch: the server did not stop within %.1f s of SIGTERM: SIGKILL\n",
                run->opt->grace_s);
        mk_watch_signal_tree(run, &pids, starts, SIGKILL);
        if (!run->server_reaped && waitpid(run->server, &status, 0) == run->server) {
            run->server_reaped = true;
        }
    }
    free(starts);
    mk_watch_pids_free(&pids);
}

/* ---- the load command ------------------------------------------------------ */

/* Start the load command with its standard output on a pipe to us. */
static int mk_watch_load_start(struct mk_watch_run *run)
{
    char **argv = run->opt->load_argv;
    int fds[2];
    pid_t pid;

    if (pipe2(fds, O_CLOEXEC) < 0) {
        fprintf(stderr, "mk-watch: pipe: %s\n", strerror(errno));
        return MK_WATCH_EXIT_ERROR;
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "mk-watch: cannot start %s: fork: %s\n", argv[0], strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return MK_WATCH_EXIT_ERROR;
    }
    if (pid == 0) {
        mk_watch_child_reset();
        dup2(fds[1], STDOUT_FILENO);
        execvp(argv[0], argv);
        fprintf(stderr, "mk-watch: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    run->load = pid;
    run->load_fd = fds[0];
    return 0;
}

/* Feed output to the recogniser, a line at a time (\r ends a line too: progress bars). */
static void mk_watch_load_lines(struct mk_watch_run *run, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n' || p[i] == '\r') {
            mk_watch_load_scan(&run->sum.load, run->line, run->line_len);
            run->line_len = 0;
            continue;
        }
        if (run->line_len < sizeof(run->line)) {
            run->line[run->line_len++] = p[i];
        }
    }
}

/* Pass on and recognise whatever the load has written; close the pipe at its end. */
static void mk_watch_load_read(struct mk_watch_run *run)
{
    char buf[16384];

    while (run->load_fd >= 0) {
        ssize_t n = read(run->load_fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno == EAGAIN) {
            return;
        }
        if (n <= 0) {
            mk_watch_load_scan(&run->sum.load, run->line, run->line_len);
            run->line_len = 0;
            close(run->load_fd);
            run->load_fd = -1;
            return;
        }
        fwrite(buf, 1, (size_t) n, run->load_out);
        fflush(run->load_out);
        mk_watch_load_lines(run, buf, (size_t) n);
    }
}

/* ---- the clock --------------------------------------------------------------- */

/* Sample the tree now; once it is gone, nothing more is sampled. */
static void mk_watch_sample_now(struct mk_watch_run *run)
{
    struct mk_watch_sample s;
    double t = mk_watch_now() - run->t0;

    if (run->tree_gone) {
        return;
    }
    if (mk_watch_tree_sample(&run->tree, &s) == 0) {
        run->tree_gone = true;
        return;
    }
    s.t = t;
    mk_watch_out_sample(&run->out, &s);
    mk_watch_summary_add(&run->sum, &s);
}

/* Milliseconds from now until the earliest of the given times (INFINITY: none), at least 0. */
static int mk_watch_timeout_ms(double now, double a, double b)
{
    double until = (a < b ? a : b) - now;

    if (until <= 0) {
        return 0;
    }
    if (until > 60) {
        return 60000;
    }
    return (int) (until * 1000 + 0.999);
}

/*
 * Interrupt the load command: first with sig (SIGINT: load tools print
 * their results), SIGKILL once the grace period has passed.
 */
static void mk_watch_load_interrupt(struct mk_watch_run *run, int sig, double now, double *kill_at)
{
    if (run->load <= 0 || run->load_reaped) {
        return;
    }
    if (*kill_at == INFINITY) {
        kill(run->load, sig);
        *kill_at = now + run->opt->grace_s;
        return;
    }
    if (now >= *kill_at) {
        kill(run->load, SIGKILL);
        *kill_at = now + 3600;
    }
}

/*
 * The sampling loop: one sample now, then the load command, then a sample
 * every interval until the load exits (or, without one, until the
 * duration is over, a stop signal, or the tree is gone), then a last one.
 */
static int mk_watch_loop(struct mk_watch_run *run)
{
    const struct mk_watch_opts *opt = run->opt;
    const double interval = opt->interval_ms / 1000.0;
    double next, deadline, kill_at = INFINITY;
    struct pollfd pfd[2];

    run->t0 = mk_watch_now();
    deadline = opt->duration_s > 0 ? run->t0 + opt->duration_s : INFINITY;
    mk_watch_sample_now(run);
    next = run->t0 + interval;
    if (opt->load_argv != NULL && mk_watch_load_start(run) != 0) {
        return MK_WATCH_EXIT_ERROR;
    }
    for (;;) {
        double now = mk_watch_now();

        mk_watch_reap(run);
        if (run->load > 0 && run->load_reaped) {
            /* It has exited: what it wrote is all in the pipe (a child of it may hold it open). */
            mk_watch_load_read(run);
            break;
        }
        if (run->load <= 0 && (now >= deadline || mk_watch_stop_sig || run->tree_gone)) {
            break;
        }
        if (run->load > 0 && mk_watch_stop_sig) {
            mk_watch_load_interrupt(run, mk_watch_stop_sig, now, &kill_at);
        }
        else if (run->load > 0 && now >= deadline) {
            mk_watch_load_interrupt(run, SIGINT, now, &kill_at);
            deadline = INFINITY;
        }
        if (now >= next) {
            mk_watch_sample_now(run);
            next += interval;
            if (next <= now) {
                next = now + interval;
            }
        }

        pfd[0].fd = mk_watch_wake[0];
        pfd[0].events = POLLIN;
        pfd[1].fd = run->load_fd;
        pfd[1].events = POLLIN;
        now = mk_watch_now();
        poll(pfd, run->load_fd >= 0 ? 2 : 1,
             mk_watch_timeout_ms(now, next, kill_at < deadline ? kill_at : deadline));
        mk_watch_wake_drain();
        if (run->load_fd >= 0) {
            mk_watch_load_read(run);
        }
    }
    mk_watch_sample_now(run);
    return 0;
}

/* ---- main -------------------------------------------------------------------- */

static void mk_watch_summary_init(struct mk_watch_run *run)
{
    const struct mk_watch_opts *opt = run->opt;

    memset(&run->sum, 0, sizeof(run->sum));
    run->sum.pid = run->tree.root;
    run->sum.server_command = opt->run;
    run->sum.load_argv = opt->load_argv;
    run->sum.interval_ms = opt->interval_ms;
    run->sum.load_status = -1;
    run->sum.requests_given = opt->requests_given;
    run->sum.requests_override = opt->requests;
}

/* Write the summaries and close every output; false if one could not be written. */
static bool mk_watch_finish(struct mk_watch_run *run)
{
    const struct mk_watch_opts *opt = run->opt;
    bool ok = true;

    run->sum.load_status = run->load > 0 && run->load_reaped ? run->load_status : -1;
    run->sum.server_exited = run->server > 0 && run->tree_gone;
    run->sum.pss_estimated = run->tree.pss_estimated;
    run->sum.fds_partial = run->tree.fds_partial;
    run->sum.processes_seen = run->tree.processes_seen;
    mk_watch_out_end(&run->out);
    if (!opt->quiet) {
        mk_watch_summary_print(run->text_out, &run->sum);
    }
    if (run->summary_file != NULL) {
        mk_watch_summary_json(run->summary_file, &run->sum);
    }
    ok = mk_watch_close_out(run->out.csv, opt->csv_path) && ok;
    ok = mk_watch_close_out(run->out.json, opt->json_path) && ok;
    ok = mk_watch_close_out(run->summary_file, opt->summary_path) && ok;
    if (opt->load_output != NULL) {
        ok = mk_watch_close_out(run->load_out, opt->load_output) && ok;
    }
    fflush(stdout);
    return ok;
}

/* The exit status of a run that got as far as sampling (see EXIT STATUS in usage()). */
static int mk_watch_status(const struct mk_watch_run *run)
{
    if (run->failed) {
        return MK_WATCH_EXIT_ERROR;
    }
    if (run->sum.samples == 0) {
        fprintf(stderr, "mk-watch: no sample taken: PID %d was gone\n", (int) run->tree.root);
        return MK_WATCH_EXIT_ERROR;
    }
    if (run->sum.server_exited) {
        fprintf(stderr, "mk-watch: the server exited before the end of the run\n");
        return MK_WATCH_EXIT_ERROR;
    }
    return run->sum.load_status >= 0 ? run->sum.load_status : 0;
}

/* Start (--run) or find (--pid) the process to watch. */
static int mk_watch_target(struct mk_watch_run *run)
{
    struct mk_watch_stat st;
    int rc;

    if (run->opt->run == NULL) {
        if (!mk_watch_stat_read(run->opt->pid, &st) || st.state == 'Z') {
            fprintf(stderr, "mk-watch: no process %d\n", (int) run->opt->pid);
            return MK_WATCH_EXIT_ERROR;
        }
        mk_watch_tree_init(&run->tree, run->opt->pid);
        return 0;
    }
    rc = mk_watch_server_start(run);
    if (rc != 0) {
        return rc;
    }
    mk_watch_tree_init(&run->tree, run->server);
    if (run->opt->ready != NULL) {
        return mk_watch_server_wait_ready(run);
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct mk_watch_opts opt = {0};
    struct mk_watch_run run = {0};
    int rc;

    rc = mk_watch_parse_args(argc, argv, &opt);
    if (rc != 0) {
        return rc < 0 ? 0 : rc;
    }
    run.opt = &opt;
    run.load_fd = -1;
    if (opt.ready != NULL && !mk_watch_ready_resolve(opt.ready, &run.ready_addr)) {
        return MK_WATCH_EXIT_USAGE;
    }
    rc = mk_watch_outputs_open(&run);
    if (rc == 0) {
        rc = mk_watch_signals_init();
    }
    if (rc == 0) {
        rc = mk_watch_target(&run);
    }
    if (rc == 0) {
        mk_watch_summary_init(&run);
        mk_watch_out_begin(&run.out, opt.interval_ms);
        run.failed = mk_watch_loop(&run) != 0;
    }
    mk_watch_server_stop(&run);
    if (rc == 0) {
        run.failed = !mk_watch_finish(&run) || run.failed;
        rc = mk_watch_status(&run);
    }
    mk_watch_tree_free(&run.tree);
    if (run.ready_addr != NULL) {
        freeaddrinfo(run.ready_addr);
    }
    return rc;
}
