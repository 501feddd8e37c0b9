/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * log.c: see log.h. A reopen keeps the descriptor number and swaps the file
 * behind it with dup2(2), so a concurrent writer writes either to the old file
 * or to the new one and never to a descriptor that was closed and reused.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <monkey/mk_common.h>

/* The process's sink, the fallback of the last sink opened, the thread's own. */
static struct mk_log_sink mk_log_process = {STDERR_FILENO, MK_LOG_INFO, NULL};
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

int mk_log_reopen(void)
{
    struct mk_log_sink *s = mk_log_sink();
    int fd, cur;

    if (!s->path) {
        return MK_OK;
    }
    fd = open(s->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0) {
        return MK_ERR;
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
