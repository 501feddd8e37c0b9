/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * siphash.h: SipHash-2-4 (Aumasson and Bernstein), the keyed hash of the
 * tables a client fills (core/ratelimit.h, core/keycount.h): without the
 * table's secret, nobody can choose keys that collide. Pure.
 */
#ifndef MK_CORE_SIPHASH_H
#define MK_CORE_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* SipHash-2-4 of data (len bytes) under the 16-byte key k. */
uint64_t mk_siphash(const uint8_t k[16], const void *data, size_t len);

#endif
