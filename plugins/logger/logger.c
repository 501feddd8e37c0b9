/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * logger.c: the Logger plugin (the original Monkey's "logger"): an access
 * log and an error log per site.
 *
 * Configuration: a [LOGGER] section in a site file (AccessLog, Format,
 * ErrorLog) and the plugin-wide conf_dir/plugins/logger.conf (defaults for
 * sites without their own, named formats, buffer and pipe sizes; declared
 * keys that the server reads into each configuration); see README.md. Every mistake, an unwritable
 * path included, is refused at start (and by monkey -t, which creates nothing) with the file and
 * the line.
 *
 * Guarantees:
 *   - A worker never blocks on a log: request_done renders the line into the
 *     worker's own buffer for that file; batch_done (and a buffer that is
 *     nearly full) writes whole lines into the file's O_NONBLOCK pipe, at most
 *     PIPE_BUF bytes a write, so lines of different workers never interleave.
 *     No system call per request.
 *   - A full pipe (the disk lags) leaves the lines in the buffer, which grows
 *     up to BufferLimit; beyond it lines are dropped and counted, and the
 *     count is reported in the server log.
 *   - worker_exit flushes what it can and hands the rest to writer.c, and
 *     exit() writes it all: a graceful stop loses nothing.
 *   - SIGUSR1 reopens every file (rename, then signal: the new lines go to a
 *     new file at the configured path).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logger.h"

#define LOGGER_BUF_INITIAL 16384
#define LOGGER_DEFAULT_LIMIT (8ul << 20)
/* An empty buffer that grew beyond this (the disk lagged) goes back to its first size. */
#define LOGGER_BUF_SHRINK (16 * LOGGER_BUF_INITIAL)

/* The error log's line: time, client, site, status, request line. */
static const char logger_error_spec[] = "%t [client %h] [site %v] %>s \"%r\"";
static const char logger_unsent[] = " (the response was not sent whole)";
/* A message of a plugin about a request (api->error_log): time, client, site, then the text. */
static const char logger_message_spec[] = "%t [client %h] [site %v]";

const struct mk_api *logger_api;

/* ---- each worker's buffers ------------------------------------------------- */

/* What one worker has rendered for one file and not yet written into its pipe. */
struct logger_buf {
    struct logger_file *file; /* held (users) while the buffer exists */
    char *data;               /* whole lines */
    size_t len, cap;
    bool dirty; /* listed in the worker's dirty list */
};

struct logger_worker {
    /*
     * Guards the buffers: taken by the worker around each request's lines
     * and each flush, and by the logger thread (trylock) when it flushes
     * for a worker whose pipe was full and that may sit idle. Never held
     * across anything that can block.
     */
    pthread_mutex_t lock;
    atomic_bool stuck;                         /* lines wait for room in a pipe */
    int id;                                    /* the slot in lg->workers, -1: none */
    struct logger_state *lg;                   /* its server's logger */
    struct logger_buf *bufs[LOGGER_MAX_FILES]; /* by file id */
    unsigned dirty[LOGGER_MAX_FILES];          /* ids of buffers with data */
    unsigned n_dirty;
    unsigned retire_seen;
    struct logger_clock clock;
};

static __thread struct logger_worker *logger_self;

/*
 * Write whole lines into the pipe, PIPE_BUF bytes at most per write so each
 * write is atomic, until it is full (EAGAIN). The buffer keeps the rest.
 */
static void logger_buf_flush(struct logger_buf *b)
{
    size_t off = 0;

    while (off < b->len) {
        size_t n = b->len - off;
        if (n > LOGGER_LINE_MAX) {
            /* Lines are at most LOGGER_LINE_MAX long: a newline is within reach. */
            const char *nl = memrchr(b->data + off, '\n', LOGGER_LINE_MAX);
            n = (size_t) (nl - (b->data + off)) + 1;
        }
        ssize_t k = write(b->file->pipe_w, b->data + off, n);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k < 0 && errno == EAGAIN) {
            break;
        }
        if (k < 0) {
            /* The pipe is gone: count what cannot be written. */
            unsigned long lines = 0;
            for (size_t i = off; i < b->len; i++) {
                lines += b->data[i] == '\n';
            }
            atomic_fetch_add(&b->file->dropped, lines);
            off = b->len;
            break;
        }
        off += (size_t) k;
    }
    if (off) {
        memmove(b->data, b->data + off, b->len - off);
        b->len -= off;
    }
}

