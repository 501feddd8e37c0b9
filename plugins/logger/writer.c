/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * writer.c: the log files and the logger thread.
 *
 * Each log file has a pipe. Workers write whole lines into it without
 * blocking (logger.c); the logger thread sleeps in epoll_wait(2) on the read
 * ends and moves what a pipe holds into its file with splice(2), so the
 * bytes never come back to user space. After a round that moved data, but
 * less than half a pipe, the thread pauses LOGGER_PAUSE_MS: under load it
 * wakes about a hundred times a second and moves long runs at once. It also
 * writes into the pipes for workers whose pipe was full and that have gone
 * idle since (logger_help_workers).
 *
 * Guarantees:
 *   - Workers never block on a log file: they only write(2) to O_NONBLOCK
 *     pipes.
 *   - A file has one writer, this thread (the controlling thread once the
 *     thread stopped), so it is opened without O_APPEND (splice(2) refuses
 *     such a target) and the thread seeks to the end before each round: a
 *     file truncated by copytruncate is written from its new end.
 *   - The registry lock guards the list of files and their site counts; no
 *     I/O happens under it, so site_free() on a worker never waits for a
 *     disk.
 *   - Reopening (SIGUSR1) empties each pipe into the file it had before
 *     opening the path again; logger_writer_reopen() returns once done.
 *   - Stopping empties every pipe, then writes what stopping workers could
 *     not (left-overs), then closes: nothing a worker rendered is lost.
 *   - A file no site uses any more is emptied and closed within
 *     LOGGER_TICK_MS once no worker holds it. Only this thread frees a file
 *     while it runs, so the pointers it took from the registry stay valid.
 *   - A file that fails to write (disk full) is left alone for a tick: its
 *     pipe fills, workers keep lines in their buffers and then drop them,
 *     counted; counts are reported in the server log every LOGGER_REPORT_S.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "logger.h"

#define LOGGER_TICK_MS 1000
#define LOGGER_PAUSE_MS 10
#define LOGGER_REPORT_S 10
#define LOGGER_SPLICE_MAX (1u << 20)
#define LOGGER_REOPEN_WAIT_S 10
#define LOGGER_STOP_WAIT_MS 5000

struct logger_leftover {
    struct logger_leftover *next;
    char *data;
    size_t len;
};

static pthread_mutex_t logger_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t logger_cond = PTHREAD_COND_INITIALIZER;
static struct logger_file *logger_files[LOGGER_MAX_FILES]; /* under logger_lock */
static atomic_uint logger_retire_gen;

static struct {
    pthread_t thread;
    bool running; /* between start and stop; under logger_lock */
    int epfd;
    int ctl; /* eventfd: something for the thread to do */
    atomic_bool stop;
    atomic_bool new_files;
    unsigned reopen_asked, reopen_done; /* under logger_lock */
} logger_writer = {.epfd = -1, .ctl = -1};

/* The copy buffer of the thread (of the controlling thread once it stopped). */
static char logger_scratch[65536];

unsigned logger_retire_generation(void)
{
    return atomic_load_explicit(&logger_retire_gen, memory_order_acquire);
}

/* Have the logger thread look at its flags (new files, reopen, stop). Any thread. */
static void logger_wake(void)
{
    uint64_t one = 1;
    ssize_t ignored = write(logger_writer.ctl, &one, sizeof(one));
    (void) ignored;
}

/* Copy the registry; the caller uses the pointers only where files cannot go. */
static unsigned logger_snapshot(struct logger_file **out)
{
    unsigned n = 0;

    pthread_mutex_lock(&logger_lock);
    for (unsigned i = 0; i < LOGGER_MAX_FILES; i++) {
        if (logger_files[i]) {
            out[n++] = logger_files[i];
        }
    }
    pthread_mutex_unlock(&logger_lock);
    return n;
}

