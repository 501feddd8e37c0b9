/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * px_buf.c: the response buffer of one proxied request (Buffering on), as
 * nginx's proxy_buffering: while the client's queue is at its mark, the
 * upstream's decoded body goes on being read, into memory (a ring of
 * BufferSize bytes) and past it into a temporary file that has no name
 * (O_TMPFILE, or unlinked at once; mode 0600) of at most BufferMaxTemp
 * bytes, so that the upstream's connection is free as soon as its answer
 * ended. The client is fed from here, in pieces of PX_RBUF bytes, through
 * the job's output (mk_gw_job_out) each time its queue drains.
 *
 * Invariants: the bytes come out in the order they went in: the ring's
 * first, then the file's, and new bytes go to the ring only while the file
 * holds none. Memory is the ring alone (the file's bytes are read back
 * through it, which is empty then). The file's size is bounded, not the
 * bytes it saw: it starts again from empty once the client read it all.
 * A file that cannot be made or written is given up (memory only from
 * then on: what did not fit stays with the upstream, back-pressure); its
 * bytes already written stay good. Everything runs on the request's worker.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy.h"

void px_rbuf_init(struct px_rbuf *b, const struct px_conf *c, bool on)
{
    memset(b, 0, sizeof(*b));
    b->fd = -1;
    b->on = on;
    b->cap = (size_t) c->buf_size;
    b->file_max = c->buf_max_temp;
    b->dir = c->buf_dir;
}

bool px_rbuf_empty(const struct px_rbuf *b)
{
    return b->len == 0 && b->wr == b->rd;
}

/* Whether the file may take more bytes. */
static bool px_rbuf_file_ok(const struct px_rbuf *b)
{
    return !b->file_bad && b->file_max > 0 && b->wr < b->file_max;
}

size_t px_rbuf_room(const struct px_rbuf *b)
{
    if (!b->on || b->mem_bad) {
        return 0; /* the file's bytes are read back through the ring: none, no buffer */
    }
    uint64_t room = px_rbuf_file_ok(b) ? b->file_max - b->wr : 0;
    if (b->wr == b->rd) {
        room += b->cap - b->len;
    }
    return room > SIZE_MAX ? SIZE_MAX : (size_t) room;
}

/* n bytes into the ring, which has room for them. */
static void px_rbuf_ring_put(struct px_rbuf *b, const char *p, size_t n)
{
    size_t tail = (b->head + b->len) % b->cap;
    size_t first = b->cap - tail < n ? b->cap - tail : n;
    memcpy(b->mem + tail, p, first);
    memcpy(b->mem, p + first, n - first);
    b->len += n;
}

size_t px_rbuf_put(struct px_rbuf *b, const char *p, size_t n, int *err)
{
    size_t took = 0;

    *err = 0;
    if (b->mem_bad) {
        return 0;
    }
    if (b->wr == b->rd && b->len < b->cap) {
        if (!b->mem && !(b->mem = malloc(b->cap))) {
            b->mem_bad = true; /* no ring: back-pressure, as without a buffer */
            *err = ENOMEM;
            return 0;
        }
        took = b->cap - b->len < n ? b->cap - b->len : n;
        px_rbuf_ring_put(b, p, took);
    }
    if (took == n || !px_rbuf_file_ok(b)) {
        return took;
    }
    if (b->fd < 0 && (b->fd = mk_gw_tmpfile(b->dir, "monkey-proxy")) < 0) {
        *err = errno;
        b->file_bad = true;
        return took;
    }
    uint64_t left = b->file_max - b->wr;
    size_t want = n - took < left ? n - took : (size_t) left;
    while (want > 0) {
        ssize_t k = pwrite(b->fd, p + took, want, (off_t) b->wr);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            *err = k == 0 ? ENOSPC : errno;
            b->file_bad = true; /* what it holds stays good; nothing more goes there */
            break;
        }
        b->wr += (uint64_t) k;
        took += (size_t) k;
        want -= (size_t) k;
    }
    return took;
}

/*
 * The next piece: the ring's first contiguous bytes, or the file's read
 * into the (empty) ring. Its start in *p and its length; 0 when empty, -1
 * with errno when the file cannot be read.
 */
static ssize_t px_rbuf_peek(struct px_rbuf *b, const char **p)
{
    if (b->len > 0) {
        size_t n = b->cap - b->head < b->len ? b->cap - b->head : b->len;
        *p = b->mem + b->head;
        return (ssize_t) (n < PX_RBUF ? n : PX_RBUF);
    }
    if (b->wr == b->rd) {
        return 0;
    }
    uint64_t left = b->wr - b->rd;
    size_t want = b->cap < PX_RBUF ? b->cap : PX_RBUF;
    want = left < want ? (size_t) left : want;
    ssize_t k;
    do {
        k = pread(b->fd, b->mem, want, (off_t) b->rd);
    } while (k < 0 && errno == EINTR);
    if (k == 0) {
        errno = EIO; /* shorter than what was written */
        return -1;
    }
    *p = b->mem;
    return k;
}

/* The piece px_rbuf_peek gave, n bytes, is out. */
static void px_rbuf_consume(struct px_rbuf *b, size_t n)
{
    if (b->len > 0) {
        b->head = (b->head + n) % b->cap;
        b->len -= n;
        if (b->len == 0) {
            b->head = 0;
        }
        return;
    }
    b->rd += n;
    if (b->rd == b->wr && ftruncate(b->fd, 0) == 0) {
        b->rd = b->wr = 0; /* read whole: the file starts again, its blocks given back */
    }
}

int px_rbuf_drain(struct px_rbuf *b, struct mk_gw_job *j)
{
    b->read_err = 0;
    while (!j->paused) {
        const char *p;
        ssize_t n = px_rbuf_peek(b, &p);
        if (n == 0) {
            return MK_OK;
        }
        if (n < 0) {
            b->read_err = errno;
            return MK_ERR;
        }
        int rc = mk_gw_job_out(j, p, (size_t) n, false); /* copied into the client's queue */
        if (rc != MK_OK) {
            return rc;
        }
        px_rbuf_consume(b, (size_t) n);
    }
    return px_rbuf_empty(b) ? MK_OK : MK_AGAIN;
}

void px_rbuf_free(struct px_rbuf *b)
{
    free(b->mem);
    if (b->fd >= 0) {
        close(b->fd);
    }
    b->mem = NULL;
    b->fd = -1;
    b->len = 0;
    b->wr = b->rd = 0;
}

int px_rbuf_dir_check(const char *dir, char *reason, size_t len)
{
    int fd = mk_gw_tmpfile(dir, "monkey-proxy");
    if (fd < 0) {
        snprintf(reason, len, "cannot make a temporary file in %s: %s",
                 dir ? dir : "the system's temporary directory", strerror(errno));
        return MK_ERR;
    }
    close(fd);
    return MK_OK;
}
