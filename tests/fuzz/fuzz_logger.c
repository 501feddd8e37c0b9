/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * fuzz_logger.c: libFuzzer target for plugins/logger/format.c: an access
 * log line rendered from what a client sent (the request line, a header,
 * the path, the query, the Host, Basic credentials) and from a plugin's
 * note, through a struct mk_api of the target's own; and a format string
 * (LogFormat, configuration) compiled and rendered.
 *
 * Input: NUL-separated fields: method, target, path, query, a header
 * (X-A), host, Authorization, the note remote_user, the transport's
 * protocol, then a format string; a field that is missing is absent
 * (NULL), the query and the note also when their field is a lone 0x01.
 * Invariants (each a crash when broken):
 *  - a line is at most its room (4096 bytes, and a small room of 16 to 79
 *    bytes from the input's length), ends in '\n', and one that did not fit
 *    ends in "...\n";
 *  - with a format of client fields only, every byte but the newline is
 *    printable ASCII, and reading each field back (unescaping "\\", "\""
 *    and "\xhh") gives what the client sent ("-" for an empty field where
 *    the format says so), so a client cannot end a quoted field or a line;
 *  - %u is the note when there is one, else the user name of Basic
 *    credentials (mk_basic_credentials) or "-";
 *  - with escape=json, a format shaped as JSON renders one valid JSON
 *    object (RFC 8259, its strings valid UTF-8) even when the line is cut,
 *    and each string reads back (\u00XX as the byte XX) as what the client
 *    sent, absent values as "", or as a prefix of it followed by "..."
 *    when it did not fit;
 *  - with escape=none, no byte but the newline is a control byte;
 *  - any format string either compiles, and renders within its room, or
 *    is refused with a reason.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/logger/logger.h"

#include "fuzz_check.h"

/* What format.c calls through; set below. */
const struct mk_api *logger_api;

enum {
    F_METHOD,
    F_TARGET,
    F_PATH,
    F_QUERY,
    F_HEADER,
    F_HOST,
    F_AUTH,
    F_NOTE,
    F_PROTO,
    F_SPEC,
    F_N
};

static struct {
    const char *v[F_N]; /* NULL: absent */
    size_t len[F_N];
} req;

static const char *field(int k, size_t *len)
{
    *len = req.v[k] ? req.len[k] : 0;
    return req.v[k];
}

static const char *f_method(const struct mk_request *r, size_t *len)
{
    (void) r;
    const char *v = field(F_METHOD, len);
    return v ? v : "";
}

static const char *f_target(const struct mk_request *r, size_t *len)
{
    (void) r;
    return field(F_TARGET, len);
}

static const char *f_path(const struct mk_request *r, size_t *len)
{
    (void) r;
    return field(F_PATH, len);
}

static const char *f_query(const struct mk_request *r, size_t *len)
{
    (void) r;
    return field(F_QUERY, len);
}

static const char *f_host(const struct mk_request *r, size_t *len)
{
    (void) r;
    return field(F_HOST, len);
}

static const char *f_header(const struct mk_request *r, const char *name, size_t *len)
{
    (void) r;
    if (strcasecmp(name, "X-A") == 0) {
        return field(F_HEADER, len);
    }
    if (strcasecmp(name, "Authorization") == 0) {
        return field(F_AUTH, len);
    }
    *len = 0;
    return NULL;
}

static const char *f_note(const struct mk_request *r, const char *name, size_t *len)
{
    (void) r;
    if (strcmp(name, MK_NOTE_REMOTE_USER) == 0) {
        return field(F_NOTE, len);
    }
    *len = 0;
    return NULL;
}

static struct mk_conn *f_conn(const struct mk_request *r)
{
    (void) r;
    return (struct mk_conn *) &req;
}

static const char *f_conn_var(struct mk_conn *c, const char *name, size_t *len)
{
    (void) c;
    if (strcmp(name, "protocol") == 0) {
        return field(F_PROTO, len);
    }
    *len = 0;
    return NULL;
}

static const struct sockaddr *f_remote(const struct mk_request *r, socklen_t *len)
{
    static struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = {{{0x20, 0x01}}}};
    (void) r;
    *len = sizeof(sa);
    return (const struct sockaddr *) &sa;
}

