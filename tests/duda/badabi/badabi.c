/* A service that says it was built for Duda service ABI 2.0: the plugin refuses it. */
#include <duda/duda.h>

static void bind(const struct duda_api *api)
{
    (void) api;
}

DUDA_EXPORT const struct duda_service_info duda_service = {2, 0, "Bad ABI", "badabi", bind};

int duda_main(void)
{
    return 0;
}
