/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * gw_spool.c: a request body whose length is only known at its end
 * (chunked, or HTTP/2 without content-length), kept whole before the
 * script runs so that it gets CONTENT_LENGTH (php-fpm reads no body
 * without it), as nginx does with client_body_temp_path: memory for the
 * first MK_GW_SPOOL_MEM bytes, then a temporary file that has no name, so
 * nothing is left behind whatever happens. The server bounds the body by
 * the site's MaxRequestBody before it gets here.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "gw.h"

int mk_gw_tmpfile(const char *dir, const char *prefix)
{
    char path[4096];

    if (!dir || !*dir) {
        dir = getenv("TMPDIR");
    }
    if (!dir || !*dir) {
        dir = "/tmp";
    }
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) {
        return fd;
    }
    /* a file system without O_TMPFILE: a named file, unlinked at once */
    if (snprintf(path, sizeof(path), "%s/%s-XXXXXX", dir, prefix) >= (int) sizeof(path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    fd = mkostemp(path, O_CLOEXEC);
    if (fd >= 0) {
        unlink(path);
    }
    return fd;
}

static int gw_spool_write(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            if (n == 0) {
                errno = ENOSPC;
            }
            return MK_ERR;
        }
        p += n;
        len -= (size_t) n;
    }
    return MK_OK;
}

int mk_gw_spool_add(struct mk_gw_spool *s, const void *data, size_t len)
{
    const char *p = data;
    if (s->mem_len < MK_GW_SPOOL_MEM && len > 0) {
        if (!s->mem && !(s->mem = malloc(MK_GW_SPOOL_MEM))) {
            return MK_ERR;
        }
        size_t n = MK_GW_SPOOL_MEM - s->mem_len;
        n = n < len ? n : len;
        memcpy(s->mem + s->mem_len, p, n);
        s->mem_len += n;
        s->size += n;
        p += n;
        len -= n;
    }
    if (len == 0) {
        return MK_OK;
    }
    if (!s->fd_open) {
        if ((s->fd = mk_gw_tmpfile(NULL, "monkey-body")) < 0) {
            return MK_ERR;
        }
        s->fd_open = true;
    }
    if (gw_spool_write(s->fd, p, len) != MK_OK) {
        return MK_ERR;
    }
    s->size += len;
    return MK_OK;
}

ssize_t mk_gw_spool_read(struct mk_gw_spool *s, void *buf, size_t cap)
{
    if (s->off < s->mem_len) {
        size_t n = s->mem_len - (size_t) s->off;
        n = n < cap ? n : cap;
        memcpy(buf, s->mem + s->off, n);
        s->off += n;
        return (ssize_t) n;
    }
    if (s->off >= s->size || cap == 0) {
        return 0;
    }
    uint64_t left = s->size - s->off;
    size_t want = left < cap ? (size_t) left : cap;
    ssize_t n;
    do {
        n = pread(s->fd, buf, want, (off_t) (s->off - s->mem_len));
    } while (n < 0 && errno == EINTR);
    if (n == 0) {
        errno = EIO; /* the file is shorter than what was written */
        return -1;
    }
    if (n > 0) {
        s->off += (uint64_t) n;
    }
    return n;
}

uint64_t mk_gw_spool_left(const struct mk_gw_spool *s)
{
    return s->size - s->off;
}

void mk_gw_spool_free(struct mk_gw_spool *s)
{
    free(s->mem);
    if (s->fd_open) {
        close(s->fd);
    }
    memset(s, 0, sizeof(*s));
}

bool mk_gw_body_unsized(const struct mk_api *api, struct mk_request *r)
{
    size_t len;
    bool cl = api->header(r, "Content-Length", &len) != NULL;
    return mk_gw_body_unsized_of(api, r, cl,
                                 !cl && api->header(r, "Transfer-Encoding", &len) != NULL);
}

bool mk_gw_body_unsized_of(const struct mk_api *api, struct mk_request *r, bool cl, bool te)
{
    static const char *const bodyless[] = {"GET", "HEAD", "OPTIONS", "DELETE", "TRACE"};
    size_t len;

    if (cl) {
        return false;
    }
    if (te) {
        return true;
    }
    if (api->version(r) != 20) {
        return false;
    }
    const char *m = api->method(r, &len);
    for (size_t i = 0; i < sizeof(bodyless) / sizeof(bodyless[0]); i++) {
        if (strlen(bodyless[i]) == len && strncmp(bodyless[i], m, len) == 0) {
            return false;
        }
    }
    return true;
}
