/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * monkey-passwd.c: add a user to, or change a user's password in, a
 * password file of the auth plugin (plugins/auth/README.md).
 *
 *   monkey-passwd [-c] [-C COST] [--sha512] [-i] FILE USER
 *
 * Guarantees: the password is read from the terminal without echo (twice)
 * or from standard input with -i, and never appears on the command line;
 * the hash is bcrypt ($2b$, cost 12 unless -C) or SHA-512 crypt ($6$) from
 * libcrypt with a salt from the system's random source; the file is
 * replaced atomically (a temporary file in the same folder, fsync, rename)
 * with mode 0640, so the server never reads half a file; every other line
 * of the file is kept byte for byte; runs on the same file are serialised
 * with a lock on its folder. Exit status: 0 done, 1 file or system error,
 * 2 usage error, 3 password refused (mismatch, empty, too long, control
 * characters, no terminal).
 */
#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "auth_users.h"

#define PASSWD_EXIT_FILE 1
#define PASSWD_EXIT_USAGE 2
#define PASSWD_EXIT_PASSWORD 3
#define PASSWD_MAX (CRYPT_MAX_PASSPHRASE_SIZE - 1)
#define PASSWD_BCRYPT_BYTES 72 /* bcrypt ignores what follows */
#define PASSWD_FILE_MAX (16u << 20)

static const char passwd_help[] =
    "NAME\n"
    "    monkey-passwd - manage the password files of Monkey's auth plugin\n"
    "\n"
    "SYNOPSIS\n"
    "    monkey-passwd [-c] [-C COST] [--sha512] [-i] FILE USER\n"
    "    monkey-passwd --help\n"
    "\n"
    "DESCRIPTION\n"
    "    Sets the password of USER in FILE: replaces the user's line if there\n"
    "    is one, appends a line otherwise, and keeps every other line as it\n"
    "    is. The password is read twice from the terminal without echo, or\n"
    "    once from standard input with -i. FILE is replaced atomically (a\n"
    "    temporary file in the same folder, then rename) with mode 0640;\n"
    "    give the group the server runs as read access to it.\n"
    "\n"
    "    A line of FILE is USER:HASH. The server reads the file at start and\n"
    "    on reload (SIGHUP): reload it after a change.\n"
    "\n"
    "OPTIONS\n"
    "    -c, --create      create FILE; refused if it exists (no data is lost)\n"
    "    -C, --cost COST   bcrypt cost, 4 to 31 (default 12: about 0.2 s per\n"
    "                      check); with --sha512, the rounds, 1000 to 999999999\n"
    "                      (default: libcrypt's, 5000)\n"
    "    -s, --sha512      store a SHA-512 crypt ($6$) hash instead of bcrypt\n"
    "                      ($2b$); bcrypt is preferred\n"
    "    -i, --stdin       read the password from the first line of standard\n"
    "                      input (for scripts)\n"
    "    -h, --help        show this text\n"
    "\n"
    "    USER is 1 to 255 bytes without ':', control characters or leading or\n"
    "    trailing spaces. The password is 1 to 511 bytes without control\n"
    "    characters (RFC 7617); bcrypt uses only its first 72 bytes.\n"
    "\n"
    "EXIT STATUS\n"
    "    0  the password was set\n"
    "    1  FILE could not be read or written (or exists with -c, or is\n"
    "       missing without -c)\n"
    "    2  wrong options or arguments\n"
    "    3  the password was refused: the two entries differ, it is empty,\n"
    "       too long or holds control characters, or there is no terminal\n"
    "       to read it from (use -i)\n"
    "\n"
    "EXAMPLES\n"
    "    monkey-passwd -c /etc/monkey/users alice\n"
    "    printf '%s\\n' \"$PASS\" | monkey-passwd -i -C 13 /etc/monkey/users bob\n";

struct passwd_opts {
    int create, sha512, from_stdin;
    unsigned long cost; /* 0: the default */
    const char *file, *user;
};

static struct termios passwd_saved_tty;
static volatile sig_atomic_t passwd_tty_fd = -1;

