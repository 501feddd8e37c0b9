/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * gw.c: meta-variables and response heads of the gateways (see gw.h).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <monkey/mk_util.h>

#include "gw.h"

#define GW_NAME_MAX 128

struct gw_emit {
    mk_gw_param_cb cb;
    void *arg;
    int rc;
};

static void gw_put(struct gw_emit *e, const char *name, const char *value, size_t len)
{
    if (e->rc == MK_OK && value) {
        e->rc = e->cb(e->arg, name, strlen(name), value, len);
    }
}

static void gw_puts(struct gw_emit *e, const char *name, const char *value)
{
    gw_put(e, name, value, value ? strlen(value) : 0);
}

/* The port of a socket address, 0 for other families. */
static unsigned gw_port(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        return ntohs(((const struct sockaddr_in *) sa)->sin_port);
    }
    if (sa->sa_family == AF_INET6) {
        return ntohs(((const struct sockaddr_in6 *) sa)->sin6_port);
    }
    return 0;
}

/* Request headers gathered without request memory (more: api->alloc). */
#define GW_HDR_STACK 32
/* Up to so many headers, the earlier one of a name is found by a scan. */
#define GW_HDR_SCAN 8
#define GW_HDR_NONE UINT32_MAX

/*
 * A request header that becomes a variable. The headers of one name form
 * a chain in request order (next); its first holds the chain's last
 * header and the length of the values joined with ", " (last, total:
 * meaningful on a first only).
 */
struct gw_hdr {
    const char *name, *value;
    size_t nlen, vlen, total;
    uint32_t next, last;
    bool first; /* the first of its name: the one that emits */
};

/*
 * False for a header gw.h leaves out: Proxy, framing, credentials unless
 * passed, and Host when `absolute` (the target's authority is HTTP_HOST).
 */
static bool gw_header_passes(const struct mk_gw_script *s, const char *name, size_t nlen,
                             bool absolute)
{
    if (nlen == 0 || nlen + 5 >= GW_NAME_MAX) {
        return false;
    }
    return !(
        (absolute && nlen == 4 && strncasecmp(name, "Host", 4) == 0) ||
        (nlen == 5 && strncasecmp(name, "Proxy", 5) == 0) ||
        (nlen == 12 && strncasecmp(name, "Content-Type", 12) == 0) ||
        (nlen == 14 && strncasecmp(name, "Content-Length", 14) == 0) ||
        (nlen == 17 && strncasecmp(name, "Transfer-Encoding", 17) == 0) ||
        (!s->pass_authorization && nlen == 13 && strncasecmp(name, "Authorization", 13) == 0) ||
        (!s->pass_proxy_authorization && nlen == 19 &&
         strncasecmp(name, "Proxy-Authorization", 19) == 0));
}

/*
 * A header name's hash, the same for names that differ only in case: its
 * length and three of its bytes (a constant cost; a name with other bytes
 * in the middle only shares a slot and is told apart by comparison).
 */
static uint32_t gw_name_hash(const char *name, size_t nlen)
{
    uint32_t h = (uint32_t) nlen;

    h = h * 31 + ((unsigned char) name[0] | 0x20u);
    h = h * 31 + ((unsigned char) name[nlen / 2] | 0x20u);
    h = h * 31 + ((unsigned char) name[nlen - 1] | 0x20u);
    return h * 0x9e3779b1u;
}

/* A name byte's counterpart in HTTP_<NAME>: upper case, '_' for '-', 0 for the bytes left out. */
#define GW_SAME(c) [c] = (c)
#define GW_UPPER(c) [c] = (char) ((c) - 'a' + 'A'), [(c) - 'a' + 'A'] = (char) ((c) - 'a' + 'A')
static const char gw_var_char[256] = {
    ['-'] = '_',   GW_SAME('0'),  GW_SAME('1'),  GW_SAME('2'),  GW_SAME('3'),  GW_SAME('4'),
    GW_SAME('5'),  GW_SAME('6'),  GW_SAME('7'),  GW_SAME('8'),  GW_SAME('9'),  GW_UPPER('a'),
    GW_UPPER('b'), GW_UPPER('c'), GW_UPPER('d'), GW_UPPER('e'), GW_UPPER('f'), GW_UPPER('g'),
    GW_UPPER('h'), GW_UPPER('i'), GW_UPPER('j'), GW_UPPER('k'), GW_UPPER('l'), GW_UPPER('m'),
    GW_UPPER('n'), GW_UPPER('o'), GW_UPPER('p'), GW_UPPER('q'), GW_UPPER('r'), GW_UPPER('s'),
    GW_UPPER('t'), GW_UPPER('u'), GW_UPPER('v'), GW_UPPER('w'), GW_UPPER('x'), GW_UPPER('y'),
    GW_UPPER('z'),
};
#undef GW_SAME
#undef GW_UPPER

