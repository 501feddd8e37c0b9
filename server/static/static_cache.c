/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * static_cache.c: CacheControl rules (see static_cache.h).
 *
 * Expires is derived from the rule's max-age (now + max-age, on the
 * worker's clock that also gives Date), for HTTP/1.0 caches; a rule
 * without max-age sends no Expires. Rules are few: a linear scan.
 */
#include "static_cache.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "../../core/clock.h"
#include "../../core/memory.h"
#include "../../core/strings.h"
#include "../config/conf.h"
#include "../conn/conn.h"
#include "../http/path.h"
#include "../http/rules.h"
#include "../request/request.h"
#include "../runtime/worker.h"

static bool mk_cache_tchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Is `m` a match: a normalised path prefix or ".ext" (no '/')? */
static bool mk_cache_match_valid(const char *m, size_t len, bool *ext)
{
    if (len >= 2 && m[0] == '.') {
        *ext = true;
        for (size_t i = 1; i < len; i++) {
            if (m[i] == '/' || m[i] == '.' || !mk_cache_tchar(m[i])) {
                return false;
            }
        }
        return true;
    }
    *ext = false;
    if (len == 0 || m[0] != '/' || len > MK_FALLBACK_MAX) {
        return false;
    }
    char norm[MK_FALLBACK_MAX + 2];
    ssize_t n = mk_path_normalize(m, len, norm);
    return n > 0 && (size_t) n == len && memcmp(norm, m, len) == 0;
}

bool mk_static_cache_conf(struct mk_cache_rules *rules, const char *value, char *reason, size_t len)
{
    const char *cur = value, *m;
    size_t mlen;
    bool ext;
    int64_t max_age;

    if (!mk_conf_word(&cur, &m, &mlen)) {
        snprintf(reason, len, "CacheControl: expected a path prefix or .ext, then directives");
        return false;
    }
    if (!mk_cache_match_valid(m, mlen, &ext)) {
        snprintf(reason, len,
                 "CacheControl: '%.*s' is neither a normalised path prefix (/assets/) nor an "
                 "extension (.css)",
                 (int) mlen, m);
        return false;
    }
    while (*cur == ' ' || *cur == '\t') {
        cur++;
    }
    if (!*cur || !mk_http_cache_control_check(cur, &max_age)) {
        snprintf(reason, len,
                 "CacheControl %.*s: '%s' is not a Cache-Control value such as max-age=3600, "
                 "immutable",
                 (int) mlen, m, cur);
        return false;
    }
    for (size_t i = 0; i < rules->n; i++) {
        const struct mk_cache_rule *o = &rules->v[i];
        if (o->match_len == mlen &&
            (ext ? strncasecmp(o->match, m, mlen) == 0 : memcmp(o->match, m, mlen) == 0)) {
            snprintf(reason, len, "CacheControl %.*s is given twice", (int) mlen, m);
            return false;
        }
    }
    rules->v = mk_realloc(rules->v, (rules->n + 1) * sizeof(*rules->v));
    struct mk_cache_rule *r = &rules->v[rules->n++];
    r->match = mk_strndup(m, mlen);
    r->match_len = mlen;
    r->ext = ext;
    size_t vlen = strlen(cur);
    while (vlen && (cur[vlen - 1] == ' ' || cur[vlen - 1] == '\t')) {
        vlen--;
    }
    r->value = mk_strndup(cur, vlen);
    r->value_len = vlen;
    r->max_age = max_age;
    return true;
}

int mk_static_cache_set(void *obj, const struct mk_conf_key *k, const char *value,
                        const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct mk_site *vh = obj;

    (void) k;
    (void) origin;
    return mk_static_cache_conf(&vh->cache_rules, value, reason, len) ? MK_OK : MK_ERR;
}

void mk_static_cache_free(struct mk_cache_rules *rules)
{
    for (size_t i = 0; i < rules->n; i++) {
        mk_free(rules->v[i].match);
        mk_free(rules->v[i].value);
    }
    mk_free(rules->v);
    rules->v = NULL;
    rules->n = 0;
}

const struct mk_cache_rule *mk_static_cache_find(const struct mk_cache_rules *rules,
                                                 const char *path, size_t path_len,
                                                 const char *name, size_t name_len)
{
    const struct mk_cache_rule *prefix = NULL, *ext = NULL, *root = NULL;
    const char *dot = NULL;

    for (size_t i = name_len; i > 0 && name[i - 1] != '/'; i--) {
        if (name[i - 1] == '.') {
            dot = name + i - 1;
            break;
        }
    }
    for (size_t i = 0; i < rules->n; i++) {
        const struct mk_cache_rule *r = &rules->v[i];
        if (r->ext) {
            if (dot && (size_t) (name + name_len - dot) == r->match_len &&
                strncasecmp(dot, r->match, r->match_len) == 0) {
                ext = r;
            }
        }
        else if (r->match_len == 1) {
            root = r;
        }
        else if (r->match_len <= path_len && memcmp(path, r->match, r->match_len) == 0 &&
                 (!prefix || r->match_len > prefix->match_len)) {
            prefix = r;
        }
    }
    return prefix ? prefix : ext ? ext : root;
}

#ifdef MK_HAVE_RULES
bool mk_static_cache_wanted(const struct mk_request *r)
{
    if (r->rule_settings && r->rule_settings->cache_control) {
        return true;
    }
    return r->site->cache_rules.n > 0;
}
#endif

void mk_static_cache_headers(struct mk_request *r, const char *name, size_t name_len)
{
    const struct mk_cache_rules *rules = &r->site->cache_rules;
    const struct mk_cache_rule *rule =
        mk_static_cache_find(rules, r->path, r->path_len, name, name_len);
    struct mk_cache_rule own;

#ifdef MK_HAVE_RULES
    const struct mk_rule *set = r->rule_settings;
    if (set && set->cache_control) { /* the rule's, over the site's */
        own.value = set->cache_control;
        own.value_len = set->cache_control_len;
        own.max_age = set->cache_max_age;
        rule = &own;
    }
#else
    (void) own;
#endif
    if (!rule) {
        return;
    }
    mk_response_add_known(r, MK_RESP_CACHE_CONTROL, rule->value, rule->value_len);
    if (rule->max_age < 0) {
        return;
    }
    char *date = mk_arena_alloc(&r->arena, MK_HTTP_DATE_LEN);
    if (date) {
        mk_http_date_format(r->conn->worker->now + (time_t) rule->max_age, date);
        mk_response_add_known(r, MK_RESP_EXPIRES, date, MK_HTTP_DATE_LEN);
    }
}
