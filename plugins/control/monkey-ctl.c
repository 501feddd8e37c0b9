/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * monkey-ctl.c: the client of the control plugin's socket. It sends one
 * request line ("COMMAND text|json"), prints the reply's body on standard
 * output and turns the reply's status line into the exit status: 0 for
 * "OK", 1 for "ERR reason" (the reason goes to standard error) or an
 * unreachable server, 2 for bad usage. It needs nothing beyond libc.
 *
 * Options may come before or after COMMAND, as with every GNU tool ("--"
 * ends them); POSIXLY_CORRECT in the environment makes the first
 * argument that is not an option end them instead.
 *
 * The socket is the -s path, else the Socket of CONFDIR/plugins/control.conf
 * (CONFDIR from -c, else the compiled-in MK_CTL_DEFAULT_CONFDIR), relative
 * to CONFDIR, else CONFDIR/monkey.sock. The protocol is described in
 * plugins/control/README.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#ifndef MK_CTL_DEFAULT_CONFDIR
#define MK_CTL_DEFAULT_CONFDIR "/etc/monkey"
#endif
#ifndef MK_CTL_VERSION
#define MK_CTL_VERSION "0.1.0"
#endif

#define CTL_DEFAULT_SOCKET "monkey.sock"
#define CTL_DEFAULT_TIMEOUT 30
#define CTL_EXIT_OK 0
#define CTL_EXIT_FAIL 1
#define CTL_EXIT_USAGE 2

static const char *const ctl_commands[] = {"status", "workers", "sites",  "plugins",
                                           "config", "reload",  "reopen", "stop"};

/* The manual of --help, on standard output. */
static void ctl_help(void)
{
    printf("NAME\n"
           "    monkey-ctl - query and control a running Monkey server\n"
           "\n"
           "SYNOPSIS\n"
           "    monkey-ctl [-s SOCKET | -c CONFDIR] [--json] [-t SECONDS] COMMAND\n"
           "\n"
           "DESCRIPTION\n"
           "    monkey-ctl talks to the control plugin of a running server through its\n"
           "    unix socket. Output is for people by default; --json prints one JSON\n"
           "    document for scripts. Options may come before or after COMMAND\n"
           "    (monkey-ctl status --json); -- ends them.\n"
           "\n"
           "COMMANDS\n"
           "    status    uptime, workers, open connections, requests served, bytes\n"
           "              sent, and the same per worker\n"
           "    workers   each worker's open connections, requests and bytes sent\n"
           "    sites     the virtual hosts: names, document root, site file\n"
           "    plugins   the loaded plugins, in plugins.load order\n"
           "    config    every [SERVER] key with its value in force (defaults too)\n"
           "    reload    read the configuration again (like SIGHUP); a refused\n"
           "              configuration prints file:line: reason and exits 1\n"
           "    reopen    reopen the log files (like SIGUSR1)\n"
           "    stop      graceful stop (like SIGTERM); returns once the server has\n"
           "              finished the responses in progress\n"
           "    acme status          each ACME site (tls plugin): its certificate's\n"
           "                         expiry, the next renewal, the last error\n"
           "    acme renew NAME      renew the ACME site with that name now\n"
           "\n"
           "OPTIONS\n"
           "    -s, --socket PATH     the control socket\n"
           "    -c, --confdir DIR     the server's configuration directory: the socket\n"
           "                          is the Socket of DIR/plugins/control.conf\n"
           "                          (relative to DIR), or DIR/" CTL_DEFAULT_SOCKET "\n"
           "    -j, --json            print JSON\n"
           "    -t, --timeout SECONDS how long to wait for the reply (default %d;\n"
           "                          the end of a stop is waited for without limit)\n"
           "    -h, --help            print this help and exit\n"
           "    -V, --version         print the version and exit\n"
           "\n"
           "FILES\n"
           "    Without -s and -c the configuration directory is\n"
           "    " MK_CTL_DEFAULT_CONFDIR ",\n"
           "    the default of the monkey binary built alongside.\n"
           "\n"
           "EXIT STATUS\n"
           "    0  the server answered OK\n"
           "    1  the server refused (the reason is printed) or could not be reached\n"
           "    2  bad usage\n"
           "\n"
           "EXAMPLES\n"
           "    monkey-ctl -c /etc/monkey status\n"
           "    monkey-ctl -s /run/monkey/control.sock --json workers\n"
           "    monkey-ctl reload || echo 'configuration refused'\n",
           CTL_DEFAULT_TIMEOUT);
}

