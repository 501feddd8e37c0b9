/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * http_parser.c: strict HTTP/1.1 request head parser: the end of a head
 * found (mk_http_scan), its request line and fields parsed (mk_http_parse,
 * or mk_http_read_head in one pass), and a head built from the parts an
 * HTTP/2 header block gives (mk_http_head_build). The chunked body decoder
 * is http_chunked.c's.
 *
 * Pure functions (see http.h), callable from any thread; the caller owns
 * every buffer, and a parsed head points into the bytes it was read from.
 * The parser rejects anything that two implementations could read two
 * ways: whitespace before a colon, obs-fold, bare CR, control characters,
 * invalid token characters, a missing or repeated Host, Content-Length
 * together with Transfer-Encoding, differing or malformed Content-Length
 * values. A single LF is accepted as a line terminator (RFC 9112 section
 * 2.2).
 */
#include "http.h"
#include "http_chars.h"

#include <string.h>

#include <monkey/mk_common.h>

/* The tchar table of http_chars.h. */
const uint8_t mk_http_tchar[256] = {
    ['!'] = 3, ['#'] = 3, ['$'] = 3, ['%'] = 3, ['&'] = 3, ['\''] = 3, ['*'] = 3, ['+'] = 3,
    ['-'] = 3, ['.'] = 3, ['^'] = 3, ['_'] = 3, ['`'] = 3, ['|'] = 3,  ['~'] = 3, ['0'] = 3,
    ['1'] = 3, ['2'] = 3, ['3'] = 3, ['4'] = 3, ['5'] = 3, ['6'] = 3,  ['7'] = 3, ['8'] = 3,
    ['9'] = 3, ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1,  ['F'] = 1, ['G'] = 1,
    ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1,  ['N'] = 1, ['O'] = 1,
    ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1,  ['V'] = 1, ['W'] = 1,
    ['X'] = 1, ['Y'] = 1, ['Z'] = 1, ['a'] = 3, ['b'] = 3, ['c'] = 3,  ['d'] = 3, ['e'] = 3,
    ['f'] = 3, ['g'] = 3, ['h'] = 3, ['i'] = 3, ['j'] = 3, ['k'] = 3,  ['l'] = 3, ['m'] = 3,
    ['n'] = 3, ['o'] = 3, ['p'] = 3, ['q'] = 3, ['r'] = 3, ['s'] = 3,  ['t'] = 3, ['u'] = 3,
    ['v'] = 3, ['w'] = 3, ['x'] = 3, ['y'] = 3, ['z'] = 3,
};

/* Characters allowed in a request-target: visible ASCII except '#'. */
static inline bool mk_is_target_char(unsigned char c)
{
    return c > 0x20 && c < 0x7f && c != '#';
}

/*
 * Eight bytes at a time (SWAR): the fast paths below test whole words and
 * fall back to the byte loops for a word that holds anything unusual, so
 * the byte loops alone decide every answer.
 */
#define MK_ONES 0x0101010101010101ull
#define MK_HIGHS 0x8080808080808080ull

