/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fastcgi.h: the FastCGI plugin's parts.
 *   fastcgi.c     the plugin: hooks, site data, the content handler, counters
 *   fcgi_conf.c   the declared keys (fastcgi.conf, the [FASTCGI] site section)
 *   fcgi_pool.c   backends: health and the connection limit shared by the
 *                 workers, connections pooled per worker and backend (each new
 *                 one checked as taken by the backend), the queue of requests
 *                 waiting for one
 *   fcgi_req.c    one request on one connection, the fastcgi backend of the
 *                 gateway job: records both ways, retries and moves to
 *                 another backend, errors
 *   fcgi_proto.c  the record layer (pure)
 * The request's side (the body and its window, the header block and the
 * wait for it, the response stream and its spill, Timeout and
 * QueueTimeout), the header block's parser, the parameters and the script
 * mapping come from the gateway core, plugins/gateway.
 */
#ifndef MK_FASTCGI_H
#define MK_FASTCGI_H

#include <regex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <monkey/mk_plugin.h>

#include "fcgi_proto.h"
#include "gw.h"
#include "gw_job.h"

/* Backends one server may know (all sites and configurations together). */
#define FCGI_BACKENDS_MAX 64
/* Workers one server may have (the Workers key's bound): the waiting and idle masks. */
#define FCGI_WORKERS_MAX 1024
#define FCGI_WORKER_WORDS (FCGI_WORKERS_MAX / 64)
/* MaxConnections 0: how many when the backend does not say (fcgi_pool.c). */
#define FCGI_AUTO_CHECKED 32 /* it answers FCGI_GET_VALUES: each new connection checked */
#define FCGI_AUTO_SILENT 4   /* it does not: nothing can be checked */
/* The window of the request body and the high-water mark of the response. */
#define FCGI_WINDOW 65536

/* fastcgi.conf: plugin-wide. */
struct fcgi_conf {
    int max_conns;             /* connections per backend, all workers; 0: auto */
    uint64_t accept_ms;        /* a new connection the backend has not taken: closed past it */
    uint64_t queue_timeout_ms; /* a request waiting for a connection: 503 past it */
    uint64_t timeout_ms;       /* backend silence: 504 before the head, cut after */
    uint64_t down_ms;          /* a backend that refused is skipped this long */
};

/* A backend address as configured. */
struct fcgi_addr {
    struct sockaddr_storage sa;
    socklen_t len;
    char *text; /* as written: "unix:/run/php/fpm.sock", "127.0.0.1:9000" */
};

/* A site's [FASTCGI] section. */
struct fcgi_site_conf {
    struct fcgi_addr *backends;
    size_t n_backends;
    regex_t *matches;
    size_t n_matches;
    bool xsendfile; /* XSendfile: X-Sendfile and X-Accel-Redirect answered with the file */
};

/* What a backend does with FCGI_GET_VALUES, sent first on each new connection. */
enum fcgi_gv {
    FCGI_GV_UNKNOWN = 0, /* not asked yet */
    FCGI_GV_ANSWERS,     /* it answers once a worker of its took the connection */
    FCGI_GV_SILENT,      /* it does not (or closes after): connections go unchecked */
};

/* A backend's state in one server, shared by the workers (atomics). */
struct fcgi_backend {
    struct sockaddr_storage sa;
    socklen_t len;
    char text[128];
    atomic_uint_fast64_t down_until; /* api->now_ms() before which it is skipped */
    atomic_uint active;              /* connections open (all workers): within the limit */
    atomic_uint checking;            /* of which not yet taken by the backend */
    atomic_uint idle;                /* of which idle in a pool */
    atomic_uint queued;              /* requests waiting for a connection */
    /* its metrics (gw_job.h): requests sent, failures by kind (connect: marked down;
       bad_gateway: broken; timeout), the duration; the stats hook's figures */
    struct mk_gw_metrics m;
    /* the limit on `active` (fcgi_pool.c): MaxConnections, what the backend
       said (FCGI_MAX_CONNS, FCGI_MAX_REQS), what it was seen to take */
    atomic_int conf_max;               /* MaxConnections of the configuration in force */
    atomic_int gv;                     /* enum fcgi_gv */
    atomic_uint said;                  /* the least of its FCGI_MAX_CONNS, _REQS; 0: none */
    atomic_uint taken;                 /* lowered to what it took; 0: never lowered */
    atomic_uint_fast64_t taken_ms;     /* when `taken` last changed */
    atomic_bool probing;               /* `taken` grew: one more connection tried */
    atomic_uint peak;                  /* the most connections it was seen to hold at once */
    atomic_uint_fast64_t not_accepted; /* new connections closed untaken */
    /* workers with requests waiting for it, and with idle connections to it */
    atomic_uint_fast64_t waiting[FCGI_WORKER_WORDS], holding[FCGI_WORKER_WORDS];
};

/* The plugin's state in one server (api->self). */
struct fcgi_self {
    struct fcgi_backend backends[FCGI_BACKENDS_MAX];
    atomic_uint n_backends; /* entries appended by site_init (controlling thread) */
    atomic_uint_fast64_t requests;
    atomic_uint_fast64_t retries; /* requests sent again on a new connection */
    struct mk_gw_stats gw;        /* bad_gateway, timeouts, queue_timeouts, upstream_ms */
    struct mk_gw_mfamilies mf;    /* the families of the backends' metrics */
    /* monkey_fastcgi_backend_up{backend}, monkey_fastcgi_backend_connections{backend,state}:
       gauges read at the scrape (fastcgi.c) */
    int mf_up, mf_conns;
};

