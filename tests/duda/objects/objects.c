/* The objects the examples do not show, one route each. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include <duda/duda.h>

DUDA_REGISTER("Objects", "objects");

static duda_global_t counter_key;
static __thread int pre_loop_ran;
static atomic_int signalled;

static void *counter_new(void)
{
    return calloc(1, sizeof(long));
}

static void every_worker(void)
{
    pre_loop_ran = 1;
}

/* GET /objects/global: a per-worker counter, and whether pre_loop ran on this worker. */
static void cb_global(duda_request_t *dr)
{
    long *n = global->get(&counter_key);

    (*n)++;
    gc->add(dr, malloc(100)); /* freed at the request's end */
    response->printf(dr, "pre_loop %d count %ld\n", pre_loop_ran, *n);
    response->end(dr, NULL);
}

static void on_signal(void *data)
{
    (void) data;
    atomic_fetch_add(&signalled, 1);
}

static void signal_report(duda_request_t *unused, void *data)
{
    duda_request_t *dr = data;

    (void) unused;
    response->printf(dr, "signalled %d\n", atomic_load(&signalled));
    response->end(dr, NULL);
    response->cont(dr);
}

/* GET /objects/signal: run a callback on every worker, report after 200 ms. */
static void cb_signal(duda_request_t *dr)
{
    atomic_store(&signalled, 0);
    event->signal_all(on_signal, NULL);
    response->wait(dr);
    event->timer_add(NULL, 200, 0, signal_report, dr);
}

struct piped {
    duda_request_t *dr;
    duda_watch_t *w;
    int fds[2];
};

static void on_readable(int fd, unsigned ready, void *data)
{
    struct piped *p = data;
    char buf[16];
    ssize_t n = read(fd, buf, sizeof(buf));

    event->del(p->w);
    close(p->fds[0]);
    close(p->fds[1]);
    response->printf(p->dr, "read %zd bytes: %.*s (ready %u)\n", n, (int) (n > 0 ? n : 0), buf,
                     ready);
    response->end(p->dr, NULL);
    response->cont(p->dr);
    free(p);
}

/* GET /objects/watch: a pipe watched on the worker's loop. */
static void cb_watch(duda_request_t *dr)
{
    struct piped *p = calloc(1, sizeof(*p));

    if (pipe2(p->fds, O_NONBLOCK | O_CLOEXEC) != 0) {
        free(p);
        response->http_status(dr, 500);
        response->end(dr, NULL);
        return;
    }
    p->dr = dr;
    response->wait(dr);
    p->w = event->add(p->fds[0], DUDA_EVENT_READ, on_readable, p);
    if (write(p->fds[1], "ping", 4) != 4) {
        response->http_status(dr, 500);
    }
}

/* GET /objects/xtime */
static void cb_xtime(duda_request_t *dr)
{
    char buf[40];

    response->printf(dr, "%s\n", xtime->http_date(0, buf, sizeof(buf)));
    response->printf(dr, "tomorrow %s\n", xtime->tomorrow() % 86400 == 0 ? "midnight" : "no");
    response->printf(dr, "next %s\n", xtime->next_hours(2) - xtime->now() == 7200 ? "ok" : "no");
    response->end(dr, NULL);
}

/* ANY /objects/request/:id: what the request object tells. */
static void cb_request(duda_request_t *dr)
{
    const char *h = request->header_get(dr, "X-Test");

    response->printf(dr, "method %s path %s get %d post %d delete %d id %s x-test %s addr %s\n",
                     request->method(dr), request->path(dr), request->is_get(dr),
                     request->is_post(dr), request->is_delete(dr), param->get(dr, "id"),
                     h ? h : "-", request->remote_addr(dr));
    response->end(dr, NULL);
}

static void on_end(duda_request_t *dr)
{
    (void) dr;
    console->debug(NULL, "end callback ran");
}

/* GET /objects/debug: a console line, and an end callback. */
static void cb_debug(duda_request_t *dr)
{
    console->debug(dr, "debug line from %s", request->path(dr));
    response->http_status(dr, 201);
    response->end(dr, on_end);
}

static atomic_int parked_fired;

static void parked_timer(duda_request_t *dr, void *data)
{
    (void) data;
    atomic_fetch_add(&parked_fired, 1);
    response->end(dr, NULL);
    response->cont(dr);
}

/* GET /objects/park: waits on a timer of the request's own, 1 s. */
static void cb_park(duda_request_t *dr)
{
    response->wait(dr);
    event->timer_add(dr, 1000, 0, parked_timer, NULL);
}

/* GET /objects/parked: how many park timers fired (none when their clients left). */
static void cb_parked(duda_request_t *dr)
{
    response->printf(dr, "fired %d\n", atomic_load(&parked_fired));
    response->end(dr, NULL);
}

static void *fast_thread(void *arg)
{
    duda_request_t *dr = arg;

    response->print(dr, "fast\n", 5);
    response->end(dr, NULL);
    response->cont(dr);
    return NULL;
}

/* GET /objects/fast: continued by a thread that may finish before the callback returns. */
static void cb_fast(duda_request_t *dr)
{
    response->wait(dr);
    worker->spawn(fast_thread, dr);
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL); /* a test only: the thread calls cont() first */
}

int duda_main(void)
{
    global->init(&counter_key, counter_new, free);
    worker->pre_loop(every_worker);
    router->map("/global", DUDA_GET, cb_global);
    router->map("/signal", DUDA_GET, cb_signal);
    router->map("/watch", DUDA_GET, cb_watch);
    router->map("/xtime", DUDA_GET, cb_xtime);
    router->map("/request/:id", DUDA_GET | DUDA_POST | DUDA_DELETE, cb_request);
    router->map("/debug", DUDA_GET, cb_debug);
    router->map("/park", DUDA_GET, cb_park);
    router->map("/fast", DUDA_GET, cb_fast);
    router->map("/parked", DUDA_GET, cb_parked);
    console->dashboard("/dashboard");
    return 0;
}
