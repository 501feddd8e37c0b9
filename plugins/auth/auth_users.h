/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * auth_users.h: the password file of the auth plugin, "user:hash" lines
 * with bcrypt ($2a$, $2b$, $2y$) or SHA-512 crypt ($6$) hashes. Parsing is
 * pure apart from allocation: bytes in, a sorted table or "line: reason"
 * out; no I/O, no globals, so any thread may call these functions.
 */
#ifndef MONKEY_AUTH_USERS_H
#define MONKEY_AUTH_USERS_H

#include <stddef.h>

/* Longest user name and stored hash accepted in a password file. */
#define MK_AUTH_USER_MAX 255
#define MK_AUTH_HASH_MAX 160

enum mk_auth_hash_kind {
    MK_AUTH_HASH_BAD = 0,
    MK_AUTH_HASH_BCRYPT, /* cost: log2 of the rounds, 4 to 31 */
    MK_AUTH_HASH_SHA512, /* cost: rounds, 1000 to 999999999 (5000 when unsaid) */
};

struct mk_auth_user {
    const char *name; /* NUL-terminated, inside the table's text */
    const char *hash;
    size_t name_len;
    size_t hash_len;
    int line;
};

struct mk_auth_users {
    struct mk_auth_user *v; /* sorted by name, no duplicates */
    size_t n;
    char *text; /* owns the strings */
};

/*
 * Classify a stored hash of `len` bytes. Returns its kind and stores its
 * cost, or returns MK_AUTH_HASH_BAD with a static explanation in *reason
 * (DES, MD5 and other schemes, plain text, malformed hashes).
 */
enum mk_auth_hash_kind mk_auth_hash_parse(const char *hash, size_t len, unsigned long *cost,
                                          const char **reason);

/*
 * Parse a password file of `len` bytes. Blank lines and lines whose first
 * non-blank character is '#' are skipped; lines end with LF or CRLF. On
 * success fills *out (release it with mk_auth_users_free) and returns 0;
 * on error returns -1 with the 1-based line in *line (0: not tied to a
 * line) and the reason in err.
 */
int mk_auth_users_parse(const char *buf, size_t len, struct mk_auth_users *out, int *line,
                        char *err, size_t errlen);

void mk_auth_users_free(struct mk_auth_users *users);

/* The entry of user `name` (`len` bytes, any bytes), or NULL. */
const struct mk_auth_user *mk_auth_users_find(const struct mk_auth_users *users, const char *name,
                                              size_t len);

/*
 * The hash kind and cost most entries share (on a tie, the one that
 * reached the count first in name order), for the dummy verification of
 * unknown users; bcrypt cost 12 for an empty table (or when memory is short).
 */
enum mk_auth_hash_kind mk_auth_users_typical(const struct mk_auth_users *users,
                                             unsigned long *cost);

#endif
