/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * auth_users.c: parse the auth plugin's password file. Each non-blank,
 * non-comment line is "user:hash". Only hashes libcrypt verifies slowly
 * are accepted: bcrypt ($2a$, $2b$, $2y$) and SHA-512 crypt ($6$); DES,
 * MD5 ($1$, $apr1$), SHA-1 ({SHA}), SHA-256 crypt, other schemes and plain
 * text are refused with the line and the reason. The table is sorted so
 * lookups are a binary search; a user listed twice is an error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth_users.h"

#define MK_AUTH_BCRYPT_LEN 60    /* "$2b$12$" + 22 salt + 31 hash characters */
#define MK_AUTH_SHA512_DIGEST 86 /* characters after the last '$' */
#define MK_AUTH_SHA512_SALT 16
#define MK_AUTH_REFUSED " (store bcrypt or SHA-512 crypt hashes: see monkey-passwd)"

/* Is c one of the 64 characters of crypt's base-64 alphabet? */
static int mk_auth_b64_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '/';
}

/* Are the n bytes at p all crypt base-64 characters? */
static int mk_auth_b64_run(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!mk_auth_b64_char(p[i])) {
            return 0;
        }
    }
    return 1;
}

/* Does s (len bytes) start with the string prefix? */
static int mk_auth_prefix(const char *s, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len >= n && memcmp(s, prefix, n) == 0;
}

/* "$2?$NN$" + 53 characters. */
static enum mk_auth_hash_kind mk_auth_bcrypt_parse(const char *h, size_t len, unsigned long *cost,
                                                   const char **reason)
{
    if (h[2] == 'x') {
        *reason = "bcrypt $2x$ hashes come from a broken implementation" MK_AUTH_REFUSED;
        return MK_AUTH_HASH_BAD;
    }
    if (len != MK_AUTH_BCRYPT_LEN || h[3] != '$' || h[4] < '0' || h[4] > '9' || h[5] < '0' ||
        h[5] > '9' || h[6] != '$' || !mk_auth_b64_run(h + 7, len - 7) ||
        (h[2] != 'a' && h[2] != 'b' && h[2] != 'y')) {
        *reason = "malformed bcrypt hash (expected $2b$NN$ and 53 characters)";
        return MK_AUTH_HASH_BAD;
    }
    unsigned long c = (unsigned long) (h[4] - '0') * 10 + (unsigned long) (h[5] - '0');
    if (c < 4 || c > 31) {
        *reason = "bcrypt cost out of range (4 to 31)";
        return MK_AUTH_HASH_BAD;
    }
    *cost = c;
    return MK_AUTH_HASH_BCRYPT;
}

/* "$6$" ["rounds=N$"] salt (0 to 16 characters) "$" 86 characters. */
static enum mk_auth_hash_kind mk_auth_sha512_parse(const char *h, size_t len, unsigned long *cost,
                                                   const char **reason)
{
    const char *p = h + 3, *end = h + len;
    unsigned long rounds = 5000;

    *reason = "malformed SHA-512 crypt hash (expected $6$[rounds=N$]SALT$ and 86 characters)";
    if (mk_auth_prefix(p, (size_t) (end - p), "rounds=")) {
        p += 7;
        rounds = 0;
        const char *digits = p;
        while (p < end && *p >= '0' && *p <= '9' && p - digits < 10) {
            rounds = rounds * 10 + (unsigned long) (*p - '0');
            p++;
        }
        if (p == digits || p == end || *p != '$' || *digits == '0') {
            return MK_AUTH_HASH_BAD;
        }
        if (rounds < 1000 || rounds > 999999999) {
            *reason = "SHA-512 crypt rounds out of range (1000 to 999999999)";
            return MK_AUTH_HASH_BAD;
        }
        p++;
    }
    const char *salt = p;
    while (p < end && *p != '$') {
        if ((unsigned char) *p <= ' ' || (unsigned char) *p >= 0x7f) {
            return MK_AUTH_HASH_BAD;
        }
        p++;
    }
    if (p == end || p - salt > MK_AUTH_SHA512_SALT) {
        return MK_AUTH_HASH_BAD;
    }
    p++;
    if (end - p != MK_AUTH_SHA512_DIGEST || !mk_auth_b64_run(p, MK_AUTH_SHA512_DIGEST)) {
        return MK_AUTH_HASH_BAD;
    }
    *cost = rounds;
    return MK_AUTH_HASH_SHA512;
}

