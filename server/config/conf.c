/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * conf.c: the server part of the configuration (see conf.h): the [SERVER]
 * keys and listen addresses, plugins.load, loading a whole configuration,
 * its reference count, and the checks of the files a start writes. The
 * sites ([HOST] sections) are conf_site.c's.
 *
 * Every key a section accepts is listed in one table; defaults are written
 * as configuration text and go through the same readers as the files, so a
 * default can never be a value the file would reject.
 */
#include "conf.h"

#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <pwd.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sched.h>
#include <unistd.h>

#include <monkey/mk_common.h>
#include <monkey/mk_plugin.h>

#include "../../core/memory.h"
#include "../../core/fs.h"
#include "../../core/schema.h"
#include "../proto/h2.h"
#include "../http/http_chars.h"
#include "../http/path.h"
#include "../process/server.h"
#include "../process/supervisor.h"

/* ---- helpers ------------------------------------------------------------- */

#define ERR(conf, line, ...) mk_conf_error((conf), (line), err, errlen, __VA_ARGS__)

/* ---- keys ---------------------------------------------------------------- */

static int mk_check_user(const char *value, char *reason, size_t len)
{
    if (!getpwnam(value)) {
        snprintf(reason, len, "no such user '%s'", value);
        return MK_ERR;
    }
    return MK_OK;
}

int mk_config_check_index_file(const char *value, char *reason, size_t len)
{
    if (strchr(value, '/') || strcmp(value, ".") == 0 || strcmp(value, "..") == 0) {
        snprintf(reason, len, "'%s' is not a plain file name", value);
        return MK_ERR;
    }
    return MK_OK;
}

static int mk_check_media_type(const char *value, char *reason, size_t len)
{
    if (!strchr(value, '/')) {
        snprintf(reason, len, "'%s' is not a media type", value);
        return MK_ERR;
    }
    return MK_OK;
}

#if defined(MK_HAVE_REALIP) || defined(MK_HAVE_REQID)
/* RealIPFrom, RequestIdFrom: each word an address block, IPv4 or IPv6, without host bits. */
static int mk_check_realip_from(const char *value, char *reason, size_t len)
{
    struct mk_cidr c;

    switch (mk_cidr_parse(value, strlen(value), &c)) {
    case MK_CIDR_OK:
        break;
    case MK_CIDR_BAD_PREFIX:
        snprintf(reason, len, "'%s': the prefix length after '/' must be a number", value);
        return MK_ERR;
    case MK_CIDR_RANGE:
        snprintf(reason, len, "'%s': the prefix length is out of range for %s (0 to %u)", value,
                 strchr(value, ':') ? "IPv6" : "IPv4", strchr(value, ':') ? 128u : 32u);
        return MK_ERR;
    case MK_CIDR_MAPPED:
        snprintf(reason, len,
                 "'%s': an IPv4-mapped address needs a prefix of 96 or more (or write it as IPv4)",
                 value);
        return MK_ERR;
    default:
        snprintf(reason, len, "'%s' is not an IPv4 or IPv6 address block (ADDRESS[/LEN])", value);
        return MK_ERR;
    }
    if (c.host_bits) {
        snprintf(reason, len, "'%s' has bits set beyond its prefix length", value);
        return MK_ERR;
    }
    return MK_OK;
}
#endif

static void mk_listen_addr_free(struct mk_listen_addr *a)
{
    mk_free(a->text);
    mk_free(a->spec);
    mk_free(a->transport);
    mk_free(a->options);
    mk_free(a->where);
}

static bool mk_same_addr(const struct mk_listen_addr *a, const struct mk_listen_addr *b)
{
    return a->any == b->any && a->addrlen == b->addrlen &&
           memcmp(&a->addr, &b->addr, a->addrlen) == 0;
}

/* The words left at `cursor`, joined by one space; NULL when none. */
static char *mk_listen_options(const char *cursor)
{
    const char *w;
    size_t wlen, n = 0;
    char *out = NULL;

    while (mk_conf_word(&cursor, &w, &wlen)) {
        out = mk_realloc(out, n + wlen + 2);
        if (n) {
            out[n++] = ' ';
        }
        memcpy(out + n, w, wlen);
        n += wlen;
        out[n] = '\0';
    }
    return out;
}

/*
 * The words of `value` but the flag `proxy_protocol` (which may stand
 * anywhere after the address), one space apart, into a new string; *proxy
 * tells whether it was there. NULL with the reason when it is there twice.
 */
static char *mk_listen_strip_proxy(const char *value, bool *proxy, char *reason, size_t len)
{
    const char *cursor = value, *w;
    size_t wlen, n = 0;
    char *out = mk_alloc(strlen(value) + 1);

    *proxy = false;
    out[0] = '\0';
    while (mk_conf_word(&cursor, &w, &wlen)) {
        if (n > 0 && wlen == 14 && memcmp(w, "proxy_protocol", 14) == 0) {
            if (*proxy) {
                snprintf(reason, len, "proxy_protocol is given twice");
                mk_free(out);
                return NULL;
            }
            *proxy = true;
            continue;
        }
        if (n) {
            out[n++] = ' ';
        }
        memcpy(out + n, w, wlen);
        n += wlen;
        out[n] = '\0';
    }
    return out;
}

static int mk_set_listen_words(struct mk_config *cfg, const char *value, bool proxy,
                               const struct mk_conf_origin *origin, char *reason, size_t len);

/*
 * Listen ADDRESS [TRANSPORT [OPTIONS...]] [proxy_protocol]: one more
 * listening address. The transport checks its options when the plugins are
 * known (mk_transport_check_options); proxy_protocol is the server's, not
 * the transport's, and may stand anywhere after the address.
 */
