/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * conf.h: the server configuration in force.
 *
 * A `struct mk_config` is built from a configuration directory (monkey.conf,
 * monkey.mime, sites/ and plugins.load), from one directory to serve (-o), or
 * from the built-in defaults plus overrides (the library API). It is
 * validated completely before it is used: every unknown key or bad value is
 * an error naming the file and the line. Once built it is immutable and
 * shared by all workers; a reload builds a new one and workers switch to it
 * between requests. References are counted (mk_config_ref/unref).
 */
#ifndef MK_SERVER_CONF_H
#define MK_SERVER_CONF_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "../../core/config.h"
#include "../../core/schema.h"
#include "../http/http.h"
#include "../http/realip.h"
#include "mime.h"
#include "../static/static_cache.h"
#include "../static/static_compress.h"

enum mk_balancing {
    MK_BALANCE_REUSEPORT = 0, /* one listening socket per worker, the kernel spreads */
    MK_BALANCE_FAIR,          /* one acceptor hands each connection to the least loaded worker */
};

/* Whether `cfg` balances with the acceptor thread (never when MK_HAVE_FAIR is not defined). */
#ifdef MK_HAVE_FAIR
#define MK_FAIR(cfg) ((cfg)->balancing == MK_BALANCE_FAIR)
#else
#define MK_FAIR(cfg) ((void) (cfg), false)
#endif

struct mk_listen_addr {
    char *spec;      /* the address as written: "2001", "127.0.0.1:2001", "[::1]:8080" */
    char *transport; /* "plain" unless a second word names a plugin's transport */
    char *options;   /* the words after the transport, one space apart; NULL: none */
    char *where;     /* "file:line" for messages */
    char *text;      /* "spec", "spec transport" or "spec transport options", as in force */
    struct sockaddr_storage addr;
    socklen_t addrlen;
    bool any; /* port only: every address, IPv6 and IPv4 */
    /* proxy_protocol: each connection starts with a PROXY header (v1 or v2),
       read before anything else, the transport's handshake included */
    bool proxy_protocol;
};

/* One Load line of plugins.load. */
struct mk_plugin_spec {
    char *spec;  /* a built-in plugin's name, or the absolute path of a .so */
    char *where; /* "file:line" */
};

struct mk_error_page {
    int status;
    char *path; /* normalised, relative to the document root, leading '/' */
};

/* The longest [HOST] Fallback path. */
#define MK_FALLBACK_MAX 1024
/* MetricsBuckets: the most bounds (MK_METRICS_BUCKETS - 1 of the plugin ABI) */
#define MK_CONF_METRICS_BOUNDS 11

/* The sections of a site file filled from one of a plugin's section_schemas. */
struct mk_section_instances {
    const struct mk_conf_schema *schema; /* NULL ends a plugin's array */
    struct mk_conf_instance *v;
    size_t n;
};

struct mk_site {
    char **names; /* lower case; a leading "*." is a wildcard */
    size_t n_names;
    char *docroot;  /* absolute */
    int docroot_fd; /* O_PATH directory descriptor; files are opened beneath it */
    dev_t root_dev; /* identity of the document root, for the file cache */
    ino_t root_ino;
    bool symlinks;      /* follow symbolic links (they may then lead anywhere) */
    bool hide_dotfiles; /* 404 for a path with a segment starting with '.' */
    struct mk_error_page *error_pages;
    size_t n_error_pages;
    char *file;           /* the site file, for messages; "built-in" for -o */
    struct mk_conf *conf; /* the parsed site file: plugins read their sections */
    /* What each plugin's site_init() stored, by plugin index, with its destructor. */
    void **plugin_data;
    void (**plugin_free)(void *data);
    size_t n_plugin_data;
    /* Each plugin's site keys (its schema's MK_CONF_SITE keys), by plugin index. */
    void **plugin_conf;
    /* Each plugin's repeated sections (its section_schemas), by plugin index. */
    struct mk_section_instances **plugin_sections;
    struct mk_config *cfg; /* the configuration the site belongs to (not a reference) */
#ifdef MK_HAVE_METRICS
    unsigned metrics_slot; /* its counters' slot (runtime/metrics.h), by its label */
#endif
    struct mk_routes *routes; /* the route table (route.h), built with the plugins' site data */
    /* Fallback: the path a request continues with when its own path names
       nothing under the document root (nginx's try_files $uri $uri/ PATH);
       normalised, NULL when not set. */
    char *fallback;
    size_t fallback_len;
    /* Precompressed: the codings whose variants may be sent (MK_CODING_BIT
       of accept_encoding.h), 0: off */
    unsigned precompressed;
    /* CacheControl rules (static_cache.h); none by default */
    struct mk_cache_rules cache_rules;
    /* Compress and its companions (static_compress.h); codings 0: off */
    struct mk_compress_site compress;
#ifdef MK_HAVE_RULES
    /* The [RULE] sections in file order (http/rules.h); NULL: none, and a
       request pays one comparison for them */
    struct mk_rules *rules;
#endif
    /* IndexFiles of the site's [HOST]; NULL: the server's (mk_conf_site_index_files) */
    union {
        struct mk_conf_words index_list; /* what the schema fills */
        struct {
            char **index_files;
            size_t n_index_files;
        };
    };
};