enum mk_auth_hash_kind mk_auth_hash_parse(const char *hash, size_t len, unsigned long *cost,
                                          const char **reason)
{
    static const struct {
        const char *prefix;
        const char *reason;
    } refused[] = {
        {"$1$", "MD5-crypt ($1$) hashes are refused" MK_AUTH_REFUSED},
        {"$apr1$", "Apache MD5 ($apr1$) hashes are refused" MK_AUTH_REFUSED},
        {"{SHA}", "SHA-1 ({SHA}) hashes are refused" MK_AUTH_REFUSED},
        {"$5$", "SHA-256 crypt ($5$) hashes are refused" MK_AUTH_REFUSED},
        {"$y$", "yescrypt ($y$) hashes are not supported" MK_AUTH_REFUSED},
        {"$md5", "Sun MD5 hashes are refused" MK_AUTH_REFUSED},
        {"_", "BSDi extended DES hashes are refused" MK_AUTH_REFUSED},
    };

    if (mk_auth_prefix(hash, len, "$2") && len > 3) {
        return mk_auth_bcrypt_parse(hash, len, cost, reason);
    }
    if (mk_auth_prefix(hash, len, "$6$")) {
        return mk_auth_sha512_parse(hash, len, cost, reason);
    }
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        if (mk_auth_prefix(hash, len, refused[i].prefix)) {
            *reason = refused[i].reason;
            return MK_AUTH_HASH_BAD;
        }
    }
    if (len == 13 && mk_auth_b64_run(hash, len)) {
        *reason = "DES crypt hashes are refused" MK_AUTH_REFUSED;
    }
    else if (len == 0) {
        *reason = "empty hash (a user without a password is refused)";
    }
    else if (hash[0] == '$') {
        *reason = "unknown hash scheme" MK_AUTH_REFUSED;
    }
    else {
        *reason =
            "not a bcrypt or SHA-512 crypt hash; plain-text passwords are refused" MK_AUTH_REFUSED;
    }
    return MK_AUTH_HASH_BAD;
}

