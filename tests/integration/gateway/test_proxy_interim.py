"""The reverse proxy's interim answers: an upstream's 103 Early Hints reaches
HTTP/1.1 and HTTP/2 clients before the answer (its Link fields), never an
HTTP/1.0 client; its 100 Continue stays the proxy's (plugins/proxy/README.md,
"What comes back")."""

import socket
import time

import pytest

from conftest import SLOW
from gwutil import plugin_status
from test_proxy import h2c_proxy, proxy_server, pytestmark, read_to_close, upstreams  # noqa: F401

HINTS = (b"Link: </style.css>; rel=preload; as=style\r\n"
         b"Link: </app.js>; rel=preload; as=script\r\n")


def raw(srv, request, timeout=10):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=timeout * SLOW)
    s.sendall(request)
    return s


def test_early_hints_http11_before_the_answer(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=f"    Pass / {u.addr}\n", control=True).start()
    s = raw(srv, b"GET /hints?s=1.5 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    t0 = time.monotonic()
    early = b""
    while b"\r\n\r\n" not in early:
        got = s.recv(65536)
        assert got, early
        early += got
    waited = time.monotonic() - t0
    # the hints came while the upstream still held its answer back
    assert waited < 1.2, waited
    assert early == b"HTTP/1.1 103 Early Hints\r\n" + HINTS + b"\r\n", early
    rest = read_to_close(s)
    s.close()
    assert time.monotonic() - t0 >= 1.4
    head, body = rest.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200 OK\r\n"), head
    assert b"Link: </style.css>; rel=preload\r\n" in head and b"X-Not-A-Hint" not in rest
    assert body == b"body"
    assert plugin_status(srv, "proxy")["early_hints"] == 1


def test_continue_consumed_early_hints_passed(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=f"    Pass / {u.addr}\n").start()
    s = raw(srv, b"GET /continue HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    data = read_to_close(s)
    s.close()
    assert data.startswith(b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\n")
    assert b"100 Continue" not in data and data.endswith(b"\r\n\r\ndone")
    # on a kept connection, the next answer is whole and alone
    c = srv.conn()
    r = c.request("GET", "/continue")
    assert r.status == 103 and r.headers["link"] == ["</a.css>"] and r.body == b""
    r = c.read_response()
    assert r.status == 200 and r.body == b"done"
    r = c.request("GET", "/echo")
    assert r.status == 200 and b'"target": "/echo"' in r.body
    c.close()


def test_no_early_hints_to_http10(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=f"    Pass / {u.addr}\n", control=True).start()
    s = raw(srv, b"GET /hints HTTP/1.0\r\nHost: h\r\n\r\n")
    data = read_to_close(s)
    s.close()
    assert data.startswith(b"HTTP/1.1 200 OK\r\n"), data[:200]
    assert b"103" not in data.split(b"\r\n", 1)[0] and data.endswith(b"body")
    assert b"rel=preload; as=style" not in data
    assert plugin_status(srv, "proxy")["early_hints"] == 0


def test_response_header_link_setting_keeps_hints_back(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server,
                       site=f"    Pass / {u.addr}\n    ResponseHeader remove Link\n").start()
    s = raw(srv, b"GET /hints HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    data = read_to_close(s)
    s.close()
    assert data.startswith(b"HTTP/1.1 200 OK\r\n") and b"Link" not in data, data


def test_early_hints_while_the_body_streams(make_server, upstreams):
    """A 103 that comes while the request body still goes up is passed on too."""
    u = upstreams("a")
    srv = proxy_server(make_server, site=f"    Pass / {u.addr}\n").start()
    s = raw(srv, b"POST /hints HTTP/1.1\r\nHost: h\r\nConnection: close\r\n"
                 b"Content-Length: 10\r\n\r\n01234")
    time.sleep(0.3)
    s.sendall(b"56789")
    data = read_to_close(s)
    s.close()
    assert data.startswith(b"HTTP/1.1 103 Early Hints\r\n" + HINTS + b"\r\nHTTP/1.1 200 OK\r\n"), data
    assert data.endswith(b"\r\n\r\nbody")


@pytest.mark.parametrize("dummy", [0], ids=["h2c"])
def test_early_hints_http2(make_server, upstreams, dummy):
    srv, h, u = h2c_proxy(make_server, upstreams)
    sid = h.request("/hints?s=1.5")
    t0 = time.monotonic()
    while "informational" not in h.streams[sid]:
        assert h.read_once()
    assert time.monotonic() - t0 < 1.2
    assert h.streams[sid]["headers"] == {} and not h.streams[sid]["ended"]
    info = h.streams[sid]["informational"]
    assert len(info) == 1 and info[0][":status"] == "103"
    h.wait([sid])
    st = h.streams[sid]
    assert st["headers"][":status"] == "200" and st["data"] == b"body"
    # both Link fields, in order, and nothing but them (the dict keeps the last)
    ev = [e for e in h.events if type(e).__name__ == "InformationalResponseReceived"]
    links = [v for k, v in ev[0].headers if k == "link"]
    assert links == ["</style.css>; rel=preload; as=style", "</app.js>; rel=preload; as=script"]
    assert [k for k, v in ev[0].headers] == [":status", "link", "link"]
    # /continue: the 100 stays the proxy's, the 103 goes on; streams side by side
    sids = [h.request("/continue") for _ in range(5)]
    h.wait(sids)
    for i in sids:
        st = h.streams[i]
        assert [x[":status"] for x in st["informational"]] == ["103"]
        assert st["headers"][":status"] == "200" and st["data"] == b"done"
    h.close()
