/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/router.c: checking and prefixing a service's route patterns (see
 * router.h). Pure functions.
 */
#include <stdio.h>
#include <string.h>

#include <monkey/mk_common.h>

#include "router.h"

static int duda_word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

int duda_router_name_ok(const char *name)
{
    size_t n = strlen(name);

    if (n == 0 || n > 64) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (!duda_word_char(name[i]) && name[i] != '-') {
            return 0;
        }
    }
    return 1;
}

/* Is the ":name" at seg[0, len) also used earlier in pattern[0, seg)? */
static int duda_param_repeated(const char *pattern, const char *seg, size_t len)
{
    for (const char *p = strstr(pattern, "/:"); p && p + 1 < seg; p = strstr(p + 1, "/:")) {
        size_t n = strcspn(p + 1, "/");
        if (n == len && memcmp(p + 1, seg, len) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Check one segment seg[0, len), `last` when nothing follows it. */
static int duda_segment_check(const char *pattern, const char *seg, size_t len, int last, char *err,
                              size_t errlen)
{
    if (len == 0) {
        if (last) {
            return MK_OK; /* a trailing '/' */
        }
        snprintf(err, errlen, "route '%s': empty segment", pattern);
        return MK_ERR;
    }
    if ((len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.')) {
        snprintf(err, errlen, "route '%s': '.' and '..' segments never match", pattern);
        return MK_ERR;
    }
    if (memchr(seg, '*', len)) {
        if (len != 1 || !last) {
            snprintf(err, errlen, "route '%s': '*' only as the whole last segment", pattern);
            return MK_ERR;
        }
        return MK_OK;
    }
    if (seg[0] == ':') {
        if (len == 1) {
            snprintf(err, errlen, "route '%s': a parameter without a name", pattern);
            return MK_ERR;
        }
        for (size_t i = 1; i < len; i++) {
            if (!duda_word_char(seg[i])) {
                snprintf(err, errlen, "route '%s': parameter names are letters, digits and '_'",
                         pattern);
                return MK_ERR;
            }
        }
        if (duda_param_repeated(pattern, seg, len)) {
            snprintf(err, errlen, "route '%s': parameter '%.*s' given twice", pattern,
                     (int) len - 1, seg + 1);
            return MK_ERR;
        }
        return MK_OK;
    }
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char) seg[i] <= ' ' || seg[i] == '?' || seg[i] == '#' || seg[i] == '%' ||
            seg[i] == 0x7f) {
            snprintf(err, errlen, "route '%s': space, control, '?', '#' or '%%' in a segment",
                     pattern);
            return MK_ERR;
        }
    }
    return MK_OK;
}

int duda_router_check(const char *pattern, uint32_t methods, char *err, size_t errlen)
{
    if (!pattern || pattern[0] != '/') {
        snprintf(err, errlen, "route '%s': a pattern starts with '/'", pattern ? pattern : "");
        return MK_ERR;
    }
    if (strlen(pattern) >= DUDA_PATTERN_MAX - 66) {
        snprintf(err, errlen, "route '%.40s...': longer than %d bytes", pattern,
                 DUDA_PATTERN_MAX - 67);
        return MK_ERR;
    }
    if (methods == 0) {
        snprintf(err, errlen, "route '%s': no method", pattern);
        return MK_ERR;
    }
    const char *seg = pattern + 1;
    if (*seg == '\0') {
        return MK_OK; /* "/" */
    }
    for (;;) {
        size_t len = strcspn(seg, "/");
        int last = seg[len] == '\0';
        if (duda_segment_check(pattern, seg, len, last, err, errlen) != MK_OK) {
            return MK_ERR;
        }
        if (last) {
            return MK_OK;
        }
        seg += len + 1;
    }
}

int duda_router_join(const char *prefix, const char *pattern, char *out, size_t outlen)
{
    size_t a = strlen(prefix), b = strlen(pattern);

    if (a + b >= outlen) {
        return MK_ERR;
    }
    memcpy(out, prefix, a);
    memcpy(out + a, pattern, b + 1);
    return MK_OK;
}
