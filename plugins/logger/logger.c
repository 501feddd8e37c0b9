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
#include <strings.h>
#include <unistd.h>

#include "logger.h"

#define LOGGER_BUF_INITIAL 16384
#define LOGGER_SIZE_MIN 16384
#define LOGGER_SIZE_MAX (1024ul << 20)
#define LOGGER_DEFAULT_LIMIT (8ul << 20)
/* An empty buffer that grew beyond this (the disk lagged) goes back to its first size. */
#define LOGGER_BUF_SHRINK (16 * LOGGER_BUF_INITIAL)
#define LOGGER_DEFAULT_PIPE (1ul << 20)
#define LOGGER_DEFAULT_FORMAT "combined"
#define LOGGER_NAME_MAX 64

/* The error log's line: time, client, site, status, request line. */
static const char logger_error_spec[] = "%t [client %h] [site %v] %>s \"%r\"";
static const char logger_unsent[] = " (the response was not sent whole)";

const struct mk_api *logger_api;

MK_PLUGIN_DECLARE(logger);

/* ---- plugin-wide settings (conf_dir/plugins/logger.conf) ---------------- */

struct logger_named {
    char *name;
    char *spec;
};

/*
 * logger.conf as the server filled it for one configuration (the schema
 * below); read by site_init() on the controlling thread, and BufferLimit by
 * the workers through logger_buf_limit.
 */
struct logger_settings {
    char *access;       /* default access log (absolute path), NULL: none */
    char *error;        /* default error log, NULL: none */
    char *format;       /* default format string, resolved by logger_settings_finish */
    char *format_value; /* the Format value as written */
    char access_where[PATH_MAX + 32], error_where[PATH_MAX + 32], format_where[PATH_MAX + 32];
    struct logger_named *named;
    size_t n_named;
    size_t buffer_limit;
    size_t pipe_size;
};

static char *logger_conf_dir;
static struct logger_format *logger_error_format;
static atomic_size_t logger_buf_limit = LOGGER_DEFAULT_LIMIT;

/* What site_init() stored for a site. */
struct logger_site {
    struct logger_file *access;
    struct logger_file *error;
    struct logger_format *format;
};

/* Release what the schema's callbacks stored in plugin-wide settings (schema free). */
static void logger_settings_release(void *obj, int site)
{
    struct logger_settings *s = obj;

    if (site) {
        return;
    }
    for (size_t i = 0; i < s->n_named; i++) {
        free(s->named[i].name);
        free(s->named[i].spec);
    }
    free(s->named);
    free(s->access);
    free(s->error);
    free(s->format);
    free(s->format_value);
}

/* `value` made absolute: relative to the configuration directory. NULL: no memory. */
static char *logger_resolve_path(const char *value)
{
    char *out;

    if (value[0] == '/' || !logger_conf_dir) {
        return strdup(value);
    }
    if (asprintf(&out, "%s/%s", logger_conf_dir, value) < 0) {
        return NULL;
    }
    return out;
}

/*
 * The format string a Format value names: "common", "combined",
 * "custom FORMAT" or a LogFormat name of `s`. NULL with the reason in err.
 */
static const char *logger_format_named(const struct logger_settings *s, const char *value,
                                       char *err, size_t errlen)
{
    const char *spec = logger_format_builtin(value);

    if (spec) {
        return spec;
    }
    if (strncasecmp(value, "custom", 6) == 0 && (value[6] == ' ' || value[6] == '\t')) {
        spec = value + 6;
        spec += strspn(spec, " \t");
        return spec;
    }
    for (size_t i = 0; s && i < s->n_named; i++) {
        if (strcasecmp(s->named[i].name, value) == 0) {
            return s->named[i].spec;
        }
    }
    snprintf(err, errlen,
             "Format: unknown format '%s' (common, combined, custom FORMAT, or a LogFormat name "
             "of logger.conf)",
             value);
    return NULL;
}

/* Does `spec` compile? The reason in err when not. */
static int logger_format_check(const char *spec, char *err, size_t errlen)
{
    struct logger_format *f;

    if (logger_format_compile(spec, &f, err, errlen) != MK_OK) {
        return MK_ERR;
    }
    logger_format_free(f);
    return MK_OK;
}

