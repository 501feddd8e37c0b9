/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * format.c: access log formats. A format string with Apache-style
 * specifiers is compiled once (at configuration time, where every mistake is
 * refused) into a list of operations; rendering a line walks that list on the
 * worker, writing straight into the worker's buffer without snprintf, and
 * never writes more than the room it is given.
 *
 * Guarantees of a rendered line: it ends with exactly one newline and holds
 * no other control byte. Bytes of the request (target, headers, user, ...)
 * are escaped as the format's escaping says ("escape=MODE" before it):
 *   default  what is not printable ASCII as \xhh, '"' and '\' as \" and \\
 *            (Apache's), so a client cannot forge a line or break a quoted
 *            field;
 *   json     JSON string content (RFC 8259): valid UTF-8 as it is, '"' and
 *            '\' as \" and \\, control bytes as \n, \t, ... or \u00hh, and
 *            each byte of invalid UTF-8 as \u00hh; a value that is absent
 *            is empty ("" between the format's quotes, %b is 0), and a line
 *            too long is cut inside its string values (ending in "..."), so
 *            every line of a format shaped as JSON is valid JSON;
 *   none     bytes as they are, except control bytes as \xhh (a line still
 *            cannot be forged, but a quote can end a quoted field).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "logger.h"

enum logger_op_kind {
    LOGGER_OP_TEXT,      /* literal bytes */
    LOGGER_OP_CLIENT,    /* %h %a */
    LOGGER_OP_DASH,      /* %l */
    LOGGER_OP_USER,      /* %u */
    LOGGER_OP_TIME,      /* %t */
    LOGGER_OP_REQUEST,   /* %r */
    LOGGER_OP_STATUS,    /* %s %>s %<s */
    LOGGER_OP_BYTES_CLF, /* %b: body bytes, "-" for none */
    LOGGER_OP_BYTES,     /* %B: body bytes */
    LOGGER_OP_BYTES_ALL, /* %O: head and body bytes */
    LOGGER_OP_HEADER,    /* %{Name}i */
    LOGGER_OP_MICROS,    /* %D */
    LOGGER_OP_SECONDS,   /* %T */
    LOGGER_OP_METHOD,    /* %m */
    LOGGER_OP_PATH,      /* %U */
    LOGGER_OP_QUERY,     /* %q */
    LOGGER_OP_PROTOCOL,  /* %H */
    LOGGER_OP_SITE,      /* %v */
    LOGGER_OP_HOST,      /* %V */
    LOGGER_OP_PID,       /* %P */
    LOGGER_OP_CONN_VAR,  /* %{ssl_NAME}x: the transport's property NAME */
    LOGGER_OP_NOTE,      /* %{NAME}n: a plugin's note (api->note) */
    LOGGER_OP_TIME_ISO,  /* %{iso8601}t */
    LOGGER_OP_PEER,      /* %{c}a: the connection's TCP peer */
    LOGGER_OP_UPSTREAM,  /* %{upstream}D: microseconds waited on upstreams */
};

enum logger_escape {
    LOGGER_ESCAPE_DEFAULT,
    LOGGER_ESCAPE_JSON,
    LOGGER_ESCAPE_NONE,
};

struct logger_op {
    enum logger_op_kind kind;
    unsigned len;     /* of text */
    const char *text; /* TEXT: the bytes; HEADER, CONN_VAR: the name, NUL-terminated */
    /* json: the most bytes the operations after this one write, but for
       their client strings (which are cut to fit) */
    unsigned reserve;
};

struct logger_format {
    unsigned n_ops;
    struct logger_op *ops;
    char *store; /* the bytes ops point to */
    enum logger_escape escape;
    unsigned fixed; /* json: the most bytes of every operation but the client strings */
};

static const char logger_common[] = "%h %l %u %t \"%r\" %>s %b";
static const char logger_combined[] =
    "%h %l %u %t \"%r\" %>s %b \"%{Referer}i\" \"%{User-Agent}i\"";
static const char logger_json[] =
    "escape=json {\"time\":\"%{iso8601}t\",\"client\":\"%h\",\"user\":\"%u\",\"request\":\"%r\","
    "\"method\":\"%m\",\"path\":\"%U\",\"query\":\"%q\",\"protocol\":\"%H\",\"status\":%>s,"
    "\"body_bytes\":%B,\"bytes\":%O,\"duration_us\":%D,\"upstream_us\":%{upstream}D,"
    "\"site\":\"%v\",\"host\":\"%V\","
    "\"referer\":\"%{Referer}i\",\"user_agent\":\"%{User-Agent}i\","
    "\"request_id\":\"%{request_id}n\",\"trace_id\":\"%{trace_id}n\"}";

const char *logger_format_builtin(const char *name)
{
    if (strcasecmp(name, "common") == 0) {
        return logger_common;
    }
    if (strcasecmp(name, "combined") == 0) {
        return logger_combined;
    }
    if (strcasecmp(name, "json") == 0) {
        return logger_json;
    }
    return NULL;
}

/* ---- compiling ------------------------------------------------------------ */

/* Letter after '%' (or after "%{...}") to its operation; -1: unknown. */
static int logger_op_of(char c)
{
    switch (c) {
    case 'h':
    case 'a':
        return LOGGER_OP_CLIENT;
    case 'l':
        return LOGGER_OP_DASH;
    case 'u':
        return LOGGER_OP_USER;
    case 't':
        return LOGGER_OP_TIME;
    case 'r':
        return LOGGER_OP_REQUEST;
    case 's':
        return LOGGER_OP_STATUS;
    case 'b':
        return LOGGER_OP_BYTES_CLF;
    case 'B':
        return LOGGER_OP_BYTES;
    case 'O':
        return LOGGER_OP_BYTES_ALL;
    case 'D':
        return LOGGER_OP_MICROS;
    case 'T':
        return LOGGER_OP_SECONDS;
    case 'm':
        return LOGGER_OP_METHOD;
    case 'U':
        return LOGGER_OP_PATH;
    case 'q':
        return LOGGER_OP_QUERY;
    case 'H':
        return LOGGER_OP_PROTOCOL;
    case 'v':
        return LOGGER_OP_SITE;
    case 'V':
        return LOGGER_OP_HOST;
    case 'P':
        return LOGGER_OP_PID;
    default:
        return -1;
    }
}

/* A header name: the token characters of RFC 9110. */
static bool logger_token_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/*
 * The transport's property that %{NAME}x (`len` bytes, any case) names:
 * "ssl_protocol" is "protocol" (api->conn_transport_var); NULL: none.
 */
static const char *logger_conn_var(const char *name, size_t len)
{
    static const char *const names[] = {"ssl_protocol", "ssl_cipher", "ssl_server_name",
                                        "ssl_client_subject", "ssl_client_verify"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strlen(names[i]) == len && strncasecmp(names[i], name, len) == 0) {
            return names[i] + 4;
        }
    }
    return NULL;
}

/*
 * Is operation `op` a client string (or a plugin's, or a site name), which
 * json cuts to fit (logger_render_json)?
 */
static bool logger_op_is_string(const struct logger_op *op)
{
    switch (op->kind) {
    case LOGGER_OP_USER:
    case LOGGER_OP_REQUEST:
    case LOGGER_OP_HEADER:
    case LOGGER_OP_METHOD:
    case LOGGER_OP_PATH:
    case LOGGER_OP_QUERY:
    case LOGGER_OP_SITE:
    case LOGGER_OP_HOST:
    case LOGGER_OP_CONN_VAR:
    case LOGGER_OP_NOTE:
        return true;
    default:
        return false;
    }
}

/*
 * The most bytes operation `op` writes when it is not a string (a number,
 * an address, a time, the format's own text); for a string, which json
 * cuts to fit, the 3 bytes of the "..." it then ends with.
 */
static unsigned logger_op_fixed(const struct logger_op *op)
{
    if (logger_op_is_string(op)) {
        return 3;
    }
    switch (op->kind) {
    case LOGGER_OP_TEXT:
        return op->len;
    case LOGGER_OP_CLIENT:
    case LOGGER_OP_PEER:
        return MK_ADDR_TEXT_LEN;
    case LOGGER_OP_TIME:
        return (unsigned) sizeof(((struct logger_clock *) 0)->text);
    case LOGGER_OP_TIME_ISO:
        return (unsigned) sizeof(((struct logger_clock *) 0)->iso);
    case LOGGER_OP_STATUS:
    case LOGGER_OP_BYTES_CLF:
    case LOGGER_OP_BYTES:
    case LOGGER_OP_BYTES_ALL:
    case LOGGER_OP_MICROS:
    case LOGGER_OP_SECONDS:
    case LOGGER_OP_PID:
    case LOGGER_OP_UPSTREAM:
        return 20; /* a uint64_t in decimal ("null" when none) */
    case LOGGER_OP_PROTOCOL:
        return 8;
    default: /* %l: nothing in json */
        return 0;
    }
}

/*
 * "escape=MODE " at the start of a format: the mode, and *spec past it
 * (and its blanks). No prefix: default. -1 for an unknown mode.
 */
static int logger_escape_of(const char **spec)
{
    static const struct {
        const char *name;
        enum logger_escape mode;
    } modes[] = {{"default", LOGGER_ESCAPE_DEFAULT},
                 {"json", LOGGER_ESCAPE_JSON},
                 {"none", LOGGER_ESCAPE_NONE}};
    const char *p = *spec;

    if (strncasecmp(p, "escape=", 7) != 0) {
        return LOGGER_ESCAPE_DEFAULT;
    }
    p += 7;
    size_t n = strcspn(p, " \t");
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        if (strlen(modes[i].name) == n && strncasecmp(p, modes[i].name, n) == 0) {
            *spec = p + n + strspn(p + n, " \t");
            return (int) modes[i].mode;
        }
    }
    return -1;
}

