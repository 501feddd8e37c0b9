/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * access.c: allow and deny requests by client address and by path, per site
 * (the original Monkey's "Mandril"). The rules live in an [ACCESS] section of
 * a site file, one per line, checked in file order; the first rule that
 * matches decides, and `Default allow|deny` decides for a request no rule
 * matches (allow when not given). A denied request is answered 403 from the
 * request stage, before any content handler runs and before any file is
 * opened, so a denied path that does not exist is 403, not 404.
 *
 *   [ACCESS]
 *       Allow 127.0.0.1 path /admin      address and path: both must match
 *       Deny  all path /admin            every client, both families
 *       Deny  192.168.1.0/24             an address (CIDR) alone
 *       Allow path /public               a path prefix alone
 *       Deny  regex ^/private/.*\.key$   a POSIX extended regular expression
 *       Default deny
 *
 * Guarantees:
 *   - every rule is parsed and checked when the configuration is loaded
 *     (site_init): a bad address, a prefix length out of range, a bad regular
 *     expression, an unknown keyword or a path not starting with '/' refuses
 *     the configuration with "file:line: reason";
 *   - the request check allocates nothing (glibc; see access_regex_match) and
 *     compares pre-parsed binary networks: two masked 64-bit words per
 *     address rule;
 *   - an IPv4 client is IPv4 whether it arrived on an IPv4 socket or as
 *     ::ffff:a.b.c.d on a dual-stack IPv6 socket: IPv4 rules match it and
 *     IPv6 rules do not;
 *   - path rules see the decoded, normalised path (api->path), so encoding
 *     tricks ("/%61dmin", "//admin", "/x/../admin") cannot get around them.
 *
 * Plugin-wide settings come from conf_dir/plugins/access.conf ([ACCESS]
 * LogDenied), a declared key (access_keys) the server reads into every
 * configuration it builds; a request uses the value of its own
 * configuration, so a refused reload changes nothing.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <regex.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <monkey/mk_plugin.h>
#include <monkey/mk_util.h>

#define ACCESS_PATH_MAX 4096
#define ACCESS_ADDR_MAX 64  /* longest address word accepted, prefix included */
#define ACCESS_LOG_PATH 200 /* bytes of the path written in a denial log line */
#define ACCESS_REGEX_STACK 1024

enum access_action { ACCESS_ALLOW = 0, ACCESS_DENY = 1 };

enum access_path_kind { ACCESS_PATH_ANY = 0, ACCESS_PATH_PREFIX, ACCESS_PATH_REGEX };

/*
 * One rule. Addresses are 16 bytes held as two words: an IPv6 address as is,
 * an IPv4 address in its mapped form ::ffff:a.b.c.d with the prefix length
 * raised by 96, so both families are matched by the same two comparisons.
 * `net` has every bit outside `mask` cleared.
 */
struct access_rule {
    uint8_t action;    /* enum access_action */
    bool any_address;  /* "all", or no address at all: matches every client */
    uint8_t path_kind; /* enum access_path_kind */
    char *where;       /* "file:line" of the rule, owned, for denial logs */
    struct mk_cidr net;
    char *prefix; /* ACCESS_PATH_PREFIX: owned, without a trailing '/' (but "/") */
    size_t prefix_len;
    regex_t re; /* ACCESS_PATH_REGEX: REG_EXTENDED | REG_NOSUB */
};

/* What site_init() stores for a site with an [ACCESS] section. */
struct access_site {
    uint8_t default_deny; /* Default deny */
    int default_line;     /* line of Default (api->conf_where), 0 when not given */
    char *default_where;  /* "file:line" of Default, owned; NULL when not given */
    size_t count;         /* rules fully built (site_free releases these) */
    struct access_rule rules[];
};

/* The client as the rules see it (mk_cidr_client). */
struct access_client {
    int family;
    uint8_t key[16];
};

/* access.conf, as the server filled it for one configuration. */
struct access_conf {
    bool log_denied;
};

static const struct mk_conf_key access_keys[] = {
    {"LogDenied", MK_CONF_BOOL, 0, MK_CONF_FIELD(struct access_conf, log_denied), 0, 0, "Off"},
    {NULL},
};

/* The [ACCESS] rules of site files are read by access_site_init(), in file order. */
static const struct mk_conf_schema access_schema = {
    .section = "ACCESS",
    .file = "access.conf",
    .keys = access_keys,
    .size = sizeof(struct access_conf),
};

static const struct mk_api *api;

MK_PLUGIN_DECLARE(access);

/* Process start: keep the API (the server reads and checks access.conf). */
static int access_init(const struct mk_api *server_api, const char *conf_dir)
{
    (void) conf_dir;
    api = server_api;
    return MK_OK;
}

/* ---- parsing rules (site_init) ---------------------------------------------- */

/* Write "file:line: reason" into err; returns MK_ERR for the caller to return. */
__attribute__((format(printf, 5, 6))) static int
access_fail(char *err, size_t errlen, const struct mk_conf *conf, int line, const char *fmt, ...)
{
    va_list ap;
    char at[MK_CONF_AT_LEN];
    int n = snprintf(err, errlen, "%s: ", mk_api_conf_at(api, conf, line, at, sizeof(at)));

    if (n < 0 || (size_t) n >= errlen) {
        return MK_ERR;
    }
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t) n, fmt, ap);
    va_end(ap);
    return MK_ERR;
}