/* Close *fd if open and mark it closed. */
static void logger_close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* Close and free a file out of the registry; its left-overs are discarded. */
static void logger_file_free(struct logger_file *f)
{
    logger_close_fd(&f->fd);
    logger_close_fd(&f->pipe_r);
    logger_close_fd(&f->pipe_w);
    while (f->leftovers) {
        struct logger_leftover *l = f->leftovers;
        f->leftovers = l->next;
        free(l->data);
        free(l);
    }
    free(f->path);
    free(f);
}

/* Open `path` for writing at its end; -1 with errno. */
static int logger_open_path(const char *path, struct stat *st)
{
    /* O_NONBLOCK: a FIFO without a reader is refused instead of hanging the start. */
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0644);
    if (fd < 0) {
        return -1;
    }
    if (fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    lseek(fd, 0, SEEK_END); /* a FIFO or a terminal has no end: ESPIPE is fine */
    return fd;
}

/* ---- moving data ----------------------------------------------------------- */

/* splice(2) refused the file: move one pipe-full through user space. */
static ssize_t logger_file_copy(struct logger_file *f)
{
    ssize_t n = read(f->pipe_r, logger_scratch, sizeof(logger_scratch));
    size_t off = 0;

    if (n <= 0) {
        return n;
    }
    while (off < (size_t) n) {
        ssize_t w = write(f->fd, logger_scratch + off, (size_t) n - off);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            f->lost += (size_t) n - off;
            errno = e;
            return -1;
        }
        off += (size_t) w;
    }
    return n;
}

/* Bytes waiting in the pipe. */
static int logger_file_pending(const struct logger_file *f)
{
    int n = 0;
    return ioctl(f->pipe_r, FIONREAD, &n) == 0 ? n : 0;
}

/*
 * Can the file take data now? Asked only of FIFOs and devices: for a
 * regular file EAGAIN always means the pipe was empty.
 */
static bool logger_file_writable(const struct logger_file *f)
{
    struct pollfd p = {.fd = f->fd, .events = POLLOUT};
    return poll(&p, 1, 0) > 0 && (p.revents & POLLOUT);
}

/* Stop watching the pipe until the next tick (the file cannot take data now). */
static void logger_file_unwatch(struct logger_file *f)
{
    if (f->watched && logger_writer.epfd >= 0) {
        epoll_ctl(logger_writer.epfd, EPOLL_CTL_DEL, f->pipe_r, NULL);
        f->watched = false;
    }
}

/* A write failed: say so once, and leave the file alone until the next tick. */
static void logger_file_fail(struct logger_file *f, int err)
{
    if (!f->failing) {
        logger_api->log(MK_PLUGIN_LOG_ERROR,
                        "logger: cannot write %s: %s (lines wait in memory, then are dropped)",
                        f->path, strerror(err));
        f->failing = true;
    }
    logger_file_unwatch(f);
}

/*
 * Move everything the pipe holds into the file; returns the bytes moved.
 * The logger thread, or the controlling thread once it stopped.
 */
static size_t logger_file_drain(struct logger_file *f)
{
    size_t moved = 0;

    lseek(f->fd, 0, SEEK_END);
    for (;;) {
        ssize_t n;
        if (!f->copy) {
            n = splice(f->pipe_r, NULL, f->fd, NULL, LOGGER_SPLICE_MAX,
                       SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n < 0 && errno == EINVAL) {
                f->copy = true; /* a file system or device without splice */
                continue;
            }
        }
        else {
            n = logger_file_copy(f);
        }
        if (n > 0) {
            moved += (size_t) n;
            if (f->failing) {
                logger_api->log(MK_PLUGIN_LOG_INFO, "logger: writing %s again", f->path);
                f->failing = false;
            }
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno != EAGAIN) {
            logger_file_fail(f, errno);
        }
        else if (n < 0 && !f->regular && !logger_file_writable(f)) {
            logger_file_unwatch(f); /* a FIFO nobody reads: try again next tick */
        }
        return moved;
    }
}

/* At stop, a FIFO's reader may be slow: wait for room. False: none came in time. */
static bool logger_file_wait_room(const struct logger_file *f)
{
    struct pollfd p = {.fd = f->fd, .events = POLLOUT};
    return poll(&p, 1, LOGGER_STOP_WAIT_MS) > 0 && !(p.revents & (POLLERR | POLLHUP));
}