void logger_format_free(struct logger_format *f)
{
    if (!f) {
        return;
    }
    free(f->ops);
    free(f->store);
    free(f);
}

int logger_format_compile(const char *spec, struct logger_format **out, char *err, size_t errlen)
{
    struct logger_format *f;
    char *st;
    const char *p = spec;
    int escape = logger_escape_of(&p);

    *out = NULL;
    if (escape < 0) {
        snprintf(err, errlen, "'%.*s': the escaping is escape=default, escape=json or escape=none",
                 (int) strcspn(spec, " \t"), spec);
        return MK_ERR;
    }
    size_t n = strlen(p);
    if (n == 0) {
        snprintf(err, errlen, "empty format");
        return MK_ERR;
    }
    f = calloc(1, sizeof(*f));
    if (!f || !(f->ops = calloc(n + 1, sizeof(*f->ops))) || !(f->store = malloc(n + 1))) {
        logger_format_free(f);
        snprintf(err, errlen, "out of memory");
        return MK_ERR;
    }
    f->escape = (enum logger_escape) escape;
    st = f->store;
    while (*p) {
        if (*p != '%' || p[1] == '%') {
            /* Literal bytes, joined with the previous literal. */
            struct logger_op *last = f->n_ops ? &f->ops[f->n_ops - 1] : NULL;
            if (!last || last->kind != LOGGER_OP_TEXT) {
                last = &f->ops[f->n_ops++];
                last->kind = LOGGER_OP_TEXT;
                last->text = st;
                last->len = 0;
            }
            *st++ = *p;
            last->len++;
            p += *p == '%' ? 2 : 1;
            continue;
        }
        const char *at = p++;
        struct logger_op *op = &f->ops[f->n_ops];
        if (*p == '{') {
            const char *name = ++p;
            while (*p && *p != '}') {
                if (!logger_token_char((unsigned char) *p)) {
                    snprintf(err, errlen, "'%.40s': bad character in a header name", at);
                    goto fail;
                }
                p++;
            }
            if (*p != '}' || p == name) {
                snprintf(err, errlen, "'%.40s': %%{NAME} needs a name and a closing '}'", at);
                goto fail;
            }
            if (p[1] == 'x') {
                const char *var = logger_conn_var(name, (size_t) (p - name));
                if (!var) {
                    snprintf(err, errlen,
                             "'%.40s': unknown %%{NAME}x (ssl_protocol, ssl_cipher, "
                             "ssl_server_name, ssl_client_subject, ssl_client_verify)",
                             at);
                    goto fail;
                }
                /* The transport's name of the property (it is never longer). */
                op->kind = LOGGER_OP_CONN_VAR;
                op->text = st;
                op->len = (unsigned) strlen(var);
                memcpy(st, var, op->len + 1);
                st += op->len + 1;
                p += 2;
                f->n_ops++;
                continue;
            }
            if (p[1] == 'a') {
                if (p - name != 1 || *name != 'c') {
                    snprintf(err, errlen, "'%.40s': unknown %%{...}a (%%{c}a, the TCP peer)", at);
                    goto fail;
                }
                op->kind = LOGGER_OP_PEER;
                p += 2;
                f->n_ops++;
                continue;
            }
            if (p[1] == 't') {
                if ((size_t) (p - name) != 7 || strncasecmp(name, "iso8601", 7) != 0) {
                    snprintf(err, errlen, "'%.40s': unknown %%{FORMAT}t (iso8601)", at);
                    goto fail;
                }
                op->kind = LOGGER_OP_TIME_ISO;
                p += 2;
                f->n_ops++;
                continue;
            }
            if (p[1] == 'D') {
                if ((size_t) (p - name) != 8 || strncasecmp(name, "upstream", 8) != 0) {
                    snprintf(err, errlen, "'%.40s': unknown %%{...}D (%%{upstream}D)", at);
                    goto fail;
                }
                op->kind = LOGGER_OP_UPSTREAM;
                p += 2;
                f->n_ops++;
                continue;
            }
            if (p[1] != 'i' && p[1] != 'n') {
                snprintf(err, errlen,
                         "'%.40s': only %%{Header}i, %%{NAME}n, %%{NAME}x, %%{c}a, %%{iso8601}t "
                         "and %%{upstream}D take a name",
                         at);
                goto fail;
            }
            op->kind = p[1] == 'n' ? LOGGER_OP_NOTE : LOGGER_OP_HEADER;
            op->text = st;
            op->len = (unsigned) (p - name);
            memcpy(st, name, op->len);
            st += op->len;
            *st++ = '\0';
            p += 2;
            f->n_ops++;
            continue;
        }
        if ((*p == '>' || *p == '<') && p[1] == 's') {
            p++;
        }
        int kind = *p ? logger_op_of(*p) : -1;
        if (kind < 0) {
            snprintf(err, errlen, "'%.40s': unknown specifier '%%%.1s'", at, *p ? p : "");
            goto fail;
        }
        op->kind = (enum logger_op_kind) kind;
        p++;
        f->n_ops++;
    }
    /* What must fit whatever the client sent, counted from the end. */
    unsigned after = 0;
    for (unsigned i = f->n_ops; i-- > 0;) {
        f->ops[i].reserve = after;
        after += logger_op_fixed(&f->ops[i]);
    }
    f->fixed = after;
    if (f->escape == LOGGER_ESCAPE_JSON && f->fixed > LOGGER_LINE_MAX / 2) {
        snprintf(err, errlen,
                 "escape=json: the format's text and fields take up to %u bytes, more than half "
                 "a line (%d bytes)",
                 f->fixed, LOGGER_LINE_MAX);
        goto fail;
    }
    *out = f;
    return MK_OK;

fail:
    logger_format_free(f);
    return MK_ERR;
}

