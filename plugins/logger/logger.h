/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * logger.h: what the parts of the logger plugin share.
 *
 *   logger.c   the life cycle, the request hook and each worker's buffers
 *   config.c   logger.conf: the plugin-wide declared keys
 *   site.c     a site's [LOGGER] section: its files and format
 *   format.c   log formats: compiling a format string, rendering one line
 *              (escaping included)
 *   writer.c   log files, their pipes and the logger thread that empties them
 *
 * The path of a line: a worker renders it into its own buffer for that file
 * (logger.c), writes whole lines from the buffer into the file's pipe after
 * each batch of events without ever blocking, and the logger thread moves
 * what the pipes hold into the files with splice(2) (writer.c). Every write
 * into a pipe is at most LOGGER_LINE_MAX (PIPE_BUF) bytes of whole lines, so
 * it is atomic: lines of different workers never interleave.
 */
#ifndef MONKEY_PLUGIN_LOGGER_H
#define MONKEY_PLUGIN_LOGGER_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <monkey/mk_plugin.h>
#include <monkey/mk_util.h>

/* The longest line, newline included: one atomic pipe write. */
#define LOGGER_LINE_MAX PIPE_BUF
/* The bytes moved at once through user space when splice(2) refuses a file. */
#define LOGGER_SCRATCH 65536
/* The most log files open at once (all sites, all configurations in use). */
#define LOGGER_MAX_FILES 1024

/* The most workers of one server whose buffers the logger thread can help flush. */
#define LOGGER_MAX_WORKERS 1025

/* The server's functions, set by init(). */
extern const struct mk_api *logger_api;

struct logger_file;
struct logger_format;
struct logger_worker;

/*
 * The logger of one server (api->self): two servers of one process each
 * have their formats, workers, files and logger thread. Made by init();
 * exit() hands it to logger_writer_stop(), which frees it once the last
 * site using one of its files has let go (sites may outlive exit()).
 */
struct logger_state {
    /* logger.c: set by init() (buf_limit also by a reload) */
    struct logger_format *error_format;
    struct logger_format *message_format;
    atomic_size_t buf_limit;
    char *conf_dir;           /* relative paths are resolved against it (config.c) */
    struct mk_server *server; /* the logger thread's server (api->thread_serve) */
    /* logger.c: the running workers, for the logger thread's help */
    pthread_mutex_t workers_lock;
    struct logger_worker *workers[LOGGER_MAX_WORKERS];
    atomic_bool any_stuck; /* a worker found a pipe full: its lines wait */
    /* writer.c */
    pthread_mutex_t lock; /* the registry: files, site counts, running, reopen counts */
    pthread_cond_t cond;
    struct logger_file *files[LOGGER_MAX_FILES];
    unsigned n_files;
    atomic_uint retire_gen;
    pthread_t thread;
    bool running; /* between start and stop */
    bool stopped; /* exit() is done with it: freed with its last file */
    int epfd;
    int ctl; /* eventfd: something for the thread to do */
    atomic_bool stop;
    atomic_bool new_files;
    unsigned reopen_asked, reopen_done;
    /* the copy buffer of the thread (of exit() once it stopped), LOGGER_SCRATCH
       bytes, made when splice(2) first refuses a file: most servers never need it */
    char *scratch;
};

/* A new logger state, or NULL (memory). Controlling thread. */
struct logger_state *logger_state_new(void);

MK_PLUGIN_DECLARE(logger);

/* ---- config.c ------------------------------------------------------------ */

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

/* logger.conf, read by the server into every configuration it builds. */
extern const struct mk_conf_schema logger_schema;

/*
 * The format string a Format value names: "common", "combined", "json",
 * "custom FORMAT" or a LogFormat name of `s`. NULL with the reason in err.
 */
const char *logger_format_named(const struct logger_settings *s, const char *value, char *err,
                                size_t errlen);
/* A path key (AccessLog, ErrorLog) given at most once; "off" stores "". */
int logger_set_path(char **slot, int *slot_line, const char *key, const char *value, int line,
                    char *err, size_t errlen);

/* ---- site.c -------------------------------------------------------------- */

/* What site_init() stored for a site. */
struct logger_site {
    struct logger_file *access;
    struct logger_file *error;
    struct logger_format *format;
};

/* site_init: the site's logs from [LOGGER] and logger.conf; *data NULL: logs nothing. */
int logger_site_init(const struct mk_site *site, const struct mk_conf *conf, void **data, char *err,
                     size_t errlen);
/* site_free: let go of a site's files (closed later, once unused) and its format. Any thread. */
void logger_site_free(void *data);

/* ---- format.c ------------------------------------------------------------ */

struct logger_format;

/* A worker's cache of the formatted time of one second, for %t and %{iso8601}t. */
struct logger_clock {
    time_t sec;
    size_t len;
    char text[40];
    time_t iso_sec;
    size_t iso_len;
    char iso[32];
};

