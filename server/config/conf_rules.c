/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * conf_rules.c: the [RULE] sections of a site file (docs/configuration.md,
 * "Request rules") into the site's table of rules (server/http/rules.h),
 * in file order. Each section is one key table read by the schema engine;
 * the checks across its keys (one path condition, one action, a target's
 * groups) follow, every error as "file:line: reason". The table belongs to
 * the site, so a reload swaps it with the configuration and frees it only
 * once no request of the old configuration is left.
 */
#include "conf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/stat.h>

#ifdef MK_HAVE_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

#include <monkey/mk_common.h>

#include "../../core/fs.h"
#include "../../core/memory.h"
#include "../../core/schema.h"
#include "../http/http_chars.h"
#include "../http/path.h"
#include "../http/rules.h"
#include "conf_ratelimit.h"

/* A [RULE] as the schema reads it, before the checks across keys. */
struct mk_rule_conf {
    char *path, *prefix, *regex, *header, *redirect, *ret, *rewrite, *ratelimit, *cache;
    char *query, *query_regex, *scheme, *ret_file;
    uint64_t max_body;
    uint32_t timeout_ms, send_timeout_ms;
    bool listing;
    struct mk_conf_words methods, hosts, index;
    struct mk_rule_access *access; /* Allow and Deny words, in file order */
    size_t n_access;
    struct mk_rule_header *headers; /* ResponseHeader lines */
    size_t n_headers;
    struct mk_rule_header *req_headers; /* RequestHeader lines */
    size_t n_req_headers;
    struct mk_rule_cors *cors;
};

/* ResponseHeader [always] set|add|remove NAME [VALUE], once a line. */
static int mk_rule_set_header(void *obj, const struct mk_conf_key *k, const char *value,
                              const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct mk_rule_conf *rc = obj;
    struct mk_rule_header h;

    (void) k;
    (void) origin;
    if (mk_rule_header_parse(&h, value, reason, len) != MK_OK) {
        return MK_ERR;
    }
    rc->headers = mk_realloc(rc->headers, (rc->n_headers + 1) * sizeof(*rc->headers));
    rc->headers[rc->n_headers++] = h;
    return MK_OK;
}

/* RequestHeader set|add|remove NAME [VALUE], once a line. */
static int mk_rule_set_request_header(void *obj, const struct mk_conf_key *k, const char *value,
                                      const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct mk_rule_conf *rc = obj;
    struct mk_rule_header h;

    (void) k;
    (void) origin;
    if (mk_rule_request_header_parse(&h, value, reason, len) != MK_OK) {
        return MK_ERR;
    }
    rc->req_headers =
        mk_realloc(rc->req_headers, (rc->n_req_headers + 1) * sizeof(*rc->req_headers));
    rc->req_headers[rc->n_req_headers++] = h;
    return MK_OK;
}

/* Cors origins=... [methods=...] ..., once. */
static int mk_rule_set_cors(void *obj, const struct mk_conf_key *k, const char *value,
                            const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct mk_rule_conf *rc = obj;

    (void) k;
    (void) origin;
    mk_rule_cors_free(rc->cors);
    rc->cors = mk_alloc(sizeof(*rc->cors));
    if (mk_rule_cors_parse(rc->cors, value, reason, len) != MK_OK) {
        mk_rule_cors_free(rc->cors);
        rc->cors = NULL;
        return MK_ERR;
    }
    return MK_OK;
}

/* Allow and Deny WORD..., once a line, into one list in file order. */
static int mk_rule_set_access(void *obj, const struct mk_conf_key *k, const char *value,
                              const struct mk_conf_origin *origin, char *reason, size_t len)
{
    struct mk_rule_conf *rc = obj;

    (void) origin;
    return mk_rule_access_parse(&rc->access, &rc->n_access, k->name[0] == 'A', value, reason, len);
}

