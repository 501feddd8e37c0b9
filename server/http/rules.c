/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * rules.c: matching a request against a site's rules and expanding the
 * targets of Redirect and Rewrite (see rules.h). Pure but for PCRE2's
 * match data, allocated and freed around each regular expression tried.
 */
#include "rules.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#ifdef MK_HAVE_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

#include <monkey/mk_common.h>

#include "../../core/config.h"
#include "../../core/memory.h"
#include "http_chars.h"
#include "path.h"
#include "ratelimit.h"

/* ---- templates ----------------------------------------------------------- */

static const struct {
    const char *name;
    uint8_t kind;
} mk_rule_var_names[] = {
    {"scheme", MK_RP_SCHEME}, {"host", MK_RP_HOST},   {"port", MK_RP_PORT},
    {"path", MK_RP_PATH},     {"query", MK_RP_QUERY}, {"request_uri", MK_RP_URI},
};

static bool mk_rule_name_char(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (!first && c >= '0' && c <= '9');
}

/* A byte a template may hold as text: visible ASCII but for '\'. */
static bool mk_rule_text_byte(unsigned char c)
{
    return c > 0x20 && c < 0x7f && c != '\\';
}

static void mk_rule_part_add(struct mk_rule_template *t, struct mk_rule_part p)
{
    t->parts = mk_realloc(t->parts, (t->n_parts + 1) * sizeof(*t->parts));
    t->parts[t->n_parts++] = p;
}

void mk_rule_template_free(struct mk_rule_template *t)
{
    mk_free(t->text);
    mk_free(t->parts);
    memset(t, 0, sizeof(*t));
}

#define MK_FAIL(...)                                                                               \
    do {                                                                                           \
        snprintf(reason, reason_len, __VA_ARGS__);                                                 \
        mk_rule_template_free(t);                                                                  \
        return MK_ERR;                                                                             \
    } while (0)

/*
 * Whether the authority of absolute template t, "scheme://host[:port]",
 * is one: followed by '/', '?', $path, $request_uri or the end, with no
 * variable but $host and $port in it.
 */
static bool mk_rule_authority_ok(const struct mk_rule_template *t)
{
    const char *s = t->text;
    size_t i = strncmp(s, "https://", 8) == 0 ? 8 : 7;
    size_t start = i;

    for (;; i++) {
        char c = s[i];
        if (c == '\0' || c == '/' || c == '?') {
            break;
        }
        if (c == '$') {
            size_t n = 1;
            while (mk_rule_name_char(s[i + n], n == 1)) {
                n++;
            }
            bool host = n == 5 && memcmp(s + i + 1, "host", 4) == 0;
            bool port = n == 5 && memcmp(s + i + 1, "port", 4) == 0;
            /* $path and $request_uri always start with '/': they end it too */
            bool path = (n == 5 && memcmp(s + i + 1, "path", 4) == 0) ||
                        (n == 12 && memcmp(s + i + 1, "request_uri", 11) == 0);
            if (path && i > start) {
                break;
            }
            if (!host && !port) {
                return false;
            }
            i += n - 1;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || c == ':' || c == '[' || c == ']')) {
            return false; /* no userinfo ('@'), nothing a host does not hold */
        }
    }
    return i > start;
}