/* Room for one more line: flush, else grow up to BufferLimit. */
static bool logger_buf_room(struct logger_buf *b)
{
    if (b->cap - b->len >= LOGGER_LINE_MAX) {
        return true;
    }
    logger_buf_flush(b);
    if (b->cap - b->len >= LOGGER_LINE_MAX) {
        return true;
    }
    size_t limit = atomic_load_explicit(&b->file->owner->buf_limit, memory_order_relaxed);
    if (b->cap >= limit) {
        return false;
    }
    size_t cap = b->cap * 2 < limit ? b->cap * 2 : limit;
    char *data = realloc(b->data, cap);
    if (!data) {
        return false;
    }
    b->data = data;
    b->cap = cap;
    return b->cap - b->len >= LOGGER_LINE_MAX;
}

/* The worker's buffer for `f`, made on first use (it then holds f). */
static struct logger_buf *logger_buf_get(struct logger_worker *w, struct logger_file *f)
{
    struct logger_buf *b = w->bufs[f->id];

    if (b) {
        return b; /* b holds f, so no other file can have its id */
    }
    b = calloc(1, sizeof(*b));
    if (!b || !(b->data = malloc(LOGGER_BUF_INITIAL))) {
        free(b);
        return NULL;
    }
    b->cap = LOGGER_BUF_INITIAL;
    b->file = f;
    atomic_fetch_add(&f->users, 1);
    w->bufs[f->id] = b;
    return b;
}

/* Drop an empty buffer and its hold on the file. w->lock held. */
static void logger_buf_free(struct logger_worker *w, struct logger_buf *b)
{
    w->bufs[b->file->id] = NULL;
    atomic_fetch_sub(&b->file->users, 1);
    free(b->data);
    free(b);
}

/* Render one line of `fmt` into the worker's buffer for `f`, or count it dropped. */
static void logger_emit(struct logger_worker *w, struct logger_file *f,
                        const struct logger_format *fmt, struct logger_line *line,
                        const char *suffix)
{
    struct logger_buf *b = logger_buf_get(w, f);

    if (!b || !logger_buf_room(b)) {
        atomic_fetch_add_explicit(&f->dropped, 1, memory_order_relaxed);
        return;
    }
    b->len += logger_format_render(fmt, line, suffix, b->data + b->len, LOGGER_LINE_MAX);
    if (!b->dirty) {
        b->dirty = true;
        w->dirty[w->n_dirty++] = f->id;
    }
}

/* Let go of the buffers of retired files once they are empty. */
static void logger_worker_let_go(struct logger_worker *w)
{
    unsigned gen = logger_retire_generation(w->lg);
    bool all = true;

    for (unsigned i = 0; i < LOGGER_MAX_FILES; i++) {
        struct logger_buf *b = w->bufs[i];
        if (!b || !atomic_load(&b->file->retired)) {
            continue;
        }
        if (b->len) {
            all = false; /* its pipe is full: try again after the next batch */
            continue;
        }
        logger_buf_free(w, b);
    }
    if (all) {
        w->retire_seen = gen;
    }
}

/* Flush every buffer with data; mark the worker stuck if a pipe was full. w->lock held. */
static void logger_worker_flush(struct logger_worker *w)
{
    unsigned keep = 0;

    for (unsigned i = 0; i < w->n_dirty; i++) {
        struct logger_buf *b = w->bufs[w->dirty[i]];
        logger_buf_flush(b);
        if (b->len) {
            w->dirty[keep++] = w->dirty[i];
            continue;
        }
        b->dirty = false;
        if (b->cap > LOGGER_BUF_SHRINK) {
            char *data = realloc(b->data, LOGGER_BUF_INITIAL);
            if (data) {
                b->data = data;
                b->cap = LOGGER_BUF_INITIAL;
            }
        }
    }
    w->n_dirty = keep;
    if (keep) {
        atomic_store(&w->stuck, true);
        atomic_store(&w->lg->any_stuck, true);
    }
    else if (atomic_load_explicit(&w->stuck, memory_order_relaxed)) {
        atomic_store(&w->stuck, false);
    }
}

void logger_help_workers(struct logger_state *lg)
{
    pthread_mutex_lock(&lg->workers_lock);
    for (unsigned i = 0; i < LOGGER_MAX_WORKERS; i++) {
        struct logger_worker *w = lg->workers[i];
        /* A busy worker flushes by itself at the end of its batch. */
        if (!w || !atomic_load(&w->stuck) || pthread_mutex_trylock(&w->lock) != 0) {
            continue;
        }
        logger_worker_flush(w);
        pthread_mutex_unlock(&w->lock);
    }
    pthread_mutex_unlock(&lg->workers_lock);
}