static int mk_set_listen(void *obj, const struct mk_conf_key *k, const char *value,
                         const struct mk_conf_origin *origin, char *reason, size_t len)
{
    bool proxy;
    char *words = mk_listen_strip_proxy(value, &proxy, reason, len);

    (void) k;
    if (!words) {
        return MK_ERR;
    }
#ifndef MK_HAVE_REALIP
    if (proxy) {
        snprintf(reason, len,
                 "proxy_protocol: this server was built without the client's address behind a "
                 "balancer");
        mk_free(words);
        return MK_ERR;
    }
#endif
    int rc = mk_set_listen_words(obj, words, proxy, origin, reason, len);
    mk_free(words);
    return rc;
}

static int mk_set_listen_words(struct mk_config *cfg, const char *value, bool proxy,
                               const struct mk_conf_origin *origin, char *reason, size_t len)
{
    const char *cursor = value, *w, *tw;
    size_t wlen, twlen;
    struct mk_listen_addr a;
    struct mk_conf_address addr;
    char v[128];

    if (!mk_conf_word(&cursor, &w, &wlen) || wlen >= sizeof(v)) {
        snprintf(reason, len, "bad address '%s'", value);
        return MK_ERR;
    }
    memcpy(v, w, wlen);
    v[wlen] = '\0';
    if (!mk_conf_word(&cursor, &tw, &twlen)) {
        tw = "plain";
        twlen = 5;
    }
    else if (twlen == 3 && memcmp(tw, "h2c", 3) == 0) {
        /* "Listen 2001 h2c" says "Listen 2001 plain h2c" */
        tw = "plain";
        twlen = 5;
        cursor = "h2c";
    }
    if (twlen == 5 && memcmp(tw, "plain", 5) == 0) {
        const char *rest = cursor, *ow;
        size_t owlen;
        if (mk_conf_word(&rest, &ow, &owlen) &&
            !(owlen == 3 && memcmp(ow, "h2c", 3) == 0 && !mk_conf_word(&rest, &ow, &owlen))) {
            snprintf(reason, len, "the transport 'plain' takes no options (except h2c)");
            return MK_ERR;
        }
        rest = cursor;
        if (mk_conf_word(&rest, &ow, &owlen) && !mk_h2_available()) {
            snprintf(reason, len, "h2c: this server was built without HTTP/2");
            return MK_ERR;
        }
    }
    if (mk_schema_parse_address(v, &addr, reason, len) != MK_OK) {
        return MK_ERR;
    }
    memset(&a, 0, sizeof(a));
    a.addr = addr.addr;
    a.addrlen = addr.addrlen;
    a.any = addr.any;
    for (size_t i = 0; i < cfg->n_listen; i++) {
        if (mk_same_addr(&cfg->listen[i], &a)) {
            snprintf(reason, len, "'%s' is given twice", value);
            return MK_ERR;
        }
    }
    a.spec = mk_strdup(v);
    a.transport = mk_strndup(tw, twlen);
    a.options = mk_listen_options(cursor);
    a.proxy_protocol = proxy;
    const char *pp = proxy ? " proxy_protocol" : "";
    if (strcmp(a.transport, "plain") == 0 && !a.options) {
        size_t n = strlen(v) + strlen(pp) + 1;
        a.text = mk_alloc(n);
        snprintf(a.text, n, "%s%s", v, pp);
    }
    else {
        size_t n = strlen(v) + twlen + (a.options ? strlen(a.options) : 0) + strlen(pp) + 3;
        a.text = mk_alloc(n);
        snprintf(a.text, n, "%s %s%s%s%s", v, a.transport, a.options ? " " : "",
                 a.options ? a.options : "", pp);
    }
    a.where = mk_strdup(origin->where);
    cfg->listen = mk_realloc(cfg->listen, (cfg->n_listen + 1) * sizeof(*cfg->listen));
    cfg->listen[cfg->n_listen++] = a;
    return MK_OK;
}

/* TCPFastOpen On, Off or a queue length. */
static int mk_set_fastopen(void *obj, const struct mk_conf_key *k, const char *value,
                           const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct mk_config *cfg = obj;
    struct mk_conf_entry e = {.key = (char *) k->name, .value = (char *) value};
    bool b;
    long n;

    (void) origin;
    if (mk_conf_bool(NULL, &e, &b, NULL, 0)) {
        cfg->tcp_fastopen = b ? 256 : 0;
        return MK_OK;
    }
    if (!mk_conf_int(NULL, &e, 0, 1 << 20, &n, NULL, 0)) {
        snprintf(reason, len, "expected On, Off or a queue length, got '%s'", value);
        return MK_ERR;
    }
    cfg->tcp_fastopen = (int) n;
    return MK_OK;
}

#ifdef MK_HAVE_METRICS
/*
 * One bound of MetricsBuckets: seconds, a decimal number with at most 6
 * digits after the point, above 0 and at most 3600, into *us. false when
 * the word is not one.
 */
static bool mk_metrics_bound(const char *word, size_t n, uint64_t *us)
{
    uint64_t whole = 0, frac = 0;
    size_t i = 0, digits = 0, fdigits = 0;

    for (; i < n && word[i] >= '0' && word[i] <= '9' && digits < 5; i++, digits++) {
        whole = whole * 10 + (uint64_t) (word[i] - '0');
    }
    if (i < n && word[i] == '.') {
        for (i++; i < n && word[i] >= '0' && word[i] <= '9' && fdigits < 6; i++, fdigits++) {
            frac = frac * 10 + (uint64_t) (word[i] - '0');
        }
    }
    if (i != n || digits + fdigits == 0) {
        return false;
    }
    for (; fdigits < 6; fdigits++) {
        frac *= 10;
    }
    *us = whole * 1000000u + frac;
    return *us > 0 && *us <= 3600u * 1000000u;
}

