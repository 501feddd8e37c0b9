/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * procfs.c: samples a process tree from /proc.
 *
 * The tree is the watched process and all its descendants, found anew at
 * every sample: through /proc/<pid>/task/<tid>/children where the kernel
 * provides them (CONFIG_PROC_CHILDREN), otherwise by reading the parent of
 * every process in /proc. Any process may exit between being listed and
 * being read, and that is normal: a file that cannot be opened or parsed
 * means the process is gone (or not ours to read) and it is skipped.
 *
 * Guarantees: the cumulative counters of a sample never go backwards. A
 * member that leaves the tree keeps contributing what it had when last
 * seen, and a reused PID is told apart by its start time. Allocation
 * failure aborts: the watcher has nothing useful to do without memory.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "watch.h"

/* Big enough for /proc/<pid>/status with many supplementary groups. */
#define MK_WATCH_PROCBUF 16384

static void *mk_watch_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (q == NULL) {
        fprintf(stderr, "mk-watch: out of memory\n");
        abort();
    }
    return q;
}

/*
 * Read a whole (small) file into buf, NUL-terminated. Returns its length,
 * or -1 if it cannot be opened or read.
 */
static ssize_t mk_watch_read_file(const char *path, char *buf, size_t size)
{
    size_t len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        return -1;
    }
    while (len < size - 1) {
        ssize_t n = read(fd, buf + len, size - 1 - len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            close(fd);
            return -1;
        }
        if (n == 0) {
            break;
        }
        len += (size_t) n;
    }
    close(fd);
    buf[len] = '\0';
    return (ssize_t) len;
}

/* Parse an unsigned decimal at *p, skipping leading blanks; advance *p past it. */
static bool mk_watch_next_u64(const char **p, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;

    while (*s == ' ' || *s == '\t') {
        s++;
    }
    if (!isdigit((unsigned char) *s)) {
        return false;
    }
    while (isdigit((unsigned char) *s)) {
        v = v * 10 + (uint64_t) (*s - '0');
        s++;
    }
    *p = s;
    *out = v;
    return true;
}

/* Skip one blank-separated field; false at the end of the text. */
static bool mk_watch_skip_field(const char **p)
{
    const char *s = *p;

    while (*s == ' ') {
        s++;
    }
    if (*s == '\0' || *s == '\n') {
        return false;
    }
    while (*s != ' ' && *s != '\0' && *s != '\n') {
        s++;
    }
    *p = s;
    return true;
}

bool mk_watch_stat_parse(const char *text, struct mk_watch_stat *st)
{
    /* The command name may hold spaces and parentheses: fields start after the last ')'. */
    const char *p = strrchr(text, ')');
    uint64_t v;

    if (p == NULL || p[1] != ' ' || p[2] == '\0') {
        return false;
    }
    p += 2;
    st->state = *p++;
    /* field 4: ppid */
    if (!mk_watch_next_u64(&p, &v)) {
        return false;
    }
    st->ppid = (pid_t) v;
    if (!mk_watch_next_u64(&p, &v)) {
        return false;
    }
    st->pgrp = (pid_t) v;
    /* fields 6 to 13: session .. cmajflt */
    for (int i = 6; i <= 13; i++) {
        if (!mk_watch_skip_field(&p)) {
            return false;
        }
    }
    if (!mk_watch_next_u64(&p, &st->utime) || !mk_watch_next_u64(&p, &st->stime)) {
        return false;
    }
    /* fields 16 to 19: cutime, cstime, priority, nice (the last two may be negative) */
    for (int i = 16; i <= 19; i++) {
        if (!mk_watch_skip_field(&p)) {
            return false;
        }
    }
    if (!mk_watch_next_u64(&p, &v)) {
        return false;
    }
    st->threads = (unsigned) v;
    /* field 21: itrealvalue; field 22: starttime */
    if (!mk_watch_skip_field(&p) || !mk_watch_next_u64(&p, &v)) {
        return false;
    }
    st->start = v;
    return true;
}

