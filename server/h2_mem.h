/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * h2_mem.h: the allocator of a connection's nghttp2 session (h2_mem.c).
 *
 * It is malloc, except for the session's frame buffer: nghttp2 allocates
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

struct mk_h2_mem {
    nghttp2_mem ng;      /* what nghttp2_session_server_new3 takes */
    bool creating;       /* the session is being created: its frame buffer comes now */
    void *framebuf;      /* the frame buffer (page aligned), NULL once nghttp2 let go of it */
    size_t framebuf_len; /* its length, a multiple of the page size */
};

/* Set m up; m must stay where it is for the session's life. */
void mk_h2_mem_init(struct mk_h2_mem *m);

/*
 * The connection is idle (nothing queued in nghttp2 or by the server, no
 * stream open): give the frame buffer's pages back to the kernel.
 */
void mk_h2_mem_idle(struct mk_h2_mem *m);

#endif
