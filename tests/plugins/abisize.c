/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * abisize.c: test plugins of the same ABI major but another minor, built
 * three ways (ABISIZE_VARIANT):
 *   ABISIZE_OLDER    an older minor: its struct mk_plugin ends after
 *                    `content`. The fields past that size hold poison that
 *                    crashes the server if it reads them as hooks.
 *   ABISIZE_NEWER    a newer minor whose struct has one more hook, left
 *                    NULL: it loads.
 *   ABISIZE_NEWHOOK  the same with the extra hook set: refused, since this
 *                    server would never call it.
 * GET /abisize answers the variant's name, and says whether the server's
 * function table has `site_hide_dotfiles` (MK_API_HAS).
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <monkey/mk_plugin.h>

#define ABISIZE_OLDER 1
#define ABISIZE_NEWER 2
#define ABISIZE_NEWHOOK 3

#if ABISIZE_VARIANT == ABISIZE_OLDER
#define ABISIZE_NAME "older"
#elif ABISIZE_VARIANT == ABISIZE_NEWER
#define ABISIZE_NAME "newer"
#else
#define ABISIZE_NAME "newhook"
#endif

static const struct mk_api *api;
static char abisize_reply[64];

static int abisize_init(const struct mk_api *server_api, const char *conf_dir)
{
    (void) conf_dir;
    api = server_api;
    snprintf(abisize_reply, sizeof(abisize_reply), "%s %d\n", ABISIZE_NAME,
             MK_API_HAS(api, site_hide_dotfiles) ? 1 : 0);
    return MK_OK;
}

static int abisize_content(struct mk_request *r)
{
    size_t len;
    const char *path = api->path(r, &len);

    if (len != 8 || memcmp(path, "/abisize", 8) != 0) {
        return MK_DECLINED;
    }
    api->set_status(r, 200);
    api->set_content_type(r, "text/plain");
    api->set_body_static(r, abisize_reply, strlen(abisize_reply));
    return MK_OK;
}

#if ABISIZE_VARIANT == ABISIZE_OLDER
/* Never read by the server: past the size this plugin declares. */
#define ABISIZE_POISON(type) ((type) 1)

MK_EXPORT const struct mk_plugin mk_plugin = {
    .abi_major = MK_PLUGIN_ABI_MAJOR,
    .abi_minor = MK_PLUGIN_ABI_MINOR,
    .size = offsetof(struct mk_plugin, transport),
    .name = "abisize",
    .init = abisize_init,
    .content = abisize_content,
    .transport = ABISIZE_POISON(const struct mk_transport *),
    .site_sections = ABISIZE_POISON(const char *const *),
    .site_init = ABISIZE_POISON(
        int (*)(const struct mk_site *, const struct mk_conf *, void **, char *, size_t)),
    .site_free = ABISIZE_POISON(void (*)(void *)),
    .batch_done = ABISIZE_POISON(void (*)(int)),
};
#else
/* What a newer header would declare: struct mk_plugin and one more hook. */
struct abisize_newer {
    struct mk_plugin base;
    void (*future_hook)(int worker_id);
};

#if ABISIZE_VARIANT == ABISIZE_NEWHOOK
static void abisize_hook(int worker_id)
{
    (void) worker_id;
}
#endif

MK_EXPORT const struct abisize_newer mk_plugin = {
    .base =
        {
            .abi_major = MK_PLUGIN_ABI_MAJOR,
            .abi_minor = MK_PLUGIN_ABI_MINOR + 1,
            .size = sizeof(struct abisize_newer),
            .name = "abisize",
            .init = abisize_init,
            .content = abisize_content,
        },
#if ABISIZE_VARIANT == ABISIZE_NEWHOOK
    .future_hook = abisize_hook,
#endif
};
#endif