static void f_request_time(const struct mk_request *r, struct timespec *start, uint64_t *us)
{
    (void) r;
    start->tv_sec = 1000000000;
    start->tv_nsec = 0;
    if (us) {
        *us = 1234567;
    }
}

static time_t f_now(void)
{
    return 1000000000;
}

static int f_version(const struct mk_request *r)
{
    (void) r;
    return req.len[F_METHOD] % 2 ? 11 : 20;
}

static int f_status(const struct mk_request *r)
{
    (void) r;
    return 200;
}

static uint64_t f_bytes(const struct mk_request *r)
{
    (void) r;
    return req.len[F_TARGET];
}

static const char *f_site_name(const struct mk_site *s, unsigned i)
{
    (void) s;
    return i == 0 ? "example.com" : NULL;
}

static const struct mk_api fake_api = {
    .size = sizeof(struct mk_api),
    .method = f_method,
    .target = f_target,
    .client_method = f_method,
    .client_target = f_target,
    .path = f_path,
    .query = f_query,
    .host = f_host,
    .header = f_header,
    .note = f_note,
    .conn = f_conn,
    .conn_transport_var = f_conn_var,
    .remote_sockaddr = f_remote,
    .request_time = f_request_time,
    .now = f_now,
    .version = f_version,
    .status = f_status,
    .body_bytes_sent = f_bytes,
    .bytes_sent = f_bytes,
    .site_name = f_site_name,
};

/* ---- reading a line back -------------------------------------------------------------- */

struct reader {
    const char *p, *end;
};

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Unescape up to the next unescaped `stop` (consumed) into out: its length, or -1. */
static ssize_t read_field(struct reader *rd, char stop, char *out)
{
    size_t o = 0;
    while (rd->p < rd->end && *rd->p != stop) {
        char c = *rd->p++;
        if (c != '\\') {
            out[o++] = c;
            continue;
        }
        if (rd->p == rd->end) {
            return -1;
        }
        c = *rd->p++;
        if (c == '"' || c == '\\') {
            out[o++] = c;
        }
        else if (c == 'x' && rd->end - rd->p >= 2 && hexval(rd->p[0]) >= 0 &&
                 hexval(rd->p[1]) >= 0) {
            out[o++] = (char) (hexval(rd->p[0]) * 16 + hexval(rd->p[1]));
            rd->p += 2;
        }
        else {
            return -1;
        }
    }
    if (rd->p == rd->end) {
        return -1;
    }
    rd->p++;
    return (ssize_t) o;
}

static bool expect(struct reader *rd, const char *s)
{
    size_t n = strlen(s);
    if ((size_t) (rd->end - rd->p) < n || memcmp(rd->p, s, n) != 0) {
        return false;
    }
    rd->p += n;
    return true;
}

/* The next field, ended by `stop`, read back equals v[0, n) ("-" when dash and n == 0). */
static void check_field(struct reader *rd, char stop, const char *v, size_t n, bool dash,
                        char *scratch)
{
    ssize_t got = read_field(rd, stop, scratch);
    MK_FUZZ_CHECK(got >= 0);
    if (dash && (!v || n == 0)) {
        MK_FUZZ_CHECK(got == 1 && scratch[0] == '-');
        return;
    }
    MK_FUZZ_CHECK((size_t) got == n && (n == 0 || memcmp(scratch, v, n) == 0));
}

/* The client fields, each between quotes (the room: 4 bytes of the worst escape each). */
static const char client_spec[] = "\"%r\" \"%{X-A}i\" \"%q\" \"%U\" \"%m\" \"%V\" \"%u\" "
                                  "\"%{ssl_protocol}x\" \"%{remote_user}n\" %h %t %s %b %H %v";

