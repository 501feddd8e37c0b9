/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * proxy.h: the reverse proxy plugin's parts.
 *   proxy.c    the plugin: hooks, a site's routes and groups, the content
 *              handler, counters
 *   px_conf.c  the declared keys (proxy.conf: timeouts, health, the
 *              upstream groups; the [PROXY] site section: the routes)
 *   px_pick.c  balancing (weighted round robin, least connections, a
 *              consistent hash with virtual nodes) and passive health
 *   px_req.c   one request on one upstream connection, the proxy backend
 *              of the gateway job; the keep-alive pool of each worker; the
 *              tunnels of upgraded connections (WebSocket)
 *   px_http.c  the upstream response's head and chunked coding (pure)
 *   px_fconf.c the [PROXY] site keys of the fields sent and answered
 *   px_fields.c the rewriting of Location, Refresh, Set-Cookie and the
 *              Forwarded element (pure)
 *   px_buf.c   the response buffer of a request (Buffering on): memory,
 *              then a temporary file
 * The request's side (the body and its window, the wait for the head, the
 * response stream and its back-pressure, Timeout) is the gateway job's,
 * plugins/gateway.
 */
#ifndef MK_PROXY_H
#define MK_PROXY_H

#include <pthread.h>
#include <regex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <monkey/mk_plugin.h>

#include "gw.h"
#include "gw_job.h"
#include "px_fields.h"
#include "px_http.h"

/* Upstream servers one server process may know (all groups and configurations). */
#define PX_SERVERS_MAX 256
/* Servers of one group. */
#define PX_MEMBERS_MAX 64
/* Virtual nodes of a server of weight 1 on a consistent hash's ring. */
#define PX_VNODES 160
/* Workers whose requests wait for a server at its max (a mask per server). */
#define PX_WORKERS_MAX 1024
#define PX_WORKER_WORDS (PX_WORKERS_MAX / 64)
/* The read buffer of a request's upstream connection (also its spill). */
#define PX_RBUF 32768
/* The request body's window. */
#define PX_WINDOW 65536

/* An upstream address as configured. */
struct px_addr {
    struct sockaddr_storage sa;
    socklen_t len;
    char text[112]; /* as written: "127.0.0.1:3000", "unix:/run/app.sock", "[::1]:3001" */
    bool tls;       /* tls://: the name below is verified, and sent as SNI when a DNS name */
    char name[128]; /* the server's name= or the address's host */
};

enum px_balance {
    PX_BAL_WRR,       /* weighted round robin */
    PX_BAL_LEASTCONN, /* the fewest requests in flight for the weight */
    PX_BAL_HASH,      /* a consistent hash of a key */
};

enum px_hash_key {
    PX_KEY_CLIENT, /* the client's address */
    PX_KEY_HEADER, /* a request header's value */
    PX_KEY_COOKIE, /* a cookie's value */
};

/* A group's Health line: an active check of each of its servers. */
struct px_health {
    char *path;           /* NULL: no active check */
    char *host;           /* the check's Host; NULL: the server's address */
    uint64_t interval_ms; /* between two checks of a server */
    uint64_t timeout_ms;  /* a check not answered within it failed */
    int rise, fall;       /* checks in a row that bring a server back, take it out */
};

struct px_member {
    struct px_addr a;
    unsigned weight;
    unsigned max; /* requests on it at most, all workers together; 0: no limit */
    bool backup;
};

/* An [UPSTREAM]-like group of proxy.conf: "Upstream NAME", then its Server lines. */
struct px_group {
    char *name;
    struct px_member *m;
    size_t n;
    enum px_balance balance;
    enum px_hash_key key;
    char *key_name; /* PX_KEY_HEADER, PX_KEY_COOKIE */
    struct px_health health;
    char where[160]; /* "file:line" of its Upstream line */
};

/* proxy.conf: plugin-wide. */
struct px_conf {
    uint64_t connect_ms;      /* a connection not made within it: 504 */
    uint64_t timeout_ms;      /* upstream silence: 504 before the head, cut after */
    int max_fails;            /* failures within fail_ms that take a server out */
    uint64_t fail_ms;         /* the window of those failures, and the time out */
    int idle_max;             /* idle connections kept per server and worker */
    uint64_t idle_ms;         /* an idle connection unused this long is closed */
    int tls_verify;           /* TLSVerify: 1 on (default), 0 off */
    char *tls_ca;             /* TLSCAFile; NULL: the system's store */
    char *tls_cert, *tls_key; /* TLSCertificate, TLSKey: a client certificate */
    void *tls_ctx;            /* SSL_CTX, made for the first tls:// route (px_tls.c) */
    int tries;                /* attempts per request, the first included (Tries) */
    uint64_t try_ms;          /* no new attempt this long after the first; 0: no bound */
    int queue;                /* requests a worker keeps waiting for a server at its max */
    uint64_t queue_ms;        /* the longest wait: 503 past it */
    int buffering;            /* Buffering: 1 on, 0 off (default): px_buf.c */
    uint64_t buf_size;        /* BufferSize: the response buffer's memory per request */
    uint64_t buf_max_temp;    /* BufferMaxTemp: its temporary file's bound (0: none) */
    char *buf_dir;            /* BufferDir; NULL: $TMPDIR, else /tmp */
    struct px_group *groups;
    size_t n_groups;
};

