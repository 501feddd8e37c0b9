/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * request_trace.c: request IDs and W3C trace context (RequestId,
 * RequestIdHeader, RequestIdFrom, RequestIdEcho, TraceContext).
 *
 * Both live in r's head as request fields, so that whatever reads a
 * request's fields (the gateways' HTTP_* variables, the proxy's upstream
 * request, Duda, api->header) passes them on with nothing of its own. The
 * client's lines of these fields are taken out of the head first; the
 * server then appends the one line of each it vouches for:
 *
 * - the request ID: the client's (the first line), when the connection's
 *   client is in RequestIdFrom and the value is valid (reqid.h), else one
 *   made here: "<16 hex: the worker's random prefix>-<16 hex: its
 *   counter>". No system call per request: the prefix is drawn from
 *   getrandom(2) once per worker; prefixes differ between workers and
 *   processes, so IDs are unique across them.
 * - traceparent: with TraceContext On or Start, a valid client traceparent
 *   keeps its trace id and flags and gets a new parent id (this server is a
 *   hop: the id is the span of this request), and its tracestate lines stay;
 *   an invalid or absent one is dropped with its tracestate, and Start
 *   begins a new trace (random trace id, flags 00).
 *
 * The ID and trace id are also the notes request_id and trace_id (the
 * logger's %{request_id}n, %{trace_id}n; api->note). On r's worker.
 */
#include <string.h>
#include <sys/random.h>

#include "../../core/strings.h"
#include "../config/conf.h"
#include "../conn/conn.h"
#include "../http/realip.h"
#include "../http/reqid.h"
#include "../runtime/worker.h"
#include "request.h"

/* TraceContext, in the order of its words in conf.c. */
enum { MK_TRACE_OFF = 0, MK_TRACE_ON, MK_TRACE_START };

/* The worker's prefix and generator, drawn once (clock and address as a fallback). */
static void mk_trace_seed(struct mk_worker *w)
{
    uint64_t seed[3];

    if (getrandom(seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t) sizeof(seed)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed[0] = (uint64_t) ts.tv_nsec ^ ((uint64_t) ts.tv_sec << 30) ^ (uintptr_t) w;
        seed[1] = seed[0] * 0x9e3779b97f4a7c15ull + (uint64_t) w->id;
        seed[2] = seed[1] * 0xbf58476d1ce4e5b9ull;
    }
    w->reqid_prefix = seed[0];
    w->trace_rng[0] = seed[1] | 1; /* xorshift128+ needs a state not all zero */
    w->trace_rng[1] = seed[2];
    w->reqid_seeded = true;
}

/* xorshift128+: 64 bits of the worker's generator. */
static uint64_t mk_trace_next(struct mk_worker *w)
{
    uint64_t s1 = w->trace_rng[0];
    const uint64_t s0 = w->trace_rng[1];

    w->trace_rng[0] = s0;
    s1 ^= s1 << 23;
    w->trace_rng[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
    return w->trace_rng[1] + s0;
}

/* n random bytes (a multiple of 8), never all zero: the ids of a traceparent may not be. */
static void mk_trace_random(struct mk_worker *w, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = mk_trace_next(w);
        v += !v; /* 0 is the one value refused: 1 stands for it */
        memcpy(out + i, &v, 8);
    }
}

static bool mk_trace_named(const struct mk_http_header *f, const char *name)
{
    return mk_str_ieq(f->name.p, f->name.len, name);
}

/* A copy of [p, p+len) in r's arena with a NUL, or NULL. */
static char *mk_trace_dup(struct mk_request *r, const char *p, size_t len)
{
    char *s = mk_arena_alloc(&r->arena, len + 1);
    if (s) {
        memcpy(s, p, len);
        s[len] = '\0';
    }
    return s;
}

int mk_request_trace(struct mk_request *r)
{
    const struct mk_config *cfg = r->cfg;
    struct mk_worker *w = r->conn->worker;
    struct mk_http_head *h = &r->head;
    const char *id_name = cfg->reqid_header;
    const struct mk_http_header *client_id = NULL, *client_tp = NULL;
    struct mk_traceparent tp;
    bool have_tp = false, keep_state;
    unsigned n = 0, map[MK_HDR_KNOWN_COUNT];

    if (!w->reqid_seeded) {
        mk_trace_seed(w);
    }
    for (unsigned i = 0; i < h->n_headers; i++) {
        const struct mk_http_header *f = &h->headers[i];
        if (cfg->reqid && !client_id && mk_trace_named(f, id_name)) {
            client_id = f;
        }
        else if (cfg->trace_context && !client_tp && mk_trace_named(f, "traceparent")) {
            client_tp = f;
        }
    }
    if (client_id &&
        !(mk_realip_trusted(mk_conn_client(r->conn), cfg->reqid_from, cfg->n_reqid_from) &&
          mk_reqid_valid(client_id->value.p, client_id->value.len))) {
        client_id = NULL;
    }
    if (client_tp) {
        have_tp = mk_traceparent_parse(client_tp->value.p, client_tp->value.len, &tp);
    }
    keep_state = have_tp;
    if (!have_tp && cfg->trace_context == MK_TRACE_START) {
        mk_trace_random(w, tp.trace_id, sizeof(tp.trace_id));
        tp.flags = 0;
        have_tp = true;
    }
    if (have_tp) {
        mk_trace_random(w, tp.parent_id, sizeof(tp.parent_id));
    }

    /* the head without the client's lines of these fields, with room for ours */
    struct mk_http_header *t = mk_arena_alloc(&r->arena, (h->n_headers + 2) * sizeof(*t));
    if (!t) {
        return MK_ERR;
    }
    for (unsigned k = 0; k < MK_HDR_KNOWN_COUNT; k++) {
        map[k] = h->known[k];
    }
    for (unsigned i = 0; i < h->n_headers; i++) {
        const struct mk_http_header *f = &h->headers[i];
        bool drop = (cfg->reqid && mk_trace_named(f, id_name)) ||
                    (cfg->trace_context && (mk_trace_named(f, "traceparent") ||
                                            (!keep_state && mk_trace_named(f, "tracestate"))));
        if (drop) {
            continue;
        }
        /* a known field keeps its record: 1 + its new index */
        for (unsigned k = 0; k < MK_HDR_KNOWN_COUNT; k++) {
            if (map[k] == i + 1) {
                h->known[k] = (uint16_t) (n + 1);
            }
        }
        t[n++] = *f;
    }

    if (cfg->reqid) {
        char gen[MK_REQID_GEN_LEN];
        const char *v = gen;
        size_t len = sizeof(gen);
        if (client_id) {
            v = client_id->value.p;
            len = client_id->value.len;
        }
        else {
            mk_reqid_format(w->reqid_prefix, ++w->reqid_seq, gen);
        }
        char *copy = mk_trace_dup(r, v, len);
        if (!copy || mk_request_note_set(r, "request_id", copy) != MK_OK) {
            return MK_ERR;
        }
        t[n].name.p = id_name;
        t[n].name.len = strlen(id_name);
        t[n].value.p = copy;
        t[n].value.len = len;
        r->req_id = t[n].value;
        n++;
    }
    if (have_tp) {
        char text[MK_TRACEPARENT_LEN];
        mk_traceparent_format(&tp, text);
        char *copy = mk_trace_dup(r, text, sizeof(text));
        if (!copy) {
            return MK_ERR;
        }
        memcpy(r->trace_id, text + 3, 32);
        r->trace_id[32] = '\0';
        if (mk_request_note_set(r, "trace_id", r->trace_id) != MK_OK) {
            return MK_ERR;
        }
        t[n].name.p = "traceparent";
        t[n].name.len = sizeof("traceparent") - 1;
        t[n].value.p = copy;
        t[n].value.len = sizeof(text);
        n++;
    }
    h->headers = t;
    h->n_headers = n;
    return MK_OK;
}

void mk_request_trace_respond(struct mk_request *r)
{
    const struct mk_config *cfg = r->cfg;

    if (cfg->reqid_echo) {
        mk_response_add_header(r, cfg->reqid_header, strlen(cfg->reqid_header), r->req_id.p,
                               r->req_id.len);
    }
    if (r->status >= 500) {
        mk_request_error_log(r, "request %.*s answered %d", (int) r->req_id.len, r->req_id.p,
                             r->status);
    }
}