/* "LogFormat NAME FORMAT": add it to s. */
static int logger_add_named(struct logger_settings *s, const char *value, char *err, size_t errlen)
{
    size_t nlen = strcspn(value, " \t");
    const char *spec = value + nlen + strspn(value + nlen, " \t");
    struct logger_named *named;

    if (nlen == 0 || nlen > LOGGER_NAME_MAX || !*spec) {
        snprintf(err, errlen, "LogFormat takes a name and a format string");
        return MK_ERR;
    }
    for (size_t i = 0; i < nlen; i++) {
        char c = value[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.')) {
            snprintf(err, errlen, "LogFormat: '%.*s' is not a name (letters, digits, _ - .)",
                     (int) nlen, value);
            return MK_ERR;
        }
    }
    char *name = strndup(value, nlen);
    if (!name) {
        snprintf(err, errlen, "out of memory");
        return MK_ERR;
    }
    if (logger_format_builtin(name) || strcasecmp(name, "custom") == 0 ||
        strcasecmp(name, "off") == 0) {
        snprintf(err, errlen, "LogFormat: '%s' is a reserved name", name);
        free(name);
        return MK_ERR;
    }
    for (size_t i = 0; i < s->n_named; i++) {
        if (strcasecmp(s->named[i].name, name) == 0) {
            snprintf(err, errlen, "LogFormat: '%s' is defined twice", name);
            free(name);
            return MK_ERR;
        }
    }
    char why[256];
    if (logger_format_check(spec, why, sizeof(why)) != MK_OK) {
        snprintf(err, errlen, "LogFormat %s: %s", name, why);
        free(name);
        return MK_ERR;
    }
    named = realloc(s->named, (s->n_named + 1) * sizeof(*named));
    if (!named) {
        free(name);
        snprintf(err, errlen, "out of memory");
        return MK_ERR;
    }
    s->named = named;
    named[s->n_named].name = name;
    named[s->n_named].spec = strdup(spec);
    if (!named[s->n_named].spec) {
        free(name);
        snprintf(err, errlen, "out of memory");
        return MK_ERR;
    }
    s->n_named++;
    return MK_OK;
}

/* A path key (AccessLog, ErrorLog) given at most once; "off" stores "". */
static int logger_set_path(char **slot, int *slot_line, const char *key, const char *value,
                           int line, char *err, size_t errlen)
{
    if (*slot) {
        snprintf(err, errlen, "%s is given twice", key);
        return MK_ERR;
    }
    *slot = strcasecmp(value, "off") == 0 ? strdup("") : logger_resolve_path(value);
    *slot_line = line;
    if (!*slot) {
        snprintf(err, errlen, "out of memory");
        return MK_ERR;
    }
    return MK_OK;
}

/* AccessLog and ErrorLog of logger.conf: a path, or Off (no default). */
static int logger_set_default_log(void *obj, const struct mk_conf_key *k, const char *value,
                                  const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct logger_settings *s = obj;
    bool access = strcasecmp(k->name, "AccessLog") == 0;
    char **slot = access ? &s->access : &s->error;
    char *where = access ? s->access_where : s->error_where;

    free(*slot);
    *slot = NULL;
    /* Relative to the configuration directory (the server reads this file before init()). */
    if (strcasecmp(value, "off") != 0 &&
        (value[0] == '/' || !origin->confdir
             ? !(*slot = strdup(value))
             : asprintf(slot, "%s/%s", origin->confdir, value) < 0)) {
        *slot = NULL;
        snprintf(reason, len, "out of memory");
        return MK_ERR;
    }
    snprintf(where, PATH_MAX + 32, "%s", origin->where);
    return MK_OK;
}

/* Format of logger.conf: kept as written; logger_settings_finish resolves it. */
static int logger_set_default_format(void *obj, const struct mk_conf_key *k, const char *value,
                                     const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct logger_settings *s = obj;

    (void) k;
    free(s->format_value);
    if (!(s->format_value = strdup(value))) {
        snprintf(reason, len, "out of memory");
        return MK_ERR;
    }
    snprintf(s->format_where, sizeof(s->format_where), "%s", origin->where);
    return MK_OK;
}

/* LogFormat NAME FORMAT (repeatable). */
static int logger_set_named(void *obj, const struct mk_conf_key *k, const char *value,
                            const struct mk_conf_origin *origin, char *reason, size_t len)
{
    (void) k;
    (void) origin;
    return logger_add_named(obj, value, reason, len);
}