int mk_rule_template_parse(struct mk_rule_template *t, const char *text, uint32_t n_groups,
                           int (*group_named)(void *ctx, const char *name, size_t len), void *ctx,
                           char *reason, size_t reason_len)
{
    size_t len = strlen(text), lit = 0;
    bool in_query = false;

    memset(t, 0, sizeof(*t));
    t->text = mk_strndup(text, len);
    t->absolute = strncmp(text, "http://", 7) == 0 || strncmp(text, "https://", 8) == 0;
    if (!t->absolute && (text[0] != '/' || text[1] == '/')) {
        MK_FAIL("'%s': a target is a path starting with a single '/', or an http:// or "
                "https:// URL",
                text);
    }
    if (t->absolute && !mk_rule_authority_ok(t)) {
        MK_FAIL("'%s': the host of a target is written as it is, or $host (and $port): no "
                "other variable, group or '@' before the first '/'",
                text);
    }
    for (size_t i = 0; i <= len; i++) {
        unsigned char c = (unsigned char) text[i];
        if (c != '$' && c != '\0') {
            if (!mk_rule_text_byte(c)) {
                MK_FAIL("'%s': byte 0x%02x cannot stand in a target (percent-encode it)", text, c);
            }
            if ((c == '?' || c == '#') && !in_query) {
                if (i > lit) {
                    mk_rule_part_add(t,
                                     (struct mk_rule_part){MK_RP_TEXT, 0, in_query, (uint32_t) lit,
                                                           (uint32_t) (i - lit)});
                }
                lit = i;
                in_query = true;
                t->has_query |= c == '?';
            }
            continue;
        }
        if (i > lit) {
            mk_rule_part_add(t, (struct mk_rule_part){MK_RP_TEXT, 0, in_query, (uint32_t) lit,
                                                      (uint32_t) (i - lit)});
        }
        if (c == '\0') {
            break;
        }
        const char *name = text + i + 1;
        size_t n = 0;
        if (name[0] == '$') {
            lit = i + 1; /* "$$": the second '$' is text */
            i++;
            continue;
        }
        if (name[0] >= '0' && name[0] <= '9') {
            unsigned g = (unsigned) (name[0] - '0');
            if (g >= n_groups) {
                MK_FAIL("'%s': $%u names no group of the rule's match (it has %u)", text, g,
                        n_groups ? n_groups - 1 : 0);
            }
            mk_rule_part_add(t, (struct mk_rule_part){MK_RP_GROUP, (uint8_t) g, in_query, 0, 0});
            i += 1;
            lit = i + 1;
            continue;
        }
        while (mk_rule_name_char(name[n], n == 0)) {
            n++;
        }
        if (n == 0) {
            MK_FAIL("'%s': '$' is followed by no name (write $$ for a dollar sign)", text);
        }
        uint8_t kind = 0;
        for (size_t k = 0; k < sizeof(mk_rule_var_names) / sizeof(mk_rule_var_names[0]); k++) {
            if (strlen(mk_rule_var_names[k].name) == n &&
                memcmp(mk_rule_var_names[k].name, name, n) == 0) {
                kind = mk_rule_var_names[k].kind;
            }
        }
        int g = -1;
        if (!kind && group_named) {
            g = group_named(ctx, name, n);
        }
        if (!kind && (g < 0 || (uint32_t) g >= n_groups)) {
            MK_FAIL("'%s': $%.*s is neither a variable ($scheme, $host, $port, $path, $query, "
                    "$request_uri) nor a named group of the rule's Regex",
                    text, (int) n, name);
        }
        mk_rule_part_add(t, (struct mk_rule_part){kind ? kind : MK_RP_GROUP,
                                                  (uint8_t) (kind ? 0 : g), in_query, 0, 0});
        /* the query a template writes itself is not added again */
        t->has_query |= kind == MK_RP_QUERY || kind == MK_RP_URI;
        i += n;
        lit = i + 1;
    }
    /* a '?' that ends the target drops the client's query and writes none: "/new?" is "/new" */
    const struct mk_rule_part *last = t->n_parts ? &t->parts[t->n_parts - 1] : NULL;
    if (last && last->kind == MK_RP_TEXT && last->in_query && last->len == 1 &&
        last->off + 1 == len && text[last->off] == '?') {
        t->n_parts--;
    }
    return MK_OK;
}

#undef MK_FAIL

/* ---- expansion ------------------------------------------------------------ */

static const char mk_hex[] = "0123456789ABCDEF";

/* Bytes that stay as they are in a query: unreserved, and '/', ':' and '@'. */
static bool mk_rule_query_plain(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~' || c == '/' || c == ':' || c == '@';
}

struct mk_rule_out {
    char *p;
    size_t len, cap;
    bool full;
};

