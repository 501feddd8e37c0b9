/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * memory.c: allocation wrappers, the per-worker chunk pool and the request
 * arena. See memory.h for the policy.
 */
#include "memory.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

MK_COLD static void mk_oom(size_t size)
{
    char msg[80];
    int n = snprintf(msg, sizeof(msg), "monkey: out of memory allocating %zu bytes\n", size);
    if (n > 0) {
        ssize_t ignored = write(STDERR_FILENO, msg, (size_t) n);
        (void) ignored;
    }
    abort();
}

void *mk_alloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (MK_UNLIKELY(!p)) {
        mk_oom(size);
    }
    return p;
}

void *mk_calloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (MK_UNLIKELY(!p)) {
        mk_oom(count * size);
    }
    return p;
}

void *mk_realloc(void *ptr, size_t size)
{
    void *p = realloc(ptr, size ? size : 1);
    if (MK_UNLIKELY(!p)) {
        mk_oom(size);
    }
    return p;
}

char *mk_strndup(const char *s, size_t len)
{
    char *p = mk_alloc(len + 1);
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

char *mk_strdup(const char *s)
{
    return mk_strndup(s, strlen(s));
}

void *mk_try_alloc(size_t size)
{
    return malloc(size ? size : 1);
}

void *mk_try_realloc(void *ptr, size_t size)
{
    return realloc(ptr, size ? size : 1);
}

void *mk_calloc_aligned(size_t align, size_t size)
{
    void *p = aligned_alloc(align, size);
    if (MK_UNLIKELY(!p)) {
        mk_oom(size);
    }
    memset(p, 0, size);
    return p;
}

void mk_free(void *ptr)
{
    free(ptr);
}

/* ---- chunk pool ---------------------------------------------------------- */

void mk_pool_init(struct mk_pool *pool, unsigned int max_cached)
{
    pool->free_list = NULL;
    pool->cached = 0;
    pool->max_cached = max_cached;
    pool->in_use = 0;
}

void mk_pool_destroy(struct mk_pool *pool)
{
    while (pool->free_list) {
        void *next = *(void **) pool->free_list;
        free(pool->free_list);
        pool->free_list = next;
    }
    pool->cached = 0;
}

void *mk_pool_get(struct mk_pool *pool)
{
    void *chunk = pool->free_list;
    if (chunk) {
        pool->free_list = *(void **) chunk;
        pool->cached--;
    }
    else {
        chunk = malloc(MK_CHUNK_SIZE);
        if (!chunk) {
            return NULL;
        }
    }
    pool->in_use++;
    return chunk;
}

void mk_pool_put(struct mk_pool *pool, void *chunk)
{
    pool->in_use--;
    if (pool->cached >= pool->max_cached) {
        free(chunk);
        return;
    }
    *(void **) chunk = pool->free_list;
    pool->free_list = chunk;
    pool->cached++;
}

/* ---- arena --------------------------------------------------------------- */

/*
 * Each block starts with this header. A block of exactly MK_CHUNK_SIZE bytes
 * came from the pool; a larger one from malloc (`pooled` says which).
 */
struct mk_arena_block {
    struct mk_arena_block *next;
    size_t pooled;
    alignas(max_align_t) char data[];
};

#define MK_ARENA_BLOCK_DATA (MK_CHUNK_SIZE - sizeof(struct mk_arena_block))

void mk_arena_init(struct mk_arena *arena, struct mk_pool *pool)
{
    arena->pool = pool;
    arena->blocks = NULL;
    arena->pos = NULL;
    arena->end = NULL;
}

void *mk_arena_grow(struct mk_arena *arena, size_t size)
{
    struct mk_arena_block *b;

    if (size <= MK_ARENA_BLOCK_DATA && arena->pool) {
        b = mk_pool_get(arena->pool);
        if (!b) {
            return NULL;
        }
        b->pooled = 1;
        b->next = arena->blocks;
        arena->blocks = b;
        arena->pos = b->data + size;
        arena->end = (char *) b + MK_CHUNK_SIZE;
        return b->data;
    }

    /* Oversized (or pool-less) request: a dedicated block, current block kept. */
    if (size > SIZE_MAX - sizeof(*b)) {
        return NULL;
    }
    b = malloc(sizeof(*b) + size);
    if (!b) {
        return NULL;
    }
    b->pooled = 0;
    if (arena->blocks) {
        b->next = arena->blocks->next;
        arena->blocks->next = b;
    }
    else {
        b->next = NULL;
        arena->blocks = b;
        arena->pos = arena->end = NULL;
    }
    return b->data;
}

char *mk_arena_strndup(struct mk_arena *arena, const char *s, size_t len)
{
    char *p = mk_arena_alloc(arena, len + 1);
    if (p) {
        memcpy(p, s, len);
        p[len] = '\0';
    }
    return p;
}

void mk_arena_reset(struct mk_arena *arena)
{
    struct mk_arena_block *b = arena->blocks;
    while (b) {
        struct mk_arena_block *next = b->next;
        if (b->pooled) {
            mk_pool_put(arena->pool, b);
        }
        else {
            free(b);
        }
        b = next;
    }
    arena->blocks = NULL;
    arena->pos = NULL;
    arena->end = NULL;
}

void mk_strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        mk_free(v[i]);
    }
    mk_free(v);
}
