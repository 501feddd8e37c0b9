/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda_package.h: writing a Duda package (docs/duda.md, "Packages").
 *
 * A package is a shared object NAME.dpkg in the duda plugin's PackagesRoot
 * that services load from duda_main() with duda_load_package(obj, "NAME").
 * It is loaded once per process and shared by every service that loads it
 * (refcounted: the last service unloaded unloads it). Its public header,
 * <duda/packages/NAME.h>, declares its API struct, which starts with
 * `size_t size` so that DUDA_HAS(obj, fn) works as for the objects, and
 * grows only at its end.
 *
 * In one of its files a package declares itself once:
 *
 *     static const struct duda_json_api json_api = {sizeof(json_api), ...};
 *     DUDA_PACKAGE("json", "1.0", &json_api, json_init, json_exit);
 *
 * DUDA_PACKAGE exports the one entry point, duda_package_main(), which
 * returns the package's descriptor; the plugin reads it before any other
 * code of the package runs and refuses a package built for another
 * DUDA_PACKAGE_ABI_MAJOR, naming it. DUDA_PACKAGE also gives the package
 * its own copies of the framework's objects (request, response, worker,
 * ...), set before init() runs, so a package calls them like a service.
 *
 * init (optional) runs once per process, when the first service loads the
 * package, on the controlling thread, with that service current (its
 * data->get_path() and so on answer for it): 0, or -1 to refuse (the
 * service's load fails). exit (optional) runs when the last service that
 * loaded it is unloaded. Per-service state belongs in the objects the
 * package hands out (a database handle), never in its statics, since
 * several services share one copy.
 */
#ifndef DUDA_DUDA_PACKAGE_H
#define DUDA_DUDA_PACKAGE_H

#include <duda/duda.h>

/* What duda_package_main() returns. */
struct duda_package_info {
    uint16_t abi_major, abi_minor; /* DUDA_PACKAGE_ABI_* the package was built with */
    const char *name;              /* the NAME of NAME.dpkg */
    const char *version;           /* the package's own version, for logs */
    const void *api;               /* the package's API struct */
    int (*init)(const struct duda_api *api);
    void (*exit)(void);
    void (*bind)(const struct duda_api *api); /* sets the package's objects */
};

#ifndef DUDA_PLUGIN_INTERNAL

/* The one entry point of a package (defined by DUDA_PACKAGE). */
DUDA_EXPORT const struct duda_package_info *duda_package_main(void);

/* Once per package, in one of its files. init and exit may be NULL. */
#define DUDA_PACKAGE(name, version, api, init, exit)                                               \
    DUDA_OBJECTS_DEFINE_(duda_package_bind_)                                                       \
    DUDA_EXPORT const struct duda_package_info *duda_package_main(void)                            \
    {                                                                                              \
        static const struct duda_package_info info = {                                             \
            DUDA_PACKAGE_ABI_MAJOR, DUDA_PACKAGE_ABI_MINOR, name, version, api, init, exit,        \
            duda_package_bind_};                                                                   \
        return &info;                                                                              \
    }

#endif /* DUDA_PLUGIN_INTERNAL */

#endif
