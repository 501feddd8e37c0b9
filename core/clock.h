/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * clock.h: HTTP dates (RFC 9110 section 5.6.7) and the monotonic clock.
 *
 * Formatting always produces IMF-fixdate. Parsing accepts the three forms a
 * recipient must accept (IMF-fixdate, obsolete RFC 850 and asctime) and is
 * pure: no locale, no time zone, no allocation.
 */
#ifndef MK_CORE_CLOCK_H
#define MK_CORE_CLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define MK_HTTP_DATE_LEN 29 /* "Sun, 06 Nov 1994 08:49:37 GMT" */

/* Write the IMF-fixdate of `t` into `out` (MK_HTTP_DATE_LEN bytes, no NUL). */
void mk_http_date_format(time_t t, char *out);

/* Parse an HTTP date; false if `s` is not one of the three forms. */
bool mk_http_date_parse(const char *s, size_t len, time_t *out);

/* Milliseconds of CLOCK_MONOTONIC (a vDSO call): for deadlines, never dates. */
static inline uint64_t mk_clock_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

/* Microseconds of CLOCK_MONOTONIC (a vDSO call). */
static inline uint64_t mk_clock_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

#endif