static void mk_rule_put(struct mk_rule_out *o, const char *s, size_t n)
{
    if (o->full || n > o->cap - o->len) {
        o->full = true;
        return;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

/* Percent-encode: a group (in_query or not), or bytes as received (raw: only unsafe bytes). */
static void mk_rule_put_encoded(struct mk_rule_out *o, const char *s, size_t n, bool in_query,
                                bool raw)
{
    if (!in_query && !raw) {
        if (o->full || n > (o->cap - o->len) / 3) {
            o->full = true;
            return;
        }
        o->len += mk_path_encode(s, n, o->p + o->len);
        return;
    }
    for (size_t i = 0; i < n && !o->full; i++) {
        unsigned char c = (unsigned char) s[i];
        bool plain = raw ? (mk_rule_text_byte(c) && c != '#' && (in_query || c != '?'))
                         : mk_rule_query_plain(c);
        if (plain) {
            mk_rule_put(o, (const char *) &c, 1);
            continue;
        }
        char e[3] = {'%', mk_hex[c >> 4], mk_hex[c & 15]};
        mk_rule_put(o, e, 3);
    }
}

static bool mk_rule_host_ok(const struct mk_str *h)
{
    for (size_t i = 0; i < h->len; i++) {
        char c = h->p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || c == ':' || c == '[' || c == ']' || c == '_')) {
            return false;
        }
    }
    return h->len > 0;
}

/* A path variable: always starts with '/', so that it ends an authority. */
static void mk_rule_put_path(struct mk_rule_out *o, const struct mk_str *s, bool in_query, bool raw)
{
    if (!in_query && (s->len == 0 || s->p[0] != '/')) {
        mk_rule_put(o, "/", 1);
    }
    mk_rule_put_encoded(o, s->p, s->len, in_query, raw);
}

static void mk_rule_put_query(struct mk_rule_out *o, const struct mk_rule_vars *v)
{
    mk_rule_put(o, "?", 1);
    mk_rule_put_encoded(o, v->query.p, v->query.len, true, true);
}

ssize_t mk_rule_expand(const struct mk_rule_template *t, const struct mk_rule_vars *v, char *out,
                       size_t cap)
{
    struct mk_rule_out o = {out, 0, cap ? cap - 1 : 0, cap == 0};
    /* no '?' in the template: the client's query is kept, before a '#' */
    bool keep_query = !t->has_query && v->query.p;

    for (size_t i = 0; i < t->n_parts && !o.full; i++) {
        const struct mk_rule_part *p = &t->parts[i];
        if (keep_query && p->in_query) {
            mk_rule_put_query(&o, v);
            keep_query = false;
        }
        switch (p->kind) {
        case MK_RP_TEXT:
            mk_rule_put(&o, t->text + p->off, p->len);
            break;
        case MK_RP_GROUP:
            if (p->group < v->n_groups && v->groups[2 * p->group] != (size_t) -1) {
                size_t a = v->groups[2 * p->group], b = v->groups[2 * p->group + 1];
                mk_rule_put_encoded(&o, v->subject + a, b - a, p->in_query, false);
            }
            break;
        case MK_RP_SCHEME:
            mk_rule_put(&o, v->scheme.p, v->scheme.len);
            break;
        case MK_RP_HOST:
            if (!mk_rule_host_ok(&v->host)) {
                return -1;
            }
            mk_rule_put(&o, v->host.p, v->host.len);
            break;
        case MK_RP_PORT:
            mk_rule_put(&o, v->port.p, v->port.len);
            break;
        case MK_RP_PATH:
            mk_rule_put_path(&o, &v->path, p->in_query, false);
            break;
        case MK_RP_QUERY:
            if (v->query.p) {
                mk_rule_put_encoded(&o, v->query.p, v->query.len, true, true);
            }
            break;
        case MK_RP_URI:
            mk_rule_put_path(&o, &v->uri, p->in_query, true);
            if (v->query.p) {
                mk_rule_put_query(&o, v);
            }
            break;
        }
    }
    if (keep_query) {
        mk_rule_put_query(&o, v);
    }
    if (o.full) {
        return -1;
    }
    if (!t->absolute) {
        /* "/" then "/evil.example" from a group must not read as "//evil.example" */
        size_t k = 0;
        while (k + 1 < o.len && out[k + 1] == '/') {
            k++;
        }
        if (k) {
            memmove(out, out + k, o.len - k);
            o.len -= k;
        }
    }
    out[o.len] = '\0';
    return (ssize_t) o.len;
}

/* ---- matching ------------------------------------------------------------- */

/*
 * The path condition of r for path, with *md the match data regular
 * expressions share (made at the first one, room for `pairs`; freed by the
 * caller).
 */
