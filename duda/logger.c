/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/logger.c: the objects that are not about one response: global
 * (per-worker values), worker (threads, pre_loop, task threads), event
 * (timers and descriptors on the worker's loop, a call on every worker),
 * console (debug lines and the dashboard), logger (per-service files
 * written by one logger thread, never by a worker), data, conf, fconf and
 * xtime.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "duda_internal.h"

/* ---- per worker: pre_loop and globals ----------------------------------------- */

void duda_service_enter(struct duda_service *svc)
{
    int w = duda_mk->worker_id();

    if (w < 0 || (unsigned) w >= svc->workers || svc->loop_ready[w]) {
        return;
    }
    svc->loop_ready[w] = 1;
    if (svc->pre_loop) {
        svc->pre_loop();
    }
}

static int duda_global_init(duda_global_t *key, void *(*make)(void), void (*destroy)(void *value))
{
    struct duda_service *svc = duda_current;

    if (!svc || svc->workers || !key) {
        duda_misuse(NULL, "global->init() outside duda_main()");
        return -1;
    }
    if (svc->n_globals == DUDA_GLOBALS_MAX) {
        snprintf(svc->map_err, sizeof(svc->map_err), "more than %d globals", DUDA_GLOBALS_MAX);
        return -1;
    }
    key->make = make;
    key->destroy = destroy;
    key->id = (int) svc->n_globals;
    svc->globals[svc->n_globals++] = key;
    return 0;
}

static void **duda_global_slot(duda_global_t *key, const char *what)
{
    struct duda_service *svc = duda_current;
    int w = duda_mk->worker_id();

    if (!svc || !key || key->id < 0 || (unsigned) key->id >= svc->n_globals ||
        svc->globals[key->id] != key || w < 0 || (unsigned) w >= svc->workers) {
        duda_misuse(NULL, "%s(): not a key of this service, or not on a worker", what);
        return NULL;
    }
    size_t i = (size_t) w * DUDA_GLOBALS_MAX + (size_t) key->id;
    if (!svc->gready[i]) {
        svc->gready[i] = 1;
        svc->gvalues[i] = key->make ? key->make() : NULL;
    }
    return &svc->gvalues[i];
}

static void *duda_global_get(duda_global_t *key)
{
    void **slot = duda_global_slot(key, "global->get");
    return slot ? *slot : NULL;
}

static int duda_global_set(duda_global_t *key, void *value)
{
    void **slot = duda_global_slot(key, "global->set");
    if (!slot) {
        return -1;
    }
    *slot = value;
    return 0;
}

const struct duda_global_api duda_global_obj = {.size = sizeof(struct duda_global_api),
                                                .init = duda_global_init,
                                                .get = duda_global_get,
                                                .set = duda_global_set};

/* ---- worker ------------------------------------------------------------------- */

struct duda_thread {
    struct duda_service *svc;
    void *(*fn)(void *);
    void *arg;
};

static void *duda_thread_main(void *p)
{
    struct duda_thread t = *(struct duda_thread *) p;
    free(p);
    duda_current = t.svc;
    void *rc = t.fn(t.arg);
    duda_service_put(t.svc);
    return rc;
}

static int duda_spawn(void *(*fn)(void *), void *arg)
{
    pthread_t tid;
    pthread_attr_t attr;

    if (!duda_current || !fn) {
        duda_misuse(NULL, "worker->spawn() outside a service");
        return -1;
    }
    if (duda_mk->checking()) {
        return 0;
    }
    struct duda_thread *t = malloc(sizeof(*t));
    if (!t) {
        return -1;
    }
    *t = (struct duda_thread){duda_current, fn, arg};
    duda_service_hold(duda_current);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&tid, &attr, duda_thread_main, t);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        duda_service_put(duda_current);
        free(t);
        return -1;
    }
    return 0;
}

static int duda_pre_loop(void (*fn)(void))
{
    if (!duda_current || duda_current->workers) {
        duda_misuse(NULL, "worker->pre_loop() outside duda_main()");
        return -1;
    }
    duda_current->pre_loop = fn;
    return 0;
}

struct duda_task {
    duda_request_t *dr;
    struct duda_service *svc;
    void (*work)(void *arg);
    void (*done)(duda_request_t *dr, void *arg);
    void *arg;
};

static void duda_task_work(void *p)
{
    struct duda_task *t = p;
    duda_current = t->svc;
    t->work(t->arg);
    duda_current = NULL;
}

