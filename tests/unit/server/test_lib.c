/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_lib.c: the program's handlers (server/plugin/lib.c, monkey/mk_lib.h),
 * driven over loopback TCP. Two servers in one process with their own
 * routes and sites; exact, ":name" and prefix routes; a whole request
 * body; a 100 MB request body streamed to a handler and a 100 MB response
 * streamed with back-pressure; parked requests finished from another
 * thread; start and stop 100 times (the ASan run checks nothing leaks).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <monkey/monkey.h>

#include "tcp.h"

#define BIG (100u * 1024 * 1024)

/* Failures seen on the server's threads (cmocka asserts only on the test's). */
static atomic_int worker_errors;
/* Times the 100 MB stream met a full queue (back-pressure) and waited. */
static atomic_int big_agains;

/* A connection to the server on port with `req` sent on it. */
static int send_request(int port, const char *req)
{
    int fd = tcp_dial(port, 20);
    tcp_send_all(fd, req, strlen(req));
    return fd;
}

/* One request (with `extra` header lines and Connection: close); the response. */
static char *http(int port, const char *method, const char *path, const char *host,
                  const char *extra, const char *body)
{
    char req[1024];
    snprintf(req, sizeof(req),
             "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n%s"
             "Content-Length: %zu\r\n\r\n",
             method, path, host, extra ? extra : "", body ? strlen(body) : 0);
    int fd = send_request(port, req);
    if (body) {
        tcp_send_all(fd, body, strlen(body));
    }
    return tcp_read_all(fd);
}

/* The body of a 200 response to GET path; fails the test on another status. */
static char *get_body(int port, const char *path, const char *host)
{
    char *res = http(port, "GET", path, host, NULL, NULL);
    if (strncmp(res, "HTTP/1.1 200 OK\r\n", 17) != 0) {
        fail_msg("GET %s: %.200s", path, res);
    }
    char *body = strdup(strstr(res, "\r\n\r\n") + 4);
    free(res);
    return body;
}

/* ---- handlers ---- */

static void h_text(struct mk_http *h, void *data)
{
    mk_http_status(h, 200);
    mk_http_header(h, "Content-Type", "text/plain");
    mk_http_send(h, data, strlen(data));
    mk_http_done(h);
}

/* "user ID page QUERY" from /users/:id */
static void h_user(struct mk_http *h, void *data)
{
    size_t len, qlen = 0;
    const char *id = mk_http_param(h, "id", &len);
    const char *q = mk_http_query(h, &qlen);
    size_t alen = 1;
    const char *agent = mk_http_request_header(h, "x-agent", &alen);
    char out[256];

    (void) data;
    unsigned count = 0;
    const char *name, *value;
    size_t nlen, vlen;
    while (mk_http_request_header_at(h, count, &name, &nlen, &value, &vlen) == MK_OK) {
        count++;
    }
    int n = snprintf(out, sizeof(out), "user %.*s %.*s %.*s %u", (int) len, id, (int) qlen,
                     q ? q : "", (int) alen, agent ? agent : "-", count);
    mk_http_header(h, "X-Route", "user");
    if (mk_http_header(h, "Content-Type", "text/plain\r\nX-Evil: 1") != MK_ERR ||
        mk_http_header(h, "X-Evil", "a\r\nX-Evil: 1") != MK_ERR) {
        atomic_fetch_add(&worker_errors, 1);
    }
    mk_http_send(h, out, (size_t) n);
    mk_http_done(h);
}

/* Echo a whole body: the handler runs twice. */
static void h_echo(struct mk_http *h, void *data)
{
    size_t len;
    const char *body = mk_http_body(h, &len);

    (void) data;
    if (!body) {
        if (mk_http_read_body(h, NULL, NULL, 0) != MK_OK) {
            atomic_fetch_add(&worker_errors, 1);
        }
        return;
    }
    mk_http_status(h, 201);
    mk_http_send(h, "got:", 4);
    mk_http_send(h, body, len);
    mk_http_done(h);
}

/* A streamed request body: count and sum it, answer at the end. */
struct upload {
    uint64_t bytes, sum;
};

