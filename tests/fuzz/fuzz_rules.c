/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_rules.c: libFuzzer target for server/http/rules.c, the targets of
 * Redirect and Rewrite: a template as a configuration writes it
 * (mk_rule_template_parse) expanded with what a client chooses, its path,
 * Host and query (mk_rule_expand).
 *
 * Input: the template up to the first NUL, then the normalised path up to
 * the next, then the Host up to the next, then the query (none when the
 * input ends before it). The match has two groups, as a Prefix's: $0 the
 * whole path and $1 its second half; the named group "tail" is $1.
 * Invariants (each a crash when broken):
 *  - an expansion is NUL-terminated, holds no byte a URI may not (controls,
 *    space, '\', bytes past 0x7e), and fits the buffer;
 *  - a template that is a path expands to a path of this server: one '/'
 *    first, never "//" (another host);
 *  - an absolute template's authority is the template's own when it holds
 *    no variable, the Host when it is "$host", and never holds '@';
 *  - the template's text read as a Cors line (mk_rule_cors_parse), with
 *    the path as Access-Control-Request-Headers and the Host as Origin:
 *    credentials never go with origins=*, which takes every Origin, and a
 *    line without headers= refuses a preflight that asks for a field;
 *  - the query read for a Query condition (mk_rule_query_param), the Host
 *    as the parameter's name and the path as its value: a query that has
 *    the parameter with that value has the parameter, and "NAME=VALUE"
 *    alone, NAME and VALUE without a byte the query encodes, has it;
 *  - the template's text read as an Allow and as a Deny line
 *    (mk_rule_access_parse): both or neither accepted, with as many words;
 *    the Allow words let every client in, the Deny words refuse a client
 *    exactly when one of them holds for it ("all" for every one).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <monkey/mk_common.h>

#include "core/memory.h"
#include "server/http/rules.h"

#include "fuzz_check.h"

static int group_named(void *ctx, const char *name, size_t len)
{
    (void) ctx;
    return len == 4 && memcmp(name, "tail", 4) == 0 ? 1 : -1;
}

/* The next NUL-terminated piece of [*p, end), or the rest (*p moves past it). */
static const char *piece(const char **p, const char *end, size_t *len, bool *found)
{
    const char *s = *p, *z = memchr(s, '\0', (size_t) (end - s));
    *found = s < end;
    *len = z ? (size_t) (z - s) : (size_t) (end - s);
    *p = z ? z + 1 : end;
    return s;
}

/* The authority of an absolute URI s: where it starts and its length. */
static size_t authority(const char *s, size_t len, const char **start)
{
    const char *a = strstr(s, "://") + 3;
    size_t n = 0;
    while (a + n < s + len && a[n] != '/' && a[n] != '?' && a[n] != '#') {
        n++;
    }
    *start = a;
    return n;
}

/* Whether [p, p + n) holds a byte a query would write encoded, or '&' '=' '+' '%'. */
static bool query_special(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char) p[i];
        if (c <= 0x20 || c >= 0x7f || c == '&' || c == '=' || c == '+' || c == '%' || c == '#') {
            return true;
        }
    }
    return false;
}

static void check_query(const char *query, size_t qlen, const char *name, size_t nlen,
                        const char *value, size_t vlen)
{
    struct mk_str q = {query, qlen};

    if (mk_rule_query_param(&q, name, nlen, value, vlen)) {
        MK_FUZZ_CHECK(mk_rule_query_param(&q, name, nlen, NULL, 0));
    }
    if (nlen == 0 || query_special(name, nlen) || query_special(value, vlen)) {
        return;
    }
    char *built = malloc(nlen + vlen + 2);
    memcpy(built, name, nlen);
    built[nlen] = '=';
    memcpy(built + nlen + 1, value, vlen);
    struct mk_str b = {built, nlen + vlen + 1};
    MK_FUZZ_CHECK(mk_rule_query_param(&b, name, nlen, value, vlen));
    MK_FUZZ_CHECK(mk_rule_query_param(&b, name, nlen, NULL, 0));
    free(built);
}

/* A client address as a struct sockaddr. */
static const struct sockaddr *client(struct sockaddr_storage *ss, bool v6)
{
    memset(ss, 0, sizeof(*ss));
    if (v6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) (void *) ss;
        in6->sin6_family = AF_INET6;
        inet_pton(AF_INET6, "2001:db8::1", &in6->sin6_addr);
    }
    else {
        struct sockaddr_in *in = (struct sockaddr_in *) (void *) ss;
        in->sin_family = AF_INET;
        inet_pton(AF_INET, "192.0.2.1", &in->sin_addr);
    }
    return (const struct sockaddr *) ss;
}

