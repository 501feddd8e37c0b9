/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/session.c: sessions. One store for the process, shared by every
 * worker behind a mutex (a lookup is a hash and a short chain walk), with
 * expiry: an expired session is never returned, and each creation sweeps
 * the chain it lands in. Ids are 128 bits from getrandom(), in hex, in the
 * cookie the service names; entries are kept per service and cookie name,
 * so services on one site cannot read each other's sessions.
 *
 * With [DUDA] SessionStore redis://... (and the plugin built with hiredis)
 * a service's sessions live in Redis instead (session_redis.c): the same
 * ids and cookies, shared by every server that uses the same Redis.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "duda_internal.h"
#include "session_parse.h"

int duda_session_store_check(const char *value, char *reason, size_t len)
{
    if (!strcmp(value, "memory")) {
        return MK_OK;
    }
#ifdef DUDA_HAVE_HIREDIS
    char host[256];
    int port, db;
    if (duda_session_parse_redis_url(value, host, sizeof(host), &port, &db, reason, len) == 0) {
        return MK_OK;
    }
    size_t n = strlen(reason);
    snprintf(reason + n, len - n, " (SessionStore is memory or redis://host[:port][/db])");
#else
    snprintf(reason, len,
             "'%s': this duda plugin was built without hiredis (libhiredis-dev), so the only "
             "store is memory",
             value);
#endif
    return MK_ERR;
}

#define DUDA_SESSION_BUCKETS 4096
#define DUDA_SESSION_MAX 1000000

struct duda_session {
    char id[33];
    char *owner; /* "service/cookie" */
    char *value;
    time_t expires;
    struct duda_session *next;
};

static pthread_mutex_t duda_sessions_lock = PTHREAD_MUTEX_INITIALIZER;
static struct duda_session *duda_sessions[DUDA_SESSION_BUCKETS];
static size_t duda_sessions_n;

static unsigned duda_session_hash(const char *id)
{
    unsigned h = 2166136261u;
    for (; *id; id++) {
        h = (h ^ (unsigned char) *id) * 16777619u;
    }
    return h % DUDA_SESSION_BUCKETS;
}

static void duda_session_free(struct duda_session *s)
{
    free(s->owner);
    free(s->value);
    free(s);
}

/* Drop the expired entries of a chain; under the lock. */
static void duda_session_sweep(struct duda_session **pp, time_t now)
{
    while (*pp) {
        struct duda_session *s = *pp;
        if (s->expires <= now) {
            *pp = s->next;
            duda_session_free(s);
            duda_sessions_n--;
        }
        else {
            pp = &s->next;
        }
    }
}

void duda_session_shutdown(void)
{
    pthread_mutex_lock(&duda_sessions_lock);
    for (size_t i = 0; i < DUDA_SESSION_BUCKETS; i++) {
        duda_session_sweep(&duda_sessions[i], (time_t) 1L << 62);
    }
    pthread_mutex_unlock(&duda_sessions_lock);
}

unsigned long duda_session_count(void)
{
    pthread_mutex_lock(&duda_sessions_lock);
    unsigned long n = duda_sessions_n;
    pthread_mutex_unlock(&duda_sessions_lock);
    return n;
}

static int duda_owner(duda_request_t *dr, const char *name, char *out, size_t len)
{
    if (!dr || !name || !*name) {
        duda_misuse(dr, "session: no request or no name");
        return -1;
    }
    snprintf(out, len, "%s/%s", dr->svc->name, name);
    return 0;
}

static int duda_session_create(duda_request_t *dr, const char *name, const char *value,
                               long expires)
{
    unsigned char raw[16];
    char owner[160];

    if (duda_owner(dr, name, owner, sizeof(owner)) != 0 || !value || expires <= 0) {
        if (dr && (!value || expires <= 0)) {
            duda_misuse(dr, "session->create(%s): no value or expires <= 0", name);
        }
        return -1;
    }
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t) sizeof(raw)) {
        return -1;
    }
    struct duda_session *s = calloc(1, sizeof(*s));
    if (!s || !(s->owner = strdup(owner)) || !(s->value = strdup(value))) {
        if (s) {
            free(s->owner);
        }
        free(s);
        return -1;
    }
    for (int i = 0; i < 16; i++) {
        snprintf(s->id + 2 * i, 3, "%02x", raw[i]);
    }
#ifdef DUDA_HAVE_HIREDIS
    if (duda_session_redis_enabled(dr)) {
        int rc = duda_session_redis_create(dr, name, s->id, value, expires);
        if (rc == 0) {
            rc = duda_cookie_obj.set(dr, name, s->id, expires,
                                     DUDA_COOKIE_HTTPONLY | DUDA_COOKIE_SAMESITE_LAX);
        }
        duda_session_free(s);
        return rc;
    }
