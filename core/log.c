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

static atomic_int mk_log_fd = STDERR_FILENO;
static atomic_int mk_log_level = MK_LOG_INFO;
static char *mk_log_path;

static const char *const mk_log_names[] = {"error", "warn", "info", "debug"};

int mk_log_open(const char *path)
{
    free(mk_log_path);
    mk_log_path = path ? strdup(path) : NULL;
    if (path && !mk_log_path) {
        return MK_ERR;
    }
    return mk_log_reopen();
}

int mk_log_reopen(void)
{
    int fd, cur;

    if (!mk_log_path) {
        return MK_OK;
    }
    fd = open(mk_log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0) {
        return MK_ERR;
    }
    cur = atomic_load(&mk_log_fd);
    if (cur == STDERR_FILENO) {
        atomic_store(&mk_log_fd, fd);
        return MK_OK;
    }
    if (dup3(fd, cur, O_CLOEXEC) < 0) {
        close(fd);
        return MK_ERR;
    }
    close(fd);
    return MK_OK;
}

/* Only when no other thread logs any more (process exit). */
void mk_log_close(void)
{
    int old = atomic_exchange(&mk_log_fd, STDERR_FILENO);
    if (old != STDERR_FILENO) {
        close(old);
    }
    free(mk_log_path);
    mk_log_path = NULL;
}

void mk_log_set_level(enum mk_log_level level)
{
    atomic_store(&mk_log_level, (int) level);
}

enum mk_log_level mk_log_get_level(void)
{
    return (enum mk_log_level) atomic_load_explicit(&mk_log_level, memory_order_relaxed);
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

    int fd = atomic_load(&mk_log_fd);
    ssize_t ignored = write(fd, line, len);
    (void) ignored;
}
