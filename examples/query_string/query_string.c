/*
 * query_string: the qs object.
 *
 *   GET /query_string/?name=J%C3%BCrgen+K   "name: Jürgen K" (decoded, '+' is a space)
 *   the raw value and the number of pairs follow.
 */
#include <duda/duda.h>

DUDA_REGISTER("Query strings", "query_string");

static void cb_root(duda_request_t *dr)
{
    size_t raw_len = 0;
    const char *name = qs->get(dr, "name");
    const char *raw = qs->get_raw(dr, "name", &raw_len);

    response->http_content_type(dr, "text/plain; charset=utf-8");
    if (!name) {
        response->http_status(dr, 400);
        response->print(dr, "give ?name=...\n", 15);
        response->end(dr, NULL);
        return;
    }
    response->printf(dr, "name: %s\n", name);
    response->printf(dr, "raw: %.*s\n", (int) raw_len, raw);
    response->printf(dr, "pairs: %d\n", qs->count(dr));
    response->end(dr, NULL);
}

int duda_main(void)
{
    router->root(cb_root);
    return 0;
}
