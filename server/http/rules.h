/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * rules.h: a site's request rules ([RULE] sections, docs/configuration.md):
 * which block a request selects, the targets of Redirect and Rewrite
 * built from it, and what a Cors line allows. Pure: no I/O, no globals; the tables are built once
 * per configuration (server/config/conf_rules.c), immutable afterwards and read by every worker at
 * once.
 *
 * A block selects requests by path (none: every path; Path: the path is
 * exactly; Prefix: the path starts with it by whole segments; Regex: a
 * PCRE2 expression finds a match in it), and optionally by method, host,
 * a request field, a query parameter and the raw query (QueryRegex). The
 * blocks are tried in file order; the first whose every condition holds is
 * the request's.
 *
 * A target is a template: literal text, $1 to $9 (the groups of the
 * match; for Path and Prefix, $1 is what follows the prefix), $NAME (a
 * named group), $scheme, $host, $port, $path (the normalised path),
 * $query, $request_uri (the path and query as the client sent them) and
 * $$ (a dollar sign). Whatever is expanded is percent-encoded where it
 * stands, so that it can never end the path, start a query or name an
 * authority: a target that starts with '/' stays a path of this server
 * (leading slashes of the result are folded into one), and an absolute
 * target's host is the text of the configuration, or $host.
 */
#ifndef MK_SERVER_RULES_H
#define MK_SERVER_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <monkey/mk_util.h>

#include "http.h"

struct mk_rate_limit;

/* The groups of a Regex a target may use ($0 is the whole match). */
#define MK_RULE_GROUPS_MAX 31
/* The longest target a template expands to; longer: the request fails with 500. */
#define MK_RULE_TARGET_MAX 8192

enum mk_rule_select {
    MK_RULE_ANY = 0, /* no path condition */
    MK_RULE_EXACT,
    MK_RULE_PREFIX,
    MK_RULE_REGEX,
};

/* A Scheme condition. */
#define MK_RULE_HTTP 1
#define MK_RULE_HTTPS 2
/* The largest file ReturnFile reads (at load, and again on every reload). */
#define MK_RULE_FILE_MAX (1024 * 1024)

enum mk_rule_action {
    MK_RULE_PASS = 0, /* ResponseHeader lines only: the request goes on */
    MK_RULE_REDIRECT,
    MK_RULE_RETURN,
    MK_RULE_REWRITE,
};

enum mk_rule_header_op {
    MK_RH_SET = 0, /* the fields of that name are replaced by this one */
    MK_RH_ADD,
    MK_RH_REMOVE,
};

/* A ResponseHeader line. */
struct mk_rule_header {
    uint8_t op;  /* enum mk_rule_header_op */
    bool always; /* on error responses (400 and above) too */
    char *name;  /* NUL-terminated */
    size_t name_len;
    char *value; /* NULL for MK_RH_REMOVE */
    size_t value_len;
};

enum mk_rule_part_kind {
    MK_RP_TEXT = 0, /* bytes of the template */
    MK_RP_GROUP,
    MK_RP_SCHEME,
    MK_RP_HOST,
    MK_RP_PORT,
    MK_RP_PATH,
    MK_RP_QUERY,
    MK_RP_URI,
};

struct mk_rule_part {
    uint8_t kind;      /* enum mk_rule_part_kind */
    uint8_t group;     /* MK_RP_GROUP: the group's number */
    bool in_query;     /* after the template's '?' or '#' */
    uint32_t off, len; /* MK_RP_TEXT: the bytes, in the template's text */
};

struct mk_rule_template {
    char *text; /* as written */
    struct mk_rule_part *parts;
    size_t n_parts;
    bool absolute;  /* http:// or https://: else a path starting with '/' */
    bool has_query; /* '?', $query or $request_uri: the template writes the query */
};

/* What a template may refer to, from the request. Strings need no NUL. */
struct mk_rule_vars {
    struct mk_str scheme; /* "http" or "https" */
    struct mk_str host;   /* the Host without its port, as received */
    struct mk_str port;   /* the port the request arrived on, digits */
    struct mk_str path;   /* normalised (decoded) */
    struct mk_str query;  /* as received, without '?'; p NULL: none */
    struct mk_str uri;    /* the target's path as received (origin form) */
    /* the groups of the match: start and end offsets in `subject`, (size_t) -1 unset */
    const char *subject;
    const size_t *groups;
    uint32_t n_groups; /* pairs in groups, $0 included */
};

/*
 * A Cors line: "origins=O,... [methods=M,...] [headers=H,...|*]
 * [expose=H,...] [credentials] [max-age=SECONDS]" (docs/configuration.md).
 */
