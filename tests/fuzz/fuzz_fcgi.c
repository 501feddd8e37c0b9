/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_fcgi.c: libFuzzer target for the FastCGI record parser
 * (plugins/fastcgi/fcgi_proto.c), which reads what a backend sends.
 *
 * The first byte gives where to split the input; the rest is parsed once
 * whole and once in two pieces (records cut anywhere). Invariants (each a
 * crash when broken):
 *  - the events of both runs are the same: types, ids, the concatenated
 *    STDOUT and STDERR bytes, the END_REQUEST statuses; and so is the result
 *    (MK_OK, or MK_ERR at the same record);
 *  - every STDOUT/STDERR piece lies inside the input, and their total is at
 *    most the input's length;
 *  - END_REQUEST comes only after 8 content bytes;
 *  - the parser is idle after a run that ended exactly at a record's end.
 * And fcgi_param() round-trips: a pair encoded from the input's bytes is
 * decoded back by a small model of the length rules; fcgi_values_parse()
 * (the variables of a GET_VALUES_RESULT) agrees with a model walk of the
 * input's pairs: MK_ERR exactly when a pair runs past the end, each
 * variable the decimal of its last pair (1 to 9 digits) or -1; and the
 * pairs of fcgi_get_values() parse back to the three names.
 */
#include <string.h>

#include "plugins/fastcgi/fcgi_proto.h"

#include "fuzz_check.h"

struct trace {
    const uint8_t *in;
    size_t in_len;
    uint8_t out[1 << 16];
    size_t out_len;
    uint32_t hash; /* of the event sequence */
    unsigned events;
};

static uint32_t mix(uint32_t h, uint32_t v)
{
    return (h ^ v) * 16777619u;
}

static int on_event(void *arg, const struct fcgi_event *ev)
{
    struct trace *t = arg;
    t->events++;
    if (ev->type == FCGI_END_REQUEST) {
        t->hash = mix(mix(mix(t->hash, 3), ev->app_status), ev->protocol_status);
        t->hash = mix(t->hash, ev->id);
        return MK_OK;
    }
    MK_FUZZ_CHECK(ev->type == FCGI_STDOUT || ev->type == FCGI_STDERR);
    if (ev->len > 0) {
        MK_FUZZ_CHECK(
            mk_fuzz_inside((const char *) ev->data, ev->len, (const char *) t->in, t->in_len));
    }
    MK_FUZZ_CHECK(t->out_len + ev->len <= t->in_len);
    for (size_t i = 0; i < ev->len; i++) {
        t->out[t->out_len++] = ev->data[i];
        t->hash = mix(t->hash, (uint32_t) ev->type << 8 | ev->data[i]);
    }
    if (ev->len == 0) {
        t->hash = mix(mix(t->hash, (uint32_t) ev->type), 0xffff);
    }
    return MK_OK;
}

static int run(const uint8_t *buf, size_t len, size_t cut, struct trace *t)
{
    struct fcgi_parser p;
    memset(&p, 0, sizeof(p));
    memset(t, 0, sizeof(*t));
    t->in = buf;
    t->in_len = len;
    int rc = fcgi_parse(&p, buf, cut, on_event, t);
    if (rc == MK_OK) {
        rc = fcgi_parse(&p, buf + cut, len - cut, on_event, t);
    }
    return rc;
}

static void check_param(const uint8_t *data, size_t size)
{
    uint8_t out[600];
    size_t nlen = size / 2 > 200 ? 200 : size / 2;
    size_t vlen = size - nlen > 300 ? 300 : size - nlen;
    size_t n =
        fcgi_param(out, sizeof(out), (const char *) data, nlen, (const char *) data + nlen, vlen);
    MK_FUZZ_CHECK(n > 0);
    size_t pos = 0, lens[2];
    for (int k = 0; k < 2; k++) {
        if (out[pos] & 0x80) {
            lens[k] = ((size_t) (out[pos] & 0x7f) << 24) | ((size_t) out[pos + 1] << 16) |
                      ((size_t) out[pos + 2] << 8) | out[pos + 3];
            pos += 4;
        }
        else {
            lens[k] = out[pos++];
        }
    }
    MK_FUZZ_CHECK(lens[0] == nlen && lens[1] == vlen);
    MK_FUZZ_CHECK(pos + nlen + vlen == n);
    MK_FUZZ_CHECK(memcmp(out + pos, data, nlen) == 0);
    MK_FUZZ_CHECK(memcmp(out + pos + nlen, data + nlen, vlen) == 0);
}