/* ---- rendering ------------------------------------------------------------ */

/*
 * The room being written: p advances, never past end. Once something did
 * not fit (cut), nothing more is written: a field never goes on after a
 * byte it left out.
 */
struct logger_out {
    char *p;
    char *end;
    bool cut; /* something did not fit */
    enum logger_escape escape;
};

/* Copy bytes as they are, as many as fit. */
static void logger_put(struct logger_out *o, const char *s, size_t n)
{
    if (o->cut) {
        return;
    }
    size_t room = (size_t) (o->end - o->p);
    if (n > room) {
        n = room;
        o->cut = true;
    }
    memcpy(o->p, s, n);
    o->p += n;
}

/* One byte, if it fits. */
static void logger_put_char(struct logger_out *o, char c)
{
    if (o->p < o->end && !o->cut) {
        *o->p++ = c;
    }
    else {
        o->cut = true;
    }
}

static const char logger_hex[] = "0123456789abcdef";

/*
 * The length of the UTF-8 sequence at s (n bytes left) when it is valid
 * (RFC 3629: no overlong form, no surrogate, at most U+10FFFF), else 0.
 */
static size_t logger_utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xbf;
    size_t len;

    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    }
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80;
        hi = c == 0xed ? 0x9f : 0xbf;
    }
    else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf;
    }
    else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi) {
        return 0;
    }
    for (size_t i = 2; i < len; i++) {
        if (s[i] < 0x80 || s[i] > 0xbf) {
            return 0;
        }
    }
    return len;
}