static bool mk_rule_match(const struct mk_rule *r, const char *path, size_t len, size_t *groups,
                          void **md, uint32_t pairs)
{
    switch (r->select) {
    case MK_RULE_ANY:
        groups[0] = 0;
        groups[1] = len;
        return true;
    case MK_RULE_EXACT:
        if (len != r->path_len || memcmp(path, r->path, len) != 0) {
            return false;
        }
        groups[0] = 0;
        groups[1] = len;
        groups[2] = len;
        groups[3] = len;
        return true;
    case MK_RULE_PREFIX: {
        size_t n = r->path_len;
        /* by whole segments: /api is /api and /api/..., not /apis */
        if (len < n || memcmp(path, r->path, n) != 0 ||
            (len > n && path[n] != '/' && path[n - 1] != '/')) {
            return false;
        }
        groups[0] = 0;
        groups[1] = len;
        groups[2] = n;
        groups[3] = len;
        return true;
    }
    case MK_RULE_REGEX:
#ifdef MK_HAVE_PCRE2
    {
        if (!*md && !(*md = pcre2_match_data_create(pairs, NULL))) {
            return false;
        }
        int rc = r->jit ? pcre2_jit_match(r->re, (PCRE2_SPTR) path, len, 0, 0, *md, NULL)
                        : pcre2_match(r->re, (PCRE2_SPTR) path, len, 0, 0, *md, NULL);
        if (rc <= 0) {
            return false;
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(*md);
        uint32_t n = pcre2_get_ovector_count(*md);
        for (uint32_t i = 0; i < r->n_groups; i++) {
            bool set = i < n && ov[2 * i] != PCRE2_UNSET && ov[2 * i] <= ov[2 * i + 1];
            groups[2 * i] = set ? ov[2 * i] : (size_t) -1;
            groups[2 * i + 1] = set ? ov[2 * i + 1] : (size_t) -1;
        }
        return true;
    }
#else
        (void) md;
        (void) pairs;
        return false;
#endif
    }
    return false;
}

static void mk_rule_md_free(void *md)
{
#ifdef MK_HAVE_PCRE2
    pcre2_match_data_free(md);
#else
    (void) md;
#endif
}

bool mk_rule_match_path(const struct mk_rule *r, const char *path, size_t len, size_t *groups)
{
    void *md = NULL;
    bool ok = mk_rule_match(r, path, len, groups, &md, r->n_groups);

    mk_rule_md_free(md);
    return ok;
}

static bool mk_rule_host_match(const struct mk_rule *r, const struct mk_str *host)
{
    size_t len = host->len;

    if (len && host->p[len - 1] == '.') {
        len--;
    }
    for (size_t i = 0; i < r->n_hosts; i++) {
        const char *n = r->hosts[i];
        if (n[0] == '*' && n[1] == '.') {
            size_t sl = strlen(n + 1);
            if (len > sl && mk_str_ieq(host->p + len - sl, sl, n + 1)) {
                return true;
            }
        }
        else if (mk_str_ieq(host->p, len, n)) {
            return true;
        }
    }
    return false;
}

bool mk_rule_selects(const struct mk_rule *r, const struct mk_http_head *h)
{
    if (r->methods && !(r->methods & (1u << h->method))) {
        return false;
    }
    if (r->scheme && (r->scheme == MK_RULE_HTTPS) != ((h->flags & MK_HEAD_TLS) != 0)) {
        return false;
    }
    if (r->n_hosts && !mk_rule_host_match(r, &h->host)) {
        return false;
    }
    if (r->field) {
        const struct mk_str *v = mk_http_header_get(h, r->field);
        if (!v || (r->field_value && (v->len != strlen(r->field_value) ||
                                      memcmp(v->p, r->field_value, v->len) != 0))) {
            return false;
        }
    }
    if (r->param && !mk_rule_query_param(&h->query, r->param, r->param_len, r->param_value,
                                         r->param_value_len)) {
        return false;
    }
    return true;
}

/* QueryRegex of r against the raw query (empty when none), in *md as mk_rule_match. */
static bool mk_rule_match_query(const struct mk_rule *r, const struct mk_str *q, void **md,
                                uint32_t pairs)
{
#ifdef MK_HAVE_PCRE2
    const char *subject = q->p ? q->p : "";

    if (!*md && !(*md = pcre2_match_data_create(pairs, NULL))) {
        return false;
    }
    /* 0: a match whose groups did not fit, still a match */
    return (r->query_jit
                ? pcre2_jit_match(r->query_re, (PCRE2_SPTR) subject, q->len, 0, 0, *md, NULL)
                : pcre2_match(r->query_re, (PCRE2_SPTR) subject, q->len, 0, 0, *md, NULL)) >= 0;
#else
    (void) r;
    (void) q;
    (void) md;
    (void) pairs;
    return false;
#endif
}

/* The value of hex digit c, or -1. */
static int mk_rule_hex(unsigned char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/*
 * Whether [p, p + n) of a query, percent-decoded and '+' as a space, is
 * exactly want (wlen bytes). A '%' without two hex digits stands for itself.
 */
static bool mk_rule_decoded_eq(const char *p, size_t n, const char *want, size_t wlen)
{
    size_t i = 0, k = 0;

    while (i < n) {
        unsigned char c = (unsigned char) p[i++];
        int hi, lo;
        if (c == '+') {
            c = ' ';
        }
        else if (c == '%' && i + 2 <= n && (hi = mk_rule_hex((unsigned char) p[i])) >= 0 &&
                 (lo = mk_rule_hex((unsigned char) p[i + 1])) >= 0) {
            c = (unsigned char) (hi << 4 | lo);
            i += 2;
        }
        if (k == wlen || (unsigned char) want[k] != c) {
            return false;
        }
        k++;
    }
    return k == wlen;
}

bool mk_rule_query_param(const struct mk_str *q, const char *name, size_t len, const char *value,
                         size_t vlen)
{
    if (!q->p) {
        return false;
    }
    const char *p = q->p, *end = q->p + q->len;

    while (p <= end) {
        const char *amp = memchr(p, '&', (size_t) (end - p));
        const char *stop = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t) (stop - p));
        const char *nend = eq ? eq : stop;
        if (mk_rule_decoded_eq(p, (size_t) (nend - p), name, len) &&
            (!value || mk_rule_decoded_eq(eq ? eq + 1 : stop, eq ? (size_t) (stop - eq - 1) : 0,
                                          value, vlen))) {
            return true;
        }
        if (!amp) {
            break;
        }
        p = amp + 1;
    }
    return false;
}