/* HTTP_<NAME> of the chain that starts at h[i], its values joined with ", ". */
static void gw_header_emit(const struct mk_api *api, struct mk_request *r, const struct gw_hdr *h,
                           uint32_t i, struct gw_emit *e)
{
    const struct gw_hdr *x = &h[i];
    char var[GW_NAME_MAX];

    memcpy(var, "HTTP_", 5);
    for (size_t k = 0; k < x->nlen; k++) {
        char c = gw_var_char[(unsigned char) x->name[k]];
        if (!c) {
            return; /* left out (see gw.h) */
        }
        var[5 + k] = c;
    }
    var[5 + x->nlen] = '\0';
    if (x->next == GW_HDR_NONE) {
        gw_put(e, var, x->value, x->vlen);
        return;
    }
    char *joined = api->alloc(r, x->total);
    if (!joined) {
        e->rc = MK_ERR;
        return;
    }
    memcpy(joined, x->value, x->vlen);
    size_t off = x->vlen;
    for (uint32_t j = x->next; j != GW_HDR_NONE; j = h[j].next) {
        memcpy(joined + off, ", ", 2);
        memcpy(joined + off + 2, h[j].value, h[j].vlen);
        off += 2 + h[j].vlen;
    }
    gw_put(e, var, joined, x->total);
}

/* The first header of x's name among h[0..kept) by a scan: for a few headers. */
static struct gw_hdr *gw_header_scan(struct gw_hdr *h, uint32_t kept, const struct gw_hdr *x)
{
    for (uint32_t j = 0; j < kept; j++) {
        if (h[j].first && h[j].nlen == x->nlen && strncasecmp(h[j].name, x->name, x->nlen) == 0) {
            return &h[j];
        }
    }
    return NULL;
}

/*
 * The first header of x's name through the table of the chains' first
 * headers (open addressing, 1 << bits slots, GW_HDR_NONE when free); when
 * there is none, *free_slot is where x goes.
 */
static struct gw_hdr *gw_header_probe(struct gw_hdr *h, uint32_t *slots, unsigned bits,
                                      const struct gw_hdr *x, uint32_t **free_slot)
{
    uint32_t mask = (1u << bits) - 1;

    for (uint32_t k = gw_name_hash(x->name, x->nlen) >> (32 - bits);; k = (k + 1) & mask) {
        if (slots[k] == GW_HDR_NONE) {
            *free_slot = &slots[k];
            return NULL;
        }
        struct gw_hdr *g = &h[slots[k]];
        if (g->nlen == x->nlen && strncasecmp(g->name, x->name, x->nlen) == 0) {
            return g;
        }
    }
}

/*
 * One HTTP_<NAME> per header name, in the order of their first
 * occurrences. One pass over the headers: each finds the first earlier
 * header of its name, by a scan among a few (GW_HDR_SCAN), else through
 * a table with at least twice as many slots as headers, and joins its
 * chain. Request memory only past GW_HDR_STACK headers.
 */
static void gw_header_vars(const struct mk_api *api, struct mk_request *r,
                           const struct mk_gw_script *s, struct gw_emit *e)
{
    struct gw_hdr stack_hdrs[GW_HDR_STACK];
    uint32_t stack_slots[2 * GW_HDR_STACK];
    unsigned n = api->header_count(r);
    struct gw_hdr *h = stack_hdrs;
    uint32_t *slots = NULL;
    unsigned bits = 0;

    if (n > GW_HDR_SCAN) {
        bits = 4;
        while ((1u << bits) < 2 * n) {
            bits++;
        }
        slots = stack_slots;
        if (n > GW_HDR_STACK) {
            h = api->alloc(r, n * sizeof(*h) + (sizeof(*slots) << bits));
            if (!h) {
                e->rc = MK_ERR;
                return;
            }
            slots = (uint32_t *) (h + n);
        }
        memset(slots, 0xff, sizeof(*slots) << bits);
    }
    uint32_t kept = 0;
    size_t tlen;
    const char *t = api->target(r, &tlen);
    struct mk_gw_slice authority, rest;
    bool absolute = mk_gw_target_absolute(t, tlen, &authority, &rest);
    for (unsigned i = 0; i < n; i++) {
        struct gw_hdr *x = &h[kept];
        if (api->header_at(r, i, &x->name, &x->nlen, &x->value, &x->vlen) != MK_OK ||
            !gw_header_passes(s, x->name, x->nlen, absolute)) {
            continue;
        }
        uint32_t *free_slot = NULL;
        struct gw_hdr *g =
            slots ? gw_header_probe(h, slots, bits, x, &free_slot) : gw_header_scan(h, kept, x);
        x->next = GW_HDR_NONE;
        x->first = g == NULL;
        if (g) {
            h[g->last].next = kept;
            g->last = kept;
            g->total += 2 + x->vlen;
        }
        else {
            x->last = kept;
            x->total = x->vlen;
            if (free_slot) {
                *free_slot = kept;
            }
        }
        kept++;
    }
    for (uint32_t i = 0; i < kept && e->rc == MK_OK; i++) {
        if (h[i].first) {
            gw_header_emit(api, r, h, i, e);
        }
    }
}

