/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * duda/service.c: loading a service. NAME.duda is copied to a private,
 * uniquely named file, opened with dlopen() and the copy removed at once:
 * so every load (every site, every reload) has its own copy of the
 * service's statics, a rebuilt file is really loaded again (the dynamic
 * loader would otherwise hand back the copy it already has under that
 * name), and a build writing over NAME.duda never touches running code.
 * `monkey -t` opens the file itself and creates nothing.
 *
 * The service's duda_service record is checked before any of its code
 * runs: a service built for another major of the service ABI is refused.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "duda_internal.h"

/* Copy `src` to a new file in the temporary folder; its path in out. MK_OK or MK_ERR (errno). */
static int duda_copy(const char *src, const char *name, char *out, size_t outlen)
{
    const char *tmp = getenv("TMPDIR");
    unsigned long gen = atomic_fetch_add(&duda_self()->generation, 1);
    struct stat st;

    snprintf(out, outlen, "%s/monkey-duda-%ld-%lu-%s.duda", tmp && *tmp ? tmp : "/tmp",
             (long) getpid(), gen, name);
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        return MK_ERR;
    }
    int fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
    if (fd < 0 || fstat(in, &st) != 0) {
        int e = errno;
        close(in);
        if (fd >= 0) {
            close(fd);
        }
        errno = e;
        return MK_ERR;
    }
    off_t off = 0;
    while (off < st.st_size) {
        ssize_t n = sendfile(fd, in, &off, (size_t) (st.st_size - off));
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            close(in);
            close(fd);
            unlink(out);
            errno = e;
            return MK_ERR;
        }
    }
    close(in);
    if (close(fd) != 0) {
        unlink(out);
        return MK_ERR;
    }
    return MK_OK;
}

static int duda_open(struct duda_service *svc, char *err, size_t errlen)
{
    char copy[PATH_MAX];

    if (access(svc->file, R_OK) != 0) {
        snprintf(err, errlen, "%s: %s (build the service with `duda build`)", svc->file,
                 strerror(errno));
        return MK_ERR;
    }
    if (duda_mk->checking()) {
        svc->dl = dlopen(svc->file, RTLD_NOW | RTLD_LOCAL);
    }
    else {
        if (duda_copy(svc->file, svc->name, copy, sizeof(copy)) != MK_OK) {
            snprintf(err, errlen, "%s: copying it to %s: %s", svc->file, copy, strerror(errno));
            return MK_ERR;
        }
        svc->dl = dlopen(copy, RTLD_NOW | RTLD_LOCAL);
        unlink(copy);
    }
    if (!svc->dl) {
        snprintf(err, errlen, "%s: %s", svc->file, dlerror());
        return MK_ERR;
    }
    return MK_OK;
}

