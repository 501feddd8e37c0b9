/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_auth_units.c: unit tests of the auth plugin's pure parts, the
 * password file parser (auth_users.c) and SHA-256 / HMAC-SHA-256
 * (auth_digest.c, FIPS 180-4 and RFC 4231 vectors). Tables of inputs with
 * the expected result; exits 1 on the first failed check with its line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth_digest.h"
#include "auth_users.h"

static int failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#define BCRYPT "$2b$04$wwyNp1dLsEcACGMLsYZEJ.PVYNSnDKc0luYoumAXinFUxgHePIgTO"
#define SHA512                                                                                     \
    "$6$abcdefgh$ltjgWl6579NluT/Vi1nwEvcil.G5Nbc4NiXZaNGStk8PSwGfQv72N2CKPPrVACtLtip/cZ/1GM/"      \
    "O6IND4WQhG."
#define SHA512_ROUNDS                                                                              \
    "$6$rounds=6000$saltsalt$TcDhk3vUDSxdkj1LteXIA0htMq0pABOdsvxFLaAf.9RFOU5G4Ss5YPBOHb6uwE8gqark" \
    "BzBeX3AE9KlDjd3pv0"

/* Write n bytes as lower-case hex (2n characters and a NUL) to out. */
static void hex(const uint8_t *d, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) {
        sprintf(out + 2 * i, "%02x", d[i]);
    }
}

