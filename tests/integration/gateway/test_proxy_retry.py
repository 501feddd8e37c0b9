"""The reverse proxy's retries (Tries, TryTimeout) and its framing of what
comes back (HEAD, a Content-Length passed on), against real upstreams
that fail on purpose (proxy_upstream.py --close, --half, --hang): what
each upstream saw is counted, so that a request sent twice shows."""

import socket
import time

from conftest import SLOW, free_port
from gwutil import figures, plugin_status
from h2util import H2_MARKS, H2Client
# the helpers of test_proxy.py, its upstreams fixture and its marks (the plugin built)
from test_proxy import (doc_of, echo, h2c_proxy, proxy_server, pytestmark,  # noqa: F401
                        read_to_close, upstreams)


def seen(u):
    """Requests u read whole, its /stats calls left out (this one and those before)."""
    u.calls = getattr(u, "calls", 0) + 1
    return u.stats()["requests"] - u.calls


def group(*ups, conf="", backup=()):
    """proxy.conf: a group `app` of the upstreams (those in `backup` as backups)."""
    lines = "".join(f"    Server {u.addr}{' backup' if u in backup else ''}\n" for u in ups)
    return "    MaxFails 100\n" + conf + "    Upstream app\n" + lines


def test_refused_connect_retried_on_the_next_server(make_server, upstreams):
    a = upstreams("a")
    dead = type("Dead", (), {"addr": f"127.0.0.1:{free_port()}"})()
    srv = proxy_server(make_server, conf=group(dead, a), site="    Pass / app\n",
                       control=True).start()
    c = srv.conn()
    for _ in range(4):
        assert doc_of(c.request("GET", "/echo"))["name"] == "a"
    c.close()
    assert seen(a) == 4
    s = plugin_status(srv, "proxy")
    # each request the dead server took first was retried (the round robin's turn taken by
    # the retry's pick, that is every one here)
    assert s["server0_retries"] >= 2
    figures(s, server0_failures=s["server0_retries"])
    assert s["server1_retries"] == 0 and s["retries"] == s["server0_retries"]


def test_post_sent_is_not_retried_get_is(make_server, upstreams):
    closer, a = upstreams("closer", ["--close"]), upstreams("a")
    srv = proxy_server(make_server, conf=group(closer, a, backup=[a]), site="    Pass / app\n",
                       control=True).start()
    r = echo(srv, "/echo", "POST", body=b"pay once")
    assert r.status == 502
    assert (seen(closer), seen(a)) == (1, 0)  # the upstream saw it once, no one else
    # a GET sent and closed before any byte of an answer: again, on the other server
    d = doc_of(echo(srv, "/echo?x=1"))
    assert d["name"] == "a" and d["target"] == "/echo?x=1"
    assert (seen(closer), seen(a)) == (2, 1)
    # PUT and DELETE are idempotent too; a PUT with a body streamed is not replayable
    assert doc_of(echo(srv, "/echo", "DELETE"))["method"] == "DELETE"
    assert echo(srv, "/echo", "PUT", body=b"streamed").status == 502
    assert (seen(closer), seen(a)) == (4, 2)
    s = plugin_status(srv, "proxy")
    assert s["server0_retries"] == 2 and s["server1_retries"] == 0
    assert "closed before a response" in srv.stderr_text()


def test_methods_are_case_sensitive(make_server, upstreams):
    """A lower-case "get" is a method of its own (RFC 9110 section 9.1), not known to be
    idempotent: sent and closed before an answer, it is not sent again."""
    closer, a = upstreams("closer", ["--close"]), upstreams("a")
    srv = proxy_server(make_server, conf=group(closer, a, backup=[a]),
                       site="    Pass / app\n").start()
    data = srv.raw(b"get /echo HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 502"), data
    assert (seen(closer), seen(a)) == (1, 0)
    data = srv.raw(b"GET /echo HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 200"), data
    assert (seen(closer), seen(a)) == (2, 1)


def test_get_cut_after_response_bytes_is_not_retried(make_server, upstreams):
    half, a = upstreams("half", ["--half"]), upstreams("a")
    srv = proxy_server(make_server, conf=group(half, a, backup=[a]),
                       site="    Pass / app\n").start()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10 * SLOW)
    s.sendall(b"GET /echo HTTP/1.1\r\nHost: h\r\n\r\n")
    data = read_to_close(s)
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    assert b"Content-Length: 200000" in head and b"Transfer-Encoding" not in head
    assert 0 < len(body) < 200000  # the client sees the answer cut short
    assert (seen(half), seen(a)) == (1, 0)
    assert "the response was cut short" in srv.stderr_text()