static int h_upload_body(struct mk_http *h, int event, const void *data, size_t len, void *arg)
{
    struct upload *u = arg;

    if (event == MK_HTTP_BODY_DATA) {
        const unsigned char *p = data;
        for (size_t i = 0; i < len; i++) {
            u->sum += p[i];
        }
        u->bytes += len;
        return MK_OK;
    }
    if (event == MK_HTTP_BODY_END) {
        char out[128];
        int n = snprintf(out, sizeof(out), "%llu %llu", (unsigned long long) u->bytes,
                         (unsigned long long) u->sum);
        mk_http_send(h, out, (size_t) n);
    }
    free(u);
    mk_http_done(h);
    return MK_OK;
}

static void h_upload(struct mk_http *h, void *data)
{
    (void) data;
    if (mk_http_read_body(h, h_upload_body, calloc(1, sizeof(struct upload)), 0) != MK_OK) {
        atomic_fetch_add(&worker_errors, 1);
    }
}

/* 100 MB streamed out with back-pressure: bytes i % 251. */
struct big {
    size_t sent;
    int agains;
};

/* Streams that learnt the client was gone. */
static atomic_int big_gone;

static void big_fill(struct mk_http *h, void *arg)
{
    struct big *b = arg;
    char chunk[16384];

    if (mk_http_gone(h)) {
        atomic_fetch_add(&big_gone, 1);
        free(b);
        mk_http_done(h);
        return;
    }
    for (;;) {
        size_t n = BIG - b->sent < sizeof(chunk) ? BIG - b->sent : sizeof(chunk);
        if (n == 0) {
            mk_http_done(h);
            free(b);
            return;
        }
        for (size_t i = 0; i < n; i++) {
            chunk[i] = (char) ((b->sent + i) % 251);
        }
        int rc = mk_http_send(h, chunk, n);
        if (rc == MK_ERR) {
            atomic_fetch_add(&worker_errors, 1); /* checked by the test's thread */
            mk_http_done(h);
            free(b);
            return;
        }
        b->sent += n;
        if (rc == MK_AGAIN) {
            b->agains++;
            atomic_fetch_add(&big_agains, 1);
            return; /* the writable callback comes back */
        }
    }
}

static void h_big(struct mk_http *h, void *data)
{
    struct big *b = calloc(1, sizeof(*b));

    (void) data;
    mk_http_header(h, "Content-Type", "application/octet-stream");
    mk_http_on_writable(h, big_fill, b);
    big_fill(h, b);
}

/* Parked requests: the handler queues h; a program thread finishes it. */
#define PARKED 16
struct parked {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct mk_http *h[PARKED];
    int n, taken;
    int off_worker_rc; /* what mk_http_send returned off the worker */
};

static struct parked parked = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static void h_park(struct mk_http *h, void *data)
{
    (void) data;
    pthread_mutex_lock(&parked.lock);
    parked.h[parked.n++] = h;
    pthread_cond_signal(&parked.cond);
    pthread_mutex_unlock(&parked.lock);
}

static void park_finish(struct mk_http *h, void *arg)
{
    char out[64];
    int n = snprintf(out, sizeof(out), "finished %d by a thread", (int) (intptr_t) arg);

    if (!mk_http_gone(h)) {
        mk_http_status(h, 202);
        mk_http_header(h, "X-Parked", "yes");
        mk_http_send(h, out, (size_t) n);
    }
    mk_http_done(h);
}

static void *park_thread(void *arg)
{
    (void) arg;
    for (int i = 0; i < PARKED; i++) {
        pthread_mutex_lock(&parked.lock);
        while (parked.taken == parked.n) {
            pthread_cond_wait(&parked.cond, &parked.lock);
        }
        struct mk_http *h = parked.h[parked.taken++];
        pthread_mutex_unlock(&parked.lock);
        parked.off_worker_rc = mk_http_send(h, "x", 1);
        /* Refused without a function; answered on the worker by the post. */
        if (mk_http_post(h, NULL, NULL) != MK_ERR ||
            mk_http_post(h, park_finish, (void *) (intptr_t) i) != MK_OK) {
            atomic_fetch_add(&worker_errors, 1);
        }
    }
    return NULL;
}

/* A request parked and never answered in time: the server gives up on it. */
static struct mk_http *_Atomic forgotten;
static atomic_int forgotten_seen_gone;

static void h_forget(struct mk_http *h, void *data)
{
    (void) data;
    atomic_store(&forgotten, h);
}

