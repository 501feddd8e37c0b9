/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * schema.c: declarative configuration keys (see schema.h). Values are read
 * with the typed readers of config.c, so a key's messages are the same
 * whoever declares it.
 */
#include "schema.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <monkey/mk_common.h>

#include "memory.h"
#include "strings.h"

#define MK_SCHEMA_REASON 4096 /* a reason may quote a long value (Fallback, CacheControl) */

static bool mk_key_in_scope(const struct mk_conf_key *k, int scope)
{
    return (k->flags & MK_CONF_SITE) == (unsigned) scope;
}

size_t mk_schema_count(const struct mk_conf_schema *schema)
{
    size_t n = 0;
    while (schema->keys[n].name) {
        n++;
    }
    return n;
}

const struct mk_conf_key *mk_schema_find(const struct mk_conf_schema *schema, int scope,
                                         const char *name)
{
    for (const struct mk_conf_key *k = schema->keys; k->name; k++) {
        if (mk_key_in_scope(k, scope) && strcasecmp(k->name, name) == 0) {
            return k;
        }
    }
    return NULL;
}

/* ---- addresses ------------------------------------------------------------- */

int mk_schema_parse_address(const char *v, struct mk_conf_address *out, char *reason, size_t len)
{
    char host[INET6_ADDRSTRLEN + 1];
    const char *port_str;
    uint64_t port;

    memset(out, 0, sizeof(*out));
    if (v[0] == '[') {
        const char *close = strchr(v, ']');
        if (!close || close[1] != ':' || (size_t) (close - v - 1) >= sizeof(host)) {
            snprintf(reason, len, "expected [IPv6]:PORT, got '%s'", v);
            return MK_ERR;
        }
        memcpy(host, v + 1, (size_t) (close - v - 1));
        host[close - v - 1] = '\0';
        port_str = close + 2;
    }
    else if (strchr(v, ':')) {
        const char *colon = strrchr(v, ':');
        if ((size_t) (colon - v) >= sizeof(host)) {
            snprintf(reason, len, "bad address '%s'", v);
            return MK_ERR;
        }
        memcpy(host, v, (size_t) (colon - v));
        host[colon - v] = '\0';
        port_str = colon + 1;
    }
    else {
        host[0] = '\0';
        port_str = v;
    }
    if (!mk_str_to_u64(port_str, strlen(port_str), 65535, &port) || port == 0) {
        snprintf(reason, len, "'%s' is not a port number (1 to 65535)", port_str);
        return MK_ERR;
    }

    struct sockaddr_in *in4 = (struct sockaddr_in *) &out->addr;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &out->addr;
    if (host[0] == '\0' || strcmp(host, "*") == 0) {
        out->any = true;
        in6->sin6_family = AF_INET6;
        in6->sin6_addr = in6addr_any;
        in6->sin6_port = htons((uint16_t) port);
        out->addrlen = sizeof(*in6);
    }
    else if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t) port);
        out->addrlen = sizeof(*in4);
    }
    else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t) port);
        out->addrlen = sizeof(*in6);
    }
    else {
        snprintf(reason, len, "'%s' is not a numeric IPv4 or IPv6 address", host);
        return MK_ERR;
    }
    return MK_OK;
}

/* ---- storing values -------------------------------------------------------- */

/* Store n into an integer field of k->size bytes (the range fits the field). */
static void mk_store_int(void *field, size_t size, long long n)
{
    switch (size) {
    case 1: {
        int8_t v = (int8_t) n;
        memcpy(field, &v, 1);
        break;
    }
    case 2: {
        int16_t v = (int16_t) n;
        memcpy(field, &v, 2);
        break;
    }
    case 4: {
        int32_t v = (int32_t) n;
        memcpy(field, &v, 4);
        break;
    }
    default: {
        int64_t v = (int64_t) n;
        memcpy(field, &v, 8);
        break;
    }
    }
}

static void mk_words_free(struct mk_conf_words *w)
{
    for (size_t i = 0; i < w->n; i++) {
        mk_free(w->v[i]);
    }
    mk_free(w->v);
    w->v = NULL;
    w->n = 0;
}

/* "a, b or c" of an ENUM's words, into buf. */
static void mk_enum_list(const struct mk_conf_key *k, char *buf, size_t len)
{
    size_t n = 0, used = 0;

    while (k->words[n]) {
        n++;
    }
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < len; i++) {
        const char *sep = i == 0 ? "" : (i + 1 == n ? " or " : ", ");
        int w = snprintf(buf + used, len - used, "%s%s", sep, k->words[i]);
        if (w < 0) {
            break;
        }
        used += (size_t) w;
    }
}