/* Report bad usage on standard error; returns the exit status 2. */
static int ctl_usage(const char *why)
{
    fprintf(stderr, "monkey-ctl: %s\n", why);
    fprintf(stderr, "usage: monkey-ctl [-s SOCKET | -c CONFDIR] [--json] [-t SECONDS] COMMAND\n"
                    "Try 'monkey-ctl --help' for more information.\n");
    return CTL_EXIT_USAGE;
}

/* Trim blanks at both ends of s, in place. */
static char *ctl_trim(char *s)
{
    while (*s == ' ' || *s == '\t') {
        s++;
    }
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n')) {
        s[--n] = '\0';
    }
    return s;
}

/* Cut a trailing comment: '#' after a blank. */
static void ctl_uncomment(char *s)
{
    for (char *p = s; *p; p++) {
        if (*p == '#' && p > s && (p[-1] == ' ' || p[-1] == '\t')) {
            *p = '\0';
            return;
        }
    }
}

/*
 * The Socket value of confdir/plugins/control.conf, resolved against
 * confdir, into out. A missing file or key gives the default. -1 when the
 * path does not fit.
 */
static int ctl_socket_from_conf(const char *confdir, char *out, size_t len)
{
    char file[PATH_MAX], line[4096], section[128] = "", value[PATH_MAX] = CTL_DEFAULT_SOCKET;
    FILE *f;

    snprintf(file, sizeof(file), "%s/plugins/control.conf", confdir);
    f = fopen(file, "r");
    while (f && fgets(line, sizeof(line), f)) {
        char *t = ctl_trim(line);
        if (!*t || *t == '#') {
            continue;
        }
        if (line[0] == '[') {
            char *end = strchr(line, ']');
            snprintf(section, sizeof(section), "%.*s", end ? (int) (end - line - 1) : 0, line + 1);
            continue;
        }
        if (strcasecmp(section, "CONTROL") != 0) {
            continue;
        }
        ctl_uncomment(t);
        size_t klen = strcspn(t, " \t");
        if (klen != 6 || strncasecmp(t, "Socket", 6) != 0) {
            continue;
        }
        snprintf(value, sizeof(value), "%s", ctl_trim(t + klen));
    }
    if (f) {
        fclose(f);
    }
    int n = value[0] == '/' ? snprintf(out, len, "%s", value)
                            : snprintf(out, len, "%s/%s", confdir, value);
    return n < 0 || (size_t) n >= len ? -1 : 0;
}

/* Connect to path (long paths through /proc/self/fd of their directory). */
static int ctl_connect(const char *path)
{
    struct sockaddr_un addr;
    int dirfd = -1, fd, saved;

    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    if (strlen(path) < sizeof(addr.sun_path)) {
        memcpy(addr.sun_path, path, strlen(path) + 1);
    }
    else {
        const char *slash = strrchr(path, '/');
        char dir[PATH_MAX];
        if (!slash || (size_t) (slash - path) >= sizeof(dir)) {
            errno = ENAMETOOLONG;
            return -1;
        }
        snprintf(dir, sizeof(dir), "%.*s", (int) (slash - path), path);
        dirfd = open(dir[0] ? dir : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0) {
            return -1;
        }
        int n =
            snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d/%s", dirfd, slash + 1);
        if (n < 0 || (size_t) n >= sizeof(addr.sun_path)) {
            close(dirfd);
            errno = ENAMETOOLONG;
            return -1;
        }
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *) &addr, sizeof(addr)) != 0) {
        saved = errno;
        close(fd);
        fd = -1;
        errno = saved;
    }
    saved = errno;
    if (dirfd >= 0) {
        close(dirfd);
    }
    errno = saved;
    return fd;
}

