/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * px_fconf.c: the [PROXY] site keys of the fields that go upstream and
 * come back (px_conf.c declares them): Host, RequestHeader and
 * ResponseHeader lines, and the Redirect, CookiePath and CookieDomain
 * maps. Each line is checked whole here, so that monkey -t names its file
 * and line: a field name that is no token, a hop-by-hop or framing field
 * (px_field_refused), a value with a control byte, a word too many.
 * The request side applies them in px_req.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proxy.h"

const char *const px_xff_words[] = {"append", "replace", "off", NULL};

static bool px_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* The next word of *p (advanced past it and the blanks after it): its start and length. */
static const char *px_word(const char **p, size_t *len)
{
    const char *s = *p;
    while (px_blank(*s)) {
        s++;
    }
    const char *e = s;
    while (*e && !px_blank(*e)) {
        e++;
    }
    *len = (size_t) (e - s);
    while (px_blank(*e)) {
        e++;
    }
    *p = e;
    return *len ? s : NULL;
}

/* "KEEP" or a host name (and port) without blanks or control bytes. */
int px_set_host(void *obj, const struct mk_conf_key *k, const char *value,
                const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct px_fields_conf *f = &((struct px_site_conf *) obj)->fields;

    (void) k;
    (void) origin;
    free(f->host);
    f->host = NULL;
    if (strcasecmp(value, "KEEP") == 0) {
        return MK_OK;
    }
    for (const char *p = value; *p; p++) {
        if ((unsigned char) *p <= 0x20 || *p == 0x7f || *p == ',' || *p == '"') {
            snprintf(reason, len, "expected KEEP or a host name (and :PORT): '%s'", value);
            return MK_ERR;
        }
    }
    if (!*value) {
        snprintf(reason, len, "expected KEEP or a host name");
        return MK_ERR;
    }
    return (f->host = strdup(value)) ? MK_OK : px_oom(reason, len);
}

/*
 * RequestHeader "set NAME VALUE" | "remove NAME"; ResponseHeader "set|add
 * NAME VALUE" | "remove NAME". VALUE is the rest of the line.
 */
int px_set_header_op(void *obj, const struct mk_conf_key *k, const char *value,
                     const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct px_fields_conf *f = &((struct px_site_conf *) obj)->fields;
    bool response = strcasecmp(k->name, "ResponseHeader") == 0;
    const char *p = value, *verb, *name;
    size_t vl, nl;
    struct px_hdr_op op = {0};

    (void) origin;
    verb = px_word(&p, &vl);
    name = px_word(&p, &nl);
    if (verb && vl == 3 && strncasecmp(verb, "set", 3) == 0) {
        op.verb = PX_HDR_SET;
    }
    else if (verb && response && vl == 3 && strncasecmp(verb, "add", 3) == 0) {
        op.verb = PX_HDR_ADD;
    }
    else if (verb && vl == 6 && strncasecmp(verb, "remove", 6) == 0) {
        op.verb = PX_HDR_REMOVE;
    }
    else {
        snprintf(reason, len, "expected %s NAME VALUE or remove NAME: '%s'",
                 response ? "set|add" : "set", value);
        return MK_ERR;
    }
    if (!name || (op.verb == PX_HDR_REMOVE) != (*p == '\0')) {
        snprintf(reason, len,
                 op.verb == PX_HDR_REMOVE ? "expected remove NAME: '%s'"
                                          : "expected set|add NAME VALUE: '%s'",
                 value);
        return MK_ERR;
    }
    if (!px_field_name_ok(name, nl)) {
        snprintf(reason, len, "not a field name: '%.*s'", (int) nl, name);
        return MK_ERR;
    }
    const char *why = px_field_refused(name, nl, response);
    if (why) {
        snprintf(reason, len, "%.*s cannot be set or removed: %s", (int) nl, name, why);
        return MK_ERR;
    }
    if (!px_field_value_ok(p, strlen(p))) {
        snprintf(reason, len, "the value of %.*s holds a control byte (CR, LF, NUL ...)", (int) nl,
                 name);
        return MK_ERR;
    }
    struct px_hdr_op **ops = response ? &f->resp : &f->req;
    size_t *n = response ? &f->n_resp : &f->n_req;
    for (size_t i = 0; i < *n && op.verb != PX_HDR_ADD; i++) {
        const struct px_hdr_op *o = &(*ops)[i];
        if (o->verb != PX_HDR_ADD && o->name_len == nl && strncasecmp(o->name, name, nl) == 0) {
            snprintf(reason, len, "%.*s is set or removed by an earlier line", (int) nl, name);
            return MK_ERR;
        }
    }
    op.name_len = nl;
    op.value_len = strlen(p);
    if (!(op.name = malloc(nl + 1 + op.value_len + 1))) {
        return px_oom(reason, len);
    }
    memcpy(op.name, name, nl);
    op.name[nl] = '\0';
    op.value = op.name + nl + 1;
    memcpy(op.value, p, op.value_len + 1);
    struct px_hdr_op *v = realloc(*ops, (*n + 1) * sizeof(*v));
    if (!v) {
        free(op.name);
        return px_oom(reason, len);
    }
    *ops = v;
    v[(*n)++] = op;
    return MK_OK;
}