/* At stop: move everything the pipe holds, waiting for room where the file has to. */
static void logger_file_drain_all(struct logger_file *f)
{
    bool waited = false;

    for (;;) {
        size_t moved = logger_file_drain(f);
        if (!logger_file_pending(f) || (waited && !moved) || !logger_file_wait_room(f)) {
            return;
        }
        waited = true;
    }
}

/* Write the left-overs of stopping workers after what the pipe held. */
static void logger_file_write_leftovers(struct logger_file *f)
{
    while (f->leftovers) {
        struct logger_leftover *l = f->leftovers;
        size_t off = 0;
        while (off < l->len) {
            ssize_t w = write(f->fd, l->data + off, l->len - off);
            if (w < 0 && (errno == EINTR || (errno == EAGAIN && logger_file_wait_room(f)))) {
                continue;
            }
            if (w <= 0) {
                f->lost += l->len - off;
                break;
            }
            off += (size_t) w;
        }
        f->leftovers = l->next;
        free(l->data);
        free(l);
        atomic_fetch_sub(&f->users, 1);
    }
}

/* Report the lines workers dropped since the last report. */
static void logger_report(struct logger_file *f)
{
    unsigned long dropped = atomic_load_explicit(&f->dropped, memory_order_relaxed);
    if (dropped != f->dropped_told) {
        logger_api->log(MK_PLUGIN_LOG_WARN,
                        "logger: %s: %lu lines dropped (%lu in all): the disk did not keep up",
                        f->path, dropped - f->dropped_told, dropped);
        f->dropped_told = dropped;
    }
}

/* ---- the logger thread ----------------------------------------------------- */

/* Add the pipes of new (or failed) files to the epoll set. */
static void logger_writer_watch(void)
{
    static struct logger_file *files[LOGGER_MAX_FILES];
    unsigned n = logger_snapshot(files);

    for (unsigned i = 0; i < n; i++) {
        struct logger_file *f = files[i];
        if (f->watched) {
            continue;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = f};
        if (epoll_ctl(logger_writer.epfd, EPOLL_CTL_ADD, f->pipe_r, &ev) == 0) {
            f->watched = true;
        }
        logger_file_drain(f);
    }
}

/* SIGUSR1: each file gets what its pipe holds, then is opened again at its path. */
static void logger_writer_reopen_files(void)
{
    static struct logger_file *files[LOGGER_MAX_FILES];
    unsigned asked, n;

    pthread_mutex_lock(&logger_lock);
    asked = logger_writer.reopen_asked;
    pthread_mutex_unlock(&logger_lock);
    if (asked == logger_writer.reopen_done) {
        return;
    }
    n = logger_snapshot(files);
    for (unsigned i = 0; i < n; i++) {
        struct logger_file *f = files[i];
        struct stat st;
        logger_file_drain(f);
        int fd = logger_open_path(f->path, &st);
        if (fd < 0) {
            logger_api->log(MK_PLUGIN_LOG_ERROR, "logger: cannot reopen %s: %s (kept the old one)",
                            f->path, strerror(errno));
            continue;
        }
        int old = f->fd;
        pthread_mutex_lock(&logger_lock);
        f->fd = fd;
        f->dev = st.st_dev;
        f->ino = st.st_ino;
        f->regular = S_ISREG(st.st_mode);
        f->copy = false;
        pthread_mutex_unlock(&logger_lock);
        close(old);
    }
    pthread_mutex_lock(&logger_lock);
    logger_writer.reopen_done = asked;
    pthread_cond_broadcast(&logger_cond);
    pthread_mutex_unlock(&logger_lock);
}