static inline uint64_t mk_load8(const char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* Non-zero when a byte of x is below n (n <= 0x80). */
static inline uint64_t mk_swar_below(uint64_t x, unsigned n)
{
    return (x - MK_ONES * n) & ~x & MK_HIGHS;
}

/* Non-zero when a byte of x is c. */
static inline uint64_t mk_swar_has(uint64_t x, unsigned c)
{
    return mk_swar_below(x ^ (MK_ONES * c), 1);
}

/* Non-zero when a byte of x is a control character or DEL (HTAB included). */
static inline uint64_t mk_swar_ctl(uint64_t x)
{
    return mk_swar_below(x, 0x20) | mk_swar_has(x, 0x7f);
}

/*
 * Compare [p, p + len) without regard to case with `lower`, a lower-case
 * name of the same length made of letters and '-' only. Setting bit 0x20
 * maps exactly the letters of either case onto the lower-case ones, and
 * only CR (not a token character) onto '-', so the test is exact for the
 * token characters a field name is made of.
 */
static inline bool mk_name_is(const char *p, const char *lower, size_t len)
{
    if (len >= 8) {
        /* Whole words, the last one overlapping the one before. */
        for (size_t i = 0; i + 8 < len; i += 8) {
            if ((mk_load8(p + i) | (MK_ONES * 0x20)) != mk_load8(lower + i)) {
                return false;
            }
        }
        return (mk_load8(p + len - 8) | (MK_ONES * 0x20)) == mk_load8(lower + len - 8);
    }
    if (len >= 4) {
        uint32_t a, b, c, d;
        memcpy(&a, p, 4);
        memcpy(&b, lower, 4);
        memcpy(&c, p + len - 4, 4);
        memcpy(&d, lower + len - 4, 4);
        return (a | 0x20202020u) == b && (c | 0x20202020u) == d;
    }
    for (size_t i = 0; i < len; i++) {
        if (((unsigned char) p[i] | 0x20) != (unsigned char) lower[i]) {
            return false;
        }
    }
    return true;
}

/* ---- step 1: find the end of the head ------------------------------------ */

/*
 * Check the bytes buf[from, to) of the request line that starts at
 * line_start, in arrival order: the first offending byte decides, so the
 * answer does not depend on how the line was split across reads. Only
 * visible ASCII, SP and CR are allowed, the line starts with a token
 * character, and it may not exceed max_line (a CR at its end belongs to the
 * terminator). Binary input (a TLS handshake on a plain port) is refused at
 * once instead of after the timeout. Returns 0, 400 or 414.
 */
static int mk_request_line_check(const char *buf, size_t from, size_t to, size_t line_start,
                                 size_t max_line)
{
    /*
     * The usual case decided at once: printable ASCII to the end, but for a
     * CR right before the line's end, within max_line; whole words, the
     * last one overlapping. Anything else goes through the loop below.
     */
    size_t k = from, stop = to;
    if (stop > k && buf[stop - 1] == '\r') {
        stop--;
    }
    if (k == line_start && k < stop && mk_is_tchar((unsigned char) buf[k])) {
        k++;
    }
    if (k > line_start && stop - k >= 8 && stop - line_start <= max_line) {
        uint64_t bad = 0;
        for (size_t w = k; w + 8 < stop; w += 8) {
            uint64_t x = mk_load8(buf + w);
            bad |= mk_swar_below(x, 0x20) | mk_swar_has(x, 0x7f) | (x & MK_HIGHS);
        }
        uint64_t x = mk_load8(buf + stop - 8);
        bad |= mk_swar_below(x, 0x20) | mk_swar_has(x, 0x7f) | (x & MK_HIGHS);
        if (!bad) {
            return 0;
        }
    }
    for (k = from; k < to; k++) {
        unsigned char c = (unsigned char) buf[k];
        if ((c < 0x20 && c != '\r') || c >= 0x7f ||
            (k == line_start && !mk_is_tchar(c) && c != '\r')) {
            return 400;
        }
        if (k + 1 - line_start - (c == '\r') > max_line) {
            return 414;
        }
    }
    return 0;
}

/*
 * The shape of a whole request line buf[start, start + len) (its CR left
 * out): a method token, SP, a target, SP, then "HTTP/". Judged as soon as
 * the line ends, so a line such as "a" followed by bytes that are no header
 * fields is refused at once instead of waiting, up to Timeout, for an end of
 * head that never comes. The parser checks the rest (the version: 505).
 * Returns 0 or 400.
 */
static int mk_request_line_shape(const char *line, size_t len)
{
    const char *sp1 = memchr(line, ' ', len);
    const char *sp2 = sp1 ? memrchr(line, ' ', len) : NULL;

    if (!sp1 || sp1 == line || sp2 == sp1 || sp2 == sp1 + 1) {
        return 400;
    }
    for (const char *p = line; p < sp1; p++) {
        if (!mk_is_tchar((unsigned char) *p)) {
            return 400;
        }
    }
    size_t vlen = len - (size_t) (sp2 + 1 - line);
    return vlen >= 5 && memcmp(sp2 + 1, "HTTP/", 5) == 0 ? 0 : 400;
}

ssize_t mk_http_scan(struct mk_http_scan *s, const char *buf, size_t len,
                     const struct mk_http_limits *lim)
{
    /* The request line (and empty lines before it). */
    while (s->lines == 0 && s->pos < len) {
        const char *nl = memchr(buf + s->pos, '\n', len - s->pos);
        size_t end = nl ? (size_t) (nl - buf) : len;
        int status = mk_request_line_check(buf, s->pos, end, s->line_start, lim->max_line);

        if (status) {
            s->status = status;
            return MK_ERR;
        }
        if (!nl) {
            s->pos = len;
            break;
        }
        size_t llen = end - s->line_start;
        if (llen && buf[end - 1] == '\r') {
            llen--;
        }
        s->pos = end + 1;
        if (llen == 0) {
            /* Empty line before the request line: ignored, but bounded. */
            s->line_start = s->head_start = end + 1;
            if (s->head_start > lim->max_line) {
                s->status = 400;
                return MK_ERR;
            }
            continue;
        }
        if (mk_request_line_shape(buf + s->line_start, llen)) {
            s->status = 400;
            return MK_ERR;
        }
        s->lines = 1;
        if (s->lines > lim->max_headers + 1 || end + 1 - s->head_start > lim->max_head) {
            s->status = 431;
            return MK_ERR;
        }
        s->line_start = end + 1;
    }

    /* Header lines, up to the empty one. */
    size_t pos = s->pos, line_start = s->line_start, head_start = s->head_start;
    unsigned lines = s->lines, max_lines = lim->max_headers + 1;
    size_t max_end = head_start + lim->max_head; /* a line ending past it: 431 */
    while (lines && pos < len) {
        const char *nl = memchr(buf + pos, '\n', len - pos);
        if (!nl) {
            pos = len;
            break;
        }
        size_t end = (size_t) (nl - buf);
        pos = end + 1;
        if (end == line_start || (end == line_start + 1 && buf[line_start] == '\r')) {
            s->pos = pos;
            s->line_start = line_start;
            s->lines = lines;
            if (pos > max_end) {
                s->status = 431;
                return MK_ERR;
            }
            return (ssize_t) pos;
        }
        if (++lines > max_lines || pos > max_end) {
            s->pos = pos;
            s->lines = lines;
            s->status = 431;
            return MK_ERR;
        }
        line_start = pos;
    }
    s->pos = pos;
    s->line_start = line_start;
    s->lines = lines;

    if (len - s->head_start > lim->max_head) {
        s->status = 431;
        return MK_ERR;
    }
    return MK_AGAIN;
}

/* ---- step 2: parse the head ---------------------------------------------- */

static enum mk_http_method mk_method_lookup(const char *p, size_t len)
{
    switch (len) {
    case 3:
        if (memcmp(p, "GET", 3) == 0) {
            return MK_METHOD_GET;
        }
        if (memcmp(p, "PUT", 3) == 0) {
            return MK_METHOD_PUT;
        }
        break;
    case 4:
        if (memcmp(p, "HEAD", 4) == 0) {
            return MK_METHOD_HEAD;
        }
        if (memcmp(p, "POST", 4) == 0) {
            return MK_METHOD_POST;
        }
        break;
    case 5:
        if (memcmp(p, "PATCH", 5) == 0) {
            return MK_METHOD_PATCH;
        }
        if (memcmp(p, "TRACE", 5) == 0) {
            return MK_METHOD_TRACE;
        }
        break;
    case 6:
        if (memcmp(p, "DELETE", 6) == 0) {
            return MK_METHOD_DELETE;
        }
        break;
    case 7:
        if (memcmp(p, "OPTIONS", 7) == 0) {
            return MK_METHOD_OPTIONS;
        }
        if (memcmp(p, "CONNECT", 7) == 0) {
            return MK_METHOD_CONNECT;
        }
        break;
    default:
        break;
    }
    return MK_METHOD_UNKNOWN;
}

const char *mk_http_method_name(enum mk_http_method method)
{
    static const char *const names[] = {
        [MK_METHOD_GET] = "GET",     [MK_METHOD_HEAD] = "HEAD",     [MK_METHOD_POST] = "POST",
        [MK_METHOD_PUT] = "PUT",     [MK_METHOD_DELETE] = "DELETE", [MK_METHOD_OPTIONS] = "OPTIONS",
        [MK_METHOD_PATCH] = "PATCH", [MK_METHOD_TRACE] = "TRACE",   [MK_METHOD_CONNECT] = "CONNECT",
    };
    if (method <= MK_METHOD_UNKNOWN || method > MK_METHOD_CONNECT) {
        return NULL;
    }
    return names[method];
}

/* sub-delims and unreserved characters of a reg-name (RFC 3986): ALPHA, DIGIT, -._~!$&'()*+,;= */
static const uint8_t mk_regname[256] = {
    ['-'] = 1, ['.'] = 1, ['_'] = 1, ['~'] = 1, ['!'] = 1, ['$'] = 1, ['&'] = 1, ['\''] = 1,
    ['('] = 1, [')'] = 1, ['*'] = 1, ['+'] = 1, [','] = 1, [';'] = 1, ['='] = 1, ['0'] = 1,
    ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1,
    ['9'] = 1, ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1,
    ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1,
    ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1,
    ['X'] = 1, ['Y'] = 1, ['Z'] = 1, ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1,
    ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1,
    ['n'] = 1, ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1,
    ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1,
};

/*
 * Validate an authority "host[:port]" (no userinfo) and return the host part.
 * An empty authority is valid (an empty Host header).
 */
static bool mk_parse_authority(const char *p, size_t len, struct mk_str *host)
{
    size_t i = 0;

    if (len && p[0] == '[') {
        const char *close = memchr(p, ']', len);
        if (!close || close == p + 1) {
            return false;
        }
        for (const char *q = p + 1; q < close; q++) {
            if (!mk_is_hex(*q) && *q != ':' && *q != '.') {
                return false;
            }
        }
        i = (size_t) (close - p) + 1;
    }
    else {
        const unsigned char *u = (const unsigned char *) p;
        while (i + 4 <= len && mk_regname[u[i]] && mk_regname[u[i + 1]] && mk_regname[u[i + 2]] &&
               mk_regname[u[i + 3]]) {
            i += 4;
        }
        while (i < len) {
            unsigned char c = (unsigned char) p[i];
            if (mk_regname[c]) {
                i++;
                continue;
            }
            if (c != '%') {
                break; /* ':' ends the host; anything else is refused below */
            }
            if (i + 2 >= len || !mk_is_hex(p[i + 1]) || !mk_is_hex(p[i + 2])) {
                return false;
            }
            i += 3;
        }
    }
    *host = mk_str_make(p, i);
    if (i == len) {
        return true;
    }
    if (p[i] != ':' || len - i - 1 > 5) {
        return false;
    }
    /* At most 5 digits (no overflow before the check), at most 65535; none
       at all is an empty port. */
    uint32_t port = 0;
    for (size_t k = i + 1; k < len; k++) {
        if (!mk_is_digit(p[k])) {
            return false;
        }
        port = port * 10 + (uint32_t) (p[k] - '0');
    }
    return port <= 65535;
}

static void mk_split_query(struct mk_http_head *h, const char *p, size_t len)
{
    const char *q = memchr(p, '?', len);
    if (q) {
        h->path = mk_str_make(p, (size_t) (q - p));
        h->query = mk_str_make(q + 1, len - (size_t) (q - p) - 1);
    }
    else {
        h->path = mk_str_make(p, len);
    }
}

static bool mk_parse_target(struct mk_http_head *h)
{
    const char *t = h->target.p;
    size_t len = h->target.len;

    if (h->method == MK_METHOD_CONNECT) {
        struct mk_str host;
        if (!mk_parse_authority(t, len, &host) || host.len == 0 || memchr(t, ':', len) == NULL) {
            return false;
        }
        h->form = MK_TARGET_AUTHORITY;
        h->host = host;
        return true;
    }
    if (t[0] == '/') {
        h->form = MK_TARGET_ORIGIN;
        mk_split_query(h, t, len);
        return true;
    }
    if (len == 1 && t[0] == '*') {
        if (h->method != MK_METHOD_OPTIONS) {
            return false;
        }
        h->form = MK_TARGET_ASTERISK;
        h->path = h->target;
        return true;
    }

    size_t skip;
    if (mk_str_iprefix(t, len, "http://")) {
        skip = 7;
    }
    else if (mk_str_iprefix(t, len, "https://")) {
        skip = 8;
    }
    else {
        return false;
    }
    const char *a = t + skip, *end = t + len, *ae = a;
    while (ae < end && *ae != '/' && *ae != '?') {
        if (*ae == '@') {
            return false; /* userinfo is deprecated and a phishing vector */
        }
        ae++;
    }
    struct mk_str host;
    if (!mk_parse_authority(a, (size_t) (ae - a), &host) || host.len == 0) {
        return false;
    }
    h->form = MK_TARGET_ABSOLUTE;
    h->host = host;
    if (ae == end) {
        h->path = MK_STR("/");
    }
    else if (*ae == '?') {
        h->path = MK_STR("/");
        h->query = mk_str_make(ae + 1, (size_t) (end - ae - 1));
    }
    else {
        mk_split_query(h, ae, (size_t) (end - ae));
    }
    return true;
}

/*
 * Request line [p, e) without its terminator, which *e is (CR or LF: no
 * token or target character, so the loops below stop at e without testing
 * it). Sets status on failure.
 */
static bool mk_parse_request_line(struct mk_http_head *h, const char *p, const char *e)
{
    const char *m = p;

    while (mk_is_tchar((unsigned char) *p)) {
        p++;
    }
    if (p == m || p == e || *p != ' ') {
        return false;
    }
    h->method_name = mk_str_make(m, (size_t) (p - m));
    h->method = mk_method_lookup(m, (size_t) (p - m));

    const char *t = ++p;
    /* Whole words of target characters first (none is SP, a control, '#' or
       above 0x7e), then the byte loop finds where the target ends. */
    while (e - p >= 8) {
        uint64_t x = mk_load8(p);
        if (mk_swar_below(x, 0x21) | mk_swar_has(x, 0x7f) | mk_swar_has(x, '#') | (x & MK_HIGHS)) {
            break;
        }
        p += 8;
    }
    while (mk_is_target_char((unsigned char) *p)) {
        p++;
    }
    if (p == t || p == e || *p != ' ') {
        return false;
    }
    h->target = mk_str_make(t, (size_t) (p - t));
    p++;

    if (e - p != 8 || memcmp(p, "HTTP/", 5) != 0 || !mk_is_digit(p[5]) || p[6] != '.' ||
        !mk_is_digit(p[7])) {
        return false;
    }
    if (p[5] != '1') {
        h->status = 505;
        return false;
    }
    h->version = p[7] == '0' ? 10 : 11;
    return mk_parse_target(h);
}

static const char *const mk_known_names[MK_HDR_KNOWN_COUNT] = {
    [MK_HDR_IF_MATCH] = "if-match",
    [MK_HDR_IF_NONE_MATCH] = "if-none-match",
    [MK_HDR_IF_MODIFIED_SINCE] = "if-modified-since",
    [MK_HDR_IF_UNMODIFIED_SINCE] = "if-unmodified-since",
    [MK_HDR_IF_RANGE] = "if-range",
    [MK_HDR_RANGE] = "range",
    [MK_HDR_COOKIE] = "cookie",
};

const char *mk_http_known_name(enum mk_http_known k)
{
    return mk_known_names[k];
}

struct mk_te_state {
    bool present;
    bool unknown;
    bool last_chunked;
    unsigned chunked;
};

/* The kind of an indexed header (If-Match ... Range), or MK_HDR_KNOWN_COUNT. */
static enum mk_http_known mk_known_kind(const char *n, size_t nl)
{
    switch (nl) {
    case 5:
        return mk_name_is(n, "range", 5) ? MK_HDR_RANGE : MK_HDR_KNOWN_COUNT;
    case 6:
        return mk_name_is(n, "cookie", 6) ? MK_HDR_COOKIE : MK_HDR_KNOWN_COUNT;
    case 8:
        if (mk_name_is(n, "if-match", 8)) {
            return MK_HDR_IF_MATCH;
        }
        return mk_name_is(n, "if-range", 8) ? MK_HDR_IF_RANGE : MK_HDR_KNOWN_COUNT;
    case 13:
        return mk_name_is(n, "if-none-match", 13) ? MK_HDR_IF_NONE_MATCH : MK_HDR_KNOWN_COUNT;
    case 17:
        return mk_name_is(n, "if-modified-since", 17) ? MK_HDR_IF_MODIFIED_SINCE
                                                      : MK_HDR_KNOWN_COUNT;
    case 19:
        return mk_name_is(n, "if-unmodified-since", 19) ? MK_HDR_IF_UNMODIFIED_SINCE
                                                        : MK_HDR_KNOWN_COUNT;
    default:
        return MK_HDR_KNOWN_COUNT;
    }
}

/* One item of a list value equal (case aside) to `lower` (letters, digits, '-'). */
static inline bool mk_item_is(const struct mk_str *item, const char *lower, size_t len)
{
    return item->len == len && mk_name_is(item->p, lower, len);
}

/*
 * Whether a field name may be one that mk_parse_known_header acts on: its
 * length and first letter are those of one of them (host, content-length,
 * connection, transfer-encoding, expect, if-*, range, cookie). A cheap filter, so
 * that the other fields (User-Agent, Accept...) cost no call.
 */
static inline bool mk_maybe_known(const char *n, size_t nl)
{
    const uint32_t lengths = (1u << 4) | (1u << 5) | (1u << 6) | (1u << 8) | (1u << 10) |
                             (1u << 13) | (1u << 14) | (1u << 17) | (1u << 19);
    const uint32_t letters = (1u << ('c' - 'a')) | (1u << ('e' - 'a')) | (1u << ('h' - 'a')) |
                             (1u << ('i' - 'a')) | (1u << ('r' - 'a')) | (1u << ('t' - 'a'));
    unsigned l = (unsigned) ((unsigned char) n[0] | 0x20) - 'a';

    return nl < 32 && ((lengths >> nl) & 1u) && l < 26 && ((letters >> l) & 1u);
}

/*
 * Semantics of the headers the core itself acts on. Names are matched by
 * length first, then with mk_name_is (exact for token characters); list
 * items likewise, which is exact for field values too: no byte a value may
 * hold (HTAB, visible ASCII, obs-text) becomes a letter, a digit or '-' with
 * bit 0x20 set unless it was one.
 */
static bool mk_parse_known_header(struct mk_http_head *h, struct mk_te_state *te,
                                  struct mk_str *expect, const struct mk_http_header *hd)
{
    const char *n = hd->name.p;
    size_t nl = hd->name.len;
    struct mk_str cursor = hd->value, item;

    switch (nl) {
    case 4:
        if (mk_name_is(n, "host", 4)) {
            struct mk_str host;
            if (h->flags & MK_HEAD_HOST) {
                return false;
            }
            h->flags |= MK_HEAD_HOST;
            if (!mk_parse_authority(hd->value.p, hd->value.len, &host)) {
                return false;
            }
            if (h->form == MK_TARGET_ORIGIN || h->form == MK_TARGET_ASTERISK) {
                h->host = host;
            }
        }
        return true;
    case 14:
        if (mk_name_is(n, "content-length", 14)) {
            bool any = false;
            while (mk_str_list_next(&cursor, &item)) {
                uint64_t v;
                if (!mk_str_to_u64(item.p, item.len, INT64_MAX, &v)) {
                    return false;
                }
                if ((h->flags & MK_HEAD_CONTENT_LENGTH) && v != h->content_length) {
                    return false;
                }
                h->flags |= MK_HEAD_CONTENT_LENGTH;
                h->content_length = v;
                any = true;
            }
            if (!any) {
                return false;
            }
        }
        return true;
    case 10:
        if (mk_name_is(n, "connection", 10)) {
            if (mk_item_is(&cursor, "keep-alive", 10)) {
                h->flags |= MK_HEAD_CONN_KEEPALIVE; /* the common value, alone */
                return true;
            }
            while (mk_str_list_next(&cursor, &item)) {
                if (mk_item_is(&item, "close", 5)) {
                    h->flags |= MK_HEAD_CONN_CLOSE;
                }
                else if (mk_item_is(&item, "keep-alive", 10)) {
                    h->flags |= MK_HEAD_CONN_KEEPALIVE;
                }
            }
        }
        return true;
    case 17:
        if (mk_name_is(n, "transfer-encoding", 17)) {
            te->present = true;
            bool any = false;
            while (mk_str_list_next(&cursor, &item)) {
                any = true;
                if (mk_item_is(&item, "chunked", 7)) {
                    te->chunked++;
                    te->last_chunked = true;
                }
                else {
                    te->unknown = true;
                    te->last_chunked = false;
                }
            }
            return any;
        }
        break;
    case 6:
        if (mk_name_is(n, "expect", 6)) {
            if (expect->p) {
                return false;
            }
            *expect = hd->value;
            return true;
        }
        break; /* cookie, an indexed kind */
    default:
        break;
    }
    enum mk_http_known k = mk_known_kind(n, nl);
    if (k < MK_HDR_KNOWN_COUNT) {
        if (h->known[k]) {
            h->known_repeated |= (uint8_t) (1u << k);
        }
        else {
            h->known[k] = (uint16_t) h->n_headers; /* hd is the last one stored */
        }
    }
    return true;
}

static int mk_head_finish(struct mk_http_head *h, const struct mk_te_state *te,
                          const struct mk_str *expect);

/* Whether [p, p + len) holds field-value characters only. */
static inline bool mk_is_field_value(const char *p, size_t len)
{
    if (len >= 8) {
        /* Whole words, the last one overlapping: any control (HTAB too) or
           DEL sends the value to the exact loop. */
        uint64_t bad = mk_swar_ctl(mk_load8(p + len - 8));
        for (size_t i = 0; i + 8 < len; i += 8) {
            bad |= mk_swar_ctl(mk_load8(p + i));
        }
        if (!bad) {
            return true;
        }
    }
    size_t i = 0;
    while (i < len && mk_is_field_char((unsigned char) p[i])) {
        i++;
    }
    return i == len;
}

/*
 * The first control character or DEL (HTAB included) at or after p, given
 * that `stop` is one (an LF) at or after p: whole words first, and in the
 * first word that holds one, its lowest flagged byte, which is exact (a
 * borrow only runs from a flagged byte to higher ones); on a big-endian
 * machine the bytes of that word are looked at one by one instead.
 */
static inline const char *mk_find_ctl(const char *p, const char *stop)
{
    while (stop - p >= 7) {
        uint64_t m = mk_swar_ctl(mk_load8(p));
        if (m) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            return p + (__builtin_ctzll(m) >> 3);
#else
            break;
#endif
        }
        p += 8;
    }
    while (mk_is_field_char((unsigned char) *p) && *p != '\t') {
        p++;
    }
    return p;
}