static void forgotten_late(struct mk_http *h, void *arg)
{
    (void) arg;
    if (mk_http_gone(h) && mk_http_send(h, "late", 4) == MK_ERR) {
        atomic_fetch_add(&forgotten_seen_gone, 1);
    }
    mk_http_done(h);
}

/* Wait up to 5 s for *v to reach `want`. */
static void wait_for(atomic_int *v, int want)
{
    for (int i = 0; i < 500 && atomic_load(v) < want; i++) {
        usleep(10000);
    }
    assert_int_equal(atomic_load(v), want);
}

/* Wait up to 5 s for a handler to leave its handle in *slot; the handle. */
static struct mk_http *wait_handle(struct mk_http *_Atomic *slot)
{
    for (int i = 0; i < 500 && !atomic_load(slot); i++) {
        usleep(10000);
    }
    struct mk_http *h = atomic_load(slot);
    assert_non_null(h);
    return h;
}

/* mk_server_post(): where the function ran. */
static atomic_int posted_ran;
static pthread_t posted_thread;

static void posted(void *arg)
{
    posted_thread = pthread_self();
    atomic_fetch_add(&posted_ran, 1);
    (void) arg;
}

/* ---- servers ---- */

struct instance {
    char dir[PATH_MAX];
    int port;
    struct mk_server *srv;
};

static void make_dir(struct instance *in, const char *name)
{
    char path[PATH_MAX + 32];
    snprintf(in->dir, sizeof(in->dir), "/tmp/mk-test-lib-XXXXXX");
    assert_non_null(mkdtemp(in->dir));
    snprintf(path, sizeof(path), "%s/index.html", in->dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "static %s\n", name);
    fclose(f);
}

static void remove_dir(const char *dir)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/index.html", dir);
    unlink(path);
    rmdir(dir);
}

/* A server object for in's directory (made already), on a free port, 2 workers. */
static struct mk_server *create_server(struct instance *in)
{
    in->srv = mk_server_create();
    mk_server_set_docroot(in->srv, in->dir);
    in->port = tcp_listen_local(in->srv);
    mk_server_set(in->srv, "Workers", "2");
    return in->srv;
}

static struct mk_server *new_server(struct instance *in, const char *name)
{
    make_dir(in, name);
    return create_server(in);
}

static void start(struct instance *in)
{
    char err[1024] = "";
    if (mk_server_start(in->srv, err, sizeof(err)) != MK_OK) {
        fail_msg("server on %d: %s", in->port, err);
    }
}

static void finish(struct instance *in)
{
    mk_server_stop(in->srv);
    mk_server_destroy(in->srv);
    remove_dir(in->dir);
}

