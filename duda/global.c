/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/global.c: the global object: values a service keeps per worker.
 * global->init() declares a key in duda_main(); on a worker, get() and
 * set() reach that worker's value, made by the key's make() at its first
 * use. Every value made is destroyed once (below).
 */
#include <stdio.h>

#include "duda_internal.h"

static int duda_global_init(duda_global_t *key, void *(*make)(void), void (*destroy)(void *value))
{
    struct duda_service *svc = duda_current;

    if (!svc || svc->workers || !key) {
        duda_misuse(NULL, "global->init() outside duda_main()");
        return -1;
    }
    if (svc->n_globals == DUDA_GLOBALS_MAX) {
        snprintf(svc->map_err, sizeof(svc->map_err), "more than %d globals", DUDA_GLOBALS_MAX);
        return -1;
    }
    key->make = make;
    key->destroy = destroy;
    key->id = (int) svc->n_globals;
    svc->globals[svc->n_globals++] = key;
    return 0;
}

static void **duda_global_slot(duda_global_t *key, const char *what)
{
    struct duda_service *svc = duda_current;
    int w = duda_mk->worker_id();

    if (!svc || !key || key->id < 0 || (unsigned) key->id >= svc->n_globals ||
        svc->globals[key->id] != key || w < 0 || (unsigned) w >= svc->workers) {
        duda_misuse(NULL, "%s(): not a key of this service, or not on a worker", what);
        return NULL;
    }
    size_t i = (size_t) w * DUDA_GLOBALS_MAX + (size_t) key->id;
    if (!svc->gready[i]) {
        svc->gready[i] = 1;
        svc->gvalues[i] = key->make ? key->make() : NULL;
    }
    return &svc->gvalues[i];
}

static void *duda_global_get(duda_global_t *key)
{
    void **slot = duda_global_slot(key, "global->get");
    return slot ? *slot : NULL;
}

static int duda_global_set(duda_global_t *key, void *value)
{
    void **slot = duda_global_slot(key, "global->set");
    if (!slot) {
        return -1;
    }
    *slot = value;
    return 0;
}

const struct duda_global_api duda_global_obj = {.size = sizeof(struct duda_global_api),
                                                .init = duda_global_init,
                                                .get = duda_global_get,
                                                .set = duda_global_set};

/*
 * The services whose per-worker values may exist. A value is destroyed
 * once, under this lock: by its worker when the worker stops first (its
 * event loop is still there, so a value holding watches or timers, such
 * as a connection, closes cleanly), else when the service is unloaded.
 */
static pthread_mutex_t duda_live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct duda_service *duda_live;

void duda_global_track(struct duda_service *svc)
{
    pthread_mutex_lock(&duda_live_lock);
    if (!svc->live) {
        svc->live = true;
        svc->live_next = duda_live;
        duda_live = svc;
    }
    pthread_mutex_unlock(&duda_live_lock);
}

/* destroy() the value of (worker, id) if it was made; under the lock. */
static void duda_global_drop(struct duda_service *svc, unsigned w, unsigned id)
{
    size_t i = (size_t) w * DUDA_GLOBALS_MAX + id;
    const duda_global_t *key = svc->globals[id];

    if (!svc->gready[i]) {
        return;
    }
    svc->gready[i] = 0;
    if (key->destroy) {
        struct duda_service *saved = duda_current;
        duda_current = svc;
        key->destroy(svc->gvalues[i]);
        duda_current = saved;
    }
}

void duda_global_worker_exit(int worker)
{
    pthread_mutex_lock(&duda_live_lock);
    for (struct duda_service *svc = duda_live; svc; svc = svc->live_next) {
        for (unsigned id = 0;
             worker >= 0 && (unsigned) worker < svc->workers && id < svc->n_globals; id++) {
            duda_global_drop(svc, (unsigned) worker, id);
        }
    }
    pthread_mutex_unlock(&duda_live_lock);
}

void duda_global_release(struct duda_service *svc)
{
    pthread_mutex_lock(&duda_live_lock);
    for (struct duda_service **pp = &duda_live; *pp; pp = &(*pp)->live_next) {
        if (*pp == svc) {
            *pp = svc->live_next;
            break;
        }
    }
    svc->live = false;
    for (unsigned id = 0; id < svc->n_globals && svc->gready; id++) {
        for (unsigned w = 0; w < svc->workers; w++) {
            duda_global_drop(svc, w, id);
        }
    }
    pthread_mutex_unlock(&duda_live_lock);
}