/*
 * The [HOST] keys of a part above the configuration (the static handler),
 * given to it at start (mk_conf_site_keys) so that the configuration
 * never calls that part by name. The keys follow the configuration's own
 * (ServerName, DocumentRoot, Symlinks, HideDotFiles, Fallback) in one
 * table, read by the schema engine (core/schema.h) into struct mk_site.
 */
struct mk_site_keys {
    /* MK_CONF_SITE keys whose fields are members of struct mk_site; NULL ends */
    const struct mk_conf_key *keys;
    /* The keys of the parts this build left out (core/schema.h), or NULL. */
    const struct mk_schema_absent *absent;
    /*
     * After a site's lines and the defaults of the keys it did not give:
     * the checks across keys. `lines` holds the line each of `keys` was
     * first given on (0: not given). False with "file:line: reason" in err.
     */
    bool (*finish)(struct mk_site *vh, const struct mk_conf *conf, const int *lines, char *err,
                   size_t errlen);
    /* Release what the keys' set() stored in vh (strings and word lists go with the site). */
    void (*free)(struct mk_site *vh);
};

/*
 * Take `keys` as the [HOST] keys that follow the configuration's own, for
 * every configuration loaded from now on. At start (server.c), before any
 * configuration is loaded; giving the same table again changes nothing.
 */
void mk_conf_site_keys(const struct mk_site_keys *keys);

/*
 * A .check for an index file name (IndexFiles of [SERVER] and of a site):
 * a plain file name, no '/', not "." or "..".
 */
int mk_config_check_index_file(const char *value, char *reason, size_t len);

#ifdef MK_HAVE_RULES
struct mk_rules;
/*
 * Read the [RULE] sections of site file `conf` into vh->rules (conf_rules.c).
 * False with "file:line: reason" in err; what was read goes with the site.
 */
bool mk_conf_rules_load(struct mk_site *vh, const struct mk_conf *conf, char *err, size_t errlen);
void mk_conf_rules_free(struct mk_rules *t);
/* The i-th key of [RULE], NULL past the last (mk_config_key). */
const char *mk_conf_rule_key(size_t i);
#endif

struct mk_plugin;
struct mk_routes;

struct mk_config {
    atomic_int refs;
    char *confdir; /* absolute; NULL for -o and built-in configurations */
    /* The files read for it, in reading order, without the ones they include
       (mk_config_file_read): what `monkey -T` writes out. */
    char **files;
    size_t n_files;