/* Run k->check on the text; false with "Key: reason" written. */
static bool mk_run_check(const struct mk_conf_key *k, const char *text, char *why, size_t len)
{
    char reason[MK_SCHEMA_REASON];

    if (!k->check) {
        return true;
    }
    reason[0] = '\0';
    if (k->check(text, reason, sizeof(reason)) == MK_OK) {
        return true;
    }
    snprintf(why, len, "%s: %s", k->name, reason[0] ? reason : "bad value");
    return false;
}

static bool mk_set_words(const struct mk_conf_key *k, struct mk_conf_words *w, const char *value,
                         char *why, size_t len)
{
    const char *cur = value, *word;
    size_t wlen, n = 0;
    struct mk_conf_words fresh = {0};

    while (mk_conf_word(&cur, &word, &wlen)) {
        n++;
    }
    fresh.v = mk_calloc(n + 1, sizeof(char *));
    cur = value;
    while (mk_conf_word(&cur, &word, &wlen)) {
        fresh.v[fresh.n++] = mk_strndup(word, wlen);
        if (!mk_run_check(k, fresh.v[fresh.n - 1], why, len)) {
            mk_words_free(&fresh);
            return false;
        }
    }
    if (!(k->flags & MK_CONF_MULTI) || !w->v) {
        mk_words_free(w);
        *w = fresh;
        return true;
    }
    w->v = mk_realloc(w->v, (w->n + fresh.n + 1) * sizeof(char *));
    memcpy(w->v + w->n, fresh.v, fresh.n * sizeof(char *));
    w->n += fresh.n;
    w->v[w->n] = NULL;
    mk_free(fresh.v);
    return true;
}

static char *mk_schema_path(const char *confdir, const char *value)
{
    if (value[0] == '/' || !confdir) {
        return mk_strdup(value);
    }
    size_t n = strlen(confdir) + strlen(value) + 2;
    char *out = mk_alloc(n);
    snprintf(out, n, "%s/%s", confdir, value);
    return out;
}

/*
 * Check and store one value of key k. `conf` and `line` place it for
 * messages; `where` is the same as text for callbacks.
 */
static bool mk_schema_set(const struct mk_conf_key *k, void *obj, const struct mk_conf *conf,
                          int line, const char *value, const struct mk_conf_origin *origin,
                          char *err, size_t errlen)
{
    struct mk_conf_entry e = {.key = (char *) k->name, .value = (char *) value, .line = line};
    char why[MK_SCHEMA_REASON + 64], reason[MK_SCHEMA_REASON];
    char *field = (char *) obj + k->offset;
    long n;
    uint64_t sz;
    bool b;

    why[0] = '\0';
    switch (k->type) {
    case MK_CONF_BOOL:
        if (!mk_conf_bool(conf, &e, &b, err, errlen)) {
            return false;
        }
        memcpy(field, &b, sizeof(b));
        return true;
    case MK_CONF_INT:
        if (!mk_conf_int(conf, &e, (long) k->min, (long) k->max, &n, err, errlen)) {
            return false;
        }
        if (!mk_run_check(k, value, why, sizeof(why))) {
            break;
        }
        mk_store_int(field, k->size, n);
        return true;
    case MK_CONF_SIZE:
        if (!mk_conf_size(conf, &e, (uint64_t) k->min, (uint64_t) k->max, &sz, err, errlen)) {
            return false;
        }
        mk_store_int(field, k->size, (long long) sz);
        return true;
    case MK_CONF_DURATION:
        if (!mk_conf_duration(conf, &e, (uint64_t) k->min, (uint64_t) k->max, &sz, err, errlen)) {
            return false;
        }
        mk_store_int(field, k->size, (long long) sz);
        return true;
    case MK_CONF_STRING:
    case MK_CONF_PATH:
        if (k->type == MK_CONF_STRING && k->max > 0 && strlen(value) > (size_t) k->max) {
            snprintf(why, sizeof(why), "%s: longer than %lld bytes", k->name, k->max);
            break;
        }
        if (value[0] == '\0') {
            snprintf(why, sizeof(why), "%s: expected a value", k->name);
            break;
        }
        if (!mk_run_check(k, value, why, sizeof(why))) {
            break;
        }
        char **slot = (char **) (void *) field;
        mk_free(*slot);
        *slot = k->type == MK_CONF_PATH ? mk_schema_path(origin->confdir, value) : mk_strdup(value);
        return true;
    case MK_CONF_ENUM:
        for (size_t i = 0; k->words[i]; i++) {
            if (strcasecmp(value, k->words[i]) == 0) {
                mk_store_int(field, k->size, (long long) i);
                return true;
            }
        }
        mk_enum_list(k, reason, sizeof(reason));
        snprintf(why, sizeof(why), "%s: expected %s, got '%s'", k->name, reason, value);
        break;
    case MK_CONF_ADDRESS:
        if (mk_schema_parse_address(value, (struct mk_conf_address *) (void *) field, reason,
                                    sizeof(reason)) != MK_OK) {
            snprintf(why, sizeof(why), "%s: %s", k->name, reason);
            break;
        }
        return true;
    case MK_CONF_WORDS:
        if (!mk_set_words(k, (struct mk_conf_words *) (void *) field, value, why, sizeof(why))) {
            break;
        }
        return true;
    case MK_CONF_CUSTOM:
        reason[0] = '\0';
        if (k->set(obj, k, value, origin, reason, sizeof(reason)) == MK_OK) {
            return true;
        }
        if ((k->flags & MK_SCHEMA_WHOLE_REASON) && reason[0]) {
            snprintf(why, sizeof(why), "%s", reason);
            break;
        }
        snprintf(why, sizeof(why), "%s: %s", k->name, reason[0] ? reason : "bad value");
        break;
    default:
        snprintf(why, sizeof(why), "%s: the schema gives an unknown type %d", k->name, k->type);
        break;
    }
    return mk_conf_error(conf, line, err, errlen, "%s", why);
}

