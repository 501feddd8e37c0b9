/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * h2_mem.h: the allocator of a connection's nghttp2 session (h2_mem.c).
 *
 * Small blocks (up to MK_H2_MEM_MAX bytes: streams, outbound frames,
 * decoded header fields, the few nghttp2 allocates per request) come from
 * free lists of the worker, one per power-of-two size class, each block
 * behind a 16-byte header naming its class, so aligned as malloc's blocks
 * are (alignof(max_align_t): 16 bytes on x86-64 and aarch64, 8 on 32-bit
 * ARM); a freed block goes back to its list (at most MK_H2_MEM_KEEP per
 * class are kept, the rest are freed), so a request costs no malloc once
 * the worker is warm. Under AddressSanitizer
 * nothing is kept, so that use after free is still caught. Larger blocks
 * are malloc'd, behind the same header.
 *
 * The session's frame buffer is the exception: nghttp2 allocates
 * it (16 KiB) when the session is created and keeps it for the session's
 * life as scratch space for the frame being written. Here it is page
 * aligned, so that a connection idle for a while can give its pages back
 * to the kernel (mk_h2_mem_idle): they read as zeros and cost one page
 * fault when the next frame is written. Nothing else is released, since
 * nothing else nghttp2 holds is scratch.
 *
 * One per connection, inside its struct mk_h2; used on its worker only.
 */
#ifndef MK_SERVER_H2_MEM_H
#define MK_SERVER_H2_MEM_H

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stddef.h>

#define MK_H2_MEM_MAX 2048 /* the largest block a size class holds */
#define MK_H2_MEM_KEEP 256 /* blocks kept per size class and worker */

struct mk_h2_mem {
    nghttp2_mem ng;      /* what nghttp2_session_server_new3 takes */
    bool creating;       /* the session is being created: its frame buffer comes now */
    void *framebuf;      /* the frame buffer (page aligned), NULL once nghttp2 let go of it */
    size_t framebuf_len; /* its length, a multiple of the page size */
};

/*
 * A block of the worker's free lists for the server's own per-stream
 * objects (the same lists nghttp2's blocks come from): at least `size`
 * bytes, aligned as malloc's, or NULL when out of memory. Given back with
 * mk_h2_mem_put (NULL is fine); mk_h2_mem_resize moves it to a block of
 * `size` bytes keeping its contents (NULL when out of memory: p stays).
 */
void *mk_h2_mem_get(size_t size);
void *mk_h2_mem_resize(void *p, size_t size);
void mk_h2_mem_put(void *p);

/* Set m up; m must stay where it is for the session's life. */
void mk_h2_mem_init(struct mk_h2_mem *m);

/*
 * The connection is idle (nothing queued in nghttp2 or by the server, no
 * stream open): give the frame buffer's pages back to the kernel.
 */
void mk_h2_mem_idle(struct mk_h2_mem *m);

#endif