static void check_access(const char *text)
{
    struct mk_rule allow = {0}, deny = {0};
    char reason[256];
    int a =
        mk_rule_access_parse(&allow.access, &allow.n_access, true, text, reason, sizeof(reason));
    int d = mk_rule_access_parse(&deny.access, &deny.n_access, false, text, reason, sizeof(reason));

    MK_FUZZ_CHECK(a == d);
    if (a == MK_OK) {
        MK_FUZZ_CHECK(allow.n_access == deny.n_access && allow.n_access > 0);
        for (int v6 = 0; v6 < 2; v6++) {
            struct sockaddr_storage ss;
            const struct sockaddr *sa = client(&ss, v6);
            uint8_t key[16];
            int family;
            bool held = false;
            mk_cidr_client(sa, key, &family);
            for (size_t i = 0; i < deny.n_access; i++) {
                held |= deny.access[i].all || mk_cidr_match(&deny.access[i].net, key, family);
            }
            MK_FUZZ_CHECK(mk_rule_access_allows(&allow, sa));
            MK_FUZZ_CHECK(mk_rule_access_allows(&deny, sa) == !held);
        }
    }
    mk_free(allow.access);
    mk_free(deny.access);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *) data, *end = p + size;
    size_t tlen, plen, hlen, qlen;
    bool has_t, has_p, has_h, has_q;
    const char *tpl = piece(&p, end, &tlen, &has_t);
    const char *path = piece(&p, end, &plen, &has_p);
    const char *host = piece(&p, end, &hlen, &has_h);
    const char *query = piece(&p, end, &qlen, &has_q);
    char *text = malloc(tlen + 1), reason[256], out[512];
    struct mk_rule_template t;

    (void) has_t;
    (void) has_p;
    (void) has_h;
    memcpy(text, tpl, tlen);
    text[tlen] = '\0';
    /* the same text as a Cors line; the path as Access-Control-Request-Headers, the host as Origin
     */
    struct mk_rule_cors *cors = mk_alloc(sizeof(*cors));
    if (mk_rule_cors_parse(cors, text, reason, sizeof(reason)) == MK_OK) {
        struct mk_str fields = {path, plen}, origin = {host, hlen}, get = {"GET", 3};
        MK_FUZZ_CHECK(cors->origins || !cors->credentials);
        MK_FUZZ_CHECK(mk_rule_cors_origin(cors, &origin) || cors->origins);
        bool any = cors->headers && strcmp(cors->headers, "*") == 0;
        MK_FUZZ_CHECK(mk_rule_cors_preflight(cors, &get, NULL));
        bool items = false;
        for (size_t i = 0; i < plen; i++) {
            items |= path[i] != ',' && path[i] != ' ' && path[i] != '\t';
        }
        /* without headers=, a preflight asking for any field is refused */
        MK_FUZZ_CHECK(any || cors->headers ||
                      mk_rule_cors_preflight(cors, &get, &fields) == !items);
    }
    mk_rule_cors_free(cors);
    check_query(has_q ? query : NULL, qlen, host, hlen, path, plen);
    check_access(text);
    if (mk_rule_template_parse(&t, text, 2, group_named, NULL, reason, sizeof(reason)) != MK_OK) {
        free(text);
        return 0;
    }
    size_t groups[4] = {0, plen, plen / 2, plen};
    struct mk_rule_vars v = {
        .scheme = {"https", 5},
        .host = {host, hlen},
        .port = {"8443", 4},
        .path = {path, plen},
        .query = {has_q ? query : NULL, qlen},
        .uri = {path, plen},
        .subject = path,
        .groups = groups,
        .n_groups = 2,
    };
    ssize_t n = mk_rule_expand(&t, &v, out, sizeof(out));
    MK_FUZZ_CHECK(n >= -1 && n < (ssize_t) sizeof(out));
    if (n >= 0) {
        MK_FUZZ_CHECK(out[n] == '\0' && strlen(out) == (size_t) n);
        for (ssize_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char) out[i];
            MK_FUZZ_CHECK(c > 0x20 && c < 0x7f && c != '\\');
        }
        if (!t.absolute) {
            MK_FUZZ_CHECK(n >= 1 && out[0] == '/' && (n == 1 || out[1] != '/'));
        }
        else {
            const char *ta, *oa;
            size_t tn = authority(text, tlen, &ta), on = authority(out, (size_t) n, &oa);
            MK_FUZZ_CHECK(!memchr(oa, '@', on));
            if (!memchr(ta, '$', tn)) {
                MK_FUZZ_CHECK(on == tn && memcmp(oa, ta, tn) == 0);
            }
            else if (tn == 5 && memcmp(ta, "$host", 5) == 0) {
                MK_FUZZ_CHECK(on == hlen && memcmp(oa, host, hlen) == 0);
            }
        }
    }
    mk_rule_template_free(&t);
    free(text);
    return 0;
}
