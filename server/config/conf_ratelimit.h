/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * conf_ratelimit.h: a [RULE]'s RateLimit line into its rule, with the
 * table its keys are counted in (conf_ratelimit.c).
 */
#ifndef MK_SERVER_CONF_RATELIMIT_H
#define MK_SERVER_CONF_RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>

struct mk_conf;
struct mk_rule;

/*
 * Parse RateLimit `value` (the key's line in `lines`, by the index of the
 * [RULE] key table) into r->limit and make its table: true, or false with
 * "file:line: reason" in err.
 */
bool mk_conf_rule_limit(struct mk_rule *r, const char *value, const int *lines,
                        const struct mk_conf *conf, char *err, size_t errlen);

#endif
