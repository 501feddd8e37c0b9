/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fs.h: files opened beneath a directory, and paths joined (fs.c).
 */
#ifndef MK_CORE_FS_H
#define MK_CORE_FS_H

#include <stdbool.h>

/*
 * Open `rel` (relative, no leading '/', no dot segments) beneath `dirfd`,
 * with O_CLOEXEC, O_NOCTTY and O_NONBLOCK added to `flags`. Symbolic links
 * are refused unless `symlinks` (then followed anywhere). The descriptor,
 * or -1 with errno (ELOOP or EXDEV: a link refused). Any thread.
 */
int mk_fs_open_beneath(int dirfd, const char *rel, int flags, bool symlinks);
/* `path` made absolute against `base` (a directory), allocated: the caller frees it. */
char *mk_fs_path_join(const char *base, const char *path);

#endif
