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

struct logger_state *logger_state_new(void)
{
    struct logger_state *lg = calloc(1, sizeof(*lg));

    if (!lg) {
        return NULL;
    }
    pthread_mutex_init(&lg->workers_lock, NULL);
    pthread_mutex_init(&lg->lock, NULL);
    pthread_cond_init(&lg->cond, NULL);
    lg->epfd = -1;
    lg->ctl = -1;
    return lg;
}

/* Free lg (no file left, no thread). */
static void logger_state_free(struct logger_state *lg)
{
    pthread_mutex_destroy(&lg->workers_lock);
    pthread_mutex_destroy(&lg->lock);
    pthread_cond_destroy(&lg->cond);
    free(lg->scratch);
    free(lg);
}

unsigned logger_retire_generation(struct logger_state *lg)
{
    return atomic_load_explicit(&lg->retire_gen, memory_order_acquire);
}

/* Have the logger thread look at its flags (new files, reopen, stop). Any thread. */
static void logger_wake(struct logger_state *lg)
{
    uint64_t one = 1;
    ssize_t ignored = write(lg->ctl, &one, sizeof(one));
    (void) ignored;
}

/* Copy the registry; the caller uses the pointers only where files cannot go. */
static unsigned logger_snapshot(struct logger_state *lg, struct logger_file **out)
{
    unsigned n = 0;

    pthread_mutex_lock(&lg->lock);
    for (unsigned i = 0; i < LOGGER_MAX_FILES; i++) {
        if (lg->files[i]) {
            out[n++] = lg->files[i];
        }
    }
    pthread_mutex_unlock(&lg->lock);
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

/*
 * Open `path` for writing at its end; -1 with errno. As the server opens
 * its own Log (api->log_file_open): a symbolic link at the path is not
 * followed (ELOOP), since the log directory may be the User's and a link
 * planted there would lead root (at start), or the User (at a reopen), to
 * a file it was never meant to write; and what root creates is given to
 * the User it switches to, so that a reopen after the switch can open it.
 */
static int logger_open_path(const char *path, struct stat *st)
{
    /* O_NONBLOCK: a FIFO without a reader is refused instead of hanging the start. */
    const int flags = O_WRONLY | O_CREAT | O_NONBLOCK;
    int fd = MK_API_HAS(logger_api, log_file_open)
                 ? logger_api->log_file_open(path, flags, 0644)
                 : open(path, flags | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW, 0644);
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
    struct logger_state *lg = f->owner;
    size_t off = 0;

    if (!lg->scratch && !(lg->scratch = malloc(LOGGER_SCRATCH))) {
        return -1; /* ENOMEM: the lines wait in the pipe */
    }
    ssize_t n = read(f->pipe_r, lg->scratch, LOGGER_SCRATCH);

    if (n <= 0) {
        return n;
    }
    while (off < (size_t) n) {
        ssize_t w = write(f->fd, lg->scratch + off, (size_t) n - off);
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
    if (f->watched && f->owner->epfd >= 0) {
        epoll_ctl(f->owner->epfd, EPOLL_CTL_DEL, f->pipe_r, NULL);
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
                        "logger: %s: %lu %s dropped (%lu in all): the disk did not keep up",
                        f->path, dropped - f->dropped_told,
                        mk_plural(dropped - f->dropped_told, "line", "lines"), dropped);
        f->dropped_told = dropped;
    }
}

/* ---- the logger thread ----------------------------------------------------- */

/* Add the pipes of new (or failed) files to the epoll set. */
static void logger_writer_watch(struct logger_state *lg)
{
    struct logger_file *files[LOGGER_MAX_FILES];
    unsigned n = logger_snapshot(lg, files);

    for (unsigned i = 0; i < n; i++) {
        struct logger_file *f = files[i];
        if (f->watched) {
            continue;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = f};
        if (epoll_ctl(lg->epfd, EPOLL_CTL_ADD, f->pipe_r, &ev) == 0) {
            f->watched = true;
        }
        logger_file_drain(f);
    }
}

/* SIGUSR1: each file gets what its pipe holds, then is opened again at its path. */
static void logger_writer_reopen_files(struct logger_state *lg)
{
    struct logger_file *files[LOGGER_MAX_FILES];
    unsigned asked, n;

    pthread_mutex_lock(&lg->lock);
    asked = lg->reopen_asked;
    pthread_mutex_unlock(&lg->lock);
    if (asked == lg->reopen_done) {
        return;
    }
    n = logger_snapshot(lg, files);
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
        pthread_mutex_lock(&lg->lock);
        f->fd = fd;
        f->dev = st.st_dev;
        f->ino = st.st_ino;
        f->regular = S_ISREG(st.st_mode);
        f->copy = false;
        pthread_mutex_unlock(&lg->lock);
        close(old);
    }
    pthread_mutex_lock(&lg->lock);
    lg->reopen_done = asked;
    pthread_cond_broadcast(&lg->cond);
    pthread_mutex_unlock(&lg->lock);
}