static void mk_rule_conf_free(void *obj, int site)
{
    struct mk_rule_conf *rc = obj;

    (void) site;
    mk_free(rc->access);
    rc->access = NULL;
    rc->n_access = 0;
    mk_rule_headers_free(rc->headers, rc->n_headers);
    mk_rule_headers_free(rc->req_headers, rc->n_req_headers);
    mk_rule_cors_free(rc->cors);
    rc->cors = NULL;
    rc->headers = rc->req_headers = NULL;
    rc->n_headers = rc->n_req_headers = 0;
}

#define MK_RC(member) MK_CONF_FIELD(struct mk_rule_conf, member)

/* In the order of docs/configuration.md; the indexes below follow it. */
static const struct mk_conf_key mk_rule_keys[] = {
    {"Path", MK_CONF_STRING, MK_CONF_SITE, MK_RC(path), 0, 0, NULL},
    {"Prefix", MK_CONF_STRING, MK_CONF_SITE, MK_RC(prefix), 0, 0, NULL},
#ifdef MK_HAVE_PCRE2
    {"Regex", MK_CONF_STRING, MK_CONF_SITE, MK_RC(regex), 0, 0, NULL},
#endif
    {"Method", MK_CONF_WORDS, MK_CONF_SITE | MK_CONF_MULTI, MK_RC(methods), 0, 0, NULL},
    {"Host", MK_CONF_WORDS, MK_CONF_SITE | MK_CONF_MULTI, MK_RC(hosts), 0, 0, NULL},
    {"Header", MK_CONF_STRING, MK_CONF_SITE, MK_RC(header), 0, 0, NULL},
    {"Redirect", MK_CONF_STRING, MK_CONF_SITE, MK_RC(redirect), 0, 0, NULL},
    {"Return", MK_CONF_STRING, MK_CONF_SITE, MK_RC(ret), 0, 0, NULL},
    {"Rewrite", MK_CONF_STRING, MK_CONF_SITE, MK_RC(rewrite), 0, 0, NULL},
    {"ResponseHeader", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI, 0, 0, 0, 0, NULL,
     .set = mk_rule_set_header},
    {"RequestHeader", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI, 0, 0, 0, 0, NULL,
     .set = mk_rule_set_request_header},
    {"RateLimit", MK_CONF_STRING, MK_CONF_SITE, MK_RC(ratelimit), 0, 0, NULL},
    {"Cors", MK_CONF_CUSTOM, MK_CONF_SITE, 0, 0, 0, 0, NULL, .set = mk_rule_set_cors},
    {"IndexFiles", MK_CONF_WORDS, MK_CONF_SITE, MK_RC(index), 0, 0, NULL,
     .check = mk_config_check_index_file},
    {"CacheControl", MK_CONF_STRING, MK_CONF_SITE, MK_RC(cache), 0, 0, NULL},
    {"Query", MK_CONF_STRING, MK_CONF_SITE, MK_RC(query), 0, 0, NULL},
#ifdef MK_HAVE_PCRE2
    {"QueryRegex", MK_CONF_STRING, MK_CONF_SITE, MK_RC(query_regex), 0, 0, NULL},
#endif
    {"MaxRequestBody", MK_CONF_SIZE, MK_CONF_SITE, MK_RC(max_body), 0, INT64_MAX, NULL},
    {"DirectoryListing", MK_CONF_BOOL, MK_CONF_SITE, MK_RC(listing), 0, 0, NULL},
    {"Allow", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI, 0, 0, 0, 0, NULL,
     .set = mk_rule_set_access},
    {"Deny", MK_CONF_CUSTOM, MK_CONF_SITE | MK_CONF_MULTI, 0, 0, 0, 0, NULL,
     .set = mk_rule_set_access},
    {"Scheme", MK_CONF_STRING, MK_CONF_SITE, MK_RC(scheme), 0, 0, NULL},
    {"ReturnFile", MK_CONF_STRING, MK_CONF_SITE, MK_RC(ret_file), 0, 0, NULL},
    {"Timeout", MK_CONF_DURATION, MK_CONF_SITE, MK_RC(timeout_ms), 1, 3600000, NULL},
    {"SendTimeout", MK_CONF_DURATION, MK_CONF_SITE, MK_RC(send_timeout_ms), 1, 3600000, NULL},
    {NULL},
};