/* Bytes whole or not at all: false (and cut) when they do not fit. */
static bool logger_put_whole(struct logger_out *o, const char *s, size_t n)
{
    if ((size_t) (o->end - o->p) < n) {
        o->cut = true;
        return false;
    }
    memcpy(o->p, s, n);
    o->p += n;
    return true;
}

/*
 * escape=json: bytes from the client as the content of a JSON string
 * (RFC 8259 section 7): valid UTF-8 as it is, '"' and '\' escaped, the
 * control bytes as \b \f \n \r \t or \u00hh (DEL too), and every byte of
 * invalid UTF-8 as \u00hh. An escape or a character goes out whole or not
 * at all.
 */
static void logger_put_json(struct logger_out *o, const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            if (o->p == o->end) {
                o->cut = true;
                return;
            }
            *o->p++ = (char) c;
            i++;
            continue;
        }
        size_t len = c >= 0x80 ? logger_utf8_len(s + i, n - i) : 0;
        if (len) {
            if (!logger_put_whole(o, (const char *) s + i, len)) {
                return;
            }
            i += len;
            continue;
        }
        char esc[6] = {'\\', (char) c, 0, 0, 0, 0};
        size_t elen = 2;
        switch (c) {
        case '"':
        case '\\':
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            memcpy(esc + 1, "u00", 3);
            esc[4] = logger_hex[c >> 4];
            esc[5] = logger_hex[c & 15];
            elen = 6;
        }
        if (!logger_put_whole(o, esc, elen)) {
            return;
        }
        i++;
    }
}