/* ---- filling a struct ------------------------------------------------------ */

static void mk_schema_record(struct mk_schema_record *rec, const char *value, const char *where)
{
    if (!rec) {
        return;
    }
    mk_free(rec->text);
    mk_free(rec->where);
    rec->text = mk_strdup(value);
    rec->where = mk_strdup(where);
}

static bool mk_overridden(const struct mk_schema_input *in, const struct mk_conf_key *k)
{
    for (size_t i = 0; i < in->n_ov; i++) {
        if (strcasecmp(in->ov[i].key, k->name) == 0) {
            return true;
        }
    }
    return false;
}

/*
 * A line giving key `key` the value `value`, for a part this build left
 * out (in->absent): MK_ERR with "KEY VALUE: this server was built without
 * PART" written at conf:line, MK_DECLINED when it asks for nothing missing
 * (the caller skips it), MK_OK when the key is not one of them.
 */
static int mk_schema_absent(const struct mk_schema_input *in, const struct mk_conf *conf, int line,
                            const char *key, const char *value, char *err, size_t errlen)
{
    for (const struct mk_schema_absent *a = in->absent; a && a->key; a++) {
        if (strcasecmp(a->key, key) != 0 || (a->value && strcasecmp(a->value, value) != 0)) {
            continue;
        }
        struct mk_conf_entry e = {.key = (char *) key, .value = (char *) value};
        bool b;
        if (a->off && mk_conf_bool(NULL, &e, &b, NULL, 0) && !b) {
            return MK_DECLINED;
        }
        mk_conf_error(conf, line, err, errlen, "%s %s: this server was built without %s", key,
                      value, a->part);
        return MK_ERR;
    }
    return MK_OK;
}

static bool mk_schema_fill_file(const struct mk_conf_schema *schema,
                                const struct mk_schema_input *in, void *obj, bool *seen, int *lines,
                                char *err, size_t errlen)
{
    const struct mk_conf *conf = in->conf;
    struct mk_list *it, *eit;
    char where[PATH_MAX + 32];

    mk_list_foreach (it, &conf->sections) {
        struct mk_conf_section *s = mk_list_entry(it, struct mk_conf_section, node);
        if (in->only && s != in->only) {
            continue;
        }
        if (strcasecmp(s->name, schema->section) != 0) {
            if (in->own_file) {
                return mk_conf_error(conf, s->line, err, errlen,
                                     "unknown section [%s] (expected [%s])", s->name,
                                     schema->section);
            }
            continue;
        }
        mk_list_foreach (eit, &s->entries) {
            struct mk_conf_entry *e = mk_list_entry(eit, struct mk_conf_entry, node);
            int absent = mk_schema_absent(in, conf, e->line, e->key, e->value, err, errlen);
            if (absent != MK_OK) {
                if (absent == MK_ERR) {
                    return false;
                }
                continue;
            }
            const struct mk_conf_key *k = mk_schema_find(schema, in->scope, e->key);
            if (!k) {
                return mk_conf_error(conf, e->line, err, errlen, "unknown key '%s' in [%s]", e->key,
                                     schema->section);
            }
            size_t idx = (size_t) (k - schema->keys);
            if (seen[idx] && !(k->flags & MK_CONF_MULTI)) {
                return mk_conf_error(conf, e->line, err, errlen, "'%s' is given twice", k->name);
            }
            if (!seen[idx]) {
                lines[idx] = e->line;
            }
            seen[idx] = true;
            if (mk_overridden(in, k)) {
                continue; /* the command line replaces the file's lines */
            }
            int file_line;
            const char *file = mk_conf_where(conf, e->line, &file_line);
            snprintf(where, sizeof(where), "%s:%d", file, file_line);
            struct mk_conf_origin origin = {.where = where, .confdir = in->confdir};
            if (!mk_schema_set(k, obj, conf, e->line, e->value, &origin, err, errlen)) {
                return false;
            }
            mk_schema_record(in->records ? &in->records[idx] : NULL, e->value, where);
        }
    }
    return true;
}