/* SERVER_NAME: the Host without its port, else the site's first name. */
static void gw_server_name(const struct mk_api *api, struct mk_request *r, struct gw_emit *e)
{
    size_t len = 0;
    const char *host = api->host(r, &len);
    if (host && len > 0) {
        const char *end = host + len;
        if (host[0] == '[') {
            const char *close = memchr(host, ']', len);
            end = close ? close + 1 : end;
        }
        else {
            const char *colon = memchr(host, ':', len);
            end = colon ? colon : end;
        }
        gw_put(e, "SERVER_NAME", host, (size_t) (end - host));
        return;
    }
    const char *name = api->site_name(api->site(r), 0);
    gw_puts(e, "SERVER_NAME", name ? name : "localhost");
}

static void gw_port_var(struct gw_emit *e, const char *name, const struct sockaddr *sa)
{
    char port[8];
    gw_put(e, name, port, mk_u64_dec(gw_port(sa), port));
}

static void gw_addresses(const struct mk_api *api, struct mk_request *r, struct gw_emit *e)
{
    char text[MK_ADDR_TEXT_LEN];
    socklen_t slen = 0;

    const struct sockaddr *sa = api->remote_sockaddr(r, &slen);
    if (sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6)) {
        mk_addr_text(sa, text);
        gw_puts(e, "REMOTE_ADDR", text);
        gw_puts(e, "REMOTE_HOST", text);
        gw_port_var(e, "REMOTE_PORT", sa);
    }
    else {
        const char *remote = api->remote_addr(r, text, sizeof(text));
        gw_puts(e, "REMOTE_ADDR", remote);
        gw_puts(e, "REMOTE_HOST", remote);
    }
    struct sockaddr_storage local;
    socklen_t llen = sizeof(local);
    if (api->conn_local_addr(api->conn(r), &local, &llen) == MK_OK) {
        const struct sockaddr *ls = (const struct sockaddr *) &local;
        mk_addr_text(ls, text);
        gw_puts(e, "SERVER_ADDR", text);
        gw_port_var(e, "SERVER_PORT", ls);
    }
}

/*
 * AUTH_TYPE and REMOTE_USER (RFC 3875 4.1.1, 4.1.11): the scheme and the
 * user of the server's authentication of r, as a plugin noted them
 * (MK_NOTE_AUTH_TYPE, MK_NOTE_REMOTE_USER: the auth plugin's). Without
 * them the server authenticated nobody, and neither is set: an
 * Authorization header alone is what the client claims, not verified.
 */
static void gw_auth_vars(const struct mk_api *api, struct mk_request *r, struct gw_emit *e)
{
    size_t len;
    const char *user = MK_API_HAS(api, note) ? api->note(r, MK_NOTE_REMOTE_USER, &len) : NULL;
    if (!user) {
        return;
    }
    gw_put(e, "REMOTE_USER", user, len);
    const char *type = api->note(r, MK_NOTE_AUTH_TYPE, &len);
    if (type) {
        gw_put(e, "AUTH_TYPE", type, len);
    }
}