    /* [SERVER] */
    struct mk_listen_addr *listen;
    size_t n_listen;
    int workers; /* resolved: 0 in the file means one per CPU */
    enum mk_balancing balancing;
    /* durations in milliseconds (the keys take "500ms", "2s", "1m") */
    uint32_t timeout_ms;           /* to receive a request head (and body) */
    uint32_t send_timeout_ms;      /* without write progress */
    uint32_t keepalive_timeout_ms; /* idle between requests */
    uint32_t graceful_timeout_ms;  /* to finish in-flight responses on stop */
    /* bytes a second a body must average once Timeout has passed; 0: off */
    uint64_t body_min_rate;
    /* bytes a second a client must take a response at, over SendTimeout windows; 0: off */
    uint64_t send_min_rate;
    bool keepalive;
    unsigned max_keepalive_requests; /* 0: unlimited */
    struct mk_http_limits limits;
    uint64_t max_body;
    unsigned max_connections;      /* 0: as many as descriptors allow */
    unsigned max_conns_per_client; /* 0: no bound */
    int backlog;
    int tcp_fastopen; /* queue length; 0: off */
    bool defer_accept;
    bool hide_version;
    unsigned file_cache;      /* open files kept per worker; 0: off */
    uint64_t file_cache_body; /* bodies up to this size kept in the file cache; 0: none */
#ifdef MK_HAVE_COMPRESS
    uint64_t compress_cache; /* bytes of files compressed on the fly kept per worker */
#endif
#ifdef MK_HAVE_REALIP
    /* RealIPFrom: the proxies trusted to name the client in RealIPHeader
       (the words as written, then the blocks they parse to); none: off */
    struct mk_conf_words realip_words;
    struct mk_cidr *realip_from;
    size_t n_realip_from;
    int realip_header; /* enum mk_realip_field */
#endif
#ifdef MK_HAVE_METRICS
    /* MetricsBuckets: the histograms' upper bounds, microseconds, ascending
       (request/metrics.h; in force from the start, a reload keeps them) */
    uint64_t metrics_bounds[MK_CONF_METRICS_BOUNDS];
    unsigned n_metrics_bounds;
#endif
#ifdef MK_HAVE_REQID
    /* RequestId (request_trace.c): the field, the clients trusted to name
       the ID (the words, then their blocks), whether responses echo it */
    bool reqid;
    char *reqid_header;
    size_t reqid_header_len;
    struct mk_conf_words reqid_words;
    struct mk_cidr *reqid_from;
    size_t n_reqid_from;
    bool reqid_echo;
    int trace_context; /* TraceContext: 0 Off, 1 On, 2 Start */
    bool trace_any;    /* reqid or trace_context: the one check a request makes */
#endif
    unsigned task_queue_per_plugin; /* tasks one plugin may have waiting or running */
    unsigned task_queue_per_client; /* tasks one client address may have waiting or running */
#ifdef MK_HAVE_H2
    unsigned h2_max_streams;      /* HTTP/2: concurrent streams a client may open */
    unsigned h2_reset_burst;      /* HTTP/2: RST_STREAM frames allowed at once */
    unsigned h2_reset_rate;       /* HTTP/2: ... and added back each second */
    unsigned h2_unanswered_burst; /* HTTP/2: streams ending unanswered allowed at once */
    unsigned h2_unanswered_rate;  /* HTTP/2: ... and added back each second */
    uint32_t h2_idle_timeout_ms;  /* HTTP/2: a connection without streams */
#endif
#ifdef MK_HAVE_SUPERVISOR
    /* Supervisor: the server runs as the child of a process that restarts it
       after a crash, and gives up after crash_limit crashes in crash_window. */
    bool supervisor;
    unsigned supervisor_crash_limit;
    uint32_t supervisor_crash_window_ms;
#endif
    char *user;
    char *pidfile;
    char *log_path; /* NULL: standard error */
    int log_level;  /* enum mk_log_level */
    char *default_mime;
    union {
        struct mk_conf_words index_list; /* what the schema fills */
        struct {
            char **index_files;
            size_t n_index_files;
        };
    };

    /* derived */
    struct mk_mime_table *mime;
    struct mk_site **sites;
    size_t n_sites;
    struct mk_site *default_site;
    struct mk_plugin_spec *plugins;
    size_t n_plugins;
    /* The value in force of each [SERVER] key as text, and where it was set. */
    struct mk_schema_record key_rec[52];
    char server_header[64]; /* "Server: Monkey/x.y.z\r\n" */
    size_t server_header_len;

    /*
     * Each loaded plugin's plugin-wide keys, filled from its file by its
     * schema (NULL for a plugin without one), by plugin index; built once
     * per configuration (mk_plugins_configure) and freed with it.
     */
    const struct mk_plugin **conf_plugins;
    void **plugin_conf;
    size_t n_plugin_conf;
};

/*
 * The index file names of site vh of cfg: the site's IndexFiles, else the
 * server's. They live as long as the configuration.
 */
static inline char *const *mk_conf_site_index_files(const struct mk_site *vh,
                                                    const struct mk_config *cfg, size_t *n)
{
    if (vh && vh->index_files) {
        *n = vh->n_index_files;
        return vh->index_files;
    }
    *n = cfg->n_index_files;
    return cfg->index_files;
}