/* Close the files no site uses and no worker holds any more. */
static void logger_writer_reap(void)
{
    static struct logger_file *cand[LOGGER_MAX_FILES];
    unsigned n = 0;

    pthread_mutex_lock(&logger_lock);
    for (unsigned i = 0; i < LOGGER_MAX_FILES; i++) {
        struct logger_file *f = logger_files[i];
        if (f && f->site_refs == 0 && atomic_load(&f->users) == 0) {
            cand[n++] = f;
        }
    }
    pthread_mutex_unlock(&logger_lock);
    for (unsigned i = 0; i < n; i++) {
        struct logger_file *f = cand[i];
        logger_file_drain(f);
        pthread_mutex_lock(&logger_lock);
        /* No site uses it, so no worker can take it again: it may go. */
        bool gone = f->site_refs == 0 && atomic_load(&f->users) == 0;
        if (gone) {
            logger_files[f->id] = NULL;
        }
        pthread_mutex_unlock(&logger_lock);
        if (!gone) {
            continue;
        }
        if (f->watched) {
            epoll_ctl(logger_writer.epfd, EPOLL_CTL_DEL, f->pipe_r, NULL);
        }
        logger_file_drain(f);
        logger_report(f);
        logger_file_free(f);
    }
}

/* Report the drops of every file (every LOGGER_REPORT_S). The logger thread. */
static void logger_writer_report_all(void)
{
    static struct logger_file *files[LOGGER_MAX_FILES];
    unsigned n = logger_snapshot(files);

    for (unsigned i = 0; i < n; i++) {
        logger_report(files[i]);
    }
}

/* After a round that moved data: let more gather, unless there is work. */
static void logger_writer_pause(void)
{
    struct pollfd p = {.fd = logger_writer.ctl, .events = POLLIN};
    poll(&p, 1, LOGGER_PAUSE_MS);
}

/* The logger thread: drain readable pipes, then the chores, until asked to stop. */
static void *logger_writer_main(void *arg)
{
    struct epoll_event evs[64];
    time_t ticked = time(NULL), reported = ticked;

    (void) arg;
    while (!atomic_load(&logger_writer.stop)) {
        int n = epoll_wait(logger_writer.epfd, evs, 64, LOGGER_TICK_MS);
        bool moved = false, busy = false;
        for (int i = 0; i < n; i++) {
            struct logger_file *f = evs[i].data.ptr;
            if (!f) {
                uint64_t v;
                ssize_t ignored = read(logger_writer.ctl, &v, sizeof(v));
                (void) ignored;
                continue;
            }
            size_t bytes = logger_file_drain(f);
            moved |= bytes > 0;
            busy |= bytes >= f->pipe_cap / 2; /* the pipe was filling up: no pause */
        }
        if (atomic_load(&logger_writer.stop)) {
            break;
        }
        if (atomic_exchange(&logger_writer.new_files, false)) {
            logger_writer_watch();
        }
        logger_writer_reopen_files();
        time_t now = time(NULL);
        bool tick = now != ticked;
        if (tick) {
            ticked = now;
            logger_writer_watch(); /* files that failed get another try */
            logger_writer_reap();
        }
        if (now - reported >= LOGGER_REPORT_S) {
            reported = now;
            logger_writer_report_all();
        }
        if (atomic_exchange(&logger_any_stuck, false) || tick) {
            logger_help_workers();
        }
        if (moved && !busy) {
            logger_writer_pause();
        }
    }
    return NULL;
}