/* worker_init: the worker's buffers, reachable by the logger thread. On the worker. */
static int logger_worker_init(int worker_id)
{
    struct logger_state *lg = logger_api->self(MK_PLUGIN_SELF(logger));
    struct logger_worker *w;

    if (!lg) {
        return MK_OK; /* checking: nothing to log */
    }
    w = calloc(1, sizeof(*w));
    if (!w) {
        logger_api->log(MK_PLUGIN_LOG_ERROR, "logger: worker %d: out of memory, not logging",
                        worker_id);
        return MK_ERR;
    }
    pthread_mutex_init(&w->lock, NULL);
    w->lg = lg;
    w->id = worker_id >= 0 && worker_id < LOGGER_MAX_WORKERS ? worker_id : -1;
    w->retire_seen = logger_retire_generation(lg);
    if (w->id >= 0) {
        pthread_mutex_lock(&lg->workers_lock);
        lg->workers[w->id] = w;
        pthread_mutex_unlock(&lg->workers_lock);
    }
    logger_self = w;
    return MK_OK;
}

/* batch_done: write what the batch rendered into the pipes; never blocks. On the worker. */
static void logger_batch_done(int worker_id)
{
    struct logger_worker *w = logger_self;

    (void) worker_id;
    if (!w) {
        return;
    }
    pthread_mutex_lock(&w->lock);
    logger_worker_flush(w);
    if (logger_retire_generation(w->lg) != w->retire_seen) {
        logger_worker_let_go(w);
    }
    pthread_mutex_unlock(&w->lock);
}

/* The worker stops: write what the pipes take, hand the rest over to exit(). */
static void logger_worker_exit(int worker_id)
{
    struct logger_worker *w = logger_self;

    (void) worker_id;
    if (!w) {
        return;
    }
    /* Out of the logger thread's reach first: then the buffers are ours alone. */
    pthread_mutex_lock(&w->lg->workers_lock);
    if (w->id >= 0 && w->lg->workers[w->id] == w) {
        w->lg->workers[w->id] = NULL;
    }
    pthread_mutex_unlock(&w->lg->workers_lock);
    for (unsigned i = 0; i < LOGGER_MAX_FILES; i++) {
        struct logger_buf *b = w->bufs[i];
        if (!b) {
            continue;
        }
        logger_buf_flush(b);
        if (b->len) {
            logger_file_leftover(b->file, b->data, b->len); /* takes b's hold on the file */
            w->bufs[i] = NULL;
            free(b);
            continue;
        }
        logger_buf_free(w, b);
    }
    pthread_mutex_destroy(&w->lock);
    free(w);
    logger_self = NULL;
}

/* ---- the request hook ------------------------------------------------------ */

/* The lines of one finished request: access log, and error log when it failed. */
static void logger_log(struct logger_worker *w, const struct logger_site *ls,
                       const struct mk_site *site, struct mk_request *r)
{
    struct logger_line line = {.r = r, .site = site, .clock = &w->clock};

    pthread_mutex_lock(&w->lock);
    if (ls->access) {
        logger_emit(w, ls->access, ls->format, &line, NULL);
    }
    if (ls->error) {
        bool unsent = !logger_api->response_complete(r);
        if (unsent || logger_api->status(r) >= 400) {
            logger_emit(w, ls->error, w->lg->error_format, &line, unsent ? logger_unsent : NULL);
        }
    }
    pthread_mutex_unlock(&w->lock);
}

/* request_done: log the request with its site's settings. On the worker; no system call. */
static void logger_request_done(struct mk_request *r)
{
    struct logger_worker *w = logger_self;
    const struct mk_site *site;
    const struct logger_site *ls;

    if (!w) {
        return;
    }
    /* Requests refused before their Host was read belong to the default site. */
    site = logger_api->site(r);
    ls = site ? logger_api->site_data(site, MK_PLUGIN_SELF(logger)) : NULL;
    if (ls) {
        logger_log(w, ls, site, r);
    }
}

/*
 * error_log (ABI 3.4): a plugin's message about r, such as a CGI script's
 * stderr, into the error log of r's site. MK_DECLINED when that site has
 * none (the server logs it). On the worker; no system call.
 */
static int logger_error_log(struct mk_request *r, const char *text, size_t len)
{
    struct logger_worker *w = logger_self;
    char suffix[MK_ERROR_LOG_LINE + 2];

    const struct mk_site *site = logger_api->site(r);
    const struct logger_site *ls =
        site ? logger_api->site_data(site, MK_PLUGIN_SELF(logger)) : NULL;
    if (!w || !ls || !ls->error || !w->lg->message_format) {
        return MK_DECLINED;
    }
    if (len > MK_ERROR_LOG_LINE) {
        len = MK_ERROR_LOG_LINE;
    }
    suffix[0] = ' ';
    memcpy(suffix + 1, text, len);
    suffix[len + 1] = '\0';
    struct logger_line line = {.r = r, .site = site, .clock = &w->clock};
    pthread_mutex_lock(&w->lock);
    logger_emit(w, ls->error, w->lg->message_format, &line, suffix);
    pthread_mutex_unlock(&w->lock);
    return MK_OK;
}