/* The next word of *p (words are separated by spaces and tabs); NULL at the end. */
static const char *access_word(const char **p, size_t *len)
{
    const char *s = *p;

    while (*s == ' ' || *s == '\t') {
        s++;
    }
    if (!*s) {
        *p = s;
        return NULL;
    }
    const char *e = s;
    while (*e && *e != ' ' && *e != '\t') {
        e++;
    }
    *len = (size_t) (e - s);
    *p = e;
    return s;
}

/* Is the word [w, w + len) `name`, ignoring case? */
static bool access_word_is(const char *w, size_t len, const char *name)
{
    return strlen(name) == len && strncasecmp(w, name, len) == 0;
}

/*
 * Parse an address word: "all", an IPv4 or IPv6 address, optionally followed
 * by "/LEN". Without /LEN it names one host. An IPv4-mapped IPv6 address
 * (::ffff:a.b.c.d/LEN, LEN >= 96) is the IPv4 rule it maps. Warns when bits
 * beyond the prefix are set (they are ignored).
 */
static int access_parse_addr(struct access_rule *rule, const char *w, size_t len,
                             const struct mk_conf *conf, int line, char *err, size_t errlen)
{
    if (access_word_is(w, len, "all")) {
        rule->any_address = true;
        return MK_OK;
    }
    switch (mk_cidr_parse(w, len, &rule->net)) {
    case MK_CIDR_OK:
        break;
    case MK_CIDR_BAD_PREFIX:
        return access_fail(err, errlen, conf, line,
                           "'%.*s': the prefix length after '/' must be a number", (int) len, w);
    case MK_CIDR_RANGE: {
        const char *slash = memchr(w, '/', len);
        bool v6 = memchr(w, ':', len) != NULL;
        return access_fail(
            err, errlen, conf, line, "'%.*s': prefix length %.*s is out of range for %s (0 to %u)",
            (int) len, w, (int) (w + len - slash), slash, v6 ? "IPv6" : "IPv4", v6 ? 128u : 32u);
    }
    case MK_CIDR_MAPPED:
        return access_fail(err, errlen, conf, line,
                           "'%.*s': an IPv4-mapped address needs a prefix of 96 or more "
                           "(or write it as IPv4)",
                           (int) len, w);
    default:
        return access_fail(err, errlen, conf, line,
                           "'%.*s' is not an IPv4 or IPv6 address (nor 'all')", (int) len, w);
    }
    if (rule->net.host_bits) {
        char at[MK_CONF_AT_LEN];
        api->log(MK_PLUGIN_LOG_WARN,
                 "%s: '%.*s' has bits set beyond its prefix length; they are ignored",
                 mk_api_conf_at(api, conf, line, at, sizeof(at)), (int) len, w);
    }
    return MK_OK;
}

