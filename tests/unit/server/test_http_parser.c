/*
 * Monkey HTTP Server
 * Copyright (C) the Monkey authors. Licensed under the Apache License 2.0.
 *
 * test_http_parser.c: unit tests of server/http/http_parser.c.
 *
 * The centre is a table of raw request heads with the outcome expected when
 * they go through mk_http_scan() and then mk_http_parse() the way
 * server/conn/conn.c drives them: complete (and how many bytes the head has), need
 * more input, or the HTTP status to answer. Every row is run twice: with the
 * whole input at once and one byte at a time through the same scan state, and
 * both runs must agree. Buffers are copied into allocations of their exact
 * size so the sanitizers catch any read past the end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <monkey/mk_common.h>

#include "server/http/http.h"

/* A string literal and its length, NUL bytes included. */
#define RAW(s) s, sizeof(s) - 1

#define AGAIN (-2) /* expected outcome: the scan wants more input */

static const struct mk_http_limits lim_default = {8192, 32768, 100};
static const struct mk_http_limits lim_short_line = {16, 1024, 100};
static const struct mk_http_limits lim_small_head = {64, 80, 100};
static const struct mk_http_limits lim_two_headers = {8192, 32768, 2};

struct parse_case {
    const char *name;
    const char *raw;
    size_t len;
    int status;      /* 0: complete; AGAIN; or the HTTP status answered */
    size_t head_len; /* complete: bytes of the head; 0 means all of raw */
    enum mk_http_method method;
    uint8_t version;
    uint8_t flags;
    uint64_t content_length;
    const struct mk_http_limits *lim; /* NULL: lim_default */
};

/* A complete head: method, version, flags. */
#define OK(m, v, f) 0, .method = (m), .version = (v), .flags = (f)