static int duda_task_done(struct mk_request *r, void *p)
{
    struct duda_task *t = p;
    duda_request_t *dr = t->dr;
    struct duda_service *saved = duda_current;
    int rc = MK_OK;

    duda_current = t->svc;
    if (!r || !dr->r) {
        t->done(NULL, t->arg);
    }
    else {
        t->done(dr, t->arg);
        rc = duda_finish(dr);
    }
    duda_current = saved;
    duda_request_unref(dr);
    free(t);
    return rc;
}

static int duda_task(duda_request_t *dr, void (*work)(void *arg),
                     void (*done)(duda_request_t *dr, void *arg), void *arg)
{
    if (!dr || !dr->r || !work || !done || dr->tasking || dr->waiting || dr->ended) {
        duda_misuse(dr, "worker->task(): no request, no function, or the request is not open");
        return -1;
    }
    struct duda_task *t = malloc(sizeof(*t));
    if (!t) {
        return -1;
    }
    *t = (struct duda_task){dr, dr->svc, work, done, arg};
    dr->refs++;
    int rc = duda_mk->task(dr->r, duda_task_work, duda_task_done, t);
    if (rc != MK_SUSPENDED) {
        dr->refs--;
        free(t);
        return -1;
    }
    dr->tasking = true;
    return 0;
}

const struct duda_worker_api duda_worker_obj = {.size = sizeof(struct duda_worker_api),
                                                .spawn = duda_spawn,
                                                .pre_loop = duda_pre_loop,
                                                .task = duda_task,
                                                .id = duda_worker_id,
                                                .count = duda_worker_count,
                                                .call = duda_worker_call};

/* ---- event -------------------------------------------------------------------- */

static void duda_timer_unlink(struct duda_timer *t)
{
    if (t->dr) {
        for (struct duda_timer **pp = &t->dr->timers; *pp; pp = &(*pp)->next) {
            if (*pp == t) {
                *pp = t->next;
                break;
            }
        }
    }
    else {
        duda_service_put(t->svc);
    }
}

static void duda_timer_fire(struct mk_loop_timer *lt, void *arg)
{
    struct duda_timer *t = arg;
    struct duda_service *saved = duda_current;
    duda_request_t *dr = t->dr;

    (void) lt;
    if (dr) {
        dr->refs++; /* the request may end inside the callback (a flush to a gone client) */
    }
    duda_current = t->svc;
    t->firing = true;
    t->cb(dr, t->data);
    t->firing = false;
    duda_current = saved;
    if (t->deleted || (!t->repeat && !t->kept)) {
        duda_timer_unlink(t);
        free(t);
    }
    if (dr) {
        duda_request_unref(dr);
    }
}

/*
 * The services whose per-worker values may exist. A value is destroyed
 * once, under this lock: by its worker when the worker stops first (its
 * event loop is still there, so a value holding watches or timers, such
 * as a connection, closes cleanly), else when the service is unloaded.
 */
static pthread_mutex_t duda_live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct duda_service *duda_live;

void duda_globals_track(struct duda_service *svc)
{
    pthread_mutex_lock(&duda_live_lock);
    if (!svc->live) {
        svc->live = true;
        svc->live_next = duda_live;
        duda_live = svc;
    }
    pthread_mutex_unlock(&duda_live_lock);
}

/* destroy() the value of (worker, id) if it was made; under the lock. */
static void duda_global_drop(struct duda_service *svc, unsigned w, unsigned id)
{
    size_t i = (size_t) w * DUDA_GLOBALS_MAX + id;
    const duda_global_t *key = svc->globals[id];

    if (!svc->gready[i]) {
        return;
    }
    svc->gready[i] = 0;
    if (key->destroy) {
        struct duda_service *saved = duda_current;
        duda_current = svc;
        key->destroy(svc->gvalues[i]);
        duda_current = saved;
    }
}

void duda_globals_worker_exit(int worker)
{
    pthread_mutex_lock(&duda_live_lock);
    for (struct duda_service *svc = duda_live; svc; svc = svc->live_next) {
        for (unsigned id = 0;
             worker >= 0 && (unsigned) worker < svc->workers && id < svc->n_globals; id++) {
            duda_global_drop(svc, (unsigned) worker, id);
        }
    }
    pthread_mutex_unlock(&duda_live_lock);
}

