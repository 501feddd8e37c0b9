/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * dirlisting.h: what the parts of the dirlisting plugin share.
 *
 *   dirlisting.c  the content hook (worker) and the task that builds a page
 *   config.c      dirlisting.conf and the sites' [DIRLISTING] sections:
 *                 declared keys, and each site's data
 *   read.c        reading a directory and sorting its entries (task thread)
 *   html.c        the page: HTML escaping, link encoding and rendering
 *                 (task thread)
 *
 * A job carries a copy of everything the task thread needs, so the task
 * thread never reads state that a reload rewrites.
 */
#ifndef MONKEY_PLUGIN_DIRLISTING_H
#define MONKEY_PLUGIN_DIRLISTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <monkey/mk_plugin.h>

#define DIRLISTING_URL_MAX 1024              /* longest Stylesheet URL */
#define DIRLISTING_PREFIX_MAX 1024           /* longest Path prefix */
#define DIRLISTING_MAX_ENTRIES_LIMIT 1000000 /* highest MaxEntries accepted */
#define DIRLISTING_MAX_ENTRIES_DEFAULT 100000

enum dirlisting_sort {
    DIRLISTING_SORT_BYTES = 0, /* strcmp order of the raw bytes */
    DIRLISTING_SORT_NOCASE,    /* ASCII letters folded, then byte order */
};

/* Plugin-wide settings, from conf_dir/plugins/dirlisting.conf. */
struct dirlisting_settings {
    enum dirlisting_sort sort;
    unsigned long max_entries;
    char stylesheet[DIRLISTING_URL_MAX]; /* "": the built-in style */
};

/* The keys of a site's [DIRLISTING] section, as the server filled them. */
struct dirlisting_site_conf {
    bool whole_site;  /* Enable */
    bool show_hidden; /* ShowHidden */
    size_t n_prefixes;
    char **prefixes; /* Path values, normalised */
};

/* What site_init() stores for a site that lists; NULL site data means "never list". */
struct dirlisting_site {
    struct dirlisting_settings settings; /* plugin-wide values of this configuration */
    bool whole_site;                     /* Enable On */
    bool show_hidden;                    /* ShowHidden On */
    bool symlinks;                       /* the site's [HOST] Symlinks */
    bool hide_dotfiles;                  /* the site's [HOST] HideDotFiles */
    size_t n_prefixes;
    char **prefixes; /* Path values, without a trailing '/' ("" for "/") */
};

/* One listing, from the content hook to the task thread and back. */
struct dirlisting_job {
    int dirfd; /* the directory, until the task thread owns it */
    bool root; /* the site's root: no parent link */
    bool show_hidden;
    bool hide_dotfiles;
    bool symlinks;
    struct dirlisting_settings settings;
    int status;  /* 200, or the error status of the task */
    char *body;  /* the page (malloc), handed to the server on success */
    size_t len;  /* its length */
    char path[]; /* the request path, NUL-terminated */
};

/* One listed entry; `name` points into the list's name buffer once read. */
struct dirlisting_entry {
    size_t name_off;
    const char *name;
    bool dir;
    uint64_t size;
    time_t mtime;
};

/* The entries of a directory and the bytes of their names. */
struct dirlisting_list {
    struct dirlisting_entry *v;
    size_t n, cap;
    char *names;
    size_t names_len, names_cap;
    size_t n_dirs;
    bool truncated; /* more than max_entries: the rest were not read */
};

/* A growing output buffer; `failed` latches the first allocation failure. */
struct dirlisting_buf {
    char *p;
    size_t len, cap;
    bool failed;
};

/* The server's functions, set by init(). */
extern const struct mk_api *dirlisting_api;

MK_PLUGIN_DECLARE(dirlisting);

/* ---- config.c ------------------------------------------------------------ */

/* dirlisting.conf and [DIRLISTING], read by the server into every configuration. */
extern const struct mk_conf_schema dirlisting_schema;

/*
 * Build a site's data from its [DIRLISTING] keys (the server checked them);
 * the site's Symlinks setting decides whether links are listed. *data is
 * NULL when the site lists nothing. Controlling thread.
 */
int dirlisting_site_init(const struct mk_site *site, const struct mk_conf *conf, void **data,
                         char *err, size_t errlen);
/* Release what dirlisting_site_init() stored (NULL is allowed). */
void dirlisting_site_free(void *data);

/* ---- read.c -------------------------------------------------------------- */

/*
 * Read the job's directory (the descriptor is consumed) into `l`. Returns
 * 200, or 500 (unreadable) or 503 (memory short). Task thread.
 */
int dirlisting_read_dir(struct dirlisting_job *job, struct dirlisting_list *l);
/* qsort comparators of entries: Sort bytes and Sort nocase. */
int dirlisting_cmp_bytes(const void *pa, const void *pb);
int dirlisting_cmp_nocase(const void *pa, const void *pb);

/* ---- html.c -------------------------------------------------------------- */

/* Make room for `n` more bytes; false (and `failed` latched) when memory is short. */
bool dirlisting_buf_reserve(struct dirlisting_buf *b, size_t n);
/* Append the whole page for the sorted list `l`; failures latch in b->failed. */
void dirlisting_render(struct dirlisting_buf *b, const struct dirlisting_job *job,
                       const struct dirlisting_list *l);

#endif
