"""The reverse proxy's response trailers: a chunked answer's trailer fields
reach an HTTP/2 client, and an HTTP/1.1 client that sent TE: trailers, in
the last chunk; never an HTTP/1.1 client that did not ask, nor HTTP/1.0
(plugins/proxy/README.md, "What comes back")."""

import socket

import pytest

from conftest import SLOW
from test_proxy import h2c_proxy, proxy_server, pytestmark, read_to_close, upstreams  # noqa: F401


def raw(srv, request):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10 * SLOW)
    s.sendall(request)
    data = read_to_close(s)
    s.close()
    return data


def dechunk(rest):
    """The body and the trailer section of a chunked body."""
    body = b""
    while True:
        line, rest = rest.split(b"\r\n", 1)
        n = int(line.split(b";")[0], 16)
        if n == 0:
            trailer, tail = rest.split(b"\r\n\r\n", 1) if not rest.startswith(b"\r\n") \
                else (b"", rest[2:])
            assert tail == b""
            return body, trailer
        body, rest = body + rest[:n], rest[n + 2:]


@pytest.mark.parametrize("wait", [0, 0.3], ids=["whole", "streamed"])
def test_trailers_to_http11_that_asked(make_server, upstreams, wait):
    u = upstreams("a")
    srv = proxy_server(make_server, site=f"    Pass / {u.addr}\n").start()
    data = raw(srv, b"GET /trailers?s=%g HTTP/1.1\r\nHost: h\r\nTE: deflate, Trailers;q=0.5\r\n"
                    b"Connection: close\r\n\r\n" % wait)
    head, rest = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"Transfer-Encoding: chunked" in head
    body, trailer = dechunk(rest)
    assert body == b"te=trailers"  # the upstream was told
    assert trailer == b"X-Checksum: abc\r\nGrpc-Status: 0", trailer


def test_no_trailers_unasked_or_http10(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=f"    Pass / {u.addr}\n").start()
    data = raw(srv, b"GET /trailers?s=0.2 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    head, rest = data.split(b"\r\n\r\n", 1)
    body, trailer = dechunk(rest)
    assert body == b"te=" and trailer == b""
    data = raw(srv, b"GET /trailers HTTP/1.1\r\nHost: h\r\nTE: gzip\r\nConnection: close\r\n\r\n")
    head, rest = data.split(b"\r\n\r\n", 1)
    if b"Transfer-Encoding: chunked" in head:
        assert dechunk(rest) == (b"te=", b"")
    else:
        assert rest == b"te="  # it came whole: Content-Length
    assert b"X-Checksum" not in data
    data = raw(srv, b"GET /trailers?s=0.2 HTTP/1.0\r\nHost: h\r\nTE: trailers\r\n\r\n")
    assert data.endswith(b"\r\n\r\nte=") and b"X-Checksum" not in data


@pytest.mark.parametrize("dummy", [0], ids=["h2c"])
def test_trailers_to_http2(make_server, upstreams, dummy):
    srv, h, u = h2c_proxy(make_server, upstreams)
    sids = [h.request("/trailers?s=0.2"), h.request("/trailers"),
            h.request("/trailers", headers=[("te", "trailers")])]
    h.wait(sids)
    for sid in sids:
        st = h.streams[sid]
        assert st["headers"][":status"] == "200" and st["data"] == b"te=trailers"
        assert st["trailers"] == {"x-checksum": "abc", "grpc-status": "0"}, st
    # an answer without trailers ends with its DATA as before
    st = h.get("/chunked?n=2")
    assert st["data"] == b"piece 0;piece 1;" and "trailers" in st  # X-Trailer: t goes too
    assert st["trailers"] == {"x-trailer": "t"}
    st = h.get("/echo")
    assert "trailers" not in st
    h.close()