/* Once every line is read: the default Format names a format that compiles. */
static int logger_settings_finish(void *obj, int site, const char **key, char *reason, size_t len)
{
    struct logger_settings *s = obj;

    (void) site;
    *key = "Format";
    const char *spec = logger_format_named(s, s->format_value, reason, len);
    if (!spec || logger_format_check(spec, reason, len) != MK_OK) {
        return MK_ERR;
    }
    if (!(s->format = strdup(spec))) {
        snprintf(reason, len, "out of memory");
        return MK_ERR;
    }
    return MK_OK;
}

#define LOGGER_KEY(m) MK_CONF_FIELD(struct logger_settings, m)

/* logger.conf; the sites' [LOGGER] sections are read by logger_site_read(). */
static const struct mk_conf_key logger_keys[] = {
    {"AccessLog", MK_CONF_CUSTOM, 0, 0, 0, 0, 0, NULL, .set = logger_set_default_log},
    {"ErrorLog", MK_CONF_CUSTOM, 0, 0, 0, 0, 0, NULL, .set = logger_set_default_log},
    {"Format", MK_CONF_CUSTOM, 0, 0, 0, 0, 0, LOGGER_DEFAULT_FORMAT,
     .set = logger_set_default_format},
    {"LogFormat", MK_CONF_CUSTOM, MK_CONF_MULTI, 0, 0, 0, 0, NULL, .set = logger_set_named},
    {"BufferLimit", MK_CONF_SIZE, 0, LOGGER_KEY(buffer_limit), LOGGER_SIZE_MIN, LOGGER_SIZE_MAX,
     "8M"},
    {"PipeSize", MK_CONF_SIZE, 0, LOGGER_KEY(pipe_size), LOGGER_SIZE_MIN, LOGGER_SIZE_MAX, "1M"},
    {NULL},
};

static const struct mk_conf_schema logger_schema = {
    .section = "LOGGER",
    .file = "logger.conf",
    .keys = logger_keys,
    .size = sizeof(struct logger_settings),
    .free = logger_settings_release,
    .finish = logger_settings_finish,
};

/* ---- sites: the [LOGGER] section ------------------------------------------- */

/* site_free: let go of a site's files (closed later, once unused) and its format. Any thread. */
static void logger_site_free(void *data)
{
    struct logger_site *ls = data;

    if (!ls) {
        return;
    }
    if (ls->access) {
        logger_file_release(ls->access);
    }
    if (ls->error) {
        logger_file_release(ls->error);
    }
    logger_format_free(ls->format);
    free(ls);
}

/* Open (or, when checking, only check) one log of a site; the message names file:line. */
static int logger_site_file(const struct logger_settings *s, const char *path, const char *where,
                            const char *key, struct logger_file **out, char *err, size_t errlen)
{
    char why[512];

    if (logger_api->checking()) {
        if (logger_path_check(path, why, sizeof(why)) == MK_OK) {
            return MK_OK;
        }
    }
    else {
        *out = logger_file_open(path, s->pipe_size, why, sizeof(why));
        if (*out) {
            return MK_OK;
        }
    }
    snprintf(err, errlen, "%s: %s: %s", where, key, why);
    return MK_ERR;
}

/* The [LOGGER] entries of one site file. */
struct logger_site_conf {
    char *access, *error; /* resolved; "" for Off; NULL: not given */
    int access_line, error_line;
    const char *format; /* the Format value as written */
    int format_line;
};

/* Collect the [LOGGER] entries of a site file into sc; MK_ERR with "file:line: reason". */
static int logger_site_read(const struct mk_conf *conf, struct logger_site_conf *sc, char *err,
                            size_t errlen)
{
    const char *section, *key, *value, *file = logger_api->conf_path(conf);
    void *cursor = NULL;
    char why[512];
    int line, rc = MK_OK;

    while (rc == MK_OK && logger_api->conf_next(conf, &cursor, &section, &key, &value, &line)) {
        if (strcasecmp(section, "LOGGER") != 0) {
            continue; /* [HOST] and other plugins' sections */
        }
        if (strcasecmp(key, "AccessLog") == 0) {
            rc = logger_set_path(&sc->access, &sc->access_line, key, value, line, why, sizeof(why));
        }
        else if (strcasecmp(key, "ErrorLog") == 0) {
            rc = logger_set_path(&sc->error, &sc->error_line, key, value, line, why, sizeof(why));
        }
        else if (strcasecmp(key, "Format") == 0) {
            if (sc->format) {
                snprintf(why, sizeof(why), "Format is given twice");
                rc = MK_ERR;
            }
            sc->format = value;
            sc->format_line = line;
        }
        else {
            snprintf(why, sizeof(why), "[LOGGER] has no key '%s' (AccessLog, ErrorLog, Format)",
                     key);
            rc = MK_ERR;
        }
        if (rc != MK_OK) {
            snprintf(err, errlen, "%s:%d: %s", file, line, why);
        }
    }
    return rc;
}

