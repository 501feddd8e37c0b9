/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_px_buf.c: the proxy's response buffer (plugins/proxy/px_buf.c):
 * its bounds, the order of the bytes through the ring and the file while
 * bytes come in and go out by turns, the file that starts again once read,
 * and a file that cannot be made. The client's queue is a fake
 * stream_write() that takes everything and says MK_AGAIN now and then,
 * as the server's does at its mark.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proxy.h"

static char *out;
static size_t out_len, out_cap;
static unsigned writes, again_every;

static int fake_write(struct mk_request *r, const void *data, size_t len)
{
    (void) r;
    assert_true(out_len + len <= out_cap);
    memcpy(out + out_len, data, len);
    out_len += len;
    writes++;
    return again_every && writes % again_every == 0 ? MK_AGAIN : MK_OK;
}

static void fake_want(struct mk_gw_job *j)
{
    (void) j;
}

static struct mk_api api;
static struct mk_gw_backend be;
static struct mk_gw_job job;

static void setup_job(size_t cap)
{
    api.stream_write = fake_write;
    be.spill_cap = PX_RBUF;
    be.want = fake_want;
    memset(&job, 0, sizeof(job));
    job.api = &api;
    job.be = &be;
    job.state = MK_GW_STREAM;
    free(out);
    out = malloc(cap);
    out_len = 0;
    out_cap = cap;
    writes = 0;
}

static void init(struct px_rbuf *b, size_t mem, uint64_t file, const char *dir)
{
    struct px_conf c;
    memset(&c, 0, sizeof(c));
    c.buffering = 1;
    c.buf_size = mem;
    c.buf_max_temp = file;
    c.buf_dir = (char *) dir;
    px_rbuf_init(b, &c, true);
}

static void pattern(char *p, size_t n, size_t from)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = (char) ((from + i) * 7 % 251);
    }
}

static void test_bounds(void **state)
{
    struct px_rbuf b;
    char data[20000];
    int err;
    (void) state;

    pattern(data, sizeof(data), 0);
    init(&b, 4096, 8192, NULL);
    assert_int_equal(px_rbuf_room(&b), 4096 + 8192);
    assert_true(px_rbuf_empty(&b));
    assert_int_equal(px_rbuf_put(&b, data, 3000, &err), 3000);
    assert_int_equal(err, 0);
    assert_int_equal(px_rbuf_room(&b), 1096 + 8192);
    assert_int_equal(px_rbuf_put(&b, data + 3000, 17000, &err), 1096 + 8192);
    assert_int_equal(err, 0);
    assert_int_equal(px_rbuf_room(&b), 0);
    assert_int_equal(px_rbuf_put(&b, data, 10, &err), 0);
    assert_false(px_rbuf_empty(&b));
    px_rbuf_free(&b);

    /* memory only */
    init(&b, 4096, 0, NULL);
    assert_int_equal(px_rbuf_put(&b, data, 5000, &err), 4096);
    assert_int_equal(px_rbuf_room(&b), 0);
    px_rbuf_free(&b);

    /* Buffering off: nothing */
    struct px_conf c;
    memset(&c, 0, sizeof(c));
    c.buf_size = 4096;
    px_rbuf_init(&b, &c, c.buffering != 0);
    assert_int_equal(px_rbuf_room(&b), 0);
    px_rbuf_free(&b);
}

/* Bytes in and out by turns keep their order, through the ring's wrap and the file. */
static void test_order(void **state)
{
    enum { TOTAL = 3 * 1000 * 1000 };
    struct px_rbuf b;
    char *data = malloc(TOTAL);
    size_t in = 0, step = 1;
    int err;
    (void) state;

    pattern(data, TOTAL, 0);
    setup_job(TOTAL);
    again_every = 3;
    init(&b, 5000, 1 << 20, NULL);
    while (out_len < TOTAL) {
        /* a few pieces come while the queue is at its mark */
        job.paused = true;
        for (int k = 0; k < 4 && in < TOTAL; k++) {
            size_t n = (step * 7919) % 70000 + 1;
            step++;
            n = n < TOTAL - in ? n : TOTAL - in;
            size_t took = px_rbuf_put(&b, data + in, n, &err);
            assert_int_equal(err, 0);
            assert_true(took <= n);
            in += took;
        }
        /* the queue drained: out until it is at its mark again, or all out */
        job.paused = false;
        int rc = px_rbuf_drain(&b, &job);
        assert_true(rc == MK_OK || rc == MK_AGAIN);
        assert_int_equal(rc == MK_OK, px_rbuf_empty(&b));
        assert_true(job.paused || rc == MK_OK);
        if (rc == MK_OK && in == TOTAL) {
            break;
        }
    }
    assert_int_equal(out_len, TOTAL);
    assert_memory_equal(out, data, TOTAL);
    /* read whole, the file started again from empty */
    assert_true(b.fd >= 0);
    assert_int_equal(b.wr, 0);
    assert_int_equal(b.rd, 0);
    px_rbuf_free(&b);
    free(data);
}

/* A file that cannot be made: logged by the caller, memory only from then on. */
static void test_no_file(void **state)
{
    struct px_rbuf b;
    char data[10000];
    int err;
    (void) state;

    pattern(data, sizeof(data), 0);
    init(&b, 4096, 1 << 20, "/nonexistent/px-buf-test");
    assert_int_equal(px_rbuf_put(&b, data, sizeof(data), &err), 4096);
    assert_int_not_equal(err, 0);
    assert_true(b.file_bad);
    assert_int_equal(px_rbuf_room(&b), 0);
    setup_job(sizeof(data));
    again_every = 0;
    assert_int_equal(px_rbuf_drain(&b, &job), MK_OK);
    assert_int_equal(out_len, 4096);
    assert_memory_equal(out, data, 4096);
    /* what did not fit comes again: memory takes it, the file stays given up */
    assert_int_equal(px_rbuf_put(&b, data + 4096, sizeof(data) - 4096, &err), 4096);
    assert_int_equal(err, 0);
    px_rbuf_free(&b);
}

static void test_dir_check(void **state)
{
    char why[256];
    (void) state;
    assert_int_equal(px_rbuf_dir_check(NULL, why, sizeof(why)), MK_OK);
    assert_int_equal(px_rbuf_dir_check("/nonexistent/px-buf-test", why, sizeof(why)), MK_ERR);
    assert_non_null(strstr(why, "/nonexistent/px-buf-test"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_no_file),
        cmocka_unit_test(test_dir_check),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(out);
    return rc;
}
