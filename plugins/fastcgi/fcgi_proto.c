/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fcgi_proto.c: the FastCGI record layer (see fcgi_proto.h). Pure.
 */
#include <string.h>

#include "fcgi_proto.h"

void fcgi_header(uint8_t *out, enum fcgi_type type, uint16_t id, uint16_t len)
{
    out[0] = FCGI_VERSION_1;
    out[1] = (uint8_t) type;
    out[2] = (uint8_t) (id >> 8);
    out[3] = (uint8_t) id;
    out[4] = (uint8_t) (len >> 8);
    out[5] = (uint8_t) len;
    out[6] = 0; /* padding */
    out[7] = 0;
}

void fcgi_begin_request(uint8_t *out, uint16_t id, int keep)
{
    fcgi_header(out, FCGI_BEGIN_REQUEST, id, 8);
    memset(out + 8, 0, 8);
    out[9] = FCGI_RESPONDER;
    out[10] = keep ? FCGI_KEEP_CONN : 0;
}

/* A length in 1 byte (< 128) or 4 (high bit set); the bytes written. */
static size_t fcgi_length(uint8_t *out, size_t len)
{
    if (len < 128) {
        out[0] = (uint8_t) len;
        return 1;
    }
    out[0] = (uint8_t) (0x80 | (len >> 24));
    out[1] = (uint8_t) (len >> 16);
    out[2] = (uint8_t) (len >> 8);
    out[3] = (uint8_t) len;
    return 4;
}

size_t fcgi_param(uint8_t *out, size_t cap, const char *name, size_t name_len, const char *value,
                  size_t value_len)
{
    if (name_len > 0x7fffffff || value_len > 0x7fffffff) {
        return 0;
    }
    size_t need = (name_len < 128 ? 1 : 4) + (value_len < 128 ? 1 : 4) + name_len + value_len;
    if (need > cap) {
        return 0;
    }
    size_t n = fcgi_length(out, name_len);
    n += fcgi_length(out + n, value_len);
    memcpy(out + n, name, name_len);
    memcpy(out + n + name_len, value, value_len);
    return need;
}

/* A complete header was collected: start its record. */
static int fcgi_record_start(struct fcgi_parser *p, fcgi_event_cb cb, void *arg)
{
    if (p->hdr[0] != FCGI_VERSION_1) {
        return MK_ERR;
    }
    p->type = p->hdr[1];
    p->id = (uint16_t) ((p->hdr[2] << 8) | p->hdr[3]);
    p->content_left = (size_t) ((p->hdr[4] << 8) | p->hdr[5]);
    p->padding_left = p->hdr[6];
    p->end_have = 0;
    p->in_record = 1;
    p->hdr_have = 0;
    if (p->type == FCGI_END_REQUEST && p->content_left != 8) {
        return MK_ERR;
    }
    if (p->content_left == 0 && (p->type == FCGI_STDOUT || p->type == FCGI_STDERR)) {
        struct fcgi_event ev = {.type = p->type, .id = p->id, .data = p->hdr, .len = 0};
        return cb(arg, &ev);
    }
    return MK_OK;
}

/* Content bytes of the current record. */
static int fcgi_content(struct fcgi_parser *p, const uint8_t *data, size_t n, fcgi_event_cb cb,
                        void *arg)
{
    p->content_left -= n;
    if (p->type == FCGI_STDOUT || p->type == FCGI_STDERR) {
        struct fcgi_event ev = {.type = p->type, .id = p->id, .data = data, .len = n};
        return cb(arg, &ev);
    }
    if (p->type != FCGI_END_REQUEST) {
        return MK_OK; /* skipped */
    }
    memcpy(p->end + p->end_have, data, n);
    p->end_have += n;
    if (p->end_have < 8) {
        return MK_OK;
    }
    struct fcgi_event ev = {
        .type = FCGI_END_REQUEST,
        .id = p->id,
        .app_status = ((uint32_t) p->end[0] << 24) | ((uint32_t) p->end[1] << 16) |
                      ((uint32_t) p->end[2] << 8) | p->end[3],
        .protocol_status = p->end[4],
    };
    return cb(arg, &ev);
}

