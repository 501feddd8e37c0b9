/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * ratelimit.h: rate limits by key, shared by every thread of the process.
 *
 * The decision is GCRA (the generic cell rate algorithm, a token bucket
 * written with one number): a key's state is its theoretical arrival time
 * `tat`, in microseconds of the monotonic clock. A request at `now` is
 * taken when max(tat, now) - now <= tolerance (the burst: `burst` requests
 * of `interval` each), and then moves tat on by one interval; a request
 * refused changes nothing. This is nginx limit_req's bucket: burst + 1
 * requests at once, then one per interval.
 *
 * The table holds a fixed number of keys, chosen at creation and never
 * grown: keys are 64-bit SipHash-1-3 digests under a random secret of the
 * table, so a client can neither pick collisions nor make it larger. It is
 * set-associative, as a CPU cache: a key's digest picks a set of
 * MK_RATELIMIT_WAYS entries, and a new key takes, in its set, an empty
 * entry or one whose bucket is full again (forgetting it changes nothing),
 * else the least recently used (a set is kept in the order of use),
 * which is counted as an eviction (that key's limit restarts). Sets are
 * guarded by MK_RATELIMIT_STRIPES mutexes: two workers contend only when
 * their keys fall in the same stripe, for a few comparisons.
 *
 * Any thread may call mk_ratelimit_take and mk_ratelimit_evictions; the
 * table is created and freed by its owner (a configuration) while no other
 * thread can reach it.
 */
#ifndef MK_CORE_RATELIMIT_H
#define MK_CORE_RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "siphash.h"

#define MK_RATELIMIT_WAYS 8
#define MK_RATELIMIT_STRIPES 64

struct mk_ratelimit_table;

/*
 * The GCRA step for one key: `tat` its state (0: a key never seen), `now`
 * the time, `interval` one request's share of time, `tolerance` the burst
 * (burst * interval), all in microseconds. True: taken, tat moved on, and
 * *ahead says how far ahead of the rate the request is (0 when it is
 * within it: what a delaying limiter would wait). False: refused, tat
 * unchanged, and *ahead the wait before a request would be taken (> 0).
 */
bool mk_gcra_take(uint64_t *tat, uint64_t now, uint64_t interval, uint64_t tolerance,
                  uint64_t *ahead);

/*
 * A table for at least `keys` keys (rounded up to whole sets, a power of
 * two of them; at least one set). Its secret comes from getrandom(2).
 * Aborts on out-of-memory, as any allocation of the configuration does.
 */
struct mk_ratelimit_table *mk_ratelimit_table_new(size_t keys);
void mk_ratelimit_table_free(struct mk_ratelimit_table *t);

/* How many keys `t` holds at most. */
size_t mk_ratelimit_capacity(const struct mk_ratelimit_table *t);

/* The digest of key `data` (len bytes) under t's secret: what mk_ratelimit_take takes. */
uint64_t mk_ratelimit_key(const struct mk_ratelimit_table *t, const void *data, size_t len);

/* mk_gcra_take for key `key` of `t` (the key is found or entered first). */
bool mk_ratelimit_take(struct mk_ratelimit_table *t, uint64_t key, uint64_t now, uint64_t interval,
                       uint64_t tolerance, uint64_t *ahead);

/* How many keys were evicted while their bucket still held a limit, since t was made. */
uint64_t mk_ratelimit_evictions(const struct mk_ratelimit_table *t);

/*
 * Whether the evictions of `t` should be told now (`now` in microseconds):
 * true at most once every 60 seconds, when keys were evicted since the
 * last time it was true; *evictions then holds the count since t was made.
 */
bool mk_ratelimit_report(struct mk_ratelimit_table *t, uint64_t now, uint64_t *evictions);

#endif
