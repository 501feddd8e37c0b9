/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * config.c: reader for the indented configuration format (see config.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memory.h"
#include "strings.h"

#define MK_CONF_MAX_FILE (4u << 20) /* configuration files are small */

bool mk_conf_error(const struct mk_conf *conf, int line, char *err, size_t errlen, const char *fmt,
                   ...)
{
    va_list ap;
    int n;

    if (!err || errlen == 0) {
        return false;
    }
    n = snprintf(err, errlen, "%s:%d: ", conf ? conf->path : "?", line);
    if (n < 0 || (size_t) n >= errlen) {
        return false;
    }
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t) n, fmt, ap);
    va_end(ap);
    return false;
}

static bool mk_is_space(char c)
{
    return c == ' ' || c == '\t';
}

static bool mk_is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || mk_is_digit(c) || c == '_' ||
           c == '-' || c == '.' || c == '/';
}

void mk_conf_free(struct mk_conf *conf)
{
    struct mk_list *it, *tmp, *eit, *etmp;

    if (!conf) {
        return;
    }
    mk_list_foreach_safe (it, tmp, &conf->sections) {
        struct mk_conf_section *s = mk_list_entry(it, struct mk_conf_section, node);
        mk_list_foreach_safe (eit, etmp, &s->entries) {
            struct mk_conf_entry *e = mk_list_entry(eit, struct mk_conf_entry, node);
            mk_free(e->key);
            mk_free(e->value);
            mk_free(e);
        }
        mk_free(s->name);
        mk_free(s);
    }
    mk_free(conf->path);
    mk_free(conf);
}

/* Parse one logical line [p, end) numbered `line`. */
static bool mk_conf_line(struct mk_conf *conf, struct mk_conf_section **cur, const char *p,
                         const char *end, int line, char *err, size_t errlen)
{
    const char *s = p;

    for (const char *q = p; q < end; q++) {
        if (*q == '\0') {
            return mk_conf_error(conf, line, err, errlen, "NUL byte in line");
        }
        if (*q == '\r' && q + 1 != end) {
            return mk_conf_error(conf, line, err, errlen, "stray carriage return");
        }
    }
    if (end > p && end[-1] == '\r') {
        end--;
    }
    while (s < end && mk_is_space(*s)) {
        s++;
    }
    if (s == end || *s == '#') {
        return true; /* blank or comment */
    }

    if (s == p) {
        /* Column 0: must be a section header. */
        const char *close;
        if (*p != '[') {
            return mk_conf_error(conf, line, err, errlen,
                                 "expected a [SECTION] header or an indented key");
        }
        close = memchr(p, ']', (size_t) (end - p));
        if (!close || close == p + 1) {
            return mk_conf_error(conf, line, err, errlen, "malformed section header");
        }
        for (const char *q = p + 1; q < close; q++) {
            if (!mk_is_name_char(*q) && *q != ' ') {
                return mk_conf_error(conf, line, err, errlen, "invalid character in section name");
            }
        }
        for (const char *q = close + 1; q < end; q++) {
            if (*q == '#') {
                break;
            }
            if (!mk_is_space(*q)) {
                return mk_conf_error(conf, line, err, errlen, "text after section header");
            }
        }
        struct mk_conf_section *sec = mk_calloc(1, sizeof(*sec));
        sec->name = mk_strndup(p + 1, (size_t) (close - p - 1));
        sec->line = line;
        mk_list_init(&sec->entries);
        mk_list_add_tail(&sec->node, &conf->sections);
        *cur = sec;
        return true;
    }

    /* Indented: "Key value". */
    if (!*cur) {
        return mk_conf_error(conf, line, err, errlen, "key outside of any [SECTION]");
    }
    const char *k = s;
    while (s < end && !mk_is_space(*s)) {
        if (!mk_is_name_char(*s)) {
            return mk_conf_error(conf, line, err, errlen, "invalid character in key name");
        }
        s++;
    }
    const char *kend = s;
    while (s < end && mk_is_space(*s)) {
        s++;
    }
    /* The value ends at a comment introduced by whitespace + '#'. */
    const char *v = s, *vend = s;
    for (const char *q = s; q < end; q++) {
        if (*q == '#' && q > kend && mk_is_space(q[-1])) {
            break;
        }
        if (!mk_is_space(*q)) {
            vend = q + 1;
        }
    }
    if (vend == v) {
        return mk_conf_error(conf, line, err, errlen, "key '%.*s' has no value", (int) (kend - k),
                             k);
    }
    struct mk_conf_entry *e = mk_calloc(1, sizeof(*e));
    e->key = mk_strndup(k, (size_t) (kend - k));
    e->value = mk_strndup(v, (size_t) (vend - v));
    e->line = line;
    e->section = *cur;
    mk_list_add_tail(&e->node, &(*cur)->entries);
    return true;
}