/* MetricsBuckets B1 B2 ...: 1 to MK_CONF_METRICS_BOUNDS bounds, ascending. */
static int mk_set_metrics_buckets(void *obj, const struct mk_conf_key *k, const char *value,
                                  const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct mk_config *cfg = obj;
    uint64_t bounds[MK_CONF_METRICS_BOUNDS];
    unsigned n = 0;

    (void) k;
    (void) origin;
    for (const char *p = value; *p;) {
        size_t w;
        while (*p == ' ' || *p == '\t') {
            p++;
        }
        w = strcspn(p, " \t");
        if (!w) {
            break;
        }
        if (n == MK_CONF_METRICS_BOUNDS) {
            snprintf(reason, len, "at most %d bounds", MK_CONF_METRICS_BOUNDS);
            return MK_ERR;
        }
        if (!mk_metrics_bound(p, w, &bounds[n])) {
            snprintf(reason, len,
                     "'%.*s' is not a bound: seconds above 0 and at most 3600, "
                     "at most 6 decimals",
                     (int) (w > 32 ? 32 : w), p);
            return MK_ERR;
        }
        if (n && bounds[n] <= bounds[n - 1]) {
            snprintf(reason, len, "'%.*s': the bounds must ascend", (int) (w > 32 ? 32 : w), p);
            return MK_ERR;
        }
        n++;
        p += w;
    }
    if (!n) {
        snprintf(reason, len, "expected 1 to %d bounds in seconds", MK_CONF_METRICS_BOUNDS);
        return MK_ERR;
    }
    memcpy(cfg->metrics_bounds, bounds, n * sizeof(bounds[0]));
    cfg->n_metrics_bounds = n;
    return MK_OK;
}
#endif

/* Log FILE, or stderr. */
static int mk_set_log(void *obj, const struct mk_conf_key *k, const char *value,
                      const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct mk_config *cfg = obj;

    (void) k;
    (void) reason;
    (void) len;
    mk_free(cfg->log_path);
    cfg->log_path = strcmp(value, "stderr") == 0 ? NULL : mk_fs_path_join(origin->confdir, value);
    return MK_OK;
}

static void mk_server_schema_free(void *obj, int site)
{
    struct mk_config *cfg = obj;

    (void) site;
    for (size_t i = 0; i < cfg->n_listen; i++) {
        mk_listen_addr_free(&cfg->listen[i]);
    }
    mk_free(cfg->listen);
    cfg->listen = NULL;
    cfg->n_listen = 0;
    mk_free(cfg->log_path);
    cfg->log_path = NULL;
#ifdef MK_HAVE_REALIP
    mk_free(cfg->realip_from);
    cfg->realip_from = NULL;
    cfg->n_realip_from = 0;
#endif
#ifdef MK_HAVE_REQID
    mk_free(cfg->reqid_from);
    cfg->reqid_from = NULL;
    cfg->n_reqid_from = 0;
#endif
}

/*
 * The CPUs this process may run on (its affinity mask: a cpuset, taskset or
 * a container's limit), else the online CPUs; at least 1. glibc's and musl's
 * sysconf(_SC_NPROCESSORS_ONLN) disagree on whether the mask counts, so the
 * mask is read here.
 */
static int mk_conf_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
        return CPU_COUNT(&set);
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int) n;
}

#if defined(MK_HAVE_REALIP) || defined(MK_HAVE_REQID)
/* The blocks of RealIPFrom or RequestIdFrom, whose words were checked one by
   one (mk_check_realip_from), into *out (replacing what it held). */
static void mk_conf_cidrs(const struct mk_conf_words *w, struct mk_cidr **out, size_t *n)
{
    mk_free(*out);
    *out = w->n ? mk_calloc(w->n, sizeof(struct mk_cidr)) : NULL;
    *n = w->n;
    for (size_t i = 0; i < w->n; i++) {
        (void) mk_cidr_parse(w->v[i], strlen(w->v[i]), &(*out)[i]);
    }
}
#endif

/* Workers 0 means one per CPU; a request line never exceeds the head. */
static int mk_server_schema_finish(void *obj, int site, const char **key, char *reason, size_t len)
{
    struct mk_config *cfg = obj;

    (void) site;
    (void) key;
    (void) reason;
    (void) len;
    if (cfg->workers == 0) {
        cfg->workers = mk_conf_cpus();
    }
    if (cfg->limits.max_line > cfg->limits.max_head) {
        cfg->limits.max_line = cfg->limits.max_head;
    }
#ifdef MK_HAVE_REALIP
    mk_conf_cidrs(&cfg->realip_words, &cfg->realip_from, &cfg->n_realip_from);
#endif
#ifdef MK_HAVE_REQID
    mk_conf_cidrs(&cfg->reqid_words, &cfg->reqid_from, &cfg->n_reqid_from);
    cfg->reqid_header_len = strlen(cfg->reqid_header);
    cfg->trace_any = cfg->reqid || cfg->trace_context;
#endif
    return MK_OK;
}

static const char *const mk_balancing_words[] = {"reuseport", "fair", NULL};
static const char *const mk_log_level_words[] = {"error", "warn", "info", "debug", NULL};
#ifdef MK_HAVE_REALIP
/* RealIPHeader, in the order of enum mk_realip_field */
static const char *const mk_realip_header_words[] = {"X-Forwarded-For", "Forwarded", "X-Real-IP",
                                                     NULL};
#endif

#ifdef MK_HAVE_REQID
/* TraceContext, in the order of request_trace.c's enum */
static const char *const mk_trace_context_words[] = {"Off", "On", "Start", NULL};

/* RequestIdHeader: a field name (a token), not one the server reads itself. */
static int mk_check_reqid_header(const char *value, char *reason, size_t len)
{
    static const char *const own[] = {"traceparent", "tracestate", "host", "content-length",
                                      "transfer-encoding"};
    size_t i = 0;

    while (value[i] && i < 64 && mk_is_tchar((unsigned char) value[i])) {
        i++;
    }
    if (i == 0 || value[i]) {
        snprintf(reason, len, "'%s' is not a field name (a token of at most 64 bytes)", value);
        return MK_ERR;
    }
    for (i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
        if (strcasecmp(value, own[i]) == 0) {
            snprintf(reason, len, "'%s' is a field the server reads itself", value);
            return MK_ERR;
        }
    }
    return MK_OK;
}
#endif

#define MK_SRV(member) MK_CONF_FIELD(struct mk_config, member)