/* True if the prefix has no empty, "." or ".." segment (as request paths do not). */
static bool access_prefix_normal(const char *p, size_t len)
{
    size_t i = 1;

    while (i < len) {
        size_t s = i;
        while (i < len && p[i] != '/') {
            i++;
        }
        size_t seg = i - s;
        if (seg == 0 || (seg == 1 && p[s] == '.') || (seg == 2 && p[s] == '.' && p[s + 1] == '.')) {
            return false;
        }
        i++;
    }
    return true;
}

/* Parse "path PREFIX" or "regex RE"; `rest` runs to the end of the line. */
static int access_parse_path(struct access_rule *rule, bool regex, const char *rest,
                             const struct mk_conf *conf, int line, char *err, size_t errlen)
{
    while (*rest == ' ' || *rest == '\t') {
        rest++;
    }
    if (!*rest) {
        return access_fail(err, errlen, conf, line, "'%s' needs %s", regex ? "regex" : "path",
                           regex ? "a regular expression" : "a path prefix");
    }
    if (regex) {
        int rc = regcomp(&rule->re, rest, REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char msg[256];
            regerror(rc, &rule->re, msg, sizeof(msg));
            return access_fail(err, errlen, conf, line, "bad regular expression '%s': %s", rest,
                               msg);
        }
        rule->path_kind = ACCESS_PATH_REGEX;
        return MK_OK;
    }
    size_t len = strlen(rest);
    if (rest[0] != '/') {
        return access_fail(err, errlen, conf, line, "path prefix '%s' must start with '/'", rest);
    }
    while (len > 1 && rest[len - 1] == '/') {
        len--; /* "/admin/" is "/admin": both cover /admin and below */
    }
    if (!access_prefix_normal(rest, len)) {
        return access_fail(err, errlen, conf, line,
                           "path prefix '%s' has an empty, '.' or '..' segment: request paths "
                           "are normalised and would never match it",
                           rest);
    }
    rule->prefix = strndup(rest, len);
    if (!rule->prefix) {
        return access_fail(err, errlen, conf, line, "out of memory");
    }
    rule->prefix_len = len;
    rule->path_kind = ACCESS_PATH_PREFIX;
    return MK_OK;
}

/*
 * Parse the value of an Allow or Deny line into rule:
 *   ADDRESS                     an address rule
 *   ADDRESS path PREFIX         both must match
 *   ADDRESS regex RE
 *   path PREFIX | regex RE      a path rule for every client
 * On MK_ERR the rule holds nothing to release.
 */
static int access_parse_rule(struct access_rule *rule, const char *value,
                             const struct mk_conf *conf, int line, char *err, size_t errlen)
{
    const char *p = value;
    size_t len = 0;
    const char *w = access_word(&p, &len);

    if (!w) {
        return access_fail(err, errlen, conf, line, "the rule is empty");
    }
    rule->any_address = true; /* until an address is given */
    if (!access_word_is(w, len, "path") && !access_word_is(w, len, "regex")) {
        rule->any_address = false;
        if (access_parse_addr(rule, w, len, conf, line, err, errlen) != MK_OK) {
            return MK_ERR;
        }
        w = access_word(&p, &len);
        if (!w) {
            return MK_OK;
        }
        if (!access_word_is(w, len, "path") && !access_word_is(w, len, "regex")) {
            return access_fail(err, errlen, conf, line,
                               "unexpected '%.*s' after the address (expected 'path PREFIX' or "
                               "'regex RE')",
                               (int) len, w);
        }
    }
    return access_parse_path(rule, access_word_is(w, len, "regex"), p, conf, line, err, errlen);
}

/* Release what access_site_init() built (also a partly built site); NULL is fine. */
static void access_site_free(void *data)
{
    struct access_site *site = data;

    if (!site) {
        return;
    }
    for (size_t i = 0; i < site->count; i++) {
        struct access_rule *rule = &site->rules[i];
        if (rule->path_kind == ACCESS_PATH_REGEX) {
            regfree(&rule->re);
        }
        free(rule->prefix);
        free(rule->where);
    }
    free(site->default_where);
    free(site);
}

/*
 * Handle one [ACCESS] line of a site file: a Default, or an Allow/Deny rule
 * appended to site->rules (room was made for every line). MK_ERR with
 * "file:line: reason" in err.
 */
