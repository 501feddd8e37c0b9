/* A service that maps a bad route: the load fails with the reason. */
#include <duda/duda.h>

DUDA_REGISTER("Bad route", "badroute");

static void cb(duda_request_t *dr)
{
    response->end(dr, NULL);
}

int duda_main(void)
{
    router->map("/users/:", DUDA_GET, cb);
    return 0;
}