const struct mk_rule *mk_rules_find(const struct mk_rules *t, const struct mk_http_head *h,
                                    const char *path, size_t len, size_t *groups)
{
    const struct mk_rule *found = NULL;
    void *md = NULL; /* one match data for every Regex tried */

    for (size_t i = 0; i < t->n && !found; i++) {
        const struct mk_rule *r = t->v[i];
        if (mk_rule_selects(r, h) && mk_rule_match(r, path, len, groups, &md, t->n_groups) &&
            (!r->query_re || mk_rule_match_query(r, &h->query, &md, t->n_groups))) {
            found = r;
        }
    }
    mk_rule_md_free(md);
    return found;
}

int mk_rule_method(const char *name, size_t len)
{
    for (int m = MK_METHOD_GET; m <= MK_METHOD_CONNECT; m++) {
        const char *n = mk_http_method_name((enum mk_http_method) m);
        if (n && strlen(n) == len && memcmp(n, name, len) == 0) {
            return m;
        }
    }
    return MK_METHOD_UNKNOWN;
}

/* ---- response fields ------------------------------------------------------ */

/* The fields the server writes itself, or that frame the message. */
static const char *const mk_rule_own_fields[] = {
    "Content-Type", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive",
    "Date",         "Server",         "Upgrade",           "Trailer",    NULL,
};

/* The fields of a request the rules may not change: they frame it, or the parser indexed them. */
static const char *const mk_rule_request_own_fields[] = {
    "Host",
    "Content-Length",
    "Transfer-Encoding",
    "Connection",
    "Keep-Alive",
    "Upgrade",
    "Expect",
    "TE",
    "Cookie",
    "Range",
    "If-Match",
    "If-None-Match",
    "If-Modified-Since",
    "If-Unmodified-Since",
    "If-Range",
    "HTTP2-Settings",
    NULL,
};

static int mk_rule_field_parse(struct mk_rule_header *h, const char *value, bool request,
                               char *reason, size_t reason_len);

int mk_rule_header_parse(struct mk_rule_header *h, const char *value, char *reason,
                         size_t reason_len)
{
    return mk_rule_field_parse(h, value, false, reason, reason_len);
}

