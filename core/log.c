/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * log.c: see log.h. A reopen keeps the descriptor number and swaps the file
 * behind it with dup2(2), so a concurrent writer writes either to the old file
 * or to the new one and never to a descriptor that was closed and reused.
 * Files are opened with O_NOFOLLOW and, by root for a User, given to that
 * User (mk_log_set_owner): the User may write the log directory, so root
 * must not be led elsewhere by a name planted there, and the User must be
 * able to open again what root created.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <monkey/mk_common.h>

/* The process's sink, the fallback of the last sink opened, the thread's own. */
static struct mk_log_sink mk_log_process = {STDERR_FILENO, MK_LOG_INFO, NULL, (uid_t) -1};
static struct mk_log_sink *_Atomic mk_log_last;
static __thread struct mk_log_sink *mk_log_bound;

static struct mk_log_sink *mk_log_sink(void)
{
    struct mk_log_sink *s = mk_log_bound;

    if (s) {
        return s;
    }
    s = atomic_load(&mk_log_last);
    return s ? s : &mk_log_process;
}

void mk_log_sink_init(struct mk_log_sink *s)
{
    atomic_init(&s->fd, STDERR_FILENO);
    atomic_init(&s->level, MK_LOG_INFO);
    s->path = NULL;
    s->owner = (uid_t) -1;
}

void mk_log_bind(struct mk_log_sink *s)
{
    mk_log_bound = s;
}

void mk_log_fallback(struct mk_log_sink *s)
{
    atomic_store(&mk_log_last, s);
}

void mk_log_sink_release(struct mk_log_sink *s)
{
    struct mk_log_sink *expect = s;

    atomic_compare_exchange_strong(&mk_log_last, &expect, NULL);
    if (mk_log_bound == s) {
        mk_log_bound = NULL;
    }
    int old = atomic_exchange(&s->fd, STDERR_FILENO);
    if (old != STDERR_FILENO) {
        close(old);
    }
    free(s->path);
    s->path = NULL;
    s->owner = (uid_t) -1;
}

static const char *const mk_log_names[] = {"error", "warn", "info", "debug"};

int mk_log_open(const char *path)
{
    struct mk_log_sink *s = mk_log_sink();

    free(s->path);
    s->path = path ? strdup(path) : NULL;
    if (path && !s->path) {
        return MK_ERR;
    }
    return mk_log_reopen();
}

void mk_log_set_owner(uid_t uid)
{
    mk_log_sink()->owner = uid;
}

int mk_log_file_give(int fd, uid_t uid)
{
    struct stat st;

    if (uid == (uid_t) -1 || geteuid() != 0) {
        return MK_OK;
    }
    if (fstat(fd, &st) != 0) {
        return MK_ERR;
    }
    if (!S_ISREG(st.st_mode) || st.st_uid != 0) {
        return MK_OK; /* a device, a FIFO, or a file someone else was given */
    }
    if (st.st_nlink != 1) {
        errno = EMLINK;
        return MK_ERR;
    }
    return fchown(fd, uid, (gid_t) -1) == 0 ? MK_OK : MK_DECLINED;
}

int mk_log_file_open(const char *path, int flags, mode_t mode)
{
    uid_t owner = mk_log_sink()->owner;
    int fd = open(path, flags | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW, mode);

    if (fd < 0) {
        return -1;
    }
    int given = mk_log_file_give(fd, owner);
    if (given == MK_ERR) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (given == MK_DECLINED) {
        mk_warn("%s: cannot give it to the User (uid %ld): %s; it cannot be reopened after the "
                "switch",
                path, (long) owner, strerror(errno));
    }
    return fd;
}

int mk_log_reopen(void)
{
    struct mk_log_sink *s = mk_log_sink();
    int fd, cur;

    if (!s->path) {
        return MK_OK;
    }
    fd = open(s->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0640);
    if (fd < 0) {
        return MK_ERR;
    }
    int given = mk_log_file_give(fd, s->owner);
    if (given == MK_ERR) {
        int e = errno;
        close(fd);
        errno = e;
        return MK_ERR;
    }
    if (given == MK_DECLINED) {
        mk_warn("Log %s: cannot give it to the User (uid %ld): %s; it cannot be reopened after "
                "the switch",
                s->path, (long) s->owner, strerror(errno));
    }
    cur = atomic_load(&s->fd);
    if (cur == STDERR_FILENO) {
        atomic_store(&s->fd, fd);
        return MK_OK;
    }
    if (dup3(fd, cur, O_CLOEXEC) < 0) {
        close(fd);
        return MK_ERR;
    }
    close(fd);
    return MK_OK;
}

void mk_log_set_level(enum mk_log_level level)
{
    atomic_store(&mk_log_sink()->level, (int) level);
}

enum mk_log_level mk_log_get_level(void)
{
    return (enum mk_log_level) atomic_load_explicit(&mk_log_sink()->level, memory_order_relaxed);
}

void mk_log(enum mk_log_level level, const char *fmt, ...)
{
    char line[1024];
    struct tm tm;
    time_t now;
    va_list ap;
    size_t len;
    int n;

    if ((int) level > (int) mk_log_get_level()) {
        return;
    }
    now = time(NULL);
    gmtime_r(&now, &tm);
    len = strftime(line, sizeof(line), "[%Y-%m-%d %H:%M:%S] ", &tm);
    n = snprintf(line + len, sizeof(line) - len, "[%s] ", mk_log_names[level]);
    len += (size_t) n;

    va_start(ap, fmt);
    n = vsnprintf(line + len, sizeof(line) - len, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return;
    }
    len += (size_t) n;
    if (len > sizeof(line) - 2) {
        len = sizeof(line) - 2; /* truncated */
    }
    line[len++] = '\n';

    int fd = atomic_load(&mk_log_sink()->fd);
    ssize_t ignored = write(fd, line, len);
    (void) ignored;
}

bool mk_log_gate_pass(struct mk_log_gate *g, uint64_t now_ms, uint32_t every_ms, unsigned *skipped)
{
    uint64_t next = atomic_load_explicit(&g->next_ms, memory_order_relaxed);

    if (now_ms < next ||
        !atomic_compare_exchange_strong(&g->next_ms, &next, now_ms + (uint64_t) every_ms)) {
        atomic_fetch_add_explicit(&g->skipped, 1, memory_order_relaxed);
        return false;
    }
    *skipped = atomic_exchange_explicit(&g->skipped, 0, memory_order_relaxed);
    return true;
}