/* An Allow or Deny word: an address block, or every client. */
struct mk_rule_access {
    struct mk_cidr net; /* unused when all */
    bool allow;
    bool all;
};

struct mk_rule_cors {
    char **origins; /* lower case; NULL: any ("*") */
    size_t n_origins;
    uint32_t methods;   /* 1u << enum mk_http_method, GET HEAD POST included */
    char *methods_text; /* Access-Control-Allow-Methods' value */
    char *headers;      /* the request fields allowed, as written; NULL: none; "*": any */
    char *expose;       /* Access-Control-Expose-Headers' value; NULL: none */
    bool credentials;
    int32_t max_age; /* -1: no Access-Control-Max-Age */
};

struct mk_rule {
    int line;         /* of the [RULE] header */
    uint8_t select;   /* enum mk_rule_select */
    uint8_t action;   /* enum mk_rule_action */
    uint16_t status;  /* Redirect, Return */
    uint32_t methods; /* 1u << enum mk_http_method; 0: any */
    uint8_t scheme;   /* Scheme: MK_RULE_HTTP or MK_RULE_HTTPS; 0: any */
    char *path;       /* Path, Prefix (a Prefix has no trailing '/' but for "/") */
    size_t path_len;
    void *re;          /* Regex: pcre2_code; NULL in a build without PCRE2 */
    uint32_t n_groups; /* pairs a match fills, $0 included */
    bool jit;          /* re was compiled by PCRE2's JIT: pcre2_jit_match */
    char **hosts;      /* lower case, "*.example.com" a wildcard; NULL: any */
    size_t n_hosts;
    char *field;       /* Header NAME; NULL: none */
    char *field_value; /* its value, compared exactly; NULL: present is enough */
    char *param;       /* Query NAME; NULL: none */
    size_t param_len;
    char *param_value; /* its value (decoded), compared exactly; NULL: present is enough */
    size_t param_value_len;
    void *query_re; /* QueryRegex: pcre2_code; NULL: none */
    bool query_jit;
    struct mk_rule_template target; /* Redirect, Rewrite */
    char *body; /* Return's text or ReturnFile's content; NULL: the status's usual page */
    size_t body_len;
    char *
        body_file; /* ReturnFile: the file as resolved (its extension gives the type); NULL: text */
    struct mk_rule_header *headers; /* ResponseHeader lines, in file order */
    size_t n_headers;
    struct mk_rule_header *req_headers; /* RequestHeader lines, in file order */
    size_t n_req_headers;
    struct mk_rate_limit *limit; /* RateLimit (ratelimit.h); NULL: none */
    struct mk_rule_cors *cors;   /* NULL: no Cors line */
    /* per-path settings; NULL: the site's */
    char **index_files;
    size_t n_index_files;
    char *cache_control; /* CacheControl's value */
    size_t cache_control_len;
    int64_t cache_max_age;    /* its max-age, -1: none (then no Expires) */
    int64_t max_body;         /* MaxRequestBody, bytes; -1: the server's */
    int8_t listing;           /* DirectoryListing: 1 On, 0 Off; -1: the site's */
    uint32_t timeout_ms;      /* Timeout: the body's reads, a plugin's hold; 0: the server's */
    uint32_t send_timeout_ms; /* SendTimeout; 0: the server's */
    /* Allow and Deny words, in file order: the first that holds for the
       client decides; none: allowed. NULL: no access rules */
    struct mk_rule_access *access;
    size_t n_access;
};

struct mk_rules {
    struct mk_rule **v;
    size_t n;
    uint32_t n_groups; /* the most any rule fills */
    bool max_body;     /* a rule has MaxRequestBody: the request's limit waits for the rules */
    bool scheme;       /* a rule has Scheme: the head's MK_HEAD_TLS is set before the rules */
};

/*
 * Parse template `text` (NUL-terminated) for a rule whose match has
 * `n_groups` pairs ($0 included). `group_named` gives the number of the
 * named group NAME (len bytes), or -1; NULL: no named groups. MK_OK, or
 * MK_ERR with the reason in reason. Free with mk_rule_template_free.
 */
int mk_rule_template_parse(struct mk_rule_template *t, const char *text, uint32_t n_groups,
                           int (*group_named)(void *ctx, const char *name, size_t len), void *ctx,
                           char *reason, size_t reason_len);
void mk_rule_template_free(struct mk_rule_template *t);

/*
 * Expand `t` with `v` into out (room for `cap` bytes, a NUL added).
 * The length written, or -1 when it does not fit or a value cannot stand
 * where it is (a host with bytes no host has).
 */
