/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * ratelimit.c: the GCRA step and the bounded table of keys shared by the
 * workers (ratelimit.h). An entry is 16 bytes; a set of 8 spans two
 * cache lines. The key digest 0 marks an empty entry (a digest of 0 is
 * taken as 1).
 */
#include "ratelimit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "memory.h"

struct mk_ratelimit_entry {
    uint64_t key; /* digest; 0: empty */
    uint64_t tat; /* GCRA state, microseconds */
};

struct mk_ratelimit_table {
    struct mk_ratelimit_entry *e; /* n_sets * MK_RATELIMIT_WAYS */
    size_t n_sets;                /* a power of two */
    uint8_t secret[16];
    _Atomic uint64_t evictions;
    _Atomic uint64_t reported;    /* evictions at the last report */
    _Atomic uint64_t reported_at; /* its time, microseconds */
    pthread_mutex_t stripe[MK_RATELIMIT_STRIPES];
};

bool mk_gcra_take(uint64_t *tat, uint64_t now, uint64_t interval, uint64_t tolerance,
                  uint64_t *ahead)
{
    uint64_t start = *tat > now ? *tat : now;
    uint64_t excess = start - now;

    if (excess > tolerance) {
        *ahead = excess - tolerance;
        return false;
    }
    *tat = start + interval;
    *ahead = excess;
    return true;
}

struct mk_ratelimit_table *mk_ratelimit_table_new(size_t keys)
{
    struct mk_ratelimit_table *t = mk_calloc(1, sizeof(*t));
    size_t sets = 1;

    while (sets * MK_RATELIMIT_WAYS < keys) {
        sets <<= 1;
    }
    t->n_sets = sets;
    /* calloc: the pages of a large table cost memory only once keys reach them */
    t->e = mk_calloc(sets * MK_RATELIMIT_WAYS, sizeof(*t->e));
    if (getrandom(t->secret, sizeof(t->secret), 0) != (ssize_t) sizeof(t->secret)) {
        /* no entropy this early (a container without it): the clock, never a constant */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        memcpy(t->secret, &ts, sizeof(ts) < sizeof(t->secret) ? sizeof(ts) : sizeof(t->secret));
        uintptr_t a = (uintptr_t) t;
        memcpy(t->secret + 8, &a, sizeof(a) < 8 ? sizeof(a) : 8);
    }
    for (size_t i = 0; i < MK_RATELIMIT_STRIPES; i++) {
        pthread_mutex_init(&t->stripe[i], NULL);
    }
    return t;
}

void mk_ratelimit_table_free(struct mk_ratelimit_table *t)
{
    if (!t) {
        return;
    }
    for (size_t i = 0; i < MK_RATELIMIT_STRIPES; i++) {
        pthread_mutex_destroy(&t->stripe[i]);
    }
    mk_free(t->e);
    mk_free(t);
}

size_t mk_ratelimit_capacity(const struct mk_ratelimit_table *t)
{
    return t->n_sets * MK_RATELIMIT_WAYS;
}

uint64_t mk_ratelimit_key(const struct mk_ratelimit_table *t, const void *data, size_t len)
{
    uint64_t k = mk_siphash13(t->secret, data, len);
    return k ? k : 1;
}

/*
 * The entry of `key` in set `s`, or the one it takes (counting an
 * eviction), moved to the front: a set is kept in the order of use, most
 * recent first, so its last entry is its least recently used.
 */
static struct mk_ratelimit_entry *mk_ratelimit_slot(struct mk_ratelimit_table *t,
                                                    struct mk_ratelimit_entry *s, uint64_t key,
                                                    uint64_t now)
{
    size_t i = 0;

    while (i < MK_RATELIMIT_WAYS && s[i].key != key) {
        i++;
    }
    if (i == MK_RATELIMIT_WAYS) {
        /* the oldest entry that is empty or whose bucket is full again, else the oldest */
        i = MK_RATELIMIT_WAYS - 1;
        while (i > 0 && s[i].key != 0 && s[i].tat > now) {
            i--;
        }
        if (s[i].key != 0 && s[i].tat > now) {
            i = MK_RATELIMIT_WAYS - 1;
            atomic_fetch_add_explicit(&t->evictions, 1, memory_order_relaxed);
        }
        s[i].key = key;
        s[i].tat = 0;
    }
    struct mk_ratelimit_entry e = s[i];
    memmove(&s[1], &s[0], i * sizeof(*s));
    s[0] = e;
    return &s[0];
}

bool mk_ratelimit_take(struct mk_ratelimit_table *t, uint64_t key, uint64_t now, uint64_t interval,
                       uint64_t tolerance, uint64_t *ahead)
{
    size_t set = (size_t) (key >> 32) & (t->n_sets - 1);
    pthread_mutex_t *lock = &t->stripe[set & (MK_RATELIMIT_STRIPES - 1)];

    pthread_mutex_lock(lock);
    struct mk_ratelimit_entry *e = mk_ratelimit_slot(t, &t->e[set * MK_RATELIMIT_WAYS], key, now);
    bool ok = mk_gcra_take(&e->tat, now, interval, tolerance, ahead);
    pthread_mutex_unlock(lock);
    return ok;
}

uint64_t mk_ratelimit_evictions(const struct mk_ratelimit_table *t)
{
    return atomic_load_explicit(&t->evictions, memory_order_relaxed);
}

bool mk_ratelimit_report(struct mk_ratelimit_table *t, uint64_t now, uint64_t *evictions)
{
    uint64_t n = atomic_load_explicit(&t->evictions, memory_order_relaxed);
    uint64_t at = atomic_load_explicit(&t->reported_at, memory_order_relaxed);

    if (n == atomic_load_explicit(&t->reported, memory_order_relaxed) ||
        (at && now - at < 60u * 1000000u)) {
        return false;
    }
    /* one thread of those that see it due wins the report */
    if (!atomic_compare_exchange_strong(&t->reported_at, &at, now ? now : 1)) {
        return false;
    }
    atomic_store_explicit(&t->reported, n, memory_order_relaxed);
    *evictions = n;
    return true;
}