def test_tries_bounds_the_attempts(make_server, upstreams):
    ups = [upstreams(f"c{i}", ["--close"]) for i in range(4)]
    srv = proxy_server(make_server, conf=group(*ups), site="    Pass / app\n",
                       control=True).start()
    assert echo(srv).status == 502
    counts = [seen(u) for u in ups]
    assert sum(counts) == 3 and max(counts) == 1  # the default: 3, each on another server
    assert plugin_status(srv, "proxy")["retries"] == 2
    srv.stop()
    srv = proxy_server(make_server, conf=group(*ups, conf="    Tries 1\n"),
                       site="    Pass / app\n").start()
    assert echo(srv).status == 502
    assert sum(seen(u) for u in ups) == 4
    srv.stop()
    srv = proxy_server(make_server, conf=group(*ups, conf="    Tries 10\n"),
                       site="    Pass / app\n").start()
    assert echo(srv).status == 502
    assert sum(seen(u) for u in ups) == 8  # 4 more: never the same server twice
    assert "no other server of the group to try (4 tried)" in srv.stderr_text()


def test_first_byte_timeout_retried_for_idempotent_only(make_server, upstreams):
    hang, a = upstreams("hang", ["--hang"]), upstreams("a")
    srv = proxy_server(make_server, conf=group(hang, a, conf="    Timeout 1\n", backup=[a]),
                       site="    Pass / app\n").start()
    t = time.monotonic()
    assert doc_of(echo(srv))["name"] == "a"
    assert 0.9 < time.monotonic() - t < 3.0 * SLOW
    assert (seen(hang), seen(a)) == (1, 1)
    t = time.monotonic()
    assert echo(srv, "/echo", "POST", body=b"once").status == 504
    assert 0.9 < time.monotonic() - t < 3.0 * SLOW
    assert (seen(hang), seen(a)) == (2, 1)


def test_try_timeout_bounds_the_time(make_server, upstreams):
    ups = [upstreams(f"h{i}", ["--hang"]) for i in range(4)]
    conf = "    Timeout 1\n    Tries 4\n    TryTimeout 1800ms\n"
    srv = proxy_server(make_server, conf=group(*ups, conf=conf), site="    Pass / app\n").start()
    t = time.monotonic()
    assert echo(srv).status == 504
    took = time.monotonic() - t
    # attempts at 0 s and about 1 s; none at about 2 s, past TryTimeout: not 4 of them
    assert sum(seen(u) for u in ups) == 2
    assert 1.9 < took < 3.5 * SLOW


def test_head_carries_the_upstream_length_http1(make_server, upstreams):
    a = upstreams("a")
    srv = proxy_server(make_server, site=f"    Pass / {a.addr}\n").start()
    c = srv.conn()
    r = c.request("HEAD", "/status/404")  # the upstream's "Content-Length: 2" (and body: dropped)
    assert r.status == 404 and r.header("Content-Length") == "2"
    r = c.request("HEAD", "/big?n=5000000")
    assert r.status == 200 and r.header("Content-Length") == "5000000"
    # no length from the upstream (chunked): none made up, no body either
    r = c.request("HEAD", "/chunked")
    assert r.status == 200 and r.header("Content-Length") is None
    r = c.request("GET", "/status/404")  # the connection goes on: nothing followed the heads
    assert (r.status, r.body) == (404, b"ok")
    c.close()


def test_head_carries_the_upstream_length_http2(make_server, upstreams):
    srv, h, a = h2c_proxy(make_server, upstreams)
    small = h.request("/status/404", method="HEAD")
    big = h.request("/big?n=5000000", method="HEAD")
    h.wait([small, big])
    st = h.streams[small]
    assert st["headers"][":status"] == "404" and st["data"] == b""
    assert st["headers"]["content-length"] == "2"
    assert h.streams[big]["headers"]["content-length"] == "5000000"
    assert h.streams[big]["data"] == b""
    h.close()


def test_streamed_answer_keeps_the_upstream_length(make_server, upstreams):
    a = upstreams("a")
    srv = proxy_server(make_server, site=f"    Pass / {a.addr}\n", h2c=True).start()
    n = 5 * 1000 * 1000
    chunk = bytes(range(256)) * 256
    want = (chunk * (n // len(chunk) + 1))[:n]
    c = srv.conn()
    for _ in range(2):  # framed by the length: the connection goes on after it
        r = c.request("GET", f"/big?n={n}")
        assert r.status == 200 and r.header("Content-Length") == str(n)
        assert r.header("Transfer-Encoding") is None and r.header("Connection") != "close"
        assert r.body == want
    # a long chunked answer stays chunked: its length is known at its end only
    c.send(b"GET /chunked?n=20000 HTTP/1.1\r\nHost: h\r\n\r\n")
    while b"\r\n\r\n" not in c.buf:
        c._fill()
    assert b"Transfer-Encoding: chunked" in c.buf.split(b"\r\n\r\n")[0]
    c.close()
    # HTTP/1.0: the length, not the close, ends the body
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10 * SLOW)
    s.sendall(b"GET /big?n=%d HTTP/1.0\r\nHost: h\r\n\r\n" % n)
    head, _, body = read_to_close(s).partition(b"\r\n\r\n")
    s.close()
    assert b"Content-Length: %d" % n in head and body == want
    for mark in H2_MARKS:
        if mark.args[0]:
            return
    h = H2Client(srv.port)
    sid = h.request(f"/big?n={n}")
    h.wait([sid])
    assert h.streams[sid]["headers"]["content-length"] == str(n)
    assert h.streams[sid]["data"] == want
    h.close()