static void test_two_servers_routes(void **state)
{
    struct instance a, b, site;
    char *body, *res;

    (void) state;
    new_server(&a, "A");
    new_server(&b, "B");
    make_dir(&site, "api-site");
    assert_int_equal(mk_server_route(a.srv, NULL, MK_ROUTE_GET, "/hello", h_text, "hello A"),
                     MK_OK);
    assert_int_equal(mk_server_route(a.srv, NULL, MK_ROUTE_GET, "/users/:id", h_user, NULL), MK_OK);
    assert_int_equal(mk_server_route(a.srv, NULL, MK_ROUTE_GET, "/files/*", h_text, "prefix"),
                     MK_OK);
    assert_int_equal(mk_server_route(a.srv, NULL, MK_ROUTE_POST, "/echo", h_echo, NULL), MK_OK);
    assert_int_equal(mk_server_site(a.srv, "api.example", site.dir), MK_OK);
    assert_int_equal(
        mk_server_route(a.srv, "api.example", MK_ROUTE_GET, "/only", h_text, "only on api.example"),
        MK_OK);
    assert_int_equal(mk_server_route(b.srv, NULL, MK_ROUTE_GET, "/hello", h_text, "hello B"),
                     MK_OK);
    assert_int_equal(mk_server_route(b.srv, NULL, 0, "/x", h_text, NULL), MK_ERR);
    start(&a);
    start(&b);

    body = get_body(a.port, "/hello", "localhost");
    assert_string_equal(body, "hello A");
    free(body);
    body = get_body(b.port, "/hello", "localhost");
    assert_string_equal(body, "hello B");
    free(body);
    res = http(a.port, "GET", "/users/42?x=1", "localhost", "X-Agent: t\r\n", NULL);
    assert_non_null(strstr(res, "\r\nX-Route: user\r\n"));
    if (!strstr(res, "\r\nContent-Length: 15\r\n")) {
        fail_msg("%s", res);
    }
    assert_non_null(strstr(res, "\r\n\r\nuser 42 x=1 t 4")); /* Host, Connection, X-Agent, C-L */
    assert_null(strstr(res, "X-Evil"));
    free(res);
    body = get_body(a.port, "/files/deep/down", "localhost");
    assert_string_equal(body, "prefix");
    free(body);
    /* Static files beside the routes; B has no /users route. */
    body = get_body(a.port, "/", "localhost");
    assert_string_equal(body, "static A\n");
    free(body);
    res = http(b.port, "GET", "/users/42", "localhost", NULL, NULL);
    assert_true(strncmp(res, "HTTP/1.1 404 ", 13) == 0);
    free(res);
    /* Wrong method on a route: 405. */
    res = http(a.port, "DELETE", "/hello", "localhost", NULL, NULL);
    assert_true(strncmp(res, "HTTP/1.1 405 ", 13) == 0);
    free(res);
    res = http(a.port, "POST", "/echo", "localhost", NULL, "ping");
    assert_int_equal(atomic_load(&worker_errors), 0);
    assert_true(strncmp(res, "HTTP/1.1 201 ", 13) == 0);
    assert_non_null(strstr(res, "\r\n\r\ngot:ping"));
    free(res);
    /* The program's site: its own route and docroot; not on the default site. */
    body = get_body(a.port, "/only", "api.example");
    assert_string_equal(body, "only on api.example");
    free(body);
    body = get_body(a.port, "/", "API.example");
    assert_string_equal(body, "static api-site\n");
    free(body);
    res = http(a.port, "GET", "/only", "localhost", NULL, NULL);
    assert_true(strncmp(res, "HTTP/1.1 404 ", 13) == 0);
    free(res);

    /* A reload builds the sites and their routes again, with those added since. */
    char err[512] = "";
    mk_server_route(a.srv, NULL, MK_ROUTE_GET, "/added", h_text, "added later");
    res = http(a.port, "GET", "/added", "localhost", NULL, NULL);
    assert_true(strncmp(res, "HTTP/1.1 404 ", 13) == 0);
    free(res);
    if (mk_server_reload(a.srv, err, sizeof(err)) != MK_OK) {
        fail_msg("reload: %s", err);
    }
    body = get_body(a.port, "/only", "api.example");
    assert_string_equal(body, "only on api.example");
    free(body);
    body = get_body(a.port, "/added", "api.example");
    assert_string_equal(body, "added later");
    free(body);
    body = get_body(a.port, "/hello", "localhost");
    assert_string_equal(body, "hello A");
    free(body);

    finish(&b);
    body = get_body(a.port, "/hello", "localhost");
    assert_string_equal(body, "hello A");
    free(body);
    finish(&a);
    remove_dir(site.dir);
}

static void test_route_unknown_site(void **state)
{
    struct instance a;
    char err[512] = "";

    (void) state;
    new_server(&a, "A");
    mk_server_route(a.srv, "nowhere.example", MK_ROUTE_GET, "/x", h_text, "x");
    assert_int_equal(mk_server_start(a.srv, err, sizeof(err)), MK_ERR);
    assert_non_null(strstr(err, "no site is named 'nowhere.example'"));
    mk_server_destroy(a.srv);
    remove_dir(a.dir);
}