int mk_rule_request_header_parse(struct mk_rule_header *h, const char *value, char *reason,
                                 size_t reason_len)
{
    return mk_rule_field_parse(h, value, true, reason, reason_len);
}

void mk_rule_request_fields(const struct mk_rule *r, struct mk_http_head *h,
                            struct mk_http_header *out)
{
    unsigned n = 0, dropped_before[MK_HDR_KNOWN_COUNT] = {0};

    for (unsigned i = 0; i < h->n_headers; i++) {
        const struct mk_http_header *f = &h->headers[i];
        bool drop = false;
        for (size_t k = 0; k < r->n_req_headers && !drop; k++) {
            const struct mk_rule_header *l = &r->req_headers[k];
            drop = l->op != MK_RH_ADD && mk_str_ieq(f->name.p, f->name.len, l->name);
        }
        if (!drop) {
            out[n++] = *f;
            continue;
        }
        for (unsigned k = 0; k < MK_HDR_KNOWN_COUNT; k++) {
            /* an indexed field is never dropped: only those before it move it */
            dropped_before[k] += h->known[k] > i + 1u;
        }
    }
    for (unsigned k = 0; k < MK_HDR_KNOWN_COUNT; k++) {
        h->known[k] = (uint16_t) (h->known[k] - dropped_before[k]);
    }
    for (size_t k = 0; k < r->n_req_headers; k++) {
        const struct mk_rule_header *l = &r->req_headers[k];
        if (l->op != MK_RH_REMOVE) {
            out[n++] = (struct mk_http_header){mk_str_make(l->name, l->name_len),
                                               mk_str_make(l->value, l->value_len)};
        }
    }
    h->headers = out;
    h->n_headers = n;
}

static int mk_rule_field_parse(struct mk_rule_header *h, const char *value, bool request,
                               char *reason, size_t reason_len)
{
    static const char *const ops[] = {"set", "add", "remove"};
    const char *cur = value, *w = NULL;
    size_t len = 0;
    int op = -1;

    memset(h, 0, sizeof(*h));
    if (mk_conf_word(&cur, &w, &len) && len == 6 && strncasecmp(w, "always", 6) == 0 && !request) {
        h->always = true;
        mk_conf_word(&cur, &w, &len);
    }
    for (int i = 0; i < 3 && w; i++) {
        if (strlen(ops[i]) == len && strncasecmp(w, ops[i], len) == 0) {
            op = i;
        }
    }
    if (op < 0 || !mk_conf_word(&cur, &w, &len)) {
        snprintf(reason, reason_len, "expected %sset|add|remove NAME [VALUE]",
                 request ? "" : "[always] ");
        return MK_ERR;
    }
    for (size_t i = 0; i < len; i++) {
        if (!mk_is_tchar((unsigned char) w[i])) {
            snprintf(reason, reason_len, "'%.*s' is not a field name", (int) len, w);
            return MK_ERR;
        }
    }
    const char *const *own = request ? mk_rule_request_own_fields : mk_rule_own_fields;
    for (size_t i = 0; own[i]; i++) {
        if (mk_str_ieq(w, len, own[i])) {
            snprintf(reason, reason_len, "%s %s", own[i],
                     request ? "frames the request or is read by the server itself"
                             : "is written by the server itself");
            return MK_ERR;
        }
    }
    while (*cur == ' ' || *cur == '\t') {
        cur++;
    }
    if ((op == MK_RH_REMOVE) != (*cur == '\0')) {
        snprintf(reason, reason_len, "%s takes a name%s", ops[op],
                 op == MK_RH_REMOVE ? " only" : " and a value");
        return MK_ERR;
    }
    h->op = (uint8_t) op;
    h->name = mk_strndup(w, len);
    h->name_len = len;
    if (*cur) {
        h->value_len = strlen(cur);
        h->value = mk_strndup(cur, h->value_len);
    }
    return MK_OK;
}

void mk_rule_headers_free(struct mk_rule_header *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        mk_free(v[i].name);
        mk_free(v[i].value);
    }
    mk_free(v);
}

/* ---- Cors ------------------------------------------------------------------ */

/* The next item of comma list [*cur, end): false at its end. */
static bool mk_rule_item(const char **cur, const char *end, const char **item, size_t *len)
{
    const char *p = *cur;

    while (p < end && (*p == ',' || *p == ' ' || *p == '\t')) {
        p++;
    }
    *item = p;
    while (p < end && *p != ',' && *p != ' ' && *p != '\t') {
        p++;
    }
    *cur = p;
    *len = (size_t) (p - *item);
    return *len > 0;
}