static const struct parse_case cases[] = {
    /* ---- valid requests ---- */
    {"GET", RAW("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), OK(MK_METHOD_GET, 11, MK_HEAD_HOST)},
    {"HEAD", RAW("HEAD /x HTTP/1.1\r\nHost: a\r\n\r\n"), OK(MK_METHOD_HEAD, 11, MK_HEAD_HOST)},
    {"OPTIONS path", RAW("OPTIONS /x HTTP/1.1\r\nHost: a\r\n\r\n"),
     OK(MK_METHOD_OPTIONS, 11, MK_HEAD_HOST)},
    {"OPTIONS *", RAW("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"),
     OK(MK_METHOD_OPTIONS, 11, MK_HEAD_HOST)},
    {"POST with body after the head",
     RAW("POST /f HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"),
     OK(MK_METHOD_POST, 11, MK_HEAD_HOST | MK_HEAD_CONTENT_LENGTH), .content_length = 5,
     .head_len = sizeof("POST /f HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n") - 1},
    {"PUT", RAW("PUT /f HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"),
     OK(MK_METHOD_PUT, 11, MK_HEAD_HOST | MK_HEAD_CONTENT_LENGTH)},
    {"DELETE", RAW("DELETE /f HTTP/1.1\r\nHost: a\r\n\r\n"),
     OK(MK_METHOD_DELETE, 11, MK_HEAD_HOST)},
    {"PATCH", RAW("PATCH /f HTTP/1.1\r\nHost: a\r\n\r\n"), OK(MK_METHOD_PATCH, 11, MK_HEAD_HOST)},
    {"TRACE", RAW("TRACE /f HTTP/1.1\r\nHost: a\r\n\r\n"), OK(MK_METHOD_TRACE, 11, MK_HEAD_HOST)},
    {"second request pipelined after the head",
     RAW("GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST),
     .head_len = sizeof("GET / HTTP/1.1\r\nHost: a\r\n\r\n") - 1},
    {"leading empty lines ignored", RAW("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST)},
    {"leading LF-only empty lines", RAW("\n\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST)},
    {"LF-only line endings", RAW("GET / HTTP/1.1\nHost: a\n\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST)},
    {"mixed CRLF and LF", RAW("GET / HTTP/1.1\nHost: a\r\n\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST)},
    {"HTTP/1.0 without Host", RAW("GET / HTTP/1.0\r\n\r\n"), OK(MK_METHOD_GET, 10, 0)},
    {"HTTP/1.0 with Host", RAW("GET / HTTP/1.0\r\nHost: a\r\n\r\n"),
     OK(MK_METHOD_GET, 10, MK_HEAD_HOST)},
    {"empty Host value", RAW("GET / HTTP/1.1\r\nHost:\r\n\r\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST)},
    {"Host with port", RAW("GET / HTTP/1.1\r\nHost: example.com:8080\r\n\r\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST)},
    {"Host IPv6 literal", RAW("GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST)},
    {"header names are case-insensitive", RAW("GET / HTTP/1.1\r\nhOsT: a\r\n\r\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST)},
    {"no space after colon", RAW("GET / HTTP/1.1\r\nHost:a\r\nX:b\r\n\r\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST)},
    {"empty header value", RAW("GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\n\r\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST)},
    {"tab inside a value", RAW("GET / HTTP/1.1\r\nHost: a\r\nX: a\tb\r\n\r\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST)},
    {"obs-text in a value", RAW("GET / HTTP/1.1\r\nHost: a\r\nX: caf\xc3\xa9\r\n\r\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST)},
    {"unknown method is not an error", RAW("BREW /pot HTTP/1.1\r\nHost: a\r\n\r\n"),
     OK(MK_METHOD_UNKNOWN, 11, MK_HEAD_HOST)},
    {"methods are case-sensitive", RAW("get / HTTP/1.1\r\nHost: a\r\n\r\n"),
     OK(MK_METHOD_UNKNOWN, 11, MK_HEAD_HOST)},
    {"query string", RAW("GET /a?b=c&d HTTP/1.1\r\nHost: a\r\n\r\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST)},

    /* ---- need more input ---- */
    {"nothing yet", RAW(""), AGAIN},
    {"only empty lines", RAW("\r\n\r\n"), AGAIN},
    {"partial request line", RAW("GET / HTT"), AGAIN},
    {"no empty line yet", RAW("GET / HTTP/1.1\r\nHost: a\r\n"), AGAIN},
    {"last CR without LF", RAW("GET / HTTP/1.1\r\nHost: a\r\n\r"), AGAIN},

    /* ---- Host ---- */
    {"missing Host in HTTP/1.1", RAW("GET / HTTP/1.1\r\n\r\n"), 400},
    {"missing Host, other headers", RAW("GET / HTTP/1.1\r\nAccept: */*\r\n\r\n"), 400},
    {"repeated Host", RAW("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"), 400},
    {"repeated Host, other case", RAW("GET / HTTP/1.1\r\nHost: a\r\nHOST: b\r\n\r\n"), 400},
    {"Host with userinfo", RAW("GET / HTTP/1.1\r\nHost: u@a\r\n\r\n"), 400},
    {"Host with a space inside", RAW("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), 400},
    {"Host port out of range", RAW("GET / HTTP/1.1\r\nHost: a:65536\r\n\r\n"), 400},
    {"Host port not numeric", RAW("GET / HTTP/1.1\r\nHost: a:http\r\n\r\n"), 400},
    {"Host with a path", RAW("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"), 400},

    /* ---- header syntax ---- */
    {"whitespace before colon", RAW("GET / HTTP/1.1\r\nHost : a\r\n\r\n"), 400},
    {"tab before colon", RAW("GET / HTTP/1.1\r\nHost\t: a\r\n\r\n"), 400},
    {"obs-fold with space", RAW("GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n c\r\n\r\n"), 400},
    {"obs-fold with tab", RAW("GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n\tc\r\n\r\n"), 400},
    {"space before first header", RAW("GET / HTTP/1.1\r\n Host: a\r\n\r\n"), 400},
    {"bare CR in a value", RAW("GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n"), 400},
    {"bare CR ending a value", RAW("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\r\n\r\n"), 400},
    {"bare CR in the request line", RAW("GET /\r HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"NUL in a value", RAW("GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n"), 400},
    {"NUL in Host", RAW("GET / HTTP/1.1\r\nHost: a\0\r\n\r\n"), 400},
    {"SOH in a value", RAW("GET / HTTP/1.1\r\nHost: a\r\nX: a\001b\r\n\r\n"), 400},
    {"ESC in a value", RAW("GET / HTTP/1.1\r\nHost: a\r\nX: \033[1m\r\n\r\n"), 400},
    {"DEL in a value", RAW("GET / HTTP/1.1\r\nHost: a\r\nX: a\177\r\n\r\n"), 400},
    {"vertical tab in a value", RAW("GET / HTTP/1.1\r\nHost: a\r\nX: a\vb\r\n\r\n"), 400},
    {"invalid char in name", RAW("GET / HTTP/1.1\r\nHost: a\r\nX(Y): b\r\n\r\n"), 400},
    {"space in name", RAW("GET / HTTP/1.1\r\nHost: a\r\nX Y: b\r\n\r\n"), 400},
    {"non-ASCII in name", RAW("GET / HTTP/1.1\r\nHost: a\r\nX\xc3\xa9: b\r\n\r\n"), 400},
    {"NUL in name", RAW("GET / HTTP/1.1\r\nHost: a\r\nX\0Y: b\r\n\r\n"), 400},
    {"empty name", RAW("GET / HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n"), 400},
    {"no colon", RAW("GET / HTTP/1.1\r\nHost: a\r\nXY\r\n\r\n"), 400},

    /* ---- request line ---- */
    {"invalid char in method", RAW("G(ET / HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"non-ASCII in method", RAW("G\xc3\x89T / HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"empty method", RAW(" / HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"double space after method", RAW("GET  / HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"double space before version", RAW("GET /  HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"trailing space after version", RAW("GET / HTTP/1.1 \r\nHost: a\r\n\r\n"), 400},
    {"tab as separator", RAW("GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"no version", RAW("GET /\r\nHost: a\r\n\r\n"), 400},
    {"no target", RAW("GET HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"HTTP/2.0", RAW("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), 505},
    {"HTTP/0.9", RAW("GET / HTTP/0.9\r\nHost: a\r\n\r\n"), 505},
    {"HTTP/3.0", RAW("GET / HTTP/3.0\r\nHost: a\r\n\r\n"), 505},
    {"HTTP/1.1x", RAW("GET / HTTP/1.1x\r\nHost: a\r\n\r\n"), 400},
    {"lowercase http/1.1", RAW("GET / http/1.1\r\nHost: a\r\n\r\n"), 400},
    {"HTTP/1", RAW("GET / HTTP/1\r\nHost: a\r\n\r\n"), 400},
    {"HTTP/11", RAW("GET / HTTP/11\r\nHost: a\r\n\r\n"), 400},
    {"HTTP/1,1", RAW("GET / HTTP/1,1\r\nHost: a\r\n\r\n"), 400},

    /* ---- request target ---- */
    {"'#' in target", RAW("GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"byte 0x80 in target", RAW("GET /\x80 HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"byte 0xff in target",
     RAW("GET /a\xff"
         "b HTTP/1.1\r\nHost: a\r\n\r\n"),
     400},
    {"DEL in target", RAW("GET /\177 HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"NUL in target", RAW("GET /a\0b HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"absolute-form", RAW("GET http://example.com/a?b HTTP/1.1\r\nHost: example.com\r\n\r\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST)},
    {"absolute-form https", RAW("GET https://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST)},
    {"absolute-form with userinfo",
     RAW("GET http://user@example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n"), 400},
    {"absolute-form with user:pass",
     RAW("GET http://u:p@example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n"), 400},
    {"absolute-form without host", RAW("GET http:///a HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"absolute-form bad port", RAW("GET http://a:123456/ HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"other scheme", RAW("GET ftp://example.com/ HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"relative target", RAW("GET a/b HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"* with GET", RAW("GET * HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"*x with OPTIONS", RAW("OPTIONS *x HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"CONNECT authority-form",
     RAW("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"),
     OK(MK_METHOD_CONNECT, 11, MK_HEAD_HOST)},
    {"CONNECT without port", RAW("CONNECT example.com HTTP/1.1\r\nHost: example.com\r\n\r\n"), 400},
    {"CONNECT with a path", RAW("CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"CONNECT with userinfo", RAW("CONNECT u@a:443 HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
    {"authority-form with GET", RAW("GET example.com:443 HTTP/1.1\r\nHost: a\r\n\r\n"), 400},

    /* ---- Content-Length ---- */
    {"Content-Length", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 42\r\n\r\n"),
     OK(MK_METHOD_POST, 11, MK_HEAD_HOST | MK_HEAD_CONTENT_LENGTH), .content_length = 42},
    {"Content-Length 5, 5", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n"),
     OK(MK_METHOD_POST, 11, MK_HEAD_HOST | MK_HEAD_CONTENT_LENGTH), .content_length = 5},
    {"two identical Content-Length",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 7\r\ncontent-length: 7\r\n\r\n"),
     OK(MK_METHOD_POST, 11, MK_HEAD_HOST | MK_HEAD_CONTENT_LENGTH), .content_length = 7},
    {"Content-Length INT64_MAX",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775807\r\n\r\n"),
     OK(MK_METHOD_POST, 11, MK_HEAD_HOST | MK_HEAD_CONTENT_LENGTH),
     .content_length = 9223372036854775807ull},
    {"Content-Length 5, 6", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\n"), 400},
    {"two differing Content-Length",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"), 400},
    {"Content-Length abc", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: abc\r\n\r\n"), 400},
    {"Content-Length -1", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n"), 400},
    {"Content-Length +5", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n"), 400},
    {"Content-Length empty", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n"), 400},
    {"Content-Length only commas", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: ,\r\n\r\n"),
     400},
    {"Content-Length 0x10", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x10\r\n\r\n"), 400},
    {"Content-Length 1 2", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n"), 400},
    {"Content-Length 5.0", RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5.0\r\n\r\n"), 400},
    {"Content-Length overflow",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n"), 400},
    {"Content-Length INT64_MAX + 1",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775808\r\n\r\n"), 400},
    {"Content-Length and Transfer-Encoding",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"),
     400},
    {"Transfer-Encoding and Content-Length",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"),
     400},

    /* ---- Transfer-Encoding ---- */
    {"chunked", RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"),
     OK(MK_METHOD_POST, 11, MK_HEAD_HOST | MK_HEAD_CHUNKED)},
    {"Chunked in other case",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: ChUnKeD\r\n\r\n"),
     OK(MK_METHOD_POST, 11, MK_HEAD_HOST | MK_HEAD_CHUNKED)},
    {"gzip, chunked", RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
     501},
    {"chunked, gzip", RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"),
     501},
    {"gzip alone", RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n"), 501},
    {"chunked, chunked",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n"), 400},
    {"chunked on two lines",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
         "chunked\r\n\r\n"),
     400},
    {"Transfer-Encoding empty", RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n\r\n"),
     400},
    {"Transfer-Encoding in HTTP/1.0", RAW("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
     400},

    /* ---- Expect ---- */
    {"Expect: 100-continue",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\n"),
     OK(MK_METHOD_POST, 11, MK_HEAD_HOST | MK_HEAD_CONTENT_LENGTH | MK_HEAD_EXPECT_CONTINUE),
     .content_length = 1},
    {"Expect: 100-Continue (case)",
     RAW("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\n\r\n"),
     OK(MK_METHOD_POST, 11, MK_HEAD_HOST | MK_HEAD_EXPECT_CONTINUE)},
    {"Expect: something else", RAW("POST / HTTP/1.1\r\nHost: a\r\nExpect: teapot\r\n\r\n"), 417},
    {"Expect ignored in HTTP/1.0", RAW("POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n"),
     OK(MK_METHOD_POST, 10, 0)},

    /* ---- Connection ---- */
    {"Connection: close", RAW("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST | MK_HEAD_CONN_CLOSE)},
    {"Connection: keep-alive", RAW("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
     OK(MK_METHOD_GET, 10, MK_HEAD_CONN_KEEPALIVE)},
    {"Connection list", RAW("GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, Keep-Alive\r\n\r\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST | MK_HEAD_CONN_KEEPALIVE)},
    {"Connection: CLOSE (case)", RAW("GET / HTTP/1.1\r\nHost: a\r\nConnection: CLOSE\r\n\r\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST | MK_HEAD_CONN_CLOSE)},
    {"Connection: closed is not close",
     RAW("GET / HTTP/1.1\r\nHost: a\r\nConnection: closed\r\n\r\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST)},

    /* ---- limits ---- */
    {"request line over max_line", RAW("GET /0123456789abcdef HTTP/1.1\r\nHost: a\r\n\r\n"), 414,
     .lim = &lim_short_line},
    {"unfinished request line over max_line", RAW("GET /0123456789abcdef"), 414,
     .lim = &lim_short_line},
    {"request line within max_line", RAW("GET / HTTP/1.0\r\n\r\n"), OK(MK_METHOD_GET, 10, 0),
     .lim = &lim_short_line},
    {"too many leading empty lines",
     RAW("\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.0\r\n\r\n"), 400,
     .lim = &lim_short_line},
    {"head over max_head",
     RAW("GET / HTTP/1.1\r\nHost: a\r\nX-Long: "
         "012345678901234567890123456789012345678901234567890123456789\r\n\r\n"),
     431, .lim = &lim_small_head},
    {"unfinished head over max_head",
     RAW("GET / HTTP/1.1\r\nHost: a\r\nX-Long: 012345678901234567890123456789012345678901234567"),
     431, .lim = &lim_small_head},
    {"head within max_head", RAW("GET / HTTP/1.1\r\nHost: a\r\nX: 0123456789\r\n\r\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST), .lim = &lim_small_head},
    {"headers over max_headers", RAW("GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n"), 431,
     .lim = &lim_two_headers},
    {"headers at max_headers", RAW("GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\n\r\n"),
     OK(MK_METHOD_GET, 11, MK_HEAD_HOST), .lim = &lim_two_headers},
};

#define N_CASES (sizeof(cases) / sizeof(cases[0]))

/* What scanning and parsing a buffer produced. */
struct outcome {
    int status;      /* 0, AGAIN or the HTTP status */
    size_t head_len; /* when status == 0 */
    unsigned lines;
    struct mk_http_head head;
};

static char *dup_exact(const char *p, size_t len)
{
    char *b = malloc(len ? len : 1);
    assert_non_null(b);
    memcpy(b, p, len);
    return b;
}

/*
 * Parse buf[0, head_len) the way server/conn/conn.c does once the scan found the
 * head: a header array of exactly lines - 1 entries.
 */
static void parse_head(struct outcome *o, const char *buf, size_t head_len, unsigned lines)
{
    unsigned cap = lines > 0 ? lines - 1 : 0;
    struct mk_http_header *headers = malloc((cap ? cap : 1) * sizeof(*headers));
    assert_non_null(headers);
    ssize_t n = mk_http_parse(&o->head, buf, head_len, headers, cap);
    if (n < 0) {
        assert_int_equal(n, MK_ERR);
        o->status = o->head.status;
    }
    else {
        assert_int_equal((size_t) n, head_len);
        assert_int_equal(o->head.status, 0);
        o->status = 0;
        o->head_len = head_len;
    }
    free(headers);
    o->head.headers = NULL; /* only counts and flags are compared after this */
}

/* Scan the whole input at once, then parse. */
static void run_whole(const struct parse_case *c, struct outcome *o)
{
    const struct mk_http_limits *lim = c->lim ? c->lim : &lim_default;
    struct mk_http_scan scan;
    char *buf = dup_exact(c->raw, c->len);

    memset(o, 0, sizeof(*o));
    memset(&scan, 0, sizeof(scan));
    ssize_t n = mk_http_scan(&scan, buf, c->len, lim);
    o->lines = scan.lines;
    if (n == MK_AGAIN) {
        o->status = AGAIN;
    }
    else if (n == MK_ERR) {
        o->status = scan.status;
    }
    else {
        assert_true(n > 0 && (size_t) n <= c->len);
        parse_head(o, buf, (size_t) n, scan.lines);
    }
    free(buf);
}

/*
 * Feed the input one byte at a time through the same scan state, each time
 * in a fresh buffer of exactly the bytes received so far.
 */
static void run_bytewise(const struct parse_case *c, struct outcome *o)
{
    const struct mk_http_limits *lim = c->lim ? c->lim : &lim_default;
    struct mk_http_scan scan;
    ssize_t n = MK_AGAIN;
    size_t got = 0;
    char *buf = NULL;

    memset(o, 0, sizeof(*o));
    memset(&scan, 0, sizeof(scan));
    while (got < c->len && n == MK_AGAIN) {
        got++;
        free(buf);
        buf = dup_exact(c->raw, got);
        n = mk_http_scan(&scan, buf, got, lim);
    }
    o->lines = scan.lines;
    if (n == MK_AGAIN) {
        o->status = AGAIN;
    }
    else if (n == MK_ERR) {
        o->status = scan.status;
    }
    else {
        assert_int_equal((size_t) n, got); /* found as soon as its last byte arrived */
        parse_head(o, buf, (size_t) n, scan.lines);
    }
    free(buf);
}

static bool check_outcome(const struct parse_case *c, const struct outcome *o, const char *how)
{
    size_t want_len = c->head_len ? c->head_len : c->len;
    bool ok = true;

    if (o->status != c->status) {
        print_error("%s [%s]: expected %d, got %d\n", c->name, how, c->status, o->status);
        return false;
    }
    if (c->status != 0) {
        return true;
    }
    if (o->head_len != want_len) {
        print_error("%s [%s]: head length %zu, expected %zu\n", c->name, how, o->head_len,
                    want_len);
        ok = false;
    }
    if (o->head.method != c->method || o->head.version != c->version || o->head.flags != c->flags) {
        print_error("%s [%s]: method %d version %d flags 0x%x, expected %d %d 0x%x\n", c->name, how,
                    o->head.method, o->head.version, o->head.flags, c->method, c->version,
                    c->flags);
        ok = false;
    }
    if (o->head.content_length != c->content_length) {
        print_error("%s [%s]: content length %llu, expected %llu\n", c->name, how,
                    (unsigned long long) o->head.content_length,
                    (unsigned long long) c->content_length);
        ok = false;
    }
    if (o->head.n_headers + 1 != o->lines) {
        print_error("%s [%s]: %u headers for %u lines\n", c->name, how, o->head.n_headers,
                    o->lines);
        ok = false;
    }
    return ok;
}

static void test_table_whole(void **state)
{
    unsigned failures = 0;
    (void) state;

    for (size_t i = 0; i < N_CASES; i++) {
        struct outcome o;
        run_whole(&cases[i], &o);
        if (!check_outcome(&cases[i], &o, "whole")) {
            failures++;
        }
    }
    assert_int_equal(failures, 0);
}

/* The scan is resumable: byte-by-byte input gives the same result. */
static void test_table_bytewise(void **state)
{
    unsigned failures = 0;
    (void) state;

    for (size_t i = 0; i < N_CASES; i++) {
        struct outcome o;
        run_bytewise(&cases[i], &o);
        if (!check_outcome(&cases[i], &o, "byte by byte")) {
            failures++;
        }
    }
    assert_int_equal(failures, 0);
}

/* Scan and parse `req` with the default limits; the head must be complete. */
static void parse_ok(const char *req, struct mk_http_head *h, struct mk_http_header *hdrs,
                     unsigned cap)
{
    struct mk_http_scan scan = {0};
    size_t len = strlen(req);
    ssize_t n = mk_http_scan(&scan, req, len, &lim_default);

    assert_int_equal(n, (ssize_t) len);
    assert_true(scan.lines - 1 <= cap);
    assert_int_equal(mk_http_parse(h, req, len, hdrs, scan.lines - 1), (ssize_t) len);
    assert_int_equal(h->status, 0);
}

static void assert_str(struct mk_str s, const char *want)
{
    assert_non_null(s.p);
    if (s.len != strlen(want) || memcmp(s.p, want, s.len) != 0) {
        fail_msg("got '%.*s', expected '%s'", (int) s.len, s.p, want);
    }
}

static void test_origin_form_fields(void **state)
{
    const char *req = "GET /dir/file.txt?x=1&y HTTP/1.1\r\n"
                      "Host:   Example.COM:8080  \r\n"
                      "Accept:\t*/*\t\r\n"
                      "X-Empty:\r\n"
                      "\r\n";
    struct mk_http_header hdrs[8];
    struct mk_http_head h;
    (void) state;

    parse_ok(req, &h, hdrs, 8);
    assert_int_equal(h.method, MK_METHOD_GET);
    assert_int_equal(h.form, MK_TARGET_ORIGIN);
    assert_int_equal(h.version, 11);
    assert_str(h.method_name, "GET");
    assert_str(h.target, "/dir/file.txt?x=1&y");
    assert_str(h.path, "/dir/file.txt");
    assert_str(h.query, "x=1&y");
    assert_str(h.host, "Example.COM");
    assert_int_equal(h.n_headers, 3);
    assert_ptr_equal(h.headers, hdrs);
    assert_str(hdrs[0].name, "Host");
    assert_str(hdrs[0].value, "Example.COM:8080");
    assert_str(hdrs[1].name, "Accept");
    assert_str(hdrs[1].value, "*/*");
    assert_str(hdrs[2].name, "X-Empty");
    assert_int_equal(hdrs[2].value.len, 0);
}

static void test_no_query(void **state)
{
    struct mk_http_header hdrs[2];
    struct mk_http_head h;
    (void) state;

    parse_ok("GET /a HTTP/1.1\r\nHost: h\r\n\r\n", &h, hdrs, 2);
    assert_str(h.path, "/a");
    assert_null(h.query.p);
    assert_int_equal(h.query.len, 0);

    parse_ok("GET /a? HTTP/1.1\r\nHost: h\r\n\r\n", &h, hdrs, 2);
    assert_str(h.path, "/a");
    assert_non_null(h.query.p);
    assert_int_equal(h.query.len, 0);
}

static void test_unknown_method_name(void **state)
{
    struct mk_http_header hdrs[2];
    struct mk_http_head h;
    (void) state;

    parse_ok("M-SEARCH /x HTTP/1.1\r\nHost: h\r\n\r\n", &h, hdrs, 2);
    assert_int_equal(h.method, MK_METHOD_UNKNOWN);
    assert_str(h.method_name, "M-SEARCH");
    assert_null(mk_http_method_name(MK_METHOD_UNKNOWN));
    assert_string_equal(mk_http_method_name(MK_METHOD_GET), "GET");
    assert_string_equal(mk_http_method_name(MK_METHOD_CONNECT), "CONNECT");
    assert_string_equal(mk_http_method_name(MK_METHOD_OPTIONS), "OPTIONS");
}

static void test_absolute_form_fields(void **state)
{
    struct mk_http_header hdrs[2];
    struct mk_http_head h;
    (void) state;

    parse_ok("GET http://example.com/a?b HTTP/1.1\r\nHost: other.org\r\n\r\n", &h, hdrs, 2);
    assert_int_equal(h.form, MK_TARGET_ABSOLUTE);
    assert_str(h.host, "example.com"); /* the target's authority wins over Host */
    assert_str(h.path, "/a");
    assert_str(h.query, "b");

    parse_ok("GET HTTP://Example.com:8080 HTTP/1.1\r\nHost: x\r\n\r\n", &h, hdrs, 2);
    assert_int_equal(h.form, MK_TARGET_ABSOLUTE);
    assert_str(h.host, "Example.com");
    assert_str(h.path, "/");
    assert_null(h.query.p);

    parse_ok("GET http://example.com?q=1 HTTP/1.1\r\nHost: x\r\n\r\n", &h, hdrs, 2);
    assert_str(h.host, "example.com");
    assert_str(h.path, "/");
    assert_str(h.query, "q=1");

    parse_ok("GET https://[::1]:443/p HTTP/1.1\r\nHost: x\r\n\r\n", &h, hdrs, 2);
    assert_str(h.host, "[::1]");
    assert_str(h.path, "/p");
}

static void test_connect_and_asterisk_fields(void **state)
{
    struct mk_http_header hdrs[2];
    struct mk_http_head h;
    (void) state;

    parse_ok("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", &h, hdrs, 2);
    assert_int_equal(h.method, MK_METHOD_CONNECT);
    assert_int_equal(h.form, MK_TARGET_AUTHORITY);
    assert_str(h.host, "example.com");
    assert_str(h.target, "example.com:443");

    parse_ok("OPTIONS * HTTP/1.1\r\nHost: h.example\r\n\r\n", &h, hdrs, 2);
    assert_int_equal(h.form, MK_TARGET_ASTERISK);
    assert_str(h.path, "*");
    assert_str(h.host, "h.example");
}

/* The indexed headers are found without a scan, first occurrence, any case. */
static void test_known_headers(void **state)
{
    const char *req = "GET / HTTP/1.1\r\n"
                      "Host: h\r\n"
                      "range: bytes=0-1\r\n"
                      "IF-NONE-MATCH: \"a\"\r\n"
                      "If-None-Match: \"b\"\r\n"
                      "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                      "If-Rangex: no\r\n"
                      "Ranges: no\r\n"
                      "\r\n";
    static const char *const names[MK_HDR_KNOWN_COUNT] = {
        "If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since", "If-Range",
        "Range",    "Cookie"};
    struct mk_http_header hdrs[8];
    struct mk_http_head h;
    (void) state;

    parse_ok(req, &h, hdrs, 8);
    assert_str(*mk_http_known_get(&h, MK_HDR_RANGE), "bytes=0-1");
    assert_str(*mk_http_known_get(&h, MK_HDR_IF_NONE_MATCH), "\"a\"");
    assert_null(mk_http_known_get(&h, MK_HDR_IF_MATCH));
    assert_null(mk_http_known_get(&h, MK_HDR_IF_RANGE));
    for (unsigned k = 0; k < MK_HDR_KNOWN_COUNT; k++) {
        /* the index always agrees with the scanning lookup */
        assert_ptr_equal(mk_http_known_get(&h, k), mk_http_header_get(&h, names[k]));
    }
}

/* A second line of an indexed kind is recorded; the index keeps the first. */
static void test_known_headers_repeated(void **state)
{
    const char *req = "GET / HTTP/1.1\r\n"
                      "If-None-Match: \"a\"\r\n"
                      "Host: h\r\n"
                      "Range: bytes=0-1\r\n"
                      "if-none-match: \"b\"\r\n"
                      "If-Range: \"x\"\r\n"
                      "RANGE: bytes=2-3\r\n"
                      "If-None-Match: \"c\"\r\n"
                      "\r\n";
    struct mk_http_header hdrs[8];
    struct mk_http_head h;
    (void) state;

    parse_ok(req, &h, hdrs, 8);
    assert_true(mk_http_known_repeated(&h, MK_HDR_IF_NONE_MATCH));
    assert_true(mk_http_known_repeated(&h, MK_HDR_RANGE));
    assert_false(mk_http_known_repeated(&h, MK_HDR_IF_RANGE));
    assert_false(mk_http_known_repeated(&h, MK_HDR_IF_MATCH));
    assert_false(mk_http_known_repeated(&h, MK_HDR_IF_MODIFIED_SINCE));
    assert_str(*mk_http_known_get(&h, MK_HDR_IF_NONE_MATCH), "\"a\"");
    assert_str(*mk_http_known_get(&h, MK_HDR_RANGE), "bytes=0-1");
    assert_string_equal(mk_http_known_name(MK_HDR_IF_NONE_MATCH), "if-none-match");
    assert_string_equal(mk_http_known_name(MK_HDR_RANGE), "range");

    /* a new parse starts clean */
    parse_ok("GET / HTTP/1.1\r\nHost: h\r\nRange: bytes=0-1\r\n\r\n", &h, hdrs, 8);
    assert_false(mk_http_known_repeated(&h, MK_HDR_RANGE));
    assert_false(mk_http_known_repeated(&h, MK_HDR_IF_NONE_MATCH));
}

/*
 * Several Cookie fields (HTTP/2's crumbs, repeated HTTP/1 lines) joined
 * into one with "; ", at the first one's place: the other fields keep
 * their order and the indexes of their kinds follow them.
 */
static void test_cookie_join(void **state)
{
    const char *req = "GET / HTTP/1.1\r\n"
                      "Host: h\r\n"
                      "Cookie: a=1\r\n"
                      "Range: bytes=0-1\r\n"
                      "cookie: b=2; c=3\r\n"
                      "X-Thing: x\r\n"
                      "COOKIE: \r\n"
                      "If-Range: \"e\"\r\n"
                      "Cookie:   d=4  \r\n"
                      "If-None-Match: \"f\"\r\n"
                      "\r\n";
    static const char *const names[MK_HDR_KNOWN_COUNT] = {
        "If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since", "If-Range",
        "Range",    "Cookie"};
    struct mk_http_header hdrs[12];
    struct mk_http_head h;
    char buf[64];
    (void) state;

    parse_ok(req, &h, hdrs, 12);
    assert_true(mk_http_known_repeated(&h, MK_HDR_COOKIE));
    assert_int_equal(h.n_headers, 9);
    size_t len = mk_http_cookie_join_len(&h);
    assert_int_equal(len, strlen("a=1; b=2; c=3; d=4"));
    mk_http_cookie_join(&h, buf);
    assert_false(mk_http_known_repeated(&h, MK_HDR_COOKIE));
    assert_int_equal(h.n_headers, 6);
    static const char *const order[][2] = {{"Host", "h"},          {"Cookie", "a=1; b=2; c=3; d=4"},
                                           {"Range", "bytes=0-1"}, {"X-Thing", "x"},
                                           {"If-Range", "\"e\""},  {"If-None-Match", "\"f\""}};
    for (unsigned i = 0; i < 6; i++) {
        assert_str(h.headers[i].name, order[i][0]);
        assert_str(h.headers[i].value, order[i][1]);
    }
    for (unsigned k = 0; k < MK_HDR_KNOWN_COUNT; k++) {
        assert_ptr_equal(mk_http_known_get(&h, k), mk_http_header_get(&h, names[k]));
    }
    assert_str(*mk_http_header_get(&h, "cookie"), "a=1; b=2; c=3; d=4");

    /* HTTP/2: the crumbs as fields of a head built from its parts */
    struct mk_http_header parts[4] = {
        {MK_STR("host"), MK_STR("h")},
        {MK_STR("cookie"), MK_STR("theme=dark")},
        {MK_STR("accept"), MK_STR("*/*")},
        {MK_STR("cookie"), MK_STR("sid=0123")},
    };
    const struct mk_http_limits lim = {.max_line = 8192, .max_head = 32768, .max_headers = 100};
    assert_int_equal(mk_http_head_build(&h, MK_STR("GET"), MK_STR("/"), parts, 4, false, &lim),
                     MK_OK);
    assert_true(mk_http_known_repeated(&h, MK_HDR_COOKIE));
    assert_int_equal(mk_http_cookie_join_len(&h), strlen("theme=dark; sid=0123"));
    mk_http_cookie_join(&h, buf);
    assert_int_equal(h.n_headers, 3);
    assert_str(*mk_http_header_get(&h, "Cookie"), "theme=dark; sid=0123");
    assert_str(h.headers[2].name, "accept");

    /* one Cookie field: nothing to join */
    parse_ok("GET / HTTP/1.1\r\nHost: h\r\nCookie: a=1; b=2\r\n\r\n", &h, hdrs, 12);
    assert_false(mk_http_known_repeated(&h, MK_HDR_COOKIE));
    assert_str(*mk_http_known_get(&h, MK_HDR_COOKIE), "a=1; b=2");
}

static void test_header_get(void **state)
{
    const char *req = "GET / HTTP/1.1\r\n"
                      "Host: h\r\n"
                      "X-Thing: first\r\n"
                      "x-thing: second\r\n"
                      "If-None-Match: \"abc\"\r\n"
                      "\r\n";
    struct mk_http_header hdrs[4];
    struct mk_http_head h;
    const struct mk_str *v;
    (void) state;

    parse_ok(req, &h, hdrs, 4);
    v = mk_http_header_get(&h, "x-thing");
    assert_non_null(v);
    assert_str(*v, "first");
    v = mk_http_header_get(&h, "X-THING");
    assert_non_null(v);
    assert_str(*v, "first");
    v = mk_http_header_get(&h, "if-none-match");
    assert_non_null(v);
    assert_str(*v, "\"abc\"");
    assert_null(mk_http_header_get(&h, "X-Thin"));
    assert_null(mk_http_header_get(&h, "X-Things"));
    assert_null(mk_http_header_get(&h, "Accept"));
}

/* A header array smaller than the head needs is reported, not overrun. */
static void test_parse_header_capacity(void **state)
{
    const char *req = "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n";
    struct mk_http_header *hdrs = malloc(2 * sizeof(*hdrs));
    struct mk_http_head h;
    (void) state;

    assert_non_null(hdrs);
    assert_int_equal(mk_http_parse(&h, req, strlen(req), hdrs, 2), MK_ERR);
    assert_int_equal(h.status, 431);
    free(hdrs);
    hdrs = malloc(3 * sizeof(*hdrs));
    assert_non_null(hdrs);
    assert_int_equal(mk_http_parse(&h, req, strlen(req), hdrs, 3), (ssize_t) strlen(req));
    free(hdrs);
}

/* mk_http_parse() without a final empty line, or without a request line. */
static void test_parse_incomplete(void **state)
{
    struct mk_http_header hdrs[2];
    struct mk_http_head h;
    (void) state;

    assert_int_equal(mk_http_parse(&h, "GET / HTTP/1.1\r\nHost: h", 23, hdrs, 2), MK_ERR);
    assert_int_equal(h.status, 400);
    assert_int_equal(mk_http_parse(&h, "\r\n\r\n", 4, hdrs, 2), MK_ERR);
    assert_int_equal(h.status, 400);
}

/* Fill `buf` with a request whose request line is `line_len` bytes (no CRLF). */
static size_t make_request_line(char *buf, size_t line_len)
{
    size_t n = 0;
    memcpy(buf, "GET /", 5);
    n = 5;
    while (n < line_len - 9) {
        buf[n++] = 'a';
    }
    memcpy(buf + n, " HTTP/1.0", 9);
    n += 9;
    memcpy(buf + n, "\r\n\r\n", 4);
    return n + 4;
}

/* Scan whole and byte by byte; both must give `want` (a length or MK_ERR). */
static void scan_both(const char *req, size_t len, const struct mk_http_limits *lim, ssize_t want,
                      int want_status)
{
    struct mk_http_scan scan = {0};
    ssize_t n = mk_http_scan(&scan, req, len, lim);
    if (n != want || (want == MK_ERR && scan.status != want_status)) {
        fail_msg("whole input of %zu bytes: got %zd (status %d), expected %zd (status %d)", len, n,
                 scan.status, want, want_status);
    }

    memset(&scan, 0, sizeof(scan));
    n = MK_AGAIN;
    size_t got = 0;
    while (got < len && n == MK_AGAIN) {
        got++;
        char *b = dup_exact(req, got);
        n = mk_http_scan(&scan, b, got, lim);
        free(b);
    }
    if (n != want || (want == MK_ERR && scan.status != want_status)) {
        fail_msg("byte by byte, %zu of %zu bytes: got %zd (status %d), expected %zd (status %d)",
                 got, len, n, scan.status, want, want_status);
    }
}

/* A request line of exactly max_line bytes is accepted; one more is 414. */
static void test_limit_max_line_boundary(void **state)
{
    const struct mk_http_limits lim = {32, 4096, 10};
    char buf[64];
    size_t len;
    (void) state;

    len = make_request_line(buf, 32);
    scan_both(buf, len, &lim, (ssize_t) len, 0);
    len = make_request_line(buf, 33);
    scan_both(buf, len, &lim, MK_ERR, 414);
}

/* The same with LF-only line ends. */
static void test_limit_max_line_boundary_lf(void **state)
{
    const struct mk_http_limits lim = {32, 4096, 10};
    char buf[64];
    size_t len;
    (void) state;

    len = make_request_line(buf, 32);
    buf[32] = '\n';
    buf[33] = '\n';
    len = 34;
    scan_both(buf, len, &lim, (ssize_t) len, 0);
    len = make_request_line(buf, 33);
    buf[33] = '\n';
    buf[34] = '\n';
    len = 35;
    scan_both(buf, len, &lim, MK_ERR, 414);
}

/* A head of exactly max_head bytes (terminator included) is accepted. */
static void test_limit_max_head_boundary(void **state)
{
    const char *fixed = "GET / HTTP/1.1\r\nHost: h\r\nX: ";
    const struct mk_http_limits lim = {64, 100, 10};
    char buf[128];
    size_t n;
    (void) state;

    for (size_t total = 98; total <= 102; total++) {
        n = strlen(fixed);
        memcpy(buf, fixed, n);
        while (n < total - 4) {
            buf[n++] = 'v';
        }
        memcpy(buf + n, "\r\n\r\n", 4);
        n += 4;
        assert_int_equal(n, total);
        if (total <= 100) {
            scan_both(buf, n, &lim, (ssize_t) n, 0);
        }
        else {
            scan_both(buf, n, &lim, MK_ERR, 431);
        }
    }
}

/* max_headers header lines are accepted (request line not counted). */
static void test_limit_max_headers_boundary(void **state)
{
    const struct mk_http_limits lim = {8192, 32768, 5};
    char buf[256];
    size_t n;
    (void) state;

    for (unsigned count = 1; count <= 7; count++) {
        n = (size_t) sprintf(buf, "GET / HTTP/1.1\r\nHost: h\r\n");
        for (unsigned i = 1; i < count; i++) {
            n += (size_t) sprintf(buf + n, "X%u: v\r\n", i);
        }
        n += (size_t) sprintf(buf + n, "\r\n");
        if (count <= 5) {
            scan_both(buf, n, &lim, (ssize_t) n, 0);
        }
        else {
            scan_both(buf, n, &lim, MK_ERR, 431);
        }
    }
}

/* The scan reports the number of lines so the header array can be exact. */
static void test_scan_counts_lines(void **state)
{
    const char *req = "\r\nGET / HTTP/1.1\r\nHost: h\r\nA: 1\nB: 2\r\n\r\n";
    struct mk_http_scan scan = {0};
    (void) state;

    assert_int_equal(mk_http_scan(&scan, req, strlen(req), &lim_default), (ssize_t) strlen(req));
    assert_int_equal(scan.lines, 4);
    assert_int_equal(scan.head_start, 2);
}

/*
 * A request line is judged when it ends, not when the head does: "a" then
 * bytes that never end a head (binary garbage with line breaks) is a 400 at
 * once rather than a wait for Timeout. A version the parser refuses (505)
 * still reaches the parser.
 */
static void test_scan_refuses_a_misshapen_request_line(void **state)
{
    static const char *const bad[] = {
        "a\r\n\x01\x02garbage\r\n", "GET\r\n",           "GET /\r\nHost: h\r\n",
        "GET / FTP/1.0\r\n",        "GET  HTTP/1.1\r\n", " GET / HTTP/1.1\r\n",
        "G@T / HTTP/1.1\r\n",       "GET /x\n",
    };
    static const char *const good[] = {
        "GET / HTTP/1.1\r\n",
        "OPTIONS * HTTP/1.1\r\n",
        "GET / HTTP/2.0\r\n",
        "GET /a b HTTP/1.1\r\n",
    };
    (void) state;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct mk_http_scan scan = {0};
        assert_int_equal(mk_http_scan(&scan, bad[i], strlen(bad[i]), &lim_default), MK_ERR);
        assert_int_equal(scan.status, 400);
    }
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct mk_http_scan scan = {0};
        assert_int_equal(mk_http_scan(&scan, good[i], strlen(good[i]), &lim_default), MK_AGAIN);
    }
}

/* Growing the buffer by arbitrary pieces, not only single bytes. */
static void test_scan_resumable_pieces(void **state)
{
    const char *req = "GET /index.html HTTP/1.1\r\nHost: www.example.com\r\n"
                      "User-Agent: test\r\nAccept: */*\r\n\r\nBODY";
    size_t head = strlen(req) - 4;
    (void) state;

    for (size_t step = 1; step <= 17; step++) {
        struct mk_http_scan scan = {0};
        ssize_t n = MK_AGAIN;
        size_t got = 0;
        while (n == MK_AGAIN) {
            got = got + step > strlen(req) ? strlen(req) : got + step;
            n = mk_http_scan(&scan, req, got, &lim_default);
            if (got == strlen(req)) {
                break;
            }
        }
        assert_int_equal(n, (ssize_t) head);
        assert_int_equal(scan.lines, 4);
    }
}

/* ---- chunked ------------------------------------------------------------- */

/* Decode `in` in one call; returns consumed bytes, the output in *out. */
static ssize_t decode_all(const char *in, size_t len, char **out, size_t *out_len,
                          struct mk_chunked *c)
{
    char *buf = dup_exact(in, len);
    ssize_t n;

    mk_chunked_init(c);
    n = mk_chunked_decode(c, buf, len, out_len);
    *out = buf;
    return n;
}

static void expect_decoded(const char *in, size_t len, const char *want, size_t consumed)
{
    struct mk_chunked c;
    size_t out_len = 12345;
    char *buf;
    ssize_t n = decode_all(in, len, &buf, &out_len, &c);

    assert_int_equal(n, (ssize_t) consumed);
    assert_true(mk_chunked_done(&c));
    assert_int_equal(out_len, strlen(want));
    assert_memory_equal(buf, want, out_len);
    free(buf);
}

static void expect_decode_error(const char *in, size_t len)
{
    struct mk_chunked c;
    size_t out_len;
    char *buf;
    ssize_t n = decode_all(in, len, &buf, &out_len, &c);

    free(buf);
    if (n != MK_ERR) {
        fail_msg("'%.*s': expected MK_ERR, got %zd", (int) len, in, n);
    }
}

static void test_chunked_simple(void **state)
{
    (void) state;
    expect_decoded(RAW("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"), "hello world",
                   sizeof("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n") - 1);
    expect_decoded(RAW("0\r\n\r\n"), "", 5);
    expect_decoded(RAW("A\r\n0123456789\r\n0\r\n\r\n"), "0123456789", 20);
    expect_decoded(RAW("a\r\n0123456789\r\n0\r\n\r\n"), "0123456789", 20);
    expect_decoded(RAW("0000000000000003\r\nabc\r\n0\r\n\r\n"), "abc", 28); /* 16 digits */
    expect_decoded(RAW("3\nabc\n0\n\n"), "abc", 9);                         /* LF only */
}

static void test_chunked_binary_data(void **state)
{
    static const char in[] = "4\r\n\0\r\n\xff\r\n0\r\n\r\n";
    struct mk_chunked c;
    size_t out_len;
    char *buf;
    (void) state;

    assert_int_equal(decode_all(in, sizeof(in) - 1, &buf, &out_len, &c), sizeof(in) - 1);
    assert_true(mk_chunked_done(&c));
    assert_int_equal(out_len, 4);
    assert_memory_equal(buf, "\0\r\n\xff", 4);
    free(buf);
}

static void test_chunked_extensions(void **state)
{
    static const char in[] = "5;name=value\r\nhello\r\n3 ; a=\"q s\";b\r\nabc\r\n0;last\r\n\r\n";
    (void) state;
    expect_decoded(in, sizeof(in) - 1, "helloabc", sizeof(in) - 1);
}

static void test_chunked_trailers(void **state)
{
    static const char in[] = "5\r\nhello\r\n0\r\nX-Checksum: abc\r\nX-Other: 1\r\n\r\n";
    (void) state;
    expect_decoded(in, sizeof(in) - 1, "hello", sizeof(in) - 1);
}

/* Nothing after the terminating empty line is consumed. */
/*
 * The trailer section's bytes (trailer_off to the count consumed), fed in
 * pieces of every size, gathered and written as lines: whitespace around
 * each value removed, CRLF ends; the data is never among them.
 */
static void test_chunked_trailer_lines(void **state)
{
    (void) state;
    static const char in[] = "4\r\nwiki\r\n0\r\nX-A:  1 \r\nX-B:\t\nX-C:a b\r\n\r\nNEXT";
    static const char want[] = "X-A: 1\r\nX-B: \r\nX-C: a b\r\n";
    size_t len = sizeof(in) - 1;

    for (size_t piece = 1; piece <= len; piece++) {
        struct mk_chunked c;
        char raw[64], lines[128];
        size_t done = 0, raw_len = 0, out;

        mk_chunked_init(&c);
        while (!mk_chunked_done(&c)) {
            size_t n = len - done < piece ? len - done : piece;
            char *buf = dup_exact(in + done, n);
            ssize_t used = mk_chunked_decode(&c, buf, n, &out);
            assert_true(used >= 0);
            assert_true(c.trailer_off <= (size_t) used);
            assert_true(out <= c.trailer_off);
            memcpy(raw + raw_len, buf + c.trailer_off, (size_t) used - c.trailer_off);
            raw_len += (size_t) used - c.trailer_off;
            done += (size_t) used;
            free(buf);
        }
        assert_int_equal(done, len - 4); /* NEXT is the next request's */
        assert_int_equal(raw_len, sizeof("X-A:  1 \r\nX-B:\t\nX-C:a b\r\n\r\n") - 1);
        assert_true(memcmp(raw, "X-A:  1 \r\nX-B:\t\nX-C:a b\r\n\r\n", raw_len) == 0);
        size_t n = mk_chunked_trailer_lines(raw, raw_len, lines);
        assert_int_equal(n, sizeof(want) - 1);
        assert_memory_equal(lines, want, n);
    }
    /* a section without fields (the final line alone, CRLF or LF) writes none */
    char none[8];
    assert_int_equal(mk_chunked_trailer_lines("\r\n", 2, none), 0);
    assert_int_equal(mk_chunked_trailer_lines("\n", 1, none), 0);
}

static void test_chunked_stops_at_end(void **state)
{
    (void) state;
    expect_decoded(RAW("0\r\n\r\nGET / HTTP/1.1\r\n"), "", 5);
    expect_decoded(RAW("3\r\nabc\r\n0\r\n\r\nNEXT"), "abc", sizeof("3\r\nabc\r\n0\r\n\r\n") - 1);
    expect_decoded(RAW("1\r\nz\r\n0\r\nT: v\r\n\r\nXYZ"), "z",
                   sizeof("1\r\nz\r\n0\r\nT: v\r\n\r\n") - 1);
}

static void test_chunked_not_done(void **state)
{
    static const char *const partial[] = {
        "5\r\nhel", "5\r\nhello\r\n", "0\r\n", "0\r\nX: y\r\n", "5\r\nhello\r\n0\r\n\r",
    };
    (void) state;

    for (size_t i = 0; i < sizeof(partial) / sizeof(partial[0]); i++) {
        struct mk_chunked c;
        size_t out_len;
        char *buf;
        size_t len = strlen(partial[i]);
        assert_int_equal(decode_all(partial[i], len, &buf, &out_len, &c), (ssize_t) len);
        assert_false(mk_chunked_done(&c));
        free(buf);
    }
}

static void test_chunked_errors(void **state)
{
    (void) state;
    expect_decode_error(RAW("zz\r\n"));
    expect_decode_error(RAW("\r\n"));                                /* empty size line */
    expect_decode_error(RAW("\n"));                                  /* empty size line */
    expect_decode_error(RAW(";ext\r\n"));                            /* no size */
    expect_decode_error(RAW("00000000000000001\r\nx\r\n0\r\n\r\n")); /* 17 digits */
    expect_decode_error(RAW("10000000000000000\r\n"));               /* 2^64 */
    expect_decode_error(RAW("-5\r\n"));
    expect_decode_error(RAW("0x5\r\n"));
    expect_decode_error(RAW("5\rX"));                 /* CR without LF */
    expect_decode_error(RAW("5\r\nhelloX\r\n"));      /* no CRLF after data */
    expect_decode_error(RAW("5\r\nhello\rX"));        /* CR without LF */
    expect_decode_error(RAW("5\r\nhello world\r\n")); /* data longer than size */
    expect_decode_error(RAW("5;a\001b\r\n"));         /* control in extension */
    expect_decode_error(RAW("5;a\0\r\n"));            /* NUL in extension */
    expect_decode_error(RAW("0\r\nX: a\0b\r\n\r\n")); /* NUL in trailer */
    expect_decode_error(RAW("0\r\n\rX"));             /* bad final CRLF */
}

/* RFC 9112 7.1: after the size only BWS ";" extension may follow. */
static void test_chunked_size_with_inner_space(void **state)
{
    (void) state;
    expect_decode_error(RAW("1 2\r\nX\r\n0\r\n\r\n"));
    expect_decode_error(RAW("1\t0\r\nX\r\n0\r\n\r\n"));
}

static void test_chunked_line_limits(void **state)
{
    size_t len = 5000;
    char *in = malloc(len);
    (void) state;

    assert_non_null(in);
    /* a chunk-size line longer than 4096 bytes */
    memcpy(in, "5;", 2);
    memset(in + 2, 'e', len - 2);
    expect_decode_error(in, len);

    /* a trailer section larger than 16384 bytes */
    free(in);
    len = 20000;
    in = malloc(len);
    assert_non_null(in);
    memcpy(in, "0\r\n", 3);
    for (size_t i = 3; i < len; i += 10) {
        memcpy(in + i, "X-Aaaa: b\n", len - i < 10 ? len - i : 10);
    }
    expect_decode_error(in, len);
    free(in);
}

/*
 * The trailer section is held to the rules of the header section, so that a
 * front end splitting lines another way cannot hide a request in it. Each
 * row is a field section (its lines and the empty line that ends it); it is
 * run as the trailers of a chunked body (whole and one byte at a time) and
 * as the header lines of a request, and both must give `valid`.
 */
struct trailer_case {
    const char *name;
    const char *raw;
    size_t len;
    bool valid;
};

static const struct trailer_case trailer_cases[] = {
    {"no field", RAW("\r\n"), true},
    {"one field", RAW("X: y\r\n\r\n"), true},
    {"two fields", RAW("X-Sum: abc\r\nZ: 1\r\n\r\n"), true},
    {"LF only", RAW("X: y\nZ: 1\n\n"), true},
    {"empty value", RAW("X:\r\n\r\n"), true},
    {"spaces and tabs in value", RAW("X: \ta b \t\r\n\r\n"), true},
    {"obs-text in value", RAW("X: \x80\xff\r\n\r\n"), true},
    {"token characters in name", RAW("!#$%&'*+-.^_`|~09Az: v\r\n\r\n"), true},
    {"bare CR before CRLF", RAW("X: y\r\r\n\r\n"), false},
    {"bare CR before a request", RAW("X: y\r\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n"), false},
    {"bare CR inside value", RAW("X: a\rb\r\n\r\n"), false},
    {"bare CR ends a line", RAW("X: y\rZ: 1\r\n\r\n"), false},
    {"bare CR at line start", RAW("\rX: y\r\n\r\n"), false},
    {"bare CR in name", RAW("X\r: y\r\n\r\n"), false},
    {"NUL at line start", RAW("\0X: y\r\n\r\n"), false},
    {"NUL in name", RAW("X\0: y\r\n\r\n"), false},
    {"NUL in value", RAW("X: a\0b\r\n\r\n"), false},
    {"control byte in value", RAW("X: a\001b\r\n\r\n"), false},
    {"DEL in value", RAW("X: a\x7f\r\n\r\n"), false},
    {"no colon", RAW("X\r\n\r\n"), false},
    {"a request line", RAW("GET /x HTTP/1.1\r\nHost: a\r\n\r\n"), false},
    {"empty name", RAW(": y\r\n\r\n"), false},
    {"space before colon", RAW("X : y\r\n\r\n"), false},
    {"tab before colon", RAW("X\t: y\r\n\r\n"), false},
    {"obs-fold", RAW("X: y\r\n z\r\n\r\n"), false},
    {"leading tab", RAW("\tX: y\r\n\r\n"), false},
    {"separator in name", RAW("X(: y\r\n\r\n"), false},
    {"byte above 0x7f in name", RAW("X\xc3\xa9: y\r\n\r\n"), false},
};

/* Run the field section of `t` as trailers; true when it decodes to the end. */
static bool trailer_accepted(const struct trailer_case *t, bool bytewise)
{
    size_t len = 3 + t->len;
    char *in = malloc(len);
    struct mk_chunked c;
    size_t out = 0, done = 0;
    bool ok = true;

    assert_non_null(in);
    memcpy(in, "0\r\n", 3);
    memcpy(in + 3, t->raw, t->len);
    mk_chunked_init(&c);
    while (ok && done < len && !mk_chunked_done(&c)) {
        size_t piece = bytewise ? 1 : len - done;
        char *buf = dup_exact(in + done, piece);
        ssize_t n = mk_chunked_decode(&c, buf, piece, &out);
        free(buf);
        ok = n >= 0;
        if (ok) {
            assert_int_equal(out, 0);
            done += (size_t) n;
        }
    }
    free(in);
    if (ok && !mk_chunked_done(&c)) {
        fail_msg("trailer '%s': the decoder wants more input", t->name);
    }
    return ok;
}

/* Run the field section of `t` as request headers; true when the head parses. */
static bool header_accepted(const struct trailer_case *t)
{
    static const char start[] = "POST / HTTP/1.1\r\nHost: a\r\n";
    struct parse_case pc = {.name = t->name};
    struct outcome o;
    char *raw = malloc(sizeof(start) - 1 + t->len);

    assert_non_null(raw);
    memcpy(raw, start, sizeof(start) - 1);
    memcpy(raw + sizeof(start) - 1, t->raw, t->len);
    pc.raw = raw;
    pc.len = sizeof(start) - 1 + t->len;
    run_whole(&pc, &o);
    free(raw);
    if (o.status != 0 && o.status != 400) {
        fail_msg("header '%s': status %d", t->name, o.status);
    }
    return o.status == 0;
}

static void test_chunked_trailers_strict_as_headers(void **state)
{
    unsigned failures = 0;
    (void) state;

    for (size_t i = 0; i < sizeof(trailer_cases) / sizeof(trailer_cases[0]); i++) {
        const struct trailer_case *t = &trailer_cases[i];
        bool as_header = header_accepted(t);
        bool whole = trailer_accepted(t, false), bytewise = trailer_accepted(t, true);
        if (as_header != t->valid || whole != t->valid || bytewise != t->valid) {
            print_error("%s: expected %s; header %d, trailer %d, trailer byte by byte %d\n",
                        t->name, t->valid ? "valid" : "invalid", as_header, whole, bytewise);
            failures++;
        }
    }
    assert_int_equal(failures, 0);
}

/* The request hidden behind a bare CR in a trailer (issue 7, item 9) is refused. */
static void test_chunked_trailer_hides_no_request(void **state)
{
    (void) state;
    expect_decode_error(RAW("5\r\nhello\r\n0\r\nX: y\r\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n"));
    expect_decode_error(RAW("0\r\nX\r\n\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n"));
    expect_decode_error(RAW("0\r\n\0X: y\r\n\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n"));
    /* A valid trailer before the next request stops where the message ends. */
    expect_decoded(RAW("0\r\nX: y\r\n\r\nGET /x HTTP/1.1\r\n"), "",
                   sizeof("0\r\nX: y\r\n\r\n") - 1);
}

/*
 * Decode `in` split into pieces at the offsets in `cuts` (ascending);
 * compare the concatenated output with `want`.
 */
static void decode_split(const char *in, size_t len, const size_t *cuts, size_t ncuts,
                         const char *want, size_t want_len)
{
    struct mk_chunked c;
    char *out = malloc(len + 1);
    size_t out_len = 0, start = 0;

    assert_non_null(out);
    mk_chunked_init(&c);
    for (size_t k = 0; k <= ncuts; k++) {
        size_t end = k < ncuts ? cuts[k] : len;
        size_t piece = end - start, produced = 0;
        char *buf = dup_exact(in + start, piece);
        ssize_t n = mk_chunked_decode(&c, buf, piece, &produced);
        assert_int_equal(n, (ssize_t) piece);
        assert_true(produced <= piece);
        memcpy(out + out_len, buf, produced);
        out_len += produced;
        free(buf);
        if (k < ncuts) {
            assert_false(mk_chunked_done(&c));
        }
        start = end;
    }
    assert_true(mk_chunked_done(&c));
    assert_int_equal(out_len, want_len);
    assert_memory_equal(out, want, want_len);
    free(out);
}

static void test_chunked_every_split(void **state)
{
    static const char in[] = "5;x=y\r\nhello\r\n1\r\n \r\n10\r\n0123456789abcdef\r\n"
                             "0\r\nTrailer: t\r\n\r\n";
    static const char want[] = "hello 0123456789abcdef";
    size_t len = sizeof(in) - 1;
    (void) state;

    /* one cut anywhere */
    for (size_t i = 1; i < len; i++) {
        decode_split(in, len, &i, 1, want, sizeof(want) - 1);
    }
    /* two cuts anywhere */
    for (size_t i = 1; i < len; i++) {
        for (size_t j = i + 1; j < len; j++) {
            size_t cuts[2] = {i, j};
            decode_split(in, len, cuts, 2, want, sizeof(want) - 1);
        }
    }
    /* one byte at a time */
    size_t *all = malloc(len * sizeof(size_t));
    assert_non_null(all);
    for (size_t i = 1; i < len; i++) {
        all[i - 1] = i;
    }
    decode_split(in, len, all, len - 1, want, sizeof(want) - 1);
    free(all);
}

/* ---- mk_http_head_build: a head from its parts (HTTP/2) ------------------ */

struct build_case {
    const char *name;
    const char *method, *target;
    const char *fields[8]; /* name, value pairs, NULL-terminated */
    int status;            /* 0: built; else the status answered */
    const struct mk_http_limits *lim;
};

static const struct build_case build_cases[] = {
    {"GET with Host", "GET", "/a?b", {"host", "example.com:80", "user-agent", "x", NULL}, 0},
    {"no Host", "GET", "/", {"user-agent", "x", NULL}, 400},
    {"bad method token", "G(T", "/", {"host", "a", NULL}, 400},
    {"empty method", "", "/", {"host", "a", NULL}, 400},
    {"space in target", "GET", "/a b", {"host", "a", NULL}, 400},
    {"fragment in target", "GET", "/a#b", {"host", "a", NULL}, 400},
    {"relative target", "GET", "a", {"host", "a", NULL}, 400},
    {"CONNECT authority", "CONNECT", "example.com:443", {"host", "example.com:443", NULL}, 0},
    {"OPTIONS *", "OPTIONS", "*", {"host", "a", NULL}, 0},
    {"GET *", "GET", "*", {"host", "a", NULL}, 400},
    {"bad Host", "GET", "/", {"host", "a b", NULL}, 400},
    {"two Hosts", "GET", "/", {"host", "a", "host", "b", NULL}, 400},
    {"control character in a value", "GET", "/", {"host", "a", "x", "a\x01b", NULL}, 400},
    {"DEL in a value", "GET", "/", {"host", "a", "x", "a\x7f", NULL}, 400},
    {"bad field name", "GET", "/", {"host", "a", "x y", "1", NULL}, 400},
    {"differing Content-Length", "POST", "/", {"host", "a", "content-length", "1, 2", NULL}, 400},
    {"unknown Transfer-Encoding",
     "POST",
     "/",
     {"host", "a", "transfer-encoding", "gzip", NULL},
     501},
    {"Expect other than 100-continue", "POST", "/", {"host", "a", "expect", "x", NULL}, 417},
    {"request line over the limit", "GET", "/abc", {"host", "a", NULL}, 414, &lim_short_line},
    {"request line at the limit", "GET", "/ab", {"host", "a", NULL}, 0, &lim_short_line},
    {"more fields than the limit",
     "GET",
     "/",
     {"host", "a", "b", "1", "c", "2", NULL},
     431,
     &lim_two_headers},
    {"fields at the limit", "GET", "/", {"host", "a", "b", "1", NULL}, 0, &lim_two_headers},
};

static int build_one(const struct build_case *c, struct mk_http_head *h, struct mk_http_header *f,
                     bool names_are_tokens)
{
    unsigned n = 0;

    while (c->fields[2 * n]) {
        f[n].name = mk_str_make(c->fields[2 * n], strlen(c->fields[2 * n]));
        f[n].value = mk_str_make(c->fields[2 * n + 1], strlen(c->fields[2 * n + 1]));
        n++;
    }
    return mk_http_head_build(h, mk_str_make(c->method, strlen(c->method)),
                              mk_str_make(c->target, strlen(c->target)), f, n, names_are_tokens,
                              c->lim ? c->lim : &lim_default);
}

static void test_build_table(void **state)
{
    unsigned failures = 0;
    (void) state;

    for (size_t i = 0; i < sizeof(build_cases) / sizeof(build_cases[0]); i++) {
        const struct build_case *c = &build_cases[i];
        struct mk_http_head h;
        struct mk_http_header f[4];
        int rc = build_one(c, &h, f, false);
        int status = rc == MK_OK ? 0 : h.status;
        if (status != c->status || (rc == MK_OK && h.status != 0)) {
            print_error("%s: status %d, expected %d\n", c->name, status, c->status);
            failures++;
        }
        /* names a caller classified as tokens: the same answer unchecked */
        bool tokens = true;
        for (unsigned k = 0; c->fields[2 * k]; k++) {
            tokens &=
                mk_http_name_class(c->fields[2 * k], strlen(c->fields[2 * k])) != MK_HTTP_NAME_BAD;
        }
        if (tokens) {
            rc = build_one(c, &h, f, true);
            if ((rc == MK_OK ? 0 : h.status) != c->status) {
                print_error("%s (names_are_tokens): status %d, expected %d\n", c->name,
                            rc == MK_OK ? 0 : h.status, c->status);
                failures++;
            }
        }
    }
    assert_int_equal(failures, 0);
}

/* mk_http_name_class: every byte value, alone and inside a name, against the tchar set. */
static void test_name_class(void **state)
{
    static const char extra[] = "!#$%&'*+-.^_`|~";
    (void) state;

    assert_int_equal(mk_http_name_class("", 0), MK_HTTP_NAME_BAD);
    assert_int_equal(mk_http_name_class("user-agent", 10), MK_HTTP_NAME_LOWER);
    assert_int_equal(mk_http_name_class("User-Agent", 10), MK_HTTP_NAME_UPPER);
    assert_int_equal(mk_http_name_class("user agent", 10), MK_HTTP_NAME_BAD);
    assert_int_equal(mk_http_name_class("User agent", 10), MK_HTTP_NAME_BAD);
    for (unsigned c = 0; c < 256; c++) {
        char name[3] = {'a', (char) c, 'z'};
        bool upper = c >= 'A' && c <= 'Z';
        bool tchar = upper || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                     (c && strchr(extra, (int) c));
        enum mk_http_name want = !tchar  ? MK_HTTP_NAME_BAD
                                 : upper ? MK_HTTP_NAME_UPPER
                                         : MK_HTTP_NAME_LOWER;
        assert_int_equal(mk_http_name_class(name, 3), want);
        assert_int_equal(mk_http_name_class(name + 1, 1), want);
        /* at every position of names up to 12 bytes (four bytes at a time, then the rest) */
        for (size_t len = 2; len <= 12; len++) {
            for (size_t pos = 0; pos < len; pos++) {
                char longer[12];
                for (size_t k = 0; k < len; k++) {
                    longer[k] = "a-z_0~"[k % 6];
                }
                longer[pos] = (char) c;
                assert_int_equal(mk_http_name_class(longer, len), want);
            }
        }
    }
}

/* What the server reads from a built head: as from the same request in HTTP/1.1 text. */
static void test_build_fields(void **state)
{
    struct mk_http_header f[4] = {
        {MK_STR("host"), MK_STR("Example.com:8080")},
        {MK_STR("content-length"), MK_STR(" 5 ")},
        {MK_STR("range"), MK_STR("bytes=0-1")},
        {MK_STR("expect"), MK_STR("100-continue")},
    };
    struct mk_http_head h;
    (void) state;

    assert_int_equal(
        mk_http_head_build(&h, MK_STR("POST"), MK_STR("/d/f.txt?x=1"), f, 4, false, &lim_default),
        MK_OK);
    assert_int_equal(h.method, MK_METHOD_POST);
    assert_int_equal(h.form, MK_TARGET_ORIGIN);
    assert_int_equal(h.version, 11);
    assert_str(h.path, "/d/f.txt");
    assert_str(h.query, "x=1");
    assert_str(h.host, "Example.com");
    assert_int_equal(h.flags, MK_HEAD_HOST | MK_HEAD_CONTENT_LENGTH | MK_HEAD_EXPECT_CONTINUE);
    assert_int_equal(h.content_length, 5);
    assert_int_equal(h.n_headers, 4);
    assert_str(h.headers[1].value, "5"); /* trimmed */
    assert_ptr_equal(mk_http_known_get(&h, MK_HDR_RANGE), &h.headers[2].value);
}

/*
 * mk_http_read_head: a head that arrived whole is read in one pass exactly
 * as the scan and the parser would read it; anything else is declined.
 */
static void test_read_head_agrees_or_declines(void **state)
{
    static const struct {
        const char *in;
        const struct mk_http_limits *lim;
        unsigned cap;
        bool read; /* read in one pass (else declined) */
    } rh[] = {
        {"GET /a?b HTTP/1.1\r\nHost: h:80\r\nConnection: keep-alive\r\n\r\n", &lim_default, 8,
         true},
        {"GET / HTTP/1.0\nA: 1\n\nGET / HTTP/1.0\n\n", &lim_default, 8, true}, /* pipelined */
        {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello", &lim_default, 8, true},
        {"GET / HTTP/1.1\r\nHost: h\r\n", &lim_default, 8, false},         /* incomplete */
        {"\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", &lim_default, 8, false}, /* empty line first */
        {"GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\n\r\n", &lim_default, 1, false}, /* cap */
        {"GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n", &lim_two_headers, 8, false},
        {"GET /0123456789abcdef HTTP/1.1\r\nHost: h\r\n\r\n", &lim_short_line, 8, false},
        {"GET / HTTP/1.1\r\nHost: h\r\nX: "
         "01234567890123456789012345678901234567890123456789012345678\r\n\r\n",
         &lim_small_head, 8, false},
        {"GET / HTTP/2.0\r\nHost: h\r\n\r\n", &lim_default, 8, false}, /* 505: the parser's */
        {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", &lim_default, 8, false},
        {"GET / HTTP/1.1\r\nX: a\rb\r\nHost: h\r\n\r\n", &lim_default, 8, false},
        {"GET / HTTP/1.1\r\nX:\ta\t b\t\r\nHost: h\r\n\r\n", &lim_default, 8, true},
    };
    (void) state;

    for (size_t i = 0; i < sizeof(rh) / sizeof(rh[0]); i++) {
        const char *in = rh[i].in;
        size_t len = strlen(in);
        struct mk_http_header h1[16], h2[16];
        struct mk_http_head a, b;
        unsigned lines = 0;
        ssize_t n = mk_http_read_head(&a, in, len, rh[i].lim, h1, rh[i].cap, &lines);
        if (!rh[i].read) {
            if (n != MK_DECLINED) {
                fail_msg("case %zu: read, expected declined", i);
            }
            continue;
        }
        struct mk_http_scan scan = {0};
        ssize_t want = mk_http_scan(&scan, in, len, rh[i].lim);
        assert_true(want > 0);
        if (n != want || lines != scan.lines) {
            fail_msg("case %zu: read %zd bytes, %u lines; the scan %zd, %u", i, n, lines, want,
                     scan.lines);
        }
        assert_int_equal(mk_http_parse(&b, in, (size_t) want, h2, rh[i].cap), want);
        assert_int_equal(a.method, b.method);
        assert_int_equal(a.version, b.version);
        assert_int_equal(a.flags, b.flags);
        assert_int_equal(a.content_length, b.content_length);
        assert_int_equal(a.n_headers, b.n_headers);
        assert_true(a.path.len == b.path.len && a.path.p == b.path.p);
        assert_true(a.host.len == b.host.len && a.host.p == b.host.p);
        for (unsigned k = 0; k < a.n_headers; k++) {
            assert_true(h1[k].name.p == h2[k].name.p && h1[k].name.len == h2[k].name.len);
            assert_true(h1[k].value.p == h2[k].value.p && h1[k].value.len == h2[k].value.len);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_whole),
        cmocka_unit_test(test_table_bytewise),
        cmocka_unit_test(test_name_class),
        cmocka_unit_test(test_build_table),
        cmocka_unit_test(test_build_fields),
        cmocka_unit_test(test_origin_form_fields),
        cmocka_unit_test(test_no_query),
        cmocka_unit_test(test_unknown_method_name),
        cmocka_unit_test(test_absolute_form_fields),
        cmocka_unit_test(test_connect_and_asterisk_fields),
        cmocka_unit_test(test_header_get),
        cmocka_unit_test(test_known_headers),
        cmocka_unit_test(test_known_headers_repeated),
        cmocka_unit_test(test_cookie_join),
        cmocka_unit_test(test_parse_header_capacity),
        cmocka_unit_test(test_parse_incomplete),
        cmocka_unit_test(test_limit_max_line_boundary),
        cmocka_unit_test(test_limit_max_line_boundary_lf),
        cmocka_unit_test(test_limit_max_head_boundary),
        cmocka_unit_test(test_limit_max_headers_boundary),
        cmocka_unit_test(test_scan_counts_lines),
        cmocka_unit_test(test_scan_refuses_a_misshapen_request_line),
        cmocka_unit_test(test_scan_resumable_pieces),
        cmocka_unit_test(test_read_head_agrees_or_declines),
        cmocka_unit_test(test_chunked_simple),
        cmocka_unit_test(test_chunked_binary_data),
        cmocka_unit_test(test_chunked_extensions),
        cmocka_unit_test(test_chunked_trailers),
        cmocka_unit_test(test_chunked_trailer_lines),
        cmocka_unit_test(test_chunked_stops_at_end),
        cmocka_unit_test(test_chunked_not_done),
        cmocka_unit_test(test_chunked_errors),
        cmocka_unit_test(test_chunked_size_with_inner_space),
        cmocka_unit_test(test_chunked_line_limits),
        cmocka_unit_test(test_chunked_trailers_strict_as_headers),
        cmocka_unit_test(test_chunked_trailer_hides_no_request),
        cmocka_unit_test(test_chunked_every_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