/* escape=none: bytes as they are, but control bytes as \xhh. */
static void logger_put_raw(struct logger_out *o, const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c >= 0x20 && c != 0x7f) {
            if (o->p == o->end) {
                o->cut = true;
                return;
            }
            *o->p++ = (char) c;
            continue;
        }
        char esc[4] = {'\\', 'x', logger_hex[c >> 4], logger_hex[c & 15]};
        if (!logger_put_whole(o, esc, 4)) {
            return;
        }
    }
}

/*
 * Bytes from the client, escaped as the format says; by default printable
 * ASCII as is, '"' and '\' escaped, the rest \xhh.
 */
static void logger_put_escaped(struct logger_out *o, const char *s, size_t n)
{
    const char *hex = logger_hex;

    if (o->cut) {
        return;
    }
    if (o->escape == LOGGER_ESCAPE_JSON) {
        logger_put_json(o, (const unsigned char *) s, n);
        return;
    }
    if (o->escape == LOGGER_ESCAPE_NONE) {
        logger_put_raw(o, (const unsigned char *) s, n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char) s[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            if (o->p == o->end) {
                o->cut = true;
                return;
            }
            *o->p++ = (char) c;
            continue;
        }
        char esc[4] = {'\\', (char) c, 0, 0};
        size_t len = 2;
        if (c != '"' && c != '\\') {
            esc[1] = 'x';
            esc[2] = hex[c >> 4];
            esc[3] = hex[c & 15];
            len = 4;
        }
        if ((size_t) (o->end - o->p) < len) {
            o->cut = true;
            return;
        }
        memcpy(o->p, esc, len);
        o->p += len;
    }
}

/* A number in decimal. */
static void logger_put_u64(struct logger_out *o, uint64_t v)
{
    char tmp[20];
    logger_put(o, tmp, mk_u64_dec(v, tmp));
}

/* The mark of a value that is absent: "-", nothing in json (an empty string). */
static void logger_put_dash(struct logger_out *o)
{
    if (o->escape != LOGGER_ESCAPE_JSON) {
        logger_put_char(o, '-');
    }
}

/* Escaped text, or the mark of an absent value when there is none. */
static void logger_put_field(struct logger_out *o, const char *s, size_t n)
{
    if (!s || n == 0) {
        logger_put_dash(o);
        return;
    }
    logger_put_escaped(o, s, n);
}

/* %h: the client address (mk_addr_text: IPv4 without printf), "-" without one. */
static void logger_put_client(struct logger_out *o, const struct mk_request *r)
{
    socklen_t len;
    char text[MK_ADDR_TEXT_LEN];
    size_t n = mk_addr_text(logger_api->remote_sockaddr(r, &len), text);

    if (n == 0) {
        logger_put_dash(o);
        return;
    }
    logger_put(o, text, n);
}