int duda_service_load(struct duda_service *svc, char *err, size_t errlen)
{
    if (duda_open(svc, err, errlen) != MK_OK) {
        return MK_ERR;
    }
    const struct duda_service_info *info = dlsym(svc->dl, "duda_service");
    if (!info) {
        snprintf(err, errlen, "%s: no DUDA_REGISTER(title, name) in the service", svc->file);
        return MK_ERR;
    }
    if (info->abi_major != DUDA_ABI_MAJOR) {
        snprintf(err, errlen,
                 "%s was built for Duda service ABI %u.%u, this server has %d.%d (rebuild it "
                 "with this server's duda.h)",
                 svc->file, info->abi_major, info->abi_minor, DUDA_ABI_MAJOR, DUDA_ABI_MINOR);
        return MK_ERR;
    }
    if (!info->name || strcmp(info->name, svc->name) != 0 || !info->bind) {
        snprintf(err, errlen, "%s registers itself as '%s', not '%s'", svc->file,
                 info->name ? info->name : "", svc->name);
        return MK_ERR;
    }
    int (*main_fn)(void) = (int (*)(void)) dlsym(svc->dl, "duda_main");
    if (!main_fn) {
        snprintf(err, errlen, "%s has no duda_main()", svc->file);
        return MK_ERR;
    }
    svc->exit_fn = (void (*)(void)) dlsym(svc->dl, "duda_exit");
    svc->title = info->title ? info->title : info->name;
    pthread_mutex_init(&svc->console_lock, NULL);
    if (svc->docroot) {
        svc->docroot_fd = open(svc->docroot, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (svc->docroot_fd < 0) {
            snprintf(err, errlen, "DocumentRoot %s: %s", svc->docroot, strerror(errno));
            return MK_ERR;
        }
    }
    info->bind(&duda_api_table);
    struct duda_service *saved = duda_current;
    duda_current = svc;
    int rc = main_fn();
    duda_current = saved;
    if (svc->map_err[0]) {
        snprintf(err, errlen, "%s", svc->map_err);
        return MK_ERR;
    }
    if (rc != 0) {
        snprintf(err, errlen, "duda_main() returned %d", rc);
        return MK_ERR;
    }
    return MK_OK;
}

void duda_service_unload(struct duda_service *svc)
{
    /* Under monkey -t too: duda_main() ran and may hold what duda_exit() releases. */
    if (svc->dl && svc->exit_fn) {
        struct duda_service *saved = duda_current;
        duda_current = svc;
        svc->exit_fn();
        duda_current = saved;
    }
    if (svc->dl) {
        duda_global_release(svc);
    }
    duda_logger_release(svc);
    if (svc->docroot_fd >= 0) {
        close(svc->docroot_fd);
        svc->docroot_fd = -1;
    }
    svc->unloaded = true;
}

void duda_service_hold(struct duda_service *svc)
{
    atomic_fetch_add_explicit(&svc->refs, 1, memory_order_relaxed);
}

/* The last holder is gone: unmap the code, free everything. */
static void duda_service_destroy(struct duda_service *svc)
{
    if (svc->dl) {
        duda_package_release(svc);
        dlclose(svc->dl);
        pthread_mutex_destroy(&svc->console_lock);
    }
    free(svc->routes);
    free(svc->gvalues);
    free(svc->gready);
    free(svc->loop_ready);
    free(svc->name);
    free(svc->docroot);
    free(svc->confdir);
    free(svc->datadir);
    free(svc->logdir);
    free(svc->file);
    free(svc->session_store);
    free(svc->packages_root);
    free(svc);
}

void duda_service_put(struct duda_service *svc)
{
    if (atomic_fetch_sub_explicit(&svc->refs, 1, memory_order_acq_rel) == 1) {
        duda_service_destroy(svc);
    }
}

/* Add `pattern` (already prefixed) to the site's table for route `rt`. */
static int duda_route_add(struct mk_route_table *t, const struct duda_service *svc,
                          const char *pattern, uint32_t methods, mk_route_cb handler, void *arg,
                          char *err, size_t errlen)
{
    char why[256];

    if (duda_mk->route_table_add(t, methods, pattern, handler, arg, why, sizeof(why)) != MK_OK) {
        snprintf(err, errlen, "service '%s': route '%s' refused by the server: %s", svc->name,
                 pattern, why);
        return MK_ERR;
    }
    return MK_OK;
}

int duda_service_globals(struct duda_service *svc, char *err, size_t errlen)
{
    svc->workers = 128; /* worker ids beyond it have no per-worker values */
    svc->gvalues = calloc((size_t) svc->workers * DUDA_GLOBALS_MAX, sizeof(void *));
    svc->gready = calloc((size_t) svc->workers * DUDA_GLOBALS_MAX, 1);
    svc->loop_ready = calloc(svc->workers, 1);
    if (!svc->gvalues || !svc->gready || !svc->loop_ready) {
        snprintf(err, errlen, "out of memory");
        return MK_ERR;
    }
    duda_global_track(svc);
    return MK_OK;
}

int duda_service_routes(struct mk_route_table *t, struct duda_service *svc, char *err,
                        size_t errlen)
{
    char prefix[80], full[DUDA_PATTERN_MAX];

    snprintf(prefix, sizeof(prefix), "%s%s", svc->root ? "" : "/", svc->root ? "" : svc->name);
    for (size_t i = 0; i < svc->n_routes; i++) {
        struct duda_route *rt = &svc->routes[i];
        if (rt->root) {
            if (!svc->root && (duda_route_add(t, svc, prefix, rt->methods, duda_request_handler, rt,
                                              err, errlen) != MK_OK)) {
                return MK_ERR;
            }
            duda_router_join(prefix, "/", full, sizeof(full));
        }
        else if (duda_router_join(prefix, rt->pattern, full, sizeof(full)) != MK_OK) {
            snprintf(err, errlen, "route '%s': too long", rt->pattern);
            return MK_ERR;
        }
        if (duda_route_add(t, svc, full, rt->methods, duda_request_handler, rt, err, errlen) !=
            MK_OK) {
            return MK_ERR;
        }
    }
    /* The service's static files, then (declined) the site's. */
    if (svc->docroot) {
        duda_router_join(prefix, "/*", full, sizeof(full));
        if (duda_route_add(t, svc, full, MK_ROUTE_GET | MK_ROUTE_HEAD, duda_static_handler, svc,
                           err, errlen) != MK_OK) {
            return MK_ERR;
        }
    }
    return MK_OK;
}
