/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_priority.c: libFuzzer target for mk_http_priority_parse
 * (server/http/http_fields.c), the `priority` field of every HTTP/2 request
 * (RFC 9218 section 4).
 *
 * The first input byte is the priority to start from (urgency: its low
 * three bits; incremental: bit 3); bits 4-7 choose where the rest is cut
 * in two for the two-line check. Invariants (each a crash when broken):
 *  - the parser agrees with a model written here from the algorithms of
 *    RFC 8941 section 4.2 (a dictionary, each step as the RFC words it,
 *    on a copy of the input): both accept or both refuse, with the same
 *    urgency and incremental flag;
 *  - a refusal leaves the priority as it was; an urgency is within 0..7;
 *  - two field lines, each accepted, read one after the other give what
 *    the value joined with ", " gives (when neither line is empty);
 *  - the parser reads only its `len` bytes (the value is copied into a
 *    buffer of exactly that size).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/http/http.h"

#include "fuzz_check.h"

/* ---- the model: RFC 8941 section 4.2, step by step -------------------------------------- */

struct model {
    const char *s; /* the input string, consumed from the front */
    size_t n;
    int urgency; /* -1: not seen */
    int incremental;
    bool bad_type; /* a u or an i of the wrong type or range */
};

enum { M_FAIL, M_INT, M_DEC, M_STR, M_TOK, M_BYTES, M_BOOL, M_LIST };

static bool m_empty(const struct model *m)
{
    return m->n == 0;
}

static char m_first(const struct model *m)
{
    return m->n ? m->s[0] : '\0';
}

static char m_consume(struct model *m)
{
    char c = m->s[0];
    m->s++;
    m->n--;
    return c;
}

static bool m_in(char c, const char *set)
{
    return c != '\0' && strchr(set, c) != NULL;
}

