/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * px_conf.c: the proxy plugin's declared keys. proxy.conf holds the
 * timeouts, the passive health settings and the upstream groups, each
 * opened by an Upstream line and filled by the Server and Balance lines
 * that follow it (the engine gives a section's lines in file order); a
 * site's [PROXY] section maps path prefixes (Pass) and patterns (Match) to
 * a group or a single address, and holds the site's field settings (their
 * lines are read by px_fconf.c). Addresses are checked for form only
 * (monkey -t does not need the upstreams up); a group a site names that
 * proxy.conf does not declare is refused by site_init, with the line.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

#include "proxy.h"
#include "../../core/strings.h"

bool px_number(const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t n;

    if (!mk_str_to_u64(v, strlen(v), max, &n) || n < min) {
        return false;
    }
    *out = n;
    return true;
}

int px_oom(char *reason, size_t len)
{
    snprintf(reason, len, "out of memory");
    return MK_ERR;
}

const char *px_parse_addr(const char *v, struct px_addr *a)
{
    memset(a, 0, sizeof(*a));
    if (strlen(v) >= sizeof(a->text)) {
        return "the address is too long";
    }
    snprintf(a->text, sizeof(a->text), "%s", v);
    if (strncasecmp(v, "tls://", 6) == 0) {
#ifdef PX_TLS
        a->tls = true;
        v += 6;
#else
        return "this proxy was built without TLS (OpenSSL)";
#endif
    }
    if (strncmp(v, "unix:", 5) == 0) {
        snprintf(a->name, sizeof(a->name), "localhost");
        struct sockaddr_un *un = (struct sockaddr_un *) &a->sa;
        const char *path = v + 5;
        if (path[0] != '/') {
            return "a unix socket needs an absolute path";
        }
        if (strlen(path) >= sizeof(un->sun_path)) {
            return "the unix socket path is too long";
        }
        un->sun_family = AF_UNIX;
        memcpy(un->sun_path, path, strlen(path) + 1);
        a->len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1);
        return NULL;
    }
    const char *colon = strrchr(v, ':');
    if (!colon || colon == v) {
        return "expected unix:/path, HOST:PORT or [IPV6]:PORT";
    }
    uint64_t port;
    if (!px_number(colon + 1, 1, 65535, &port)) {
        return "bad port (1 to 65535)";
    }
    char host[64];
    size_t hlen = (size_t) (colon - v);
    if (v[0] == '[') {
        if (hlen < 3 || v[hlen - 1] != ']') {
            return "bad [IPv6] address";
        }
        v++;
        hlen -= 2;
    }
    if (hlen >= sizeof(host)) {
        return "bad address";
    }
    memcpy(host, v, hlen);
    host[hlen] = '\0';
    snprintf(a->name, sizeof(a->name), "%s", host);
    struct sockaddr_in *in4 = (struct sockaddr_in *) &a->sa;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &a->sa;
    if (strcasecmp(host, "localhost") == 0 || inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        if (strcasecmp(host, "localhost") == 0) {
            in4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        }
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t) port);
        a->len = sizeof(*in4);
        return NULL;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t) port);
        a->len = sizeof(*in6);
        return NULL;
    }
    return "not an IP address, localhost or unix:/path";
}

/* The group the last Upstream line opened, or NULL with the reason. */
static struct px_group *px_current(struct px_conf *c, const struct mk_conf_key *k, char *reason,
                                   size_t len)
{
    if (c->n_groups == 0) {
        snprintf(reason, len, "%s needs an Upstream line before it", k->name);
        return NULL;
    }
    return &c->groups[c->n_groups - 1];
}

