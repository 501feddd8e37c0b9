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

#if defined(__SANITIZE_ADDRESS__)
#define MK_H2_MEM_POOL 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MK_H2_MEM_POOL 0
#endif
#endif
#ifndef MK_H2_MEM_POOL
#define MK_H2_MEM_POOL 1
#endif

#define MK_H2_CLASS_MIN 5      /* the smallest class: 32 bytes */
#define MK_H2_CLASSES 7        /* 32 ... 2048 (MK_H2_MEM_MAX) */
#define MK_H2_CLASS_NONE 0xffu /* a block above MK_H2_MEM_MAX: plain malloc */
#define MK_H2_HDR 16           /* keeps the block aligned as malloc's (at most 16) */

/* What precedes every block but the frame buffer. */
struct mk_h2_hdr {
    uint8_t cls; /* size class, or MK_H2_CLASS_NONE */
    size_t cap;  /* bytes usable after the header */
};

/* A free block of a class: its first bytes link it (the header stays before it). */
struct mk_h2_free {
    struct mk_h2_free *next;
};

/* The worker's free lists (one thread each). */
static __thread struct {
    struct mk_h2_free *head[MK_H2_CLASSES];
    unsigned n[MK_H2_CLASSES];
} mk_h2_cache;

void *mk_h2_mem_resize(void *p, size_t size);

static struct mk_h2_hdr *mk_h2_hdr_of(void *ptr)
{
    return (struct mk_h2_hdr *) ((char *) ptr - MK_H2_HDR);
}

/* The class holding `size` bytes, or MK_H2_CLASS_NONE. */
static unsigned mk_h2_class(size_t size)
{
    if (size > MK_H2_MEM_MAX) {
        return MK_H2_CLASS_NONE;
    }
    if (size <= ((size_t) 1 << MK_H2_CLASS_MIN)) {
        return 0;
    }
    /* the bits of size - 1: the power of two at or above size */
    return (unsigned) (64 - __builtin_clzll((unsigned long long) size - 1)) - MK_H2_CLASS_MIN;
}

/* A block of at least `size` bytes behind its header, or NULL. */
static void *mk_h2_block_get(size_t size)
{
    unsigned cls = mk_h2_class(size);
    size_t cap = cls == MK_H2_CLASS_NONE ? size : (size_t) 1 << (cls + MK_H2_CLASS_MIN);
    struct mk_h2_hdr *hd;

    if (cls != MK_H2_CLASS_NONE && mk_h2_cache.head[cls]) {
        struct mk_h2_free *f = mk_h2_cache.head[cls];
        mk_h2_cache.head[cls] = f->next;
        mk_h2_cache.n[cls]--;
        return f;
    }
    hd = malloc(MK_H2_HDR + cap);
    if (!hd) {
        return NULL;
    }
    hd->cls = (uint8_t) cls;
    hd->cap = cap;
    return (char *) hd + MK_H2_HDR;
}

static void mk_h2_block_put(void *ptr)
{
    struct mk_h2_hdr *hd = mk_h2_hdr_of(ptr);
    unsigned cls = hd->cls;

    if (MK_H2_MEM_POOL && cls != MK_H2_CLASS_NONE && mk_h2_cache.n[cls] < MK_H2_MEM_KEEP) {
        struct mk_h2_free *f = ptr;
        f->next = mk_h2_cache.head[cls];
        mk_h2_cache.head[cls] = f;
        mk_h2_cache.n[cls]++;
        return;
    }
    free(hd);
}

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

    return mk_h2_is_framebuf(m, size) ? mk_h2_framebuf_new(m, size) : mk_h2_block_get(size);
}

static void mk_h2_mem_free(void *ptr, void *user)
{
    struct mk_h2_mem *m = user;

    if (!ptr) {
        return;
    }
    if (ptr == m->framebuf) {
        m->framebuf = NULL;
        free(ptr);
        return;
    }
    mk_h2_block_put(ptr);
}

static void *mk_h2_mem_calloc(size_t n, size_t size, void *user)
{
    void *p;

    (void) user;
    if (size && n > SIZE_MAX / size) {
        return NULL;
    }
    p = mk_h2_block_get(n * size);
    if (p) {
        memset(p, 0, n * size);
    }
    return p;
}

static void *mk_h2_mem_realloc(void *ptr, size_t size, void *user)
{
    struct mk_h2_mem *m = user;
    void *p;

    if (!ptr) {
        return mk_h2_is_framebuf(m, size) ? mk_h2_framebuf_new(m, size) : mk_h2_block_get(size);
    }
    if (ptr == m->framebuf) {
        /* moved: no longer ours to release, and a block like the others */
        p = mk_h2_block_get(size);
        if (p) {
            memcpy(p, ptr, size < m->framebuf_len ? size : m->framebuf_len);
            m->framebuf = NULL;
            free(ptr);
        }
        return p;
    }
    return mk_h2_mem_resize(ptr, size);
}

void *mk_h2_mem_get(size_t size)
{
    return mk_h2_block_get(size);
}

void *mk_h2_mem_resize(void *p, size_t size)
{
    size_t old;
    void *q;

    if (!p) {
        return mk_h2_block_get(size);
    }
    old = mk_h2_hdr_of(p)->cap;
    if (size <= old) {
        return p;
    }
    q = mk_h2_block_get(size);
    if (q) {
        memcpy(q, p, old);
        mk_h2_block_put(p);
    }
    return q;
}

void mk_h2_mem_put(void *p)
{
    if (p) {
        mk_h2_block_put(p);
    }
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
