/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * static_ranges.c: multipart/byteranges bodies (see static_ranges.h).
 *
 * The body of n parts, in 2n + 1 runs:
 *
 *   --BOUNDARY CRLF Content-Type: TYPE CRLF Content-Range: bytes A-B/SIZE CRLF CRLF
 *   (bytes A to B)
 *   CRLF --BOUNDARY CRLF ... (the next parts, each after a CRLF)
 *   CRLF --BOUNDARY-- CRLF
 *
 * which is what h2o sends (nginx puts a CRLF before the first delimiter).
 */
#include "static_ranges.h"

#include <string.h>
#include <sys/random.h>

#include <monkey/mk_util.h>

#include "../../core/memory.h"
#include "../request/request.h"

#define MK_BOUNDARY_BYTES 12 /* 96 random bits */
#define MK_BOUNDARY_LEN (2 * MK_BOUNDARY_BYTES)
#define MK_BOUNDARY_TRIES 4 /* draws before giving up on a type that holds them all */

/* What a part's head holds besides its media type: the longest numbers. */
#define MK_PART_HEAD_MAX                                                                           \
    (sizeof("\r\n--\r\nContent-Type: \r\nContent-Range: bytes -/\r\n\r\n") - 1 + MK_BOUNDARY_LEN + \
     3 * 20)
#define MK_PARTS_TAIL_LEN (sizeof("\r\n----\r\n") - 1 + MK_BOUNDARY_LEN)
#define MK_PARTS_TYPE "multipart/byteranges; boundary="
#define MK_PARTS_TYPE_LEN (sizeof(MK_PARTS_TYPE) - 1)

/*
 * Random bytes for the boundaries, per worker thread: one getrandom(2)
 * serves twenty answers, so that a multipart answer costs a system call
 * in twenty more than a single range, and none is made before the first
 * multipart answer.
 */
static __thread struct {
    uint8_t bytes[20 * MK_BOUNDARY_BYTES];
    unsigned used;
} mk_ranges_random = {.used = 20 * MK_BOUNDARY_BYTES};

/*
 * A fresh boundary into out (MK_BOUNDARY_LEN lower-case hexadecimal
 * digits): false when the kernel has no random bytes to give now
 * (GRND_NONBLOCK: a worker never waits for them).
 */
static bool mk_static_boundary(char *out)
{
    static const char hex[] = "0123456789abcdef";

    if (mk_ranges_random.used + MK_BOUNDARY_BYTES > sizeof(mk_ranges_random.bytes)) {
        ssize_t n =
            getrandom(mk_ranges_random.bytes, sizeof(mk_ranges_random.bytes), GRND_NONBLOCK);
        if (n != (ssize_t) sizeof(mk_ranges_random.bytes)) {
            return false;
        }
        mk_ranges_random.used = 0;
    }
    uint8_t *b = mk_ranges_random.bytes + mk_ranges_random.used;
    for (unsigned i = 0; i < MK_BOUNDARY_BYTES; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 0xf];
    }
    memset(b, 0, MK_BOUNDARY_BYTES); /* used once */
    mk_ranges_random.used += MK_BOUNDARY_BYTES;
    return true;
}

static char *mk_put(char *p, const void *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

#define MK_PUT_LIT(p, lit) mk_put((p), (lit), sizeof(lit) - 1)

int mk_static_ranges(struct mk_request *r, const char *v, size_t len, uint64_t size,
                     struct mk_str type, const char *mem)
{
    struct mk_range rg[MK_RANGES_MAX];
    char boundary[MK_BOUNDARY_LEN];
    unsigned n, tries = 0;

    /* again, with room for all of them (the single range's path keeps one) */
    if (mk_http_range_parse(v, len, size, rg, MK_RANGES_MAX, &n) != MK_RANGE_OK || n < 2) {
        return MK_ERR;
    }

    /* A boundary the part heads do not hold: the media type is the only
       text in them that may have a run of 24 hexadecimal digits. */
    do {
        if (++tries > MK_BOUNDARY_TRIES || !mk_static_boundary(boundary)) {
            return MK_ERR;
        }
    } while (type.len >= MK_BOUNDARY_LEN && memmem(type.p, type.len, boundary, MK_BOUNDARY_LEN));

    unsigned runs = 2 * n + 1;
    size_t text =
        MK_PARTS_TYPE_LEN + MK_BOUNDARY_LEN + n * (MK_PART_HEAD_MAX + type.len) + MK_PARTS_TAIL_LEN;
    struct mk_parts *parts =
        mk_arena_alloc(&r->arena, sizeof(*parts) + runs * sizeof(parts->run[0]) + text);
    if (!parts) {
        return MK_ERR;
    }
    char *ctype = (char *) &parts->run[runs], *p = ctype;
    uint64_t total = 0;

    p = MK_PUT_LIT(p, MK_PARTS_TYPE);
    p = mk_put(p, boundary, MK_BOUNDARY_LEN);
    size_t ctype_len = (size_t) (p - ctype);

    for (unsigned i = 0; i < n; i++) {
        char *head = p;
        if (i) {
            p = MK_PUT_LIT(p, "\r\n");
        }
        p = MK_PUT_LIT(p, "--");
        p = mk_put(p, boundary, MK_BOUNDARY_LEN);
        if (type.len) {
            p = MK_PUT_LIT(p, "\r\nContent-Type: ");
            p = mk_put(p, type.p, type.len);
        }
        p = MK_PUT_LIT(p, "\r\nContent-Range: bytes ");
        p += mk_u64_dec(rg[i].first, p);
        *p++ = '-';
        p += mk_u64_dec(rg[i].last, p);
        *p++ = '/';
        p += mk_u64_dec(size, p);
        p = MK_PUT_LIT(p, "\r\n\r\n");

        uint64_t bytes = rg[i].last - rg[i].first + 1;
        parts->run[2 * i] = (struct mk_parts_run){head, 0, (uint64_t) (p - head)};
        parts->run[2 * i + 1] =
            (struct mk_parts_run){mem ? mem + rg[i].first : NULL, rg[i].first, bytes};
        total += (uint64_t) (p - head) + bytes;
    }
    char *tail = p;
    p = MK_PUT_LIT(p, "\r\n--");
    p = mk_put(p, boundary, MK_BOUNDARY_LEN);
    p = MK_PUT_LIT(p, "--\r\n");
    parts->run[runs - 1] = (struct mk_parts_run){tail, 0, (uint64_t) (p - tail)};
    total += (uint64_t) (p - tail);

    parts->n = runs;
    parts->i = 0;
    parts->done = 0;
    r->parts = parts;
    r->content_type = ctype;
    r->content_type_len = ctype_len;
    r->content_length = total;
    r->body_left = total;
    return MK_OK;
}