/* The short usage text, on standard error. */
static void passwd_usage(void)
{
    fprintf(stderr, "usage: monkey-passwd [-c] [-C COST] [--sha512] [-i] FILE USER\n"
                    "       monkey-passwd --help\n");
}

/* Put the terminal back (echo on) after a signal, then die of it. */
static void passwd_on_signal(int sig)
{
    if (passwd_tty_fd >= 0) {
        tcsetattr(passwd_tty_fd, TCSAFLUSH, &passwd_saved_tty);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Parse a decimal number in [min, max] into *out; 0 or -1. */
static int passwd_number(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
    char *end;

    if (*s < '0' || *s > '9') {
        return -1;
    }
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v < min || v > max) {
        return -1;
    }
    *out = v;
    return 0;
}

/* Parse the command line into *o; returns -1 after printing why (usage error). */
static int passwd_parse_args(int argc, char **argv, struct passwd_opts *o)
{
    static const struct option longopts[] = {
        {"create", no_argument, NULL, 'c'}, {"cost", required_argument, NULL, 'C'},
        {"sha512", no_argument, NULL, 's'}, {"stdin", no_argument, NULL, 'i'},
        {"help", no_argument, NULL, 'h'},   {NULL, 0, NULL, 0},
    };
    const char *cost = NULL;
    int c;

    memset(o, 0, sizeof(*o));
    while ((c = getopt_long(argc, argv, "cC:sih", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            o->create = 1;
            break;
        case 'C':
            cost = optarg;
            break;
        case 's':
            o->sha512 = 1;
            break;
        case 'i':
            o->from_stdin = 1;
            break;
        case 'h':
            fputs(passwd_help, stdout);
            exit(0);
        default:
            passwd_usage();
            return -1;
        }
    }
    if (argc - optind != 2) {
        fprintf(stderr, "monkey-passwd: expected FILE and USER\n");
        passwd_usage();
        return -1;
    }
    o->file = argv[optind];
    o->user = argv[optind + 1];
    if (cost && (o->sha512 ? passwd_number(cost, 1000, 999999999, &o->cost)
                           : passwd_number(cost, 4, 31, &o->cost)) != 0) {
        fprintf(stderr, "monkey-passwd: -C %s: expected %s\n", cost,
                o->sha512 ? "rounds from 1000 to 999999999" : "a bcrypt cost from 4 to 31");
        return -1;
    }
    if (!cost && !o->sha512) {
        o->cost = 12;
    }
    size_t n = strlen(o->user);
    if (n == 0 || n > MK_AUTH_USER_MAX || o->user[0] == ' ' || o->user[n - 1] == ' ') {
        fprintf(stderr,
                "monkey-passwd: USER must have 1 to %d bytes, without leading or "
                "trailing spaces\n",
                MK_AUTH_USER_MAX);
        return -1;
    }
    for (const char *p = o->user; *p; p++) {
        if (*p == ':' || (unsigned char) *p < 0x20 || *p == 0x7f) {
            fprintf(stderr, "monkey-passwd: USER must not contain ':' or control characters\n");
            return -1;
        }
    }
    return 0;
}

/*
 * Read one line (without its LF or CRLF) of at most PASSWD_MAX bytes from
 * fd into buf (PASSWD_MAX + 2 bytes). 0, or -1 with the reason printed.
 */
static int passwd_read_line(int fd, char *buf)
{
    size_t n = 0;

    for (;;) {
        char c;
        ssize_t got = read(fd, &c, 1);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got < 0) {
            fprintf(stderr, "monkey-passwd: cannot read the password: %s\n", strerror(errno));
            return -1;
        }
        if (got == 0 || c == '\n') {
            break;
        }
        if (c == '\0') {
            fprintf(stderr, "monkey-passwd: the password holds a NUL byte\n");
            return -1;
        }
        if (n > PASSWD_MAX) {
            fprintf(stderr, "monkey-passwd: the password is longer than %d bytes\n", PASSWD_MAX);
            return -1;
        }
        buf[n++] = c;
    }
    if (n > 0 && buf[n - 1] == '\r') {
        n--;
    }
    if (n > PASSWD_MAX) {
        fprintf(stderr, "monkey-passwd: the password is longer than %d bytes\n", PASSWD_MAX);
        return -1;
    }
    buf[n] = '\0';
    return 0;
}

/*
 * Turn echo off, prompt on the terminal and read a line. Echo goes off
 * before the prompt appears, so nothing typed after it is shown or flushed.
 * 0 or -1.
 */
static int passwd_read_tty(int fd, const char *prompt, char *buf)
{
    struct termios quiet;
    int rc;

    if (tcgetattr(fd, &passwd_saved_tty) != 0) {
        fprintf(stderr, "monkey-passwd: cannot use the terminal: %s\n", strerror(errno));
        return -1;
    }
    quiet = passwd_saved_tty;
    quiet.c_lflag &= (tcflag_t) ~(ECHO | ECHOE | ECHOK | ECHONL);
    quiet.c_lflag |= ICANON;
    passwd_tty_fd = fd;
    if (tcsetattr(fd, TCSAFLUSH, &quiet) != 0 || write(fd, prompt, strlen(prompt)) < 0) {
        fprintf(stderr, "monkey-passwd: cannot use the terminal: %s\n", strerror(errno));
        rc = -1;
    }
    else {
        rc = passwd_read_line(fd, buf);
    }
    tcsetattr(fd, TCSAFLUSH, &passwd_saved_tty);
    passwd_tty_fd = -1;
    if (write(fd, "\n", 1) < 0) {
        rc = -1;
    }
    return rc;
}

/* Read the password (PASSWD_MAX + 2 bytes) as the options say and check it. 0 or -1. */
static int passwd_get_password(const struct passwd_opts *o, char *pass)
{
    if (o->from_stdin) {
        if (passwd_read_line(STDIN_FILENO, pass) != 0) {
            return -1;
        }
    }
    else {
        char again[PASSWD_MAX + 2];
        int fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
            fprintf(stderr, "monkey-passwd: no terminal to read the password from (use -i to "
                            "read it from standard input)\n");
            return -1;
        }
        signal(SIGINT, passwd_on_signal);
        signal(SIGTERM, passwd_on_signal);
        signal(SIGHUP, passwd_on_signal);
        int rc = passwd_read_tty(fd, "New password: ", pass);
        if (rc == 0) {
            rc = passwd_read_tty(fd, "Re-type new password: ", again);
        }
        close(fd);
        if (rc == 0 && strcmp(pass, again) != 0) {
            fprintf(stderr, "monkey-passwd: the passwords do not match\n");
            rc = -1;
        }
        explicit_bzero(again, sizeof(again));
        if (rc != 0) {
            return -1;
        }
    }
    if (!pass[0]) {
        fprintf(stderr, "monkey-passwd: empty password refused\n");
        return -1;
    }
    for (const char *p = pass; *p; p++) {
        if ((unsigned char) *p < 0x20 || *p == 0x7f) {
            fprintf(stderr, "monkey-passwd: the password holds a control character (RFC 7617 "
                            "forbids them)\n");
            return -1;
        }
    }
    if (!o->sha512 && strlen(pass) > PASSWD_BCRYPT_BYTES) {
        fprintf(stderr,
                "monkey-passwd: warning: bcrypt uses only the first %d bytes of the "
                "password\n",
                PASSWD_BCRYPT_BYTES);
    }
    return 0;
}

