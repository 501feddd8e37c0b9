/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/package.c: loading packages (include/duda/duda_package.h).
 *
 * A package is PackagesRoot/NAME.dpkg. It is opened once per process, by
 * its path, and shared by every service that loads it: each service holds
 * one reference (duda_load_package twice in one service is one), and the
 * last service unloaded runs the package's exit() and closes it. So a
 * reload keeps a package loaded (the new services take their references
 * before the old ones drop theirs) and a rebuilt package is picked up
 * once no service holds it.
 *
 * The package's descriptor is read before any of its code runs: a package
 * built for another DUDA_PACKAGE_ABI_MAJOR, or for a newer minor than this
 * plugin, is refused with a message naming it.
 *
 * Threads: services load packages on the controlling thread, but a
 * configuration's services may be unloaded from another one; the registry
 * is under a mutex. Package code runs with the loading service current.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <duda/duda_package.h>

#include "duda_internal.h"

/* A package open in this process. */
struct duda_package {
    char *file; /* PackagesRoot/NAME.dpkg: the registry's key */
    void *dl;
    const struct duda_package_info *info;
    unsigned refs; /* services holding it */
    struct duda_package *next;
};

/* Recursive: a package's init() may load the packages it builds on. */
static pthread_mutex_t duda_packages_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static struct duda_package *duda_packages;

/* Whether `name` may be a package's file name (the same rule as a service's). */
static bool duda_package_name_ok(const char *name)
{
    return name && duda_router_name_ok(name);
}

/* Check an opened package's descriptor. MK_OK, or MK_ERR with the reason in err. */
static int duda_package_check(const char *name, const char *file,
                              const struct duda_package_info *info, char *err, size_t errlen)
{
    if (!info) {
        snprintf(err, errlen, "package '%s': %s has no DUDA_PACKAGE(...) descriptor", name, file);
        return MK_ERR;
    }
    if (info->abi_major != DUDA_PACKAGE_ABI_MAJOR || info->abi_minor > DUDA_PACKAGE_ABI_MINOR) {
        snprintf(err, errlen,
                 "package '%s' (%s) was built for Duda package ABI %u.%u, this server has %d.%d "
                 "(rebuild it with this server's duda_package.h)",
                 name, file, info->abi_major, info->abi_minor, DUDA_PACKAGE_ABI_MAJOR,
                 DUDA_PACKAGE_ABI_MINOR);
        return MK_ERR;
    }
    if (!info->name || strcmp(info->name, name) != 0 || !info->api || !info->bind) {
        snprintf(err, errlen, "package '%s': %s declares itself as '%s'", name, file,
                 info->name ? info->name : "");
        return MK_ERR;
    }
    return MK_OK;
}

/* Open `file` as package `name` and run its init(). NULL with the reason in err. */
static struct duda_package *duda_package_open(const char *name, const char *file, char *err,
                                              size_t errlen)
{
    if (access(file, R_OK) != 0) {
        snprintf(err, errlen, "package '%s': %s: %s", name, file, strerror(errno));
        return NULL;
    }
    void *dl = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        snprintf(err, errlen, "package '%s': %s", name, dlerror());
        return NULL;
    }
    const struct duda_package_info *(*entry)(void) =
        (const struct duda_package_info *(*) (void) ) dlsym(dl, "duda_package_main");
    const struct duda_package_info *info = entry ? entry() : NULL;
    struct duda_package *p = NULL;
    if (duda_package_check(name, file, info, err, errlen) != MK_OK) {
        goto fail;
    }
    p = calloc(1, sizeof(*p));
    if (!p || !(p->file = strdup(file))) {
        snprintf(err, errlen, "package '%s': out of memory", name);
        goto fail;
    }
    info->bind(&duda_api_table);
    if (info->init && info->init(&duda_api_table) != 0) {
        snprintf(err, errlen, "package '%s' (%s): its init() failed", name, file);
        goto fail;
    }
    p->dl = dl;
    p->info = info;
    return p;
fail:
    if (p) {
        free(p->file);
        free(p);
    }
    dlclose(dl);
    return NULL;
}

/* The registered package of `file`, or NULL. Under duda_packages_lock. */
static struct duda_package *duda_package_find(const char *file)
{
    for (struct duda_package *p = duda_packages; p; p = p->next) {
        if (!strcmp(p->file, file)) {
            return p;
        }
    }
    return NULL;
}

