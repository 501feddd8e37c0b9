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
 * no other control byte; bytes of the request (target, headers, user) that
 * are not printable ASCII are written as \xhh, and '"' and '\' as \" and \\,
 * so a client cannot forge a line or break a quoted field.
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
};

struct logger_op {
    enum logger_op_kind kind;
    unsigned len;     /* of text */
    const char *text; /* TEXT: the bytes; HEADER, CONN_VAR: the name, NUL-terminated */
};

struct logger_format {
    unsigned n_ops;
    struct logger_op *ops;
    char *store; /* the bytes ops point to */
};

static const char logger_common[] = "%h %l %u %t \"%r\" %>s %b";
static const char logger_combined[] =
    "%h %l %u %t \"%r\" %>s %b \"%{Referer}i\" \"%{User-Agent}i\"";

const char *logger_format_builtin(const char *name)
{
    if (strcasecmp(name, "common") == 0) {
        return logger_common;
    }
    if (strcasecmp(name, "combined") == 0) {
        return logger_combined;
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
    size_t n = strlen(spec);
    struct logger_format *f;
    char *st;
    const char *p = spec;

    *out = NULL;
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
            if (p[1] != 'i' && p[1] != 'n') {
                snprintf(err, errlen,
                         "'%.40s': only %%{Header}i, %%{NAME}n and %%{NAME}x take a name", at);
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
    *out = f;
    return MK_OK;

fail:
    logger_format_free(f);
    return MK_ERR;
}

/* ---- rendering ------------------------------------------------------------ */

/* The room being written: p advances, never past end. */
struct logger_out {
    char *p;
    char *end;
    bool cut; /* something did not fit */
};

/* Copy bytes as they are, as many as fit. */
static void logger_put(struct logger_out *o, const char *s, size_t n)
{
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
    if (o->p < o->end) {
        *o->p++ = c;
    }
    else {
        o->cut = true;
    }
}

/* Bytes from the client: printable ASCII as is, '"' and '\' escaped, the rest \xhh. */
static void logger_put_escaped(struct logger_out *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";

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

/* Escaped text, or "-" when there is none. */
static void logger_put_field(struct logger_out *o, const char *s, size_t n)
{
    if (!s || n == 0) {
        logger_put_char(o, '-');
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
        logger_put_char(o, '-');
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
        logger_put_char(o, '-');
        return;
    }
    logger_put_field(o, cred, (size_t) colon);
}

/* "[10/Oct/2000:13:55:36 +0000]" in local time; formatted once a second per worker. */
static void logger_put_time(struct logger_out *o, struct logger_line *line)
{
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    struct logger_clock *c = line->clock;

    if (!line->sec) {
        struct timespec start;
        logger_api->request_time(line->r, &start, NULL);
        /* A request refused before its head was complete has no start time. */
        line->sec = start.tv_sec > 0 ? start.tv_sec : logger_api->now();
    }
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
        logger_put_char(o, '-');
        return;
    }
    logger_put_escaped(o, m, mlen);
    logger_put_char(o, ' ');
    logger_put_field(o, t, tlen);
    logger_put_char(o, ' ');
    logger_put_protocol(o, r);
}

/* One operation of a format. */
static void logger_render_op(struct logger_out *o, const struct logger_op *op,
                             struct logger_line *line)
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
    case LOGGER_OP_DASH:
        logger_put_char(o, '-');
        break;
    case LOGGER_OP_USER:
        logger_put_user(o, r);
        break;
    case LOGGER_OP_TIME:
        logger_put_time(o, line);
        break;
    case LOGGER_OP_REQUEST:
        logger_put_request(o, r);
        break;
    case LOGGER_OP_STATUS:
        logger_put_u64(o, (uint64_t) logger_api->status(r));
        break;
    case LOGGER_OP_BYTES_CLF: {
        uint64_t b = logger_api->body_bytes_sent(r);
        if (b) {
            logger_put_u64(o, b);
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
            logger_put_char(o, '-');
        }
        break;
    case LOGGER_OP_HEADER:
        s = logger_api->header(r, op->text, &n);
        if (s) {
            logger_put_escaped(o, s, n);
        }
        else {
            logger_put_char(o, '-');
        }
        break;
    case LOGGER_OP_MICROS:
        logger_put_u64(o, logger_elapsed(line));
        break;
    case LOGGER_OP_SECONDS:
        logger_put_u64(o, logger_elapsed(line) / 1000000u);
        break;
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

size_t logger_format_render(const struct logger_format *f, struct logger_line *line,
                            const char *suffix, char *out, size_t cap)
{
    /* Keep room for "...\n" whatever happens. */
    struct logger_out o = {out, out + cap - 4, false};

    for (unsigned i = 0; i < f->n_ops && !o.cut; i++) {
        logger_render_op(&o, &f->ops[i], line);
    }
    if (suffix && !o.cut) {
        logger_put(&o, suffix, strlen(suffix));
    }
    if (o.cut) {
        memcpy(o.p, "...", 3);
        o.p += 3;
    }
    *o.p++ = '\n';
    return (size_t) (o.p - out);
}