#ifdef MK_HAVE_PCRE2
enum {
    K_PATH,
    K_PREFIX,
    K_REGEX,
    K_METHOD,
    K_HOST,
    K_HEADER,
    K_REDIRECT,
    K_RETURN,
    K_REWRITE,
};
static const struct mk_schema_absent *const mk_rule_absent = NULL;
#else
enum { K_PATH, K_PREFIX, K_METHOD, K_HOST, K_HEADER, K_REDIRECT, K_RETURN, K_REWRITE, K_REGEX };
static const struct mk_schema_absent mk_rule_absent[] = {
    {"Regex", NULL, "PCRE2 (regular expressions of [RULE]; MK_PCRE2, libpcre2-dev)", false},
    {"QueryRegex", NULL, "PCRE2 (regular expressions of [RULE]; MK_PCRE2, libpcre2-dev)", false},
    {NULL},
};
#endif

static const struct mk_conf_schema mk_rule_schema = {
    .section = "RULE",
    .keys = mk_rule_keys,
    .site_size = sizeof(struct mk_rule_conf),
    .free = mk_rule_conf_free,
};

const char *mk_conf_rule_key(size_t i)
{
    return i < sizeof(mk_rule_keys) / sizeof(mk_rule_keys[0]) - 1 ? mk_rule_keys[i].name : NULL;
}

#define ERR(line, ...) mk_conf_error(conf, (line), err, errlen, __VA_ARGS__)

/* The line of key `name` in the section (0: not given), from the lines the schema filled. */
static int mk_rule_key_line(const int *lines, const char *name)
{
    for (size_t k = 0; mk_rule_keys[k].name; k++) {
        if (strcmp(mk_rule_keys[k].name, name) == 0) {
            return lines[k];
        }
    }
    return 0;
}

/* A normalised path, as Path and Prefix take: the path a request for it has. */
static bool mk_rule_path_ok(const char *value)
{
    size_t n = strlen(value);
    char *norm = mk_alloc(n + 2);
    ssize_t r = value[0] == '/' && !strchr(value, '?') ? mk_path_normalize(value, n, norm) : -1;
    bool ok = r > 0 && (size_t) r == n && memcmp(norm, value, n) == 0;

    mk_free(norm);
    return ok;
}

#ifdef MK_HAVE_PCRE2
static int mk_rule_group_named(void *ctx, const char *name, size_t len)
{
    char buf[64];

    if (len >= sizeof(buf)) {
        return -1;
    }
    memcpy(buf, name, len);
    buf[len] = '\0';
    int n = pcre2_substring_number_from_name(ctx, (PCRE2_SPTR) buf);
    return n > 0 ? n : -1;
}

/* Compile `expr` of key `key` into *re (with its JIT when there is one): false with the error. */
static bool mk_rule_compile(void **re, bool *jit, const char *key, const char *expr,
                            const struct mk_conf *conf, int line, char *err, size_t errlen)
{
    int code;
    PCRE2_SIZE off;

    *re = pcre2_compile((PCRE2_SPTR) expr, PCRE2_ZERO_TERMINATED, 0, &code, &off, NULL);
    if (!*re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof(msg));
        return ERR(line, "%s %s: %s at offset %zu", key, expr, (const char *) msg, (size_t) off);
    }
    *jit = pcre2_jit_compile(*re, PCRE2_JIT_COMPLETE) == 0; /* else interpreted */
    return true;
}

static bool mk_rule_regex(struct mk_rule *r, const char *expr, const struct mk_conf *conf, int line,
                          char *err, size_t errlen)
{
    uint32_t captures = 0;

    if (!mk_rule_compile(&r->re, &r->jit, "Regex", expr, conf, line, err, errlen)) {
        return false;
    }
    pcre2_pattern_info(r->re, PCRE2_INFO_CAPTURECOUNT, &captures);
    if (captures > MK_RULE_GROUPS_MAX) {
        return ERR(line, "Regex %s: %u groups, more than %d", expr, captures, MK_RULE_GROUPS_MAX);
    }
    r->select = MK_RULE_REGEX;
    r->n_groups = captures + 1;
    return true;
}
#endif