struct mk_conf *mk_conf_parse(const char *label, const char *buf, size_t len, char *err,
                              size_t errlen)
{
    struct mk_conf *conf = mk_calloc(1, sizeof(*conf));
    struct mk_conf_section *cur = NULL;
    const char *p = buf, *end = buf + len;
    int line = 1;

    conf->path = mk_strdup(label);
    mk_list_init(&conf->sections);

    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t) (end - p));
        const char *lend = nl ? nl : end;
        if (!mk_conf_line(conf, &cur, p, lend, line, err, errlen)) {
            mk_conf_free(conf);
            return NULL;
        }
        p = nl ? nl + 1 : end;
        line++;
    }
    return conf;
}

struct mk_conf *mk_conf_load(const char *path, char *err, size_t errlen)
{
    struct stat st;
    struct mk_conf *conf;
    char *buf;
    size_t got = 0;
    int fd;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    if ((uint64_t) st.st_size > MK_CONF_MAX_FILE) {
        snprintf(err, errlen, "%s: file too large", path);
        close(fd);
        return NULL;
    }
    buf = mk_alloc((size_t) st.st_size + 1);
    while (got < (size_t) st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t) st.st_size - got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        got += (size_t) n;
    }
    close(fd);
    conf = mk_conf_parse(path, buf, got, err, errlen);
    mk_free(buf);
    return conf;
}

struct mk_conf_section *mk_conf_section(const struct mk_conf *conf, const char *name)
{
    struct mk_list *it;
    mk_list_foreach (it, &conf->sections) {
        struct mk_conf_section *s = mk_list_entry(it, struct mk_conf_section, node);
        if (strcasecmp(s->name, name) == 0) {
            return s;
        }
    }
    return NULL;
}

struct mk_conf_entry *mk_conf_next(const struct mk_conf *conf, const struct mk_conf_entry *e)
{
    const struct mk_list *sec_node;

    if (e && e->node.next != &e->section->entries) {
        return mk_list_entry(e->node.next, struct mk_conf_entry, node);
    }
    sec_node = e ? e->section->node.next : conf->sections.next;
    for (; sec_node != &conf->sections; sec_node = sec_node->next) {
        const struct mk_conf_section *s = mk_list_entry(sec_node, struct mk_conf_section, node);
        if (!mk_list_is_empty(&s->entries)) {
            return mk_list_entry(s->entries.next, struct mk_conf_entry, node);
        }
    }
    return NULL;
}

struct mk_conf_entry *mk_conf_entry(const struct mk_conf_section *section, const char *key)
{
    struct mk_list *it;
    mk_list_foreach (it, &section->entries) {
        struct mk_conf_entry *e = mk_list_entry(it, struct mk_conf_entry, node);
        if (strcasecmp(e->key, key) == 0) {
            return e;
        }
    }
    return NULL;
}

