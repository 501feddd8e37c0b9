/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * accept_encoding.c: the Accept-Encoding parser (see accept_encoding.h).
 *
 * Grammar (RFC 9110 sections 5.6.1, 5.6.6, 12.4.2, 12.5.3):
 *   Accept-Encoding = #( codings [ weight ] )
 *   weight = OWS ";" OWS "q=" qvalue
 *   qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
 * Members are split on ',' and parameters on ';'; other parameters are
 * skipped. Case does not matter for codings nor for "q".
 */
#include "accept_encoding.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

static const char *const mk_coding_names[] = {"br", "zstd", "gzip", "identity"};
static const size_t mk_coding_name_lens[] = {2, 4, 4, 8};
static const char *const mk_coding_suffixes[] = {".br", ".zst", ".gz", ""};

const char *mk_accept_coding_name(enum mk_coding c)
{
    return c < MK_CODING_NONE ? mk_coding_names[c] : "";
}

const char *mk_accept_coding_suffix(enum mk_coding c)
{
    return c < MK_CODING_NONE ? mk_coding_suffixes[c] : "";
}

static bool mk_ae_ows(char c)
{
    return c == ' ' || c == '\t';
}

static bool mk_ae_tchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* [p, e) without surrounding whitespace. */
static void mk_ae_trim(const char **p, const char **e)
{
    while (*p < *e && mk_ae_ows(**p)) {
        (*p)++;
    }
    while (*e > *p && mk_ae_ows((*e)[-1])) {
        (*e)--;
    }
}

/* A qvalue in thousandths, or -1 when [p, e) is not one. */
static int mk_ae_qvalue(const char *p, const char *e)
{
    size_t n = (size_t) (e - p);
    int q;

    if (n == 0 || (p[0] != '0' && p[0] != '1')) {
        return -1;
    }
    q = (p[0] - '0') * 1000;
    if (n == 1) {
        return q;
    }
    if (p[1] != '.' || n > 5) {
        return -1;
    }
    int scale = 100;
    for (size_t i = 2; i < n; i++, scale /= 10) {
        if (p[i] < '0' || p[i] > '9' || (q == 1000 && p[i] != '0')) {
            return -1;
        }
        q += (p[i] - '0') * scale;
    }
    return q;
}

/*
 * The weight of one member's parameters [p, e) (after the coding, starting
 * at a ';' or empty): 1000 without "q", -1 when a parameter is malformed.
 */
static int mk_ae_weight(const char *p, const char *e)
{
    int q = 1000;

    while (p < e) {
        const char *s = p + 1; /* *p is ';' */
        const char *t = s;
        while (t < e && *t != ';') {
            t++;
        }
        mk_ae_trim(&s, &t);
        const char *eq = memchr(s, '=', (size_t) (t - s));
        if (!eq || eq == s) {
            return -1;
        }
        const char *ne = eq, *vs = eq + 1;
        mk_ae_trim(&s, &ne);
        mk_ae_trim(&vs, &t);
        for (const char *c = s; c < ne; c++) {
            if (!mk_ae_tchar(*c)) {
                return -1;
            }
        }
        if (ne - s == 1 && (*s == 'q' || *s == 'Q')) {
            q = mk_ae_qvalue(vs, t);
            if (q < 0) {
                return -1;
            }
        }
        p = t;
        while (p < e && *p != ';') {
            p++;
        }
    }
    return q;
}

/* The coding [p, e) names: 0..3, 4 for "*", -1 for others or a bad token. */
static int mk_ae_coding(const char *p, const char *e)
{
    size_t n = (size_t) (e - p);

    for (const char *c = p; c < e; c++) {
        if (!mk_ae_tchar(*c)) {
            return -1;
        }
    }
    if (n == 1 && *p == '*') {
        return 4;
    }
    if (n == 6 && strncasecmp(p, "x-gzip", 6) == 0) {
        return MK_CODING_GZIP;
    }
    for (int i = 0; i < MK_CODING_NONE; i++) {
        if (n == mk_coding_name_lens[i] && strncasecmp(p, mk_coding_names[i], n) == 0) {
            return i;
        }
    }
    return -1;
}

void mk_accept_encoding_q(const char *v, size_t len, unsigned q[MK_CODING_NONE])
{
    int named[MK_CODING_NONE + 1]; /* -1: not named; the last is "*" */
    const char *p = v, *end = v + len;

    for (int i = 0; i <= MK_CODING_NONE; i++) {
        named[i] = -1;
    }
    while (p < end) {
        const char *m = p;
        while (p < end && *p != ',') {
            p++;
        }
        const char *me = p;
        if (p < end) {
            p++;
        }
        const char *semi = memchr(m, ';', (size_t) (me - m));
        const char *ce = semi ? semi : me, *cs = m;
        mk_ae_trim(&cs, &ce);
        if (cs == ce) {
            continue; /* empty list member */
        }
        int c = mk_ae_coding(cs, ce);
        int w = mk_ae_weight(semi ? semi : me, me);
        if (c < 0 || w < 0) {
            continue;
        }
        if (w > named[c]) {
            named[c] = w;
        }
    }
    for (int i = 0; i < MK_CODING_NONE; i++) {
        if (named[i] >= 0) {
            q[i] = (unsigned) named[i];
        }
        else if (named[MK_CODING_NONE] >= 0) {
            q[i] = (unsigned) named[MK_CODING_NONE];
        }
        else {
            q[i] = i == MK_CODING_IDENTITY ? 1u : 0u;
        }
    }
}

enum mk_coding mk_accept_encoding_pick(const unsigned q[MK_CODING_NONE], unsigned available)
{
    enum mk_coding best = MK_CODING_NONE;
    unsigned best_q = 0;

    available |= MK_CODING_BIT(MK_CODING_IDENTITY);
    for (int i = 0; i < MK_CODING_NONE; i++) {
        if ((available & MK_CODING_BIT(i)) && q[i] > best_q) {
            best = (enum mk_coding) i;
            best_q = q[i];
        }
    }
    return best;
}

enum mk_coding mk_accept_encoding_choose(const char *v, size_t len, unsigned available)
{
    unsigned q[MK_CODING_NONE];

    if (!v) {
        return MK_CODING_IDENTITY;
    }
    mk_accept_encoding_q(v, len, q);
    return mk_accept_encoding_pick(q, available);
}
