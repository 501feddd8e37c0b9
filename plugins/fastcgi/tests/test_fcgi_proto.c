/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_fcgi_proto.c: the FastCGI record layer (plugins/fastcgi/fcgi_proto.c):
 * encoding, the parser fed whole and byte by byte, FCGI_GET_VALUES and the
 * variables of its answer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "fcgi_proto.h"

struct seen {
    char out[256], err[256];
    size_t out_len, err_len;
    unsigned stdout_ends, ends;
    uint32_t app_status;
    int protocol_status;
    int stop_at_end;
};

static int on_event(void *arg, const struct fcgi_event *ev)
{
    struct seen *s = arg;
    if (ev->type == FCGI_END_REQUEST) {
        s->ends++;
        s->app_status = ev->app_status;
        s->protocol_status = ev->protocol_status;
        return s->stop_at_end ? MK_ERR : MK_OK;
    }
    if (ev->type == FCGI_STDOUT && ev->len == 0) {
        s->stdout_ends++;
    }
    char *dst = ev->type == FCGI_STDOUT ? s->out : s->err;
    size_t *dl = ev->type == FCGI_STDOUT ? &s->out_len : &s->err_len;
    memcpy(dst + *dl, ev->data, ev->len);
    *dl += ev->len;
    return MK_OK;
}

static size_t record(uint8_t *out, int type, uint16_t id, const void *content, uint16_t len,
                     uint8_t pad)
{
    fcgi_header(out, type, id, len);
    out[6] = pad;
    memcpy(out + 8, content, len);
    memset(out + 8 + len, 0, pad);
    return 8u + len + pad;
}

/* STDOUT (padded), STDERR, an unknown record, the end of STDOUT, END_REQUEST. */
static size_t response(uint8_t *buf)
{
    static const uint8_t end[8] = {0, 0, 1, 2, FCGI_REQUEST_COMPLETE, 0, 0, 0};
    static const uint8_t unknown[8] = {99};
    size_t n = 0;
    n += record(buf + n, FCGI_STDOUT, 1, "Status: 200\r\n\r\nhi", 17, 7);
    n += record(buf + n, FCGI_STDERR, 1, "warn\n", 5, 0);
    n += record(buf + n, FCGI_UNKNOWN_TYPE, 0, unknown, 8, 0);
    n += record(buf + n, FCGI_STDOUT, 1, "!", 1, 0);
    n += record(buf + n, FCGI_STDOUT, 1, "", 0, 0);
    n += record(buf + n, FCGI_END_REQUEST, 1, end, 8, 0);
    return n;
}

static void check(const struct seen *s)
{
    assert_int_equal(s->out_len, 18);
    assert_memory_equal(s->out, "Status: 200\r\n\r\nhi!", 18);
    assert_int_equal(s->err_len, 5);
    assert_int_equal(s->stdout_ends, 1);
    assert_int_equal(s->ends, 1);
    assert_int_equal(s->app_status, 258);
    assert_int_equal(s->protocol_status, FCGI_REQUEST_COMPLETE);
}

static void test_parse_whole_and_bytewise(void **state)
{
    (void) state;
    uint8_t buf[512];
    size_t n = response(buf);

    struct seen whole = {0};
    struct fcgi_parser p = {0};
    assert_int_equal(fcgi_parse(&p, buf, n, on_event, &whole), MK_OK);
    check(&whole);
    assert_true(fcgi_parser_idle(&p));

    struct seen bytes = {0};
    struct fcgi_parser q = {0};
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(fcgi_parse(&q, buf + i, 1, on_event, &bytes), MK_OK);
        if (i + 1 < n) {
            assert_int_equal(bytes.ends, 0);
        }
    }
    check(&bytes);
    assert_true(fcgi_parser_idle(&q));
}

static void test_idle_inside_end_request(void **state)
{
    (void) state;
    uint8_t buf[512];
    size_t n = response(buf);
    struct seen s = {.stop_at_end = 1};
    struct fcgi_parser p = {0};
    /* the callback stops parsing at END_REQUEST: the record is complete */
    assert_int_equal(fcgi_parse(&p, buf, n, on_event, &s), MK_ERR);
    assert_true(fcgi_parser_idle(&p));
    /* cut inside a record: not idle */
    struct fcgi_parser q = {0};
    struct seen t = {0};
    assert_int_equal(fcgi_parse(&q, buf, 12, on_event, &t), MK_OK);
    assert_false(fcgi_parser_idle(&q));
}