void duda_globals_release(struct duda_service *svc)
{
    pthread_mutex_lock(&duda_live_lock);
    for (struct duda_service **pp = &duda_live; *pp; pp = &(*pp)->live_next) {
        if (*pp == svc) {
            *pp = svc->live_next;
            break;
        }
    }
    svc->live = false;
    for (unsigned id = 0; id < svc->n_globals && svc->gready; id++) {
        for (unsigned w = 0; w < svc->workers; w++) {
            duda_global_drop(svc, w, id);
        }
    }
    pthread_mutex_unlock(&duda_live_lock);
}

/* A timer of the current service: started (timer_add) or kept, not armed (timer_new). */
static duda_timer_t *duda_timer_make(duda_request_t *dr, unsigned ms, int repeat, bool kept,
                                     void (*cb)(duda_request_t *dr, void *data), void *data)
{
    struct duda_timer *t = calloc(1, sizeof(*t));
    if (!t) {
        return NULL;
    }
    *t = (struct duda_timer){
        .dr = dr, .svc = duda_current, .cb = cb, .data = data, .repeat = repeat != 0, .kept = kept};
    t->t = kept ? duda_mk->timer_new(duda_timer_fire, t)
                : duda_mk->timer_start(ms, repeat, duda_timer_fire, t);
    if (!t->t) {
        free(t);
        return NULL;
    }
    if (dr) {
        t->next = dr->timers;
        dr->timers = t;
    }
    else {
        duda_service_hold(t->svc);
    }
    return t;
}

static duda_timer_t *duda_timer_add(duda_request_t *dr, unsigned ms, int repeat,
                                    void (*cb)(duda_request_t *dr, void *data), void *data)
{
    if (!duda_current || !cb || (dr && !dr->r)) {
        duda_misuse(dr, "event->timer_add(): no callback, or the request is gone");
        return NULL;
    }
    return duda_timer_make(dr, ms, repeat, false, cb, data);
}

static duda_timer_t *duda_timer_new(duda_request_t *dr, void (*cb)(duda_request_t *dr, void *data),
                                    void *data)
{
    if (!duda_current || !cb || (dr && !dr->r)) {
        duda_misuse(dr, "event->timer_new(): no callback, or the request is gone");
        return NULL;
    }
    return duda_timer_make(dr, 0, 0, true, cb, data);
}

static int duda_timer_arm(duda_timer_t *t, unsigned ms)
{
    if (!t || t->deleted || !t->kept) {
        return -1;
    }
    return duda_mk->timer_arm(t->t, ms) == MK_OK ? 0 : -1;
}

static int duda_timer_disarm(duda_timer_t *t)
{
    if (!t || t->deleted || !t->kept) {
        return -1;
    }
    return duda_mk->timer_disarm(t->t) == MK_OK ? 0 : -1;
}

static int duda_timer_del(duda_timer_t *t)
{
    if (!t || t->deleted) {
        return -1;
    }
    duda_mk->timer_stop(t->t);
    t->deleted = true;
    if (!t->firing) {
        duda_timer_unlink(t);
        free(t);
    }
    return 0;
}

void duda_timers_stop(duda_request_t *dr)
{
    while (dr->timers) {
        duda_timer_del(dr->timers);
        if (dr->timers && dr->timers->deleted) {
            /* firing: it frees itself after its callback; it is off the list now */
            struct duda_timer *t = dr->timers;
            dr->timers = t->next;
            t->dr = NULL;
            duda_service_hold(t->svc);
        }
    }
}

struct duda_watch {
    struct mk_loop_fd *h;
    struct duda_service *svc;
    void (*cb)(int fd, unsigned ready, void *data);
    void *data;
};

static void duda_watch_fire(struct mk_loop_fd *h, int fd, uint32_t ready, void *arg)
{
    struct duda_watch *w = arg;
    struct duda_service *saved = duda_current;

    (void) h;
    duda_current = w->svc;
    w->cb(fd,
          (ready & MK_LOOP_READ ? DUDA_EVENT_READ : 0) |
              (ready & (MK_LOOP_WRITE | MK_LOOP_ERROR) ? DUDA_EVENT_WRITE : 0),
          w->data);
    duda_current = saved;
}