/*
 * site_init: the site's logs, from its [LOGGER] section and the defaults of
 * logger.conf, opened (or only checked with monkey -t). *data stays NULL for
 * a site that logs nothing. Controlling thread.
 */
static int logger_site_init(const struct mk_site *site, const struct mk_conf *conf, void **data,
                            char *err, size_t errlen)
{
    /* logger.conf of the configuration being built. */
    const struct logger_settings *s = logger_api->plugin_conf(site, MK_PLUGIN_SELF(logger));
    const char *file = logger_api->conf_path(conf);
    struct logger_site_conf sc = {0};
    struct logger_site *ls = NULL;
    char why[512], access_at[PATH_MAX + 32], error_at[PATH_MAX + 32];
    int rc = MK_ERR;

    *data = NULL;
    if (logger_site_read(conf, &sc, err, errlen) != MK_OK) {
        goto done;
    }
    /* What the site says, else the plugin-wide default; "" is Off. */
    const char *access = sc.access ? sc.access : s->access;
    const char *error = sc.error ? sc.error : s->error;
    snprintf(access_at, sizeof(access_at), "%s:%d", file, sc.access_line);
    snprintf(error_at, sizeof(error_at), "%s:%d", file, sc.error_line);
    const char *access_where = sc.access ? access_at : s->access_where;
    const char *error_where = sc.error ? error_at : s->error_where;
    access = access && access[0] ? access : NULL;
    error = error && error[0] ? error : NULL;

    const char *spec = s->format;
    if (sc.format) {
        spec = logger_format_named(s, sc.format, why, sizeof(why));
        if (spec && !access) {
            snprintf(why, sizeof(why), "Format without an access log (AccessLog)");
            spec = NULL;
        }
        if (!spec) {
            snprintf(err, errlen, "%s:%d: %s", file, sc.format_line, why);
            goto done;
        }
    }
    if (!access && !error) {
        rc = MK_OK; /* nothing to log for this site */
        goto done;
    }
    ls = calloc(1, sizeof(*ls));
    if (!ls) {
        snprintf(err, errlen, "%s: out of memory", file);
        goto done;
    }
    if (access && logger_format_compile(spec, &ls->format, why, sizeof(why)) != MK_OK) {
        if (sc.format) {
            snprintf(err, errlen, "%s:%d: Format: %s", file, sc.format_line, why);
        }
        else {
            snprintf(err, errlen, "%s: Format: %s", s->format_where, why);
        }
        goto done;
    }
    if (access &&
        logger_site_file(s, access, access_where, "AccessLog", &ls->access, err, errlen) != MK_OK) {
        goto done;
    }
    if (error &&
        logger_site_file(s, error, error_where, "ErrorLog", &ls->error, err, errlen) != MK_OK) {
        goto done;
    }
    *data = ls;
    ls = NULL;
    rc = MK_OK;

done:
    logger_site_free(ls);
    free(sc.access);
    free(sc.error);
    return rc;
}

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
    atomic_bool stuck; /* lines wait for room in a pipe */
    int id;
    struct logger_buf *bufs[LOGGER_MAX_FILES]; /* by file id */
    unsigned dirty[LOGGER_MAX_FILES];          /* ids of buffers with data */
    unsigned n_dirty;
    unsigned retire_seen;
    struct logger_clock clock;
};

static __thread struct logger_worker *logger_self;

/* The running workers, for the logger thread's help. */
#define LOGGER_MAX_WORKERS 1025
static pthread_mutex_t logger_workers_lock = PTHREAD_MUTEX_INITIALIZER;
static struct logger_worker *logger_workers[LOGGER_MAX_WORKERS];
atomic_bool logger_any_stuck;

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
    size_t limit = atomic_load_explicit(&logger_buf_limit, memory_order_relaxed);
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
    unsigned gen = logger_retire_generation();
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
        atomic_store(&logger_any_stuck, true);
    }
    else if (atomic_load_explicit(&w->stuck, memory_order_relaxed)) {
        atomic_store(&w->stuck, false);
    }
}