/* Hash `pass` into out (CRYPT_OUTPUT_SIZE bytes). 0, or -1 with the reason printed. */
static int passwd_hash(const struct passwd_opts *o, const char *pass, char *out)
{
    char setting[CRYPT_GENSALT_OUTPUT_SIZE];
    struct crypt_data *data = calloc(1, sizeof(*data));
    unsigned long cost;
    const char *reason;
    int rc = -1;

    if (!data) {
        fprintf(stderr, "monkey-passwd: out of memory\n");
        return -1;
    }
    if (!crypt_gensalt_rn(o->sha512 ? "$6$" : "$2b$", o->cost, NULL, 0, setting, sizeof(setting))) {
        fprintf(stderr, "monkey-passwd: cannot make a salt: %s\n", strerror(errno));
    }
    else if (!crypt_rn(pass, setting, data, (int) sizeof(*data))) {
        fprintf(stderr, "monkey-passwd: cannot hash the password: %s\n", strerror(errno));
    }
    else if (mk_auth_hash_parse(data->output, strlen(data->output), &cost, &reason) ==
             MK_AUTH_HASH_BAD) {
        fprintf(stderr, "monkey-passwd: libcrypt made a hash the server would refuse: %s\n",
                reason);
    }
    else {
        snprintf(out, CRYPT_OUTPUT_SIZE, "%s", data->output);
        rc = 0;
    }
    explicit_bzero(data, sizeof(*data));
    free(data);
    return rc;
}

