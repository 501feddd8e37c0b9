/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * h2_mem.c: the allocator of a connection's nghttp2 session (see h2_mem.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "h2_mem.h"

/* The smallest block taken for the frame buffer (nghttp2's is 16 KiB and a few bytes). */
#define MK_H2_FRAMEBUF_MIN 16384

static size_t mk_h2_page(void)
{
    static size_t page;

    if (!page) {
        long n = sysconf(_SC_PAGESIZE);
        page = n > 0 ? (size_t) n : 4096;
    }
    return page;
}

/* The frame buffer, page aligned and a whole number of pages, or NULL. */
static void *mk_h2_framebuf_new(struct mk_h2_mem *m, size_t size)
{
    size_t page = mk_h2_page();
    size_t len = (size + page - 1) / page * page;
    void *p = aligned_alloc(page, len);

    if (p) {
        m->framebuf = p;
        m->framebuf_len = len;
    }
    return p;
}

/* Whether this block is the frame buffer nghttp2 asks for while the session is created. */
static bool mk_h2_is_framebuf(const struct mk_h2_mem *m, size_t size)
{
    return m->creating && !m->framebuf && size >= MK_H2_FRAMEBUF_MIN;
}

static void *mk_h2_mem_malloc(size_t size, void *user)
{
    struct mk_h2_mem *m = user;

    return mk_h2_is_framebuf(m, size) ? mk_h2_framebuf_new(m, size) : malloc(size);
}

static void mk_h2_mem_free(void *ptr, void *user)
{
    struct mk_h2_mem *m = user;

    if (ptr && ptr == m->framebuf) {
        m->framebuf = NULL;
    }
    free(ptr);
}

static void *mk_h2_mem_calloc(size_t n, size_t size, void *user)
{
    (void) user;
    return calloc(n, size);
}

static void *mk_h2_mem_realloc(void *ptr, size_t size, void *user)
{
    struct mk_h2_mem *m = user;

    if (!ptr && mk_h2_is_framebuf(m, size)) {
        return mk_h2_framebuf_new(m, size);
    }
    if (ptr && ptr == m->framebuf) {
        m->framebuf = NULL; /* moved or resized: no longer ours to release */
    }
    return realloc(ptr, size);
}

void mk_h2_mem_init(struct mk_h2_mem *m)
{
    memset(m, 0, sizeof(*m));
    m->ng.mem_user_data = m;
    m->ng.malloc = mk_h2_mem_malloc;
    m->ng.free = mk_h2_mem_free;
    m->ng.calloc = mk_h2_mem_calloc;
    m->ng.realloc = mk_h2_mem_realloc;
}

void mk_h2_mem_idle(struct mk_h2_mem *m)
{
    if (m->framebuf) {
        (void) madvise(m->framebuf, m->framebuf_len, MADV_DONTNEED);
    }
}