/* What a line is rendered from; filled lazily, shared by the lines of a request. */
struct logger_line {
    struct mk_request *r;
    const struct mk_site *site; /* the request's site (or the default site) */
    struct logger_clock *clock; /* the worker's */
    time_t sec;                 /* when the request head was complete, 0: not yet known */
    uint64_t elapsed_us;        /* valid when have_elapsed */
    bool have_elapsed;
};

/* The format strings of the names "common", "combined" and "json", NULL for others. */
const char *logger_format_builtin(const char *name);

/*
 * Compile `spec` (Apache-style specifiers, see README.md; "escape=json ",
 * "escape=none " or "escape=default " first chooses the escaping of the
 * client's bytes). MK_OK with *out
 * set (release it with logger_format_free), or MK_ERR with the reason in
 * err. Any thread.
 */
int logger_format_compile(const char *spec, struct logger_format **out, char *err, size_t errlen);
void logger_format_free(struct logger_format *f);

/*
 * Render one line of `f` for `line` into out[0..cap), newline included, and
 * return its length (at most cap; a longer line is cut and ends in "...\n").
 * `suffix` (may be NULL) is appended before the newline. cap must be at
 * least 16. The worker thread of the request.
 */
size_t logger_format_render(const struct logger_format *f, struct logger_line *line,
                            const char *suffix, char *out, size_t cap);

/* ---- logger.c (for the logger thread) ----------------------------------- */

/*
 * Flush the buffers of lg's workers whose pipes were full, for them (a
 * worker that is busy right now is skipped: it flushes at the end of its
 * batch). The logger thread.
 */
void logger_help_workers(struct logger_state *lg);

/* ---- writer.c ------------------------------------------------------------ */

/*
 * A log file. Workers only read `pipe_w` and `id`, write into the pipe, and
 * count users and drops with atomics; everything else belongs to writer.c.
 */
struct logger_file {
    char *path;
    unsigned id;        /* index in the registry, stable while the file exists */
    int fd;             /* the file; the logger thread's while it runs */
    int pipe_r, pipe_w; /* workers write pipe_w, the logger thread reads pipe_r */
    size_t pipe_cap;    /* the pipe's buffer: PipeSize, or what the kernel gave */
    dev_t dev;          /* the file opened, to spot two paths of one file */
    ino_t ino;
    unsigned site_refs;   /* sites using it; under the registry lock */
    atomic_uint users;    /* worker buffers (and left-overs at stop) holding it */
    atomic_bool retired;  /* no site uses it any more */
    atomic_ulong dropped; /* lines workers had to drop */
    unsigned long dropped_told;
    uint64_t lost; /* bytes the logger thread could not write */
    bool watched;  /* in the logger thread's epoll set */
    bool regular;  /* a regular file (else a FIFO or a device) */
    bool copy;     /* splice(2) refused: read(2) and write(2) */
    bool failing;  /* a write error was logged; cleared by the next success */
    struct logger_leftover *leftovers;
    struct logger_state *owner; /* the server's logger whose registry holds it */
};

/* Start the logger thread (init, not when checking). MK_OK or MK_ERR (logged). */
int logger_writer_start(struct logger_state *lg);
/*
 * At exit(), after the workers stopped: stop the thread, move what every
 * pipe and every left-over holds into the files, close them. Nothing written
 * by a worker is lost. lg is freed here, or by the release of its last file
 * (a site freed later): the caller no longer uses it. Controlling thread.
 */
void logger_writer_stop(struct logger_state *lg);
/*
 * SIGUSR1: every file is emptied into the file it had, then opened again at
 * its path (created if renamed away). Returns once the logger thread has
 * done it (or after 10 s). Controlling thread.
 */
void logger_writer_reopen(struct logger_state *lg);

/*
 * The log file at `path` (absolute), opened (created) for a site with a pipe
 * of pipe_size bytes, or the one already open at that path (or as that
 * file); its site count is raised. NULL with the reason in err. Controlling
 * thread, writer started.
 */
struct logger_file *logger_file_open(struct logger_state *lg, const char *path, size_t pipe_size,
                                     char *err, size_t errlen);
/* A site lets go of a file (site_free); any thread. */
void logger_file_release(struct logger_file *f);
/* Without creating anything: could `path` be opened for writing? (monkey -t) */
int logger_path_check(const char *path, char *err, size_t errlen);
/* Changes when a file is retired: workers then let go of the ones they hold. */
unsigned logger_retire_generation(struct logger_state *lg);
/*
 * A stopping worker hands over the bytes (whole lines) it could not write;
 * its hold on `f` passes to them. `data` was malloc'ed; it is freed here.
 */
void logger_file_leftover(struct logger_file *f, char *data, size_t len);

#endif
