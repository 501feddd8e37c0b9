/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * realip.c: the client's address from X-Forwarded-For, Forwarded or
 * X-Real-IP, read from the right past trusted proxies (see realip.h).
 * Pure: no I/O, no allocation, no globals.
 */
#include "realip.h"

#include <arpa/inet.h>
#include <string.h>

#include <monkey/mk_common.h>

static bool mk_realip_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* A port after ':': 1 to 5 digits, at most 65535. */
static bool mk_realip_port(const char *p, size_t len, uint16_t *port)
{
    uint64_t v;

    if (len == 0 || len > 5 || !mk_str_to_u64(p, len, 65535, &v)) {
        return false;
    }
    *port = htons((uint16_t) v);
    return true;
}

static bool mk_realip_pton(int family, const char *p, size_t len, void *dst)
{
    char buf[INET6_ADDRSTRLEN];

    if (len == 0 || len >= sizeof(buf)) {
        return false;
    }
    memcpy(buf, p, len);
    buf[len] = '\0';
    return inet_pton(family, buf, dst) == 1;
}

bool mk_realip_addr_parse(const char *p, size_t len, union mk_inet_addr *out)
{
    while (len && mk_realip_ows(p[0])) {
        p++;
        len--;
    }
    while (len && mk_realip_ows(p[len - 1])) {
        len--;
    }
    memset(out, 0, sizeof(*out));
    if (len && p[0] == '[') {
        const char *close = memchr(p, ']', len);
        if (!close) {
            return false;
        }
        size_t in = (size_t) (close - p - 1), rest = len - in - 2;
        out->in6.sin6_family = AF_INET6;
        if (!mk_realip_pton(AF_INET6, p + 1, in, &out->in6.sin6_addr)) {
            return false;
        }
        if (rest == 0) {
            return true;
        }
        return close[1] == ':' && mk_realip_port(close + 2, rest - 1, &out->in6.sin6_port);
    }
    const char *colon = memchr(p, ':', len);
    if (colon && memchr(colon + 1, ':', len - (size_t) (colon - p) - 1)) {
        out->in6.sin6_family = AF_INET6; /* a bare IPv6 address: no port */
        return mk_realip_pton(AF_INET6, p, len, &out->in6.sin6_addr);
    }
    size_t alen = colon ? (size_t) (colon - p) : len;
    out->in.sin_family = AF_INET;
    if (!mk_realip_pton(AF_INET, p, alen, &out->in.sin_addr)) {
        return false;
    }
    return !colon || mk_realip_port(colon + 1, len - alen - 1, &out->in.sin_port);
}

bool mk_realip_trusted(const struct sockaddr *sa, const struct mk_cidr *trusted, size_t n)
{
    uint8_t key[16];
    int family;

    mk_cidr_client(sa, key, &family);
    for (size_t i = 0; i < n; i++) {
        if (mk_cidr_match(&trusted[i], key, family)) {
            return true;
        }
    }
    return false;
}

void mk_realip_begin(struct mk_realip_walk *w, enum mk_realip_field field,
                     const struct mk_cidr *trusted, size_t n_trusted)
{
    memset(w, 0, sizeof(*w));
    w->field = field;
    w->trusted = trusted;
    w->n_trusted = n_trusted;
}

/*
 * One element of the list, read left to right: a = the address it names,
 * or NULL when it names none. The walk from the right stops at the
 * rightmost element that is not a trusted address, which is the last such
 * element read from the left; and the leftmost address answers when every
 * element is trusted.
 */
static void mk_realip_element(struct mk_realip_walk *w, const union mk_inet_addr *a)
{
    if (!a) {
        w->stop = -1;
        return;
    }
    if (!w->have_first && w->stop == 0) {
        w->first = *a;
        w->have_first = true;
    }
    if (!mk_realip_trusted(&a->sa, w->trusted, w->n_trusted)) {
        w->stop = 1;
        w->stop_addr = *a;
    }
}

