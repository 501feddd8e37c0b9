/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * reqid.h: request IDs and W3C trace context (RequestId, TraceContext).
 * Pure: no I/O, no allocation, no globals.
 *
 * A request ID a client sends is kept only when it is printable ASCII
 * (0x21 to 0x7e: no space, no control byte) and 1 to MK_REQID_MAX bytes
 * long. A traceparent (W3C Trace Context, level 1) is kept only in
 * version 00 form: "00-" 32 lowercase hex digits (the trace id, not all
 * zero) "-" 16 lowercase hex digits (the parent id, not all zero) "-" 2
 * lowercase hex digits (the flags), 55 bytes in all. A later version
 * (01 to fe) may carry more after the flags, behind a "-": its first 55
 * bytes are read as version 00 (the specification's rule for a parser of
 * version 00); version ff is invalid.
 */
#ifndef MK_SERVER_REQID_H
#define MK_SERVER_REQID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest request ID accepted from a client. */
#define MK_REQID_MAX 200
/* A generated ID: 16 hex digits of the worker's prefix, '-', 16 of its counter. */
#define MK_REQID_GEN_LEN 33
/* A traceparent as written: "00-<32 hex>-<16 hex>-<2 hex>". */
#define MK_TRACEPARENT_LEN 55

struct mk_traceparent {
    uint8_t trace_id[16];
    uint8_t parent_id[8];
    uint8_t flags;
};

/* Whether value[0, len) may stand as a request ID (see above). */
bool mk_reqid_valid(const char *value, size_t len);

/* Parse a traceparent value: true with *tp set when it is valid (see above). */
bool mk_traceparent_parse(const char *value, size_t len, struct mk_traceparent *tp);

/* Write tp as version 00 into out (MK_TRACEPARENT_LEN bytes, no NUL). */
void mk_traceparent_format(const struct mk_traceparent *tp, char *out);

/* Write n bytes as 2n lowercase hex digits into out (no NUL). */
void mk_reqid_hex(const uint8_t *bytes, size_t n, char *out);

#endif