/* Milliseconds of the monotonic clock. */
static long long ctl_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Read from fd into buf, waiting until deadline (ms, monotonic; -1: no
 * limit). Returns the byte count, 0 at end of stream, -1 with errno
 * (ETIMEDOUT when the deadline passed).
 */
static ssize_t ctl_read(int fd, char *buf, size_t len, long long deadline)
{
    for (;;) {
        int wait = -1;
        if (deadline >= 0) {
            long long left = deadline - ctl_now_ms();
            if (left <= 0) {
                errno = ETIMEDOUT;
                return -1;
            }
            wait = left > 1000000 ? 1000000 : (int) left;
        }
        struct pollfd p = {fd, POLLIN, 0};
        int rc = poll(&p, 1, wait);
        if (rc < 0 && errno != EINTR) {
            return -1;
        }
        if (rc <= 0) {
            continue;
        }
        ssize_t n = read(fd, buf, len);
        if (n >= 0 || (errno != EINTR && errno != EAGAIN)) {
            return n;
        }
    }
}

/* Send the request, print the reply; returns the exit status. */
static int ctl_exchange(const char *path, const char *command, bool json, int timeout)
{
    char req[64], buf[65536], status[1024];
    size_t slen = 0;
    bool have_status = false, ok = false;
    long long deadline = ctl_now_ms() + (long long) timeout * 1000;
    int fd = ctl_connect(path);

    if (fd < 0) {
        fprintf(stderr, "monkey-ctl: cannot connect to %s: %s\n", path, strerror(errno));
        return CTL_EXIT_FAIL;
    }
    int n = snprintf(req, sizeof(req), "%s %s\n", command, json ? "json" : "text");
    if (send(fd, req, (size_t) n, MSG_NOSIGNAL) != n) {
        fprintf(stderr, "monkey-ctl: %s: cannot send the request: %s\n", path, strerror(errno));
        close(fd);
        return CTL_EXIT_FAIL;
    }
    for (;;) {
        ssize_t got = ctl_read(fd, buf, sizeof(buf), deadline);
        if (got < 0) {
            fprintf(stderr, "monkey-ctl: %s: %s\n", path,
                    errno == ETIMEDOUT ? "no complete reply in time" : strerror(errno));
            close(fd);
            return CTL_EXIT_FAIL;
        }
        if (got == 0) {
            break;
        }
        char *body = buf;
        size_t blen = (size_t) got;
        if (!have_status) {
            char *lf = memchr(buf, '\n', blen);
            size_t take = lf ? (size_t) (lf - buf) : blen;
            if (slen + take >= sizeof(status)) {
                take = sizeof(status) - 1 - slen;
            }
            memcpy(status + slen, buf, take);
            slen += take;
            status[slen] = '\0';
            if (!lf) {
                continue;
            }
            have_status = true;
            ok = strcmp(status, "OK") == 0;
            if (ok && strcmp(command, "stop") == 0) {
                deadline = -1; /* the server closes once it has finished */
            }
            body = lf + 1;
            blen = (size_t) got - (size_t) (body - buf);
        }
        if (blen > 0 && fwrite(body, 1, blen, stdout) != blen) {
            close(fd);
            return CTL_EXIT_FAIL;
        }
    }
    close(fd);
    if (fflush(stdout) != 0) {
        return CTL_EXIT_FAIL;
    }
    if (!have_status) {
        fprintf(stderr, "monkey-ctl: %s: the server closed the connection without a reply\n", path);
        return CTL_EXIT_FAIL;
    }
    if (ok) {
        return CTL_EXIT_OK;
    }
    if (strncmp(status, "ERR ", 4) == 0) {
        fprintf(stderr, "monkey-ctl: %s\n", status + 4);
    }
    else {
        fprintf(stderr, "monkey-ctl: %s: unexpected reply '%s'\n", path, status);
    }
    return CTL_EXIT_FAIL;
}