/* ---- life cycle ------------------------------------------------------------ */

/* Free lg's formats and hand lg to the writer, which frees it (logger_writer_stop). */
static void logger_state_exit(struct logger_state *lg)
{
    logger_format_free(lg->error_format);
    lg->error_format = NULL;
    logger_format_free(lg->message_format);
    lg->message_format = NULL;
    free(lg->conf_dir);
    lg->conf_dir = NULL;
    logger_writer_stop(lg);
}

/*
 * init: read logger.conf and start the logger thread of this server (not
 * when checking). MK_ERR after logging why. Controlling thread.
 */
static int logger_init(const struct mk_api *api, const char *conf_dir)
{
    char err[PATH_MAX + 512];
    struct logger_state *lg;

    logger_api = api;
    /* logger.conf of the configuration being started, read and checked by the server. */
    const struct logger_settings *s = api->plugin_conf(NULL, MK_PLUGIN_SELF(logger));
    lg = logger_state_new();
    if (!lg) {
        api->log(MK_PLUGIN_LOG_ERROR, "logger: out of memory");
        return MK_ERR;
    }
    atomic_store(&lg->buf_limit, s->buffer_limit);
    lg->server = MK_API_HAS(api, server) ? api->server() : NULL;
    if (conf_dir && !(lg->conf_dir = strdup(conf_dir))) {
        api->log(MK_PLUGIN_LOG_ERROR, "logger: out of memory");
        logger_state_exit(lg);
        return MK_ERR;
    }
    if (logger_format_compile(logger_error_spec, &lg->error_format, err, sizeof(err)) != MK_OK ||
        logger_format_compile(logger_message_spec, &lg->message_format, err, sizeof(err)) !=
            MK_OK) {
        api->log(MK_PLUGIN_LOG_ERROR, "logger: %s", err);
        logger_state_exit(lg);
        return MK_ERR;
    }
    if (api->self_set(MK_PLUGIN_SELF(logger), lg) != MK_OK) {
        logger_state_exit(lg);
        return MK_ERR;
    }
    if (api->checking()) {
        return MK_OK; /* validate only: no thread, no file */
    }
    if (logger_writer_start(lg) != MK_OK) {
        api->self_set(MK_PLUGIN_SELF(logger), NULL);
        logger_state_exit(lg);
        return MK_ERR;
    }
    return MK_OK;
}

/* exit: after the workers stopped, write everything left and close the files. */
static void logger_exit(void)
{
    struct logger_state *lg = logger_api->self(MK_PLUGIN_SELF(logger));

    if (lg) {
        logger_state_exit(lg);
    }
}

/* Reload, step one: the server reads logger.conf itself; nothing to set aside. */
static int logger_reload_prepare(char *err, size_t errlen)
{
    (void) err;
    (void) errlen;
    return MK_OK;
}

/* Reload, step two: the new configuration is in force; its BufferLimit applies to the workers. */
static void logger_reload_commit(int commit)
{
    struct logger_state *lg = logger_api->self(MK_PLUGIN_SELF(logger));
    struct mk_config *cfg;

    if (!commit || !lg || !(cfg = logger_api->config_get())) {
        return;
    }
    const struct logger_settings *s =
        logger_api->config_sites(cfg)
            ? logger_api->plugin_conf(logger_api->config_site(cfg, 0), MK_PLUGIN_SELF(logger))
            : NULL;
    if (s) {
        atomic_store(&lg->buf_limit, s->buffer_limit);
    }
    logger_api->config_put(cfg);
}

/* reopen_logs (SIGUSR1): returns once every file was reopened. Controlling thread. */
static void logger_reopen_logs(void)
{
    struct logger_state *lg = logger_api->self(MK_PLUGIN_SELF(logger));

    if (lg) {
        logger_writer_reopen(lg);
    }
}

MK_PLUGIN_DEFINE(logger) = {
    MK_PLUGIN_ABI_INIT,
    .name = "logger",
    .version = "1.0",
    .description = "access and error logs per site, written off the workers",
    .init = logger_init,
    .exit = logger_exit,
    .reload_prepare = logger_reload_prepare,
    .reload_commit = logger_reload_commit,
    .reopen_logs = logger_reopen_logs,
    .worker_init = logger_worker_init,
    .worker_exit = logger_worker_exit,
    .request_done = logger_request_done,
    .site_sections = (const char *const[]){"LOGGER", NULL},
    .site_init = logger_site_init,
    .site_free = logger_site_free,
    .batch_done = logger_batch_done,
    .conf_schema = &logger_schema,
    .error_log = logger_error_log,
};
