/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * conf_ratelimit.c: a [RULE]'s RateLimit (http/ratelimit.h) with its
 * table (core/ratelimit.h). The table belongs to the rule, so to the
 * configuration: every worker counts in the same one, a reload makes new
 * tables (the counts start again), and the old ones are freed with their
 * configuration, once no request of it is left.
 */
#include "conf_ratelimit.h"

#include <string.h>

#include <monkey/mk_common.h>

#include "../../core/config.h"
#include "../../core/memory.h"
#include "../../core/ratelimit.h"
#include "../http/ratelimit.h"
#include "../http/rules.h"
#include "conf.h"

bool mk_conf_rule_limit(struct mk_rule *r, const char *value, const int *lines,
                        const struct mk_conf *conf, char *err, size_t errlen)
{
    char reason[256];
    int line = r->line;
    const char *name;

    for (size_t i = 0; (name = mk_conf_rule_key(i)); i++) {
        if (strcmp(name, "RateLimit") == 0) {
            line = lines[i];
            break;
        }
    }
    struct mk_rate_limit *l = mk_calloc(1, sizeof(*l));
    if (mk_rate_limit_parse(l, value, reason, sizeof(reason)) != MK_OK) {
        mk_free(l);
        return mk_conf_error(conf, line, err, errlen, "%s", reason);
    }
    l->line = line;
    l->table = mk_ratelimit_table_new(l->keys);
    r->limit = l;
    return true;
}