/*
 * The field lines from p up to the empty line that ends the head. Returns
 * the first byte after that line with *ended set, `end` when the lines ran
 * out without one (*ended false), or NULL with h->status set for a line that
 * is refused or has no end.
 */
static const char *mk_parse_fields(struct mk_http_head *h, const char *p, const char *end,
                                   struct mk_http_header *headers, unsigned cap,
                                   struct mk_te_state *te, struct mk_str *expect, bool *ended)
{
    /* No line can end past the last LF: with it as a sentinel, the loops
       below need no bounds. */
    const char *stop = p < end && end[-1] == '\n' ? end - 1 : NULL;

    if (!stop && p < end) {
        stop = memrchr(p, '\n', (size_t) (end - p));
    }
    *ended = false;
    while (p < end) {
        if (!stop || p > stop) {
            return NULL; /* a line without its end */
        }
        if (*p == '\n' || (*p == '\r' && p[1] == '\n')) {
            *ended = true;
            return p + (*p == '\n' ? 1 : 2); /* end of head */
        }
        /* field-line = field-name ":" OWS field-value OWS */
        if (*p == ' ' || *p == '\t') {
            return NULL; /* obs-fold */
        }
        const char *name = p;
        /* Stops at stop the latest (LF); four at a time, never reading past
           the first byte that is not a token character. */
        while (mk_is_tchar((unsigned char) p[0]) && mk_is_tchar((unsigned char) p[1]) &&
               mk_is_tchar((unsigned char) p[2]) && mk_is_tchar((unsigned char) p[3])) {
            p += 4;
        }
        while (mk_is_tchar((unsigned char) *p)) {
            p++;
        }
        if (p == name || *p != ':') {
            return NULL; /* empty name, bad character or whitespace before colon */
        }
        /* The value runs to the first control character, which must be the
           line's end (CRLF or LF); HTAB is a value character. */
        const char *v = p + 1, *le = v;
        for (;;) {
            le = mk_find_ctl(le, stop);
            if (*le != '\t') {
                break;
            }
            le++;
        }
        const char *nl = le;
        if (*le == '\r' && le[1] == '\n') {
            nl = le + 1;
        }
        else if (*le != '\n') {
            return NULL; /* a control character, DEL or a bare CR */
        }
        struct mk_http_header hd;
        hd.name = mk_str_make(name, (size_t) (p - name));
        hd.value = mk_str_trim(mk_str_make(v, (size_t) (le - v)));
        if (h->n_headers >= cap) {
            h->status = 431;
            return NULL;
        }
        headers[h->n_headers++] = hd;
        if (mk_maybe_known(hd.name.p, hd.name.len) && !mk_parse_known_header(h, te, expect, &hd)) {
            return NULL;
        }
        p = nl + 1;
    }
    return end;
}