/* Redirect "FROM TO" | "default"; CookiePath, CookieDomain "FROM TO". */
int px_set_map(void *obj, const struct mk_conf_key *k, const char *value,
               const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct px_fields_conf *f = &((struct px_site_conf *) obj)->fields;
    bool redirect = strcasecmp(k->name, "Redirect") == 0;
    bool path = strcasecmp(k->name, "CookiePath") == 0;
    struct px_map **maps = redirect ? &f->redirect : path ? &f->cpath : &f->cdomain;
    size_t *n = redirect ? &f->n_redirect : path ? &f->n_cpath : &f->n_cdomain;
    const char *p = value, *from, *to;
    size_t fl, tl;
    struct px_map m = {0};

    (void) origin;
    from = px_word(&p, &fl);
    to = px_word(&p, &tl);
    if (*n == PX_MAPS_MAX) {
        snprintf(reason, len, "more than %d %s lines", PX_MAPS_MAX, k->name);
        return MK_ERR;
    }
    if (redirect && from && !to && fl == 7 && strncasecmp(from, "default", 7) == 0) {
        for (size_t i = 0; i < *n; i++) {
            if (!(*maps)[i].from) {
                snprintf(reason, len, "Redirect default is given twice");
                return MK_ERR;
            }
        }
    }
    else if (!from || !to || *p) {
        snprintf(reason, len, "expected %s FROM TO%s: '%s'", k->name,
                 redirect ? " or Redirect default" : "", value);
        return MK_ERR;
    }
    else {
        /* words: no blank; the rest may not carry what a field value cannot, nor ';' in a cookie */
        if (!px_field_value_ok(from, fl) || !px_field_value_ok(to, tl) ||
            (!redirect && (memchr(from, ';', fl) || memchr(to, ';', tl)))) {
            snprintf(reason, len, "a control byte%s in '%s'", redirect ? "" : " or ';'", value);
            return MK_ERR;
        }
        if (path && (from[0] != '/' || to[0] != '/')) {
            snprintf(reason, len, "a cookie path starts with '/': '%s'", value);
            return MK_ERR;
        }
        char *text = malloc(fl + 1 + tl + 1);
        if (!text) {
            return px_oom(reason, len);
        }
        memcpy(text, from, fl);
        text[fl] = '\0';
        memcpy(text + fl + 1, to, tl);
        text[fl + 1 + tl] = '\0';
        m = (struct px_map){text, text + fl + 1, fl, tl};
    }
    struct px_map *v = realloc(*maps, (*n + 1) * sizeof(*v));
    if (!v) {
        free((char *) m.from);
        return px_oom(reason, len);
    }
    *maps = v;
    v[(*n)++] = m;
    return MK_OK;
}

static void px_maps_free(struct px_map *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free((char *) m[i].from);
    }
    free(m);
}

void px_fields_conf_free(struct px_fields_conf *f)
{
    free(f->host);
    for (size_t i = 0; i < f->n_req; i++) {
        free(f->req[i].name);
    }
    for (size_t i = 0; i < f->n_resp; i++) {
        free(f->resp[i].name);
    }
    free(f->req);
    free(f->resp);
    px_maps_free(f->redirect, f->n_redirect);
    px_maps_free(f->cpath, f->n_cpath);
    px_maps_free(f->cdomain, f->n_cdomain);
}