static void test_stream_100mb(void **state)
{
    struct instance a;

    (void) state;
    new_server(&a, "A");
    mk_server_set(a.srv, "MaxRequestBody", "200M");
    mk_server_route(a.srv, NULL, MK_ROUTE_GET, "/big", h_big, NULL);
    mk_server_route(a.srv, NULL, MK_ROUTE_POST, "/upload", h_upload, NULL);
    start(&a);

    /* Out: HTTP/1.0, so the stream ends with the connection (no chunks to undo). */
    int fd = send_request(a.port, "GET /big HTTP/1.0\r\nHost: localhost\r\n\r\n");
    char buf[65536], head[4096];
    size_t got = 0, hlen = 0, bad = 0;
    bool in_body = false;
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        size_t off = 0;
        if (!in_body) {
            size_t take =
                (size_t) n < sizeof(head) - 1 - hlen ? (size_t) n : sizeof(head) - 1 - hlen;
            memcpy(head + hlen, buf, take);
            hlen += take;
            head[hlen] = '\0';
            char *end = strstr(head, "\r\n\r\n");
            if (!end) {
                continue;
            }
            off = (size_t) (end + 4 - head) - (hlen - take);
            in_body = true;
            assert_true(strncmp(head, "HTTP/1.1 200 OK\r\n", 17) == 0);
        }
        for (size_t i = off; i < (size_t) n; i++) {
            bad += (unsigned char) buf[i] != (got + i - off) % 251;
        }
        got += (size_t) n - off;
    }
    close(fd);
    assert_int_equal(atomic_load(&worker_errors), 0);
    assert_int_equal(got, BIG);
    assert_int_equal(bad, 0);
    assert_true(atomic_load(&big_agains) > 0);

    /* In: 100 MB streamed to the handler in pieces, chunked by the client. */
    fd = send_request(a.port, "POST /upload HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                              "Transfer-Encoding: chunked\r\n\r\n");
    uint64_t sum = 0;
    for (size_t i = 0; i < sizeof(buf); i++) {
        buf[i] = (char) (i % 199);
        sum += (unsigned char) buf[i];
    }
    for (size_t i = 0; i < BIG / sizeof(buf); i++) {
        char line[16];
        int ln = snprintf(line, sizeof(line), "%zx\r\n", sizeof(buf));
        tcp_send_all(fd, line, (size_t) ln);
        tcp_send_all(fd, buf, sizeof(buf));
        tcp_send_all(fd, "\r\n", 2);
    }
    tcp_send_all(fd, "0\r\n\r\n", 5);
    char *res = tcp_read_all(fd);
    char expect[64];
    snprintf(expect, sizeof(expect), "\r\n\r\n%u %llu", BIG,
             (unsigned long long) (sum * (BIG / sizeof(buf))));
    if (!strstr(res, expect)) {
        fail_msg("upload: %s", res);
    }
    free(res);
    finish(&a);
}

