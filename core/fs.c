/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fs.c: files opened beneath a directory, and paths joined (fs.h).
 *
 * Beneath a directory: openat2(RESOLVE_BENEATH) where the kernel has it
 * (Linux 5.6), so nothing outside the directory can be reached, and
 * symbolic links are refused unless they are allowed (then they are
 * followed wherever they lead, which is what allowing them means). On
 * kernels without openat2 the path is walked one component at a time with
 * O_NOFOLLOW.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fs.h"
#include "memory.h"

/* openat2(2) may be missing from the C library's headers (musl). */
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#else
struct open_how {
    uint64_t flags;
    uint64_t mode;
    uint64_t resolve;
};
#define RESOLVE_NO_MAGICLINKS 0x02
#define RESOLVE_NO_SYMLINKS 0x04
#define RESOLVE_BENEATH 0x08
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif

static atomic_int mk_have_openat2 = 1;

/* Open `rel` (no leading '/', no dot segments) without following symlinks. */
static int mk_open_walk(int dirfd, const char *rel, int flags)
{
    char buf[PATH_MAX];
    size_t len = strlen(rel);
    int cur = dirfd;

    if (len >= sizeof(buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, rel, len + 1);
    char *comp = buf;
    for (char *slash; (slash = strchr(comp, '/')) != NULL; comp = slash + 1) {
        *slash = '\0';
        int next = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int saved = errno;
        struct stat st;
        /* A link to a directory fails with ENOTDIR here: refuse it as
           openat2(RESOLVE_NO_SYMLINKS) does, with ELOOP. */
        if (next < 0 && saved == ENOTDIR && fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISLNK(st.st_mode)) {
            saved = ELOOP;
        }
        if (cur != dirfd) {
            close(cur);
        }
        if (next < 0) {
            errno = saved;
            return -1;
        }
        cur = next;
    }
    /* "dir/" ends with an empty name: the directory itself. */
    int fd = openat(cur, *comp ? comp : ".", flags | O_NOFOLLOW);
    int saved = errno;
    if (cur != dirfd) {
        close(cur);
    }
    errno = saved;
    return fd;
}

int mk_fs_open_beneath(int dirfd, const char *rel, int flags, bool symlinks)
{
    flags |= O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    if (symlinks) {
        return openat(dirfd, rel, flags);
    }
    if (atomic_load_explicit(&mk_have_openat2, memory_order_relaxed)) {
        struct open_how how = {
            .flags = (uint64_t) flags,
            .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        int fd = (int) syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
        if (fd >= 0 || errno != ENOSYS) {
            return fd;
        }
        atomic_store(&mk_have_openat2, 0);
    }
    return mk_open_walk(dirfd, rel, flags);
}

char *mk_fs_path_join(const char *base, const char *path)
{
    if (path[0] == '/' || !base) {
        return mk_strdup(path);
    }
    size_t n = strlen(base) + strlen(path) + 2;
    char *out = mk_alloc(n);
    snprintf(out, n, "%s/%s", base, path);
    return out;
}