/* A route of a site's [PROXY] section: a prefix or a pattern, and its target. */
struct px_route {
    char *prefix; /* Pass: a path prefix of whole segments; NULL for Match */
    size_t prefix_len;
    regex_t re;   /* Match */
    char *target; /* a group's name, or an address */
    char where[160];
};

/* A RequestHeader or ResponseHeader line. */
enum px_hdr_verb {
    PX_HDR_SET,    /* the field's value is VALUE, whatever came */
    PX_HDR_ADD,    /* one more field (ResponseHeader) */
    PX_HDR_REMOVE, /* none of that name */
};

struct px_hdr_op {
    enum px_hdr_verb verb;
    char *name, *value; /* one allocation: free(name) */
    size_t name_len, value_len;
};

enum px_xff { PX_XFF_APPEND, PX_XFF_REPLACE, PX_XFF_OFF };

/*
 * The field settings of a site's [PROXY] section (px_fconf.c). Maps own
 * their text: from and to are one allocation, free(from). A Redirect map
 * whose from is NULL is `Redirect default`, built per request.
 */
struct px_fields_conf {
    char *host; /* Host NAME; NULL: KEEP (the client's) */
    int xff;    /* enum px_xff */
    bool xfproto, xfhost, forwarded;
    struct px_hdr_op *req, *resp;
    size_t n_req, n_resp;
    struct px_map *redirect, *cpath, *cdomain;
    size_t n_redirect, n_cpath, n_cdomain;
};

/* Redirect, CookiePath and CookieDomain lines one site may have, each. */
#define PX_MAPS_MAX 16

/* A site's [PROXY] section. */
struct px_site_conf {
    struct px_route *routes;
    size_t n_routes;
    struct px_fields_conf fields;
    int buffering;          /* the site's Buffering: 0 proxy.conf's, 1 off, 2 on */
    char buffering_at[160]; /* "file:line" of that line */
};

/* A server's state in one server process, shared by the workers (atomics). */
struct px_server {
    struct px_addr a;
    atomic_uint active; /* requests on it now */
    atomic_uint fails;
    atomic_uint_fast64_t fail_start, down_until;
    atomic_uint_fast64_t requests, failures, connects, reuses;
    atomic_uint_fast64_t tls_handshakes, tls_resumed;
    atomic_bool hc_down; /* out after failed active checks (px_health.c) */
    atomic_uint_fast64_t checks, check_failures;
    atomic_uint_fast64_t retries; /* failed attempts on it after which the request went on */
    /* the times from a request's first byte sent to its answer's first byte (ms), summed,
       and the answers they count */
    atomic_uint_fast64_t ttfb_ms, ttfb_count;
    /* workers with requests waiting for room on it (max=), and how many bits of them are
       set (0: a place let go wakes nobody, no word is read) */
    atomic_uint_fast64_t waiting[PX_WORKER_WORDS];
    atomic_uint waiting_n;
};

/* The active check of one server (px_health.c), under px_self.hc_lock. */
struct px_hc {
    unsigned holds; /* groups of live configurations that ask for it */
    struct px_health set;
    char path[512], host[128]; /* copies: the thread never reads a configuration */
    uint64_t next;             /* when the next check starts (monotonic ms) */
    int ok_run, fail_run;
    bool busy;     /* a check is in flight */
    void *tls_ctx; /* a tls:// server's: the context of the last hold (a reference) */
};

/* The plugin's state in one server (api->self). */
struct px_self {
    struct px_server servers[PX_SERVERS_MAX];
    atomic_uint n_servers;
    atomic_uint_fast64_t requests, retries;
    atomic_uint_fast64_t queue_full;   /* 503: every server at its max, the worker's Queue full */
    atomic_uint_fast64_t tunnels;      /* tunnels opened (an upstream's 101 taken over) */
    atomic_uint_fast64_t tunnels_open; /* tunnels now */
    atomic_uint_fast64_t early_hints;  /* 103s passed on to clients */
    struct mk_gw_stats gw;
    /* active health checks: one thread per server process */
    struct px_hc hc[PX_SERVERS_MAX];
    pthread_mutex_t hc_lock;
    pthread_cond_t hc_wake;
    int hc_pipe[2]; /* wakes the thread out of its poll() */
    pthread_t hc_thread;
    bool hc_running, hc_stop;
    unsigned refs; /* the plugin's, and one per group holding checks (under hc_lock) */
};