/* A pair length in the model: 1 byte below 0x80, else 4 (high bit cleared). */
static bool model_len(const uint8_t *b, size_t len, size_t *pos, size_t *out)
{
    if (*pos >= len) {
        return false;
    }
    if (b[*pos] < 0x80) {
        *out = b[(*pos)++];
        return true;
    }
    if (len - *pos < 4) {
        return false;
    }
    *out = ((size_t) (b[*pos] & 0x7f) << 24) | ((size_t) b[*pos + 1] << 16) |
           ((size_t) b[*pos + 2] << 8) | b[*pos + 3];
    *pos += 4;
    return true;
}

static long model_decimal(const uint8_t *p, size_t n)
{
    long v = 0;
    if (n == 0 || n > 9) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return -1;
        }
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

static void check_values(const uint8_t *data, size_t size)
{
    static const char *const names[3] = {"FCGI_MAX_CONNS", "FCGI_MAX_REQS", "FCGI_MPXS_CONNS"};
    long want[3] = {-1, -1, -1};
    int want_rc = MK_OK;
    size_t pos = 0;
    while (pos < size) {
        size_t nl, vl;
        if (!model_len(data, size, &pos, &nl) || !model_len(data, size, &pos, &vl) ||
            nl > size - pos || vl > size - pos - nl) {
            want_rc = MK_ERR;
            break;
        }
        for (int k = 0; k < 3; k++) {
            if (nl == strlen(names[k]) && memcmp(data + pos, names[k], nl) == 0) {
                want[k] = model_decimal(data + pos + nl, vl);
            }
        }
        pos += nl + vl;
    }
    struct fcgi_values v;
    int rc = fcgi_values_parse(data, size, &v);
    MK_FUZZ_CHECK(rc == want_rc);
    if (rc == MK_OK) {
        MK_FUZZ_CHECK(v.max_conns == want[0] && v.max_reqs == want[1] && v.mpxs_conns == want[2]);
    }
    uint8_t gv[FCGI_GET_VALUES_LEN];
    fcgi_get_values(gv);
    MK_FUZZ_CHECK(gv[0] == FCGI_VERSION_1 && gv[1] == FCGI_GET_VALUES && gv[2] == 0 && gv[3] == 0);
    MK_FUZZ_CHECK(((size_t) gv[4] << 8 | gv[5]) == FCGI_GET_VALUES_LEN - FCGI_HEADER_LEN);
    MK_FUZZ_CHECK(fcgi_values_parse(gv + FCGI_HEADER_LEN, FCGI_GET_VALUES_LEN - FCGI_HEADER_LEN,
                                    &v) == MK_OK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct trace whole, split;

    if (size < 1 || size > (1 << 16)) {
        return 0;
    }
    const uint8_t *buf = data + 1;
    size_t len = size - 1;
    size_t cut = len ? data[0] % (len + 1) : 0;

    int rc1 = run(buf, len, len, &whole);
    int rc2 = run(buf, len, cut, &split);
    MK_FUZZ_CHECK(rc1 == rc2);
    MK_FUZZ_CHECK(whole.hash == split.hash);
    MK_FUZZ_CHECK(whole.out_len == split.out_len);
    MK_FUZZ_CHECK(memcmp(whole.out, split.out, whole.out_len) == 0);
    check_param(buf, len);
    check_values(buf, len);
    return 0;
}
