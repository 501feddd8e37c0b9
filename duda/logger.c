/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/logger.c: the logger object: a service's log files (in its LogDir,
 * created in duda_main()), written by one logger thread for the whole
 * process, never by a worker; SIGUSR1 opens them again (after a rotation).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "duda_internal.h"

struct duda_logger {
    int fd;
    atomic_int refs; /* the service's, and each queued line's */
    char *path;
    struct duda_logger *next, **prev; /* in duda_loggers, for reopening */
};

struct duda_line {
    struct duda_logger *log;
    struct duda_line *next;
    size_t len;
    char text[];
};

static pthread_mutex_t duda_log_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t duda_log_cond = PTHREAD_COND_INITIALIZER;
static struct duda_line *duda_log_head, **duda_log_tail = &duda_log_head;
static bool duda_log_running, duda_log_stop;
static pthread_t duda_log_thread;
/* Every open log file, for SIGUSR1; under duda_log_lock. */
static struct duda_logger *duda_loggers;

static void duda_logger_unref(struct duda_logger *log)
{
    if (atomic_fetch_sub(&log->refs, 1) == 1) {
        pthread_mutex_lock(&duda_log_lock);
        if (log->prev) {
            *log->prev = log->next;
            if (log->next) {
                log->next->prev = log->prev;
            }
        }
        pthread_mutex_unlock(&duda_log_lock);
        if (log->fd >= 0) {
            close(log->fd);
        }
        free(log->path);
        free(log);
    }
}

/*
 * A service's log file, opened as the server opens its own Log: no link
 * followed at the path (its LogDir may be the User's), and what root
 * creates given to the User, so that a reopen after the switch works.
 */
static int duda_log_open(const char *path)
{
    const int flags = O_WRONLY | O_APPEND | O_CREAT;

    if (MK_API_HAS(duda_mk, log_file_open)) {
        return duda_mk->log_file_open(path, flags, 0640);
    }
    return open(path, flags | O_CLOEXEC | O_NOFOLLOW, 0640);
}

/*
 * SIGUSR1: open every service's log file again (after a rotation). The new
 * file takes the old descriptor's number (dup2), so the logger thread's
 * writes go on without a pause.
 */
void duda_logger_reopen(void)
{
    pthread_mutex_lock(&duda_log_lock);
    for (struct duda_logger *log = duda_loggers; log; log = log->next) {
        int fd = duda_log_open(log->path);
        if (fd < 0) {
            duda_mk->log(MK_PLUGIN_LOG_ERROR, "duda: reopening %s: %s", log->path, strerror(errno));
            continue;
        }
        if (dup3(fd, log->fd, O_CLOEXEC) < 0) {
            duda_mk->log(MK_PLUGIN_LOG_ERROR, "duda: reopening %s: %s", log->path, strerror(errno));
        }
        close(fd);
    }
    pthread_mutex_unlock(&duda_log_lock);
}

static void *duda_logger_main(void *arg)
{
    (void) arg;
    pthread_mutex_lock(&duda_log_lock);
    for (;;) {
        while (!duda_log_head && !duda_log_stop) {
            pthread_cond_wait(&duda_log_cond, &duda_log_lock);
        }
        struct duda_line *batch = duda_log_head;
        duda_log_head = NULL;
        duda_log_tail = &duda_log_head;
        bool stop = duda_log_stop;
        pthread_mutex_unlock(&duda_log_lock);
        while (batch) {
            struct duda_line *next = batch->next;
            if (batch->log->fd >= 0 && write(batch->log->fd, batch->text, batch->len) < 0) {
                duda_mk->log(MK_PLUGIN_LOG_WARN, "duda: logger: %s", strerror(errno));
            }
            duda_logger_unref(batch->log);
            free(batch);
            batch = next;
        }
        pthread_mutex_lock(&duda_log_lock);
        if (stop && !duda_log_head) {
            break;
        }
    }
    pthread_mutex_unlock(&duda_log_lock);
    return NULL;
}

void duda_logger_shutdown(void)
{
    pthread_mutex_lock(&duda_log_lock);
    bool running = duda_log_running;
    duda_log_stop = true;
    pthread_cond_signal(&duda_log_cond);
    pthread_mutex_unlock(&duda_log_lock);
    if (running) {
        pthread_join(duda_log_thread, NULL);
    }
    duda_log_running = false;
    duda_log_stop = false;
}

void duda_logger_release(struct duda_service *svc)
{
    for (size_t i = 0; i < svc->n_logs; i++) {
        duda_logger_unref(svc->logs[i]);
    }
    free(svc->logs);
    svc->logs = NULL;
    svc->n_logs = 0;
}

static duda_logger_t *duda_logger_create(const char *name)
{
    struct duda_service *svc = duda_current;
    char path[PATH_MAX];

    if (!svc || svc->workers || !name || strchr(name, '/')) {
        duda_misuse(NULL, "logger->create(): outside duda_main(), or a name with '/'");
        return NULL;
    }
    if (!svc->logdir) {
        snprintf(svc->map_err, sizeof(svc->map_err),
                 "logger->create(%s): the service has no LogDir", name);
        return NULL;
    }
    struct duda_logger *log = calloc(1, sizeof(*log));
    struct duda_logger **v = realloc(svc->logs, (svc->n_logs + 1) * sizeof(*v));
    if (!log || !v) {
        free(log);
        return NULL;
    }
    svc->logs = v;
    atomic_store(&log->refs, 1);
    log->fd = -1;
    if (!duda_mk->checking()) {
        snprintf(path, sizeof(path), "%s/%s", svc->logdir, name);
        log->fd = duda_log_open(path);
        if (log->fd < 0) {
            snprintf(svc->map_err, sizeof(svc->map_err), "logger->create: %.200s: %s", path,
                     strerror(errno));
            free(log);
            return NULL;
        }
        log->path = strdup(path);
        pthread_mutex_lock(&duda_log_lock);
        if (!duda_log_running &&
            pthread_create(&duda_log_thread, NULL, duda_logger_main, NULL) == 0) {
            duda_log_running = true;
        }
        if (log->path) {
            log->next = duda_loggers;
            log->prev = &duda_loggers;
            if (duda_loggers) {
                duda_loggers->prev = &log->next;
            }
            duda_loggers = log;
        }
        pthread_mutex_unlock(&duda_log_lock);
    }
    svc->logs[svc->n_logs++] = log;
    return log;
}

static int duda_logger_print(duda_logger_t *log, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;

    if (!log) {
        duda_misuse(NULL, "logger->print() without a logger");
        return -1;
    }
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return -1;
    }
    size_t len = (size_t) n < sizeof(buf) - 1 ? (size_t) n : sizeof(buf) - 2;
    struct duda_line *line = malloc(sizeof(*line) + len + 1);
    if (!line) {
        return -1;
    }
    memcpy(line->text, buf, len);
    line->text[len] = '\n';
    line->len = len + 1;
    line->log = log;
    line->next = NULL;
    atomic_fetch_add(&log->refs, 1);
    pthread_mutex_lock(&duda_log_lock);
    *duda_log_tail = line;
    duda_log_tail = &line->next;
    pthread_cond_signal(&duda_log_cond);
    pthread_mutex_unlock(&duda_log_lock);
    return 0;
}

const struct duda_logger_api duda_logger_obj = {.size = sizeof(struct duda_logger_api),
                                                .create = duda_logger_create,
                                                .print = duda_logger_print};