static void check_client_line(const char *out, size_t len, struct logger_line *line)
{
    size_t mlen, tlen, n;
    char *scratch = malloc(len + 1);
    struct reader rd = {out, out + len - 1};
    const char *m = f_method(NULL, &mlen), *t = f_target(NULL, &tlen);

    /* %r: METHOD TARGET PROTOCOL ("-" for no target), or "-" without a method */
    MK_FUZZ_CHECK(expect(&rd, "\""));
    ssize_t got = read_field(&rd, '"', scratch);
    if (mlen == 0) {
        MK_FUZZ_CHECK(got == 1 && scratch[0] == '-');
    }
    else {
        const char *proto = f_version(NULL) == 20 ? " HTTP/2.0" : " HTTP/1.1";
        size_t shown = tlen ? tlen : 1;
        MK_FUZZ_CHECK(got >= 0 && (size_t) got == mlen + 1 + shown + 9);
        MK_FUZZ_CHECK(memcmp(scratch, m, mlen) == 0 && scratch[mlen] == ' ');
        MK_FUZZ_CHECK(memcmp(scratch + mlen + 1, tlen ? t : "-", shown) == 0);
        MK_FUZZ_CHECK(memcmp(scratch + mlen + 1 + shown, proto, 9) == 0);
    }
    /* %{X-A}i: as sent, "-" when absent */
    MK_FUZZ_CHECK(expect(&rd, " \""));
    const char *h = field(F_HEADER, &n);
    if (!h) {
        MK_FUZZ_CHECK(expect(&rd, "-\""));
    }
    else {
        check_field(&rd, '"', h, n, false, scratch);
    }
    /* %q: "?query", nothing without one */
    MK_FUZZ_CHECK(expect(&rd, " \""));
    const char *q = field(F_QUERY, &n);
    if (q) {
        MK_FUZZ_CHECK(expect(&rd, "?"));
        check_field(&rd, '"', q, n, false, scratch);
    }
    else {
        MK_FUZZ_CHECK(expect(&rd, "\""));
    }
    /* %U, %m, %V: "-" when empty */
    MK_FUZZ_CHECK(expect(&rd, " \""));
    const char *v = field(F_PATH, &n);
    check_field(&rd, '"', v, n, true, scratch);
    MK_FUZZ_CHECK(expect(&rd, " \""));
    check_field(&rd, '"', m, mlen, true, scratch);
    MK_FUZZ_CHECK(expect(&rd, " \""));
    v = field(F_HOST, &n);
    check_field(&rd, '"', v, n, true, scratch);
    /* %u: the note, else the Basic user name, else "-" */
    MK_FUZZ_CHECK(expect(&rd, " \""));
    size_t note_len;
    const char *note = field(F_NOTE, &note_len);
    if (note) {
        check_field(&rd, '"', note, note_len, true, scratch);
    }
    else {
        char cred[768];
        size_t cl;
        const char *a = field(F_AUTH, &n);
        ssize_t colon = a ? mk_basic_credentials(a, n, cred, sizeof(cred), &cl) : -1;
        check_field(&rd, '"', cred, colon > 0 ? (size_t) colon : 0, true, scratch);
    }
    /* %{ssl_protocol}x, %{remote_user}n */
    MK_FUZZ_CHECK(expect(&rd, " \""));
    v = field(F_PROTO, &n);
    check_field(&rd, '"', v, n, true, scratch);
    MK_FUZZ_CHECK(expect(&rd, " \""));
    if (note) {
        check_field(&rd, '"', note, note_len, false, scratch);
    }
    else {
        MK_FUZZ_CHECK(expect(&rd, "-\""));
    }
    MK_FUZZ_CHECK(expect(&rd, " 2001::"));
    (void) line;
    free(scratch);
}

/* ---- escape=json ------------------------------------------------------------------ */

