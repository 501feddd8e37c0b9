/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * watch.h: the parts of mk-watch, the resource watcher (see README.md here).
 *
 *   procfs.c    samples a process tree from /proc
 *   report.c    recognises what a load tool reports; writes samples and the summary
 *   mk-watch.c  the command line: starts the server and the load, keeps the clock
 *
 * The tool needs only libc and Linux's /proc. Nothing here is shared with the
 * server: mk-watch must be able to measure any server, Monkey or not.
 */
#ifndef MK_WATCH_H
#define MK_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#ifndef MK_WATCH_VERSION
#define MK_WATCH_VERSION "0.1.0"
#endif

/*
 * One sample of the whole tree. Gauges (processes to pss_kb) describe the
 * moment; the CPU and context-switch counters are cumulative and never go
 * backwards, even when members of the tree exit.
 */
struct mk_watch_sample {
    double t;               /* seconds since the watch started */
    unsigned processes;     /* live processes in the tree, zombies excluded */
    unsigned threads;       /* sum of their threads */
    unsigned fds;           /* sum of their open file descriptors */
    uint64_t rss_kb;        /* sum of resident sets: shared pages count once per process */
    uint64_t pss_kb;        /* proportional set size: shared pages split among sharers */
    double cpu_user_s;      /* user time of every member ever seen */
    double cpu_system_s;    /* system time, likewise */
    uint64_t ctx_voluntary; /* context switches of every thread ever seen */
    uint64_t ctx_involuntary;
};

/* A thread's context switches at the latest sample. */
struct mk_watch_thread {
    pid_t tid;
    uint64_t voluntary;
    uint64_t involuntary;
};

/*
 * A process of the tree as it was at the latest sample. The kernel counts
 * context switches per thread and forgets them when a thread exits, so
 * they are kept per thread: a thread that is gone leaves what it had last
 * in gone_voluntary and gone_involuntary.
 */
struct mk_watch_member {
    pid_t pid;
    unsigned long long start; /* start time in clock ticks: tells a reused PID apart */
    uint64_t utime;           /* clock ticks */
    uint64_t stime;
    uint64_t ctx_voluntary; /* gone threads plus live ones */
    uint64_t ctx_involuntary;
    struct mk_watch_thread *threads; /* owned */
    size_t n_threads;
    uint64_t gone_voluntary;
    uint64_t gone_involuntary;
};

/*
 * The watched tree: the root PID and every descendant, found anew at each
 * sample. Owned by one thread; mk_watch_tree_free() releases it.
 */
struct mk_watch_tree {
    pid_t root;
    struct mk_watch_member *members; /* live at the latest sample */
    size_t n_members;
    uint64_t gone_utime; /* what members that left the tree had when last seen */
    uint64_t gone_stime;
    uint64_t gone_ctx_voluntary;
    uint64_t gone_ctx_involuntary;
    size_t processes_seen; /* distinct processes ever sampled */
    bool pss_estimated;    /* some smaps_rollup was unreadable: that RSS stood in for PSS */
    bool fds_partial;      /* some /proc/<pid>/fd was unreadable: not counted */
    long ticks_per_s;
};

/* Fields of /proc/<pid>/stat that mk-watch uses. */
struct mk_watch_stat {
    char state; /* R, S, D, Z, ... */
    pid_t ppid;
    pid_t pgrp;
    uint64_t utime; /* clock ticks */
    uint64_t stime;
    unsigned threads;
    unsigned long long start; /* clock ticks after boot */
};

/* A growable list of PIDs; allocation failure aborts. */
struct mk_watch_pids {
    pid_t *v;
    size_t n;
    size_t cap;
};

/* procfs.c ------------------------------------------------------------------ */

/*
 * Parse the text of /proc/<pid>/stat (NUL-terminated). Pure. Returns false
 * when the text is not a stat line; *st is then unspecified.
 */
bool mk_watch_stat_parse(const char *text, struct mk_watch_stat *st);

/*
 * Find "KEY:<spaces>NUMBER" at the start of a line of text, as in
 * /proc/<pid>/status and smaps_rollup. Pure. False if absent.
 */
bool mk_watch_field_u64(const char *text, const char *key, uint64_t *out);

/* Read /proc/<pid>/stat. False if the process is gone or unreadable. */
bool mk_watch_stat_read(pid_t pid, struct mk_watch_stat *st);

/*
 * List root and its descendants into *out (emptied first), root first, each
 * parent before its children. Root is listed even if it no longer exists.
 * The watcher itself and its descendants (the load command) are left out.
 */
void mk_watch_tree_list(pid_t root, struct mk_watch_pids *out);

void mk_watch_pids_free(struct mk_watch_pids *pids);

/* Whether any process of the group pgid still runs (zombies do not count). */
bool mk_watch_group_alive(pid_t pgid);

void mk_watch_tree_init(struct mk_watch_tree *tree, pid_t root);
void mk_watch_tree_free(struct mk_watch_tree *tree);

/*
 * Take one sample of the tree into *s (every field but t). Returns the
 * number of live processes found: 0 means the tree is gone.
 */
unsigned mk_watch_tree_sample(struct mk_watch_tree *tree, struct mk_watch_sample *s);

/* report.c ------------------------------------------------------------------ */

/* What the load tool said about itself, from its standard output. */
struct mk_watch_load {
    const char *tool; /* "wrk", "ab", "h2load"; NULL if not recognised */
    bool have_requests;
    uint64_t requests; /* completed requests */
    bool have_rps;
    double rps; /* requests per second, as the tool computed it */
};

/*
 * Recognise one line of a load tool's output (without its newline; need not
 * be NUL-terminated) and update *load when it carries a request count or a
 * rate. Pure. Later lines win over earlier ones.
 */
void mk_watch_load_scan(struct mk_watch_load *load, const char *line, size_t len);

/* Per-sample output: CSV and JSON streams, either may be NULL. */
struct mk_watch_out {
    FILE *csv;
    FILE *json;
    size_t json_rows;
};

/* Write the headers. */
void mk_watch_out_begin(struct mk_watch_out *out, unsigned interval_ms);
/* Write one sample to every open stream. */
void mk_watch_out_sample(struct mk_watch_out *out, const struct mk_watch_sample *s);
/* Close the JSON document. */
void mk_watch_out_end(struct mk_watch_out *out);

/* The run, summed up. Fill the context fields, then feed every sample. */
struct mk_watch_summary {
    pid_t pid;
    const char *server_command; /* --run, or NULL */
    char *const *load_argv;     /* NULL-terminated, or NULL without a load */
    unsigned interval_ms;
    int load_status;     /* exit status of the load, -1 without one */
    bool server_exited;  /* the started server ended before it was stopped */
    bool requests_given; /* requests came from --requests */
    uint64_t requests_override;
    struct mk_watch_load load;
    bool pss_estimated;
    bool fds_partial;
    size_t processes_seen;

    size_t samples;
    struct mk_watch_sample first;
    struct mk_watch_sample last;
    struct mk_watch_sample peak; /* each gauge at its own maximum */
    double rss_sum_kb;
    double pss_sum_kb;
};

/* Account one sample: peaks, sums, first and last. */
void mk_watch_summary_add(struct mk_watch_summary *sum, const struct mk_watch_sample *s);

/* The human-readable summary. */
void mk_watch_summary_print(FILE *f, const struct mk_watch_summary *sum);

/* The summary as one JSON object (keys listed in --help, OUTPUT). */
void mk_watch_summary_json(FILE *f, const struct mk_watch_summary *sum);

#endif