/* A point of a consistent hash's ring. */
struct px_point {
    uint32_t hash;
    unsigned member;
};

/* A group as a site uses it: its servers as slots of self->servers. */
struct px_rgroup {
    const struct px_group *g; /* NULL: a single address */
    unsigned slot[PX_MEMBERS_MAX];
    unsigned weight[PX_MEMBERS_MAX];
    unsigned max[PX_MEMBERS_MAX];
    bool backup[PX_MEMBERS_MAX];
    unsigned n;
    unsigned total; /* the primary members' weights */
    enum px_balance balance;
    atomic_uint rr;
    struct px_point *ring;
    size_t n_ring;
    bool checked; /* its servers' active checks are held (px_health_holds) */
    /* the state whose servers[] the slots name (api->self of the server that made the
       group, looked up once); with `checked`, it outlives px_exit */
    struct px_self *self;
};

/* What site_init() stores. */
struct px_site {
    const struct px_site_conf *sc;
    const struct px_conf *conf;
    struct px_rgroup **groups; /* one per route */
    bool buffering;            /* the site's Buffering, else proxy.conf's */
};

extern const struct mk_api *px_api;
extern const struct mk_conf_schema px_schema;

struct px_self *px_self(void);

/* ---- px_conf.c ---- */

/* "unix:/path", "HOST:PORT", "[IPV6]:PORT" into *a: NULL, or why not. */
const char *px_parse_addr(const char *v, struct px_addr *a);
/*
 * The decimal number v (digits only: no sign, no space) into *out when it is
 * min..max: true, or false (and *out untouched) for anything else.
 */
bool px_number(const char *v, uint64_t min, uint64_t max, uint64_t *out);
/* A set or check callback's failure for want of memory: the reason, and MK_ERR. */
int px_oom(char *reason, size_t len);

/* ---- px_fconf.c: the set callbacks of the field keys, and their release ---- */

int px_set_host(void *obj, const struct mk_conf_key *k, const char *value,
                const struct mk_conf_origin *origin, char *reason, size_t len);
int px_set_header_op(void *obj, const struct mk_conf_key *k, const char *value,
                     const struct mk_conf_origin *origin, char *reason, size_t len);
int px_set_map(void *obj, const struct mk_conf_key *k, const char *value,
               const struct mk_conf_origin *origin, char *reason, size_t len);
void px_fields_conf_free(struct px_fields_conf *f);
extern const char *const px_xff_words[];

/* ---- px_pick.c ---- */

/* Build g's ring (PX_BAL_HASH): MK_OK or MK_ERR (memory). */
int px_ring_build(struct px_rgroup *g);
/*
 * The member of g for request r: up (not out after failures), not in
 * `tried` (bit i: member i), below its max=, a backup only when no
 * primary is up and untried; -1 when none is, with *full set when there
 * were such members but every one was at its max (the request waits).
 * The max is read, not taken: px_req.c takes the place.
 */
int px_pick(struct px_rgroup *g, struct mk_request *r, uint64_t tried, bool *full);
/* A failure of server s (refused, broken, timed out): out for fail_ms past max_fails. */
void px_server_failed(struct px_server *s, const struct px_conf *conf);
void px_server_ok(struct px_server *s);

/* ---- px_health.c ---- */

/* Set up self's checks (init): MK_OK or MK_ERR. */
int px_health_init(struct px_self *self);
/* Start the thread (once the server runs: a worker's start). */
void px_health_start(struct px_self *self);
/* Stop and join the thread, and drop the plugin's reference to self: the
 * configuration is freed after the plugins' exit, and its groups that hold
 * checks keep self until they are released. */
void px_health_exit(struct px_self *self);
/* A group of a configuration checks its n servers (slots) with h, and
 * holds a reference to self / no longer does. */
void px_health_holds(struct px_self *self, const unsigned *slot, unsigned n,
                     const struct px_health *h, void *tls_ctx);
void px_health_release(struct px_self *self, const unsigned *slot, unsigned n);

/* ---- px_tls.c (PX_TLS: built with OpenSSL) ---- */