bool mk_watch_field_u64(const char *text, const char *key, uint64_t *out)
{
    size_t klen = strlen(key);
    const char *p = text;

    while (p != NULL && *p != '\0') {
        if (strncmp(p, key, klen) == 0 && p[klen] == ':') {
            const char *v = p + klen + 1;
            return mk_watch_next_u64(&v, out);
        }
        p = strchr(p, '\n');
        if (p != NULL) {
            p++;
        }
    }
    return false;
}

bool mk_watch_stat_read(pid_t pid, struct mk_watch_stat *st)
{
    char path[64], buf[1024];

    snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
    if (mk_watch_read_file(path, buf, sizeof(buf)) <= 0) {
        return false;
    }
    return mk_watch_stat_parse(buf, st);
}

/* A /proc entry name that is a PID; 0 otherwise. */
static pid_t mk_watch_name_pid(const char *name)
{
    long v = 0;

    if (*name == '\0') {
        return 0;
    }
    for (const char *p = name; *p != '\0'; p++) {
        if (!isdigit((unsigned char) *p) || v > INT_MAX / 10) {
            return 0;
        }
        v = v * 10 + (*p - '0');
    }
    return (pid_t) v;
}

static void mk_watch_pids_push(struct mk_watch_pids *pids, pid_t pid)
{
    if (pids->n == pids->cap) {
        pids->cap = pids->cap ? pids->cap * 2 : 16;
        pids->v = mk_watch_xrealloc(pids->v, pids->cap * sizeof(pid_t));
    }
    pids->v[pids->n++] = pid;
}

static bool mk_watch_pids_has(const struct mk_watch_pids *pids, pid_t pid)
{
    for (size_t i = 0; i < pids->n; i++) {
        if (pids->v[i] == pid) {
            return true;
        }
    }
    return false;
}

void mk_watch_pids_free(struct mk_watch_pids *pids)
{
    free(pids->v);
    pids->v = NULL;
    pids->n = pids->cap = 0;
}

/* Remove the watcher's own PID, which the walk lists to stop at it. */
static void mk_watch_pids_drop_self(struct mk_watch_pids *pids)
{
    pid_t self = getpid();

    for (size_t i = 0; i < pids->n; i++) {
        if (pids->v[i] == self) {
            memmove(&pids->v[i], &pids->v[i + 1], (pids->n - i - 1) * sizeof(pid_t));
            pids->n--;
            return;
        }
    }
}

/* Whether this kernel lists children in /proc/<pid>/task/<tid>/children. */
static bool mk_watch_have_children_files(void)
{
    static int known = -1;

    if (known < 0) {
        known = access("/proc/thread-self/children", R_OK) == 0;
    }
    return known;
}

/* Append the children of every thread of pid that are not yet listed. */
static void mk_watch_children_of(pid_t pid, struct mk_watch_pids *out)
{
    char path[96];
    struct dirent *de;
    DIR *tasks;

    snprintf(path, sizeof(path), "/proc/%d/task", (int) pid);
    tasks = opendir(path);
    if (tasks == NULL) {
        return;
    }
    while ((de = readdir(tasks)) != NULL) {
        pid_t tid = mk_watch_name_pid(de->d_name);
        FILE *f;
        int child;

        if (tid == 0) {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int) pid, (int) tid);
        f = fopen(path, "re");
        if (f == NULL) {
            continue;
        }
        while (fscanf(f, "%d", &child) == 1) {
            if (child > 0 && !mk_watch_pids_has(out, child)) {
                mk_watch_pids_push(out, child);
            }
        }
        fclose(f);
    }
    closedir(tasks);
}