static void test_parked_finished_by_thread(void **state)
{
    struct instance a;
    pthread_t t;
    int fds[PARKED];

    (void) state;
    new_server(&a, "A");
    mk_server_route(a.srv, NULL, MK_ROUTE_GET, "/park", h_park, NULL);
    start(&a);
    assert_int_equal(pthread_create(&t, NULL, park_thread, NULL), 0);
    for (int i = 0; i < PARKED; i++) {
        fds[i] = send_request(a.port,
                              "GET /park HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    }
    int seen[PARKED] = {0};
    for (int i = 0; i < PARKED; i++) {
        char *res = tcp_read_all(fds[i]);
        int k = -1;
        if (strncmp(res, "HTTP/1.1 202 ", 13) != 0 || !strstr(res, "\r\nX-Parked: yes\r\n")) {
            fail_msg("parked %d: %s", i, res);
        }
        assert_int_equal(sscanf(strstr(res, "\r\n\r\n") + 4, "finished %d by a thread", &k), 1);
        assert_true(k >= 0 && k < PARKED);
        seen[k]++;
        free(res);
    }
    for (int i = 0; i < PARKED; i++) {
        assert_int_equal(seen[i], 1);
    }
    pthread_join(t, NULL);
    assert_int_equal(parked.off_worker_rc, MK_ERR);
    assert_int_equal(atomic_load(&worker_errors), 0);
    finish(&a);
}

static void test_parked_timeout(void **state)
{
    struct instance a;

    (void) state;
    new_server(&a, "A");
    mk_server_set(a.srv, "Timeout", "300ms");
    mk_server_route(a.srv, NULL, MK_ROUTE_GET, "/forget", h_forget, NULL);
    start(&a);
    char *res = http(a.port, "GET", "/forget", "localhost", NULL, NULL);
    if (strncmp(res, "HTTP/1.1 503 ", 13) != 0) {
        fail_msg("parked past Timeout: %s", res);
    }
    free(res);
    /* The handle outlives the request: a late post sees it gone and ends it. */
    struct mk_http *h = atomic_load(&forgotten);
    assert_non_null(h);
    assert_true(mk_http_gone(h));
    assert_int_equal(mk_http_post(h, forgotten_late, NULL), MK_OK);
    wait_for(&forgotten_seen_gone, 1);
    finish(&a);
}

/* A stream fed from a program thread: the handler sends a first piece and returns. */
static struct mk_http *_Atomic feeding;

static void h_feed(struct mk_http *h, void *data)
{
    (void) data;
    mk_http_header(h, "Content-Type", "text/plain");
    mk_http_send(h, "first;", 6);
    atomic_store(&feeding, h);
}

static void feed_piece(struct mk_http *h, void *arg)
{
    if (mk_http_send(h, arg, strlen(arg)) == MK_ERR) {
        atomic_fetch_add(&worker_errors, 1);
    }
}

static void feed_end(struct mk_http *h, void *arg)
{
    (void) arg;
    mk_http_done(h);
}

/* The body of a chunked response (after its head), decoded in place. */
static char *dechunk(char *res)
{
    char *p = strstr(res, "\r\n\r\n") + 4, *out = p, *w = p;

    for (;;) {
        unsigned long n = strtoul(p, &p, 16);
        p = strstr(p, "\r\n") + 2;
        if (n == 0) {
            break;
        }
        memmove(w, p, n);
        w += n;
        p += n + 2;
    }
    *w = '\0';
    return out;
}

static void test_stream_fed_by_thread(void **state)
{
    struct instance a;

    (void) state;
    new_server(&a, "A");
    mk_server_route(a.srv, NULL, MK_ROUTE_GET, "/feed", h_feed, NULL);
    start(&a);
    int fd =
        send_request(a.port, "GET /feed HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    struct mk_http *h = wait_handle(&feeding);
    assert_int_equal(mk_http_post(h, feed_piece, "second;"), MK_OK);
    assert_int_equal(mk_http_post(h, feed_piece, "third;"), MK_OK);
    assert_int_equal(mk_http_post(h, feed_end, NULL), MK_OK);
    char *res = tcp_read_all(fd);
    if (strncmp(res, "HTTP/1.1 200 OK\r\n", 17) != 0 ||
        !strstr(res, "\r\nTransfer-Encoding: chunked\r\n")) {
        fail_msg("%s", res);
    }
    assert_string_equal(dechunk(res), "first;second;third;");
    free(res);
    assert_int_equal(atomic_load(&worker_errors), 0);
    finish(&a);
}

static void test_parked_at_stop(void **state)
{
    struct instance a;

    (void) state;
    new_server(&a, "A");
    mk_server_set(a.srv, "GracefulTimeout", "200ms");
    mk_server_route(a.srv, NULL, MK_ROUTE_GET, "/forget", h_forget, NULL);
    start(&a);
    atomic_store(&forgotten, NULL);
    int fd = send_request(a.port, "GET /forget HTTP/1.1\r\nHost: localhost\r\n\r\n");
    struct mk_http *h = wait_handle(&forgotten);
    assert_false(mk_http_gone(h));
    assert_int_equal(mk_http_done(h), MK_ERR); /* off the worker while it lives */
    /* The server stops with the request still parked: it lets go of it. */
    mk_server_stop(a.srv);
    assert_true(mk_http_gone(h));
    assert_int_equal(mk_http_post(h, forgotten_late, NULL), MK_ERR); /* not running */
    assert_int_equal(mk_http_done(h), MK_OK);                        /* the last reference */
    close(fd);
    finish(&a);
}

static void test_stream_client_gone(void **state)
{
    struct instance a;
    char buf[65536];
    size_t got = 0;

    (void) state;
    new_server(&a, "A");
    mk_server_route(a.srv, NULL, MK_ROUTE_GET, "/big", h_big, NULL);
    start(&a);
    int fd = send_request(a.port, "GET /big HTTP/1.0\r\nHost: localhost\r\n\r\n");
    while (got < 1024 * 1024) {
        ssize_t n = read(fd, buf, sizeof(buf));
        assert_true(n > 0);
        got += (size_t) n;
    }
    close(fd); /* mid-body: the writable callback learns it */
    wait_for(&big_gone, 1);
    finish(&a);
}

static void test_server_post(void **state)
{
    struct instance a;

    (void) state;
    new_server(&a, "A");
    assert_int_equal(mk_server_post(a.srv, 0, posted, NULL), MK_ERR); /* not running */
    start(&a);
    assert_int_equal(mk_server_post(a.srv, 2, posted, NULL), MK_ERR); /* workers 0 and 1 */
    assert_int_equal(mk_server_post(a.srv, -1, posted, NULL), MK_OK);
    assert_int_equal(mk_server_post(a.srv, 1, posted, NULL), MK_OK);
    wait_for(&posted_ran, 2);
    assert_false(pthread_equal(posted_thread, pthread_self()));
    finish(&a);
}

/* The whole of file `path`, malloc'ed. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 65536);

    assert_non_null(f);
    size_t n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_two_servers_own_logs(void **state)
{
    struct instance a, b;
    char alog[PATH_MAX + 16], blog[PATH_MAX + 16], mark_a[64], mark_b[64];

    (void) state;
    new_server(&a, "A");
    new_server(&b, "B");
    snprintf(alog, sizeof(alog), "%s/a.log", a.dir);
    snprintf(blog, sizeof(blog), "%s/b.log", b.dir);
    mk_server_set(a.srv, "Log", alog);
    mk_server_set(a.srv, "Timeout", "300ms");
    mk_server_set(b.srv, "Log", blog);
    mk_server_route(a.srv, NULL, MK_ROUTE_GET, "/forget", h_forget, NULL);
    start(&a);
    start(&b);
    /* A's worker logs the timeout of a parked request, once B runs too. */
    atomic_store(&forgotten, NULL);
    char *res = http(a.port, "GET", "/forget", "localhost", NULL, NULL);
    assert_true(strncmp(res, "HTTP/1.1 503 ", 13) == 0);
    free(res);
    int seen = atomic_load(&forgotten_seen_gone);
    assert_int_equal(mk_http_post(atomic_load(&forgotten), forgotten_late, NULL), MK_OK);
    wait_for(&forgotten_seen_gone, seen + 1);
    mk_server_stop(a.srv);
    mk_server_stop(b.srv);

    char *at = slurp(alog), *bt = slurp(blog);
    snprintf(mark_a, sizeof(mark_a), "listening on 127.0.0.1:%d ", a.port);
    snprintf(mark_b, sizeof(mark_b), "listening on 127.0.0.1:%d ", b.port);
    if (!strstr(at, mark_a) || strstr(at, mark_b) || !strstr(at, "timed out")) {
        fail_msg("a.log:\n%s", at);
    }
    if (!strstr(bt, mark_b) || strstr(bt, mark_a) || strstr(bt, "timed out")) {
        fail_msg("b.log:\n%s", bt);
    }
    free(at);
    free(bt);
    unlink(alog);
    unlink(blog);
    finish(&a);
    finish(&b);
}

static void test_start_stop_100(void **state)
{
    struct instance a;
    char err[1024] = "";

    (void) state;
    make_dir(&a, "A");
    for (int i = 0; i < 100; i++) {
        create_server(&a);
        mk_server_route(a.srv, NULL, MK_ROUTE_GET, "/hello", h_text, "hello");
        if (mk_server_start(a.srv, err, sizeof(err)) != MK_OK) {
            fail_msg("start %d: %s", i, err);
        }
        if (i % 10 == 0) {
            char *body = get_body(a.port, "/hello", "localhost");
            assert_string_equal(body, "hello");
            free(body);
        }
        mk_server_stop(a.srv);
        mk_server_destroy(a.srv);
    }
    /* One server object started again after each stop. */
    create_server(&a);
    mk_server_route(a.srv, NULL, MK_ROUTE_GET, "/hello", h_text, "again");
    for (int i = 0; i < 10; i++) {
        if (mk_server_start(a.srv, err, sizeof(err)) != MK_OK) {
            fail_msg("restart %d: %s", i, err);
        }
        char *body = get_body(a.port, "/hello", "localhost");
        assert_string_equal(body, "again");
        free(body);
        mk_server_stop(a.srv);
    }
    mk_server_destroy(a.srv);
    remove_dir(a.dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_servers_routes),
        cmocka_unit_test(test_route_unknown_site),
        cmocka_unit_test(test_parked_finished_by_thread),
        cmocka_unit_test(test_stream_100mb),
        cmocka_unit_test(test_parked_timeout),
        cmocka_unit_test(test_stream_fed_by_thread),
        cmocka_unit_test(test_parked_at_stop),
        cmocka_unit_test(test_stream_client_gone),
        cmocka_unit_test(test_server_post),
        cmocka_unit_test(test_two_servers_own_logs),
        cmocka_unit_test(test_start_stop_100),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