static void test_bad_records(void **state)
{
    (void) state;
    uint8_t buf[64];
    struct seen s = {0};
    struct fcgi_parser p = {0};
    record(buf, FCGI_STDOUT, 1, "x", 1, 0);
    buf[0] = 2; /* version 2 */
    assert_int_equal(fcgi_parse(&p, buf, 9, on_event, &s), MK_ERR);
    struct fcgi_parser q = {0};
    record(buf, FCGI_END_REQUEST, 1, "1234567", 7, 0); /* END_REQUEST of 7 bytes */
    assert_int_equal(fcgi_parse(&q, buf, 15, on_event, &s), MK_ERR);
}

static void test_encode(void **state)
{
    (void) state;
    uint8_t b[16];
    fcgi_begin_request(b, 1, 1);
    const uint8_t want[16] = {
        1, FCGI_BEGIN_REQUEST, 0, 1, 0, 8, 0, 0, 0, FCGI_RESPONDER, FCGI_KEEP_CONN, 0, 0, 0, 0, 0};
    assert_memory_equal(b, want, 16);

    uint8_t out[400];
    char value[200];
    memset(value, 'v', sizeof(value));
    size_t n = fcgi_param(out, sizeof(out), "NAME", 4, value, sizeof(value));
    assert_int_equal(n, 1 + 4 + 4 + 200);
    assert_int_equal(out[0], 4);
    assert_int_equal(out[1], 0x80);
    assert_int_equal(out[4], 200);
    assert_memory_equal(out + 5, "NAME", 4);
    /* does not fit: nothing written */
    assert_int_equal(fcgi_param(out, 100, "NAME", 4, value, sizeof(value)), 0);
}

/* FCGI_GET_VALUES, and the variables of a GET_VALUES_RESULT. */
static void test_get_values(void **state)
{
    (void) state;
    uint8_t gv[FCGI_GET_VALUES_LEN];
    fcgi_get_values(gv);
    const uint8_t head[8] = {1, FCGI_GET_VALUES, 0, 0, 0, FCGI_GET_VALUES_LEN - 8, 0, 0};
    assert_memory_equal(gv, head, 8);
    /* the three names, empty values, as the answer's pairs are read */
    struct fcgi_values v;
    assert_int_equal(fcgi_values_parse(gv + 8, FCGI_GET_VALUES_LEN - 8, &v), MK_OK);
    assert_int_equal(v.max_conns, -1); /* asked with empty values: no decimals */
    assert_int_equal(v.max_reqs, -1);
    assert_int_equal(v.mpxs_conns, -1);
    assert_memory_equal(gv + 8,
                        "\x0e\x00"
                        "FCGI_MAX_CONNS",
                        16);

    /* php-fpm's answer: FCGI_MPXS_CONNS alone */
    static const uint8_t fpm[] = "\x0f\x01"
                                 "FCGI_MPXS_CONNS0";
    assert_int_equal(fcgi_values_parse(fpm, sizeof(fpm) - 1, &v), MK_OK);
    assert_int_equal(v.max_conns, -1);
    assert_int_equal(v.max_reqs, -1);
    assert_int_equal(v.mpxs_conns, 0);

    /* all three, another name, a value that is no decimal, a 4-byte length */
    static const uint8_t all[] = "\x0e\x02"
                                 "FCGI_MAX_CONNS12"
                                 "\x0d\x01"
                                 "FCGI_MAX_REQS5"
                                 "\x05\x01"
                                 "OTHER9"
                                 "\x0f\x80\x00\x00\x02"
                                 "FCGI_MPXS_CONNSx1";
    assert_int_equal(fcgi_values_parse(all, sizeof(all) - 1, &v), MK_OK);
    assert_int_equal(v.max_conns, 12);
    assert_int_equal(v.max_reqs, 5);
    assert_int_equal(v.mpxs_conns, -1);

    /* pairs that run past the content */
    static const uint8_t cut[] = "\x0e\x05"
                                 "FCGI_MAX_CONNS12";
    assert_int_equal(fcgi_values_parse(cut, sizeof(cut) - 1, &v), MK_ERR);
    static const uint8_t cut4[] = "\x80\x00";
    assert_int_equal(fcgi_values_parse(cut4, 2, &v), MK_ERR);
    assert_int_equal(fcgi_values_parse(NULL, 0, &v), MK_OK);
    /* more than 9 digits: not a number this side cares for */
    static const uint8_t big[] = "\x0e\x0a"
                                 "FCGI_MAX_CONNS1234567890";
    assert_int_equal(fcgi_values_parse(big, sizeof(big) - 1, &v), MK_OK);
    assert_int_equal(v.max_conns, -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_whole_and_bytewise),
        cmocka_unit_test(test_idle_inside_end_request),
        cmocka_unit_test(test_bad_records),
        cmocka_unit_test(test_encode),
        cmocka_unit_test(test_get_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
