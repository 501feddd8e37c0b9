/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * reqid.c: request ID checks and the traceparent parser (reqid.h).
 */
#include "reqid.h"

static const char mk_reqid_digits[] = "0123456789abcdef";

bool mk_reqid_valid(const char *value, size_t len)
{
    if (len == 0 || len > MK_REQID_MAX) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) value[i];
        if (c < 0x21 || c > 0x7e) {
            return false;
        }
    }
    return true;
}

/* A lowercase hex digit's value, or -1 (the specification allows no uppercase). */
static int mk_reqid_xdigit(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

/* n bytes from 2n hex digits: false on any other byte. */
static bool mk_reqid_unhex(const char *p, size_t n, uint8_t *out)
{
    for (size_t i = 0; i < n; i++) {
        int hi = mk_reqid_xdigit(p[2 * i]);
        int lo = mk_reqid_xdigit(p[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return false;
        }
        out[i] = (uint8_t) (hi << 4 | lo);
    }
    return true;
}

static bool mk_reqid_zero(const uint8_t *b, size_t n)
{
    uint8_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        acc |= b[i];
    }
    return acc == 0;
}

bool mk_traceparent_parse(const char *value, size_t len, struct mk_traceparent *tp)
{
    uint8_t version;

    if (len < MK_TRACEPARENT_LEN || !mk_reqid_unhex(value, 1, &version) || version == 0xff) {
        return false;
    }
    /* version 00 is exactly 55 bytes; a later one may go on after a '-' */
    if (len > MK_TRACEPARENT_LEN && (version == 0 || value[MK_TRACEPARENT_LEN] != '-')) {
        return false;
    }
    if (value[2] != '-' || value[35] != '-' || value[52] != '-') {
        return false;
    }
    if (!mk_reqid_unhex(value + 3, 16, tp->trace_id) ||
        !mk_reqid_unhex(value + 36, 8, tp->parent_id) ||
        !mk_reqid_unhex(value + 53, 1, &tp->flags)) {
        return false;
    }
    return !mk_reqid_zero(tp->trace_id, 16) && !mk_reqid_zero(tp->parent_id, 8);
}

void mk_reqid_hex(const uint8_t *bytes, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = mk_reqid_digits[bytes[i] >> 4];
        out[2 * i + 1] = mk_reqid_digits[bytes[i] & 15];
    }
}

void mk_traceparent_format(const struct mk_traceparent *tp, char *out)
{
    out[0] = '0';
    out[1] = '0';
    out[2] = '-';
    mk_reqid_hex(tp->trace_id, 16, out + 3);
    out[35] = '-';
    mk_reqid_hex(tp->parent_id, 8, out + 36);
    out[52] = '-';
    mk_reqid_hex(&tp->flags, 1, out + 53);
}