/* Every [SERVER] key, in the order of docs/configuration.md. */
static const struct mk_conf_key mk_server_keys[] = {
    {"Listen", MK_CONF_CUSTOM, MK_CONF_MULTI, 0, 0, 0, 0, "2001", .set = mk_set_listen},
    {"Workers", MK_CONF_INT, 0, MK_SRV(workers), 0, 1024, "0"},
    {"Balancing", MK_CONF_ENUM, 0, MK_SRV(balancing), 0, 0, "reuseport", mk_balancing_words},
    {"Timeout", MK_CONF_DURATION, 0, MK_SRV(timeout_ms), 1, 3600000, "15"},
    {"BodyMinRate", MK_CONF_SIZE, 0, MK_SRV(body_min_rate), 0, 1u << 30, "500"},
    {"SendTimeout", MK_CONF_DURATION, 0, MK_SRV(send_timeout_ms), 1, 3600000, "30"},
    {"SendMinRate", MK_CONF_SIZE, 0, MK_SRV(send_min_rate), 0, 1u << 30, "500"},
    {"KeepAlive", MK_CONF_BOOL, 0, MK_SRV(keepalive), 0, 0, "On"},
    {"KeepAliveTimeout", MK_CONF_DURATION, 0, MK_SRV(keepalive_timeout_ms), 1, 3600000, "5"},
    {"MaxKeepAliveRequests", MK_CONF_INT, 0, MK_SRV(max_keepalive_requests), 0, 100000000, "1000"},
    {"GracefulTimeout", MK_CONF_DURATION, 0, MK_SRV(graceful_timeout_ms), 0, 86400000, "30"},
    {"MaxRequestLine", MK_CONF_SIZE, 0, MK_SRV(limits.max_line), 64, 1u << 20, "8K"},
    {"MaxRequestSize", MK_CONF_SIZE, 0, MK_SRV(limits.max_head), 256, 16u << 20, "32K"},
    {"MaxRequestHeaders", MK_CONF_INT, 0, MK_SRV(limits.max_headers), 1, 10000, "100"},
    {"MaxRequestBody", MK_CONF_SIZE, 0, MK_SRV(max_body), 0, INT64_MAX, "16M"},
    {"MaxConnections", MK_CONF_INT, 0, MK_SRV(max_connections), 0, 10000000, "0"},
#ifdef MK_HAVE_RULES
    {"MaxConnectionsPerClient", MK_CONF_INT, 0, MK_SRV(max_conns_per_client), 0, 10000000, "0"},
#endif
    {"Backlog", MK_CONF_INT, 0, MK_SRV(backlog), 1, 1 << 20, "1024"},
    {"TCPFastOpen", MK_CONF_CUSTOM, 0, 0, 0, 0, 0, "Off", .set = mk_set_fastopen},
    {"DeferAccept", MK_CONF_BOOL, 0, MK_SRV(defer_accept), 0, 0, "On"},
    {"HideVersion", MK_CONF_BOOL, 0, MK_SRV(hide_version), 0, 0, "Off"},
    {"User", MK_CONF_STRING, 0, MK_SRV(user), 0, 0, NULL, .check = mk_check_user},
    {"PidFile", MK_CONF_PATH, 0, MK_SRV(pidfile), 0, 0, NULL},
    {"Log", MK_CONF_CUSTOM, 0, 0, 0, 0, 0, NULL, .set = mk_set_log},
    {"LogLevel", MK_CONF_ENUM, 0, MK_SRV(log_level), 0, 0, "info", mk_log_level_words},
    {"IndexFiles", MK_CONF_WORDS, 0, MK_SRV(index_list), 0, 0, "index.html index.htm",
     .check = mk_config_check_index_file},
    {"DefaultMimeType", MK_CONF_STRING, 0, MK_SRV(default_mime), 0, 0, "application/octet-stream",
     .check = mk_check_media_type},
    {"FileCache", MK_CONF_INT, 0, MK_SRV(file_cache), 0, 65536, "128"},
    {"FileCacheBody", MK_CONF_SIZE, 0, MK_SRV(file_cache_body), 0, 1u << 20, "16K"},
#ifdef MK_HAVE_COMPRESS
    {"CompressCache", MK_CONF_SIZE, 0, MK_SRV(compress_cache), 0, 1ull << 36, "16M"},
#endif
#ifdef MK_HAVE_REALIP
    {"RealIPFrom", MK_CONF_WORDS, MK_CONF_MULTI, MK_SRV(realip_words), 0, 0, NULL,
     .check = mk_check_realip_from},
    {"RealIPHeader", MK_CONF_ENUM, 0, MK_SRV(realip_header), 0, 0, "X-Forwarded-For",
     mk_realip_header_words},
#endif
#ifdef MK_HAVE_REQID
    {"RequestId", MK_CONF_BOOL, 0, MK_SRV(reqid), 0, 0, "Off"},
    {"RequestIdHeader", MK_CONF_STRING, 0, MK_SRV(reqid_header), 0, 0, "X-Request-Id",
     .check = mk_check_reqid_header},
    {"RequestIdFrom", MK_CONF_WORDS, MK_CONF_MULTI, MK_SRV(reqid_words), 0, 0, NULL,
     .check = mk_check_realip_from},
    {"RequestIdEcho", MK_CONF_BOOL, 0, MK_SRV(reqid_echo), 0, 0, "Off"},
    {"TraceContext", MK_CONF_ENUM, 0, MK_SRV(trace_context), 0, 0, "Off", mk_trace_context_words},
#endif
#ifdef MK_HAVE_METRICS
    {"MetricsBuckets", MK_CONF_CUSTOM, 0, 0, 0, 0, 0,
     "0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10", .set = mk_set_metrics_buckets},
#endif
    {"TaskQueuePerPlugin", MK_CONF_INT, 0, MK_SRV(task_queue_per_plugin), 1, 65536, "64"},
    {"TaskQueuePerClient", MK_CONF_INT, 0, MK_SRV(task_queue_per_client), 1, 65536, "8"},
#ifdef MK_HAVE_H2
    {"MaxConcurrentStreams", MK_CONF_INT, 0, MK_SRV(h2_max_streams), 1, 100000, "100"},
    {"Http2ResetBurst", MK_CONF_INT, 0, MK_SRV(h2_reset_burst), 1, 1000000, "200"},
    {"Http2ResetRate", MK_CONF_INT, 0, MK_SRV(h2_reset_rate), 1, 1000000, "33"},
    {"Http2UnansweredBurst", MK_CONF_INT, 0, MK_SRV(h2_unanswered_burst), 1, 1000000, "400"},
    {"Http2UnansweredRate", MK_CONF_INT, 0, MK_SRV(h2_unanswered_rate), 1, 1000000, "100"},
    {"Http2IdleTimeout", MK_CONF_DURATION, 0, MK_SRV(h2_idle_timeout_ms), 1, 3600000, "60"},
#endif
#ifdef MK_HAVE_SUPERVISOR
    {"Supervisor", MK_CONF_BOOL, 0, MK_SRV(supervisor), 0, 0, "Off"},
    {"SupervisorCrashLimit", MK_CONF_INT, 0, MK_SRV(supervisor_crash_limit), 1, 1000, "5"},
    {"SupervisorCrashWindow", MK_CONF_DURATION, 0, MK_SRV(supervisor_crash_window_ms), 1000,
     86400000, "60"},
#endif
    {NULL},
};