void logger_help_workers(void)
{
    pthread_mutex_lock(&logger_workers_lock);
    for (unsigned i = 0; i < LOGGER_MAX_WORKERS; i++) {
        struct logger_worker *w = logger_workers[i];
        /* A busy worker flushes by itself at the end of its batch. */
        if (!w || !atomic_load(&w->stuck) || pthread_mutex_trylock(&w->lock) != 0) {
            continue;
        }
        logger_worker_flush(w);
        pthread_mutex_unlock(&w->lock);
    }
    pthread_mutex_unlock(&logger_workers_lock);
}

/* worker_init: the worker's buffers, reachable by the logger thread. On the worker. */
static int logger_worker_init(int worker_id)
{
    struct logger_worker *w = calloc(1, sizeof(*w));

    if (!w) {
        logger_api->log(MK_PLUGIN_LOG_ERROR, "logger: worker %d: out of memory, not logging",
                        worker_id);
        return MK_ERR;
    }
    pthread_mutex_init(&w->lock, NULL);
    w->id = worker_id;
    w->retire_seen = logger_retire_generation();
    if (worker_id >= 0 && worker_id < LOGGER_MAX_WORKERS) {
        pthread_mutex_lock(&logger_workers_lock);
        logger_workers[worker_id] = w;
        pthread_mutex_unlock(&logger_workers_lock);
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
    if (logger_retire_generation() != w->retire_seen) {
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
    pthread_mutex_lock(&logger_workers_lock);
    if (w->id >= 0 && w->id < LOGGER_MAX_WORKERS && logger_workers[w->id] == w) {
        logger_workers[w->id] = NULL;
    }
    pthread_mutex_unlock(&logger_workers_lock);
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
            logger_emit(w, ls->error, logger_error_format, &line, unsent ? logger_unsent : NULL);
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

/* ---- life cycle ------------------------------------------------------------ */

/*
 * init: read logger.conf and start the logger thread (not when checking).
 * MK_ERR after logging why. Controlling thread.
 */
static int logger_init(const struct mk_api *api, const char *conf_dir)
{
    char err[PATH_MAX + 512];

    logger_api = api;
    if (conf_dir && !(logger_conf_dir = strdup(conf_dir))) {
        api->log(MK_PLUGIN_LOG_ERROR, "logger: out of memory");
        return MK_ERR;
    }
    /* logger.conf of the configuration being started, read and checked by the server. */
    const struct logger_settings *s = api->plugin_conf(NULL, MK_PLUGIN_SELF(logger));
    if (logger_format_compile(logger_error_spec, &logger_error_format, err, sizeof(err)) != MK_OK) {
        api->log(MK_PLUGIN_LOG_ERROR, "logger: %s", err);
        goto fail;
    }
    atomic_store(&logger_buf_limit, s->buffer_limit);
    if (api->checking()) {
        return MK_OK; /* validate only: no thread, no file */
    }
    if (logger_writer_start() != MK_OK) {
        goto fail;
    }
    return MK_OK;

fail:
    logger_format_free(logger_error_format);
    logger_error_format = NULL;
    free(logger_conf_dir);
    logger_conf_dir = NULL;
    return MK_ERR;
}

/* exit: after the workers stopped, write everything left and close the files. */
static void logger_exit(void)
{
    logger_writer_stop();
    logger_format_free(logger_error_format);
    logger_error_format = NULL;
    free(logger_conf_dir);
    logger_conf_dir = NULL;
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
    struct mk_config *cfg;

    if (!commit || !(cfg = logger_api->config_get())) {
        return;
    }
    const struct logger_settings *s =
        logger_api->config_sites(cfg)
            ? logger_api->plugin_conf(logger_api->config_site(cfg, 0), MK_PLUGIN_SELF(logger))
            : NULL;
    if (s) {
        atomic_store(&logger_buf_limit, s->buffer_limit);
    }
    logger_api->config_put(cfg);
}

/* reopen_logs (SIGUSR1): returns once every file was reopened. Controlling thread. */
static void logger_reopen_logs(void)
{
    logger_writer_reopen();
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
};
