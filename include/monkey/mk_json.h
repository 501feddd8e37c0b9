/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * mk_json.h: the one UTF-8 validator and JSON writer of the server and its
 * plugins. Inline functions only, so a plugin links nothing.
 *
 * UTF-8: mk_utf8_len() measures one sequence, mk_utf8_valid() a buffer.
 * Overlong forms, surrogates (U+D800..U+DFFF) and code points past U+10FFFF
 * are invalid.
 *
 * JSON: a struct mk_json is a growing buffer bounded by `max` bytes that
 * places the commas between members and elements itself:
 *
 *     struct mk_json j;
 *     mk_json_init(&j, 1 << 20);
 *     mk_json_object_begin(&j);
 *     mk_json_key(&j, "name");
 *     mk_json_string(&j, name);       // escaped; bad UTF-8 becomes U+FFFD
 *     mk_json_key(&j, "sizes");
 *     mk_json_array_begin(&j);
 *     mk_json_uint(&j, 1);
 *     mk_json_uint(&j, 2);
 *     mk_json_array_end(&j);
 *     mk_json_object_end(&j);
 *     if (!j.failed) use(j.data, j.len); // NUL terminated
 *     mk_json_free(&j);
 *
 * A write that would pass `max`, or finds memory short, marks the buffer
 * failed and every later write does nothing: check `failed` once at the end.
 * mk_json_raw() appends text as is (for documents that are not JSON, or
 * pieces already encoded).
 */
#ifndef MONKEY_MK_JSON_H
#define MONKEY_MK_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- UTF-8 ------------------------------------------------------------------ */

/*
 * Length of the valid UTF-8 sequence at s (1 to 4; n bytes are readable),
 * or 0 when the bytes at s are not one.
 */
static inline size_t mk_utf8_len(const unsigned char *s, size_t n)
{
    if (n == 0) {
        return 0;
    }
    if (s[0] < 0x80) {
        return 1;
    }
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        return n >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
    }
    if (s[0] >= 0xe0 && s[0] <= 0xef) {
        if (n < 3 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80) {
            return 0;
        }
        if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0)) {
            return 0; /* overlong, or a surrogate */
        }
        return 3;
    }
    if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        if (n < 4 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80) {
            return 0;
        }
        if ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90)) {
            return 0; /* overlong, or past U+10FFFF */
        }
        return 4;
    }
    return 0;
}

/* Whether the n bytes at s are valid UTF-8 in full. ASCII goes 8 bytes at a time. */
static inline bool mk_utf8_valid(const void *s, size_t n)
{
    const unsigned char *p = (const unsigned char *) s;
    size_t i = 0;

    while (i < n) {
        uint64_t w;
        if (n - i >= 8 && (memcpy(&w, p + i, 8), (w & 0x8080808080808080ull) == 0)) {
            i += 8;
            continue;
        }
        size_t l = mk_utf8_len(p + i, n - i);
        if (l == 0) {
            return false;
        }
        i += l;
    }
    return true;
}

/* ---- JSON ------------------------------------------------------------------- */

#define MK_JSON_DEPTH 32

struct mk_json {
    char *data; /* NUL terminated; NULL until the first write */
    size_t len, cap;
    size_t max;  /* the most bytes the document may take */
    bool failed; /* past max, out of memory, or nested too deep */
    unsigned depth;
    bool first[MK_JSON_DEPTH]; /* per level: nothing written in it yet */
    bool after_key;            /* a key was written: its value follows without a comma */
};

static inline void mk_json_init(struct mk_json *j, size_t max)
{
    memset(j, 0, sizeof(*j));
    j->max = max;
    j->first[0] = true;
}

static inline void mk_json_free(struct mk_json *j)
{
    free(j->data);
    j->data = NULL;
    j->len = j->cap = 0;
}

/* Append n bytes as they are. */
static inline void mk_json_raw(struct mk_json *j, const char *s, size_t n)
{
    if (j->failed) {
        return;
    }
    if (j->len + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 1024;
        while (cap < j->len + n + 1) {
            cap *= 2;
        }
        if (cap > j->max) {
            cap = j->max;
        }
        if (j->len + n + 1 > cap) {
            j->failed = true;
            return;
        }
        char *p = (char *) realloc(j->data, cap);
        if (!p) {
            j->failed = true;
            return;
        }
        j->data = p;
        j->cap = cap;
    }
    memcpy(j->data + j->len, s, n);
    j->len += n;
    j->data[j->len] = '\0';
}

