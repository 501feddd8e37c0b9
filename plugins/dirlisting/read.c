/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * read.c: reading a directory and sorting its entries, on a task thread.
 * Only what the static handler would serve is kept (directories, regular
 * files, and links the site follows), at most MaxEntries of them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dirlisting.h"

/*
 * Describe entry `name` of directory `dfd` in *e (name not set). False when
 * it is not listed: vanished, a link the site does not follow or a dangling
 * one, or neither a directory nor a regular file.
 */
static bool dirlisting_stat(int dfd, const char *name, bool symlinks, struct dirlisting_entry *e)
{
    struct stat st;

    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        return false;
    }
    if (S_ISLNK(st.st_mode) && (!symlinks || fstatat(dfd, name, &st, 0) < 0)) {
        return false;
    }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
        return false;
    }
    e->dir = S_ISDIR(st.st_mode);
    e->size = e->dir ? 0 : (uint64_t) st.st_size;
    e->mtime = st.st_mtime;
    return true;
}

/* Append an entry and its name to the list; false when memory is short. */
static bool dirlisting_list_add(struct dirlisting_list *l, const struct dirlisting_entry *e,
                                const char *name)
{
    size_t n = strlen(name) + 1;

    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        struct dirlisting_entry *v = realloc(l->v, cap * sizeof(*v));
        if (!v) {
            return false;
        }
        l->v = v;
        l->cap = cap;
    }
    if (l->names_cap - l->names_len < n) {
        size_t cap = l->names_cap ? l->names_cap * 2 : 8192;
        while (cap - l->names_len < n) {
            cap *= 2;
        }
        char *p = realloc(l->names, cap);
        if (!p) {
            return false;
        }
        l->names = p;
        l->names_cap = cap;
    }
    memcpy(l->names + l->names_len, name, n);
    l->v[l->n] = *e;
    l->v[l->n].name_off = l->names_len;
    l->names_len += n;
    l->n_dirs += e->dir;
    l->n++;
    return true;
}

/* Is the hidden name `name` (it starts with '.') listed? Never "." or "..". */
static bool dirlisting_show_hidden(const struct dirlisting_job *job, const char *name)
{
    if (!job->show_hidden || name[1] == '\0' || (name[1] == '.' && name[2] == '\0')) {
        return false;
    }
    /* The server answers 404 for every other hidden name of such a site. */
    return !job->hide_dotfiles || (job->root && strcmp(name, ".well-known") == 0);
}

/*
 * Read the job's directory (the descriptor is consumed) into `l`. Returns
 * 200, or 500 (unreadable) or 503 (memory short).
 */
int dirlisting_read_dir(struct dirlisting_job *job, struct dirlisting_list *l)
{
    DIR *d = fdopendir(job->dirfd);
    struct dirent *de;

    if (!d) {
        close(job->dirfd);
        job->dirfd = -1;
        return 500;
    }
    job->dirfd = -1;
    int dfd = dirfd(d);
    for (errno = 0; (de = readdir(d)) != NULL; errno = 0) {
        const char *name = de->d_name;
        struct dirlisting_entry e;
        if (name[0] == '.' && !dirlisting_show_hidden(job, name)) {
            continue;
        }
        if (strchr(name, '\\') || !dirlisting_stat(dfd, name, job->symlinks, &e)) {
            continue;
        }
        if (l->n >= job->settings.max_entries) {
            l->truncated = true;
            break;
        }
        if (!dirlisting_list_add(l, &e, name)) {
            closedir(d);
            return 503;
        }
    }
    int saved = errno;
    closedir(d);
    if (saved && !l->truncated) {
        return 500;
    }
    for (size_t i = 0; i < l->n; i++) {
        l->v[i].name = l->names + l->v[i].name_off;
    }
    return 200;
}

/* qsort order for Sort bytes: directories first, then strcmp (unsigned bytes). */
int dirlisting_cmp_bytes(const void *pa, const void *pb)
{
    const struct dirlisting_entry *a = pa, *b = pb;

    if (a->dir != b->dir) {
        return a->dir ? -1 : 1;
    }
    return strcmp(a->name, b->name);
}

/* qsort order for Sort nocase: directories first, then A-Z folded to a-z, then bytes. */
int dirlisting_cmp_nocase(const void *pa, const void *pb)
{
    const struct dirlisting_entry *a = pa, *b = pb;

    if (a->dir != b->dir) {
        return a->dir ? -1 : 1;
    }
    for (const unsigned char *x = (const unsigned char *) a->name,
                             *y = (const unsigned char *) b->name;
         ; x++, y++) {
        int cx = (*x >= 'A' && *x <= 'Z') ? *x + 32 : *x;
        int cy = (*y >= 'A' && *y <= 'Z') ? *y + 32 : *y;
        if (cx != cy) {
            return cx - cy;
        }
        if (!*x) {
            break;
        }
    }
    return strcmp(a->name, b->name);
}
