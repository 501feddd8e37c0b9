/*
 * The objects the examples do not show, one route each. With a DataDir,
 * duda_exit() appends a line to DataDir/exit.log each time the service is
 * unloaded (a reload, a stop).
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
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

/* GET /objects/global/set?n=N: this worker's counter becomes a new value N (global->set). */
static void cb_global_set(duda_request_t *dr)
{
    const char *n = qs->get(dr, "n");
    long *old = global->get(&counter_key);
    long *mine = malloc(sizeof(long));

    if (!n || !mine) {
        free(mine);
        response->http_status(dr, 400);
        response->end(dr, NULL);
        return;
    }
    *mine = strtol(n, NULL, 10);
    response->printf(dr, "set %d old %ld\n", global->set(&counter_key, mine), *old);
    free(old);
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

static void monotonic_fired(duda_request_t *dr, void *data)
{
    uint64_t *start = request->ctx(dr);

    (void) data;
    response->printf(dr, "start %llu elapsed %llu\n", (unsigned long long) *start,
                     (unsigned long long) (xtime->monotonic_ms() - *start));
    response->end(dr, NULL);
    response->cont(dr);
}

/* GET /objects/monotonic: xtime->monotonic_ms() now, and across a timer of 100 ms. */
static void cb_monotonic(duda_request_t *dr)
{
    uint64_t *start = gc->alloc(dr, sizeof(*start));

    if (!start) {
        response->http_status(dr, 503);
        response->end(dr, NULL);
        return;
    }
    *start = xtime->monotonic_ms();
    request->set_ctx(dr, start);
    response->wait(dr);
    event->timer_add(dr, 100, 0, monotonic_fired, NULL);
}

/* GET /objects/kept: a kept timer of the request (event->timer_new, service ABI 1.2). */
struct kept {
    duda_timer_t *t;
    uint64_t start;
    int fired, refused;
};

static void kept_check(duda_request_t *dr, void *data)
{
    struct kept *k = data;

    response->printf(dr, "kept fired %d refused %d elapsed %llu\n", k->fired, k->refused,
                     (unsigned long long) (xtime->monotonic_ms() - k->start));
    response->end(dr, NULL); /* the kept timer, not armed, goes with the request */
    response->cont(dr);
}

/*
 * Armed for 1 s then moved to 5 ms: one call, early. The first call arms
 * it again at once; the second arms it and disarms it, and a check 30 ms
 * later answers: still two calls.
 */
static void kept_fired(duda_request_t *dr, void *data)
{
    struct kept *k = data;

    if (++k->fired == 1) {
        event->timer_arm(k->t, 0);
        return;
    }
    if (event->timer_arm(k->t, 0) != 0 || event->timer_disarm(k->t) != 0 ||
        !event->timer_add(dr, 30, 0, kept_check, k)) {
        kept_check(dr, k);
    }
}

static void cb_kept(duda_request_t *dr)
{
    struct kept *k = gc->alloc(dr, sizeof(*k));
    duda_timer_t *once = event->timer_add(dr, 1000, 0, kept_fired, NULL);

    if (!k || !once) {
        response->http_status(dr, 503);
        response->end(dr, NULL);
        return;
    }
    /* a timer of timer_add() is not armed again */
    k->refused = event->timer_arm(once, 5) == -1 && event->timer_disarm(once) == -1;
    event->timer_del(once);
    k->start = xtime->monotonic_ms();
    k->t = event->timer_new(dr, kept_fired, k);
    response->wait(dr);
    if (!k->t || event->timer_arm(k->t, 1000) != 0 || event->timer_arm(k->t, 5) != 0) {
        kept_check(dr, k);
    }
}

/* ANY /objects/request/:id: what the request object tells (in a header too, for HEAD). */
static void cb_request(duda_request_t *dr)
{
    const char *h = request->header_get(dr, "X-Test");
    char flags[80];

    snprintf(flags, sizeof(flags), "get %d head %d post %d put %d delete %d", request->is_get(dr),
             request->is_head(dr), request->is_post(dr), request->is_put(dr),
             request->is_delete(dr));
    response->http_header(dr, "X-Flags", flags);
    response->printf(dr, "method %s path %s %s id %s x-test %s addr %s\n", request->method(dr),
                     request->path(dr), flags, param->get(dr, "id"), h ? h : "-",
                     request->remote_addr(dr));
    response->end(dr, NULL);
}

/*
 * GET /objects/ctx: the request's context before this callback sets it. A
 * context is the request's: the next request on the connection finds none.
 */
static void cb_ctx(duda_request_t *dr)
{
    const char *before = request->ctx(dr);

    request->set_ctx(dr, "set by an earlier request");
    response->printf(dr, "ctx %s\n", before ? before : "none");
    response->end(dr, NULL);
}

/* GET /objects/cookie/destroy: the cookie `theme` removed from the client. */
static void cb_cookie_destroy(duda_request_t *dr)
{
    response->printf(dr, "destroy %d\n", cookie->destroy(dr, "theme"));
    response->end(dr, NULL);
}

static void cb_remapped(duda_request_t *dr)
{
    response->end(dr, NULL);
}

/* GET /objects/remap: router->map() outside duda_main() is refused, logged, answered 500. */
static void cb_remap(duda_request_t *dr)
{
    response->printf(dr, "map %d\n", router->map("/remapped", DUDA_GET, cb_remapped));
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

void duda_exit(void)
{
    char *path = data->locate(NULL, "exit.log");
    FILE *f = path ? fopen(path, "a") : NULL;

    if (f) {
        fprintf(f, "duda_exit ran\n");
        fclose(f);
    }
    free(path);
}

int duda_main(void)
{
    global->init(&counter_key, counter_new, free);
    worker->pre_loop(every_worker);
    router->map("/global", DUDA_GET, cb_global);
    router->map("/global/set", DUDA_GET, cb_global_set);
    router->map("/signal", DUDA_GET, cb_signal);
    router->map("/watch", DUDA_GET, cb_watch);
    router->map("/xtime", DUDA_GET, cb_xtime);
    router->map("/monotonic", DUDA_GET, cb_monotonic);
    router->map("/kept", DUDA_GET, cb_kept);
    router->map("/request/:id", DUDA_GET | DUDA_HEAD | DUDA_POST | DUDA_PUT | DUDA_DELETE,
                cb_request);
    router->map("/ctx", DUDA_GET, cb_ctx);
    router->map("/cookie/destroy", DUDA_GET, cb_cookie_destroy);
    router->map("/remap", DUDA_GET, cb_remap);
    router->map("/debug", DUDA_GET, cb_debug);
    router->map("/park", DUDA_GET, cb_park);
    router->map("/fast", DUDA_GET, cb_fast);
    router->map("/parked", DUDA_GET, cb_parked);
    console->dashboard("/dashboard");
    return 0;
}
