/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fcgi_proto.h: the FastCGI 1.0 record layer, without I/O, allocation or
 * globals: encoding the records a web server sends (BEGIN_REQUEST, PARAMS,
 * STDIN, ABORT_REQUEST, GET_VALUES) and an incremental parser of the
 * records an application sends (STDOUT, STDERR, END_REQUEST), fed bytes in
 * pieces of any size; the variables of a GET_VALUES_RESULT. Unit tested
 * and fuzzed (tests/fuzz/fuzz_fcgi.c).
 */
#ifndef MK_FCGI_PROTO_H
#define MK_FCGI_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include <monkey/mk_common.h>

#define FCGI_VERSION_1 1
#define FCGI_HEADER_LEN 8
#define FCGI_CONTENT_MAX 65535

enum fcgi_type {
    FCGI_BEGIN_REQUEST = 1,
    FCGI_ABORT_REQUEST = 2,
    FCGI_END_REQUEST = 3,
    FCGI_PARAMS = 4,
    FCGI_STDIN = 5,
    FCGI_STDOUT = 6,
    FCGI_STDERR = 7,
    FCGI_DATA = 8,
    FCGI_GET_VALUES = 9,
    FCGI_GET_VALUES_RESULT = 10,
    FCGI_UNKNOWN_TYPE = 11,
};

#define FCGI_RESPONDER 1
#define FCGI_KEEP_CONN 1

/* END_REQUEST protocol status. */
#define FCGI_REQUEST_COMPLETE 0
#define FCGI_CANT_MPX_CONN 1
#define FCGI_OVERLOADED 2
#define FCGI_UNKNOWN_ROLE 3

/* Write a record header for `len` content bytes and no padding into out[8]. */
void fcgi_header(uint8_t *out, enum fcgi_type type, uint16_t id, uint16_t len);

/* BEGIN_REQUEST for a responder (with FCGI_KEEP_CONN when keep): 16 bytes into out. */
void fcgi_begin_request(uint8_t *out, uint16_t id, int keep);

/*
 * One name-value pair of a PARAMS stream into out[0..cap): the bytes
 * written, or 0 when it does not fit (nothing written).
 */
size_t fcgi_param(uint8_t *out, size_t cap, const char *name, size_t name_len, const char *value,
                  size_t value_len);

/*
 * The parser. fcgi_parse() feeds bytes; each record's content goes to the
 * callback as it arrives, STDOUT and STDERR in pieces (at least one call
 * per record, an empty piece for an empty record, which ends the stream),
 * END_REQUEST once, whole (app status and protocol status decoded), other
 * types never (they are skipped).
 */
struct fcgi_parser {
    uint8_t hdr[FCGI_HEADER_LEN];
    size_t hdr_have;
    uint8_t end[8]; /* END_REQUEST content being collected */
    size_t end_have;
    int type;
    uint16_t id;
    size_t content_left, padding_left;
    int in_record;
};

struct fcgi_event {
    int type;            /* FCGI_STDOUT, FCGI_STDERR or FCGI_END_REQUEST */
    uint16_t id;         /* the request id of the record */
    const uint8_t *data; /* STDOUT, STDERR: a piece of content (valid during the call) */
    size_t len;
    uint32_t app_status;     /* END_REQUEST */
    uint8_t protocol_status; /* END_REQUEST */
};

/* MK_OK to go on, MK_ERR to stop parsing (fcgi_parse returns MK_ERR). */
typedef int (*fcgi_event_cb)(void *arg, const struct fcgi_event *ev);

/*
 * Feed buf[0..len): MK_OK (all consumed), or MK_ERR: a record of another
 * version, an END_REQUEST that is not 8 bytes, or the callback stopped.
 */
int fcgi_parse(struct fcgi_parser *p, const uint8_t *buf, size_t len, fcgi_event_cb cb, void *arg);

/* Whether the parser stands between records, or at the very end of one
   (in its callback): a connection may then be reused. */
int fcgi_parser_idle(const struct fcgi_parser *p);

/*
 * The management record FCGI_GET_VALUES (request id 0) asking for
 * FCGI_MAX_CONNS, FCGI_MAX_REQS and FCGI_MPXS_CONNS (empty values, as the
 * specification's section 4.1 has it), into out: FCGI_GET_VALUES_LEN bytes.
 */
#define FCGI_GET_VALUES_LEN 56
void fcgi_get_values(uint8_t out[FCGI_GET_VALUES_LEN]);

/* What a GET_VALUES_RESULT says; -1 for a variable it does not give. */
struct fcgi_values {
    long max_conns, max_reqs, mpxs_conns;
};

/*
 * The name-value pairs of a GET_VALUES_RESULT's content into *v: the
 * three variables as decimals (1 to 9 digits; another value, or a name
 * not asked for, is left out). MK_OK, or MK_ERR when the pairs run past
 * the content.
 */
int fcgi_values_parse(const uint8_t *content, size_t len, struct fcgi_values *v);

#endif