static int access_site_line(struct access_site *site, const struct mk_conf *conf, const char *key,
                            const char *value, int line, char *err, size_t errlen)
{
    if (strcasecmp(key, "Default") == 0) {
        if (strcasecmp(value, "allow") != 0 && strcasecmp(value, "deny") != 0) {
            return access_fail(err, errlen, conf, line, "Default takes allow or deny, not '%s'",
                               value);
        }
        if (site->default_line) {
            /* "line N" when both are in one file, else "file:N" */
            char here[MK_CONF_AT_LEN];
            const char *first = site->default_where, *colon = strrchr(first, ':');
            size_t flen = (size_t) (colon - first);
            mk_api_conf_at(api, conf, line, here, sizeof(here));
            bool same = strncmp(here, first, flen) == 0 && here[flen] == ':';
            return access_fail(err, errlen, conf, line, "Default given twice (first at %s%s)",
                               same ? "line " : "", same ? colon + 1 : first);
        }
        char at[MK_CONF_AT_LEN];
        site->default_deny = strcasecmp(value, "deny") == 0;
        site->default_line = line;
        site->default_where = strdup(mk_api_conf_at(api, conf, line, at, sizeof(at)));
        return site->default_where ? MK_OK : access_fail(err, errlen, conf, line, "out of memory");
    }
    bool allow = strcasecmp(key, "Allow") == 0;
    if (!allow && strcasecmp(key, "Deny") != 0) {
        return access_fail(err, errlen, conf, line, "unknown key '%s' (Allow, Deny or Default)",
                           key);
    }
    struct access_rule *rule = &site->rules[site->count];
    memset(rule, 0, sizeof(*rule));
    rule->action = allow ? ACCESS_ALLOW : ACCESS_DENY;
    char at[MK_CONF_AT_LEN];
    rule->where = strdup(mk_api_conf_at(api, conf, line, at, sizeof(at)));
    if (!rule->where) {
        return access_fail(err, errlen, conf, line, "out of memory");
    }
    if (access_parse_rule(rule, value, conf, line, err, errlen) != MK_OK) {
        free(rule->where);
        return MK_ERR;
    }
    site->count++;
    return MK_OK;
}

/*
 * Build the rules of the site's [ACCESS] sections, in file order. A site
 * without one stores nothing (every request allowed, no cost). Controlling
 * thread; allocates, creates nothing else, so it is the same under checking.
 */
static int access_site_init(const struct mk_site *s, const struct mk_conf *conf, void **data,
                            char *err, size_t errlen)
{
    const char *section, *key, *value;
    void *cursor = NULL;
    size_t entries = 0;
    int line;

    (void) s;
    *data = NULL;
    while (api->conf_next(conf, &cursor, &section, &key, &value, &line)) {
        entries += strcasecmp(section, "ACCESS") == 0;
    }
    if (entries == 0) {
        return MK_OK;
    }
    struct access_site *site = calloc(1, sizeof(*site) + entries * sizeof(site->rules[0]));
    if (!site) {
        snprintf(err, errlen, "%s: out of memory", api->conf_path(conf));
        return MK_ERR;
    }
    cursor = NULL;
    while (api->conf_next(conf, &cursor, &section, &key, &value, &line)) {
        if (strcasecmp(section, "ACCESS") != 0) {
            continue; /* [HOST] and other plugins' sections */
        }
        if (access_site_line(site, conf, key, value, line, err, errlen) != MK_OK) {
            access_site_free(site);
            return MK_ERR;
        }
    }
    *data = site;
    return MK_OK;
}

/* ---- the check (request stage, worker threads) ------------------------------ */

/* Does the prefix cover path at a segment boundary? "/a" covers "/a", "/a/", "/a/b". */
static bool access_prefix_match(const struct access_rule *rule, const char *path, size_t len)
{
    size_t n = rule->prefix_len;

    if (len < n || memcmp(path, rule->prefix, n) != 0) {
        return false;
    }
    return len == n || path[n] == '/' || rule->prefix[n - 1] == '/';
}

/*
 * Does the regular expression match the path? With REG_STARTEND (glibc) the
 * path is matched in place; without it (musl) a NUL-terminated copy is made,
 * on the stack when short, else in request memory. -1 when memory is short.
 */