ssize_t mk_http_parse(struct mk_http_head *h, const char *buf, size_t len,
                      struct mk_http_header *headers, unsigned cap)
{
    const char *p = buf, *end = buf + len;
    struct mk_te_state te = {0};
    struct mk_str expect = {0};
    bool ended;

    memset(h, 0, sizeof(*h));
    h->headers = headers;
    h->status = 400;

    /* Empty lines, then the request line. */
    for (;;) {
        if (p >= end) {
            return MK_ERR; /* no request line */
        }
        const char *nl = memchr(p, '\n', (size_t) (end - p));
        if (!nl) {
            return MK_ERR; /* the scan guarantees a terminated head */
        }
        const char *le = nl;
        if (le > p && le[-1] == '\r') {
            le--;
        }
        /* A bare CR is refused by the checks of each part of the line: the
           method, the target, the version, a field name or value. */
        if (le == p) {
            p = nl + 1; /* leading empty line */
            continue;
        }
        if (!mk_parse_request_line(h, p, le)) {
            return MK_ERR;
        }
        p = nl + 1;
        break;
    }
    p = mk_parse_fields(h, p, end, headers, cap, &te, &expect, &ended);
    if (!p || mk_head_finish(h, &te, &expect) != MK_OK) {
        return MK_ERR;
    }
    return (ssize_t) (p - buf);
}

