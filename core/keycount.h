/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * keycount.h: how many of something each key holds now (the connections
 * of each client address: MaxConnectionsPerClient), shared by every
 * thread of the process.
 *
 * A key is counted from a successful mk_keycount_acquire until its
 * mk_keycount_release; a key with nothing counted has no entry, so the
 * table holds at most as many entries as there are things counted (open
 * connections), whatever the number of keys seen. A hash of MK_KEYCOUNT_BUCKETS
 * chains under a secret of the table (SipHash), guarded by striped mutexes.
 * Any thread may acquire and release.
 */
#ifndef MK_CORE_KEYCOUNT_H
#define MK_CORE_KEYCOUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MK_KEYCOUNT_KEY_LEN 16
#define MK_KEYCOUNT_BUCKETS 4096

struct mk_keycount;

/* An empty table (aborts on out-of-memory); free it when no thread uses it. */
struct mk_keycount *mk_keycount_new(void);
void mk_keycount_free(struct mk_keycount *t);

/* Count one more for `key` unless it holds `max` already: true when counted. */
bool mk_keycount_acquire(struct mk_keycount *t, const uint8_t key[MK_KEYCOUNT_KEY_LEN],
                         unsigned max);
/* Count one less for `key` (it was acquired). */
void mk_keycount_release(struct mk_keycount *t, const uint8_t key[MK_KEYCOUNT_KEY_LEN]);
/* The count of `key` now. */
unsigned mk_keycount_get(struct mk_keycount *t, const uint8_t key[MK_KEYCOUNT_KEY_LEN]);
/* How many keys have an entry now. */
size_t mk_keycount_entries(struct mk_keycount *t);

#endif