/*
 * The [SERVER] keys of the parts this build compiled out
 * (cmake/profile.cmake): refused with the part's name, not as unknown.
 */
static const struct mk_schema_absent mk_server_absent[] = {
#ifndef MK_HAVE_FAIR
    {"Balancing", "fair", "the fair balancing mode", false},
#endif
#ifndef MK_HAVE_COMPRESS
    {"CompressCache", NULL, "compression on the fly", false},
#endif
#ifndef MK_HAVE_RULES
    {"MaxConnectionsPerClient", NULL, "request rules and client limits", false},
#endif
#ifndef MK_HAVE_REALIP
    {"RealIPFrom", NULL, "the client's address behind a balancer", false},
    {"RealIPHeader", NULL, "the client's address behind a balancer", false},
#endif
#ifndef MK_HAVE_REQID
    {"RequestId", NULL, "request IDs and trace context", true},
    {"RequestIdHeader", NULL, "request IDs and trace context", false},
    {"RequestIdFrom", NULL, "request IDs and trace context", false},
    {"RequestIdEcho", NULL, "request IDs and trace context", true},
    {"TraceContext", NULL, "request IDs and trace context", false},
#endif
#ifndef MK_HAVE_METRICS
    {"MetricsBuckets", NULL, "the metrics", false},
#endif
#ifndef MK_HAVE_H2
    {"MaxConcurrentStreams", NULL, "HTTP/2", false},
    {"Http2ResetBurst", NULL, "HTTP/2", false},
    {"Http2ResetRate", NULL, "HTTP/2", false},
    {"Http2UnansweredBurst", NULL, "HTTP/2", false},
    {"Http2UnansweredRate", NULL, "HTTP/2", false},
    {"Http2IdleTimeout", NULL, "HTTP/2", false},
#endif
#ifndef MK_HAVE_SUPERVISOR
    {"Supervisor", NULL, "the supervisor", true},
    {"SupervisorCrashLimit", NULL, "the supervisor", false},
    {"SupervisorCrashWindow", NULL, "the supervisor", false},
#endif
    {NULL},
};

static const struct mk_conf_schema mk_server_schema = {
    .section = "SERVER",
    .keys = mk_server_keys,
    .size = sizeof(struct mk_config),
    .free = mk_server_schema_free,
    .finish = mk_server_schema_finish,
};
#define MK_N_SERVER_KEYS (sizeof(mk_server_keys) / sizeof(mk_server_keys[0]) - 1)

_Static_assert(MK_N_SERVER_KEYS <=
                   sizeof(((struct mk_config *) 0)->key_rec) / sizeof(struct mk_schema_record),
               "key_rec is too small");

const struct mk_conf_schema *mk_config_schema(void)
{
    return &mk_server_schema;
}

const char *mk_config_key(const char *section, size_t i)
{
    if (strcasecmp(section, "SERVER") == 0) {
        return i < MK_N_SERVER_KEYS ? mk_server_keys[i].name : NULL;
    }
    if (strcasecmp(section, "HOST") == 0) {
        const struct mk_conf_schema *site = mk_conf_site_schema();
        return i < mk_schema_count(site) ? site->keys[i].name : NULL;
    }
    if (strcasecmp(section, "PLUGINS") == 0) {
        return i == 0 ? "Load" : NULL;
    }
#ifdef MK_HAVE_RULES
    if (strcasecmp(section, "RULE") == 0) {
        return mk_conf_rule_key(i);
    }
#endif
    return NULL;
}

static void mk_config_free(struct mk_config *cfg)
{
    mk_schema_release(&mk_server_schema, 0, cfg);
    for (size_t i = 0; i < MK_N_SERVER_KEYS; i++) {
        mk_free(cfg->key_rec[i].text);
        mk_free(cfg->key_rec[i].where);
    }
    mk_mime_free(cfg->mime);
    for (size_t i = 0; i < cfg->n_sites; i++) {
        mk_conf_site_release_plugins(cfg, cfg->sites[i]);
        mk_conf_site_free(cfg->sites[i]);
    }
    for (size_t i = 0; i < cfg->n_plugin_conf; i++) {
        if (cfg->conf_plugins[i]->conf_schema) {
            mk_schema_delete(cfg->conf_plugins[i]->conf_schema, 0, cfg->plugin_conf[i]);
        }
    }
    mk_free(cfg->plugin_conf);
    mk_free(cfg->conf_plugins);
    mk_free(cfg->sites);
    for (size_t i = 0; i < cfg->n_plugins; i++) {
        mk_free(cfg->plugins[i].spec);
        mk_free(cfg->plugins[i].where);
    }
    mk_free(cfg->plugins);
    mk_strv_free(cfg->files, cfg->n_files);
    mk_free(cfg->confdir);
    mk_free(cfg);
}