ssize_t mk_http_read_head(struct mk_http_head *h, const char *buf, size_t len,
                          const struct mk_http_limits *lim, struct mk_http_header *headers,
                          unsigned cap, unsigned *lines)
{
    const char *end = buf + len;
    struct mk_te_state te = {0};
    struct mk_str expect = {0};
    bool ended;

    if (len < 2 || buf[0] == '\r' || buf[0] == '\n') {
        return MK_DECLINED; /* empty lines first: the scan bounds them */
    }
    memset(h, 0, sizeof(*h));
    h->headers = headers;
    h->status = 400;
    const char *nl = memchr(buf, '\n', len);
    if (!nl) {
        return MK_DECLINED;
    }
    const char *le = nl > buf && nl[-1] == '\r' ? nl - 1 : nl;
    /*
     * A request line the parser accepts is one the scan accepts (a token,
     * SP, target characters, SP, "HTTP/d.d": nothing but printable ASCII,
     * its shape) as long as it is not too long; the scan's other limits are
     * the field count and the head's length, checked at the end.
     */
    if ((size_t) (le - buf) > lim->max_line || !mk_parse_request_line(h, buf, le)) {
        return MK_DECLINED;
    }
    const char *p = mk_parse_fields(h, nl + 1, end, headers, cap, &te, &expect, &ended);
    if (!p || !ended || h->n_headers > lim->max_headers || (size_t) (p - buf) > lim->max_head ||
        mk_head_finish(h, &te, &expect) != MK_OK) {
        return MK_DECLINED;
    }
    *lines = h->n_headers + 1;
    return (ssize_t) (p - buf);
}

