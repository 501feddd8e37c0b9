/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * upload.c: a test plugin that consumes a streamed request body
 * (api->body_stream) and answers its length and CRC-32:
 *
 *   POST /upload[?window=N][&slow=MS][&hold=1][&defer=MS][&reject=1][&stop=N]
 *     -> 200 "bytes=N crc32=XXXXXXXX max_held=H\n"
 *
 *   window=N  the window asked for (0: the server's default)
 *   slow=MS   keep every piece (MK_AGAIN) and give them all back MS
 *             milliseconds later (body_consume from a timer): a slow consumer
 *   hold=1    keep every piece and never give any back: the server must stop
 *             reading at the window
 *   defer=MS  ask for the body only MS milliseconds after the content hook
 *             (suspend, then a timer resumes): 100 Continue must wait for it
 *   reject=1  answer 403 without asking for the body
 *   stop=N    answer 403 from the body callback once N bytes arrived
 *
 *   GET /upload/stats -> "aborts=A delivered=D max_held=H\n": bodies whose
 *   request ended before them (MK_BODY_ABORT), bytes delivered to the last
 *   upload, and the most bytes any upload held at once.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <monkey/mk_plugin.h>

static const struct mk_api *api;
static uint32_t crc_table[256];
static atomic_ulong n_aborts, last_delivered, max_held_ever;

struct upload {
    struct mk_request *r;
    struct mk_suspended *s;
    struct mk_loop_timer *timer;
    unsigned long long bytes, stop;
    size_t window, held, max_held;
    unsigned slow;
    int hold;
    uint32_t crc;
};

static int upload_init(const struct mk_api *a, const char *conf_dir)
{
    (void) conf_dir;
    api = a;
    if (!MK_API_HAS(api, body_stream)) { /* added in ABI 3.2 */
        api->log(MK_PLUGIN_LOG_ERROR, "upload: needs a server with plugin ABI 3.2");
        return MK_ERR;
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        }
        crc_table[i] = c;
    }
    return MK_OK;
}

static unsigned long long query_num(const char *q, size_t len, const char *key)
{
    char tmp[256];
    size_t klen = strlen(key);

    if (!q || len >= sizeof(tmp)) {
        return 0;
    }
    memcpy(tmp, q, len);
    tmp[len] = '\0';
    for (char *p = tmp; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
        if (strncmp(p, key, klen) == 0 && p[klen] == '=') {
            return strtoull(p + klen + 1, NULL, 10);
        }
    }
    return 0;
}

static void upload_free(struct upload *u)
{
    if (u->timer) {
        api->timer_stop(u->timer);
    }
    free(u);
}

/* slow=MS: the kept pieces are done now. */
static void upload_give_back(struct mk_loop_timer *t, void *arg)
{
    struct upload *u = arg;
    size_t n = u->held;

    (void) t;
    u->timer = NULL;
    u->held = 0;
    api->body_consume(u->r, n);
}

static void upload_note_held(struct upload *u)
{
    unsigned long seen = atomic_load(&max_held_ever);

    if (u->held > u->max_held) {
        u->max_held = u->held;
    }
    while (u->held > seen && !atomic_compare_exchange_weak(&max_held_ever, &seen, u->held)) {
    }
}

static int upload_answer(struct mk_request *r, struct upload *u)
{
    char out[128];
    int n = snprintf(out, sizeof(out), "bytes=%llu crc32=%08x max_held=%zu\n", u->bytes,
                     u->crc ^ 0xFFFFFFFFu, u->max_held);
    upload_free(u);
    api->set_status(r, 200);
    api->set_content_type(r, "text/plain");
    return api->set_body(r, out, (size_t) n) == MK_OK ? MK_OK : 503;
}

static int upload_body(struct mk_request *r, int event, const char *data, size_t len, void *arg)
{
    struct upload *u = arg;

    if (event == MK_BODY_ABORT) {
        atomic_fetch_add(&n_aborts, 1);
        upload_free(u);
        return MK_OK;
    }
    if (event == MK_BODY_END) {
        return upload_answer(r, u);
    }
    uint32_t c = u->crc;
    for (size_t i = 0; i < len; i++) {
        c = crc_table[(c ^ (unsigned char) data[i]) & 0xFF] ^ (c >> 8);
    }
    u->crc = c;
    u->bytes += len;
    atomic_store(&last_delivered, u->bytes);
    if (u->stop && u->bytes >= u->stop) {
        upload_free(u); /* a status ends the body: no further call */
        return 403;
    }
    if (!u->slow && !u->hold) {
        return MK_OK;
    }
    u->held += len;
    upload_note_held(u);
    if (u->slow && !u->timer) {
        u->timer = api->timer_start(u->slow, 0, upload_give_back, u);
    }
    return MK_AGAIN;
}

static int upload_ask(struct mk_request *r, struct upload *u)
{
    if (api->body_stream(r, u->window, upload_body, u) != MK_OK) {
        free(u);
        return 500;
    }
    return MK_AGAIN;
}

/* defer=MS: the timer fired; ask for the body now. */
static int upload_resumed(struct mk_request *r, void *arg)
{
    struct upload *u = arg;

    if (!r) {
        free(u);
        return MK_OK;
    }
    return upload_ask(r, u);
}

static void upload_deferred(struct mk_loop_timer *t, void *arg)
{
    struct upload *u = arg;

    (void) t;
    api->resume(u->s, upload_resumed, u);
}

static int upload_stats(struct mk_request *r)
{
    char out[128];
    int n =
        snprintf(out, sizeof(out), "aborts=%lu delivered=%lu max_held=%lu\n",
                 atomic_load(&n_aborts), atomic_load(&last_delivered), atomic_load(&max_held_ever));
    api->set_content_type(r, "text/plain");
    return api->set_body(r, out, (size_t) n) == MK_OK ? MK_OK : 503;
}

static int upload_content(struct mk_request *r)
{
    size_t len, qlen;
    const char *path = api->path(r, &len);
    const char *q = api->query(r, &qlen);

    if (len == 13 && memcmp(path, "/upload/stats", 13) == 0) {
        return upload_stats(r);
    }
    if (len != 7 || memcmp(path, "/upload", 7) != 0) {
        return MK_DECLINED;
    }
    if (query_num(q, qlen, "reject")) {
        return 403;
    }
    struct upload *u = calloc(1, sizeof(*u));
    if (!u) {
        return 503;
    }
    u->r = r;
    u->crc = 0xFFFFFFFFu;
    u->window = (size_t) query_num(q, qlen, "window");
    u->slow = (unsigned) query_num(q, qlen, "slow");
    u->hold = (int) query_num(q, qlen, "hold");
    u->stop = query_num(q, qlen, "stop");
    atomic_store(&last_delivered, 0);
    unsigned defer = (unsigned) query_num(q, qlen, "defer");
    if (!defer) {
        return upload_ask(r, u);
    }
    u->s = api->suspend(r);
    if (!u->s || !api->timer_start(defer, 0, upload_deferred, u)) {
        free(u); /* a handle that is never resumed times out the request */
        return 503;
    }
    return MK_SUSPENDED;
}

MK_EXPORT const struct mk_plugin mk_plugin = {
    MK_PLUGIN_ABI_INIT,
    .name = "upload",
    .init = upload_init,
    .content = upload_content,
};