/* Without children files: read every process's parent, then walk down from root. */
static void mk_watch_tree_scan(struct mk_watch_pids *out)
{
    struct mk_watch_pids all = {0}, parents = {0};
    struct mk_watch_stat st;
    struct dirent *de;
    DIR *proc = opendir("/proc");

    if (proc == NULL) {
        return;
    }
    while ((de = readdir(proc)) != NULL) {
        pid_t pid = mk_watch_name_pid(de->d_name);
        if (pid == 0 || !mk_watch_stat_read(pid, &st)) {
            continue;
        }
        mk_watch_pids_push(&all, pid);
        mk_watch_pids_push(&parents, st.ppid);
    }
    closedir(proc);
    /* out holds the root; each pass over it appends the children of one member. */
    for (size_t i = 0; i < out->n; i++) {
        if (out->v[i] == getpid()) {
            continue;
        }
        for (size_t j = 0; j < all.n; j++) {
            if (parents.v[j] == out->v[i] && !mk_watch_pids_has(out, all.v[j])) {
                mk_watch_pids_push(out, all.v[j]);
            }
        }
    }
    mk_watch_pids_free(&all);
    mk_watch_pids_free(&parents);
}

bool mk_watch_group_alive(pid_t pgid)
{
    struct mk_watch_stat st;
    struct dirent *de;
    bool alive = false;
    DIR *proc = opendir("/proc");

    if (proc == NULL) {
        return false;
    }
    while (!alive && (de = readdir(proc)) != NULL) {
        pid_t pid = mk_watch_name_pid(de->d_name);
        alive = pid != 0 && mk_watch_stat_read(pid, &st) && st.pgrp == pgid && st.state != 'Z' &&
                st.state != 'X';
    }
    closedir(proc);
    return alive;
}

void mk_watch_tree_list(pid_t root, struct mk_watch_pids *out)
{
    out->n = 0;
    mk_watch_pids_push(out, root);
    /* The watcher is never part of the tree, nor (through it) the load it runs. */
    mk_watch_pids_push(out, getpid());
    if (!mk_watch_have_children_files()) {
        mk_watch_tree_scan(out);
        mk_watch_pids_drop_self(out);
        return;
    }
    for (size_t i = 0; i < out->n; i++) {
        if (out->v[i] != getpid()) {
            mk_watch_children_of(out->v[i], out);
        }
    }
    mk_watch_pids_drop_self(out);
}

void mk_watch_tree_init(struct mk_watch_tree *tree, pid_t root)
{
    memset(tree, 0, sizeof(*tree));
    tree->root = root;
    tree->ticks_per_s = sysconf(_SC_CLK_TCK);
    if (tree->ticks_per_s <= 0) {
        tree->ticks_per_s = 100;
    }
}

/* Free an array of members and the threads each owns. */
static void mk_watch_members_free(struct mk_watch_member *members, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(members[i].threads);
    }
    free(members);
}

void mk_watch_tree_free(struct mk_watch_tree *tree)
{
    mk_watch_members_free(tree->members, tree->n_members);
    tree->members = NULL;
    tree->n_members = 0;
}

/* RSS and PSS of one process, in kB. False if both are unreadable. */
static bool mk_watch_memory(struct mk_watch_tree *tree, pid_t pid, uint64_t *rss, uint64_t *pss)
{
    char path[64], buf[4096];
    uint64_t pages_total, pages_rss;
    const char *p = buf;

    snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int) pid);
    if (mk_watch_read_file(path, buf, sizeof(buf)) > 0 && mk_watch_field_u64(buf, "Rss", rss) &&
        mk_watch_field_u64(buf, "Pss", pss)) {
        return true;
    }
    /* Older kernels, or no permission to read the maps: statm has RSS, PSS is estimated by it. */
    snprintf(path, sizeof(path), "/proc/%d/statm", (int) pid);
    if (mk_watch_read_file(path, buf, sizeof(buf)) <= 0 || !mk_watch_next_u64(&p, &pages_total) ||
        !mk_watch_next_u64(&p, &pages_rss)) {
        return false;
    }
    *rss = pages_rss * (uint64_t) sysconf(_SC_PAGESIZE) / 1024;
    *pss = *rss;
    tree->pss_estimated = true;
    return true;
}