int fcgi_parse(struct fcgi_parser *p, const uint8_t *buf, size_t len, fcgi_event_cb cb, void *arg)
{
    size_t pos = 0;

    while (pos < len) {
        if (!p->in_record) {
            size_t n = FCGI_HEADER_LEN - p->hdr_have;
            n = n < len - pos ? n : len - pos;
            memcpy(p->hdr + p->hdr_have, buf + pos, n);
            p->hdr_have += n;
            pos += n;
            if (p->hdr_have == FCGI_HEADER_LEN && fcgi_record_start(p, cb, arg) != MK_OK) {
                return MK_ERR;
            }
        }
        else if (p->content_left > 0) {
            size_t n = p->content_left < len - pos ? p->content_left : len - pos;
            if (fcgi_content(p, buf + pos, n, cb, arg) != MK_OK) {
                return MK_ERR;
            }
            pos += n;
        }
        else {
            size_t n = p->padding_left < len - pos ? p->padding_left : len - pos;
            p->padding_left -= n;
            pos += n;
        }
        if (p->in_record && p->content_left == 0 && p->padding_left == 0) {
            p->in_record = 0;
        }
    }
    return MK_OK;
}

void fcgi_get_values(uint8_t out[FCGI_GET_VALUES_LEN])
{
    static const char pairs[] = "\x0e\x00"
                                "FCGI_MAX_CONNS"
                                "\x0d\x00"
                                "FCGI_MAX_REQS"
                                "\x0f\x00"
                                "FCGI_MPXS_CONNS";
    size_t len = sizeof(pairs) - 1; /* 48 */
    fcgi_header(out, FCGI_GET_VALUES, 0, (uint16_t) len);
    memcpy(out + FCGI_HEADER_LEN, pairs, len);
}

/* A pair length (1 or 4 bytes) at p[*pos], before end: MK_OK, MK_ERR past the end. */
static int fcgi_pair_length(const uint8_t *p, size_t end, size_t *pos, size_t *len)
{
    if (*pos >= end) {
        return MK_ERR;
    }
    if (p[*pos] < 0x80) {
        *len = p[(*pos)++];
        return MK_OK;
    }
    if (end - *pos < 4) {
        return MK_ERR;
    }
    *len = ((size_t) (p[*pos] & 0x7f) << 24) | ((size_t) p[*pos + 1] << 16) |
           ((size_t) p[*pos + 2] << 8) | p[*pos + 3];
    *pos += 4;
    return MK_OK;
}

/* A decimal of 1 to 9 digits, or -1. */
static long fcgi_decimal(const uint8_t *p, size_t len)
{
    long v = 0;
    if (len == 0 || len > 9) {
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return -1;
        }
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

int fcgi_values_parse(const uint8_t *content, size_t len, struct fcgi_values *v)
{
    size_t pos = 0;

    v->max_conns = v->max_reqs = v->mpxs_conns = -1;
    while (pos < len) {
        size_t nl, vl;
        if (fcgi_pair_length(content, len, &pos, &nl) != MK_OK ||
            fcgi_pair_length(content, len, &pos, &vl) != MK_OK || nl > len - pos ||
            vl > len - pos - nl) {
            return MK_ERR;
        }
        const uint8_t *name = content + pos, *value = content + pos + nl;
        pos += nl + vl;
        long *slot = nl == 14 && memcmp(name, "FCGI_MAX_CONNS", 14) == 0    ? &v->max_conns
                     : nl == 13 && memcmp(name, "FCGI_MAX_REQS", 13) == 0   ? &v->max_reqs
                     : nl == 15 && memcmp(name, "FCGI_MPXS_CONNS", 15) == 0 ? &v->mpxs_conns
                                                                            : NULL;
        if (slot) {
            *slot = fcgi_decimal(value, vl);
        }
    }
    return MK_OK;
}

int fcgi_parser_idle(const struct fcgi_parser *p)
{
    /* A record whose content and padding are all read counts as done even
       inside its callback (END_REQUEST is the last thing a request reads). */
    return p->hdr_have == 0 && (!p->in_record || (p->content_left == 0 && p->padding_left == 0));
}
