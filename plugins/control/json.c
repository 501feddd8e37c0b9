/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * json.c: the bounded buffer that replies and documents are built in, and
 * JSON strings in it (escaped; invalid UTF-8 becomes U+FFFD). A buffer that
 * failed (out of memory, or past CONTROL_REPLY_MAX) stays failed.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"

/* Append n bytes; on failure (memory, CONTROL_REPLY_MAX) mark the buffer. */
void control_buf_add(struct mk_json *b, const char *s, size_t n)
{
    if (!b->max) {
        b->max = CONTROL_REPLY_MAX; /* a zeroed buffer */
    }
    mk_json_raw(b, s, n);
}

/* Append the string s. */
void control_buf_str(struct mk_json *b, const char *s)
{
    control_buf_add(b, s, strlen(s));
}

void control_buf_printf(struct mk_json *b, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;

    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if ((size_t) n < sizeof(tmp)) {
        control_buf_add(b, tmp, (size_t) n);
        return;
    }
    char *big = malloc((size_t) n + 1);
    if (!big) {
        b->failed = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t) n + 1, fmt, ap);
    va_end(ap);
    control_buf_add(b, big, (size_t) n);
    free(big);
}

/* Release b's memory and make it empty (and usable) again. */
void control_buf_free(struct mk_json *b)
{
    mk_json_free(b);
    memset(b, 0, sizeof(*b));
}

/* Append s as a JSON string, quotes included; NULL is appended as null. */
void control_buf_json(struct mk_json *b, const char *s)
{
    if (!s) {
        control_buf_str(b, "null");
        return;
    }
    control_buf_add(b, "\"", 1);
    mk_json_escape(b, s, strlen(s));
    control_buf_add(b, "\"", 1);
}