/*
 * %{c}a: the TCP peer of r's connection (Apache's %{c}a with mod_remoteip),
 * which a PROXY header or RealIPFrom do not change: asked of the kernel
 * (getpeername, one system call a line that has it); "-" without one.
 */
static void logger_put_peer(struct logger_out *o, const struct mk_request *r)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char text[MK_ADDR_TEXT_LEN];
    struct mk_conn *c = logger_api->conn ? logger_api->conn(r) : NULL;
    int fd = c && logger_api->conn_fd ? logger_api->conn_fd(c) : -1;
    size_t n = 0;

    if (fd >= 0 && getpeername(fd, (struct sockaddr *) &ss, &len) == 0) {
        n = mk_addr_text((const struct sockaddr *) &ss, text);
    }
    if (n == 0) {
        logger_put_dash(o);
        return;
    }
    logger_put(o, text, n);
}

/*
 * %u: the user the server authenticated the request as (the note
 * MK_NOTE_REMOTE_USER, the auth plugin's); without one (no authentication,
 * or a 401 that refused it), the user name of a Basic Authorization header
 * (what the client sent, not verified, as Apache's %u on a 401), "-"
 * without one or when it is not valid base 64 of at most 768 bytes.
 */
static void logger_put_user(struct logger_out *o, const struct mk_request *r)
{
    char cred[768];
    size_t vlen;
    const char *v =
        MK_API_HAS(logger_api, note) ? logger_api->note(r, MK_NOTE_REMOTE_USER, &vlen) : NULL;

    if (v) {
        logger_put_field(o, v, vlen);
        return;
    }
    v = logger_api->header(r, "Authorization", &vlen);
    size_t n;
    ssize_t colon = v ? mk_basic_credentials(v, vlen, cred, sizeof(cred), &n) : -1;
    if (colon <= 0) {
        logger_put_dash(o);
        return;
    }
    logger_put_field(o, cred, (size_t) colon);
}

/* When the request head was complete, to the second; read once per request. */
static time_t logger_start(struct logger_line *line)
{
    if (!line->sec) {
        struct timespec start;
        logger_api->request_time(line->r, &start, NULL);
        /* A request refused before its head was complete has no start time. */
        line->sec = start.tv_sec > 0 ? start.tv_sec : logger_api->now();
    }
    return line->sec;
}

/* "[10/Oct/2000:13:55:36 +0000]" in local time; formatted once a second per worker. */
static void logger_put_time(struct logger_out *o, struct logger_line *line)
{
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    struct logger_clock *c = line->clock;

    logger_start(line);
    if (c->sec != line->sec || c->len == 0) {
        struct tm tm;
        localtime_r(&line->sec, &tm);
        long off = tm.tm_gmtoff / 60;
        char sign = off < 0 ? '-' : '+';
        off = off < 0 ? -off : off;
        int n = snprintf(c->text, sizeof(c->text), "[%02d/%s/%04d:%02d:%02d:%02d %c%02ld%02ld]",
                         tm.tm_mday, months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour,
                         tm.tm_min, tm.tm_sec, sign, off / 60, off % 60);
        c->len = n > 0 && (size_t) n < sizeof(c->text) ? (size_t) n : 0;
        c->sec = line->sec;
    }
    logger_put(o, c->text, c->len);
}

/* %{iso8601}t: "2000-10-10T13:55:36+00:00" in local time, formatted once a second per worker. */
static void logger_put_time_iso(struct logger_out *o, struct logger_line *line)
{
    struct logger_clock *c = line->clock;

    logger_start(line);
    if (c->iso_sec != line->sec || c->iso_len == 0) {
        struct tm tm;
        localtime_r(&line->sec, &tm);
        long off = tm.tm_gmtoff / 60;
        char sign = off < 0 ? '-' : '+';
        off = off < 0 ? -off : off;
        int n = snprintf(c->iso, sizeof(c->iso), "%04d-%02d-%02dT%02d:%02d:%02d%c%02ld:%02ld",
                         tm.tm_year + 1900, tm.tm_mon % 12 + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                         tm.tm_sec, sign, off / 60, off % 60);
        c->iso_len = n > 0 && (size_t) n < sizeof(c->iso) ? (size_t) n : 0;
        c->iso_sec = line->sec;
    }
    logger_put(o, c->iso, c->iso_len);
}

