/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/session_redis.c: the Redis session store ([DUDA] SessionStore
 * redis://host:port/db), so that several servers share sessions.
 *
 * The session object answers at once (session->get returns the value),
 * and a worker never blocks, so the store works around the request:
 *   - before the service's callback runs, every cookie of the request
 *     whose value looks like a session id (32 hex digits) is looked up
 *     with one pipelined GET each; the request is suspended until the
 *     answers are in, and session->get/isset read them;
 *   - create and destroy send SET ... EX / DEL at once, and the response
 *     goes out only when Redis acknowledged them: a client that receives
 *     the cookie finds the session on any server.
 * Keys are "duda:session:SERVICE/COOKIE:ID". Each worker has one
 * connection per store (redis_loop.c: reconnects with back-off, logged at
 * the level of the redis package's, info); while Redis is unreachable a
 * lookup is DUDA_SESSION_UNAVAILABLE (get finds nothing, as for no
 * session: lookup tells the two apart) and create() returns -1.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duda_internal.h"
#include "redis_loop.h"
#include "session_parse.h"

/* ---- the plugin loop as redis_loop sees it ------------------------------------------- */

struct duda_sr_watch {
    struct mk_loop_fd *h;
    void (*cb)(int fd, unsigned ready, void *arg);
    void *arg;
};

static void duda_sr_watch_fire(struct mk_loop_fd *h, int fd, uint32_t ready, void *arg)
{
    struct duda_sr_watch *w = arg;

    (void) h;
    w->cb(fd,
          (ready & (MK_LOOP_READ | MK_LOOP_ERROR) ? DUDA_REDIS_LOOP_READ : 0) |
              (ready & (MK_LOOP_WRITE | MK_LOOP_ERROR) ? DUDA_REDIS_LOOP_WRITE : 0),
          w->arg);
}

static uint32_t duda_sr_mask(unsigned m)
{
    return (m & DUDA_REDIS_LOOP_READ ? MK_LOOP_READ : 0) |
           (m & DUDA_REDIS_LOOP_WRITE ? MK_LOOP_WRITE : 0);
}

static void *duda_sr_watch(int fd, unsigned mask, void (*cb)(int fd, unsigned ready, void *arg),
                           void *arg)
{
    struct duda_sr_watch *w = malloc(sizeof(*w));

    if (!w) {
        return NULL;
    }
    *w = (struct duda_sr_watch){.cb = cb, .arg = arg};
    w->h = duda_mk->fd_watch(fd, duda_sr_mask(mask), duda_sr_watch_fire, w);
    if (!w->h) {
        free(w);
        return NULL;
    }
    return w;
}

static int duda_sr_modify(void *p, unsigned mask)
{
    struct duda_sr_watch *w = p;
    return duda_mk->fd_modify(w->h, duda_sr_mask(mask)) == MK_OK ? 0 : -1;
}

static void duda_sr_unwatch(void *p)
{
    struct duda_sr_watch *w = p;
    duda_mk->fd_unwatch(w->h);
    free(w);
}

/* A connection's timer (redis_loop.h): a kept loop timer and the callback it calls. */
struct duda_sr_timer {
    struct mk_loop_timer *t;
    void (*cb)(void *arg);
    void *arg;
};

static void duda_sr_timer_fire(struct mk_loop_timer *lt, void *arg)
{
    struct duda_sr_timer *t = arg;

    (void) lt;
    t->cb(t->arg); /* may free t */
}

static void *duda_sr_timer_new(void (*cb)(void *arg), void *arg)
{
    struct duda_sr_timer *t = malloc(sizeof(*t));

    if (!t) {
        return NULL;
    }
    *t = (struct duda_sr_timer){.cb = cb, .arg = arg};
    t->t = duda_mk->timer_new(duda_sr_timer_fire, t);
    if (!t->t) {
        free(t);
        return NULL;
    }
    return t;
}

static int duda_sr_timer_arm(void *p, unsigned ms)
{
    struct duda_sr_timer *t = p;
    return duda_mk->timer_arm(t->t, ms) == MK_OK ? 0 : -1;
}

static void duda_sr_timer_disarm(void *p)
{
    struct duda_sr_timer *t = p;
    duda_mk->timer_disarm(t->t);
}

static void duda_sr_timer_free(void *p)
{
    struct duda_sr_timer *t = p;
    duda_mk->timer_stop(t->t);
    free(t);
}

static void duda_sr_log(const char *fmt, ...)
{
    char line[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    /* the connection's attempts and recovery: info, as the redis package's
       (console->debug); what a request loses to it is logged where it happens */
    duda_mk->log(MK_PLUGIN_LOG_INFO, "%s", line);
}

static const struct duda_redis_loop_ops duda_sr_ops = {
    .watch = duda_sr_watch,
    .modify = duda_sr_modify,
    .unwatch = duda_sr_unwatch,
    .timer_new = duda_sr_timer_new,
    .timer_arm = duda_sr_timer_arm,
    .timer_disarm = duda_sr_timer_disarm,
    .timer_free = duda_sr_timer_free,
    .log = duda_sr_log,
};

/* ---- this worker's connections, one per store address -------------------------------- */

struct duda_sr_conn {
    char *url;
    struct duda_redis_loop *c;
    struct duda_sr_conn *next;
};

static __thread struct duda_sr_conn *duda_sr_conns;

static redisAsyncContext *duda_sr_ctx(const char *url)
{
    struct duda_sr_conn *k;

    for (k = duda_sr_conns; k; k = k->next) {
        if (!strcmp(k->url, url)) {
            return duda_redis_loop_ctx(k->c);
        }
    }
    char host[256], err[256];
    int port, db;
    if (duda_session_parse_redis_url(url, host, sizeof(host), &port, &db, err, sizeof(err)) != 0) {
        return NULL; /* checked with the configuration */
    }
    k = calloc(1, sizeof(*k));
    if (!k || !(k->url = strdup(url))) {
        free(k);
        return NULL;
    }
    k->c = duda_redis_loop_open(&duda_sr_ops, host, port, db, "session store", NULL, NULL);
    if (!k->c) {
        free(k->url);
        free(k);
        return NULL;
    }
    k->next = duda_sr_conns;
    duda_sr_conns = k;
    return duda_redis_loop_ctx(k->c);
}

bool duda_session_redis_enabled(const duda_request_t *dr)
{
    return dr->svc->session_store != NULL;
}

/* ---- the request's sessions ----------------------------------------------------------- */

static void duda_sr_key(const duda_request_t *dr, const char *name, const char *id, char *out,
                        size_t len)
{
    snprintf(out, len, "duda:session:%s/%s:%s", dr->svc->name, name, id);
}

static struct duda_session_redis *duda_sr_find(duda_request_t *dr, const char *name)
{
    for (struct duda_session_redis *s = dr->sessions; s; s = s->next) {
        if (!strcmp(s->name, name)) {
            return s;
        }
    }
    return NULL;
}

static struct duda_session_redis *duda_sr_entry(duda_request_t *dr, const char *name,
                                                size_t name_len, const char *id)
{
    struct duda_session_redis *s = calloc(1, sizeof(*s));

    if (!s || !(s->name = strndup(name, name_len))) {
        free(s);
        return NULL;
    }
    snprintf(s->id, sizeof(s->id), "%s", id);
    s->next = dr->sessions;
    dr->sessions = s;
    return s;
}

void duda_session_redis_release(duda_request_t *dr)
{
    while (dr->sessions) {
        struct duda_session_redis *s = dr->sessions;
        dr->sessions = s->next;
        free(s->name);
        free(s->value);
        free(s);
    }
}

static bool duda_sr_is_id(const char *v, size_t n)
{
    if (n != 32) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f'))) {
            return false;
        }
    }
    return true;
}

/* A reply for a request (each holds a reference on dr): the last one continues it. */
static void duda_sr_done(duda_request_t *dr)
{
    if (--dr->session_pending == 0 && dr->session_susp) {
        struct mk_suspended *s = dr->session_susp;
        dr->session_susp = NULL;
        duda_mk->resume(s, dr->session_resume, dr);
    }
    duda_request_unref(dr);
}

static void duda_sr_got(redisAsyncContext *ac, void *reply, void *arg)
{
    struct duda_session_redis *s = arg;
    const redisReply *rep = reply;
    duda_request_t *dr = s->dr;

    (void) ac;
    if (rep && rep->type == REDIS_REPLY_STRING) {
        s->value = strndup(rep->str, (size_t) rep->len);
        s->failed = !s->value;
    }
    else if (!rep || rep->type == REDIS_REPLY_ERROR) {
        s->failed = true; /* the connection went, or Redis refused: unknown, not none */
        duda_mk->log(MK_PLUGIN_LOG_ERROR, "duda: service '%s': session store: %s", dr->svc->name,
                     rep ? rep->str : "the connection was lost before the answer");
    }
    s->dr = NULL;
    duda_sr_done(dr);
}

static void duda_sr_acked(redisAsyncContext *ac, void *reply, void *arg)
{
    duda_request_t *dr = arg;
    const redisReply *rep = reply;

    (void) ac;
    if (!rep || rep->type == REDIS_REPLY_ERROR) {
        dr->session_failed = true;
        duda_mk->log(MK_PLUGIN_LOG_ERROR, "duda: service '%s': session store: %s", dr->svc->name,
                     rep ? rep->str : "the connection was lost before the answer");
    }
    duda_sr_done(dr);
}

int duda_session_redis_prefetch(duda_request_t *dr, mk_resume_cb resume)
{
    struct duda_cookie_pair pairs[32];
    char key[512];
    size_t n;

    const char *h = duda_mk->header(dr->r, "Cookie", &n);
    if (!h) {
        return 0;
    }
    size_t np = duda_session_parse_cookie_pairs(h, n, pairs, sizeof(pairs) / sizeof(pairs[0]));
    redisAsyncContext *ac = NULL;
    bool down = false;
    for (size_t i = 0; i < np; i++) {
        if (!duda_sr_is_id(pairs[i].value, pairs[i].value_len) || pairs[i].name_len > 128) {
            continue;
        }
        if (!ac && !down && !(ac = duda_sr_ctx(dr->svc->session_store))) {
            down = true; /* unreachable: each such session is unknown, not absent */
        }
        char id[33];
        memcpy(id, pairs[i].value, 32);
        id[32] = '\0';
        struct duda_session_redis *s = duda_sr_entry(dr, pairs[i].name, pairs[i].name_len, id);
        if (!s) {
            return -1;
        }
        if (down) {
            s->failed = true;
            continue;
        }
        duda_sr_key(dr, s->name, id, key, sizeof(key));
        s->dr = dr;
        if (redisAsyncCommand(ac, duda_sr_got, s, "GET %s", key) != REDIS_OK) {
            s->dr = NULL;
            s->failed = true;
            down = true;
            continue;
        }
        dr->session_pending++;
        dr->refs++;
    }
    return duda_session_redis_hold(dr, resume);
}

int duda_session_redis_hold(duda_request_t *dr, mk_resume_cb resume)
{
    if (dr->session_pending == 0) {
        return dr->session_failed ? -1 : 0;
    }
    dr->session_susp = duda_mk->suspend(dr->r);
    if (!dr->session_susp) {
        return -1; /* the replies come, and find nothing to continue */
    }
    dr->session_resume = resume;
    dr->refs++; /* the suspension's: released by the continuation */
    return 1;
}

/* Send a write for dr: 0, or -1 when the store is unreachable. */
static int duda_sr_write(duda_request_t *dr, const char *fmt, ...)
{
    va_list ap;
    redisAsyncContext *ac = duda_sr_ctx(dr->svc->session_store);

    if (!ac) {
        duda_mk->log(MK_PLUGIN_LOG_ERROR, "duda: service '%s': session store %s unreachable",
                     dr->svc->name, dr->svc->session_store);
        return -1;
    }
    va_start(ap, fmt);
    int rc = redisvAsyncCommand(ac, duda_sr_acked, dr, fmt, ap);
    va_end(ap);
    if (rc != REDIS_OK) {
        return -1;
    }
    dr->session_pending++;
    dr->refs++;
    return 0;
}

int duda_session_redis_create(duda_request_t *dr, const char *name, const char *id,
                              const char *value, long expires)
{
    char key[512];
    struct duda_session_redis *s = duda_sr_find(dr, name);

    if (!s && !(s = duda_sr_entry(dr, name, strlen(name), id))) {
        return -1;
    }
    char *copy = strdup(value);
    if (!copy) {
        return -1;
    }
    snprintf(s->id, sizeof(s->id), "%s", id);
    free(s->value);
    s->value = copy;
    duda_sr_key(dr, name, id, key, sizeof(key));
    return duda_sr_write(dr, "SET %s %s EX %ld", key, value, expires);
}

const char *duda_session_redis_get(duda_request_t *dr, const char *name)
{
    struct duda_session_redis *s = duda_sr_find(dr, name);
    return s ? s->value : NULL;
}

int duda_session_redis_lookup(duda_request_t *dr, const char *name, const char **value)
{
    struct duda_session_redis *s = duda_sr_find(dr, name);

    *value = s ? s->value : NULL;
    if (*value) {
        return DUDA_SESSION_FOUND;
    }
    return s && s->failed ? DUDA_SESSION_UNAVAILABLE : DUDA_SESSION_NONE;
}

int duda_session_redis_destroy(duda_request_t *dr, const char *name)
{
    char key[512];
    struct duda_session_redis *s = duda_sr_find(dr, name);

    if (!s || !s->value) {
        return -1;
    }
    free(s->value);
    s->value = NULL;
    duda_sr_key(dr, name, s->id, key, sizeof(key));
    if (duda_sr_write(dr, "DEL %s", key) != 0) {
        return -1;
    }
    return 0;
}

void duda_session_redis_worker_exit(void)
{
    while (duda_sr_conns) {
        struct duda_sr_conn *k = duda_sr_conns;
        duda_sr_conns = k->next;
        duda_redis_loop_close(k->c);
        free(k->url);
        free(k);
    }
}
