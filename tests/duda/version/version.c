/* Answers the VERSION it was built with (CFLAGS=-DVERSION=n duda build ...). */
#include <duda/duda.h>

#ifndef VERSION
#define VERSION 1
#endif

DUDA_REGISTER("Version", "version");

static void cb_root(duda_request_t *dr)
{
    response->printf(dr, "version %d\n", VERSION);
    response->end(dr, NULL);
}

int duda_main(void)
{
    router->root(cb_root);
    return 0;
}
