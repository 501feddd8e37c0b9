/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_check.h: what the libFuzzer targets share.
 *
 * MK_FUZZ_CHECK() states an invariant of the code under test. A violation
 * names the condition on stderr and executes __builtin_trap(), which
 * libFuzzer reports as a crash and saves as a reproducer, like any
 * AddressSanitizer or UndefinedBehaviorSanitizer finding.
 */
#ifndef MK_FUZZ_CHECK_H
#define MK_FUZZ_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MK_FUZZ_CHECK(cond)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond);           \
            __builtin_trap();                                                                      \
        }                                                                                          \
    } while (0)

/* Does [p, p + len) lie inside [buf, buf + buflen)? Compared as integers:
 * views may also point at string literals, which are not part of `buf`. */
static inline bool mk_fuzz_inside(const char *p, size_t len, const char *buf, size_t buflen)
{
    uintptr_t a = (uintptr_t) p, b = (uintptr_t) buf;
    return a >= b && len <= buflen && a - b <= buflen - len;
}

/* The entry point libFuzzer calls once per input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
