/*
 * async: a request that waits for a result computed elsewhere.
 *
 *   GET /async/task?n=N    the sum 1..N computed on a task thread (worker->task)
 *   GET /async/wait        parked with response->wait(), continued by a timer
 *                          100 ms later with response->cont()
 *   GET /async/thread      parked, then continued from a thread of the service's own
 * Nothing blocks a worker: the blocking part runs on a task thread.
 */
#include <stdlib.h>
#include <time.h>

#include <duda/duda.h>

DUDA_REGISTER("Asynchronous answers", "async");

struct sum {
    unsigned long n, result;
};

/* On a task thread: may block (here it sleeps 20 ms, like a slow library call). */
static void sum_work(void *arg)
{
    struct sum *s = arg;
    struct timespec ts = {0, 20 * 1000000L};

    nanosleep(&ts, NULL);
    for (unsigned long i = 1; i <= s->n; i++) {
        s->result += i;
    }
}

/* Back on the request's worker. */
static void sum_done(duda_request_t *dr, void *arg)
{
    struct sum *s = arg;

    if (dr) {
        response->http_content_type(dr, "text/plain");
        response->printf(dr, "sum %lu\n", s->result);
        response->end(dr, NULL);
    }
    free(s);
}

static void cb_task(duda_request_t *dr)
{
    const char *n = qs->get(dr, "n");
    struct sum *s = calloc(1, sizeof(*s));

    s->n = n ? strtoul(n, NULL, 10) : 100;
    if (worker->task(dr, sum_work, sum_done, s) != 0) {
        free(s);
        response->http_status(dr, 503);
        response->end(dr, NULL);
    }
}

static void later(duda_request_t *unused, void *data)
{
    duda_request_t *dr = data;

    (void) unused;
    response->http_content_type(dr, "text/plain");
    response->print(dr, "continued by a timer\n", 21);
    response->end(dr, NULL);
    response->cont(dr);
}

static void cb_wait(duda_request_t *dr)
{
    response->wait(dr);
    event->timer_add(NULL, 100, 0, later, dr);
}

static void *thread_main(void *arg)
{
    duda_request_t *dr = arg;
    struct timespec ts = {0, 30 * 1000000L};

    nanosleep(&ts, NULL);
    response->print(dr, "continued by a thread\n", 22);
    response->end(dr, NULL);
    response->cont(dr);
    return NULL;
}

static void cb_thread(duda_request_t *dr)
{
    response->http_content_type(dr, "text/plain");
    response->wait(dr);
    worker->spawn(thread_main, dr);
}

int duda_main(void)
{
    router->map("/task", DUDA_GET, cb_task);
    router->map("/wait", DUDA_GET, cb_wait);
    router->map("/thread", DUDA_GET, cb_thread);
    return 0;
}