/* Close the files no site uses and no worker holds any more. */
static void logger_writer_reap(struct logger_state *lg)
{
    struct logger_file *cand[LOGGER_MAX_FILES];
    unsigned n = 0;

    pthread_mutex_lock(&lg->lock);
    for (unsigned i = 0; i < LOGGER_MAX_FILES; i++) {
        struct logger_file *f = lg->files[i];
        if (f && f->site_refs == 0 && atomic_load(&f->users) == 0) {
            cand[n++] = f;
        }
    }
    pthread_mutex_unlock(&lg->lock);
    for (unsigned i = 0; i < n; i++) {
        struct logger_file *f = cand[i];
        logger_file_drain(f);
        pthread_mutex_lock(&lg->lock);
        /* No site uses it, so no worker can take it again: it may go. */
        bool gone = f->site_refs == 0 && atomic_load(&f->users) == 0;
        if (gone) {
            lg->files[f->id] = NULL;
            lg->n_files--;
        }
        pthread_mutex_unlock(&lg->lock);
        if (!gone) {
            continue;
        }
        if (f->watched) {
            epoll_ctl(lg->epfd, EPOLL_CTL_DEL, f->pipe_r, NULL);
        }
        logger_file_drain(f);
        logger_report(f);
        logger_file_free(f);
    }
}

/* Report the drops of every file (every LOGGER_REPORT_S). The logger thread. */
static void logger_writer_report_all(struct logger_state *lg)
{
    struct logger_file *files[LOGGER_MAX_FILES];
    unsigned n = logger_snapshot(lg, files);

    for (unsigned i = 0; i < n; i++) {
        logger_report(files[i]);
    }
}

/* After a round that moved data: let more gather, unless there is work. */
static void logger_writer_pause(struct logger_state *lg)
{
    struct pollfd p = {.fd = lg->ctl, .events = POLLIN};
    poll(&p, 1, LOGGER_PAUSE_MS);
}

/* The logger thread: drain readable pipes, then the chores, until asked to stop. */
static void *logger_writer_main(void *arg)
{
    struct logger_state *lg = arg;
    struct epoll_event evs[64];
    time_t ticked = time(NULL), reported = ticked;

    /* Its messages (write errors, drops) go to its server's log. */
    if (lg->server && MK_API_HAS(logger_api, thread_serve)) {
        logger_api->thread_serve(lg->server);
    }
    while (!atomic_load(&lg->stop)) {
        int n = epoll_wait(lg->epfd, evs, 64, LOGGER_TICK_MS);
        bool moved = false, busy = false;
        for (int i = 0; i < n; i++) {
            struct logger_file *f = evs[i].data.ptr;
            if (!f) {
                uint64_t v;
                ssize_t ignored = read(lg->ctl, &v, sizeof(v));
                (void) ignored;
                continue;
            }
            size_t bytes = logger_file_drain(f);
            moved |= bytes > 0;
            busy |= bytes >= f->pipe_cap / 2; /* the pipe was filling up: no pause */
        }
        if (atomic_load(&lg->stop)) {
            break;
        }
        if (atomic_exchange(&lg->new_files, false)) {
            logger_writer_watch(lg);
        }
        logger_writer_reopen_files(lg);
        time_t now = time(NULL);
        bool tick = now != ticked;
        if (tick) {
            ticked = now;
            logger_writer_watch(lg); /* files that failed get another try */
            logger_writer_reap(lg);
        }
        if (now - reported >= LOGGER_REPORT_S) {
            reported = now;
            logger_writer_report_all(lg);
        }
        if (atomic_exchange(&lg->any_stuck, false) || tick) {
            logger_help_workers(lg);
        }
        if (moved && !busy) {
            logger_writer_pause(lg);
        }
    }
    return NULL;
}