/* Parse the command line, find the socket, run one exchange. */
int main(int argc, char **argv)
{
    static const struct option longopts[] = {{"socket", required_argument, NULL, 's'},
                                             {"confdir", required_argument, NULL, 'c'},
                                             {"json", no_argument, NULL, 'j'},
                                             {"timeout", required_argument, NULL, 't'},
                                             {"help", no_argument, NULL, 'h'},
                                             {"version", no_argument, NULL, 'V'},
                                             {NULL, 0, NULL, 0}};
    const char *socket_path = NULL, *confdir = NULL;
    char resolved[PATH_MAX];
    bool json = false;
    int timeout = CTL_DEFAULT_TIMEOUT, opt;

    opterr = 0;
    /* No "+": getopt_long permutes, so options may follow COMMAND. */
    while ((opt = getopt_long(argc, argv, "s:c:jt:hV", longopts, NULL)) != -1) {
        switch (opt) {
        case 's':
            socket_path = optarg;
            break;
        case 'c':
            confdir = optarg;
            break;
        case 'j':
            json = true;
            break;
        case 't': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end || v < 1 || v > 86400) {
                return ctl_usage("--timeout: a number of seconds from 1 to 86400 expected");
            }
            timeout = (int) v;
            break;
        }
        case 'h':
            ctl_help();
            return CTL_EXIT_OK;
        case 'V':
            printf("monkey-ctl %s\n", MK_CTL_VERSION);
            return CTL_EXIT_OK;
        default: {
            char why[128];
            if (optopt) {
                snprintf(why, sizeof(why), "option -%c: unknown or missing its value", optopt);
            }
            else {
                snprintf(why, sizeof(why), "unknown option '%s'", argv[optind - 1]);
            }
            return ctl_usage(why);
        }
        }
    }
    if (socket_path && confdir) {
        return ctl_usage("-s and -c exclude each other");
    }
    if (optind == argc) {
        return ctl_usage("a COMMAND is required");
    }
    /* A plugin's command takes words after it: `acme renew example.com`. */
    char words[200];
    const char *command = argv[optind];
    if (strcmp(command, "acme") == 0 && argc - optind > 1) {
        size_t off = 0;
        for (int i = optind; i < argc; i++) {
            int n =
                snprintf(words + off, sizeof(words) - off, "%s%s", i > optind ? " " : "", argv[i]);
            if (n < 0 || (size_t) n >= sizeof(words) - off || strpbrk(argv[i], " \n\r")) {
                return ctl_usage("acme: the words are too long or hold spaces");
            }
            off += (size_t) n;
        }
        command = words;
    }
    else if (argc - optind > 1) {
        return ctl_usage("one COMMAND only");
    }
    bool known = command == words;
    for (size_t i = 0; i < sizeof(ctl_commands) / sizeof(ctl_commands[0]); i++) {
        known = known || strcmp(command, ctl_commands[i]) == 0;
    }
    if (!known) {
        char why[128];
        snprintf(why, sizeof(why), "unknown command '%.40s'", command);
        return ctl_usage(why);
    }
    if (!socket_path) {
        if (ctl_socket_from_conf(confdir ? confdir : MK_CTL_DEFAULT_CONFDIR, resolved,
                                 sizeof(resolved)) != 0) {
            fprintf(stderr, "monkey-ctl: the socket path is too long\n");
            return CTL_EXIT_FAIL;
        }
        socket_path = resolved;
    }
    return ctl_exchange(socket_path, command, json, timeout);
}
