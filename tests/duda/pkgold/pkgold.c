/* Loads a package built for another major of the package ABI: refused, naming it. */
#include <duda/duda.h>

DUDA_REGISTER("Old package", "pkgold");

static const void *old;

int duda_main(void)
{
    return duda_load_package(old, "oldpkg") ? 0 : -1;
}