int mk_schema_fill(const struct mk_conf_schema *schema, const struct mk_schema_input *in, void *obj,
                   char *err, size_t errlen)
{
    size_t n = mk_schema_count(schema);
    bool *seen = mk_calloc(n + 1, sizeof(bool));
    int *lines = mk_calloc(n + 1, sizeof(int)); /* where each key was first given */
    int rc = MK_ERR;

    if (in->conf && !mk_schema_fill_file(schema, in, obj, seen, lines, err, errlen)) {
        goto out;
    }

    struct mk_conf cmdline = {.path = "command line"};
    struct mk_conf_origin cmd_origin = {.where = "command line:0", .confdir = in->confdir};
    for (size_t i = 0; i < in->n_ov; i++) {
        int absent = mk_schema_absent(in, &cmdline, 0, in->ov[i].key, in->ov[i].value, err, errlen);
        if (absent == MK_ERR) {
            goto out;
        }
        if (absent == MK_DECLINED) {
            continue;
        }
        const struct mk_conf_key *k = mk_schema_find(schema, in->scope, in->ov[i].key);
        if (!k) {
            mk_conf_error(&cmdline, 0, err, errlen, "unknown key '%s'", in->ov[i].key);
            goto out;
        }
        if (!mk_schema_set(k, obj, &cmdline, 0, in->ov[i].value, &cmd_origin, err, errlen)) {
            goto out;
        }
        size_t idx = (size_t) (k - schema->keys);
        mk_schema_record(in->records ? &in->records[idx] : NULL, in->ov[i].value, "command line");
        seen[idx] = true;
    }

    struct mk_conf builtin = {.path = "built-in default"};
    struct mk_conf_origin def_origin = {.where = "built-in default:0", .confdir = in->confdir};
    for (size_t i = 0; i < n; i++) {
        const struct mk_conf_key *k = &schema->keys[i];
        if (seen[i] || !k->fallback || !mk_key_in_scope(k, in->scope)) {
            continue;
        }
        if (!mk_schema_set(k, obj, &builtin, 0, k->fallback, &def_origin, err, errlen)) {
            goto out;
        }
        mk_schema_record(in->records ? &in->records[i] : NULL, k->fallback, "built-in default");
    }

    if (schema->finish) {
        char reason[MK_SCHEMA_REASON];
        const char *key = NULL;
        reason[0] = '\0';
        if (schema->finish(obj, in->scope, &key, reason, sizeof(reason)) != MK_OK) {
            const struct mk_conf_section *sec = in->only ? in->only
                                                : in->conf
                                                    ? mk_conf_section(in->conf, schema->section)
                                                    : NULL;
            const struct mk_conf_key *k = key ? mk_schema_find(schema, in->scope, key) : NULL;
            int line =
                k && lines[k - schema->keys] ? lines[k - schema->keys] : (sec ? sec->line : 0);
            mk_conf_error(in->conf ? in->conf : &builtin, line, err, errlen, "%s",
                          reason[0] ? reason : "the settings do not fit together");
            goto out;
        }
    }
    if (in->lines) {
        memcpy(in->lines, lines, n * sizeof(int));
    }
    rc = MK_OK;
out:
    mk_free(lines);
    mk_free(seen);
    return rc;
}

void mk_schema_release(const struct mk_conf_schema *schema, int scope, void *obj)
{
    if (!obj) {
        return;
    }
    if (schema->free) {
        schema->free(obj, scope);
    }
    for (const struct mk_conf_key *k = schema->keys; k->name; k++) {
        char *field = (char *) obj + k->offset;
        if (!mk_key_in_scope(k, scope)) {
            continue;
        }
        if (k->type == MK_CONF_STRING || k->type == MK_CONF_PATH) {
            char **slot = (char **) (void *) field;
            mk_free(*slot);
            *slot = NULL;
        }
        else if (k->type == MK_CONF_WORDS) {
            mk_words_free((struct mk_conf_words *) (void *) field);
        }
    }
}

void *mk_schema_new(const struct mk_conf_schema *schema, const struct mk_schema_input *in,
                    char *err, size_t errlen)
{
    size_t size = in->scope ? schema->site_size : schema->size;
    void *obj = mk_calloc(1, size ? size : 1);

    if (mk_schema_fill(schema, in, obj, err, errlen) != MK_OK) {
        mk_schema_delete(schema, in->scope, obj);
        return NULL;
    }
    return obj;
}

void mk_schema_delete(const struct mk_conf_schema *schema, int scope, void *obj)
{
    if (obj) {
        mk_schema_release(schema, scope, obj);
        mk_free(obj);
    }
}