/* A key/value given outside the files (command line, library API). */
struct mk_config_override {
    const char *key;
    const char *value;
};

/*
 * Load a configuration directory. `overrides` are applied to [SERVER] as if
 * they were the last lines of monkey.conf. NULL with a message naming the
 * file and line in err.
 */
struct mk_config *mk_config_load(const char *confdir, const struct mk_config_override *overrides,
                                 size_t n_overrides, char *err, size_t errlen);

/* Serve one directory with built-in defaults (-o). */
struct mk_config *mk_config_for_dir(const char *dir, const struct mk_config_override *overrides,
                                    size_t n_overrides, char *err, size_t errlen);

struct mk_config *mk_config_ref(struct mk_config *cfg);
void mk_config_unref(struct mk_config *cfg);

/* The virtual host for a Host value (port already removed); never NULL. */
struct mk_site *mk_conf_site_lookup(const struct mk_config *cfg, const char *host, size_t len);

/* The schema of [SERVER]: every key, its type, range and default. */
const struct mk_conf_schema *mk_config_schema(void);
/* Name of the i-th key `section` accepts, NULL past the last (for the docs test). */
const char *mk_config_key(const char *section, size_t i);
/* Keep the running worker count (a reload cannot change it). */
void mk_config_force_workers(struct mk_config *cfg, int workers);
/* The i-th value in force of [SERVER] key `key`, as text; NULL past the last. */
const char *mk_config_value(const struct mk_config *cfg, const char *key, unsigned i);

/*
 * Whether this process is the child of a supervisor, which writes the
 * PidFile as the identity it was started with (the checks of
 * mk_config_check_files follow it). Set once at start (supervisor.c).
 */
void mk_config_supervised_set(bool supervised);

/*
 * Check the files a start of `cfg` writes, which loading leaves alone since
 * the answer depends on who runs the server and on what already runs: the
 * Log file can be created or appended to by this process, unless `running`
 * (the configuration in force, NULL at start and for monkey -t) already
 * writes it; and, at start only, the PidFile can be created by the identity
 * that writes it (the User when started as root). MK_OK, or MK_ERR with
 * "file:line: reason" in err (the line of the key).
 */
int mk_config_check_files(const struct mk_config *cfg, const struct mk_config *running, char *err,
                          size_t errlen);

/* ---- between conf.c and conf_site.c (not for other files) ------------------ */

/*
 * The schema of [HOST]: the configuration's own keys, then those given
 * with mk_conf_site_keys. Its `free` releases what the keys stored.
 */
const struct mk_conf_schema *mk_conf_site_schema(void);

/*
 * Open `rel` (relative to the site's document root, normalised) beneath the
 * document root, by the site's rules for symbolic links (core/fs.h).
 */
int mk_conf_site_open(const struct mk_site *vh, const char *rel, int flags);
/*
 * A site for site file `file` (copied) whose keys hold their defaults, no
 * document root yet. NULL with the reason in err when a default is refused.
 */
struct mk_site *mk_conf_site_new(const char *file, char *err, size_t errlen);
/*
 * Set the document root of vh to `path` (line `line` of conf, for the
 * error) and open it. False with "file:line: reason" in err.
 */
bool mk_conf_site_set_docroot(struct mk_site *vh, const struct mk_conf *conf, int line,
                              const char *path, char *err, size_t errlen);
/* Free a site (NULL is allowed); what plugins keep for it must be released first. */
void mk_conf_site_free(struct mk_site *vh);
/*
 * Release what plugins keep for a site: their site_init() data first (its
 * destructor may still read the site's keys), then the site keys.
 */
void mk_conf_site_release_plugins(const struct mk_config *cfg, struct mk_site *vh);
/*
 * Load every site file of confdir/sites/ into cfg, in name order ("default"
 * is the default site, else the first). False with the reason in err.
 */
bool mk_conf_site_load(struct mk_config *cfg, char *err, size_t errlen);
/* Note that `path` was read for `cfg` (cfg->files). */
void mk_config_file_read(struct mk_config *cfg, const char *path);
/*
 * Write every file of cfg->files, read again with Include and variables
 * (mk_conf_dump), to `out`: MK_OK, or MK_ERR with the reason in err.
 */
int mk_config_dump(const struct mk_config *cfg, FILE *out, char *err, size_t errlen);

#endif
