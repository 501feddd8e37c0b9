/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_reqid.c: libFuzzer target for server/http/reqid.c, the traceparent
 * parser and the request ID check (RequestId, TraceContext).
 *
 * The input is a traceparent value and a request ID value at once.
 * Invariants (each a crash when broken):
 *  - a traceparent accepted is at least 55 bytes, its ids are not all
 *    zero, and written back as version 00 it parses again to the same
 *    ids and flags; for version 00 the text written is the input itself;
 *  - an ID accepted is 1 to MK_REQID_MAX printable ASCII bytes, and one
 *    refused has a byte outside 0x21 to 0x7e or a length outside them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/http/reqid.h"

#include "fuzz_check.h"

static bool all_zero(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (b[i]) {
            return false;
        }
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *v = (const char *) data;
    struct mk_traceparent tp, again;
    char text[MK_TRACEPARENT_LEN];

    if (mk_traceparent_parse(v, size, &tp)) {
        MK_FUZZ_CHECK(size >= MK_TRACEPARENT_LEN);
        MK_FUZZ_CHECK(!all_zero(tp.trace_id, 16) && !all_zero(tp.parent_id, 8));
        mk_traceparent_format(&tp, text);
        MK_FUZZ_CHECK(mk_traceparent_parse(text, sizeof(text), &again));
        MK_FUZZ_CHECK(memcmp(&tp, &again, sizeof(tp)) == 0);
        if (v[0] == '0' && v[1] == '0') {
            MK_FUZZ_CHECK(size == MK_TRACEPARENT_LEN && memcmp(text, v, size) == 0);
        }
    }

    bool printable = size >= 1 && size <= MK_REQID_MAX;
    for (size_t i = 0; printable && i < size; i++) {
        printable = data[i] >= 0x21 && data[i] <= 0x7e;
    }
    MK_FUZZ_CHECK(mk_reqid_valid(v, size) == printable);
    return 0;
}
