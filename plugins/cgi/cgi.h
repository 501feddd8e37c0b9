/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * cgi.h: the CGI plugin's parts (RFC 3875).
 *   cgi.c       the plugin: hooks, the content handler, counters
 *   cgi_conf.c  the declared keys (cgi.conf and the [CGI] site section)
 *   cgi_map.c   which script a request runs (ScriptAlias, Match, index files)
 *   cgi_job.c   one running script, the cgi backend of the gateway job:
 *               MaxScripts, spawn, pipes, kill, reap
 * The request's side (the body and its window, the header block and the
 * wait for it, the response stream, Timeout), the header block's parser
 * and the meta-variables come from the gateway core, plugins/gateway.
 */
#ifndef MK_CGI_H
#define MK_CGI_H

#include <regex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <monkey/mk_plugin.h>

#include "gw.h"
#include "gw_job.h"

/* The pipes' high-water mark, both ways: request body and response. */
#define CGI_WINDOW 65536

/* cgi.conf: plugin-wide. */
struct cgi_conf {
    int max_scripts;        /* scripts running at once, in the whole server */
    uint64_t timeout_ms;    /* for the header block: 504 past it */
    uint64_t kill_grace_ms; /* SIGTERM, then SIGKILL after this long */
};

struct cgi_alias {
    char *prefix; /* URL path prefix, ending with '/' */
    char *dir;    /* absolute directory, without a trailing '/' */
};

struct cgi_interp {
    char *ext;     /* ".py" */
    char *program; /* "/usr/bin/python3" */
};

/* A site's [CGI] section. */
struct cgi_site_conf {
    struct cgi_alias *aliases;
    size_t n_aliases;
    regex_t *matches;
    size_t n_matches;
    struct cgi_interp *interps;
    size_t n_interps;
    bool pass_authorization; /* PassAuthorization: HTTP_AUTHORIZATION for scripts */
};

/* The plugin's state in one server (api->self). */
/* Backends of the metrics one server may know: the interpreters, and scripts run themselves. */
#define CGI_MBACKENDS_MAX 64
#define CGI_MBACKEND_EXEC "(exec)" /* the label of scripts run without an interpreter */

/* The metrics of one backend (gw_job.h): an interpreter's program, or CGI_MBACKEND_EXEC. */
struct cgi_mbackend {
    char *program;
    struct mk_gw_metrics m;
};

struct cgi_self {
    struct mk_gw_mfamilies mf;
    struct cgi_mbackend be[CGI_MBACKENDS_MAX]; /* appended by site_init (controlling thread) */
    atomic_uint n_be;
    atomic_int running;           /* scripts running now */
    atomic_uint_fast64_t spawned; /* scripts started */
    atomic_uint_fast64_t refused; /* 503: MaxScripts reached */
    atomic_uint_fast64_t killed;  /* killed: the client went away or timeout */
    /* the job's: timeouts (504), bad_gateway (502: a bad header block,
       shown as bad_heads) */
    struct mk_gw_stats gw;
};

/* A request's script, as cgi_map_request() resolved it. */
struct cgi_target {
    struct mk_gw_script gw;
    const char *interpreter; /* NULL: run the script itself */
    bool nph;                /* "nph-" script: its answer is not parsed for CGI fields */
};

extern const struct mk_api *cgi_api;
extern const struct mk_conf_schema cgi_schema;

/*
 * Resolve the script of `path` (decoded, normalised; a local redirect's
 * path included) for r's site into *t (strings in r's memory): MK_OK,
 * MK_DECLINED (not a CGI path), or a status (403 a script that may not
 * run, 404 no such script under a ScriptAlias, 500 memory).
 */
int cgi_map_request(struct mk_request *r, const struct cgi_site_conf *sc, const char *path,
                    size_t path_len, struct cgi_target *t);

/*
 * Run the script of t for r (the content hook's or a continuation's
 * result follows): MK_AGAIN (the request body streams to it),
 * MK_SUSPENDED (waiting for its header block), or a status (503 at
 * MaxScripts, 500 when it cannot be started).
 */
/* The metrics of the backend running `interpreter` (NULL: the script itself), or NULL. */
const struct mk_gw_metrics *cgi_metrics_of(struct cgi_self *self, const char *interpreter);

int cgi_job_start(struct mk_request *r, const struct cgi_target *t, const struct cgi_conf *conf,
                  struct cgi_self *self);

/*
 * Answer r with the local redirect `location` of a script (a path and an
 * optional query, RFC 3875 6.2.2): the server's internal redirect, a new
 * GET of it through every check (access, authentication, hidden names),
 * the routes and the handlers. The content stage's result: MK_OK, 502 for
 * a malformed path, 500 past the server's bound on redirects (a loop).
 */
int cgi_local_redirect(struct mk_request *r, const char *location);

/* Kill and release every job of this worker (worker_exit). */
void cgi_job_worker_exit(void);

#endif
