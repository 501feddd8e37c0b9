/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * config_use.c: the configurations a worker's requests use (config_use.h).
 * A handful at most: the current one, and one per reload whose requests,
 * zombies or taken-over connections are still about, so a list will do.
 */
#include "config_use.h"

#include "../../core/memory.h"
#include "conf.h"

struct mk_config_retired {
    struct mk_config *cfg;
    unsigned users;
    struct mk_list node;
};

void mk_config_use_init(struct mk_config_use *u, struct mk_config *cfg)
{
    u->cfg = cfg;
    u->users = 0;
    mk_list_init(&u->retired);
}

struct mk_config *mk_config_use_hold(struct mk_config_use *u, struct mk_config *cfg)
{
    struct mk_list *it;

    if (cfg == u->cfg) {
        u->users++;
        return cfg;
    }
    mk_list_foreach (it, &u->retired) {
        struct mk_config_retired *rc = mk_list_entry(it, struct mk_config_retired, node);
        if (rc->cfg == cfg) {
            rc->users++;
            return cfg;
        }
    }
    return NULL; /* not in use here: nothing holds it */
}

void mk_config_use_release(struct mk_config_use *u, struct mk_config *cfg)
{
    struct mk_list *it;

    if (!cfg) {
        return;
    }
    if (cfg == u->cfg) {
        u->users--;
        return;
    }
    mk_list_foreach (it, &u->retired) {
        struct mk_config_retired *rc = mk_list_entry(it, struct mk_config_retired, node);
        if (rc->cfg != cfg) {
            continue;
        }
        if (--rc->users == 0) {
            mk_list_del(&rc->node);
            mk_config_unref(rc->cfg);
            mk_free(rc);
        }
        return;
    }
}

void mk_config_use_switch(struct mk_config_use *u, struct mk_config *cfg)
{
    if (u->users > 0) {
        struct mk_config_retired *rc = mk_alloc(sizeof(*rc));
        rc->cfg = u->cfg;
        rc->users = u->users;
        mk_list_add_tail(&rc->node, &u->retired);
    }
    else if (u->cfg) {
        mk_config_unref(u->cfg);
    }
    u->cfg = cfg;
    u->users = 0;
}

void mk_config_use_destroy(struct mk_config_use *u)
{
    while (!mk_list_is_empty(&u->retired)) {
        struct mk_config_retired *rc =
            mk_list_entry(u->retired.next, struct mk_config_retired, node);
        mk_list_del(&rc->node);
        mk_config_unref(rc->cfg);
        mk_free(rc);
    }
    if (u->cfg) {
        mk_config_unref(u->cfg);
        u->cfg = NULL;
    }
    u->users = 0;
}