static void gw_request_vars(const struct mk_api *api, struct mk_request *r,
                            const struct mk_gw_script *s, struct gw_emit *e)
{
    size_t len;
    const char *v;

    v = api->method(r, &len);
    gw_put(e, "REQUEST_METHOD", v, len);
    v = api->target(r, &len);
    struct mk_gw_slice authority, rest;
    if (mk_gw_target_absolute(v, len, &authority, &rest)) {
        /* the path and query of "http://host/p?q", as of an origin-form target */
        if (rest.len == 0 || rest.p[0] != '/') {
            char *t = api->alloc(r, rest.len + 1);
            if (!t) {
                e->rc = MK_ERR;
                return;
            }
            t[0] = '/';
            memcpy(t + 1, rest.p, rest.len);
            gw_put(e, "REQUEST_URI", t, rest.len + 1);
        }
        else {
            gw_put(e, "REQUEST_URI", rest.p, rest.len);
        }
        /* the authority that chose the site, not a Host the server ignored
           (RFC 9112 3.2.2); the Host header is not copied (gw_header_vars) */
        gw_put(e, "HTTP_HOST", authority.p, authority.len);
    }
    else {
        gw_put(e, "REQUEST_URI", v, len);
    }
    v = api->query(r, &len);
    gw_put(e, "QUERY_STRING", v ? v : "", v ? len : 0);
    int version = api->version(r);
    gw_puts(e, "SERVER_PROTOCOL",
            version == 20   ? "HTTP/2.0"
            : version == 10 ? "HTTP/1.0"
                            : "HTTP/1.1");
    if (s->content_length) {
        gw_puts(e, "CONTENT_LENGTH", s->content_length);
    }
    else if ((v = api->header(r, "Content-Length", &len))) {
        /* the decimal the server read ("3, 3" is 3), never the field as it came */
        char dec[MK_GW_DEC_MAX];
        size_t n = mk_gw_content_length(v, len, dec);
        if (n > 0) {
            gw_put(e, "CONTENT_LENGTH", dec, n);
        }
    }
    if ((v = api->header(r, "Content-Type", &len))) {
        gw_put(e, "CONTENT_TYPE", v, len);
    }
    gw_put(e, "SCRIPT_NAME", s->name, s->name_len);
    gw_put(e, "PATH_INFO", s->path_info, s->path_info_len);
    if (s->path_info_len > 0) {
        size_t dlen = strlen(s->docroot);
        char *t = api->alloc(r, dlen + s->path_info_len);
        if (!t) {
            e->rc = MK_ERR;
            return;
        }
        memcpy(t, s->docroot, dlen);
        memcpy(t + dlen, s->path_info, s->path_info_len);
        gw_put(e, "PATH_TRANSLATED", t, dlen + s->path_info_len);
    }
    gw_puts(e, "SCRIPT_FILENAME", s->filename);
    gw_puts(e, "DOCUMENT_ROOT", s->docroot);
}

int mk_gw_params(const struct mk_api *api, struct mk_request *r, const struct mk_gw_script *s,
                 mk_gw_param_cb cb, void *arg)
{
    struct gw_emit e = {cb, arg, MK_OK};
    size_t len;

    gw_puts(&e, "GATEWAY_INTERFACE", "CGI/1.1");
    gw_puts(&e, "SERVER_SOFTWARE", "Monkey");
    gw_puts(&e, "REDIRECT_STATUS", "200");
    gw_request_vars(api, r, s, &e);
    gw_server_name(api, r, &e);
    gw_addresses(api, r, &e);
    gw_auth_vars(api, r, &e);
    int tls = MK_API_HAS(api, conn_transport_var) &&
              api->conn_transport_var(api->conn(r), "protocol", &len) != NULL;
    gw_puts(&e, "REQUEST_SCHEME", tls ? "https" : "http");
    if (tls) {
        gw_puts(&e, "HTTPS", "on");
    }
    if (e.rc == MK_OK) {
        gw_header_vars(api, r, s, &e);
    }
    return e.rc;
}

bool mk_gw_has_body_of(const char *cl, size_t cl_len, bool te)
{
    if (cl) {
        char dec[MK_GW_DEC_MAX];
        return mk_gw_content_length(cl, cl_len, dec) > 0 && strcmp(dec, "0") != 0;
    }
    return te;
}

bool mk_gw_has_body(const struct mk_api *api, struct mk_request *r)
{
    size_t len, tl;
    const char *cl = api->header(r, "Content-Length", &len);
    return mk_gw_has_body_of(cl, len, !cl && api->header(r, "Transfer-Encoding", &tl) != NULL);
}

/* A slice as a NUL-terminated copy in request memory. */
static char *gw_cstr(const struct mk_api *api, struct mk_request *r, const struct mk_gw_slice *s)
{
    char *p = api->alloc(r, s->len + 1);
    if (p) {
        memcpy(p, s->p, s->len);
        p[s->len] = '\0';
    }
    return p;
}

