/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_gw_head.c: the gateway header block parser (plugins/gateway/gw_head.c),
 * as a table of raw blocks and what the parser must make of them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "gw_head.h"

struct head_case {
    const char *raw;
    int nph;
    int rc;     /* MK_OK, MK_AGAIN, MK_ERR */
    int status; /* when MK_OK */
    const char *location;
    const char *content_type;
    unsigned n_fields;
    size_t head_len; /* 0: strlen(raw) */
};

static const struct head_case cases[] = {
    {"Content-Type: text/html\n\nbody", 0, MK_OK, 0, NULL, "text/html", 0, 25},
    {"Content-Type: text/html\r\n\r\n", 0, MK_OK, 0, NULL, "text/html", 0, 0},
    {"Status: 404 Not Found\r\nX-A: 1\r\nX-B:  two  \r\n\r\n", 0, MK_OK, 404, NULL, NULL, 2, 0},
    {"Status: 302\nLocation: /x?y\n\n", 0, MK_OK, 302, "/x?y", NULL, 0, 0},
    {"Location: http://example.com/\n\n", 0, MK_OK, 0, "http://example.com/", NULL, 0, 0},
    {"content-type:text/plain\n\n", 0, MK_OK, 0, NULL, "text/plain", 0, 0},
    {"HTTP/1.1 203 Fine\r\nX-Nph: 1\r\n\r\nraw", 1, MK_OK, 203, NULL, NULL, 1, 31},
    /* incomplete */
    {"Content-Type: text/html\n", 0, MK_AGAIN},
    {"Content-Ty", 0, MK_AGAIN},
    {"", 0, MK_AGAIN},
    /* malformed */
    {"no colon here\n\n", 0, MK_ERR},
    {": empty name\n\n", 0, MK_ERR},
    {"Bad Name: x\nContent-Type: a\n\n", 0, MK_ERR},
    {"X-Only: field\n\n", 0, MK_ERR}, /* no CGI field */
    {"\n", 0, MK_ERR},                /* nothing at all */
    {"Status: 99\n\n", 0, MK_ERR},
    /* a 1xx is no final response: never an answer (502), 101 least of all */
    {"Status: 101 Switching Protocols\n\n", 0, MK_ERR},
    {"Status: 101\nUpgrade: websocket\nConnection: Upgrade\n\n", 0, MK_ERR},
    {"Status: 100 Continue\r\nContent-Type: text/plain\r\n\r\n", 0, MK_ERR},
    {"Status: 103 Early Hints\nLink: </a.css>; rel=preload\n\n", 0, MK_ERR},
    {"Status: 199\n\n", 0, MK_ERR},
    {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", 1, MK_ERR},
    {"HTTP/1.0 100 Continue\r\n\r\n", 1, MK_ERR},
    {"Status: 200\n\n", 0, MK_OK, 200, NULL, NULL, 0, 0},
    {"Status: 599 Last\n\n", 0, MK_OK, 599, NULL, NULL, 0, 0},
    {"Status: 600\n\n", 0, MK_ERR},
    {"Status: 20x\n\n", 0, MK_ERR},
    {"Status: 2000\n\n", 0, MK_ERR},
    {"Status: 200\nStatus: 404\n\n", 0, MK_ERR},
    {"Content-Type: a\rb\n\n", 0, MK_ERR},
    {"Content-Type: a\x01\n\n", 0, MK_ERR},
    {"Location:\nStatus: 200\n\n", 0, MK_ERR},
    {"Content-Type: a\nContent-Type: b\n\n", 0, MK_ERR},
    {"HTTP/2 200 OK\n\n", 1, MK_ERR},
    {"Content-Type: a\n\n", 1, MK_ERR}, /* NPH without a status line */
    {"\n\n", 1, MK_ERR},
};

static void test_table(void **state)
{
    (void) state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct head_case *c = &cases[i];
        struct mk_gw_head h;
        int rc = mk_gw_head_parse(c->raw, strlen(c->raw), c->nph, &h);
        if (rc != c->rc) {
            fail_msg("case %zu (%s): rc %d, want %d", i, c->raw, rc, c->rc);
        }
        if (rc != MK_OK) {
            continue;
        }
        assert_int_equal(h.status, c->status);
        assert_int_equal(h.n_fields, c->n_fields);
        assert_int_equal(h.head_len, c->head_len ? c->head_len : strlen(c->raw));
        if (c->location) {
            assert_int_equal(h.location.len, strlen(c->location));
            assert_memory_equal(h.location.p, c->location, h.location.len);
        }
        else {
            assert_null(h.location.p);
        }
        if (c->content_type) {
            assert_int_equal(h.content_type.len, strlen(c->content_type));
            assert_memory_equal(h.content_type.p, c->content_type, h.content_type.len);
        }
    }
}

