/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/cookie.c: the cookie object: Set-Cookie fields added to the
 * response (a token for a name, a value without separators, SameSite=None
 * only with Secure) and the request's Cookie field, read with the parser
 * of session_parse.c.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "duda_internal.h"
#include "session_parse.h"

static bool duda_cookie_value_ok(const char *v)
{
    for (; *v; v++) {
        unsigned char c = (unsigned char) *v;
        if (c <= ' ' || c == '"' || c == ',' || c == ';' || c == '\\' || c >= 0x7f) {
            return false;
        }
    }
    return true;
}

static int duda_cookie_set(duda_request_t *dr, const char *name, const char *value, long expires,
                           unsigned flags)
{
    char buf[4096], date[40];

    if (!duda_response_writable(dr, "cookie->set", true)) {
        return -1;
    }
    if (!name || !value || !duda_response_header_name_ok(name) ||
        strpbrk(name, "()<>@,;\\\"/[]?={}") || !duda_cookie_value_ok(value)) {
        duda_misuse(dr, "cookie->set(): a bad name or value");
        return -1;
    }
    if ((flags & DUDA_COOKIE_SAMESITE_NONE) && !(flags & DUDA_COOKIE_SECURE)) {
        duda_misuse(dr, "cookie->set(%s): SameSite=None needs Secure", name);
        return -1;
    }
    int n = snprintf(buf, sizeof(buf), "%s=%s; Path=/", name, value);
    if (expires != 0) {
        time_t when = time(NULL) + expires;
        duda_xtime_obj.http_date(when, date, sizeof(date));
        n += snprintf(buf + n, sizeof(buf) - (size_t) n, "; Expires=%s; Max-Age=%ld", date,
                      expires < 0 ? 0 : expires);
    }
    if ((size_t) n >= sizeof(buf) - 64) {
        duda_misuse(dr, "cookie->set(%s): too long", name);
        return -1;
    }
    const char *ss = flags & DUDA_COOKIE_SAMESITE_STRICT ? "; SameSite=Strict"
                     : flags & DUDA_COOKIE_SAMESITE_LAX  ? "; SameSite=Lax"
                     : flags & DUDA_COOKIE_SAMESITE_NONE ? "; SameSite=None"
                                                         : "";
    snprintf(buf + n, sizeof(buf) - (size_t) n, "%s%s%s", ss,
             flags & DUDA_COOKIE_SECURE ? "; Secure" : "",
             flags & DUDA_COOKIE_HTTPONLY ? "; HttpOnly" : "");
    return duda_response_obj.http_header(dr, "Set-Cookie", buf);
}

static const char *duda_cookie_get(duda_request_t *dr, const char *name)
{
    size_t n, vn;
    if (!duda_request_live(dr, "cookie->get") || !name) {
        return NULL;
    }
    const char *h = duda_mk->header(dr->r, "Cookie", &n);
    const char *v = h ? duda_session_parse_cookie_find(h, n, name, strlen(name), &vn) : NULL;
    return v ? duda_gc_strndup(dr, v, vn) : NULL;
}

static int duda_cookie_destroy(duda_request_t *dr, const char *name)
{
    return duda_cookie_set(dr, name, "deleted", -1, 0);
}

const struct duda_cookie_api duda_cookie_obj = {.size = sizeof(struct duda_cookie_api),
                                                .set = duda_cookie_set,
                                                .get = duda_cookie_get,
                                                .destroy = duda_cookie_destroy};
