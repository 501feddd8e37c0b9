/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_accept_encoding.c: libFuzzer target for server/http/accept_encoding.c,
 * the Accept-Encoding parser that picks a precompressed variant.
 *
 * The first input byte is the set of variants present (its low three bits);
 * the rest is the header value. Invariants (each a crash when broken):
 *  - every quality is within 0..1000;
 *  - the choice agrees with the qualities: it is a present coding (or
 *    identity, or none) whose quality is above zero, no present coding has
 *    a higher one, and none earlier in the server's order (br, zstd, gzip,
 *    identity) has the same one; MK_CODING_NONE only when every present
 *    coding has quality zero;
 *  - mk_accept_encoding_pick() on the parsed qualities makes the same choice;
 *  - taking the chosen variant away never brings back a better one (what
 *    static.c relies on when a variant is missing or a file does not
 *    compress);
 *  - no header means identity.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/http/accept_encoding.h"

#include "fuzz_check.h"

static void check_choice(const char *v, size_t len, unsigned avail)
{
    unsigned q[MK_CODING_NONE];
    enum mk_coding c = mk_accept_encoding_choose(v, len, avail);
    unsigned present = avail | MK_CODING_BIT(MK_CODING_IDENTITY);

    mk_accept_encoding_q(v, len, q);
    for (int i = 0; i < MK_CODING_NONE; i++) {
        MK_FUZZ_CHECK(q[i] <= 1000);
    }
    /* the choice again from the parsed qualities (static.c's loop) is the same */
    MK_FUZZ_CHECK(mk_accept_encoding_pick(q, avail) == c);
    if (c == MK_CODING_NONE) {
        for (int i = 0; i < MK_CODING_NONE; i++) {
            MK_FUZZ_CHECK(!(present & MK_CODING_BIT(i)) || q[i] == 0);
        }
        return;
    }
    MK_FUZZ_CHECK(c < MK_CODING_NONE);
    MK_FUZZ_CHECK(present & MK_CODING_BIT(c));
    MK_FUZZ_CHECK(q[c] > 0);
    for (int i = 0; i < MK_CODING_NONE; i++) {
        if (!(present & MK_CODING_BIT(i))) {
            continue;
        }
        MK_FUZZ_CHECK(q[i] <= q[c]);
        MK_FUZZ_CHECK(!(i < (int) c && q[i] == q[c]));
    }
    if (c < MK_CODING_N_VARIANTS) {
        enum mk_coding next = mk_accept_encoding_choose(v, len, avail & ~MK_CODING_BIT(c));
        MK_FUZZ_CHECK(next != c);
        MK_FUZZ_CHECK(next == MK_CODING_NONE || q[next] <= q[c]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        MK_FUZZ_CHECK(mk_accept_encoding_choose(NULL, 0, 7) == MK_CODING_IDENTITY);
        return 0;
    }
    unsigned avail = data[0] & 7u;
    size_t len = size - 1;
    char *v = malloc(len ? len : 1); /* exactly the value: overruns are seen */

    memcpy(v, data + 1, len);
    check_choice(v, len, avail);
    free(v);
    return 0;
}
