/*
 * streaming: server-sent events from a timer.
 *
 *   GET /streaming/events?count=N   N events (default 5), one every 50 ms, then the end
 * The timer belongs to the request: it stops by itself if the client leaves.
 */
#include <stdlib.h>

#include <duda/duda.h>

DUDA_REGISTER("Server-sent events", "streaming");

struct stream {
    int sent, count;
    duda_timer_t *timer;
};

static void tick(duda_request_t *dr, void *data)
{
    struct stream *s = data;

    s->sent++;
    response->printf(dr, "id: %d\ndata: event %d of %d\n\n", s->sent, s->sent, s->count);
    response->flush(dr);
    if (s->sent == s->count) {
        event->timer_del(s->timer);
        response->end(dr, NULL);
    }
}

static void cb_events(duda_request_t *dr)
{
    const char *n = qs->get(dr, "count");
    struct stream *s = gc->alloc(dr, sizeof(*s));

    s->count = n ? atoi(n) : 5;
    if (s->count < 1 || s->count > 1000) {
        response->http_status(dr, 400);
        response->end(dr, NULL);
        return;
    }
    response->http_content_type(dr, "text/event-stream");
    response->http_header(dr, "Cache-Control", "no-cache");
    response->print(dr, ": the events follow\n\n", 21);
    response->flush(dr);
    s->timer = event->timer_add(dr, 50, 1, tick, s);
}

int duda_main(void)
{
    router->map("/events", DUDA_GET, cb_events);
    return 0;
}
