/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * static_ranges.h: multipart/byteranges answers of static files (RFC 9110
 * sections 14.6 and 15.3.7.2), for a Range of several satisfiable ranges.
 *
 * The body is a list of runs (struct mk_parts, request.h) in the request's
 * arena: each part's head (its delimiter, Content-Type and Content-Range)
 * from memory, then its bytes from the file, sent with the transport's
 * sendfile or queued as HTTP/2 file ranges like a single range's; the
 * closing delimiter last. A body compressed on the fly is in memory, and
 * so are its parts' bytes. Content-Length is the exact sum of the runs.
 *
 * The boundary is 24 hexadecimal digits, 96 bits from getrandom(2) drawn
 * for each answer (the worker keeps a few answers' worth): it cannot be
 * guessed from the file, or from another answer, so a file cannot hold it
 * on purpose; and it never occurs in the part heads (the media type is
 * checked; the rest holds no run of 24 hexadecimal digits).
 *
 * On the request's worker: the runs are in the request's arena, and the
 * random bytes of the boundaries are kept per thread.
 */
#ifndef MK_SERVER_STATIC_RANGES_H
#define MK_SERVER_STATIC_RANGES_H

#include <stdint.h>

#include "../http/http.h"

struct mk_request;

/*
 * Make r's body the multipart/byteranges of the ranges of the Range value
 * (v, len), which mk_http_range_parse found to hold several satisfiable
 * ranges of a representation of `size` bytes, of media type `type` (may
 * be empty), whose bytes are r's file (mem NULL) or mem: sets r->parts,
 * r->content_type, r->content_length and r->body_left (not r->body_type).
 * MK_OK, or MK_ERR when memory is short or no random bytes could be had
 * (nothing is set: the whole representation is to be sent).
 */
int mk_static_ranges(struct mk_request *r, const char *v, size_t len, uint64_t size,
                     struct mk_str type, const char *mem);

#endif