int logger_writer_start(void)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    sigset_t all, old;
    int rc;

    logger_writer.epfd = epoll_create1(EPOLL_CLOEXEC);
    logger_writer.ctl = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (logger_writer.epfd < 0 || logger_writer.ctl < 0 ||
        epoll_ctl(logger_writer.epfd, EPOLL_CTL_ADD, logger_writer.ctl, &ev) != 0) {
        logger_api->log(MK_PLUGIN_LOG_ERROR, "logger: cannot set up the logger thread: %s",
                        strerror(errno));
        logger_close_fd(&logger_writer.epfd);
        logger_close_fd(&logger_writer.ctl);
        return MK_ERR;
    }
    atomic_store(&logger_writer.stop, false);
    /* The thread never takes a signal: the server's signal loop does. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&logger_writer.thread, NULL, logger_writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        logger_api->log(MK_PLUGIN_LOG_ERROR, "logger: cannot start the logger thread: %s",
                        strerror(rc));
        logger_close_fd(&logger_writer.epfd);
        logger_close_fd(&logger_writer.ctl);
        return MK_ERR;
    }
    pthread_mutex_lock(&logger_lock);
    logger_writer.running = true;
    pthread_mutex_unlock(&logger_lock);
    return MK_OK;
}

void logger_writer_stop(void)
{
    static struct logger_file *files[LOGGER_MAX_FILES];
    unsigned n;

    pthread_mutex_lock(&logger_lock);
    bool running = logger_writer.running;
    logger_writer.running = false;
    pthread_mutex_unlock(&logger_lock);
    if (!running) {
        return;
    }
    atomic_store(&logger_writer.stop, true);
    logger_wake();
    pthread_join(logger_writer.thread, NULL);
    logger_close_fd(&logger_writer.epfd);
    logger_close_fd(&logger_writer.ctl);

    n = logger_snapshot(files);
    for (unsigned i = 0; i < n; i++) {
        struct logger_file *f = files[i];
        f->watched = false;
        f->failing = false;
        logger_file_drain_all(f);
        f->lost += (uint64_t) logger_file_pending(f);
        logger_file_write_leftovers(f);
        logger_report(f);
        if (f->lost) {
            logger_api->log(MK_PLUGIN_LOG_ERROR, "logger: %s: %llu bytes could not be written",
                            f->path, (unsigned long long) f->lost);
        }
        logger_close_fd(&f->fd);
        logger_close_fd(&f->pipe_r);
        logger_close_fd(&f->pipe_w);
    }
    /* Files no site uses go now; the others when their sites are freed. */
    pthread_mutex_lock(&logger_lock);
    for (unsigned i = 0; i < LOGGER_MAX_FILES; i++) {
        struct logger_file *f = logger_files[i];
        if (f && f->site_refs == 0) {
            logger_files[i] = NULL;
            logger_file_free(f);
        }
    }
    pthread_mutex_unlock(&logger_lock);
}

void logger_writer_reopen(void)
{
    struct timespec deadline;
    unsigned want;

    pthread_mutex_lock(&logger_lock);
    if (!logger_writer.running) {
        pthread_mutex_unlock(&logger_lock);
        return;
    }
    want = ++logger_writer.reopen_asked;
    pthread_mutex_unlock(&logger_lock);
    logger_wake();

    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += LOGGER_REOPEN_WAIT_S;
    pthread_mutex_lock(&logger_lock);
    while ((int) (logger_writer.reopen_done - want) < 0) {
        if (pthread_cond_timedwait(&logger_cond, &logger_lock, &deadline) == ETIMEDOUT) {
            logger_api->log(MK_PLUGIN_LOG_WARN, "logger: the log files are still being reopened");
            break;
        }
    }
    pthread_mutex_unlock(&logger_lock);
}

/* ---- the registry ---------------------------------------------------------- */

/* A file already open at `path`, or as the file (dev, ino); NULL. Under the lock. */
static struct logger_file *logger_find(const char *path, const struct stat *st)
{
    for (unsigned i = 0; i < LOGGER_MAX_FILES; i++) {
        struct logger_file *f = logger_files[i];
        if (!f) {
            continue;
        }
        if (path && strcmp(f->path, path) == 0) {
            return f;
        }
        if (st && f->dev == st->st_dev && f->ino == st->st_ino) {
            return f;
        }
    }
    return NULL;
}

/* Take `f` for one more site. Under the lock. */
static struct logger_file *logger_take(struct logger_file *f)
{
    f->site_refs++;
    atomic_store(&f->retired, false);
    return f;
}

struct logger_file *logger_file_open(const char *path, size_t pipe_size, char *err, size_t errlen)
{
    struct logger_file *f;
    struct stat st;
    int fd, p[2];

    pthread_mutex_lock(&logger_lock);
    f = logger_find(path, NULL);
    if (f) {
        logger_take(f);
    }
    pthread_mutex_unlock(&logger_lock);
    if (f) {
        return f;
    }