static void test_field_values_trimmed(void **state)
{
    (void) state;
    const char *raw = "Status: 200\nX-A: \t two words \t\n\n";
    struct mk_gw_head h;
    assert_int_equal(mk_gw_head_parse(raw, strlen(raw), 0, &h), MK_OK);
    assert_int_equal(h.fields[0].name.len, 3);
    assert_int_equal(h.fields[0].value.len, 9);
    assert_memory_equal(h.fields[0].value.p, "two words", 9);
}

static void test_too_long(void **state)
{
    (void) state;
    static char big[MK_GW_HEAD_MAX + 64];
    memset(big, 'a', sizeof(big));
    memcpy(big, "X-Long: ", 8);
    struct mk_gw_head h;
    /* no line end within the limit */
    assert_int_equal(mk_gw_head_parse(big, sizeof(big), 0, &h), MK_ERR);
    assert_int_equal(mk_gw_head_parse(big, MK_GW_HEAD_MAX - 1, 0, &h), MK_AGAIN);
    /* too many fields */
    char many[4096] = "Status: 200\n";
    for (int i = 0; i <= MK_GW_FIELDS_MAX; i++) {
        strcat(many, "X-F: 1\n");
    }
    strcat(many, "\n");
    assert_int_equal(mk_gw_head_parse(many, strlen(many), 0, &h), MK_ERR);
}

/* Why a block was refused, for the log: a 1xx status is named as such. */
static void test_why(void **state)
{
    (void) state;
    static const struct {
        const char *raw;
        int nph;
        const char *why;
    } why_cases[] = {
        {"Status: 101 Switching Protocols\n\n", 0, "a 1xx status, which is no final response"},
        {"Status: 103\n\n", 0, "a 1xx status, which is no final response"},
        {"HTTP/1.1 101 Switching Protocols\r\n\r\n", 1, "a 1xx status, which is no final response"},
        {"Status: 20x\n\n", 0, "a bad status"},
        {"Status: 600\n\n", 0, "a bad status"},
        {"Status: 200\nStatus: 404\n\n", 0, "two Status fields"},
        {"X-Only: field\n\n", 0, "no Status, Location nor Content-Type"},
        {"Bad Name: x\n\n", 0, "a bad field name"},
        {"HTTP/2 200 OK\n\n", 1, "a bad status line"},
    };
    for (size_t i = 0; i < sizeof(why_cases) / sizeof(why_cases[0]); i++) {
        struct mk_gw_head h;
        assert_int_equal(
            mk_gw_head_parse(why_cases[i].raw, strlen(why_cases[i].raw), why_cases[i].nph, &h),
            MK_ERR);
        assert_non_null(h.why);
        assert_string_equal(h.why, why_cases[i].why);
    }
    struct mk_gw_head h;
    const char *ok = "Status: 204\n\n";
    assert_int_equal(mk_gw_head_parse(ok, strlen(ok), 0, &h), MK_OK);
    assert_null(h.why);
}

/* CONTENT_LENGTH: the decimal of a Content-Length the server accepted. */
static void test_content_length(void **state)
{
    (void) state;
    static const struct {
        const char *v, *want; /* want NULL: refused */
    } cl_cases[] = {
        {"3", "3"},
        {"3, 3", "3"},
        {"3,3,,3", "3"},
        {" 3 ,\t3 ", "3"},
        {"003", "3"},
        {"0", "0"},
        {"0, 00", "0"},
        {"9223372036854775807", "9223372036854775807"},
        {"9223372036854775808", NULL},
        {"3, 4", NULL},
        {"", NULL},
        {",", NULL},
        {"3x", NULL},
        {"-1", NULL},
        {"+3", NULL},
        {"3 3", NULL},
    };
    for (size_t i = 0; i < sizeof(cl_cases) / sizeof(cl_cases[0]); i++) {
        char out[MK_GW_DEC_MAX];
        size_t n = mk_gw_content_length(cl_cases[i].v, strlen(cl_cases[i].v), out);
        if (!cl_cases[i].want) {
            if (n != 0) {
                fail_msg("'%s' gave '%s'", cl_cases[i].v, out);
            }
            continue;
        }
        assert_int_equal(n, strlen(cl_cases[i].want));
        assert_string_equal(out, cl_cases[i].want);
    }
}