static duda_watch_t *duda_watch_add(int fd, unsigned mask,
                                    void (*cb)(int fd, unsigned ready, void *data), void *data)
{
    if (!duda_current || !cb || fd < 0) {
        duda_misuse(NULL, "event->add(): no callback or no descriptor");
        return NULL;
    }
    struct duda_watch *w = calloc(1, sizeof(*w));
    if (!w) {
        return NULL;
    }
    *w = (struct duda_watch){.svc = duda_current, .cb = cb, .data = data};
    uint32_t m =
        (mask & DUDA_EVENT_READ ? MK_LOOP_READ : 0) | (mask & DUDA_EVENT_WRITE ? MK_LOOP_WRITE : 0);
    w->h = duda_mk->fd_watch(fd, m, duda_watch_fire, w);
    if (!w->h) {
        free(w);
        return NULL;
    }
    duda_service_hold(w->svc);
    return w;
}

static int duda_watch_del(duda_watch_t *w)
{
    if (!w) {
        return -1;
    }
    duda_mk->fd_unwatch(w->h);
    duda_service_put(w->svc);
    free(w);
    return 0;
}

/* Each worker's turn through worker->call(), as the current service. */
static int duda_signal_all(void (*cb)(void *data), void *data)
{
    if (!duda_current || !cb) {
        duda_misuse(NULL, "event->signal_all(): no callback");
        return -1;
    }
    int sent = 0;
    for (int w = 0; w < (int) duda_current->workers; w++) {
        if (duda_worker_call(w, cb, data) != 0) {
            break; /* past the last worker, or memory short */
        }
        sent++;
    }
    return sent > 0 ? 0 : -1;
}

const struct duda_event_api duda_event_obj = {.size = sizeof(struct duda_event_api),
                                              .timer_add = duda_timer_add,
                                              .timer_del = duda_timer_del,
                                              .add = duda_watch_add,
                                              .del = duda_watch_del,
                                              .signal_all = duda_signal_all,
                                              .timer_new = duda_timer_new,
                                              .timer_arm = duda_timer_arm,
                                              .timer_disarm = duda_timer_disarm};

/* ---- console ------------------------------------------------------------------ */

void duda_console_note(struct duda_service *svc, const char *line)
{
    pthread_mutex_lock(&svc->console_lock);
    snprintf(svc->console[svc->console_next % DUDA_CONSOLE_LINES], sizeof(svc->console[0]), "%s",
             line);
    svc->console_next++;
    pthread_mutex_unlock(&svc->console_lock);
}

static void duda_console_debug(duda_request_t *dr, const char *fmt, ...)
{
    char msg[160];
    va_list ap;
    struct duda_service *svc = dr ? dr->svc : duda_current;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    duda_mk->log(MK_PLUGIN_LOG_INFO, "duda: %s: %s", svc ? svc->name : "?", msg);
    if (svc) {
        duda_console_note(svc, msg);
    }
}

int duda_console_map(const char *path);

const struct duda_console_api duda_console_obj = {
    .size = sizeof(struct duda_console_api),
    .debug = duda_console_debug,
    .dashboard = duda_console_map,
};

/* Resident memory of the process in KiB, from /proc/self/statm. */
static long duda_rss_kib(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2) {
            rss = 0;
        }
        fclose(f);
    }
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static void duda_html(duda_request_t *dr, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<':
            duda_response_obj.print(dr, "&lt;", 4);
            break;
        case '>':
            duda_response_obj.print(dr, "&gt;", 4);
            break;
        case '&':
            duda_response_obj.print(dr, "&amp;", 5);
            break;
        default:
            duda_response_obj.print(dr, s, 1);
        }
    }
}

void duda_dashboard(duda_request_t *dr)
{
    struct duda_service *svc = dr->svc;
    const struct duda_response_api *res = &duda_response_obj;

    res->http_content_type(dr, "text/html; charset=utf-8");
    res->printf(dr, "<!DOCTYPE html>\n<title>%s</title>\n<h1>", svc->name);
    duda_html(dr, svc->title);
    res->printf(dr, "</h1>\n<p>service <b>%s</b> at <code>/%s</code>, file <code>", svc->name,
                svc->root ? "" : svc->name);
    duda_html(dr, svc->file);
    res->printf(dr, "</code></p>\n<h2>Routes</h2>\n<ul>\n");
    for (size_t i = 0; i < svc->n_routes; i++) {
        res->printf(dr, "<li><code>%s%s", svc->root ? "" : "/", svc->root ? "" : svc->name);
        duda_html(dr, svc->routes[i].pattern);
        res->printf(dr, "</code> methods 0x%x%s</li>\n", svc->routes[i].methods,
                    svc->routes[i].dashboard ? " (dashboard)" : "");
    }
    res->printf(dr,
                "</ul>\n<h2>Memory</h2>\n<p>resident: %ld KiB (the whole server)</p>\n"
                "<h2>Counters</h2>\n<p>requests: %lu, API misuses: %lu</p>\n"
                "<h2>Console</h2>\n<pre>\n",
                duda_rss_kib(), atomic_load(&svc->requests), atomic_load(&svc->misuses));
    pthread_mutex_lock(&svc->console_lock);
    unsigned first =
        svc->console_next > DUDA_CONSOLE_LINES ? svc->console_next - DUDA_CONSOLE_LINES : 0;
    for (unsigned i = first; i < svc->console_next; i++) {
        duda_html(dr, svc->console[i % DUDA_CONSOLE_LINES]);
        res->print(dr, "\n", 1);
    }
    pthread_mutex_unlock(&svc->console_lock);
    res->printf(dr, "</pre>\n");
    res->end(dr, NULL);
}