/* "STATUS REST": the status within [lo, hi] and where REST starts (NULL: none). */
static bool mk_rule_status(const char *value, unsigned lo, unsigned hi, uint16_t *status,
                           const char **rest)
{
    const char *cur = value, *w;
    size_t len;
    uint64_t s;

    if (!mk_conf_word(&cur, &w, &len) || !mk_str_to_u64(w, len, hi, &s) || s < lo) {
        return false;
    }
    *status = (uint16_t) s;
    while (*cur == ' ' || *cur == '\t') {
        cur++;
    }
    *rest = *cur ? cur : NULL;
    return true;
}

/*
 * ReturnFile STATUS FILE: the file (absolute, or relative to the
 * configuration directory, as DocumentRoot is) read now, whole, at most
 * MK_RULE_FILE_MAX bytes.
 */
static bool mk_rule_return_file(struct mk_rule *r, const char *value, int line, const char *confdir,
                                const struct mk_conf *conf, char *err, size_t errlen)
{
    const char *name = NULL;
    struct stat st;

    if (!mk_rule_status(value, 200, 599, &r->status, &name) || !name || r->status == 204 ||
        r->status == 304) {
        return ERR(line, "ReturnFile %s: expected a status (200 to 599, not 204 or 304) and a file",
                   value);
    }
    r->body_file = mk_fs_path_join(confdir, name);
    int fd = open(r->body_file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0 || fstat(fd, &st) < 0) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
        }
        return ERR(line, "ReturnFile %s: %s: %s", value, r->body_file, strerror(e));
    }
    if (!S_ISREG(st.st_mode) || st.st_size > MK_RULE_FILE_MAX) {
        close(fd);
        return ERR(line, "ReturnFile %s: %s: %s", value, r->body_file,
                   S_ISREG(st.st_mode) ? "larger than 1M (the most ReturnFile reads)"
                                       : "not a regular file");
    }
    r->body_len = (size_t) st.st_size;
    r->body = mk_alloc(r->body_len + 1);
    size_t got = 0;
    while (got < r->body_len) {
        ssize_t n = read(fd, r->body + got, r->body_len - got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) { /* shorter than fstat said: it changed as it was read */
            int e = n < 0 ? errno : EIO;
            close(fd);
            return ERR(line, "ReturnFile %s: %s: %s", value, r->body_file, strerror(e));
        }
        got += (size_t) n;
    }
    close(fd);
    r->body[r->body_len] = '\0';
    r->action = MK_RULE_RETURN;
    return true;
}

