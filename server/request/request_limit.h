/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * request_limit.h: a request counted against its rule's RateLimit
 * (request_limit.c). Worker threads only.
 */
#ifndef MK_SERVER_REQUEST_LIMIT_H
#define MK_SERVER_REQUEST_LIMIT_H

struct mk_request;
struct mk_rule;

/*
 * Count r against rule's RateLimit (rule->limit set): MK_DECLINED, the
 * request goes on (under the limit, or without the key: not counted);
 * MK_OK, it is answered 429 with Retry-After (set up for
 * mk_request_respond); MK_SUSPENDED, it is held back (delay) and the
 * caller parks it at MK_STAGE_RULES: once resumed, the rules are asked
 * again and the same rule lets it through without counting it again.
 */
int mk_request_limit(struct mk_request *r, const struct mk_rule *rule);

#endif
