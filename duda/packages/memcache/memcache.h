/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * <duda/packages/memcache.h>: the memcache package
 * (duda/packages/memcache/README.md).
 *
 *     #include <duda/packages/memcache.h>
 *     static const struct duda_memcache_api *memcache;
 *     static duda_memcache_t *mc;
 *     ...in duda_main():
 *     duda_load_package(memcache, "memcache");
 *     mc = memcache->connect("127.0.0.1:11211");
 *
 * memcached through libmemcached. libmemcached blocks, so every operation
 * runs on the server's task threads (worker->task): the callback returns
 * after calling get/set/del/incr, and the answer comes to cb(dr, result,
 * data) on the request's worker, which ends the response there. A request
 * has one operation at a time. The connections are pooled (shared by the
 * task threads); a server that does not answer fails the operation after
 * a one second timeout (result status DUDA_MEMCACHE_ERROR).
 */
#ifndef DUDA_PACKAGES_MEMCACHE_H
#define DUDA_PACKAGES_MEMCACHE_H

#include <stdint.h>
#include <time.h>

#include <duda/duda.h>

typedef struct duda_memcache duda_memcache_t;

enum duda_memcache_status {
    DUDA_MEMCACHE_OK,        /* found, stored, deleted, incremented */
    DUDA_MEMCACHE_NOT_FOUND, /* get, del: no such key */
    DUDA_MEMCACHE_ERROR,     /* the server failed or could not be reached: see error */
};

struct duda_memcache_result {
    enum duda_memcache_status status;
    const char *value; /* get: the value (len bytes, NUL terminated), valid during the call */
    size_t len;
    uint64_t number;   /* incr: the new value */
    const char *error; /* DUDA_MEMCACHE_ERROR: libmemcached's reason */
};

/* The answer, on the request's worker (dr is never NULL: a request that left gets none). */
typedef void (*duda_memcache_cb)(duda_request_t *dr, const struct duda_memcache_result *res,
                                 void *data);

struct duda_memcache_api {
    size_t size;
    /*
     * In duda_main(): the servers, "host:port" or several separated by
     * commas (keys are spread over them). NULL (the reason logged) for a
     * bad list.
     */
    duda_memcache_t *(*connect)(const char *servers);
    /*
     * Keys are 1 to 250 bytes without spaces or control characters (-1
     * otherwise). Each call returns 0 (cb follows) or -1 (nothing queued:
     * a bad key, the request has an operation under way, or the task
     * queue is full: answer 503). expires: seconds to live, 0 for ever.
     */
    int (*get)(duda_memcache_t *m, duda_request_t *dr, const char *key, duda_memcache_cb cb,
               void *data);
    int (*set)(duda_memcache_t *m, duda_request_t *dr, const char *key, const void *value,
               size_t len, time_t expires, duda_memcache_cb cb, void *data);
    int (*del)(duda_memcache_t *m, duda_request_t *dr, const char *key, duda_memcache_cb cb,
               void *data);
    /* Add delta; a missing key starts at 0 (and lives `expires` seconds). */
    int (*incr)(duda_memcache_t *m, duda_request_t *dr, const char *key, uint64_t delta,
                time_t expires, duda_memcache_cb cb, void *data);
};

#endif