/* The action of a rule: exactly one of Redirect, Return, ReturnFile and Rewrite. */
static bool mk_rule_action(struct mk_rule *r, const struct mk_rule_conf *rc, const int *lines,
                           int line, const char *confdir, const struct mk_conf *conf, char *err,
                           size_t errlen)
{
    char reason[256];
    const char *rest = NULL;
    int given = !!rc->redirect + !!rc->ret + !!rc->rewrite + !!rc->ret_file;

    if (given > 1 || (given == 0 && r->n_headers == 0 && r->n_req_headers == 0 && !r->limit &&
                      !r->cors && !mk_rule_sets(r) && !r->access)) {
        return ERR(line,
                   "[RULE] needs %s of Redirect, Return, ReturnFile, Rewrite (or ResponseHeader, "
                   "RequestHeader, RateLimit, Cors, Allow, Deny lines, a setting)",
                   given ? "only one" : "one");
    }
    if (rc->ret_file) {
        return mk_rule_return_file(r, rc->ret_file, mk_rule_key_line(lines, "ReturnFile"), confdir,
                                   conf, err, errlen);
    }
    if (given == 0) {
        r->action = MK_RULE_PASS;
        return true;
    }
    void *ctx = NULL;
    int (*named)(void *, const char *, size_t) = NULL;
#ifdef MK_HAVE_PCRE2
    ctx = r->re;
    named = r->re ? mk_rule_group_named : NULL;
#endif
    if (rc->redirect) {
        static const uint16_t ok[] = {301, 302, 303, 307, 308};
        bool known = mk_rule_status(rc->redirect, 301, 308, &r->status, &rest);
        known = known && rest && !strpbrk(rest, " \t");
        bool listed = false;
        for (size_t i = 0; known && i < sizeof(ok) / sizeof(ok[0]); i++) {
            listed |= ok[i] == r->status;
        }
        if (!listed) {
            return ERR(lines[K_REDIRECT],
                       "Redirect %s: expected a status (301, 302, 303, 307 or 308) and a target",
                       rc->redirect);
        }
        if (mk_rule_template_parse(&r->target, rest, r->n_groups, named, ctx, reason,
                                   sizeof(reason)) != MK_OK) {
            return ERR(lines[K_REDIRECT], "Redirect: %s", reason);
        }
        r->action = MK_RULE_REDIRECT;
        return true;
    }
    if (rc->ret) {
        if (!mk_rule_status(rc->ret, 200, 599, &r->status, &rest)) {
            return ERR(lines[K_RETURN],
                       "Return %s: expected a status (200 to 599) and an "
                       "optional text",
                       rc->ret);
        }
        if (rest && (r->status == 204 || r->status == 304)) {
            return ERR(lines[K_RETURN], "Return %s: a %u response has no body", rc->ret, r->status);
        }
        if (rest) {
            r->body_len = strlen(rest) + 1;
            r->body = mk_alloc(r->body_len + 1);
            memcpy(r->body, rest, r->body_len - 1);
            memcpy(r->body + r->body_len - 1, "\n", 2);
        }
        r->action = MK_RULE_RETURN;
        return true;
    }
    if (mk_rule_template_parse(&r->target, rc->rewrite, r->n_groups, named, ctx, reason,
                               sizeof(reason)) != MK_OK) {
        return ERR(lines[K_REWRITE], "Rewrite: %s", reason);
    }
    if (r->target.absolute || strchr(rc->rewrite, '#')) {
        return ERR(lines[K_REWRITE],
                   "Rewrite %s: an internal rewrite is a path of this site "
                   "(and a query), no URL and no '#'",
                   rc->rewrite);
    }
    r->action = MK_RULE_REWRITE;
    return true;
}

/* Query NAME [VALUE] and QueryRegex EXPR. */
static bool mk_rule_query(struct mk_rule *r, const struct mk_rule_conf *rc, const int *lines,
                          const struct mk_conf *conf, char *err, size_t errlen)
{
    if (rc->query) {
        const char *cur = rc->query, *w;
        size_t len;
        mk_conf_word(&cur, &w, &len);
        if (memchr(w, '&', len) || memchr(w, '=', len) || memchr(w, '#', len)) {
            return ERR(mk_rule_key_line(lines, "Query"),
                       "Query %s: expected a parameter name (without '&', '=' or '#'), then an "
                       "optional value",
                       rc->query);
        }
        r->param = mk_strndup(w, len);
        r->param_len = len;
        while (*cur == ' ' || *cur == '\t') {
            cur++;
        }
        if (*cur) {
            r->param_value_len = strlen(cur);
            r->param_value = mk_strdup(cur);
        }
    }
#ifdef MK_HAVE_PCRE2
    if (rc->query_regex &&
        !mk_rule_compile(&r->query_re, &r->query_jit, "QueryRegex", rc->query_regex, conf,
                         mk_rule_key_line(lines, "QueryRegex"), err, errlen)) {
        return false;
    }
#else
    (void) lines;
    (void) conf;
    (void) err;
    (void) errlen;
#endif
    return true;
}