/* Read FILE into a new buffer (*len bytes); NULL with errno (ENOENT: absent). */
static char *passwd_read_file(const char *path, size_t *len, struct stat *st)
{
    size_t got = 0;
    char *buf;

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return NULL;
    }
    if (fstat(fd, st) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return NULL;
    }
    if (!S_ISREG(st->st_mode) || (uint64_t) st->st_size > PASSWD_FILE_MAX) {
        close(fd);
        errno = S_ISREG(st->st_mode) ? EFBIG : EINVAL;
        return NULL;
    }
    buf = malloc((size_t) st->st_size + 1);
    if (!buf) {
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    while (got < (size_t) st->st_size) {
        ssize_t n = read(fd, buf + got, (size_t) st->st_size - got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            int saved = n < 0 ? errno : EIO;
            free(buf);
            close(fd);
            errno = saved;
            return NULL;
        }
        got += (size_t) n;
    }
    close(fd);
    *len = got;
    return buf;
}

/* Does the line [s, end) belong to `user` ("user:...")? */
static int passwd_line_is(const char *s, const char *end, const char *user)
{
    size_t n = strlen(user);
    return (size_t) (end - s) > n && memcmp(s, user, n) == 0 && s[n] == ':';
}

/*
 * The new contents: `old` with the first line of `user` replaced by
 * `entry`, later lines of that user dropped, or `entry` appended. *replaced
 * tells which. NULL when memory is short.
 */
static char *passwd_edit(const char *old, size_t len, const char *user, const char *entry,
                         size_t *out_len, int *replaced)
{
    size_t elen = strlen(entry);
    char *out = malloc(len + elen + 2), *w = out;

    *replaced = 0;
    if (!out) {
        return NULL;
    }
    for (const char *s = old, *stop = old + len; s < stop;) {
        const char *nl = memchr(s, '\n', (size_t) (stop - s));
        const char *next = nl ? nl + 1 : stop;
        if (passwd_line_is(s, next, user)) {
            if (!*replaced) {
                memcpy(w, entry, elen);
                w += elen;
            }
            *replaced = 1;
        }
        else {
            memcpy(w, s, (size_t) (next - s));
            w += next - s;
            if (!nl) {
                *w++ = '\n'; /* the last line had no end */
            }
        }
        s = next;
    }
    if (!*replaced) {
        memcpy(w, entry, elen);
        w += elen;
    }
    *out_len = (size_t) (w - out);
    return out;
}

/*
 * Give the new file the old one's owner and group, or at least its group,
 * so the server keeps its access. Without the permission (not root, not a
 * member of the group) the new file stays this user's, which is all we can do.
 */
static void passwd_keep_owner(int fd, const struct stat *old)
{
    if (fchown(fd, old->st_uid, old->st_gid) == 0) {
        return;
    }
    if (fchown(fd, (uid_t) -1, old->st_gid) != 0) {
        fprintf(stderr, "monkey-passwd: note: the file now belongs to this user and group\n");
    }
}

/* Write all `len` bytes of data to fd. 0, or -1 with errno. */
static int passwd_write_all(int fd, const char *data, size_t len)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n = write(fd, data + done, len - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return -1;
        }
        done += (size_t) n;
    }
    return 0;
}

/*
 * Write data to a temporary file beside `path` (mode 0640, the old file's
 * owner when `old` is given and it is allowed), flush it and rename it over
 * `path`. 0, or -1 with errno and no temporary file left.
 */