void mk_config_file_read(struct mk_config *cfg, const char *path)
{
    cfg->files = mk_realloc(cfg->files, (cfg->n_files + 1) * sizeof(*cfg->files));
    cfg->files[cfg->n_files++] = mk_strdup(path);
}

int mk_config_dump(const struct mk_config *cfg, FILE *out, char *err, size_t errlen)
{
    for (size_t i = 0; i < cfg->n_files; i++) {
        struct mk_conf *conf = mk_conf_load(cfg->files[i], err, errlen);
        if (!conf) {
            return MK_ERR;
        }
        bool ok = (i == 0 || fputc('\n', out) != EOF) && mk_conf_dump(conf, out);
        mk_conf_free(conf);
        if (!ok) {
            snprintf(err, errlen, "cannot write the configuration: %s", strerror(errno));
            return MK_ERR;
        }
    }
    return fflush(out) == 0 ? MK_OK : MK_ERR;
}

struct mk_config *mk_config_ref(struct mk_config *cfg)
{
    atomic_fetch_add(&cfg->refs, 1);
    return cfg;
}

void mk_config_unref(struct mk_config *cfg)
{
    if (cfg && atomic_fetch_sub(&cfg->refs, 1) == 1) {
        mk_config_free(cfg);
    }
}

/* ---- [SERVER] ------------------------------------------------------------- */

static char *mk_where(const struct mk_conf *conf, int line)
{
    char buf[PATH_MAX + 32];
    int file_line;
    const char *file = mk_conf_where(conf, line, &file_line);
    snprintf(buf, sizeof(buf), "%s:%d", file, file_line);
    return mk_strdup(buf);
}

static size_t mk_key_index(const char *name)
{
    const struct mk_conf_key *k = mk_schema_find(&mk_server_schema, 0, name);
    return k ? (size_t) (k - mk_server_keys) : MK_N_SERVER_KEYS;
}

/* Show the resolved worker count as the value in force of Workers. */
static void mk_record_workers(struct mk_config *cfg)
{
    struct mk_schema_record *rec = &cfg->key_rec[mk_key_index("Workers")];
    char buf[16];

    snprintf(buf, sizeof(buf), "%d", cfg->workers);
    mk_free(rec->text);
    rec->text = mk_strdup(buf);
}

/*
 * Apply the [SERVER] section of `conf` (may be NULL), then the overrides,
 * then the defaults of keys nobody set.
 */
static bool mk_apply_server(struct mk_config *cfg, const struct mk_conf *conf,
                            const struct mk_config_override *ov, size_t n_ov, char *err,
                            size_t errlen)
{
    struct mk_schema_override *sov = mk_calloc(n_ov + 1, sizeof(*sov));
    for (size_t i = 0; i < n_ov; i++) {
        sov[i].key = ov[i].key;
        sov[i].value = ov[i].value;
    }
    struct mk_schema_input in = {
        .conf = conf,
        .confdir = cfg->confdir,
        .own_file = true,
        .ov = sov,
        .n_ov = n_ov,
        .records = cfg->key_rec,
        .absent = mk_server_absent,
    };
    int rc = mk_schema_fill(&mk_server_schema, &in, cfg, err, errlen);
    mk_free(sov);
    if (rc != MK_OK) {
        return false;
    }
    mk_record_workers(cfg);
    return true;
}

/* ---- plugins.load -------------------------------------------------------- */

static bool mk_load_plugin_list(struct mk_config *cfg, char *err, size_t errlen)
{
    char *path = mk_fs_path_join(cfg->confdir, "plugins.load");
    struct mk_conf *conf;
    struct mk_list *it, *eit;

    if (access(path, F_OK) != 0) {
        mk_free(path);
        return true; /* no plugins */
    }
    conf = mk_conf_load(path, err, errlen);
    if (conf) {
        mk_config_file_read(cfg, path);
    }
    mk_free(path);
    if (!conf) {
        return false;
    }
    mk_list_foreach (it, &conf->sections) {
        struct mk_conf_section *s = mk_list_entry(it, struct mk_conf_section, node);
        if (strcasecmp(s->name, "PLUGINS") != 0) {
            ERR(conf, s->line, "unknown section [%s] (expected [PLUGINS])", s->name);
            mk_conf_free(conf);
            return false;
        }
        mk_list_foreach (eit, &s->entries) {
            struct mk_conf_entry *e = mk_list_entry(eit, struct mk_conf_entry, node);
            if (strcasecmp(e->key, "Load") != 0) {
                ERR(conf, e->line, "unknown key '%s' in [PLUGINS]", e->key);
                mk_conf_free(conf);
                return false;
            }
            bool is_path = strchr(e->value, '/') || strstr(e->value, ".so");
            char *v = is_path ? mk_fs_path_join(cfg->confdir, e->value) : mk_strdup(e->value);
            for (size_t i = 0; i < cfg->n_plugins; i++) {
                if (strcmp(cfg->plugins[i].spec, v) == 0) {
                    ERR(conf, e->line, "plugin '%s' is loaded twice", e->value);
                    mk_free(v);
                    mk_conf_free(conf);
                    return false;
                }
            }
            cfg->plugins = mk_realloc(cfg->plugins, (cfg->n_plugins + 1) * sizeof(*cfg->plugins));
            cfg->plugins[cfg->n_plugins].spec = v;
            cfg->plugins[cfg->n_plugins].where = mk_where(conf, e->line);
            cfg->n_plugins++;
        }
    }
    mk_conf_free(conf);
    return true;
}

/* ---- entry points -------------------------------------------------------- */

static struct mk_config *mk_config_new(void)
{
    struct mk_config *cfg = mk_calloc(1, sizeof(*cfg));
    atomic_init(&cfg->refs, 1);
    return cfg;
}

static void mk_config_finish(struct mk_config *cfg)
{
    int n = snprintf(cfg->server_header, sizeof(cfg->server_header), "Server: Monkey%s%s\r\n",
                     cfg->hide_version ? "" : "/", cfg->hide_version ? "" : MK_VERSION_STR);
    cfg->server_header_len = (size_t) n;
}

