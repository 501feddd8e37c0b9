/*
 * Drives the memcache package for duda/test_duda_memcache.py. The servers
 * are in ConfDir/memcache.conf ([MEMCACHE] Servers host:port).
 *
 *   GET /mcuser/set/:key/:value?ttl=S   "stored"
 *   GET /mcuser/get/:key                the value, or 404
 *   GET /mcuser/del/:key                "deleted", or 404
 *   GET /mcuser/incr/:key?by=N&ttl=S    the new number
 * 502 with the reason when memcached fails, 400 for a bad key.
 */
#include <stdlib.h>
#include <string.h>

#include <duda/duda.h>
#include <duda/packages/memcache.h>

DUDA_REGISTER("Memcache package user", "mcuser");

static const struct duda_memcache_api *memcache;
static duda_memcache_t *mc;

static void reply(duda_request_t *dr, int status, const char *text, size_t len)
{
    response->http_status(dr, status);
    response->http_content_type(dr, "text/plain");
    response->print(dr, text, len);
    response->print(dr, "\n", 1);
    response->end(dr, NULL);
}

static void answered(duda_request_t *dr, const struct duda_memcache_result *res, void *what)
{
    if (res->status == DUDA_MEMCACHE_ERROR) {
        reply(dr, 502, res->error, strlen(res->error));
    }
    else if (res->status == DUDA_MEMCACHE_NOT_FOUND) {
        reply(dr, 404, "not found", 9);
    }
    else if (!strcmp(what, "get")) {
        reply(dr, 200, res->value, res->len);
    }
    else if (!strcmp(what, "incr")) {
        response->http_content_type(dr, "text/plain");
        response->printf(dr, "%llu\n", (unsigned long long) res->number);
        response->end(dr, NULL);
    }
    else {
        reply(dr, 200, what, strlen(what));
    }
}

static long ttl(duda_request_t *dr)
{
    const char *t = qs->get(dr, "ttl");
    return t ? atol(t) : 0;
}

static void refused(duda_request_t *dr)
{
    reply(dr, 400, "refused", 7);
}

static void cb_set(duda_request_t *dr)
{
    const char *v = param->get(dr, "value");
    if (memcache->set(mc, dr, param->get(dr, "key"), v, strlen(v), ttl(dr), answered, "stored") !=
        0) {
        refused(dr);
    }
}

static void cb_get(duda_request_t *dr)
{
    if (memcache->get(mc, dr, param->get(dr, "key"), answered, "get") != 0) {
        refused(dr);
    }
}

static void cb_del(duda_request_t *dr)
{
    if (memcache->del(mc, dr, param->get(dr, "key"), answered, "deleted") != 0) {
        refused(dr);
    }
}

static void cb_incr(duda_request_t *dr)
{
    const char *by = qs->get(dr, "by");
    if (memcache->incr(mc, dr, param->get(dr, "key"), by ? strtoull(by, NULL, 10) : 1, ttl(dr),
                       answered, "incr") != 0) {
        refused(dr);
    }
}

int duda_main(void)
{
    duda_fconf_t *f = fconf->read("memcache.conf");
    const char *servers = f ? fconf->get(f, "MEMCACHE", "Servers") : NULL;

    if (!servers || !duda_load_package(memcache, "memcache") ||
        !(mc = memcache->connect(servers))) {
        if (f) {
            fconf->free(f);
        }
        return -1;
    }
    fconf->free(f);
    router->map("/set/:key/:value", DUDA_GET, cb_set);
    router->map("/get/:key", DUDA_GET, cb_get);
    router->map("/del/:key", DUDA_GET, cb_del);
    router->map("/incr/:key", DUDA_GET, cb_incr);
    return 0;
}