bool mk_conf_bool(const struct mk_conf *conf, const struct mk_conf_entry *e, bool *out, char *err,
                  size_t errlen)
{
    static const char *const yes[] = {"on", "yes", "true", "1"};
    static const char *const no[] = {"off", "no", "false", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(e->value, yes[i]) == 0) {
            *out = true;
            return true;
        }
        if (strcasecmp(e->value, no[i]) == 0) {
            *out = false;
            return true;
        }
    }
    return mk_conf_error(conf, e->line, err, errlen, "%s: expected On or Off, got '%s'", e->key,
                         e->value);
}

bool mk_conf_int(const struct mk_conf *conf, const struct mk_conf_entry *e, long min, long max,
                 long *out, char *err, size_t errlen)
{
    const char *p = e->value;
    bool neg = false;
    uint64_t v;

    if (*p == '-') {
        neg = true;
        p++;
    }
    if (!mk_str_to_u64(p, strlen(p), (uint64_t) 1 << 62, &v) || (neg && v == 0)) {
        return mk_conf_error(conf, e->line, err, errlen, "%s: expected a whole number, got '%s'",
                             e->key, e->value);
    }
    long n = neg ? -(long) v : (long) v;
    if (n < min || n > max) {
        return mk_conf_error(conf, e->line, err, errlen, "%s: %ld is out of range (%ld to %ld)",
                             e->key, n, min, max);
    }
    *out = n;
    return true;
}

bool mk_conf_size(const struct mk_conf *conf, const struct mk_conf_entry *e, uint64_t min,
                  uint64_t max, uint64_t *out, char *err, size_t errlen)
{
    size_t len = strlen(e->value);
    uint64_t mult = 1, v;

    if (len > 0) {
        switch (mk_tolower(e->value[len - 1])) {
        case 'k':
            mult = 1024;
            len--;
            break;
        case 'm':
            mult = 1024 * 1024;
            len--;
            break;
        case 'g':
            mult = 1024 * 1024 * 1024;
            len--;
            break;
        default:
            break;
        }
    }
    if (!mk_str_to_u64(e->value, len, UINT64_MAX / mult, &v)) {
        return mk_conf_error(conf, e->line, err, errlen,
                             "%s: expected a size such as 512, 32K or 8M, got '%s'", e->key,
                             e->value);
    }
    v *= mult;
    if (v < min || v > max) {
        return mk_conf_error(
            conf, e->line, err, errlen, "%s: %llu bytes is out of range (%llu to %llu)", e->key,
            (unsigned long long) v, (unsigned long long) min, (unsigned long long) max);
    }
    *out = v;
    return true;
}

bool mk_conf_duration(const struct mk_conf *conf, const struct mk_conf_entry *e, uint64_t min_ms,
                      uint64_t max_ms, uint64_t *out, char *err, size_t errlen)
{
    char lo[24], hi[24];
    uint64_t v;

    mk_duration_to_str(min_ms, lo);
    mk_duration_to_str(max_ms, hi);
    if (!mk_str_to_duration_ms(e->value, strlen(e->value), UINT64_MAX / 2, &v)) {
        return mk_conf_error(conf, e->line, err, errlen,
                             "%s: expected a duration such as 30, 500ms, 2s or 1m, got '%s'",
                             e->key, e->value);
    }
    if (v < min_ms || v > max_ms) {
        return mk_conf_error(conf, e->line, err, errlen, "%s: %s is out of range (%s to %s)",
                             e->key, e->value, lo, hi);
    }
    *out = v;
    return true;
}

bool mk_conf_word(const char **cursor, const char **word, size_t *len)
{
    const char *p = *cursor;
    while (*p == ' ' || *p == '\t') {
        p++;
    }
    if (*p == '\0') {
        *cursor = p;
        return false;
    }
    *word = p;
    while (*p && *p != ' ' && *p != '\t') {
        p++;
    }
    *len = (size_t) (p - *word);
    *cursor = p;
    return true;
}
