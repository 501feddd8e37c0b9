/*
 * Loads the test package (twice: one reference) and answers through it.
 * SVCNAME (a -D of CFLAGS) gives a second copy another name.
 */
#include <duda/duda.h>
#include <stdio.h>

#include "../packages/testpkg/testpkg.h"

#define STR_(x) #x
#define STR(x) STR_(x)
#ifndef SVCNAME
#define SVCNAME pkguser
#endif

DUDA_REGISTER("Package user", STR(SVCNAME));

static const struct testpkg_api *testpkg;

static void cb_sum(duda_request_t *dr)
{
    char text[64];
    snprintf(text, sizeof(text), "2+3=%d inits=%d", testpkg->add(2, 3), testpkg->inits());
    testpkg->answer(dr, text);
}

int duda_main(void)
{
    const struct testpkg_api *again;
    if (!duda_load_package(testpkg, "testpkg") || !duda_load_package(again, "testpkg") ||
        again != testpkg || !DUDA_HAS(testpkg, answer)) {
        return -1;
    }
    router->map("/sum", DUDA_GET, cb_sum);
    return 0;
}
