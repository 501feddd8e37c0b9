/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_proxy_protocol.c: libFuzzer target for server/http/proxy_protocol.c,
 * the PROXY protocol header (versions 1 and 2) of a proxy_protocol listener.
 *
 * The input is the bytes a client sends first. Invariants (each a crash
 * when broken), the ones conn.c's reader relies on:
 *  - the result is a length in 1..min(size, MK_PROXY_MAX), MK_AGAIN or
 *    MK_ERR; version 1 headers are at most 107 bytes;
 *  - a header's length does not depend on what follows it: the header
 *    alone parses to the same length and the same addresses;
 *  - every prefix of a header is MK_AGAIN (so a reader may consume all the
 *    bytes of an incomplete header), and MK_AGAIN is never the answer to
 *    MK_PROXY_MAX bytes or more;
 *  - MK_ERR stays MK_ERR whatever follows (a byte more is refused too);
 *  - the views (ALPN, authority, unique id, SSL version) lie inside the
 *    header; a client that is not LOCAL is IPv4 or IPv6.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <monkey/mk_common.h>

#include "server/http/proxy_protocol.h"

#include "fuzz_check.h"

static ssize_t parse(const uint8_t *data, size_t size, struct mk_proxy_info *info)
{
    char *copy = malloc(size ? size : 1);
    MK_FUZZ_CHECK(copy != NULL);
    memcpy(copy, data, size);
    ssize_t rc = mk_proxy_parse(copy, size, info);
    /* views checked while the copy lives */
    if (rc > 0) {
        const struct mk_str *v[] = {&info->alpn, &info->authority, &info->unique_id,
                                    &info->ssl_version};
        for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
            MK_FUZZ_CHECK(v[i]->len == 0 || mk_fuzz_inside(v[i]->p, v[i]->len, copy, (size_t) rc));
        }
        MK_FUZZ_CHECK(info->unique_id.len <= 128);
    }
    free(copy);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mk_proxy_info info, again;
    ssize_t rc = parse(data, size, &info);

    MK_FUZZ_CHECK(rc == MK_AGAIN || rc == MK_ERR || (rc > 0 && (size_t) rc <= size));
    if (rc == MK_AGAIN) {
        MK_FUZZ_CHECK(size < MK_PROXY_MAX);
        if (size > 0) {
            MK_FUZZ_CHECK(parse(data, size - 1, &again) == MK_AGAIN);
        }
        return 0;
    }
    if (rc == MK_ERR) {
        uint8_t *more = malloc(size + 1);
        MK_FUZZ_CHECK(more != NULL);
        memcpy(more, data, size);
        more[size] = size ? data[0] : 'P';
        MK_FUZZ_CHECK(parse(more, size + 1, &again) == MK_ERR);
        free(more);
        return 0;
    }
    MK_FUZZ_CHECK(rc <= MK_PROXY_MAX);
    MK_FUZZ_CHECK(info.version == 1 || info.version == 2);
    MK_FUZZ_CHECK(info.version == 2 || rc <= MK_PROXY_V1_MAX);
    if (!info.local) {
        MK_FUZZ_CHECK(info.src.sa.sa_family == AF_INET || info.src.sa.sa_family == AF_INET6);
        MK_FUZZ_CHECK(info.dst.sa.sa_family == info.src.sa.sa_family);
    }
    /* the header alone */
    MK_FUZZ_CHECK(parse(data, (size_t) rc, &again) == rc);
    MK_FUZZ_CHECK(again.local == info.local && again.version == info.version &&
                  again.ssl == info.ssl);
    MK_FUZZ_CHECK(memcmp(&again.src, &info.src, sizeof(info.src)) == 0);
    MK_FUZZ_CHECK(memcmp(&again.dst, &info.dst, sizeof(info.dst)) == 0);
    /* its prefixes: all of them for a short header, a sample of a long one */
    for (size_t k = 0; k < (size_t) rc; k += (size_t) rc <= 128 ? 1 : 37) {
        MK_FUZZ_CHECK(parse(data, k, &again) == MK_AGAIN);
    }
    MK_FUZZ_CHECK(parse(data, (size_t) rc - 1, &again) == MK_AGAIN);
    return 0;
}