/* Open descriptors of one process; 0 (and fds_partial) if the directory is unreadable. */
static unsigned mk_watch_fds(struct mk_watch_tree *tree, pid_t pid)
{
    char path[64];
    struct dirent *de;
    unsigned n = 0;
    DIR *d;

    snprintf(path, sizeof(path), "/proc/%d/fd", (int) pid);
    d = opendir(path);
    if (d == NULL) {
        if (errno != ENOENT) {
            tree->fds_partial = true;
        }
        return 0;
    }
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] != '.') {
            n++;
        }
    }
    closedir(d);
    return n;
}

/* The thread of prev with this TID, or NULL. */
static const struct mk_watch_thread *mk_watch_thread_find(const struct mk_watch_member *prev,
                                                          pid_t tid)
{
    for (size_t i = 0; prev != NULL && i < prev->n_threads; i++) {
        if (prev->threads[i].tid == tid) {
            return &prev->threads[i];
        }
    }
    return NULL;
}

/* Read the context switches of every live thread of m->pid into m->threads. */
static bool mk_watch_threads_read(struct mk_watch_member *m)
{
    char path[96];
    struct dirent *de;
    size_t cap = 0;
    DIR *tasks;
    char *buf;

    snprintf(path, sizeof(path), "/proc/%d/task", (int) m->pid);
    tasks = opendir(path);
    if (tasks == NULL) {
        return false;
    }
    buf = mk_watch_xrealloc(NULL, MK_WATCH_PROCBUF);
    while ((de = readdir(tasks)) != NULL) {
        struct mk_watch_thread th = {.tid = mk_watch_name_pid(de->d_name)};

        if (th.tid == 0) {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int) m->pid, (int) th.tid);
        if (mk_watch_read_file(path, buf, MK_WATCH_PROCBUF) <= 0 ||
            !mk_watch_field_u64(buf, "voluntary_ctxt_switches", &th.voluntary) ||
            !mk_watch_field_u64(buf, "nonvoluntary_ctxt_switches", &th.involuntary)) {
            continue;
        }
        if (m->n_threads == cap) {
            cap = cap ? cap * 2 : 8;
            m->threads = mk_watch_xrealloc(m->threads, cap * sizeof(*m->threads));
        }
        m->threads[m->n_threads++] = th;
    }
    free(buf);
    closedir(tasks);
    return true;
}

/*
 * Context switches of m, carried over from prev (the same process at the
 * previous sample, or NULL): threads of prev that are gone add what they
 * had last to the gone counts. A TID whose counts went down was reused by
 * a new thread, and the old one is gone. If the threads cannot be read
 * (the process just exited), m takes over prev's threads.
 */
static void mk_watch_ctx(struct mk_watch_member *m, struct mk_watch_member *prev)
{
    m->gone_voluntary = prev ? prev->gone_voluntary : 0;
    m->gone_involuntary = prev ? prev->gone_involuntary : 0;
    if (!mk_watch_threads_read(m)) {
        if (prev != NULL) {
            m->threads = prev->threads;
            m->n_threads = prev->n_threads;
            prev->threads = NULL;
            prev->n_threads = 0;
        }
    }
    else {
        for (size_t i = 0; prev != NULL && i < prev->n_threads; i++) {
            const struct mk_watch_thread *was = &prev->threads[i];
            const struct mk_watch_thread *now = mk_watch_thread_find(m, was->tid);
            if (now == NULL || now->voluntary < was->voluntary ||
                now->involuntary < was->involuntary) {
                m->gone_voluntary += was->voluntary;
                m->gone_involuntary += was->involuntary;
            }
        }
    }
    m->ctx_voluntary = m->gone_voluntary;
    m->ctx_involuntary = m->gone_involuntary;
    for (size_t i = 0; i < m->n_threads; i++) {
        m->ctx_voluntary += m->threads[i].voluntary;
        m->ctx_involuntary += m->threads[i].involuntary;
    }
}

/* The member of the previous sample that is this very process, or NULL. */
static struct mk_watch_member *mk_watch_member_find(struct mk_watch_tree *tree, pid_t pid,
                                                    unsigned long long start)
{
    for (size_t i = 0; i < tree->n_members; i++) {
        if (tree->members[i].pid == pid && tree->members[i].start == start) {
            return &tree->members[i];
        }
    }
    return NULL;
}