/* ---- logger: one thread writes every service's lines -------------------------- */

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

void duda_loggers_release(struct duda_service *svc)
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

/* ---- data, conf, fconf -------------------------------------------------------- */

static const char *duda_data_path(void)
{
    return duda_current ? duda_current->datadir : NULL;
}

static char *duda_data_locate(duda_request_t *dr, const char *name)
{
    char buf[PATH_MAX];
    const char *dir = duda_data_path();

    if (!dir || !name) {
        return NULL;
    }
    int n = snprintf(buf, sizeof(buf), "%s/%s", dir, name);
    if (n < 0 || (size_t) n >= sizeof(buf)) {
        return NULL;
    }
    return dr ? duda_gc_strndup(dr, buf, (size_t) n) : strdup(buf);
}

const struct duda_data_api duda_data_obj = {
    .size = sizeof(struct duda_data_api), .get_path = duda_data_path, .locate = duda_data_locate};

static const char *duda_conf_path(void)
{
    return duda_current ? duda_current->confdir : NULL;
}

const struct duda_conf_api duda_conf_obj = {.size = sizeof(struct duda_conf_api),
                                            .get_path = duda_conf_path};

static duda_fconf_t *duda_fconf_read(const char *name)
{
    char path[PATH_MAX], err[512];
    const char *dir = duda_conf_path();

    if (!dir || !name) {
        duda_misuse(NULL, "fconf->read(): the service has no ConfDir");
        return NULL;
    }
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    struct mk_conf *c = duda_mk->conf_load(path, err, sizeof(err));
    if (!c) {
        duda_mk->log(MK_PLUGIN_LOG_ERROR, "duda: %s: %s", duda_current->name, err);
    }
    return (duda_fconf_t *) c;
}

static const char *duda_fconf_get(duda_fconf_t *f, const char *section, const char *key)
{
    const char *s, *k, *v;
    void *cursor = NULL;
    int line;

    if (!f || !section || !key) {
        return NULL;
    }
    while (duda_mk->conf_next((const struct mk_conf *) f, &cursor, &s, &k, &v, &line)) {
        if (!strcasecmp(s, section) && !strcasecmp(k, key)) {
            return v;
        }
    }
    return NULL;
}

static void duda_fconf_free(duda_fconf_t *f)
{
    if (f) {
        duda_mk->conf_free((struct mk_conf *) f);
    }
}

const struct duda_fconf_api duda_fconf_obj = {.size = sizeof(struct duda_fconf_api),
                                              .read = duda_fconf_read,
                                              .get = duda_fconf_get,
                                              .free = duda_fconf_free};

/* ---- xtime -------------------------------------------------------------------- */

static time_t duda_now(void)
{
    return time(NULL);
}

static time_t duda_tomorrow(void)
{
    time_t t = time(NULL);
    return t - t % 86400 + 86400;
}

static time_t duda_next_hours(int hours)
{
    return time(NULL) + (time_t) hours * 3600;
}

static uint64_t duda_monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

static const char *duda_http_date(time_t t, char *buf, size_t len)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    if (strftime(buf, len, "%a, %d %b %Y %H:%M:%S GMT", &tm) == 0 && len) {
        buf[0] = '\0';
    }
    return buf;
}

const struct duda_xtime_api duda_xtime_obj = {.size = sizeof(struct duda_xtime_api),
                                              .now = duda_now,
                                              .tomorrow = duda_tomorrow,
                                              .next_hours = duda_next_hours,
                                              .monotonic_ms = duda_monotonic_ms,
                                              .http_date = duda_http_date};