#ifdef PX_TLS
/* Whether path is a readable CA file ("ca"), certificate chain ("cert") or key ("key"). */
int px_tls_check(const char *kind, const char *path, char *reason, size_t len);
/* c's client context, made once (controlling thread): MK_OK, or MK_ERR with err. */
int px_tls_ctx(struct px_conf *c, char *err, size_t errlen);
void px_tls_ctx_free(struct px_conf *c);
/* A reference more to a context / one less (NULL: nothing). */
void px_tls_ctx_ref(void *ctx);
void px_tls_ctx_unref(void *ctx);
/* A connection's TLS on fd to the server a of slot (an SSL *), or NULL; a
 * slot of PX_SERVERS_MAX or more: no session kept or offered (a check). */
void *px_tls_new(void *ctx, int fd, const struct px_addr *a, unsigned slot);
/* One step: MK_OK done, MK_AGAIN (*want: MK_LOOP_READ or _WRITE), MK_ERR with why. */
int px_tls_handshake(void *t, uint32_t *want, char *why, size_t len);
bool px_tls_resumed(void *t);
/* As send() and recv(): bytes, 0 at the end, -1 with errno (EAGAIN: wait). */
ssize_t px_tls_send(void *t, const void *p, size_t n);
ssize_t px_tls_recv(void *t, void *p, size_t n);
/* Decrypted bytes wait inside (no event will say so). */
bool px_tls_pending(void *t);
/* Free; clean: a close_notify first. */
void px_tls_free(void *t, bool clean);
void px_tls_worker_exit(void);

/* The Sec-WebSocket-Key of an RFC 8441 tunnel's upstream request (base64 of 16 bytes). */
#define PX_WS_KEY_LEN 24
/* A fresh key: 16 random bytes in base64, NUL terminated. MK_OK, or MK_ERR (no randomness). */
int px_ws_key(char key[PX_WS_KEY_LEN + 1]);
/* Whether accept[0..len) is key's Sec-WebSocket-Accept (RFC 6455 4.2.2: base64 of the SHA-1 of
 * key and the protocol's GUID). */
bool px_ws_accept_ok(const char *key, const char *accept, size_t len);
#endif

/* ---- px_buf.c: the response buffer (Buffering on) ---- */

/*
 * A request's response buffer: the body bytes read from the upstream while
 * the client's queue is at its mark, in memory (a ring of cap bytes, made
 * when first needed), then in a temporary file of at most file_max bytes.
 * px_rbuf_init sets it up; zeroed but for fd (-1).
 */
struct px_rbuf {
    bool on;           /* Buffering on */
    char *mem;         /* the ring; NULL until needed */
    size_t cap;        /* BufferSize */
    size_t head, len;  /* the ring's first byte and its bytes */
    int fd;            /* the temporary file; -1: none yet */
    uint64_t wr, rd;   /* the file's bytes written (its size), and read */
    uint64_t file_max; /* BufferMaxTemp (0: no file) */
    const char *dir;   /* BufferDir (the configuration's; NULL: the system's) */
    bool mem_bad;      /* the ring could not be had: nothing is buffered */
    bool file_bad;     /* the file could not be made or written: no more goes there */
    int read_err;      /* px_rbuf_drain's MK_ERR: the file's read failed (errno), else 0 */
};

/* Set up with c's bounds; `on`: Buffering on (the site's setting, else c's). */
void px_rbuf_init(struct px_rbuf *b, const struct px_conf *c, bool on);
/* Bytes px_rbuf_put would take now (0: Buffering off, or both bounds reached). */
size_t px_rbuf_room(const struct px_rbuf *b);
bool px_rbuf_empty(const struct px_rbuf *b);
/*
 * Keep up to n bytes, after those kept before: how many were taken (the
 * rest is the caller's). *err: an errno when the ring or the file failed
 * at this call (given up from here; to be logged), else 0.
 */
size_t px_rbuf_put(struct px_rbuf *b, const char *p, size_t n, int *err);
/*
 * What is kept to the client while its queue takes it (j->paused clear):
 * MK_OK (all out), MK_AGAIN (the queue is at its mark again), MK_ERR (the
 * file could not be read: b->read_err; or the queue took nothing), or
 * MK_GW_GONE (the client went away).
 */
int px_rbuf_drain(struct px_rbuf *b, struct mk_gw_job *j);
/* Free the ring and close the file (the request ends, or is released). */
void px_rbuf_free(struct px_rbuf *b);
/* Whether a temporary file can be made in dir (NULL: the system's): MK_OK, or MK_ERR with why. */
int px_rbuf_dir_check(const char *dir, char *reason, size_t len);

/* ---- px_req.c ---- */

/* The content stage of r for route i of site: as a content hook returns. */
int px_req_start(struct mk_request *r, const struct px_site *site, size_t i);
/* Close this worker's idle connections and release its requests (worker_exit). */
void px_req_worker_exit(void);

#endif