static void test_sha256(void)
{
    static const struct {
        const char *in;
        const char *out;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    uint8_t d[MK_AUTH_SHA256_LEN];
    char h[2 * MK_AUTH_SHA256_LEN + 1];
    struct mk_auth_sha256 ctx;

    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        mk_auth_sha256_init(&ctx);
        mk_auth_sha256_update(&ctx, v[i].in, strlen(v[i].in));
        mk_auth_sha256_final(&ctx, d);
        hex(d, sizeof(d), h);
        CHECK(strcmp(h, v[i].out) == 0);
    }
    /* A million 'a', fed in uneven pieces. */
    char block[1000];
    memset(block, 'a', sizeof(block));
    mk_auth_sha256_init(&ctx);
    for (size_t done = 0, step = 1; done < 1000000; step = step % 997 + 1) {
        size_t n = 1000000 - done < step ? 1000000 - done : step;
        mk_auth_sha256_update(&ctx, block, n);
        done += n;
    }
    mk_auth_sha256_final(&ctx, d);
    hex(d, sizeof(d), h);
    CHECK(strcmp(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0);
}

static void test_hmac(void)
{
    uint8_t key1[20], key6[131], d[MK_AUTH_SHA256_LEN];
    char h[2 * MK_AUTH_SHA256_LEN + 1];
    const char *msg6 = "Test Using Larger Than Block-Size Key - Hash Key First";

    memset(key1, 0x0b, sizeof(key1));
    const void *p1[] = {"Hi ", "There"};
    const size_t l1[] = {3, 5};
    mk_auth_hmac_sha256(key1, sizeof(key1), p1, l1, 2, d);
    hex(d, sizeof(d), h);
    CHECK(strcmp(h, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7") == 0);

    const void *p2[] = {"what do ya want for nothing?"};
    const size_t l2[] = {28};
    mk_auth_hmac_sha256((const uint8_t *) "Jefe", 4, p2, l2, 1, d);
    hex(d, sizeof(d), h);
    CHECK(strcmp(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843") == 0);

    memset(key6, 0xaa, sizeof(key6));
    const void *p6[] = {msg6};
    const size_t l6[] = {strlen(msg6)};
    mk_auth_hmac_sha256(key6, sizeof(key6), p6, l6, 1, d);
    hex(d, sizeof(d), h);
    CHECK(strcmp(h, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54") == 0);

    CHECK(mk_auth_equal("abcd", "abcd", 4) == 1);
    CHECK(mk_auth_equal("abcd", "abce", 4) == 0);
    CHECK(mk_auth_equal("xbcd", "abcd", 4) == 0);
}

static void test_hash_parse(void)
{
    static const struct {
        const char *hash;
        enum mk_auth_hash_kind kind;
        unsigned long cost;
        const char *reason; /* part of the reason when refused */
    } v[] = {
        {BCRYPT, MK_AUTH_HASH_BCRYPT, 4, NULL},
        {"$2a$04$wwyNp1dLsEcACGMLsYZEJ.PVYNSnDKc0luYoumAXinFUxgHePIgTO", MK_AUTH_HASH_BCRYPT, 4,
         NULL},
        {"$2y$31$wwyNp1dLsEcACGMLsYZEJ.PVYNSnDKc0luYoumAXinFUxgHePIgTO", MK_AUTH_HASH_BCRYPT, 31,
         NULL},
        {SHA512, MK_AUTH_HASH_SHA512, 5000, NULL},
        {SHA512_ROUNDS, MK_AUTH_HASH_SHA512, 6000, NULL},
        {"$2x$04$wwyNp1dLsEcACGMLsYZEJ.PVYNSnDKc0luYoumAXinFUxgHePIgTO", 0, 0, "$2x$"},
        {"$2b$03$wwyNp1dLsEcACGMLsYZEJ.PVYNSnDKc0luYoumAXinFUxgHePIgTO", 0, 0, "cost"},
        {"$2b$32$wwyNp1dLsEcACGMLsYZEJ.PVYNSnDKc0luYoumAXinFUxgHePIgTO", 0, 0, "cost"},
        {"$2b$04$wwyNp1dLsEcACGMLsYZEJ.PVYNSnDKc0luYoumAXinFUxgHePIgT", 0, 0, "malformed"},
        {"$2b$04$wwyNp1dLsEcACGMLsYZEJ.PVYNSnDKc0luYoumAXinFUxgHePIg!O", 0, 0, "malformed"},
        {"$2b$4$wwyNp1dLsEcACGMLsYZEJ.PVYNSnDKc0luYoumAXinFUxgHePIgTOO", 0, 0, "malformed"},
        {"$6$rounds=999$saltsalt$TcDhk3vUDSxdkj1LteXIA0htMq0pABOdsvxFLaAf."
         "9RFOU5G4Ss5YPBOHb6uwE8gqark"
         "BzBeX3AE9KlDjd3pv0",
         0, 0, "rounds"},
        {"$6$rounds=$saltsalt$TcDhk3vUDSxdkj1LteXIA0htMq0pABOdsvxFLaAf.9RFOU5G4Ss5YPBOHb6uwE8gqark"
         "BzBeX3AE9KlDjd3pv0",
         0, 0, "malformed"},
        {"$6$abcdefgh$short", 0, 0, "malformed"},
        {"$6$abcdefghijklmnopq$ltjgWl6579NluT/Vi1nwEvcil.G5Nbc4NiXZaNGStk8PSwGfQv72N2CKPPrVACtLtip/"
         "cZ/1GM/O6IND4WQhG.",
         0, 0, "malformed"},
        {"$1$ab$dslkcXxVH.x8LwW1W/oAB/", 0, 0, "MD5"},
        {"$apr1$ab$jiiV6N7hIIuIoJbc1hxOE/", 0, 0, "Apache MD5"},
        {"{SHA}qUqP5cyxm6YcTAhz05Hph5gvu9M=", 0, 0, "SHA-1"},
        {"$5$abc$xyz", 0, 0, "SHA-256"},
        {"$y$j9T$abc$xyz", 0, 0, "yescrypt"},
        {"abJnggxhB/yWI", 0, 0, "DES"},
        {"secret", 0, 0, "plain-text"},
        {"", 0, 0, "empty"},
        {"$9$what", 0, 0, "unknown"},
    };

    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        unsigned long cost = 0;
        const char *reason = NULL;
        enum mk_auth_hash_kind k = mk_auth_hash_parse(v[i].hash, strlen(v[i].hash), &cost, &reason);
        if (k != v[i].kind) {
            fprintf(stderr, "case %zu (%s): kind %d, expected %d\n", i, v[i].hash, (int) k,
                    (int) v[i].kind);
        }
        CHECK(k == v[i].kind);
        if (v[i].kind) {
            CHECK(cost == v[i].cost);
        }
        else {
            CHECK(reason && strstr(reason, v[i].reason));
        }
    }
}

static void test_users_parse(void)
{
/* A case: the text (NUL bytes allowed), the line of the error (0: accepted), part of the reason. */
#define USERS(text, line, reason)                                                                  \
    {                                                                                              \
        text, sizeof(text) - 1, line, reason                                                       \
    }
    static const struct {
        const char *text;
        size_t len;
        int line;
        const char *reason;
    } v[] = {
        USERS("", 0, NULL),
        USERS("# only a comment\n\n   \n", 0, NULL),
        USERS("alice:" BCRYPT "\n", 0, NULL),
        USERS("alice:" BCRYPT "\r\nbob:" SHA512, 0, NULL),
        USERS("  # indented comment\nalice:" BCRYPT "\n", 0, NULL),
        USERS("alice:" BCRYPT "\nalice:" SHA512 "\n", 2, "listed twice"),
        USERS("alice:" BCRYPT "\n\nbob\n", 3, "user:hash"),
        USERS(":" BCRYPT "\n", 1, "1 to 255"),
        USERS("al ice:" BCRYPT "\n", 0, NULL),
        USERS("alice :" BCRYPT "\n", 1, "space"),
        USERS("#\n  alice:" BCRYPT "\n", 2, "space"),
        USERS("alice:" BCRYPT " \n", 1, "malformed bcrypt"),
        USERS("alice:secret\n", 1, "plain-text"),
        USERS("#\nalice:$1$ab$dslkcXxVH.x8LwW1W/oAB/\n", 2, "MD5"),
        USERS("alice:" BCRYPT "\nbob:abJnggxhB/yWI\n", 2, "DES"),
        USERS("alice:" BCRYPT "\nb\0b:" BCRYPT "\n", 2, "NUL"),
        USERS("al\x01ice:" BCRYPT "\n", 1, "control"),
    };

    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        struct mk_auth_users u;
        char err[256] = "";
        int line = -1;
        int rc = mk_auth_users_parse(v[i].text, v[i].len, &u, &line, err, sizeof(err));
        if ((rc == 0) != (v[i].line == 0) || (rc != 0 && line != v[i].line)) {
            fprintf(stderr, "case %zu: rc %d line %d err '%s'\n", i, rc, line, err);
        }
        CHECK((rc == 0) == (v[i].line == 0));
        if (rc == 0) {
            mk_auth_users_free(&u);
            continue;
        }
        CHECK(line == v[i].line);
        CHECK(strstr(err, v[i].reason) != NULL);
    }
}

static void test_users_find_and_typical(void)
{
    const char *text = "carol:" SHA512 "\nalice:" BCRYPT "\nbob:" BCRYPT "\n";
    struct mk_auth_users u;
    unsigned long cost = 0;
    char err[256];
    int line;

    CHECK(mk_auth_users_parse(text, strlen(text), &u, &line, err, sizeof(err)) == 0);
    CHECK(u.n == 3);
    const struct mk_auth_user *a = mk_auth_users_find(&u, "alice", 5);
    CHECK(a && strcmp(a->hash, BCRYPT) == 0 && a->line == 2);
    const struct mk_auth_user *c = mk_auth_users_find(&u, "carol", 5);
    CHECK(c && strcmp(c->hash, SHA512) == 0 && c->line == 1);
    CHECK(mk_auth_users_find(&u, "alic", 4) == NULL);
    CHECK(mk_auth_users_find(&u, "alicee", 6) == NULL);
    CHECK(mk_auth_users_find(&u, "bob\0x", 5) == NULL);
    CHECK(mk_auth_users_typical(&u, &cost) == MK_AUTH_HASH_BCRYPT && cost == 4);
    mk_auth_users_free(&u);

    text = "carol:" SHA512 "\nalice:" BCRYPT "\nbob:" SHA512_ROUNDS "\ndave:" SHA512 "\n";
    CHECK(mk_auth_users_parse(text, strlen(text), &u, &line, err, sizeof(err)) == 0);
    CHECK(mk_auth_users_typical(&u, &cost) == MK_AUTH_HASH_SHA512 && cost == 5000);
    mk_auth_users_free(&u);

    CHECK(mk_auth_users_parse("", 0, &u, &line, err, sizeof(err)) == 0);
    CHECK(mk_auth_users_find(&u, "x", 1) == NULL);
    CHECK(mk_auth_users_typical(&u, &cost) == MK_AUTH_HASH_BCRYPT && cost == 12);
    mk_auth_users_free(&u);
}

int main(void)
{
    test_sha256();
    test_hmac();
    test_hash_parse();
    test_users_parse();
    test_users_find_and_typical();
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("test_auth_units: all checks passed\n");
    return 0;
}
