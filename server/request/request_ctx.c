/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * request_ctx.c: what plugins keep on a request: one context slot per
 * plugin (api->ctx_set, ctx_get), with a cleanup run when the request ends
 * or starts again, and notes by name (api->note_set, note), such as the
 * user the auth plugin authenticated. All of it in the request's arena.
 */
#include <string.h>

#include "../conn/conn.h"
#include "../process/server.h"
#include "request.h"

int mk_request_ctx_set(struct mk_request *r, size_t slot, void *ctx, void (*cleanup)(void *ctx))
{
    size_t n = r->conn->worker->server->plugins.count;

    if (slot >= n) {
        return MK_ERR;
    }
    if (!r->ctx) {
        r->ctx = mk_arena_alloc(&r->arena, n * sizeof(*r->ctx));
        if (!r->ctx) {
            return MK_ERR;
        }
        memset(r->ctx, 0, n * sizeof(*r->ctx));
    }
    r->ctx[slot].ctx = ctx;
    r->ctx[slot].cleanup = cleanup;
    return MK_OK;
}

void *mk_request_ctx_get(const struct mk_request *r, size_t slot)
{
    if (!r->ctx || slot >= r->conn->worker->server->plugins.count) {
        return NULL;
    }
    return r->ctx[slot].ctx;
}

void mk_request_ctx_clear(struct mk_request *r)
{
    struct mk_req_ctx *slots = r->ctx;
    size_t n = r->conn->worker->server->plugins.count;

    if (!slots) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        /* Empty the slot first: a cleanup that looks at it finds nothing. */
        struct mk_req_ctx slot = slots[i];
        slots[i].ctx = NULL;
        slots[i].cleanup = NULL;
        if (slot.cleanup && slot.ctx) {
            slot.cleanup(slot.ctx);
        }
    }
    r->ctx = NULL; /* its memory goes with the arena */
}

/* A note of a request (api->note_set), in its arena. */
struct mk_note {
    struct mk_note *next;
    size_t name_len, value_len;
    char text[]; /* name, NUL, value, NUL */
};

const char *mk_request_note_add(struct mk_request *r, const char *name, size_t nlen,
                                const char *value, size_t vlen)
{
    struct mk_note *n = mk_arena_alloc(&r->arena, sizeof(*n) + nlen + vlen + 2);
    if (!n) {
        return NULL;
    }
    n->name_len = nlen;
    n->value_len = vlen;
    memcpy(n->text, name, nlen);
    n->text[nlen] = '\0';
    memcpy(n->text + nlen + 1, value, vlen);
    n->text[nlen + 1 + vlen] = '\0';
    n->next = r->notes;
    r->notes = n;
    return n->text + nlen + 1;
}

/*
 * Set note `name` of r (both copied into the request's memory); a later
 * note of the same name hides an earlier one. MK_ERR when memory is short
 * or name is empty.
 */
int mk_request_note_set(struct mk_request *r, const char *name, const char *value)
{
    size_t nlen = strlen(name);
    if (!r || nlen == 0) {
        return MK_ERR;
    }
    return mk_request_note_add(r, name, nlen, value, strlen(value)) ? MK_OK : MK_ERR;
}

/* The value of note `name` of r (NUL terminated, *len set), NULL when none. */
const char *mk_request_note(const struct mk_request *r, const char *name, size_t *len)
{
    size_t nlen = strlen(name);
    for (const struct mk_note *n = r ? r->notes : NULL; n; n = n->next) {
        if (n->name_len == nlen && memcmp(n->text, name, nlen) == 0) {
            if (len) {
                *len = n->value_len;
            }
            return n->text + nlen + 1;
        }
    }
    return NULL;
}