static int passwd_write_file(const char *path, const char *data, size_t len, const struct stat *old,
                             int dirfd)
{
    char tmp[PATH_MAX];

    if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int) sizeof(tmp)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    int rc = fchmod(fd, 0640);
    if (rc == 0 && old) {
        passwd_keep_owner(fd, old);
    }
    if (rc == 0) {
        rc = passwd_write_all(fd, data, len);
    }
    if (rc == 0) {
        rc = fsync(fd);
    }
    int saved = errno;
    if (close(fd) != 0 && rc == 0) {
        rc = -1, saved = errno;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = -1, saved = errno;
    }
    if (rc != 0) {
        unlink(tmp);
        errno = saved;
        return -1;
    }
    fsync(dirfd); /* make the rename itself durable */
    return 0;
}

/* Lock the folder of `path` against other runs; its descriptor, or -1. */
static int passwd_lock_dir(const char *path)
{
    char copy[PATH_MAX];

    if (snprintf(copy, sizeof(copy), "%s", path) >= (int) sizeof(copy)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    if (flock(fd, LOCK_EX) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Put `user:hash` into the file. Exit status. */
static int passwd_update(const struct passwd_opts *o, const char *hash)
{
    char entry[MK_AUTH_USER_MAX + CRYPT_OUTPUT_SIZE + 3];
    struct stat st;
    size_t len = 0, new_len = 0;
    int replaced = 0;

    int dirfd = passwd_lock_dir(o->file);
    if (dirfd < 0) {
        fprintf(stderr, "monkey-passwd: %s: cannot lock its folder: %s\n", o->file,
                strerror(errno));
        return PASSWD_EXIT_FILE;
    }
    errno = 0;
    char *old = passwd_read_file(o->file, &len, &st);
    if (!old && errno != ENOENT) {
        fprintf(stderr, "monkey-passwd: %s: %s\n", o->file, strerror(errno));
        close(dirfd);
        return PASSWD_EXIT_FILE;
    }
    if (old && o->create) {
        fprintf(stderr, "monkey-passwd: %s exists: leave out -c to add or change a user\n",
                o->file);
        free(old);
        close(dirfd);
        return PASSWD_EXIT_FILE;
    }
    if (!old && !o->create) {
        fprintf(stderr, "monkey-passwd: %s does not exist: use -c to create it\n", o->file);
        close(dirfd);
        return PASSWD_EXIT_FILE;
    }
    snprintf(entry, sizeof(entry), "%s:%s\n", o->user, hash);
    char *data = passwd_edit(old ? old : "", len, o->user, entry, &new_len, &replaced);
    free(old);
    if (!data) {
        fprintf(stderr, "monkey-passwd: out of memory\n");
        close(dirfd);
        return PASSWD_EXIT_FILE;
    }
    int rc = passwd_write_file(o->file, data, new_len, o->create ? NULL : &st, dirfd);
    free(data);
    close(dirfd);
    if (rc != 0) {
        fprintf(stderr, "monkey-passwd: %s: cannot write: %s\n", o->file, strerror(errno));
        return PASSWD_EXIT_FILE;
    }
    fprintf(stderr, "%s password for user %s in %s\n", replaced ? "Updated" : "Added", o->user,
            o->file);
    return 0;
}

/* Parse, read the password, hash it, update the file; the exit status says how it went. */
int main(int argc, char **argv)
{
    char pass[PASSWD_MAX + 2], hash[CRYPT_OUTPUT_SIZE];
    struct passwd_opts o;

    if (passwd_parse_args(argc, argv, &o) != 0) {
        return PASSWD_EXIT_USAGE;
    }
    if (passwd_get_password(&o, pass) != 0) {
        explicit_bzero(pass, sizeof(pass));
        return PASSWD_EXIT_PASSWORD;
    }
    int rc = passwd_hash(&o, pass, hash);
    explicit_bzero(pass, sizeof(pass));
    if (rc != 0) {
        return PASSWD_EXIT_FILE;
    }
    return passwd_update(&o, hash);
}