/* The conditions of a rule: one path condition at most, methods, hosts, a field, the query. */
static bool mk_rule_conditions(struct mk_rule *r, const struct mk_rule_conf *rc, const int *lines,
                               int line, const struct mk_conf *conf, char *err, size_t errlen)
{
    if (!!rc->path + !!rc->prefix + !!rc->regex > 1) {
        return ERR(line, "[RULE] takes one of Path, Prefix and Regex");
    }
    const char *p = rc->path ? rc->path : rc->prefix;
    if (p && !mk_rule_path_ok(p)) {
        return ERR(lines[rc->path ? K_PATH : K_PREFIX],
                   "%s %s: expected a normalised path such as /blog/, without query",
                   rc->path ? "Path" : "Prefix", p);
    }
    if (p) {
        r->select = rc->path ? MK_RULE_EXACT : MK_RULE_PREFIX;
        r->path = mk_strdup(p);
        r->path_len = strlen(p);
        r->n_groups = 2;
    }
    else {
        r->n_groups = 1;
    }
#ifdef MK_HAVE_PCRE2
    if (rc->regex && !mk_rule_regex(r, rc->regex, conf, lines[K_REGEX], err, errlen)) {
        return false;
    }
#endif
    for (size_t i = 0; i < rc->methods.n; i++) {
        const char *m = rc->methods.v[i];
        int k = mk_rule_method(m, strlen(m));
        if (k == MK_METHOD_UNKNOWN) {
            return ERR(lines[K_METHOD],
                       "Method %s: not a method (GET, HEAD, POST, PUT, DELETE, "
                       "OPTIONS, PATCH, TRACE, CONNECT)",
                       m);
        }
        r->methods |= 1u << k;
    }
    if (r->cors && r->methods && !(r->methods & (1u << MK_METHOD_OPTIONS))) {
        return ERR(lines[K_METHOD], "Cors: the rule's Method must take OPTIONS (the preflight's)");
    }
    if (rc->scheme) {
        if (strcasecmp(rc->scheme, "http") != 0 && strcasecmp(rc->scheme, "https") != 0) {
            return ERR(mk_rule_key_line(lines, "Scheme"), "Scheme %s: expected http or https",
                       rc->scheme);
        }
        r->scheme = rc->scheme[4] ? MK_RULE_HTTPS : MK_RULE_HTTP;
    }
    if (rc->hosts.n) {
        r->hosts = mk_calloc(rc->hosts.n + 1, sizeof(char *));
        for (size_t i = 0; i < rc->hosts.n; i++) {
            r->hosts[i] = mk_strdup(rc->hosts.v[i]);
            for (char *c = r->hosts[i]; *c; c++) {
                *c = mk_tolower(*c);
            }
        }
        r->n_hosts = rc->hosts.n;
    }
    if (rc->header) {
        const char *cur = rc->header, *w;
        size_t len;
        mk_conf_word(&cur, &w, &len);
        for (size_t i = 0; i < len; i++) {
            if (!mk_is_tchar((unsigned char) w[i])) {
                return ERR(lines[K_HEADER],
                           "Header %s: expected a field name, then an optional "
                           "value",
                           rc->header);
            }
        }
        r->field = mk_strndup(w, len);
        while (*cur == ' ' || *cur == '\t') {
            cur++;
        }
        r->field_value = *cur ? mk_strdup(cur) : NULL;
    }
    return mk_rule_query(r, rc, lines, conf, err, errlen);
}

/* CacheControl DIRECTIVES, checked as the site's are. */
static bool mk_rule_cache(struct mk_rule *r, const char *value, const struct mk_conf *conf,
                          const int *lines, char *err, size_t errlen)
{
    size_t k = 0;

    if (!value) {
        return true;
    }
    if (!mk_http_cache_control_check(value, &r->cache_max_age)) {
        while (strcmp(mk_rule_keys[k].name, "CacheControl") != 0) {
            k++;
        }
        return ERR(lines[k],
                   "CacheControl %s: not a Cache-Control value such as max-age=3600, immutable",
                   value);
    }
    r->cache_control = mk_strdup(value);
    r->cache_control_len = strlen(value);
    return true;
}