int logger_writer_start(struct logger_state *lg)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    sigset_t all, old;
    int rc;

    lg->epfd = epoll_create1(EPOLL_CLOEXEC);
    lg->ctl = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (lg->epfd < 0 || lg->ctl < 0 || epoll_ctl(lg->epfd, EPOLL_CTL_ADD, lg->ctl, &ev) != 0) {
        logger_api->log(MK_PLUGIN_LOG_ERROR, "logger: cannot set up the logger thread: %s",
                        strerror(errno));
        logger_close_fd(&lg->epfd);
        logger_close_fd(&lg->ctl);
        return MK_ERR;
    }
    atomic_store(&lg->stop, false);
    /* The thread never takes a signal: the server's signal loop does. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&lg->thread, NULL, logger_writer_main, lg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        logger_api->log(MK_PLUGIN_LOG_ERROR, "logger: cannot start the logger thread: %s",
                        strerror(rc));
        logger_close_fd(&lg->epfd);
        logger_close_fd(&lg->ctl);
        return MK_ERR;
    }
    pthread_mutex_lock(&lg->lock);
    lg->running = true;
    pthread_mutex_unlock(&lg->lock);
    return MK_OK;
}

void logger_writer_stop(struct logger_state *lg)
{
    struct logger_file *files[LOGGER_MAX_FILES];
    unsigned n;

    pthread_mutex_lock(&lg->lock);
    bool running = lg->running;
    lg->running = false;
    pthread_mutex_unlock(&lg->lock);
    if (running) {
        atomic_store(&lg->stop, true);
        logger_wake(lg);
        pthread_join(lg->thread, NULL);
    }
    logger_close_fd(&lg->epfd);
    logger_close_fd(&lg->ctl);

    n = logger_snapshot(lg, files);
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
    pthread_mutex_lock(&lg->lock);
    for (unsigned i = 0; i < LOGGER_MAX_FILES; i++) {
        struct logger_file *f = lg->files[i];
        if (f && f->site_refs == 0) {
            lg->files[i] = NULL;
            lg->n_files--;
            logger_file_free(f);
        }
    }
    lg->stopped = true;
    bool last = lg->n_files == 0;
    pthread_mutex_unlock(&lg->lock);
    if (last) {
        logger_state_free(lg);
    }
}

void logger_writer_reopen(struct logger_state *lg)
{
    struct timespec deadline;
    unsigned want;

    pthread_mutex_lock(&lg->lock);
    if (!lg->running) {
        pthread_mutex_unlock(&lg->lock);
        return;
    }
    want = ++lg->reopen_asked;
    pthread_mutex_unlock(&lg->lock);
    logger_wake(lg);

    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += LOGGER_REOPEN_WAIT_S;
    pthread_mutex_lock(&lg->lock);
    while ((int) (lg->reopen_done - want) < 0) {
        if (pthread_cond_timedwait(&lg->cond, &lg->lock, &deadline) == ETIMEDOUT) {
            logger_api->log(MK_PLUGIN_LOG_WARN, "logger: the log files are still being reopened");
            break;
        }
    }
    pthread_mutex_unlock(&lg->lock);
}

/* ---- the registry ---------------------------------------------------------- */

/* A file already open at `path`, or as the file (dev, ino); NULL. Under the lock. */
static struct logger_file *logger_find(struct logger_state *lg, const char *path,
                                       const struct stat *st)
{
    for (unsigned i = 0; i < LOGGER_MAX_FILES; i++) {
        struct logger_file *f = lg->files[i];
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

struct logger_file *logger_file_open(struct logger_state *lg, const char *path, size_t pipe_size,
                                     char *err, size_t errlen)
{
    struct logger_file *f;
    struct stat st;
    int fd, p[2];

    pthread_mutex_lock(&lg->lock);
    f = logger_find(lg, path, NULL);
    if (f) {
        logger_take(f);
    }
    pthread_mutex_unlock(&lg->lock);
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

    pthread_mutex_lock(&lg->lock);
    struct logger_file *same = logger_find(lg, NULL, &st); /* another name of an open file */
    unsigned id = LOGGER_MAX_FILES;
    for (unsigned i = 0; !same && i < LOGGER_MAX_FILES; i++) {
        if (!lg->files[i]) {
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
        f->owner = lg;
        lg->files[id] = f;
        lg->n_files++;
    }
    pthread_mutex_unlock(&lg->lock);
    if (same || id == LOGGER_MAX_FILES) {
        logger_file_free(f);
        if (!same) {
            snprintf(err, errlen, "%s: more than %d log files", path, LOGGER_MAX_FILES);
        }
        return same;
    }
    atomic_store(&lg->new_files, true);
    logger_wake(lg);
    return f;
}

void logger_file_release(struct logger_file *f)
{
    struct logger_state *lg = f->owner;
    bool free_now = false, last = false;

    pthread_mutex_lock(&lg->lock);
    if (--f->site_refs == 0) {
        if (lg->running) {
            atomic_store(&f->retired, true);
            atomic_fetch_add_explicit(&lg->retire_gen, 1, memory_order_release);
        }
        else {
            lg->files[f->id] = NULL;
            lg->n_files--;
            free_now = true;
            last = lg->stopped && lg->n_files == 0;
        }
    }
    pthread_mutex_unlock(&lg->lock);
    if (free_now) {
        logger_file_free(f);
    }
    if (last) {
        logger_state_free(lg); /* exit() was done with it: its last file is gone */
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
    pthread_mutex_lock(&f->owner->lock);
    for (tail = &f->leftovers; *tail; tail = &(*tail)->next) {
    }
    *tail = l;
    pthread_mutex_unlock(&f->owner->lock);
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
