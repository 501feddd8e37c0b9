/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_auth_users.c: libFuzzer target for plugins/auth/auth_users.c, the
 * auth plugin's password file ("user:hash" lines; configuration, read at
 * start and reload) and the stored hash classifier.
 *
 * The input is the file. Invariants (each a crash when broken):
 *  - an accepted file gives one entry per line that is neither blank nor
 *    a comment, sorted by name without duplicates; each name is 1 to 255
 *    bytes without control characters, NUL terminated, inside the table's
 *    text, and mk_auth_users_find finds it (and nothing for a name one
 *    byte longer); each hash is at most 160 bytes and of a kind
 *    mk_auth_hash_parse accepts; the line numbers are in the file;
 *  - a refused file gives a reason and a line within the file, and leaves
 *    the table empty;
 *  - mk_auth_hash_parse of the whole input accepts only bcrypt ($2a$, $2b$,
 *    $2y$, cost 4 to 31, 60 bytes) and SHA-512 crypt ($6$, rounds 1000 to
 *    999999999) and gives a reason for anything else;
 *  - mk_auth_users_typical gives an accepted kind and its cost.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/auth/auth_users.h"

#include "fuzz_check.h"

static void check_kind(enum mk_auth_hash_kind k, unsigned long cost)
{
    MK_FUZZ_CHECK(k == MK_AUTH_HASH_BCRYPT || k == MK_AUTH_HASH_SHA512);
    if (k == MK_AUTH_HASH_BCRYPT) {
        MK_FUZZ_CHECK(cost >= 4 && cost <= 31);
    }
    else {
        MK_FUZZ_CHECK(cost >= 1000 && cost <= 999999999);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *) data;
    struct mk_auth_users users;
    char err[512];
    int line = -1;

    /* the lines that hold an entry, and all of them */
    size_t entries = 0, lines = 0;
    for (size_t i = 0; i < size;) {
        const char *nl = memchr(buf + i, '\n', size - i);
        size_t end = nl ? (size_t) (nl - buf) : size;
        size_t j = i;
        while (j < end && (buf[j] == ' ' || buf[j] == '\t')) {
            j++;
        }
        bool blank = j == end || (j + 1 == end && buf[j] == '\r') || buf[j] == '#';
        entries += !blank;
        lines++;
        i = end + 1;
    }

    err[0] = '\0';
    if (mk_auth_users_parse(buf, size, &users, &line, err, sizeof(err)) == 0) {
        MK_FUZZ_CHECK(users.n == entries && line == 0);
        for (size_t i = 0; i < users.n; i++) {
            const struct mk_auth_user *u = &users.v[i];
            MK_FUZZ_CHECK(u->name_len >= 1 && u->name_len <= MK_AUTH_USER_MAX);
            MK_FUZZ_CHECK(mk_fuzz_inside(u->name, u->name_len + 1, users.text, size + 1));
            MK_FUZZ_CHECK(u->name[u->name_len] == '\0');
            for (size_t k = 0; k < u->name_len; k++) {
                unsigned char c = (unsigned char) u->name[k];
                MK_FUZZ_CHECK(c >= 0x20 && c != 0x7f);
            }
            MK_FUZZ_CHECK(u->hash_len <= MK_AUTH_HASH_MAX);
            MK_FUZZ_CHECK(mk_fuzz_inside(u->hash, u->hash_len, users.text, size + 1));
            MK_FUZZ_CHECK(u->line >= 1 && (size_t) u->line <= lines);
            unsigned long cost = 0;
            const char *reason = NULL;
            enum mk_auth_hash_kind kind = mk_auth_hash_parse(u->hash, u->hash_len, &cost, &reason);
            check_kind(kind, cost);
            if (i > 0) {
                const struct mk_auth_user *p = &users.v[i - 1];
                size_t n = p->name_len < u->name_len ? p->name_len : u->name_len;
                int c = memcmp(p->name, u->name, n);
                MK_FUZZ_CHECK(c < 0 || (c == 0 && p->name_len < u->name_len));
            }
            MK_FUZZ_CHECK(mk_auth_users_find(&users, u->name, u->name_len) == u);
            char longer[MK_AUTH_USER_MAX + 2];
            memcpy(longer, u->name, u->name_len);
            longer[u->name_len] = '\x01'; /* no name holds a control character */
            MK_FUZZ_CHECK(mk_auth_users_find(&users, longer, u->name_len + 1) == NULL);
        }
        unsigned long cost = 0;
        enum mk_auth_hash_kind k = mk_auth_users_typical(&users, &cost);
        check_kind(k, cost);
        if (users.n == 0) {
            MK_FUZZ_CHECK(k == MK_AUTH_HASH_BCRYPT && cost == 12);
        }
        mk_auth_users_free(&users);
    }
    else {
        MK_FUZZ_CHECK(err[0] != '\0' && line >= 0 && (size_t) line <= lines);
        MK_FUZZ_CHECK(users.n == 0 && users.v == NULL && users.text == NULL);
    }

    /* the whole input as one stored hash */
    unsigned long cost = 0;
    const char *reason = NULL;
    enum mk_auth_hash_kind k = mk_auth_hash_parse(buf, size, &cost, &reason);
    if (k == MK_AUTH_HASH_BAD) {
        MK_FUZZ_CHECK(reason && reason[0]);
    }
    else {
        check_kind(k, cost);
        MK_FUZZ_CHECK(size >= 4 && buf[0] == '$');
        MK_FUZZ_CHECK(k == MK_AUTH_HASH_SHA512 ? memcmp(buf, "$6$", 3) == 0
                                               : size == 60 && buf[1] == '2' && buf[3] == '$' &&
                                                     memchr("aby", buf[2], 3));
    }
    return 0;
}