    fd = logger_open_path(path, &st);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        snprintf(err, errlen, "%s: %s", path, strerror(EISDIR));
        return NULL;
    }
    if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) {
        snprintf(err, errlen, "%s: cannot make a pipe: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    /* A smaller pipe than asked (the user's pipe budget is spent) still works. */
    if (fcntl(p[1], F_SETPIPE_SZ, (int) pipe_size) < 0) {
        logger_api->log(MK_PLUGIN_LOG_WARN, "logger: %s: PipeSize refused: %s", path,
                        strerror(errno));
    }
    int cap = fcntl(p[1], F_GETPIPE_SZ);
    f = calloc(1, sizeof(*f));
    if (f) {
        f->path = strdup(path);
    }
    if (!f || !f->path) {
        free(f);
        close(fd);
        close(p[0]);
        close(p[1]);
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    f->fd = fd;
    f->pipe_cap = cap > 0 ? (size_t) cap : LOGGER_LINE_MAX;
    f->pipe_r = p[0];
    f->pipe_w = p[1];
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    f->regular = S_ISREG(st.st_mode);

    pthread_mutex_lock(&logger_lock);
    struct logger_file *same = logger_find(NULL, &st); /* another name of an open file */
    unsigned id = LOGGER_MAX_FILES;
    for (unsigned i = 0; !same && i < LOGGER_MAX_FILES; i++) {
        if (!logger_files[i]) {
            id = i;
            break;
        }
    }
    if (same) {
        logger_take(same);
    }
    else if (id < LOGGER_MAX_FILES) {
        f->id = id;
        f->site_refs = 1;
        logger_files[id] = f;
    }
    pthread_mutex_unlock(&logger_lock);
    if (same || id == LOGGER_MAX_FILES) {
        logger_file_free(f);
        if (!same) {
            snprintf(err, errlen, "%s: more than %d log files", path, LOGGER_MAX_FILES);
        }
        return same;
    }
    atomic_store(&logger_writer.new_files, true);
    logger_wake();
    return f;
}

void logger_file_release(struct logger_file *f)
{
    bool free_now = false;

    pthread_mutex_lock(&logger_lock);
    if (--f->site_refs == 0) {
        if (logger_writer.running) {
            atomic_store(&f->retired, true);
            atomic_fetch_add_explicit(&logger_retire_gen, 1, memory_order_release);
        }
        else {
            logger_files[f->id] = NULL;
            free_now = true;
        }
    }
    pthread_mutex_unlock(&logger_lock);
    if (free_now) {
        logger_file_free(f);
    }
}

void logger_file_leftover(struct logger_file *f, char *data, size_t len)
{
    struct logger_leftover *l = malloc(sizeof(*l)), **tail;

    if (!l) {
        free(data);
        atomic_fetch_add(&f->dropped, 1);
        atomic_fetch_sub(&f->users, 1);
        return;
    }
    l->next = NULL;
    l->data = data;
    l->len = len;
    pthread_mutex_lock(&logger_lock);
    for (tail = &f->leftovers; *tail; tail = &(*tail)->next) {
    }
    *tail = l;
    pthread_mutex_unlock(&logger_lock);
}

int logger_path_check(const char *path, char *err, size_t errlen)
{
    struct stat st;

    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "%s: %s", path, strerror(EISDIR));
            return MK_ERR;
        }
        if (access(path, W_OK) != 0) {
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
            return MK_ERR;
        }
        return MK_OK;
    }
    if (errno != ENOENT) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return MK_ERR;
    }
    char *copy = strdup(path);
    if (!copy) {
        snprintf(err, errlen, "%s: out of memory", path);
        return MK_ERR;
    }
    const char *dir = dirname(copy);
    int rc = MK_OK;
    if (stat(dir, &st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        rc = MK_ERR;
    }
    else if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: %s", path, strerror(ENOTDIR));
        rc = MK_ERR;
    }
    else if (access(dir, W_OK | X_OK) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        rc = MK_ERR;
    }
    free(copy);
    return rc;
}
