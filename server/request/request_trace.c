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
 * logger's %{request_id}n, %{trace_id}n; api->note). With RequestId Off, a
 * request answered with a 5xx gets an ID of the same generator as its head
 * goes out (mk_request_trace_id), for its error-log line and its note: the
 * access log's line of that request names the same ID. On r's worker.
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

/*
 * The worker's prefix and generator, drawn once from getrandom(2), which
 * cannot fail on the kernels this server runs on (openat2 needs Linux 5.6):
 * should it, the worker's address and id still tell workers apart.
 */
static void mk_trace_seed(struct mk_worker *w)
{
    uint64_t seed[3] = {(uintptr_t) w, (uint64_t) w->id, 0x9e3779b97f4a7c15ull};

    (void) !getrandom(seed, sizeof(seed), 0);
    mk_reqid_hex((const uint8_t *) seed, 8, w->reqid_text);
    memcpy(w->reqid_text + 16, "-0000000000000000", 17); /* the counter, 0 */
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
__attribute__((noinline)) static void mk_trace_random(struct mk_worker *w, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = mk_trace_next(w);
        v += !v; /* 0 is the one value refused: 1 stands for it */
        memcpy(out + i, &v, 8);
    }
}

/* What a line of the head is to this file (mk_trace_kind). */
enum { MK_TRACE_OTHER = 0, MK_TRACE_ID, MK_TRACE_PARENT, MK_TRACE_STATE };

/* Whether f is named `name` (len bytes): the length first, the common answer. */
static inline bool mk_trace_named(const struct mk_http_header *f, const char *name, size_t len)
{
    return f->name.len == len && mk_str_ieq(f->name.p, len, name);
}

static int mk_trace_kind(const struct mk_config *cfg, const struct mk_http_header *f)
{
    if (cfg->reqid && mk_trace_named(f, cfg->reqid_header, cfg->reqid_header_len)) {
        return MK_TRACE_ID;
    }
    if (cfg->trace_context) {
        if (mk_trace_named(f, "traceparent", 11)) {
            return MK_TRACE_PARENT;
        }
        if (mk_trace_named(f, "tracestate", 10)) {
            return MK_TRACE_STATE;
        }
    }
    return MK_TRACE_OTHER;
}

/*
 * The worker's next generated ID: its text is kept and its counter (the
 * last 16 hex digits) counted up in place, so one costs a copy and a digit
 * or two.
 */
static const char *mk_trace_next_id(struct mk_worker *w)
{
    static const char next[] = "123456789abcdef0";
    char *d = w->reqid_text + MK_REQID_GEN_LEN - 1;

    for (;;) {
        char c = *d;
        *d = next[c <= '9' ? c - '0' : c - 'a' + 10];
        if (c != 'f' || *--d == '-') {
            return w->reqid_text;
        }
    }
}

/*
 * Take the client's lines of the request ID and traceparent, and of
 * tracestate unless keep_state, out of t[0, *n) (h's lines, copied), the
 * others kept in order with their records in h->known. Rare: only when a
 * client sent one of them.
 */
static void mk_trace_drop(const struct mk_config *cfg, struct mk_http_head *h,
                          struct mk_http_header *t, unsigned *n, bool keep_state)
{
    unsigned w = 0;

    for (unsigned i = 0; i < *n; i++) {
        int kind = mk_trace_kind(cfg, &t[i]);
        if (kind != MK_TRACE_OTHER && !(kind == MK_TRACE_STATE && keep_state)) {
            continue;
        }
        for (unsigned k = 0; k < MK_HDR_KNOWN_COUNT; k++) {
            if (h->known[k] == i + 1) {
                h->known[k] = (uint16_t) (w + 1); /* 1 + its new index */
            }
        }
        t[w++] = t[i];
    }
    *n = w;
}

int mk_request_trace(struct mk_request *r)
{
    const struct mk_config *cfg = r->cfg;
    struct mk_worker *w = r->conn->worker;
    struct mk_http_head *h = &r->head;
    const struct mk_http_header *client_id = NULL, *client_tp = NULL;
    struct mk_traceparent tp;
    bool have_tp = false, drop = false;
    unsigned n = h->n_headers;

    if (!w->reqid_seeded) {
        mk_trace_seed(w);
    }
    for (unsigned i = 0; i < n; i++) {
        const struct mk_http_header *f = &h->headers[i];
        int kind = mk_trace_kind(cfg, f);
        drop |= kind != MK_TRACE_OTHER;
        if (kind == MK_TRACE_ID && !client_id) {
            client_id = f;
        }
        else if (kind == MK_TRACE_PARENT && !client_tp) {
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
    bool keep_state = have_tp; /* a tracestate goes with a valid traceparent only */
    if (!have_tp && cfg->trace_context == MK_TRACE_START) {
        mk_trace_random(w, tp.trace_id, sizeof(tp.trace_id));
        tp.flags = 0;
        have_tp = true;
    }

    /* the head, without the client's lines of these fields, with room for ours */
    struct mk_http_header *t = mk_arena_alloc(&r->arena, (n + 2) * sizeof(*t));
    if (!t) {
        return MK_ERR;
    }
    memcpy(t, h->headers, n * sizeof(*t));
    const char *id = NULL;
    size_t id_len = MK_REQID_GEN_LEN;
    if (cfg->reqid) {
        /* the note's copy is the field's value: the client's line is dropped
           below, the worker's text changes with the next ID */
        const char *v = client_id ? client_id->value.p : mk_trace_next_id(w);
        id_len = client_id ? client_id->value.len : id_len;
        if (!(id = mk_request_note_add(r, MK_NOTE_REQUEST_ID, sizeof(MK_NOTE_REQUEST_ID) - 1, v,
                                       id_len))) {
            return MK_ERR;
        }
    }
    if (drop) {
        mk_trace_drop(cfg, h, t, &n, keep_state);
    }
    if (id) {
        t[n].name.p = cfg->reqid_header;
        t[n].name.len = cfg->reqid_header_len;
        t[n].value.p = id;
        t[n].value.len = id_len;
        r->req_id = t[n++].value;
    }
    if (have_tp) {
        char *text = mk_arena_alloc(&r->arena, MK_TRACEPARENT_LEN);
        if (!text) {
            return MK_ERR;
        }
        mk_trace_random(w, tp.parent_id, sizeof(tp.parent_id));
        mk_traceparent_format(&tp, text);
        if (!mk_request_note_add(r, MK_NOTE_TRACE_ID, sizeof(MK_NOTE_TRACE_ID) - 1, text + 3, 32)) {
            return MK_ERR;
        }
        t[n].name.p = "traceparent";
        t[n].name.len = sizeof("traceparent") - 1;
        t[n].value.p = text;
        t[n].value.len = MK_TRACEPARENT_LEN;
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
        mk_response_add_header(r, cfg->reqid_header, cfg->reqid_header_len, r->req_id.p,
                               r->req_id.len);
    }
}

struct mk_str mk_request_trace_id(struct mk_request *r)
{
    struct mk_worker *w = r->conn->worker;

    if (r->req_id.len) {
        return r->req_id;
    }
    if (!w->reqid_seeded) {
        mk_trace_seed(w);
    }
    const char *id = mk_request_note_add(r, MK_NOTE_REQUEST_ID, sizeof(MK_NOTE_REQUEST_ID) - 1,
                                         mk_trace_next_id(w), MK_REQID_GEN_LEN);
    if (id) {
        r->req_id.p = id;
        r->req_id.len = MK_REQID_GEN_LEN;
    }
    return r->req_id;
}