/*
 * The checks that need the whole head: Transfer-Encoding against the
 * version and Content-Length, Host for HTTP/1.1, Expect. MK_OK (status
 * cleared), or MK_ERR with h->status set.
 */
static int mk_head_finish(struct mk_http_head *h, const struct mk_te_state *te,
                          const struct mk_str *expect)
{
    if (te->present) {
        if (h->version == 10 || (h->flags & MK_HEAD_CONTENT_LENGTH)) {
            return MK_ERR;
        }
        if (te->unknown) {
            h->status = 501;
            return MK_ERR;
        }
        if (te->chunked != 1 || !te->last_chunked) {
            return MK_ERR;
        }
        h->flags |= MK_HEAD_CHUNKED;
    }
    if (h->version == 11 && !(h->flags & MK_HEAD_HOST)) {
        return MK_ERR;
    }
    if (expect->p && h->version == 11) {
        if (!mk_str_ieq(expect->p, expect->len, "100-continue")) {
            h->status = 417;
            return MK_ERR;
        }
        h->flags |= MK_HEAD_EXPECT_CONTINUE;
    }
    h->status = 0;
    return MK_OK;
}

/* Whether [p, p + len) is a non-empty run of request-target characters. */
static bool mk_is_target(const char *p, size_t len)
{
    size_t i = 0;

    while (i < len && mk_is_target_char((unsigned char) p[i])) {
        i++;
    }
    return len && i == len;
}