/* The client fields as JSON, with the fixed ones around them. */
static const char json_spec[] =
    "escape=json {\"r\":\"%r\",\"h\":\"%{X-A}i\",\"q\":\"%q\",\"U\":\"%U\",\"m\":\"%m\","
    "\"V\":\"%V\",\"u\":\"%u\",\"x\":\"%{ssl_protocol}x\",\"n\":\"%{remote_user}n\","
    "\"a\":\"%h\",\"l\":\"%l\",\"t\":\"%{iso8601}t\",\"T\":\"%t\",\"s\":%s,\"b\":%b,"
    "\"B\":%B,\"H\":\"%H\",\"v\":\"%v\"}";
static const char json_keys[] = "rhqUmVuxnaltTsbBHv";

/* A valid UTF-8 sequence at s (n bytes left): its length, else 0 (RFC 3629). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    uint32_t cp;
    size_t len;

    if (s[0] < 0x80) {
        return 1;
    }
    if (s[0] >= 0xc0 && s[0] < 0xe0) {
        len = 2, cp = s[0] & 0x1f;
    }
    else if (s[0] >= 0xe0 && s[0] < 0xf0) {
        len = 3, cp = s[0] & 0x0f;
    }
    else if (s[0] >= 0xf0 && s[0] < 0xf8) {
        len = 4, cp = s[0] & 0x07;
    }
    else {
        return 0;
    }
    if (n < len) {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            return 0;
        }
        cp = cp << 6 | (s[i] & 0x3f);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
        return 0;
    }
    return len;
}

/* A JSON string at rd->p (its opening quote), decoded into out (\u00XX as one byte). -1: invalid.
 */
static ssize_t json_string(struct reader *rd, char *out)
{
    size_t o = 0;

    if (rd->p == rd->end || *rd->p != '"') {
        return -1;
    }
    rd->p++;
    while (rd->p < rd->end && *rd->p != '"') {
        unsigned char c = (unsigned char) *rd->p;
        if (c < 0x20) {
            return -1;
        }
        if (c != '\\') {
            size_t len = utf8_seq((const unsigned char *) rd->p, (size_t) (rd->end - rd->p));
            if (len == 0) {
                return -1;
            }
            memcpy(out + o, rd->p, len);
            o += len;
            rd->p += len;
            continue;
        }
        if (rd->end - rd->p < 2) {
            return -1;
        }
        char e = rd->p[1];
        const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
        const char *k = strchr(from, e);
        if (e && k) {
            out[o++] = to[k - from];
            rd->p += 2;
            continue;
        }
        if (e != 'u' || rd->end - rd->p < 6 || rd->p[2] != '0' || rd->p[3] != '0' ||
            hexval(rd->p[4]) < 0 || hexval(rd->p[5]) < 0) {
            return -1; /* the logger writes \u00XX only */
        }
        out[o++] = (char) (hexval(rd->p[4]) * 16 + hexval(rd->p[5]));
        rd->p += 6;
    }
    if (rd->p == rd->end) {
        return -1;
    }
    rd->p++;
    return (ssize_t) o;
}

/* A JSON number (the logger's: digits only) at rd->p; false if none. */
static bool json_number(struct reader *rd)
{
    const char *start = rd->p;
    while (rd->p < rd->end && *rd->p >= '0' && *rd->p <= '9') {
        rd->p++;
    }
    return rd->p > start && (rd->p - start == 1 || *start != '0');
}

/* got[0, n) is want[0, wn), or a prefix of it followed by "..." (a field cut to fit). */
static bool same_or_cut(const char *got, size_t n, const char *want, size_t wn)
{
    if (n == wn && memcmp(got, want, n) == 0) {
        return true;
    }
    return n >= 3 && memcmp(got + n - 3, "...", 3) == 0 && n - 3 <= wn &&
           memcmp(got, want, n - 3) == 0;
}