static inline void mk_json_raw_str(struct mk_json *j, const char *s)
{
    mk_json_raw(j, s, strlen(s));
}

/* A comma before a value unless it is the first of its level or follows a key. */
static inline void mk_json_sep(struct mk_json *j)
{
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (!j->first[j->depth]) {
        mk_json_raw(j, ",", 1);
    }
    j->first[j->depth] = false;
}

/* The n bytes at s as the inside of a JSON string (no quotes). */
static inline void mk_json_escape(struct mk_json *j, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *) s;
    size_t i = 0, run = 0; /* bytes at p + i - run .. p + i need no escaping */

    while (i < n) {
        size_t l = p[i] < 0x80 ? 1 : mk_utf8_len(p + i, n - i);
        const char *esc = NULL;
        char u[8];
        if (l == 0) {
            esc = "\\ufffd";
        }
        else if (l == 1) {
            switch (p[i]) {
            case '"':
                esc = "\\\"";
                break;
            case '\\':
                esc = "\\\\";
                break;
            case '\n':
                esc = "\\n";
                break;
            case '\r':
                esc = "\\r";
                break;
            case '\t':
                esc = "\\t";
                break;
            default:
                if (p[i] < 0x20 || p[i] == 0x7f) {
                    snprintf(u, sizeof(u), "\\u%04x", p[i]);
                    esc = u;
                }
            }
        }
        if (!esc) {
            i += l;
            run += l;
            continue;
        }
        mk_json_raw(j, (const char *) p + i - run, run);
        mk_json_raw_str(j, esc);
        run = 0;
        i++;
    }
    mk_json_raw(j, (const char *) p + i - run, run);
}

/* A string value of n bytes; s NULL writes null. */
static inline void mk_json_string_n(struct mk_json *j, const char *s, size_t n)
{
    mk_json_sep(j);
    if (!s) {
        mk_json_raw(j, "null", 4);
        return;
    }
    mk_json_raw(j, "\"", 1);
    mk_json_escape(j, s, n);
    mk_json_raw(j, "\"", 1);
}

static inline void mk_json_string(struct mk_json *j, const char *s)
{
    mk_json_string_n(j, s, s ? strlen(s) : 0);
}

/* A member's name inside an object; its value follows. */
static inline void mk_json_key(struct mk_json *j, const char *name)
{
    mk_json_string(j, name);
    mk_json_raw(j, ":", 1);
    j->after_key = true;
}

static inline void mk_json_uint(struct mk_json *j, uint64_t v)
{
    char buf[24];
    mk_json_sep(j);
    mk_json_raw(j, buf, (size_t) snprintf(buf, sizeof(buf), "%llu", (unsigned long long) v));
}

static inline void mk_json_int(struct mk_json *j, int64_t v)
{
    char buf[24];
    mk_json_sep(j);
    mk_json_raw(j, buf, (size_t) snprintf(buf, sizeof(buf), "%lld", (long long) v));
}

static inline void mk_json_bool(struct mk_json *j, bool v)
{
    mk_json_sep(j);
    mk_json_raw_str(j, v ? "true" : "false");
}

static inline void mk_json_null(struct mk_json *j)
{
    mk_json_sep(j);
    mk_json_raw(j, "null", 4);
}

static inline void mk_json_open(struct mk_json *j, char c)
{
    mk_json_sep(j);
    mk_json_raw(j, &c, 1);
    if (j->depth + 1 >= MK_JSON_DEPTH) {
        j->failed = true;
        return;
    }
    j->depth++;
    j->first[j->depth] = true;
}

static inline void mk_json_close(struct mk_json *j, char c)
{
    if (j->depth == 0) {
        j->failed = true;
        return;
    }
    j->depth--;
    j->after_key = false;
    mk_json_raw(j, &c, 1);
}

static inline void mk_json_object_begin(struct mk_json *j)
{
    mk_json_open(j, '{');
}

static inline void mk_json_object_end(struct mk_json *j)
{
    mk_json_close(j, '}');
}

static inline void mk_json_array_begin(struct mk_json *j)
{
    mk_json_open(j, '[');
}

static inline void mk_json_array_end(struct mk_json *j)
{
    mk_json_close(j, ']');
}

#endif
