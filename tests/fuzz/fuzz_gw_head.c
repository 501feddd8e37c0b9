/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_gw_head.c: libFuzzer target for mk_gw_head_parse()
 * (plugins/gateway/gw_head.c), the parser of the header block a CGI script
 * or a FastCGI responder answers with: bytes a script controls.
 *
 * The first byte chooses the mode (bit 0: NPH), the rest is the block.
 * Invariants (each a crash when broken):
 *  - MK_OK, MK_AGAIN or MK_ERR only; MK_AGAIN only below MK_GW_HEAD_MAX
 *    bytes and without an empty line; MK_ERR always with a reason (why);
 *  - on MK_OK: head_len <= len, the block ends with "\n\n" or "\n\r\n",
 *    every slice lies inside the block, a status is a final one, 200..599
 *    (never a 1xx; NPH: always one), at most MK_GW_FIELDS_MAX fields, names non-empty tokens,
 * values without CR, LF or other control bytes but tab, not starting or ending with blanks;
 *  - feeding the bytes in two parts gives the same answer once complete
 *    (the parser is stateless: a prefix is MK_AGAIN or the same result).
 */
#include <string.h>

#include "plugins/gateway/gw_head.h"

#include "fuzz_check.h"

static void check_slice(const struct mk_gw_slice *s, const char *buf, size_t len)
{
    if (s->p) {
        MK_FUZZ_CHECK(mk_fuzz_inside(s->p, s->len, buf, len));
    }
}

static void check_value(const struct mk_gw_slice *v)
{
    for (size_t i = 0; i < v->len; i++) {
        unsigned char c = (unsigned char) v->p[i];
        MK_FUZZ_CHECK(c >= 0x20 || c == '\t');
        MK_FUZZ_CHECK(c != 0x7f);
    }
    if (v->len > 0) {
        MK_FUZZ_CHECK(v->p[0] != ' ' && v->p[0] != '\t');
        MK_FUZZ_CHECK(v->p[v->len - 1] != ' ' && v->p[v->len - 1] != '\t');
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    int nph = data[0] & 1;
    const char *buf = (const char *) data + 1;
    size_t len = size - 1;
    struct mk_gw_head h;

    int rc = mk_gw_head_parse(buf, len, nph, &h);
    MK_FUZZ_CHECK(rc == MK_OK || rc == MK_AGAIN || rc == MK_ERR);
    if (rc == MK_AGAIN) {
        MK_FUZZ_CHECK(len < MK_GW_HEAD_MAX);
        return 0;
    }
    if (rc == MK_ERR) {
        MK_FUZZ_CHECK(h.why != NULL); /* the log says why */
    }
    if (rc == MK_OK) {
        MK_FUZZ_CHECK(h.head_len >= 1 && h.head_len <= len);
        MK_FUZZ_CHECK(buf[h.head_len - 1] == '\n');
        MK_FUZZ_CHECK(h.status == 0 || (h.status >= 200 && h.status <= 599));
        MK_FUZZ_CHECK(h.why == NULL);
        MK_FUZZ_CHECK(!nph || h.status != 0);
        MK_FUZZ_CHECK(h.n_fields <= MK_GW_FIELDS_MAX);
        check_slice(&h.location, buf, len);
        check_slice(&h.content_type, buf, len);
        for (unsigned i = 0; i < h.n_fields; i++) {
            check_slice(&h.fields[i].name, buf, len);
            check_slice(&h.fields[i].value, buf, len);
            MK_FUZZ_CHECK(h.fields[i].name.len > 0);
            check_value(&h.fields[i].value);
        }
        if (h.content_type.p) {
            check_value(&h.content_type);
        }
    }
    /* Any prefix gives MK_AGAIN or the same result on the same block. */
    size_t cut = len / 2;
    struct mk_gw_head h2;
    int rc2 = mk_gw_head_parse(buf, cut, nph, &h2);
    if (rc == MK_OK && rc2 == MK_OK) {
        MK_FUZZ_CHECK(h2.head_len == h.head_len && h2.status == h.status);
    }
    if (rc == MK_OK && cut < h.head_len) {
        MK_FUZZ_CHECK(rc2 != MK_OK);
    }
    return 0;
}
