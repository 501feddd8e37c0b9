/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * clock.c: see clock.h. Calendar arithmetic uses the days-from-civil
 * algorithm so nothing depends on the process time zone.
 */
#include "clock.h"

#include <stdint.h>
#include <string.h>

#include "strings.h"

static const char mk_days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char mk_months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* Days since 1970-01-01 of a proleptic Gregorian date (month 1..12). */
static int64_t mk_days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned) (y - era * 400);
    const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t) doe - 719468;
}

static void mk_civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const unsigned doe = (unsigned) (z - era * 146097);
    const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t) yoe + era * 400 + (*m <= 2);
}

static void mk_put2(char *p, unsigned v)
{
    p[0] = (char) ('0' + v / 10 % 10);
    p[1] = (char) ('0' + v % 10);
}

void mk_http_date_format(time_t t, char *out)
{
    int64_t days = (int64_t) t / 86400;
    int64_t secs = (int64_t) t % 86400;
    int64_t year;
    unsigned month, day;

    if (secs < 0) {
        secs += 86400;
        days--;
    }
    mk_civil_from_days(days, &year, &month, &day);
    if (year < 0) {
        year = 0;
    }
    else if (year > 9999) {
        year = 9999;
    }
    int64_t wday = (days + 4) % 7; /* 1970-01-01 was a Thursday */
    if (wday < 0) {
        wday += 7;
    }
    memcpy(out, mk_days[wday], 3);
    memcpy(out + 3, ", ", 2);
    mk_put2(out + 5, day);
    out[7] = ' ';
    memcpy(out + 8, mk_months[month - 1], 3);
    out[11] = ' ';
    mk_put2(out + 12, (unsigned) (year / 100));
    mk_put2(out + 14, (unsigned) (year % 100));
    out[16] = ' ';
    mk_put2(out + 17, (unsigned) (secs / 3600));
    out[19] = ':';
    mk_put2(out + 20, (unsigned) (secs / 60 % 60));
    out[22] = ':';
    mk_put2(out + 23, (unsigned) (secs % 60));
    memcpy(out + 25, " GMT", 4);
}

/* A tiny cursor over the input; every reader fails softly at the end. */
struct mk_cursor {
    const char *p;
    const char *end;
};

static bool mk_lit(struct mk_cursor *c, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t) (c->end - c->p) < n || memcmp(c->p, lit, n) != 0) {
        return false;
    }
    c->p += n;
    return true;
}

static bool mk_num(struct mk_cursor *c, size_t min_digits, size_t max_digits, unsigned *out)
{
    unsigned v = 0;
    size_t n = 0;
    while (c->p < c->end && n < max_digits && mk_is_digit(*c->p)) {
        v = v * 10 + (unsigned) (*c->p - '0');
        c->p++;
        n++;
    }
    *out = v;
    return n >= min_digits;
}

static bool mk_month(struct mk_cursor *c, unsigned *out)
{
    if (c->end - c->p < 3) {
        return false;
    }
    for (unsigned i = 0; i < 12; i++) {
        if (memcmp(c->p, mk_months[i], 3) == 0) {
            c->p += 3;
            *out = i + 1;
            return true;
        }
    }
    return false;
}

static bool mk_day_name(struct mk_cursor *c, bool long_form)
{
    static const char *const names[7] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                         "Thursday", "Friday", "Saturday"};
    for (unsigned i = 0; i < 7; i++) {
        if (long_form ? mk_lit(c, names[i]) : mk_lit(c, mk_days[i])) {
            return true;
        }
    }
    return false;
}

static bool mk_clock(struct mk_cursor *c, unsigned *h, unsigned *mi, unsigned *s)
{
    return mk_num(c, 2, 2, h) && mk_lit(c, ":") && mk_num(c, 2, 2, mi) && mk_lit(c, ":") &&
           mk_num(c, 2, 2, s);
}

static bool mk_date_valid(int64_t y, unsigned m, unsigned d, unsigned h, unsigned mi, unsigned s)
{
    static const unsigned mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m < 1 || m > 12 || d < 1 || d > mdays[m - 1] || h > 23 || mi > 59 || s > 60) {
        return false;
    }
    if (m == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) {
        return false;
    }
    return true;
}

bool mk_http_date_parse(const char *str, size_t len, time_t *out)
{
    struct mk_cursor c = {str, str + len};
    unsigned day, month, year, h, mi, s;
    int64_t y;

    if (mk_day_name(&c, false) && mk_lit(&c, ", ")) {
        /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
        if (!(mk_num(&c, 2, 2, &day) && mk_lit(&c, " ") && mk_month(&c, &month) &&
              mk_lit(&c, " ") && mk_num(&c, 4, 4, &year) && mk_lit(&c, " ") &&
              mk_clock(&c, &h, &mi, &s) && mk_lit(&c, " GMT"))) {
            return false;
        }
        y = year;
    }
    else if (c.p = str, mk_day_name(&c, true) && mk_lit(&c, ", ")) {
        /* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT */
        if (!(mk_num(&c, 2, 2, &day) && mk_lit(&c, "-") && mk_month(&c, &month) &&
              mk_lit(&c, "-") && mk_num(&c, 2, 2, &year) && mk_lit(&c, " ") &&
              mk_clock(&c, &h, &mi, &s) && mk_lit(&c, " GMT"))) {
            return false;
        }
        /* Two-digit years: 70..99 are 19xx, 00..69 are 20xx (the usual pivot). */
        y = year >= 70 ? 1900 + year : 2000 + year;
    }
    else if (c.p = str, mk_day_name(&c, false) && mk_lit(&c, " ")) {
        /* asctime: Sun Nov  6 08:49:37 1994 */
        if (!(mk_month(&c, &month) && mk_lit(&c, " "))) {
            return false;
        }
        if (c.p < c.end && *c.p == ' ') {
            c.p++;
            if (!mk_num(&c, 1, 1, &day)) {
                return false;
            }
        }
        else if (!mk_num(&c, 2, 2, &day)) {
            return false;
        }
        if (!(mk_lit(&c, " ") && mk_clock(&c, &h, &mi, &s) && mk_lit(&c, " ") &&
              mk_num(&c, 4, 4, &year))) {
            return false;
        }
        y = year;
    }
    else {
        return false;
    }
    if (c.p != c.end || !mk_date_valid(y, month, day, h, mi, s)) {
        return false;
    }
    if (s == 60) {
        s = 59; /* leap second */
    }
    int64_t t = mk_days_from_civil(y, month, day) * 86400 + h * 3600 + mi * 60 + s;
    *out = (time_t) t;
    return true;
}