struct mk_config *mk_config_load(const char *confdir, const struct mk_config_override *ov,
                                 size_t n_ov, char *err, size_t errlen)
{
    struct mk_config *cfg = mk_config_new();
    char resolved[PATH_MAX];
    struct mk_conf *conf;
    char *path;

    if (!realpath(confdir, resolved)) {
        snprintf(err, errlen, "%s: %s", confdir, strerror(errno));
        mk_config_free(cfg);
        return NULL;
    }
    cfg->confdir = mk_strdup(resolved);

    path = mk_fs_path_join(cfg->confdir, "monkey.conf");
    conf = mk_conf_load(path, err, errlen);
    if (conf) {
        mk_config_file_read(cfg, path);
    }
    mk_free(path);
    if (!conf) {
        mk_config_free(cfg);
        return NULL;
    }
    struct mk_list *it;
    mk_list_foreach (it, &conf->sections) {
        struct mk_conf_section *s = mk_list_entry(it, struct mk_conf_section, node);
        if (strcasecmp(s->name, "SERVER") != 0) {
            ERR(conf, s->line, "unknown section [%s] (expected [SERVER])", s->name);
            goto fail;
        }
        if (s != mk_conf_section(conf, "SERVER")) {
            ERR(conf, s->line, "[SERVER] is given twice");
            goto fail;
        }
    }
    if (!mk_apply_server(cfg, conf, ov, n_ov, err, errlen)) {
        goto fail;
    }
    mk_conf_free(conf);
    conf = NULL;

    path = mk_fs_path_join(cfg->confdir, "monkey.mime");
    if (access(path, F_OK) == 0) {
        struct mk_conf *mc = mk_conf_load(path, err, errlen);
        if (mc) {
            mk_config_file_read(cfg, path);
            cfg->mime = mk_mime_from_conf(mc, cfg->default_mime, err, errlen);
            mk_conf_free(mc);
        }
        if (!cfg->mime) {
            mk_free(path);
            goto fail;
        }
    }
    else {
        cfg->mime = mk_mime_builtin(cfg->default_mime);
    }
    mk_free(path);

    if (!mk_conf_site_load(cfg, err, errlen) || !mk_load_plugin_list(cfg, err, errlen)) {
        goto fail;
    }
    mk_config_finish(cfg);
    return cfg;

fail:
    mk_conf_free(conf);
    mk_config_free(cfg);
    return NULL;
}

struct mk_config *mk_config_for_dir(const char *dir, const struct mk_config_override *ov,
                                    size_t n_ov, char *err, size_t errlen)
{
    struct mk_config *cfg = mk_config_new();
    struct mk_conf label = {.path = "-o"};

    if (!mk_apply_server(cfg, NULL, ov, n_ov, err, errlen)) {
        mk_config_free(cfg);
        return NULL;
    }
    cfg->mime = mk_mime_builtin(cfg->default_mime);
    struct mk_site *vh = mk_conf_site_new("built-in", err, errlen);
    if (vh) {
        vh->conf = mk_conf_parse("built-in", "", 0, err, errlen);
    }
    if (!vh || !mk_conf_site_set_docroot(vh, &label, 0, dir, err, errlen)) {
        mk_conf_site_free(vh);
        mk_config_free(cfg);
        return NULL;
    }
    cfg->sites = mk_calloc(1, sizeof(*cfg->sites));
    cfg->sites[0] = vh;
    cfg->n_sites = 1;
    cfg->default_site = vh;
    mk_config_finish(cfg);
    return cfg;
}

void mk_config_force_workers(struct mk_config *cfg, int workers)
{
    cfg->workers = workers;
    mk_record_workers(cfg);
}

const char *mk_config_value(const struct mk_config *cfg, const char *key, unsigned i)
{
    size_t idx = mk_key_index(key);

    if (idx == MK_N_SERVER_KEYS) {
        return NULL;
    }
    if (strcasecmp(key, "Listen") == 0) {
        return i < cfg->n_listen ? cfg->listen[i].text : NULL;
    }
#ifdef MK_HAVE_REALIP
    if (strcasecmp(key, "RealIPFrom") == 0) {
        return i < cfg->realip_words.n ? cfg->realip_words.v[i] : NULL; /* one block each */
    }
#endif
#ifdef MK_HAVE_REQID
    if (strcasecmp(key, "RequestIdFrom") == 0) {
        return i < cfg->reqid_words.n ? cfg->reqid_words.v[i] : NULL;
    }
#endif
    return i == 0 ? cfg->key_rec[idx].text : NULL;
}

/* ---- files a start writes ------------------------------------------------ */

/* Who writes a file: this process, or the User a server started as root becomes. */
struct mk_writer {
    const char *user; /* NULL: this process (access(2) decides) */
    uid_t uid;
    gid_t gid;
    gid_t groups[64];
    int n_groups;
};

/* This process is the child of a supervisor (mk_config_supervised_set). */
static bool mk_config_supervised;

void mk_config_supervised_set(bool supervised)
{
    mk_config_supervised = supervised;
}

/*
 * The identity that writes the PidFile of `cfg`: a server started as root
 * with a User writes it after switching (see mk_server_start); a supervisor
 * (Supervisor On, or the child of one) keeps the identity it was started
 * with and writes it itself.
 */
static void mk_writer_for_pidfile(const struct mk_config *cfg, struct mk_writer *w)
{
#ifdef MK_HAVE_SUPERVISOR
    bool switches = cfg->user && geteuid() == 0 && !cfg->supervisor && !mk_config_supervised;
#else
    bool switches = cfg->user && geteuid() == 0;
#endif
    const struct passwd *pw = switches ? getpwnam(cfg->user) : NULL;

    memset(w, 0, sizeof(*w));
    if (!pw || pw->pw_uid == 0) {
        return;
    }
    w->user = cfg->user;
    w->uid = pw->pw_uid;
    w->gid = pw->pw_gid;
    w->n_groups = (int) (sizeof(w->groups) / sizeof(w->groups[0]));
    if (getgrouplist(cfg->user, pw->pw_gid, w->groups, &w->n_groups) < 0) {
        w->n_groups = (int) (sizeof(w->groups) / sizeof(w->groups[0])); /* the first ones */
    }
}

