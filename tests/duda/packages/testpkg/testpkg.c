/* A package for the loader's tests: counts its init() runs and answers through its objects. */
#include <duda/duda_package.h>
#include <string.h>

#include "testpkg.h"

static int init_count;

static int testpkg_add(int a, int b)
{
    return a + b;
}

static int testpkg_inits(void)
{
    return init_count;
}

static void testpkg_answer(duda_request_t *dr, const char *text)
{
    response->http_status(dr, 200);
    response->http_content_type(dr, "text/plain");
    response->printf(dr, "testpkg: %s\n", text);
    response->end(dr, NULL);
}

static int testpkg_init(const struct duda_api *api)
{
    init_count++;
    return api && api->abi_major == DUDA_ABI_MAJOR ? 0 : -1;
}

static const struct testpkg_api testpkg = {
    sizeof(testpkg),
    testpkg_add,
    testpkg_inits,
    testpkg_answer,
};

DUDA_PACKAGE("testpkg", "1.0", &testpkg, testpkg_init, NULL);