enum mk_http_name mk_http_name_class(const char *p, size_t len)
{
    const unsigned char *u = (const unsigned char *) p;
    unsigned acc = len ? MK_HTTP_NAME_LOWER : MK_HTTP_NAME_BAD;
    size_t i = 0;

    for (; i + 4 <= len; i += 4) {
        acc &= mk_http_tchar[u[i]] & mk_http_tchar[u[i + 1]] & mk_http_tchar[u[i + 2]] &
               mk_http_tchar[u[i + 3]];
    }
    for (; i < len; i++) {
        acc &= mk_http_tchar[u[i]];
    }
    return (enum mk_http_name) acc;
}

/* Whether [p, p + len) is a token (tchar+). */
static bool mk_is_token(const char *p, size_t len)
{
    return mk_http_name_class(p, len) != MK_HTTP_NAME_BAD;
}

int mk_http_head_build(struct mk_http_head *h, struct mk_str method, struct mk_str target,
                       struct mk_http_header *headers, unsigned n, bool names_are_tokens,
                       const struct mk_http_limits *lim)
{
    struct mk_te_state te = {0};
    struct mk_str expect = {0};

    memset(h, 0, sizeof(*h));
    h->headers = headers;
    h->status = 400;
    if (!mk_is_token(method.p, method.len) || !mk_is_target(target.p, target.len)) {
        return MK_ERR;
    }
    if (method.len + target.len + sizeof(" HTTP/1.1") > lim->max_line) {
        h->status = 414; /* the request line "METHOD TARGET HTTP/1.1" */
        return MK_ERR;
    }
    if (n > lim->max_headers) {
        h->status = 431;
        return MK_ERR;
    }
    h->method_name = method;
    h->method = mk_method_lookup(method.p, method.len);
    h->target = target;
    h->version = 11;
    if (!mk_parse_target(h)) {
        return MK_ERR;
    }
    for (unsigned i = 0; i < n; i++) {
        struct mk_http_header *hd = &headers[i];
        if ((!names_are_tokens && !mk_is_token(hd->name.p, hd->name.len)) ||
            !mk_is_field_value(hd->value.p, hd->value.len)) {
            return MK_ERR;
        }
        hd->value = mk_str_trim(hd->value);
        h->n_headers = i + 1;
        if (!mk_parse_known_header(h, &te, &expect, hd)) {
            return MK_ERR;
        }
    }
    return mk_head_finish(h, &te, &expect);
}

const struct mk_str *mk_http_header_get(const struct mk_http_head *head, const char *name)
{
    size_t len = strlen(name);
    char first = mk_tolower(name[0]);
    for (unsigned i = 0; i < head->n_headers; i++) {
        const struct mk_str *n = &head->headers[i].name;
        /* the length and the first letter first: most names differ there */
        if (n->len == len && (len == 0 || mk_tolower(n->p[0]) == first) &&
            mk_str_ieq(n->p, n->len, name)) {
            return &head->headers[i].value;
        }
    }
    return NULL;
}