/* Order of user names: bytes, then length (a prefix sorts first). */
static int mk_auth_user_cmp(const void *a, const void *b)
{
    const struct mk_auth_user *x = a, *y = b;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    if (c) {
        return c;
    }
    return (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* Check one "user:hash" line (NUL-terminated at `end`); split it at the colon. */
static int mk_auth_users_line(char *s, char *end, int lineno, struct mk_auth_user *u, char *err,
                              size_t errlen)
{
    char *colon = memchr(s, ':', (size_t) (end - s));
    const char *reason = NULL;
    unsigned long cost;

    if (!colon) {
        snprintf(err, errlen, "expected user:hash");
        return -1;
    }
    for (const char *p = s; p < colon; p++) {
        if ((unsigned char) *p < 0x20 || *p == 0x7f) {
            snprintf(err, errlen, "the user name contains a control character");
            return -1;
        }
    }
    if (colon > s && (s[0] == ' ' || colon[-1] == ' ')) {
        snprintf(err, errlen, "the user name starts or ends with a space");
        return -1;
    }
    u->name = s;
    u->name_len = (size_t) (colon - s);
    u->hash = colon + 1;
    u->hash_len = (size_t) (end - colon - 1);
    u->line = lineno;
    if (u->name_len == 0 || u->name_len > MK_AUTH_USER_MAX) {
        snprintf(err, errlen, "the user name must have 1 to %d bytes", MK_AUTH_USER_MAX);
        return -1;
    }
    if (u->hash_len > MK_AUTH_HASH_MAX) {
        snprintf(err, errlen, "user '%s': hash too long", u->name);
        return -1;
    }
    *colon = '\0';
    if (mk_auth_hash_parse(u->hash, u->hash_len, &cost, &reason) == MK_AUTH_HASH_BAD) {
        snprintf(err, errlen, "user '%s': %s", u->name, reason);
        return -1;
    }
    return 0;
}

int mk_auth_users_parse(const char *buf, size_t len, struct mk_auth_users *out, int *line,
                        char *err, size_t errlen)
{
    size_t cap = 0;
    int lineno = 0;

    memset(out, 0, sizeof(*out));
    *line = 0;
    out->text = malloc(len + 1);
    if (!out->text) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(out->text, buf, len);
    out->text[len] = '\0';
    for (char *s = out->text, *stop = out->text + len; s < stop;) {
        char *nl = memchr(s, '\n', (size_t) (stop - s));
        char *end = nl ? nl : stop, *next = nl ? nl + 1 : stop;
        lineno++;
        if (memchr(s, '\0', (size_t) (end - s))) {
            *line = lineno;
            snprintf(err, errlen, "NUL byte");
            goto fail;
        }
        if (end > s && end[-1] == '\r') {
            end--;
        }
        *end = '\0';
        const char *first = s + strspn(s, " \t");
        if (*first == '\0' || *first == '#') {
            s = next;
            continue;
        }
        if (out->n == cap) {
            cap = cap ? cap * 2 : 16;
            struct mk_auth_user *v = realloc(out->v, cap * sizeof(*v));
            if (!v) {
                snprintf(err, errlen, "out of memory");
                goto fail;
            }
            out->v = v;
        }
        if (mk_auth_users_line(s, end, lineno, &out->v[out->n], err, errlen) != 0) {
            *line = lineno;
            goto fail;
        }
        out->n++;
        s = next;
    }
    if (out->n) {
        qsort(out->v, out->n, sizeof(*out->v), mk_auth_user_cmp);
    }
    for (size_t i = 1; i < out->n; i++) {
        if (mk_auth_user_cmp(&out->v[i - 1], &out->v[i]) == 0) {
            const struct mk_auth_user *a = &out->v[i - 1], *b = &out->v[i];
            *line = a->line > b->line ? a->line : b->line;
            snprintf(err, errlen, "user '%s' is listed twice (lines %d and %d)", a->name,
                     a->line < b->line ? a->line : b->line, *line);
            goto fail;
        }
    }
    return 0;

fail:
    mk_auth_users_free(out);
    return -1;
}

void mk_auth_users_free(struct mk_auth_users *users)
{
    free(users->v);
    free(users->text);
    memset(users, 0, sizeof(*users));
}

const struct mk_auth_user *mk_auth_users_find(const struct mk_auth_users *users, const char *name,
                                              size_t len)
{
    struct mk_auth_user key = {.name = name, .name_len = len};

    if (!users->n) {
        return NULL;
    }
    return bsearch(&key, users->v, users->n, sizeof(key), mk_auth_user_cmp);
}

enum mk_auth_hash_kind mk_auth_users_typical(const struct mk_auth_users *users, unsigned long *cost)
{
    struct setting {
        enum mk_auth_hash_kind kind;
        unsigned long cost;
        size_t count;
    } *seen = calloc(users->n + 1, sizeof(*seen));
    enum mk_auth_hash_kind kind = MK_AUTH_HASH_BCRYPT;
    size_t n_seen = 0, best = 0;
    const char *reason;

    *cost = 12;
    if (!seen) {
        return kind;
    }
    for (size_t i = 0; i < users->n; i++) {
        unsigned long c = 0;
        enum mk_auth_hash_kind k =
            mk_auth_hash_parse(users->v[i].hash, users->v[i].hash_len, &c, &reason);
        size_t j = 0;
        while (j < n_seen && (seen[j].kind != k || seen[j].cost != c)) {
            j++;
        }
        if (j == n_seen) {
            seen[n_seen++] = (struct setting){k, c, 0};
        }
        if (++seen[j].count > best) {
            best = seen[j].count;
            kind = k;
            *cost = c;
        }
    }
    free(seen);
    return kind;
}
