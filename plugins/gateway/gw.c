/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * gw.c: meta-variables and response heads of the gateways (see gw.h).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

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

/* HTTP_<NAME> for header i, unless it is left out (see gw.h). */
static void gw_header_var(const struct mk_api *api, struct mk_request *r,
                          const struct mk_gw_script *s, unsigned i, struct gw_emit *e)
{
    const char *name, *value;
    size_t nlen, vlen;
    char var[GW_NAME_MAX];

    if (api->header_at(r, i, &name, &nlen, &value, &vlen) != MK_OK || nlen == 0 ||
        nlen + 5 >= sizeof(var)) {
        return;
    }
    if ((nlen == 5 && strncasecmp(name, "Proxy", 5) == 0) ||
        (nlen == 12 && strncasecmp(name, "Content-Type", 12) == 0) ||
        (nlen == 14 && strncasecmp(name, "Content-Length", 14) == 0) ||
        (nlen == 17 && strncasecmp(name, "Transfer-Encoding", 17) == 0) ||
        (!s->pass_authorization && nlen == 13 && strncasecmp(name, "Authorization", 13) == 0) ||
        (!s->pass_proxy_authorization && nlen == 19 &&
         strncasecmp(name, "Proxy-Authorization", 19) == 0)) {
        return;
    }
    /* Repeated names: only the first occurrence emits, with every value joined. */
    for (unsigned j = 0; j < i; j++) {
        const char *n2, *v2;
        size_t n2len, v2len;
        if (api->header_at(r, j, &n2, &n2len, &v2, &v2len) == MK_OK && n2len == nlen &&
            strncasecmp(n2, name, nlen) == 0) {
            return;
        }
    }
    memcpy(var, "HTTP_", 5);
    for (size_t k = 0; k < nlen; k++) {
        char c = name[k];
        if (c == '-') {
            c = '_';
        }
        else if (c >= 'a' && c <= 'z') {
            c = (char) (c - 'a' + 'A');
        }
        else if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) {
            return;
        }
        var[5 + k] = c;
    }
    var[5 + nlen] = '\0';

    size_t total = vlen;
    unsigned n = api->header_count(r);
    for (unsigned j = i + 1; j < n; j++) {
        const char *n2, *v2;
        size_t n2len, v2len;
        if (api->header_at(r, j, &n2, &n2len, &v2, &v2len) == MK_OK && n2len == nlen &&
            strncasecmp(n2, name, nlen) == 0) {
            total += 2 + v2len;
        }
    }
    if (total == vlen) {
        gw_put(e, var, value, vlen);
        return;
    }
    char *joined = api->alloc(r, total);
    if (!joined) {
        e->rc = MK_ERR;
        return;
    }
    size_t off = 0;
    memcpy(joined, value, vlen);
    off = vlen;
    for (unsigned j = i + 1; j < n; j++) {
        const char *n2, *v2;
        size_t n2len, v2len;
        if (api->header_at(r, j, &n2, &n2len, &v2, &v2len) == MK_OK && n2len == nlen &&
            strncasecmp(n2, name, nlen) == 0) {
            memcpy(joined + off, ", ", 2);
            memcpy(joined + off + 2, v2, v2len);
            off += 2 + v2len;
        }
    }
    gw_put(e, var, joined, total);
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

/* v in decimal into out (room for 20 digits); the length, no NUL. */
static size_t gw_u64(uint64_t v, char *out)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char) ('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++) {
        out[i] = tmp[n - 1 - i];
    }
    return n;
}

/*
 * The address of sa as text into out (64 bytes, NUL terminated): IPv4
 * without printf (this runs for every request), IPv6 by inet_ntop, an
 * IPv4-mapped IPv6 address in IPv4 form. "" for another family.
 */
static void gw_addr_text(const struct sockaddr *sa, char out[64])
{
    const uint8_t *v4 = NULL;
    out[0] = '\0';
    if (sa->sa_family == AF_INET) {
        v4 = (const uint8_t *) &((const struct sockaddr_in *) sa)->sin_addr;
    }
    else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *) sa)->sin6_addr;
        if (!IN6_IS_ADDR_V4MAPPED(a)) {
            inet_ntop(AF_INET6, a, out, 64);
            return;
        }
        v4 = a->s6_addr + 12;
    }
    if (!v4) {
        return;
    }
    size_t n = 0;
    for (int i = 0; i < 4; i++) {
        n += gw_u64(v4[i], out + n);
        out[n++] = i < 3 ? '.' : '\0';
    }
}

static void gw_port_var(struct gw_emit *e, const char *name, const struct sockaddr *sa)
{
    char port[8];
    gw_put(e, name, port, gw_u64(gw_port(sa), port));
}

static void gw_addresses(const struct mk_api *api, struct mk_request *r, struct gw_emit *e)
{
    char text[64];
    socklen_t slen = 0;

    const struct sockaddr *sa = api->remote_sockaddr(r, &slen);
    if (sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6)) {
        gw_addr_text(sa, text);
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
        gw_addr_text(ls, text);
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
    gw_put(e, "REQUEST_URI", v, len);
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
        gw_put(e, "CONTENT_LENGTH", v, len);
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
    unsigned n = api->header_count(r);
    for (unsigned i = 0; i < n && e.rc == MK_OK; i++) {
        gw_header_var(api, r, s, i, &e);
    }
    return e.rc;
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
        ms[gw_u64(api->now_ms() - start_ms, ms)] = '\0';
        api->note_set(r, "upstream_ms", ms);
    }
}
