"""The reverse proxy's request trailers: the trailer fields of an HTTP/1.1
chunked request body and of an HTTP/2 request's trailing HEADERS go to the
upstream after the last chunk of the proxy's chunked request, hop-by-hop
fields, those the client's Connection names and those a trailer may not
carry left out (plugins/proxy/README.md, "What goes to the upstream").
The upstream records every byte it received (proxy_upstream.py --raw)."""

import json
import time

import pytest

from test_proxy import h2c_proxy, proxy_server, pytestmark, upstreams  # noqa: F401


def last_chunk(raw, deadline=5.0):
    """What followed the upstream request's last chunk (its trailer section
    and the final empty line), once it came."""
    end = time.monotonic() + deadline
    while True:
        data = raw.read_bytes() if raw.exists() else b""
        head, _, body = data.partition(b"\r\n\r\n")
        if b"\r\n0\r\n" in b"\r\n" + body and body.endswith(b"\r\n\r\n"):
            return head, body[(b"\r\n" + body).index(b"\r\n0\r\n"):]
        assert time.monotonic() < end, data
        time.sleep(0.05)


def echo_doc(data):
    head, _, rest = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), data
    if b"Transfer-Encoding: chunked" in head:
        body = b""
        while True:
            line, rest = rest.split(b"\r\n", 1)
            n = int(line, 16)
            if n == 0:
                break
            body, rest = body + rest[:n], rest[n + 2:]
        rest = body
    return json.loads(rest)


HTTP11 = (b"POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
          b"Connection: close, X-Named\r\nTrailer: X-Checksum\r\n\r\n"
          b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n")


def test_http11_trailers_to_the_upstream(make_server, upstreams, tmp_path):
    raw = tmp_path / "raw.bin"
    a = upstreams("a", flags=["--raw", str(raw)])
    srv = proxy_server(make_server, site=f"    Pass / {a.addr}\n").start()
    data = srv.raw(HTTP11 + b"X-Checksum:   abc  \r\nX-Named: 1\r\nContent-Length: 5\r\n"
                   b"Connection: x\r\nTE: trailers\r\nProxy-Foo: 1\r\nHost: evil\r\n"
                   b"Set-Cookie: a=b\r\nGrpc-Status:0\r\n\r\n")
    assert echo_doc(data)["body"] == "hello world"
    head, tail = last_chunk(raw)
    assert b"Transfer-Encoding: chunked" in head and b"\r\nTrailer:" not in head
    assert tail == b"0\r\nX-Checksum: abc\r\nGrpc-Status: 0\r\n\r\n", tail


def test_http11_lf_trailers_and_none(make_server, upstreams, tmp_path):
    raw = tmp_path / "raw.bin"
    a = upstreams("a", flags=["--raw", str(raw)])
    srv = proxy_server(make_server, site=f"    Pass / {a.addr}\n").start()
    data = srv.raw(HTTP11 + b"X-Lf: 1\nX-Empty:\n\n")
    assert echo_doc(data)["body"] == "hello world"
    assert last_chunk(raw)[1] == b"0\r\nX-Lf: 1\r\nX-Empty: \r\n\r\n"
    raw.unlink()
    data = srv.raw(HTTP11 + b"\r\n")
    assert echo_doc(data)["body"] == "hello world"
    assert last_chunk(raw)[1] == b"0\r\n\r\n"


def test_http11_trailers_in_pieces(make_server, upstreams, tmp_path):
    """A trailer section that comes a few bytes at a time is whole upstream."""
    raw = tmp_path / "raw.bin"
    a = upstreams("a", flags=["--raw", str(raw)])
    srv = proxy_server(make_server, site=f"    Pass / {a.addr}\n").start()
    c = srv.conn()
    rest = b"X-One: 1\r\nX-Two: " + b"v" * 3000 + b"\r\n\r\n"
    c.send(HTTP11)
    for i in range(0, len(rest), 700):
        time.sleep(0.05)
        c.send(rest[i:i + 700])
    assert c.closed(5)
    assert echo_doc(c.buf)["body"] == "hello world"
    c.close()
    assert last_chunk(raw)[1] == b"0\r\n" + rest


def test_http11_bad_trailer_never_reaches_the_upstream(make_server, upstreams, tmp_path):
    raw = tmp_path / "raw.bin"
    a = upstreams("a", flags=["--raw", str(raw)])
    srv = proxy_server(make_server, site=f"    Pass / {a.addr}\n").start()
    data = srv.raw(HTTP11 + b"X-A: 1\r\n folded\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 400"), data
    time.sleep(0.2)
    seen = raw.read_bytes() if raw.exists() else b""
    assert b"folded" not in seen and b"\r\n0\r\n" not in seen, seen


def test_h2_trailers_to_the_upstream(make_server, upstreams, tmp_path):
    raw = tmp_path / "raw.bin"
    srv, h, a = h2c_proxy(make_server, upstreams, flags=["--raw", str(raw)])
    sid = h.request("/echo", method="POST", body=b"hello", end=False)
    h.conn.send_headers(sid, [("x-checksum", " abc "), ("content-type", "x/y"),
                              ("te", "trailers"), ("grpc-status", "0")], end_stream=True)
    h.flush()
    h.wait([sid])
    st = h.streams[sid]
    assert st["headers"][":status"] == "200" and json.loads(st["data"])["body"] == "hello"
    head, tail = last_chunk(raw)
    assert b"Transfer-Encoding: chunked" in head
    assert tail == b"0\r\nx-checksum: abc\r\ngrpc-status: 0\r\n\r\n", tail


def test_h2_trailers_with_a_length_are_not_sent(make_server, upstreams, tmp_path):
    """A body of known length goes with Content-Length: no trailer can follow it."""
    raw = tmp_path / "raw.bin"
    srv, h, a = h2c_proxy(make_server, upstreams, flags=["--raw", str(raw)])
    sid = h.request("/echo", method="POST", headers=[("content-length", "5")], body=b"hello",
                    end=False)
    h.conn.send_headers(sid, [("x-checksum", "abc")], end_stream=True)
    h.flush()
    h.wait([sid])
    assert json.loads(h.streams[sid]["data"])["body"] == "hello"
    seen = raw.read_bytes()
    assert b"Content-Length: 5\r\n" in seen and b"x-checksum" not in seen.lower(), seen


@pytest.mark.parametrize("field", [("X-Upper", "1"), ("x-bad", "a\rb"), (":path", "/x")],
                         ids=["upper", "cr", "pseudo"])
def test_h2_malformed_trailers_reset(make_server, upstreams, tmp_path, field):
    raw = tmp_path / "raw.bin"
    srv, h, a = h2c_proxy(make_server, upstreams, flags=["--raw", str(raw)])
    sid = h.request("/echo", method="POST", body=b"hello", end=False)
    h.conn.send_headers(sid, [("x-ok", "1"), field], end_stream=True)
    h.flush()
    h.wait([sid], allow_close=True)
    assert h.streams[sid]["reset"] is not None, h.streams[sid]
    time.sleep(0.2)
    seen = raw.read_bytes() if raw.exists() else b""
    assert b"x-ok" not in seen, seen