#endif
    time_t now = time(NULL);
    s->expires = now + expires;
    if (duda_cookie_obj.set(dr, name, s->id, expires,
                            DUDA_COOKIE_HTTPONLY | DUDA_COOKIE_SAMESITE_LAX) != 0) {
        duda_session_free(s);
        return -1;
    }
    unsigned b = duda_session_hash(s->id);
    pthread_mutex_lock(&duda_sessions_lock);
    duda_session_sweep(&duda_sessions[b], now);
    if (duda_sessions_n >= DUDA_SESSION_MAX) {
        pthread_mutex_unlock(&duda_sessions_lock);
        duda_session_free(s);
        return -1;
    }
    s->next = duda_sessions[b];
    duda_sessions[b] = s;
    duda_sessions_n++;
    pthread_mutex_unlock(&duda_sessions_lock);
    return 0;
}

/* The live session of the client's cookie `name`; under the lock. */
static struct duda_session **duda_session_find(duda_request_t *dr, const char *name,
                                               const char *owner)
{
    const char *id = duda_cookie_obj.get(dr, name);
    if (!id || strlen(id) != 32) {
        return NULL;
    }
    time_t now = time(NULL);
    for (struct duda_session **pp = &duda_sessions[duda_session_hash(id)]; *pp; pp = &(*pp)->next) {
        struct duda_session *s = *pp;
        if (!strcmp(s->id, id) && !strcmp(s->owner, owner) && s->expires > now) {
            return pp;
        }
    }
    return NULL;
}

static const char *duda_session_get(duda_request_t *dr, const char *name)
{
    char owner[160];
    char *out = NULL;

    if (duda_owner(dr, name, owner, sizeof(owner)) != 0 || !dr->r) {
        return NULL;
    }
#ifdef DUDA_HAVE_HIREDIS
    if (duda_session_redis_enabled(dr)) {
        const char *v = duda_session_redis_get(dr, name);
        return v ? duda_gc_strndup(dr, v, strlen(v)) : NULL;
    }
#endif
    pthread_mutex_lock(&duda_sessions_lock);
    struct duda_session **pp = duda_session_find(dr, name, owner);
    if (pp) {
        size_t n = strlen((*pp)->value);
        out = duda_gc_strndup(dr, (*pp)->value, n);
    }
    pthread_mutex_unlock(&duda_sessions_lock);
    return out;
}

static int duda_session_isset(duda_request_t *dr, const char *name)
{
    char owner[160];

    if (duda_owner(dr, name, owner, sizeof(owner)) != 0 || !dr->r) {
        return 0;
    }
#ifdef DUDA_HAVE_HIREDIS
    if (duda_session_redis_enabled(dr)) {
        return duda_session_redis_get(dr, name) != NULL;
    }
#endif
    pthread_mutex_lock(&duda_sessions_lock);
    int found = duda_session_find(dr, name, owner) != NULL;
    pthread_mutex_unlock(&duda_sessions_lock);
    return found;
}

static int duda_session_lookup(duda_request_t *dr, const char *name, const char **value)
{
    char owner[160];
    const char *found = NULL;
    int rc = DUDA_SESSION_NONE;

    if (value) {
        *value = NULL;
    }
    if (duda_owner(dr, name, owner, sizeof(owner)) != 0 || !dr->r) {
        return DUDA_ERR;
    }
#ifdef DUDA_HAVE_HIREDIS
    if (duda_session_redis_enabled(dr)) {
        rc = duda_session_redis_lookup(dr, name, &found);
        if (rc == DUDA_SESSION_FOUND && value &&
            !(*value = duda_gc_strndup(dr, found, strlen(found)))) {
            return DUDA_ERR;
        }
        return rc;
    }
#endif
    pthread_mutex_lock(&duda_sessions_lock);
    struct duda_session **pp = duda_session_find(dr, name, owner);
    if (pp) {
        rc = DUDA_SESSION_FOUND;
        if (value) {
            found = duda_gc_strndup(dr, (*pp)->value, strlen((*pp)->value));
            rc = found ? rc : DUDA_ERR;
            *value = found;
        }
    }
    pthread_mutex_unlock(&duda_sessions_lock);
    return rc;
}

static int duda_session_destroy(duda_request_t *dr, const char *name)
{
    char owner[160];

    if (duda_owner(dr, name, owner, sizeof(owner)) != 0 || !dr->r) {
        return -1;
    }
#ifdef DUDA_HAVE_HIREDIS
    if (duda_session_redis_enabled(dr)) {
        if (duda_session_redis_destroy(dr, name) != 0) {
            return -1;
        }
        return duda_cookie_obj.destroy(dr, name);
    }
#endif
    pthread_mutex_lock(&duda_sessions_lock);
    struct duda_session **pp = duda_session_find(dr, name, owner);
    if (pp) {
        struct duda_session *s = *pp;
        *pp = s->next;
        duda_session_free(s);
        duda_sessions_n--;
    }
    pthread_mutex_unlock(&duda_sessions_lock);
    if (!pp) {
        return -1;
    }
    return duda_cookie_obj.destroy(dr, name);
}

const struct duda_session_api duda_session_obj = {.size = sizeof(struct duda_session_api),
                                                  .create = duda_session_create,
                                                  .get = duda_session_get,
                                                  .isset = duda_session_isset,
                                                  .destroy = duda_session_destroy,
                                                  .lookup = duda_session_lookup};