/* Microseconds since the request head was complete; read once per request. */
static uint64_t logger_elapsed(struct logger_line *line)
{
    if (!line->have_elapsed) {
        struct timespec start;
        logger_api->request_time(line->r, &start, &line->elapsed_us);
        if (start.tv_sec <= 0) {
            line->elapsed_us = 0; /* refused before the head was complete */
        }
        line->have_elapsed = true;
    }
    return line->elapsed_us;
}

/* %H */
static void logger_put_protocol(struct logger_out *o, const struct mk_request *r)
{
    int v = logger_api->version(r);
    logger_put(o, v == 20 ? "HTTP/2.0" : v == 11 ? "HTTP/1.1" : "HTTP/1.0", 8);
}

/*
 * %r: METHOD TARGET PROTOCOL as received (the client's, also after an
 * internal redirect); "-" when no method was read.
 */
static void logger_put_request(struct logger_out *o, const struct mk_request *r)
{
    size_t mlen, tlen;
    bool client = MK_API_HAS(logger_api, client_target);
    const char *m = client ? logger_api->client_method(r, &mlen) : logger_api->method(r, &mlen);
    const char *t = client ? logger_api->client_target(r, &tlen) : logger_api->target(r, &tlen);

    if (mlen == 0) {
        logger_put_dash(o);
        return;
    }
    logger_put_escaped(o, m, mlen);
    logger_put_char(o, ' ');
    logger_put_field(o, t, tlen);
    logger_put_char(o, ' ');
    logger_put_protocol(o, r);
}

/*
 * One operation of a format. Inlined in the loop of the default and none
 * escapings (logger_format_render): a call per operation cost those
 * formats about 250 instructions a line (callgrind); json has its own copy.
 */
static inline __attribute__((always_inline)) void
logger_render_op(struct logger_out *o, const struct logger_op *op, struct logger_line *line)
{
    struct mk_request *r = line->r;
    const char *s;
    size_t n;

    switch (op->kind) {
    case LOGGER_OP_TEXT:
        logger_put(o, op->text, op->len);
        break;
    case LOGGER_OP_CLIENT:
        logger_put_client(o, r);
        break;
    case LOGGER_OP_PEER:
        logger_put_peer(o, r);
        break;
    case LOGGER_OP_DASH:
        logger_put_dash(o);
        break;
    case LOGGER_OP_USER:
        logger_put_user(o, r);
        break;
    case LOGGER_OP_TIME:
        logger_put_time(o, line);
        break;
    case LOGGER_OP_TIME_ISO:
        logger_put_time_iso(o, line);
        break;
    case LOGGER_OP_REQUEST:
        logger_put_request(o, r);
        break;
    case LOGGER_OP_STATUS:
        logger_put_u64(o, (uint64_t) logger_api->status(r));
        break;
    case LOGGER_OP_BYTES_CLF: {
        uint64_t b = logger_api->body_bytes_sent(r);
        if (b || o->escape == LOGGER_ESCAPE_JSON) {
            logger_put_u64(o, b); /* a number in json */
        }
        else {
            logger_put_char(o, '-');
        }
        break;
    }
    case LOGGER_OP_BYTES:
        logger_put_u64(o, logger_api->body_bytes_sent(r));
        break;
    case LOGGER_OP_BYTES_ALL:
        logger_put_u64(o, logger_api->bytes_sent(r));
        break;
    case LOGGER_OP_CONN_VAR:
        n = 0;
        s = MK_API_HAS(logger_api, conn_transport_var)
                ? logger_api->conn_transport_var(logger_api->conn(r), op->text, &n)
                : NULL;
        logger_put_field(o, s, n);
        break;
    case LOGGER_OP_NOTE:
        n = 0;
        s = MK_API_HAS(logger_api, note) ? logger_api->note(r, op->text, &n) : NULL;
        if (s) {
            logger_put_escaped(o, s, n);
        }
        else {
            logger_put_dash(o);
        }
        break;
    case LOGGER_OP_HEADER:
        s = logger_api->header(r, op->text, &n);
        if (s) {
            logger_put_escaped(o, s, n);
        }
        else {
            logger_put_dash(o);
        }
        break;
    case LOGGER_OP_MICROS:
        logger_put_u64(o, logger_elapsed(line));
        break;
    case LOGGER_OP_SECONDS:
        logger_put_u64(o, logger_elapsed(line) / 1000000u);
        break;
    case LOGGER_OP_UPSTREAM: {
        int64_t us = MK_API_HAS(logger_api, upstream_time) ? logger_api->upstream_time(r) : -1;
        if (us >= 0) {
            logger_put_u64(o, (uint64_t) us);
        }
        else if (o->escape == LOGGER_ESCAPE_JSON) {
            logger_put(o, "null", 4);
        }
        else {
            logger_put_char(o, '-');
        }
        break;
    }
    case LOGGER_OP_METHOD:
        s = logger_api->method(r, &n);
        logger_put_field(o, s, n);
        break;
    case LOGGER_OP_PATH:
        s = logger_api->path(r, &n);
        logger_put_field(o, s, n);
        break;
    case LOGGER_OP_QUERY:
        s = logger_api->query(r, &n);
        if (s) {
            logger_put_char(o, '?');
            logger_put_escaped(o, s, n);
        }
        break;
    case LOGGER_OP_PROTOCOL:
        logger_put_protocol(o, r);
        break;
    case LOGGER_OP_SITE:
        s = line->site ? logger_api->site_name(line->site, 0) : NULL;
        logger_put_field(o, s, s ? strlen(s) : 0);
        break;
    case LOGGER_OP_HOST:
        s = logger_api->host(r, &n);
        logger_put_field(o, s, n);
        break;
    case LOGGER_OP_PID: {
        static atomic_int pid;
        int v = atomic_load_explicit(&pid, memory_order_relaxed);
        if (!v) {
            v = (int) getpid();
            atomic_store_explicit(&pid, v, memory_order_relaxed);
        }
        logger_put_u64(o, (uint64_t) v);
        break;
    }
    }
}