/* May `w` (another user) do `want` (2: write, 1: search) to the file of `st`? Mode bits only. */
static bool mk_writer_may(const struct mk_writer *w, const struct stat *st, unsigned want)
{
    unsigned shift = 0;

    if (st->st_uid == w->uid) {
        shift = 6;
    }
    else {
        bool member = st->st_gid == w->gid;
        for (int i = 0; i < w->n_groups && !member; i++) {
            member = w->groups[i] == st->st_gid;
        }
        shift = member ? 3 : 0;
    }
    return ((st->st_mode >> shift) & want) == want;
}

/* May `w` (another user) search every directory down to `dir`? Else the reason in why. */
static bool mk_writer_reaches(const struct mk_writer *w, const char *dir, char *why, size_t whylen)
{
    char buf[PATH_MAX];
    struct stat st;
    size_t n = strlen(dir);

    if (n >= sizeof(buf)) {
        snprintf(why, whylen, "%s", strerror(ENAMETOOLONG));
        return false;
    }
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (i < n && buf[i] != '/') {
            continue;
        }
        char c = buf[i];
        buf[i] = '\0';
        if (stat(buf, &st) == 0 && !mk_writer_may(w, &st, 1)) {
            snprintf(why, whylen, "user %s (User) cannot enter %s", w->user, buf);
            return false;
        }
        buf[i] = c;
    }
    return true;
}

/*
 * Can `w` create the file at `path`, or write to it if it exists? MK_OK, or
 * MK_ERR with the reason in why.
 */
/*
 * The directory of `path` into copy (PATH_MAX bytes), stat'ed into *st:
 * the directory, or NULL with the reason in why.
 */
static const char *mk_path_dir_stat(const char *path, char *copy, struct stat *st, char *why,
                                    size_t whylen)
{
    if (strlen(path) >= PATH_MAX) {
        snprintf(why, whylen, "%s", strerror(ENAMETOOLONG));
        return NULL;
    }
    memcpy(copy, path, strlen(path) + 1);
    const char *dir = dirname(copy);
    if (stat(dir, st) != 0) {
        snprintf(why, whylen, "directory %s: %s", dir, strerror(errno));
        return NULL;
    }
    return dir;
}

static int mk_file_writable(const char *path, const struct mk_writer *w, char *why, size_t whylen)
{
    char copy[PATH_MAX];
    struct stat st;
    const char *dir = mk_path_dir_stat(path, copy, &st, why, whylen);

    if (!dir) {
        return MK_ERR;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, whylen, "%s is not a directory", dir);
        return MK_ERR;
    }
    if (w->user && !mk_writer_reaches(w, dir, why, whylen)) {
        return MK_ERR;
    }
    bool exists = stat(path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        snprintf(why, whylen, "%s", strerror(EISDIR));
        return MK_ERR;
    }
    if (w->user) {
        if (exists ? !mk_writer_may(w, &st, 2)
                   : (stat(dir, &st) != 0 || !mk_writer_may(w, &st, 3))) {
            snprintf(why, whylen, "user %s (User) cannot %s", w->user,
                     exists ? "write to it" : "create files in its directory");
            return MK_ERR;
        }
        return MK_OK;
    }
    if (exists ? access(path, W_OK) != 0 : access(dir, W_OK | X_OK) != 0) {
        snprintf(why, whylen, "%s%s: %s", exists ? "" : "directory ", exists ? path : dir,
                 strerror(errno));
        return MK_ERR;
    }
    return MK_OK;
}

/*
 * A file root writes must be in a directory no one else can change: one
 * owned by root, writable by no group but root's and not by others. A user
 * who could write there could replace the file (a PidFile naming another
 * process, which init scripts then signal as root). MK_OK, or MK_ERR with
 * the reason in why.
 */
static int mk_dir_root_only(const char *path, char *why, size_t whylen)
{
    char copy[PATH_MAX];
    struct stat st;
    const char *dir = mk_path_dir_stat(path, copy, &st, why, whylen);

    if (!dir) {
        return MK_ERR;
    }
    const char *who = st.st_uid != 0                             ? "its owner"
                      : st.st_gid != 0 && (st.st_mode & S_IWGRP) ? "its group"
                      : (st.st_mode & S_IWOTH)                   ? "everyone"
                                                                 : NULL;
    if (who) {
        snprintf(why, whylen,
                 "directory %s may be written by %s, not only by root, and root writes the file "
                 "(a supervisor, or no User)",
                 dir, who);
        return MK_ERR;
    }
    return MK_OK;
}

int mk_config_check_files(const struct mk_config *cfg, const struct mk_config *running, char *err,
                          size_t errlen)
{
    struct mk_writer self = {0}, w;
    char why[PATH_MAX + 128];

    if (cfg->log_path &&
        !(running && running->log_path && strcmp(running->log_path, cfg->log_path) == 0) &&
        mk_file_writable(cfg->log_path, &self, why, sizeof(why)) != MK_OK) {
        snprintf(err, errlen, "%s: Log %s: %s", cfg->key_rec[mk_key_index("Log")].where,
                 cfg->log_path, why);
        return MK_ERR;
    }
    if (cfg->pidfile && !running) {
        mk_writer_for_pidfile(cfg, &w);
        if (mk_file_writable(cfg->pidfile, &w, why, sizeof(why)) != MK_OK ||
            (!w.user && geteuid() == 0 &&
             mk_dir_root_only(cfg->pidfile, why, sizeof(why)) != MK_OK)) {
            snprintf(err, errlen, "%s: PidFile %s: %s", cfg->key_rec[mk_key_index("PidFile")].where,
                     cfg->pidfile, why);
            return MK_ERR;
        }
    }
    return MK_OK;
}