static int px_set_upstream(void *obj, const struct mk_conf_key *k, const char *value,
                           const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct px_conf *c = obj;

    (void) k;
    for (const char *p = value; *p; p++) {
        if (!(*p == '-' || *p == '_' || *p == '.' || (*p >= '0' && *p <= '9') ||
              (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) {
            snprintf(reason, len, "a group name is letters, digits, '-', '_' and '.': '%s'", value);
            return MK_ERR;
        }
    }
    for (size_t i = 0; i < c->n_groups; i++) {
        if (strcmp(c->groups[i].name, value) == 0) {
            snprintf(reason, len, "group '%s' is declared twice (first at %s)", value,
                     c->groups[i].where);
            return MK_ERR;
        }
    }
    struct px_group *v = realloc(c->groups, (c->n_groups + 1) * sizeof(*v));
    if (!v) {
        return px_oom(reason, len);
    }
    c->groups = v;
    struct px_group *g = &v[c->n_groups];
    memset(g, 0, sizeof(*g));
    if (!(g->name = strdup(value))) {
        return px_oom(reason, len);
    }
    snprintf(g->where, sizeof(g->where), "%s", origin->where);
    c->n_groups++;
    return MK_OK;
}

/* "ADDRESS [weight=N] [max=N] [backup]" */
static int px_set_server(void *obj, const struct mk_conf_key *k, const char *value,
                         const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct px_group *g = px_current(obj, k, reason, len);
    char buf[256], *save = NULL;
    struct px_member m = {.weight = 1};
    uint64_t num;

    (void) origin;
    if (!g) {
        return MK_ERR;
    }
    if (g->n == PX_MEMBERS_MAX) {
        snprintf(reason, len, "more than %d servers in group '%s'", PX_MEMBERS_MAX, g->name);
        return MK_ERR;
    }
    snprintf(buf, sizeof(buf), "%s", value);
    char *addr = strtok_r(buf, " \t", &save);
    const char *why = addr ? px_parse_addr(addr, &m.a) : "no address";
    if (why) {
        snprintf(reason, len, "%s: '%s'", why, addr ? addr : "");
        return MK_ERR;
    }
    for (char *w = strtok_r(NULL, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        if (strcasecmp(w, "backup") == 0) {
            m.backup = true;
        }
        else if (strncasecmp(w, "max=", 4) == 0) {
            if (!px_number(w + 4, 1, 65535, &num)) {
                snprintf(reason, len, "a max is 1 to 65535: '%s'", w);
                return MK_ERR;
            }
            m.max = (unsigned) num;
        }
        else if (strncasecmp(w, "weight=", 7) == 0) {
            if (!px_number(w + 7, 1, 100, &num)) {
                snprintf(reason, len, "a weight is 1 to 100: '%s'", w);
                return MK_ERR;
            }
            m.weight = (unsigned) num;
        }
        else if (strncasecmp(w, "name=", 5) == 0 && m.a.tls) {
            const char *n = w + 5;
            bool ok = *n && strlen(n) < sizeof(m.a.name);
            for (const char *p = n; ok && *p; p++) {
                ok = *p == '.' || *p == '-' || *p == ':' || (*p >= '0' && *p <= '9') ||
                     (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z');
            }
            if (!ok) {
                snprintf(reason, len, "name= is a DNS name or an IP address: '%s'", w);
                return MK_ERR;
            }
            snprintf(m.a.name, sizeof(m.a.name), "%s", n);
        }
        else if (strncasecmp(w, "name=", 5) == 0) {
            snprintf(reason, len, "name= is for tls:// servers: '%s'", w);
            return MK_ERR;
        }
        else {
            snprintf(reason, len, "unknown server parameter '%s' (weight=N, max=N, backup, name=)",
                     w);
            return MK_ERR;
        }
    }
    struct px_member *v = realloc(g->m, (g->n + 1) * sizeof(*v));
    if (!v) {
        return px_oom(reason, len);
    }
    g->m = v;
    v[g->n++] = m;
    return MK_OK;
}

/* "roundrobin", "leastconn", "hash client", "hash header NAME", "hash cookie NAME" */
static int px_set_balance(void *obj, const struct mk_conf_key *k, const char *value,
                          const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct px_group *g = px_current(obj, k, reason, len);
    char buf[256], *save = NULL;

    (void) origin;
    if (!g) {
        return MK_ERR;
    }
    snprintf(buf, sizeof(buf), "%s", value);
    char *mode = strtok_r(buf, " \t", &save);
    char *kind = strtok_r(NULL, " \t", &save);
    char *name = kind ? strtok_r(NULL, " \t", &save) : NULL;
    char *more = name ? strtok_r(NULL, " \t", &save) : NULL;
    if (mode && strcasecmp(mode, "roundrobin") == 0 && !kind) {
        g->balance = PX_BAL_WRR;
        return MK_OK;
    }
    if (mode && strcasecmp(mode, "leastconn") == 0 && !kind) {
        g->balance = PX_BAL_LEASTCONN;
        return MK_OK;
    }
    if (mode && strcasecmp(mode, "hash") == 0 && kind && !more) {
        g->balance = PX_BAL_HASH;
        if (strcasecmp(kind, "client") == 0 && !name) {
            g->key = PX_KEY_CLIENT;
            return MK_OK;
        }
        if ((strcasecmp(kind, "header") == 0 || strcasecmp(kind, "cookie") == 0) && name) {
            g->key = strcasecmp(kind, "header") == 0 ? PX_KEY_HEADER : PX_KEY_COOKIE;
            free(g->key_name);
            if (!(g->key_name = strdup(name))) {
                return px_oom(reason, len);
            }
            return MK_OK;
        }
    }
    snprintf(reason, len,
             "expected roundrobin, leastconn, hash client, hash header NAME or hash cookie "
             "NAME: '%s'",
             value);
    return MK_ERR;
}

/* The longest interval= and timeout= of a Health line. */
#define PX_HC_DURATION_MAX 3600000

/*
 * A duration of a Health parameter, as every duration of the configuration
 * is written (core/strings.h): "5" or "5s" seconds, "500ms", "1m", "1h";
 * more than 0 and at most an hour. MK_OK or MK_ERR.
 */
static int px_hc_duration(const char *v, uint64_t *ms)
{
    uint64_t n;

    if (!mk_str_to_duration_ms(v, strlen(v), PX_HC_DURATION_MAX, &n) || n == 0) {
        return MK_ERR;
    }
    *ms = n;
    return MK_OK;
}

/* Whether every byte of v may stand in the check's request line or Host field. */
static bool px_hc_clean(const char *v, bool host)
{
    for (const unsigned char *p = (const unsigned char *) v; *p; p++) {
        if (*p <= ' ' || *p >= 0x7f ||
            (host &&
             !(*p == '.' || *p == '-' || *p == ':' || *p == '[' || *p == ']' || *p == '_' ||
               (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))) {
            return false;
        }
    }
    return true;
}

/* "PATH [interval=5s] [timeout=2s] [rise=2] [fall=3] [host=NAME]" */
static int px_set_health(void *obj, const struct mk_conf_key *k, const char *value,
                         const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct px_group *g = px_current(obj, k, reason, len);
    struct px_health h = {.interval_ms = 5000, .timeout_ms = 2000, .rise = 2, .fall = 3};
    char buf[768], *save = NULL;

    (void) origin;
    if (!g) {
        return MK_ERR;
    }
    if (g->health.path) {
        snprintf(reason, len, "group '%s' has a Health line already", g->name);
        return MK_ERR;
    }
    if (strlen(value) >= 512) {
        snprintf(reason, len, "the Health line is too long");
        return MK_ERR;
    }
    snprintf(buf, sizeof(buf), "%s", value);
    char *path = strtok_r(buf, " \t", &save);
    if (!path || path[0] != '/' || !px_hc_clean(path, false)) {
        snprintf(reason, len, "expected an absolute path to check: '%s'", path ? path : "");
        return MK_ERR;
    }
    const char *host = NULL;
    for (char *w = strtok_r(NULL, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        char *eq = strchr(w, '=');
        const char *v = eq ? eq + 1 : "";
        size_t nlen = eq ? (size_t) (eq - w) : strlen(w);
        bool ok;
        if (nlen == 8 && strncasecmp(w, "interval", 8) == 0) {
            ok = px_hc_duration(v, &h.interval_ms) == MK_OK;
        }
        else if (nlen == 7 && strncasecmp(w, "timeout", 7) == 0) {
            ok = px_hc_duration(v, &h.timeout_ms) == MK_OK;
        }
        else if ((nlen == 4 && strncasecmp(w, "rise", 4) == 0) ||
                 (nlen == 4 && strncasecmp(w, "fall", 4) == 0)) {
            uint64_t n;
            ok = px_number(v, 1, 100, &n);
            if (ok) {
                *(strncasecmp(w, "rise", 4) == 0 ? &h.rise : &h.fall) = (int) n;
            }
        }
        else if (nlen == 4 && strncasecmp(w, "host", 4) == 0) {
            ok = *v && strlen(v) < 128 && px_hc_clean(v, true);
            host = v;
        }
        else {
            snprintf(reason, len,
                     "unknown Health parameter '%s' (interval=, timeout=, rise=, fall=, host=)", w);
            return MK_ERR;
        }
        if (!ok) {
            snprintf(reason, len,
                     "bad Health parameter '%s' (durations: 5, 5s, 500ms, 2m or 1h, up "
                     "to an hour; rise and fall 1 to 100; host a name or address)",
                     w);
            return MK_ERR;
        }
    }
    if (!(h.path = strdup(path)) || (host && !(h.host = strdup(host)))) {
        free(h.path);
        return px_oom(reason, len);
    }
    g->health = h;
    return MK_OK;
}

/* "PREFIX TARGET" (Pass) or "REGEX TARGET" (Match): the target is the last word. */
static int px_set_route(void *obj, const struct mk_conf_key *k, const char *value,
                        const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct px_site_conf *sc = obj;
    bool pass = strcasecmp(k->name, "Pass") == 0;
    const char *sp = strrchr(value, ' ');
    const char *tab = strrchr(value, '\t');

    if (!sp || (tab && tab > sp)) {
        sp = tab;
    }
    if (!sp) {
        snprintf(reason, len, "expected %s TARGET (a group or an address)",
                 pass ? "PREFIX" : "REGEX");
        return MK_ERR;
    }
    size_t plen = (size_t) (sp - value);
    while (plen > 0 && (value[plen - 1] == ' ' || value[plen - 1] == '\t')) {
        plen--;
    }
    const char *target = sp + 1;
    if (strchr(target, ':')) {
        struct px_addr a;
        const char *why = px_parse_addr(target, &a);
        if (why) {
            snprintf(reason, len, "%s: '%s'", why, target);
            return MK_ERR;
        }
    }
    struct px_route *v = realloc(sc->routes, (sc->n_routes + 1) * sizeof(*v));
    if (!v) {
        return px_oom(reason, len);
    }
    sc->routes = v;
    struct px_route *rt = &v[sc->n_routes];
    memset(rt, 0, sizeof(*rt));
    char *pat = strndup(value, plen);
    if (!pat || !(rt->target = strdup(target))) {
        free(pat);
        return px_oom(reason, len);
    }
    if (pass) {
        if (pat[0] != '/') {
            free(pat);
            free(rt->target);
            snprintf(reason, len, "a prefix starts with '/'");
            return MK_ERR;
        }
        rt->prefix = pat;
        rt->prefix_len = plen;
        while (rt->prefix_len > 1 && pat[rt->prefix_len - 1] == '/') {
            rt->prefix_len--; /* "/api/" is "/api": whole segments */
        }
    }
    else {
        int rc = regcomp(&rt->re, pat, REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char msg[128];
            regerror(rc, &rt->re, msg, sizeof(msg));
            snprintf(reason, len, "bad regular expression '%s': %s", pat, msg);
            free(pat);
            free(rt->target);
            return MK_ERR;
        }
        free(pat);
    }
    snprintf(rt->where, sizeof(rt->where), "%s", origin->where);
    sc->n_routes++;
    return MK_OK;
}

/* A site's Buffering on|off, in place of proxy.conf's for its routes. */
static int px_set_site_buffering(void *obj, const struct mk_conf_key *k, const char *value,
                                 const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct px_site_conf *sc = obj;

    (void) k;
    if (strcasecmp(value, "on") != 0 && strcasecmp(value, "off") != 0) {
        snprintf(reason, len, "expected on or off, got '%s'", value);
        return MK_ERR;
    }
    sc->buffering = strcasecmp(value, "on") == 0 ? 2 : 1;
    snprintf(sc->buffering_at, sizeof(sc->buffering_at), "%s", origin->where);
    return MK_OK;
}

static void px_schema_free(void *obj, int site)
{
    if (site) {
        struct px_site_conf *sc = obj;
        for (size_t i = 0; i < sc->n_routes; i++) {
            if (sc->routes[i].prefix) {
                free(sc->routes[i].prefix);
            }
            else {
                regfree(&sc->routes[i].re);
            }
            free(sc->routes[i].target);
        }
        free(sc->routes);
        px_fields_conf_free(&sc->fields);
        return;
    }
    struct px_conf *c = obj;
    for (size_t i = 0; i < c->n_groups; i++) {
        free(c->groups[i].name);
        free(c->groups[i].m);
        free(c->groups[i].key_name);
        free(c->groups[i].health.path);
        free(c->groups[i].health.host);
    }
    free(c->groups);
#ifdef PX_TLS
    px_tls_ctx_free(c);
#endif
}

/* Every group has a server that is not a backup; BufferDir takes temporary files. */
static int px_schema_finish(void *obj, int site, const char **key, char *reason, size_t len)
{
    const struct px_conf *c = obj;

    if (site) {
        return MK_OK;
    }
    if (!c->tls_cert != !c->tls_key) {
        *key = c->tls_cert ? "TLSCertificate" : "TLSKey";
        snprintf(reason, len, "a client certificate needs both TLSCertificate and TLSKey");
        return MK_ERR;
    }
#ifdef PX_TLS
    const char *kinds[] = {"ca", "cert", "key"},
               *keys[] = {"TLSCAFile", "TLSCertificate", "TLSKey"};
    const char *paths[] = {c->tls_ca, c->tls_cert, c->tls_key};
    for (int i = 0; i < 3; i++) {
        if (paths[i] && px_tls_check(kinds[i], paths[i], reason, len) != MK_OK) {
            *key = keys[i];
            return MK_ERR;
        }
    }
#else
    if (c->tls_ca || c->tls_cert) {
        *key = c->tls_ca ? "TLSCAFile" : "TLSCertificate";
        snprintf(reason, len, "this proxy was built without TLS (OpenSSL)");
        return MK_ERR;
    }
#endif
    if (c->buffering && c->buf_max_temp > 0 &&
        px_rbuf_dir_check(c->buf_dir, reason, len) != MK_OK) {
        *key = c->buf_dir ? "BufferDir" : "Buffering";
        return MK_ERR;
    }
    for (size_t i = 0; i < c->n_groups; i++) {
        bool primary = false;
        for (size_t m = 0; m < c->groups[i].n; m++) {
            primary |= !c->groups[i].m[m].backup;
        }
        if (!primary) {
            *key = "Upstream";
            snprintf(reason, len, "group '%s' (%s) has no Server that is not a backup",
                     c->groups[i].name, c->groups[i].where);
            return MK_ERR;
        }
    }
    return MK_OK;
}

#define PX_G(m) MK_CONF_FIELD(struct px_conf, m)
#define PX_S(m) MK_CONF_FIELD(struct px_site_conf, m)

static const char *const px_onoff[] = {"off", "on", NULL};

/* TLSCAFile, TLSCertificate, TLSKey written as absolute paths are read at
   their line (a relative one is, once made absolute, by px_schema_finish). */
#ifdef PX_TLS
static int px_check_ca(const char *v, char *reason, size_t len)
{
    return v[0] != '/' ? MK_OK : px_tls_check("ca", v, reason, len);
}

static int px_check_cert(const char *v, char *reason, size_t len)
{
    return v[0] != '/' ? MK_OK : px_tls_check("cert", v, reason, len);
}

static int px_check_key(const char *v, char *reason, size_t len)
{
    return v[0] != '/' ? MK_OK : px_tls_check("key", v, reason, len);
}
#define PX_CHECK(f) .check = f
#else
#define PX_CHECK(f) .check = NULL
#endif

static const struct mk_conf_key px_keys[] = {
    {"ConnectTimeout", MK_CONF_DURATION, 0, PX_G(connect_ms), 1, 3600000, "5",
     .doc = "time a connection to an upstream may take; past it 504"},
    {"Timeout", MK_CONF_DURATION, 0, PX_G(timeout_ms), 1, 3600000, "30",
     .doc = "time an upstream may stay silent (its first byte included); past it 504"},
    {"MaxFails", MK_CONF_INT, 0, PX_G(max_fails), 1, 1000, "3",
     .doc = "failures of a server within FailTimeout that take it out for FailTimeout"},
    {"FailTimeout", MK_CONF_DURATION, 0, PX_G(fail_ms), 1, 3600000, "10",
     .doc = "the window of MaxFails, and the time a server is out"},
    {"KeepAlive", MK_CONF_INT, 0, PX_G(idle_max), 0, 4096, "16",
     .doc = "idle connections kept per server and worker (0: none kept)"},
    {"KeepAliveTimeout", MK_CONF_DURATION, 0, PX_G(idle_ms), 1, 3600000, "60",
     .doc = "an idle kept connection unused this long is closed"},
    {"Tries", MK_CONF_INT, 0, PX_G(tries), 1, PX_MEMBERS_MAX, "3",
     .doc = "attempts per request, the first included, each on another server of the group"},
    {"TryTimeout", MK_CONF_DURATION, 0, PX_G(try_ms), 0, 3600000, "0",
     .doc = "no new attempt this long after the first (0: no bound)"},
    {"Queue", MK_CONF_INT, 0, PX_G(queue), 0, 65536, "64",
     .doc = "requests each worker keeps waiting for a server at its max= (0: 503 at once)"},
    {"QueueTimeout", MK_CONF_DURATION, 0, PX_G(queue_ms), 1, 3600000, "5",
     .doc = "the longest wait for a server at its max=; past it 503"},
    {"Buffering", MK_CONF_ENUM, 0, PX_G(buffering), 0, 0, "off", px_onoff,
     .doc = "keep reading an upstream's answer the client is slow to take, into memory then a "
            "temporary file, so that the upstream is free (on), or hold the upstream back (off)"},
    {"BufferSize", MK_CONF_SIZE, 0, PX_G(buf_size), 4096, 256u << 20, "64K",
     .doc = "Buffering on: the memory a request's answer may be kept in"},
    {"BufferMaxTemp", MK_CONF_SIZE, 0, PX_G(buf_max_temp), 0, 1ll << 40, "1G",
     .doc = "Buffering on: the temporary file's bound past BufferSize, per request (0: memory "
            "only)"},
    {"BufferDir", MK_CONF_PATH, 0, PX_G(buf_dir), 0, 0, NULL,
     .doc = "Buffering on: where the temporary files are made, without a name (default: "
            "$TMPDIR, else /tmp)"},
    {"TLSVerify", MK_CONF_ENUM, 0, PX_G(tls_verify), 0, 0, "on", px_onoff,
     .doc = "verify tls:// servers' certificates and names (on) or not (off)"},
    {"TLSCAFile", MK_CONF_PATH, 0, PX_G(tls_ca), 0, 0, NULL, PX_CHECK(px_check_ca),
     .doc = "the CA certificates tls:// servers are verified against (default: the system's)"},
    {"TLSCertificate", MK_CONF_PATH, 0, PX_G(tls_cert), 0, 0, NULL, PX_CHECK(px_check_cert),
     .doc = "a client certificate chain (PEM) presented to tls:// servers, with TLSKey"},
    {"TLSKey", MK_CONF_PATH, 0, PX_G(tls_key), 0, 0, NULL, PX_CHECK(px_check_key),
     .doc = "the client certificate's private key (PEM)"},
    {"Upstream", MK_CONF_CUSTOM, MK_CONF_MULTI, 0, 0, 0, 0, NULL, .set = px_set_upstream,
     .doc = "opens a group NAME: the Server and Balance lines that follow are its"},
    {"Server", MK_CONF_CUSTOM, MK_CONF_MULTI, 0, 0, 0, 0, NULL, .set = px_set_server,
     .doc = "a server of the group: HOST:PORT, [IPV6]:PORT, unix:/path or tls://HOST:PORT, "
            "then weight=N (1..100, 1), max=N (requests on it at most, 1..65535), backup and, "
            "for tls://, name=NAME (verified and SNI)"},
    {"Balance", MK_CONF_CUSTOM, MK_CONF_MULTI, 0, 0, 0, 0, NULL, .set = px_set_balance,
     .doc = "the group's balancing: roundrobin (weighted, the default), leastconn, hash client, "
            "hash header NAME, hash cookie NAME"},
    {"Health", MK_CONF_CUSTOM, MK_CONF_MULTI, 0, 0, 0, 0, NULL, .set = px_set_health,
     .doc = "PATH [interval=5s] [timeout=2s] [rise=2] [fall=3] [host=NAME]: an active check of "
            "each server of the group, healthy on 2xx and 3xx"},
    {"Pass", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI, 0, 0, 0, 0, NULL, .set = px_set_route,
     .doc = "PREFIX TARGET: paths under the prefix (whole segments) go to the group or address"},
    {"Match", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI, 0, 0, 0, 0, NULL, .set = px_set_route,
     .doc = "REGEX TARGET: paths the expression matches go there"},
    {"Buffering", MK_CONF_CUSTOM, MK_CONF_SITE, 0, 0, 0, 0, NULL, .set = px_set_site_buffering,
     .doc = "on or off: the response buffer for this site's routes, in place of proxy.conf's "
            "Buffering (its BufferSize, BufferMaxTemp and BufferDir apply)"},
    /* the fields sent and answered, for the whole site (px_fconf.c) */
    {"Host", MK_CONF_CUSTOM, MK_CONF_SITE, 0, 0, 0, 0, "KEEP", .set = px_set_host,
     .doc = "the Host sent upstream: KEEP (the client's) or a NAME"},
    {"XForwardedFor", MK_CONF_ENUM, MK_CONF_SITE, PX_S(fields.xff), 0, 0, "append",
     .words = px_xff_words, .doc = "append the client's address, replace the client's value, off"},
    {"XForwardedProto", MK_CONF_BOOL, MK_CONF_SITE, PX_S(fields.xfproto), 0, 0, "On",
     .doc = "send X-Forwarded-Proto (http or https)"},
    {"XForwardedHost", MK_CONF_BOOL, MK_CONF_SITE, PX_S(fields.xfhost), 0, 0, "On",
     .doc = "send X-Forwarded-Host (the client's Host)"},
    {"Forwarded", MK_CONF_BOOL, MK_CONF_SITE, PX_S(fields.forwarded), 0, 0, "Off",
     .doc = "send Forwarded (RFC 7239: for=, proto=, host=)"},
    {"RequestHeader", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI, 0, 0, 0, 0, NULL,
     .set = px_set_header_op, .doc = "set NAME VALUE or remove NAME, upstream"},
    {"ResponseHeader", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI, 0, 0, 0, 0, NULL,
     .set = px_set_header_op, .doc = "set|add NAME VALUE or remove NAME, to the client"},
    {"Redirect", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI, 0, 0, 0, 0, NULL, .set = px_set_map,
     .doc = "FROM TO: the prefix of Location and Refresh; or default"},
    {"CookiePath", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI, 0, 0, 0, 0, NULL,
     .set = px_set_map, .doc = "FROM TO: a Set-Cookie's Path"},
    {"CookieDomain", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI, 0, 0, 0, 0, NULL,
     .set = px_set_map, .doc = "FROM TO: a Set-Cookie's Domain"},
    {NULL},
};

const struct mk_conf_schema px_schema = {
    .section = "PROXY",
    .file = "proxy.conf",
    .keys = px_keys,
    .size = sizeof(struct px_conf),
    .site_size = sizeof(struct px_site_conf),
    .free = px_schema_free,
    .finish = px_schema_finish,
};