/* One [RULE] section into a rule, or NULL with "file:line: reason" in err. */
static struct mk_rule *mk_rule_read(const struct mk_conf *conf, const struct mk_conf_section *s,
                                    const char *confdir, char *err, size_t errlen)
{
    struct mk_rule_conf rc = {0};
    int lines[sizeof(mk_rule_keys) / sizeof(mk_rule_keys[0]) + 1] = {0};
    struct mk_schema_input in = {
        .conf = conf,
        .scope = MK_CONF_SITE,
        .only = s,
        .absent = mk_rule_absent,
        .lines = lines,
    };
    struct mk_rule *r = NULL;

    if (mk_schema_fill(&mk_rule_schema, &in, &rc, err, errlen) == MK_OK) {
        r = mk_calloc(1, sizeof(*r));
        r->line = s->line;
        r->max_body = mk_rule_key_line(lines, "MaxRequestBody") ? (int64_t) rc.max_body : -1;
        r->listing = mk_rule_key_line(lines, "DirectoryListing") ? (int8_t) rc.listing : -1;
        r->timeout_ms = rc.timeout_ms; /* at least 1 ms when given */
        r->send_timeout_ms = rc.send_timeout_ms;
        r->access = rc.access;
        r->n_access = rc.n_access;
        rc.access = NULL;
        rc.n_access = 0;
        r->headers = rc.headers; /* the rule's from now on */
        r->n_headers = rc.n_headers;
        r->req_headers = rc.req_headers;
        r->n_req_headers = rc.n_req_headers;
        r->cors = rc.cors;
        rc.cors = NULL;
        if (rc.index.n) {
            r->index_files = mk_calloc(rc.index.n, sizeof(char *));
            for (size_t i = 0; i < rc.index.n; i++) {
                r->index_files[i] = mk_strdup(rc.index.v[i]);
            }
            r->n_index_files = rc.index.n;
        }
        rc.headers = rc.req_headers = NULL;
        rc.n_headers = rc.n_req_headers = 0;
        if (!mk_rule_cache(r, rc.cache, conf, lines, err, errlen) ||
            !mk_rule_conditions(r, &rc, lines, s->line, conf, err, errlen) ||
            (rc.ratelimit && !mk_conf_rule_limit(r, rc.ratelimit, lines, conf, err, errlen)) ||
            !mk_rule_action(r, &rc, lines, s->line, confdir, conf, err, errlen)) {
            mk_rule_free(r);
            r = NULL;
        }
    }
    mk_schema_release(&mk_rule_schema, MK_CONF_SITE, &rc);
    return r;
}

bool mk_conf_rules_load(struct mk_site *vh, const struct mk_conf *conf, char *err, size_t errlen)
{
    struct mk_list *it;

    mk_list_foreach (it, &conf->sections) {
        const struct mk_conf_section *s = mk_list_entry(it, struct mk_conf_section, node);
        if (strcasecmp(s->name, "RULE") != 0) {
            continue;
        }
        struct mk_rule *r = mk_rule_read(conf, s, vh->cfg ? vh->cfg->confdir : NULL, err, errlen);
        if (!r) {
            return false;
        }
        if (!vh->rules) {
            vh->rules = mk_calloc(1, sizeof(*vh->rules));
        }
        struct mk_rules *t = vh->rules;
        t->v = mk_realloc(t->v, (t->n + 1) * sizeof(*t->v));
        t->v[t->n++] = r;
        if (r->n_groups > t->n_groups) {
            t->n_groups = r->n_groups;
        }
        t->max_body |= r->max_body >= 0;
        t->scheme |= r->scheme != 0;
    }
    return true;
}

void mk_conf_rules_free(struct mk_rules *t)
{
    if (!t) {
        return;
    }
    for (size_t i = 0; i < t->n; i++) {
        mk_rule_free(t->v[i]);
    }
    mk_free(t->v);
    mk_free(t);
}
