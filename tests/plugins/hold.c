/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * hold.c: a test plugin that holds requests in the request stage, so a test
 * can reload the server while a request of the old configuration is still
 * under way and then let it go on through the plugins loaded after this one.
 *   any path starting "/hold/"   suspended (request stage) until released
 *   GET /held                    200 "held N": how many are held now
 *   GET /release                 resumes every held request; 200 "released N"
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <monkey/mk_plugin.h>

#define HOLD_MAX 16

static const struct mk_api *api;
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mk_suspended *hold_held[HOLD_MAX];
static unsigned hold_count;

static int hold_init(const struct mk_api *server_api, const char *conf_dir)
{
    (void) conf_dir;
    api = server_api;
    return MK_OK;
}

static bool hold_path_is(const struct mk_request *r, const char *want, bool prefix)
{
    size_t len, n = strlen(want);
    const char *path = api->path(r, &len);
    return (prefix ? len >= n : len == n) && memcmp(path, want, n) == 0;
}

/* The held request goes on to the next plugin's request stage. */
static int hold_continue(struct mk_request *r, void *arg)
{
    (void) r;
    (void) arg;
    return MK_OK;
}

static int hold_request(struct mk_request *r)
{
    if (!hold_path_is(r, "/hold/", true)) {
        return MK_OK;
    }
    pthread_mutex_lock(&hold_lock);
    struct mk_suspended *s = hold_count < HOLD_MAX ? api->suspend(r) : NULL;
    if (s) {
        hold_held[hold_count++] = s;
    }
    pthread_mutex_unlock(&hold_lock);
    return s ? MK_SUSPENDED : 503;
}

static int hold_content(struct mk_request *r)
{
    enum { reply_size = 32 };
    unsigned n;

    bool release = hold_path_is(r, "/release", false);

    if (!release && !hold_path_is(r, "/held", false)) {
        return MK_DECLINED;
    }
    pthread_mutex_lock(&hold_lock);
    n = hold_count;
    for (unsigned i = 0; release && i < n; i++) {
        api->resume(hold_held[i], hold_continue, NULL);
    }
    if (release) {
        hold_count = 0;
    }
    pthread_mutex_unlock(&hold_lock);
    char *body = api->alloc(r, reply_size);
    if (!body) {
        return 503;
    }
    snprintf(body, reply_size, "%s %u\n", release ? "released" : "held", n);
    api->set_status(r, 200);
    api->set_content_type(r, "text/plain");
    api->set_body_static(r, body, strlen(body));
    return MK_OK;
}

MK_EXPORT const struct mk_plugin mk_plugin = {
    MK_PLUGIN_ABI_INIT,      .name = "hold",
    .version = "1.0",        .description = "holds requests until released (tests)",
    .init = hold_init,       .request = hold_request,
    .content = hold_content,
};
