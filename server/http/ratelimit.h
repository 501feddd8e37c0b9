/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * ratelimit.h: a [RULE]'s RateLimit line (docs/configuration.md, "Rate
 * limits"): its parser, and the key of a request read from its head. Pure:
 * no I/O, no globals; the table the limit counts in (core/ratelimit.h) is
 * made by the configuration (server/config/conf_ratelimit.c) and counted
 * in by the request (server/request/request_limit.c).
 *
 *   RateLimit RATE/s|RATE/m [burst=N] [delay|delay=N]
 *             [key=addr|header:NAME|cookie:NAME|path] [keys=N]
 */
#ifndef MK_SERVER_HTTP_RATELIMIT_H
#define MK_SERVER_HTTP_RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http.h"

#define MK_RATE_MAX 1000000u /* requests per second (or per minute) */
#define MK_RATE_BURST_MAX 1000000u
#define MK_RATE_KEYS_DEFAULT 16384u
#define MK_RATE_KEYS_MAX (1u << 24)

enum mk_rate_key {
    MK_RATE_KEY_ADDR = 0, /* the client's address (IPv6: its /64) */
    MK_RATE_KEY_HEADER,   /* the value of a request field */
    MK_RATE_KEY_COOKIE,   /* the value of a cookie */
    MK_RATE_KEY_PATH,     /* the normalised path */
};

struct mk_ratelimit_table;

struct mk_rate_limit {
    uint32_t rate;        /* requests per `per` */
    uint32_t burst;       /* requests above the rate taken at once */
    uint64_t interval_us; /* one request's share of time */
    uint8_t per;          /* 's' or 'm' */
    uint8_t key;          /* enum mk_rate_key */
    char *name;           /* HEADER, COOKIE: the field or cookie name, NUL-terminated */
    size_t name_len;
    uint32_t keys;       /* the table's size, in keys */
    bool delay;          /* hold back what is ahead of the rate (nginx without nodelay) */
    uint32_t delay_free; /* delay: the requests ahead of the rate not held back (delay=N) */
    int line;            /* of the RateLimit line */
    struct mk_ratelimit_table *table; /* made by the configuration, NULL when parsed alone */
};

/*
 * Parse a RateLimit value into l (zeroed first): MK_OK, or MK_ERR with the
 * reason in reason. Free with mk_rate_limit_free (the table too).
 */
int mk_rate_limit_parse(struct mk_rate_limit *l, const char *value, char *reason,
                        size_t reason_len);
void mk_rate_limit_free(struct mk_rate_limit *l);

/*
 * The value of cookie `name` (len bytes) in a Cookie field's value
 * `cookies` ("a=1; b=2"): true with it in *out, or false when the field
 * has no such cookie.
 */
bool mk_rate_cookie(struct mk_str cookies, const char *name, size_t len, struct mk_str *out);

#endif