/* The value the client field `key` of json_spec must read back as, into buf; its length. */
static size_t json_expected(char key, char *buf)
{
    size_t n, mlen, tlen;
    const char *v = NULL, *m = f_method(NULL, &mlen), *t = f_target(NULL, &tlen);

    switch (key) {
    case 'r':
        if (mlen == 0) {
            return 0;
        }
        n = (size_t) sprintf(buf, "%.*s %.*s %s", (int) mlen, m, (int) (t ? tlen : 0), t ? t : "",
                             f_version(NULL) == 20 ? "HTTP/2.0" : "HTTP/1.1");
        /* sprintf stops at a NUL: fields hold none (the input's separator) */
        return n;
    case 'h':
        v = field(F_HEADER, &n);
        break;
    case 'q':
        v = field(F_QUERY, &n);
        if (!v) {
            return 0;
        }
        buf[0] = '?';
        memcpy(buf + 1, v, n);
        return n + 1;
    case 'U':
        v = field(F_PATH, &n);
        break;
    case 'm':
        v = m, n = mlen;
        break;
    case 'V':
        v = field(F_HOST, &n);
        break;
    case 'u': {
        v = field(F_NOTE, &n);
        if (v) {
            break;
        }
        char cred[768];
        size_t cl;
        const char *a = field(F_AUTH, &n);
        ssize_t colon = a ? mk_basic_credentials(a, n, cred, sizeof(cred), &cl) : -1;
        n = colon > 0 ? (size_t) colon : 0;
        memcpy(buf, cred, n);
        return n;
    }
    case 'x':
        v = field(F_PROTO, &n);
        break;
    case 'n':
        v = field(F_NOTE, &n);
        break;
    case 'a':
        memcpy(buf, "2001::", 6);
        return 6;
    case 'H':
        memcpy(buf, f_version(NULL) == 20 ? "HTTP/2.0" : "HTTP/1.1", 8);
        return 8;
    case 'v':
        memcpy(buf, "example.com", 11);
        return 11;
    default: /* l: always absent */
        return 0;
    }
    if (!v) {
        return 0;
    }
    memcpy(buf, v, n);
    return n;
}

