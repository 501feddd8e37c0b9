/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * keycount.c: counts by key (keycount.h). An entry is allocated on a key's
 * first count and freed on its last release.
 */
#include "keycount.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "memory.h"
#include "siphash.h"

#define MK_KEYCOUNT_STRIPES 64

struct mk_keycount_entry {
    struct mk_keycount_entry *next;
    uint8_t key[MK_KEYCOUNT_KEY_LEN];
    unsigned count;
};

struct mk_keycount {
    struct mk_keycount_entry *bucket[MK_KEYCOUNT_BUCKETS];
    uint8_t secret[16];
    atomic_size_t entries;
    pthread_mutex_t stripe[MK_KEYCOUNT_STRIPES];
};

struct mk_keycount *mk_keycount_new(void)
{
    struct mk_keycount *t = mk_calloc(1, sizeof(*t));

    if (getrandom(t->secret, sizeof(t->secret), 0) != (ssize_t) sizeof(t->secret)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        memcpy(t->secret, &ts, sizeof(ts) < sizeof(t->secret) ? sizeof(ts) : sizeof(t->secret));
    }
    for (size_t i = 0; i < MK_KEYCOUNT_STRIPES; i++) {
        pthread_mutex_init(&t->stripe[i], NULL);
    }
    return t;
}

void mk_keycount_free(struct mk_keycount *t)
{
    if (!t) {
        return;
    }
    for (size_t i = 0; i < MK_KEYCOUNT_BUCKETS; i++) {
        while (t->bucket[i]) {
            struct mk_keycount_entry *e = t->bucket[i];
            t->bucket[i] = e->next;
            mk_free(e);
        }
    }
    for (size_t i = 0; i < MK_KEYCOUNT_STRIPES; i++) {
        pthread_mutex_destroy(&t->stripe[i]);
    }
    mk_free(t);
}

/* The bucket of key, its lock taken; the caller unlocks *lock. */
static struct mk_keycount_entry **mk_keycount_find(struct mk_keycount *t, const uint8_t *key,
                                                   pthread_mutex_t **lock)
{
    size_t b = (size_t) mk_siphash(t->secret, key, MK_KEYCOUNT_KEY_LEN) & (MK_KEYCOUNT_BUCKETS - 1);
    struct mk_keycount_entry **e = &t->bucket[b];

    *lock = &t->stripe[b & (MK_KEYCOUNT_STRIPES - 1)];
    pthread_mutex_lock(*lock);
    while (*e && memcmp((*e)->key, key, MK_KEYCOUNT_KEY_LEN) != 0) {
        e = &(*e)->next;
    }
    return e;
}

bool mk_keycount_acquire(struct mk_keycount *t, const uint8_t key[MK_KEYCOUNT_KEY_LEN],
                         unsigned max)
{
    pthread_mutex_t *lock;
    struct mk_keycount_entry **e = mk_keycount_find(t, key, &lock);
    bool ok = true;

    if (*e && (*e)->count >= max) {
        ok = false;
    }
    else if (*e) {
        (*e)->count++;
    }
    else if (max > 0) {
        struct mk_keycount_entry *n = mk_alloc(sizeof(*n));
        n->next = NULL;
        memcpy(n->key, key, MK_KEYCOUNT_KEY_LEN);
        n->count = 1;
        *e = n;
        atomic_fetch_add_explicit(&t->entries, 1, memory_order_relaxed);
    }
    else {
        ok = false;
    }
    pthread_mutex_unlock(lock);
    return ok;
}

void mk_keycount_release(struct mk_keycount *t, const uint8_t key[MK_KEYCOUNT_KEY_LEN])
{
    pthread_mutex_t *lock;
    struct mk_keycount_entry **e = mk_keycount_find(t, key, &lock);

    if (*e && --(*e)->count == 0) {
        struct mk_keycount_entry *gone = *e;
        *e = gone->next;
        mk_free(gone);
        atomic_fetch_sub_explicit(&t->entries, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(lock);
}

unsigned mk_keycount_get(struct mk_keycount *t, const uint8_t key[MK_KEYCOUNT_KEY_LEN])
{
    pthread_mutex_t *lock;
    struct mk_keycount_entry **e = mk_keycount_find(t, key, &lock);
    unsigned n = *e ? (*e)->count : 0;

    pthread_mutex_unlock(lock);
    return n;
}

size_t mk_keycount_entries(struct mk_keycount *t)
{
    return atomic_load_explicit(&t->entries, memory_order_relaxed);
}
