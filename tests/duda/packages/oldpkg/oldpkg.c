/* A package that says it was built for Duda package ABI 99.0: the plugin refuses it. */
#include <duda/duda_package.h>

static const struct {
    size_t size;
} oldpkg = {sizeof(oldpkg)};

static void bind(const struct duda_api *api)
{
    (void) api;
}

DUDA_EXPORT const struct duda_package_info *duda_package_main(void)
{
    static const struct duda_package_info info = {99,      0,    "oldpkg", "0.1",
                                                  &oldpkg, NULL, NULL,     bind};
    return &info;
}