static void check_json_line(const char *out, size_t len)
{
    size_t cap = 1024; /* the longest expected value: a field, or %r of two fields */
    for (int k = 0; k < F_N; k++) {
        cap += req.len[k];
    }
    char *got = malloc(len + 1), *want = malloc(cap);
    struct reader rd = {out, out + len - 1};

    MK_FUZZ_CHECK(expect(&rd, "{"));
    for (size_t k = 0; json_keys[k]; k++) {
        char key[2] = {json_keys[k], 0}, head[8];
        snprintf(head, sizeof(head), "%s\"%s\":", k ? "," : "", key);
        MK_FUZZ_CHECK(expect(&rd, head));
        if (strchr("sbB", key[0])) {
            MK_FUZZ_CHECK(json_number(&rd));
            continue;
        }
        ssize_t n = json_string(&rd, got);
        MK_FUZZ_CHECK(n >= 0);
        if (key[0] == 't' || key[0] == 'T') {
            /* 2001-09-09T01:46:40+00:00 in UTC, [09/Sep/2001:01:46:40 +0000] */
            MK_FUZZ_CHECK(n == (key[0] == 't' ? 25 : 28));
            continue;
        }
        size_t wn = json_expected(key[0], want);
        MK_FUZZ_CHECK(same_or_cut(got, (size_t) n, want, wn));
    }
    MK_FUZZ_CHECK(expect(&rd, "}"));
    MK_FUZZ_CHECK(rd.p == rd.end && out[len - 1] == '\n');
    free(got);
    free(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *in = malloc(size ? size : 1); /* exactly the input: overruns are seen */
    memcpy(in, data, size);
    memset(&req, 0, sizeof(req));
    size_t start = 0;
    for (int k = 0; k < F_N && start <= size; k++) {
        const char *nul = memchr(in + start, '\0', size - start);
        size_t end = nul ? (size_t) (nul - in) : size;
        req.v[k] = in + start;
        req.len[k] = end - start;
        start = end + 1;
        if (!nul) {
            break;
        }
    }
    for (int k = F_QUERY; k <= F_NOTE; k += F_NOTE - F_QUERY) {
        if (req.v[k] && req.len[k] == 1 && req.v[k][0] == 1) {
            req.v[k] = NULL;
        }
    }
    logger_api = &fake_api;

    struct logger_clock clock = {0};
    struct logger_line line = {
        .r = (struct mk_request *) &req, .site = (const struct mk_site *) &req, .clock = &clock};
    struct logger_format *f;
    char err[256];
    size_t small = 16 + size % 64;
    char *out = malloc(LOGGER_LINE_MAX), *tiny = malloc(small);

    MK_FUZZ_CHECK(logger_format_compile(client_spec, &f, err, sizeof(err)) == MK_OK);
    size_t len = logger_format_render(f, &line, NULL, out, LOGGER_LINE_MAX);
    MK_FUZZ_CHECK(len >= 1 && len <= LOGGER_LINE_MAX && out[len - 1] == '\n');
    for (size_t i = 0; i + 1 < len; i++) {
        MK_FUZZ_CHECK(out[i] >= 0x20 && out[i] < 0x7f);
    }
    bool cut = len >= 4 && memcmp(out + len - 4, "...\n", 4) == 0;
    if (!cut) {
        check_client_line(out, len, &line);
    }
    size_t tl = logger_format_render(f, &line, " (suffix)", tiny, small);
    MK_FUZZ_CHECK(tl <= small && tiny[tl - 1] == '\n');
    MK_FUZZ_CHECK(tl <= small - 3 || memcmp(tiny + tl - 4, "...\n", 4) == 0);
    logger_format_free(f);

    /* escape=json: valid JSON however long the fields, and what the client sent */
    MK_FUZZ_CHECK(logger_format_compile(json_spec, &f, err, sizeof(err)) == MK_OK);
    len = logger_format_render(f, &line, NULL, out, LOGGER_LINE_MAX);
    MK_FUZZ_CHECK(len >= 1 && len <= LOGGER_LINE_MAX && out[len - 1] == '\n');
    check_json_line(out, len);
    tl = logger_format_render(f, &line, NULL, tiny, small);
    MK_FUZZ_CHECK(tl >= 1 && tl <= small && tiny[tl - 1] == '\n');
    logger_format_free(f);

    /* escape=none: the client's bytes as they are, but never a control byte */
    MK_FUZZ_CHECK(
        logger_format_compile("escape=none %r %{X-A}i %U %q %u %V", &f, err, sizeof(err)) == MK_OK);
    len = logger_format_render(f, &line, NULL, out, LOGGER_LINE_MAX);
    MK_FUZZ_CHECK(len >= 1 && len <= LOGGER_LINE_MAX && out[len - 1] == '\n');
    for (size_t i = 0; i + 1 < len; i++) {
        MK_FUZZ_CHECK((unsigned char) out[i] >= 0x20 && out[i] != 0x7f);
    }
    logger_format_free(f);

    /* the format string of the input */
    size_t sl;
    const char *spec = field(F_SPEC, &sl);
    if (spec && !memchr(spec, '\0', sl)) {
        char *s = malloc(sl + 1);
        memcpy(s, spec, sl);
        s[sl] = '\0';
        err[0] = '\0';
        if (logger_format_compile(s, &f, err, sizeof(err)) == MK_OK) {
            len = logger_format_render(f, &line, NULL, out, LOGGER_LINE_MAX);
            MK_FUZZ_CHECK(len >= 1 && len <= LOGGER_LINE_MAX && out[len - 1] == '\n');
            tl = logger_format_render(f, &line, NULL, tiny, small);
            MK_FUZZ_CHECK(tl >= 1 && tl <= small && tiny[tl - 1] == '\n');
            logger_format_free(f);
        }
        else {
            MK_FUZZ_CHECK(err[0] != '\0' && f == NULL);
        }
        free(s);
    }
    free(out);
    free(tiny);
    free(in);
    return 0;
}