ssize_t mk_rule_expand(const struct mk_rule_template *t, const struct mk_rule_vars *v, char *out,
                       size_t cap);

/*
 * Whether rule `r`'s path condition holds for `path` (normalised, len
 * bytes); the groups of the match into `groups` (room for 2 * r->n_groups
 * offsets). Its other conditions are asked with mk_rule_selects.
 */
bool mk_rule_match_path(const struct mk_rule *r, const char *path, size_t len, size_t *groups);

/*
 * Whether the method, scheme, host, field and query parameter conditions of
 * `r` hold for head `h` (QueryRegex is asked by mk_rules_find, after the
 * path). The scheme is https when h->flags has MK_HEAD_TLS.
 */
bool mk_rule_selects(const struct mk_rule *r, const struct mk_http_head *h);

/* The first rule of `t` that takes head `h` with path `path`, its groups in `groups`; NULL: none.
 */
const struct mk_rule *mk_rules_find(const struct mk_rules *t, const struct mk_http_head *h,
                                    const char *path, size_t len, size_t *groups);

/* A method's name to its enum mk_http_method, MK_METHOD_UNKNOWN when not one we know. */
int mk_rule_method(const char *name, size_t len);

/*
 * Parse a ResponseHeader value, "[always] set|add|remove NAME [VALUE]",
 * into h: MK_OK, or MK_ERR with the reason. Fields the server writes
 * itself (Content-Type, Content-Length, Date, ...) are refused.
 */
int mk_rule_header_parse(struct mk_rule_header *h, const char *value, char *reason,
                         size_t reason_len);
/*
 * The same for a RequestHeader value, "set|add|remove NAME [VALUE]": the
 * fields that frame the request or that the parser indexes (Host,
 * Content-Length, Cookie, Range, If-*, ...) are refused.
 */
int mk_rule_request_header_parse(struct mk_rule_header *h, const char *value, char *reason,
                                 size_t reason_len);
/*
 * Head h with rule r's RequestHeader lines applied, its fields written to
 * `out` (room for h->n_headers + r->n_req_headers): the fields named by a
 * set or remove line dropped, those of set and add lines appended, in
 * order; h then points to `out`. The values point into r.
 */
void mk_rule_request_fields(const struct mk_rule *r, struct mk_http_head *h,
                            struct mk_http_header *out);
void mk_rule_headers_free(struct mk_rule_header *v, size_t n);

/* Parse a Cors value into c: MK_OK, or MK_ERR with the reason ("*" with credentials is one). */
int mk_rule_cors_parse(struct mk_rule_cors *c, const char *value, char *reason, size_t reason_len);
/* Whether c allows `origin` (an Origin field's value). */
bool mk_rule_cors_origin(const struct mk_rule_cors *c, const struct mk_str *origin);
/*
 * Whether c allows a preflight for `method` (Access-Control-Request-Method)
 * and the fields of `fields` (Access-Control-Request-Headers, a comma list;
 * NULL: none).
 */
bool mk_rule_cors_preflight(const struct mk_rule_cors *c, const struct mk_str *method,
                            const struct mk_str *fields);
void mk_rule_cors_free(struct mk_rule_cors *c);

/*
 * Whether query `q` (as received, without '?') has the parameter `name`
 * (len bytes), and when `value` is not NULL, one of that name whose value
 * is exactly value (vlen bytes). Names and values are compared
 * percent-decoded, '+' as a space (application/x-www-form-urlencoded).
 */
bool mk_rule_query_param(const struct mk_str *q, const char *name, size_t len, const char *value,
                         size_t vlen);

/*
 * Append the words of an Allow (allow true) or Deny value to *v (*n
 * entries): "all", or address blocks ADDRESS[/LEN], IPv4 or IPv6. MK_OK,
 * or MK_ERR with the reason (a word that is no block, bits past the prefix).
 */
int mk_rule_access_parse(struct mk_rule_access **v, size_t *n, bool allow, const char *value,
                         char *reason, size_t reason_len);
/* Whether r's Allow and Deny lines let client `sa` in (the first word that holds decides). */
bool mk_rule_access_allows(const struct mk_rule *r, const struct sockaddr *sa);

/*
 * Whether r has a per-path setting (IndexFiles, CacheControl,
 * MaxRequestBody, DirectoryListing, Timeout, SendTimeout).
 */
static inline bool mk_rule_sets(const struct mk_rule *r)
{
    return r->index_files || r->cache_control || r->max_body >= 0 || r->listing >= 0 ||
           r->timeout_ms || r->send_timeout_ms;
}

/* Free a rule's contents and the rule (pcre2 code included). */
void mk_rule_free(struct mk_rule *r);

#endif
