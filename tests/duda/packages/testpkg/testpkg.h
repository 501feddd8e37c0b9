/* The test package's API (tests/duda/packages/testpkg). */
#ifndef TESTPKG_H
#define TESTPKG_H

#include <duda/duda.h>

struct testpkg_api {
    size_t size;
    int (*add)(int a, int b);
    /* How many times the package's init() ran in this process. */
    int (*inits)(void);
    /* Answer "testpkg: <text>" through the package's own response object. */
    void (*answer)(duda_request_t *dr, const char *text);
};

#endif