/* Record `p` as held by `svc` (once). MK_OK or MK_ERR (out of memory). */
static int duda_package_hold(struct duda_service *svc, struct duda_package *p)
{
    for (size_t i = 0; i < svc->n_packages; i++) {
        if (svc->packages[i] == p) {
            return MK_OK;
        }
    }
    struct duda_package **v = realloc(svc->packages, (svc->n_packages + 1) * sizeof(*v));
    if (!v) {
        return MK_ERR;
    }
    svc->packages = v;
    svc->packages[svc->n_packages++] = p;
    p->refs++;
    return MK_OK;
}

/*
 * Load package `name` for service `svc`: its API struct, or NULL with the
 * reason in err. On the controlling thread, in the service's duda_main().
 */
static const void *duda_package_acquire(struct duda_service *svc, const char *name,
                                        unsigned abi_major, unsigned abi_minor, char *err,
                                        size_t errlen)
{
    char file[PATH_MAX];

    if (!duda_package_name_ok(name)) {
        snprintf(err, errlen, "package '%s': 1 to 64 letters, digits, '_' or '-'",
                 name ? name : "(null)");
        return NULL;
    }
    if (abi_major != DUDA_PACKAGE_ABI_MAJOR) {
        snprintf(err, errlen,
                 "package '%s': the service was built for Duda package ABI %u.%u, this server "
                 "has %d.%d (rebuild it with this server's duda.h)",
                 name, abi_major, abi_minor, DUDA_PACKAGE_ABI_MAJOR, DUDA_PACKAGE_ABI_MINOR);
        return NULL;
    }
    int n = snprintf(file, sizeof(file), "%s/%s.dpkg",
                     svc->packages_root ? svc->packages_root : ".", name);
    if (n < 0 || (size_t) n >= sizeof(file)) {
        snprintf(err, errlen, "package '%s': PackagesRoot is too long", name);
        return NULL;
    }
    pthread_mutex_lock(&duda_packages_lock);
    struct duda_package *p = duda_package_find(file);
    bool opened = false;
    if (!p) {
        p = duda_package_open(name, file, err, errlen);
        if (p) {
            p->next = duda_packages;
            duda_packages = p;
            opened = true;
        }
    }
    if (p && duda_package_hold(svc, p) != MK_OK) {
        snprintf(err, errlen, "package '%s': out of memory", name);
        p = NULL;
    }
    pthread_mutex_unlock(&duda_packages_lock);
    if (p && opened) {
        duda_mk->log(MK_PLUGIN_LOG_INFO, "duda: service '%s': package '%s' %s loaded from %s",
                     svc->name, name, p->info->version ? p->info->version : "", file);
    }
    return p ? p->info->api : NULL;
}

/* package->load: from duda_main() (or a package's init) of the current service. */
static const void *duda_package_load(const char *name, unsigned abi_major, unsigned abi_minor)
{
    struct duda_service *svc = duda_current;
    char err[PATH_MAX + 512];

    if (!svc || duda_current_request) {
        duda_misuse(NULL, "package->load('%s') outside duda_main()", name ? name : "(null)");
        return NULL;
    }
    const void *api = duda_package_acquire(svc, name, abi_major, abi_minor, err, sizeof(err));
    if (!api) {
        duda_mk->log(MK_PLUGIN_LOG_ERROR, "duda: service '%s': %s", svc->name, err);
        if (!svc->map_err[0]) {
            snprintf(svc->map_err, sizeof(svc->map_err), "%.300s", err);
        }
    }
    return api;
}

/* Unlink `p` from the registry. Under duda_packages_lock. */
static void duda_package_forget(struct duda_package *p)
{
    for (struct duda_package **pp = &duda_packages; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            return;
        }
    }
}

void duda_package_release(struct duda_service *svc)
{
    for (size_t i = 0; i < svc->n_packages; i++) {
        struct duda_package *p = svc->packages[i];
        pthread_mutex_lock(&duda_packages_lock);
        bool last = --p->refs == 0;
        if (last) {
            duda_package_forget(p);
        }
        pthread_mutex_unlock(&duda_packages_lock);
        if (!last) {
            continue;
        }
        if (p->info->exit) {
            struct duda_service *saved = duda_current;
            duda_current = svc;
            p->info->exit();
            duda_current = saved;
        }
        dlclose(p->dl);
        free(p->file);
        free(p);
    }
    free(svc->packages);
    svc->packages = NULL;
    svc->n_packages = 0;
}

const struct duda_package_api duda_package_obj = {
    .size = sizeof(struct duda_package_api),
    .load = duda_package_load,
};
