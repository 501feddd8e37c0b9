/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/gc.c: the gc object: memory a request holds until it ends. Each
 * item goes on dr->gc and is released (free(), or the function given to
 * gc->add_fn) when the duda_request is freed (request.c), newest first.
 */
#include <stdlib.h>
#include <string.h>

#include "duda_internal.h"

static int duda_gc_add(duda_request_t *dr, void *p)
{
    if (!dr) {
        duda_misuse(NULL, "gc->add() without a request");
        return -1;
    }
    struct duda_gc_item *it = malloc(sizeof(*it));
    if (!it) {
        return -1;
    }
    it->p = p;
    it->fn = free;
    it->next = dr->gc;
    dr->gc = it;
    return 0;
}

static int duda_gc_add_fn(duda_request_t *dr, void (*fn)(void *p), void *p)
{
    if (!fn || duda_gc_add(dr, p) != 0) {
        if (!fn) {
            duda_misuse(dr, "gc->add_fn() without a function");
        }
        return -1;
    }
    dr->gc->fn = fn;
    return 0;
}

void *duda_gc_alloc(duda_request_t *dr, size_t size)
{
    void *p = calloc(1, size ? size : 1);
    if (!p || duda_gc_add(dr, p) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

char *duda_gc_strndup(duda_request_t *dr, const char *s, size_t n)
{
    char *p = duda_gc_alloc(dr, n + 1);
    if (p) {
        memcpy(p, s, n);
    }
    return p;
}

const struct duda_gc_api duda_gc_obj = {.size = sizeof(struct duda_gc_api),
                                        .alloc = duda_gc_alloc,
                                        .add = duda_gc_add,
                                        .add_fn = duda_gc_add_fn};