static const char m_lcalpha[] = "abcdefghijklmnopqrstuvwxyz";
static const char m_alpha[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
static const char m_digit[] = "0123456789";

static void m_discard_sp(struct model *m)
{
    while (!m_empty(m) && m_first(m) == ' ') {
        m_consume(m);
    }
}

static void m_discard_ows(struct model *m)
{
    while (!m_empty(m) && (m_first(m) == ' ' || m_first(m) == '\t')) {
        m_consume(m);
    }
}

/* 4.2.3.3: a key into out (NUL terminated, cut at 8 bytes: only "u" and "i" matter). */
static bool m_key(struct model *m, char out[9])
{
    size_t k = 0;
    if (!m_in(m_first(m), m_lcalpha) && m_first(m) != '*') {
        return false;
    }
    while (!m_empty(m)) {
        char c = m_first(m);
        if (!m_in(c, m_lcalpha) && !m_in(c, m_digit) && !m_in(c, "_-.*")) {
            break;
        }
        if (k < 8) {
            out[k++] = c;
        }
        m_consume(m);
    }
    out[k] = '\0';
    return true;
}

/* 4.2.4: an integer or a decimal. */
static int m_number(struct model *m, long *value)
{
    int type = M_INT;
    long sign = 1;
    char num[32];
    size_t len = 0;

    if (m_first(m) == '-') {
        m_consume(m);
        sign = -1;
    }
    if (m_empty(m) || !m_in(m_first(m), m_digit)) {
        return M_FAIL;
    }
    while (!m_empty(m)) {
        char c = m_consume(m);
        if (m_in(c, m_digit)) {
            num[len++] = c;
        }
        else if (type == M_INT && c == '.') {
            if (len > 12) {
                return M_FAIL;
            }
            num[len++] = c;
            type = M_DEC;
        }
        else {
            m->s--; /* put it back */
            m->n++;
            break;
        }
        if (type == M_INT && len > 15) {
            return M_FAIL;
        }
        if (type == M_DEC && len > 16) {
            return M_FAIL;
        }
    }
    num[len] = '\0';
    if (type == M_INT) {
        *value = sign * strtol(num, NULL, 10);
        return M_INT;
    }
    if (num[len - 1] == '.' || strlen(strchr(num, '.') + 1) > 3) {
        return M_FAIL;
    }
    return M_DEC;
}

/* 4.2.5: a string. */
static int m_string(struct model *m)
{
    m_consume(m); /* the DQUOTE */
    while (!m_empty(m)) {
        unsigned char c = (unsigned char) m_consume(m);
        if (c == '\\') {
            if (m_empty(m)) {
                return M_FAIL;
            }
            char next = m_consume(m);
            if (next != '"' && next != '\\') {
                return M_FAIL;
            }
        }
        else if (c == '"') {
            return M_STR;
        }
        else if (c <= 0x1f || c >= 0x7f) {
            return M_FAIL;
        }
    }
    return M_FAIL;
}

/* 4.2.6: a token. */
static int m_token(struct model *m)
{
    m_consume(m);
    while (!m_empty(m) && (m_in(m_first(m), m_alpha) || m_in(m_first(m), m_digit) ||
                           m_in(m_first(m), "!#$%&'*+-.^_`|~:/"))) {
        m_consume(m);
    }
    return M_TOK;
}

/* 4.2.7: a byte sequence (its characters: the base 64 alphabet). */
static int m_bytes(struct model *m)
{
    m_consume(m);
    while (!m_empty(m)) {
        char c = m_consume(m);
        if (c == ':') {
            return M_BYTES;
        }
        if (!m_in(c, m_alpha) && !m_in(c, m_digit) && !m_in(c, "+/=")) {
            return M_FAIL;
        }
    }
    return M_FAIL;
}

/* 4.2.8: a boolean. */
static int m_boolean(struct model *m, long *value)
{
    m_consume(m);
    if (m_first(m) == '1' || m_first(m) == '0') {
        *value = m_consume(m) == '1';
        return M_BOOL;
    }
    return M_FAIL;
}

/* 4.2.3.1: a bare item. */
static int m_bare_item(struct model *m, long *value)
{
    char c = m_first(m);
    if (c == '-' || m_in(c, m_digit)) {
        return m_number(m, value);
    }
    if (c == '"') {
        return m_string(m);
    }
    if (m_in(c, m_alpha) || c == '*') {
        return m_token(m);
    }
    if (c == ':') {
        return m_bytes(m);
    }
    if (c == '?') {
        return m_boolean(m, value);
    }
    return M_FAIL;
}

/* 4.2.3.2: parameters. */
static bool m_params(struct model *m)
{
    long ignored;
    char key[9];
    while (!m_empty(m)) {
        if (m_first(m) != ';') {
            break;
        }
        m_consume(m);
        m_discard_sp(m);
        if (!m_key(m, key)) {
            return false;
        }
        if (m_first(m) == '=') {
            m_consume(m);
            if (m_bare_item(m, &ignored) == M_FAIL) {
                return false;
            }
        }
    }
    return true;
}

/* 4.2.3: an item. */
static int m_item(struct model *m, long *value)
{
    int t = m_bare_item(m, value);
    return t != M_FAIL && m_params(m) ? t : M_FAIL;
}

/* 4.2.1.2: an inner list. */
static int m_inner_list(struct model *m)
{
    long ignored;
    m_consume(m);
    while (!m_empty(m)) {
        m_discard_sp(m);
        if (m_first(m) == ')') {
            m_consume(m);
            return m_params(m) ? M_LIST : M_FAIL;
        }
        if (m_item(m, &ignored) == M_FAIL) {
            return M_FAIL;
        }
        if (m_first(m) != ' ' && m_first(m) != ')') {
            return M_FAIL;
        }
    }
    return M_FAIL;
}

/* RFC 9218 section 4: what one member means for the priority. */
static void m_apply(struct model *m, const char *key, int type, long value)
{
    if (strcmp(key, "u") == 0) {
        if (type != M_INT || value < 0 || value > 7) {
            m->bad_type = true;
        }
        else {
            m->urgency = (int) value;
        }
    }
    else if (strcmp(key, "i") == 0) {
        if (type != M_BOOL) {
            m->bad_type = true;
        }
        else {
            m->incremental = (int) value;
        }
    }
}

/* 4.2.2: a dictionary, with OWS at either end (an HTTP field value). */
static bool m_dictionary(struct model *m)
{
    m_discard_ows(m);
    while (!m_empty(m)) {
        char key[9];
        long value = 1;
        int type = M_BOOL;
        if (!m_key(m, key)) {
            return false;
        }
        if (m_first(m) == '=') {
            m_consume(m);
            type = m_first(m) == '(' ? m_inner_list(m) : m_item(m, &value);
        }
        else if (!m_params(m)) {
            type = M_FAIL;
        }
        if (type == M_FAIL) {
            return false;
        }
        m_apply(m, key, type, value);
        m_discard_ows(m);
        if (m_empty(m)) {
            return true;
        }
        if (m_consume(m) != ',') {
            return false;
        }
        m_discard_ows(m);
        if (m_empty(m)) {
            return false;
        }
    }
    return true;
}

/* ---- the checks ------------------------------------------------------------------------- */

/* Parse v (n bytes, in a buffer of exactly that size) from `start`. */
static bool parse_exact(const char *v, size_t n, struct mk_http_priority *p)
{
    char *copy = malloc(n ? n : 1);
    memcpy(copy, v, n);
    bool ok = mk_http_priority_parse(copy, n, p);
    free(copy);
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    const struct mk_http_priority start = {(uint8_t) (data[0] & 7), (data[0] & 8) != 0};
    const char *v = (const char *) data + 1;
    size_t n = size - 1;
    struct mk_http_priority got = start;
    bool ok = parse_exact(v, n, &got);

    struct model m = {v, n, -1, -1, false};
    bool model_ok = m_dictionary(&m) && !m.bad_type;
    MK_FUZZ_CHECK(ok == model_ok);
    MK_FUZZ_CHECK(got.urgency <= 7);
    if (ok) {
        MK_FUZZ_CHECK(got.urgency == (m.urgency >= 0 ? m.urgency : start.urgency));
        MK_FUZZ_CHECK(got.incremental ==
                      (m.incremental >= 0 ? m.incremental == 1 : start.incremental));
    }
    else {
        MK_FUZZ_CHECK(got.urgency == start.urgency && got.incremental == start.incremental);
    }

    /* Two lines, cut where bits 4-7 say, against the value joined with ", ". */
    size_t cut = (size_t) (data[0] >> 4) * n / 16;
    const char *a = v, *b = v + cut;
    size_t an = cut, bn = n - cut;
    struct model ma = {a, an, -1, -1, false}, mb = {b, bn, -1, -1, false};
    m_discard_ows(&ma);
    m_discard_ows(&mb);
    if (m_empty(&ma) || m_empty(&mb)) {
        return 0; /* an empty line reads as nothing; joined, it leaves a stray comma */
    }
    struct mk_http_priority one = start, two = start;
    char *joined = malloc(n + 2);
    memcpy(joined, a, an);
    memcpy(joined + an, ", ", 2);
    memcpy(joined + an + 2, b, bn);
    bool one_ok = mk_http_priority_parse(joined, n + 2, &one);
    free(joined);
    /* (Joined, two bad lines may make a good one: 'x="a' and 'b"'.) */
    if (parse_exact(a, an, &two) && parse_exact(b, bn, &two)) {
        MK_FUZZ_CHECK(one_ok);
        MK_FUZZ_CHECK(one.urgency == two.urgency && one.incremental == two.incremental);
    }
    return 0;
}
