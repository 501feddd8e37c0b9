/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/xtime.c: the xtime object: the time now, tomorrow, in some hours,
 * a monotonic clock in milliseconds, and HTTP dates (RFC 9110 5.6.7).
 */
#include <time.h>

#include "duda_internal.h"

static time_t duda_now(void)
{
    return time(NULL);
}

static time_t duda_tomorrow(void)
{
    time_t t = time(NULL);
    return t - t % 86400 + 86400;
}

static time_t duda_next_hours(int hours)
{
    return time(NULL) + (time_t) hours * 3600;
}

static uint64_t duda_monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

static const char *duda_http_date(time_t t, char *buf, size_t len)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    if (strftime(buf, len, "%a, %d %b %Y %H:%M:%S GMT", &tm) == 0 && len) {
        buf[0] = '\0';
    }
    return buf;
}

const struct duda_xtime_api duda_xtime_obj = {.size = sizeof(struct duda_xtime_api),
                                              .now = duda_now,
                                              .tomorrow = duda_tomorrow,
                                              .next_hours = duda_next_hours,
                                              .monotonic_ms = duda_monotonic_ms,
                                              .http_date = duda_http_date};