/* X-Forwarded-For, X-Real-IP: elements between commas; empty ones skipped. */
static void mk_realip_feed_list(struct mk_realip_walk *w, const char *p, size_t len)
{
    const char *end = p + len;

    while (p < end) {
        const char *comma = memchr(p, ',', (size_t) (end - p));
        const char *e = comma ? comma : end;
        const char *s = p;
        while (s < e && mk_realip_ows(*s)) {
            s++;
        }
        if (s < e) {
            union mk_inet_addr a;
            bool ok = mk_realip_addr_parse(s, (size_t) (e - s), &a);
            mk_realip_element(w, ok ? &a : NULL);
        }
        p = comma ? comma + 1 : end;
    }
}

static bool mk_realip_tchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/*
 * Forwarded (RFC 7239 section 4): elements between commas, each pairs
 * between semicolons, a value a token or a quoted string. An element's
 * `for` names its address; an element without one, with two, or with a
 * syntax error names none (and the rest of it up to the next comma outside
 * a quoted string is skipped).
 */
static void mk_realip_feed_forwarded(struct mk_realip_walk *w, const char *p, size_t len)
{
    const char *end = p + len;

    while (p < end) {
        char value[64];
        size_t vlen = 0;
        int fors = 0;
        bool bad = false, empty = true;

        for (;;) {
            while (p < end && mk_realip_ows(*p)) {
                p++;
            }
            if (p == end || *p == ',' || *p == ';') {
                if (p < end && *p == ';') {
                    p++;
                    continue;
                }
                break; /* an empty pair, or the element's end */
            }
            empty = false;
            const char *name = p;
            while (p < end && mk_realip_tchar(*p)) {
                p++;
            }
            size_t nlen = (size_t) (p - name);
            if (nlen == 0 || p == end || *p != '=') {
                bad = true;
                break;
            }
            p++;
            char v[64];
            size_t n = 0;
            bool fits = true;
            if (p < end && *p == '"') {
                p++;
                while (p < end && *p != '"') {
                    if (*p == '\\' && p + 1 < end) {
                        p++;
                    }
                    if (n < sizeof(v)) {
                        v[n++] = *p;
                    }
                    else {
                        fits = false;
                    }
                    p++;
                }
                if (p == end) {
                    bad = true;
                    break;
                }
                p++;
            }
            else {
                while (p < end && mk_realip_tchar(*p)) {
                    if (n < sizeof(v)) {
                        v[n++] = *p;
                    }
                    else {
                        fits = false;
                    }
                    p++;
                }
                if (n == 0) {
                    bad = true;
                    break;
                }
            }
            if (nlen == 3 && mk_str_ieq(name, 3, "for")) {
                fors++;
                vlen = fits ? n : 0;
                memcpy(value, v, vlen);
            }
            while (p < end && mk_realip_ows(*p)) {
                p++;
            }
            if (p < end && *p != ',' && *p != ';') {
                bad = true;
                break;
            }
        }
        if (bad) {
            /* skip to the next comma outside a quoted string */
            bool quoted = false;
            while (p < end && (quoted || *p != ',')) {
                if (*p == '\\' && quoted && p + 1 < end) {
                    p++;
                }
                else if (*p == '"') {
                    quoted = !quoted;
                }
                p++;
            }
        }
        if (!empty || bad) {
            union mk_inet_addr a;
            bool ok = !bad && fors == 1 && mk_realip_addr_parse(value, vlen, &a);
            mk_realip_element(w, ok ? &a : NULL);
        }
        if (p < end) {
            p++; /* the comma */
        }
    }
}

void mk_realip_feed(struct mk_realip_walk *w, const char *value, size_t len)
{
    if (w->field == MK_REALIP_FORWARDED) {
        mk_realip_feed_forwarded(w, value, len);
    }
    else {
        mk_realip_feed_list(w, value, len);
    }
}

int mk_realip_end(const struct mk_realip_walk *w, union mk_inet_addr *out)
{
    if (w->stop == 1) {
        *out = w->stop_addr;
        return MK_OK;
    }
    if (w->stop == 0 && w->have_first) {
        *out = w->first;
        return MK_OK;
    }
    return MK_DECLINED;
}
