/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * siphash.h: SipHash (Aumasson and Bernstein), the keyed hash of the
 * tables a client fills (core/ratelimit.h, core/keycount.h): without the
 * table's secret, nobody can choose keys that collide. Pure.
 *
 * SipHash-1-3 (one round per word, three to finish) is the variant for hash
 * tables whose digests are never shown: CPython's str and bytes hash since
 * 3.11 (bpo-29410), Rust's HashMap default. No attack is known that finds
 * collisions under an unknown 128-bit key faster than trying keys; what
 * the two extra rounds of 2-4 buy is margin for a MAC whose outputs an
 * attacker sees. The rate-limit table (hit on every request it counts)
 * uses 1-3; the connection-count table, 2-4.
 */
#ifndef MK_CORE_SIPHASH_H
#define MK_CORE_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* SipHash-2-4 of data (len bytes) under the 16-byte key k. */
uint64_t mk_siphash(const uint8_t k[16], const void *data, size_t len);
/* SipHash-1-3 of data (len bytes) under the 16-byte key k. */
uint64_t mk_siphash13(const uint8_t k[16], const void *data, size_t len);

#endif