int mk_gw_head_apply(const struct mk_api *api, struct mk_request *r, const struct mk_gw_head *h,
                     int nph)
{
    int status = h->status;

    if (!nph && !status && h->location.p) {
        if (mk_gw_location_is_local(&h->location)) {
            return MK_DECLINED;
        }
        status = 302;
    }
    if (!status) {
        status = 200;
    }
    api->set_status(r, status);
    if (h->content_type.p) {
        char *ct = gw_cstr(api, r, &h->content_type);
        if (!ct) {
            return MK_ERR;
        }
        api->set_content_type(r, ct);
    }
    if (h->location.p) {
        char *loc = gw_cstr(api, r, &h->location);
        if (!loc || api->add_header(r, "Location", loc) != MK_OK) {
            return MK_ERR;
        }
    }
    for (unsigned i = 0; i < h->n_fields; i++) {
        const struct mk_gw_field *f = &h->fields[i];
        if (mk_gw_field_is_framing(&f->name)) {
            continue;
        }
        char *name = gw_cstr(api, r, &f->name);
        char *value = gw_cstr(api, r, &f->value);
        if (!name || !value || api->add_header(r, name, value) != MK_OK) {
            return MK_ERR;
        }
    }
    return status;
}

/* The URL path of X-Sendfile's file path v (under the document root), '%', '?' and '#' escaped. */
static char *gw_sendfile_path(const struct mk_api *api, struct mk_request *r,
                              const struct mk_gw_slice *v, int *status)
{
    const char *root = api->docroot(r);
    size_t rlen = strlen(root);
    while (rlen > 1 && root[rlen - 1] == '/') {
        rlen--;
    }
    if (v->len <= rlen || memcmp(v->p, root, rlen) != 0 || v->p[rlen] != '/') {
        api->log(MK_PLUGIN_LOG_ERROR, "X-Sendfile: %.*s is not under the document root",
                 (int) v->len, v->p);
        *status = 403;
        return NULL;
    }
    char *out = api->alloc(r, 3 * (v->len - rlen) + 1), *w = out;
    if (!out) {
        *status = 500;
        return NULL;
    }
    for (size_t i = rlen; i < v->len; i++) {
        char c = v->p[i];
        if (c == '%' || c == '?' || c == '#') {
            *w++ = '%';
            *w++ = "0123456789ABCDEF"[(unsigned char) c >> 4];
            *w++ = "0123456789ABCDEF"[c & 15];
            continue;
        }
        *w++ = c;
    }
    *w = '\0';
    return out;
}

int mk_gw_sendfile(const struct mk_api *api, struct mk_request *r, struct mk_gw_head *h)
{
    unsigned i;
    int accel = 0;
    for (i = 0; i < h->n_fields; i++) {
        const struct mk_gw_slice *n = &h->fields[i].name;
        if ((n->len == 16 && strncasecmp(n->p, "X-Accel-Redirect", 16) == 0) ||
            (n->len == 10 && strncasecmp(n->p, "X-Sendfile", 10) == 0)) {
            accel = n->len == 16;
            break;
        }
    }
    if (i == h->n_fields || !MK_API_HAS(api, serve_file)) {
        return MK_DECLINED;
    }
    struct mk_gw_slice v = h->fields[i].value;
    memmove(&h->fields[i], &h->fields[i + 1], (h->n_fields - i - 1) * sizeof(h->fields[0]));
    h->n_fields--;
    int status = 502;
    char *path;
    if (accel) {
        const char *q = memchr(v.p, '?', v.len);
        path = v.len && v.p[0] == '/'
                   ? gw_cstr(api, r, &(struct mk_gw_slice){v.p, q ? (size_t) (q - v.p) : v.len})
                   : NULL;
    }
    else {
        path = gw_sendfile_path(api, r, &v, &status);
    }
    if (!path) {
        return status;
    }
    h->status = 0;
    h->content_type.p = h->location.p = NULL;
    h->content_type.len = h->location.len = 0;
    if (mk_gw_head_apply(api, r, h, 0) != 200) {
        return 502;
    }
    int rc = api->serve_file(r, path);
    return rc == MK_ERR ? 502 : rc;
}

void mk_gw_note_upstream(const struct mk_api *api, struct mk_request *r, uint64_t start_ms)
{
    char ms[24];
    if (r && MK_API_HAS(api, note_set)) {
        ms[mk_u64_dec(api->now_ms() - start_ms, ms)] = '\0';
        api->note_set(r, "upstream_ms", ms);
    }
}
