/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * memory.h: allocation policy.
 *
 * - mk_alloc() and friends abort the process on out-of-memory: they are for
 *   sizes the server controls (configuration, fixed structures).
 * - mk_try_alloc() returns NULL: for sizes a client controls, so the caller
 *   can answer 413/503 instead of dying.
 * - struct mk_pool is a per-worker cache of fixed-size chunks (MK_CHUNK_SIZE)
 *   used for connection buffers and request arenas; it is not thread safe and
 *   belongs to exactly one worker.
 * - struct mk_arena is a bump allocator for request-scoped data, released in
 *   one call. Chunks come from a pool; large requests fall back to malloc.
 */
#ifndef MK_CORE_MEMORY_H
#define MK_CORE_MEMORY_H

#include <stdalign.h>
#include <stddef.h>

#define MK_CHUNK_SIZE 4096

#if defined(__GNUC__)
#define MK_COLD __attribute__((cold))
#define MK_LIKELY(x) __builtin_expect(!!(x), 1)
#define MK_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define MK_COLD
#define MK_LIKELY(x) (x)
#define MK_UNLIKELY(x) (x)
#endif

void *mk_alloc(size_t size);
void *mk_calloc(size_t count, size_t size);
void *mk_realloc(void *ptr, size_t size);
/* size zeroed bytes at a multiple of align (a power of two, size a multiple of it); mk_free */
void *mk_calloc_aligned(size_t align, size_t size);
char *mk_strdup(const char *s);
char *mk_strndup(const char *s, size_t len);
void *mk_try_alloc(size_t size);
void *mk_try_realloc(void *ptr, size_t size);
void mk_free(void *ptr);

/* A cache of MK_CHUNK_SIZE blocks. `cached` never exceeds `max_cached`. */
struct mk_pool {
    void *free_list;
    unsigned int cached;
    unsigned int max_cached;
    unsigned long in_use;
};

void mk_pool_init(struct mk_pool *pool, unsigned int max_cached);
void mk_pool_destroy(struct mk_pool *pool);
/* A chunk of MK_CHUNK_SIZE bytes, or NULL when memory is exhausted. */
void *mk_pool_get(struct mk_pool *pool);
void mk_pool_put(struct mk_pool *pool, void *chunk);

/* Request-scoped bump allocator; zero-initialised state is a valid empty arena. */
struct mk_arena_block;
struct mk_arena {
    struct mk_pool *pool;
    struct mk_arena_block *blocks;
    char *pos;
    char *end;
};

void mk_arena_init(struct mk_arena *arena, struct mk_pool *pool);
/* The slow path of mk_arena_alloc: a new block for `size` (already rounded). */
void *mk_arena_grow(struct mk_arena *arena, size_t size);

#define MK_ARENA_ALIGN alignof(max_align_t)

/* Memory aligned for any type, valid until mk_arena_reset(); NULL on OOM. */
static inline void *mk_arena_alloc(struct mk_arena *arena, size_t size)
{
    size_t rounded = (size + MK_ARENA_ALIGN - 1) & ~(size_t) (MK_ARENA_ALIGN - 1);
    if (rounded < size) {
        return NULL;
    }
    if (arena->pos && (size_t) (arena->end - arena->pos) >= rounded) {
        void *p = arena->pos;
        arena->pos += rounded;
        return p;
    }
    return mk_arena_grow(arena, rounded);
}
char *mk_arena_strndup(struct mk_arena *arena, const char *s, size_t len);
/* Release every block; the arena stays usable. */
void mk_arena_reset(struct mk_arena *arena);

/* Free the n strings of v (mk_strdup'ed), then v. */
void mk_strv_free(char **v, size_t n);

#endif