static int access_regex_match(const struct access_rule *rule, struct mk_request *r,
                              const char *path, size_t len)
{
#ifdef REG_STARTEND
    regmatch_t m = {.rm_so = 0, .rm_eo = (regoff_t) len};

    (void) r;
    return regexec(&rule->re, path, 1, &m, REG_STARTEND) == 0;
#else
    char stack[ACCESS_REGEX_STACK];
    char *copy = len < sizeof(stack) ? stack : api->alloc(r, len + 1);

    if (!copy) {
        return -1;
    }
    memcpy(copy, path, len);
    copy[len] = '\0';
    return regexec(&rule->re, copy, 0, NULL, 0) == 0;
#endif
}

/*
 * Log a denial: client, method, path (control bytes shown as '?') and the
 * line that decided (a rule, or Default when `by_default`).
 */
static void access_log(struct mk_request *r, const char *where, bool by_default, const char *path,
                       size_t len)
{
    char addr[64], shown[ACCESS_LOG_PATH + 1];
    size_t mlen, n = len < ACCESS_LOG_PATH ? len : ACCESS_LOG_PATH;
    const char *method = api->method(r, &mlen);

    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char) path[i];
        shown[i] = ch < 0x20 || ch == 0x7f ? '?' : (char) ch;
    }
    shown[n] = '\0';
    if (!api->remote_addr(r, addr, sizeof(addr))) {
        snprintf(addr, sizeof(addr), "?");
    }
    api->log(MK_PLUGIN_LOG_INFO, "access: denied %s %.*s %s%s by %s at %s", addr, (int) mlen,
             method, shown, n < len ? "..." : "", by_default ? "Default" : "rule", where);
}

/* Deny the request: 403, logged when LogDenied is on. */
static int access_deny(struct mk_request *r, const char *where, bool by_default, const char *path,
                       size_t len)
{
    const struct access_conf *conf = api->plugin_conf(api->site(r), MK_PLUGIN_SELF(access));

    if (conf && conf->log_denied) {
        access_log(r, where, by_default, path, len);
    }
    return 403;
}

/*
 * The request stage: the first matching rule of the request's site decides;
 * MK_OK (go on) or 403. A request target that is not a path (OPTIONS *,
 * CONNECT) matches no path rule. Allocates nothing (see access_regex_match).
 */
static int access_request(struct mk_request *r)
{
    const struct access_site *site = api->site_data(api->site(r), MK_PLUGIN_SELF(access));
    struct access_client client = {0};
    bool have_client = false;
    size_t len;

    if (!site) {
        return MK_OK;
    }
    const char *path = api->path(r, &len);
    bool is_path = len > 0 && path[0] == '/';

    for (size_t i = 0; i < site->count; i++) {
        const struct access_rule *rule = &site->rules[i];
        if (!rule->any_address) {
            if (!have_client) {
                socklen_t salen;
                mk_cidr_client(api->remote_sockaddr(r, &salen), client.key, &client.family);
                have_client = true;
            }
            if (!mk_cidr_match(&rule->net, client.key, client.family)) {
                continue;
            }
        }
        if (rule->path_kind == ACCESS_PATH_PREFIX &&
            (!is_path || !access_prefix_match(rule, path, len))) {
            continue;
        }
        if (rule->path_kind == ACCESS_PATH_REGEX) {
            if (!is_path) {
                continue;
            }
            int m = access_regex_match(rule, r, path, len);
            if (m < 0) {
                return 503;
            }
            if (m == 0) {
                continue;
            }
        }
        if (rule->action == ACCESS_ALLOW) {
            return MK_OK;
        }
        return access_deny(r, rule->where, false, path, len);
    }
    if (!site->default_deny) {
        return MK_OK;
    }
    return access_deny(r, site->default_where, true, path, len);
}

MK_PLUGIN_DEFINE(access) = {
    MK_PLUGIN_ABI_INIT,
    .name = "access",
    .version = "1.0",
    .description = "allow and deny requests by client address and path, per site (Mandril)",
    .init = access_init,
    .request = access_request,
    .site_sections = (const char *const[]){"ACCESS", NULL},
    .site_init = access_site_init,
    .site_free = access_site_free,
    .conf_schema = &access_schema,
};