/* What site_init() stores: the site's backends as indexes into self->backends. */
struct fcgi_site {
    unsigned slots[FCGI_BACKENDS_MAX];
    unsigned n_slots;
    const struct fcgi_site_conf *sc;
    const struct fcgi_conf *conf;
};

struct fcgi_conn;
struct fcgi_req;

extern const struct mk_api *fcgi_api;
extern const struct mk_conf_schema fcgi_schema;

/* ---- fcgi_pool.c ---- */

/*
 * A connection to a backend of the site for req, chosen round-robin among
 * the backends not marked down: MK_OK (*out set: an idle pooled
 * connection, or a new one being connected to a backend whose connections
 * cannot be checked), MK_AGAIN (req was queued: a new connection is being
 * checked for it, or every usable backend is at its limit, all workers
 * together; fcgi_req_connected() will be called with a connection, or
 * with NULL when the backend refused the one made for it; the queue's
 * timer (QueueTimeout) is req's), or 502 (no backend is up). Each backend
 * it tries gets its bit in *tried (bit N: self->backends[N]).
 */
int fcgi_pool_acquire(struct fcgi_req *req, const struct fcgi_site *site, uint64_t *tried,
                      struct fcgi_conn **out);
/*
 * Another connection for a request whose connection failed before a byte
 * of it went out: the next backend of the site in turn that is not in
 * *tried (its bit then set) nor marked down, and has an idle connection or
 * room for a new one within its limit (a request is never queued again,
 * and such a new connection goes unchecked). MK_OK (*out set, as
 * fcgi_pool_acquire sets it), or MK_ERR (none).
 */
int fcgi_pool_next(const struct fcgi_site *site, uint64_t *tried, struct fcgi_conn **out);
/* The most connections to backend b, all workers together, now (see fcgi_pool.c). */
unsigned fcgi_limit(struct fcgi_backend *b);
/* Mark the backend of c down for down_ms (its connection failed): logged, counted. */
void fcgi_pool_down(const struct fcgi_conn *c, uint64_t down_ms, const char *why);
/* Give a connection back: kept for the next request (keep), else closed. */
void fcgi_pool_release(struct fcgi_conn *c, bool keep);
/* Remove req from the queue it waits in (its request went away). */
void fcgi_pool_unqueue(struct fcgi_req *req);
/* The worker exits (worker_exit, before its requests are released): no
   connection serves a queued request any more, none is kept. */
void fcgi_pool_worker_stopping(void);
/* Close this worker's idle connections and drop its queue (worker_exit). */
void fcgi_pool_worker_exit(void);
/* The connection's descriptor, its backend's health slot, and its watch. */
int fcgi_conn_fd(const struct fcgi_conn *c);
struct fcgi_backend *fcgi_conn_backend(const struct fcgi_conn *c);
/* Route c's events to req (its interest unchanged: set it with fcgi_conn_want). */
void fcgi_conn_attach(struct fcgi_conn *c, struct fcgi_req *req);
void fcgi_conn_want(struct fcgi_conn *c, uint32_t mask);
/* Whether c served a request, or the check, before (the backend may have closed it since). */
bool fcgi_conn_reused(const struct fcgi_conn *c);
/*
 * Replace c's socket with a new connection to the same backend, in place
 * (its pool's count unchanged): for a request whose kept-alive connection
 * the backend closed before answering. MK_OK (connecting), or MK_ERR with
 * errno (the backend refused at once: ECONNREFUSED, ENOENT...; ENOMEM,
 * EMFILE: the server is short), c unchanged.
 */
int fcgi_conn_renew(struct fcgi_conn *c);
/* Whether c is still connecting (its first writable event tells the result). */
bool fcgi_conn_connecting(const struct fcgi_conn *c);
void fcgi_conn_connected(struct fcgi_conn *c);

/* ---- fcgi_req.c ---- */

/* The content stage of a request for script s of site: as a content hook returns. */
int fcgi_req_start(struct mk_request *r, const struct fcgi_site *site,
                   const struct mk_gw_script *s);
/*
 * A queued request got a connection, or NULL: the one made for it was
 * refused (its backend then marked down) or could not be made; it then
 * moves to the next backend of its site that can take it now (each
 * backend once per request), or gets 502.
 */
void fcgi_req_connected(struct fcgi_req *req, struct fcgi_conn *c);
/* Events of the request's connection. */
void fcgi_req_io(struct fcgi_req *req, uint32_t ready);
/* Release every request of this worker (worker_exit). */
void fcgi_req_worker_exit(void);
/* The queue link of a request (fcgi_pool.c keeps the queue). */
struct fcgi_req **fcgi_req_queue_next(struct fcgi_req *req);
unsigned fcgi_req_slot(const struct fcgi_req *req);
void fcgi_req_set_slot(struct fcgi_req *req, unsigned slot);
/* The site of a request (its backends and settings). */
const struct fcgi_site *fcgi_req_site(const struct fcgi_req *req);

struct fcgi_self *fcgi_self(void);

#endif