/* An absolute-form target split into its authority and what follows. */
static void test_target_absolute(void **state)
{
    (void) state;
    static const struct {
        const char *t, *authority, *rest; /* authority NULL: not absolute-form */
    } t_cases[] = {
        {"http://a.test/p?q", "a.test", "/p?q"},
        {"HTTPS://a.test:8443/", "a.test:8443", "/"},
        {"http://[::1]:8080?x=1", "[::1]:8080", "?x=1"},
        {"http://a.test", "a.test", ""},
        {"/p?q", NULL, NULL},
        {"*", NULL, NULL},
        {"a.test:443", NULL, NULL},
        {"ftp://a.test/", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(t_cases) / sizeof(t_cases[0]); i++) {
        struct mk_gw_slice a = {NULL, 0}, rest = {NULL, 0};
        int abs = mk_gw_target_absolute(t_cases[i].t, strlen(t_cases[i].t), &a, &rest);
        if (!t_cases[i].authority) {
            assert_int_equal(abs, 0);
            continue;
        }
        assert_int_equal(abs, 1);
        assert_int_equal(a.len, strlen(t_cases[i].authority));
        assert_memory_equal(a.p, t_cases[i].authority, a.len);
        assert_int_equal(rest.len, strlen(t_cases[i].rest));
        assert_memory_equal(rest.p, t_cases[i].rest, rest.len);
    }
}

static void test_framing_and_local(void **state)
{
    (void) state;
    struct mk_gw_slice s = {"content-length", 14};
    assert_true(mk_gw_field_is_framing(&s));
    s = (struct mk_gw_slice){"X-Powered-By", 12};
    assert_false(mk_gw_field_is_framing(&s));
    s = (struct mk_gw_slice){"/a", 2};
    assert_true(mk_gw_location_is_local(&s));
    s = (struct mk_gw_slice){"//evil.example/", 15};
    assert_false(mk_gw_location_is_local(&s));
    s = (struct mk_gw_slice){"http://x/", 9};
    assert_false(mk_gw_location_is_local(&s));
}

/* A head given parsed (the proxy): mk_gw_head_field applies the parser's rules to each field. */
static void test_head_field(void **state)
{
    (void) state;
    struct mk_gw_head h;
    memset(&h, 0, offsetof(struct mk_gw_head, fields));
    h.n_fields = 0;
    struct mk_gw_slice ct = {"Content-Type", 12}, loc = {"location", 8}, x = {"X-A", 3};
    assert_int_equal(mk_gw_head_field(&h, ct, (struct mk_gw_slice){"text/plain", 10}), MK_OK);
    assert_int_equal(mk_gw_head_field(&h, x, (struct mk_gw_slice){"1", 1}), MK_OK);
    assert_int_equal(mk_gw_head_field(&h, loc, (struct mk_gw_slice){"/b", 2}), MK_OK);
    assert_int_equal(h.content_type.len, 10);
    assert_int_equal(h.location.len, 2);
    assert_int_equal(h.n_fields, 1);
    assert_int_equal(h.fields[0].name.len, 3);
    /* what mk_gw_head_parse refuses, refused alike */
    assert_int_equal(mk_gw_head_field(&h, ct, (struct mk_gw_slice){"a/b", 3}), MK_ERR);
    assert_string_equal(h.why, "two Content-Type fields");
    assert_int_equal(mk_gw_head_field(&h, loc, (struct mk_gw_slice){"/c", 2}), MK_ERR);
    assert_string_equal(h.why, "two Location fields");
    memset(&h, 0, offsetof(struct mk_gw_head, fields));
    h.n_fields = 0;
    assert_int_equal(mk_gw_head_field(&h, loc, (struct mk_gw_slice){"", 0}), MK_ERR);
    assert_string_equal(h.why, "an empty Location");
    for (unsigned i = 0; i < MK_GW_FIELDS_MAX; i++) {
        assert_int_equal(mk_gw_head_field(&h, x, (struct mk_gw_slice){"1", 1}), MK_OK);
    }
    assert_int_equal(mk_gw_head_field(&h, x, (struct mk_gw_slice){"1", 1}), MK_ERR);
    assert_string_equal(h.why, "too many fields");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_field_values_trimmed),
        cmocka_unit_test(test_too_long),
        cmocka_unit_test(test_why),
        cmocka_unit_test(test_content_length),
        cmocka_unit_test(test_target_absolute),
        cmocka_unit_test(test_framing_and_local),
        cmocka_unit_test(test_head_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
