/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * ratelimit.c: the RateLimit line of a [RULE] and the cookie a key may
 * name (ratelimit.h). Pure but for the allocation of the names.
 */
#include "ratelimit.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <monkey/mk_common.h>

#include "../../core/config.h"
#include "../../core/memory.h"
#include "../../core/ratelimit.h"
#include "http_chars.h"

#define REASON(...) (snprintf(reason, reason_len, __VA_ARGS__), MK_ERR)

/* "10/s", "600/m": the rate and its unit. */
static bool mk_rate_value(struct mk_rate_limit *l, const char *w, size_t len)
{
    const char *slash = memchr(w, '/', len);
    uint64_t n;

    if (!slash || (size_t) (w + len - slash) != 2 || (slash[1] != 's' && slash[1] != 'm') ||
        !mk_str_to_u64(w, (size_t) (slash - w), MK_RATE_MAX, &n) || n == 0) {
        return false;
    }
    l->rate = (uint32_t) n;
    l->per = (uint8_t) slash[1];
    l->interval_us = (l->per == 's' ? 1000000u : 60000000u) / n;
    return true;
}

/* "key=...": what the requests are told apart by. */
static bool mk_rate_key_value(struct mk_rate_limit *l, const char *v, size_t len)
{
    static const struct {
        const char *prefix;
        uint8_t key;
    } kinds[] = {{"header:", MK_RATE_KEY_HEADER}, {"cookie:", MK_RATE_KEY_COOKIE}};

    bool addr = len == 4 && memcmp(v, "addr", 4) == 0;
    if (addr || (len == 4 && memcmp(v, "path", 4) == 0)) {
        /* the last key= wins: a name of an earlier one goes */
        mk_free(l->name);
        l->name = NULL;
        l->name_len = 0;
        l->key = addr ? MK_RATE_KEY_ADDR : MK_RATE_KEY_PATH;
        return true;
    }
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        size_t pl = strlen(kinds[i].prefix);
        if (len <= pl || strncasecmp(v, kinds[i].prefix, pl) != 0) {
            continue;
        }
        for (size_t j = pl; j < len; j++) {
            unsigned char c = (unsigned char) v[j];
            /* a field name is a token; a cookie name too (RFC 6265 4.1.1) */
            if (!mk_is_tchar(c)) {
                return false;
            }
        }
        mk_free(l->name);
        l->key = kinds[i].key;
        l->name = mk_strndup(v + pl, len - pl);
        l->name_len = len - pl;
        return true;
    }
    return false;
}

int mk_rate_limit_parse(struct mk_rate_limit *l, const char *value, char *reason, size_t reason_len)
{
    const char *cur = value, *w;
    size_t len;
    uint64_t n;

    memset(l, 0, sizeof(*l));
    l->keys = MK_RATE_KEYS_DEFAULT;
    if (!mk_conf_word(&cur, &w, &len) || !mk_rate_value(l, w, len)) {
        return REASON("RateLimit %s: expected a rate such as 10/s or 600/m (1 to %u)", value,
                      MK_RATE_MAX);
    }
    while (mk_conf_word(&cur, &w, &len)) {
        const char *eq = memchr(w, '=', len);
        size_t nl = eq ? (size_t) (eq - w) : len;
        const char *v = eq ? eq + 1 : NULL;
        size_t vl = eq ? len - nl - 1 : 0;
        bool ok;

        if (nl == 5 && memcmp(w, "burst", 5) == 0 && v) {
            ok = mk_str_to_u64(v, vl, MK_RATE_BURST_MAX, &n);
            l->burst = (uint32_t) n;
        }
        else if (nl == 5 && memcmp(w, "delay", 5) == 0) {
            l->delay = true;
            ok = !v || mk_str_to_u64(v, vl, MK_RATE_BURST_MAX, &n);
            l->delay_free = v ? (uint32_t) n : 0;
        }
        else if (nl == 4 && memcmp(w, "keys", 4) == 0 && v) {
            ok = mk_str_to_u64(v, vl, MK_RATE_KEYS_MAX, &n) && n >= MK_RATELIMIT_WAYS;
            l->keys = (uint32_t) n;
        }
        else if (nl == 3 && memcmp(w, "key", 3) == 0 && v) {
            ok = mk_rate_key_value(l, v, vl);
        }
        else {
            mk_rate_limit_free(l);
            return REASON(
                "RateLimit %s: unknown option '%.*s' (burst=N, delay[=N], key=..., keys=N)", value,
                (int) len, w);
        }
        if (!ok) {
            mk_rate_limit_free(l);
            return REASON("RateLimit %s: bad '%.*s' (burst=, delay= 0 to %u; key=addr, path, "
                          "header:NAME or cookie:NAME; keys=%d to %u)",
                          value, (int) len, w, MK_RATE_BURST_MAX, MK_RATELIMIT_WAYS,
                          MK_RATE_KEYS_MAX);
        }
    }
    return MK_OK;
}

void mk_rate_limit_free(struct mk_rate_limit *l)
{
    if (!l) {
        return;
    }
    mk_ratelimit_table_free(l->table);
    mk_free(l->name);
    l->table = NULL;
    l->name = NULL;
}

bool mk_rate_cookie(struct mk_str cookies, const char *name, size_t len, struct mk_str *out)
{
    const char *p = cookies.p, *end = cookies.p + cookies.len;

    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == ';')) {
            p++;
        }
        const char *pair = p, *semi = memchr(p, ';', (size_t) (end - p));
        const char *stop = semi ? semi : end;
        const char *eq = memchr(pair, '=', (size_t) (stop - pair));
        p = stop;
        if (!eq) {
            continue;
        }
        const char *ne = eq;
        while (ne > pair && (ne[-1] == ' ' || ne[-1] == '\t')) {
            ne--;
        }
        if ((size_t) (ne - pair) != len || memcmp(pair, name, len) != 0) {
            continue;
        }
        const char *v = eq + 1, *ve = stop;
        while (v < ve && (*v == ' ' || *v == '\t')) {
            v++;
        }
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) {
            ve--;
        }
        *out = mk_str_make(v, (size_t) (ve - v));
        return true;
    }
    return false;
}