/*
 * escape=json, with room for f->fixed and the suffix (everything but the
 * strings' content): each string gets the room the operations after it
 * leave (their reserve), and one that does not fit is cut after a whole
 * character or escape and ends in "..." inside its quotes, so the line
 * stays valid JSON and every string reads back as the value or a prefix
 * of it.
 */
static __attribute__((noinline)) void logger_render_json(struct logger_out *o,
                                                         const struct logger_format *f,
                                                         struct logger_line *line,
                                                         size_t suffix_len)
{
    for (unsigned i = 0; i < f->n_ops; i++) {
        const struct logger_op *op = &f->ops[i];
        if (!logger_op_is_string(op)) {
            logger_render_op(o, op, line); /* fits: it is part of f->fixed */
            continue;
        }
        /* limit >= o->p + 3: the op's own share of f->fixed */
        char *limit = o->end - op->reserve - suffix_len;
        struct logger_out field = {o->p, limit - 3, false, o->escape};
        logger_render_op(&field, op, line);
        if (field.cut) {
            memcpy(field.p, "...", 3);
            field.p += 3;
        }
        o->p = field.p;
    }
}

size_t logger_format_render(const struct logger_format *f, struct logger_line *line,
                            const char *suffix, char *out, size_t cap)
{
    /* Keep room for "...\n" whatever happens. */
    struct logger_out o = {out, out + cap - 4, false, f->escape};
    size_t suffix_len = suffix ? strlen(suffix) : 0;

    if (f->escape == LOGGER_ESCAPE_JSON && f->fixed + suffix_len <= (size_t) (o.end - o.p)) {
        logger_render_json(&o, f, line, suffix_len);
        if (suffix) {
            logger_put(&o, suffix, suffix_len);
        }
        *o.p++ = '\n';
        return (size_t) (o.p - out);
    }
    /* Otherwise (and for json only in a room smaller than any line's): cut where it overflows. */
    for (unsigned i = 0; i < f->n_ops && !o.cut; i++) {
        logger_render_op(&o, &f->ops[i], line);
    }
    if (suffix && !o.cut) {
        logger_put(&o, suffix, suffix_len);
    }
    if (o.cut) {
        memcpy(o.p, "...", 3);
        o.p += 3;
    }
    *o.p++ = '\n';
    return (size_t) (o.p - out);
}