/* Whether comma list `list` holds `name` (any case). */
static bool mk_rule_listed(const char *list, const char *name, size_t len)
{
    const char *cur = list, *end = list + strlen(list), *w;
    size_t n;

    while (mk_rule_item(&cur, end, &w, &n)) {
        if (n == len && strncasecmp(w, name, n) == 0) {
            return true;
        }
    }
    return false;
}

/* An origin as a Cors line writes it: "null", or http(s)://host[:port] (no path). */
static bool mk_rule_origin_ok(const char *o, size_t len)
{
    size_t i = len > 7 && strncmp(o, "http://", 7) == 0 ? 7 : 0;

    if (len > 8 && strncmp(o, "https://", 8) == 0) {
        i = 8;
    }
    if (i == 0) {
        return len == 4 && memcmp(o, "null", 4) == 0;
    }
    for (; i < len; i++) {
        if (!mk_is_tchar((unsigned char) o[i]) && o[i] != ':' && o[i] != '[' && o[i] != ']') {
            return false;
        }
    }
    return true;
}

int mk_rule_cors_parse(struct mk_rule_cors *c, const char *value, char *reason, size_t reason_len)
{
    const char *cur = value, *w, *item;
    size_t len, n;
    uint64_t age;
    bool any = false;

    memset(c, 0, sizeof(*c));
    c->max_age = -1;
    c->methods = (1u << MK_METHOD_GET) | (1u << MK_METHOD_HEAD) | (1u << MK_METHOD_POST);
    while (mk_conf_word(&cur, &w, &len)) {
        const char *eq = memchr(w, '=', len);
        size_t klen = eq ? (size_t) (eq - w) : len;
        const char *v = eq ? eq + 1 : w + len, *end = w + len, *vc = v;
        if (!eq && mk_str_ieq(w, len, "credentials")) {
            c->credentials = true;
            continue;
        }
        if (v == end) {
            goto bad;
        }
        if (mk_str_ieq(w, klen, "origins") && !c->origins && !any) {
            while (mk_rule_item(&vc, end, &item, &n)) {
                if (n == 1 && *item == '*' && !c->origins) {
                    any = true;
                    continue;
                }
                if (any || !mk_rule_origin_ok(item, n)) {
                    snprintf(reason, reason_len,
                             "'%.*s' is not an origin (http://host[:port], or * alone)", (int) n,
                             item);
                    return MK_ERR;
                }
                c->origins = mk_realloc(c->origins, (c->n_origins + 1) * sizeof(char *));
                c->origins[c->n_origins] = mk_strndup(item, n);
                for (char *p = c->origins[c->n_origins]; *p; p++) {
                    *p = mk_tolower(*p);
                }
                c->n_origins++;
            }
            continue;
        }
        if (mk_str_ieq(w, klen, "max-age") && mk_str_to_u64(v, (size_t) (end - v), 86400, &age)) {
            c->max_age = (int32_t) age;
            continue;
        }
        char **text = mk_str_ieq(w, klen, "methods")   ? &c->methods_text
                      : mk_str_ieq(w, klen, "headers") ? &c->headers
                      : mk_str_ieq(w, klen, "expose")  ? &c->expose
                                                       : NULL;
        if (!text || *text) {
            goto bad;
        }
        while (mk_rule_item(&vc, end, &item, &n)) {
            int m = mk_rule_method(item, n);
            for (size_t i = 0; i < n && text != &c->methods_text; i++) {
                if (!mk_is_tchar((unsigned char) item[i])) {
                    goto bad;
                }
            }
            if (text == &c->methods_text && m == MK_METHOD_UNKNOWN) {
                goto bad;
            }
            c->methods |= text == &c->methods_text ? 1u << m : 0;
        }
        *text = mk_strndup(v, (size_t) (end - v));
    }
    if (!c->origins && !any) {
        snprintf(reason, reason_len, "expected origins=ORIGIN,... (or origins=*)");
        return MK_ERR;
    }
    if (any && c->credentials) {
        snprintf(reason, reason_len,
                 "origins=* with credentials: a browser refuses it, list the origins");
        return MK_ERR;
    }
    return MK_OK;
bad:
    snprintf(reason, reason_len,
             "'%.*s': expected origins=, methods=, headers=, expose=, max-age= (0 to 86400) or "
             "credentials",
             (int) len, w);
    return MK_ERR;
}

