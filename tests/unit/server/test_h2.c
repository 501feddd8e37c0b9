/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_h2.c: server/proto/h2.c through the loopback server (loopback.h), its
 * frames made and read by an nghttp2 client session: streams as requests
 * (static files, 404, HEAD), several streams on one connection, and the
 * client's flow-control window respected. Without HTTP/2 built in, "h2" is
 * a protocol the server does not know.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "loopback.h"
#include "server/proto/h2.h"
#include "server/conn/transport.h"

#ifdef MK_HAVE_H2
#include <nghttp2/nghttp2.h>

#define MAX_STREAMS 8

struct client_stream {
    int32_t id;
    int status;
    char *data;
    size_t len;
    bool ended;
};

struct client {
    nghttp2_session *ng;
    struct client_stream st[MAX_STREAMS];
    int n;
};

static struct client_stream *client_find(struct client *cl, int32_t id)
{
    for (int i = 0; i < cl->n; i++) {
        if (cl->st[i].id == id) {
            return &cl->st[i];
        }
    }
    return NULL;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name,
                     size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
    struct client_stream *s = client_find(user, frame->hd.stream_id);

    (void) ng;
    (void) flags;
    if (s && nlen == 7 && memcmp(name, ":status", 7) == 0) {
        s->status = atoi((const char *) value);
        (void) vlen;
    }
    return 0;
}

static int on_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *user)
{
    struct client_stream *s = client_find(user, id);

    (void) ng;
    (void) flags;
    if (s) {
        s->data = realloc(s->data, s->len + len + 1);
        memcpy(s->data + s->len, data, len);
        s->len += len;
        s->data[s->len] = '\0';
    }
    return 0;
}

static int on_close(nghttp2_session *ng, int32_t id, uint32_t error, void *user)
{
    struct client_stream *s = client_find(user, id);

    (void) ng;
    (void) error;
    if (s) {
        s->ended = true;
    }
    return 0;
}

static void client_init(struct client *cl)
{
    nghttp2_session_callbacks *cbs;

    memset(cl, 0, sizeof(*cl));
    assert_int_equal(nghttp2_session_callbacks_new(&cbs), 0);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_close);
    assert_int_equal(nghttp2_session_client_new(&cl->ng, cbs, cl), 0);
    nghttp2_session_callbacks_del(cbs);
    assert_int_equal(nghttp2_submit_settings(cl->ng, NGHTTP2_FLAG_NONE, NULL, 0), 0);
}

static void client_request(struct client *cl, const char *method, const char *path)
{
    nghttp2_nv nv[] = {
        {(uint8_t *) ":method", (uint8_t *) method, 7, strlen(method), 0},
        {(uint8_t *) ":scheme", (uint8_t *) "https", 7, 5, 0},
        {(uint8_t *) ":authority", (uint8_t *) "localhost", 10, 9, 0},
        {(uint8_t *) ":path", (uint8_t *) path, 5, strlen(path), 0},
    };
    int32_t id = nghttp2_submit_request(cl->ng, NULL, nv, 4, NULL, NULL);

    assert_true(id > 0);
    assert_true(cl->n < MAX_STREAMS);
    cl->st[cl->n++] = (struct client_stream){.id = id};
}

/* Run what the client queued through the server; feed the answer back. */
static void client_exchange(struct client *cl, struct mk_loopback *lb)
{
    const uint8_t *p;
    char *in = NULL, *out;
    size_t in_len = 0, out_len;
    ssize_t n;

    while ((n = nghttp2_session_mem_send(cl->ng, &p)) > 0) {
        in = realloc(in, in_len + (size_t) n);
        memcpy(in + in_len, p, (size_t) n);
        in_len += (size_t) n;
    }
    out = mk_loopback_run_bytes(lb, in, in_len, "h2", &out_len);
    assert_true(nghttp2_session_mem_recv(cl->ng, (const uint8_t *) out, out_len) ==
                (ssize_t) out_len);
    free(out);
    free(in);
}

static void client_free(struct client *cl)
{
    for (int i = 0; i < cl->n; i++) {
        free(cl->st[i].data);
    }
    nghttp2_session_del(cl->ng);
}

static void open_server(struct mk_loopback *lb, char *dir)
{
    char err[1024];
    char big[100001];

    mk_loopback_dir(dir, NULL, NULL);
    memset(big, 'b', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    mk_loopback_file(dir, "htdocs/big.txt", big);
    assert_int_equal(mk_loopback_open(lb, dir, err, sizeof(err)), MK_OK);
}

static void test_streams_are_requests(void **state)
{
    char dir[PATH_MAX];
    struct mk_loopback lb;
    struct client cl;

    (void) state;
    open_server(&lb, dir);
    client_init(&cl);
    client_request(&cl, "GET", "/index.html");
    client_request(&cl, "GET", "/missing.html");
    client_request(&cl, "HEAD", "/index.html");
    client_exchange(&cl, &lb);
    assert_int_equal(cl.st[0].status, 200);
    assert_true(cl.st[0].ended);
    assert_int_equal(cl.st[0].len, 13);
    assert_memory_equal(cl.st[0].data, "<p>hello</p>\n", 13);
    assert_int_equal(cl.st[1].status, 404);
    assert_true(cl.st[1].ended);
    assert_int_equal(cl.st[2].status, 200);
    assert_int_equal(cl.st[2].len, 0);
    client_free(&cl);
    mk_loopback_close(&lb);
    mk_loopback_dir_free(dir);
}

static void test_client_window_is_respected(void **state)
{
    char dir[PATH_MAX];
    struct mk_loopback lb;
    struct client cl;

    (void) state;
    open_server(&lb, dir);
    client_init(&cl);
    client_request(&cl, "GET", "/big.txt");
    client_exchange(&cl, &lb);
    assert_int_equal(cl.st[0].status, 200);
    /* No WINDOW_UPDATE came: exactly the initial window of 65535 bytes. */
    assert_int_equal(cl.st[0].len, 65535);
    assert_false(cl.st[0].ended);
    client_free(&cl);
    mk_loopback_close(&lb);
    mk_loopback_dir_free(dir);
}

static void test_h2_is_a_known_protocol(void **state)
{
    (void) state;
    assert_true(mk_proto_known("h2", 2));
    assert_ptr_equal(mk_proto_find("h2", 2), &mk_proto_h2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_streams_are_requests),
        cmocka_unit_test(test_client_window_is_respected),
        cmocka_unit_test(test_h2_is_a_known_protocol),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* built without HTTP/2 */

static void test_h2_is_unknown_without_nghttp2(void **state)
{
    (void) state;
    assert_false(mk_proto_known("h2", 2));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_h2_is_unknown_without_nghttp2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
