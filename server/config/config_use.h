/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * config_use.h: the configurations a worker's requests use.
 *
 * A worker serves new requests on its current configuration and keeps
 * each configuration a reload retired while something started on it still
 * uses it: a request (its site, its plugins' site data), a zombie whose
 * plugin has not given its handle back, a taken-over connection. The
 * configuration is let go when the last of them is done.
 *
 * Threads: a struct mk_config_use belongs to its worker's thread.
 */
#ifndef MK_SERVER_CONFIG_USE_H
#define MK_SERVER_CONFIG_USE_H

#include "../../core/list.h"

struct mk_config;

struct mk_config_use {
    struct mk_config *cfg;  /* current; one reference held */
    unsigned users;         /* users of cfg */
    struct mk_list retired; /* struct mk_config_retired, the older ones still in use */
};

/* Start with cfg as the current configuration (the caller's reference passes). */
void mk_config_use_init(struct mk_config_use *u, struct mk_config *cfg);
/*
 * One more user of cfg, a configuration in use here (the current one, or
 * one retired while something still uses it): cfg, or NULL when nothing
 * here uses cfg. Give it back with mk_config_use_release.
 */
struct mk_config *mk_config_use_hold(struct mk_config_use *u, struct mk_config *cfg);
/* A user of cfg is done with it (NULL is ignored). */
void mk_config_use_release(struct mk_config_use *u, struct mk_config *cfg);
/* A reload: cfg (referenced by the caller) is current now; the old one retires. */
void mk_config_use_switch(struct mk_config_use *u, struct mk_config *cfg);
/* The worker ends: let go of every configuration, used or not. */
void mk_config_use_destroy(struct mk_config_use *u);

#endif