/* A zombie: its context switches are what it had when last seen alive. */
static void mk_watch_member_final(struct mk_watch_member *m, const struct mk_watch_member *prev)
{
    m->ctx_voluntary = prev ? prev->ctx_voluntary : 0;
    m->ctx_involuntary = prev ? prev->ctx_involuntary : 0;
    m->gone_voluntary = m->ctx_voluntary;
    m->gone_involuntary = m->ctx_involuntary;
}

/* Fold the members of the previous sample that are not in next into the "gone" totals. */
static void mk_watch_retire(struct mk_watch_tree *tree, const struct mk_watch_member *next,
                            size_t n_next)
{
    for (size_t i = 0; i < tree->n_members; i++) {
        const struct mk_watch_member *m = &tree->members[i];
        bool kept = false;

        for (size_t j = 0; j < n_next && !kept; j++) {
            kept = next[j].pid == m->pid && next[j].start == m->start;
        }
        if (kept) {
            continue;
        }
        tree->gone_utime += m->utime;
        tree->gone_stime += m->stime;
        tree->gone_ctx_voluntary += m->ctx_voluntary;
        tree->gone_ctx_involuntary += m->ctx_involuntary;
    }
}

unsigned mk_watch_tree_sample(struct mk_watch_tree *tree, struct mk_watch_sample *s)
{
    struct mk_watch_pids pids = {0};
    struct mk_watch_member *next;
    uint64_t utime = 0, stime = 0;
    size_t n_next = 0;

    mk_watch_tree_list(tree->root, &pids);
    next = mk_watch_xrealloc(NULL, pids.n * sizeof(*next));
    s->processes = s->threads = s->fds = 0;
    s->rss_kb = s->pss_kb = 0;
    s->ctx_voluntary = s->ctx_involuntary = 0;

    for (size_t i = 0; i < pids.n; i++) {
        struct mk_watch_member *m = &next[n_next], *prev;
        struct mk_watch_stat st;
        uint64_t rss, pss;

        if (!mk_watch_stat_read(pids.v[i], &st)) {
            continue;
        }
        prev = mk_watch_member_find(tree, pids.v[i], st.start);
        if (prev == NULL) {
            tree->processes_seen++;
        }
        m->pid = pids.v[i];
        m->start = st.start;
        m->utime = st.utime;
        m->stime = st.stime;
        m->threads = NULL;
        m->n_threads = 0;
        n_next++;
        if (st.state == 'Z' || st.state == 'X') {
            /* Exited, not yet reaped: its times are final, its threads gone. */
            mk_watch_member_final(m, prev);
            continue;
        }
        s->processes++;
        s->threads += st.threads;
        s->fds += mk_watch_fds(tree, m->pid);
        if (mk_watch_memory(tree, m->pid, &rss, &pss)) {
            s->rss_kb += rss;
            s->pss_kb += pss;
        }
        mk_watch_ctx(m, prev);
    }

    mk_watch_retire(tree, next, n_next);
    mk_watch_members_free(tree->members, tree->n_members);
    tree->members = next;
    tree->n_members = n_next;
    mk_watch_pids_free(&pids);

    utime = tree->gone_utime;
    stime = tree->gone_stime;
    s->ctx_voluntary = tree->gone_ctx_voluntary;
    s->ctx_involuntary = tree->gone_ctx_involuntary;
    for (size_t i = 0; i < tree->n_members; i++) {
        utime += tree->members[i].utime;
        stime += tree->members[i].stime;
        s->ctx_voluntary += tree->members[i].ctx_voluntary;
        s->ctx_involuntary += tree->members[i].ctx_involuntary;
    }
    s->cpu_user_s = (double) utime / (double) tree->ticks_per_s;
    s->cpu_system_s = (double) stime / (double) tree->ticks_per_s;
    return s->processes;
}