bool mk_rule_cors_origin(const struct mk_rule_cors *c, const struct mk_str *origin)
{
    for (size_t i = 0; i < c->n_origins; i++) {
        if (mk_str_ieq(origin->p, origin->len, c->origins[i])) {
            return true;
        }
    }
    return !c->origins;
}

bool mk_rule_cors_preflight(const struct mk_rule_cors *c, const struct mk_str *method,
                            const struct mk_str *fields)
{
    int m = mk_rule_method(method->p, method->len);
    const char *cur, *w;
    size_t n;

    if (m == MK_METHOD_UNKNOWN || !(c->methods & (1u << m))) {
        return false;
    }
    if (!fields || (c->headers && strcmp(c->headers, "*") == 0)) {
        return true;
    }
    cur = fields->p;
    while (mk_rule_item(&cur, fields->p + fields->len, &w, &n)) {
        if (!c->headers || !mk_rule_listed(c->headers, w, n)) {
            return false;
        }
    }
    return true;
}

void mk_rule_cors_free(struct mk_rule_cors *c)
{
    if (!c) {
        return;
    }
    mk_strv_free(c->origins, c->n_origins);
    mk_free(c->methods_text);
    mk_free(c->headers);
    mk_free(c->expose);
    mk_free(c);
}

/* ---- Allow and Deny ----------------------------------------------------------- */

int mk_rule_access_parse(struct mk_rule_access **v, size_t *n, bool allow, const char *value,
                         char *reason, size_t reason_len)
{
    const char *cur = value, *w;
    size_t len;
    bool any = false;

    while (mk_conf_word(&cur, &w, &len)) {
        struct mk_rule_access a = {.allow = allow};
        any = true;
        if (len == 3 && strncasecmp(w, "all", 3) == 0) {
            a.all = true;
        }
        else {
            int rc = mk_cidr_parse(w, len, &a.net);
            const char *why = rc == MK_CIDR_RANGE ? "has a prefix length out of range"
                              : rc != MK_CIDR_OK
                                  ? "is not 'all' or an IPv4 or IPv6 address block (ADDRESS[/LEN])"
                              : a.net.host_bits ? "has bits set beyond its prefix length"
                                                : NULL;
            if (why) {
                snprintf(reason, reason_len, "'%.*s' %s", (int) len, w, why);
                return MK_ERR;
            }
        }
        *v = mk_realloc(*v, (*n + 1) * sizeof(**v));
        (*v)[(*n)++] = a;
    }
    if (!any) {
        snprintf(reason, reason_len, "expected 'all' or address blocks (ADDRESS[/LEN])");
        return MK_ERR;
    }
    return MK_OK;
}

bool mk_rule_access_allows(const struct mk_rule *r, const struct sockaddr *sa)
{
    uint8_t key[16];
    int family;

    mk_cidr_client(sa, key, &family);
    for (size_t i = 0; i < r->n_access; i++) {
        const struct mk_rule_access *a = &r->access[i];
        if (a->all || mk_cidr_match(&a->net, key, family)) {
            return a->allow;
        }
    }
    return true;
}

void mk_rule_free(struct mk_rule *r)
{
    if (!r) {
        return;
    }
#ifdef MK_HAVE_PCRE2
    pcre2_code_free(r->re);
    pcre2_code_free(r->query_re);
#endif
    mk_free(r->param);
    mk_free(r->param_value);
    mk_free(r->access);
    mk_free(r->path);
    mk_strv_free(r->hosts, r->n_hosts);
    mk_free(r->field);
    mk_free(r->field_value);
    mk_rule_template_free(&r->target);
    mk_free(r->body);
    mk_free(r->body_file);
    mk_rule_headers_free(r->headers, r->n_headers);
    mk_rule_headers_free(r->req_headers, r->n_req_headers);
    mk_rate_limit_free(r->limit);
    mk_free(r->limit);
    mk_rule_cors_free(r->cors);
    mk_strv_free(r->index_files, r->n_index_files);
    mk_free(r->cache_control);
    mk_free(r);
}
