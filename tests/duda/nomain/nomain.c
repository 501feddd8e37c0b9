/* A service without duda_main(): duda build refuses it, and so does the plugin. */
#include <duda/duda.h>

DUDA_REGISTER("No main", "nomain");
