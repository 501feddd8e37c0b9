"""Tier 4: malformed input gets the right 4xx/5xx and a cleanly closed connection."""

import pytest

from conftest import Conn


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    from conftest import Server
    s = Server(tmp_path_factory.mktemp("bad"))
    s.file("a.txt", "AAAA\n")
    s.set(MaxRequestLine="1K", MaxRequestSize="4K", MaxRequestHeaders=20)
    s.start()
    yield s
    assert s.stop() == 0


H = b"Host: x\r\n"

CASES = [
    # request line
    ("no version", b"GET /a.txt\r\n\r\n", 400),
    ("http/0.9 style", b"GET /a.txt HTTP/0.9\r\n" + H + b"\r\n", 505),
    ("http/2.0", b"GET /a.txt HTTP/2.0\r\n" + H + b"\r\n", 505),
    ("lowercase version", b"GET /a.txt http/1.1\r\n" + H + b"\r\n", 400),
    ("version junk", b"GET /a.txt HTTP/1.1x\r\n" + H + b"\r\n", 400),
    ("double space", b"GET  /a.txt HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("tab separator", b"GET\t/a.txt HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("bad method char", b"G(T /a.txt HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("empty target", b"GET  HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("relative target", b"GET a.txt HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("fragment", b"GET /a.txt#x HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("8-bit target", b"GET /\xc3\xa9 HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("control in target", b"GET /a\x01 HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("asterisk with GET", b"GET * HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("userinfo", b"GET http://u@x/a.txt HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("tls client hello", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40, 400),
    ("request line too long", b"GET /" + b"a" * 2000 + b" HTTP/1.1\r\n" + H + b"\r\n", 414),
    ("request line too long, unterminated", b"GET /" + b"a" * 2000, 414),
    # headers
    ("no host", b"GET /a.txt HTTP/1.1\r\n\r\n", 400),
    ("two hosts", b"GET /a.txt HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    ("bad host", b"GET /a.txt HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
    ("host with path", b"GET /a.txt HTTP/1.1\r\nHost: a/b\r\n\r\n", 400),
    ("space before colon", b"GET /a.txt HTTP/1.1\r\nHost : x\r\n\r\n", 400),
    ("tab before colon", b"GET /a.txt HTTP/1.1\r\n" + H + b"X-A\t: 1\r\n\r\n", 400),
    ("obs-fold", b"GET /a.txt HTTP/1.1\r\n" + H + b"X-A: 1\r\n  continued\r\n\r\n", 400),
    ("no colon", b"GET /a.txt HTTP/1.1\r\n" + H + b"NoColon\r\n\r\n", 400),
    ("empty name", b"GET /a.txt HTTP/1.1\r\n" + H + b": v\r\n\r\n", 400),
    ("bad name char", b"GET /a.txt HTTP/1.1\r\n" + H + b"X(A): 1\r\n\r\n", 400),
    ("bare CR in value", b"GET /a.txt HTTP/1.1\r\n" + H + b"X-A: 1\r2\r\n\r\n", 400),
    ("NUL in value", b"GET /a.txt HTTP/1.1\r\n" + H + b"X-A: 1\x002\r\n\r\n", 400),
    ("DEL in value", b"GET /a.txt HTTP/1.1\r\n" + H + b"X-A: 1\x7f\r\n\r\n", 400),
    ("too many headers", b"GET /a.txt HTTP/1.1\r\n" + H + b"X-A: 1\r\n" * 30 + b"\r\n", 431),
    ("headers too large", b"GET /a.txt HTTP/1.1\r\n" + H + b"X-A: " + b"v" * 5000 + b"\r\n\r\n", 431),
    ("headers too large, unterminated", b"GET /a.txt HTTP/1.1\r\n" + b"X-A: " + b"v" * 5000, 431),
    # framing
    ("CL and TE", b"POST /a.txt HTTP/1.1\r\n" + H +
     b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("two different CL", b"POST /a.txt HTTP/1.1\r\n" + H +
     b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400),
    ("CL list differing", b"POST /a.txt HTTP/1.1\r\n" + H + b"Content-Length: 5, 6\r\n\r\nhello!", 400),
    ("CL not a number", b"POST /a.txt HTTP/1.1\r\n" + H + b"Content-Length: five\r\n\r\n", 400),
    ("CL negative", b"POST /a.txt HTTP/1.1\r\n" + H + b"Content-Length: -1\r\n\r\n", 400),
    ("CL plus sign", b"POST /a.txt HTTP/1.1\r\n" + H + b"Content-Length: +5\r\n\r\nhello", 400),
    ("CL empty", b"POST /a.txt HTTP/1.1\r\n" + H + b"Content-Length: \r\n\r\n", 400),
    ("CL overflow", b"POST /a.txt HTTP/1.1\r\n" + H +
     b"Content-Length: 99999999999999999999999\r\n\r\n", 400),
    ("TE unknown", b"POST /a.txt HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip, chunked\r\n\r\n", 501),
    ("TE chunked not last", b"POST /a.txt HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: chunked, gzip\r\n\r\n", 501),
    ("TE chunked twice", b"POST /a.txt HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    ("TE in HTTP/1.0", b"POST /a.txt HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("TE empty", b"POST /a.txt HTTP/1.1\r\n" + H + b"Transfer-Encoding: \r\n\r\n", 400),
    ("expectation unknown", b"GET /a.txt HTTP/1.1\r\n" + H + b"Expect: 200-ok\r\n\r\n", 417),
    ("bad path escape", b"GET /%zz HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("path above root", b"GET /../a.txt HTTP/1.1\r\n" + H + b"\r\n", 400),
]


@pytest.mark.parametrize("name,raw,status", CASES, ids=[c[0] for c in CASES])
def test_bad_request(srv, name, raw, status):
    c = srv.conn()
    c.send(raw)
    r = c.read_response()
    assert r.status == status, name
    assert r.header("connection") == "close"
    assert r.header("content-type") == "text/html; charset=utf-8"
    assert str(status).encode() in r.body
    assert c.closed(), "connection must be closed after a bad request"
    c.close()
    # The server is unharmed.
    assert srv.get("/a.txt").status == 200


def test_leading_empty_lines_are_ignored(srv):
    c = srv.conn()
    c.send(b"\r\n\r\n\nGET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    assert c.read_response().status == 200
    c.close()


def test_lf_only_line_endings(srv):
    c = srv.conn()
    c.send(b"GET /a.txt HTTP/1.1\nHost: x\n\n")
    assert c.read_response().body == b"AAAA\n"
    c.close()


def test_identical_content_lengths_accepted(srv):
    c = srv.conn()
    c.send(b"POST /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\nabc"
           b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    assert c.read_response().status == 405
    assert c.read_response().status == 200
    c.close()


def test_bad_chunk_size_after_response_closes(srv):
    """The body is read after the static response: a framing error then ends
    the connection, and nothing after it is taken for a request."""
    c = srv.conn()
    c.send(b"POST /a.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"zz\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    assert c.read_response().status == 405
    assert c.closed()
    assert c.buf == b""


BAD_TRAILERS = [
    ("bare CR", b"X: y\r\r\n"),
    ("no colon", b"X\r\n\r\n"),
    ("NUL at line start", b"\0X: y\r\n\r\n"),
    ("obs-fold", b"X: y\r\n z\r\n\r\n"),
]


@pytest.mark.parametrize("name,trailer", BAD_TRAILERS, ids=[c[0] for c in BAD_TRAILERS])
def test_bad_trailer_hides_no_request(srv, name, trailer):
    """The trailer section is as strict as the header section: a front end
    that ends the line at the bare CR would see the GET as a second request,
    so we must not read it as trailers (nor answer it)."""
    c = srv.conn()
    c.send(b"POST /a.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"1\r\nz\r\n0\r\n" + trailer + b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    assert c.read_response().status == 405
    assert c.closed(), name
    assert c.buf == b""


def test_valid_trailer_then_next_request(srv):
    c = srv.conn()
    c.send(b"POST /a.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"1\r\nz\r\n0\r\nX-Sum: 1\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    assert c.read_response().status == 405
    assert c.read_response().body == b"AAAA\n"
    c.close()


def test_binary_garbage_flood(srv):
    import os
    for _ in range(20):
        # Ended by a line break: the server judges a request line once it has
        # one (3000 random bytes lack a '\n' about once in 125 tries; the
        # server then waits for more, up to MaxRequestLine or Timeout).
        data = os.urandom(3000) + b"\r\n"
        c = srv.conn()
        c.send(data)  # one write: the server reads it whole before it answers
        closed = c.closed(3)
        c.close()
        # Random bytes are no request line: refused at once with 400 and closed.
        assert closed, "the server kept a garbage connection open"
        assert c.buf.startswith(b"HTTP/1.1 400 Bad Request\r\n"), c.buf[:80]
    assert srv.get("/a.txt").status == 200


def test_request_smuggling_attempt(srv):
    """CL.TE: a front end that trusts Content-Length would forward the rest
    as a second request; we refuse the message instead."""
    c = srv.conn()
    c.send(b"POST /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n"
           b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /admin HTTP/1.1\r\nHost: x\r\n\r\n")
    r = c.read_response()
    assert r.status == 400
    assert c.closed()
    assert c.buf == b""
