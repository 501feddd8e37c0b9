/* Loads a package that does not exist: the service's load fails, naming it. */
#include <duda/duda.h>

DUDA_REGISTER("Missing package", "pkgmissing");

static const void *nothing;

int duda_main(void)
{
    duda_load_package(nothing, "nosuchpkg");
    return 0;
}
