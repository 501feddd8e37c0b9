"""The error-log line of every 5xx, whatever RequestId says: "request ID
answered STATUS (site LABEL[, upstream N us]): METHOD TARGET". With
RequestId On the ID is the request's; with it Off the server makes one for
that response only (the note request_id: the access log's line of the same
request names it), and a request answered below 500 gets none. The 5xx come
from a CGI script that fails (502), a FastCGI backend's broken answer
(502), a dead proxy upstream (502; all with the time waited on the
backend) and the server itself (501: a transfer coding it does
not know)."""

import re

import pytest

from conftest import SLOW, free_port, needs_dlopen, needs_part, wait_for
from test_fastcgi import FCGI_SO
from test_fastcgi_backends import Responder
from test_proxy import PROXY_SO
from test_proxy_protocol import exchange
from test_request_id import GEN, id_server, log, req

pytestmark = [needs_dlopen, needs_part("reqid", "request IDs and trace context")]

LINE = re.compile(r"request ([0-9a-f]{16}-[0-9a-f]{16}|[!-~]+) answered (5\d\d) "
                  r"\(site ([^,)]+)(?:, upstream (\d+) us)?\): (\S+) (\S+)$")


def error_lines(srv, n):
    """The server's 5xx lines of the site's error log, once there are n."""
    path = srv.logs / "error.log"

    def lines():
        text = path.read_text() if path.exists() else ""
        return [m for m in (LINE.search(ln) for ln in text.splitlines()) if m]
    assert wait_for(lambda: len(lines()) >= n, 5 * SLOW), \
        path.read_text() if path.exists() else "no error log"
    return lines()


def fivexx_server(make_server, request_id, **conf):
    srv = id_server(make_server, RequestId=request_id, **conf)
    srv.file("fail.cgi", "#!/bin/sh\nexit 1\n", mode=0o755)
    srv.file("missing.txt", "here\n")
    return srv


@pytest.mark.parametrize("request_id", ["On", "Off"])
def test_cgi_failure(make_server, request_id):
    srv = fivexx_server(make_server, request_id).start()
    assert exchange(srv.port, req("/missing.txt")).startswith(b"HTTP/1.1 200")
    assert exchange(srv.port, req("/nothing-here")).startswith(b"HTTP/1.1 404")
    r = exchange(srv.port, req("/fail.cgi?x=1"))
    assert r.startswith(b"HTTP/1.1 502"), r
    lines = log(srv, 3)
    (m,) = error_lines(srv, 1)  # the 200 and the 404 wrote none
    assert GEN.match(m.group(1)), m.group(0)
    assert (m.group(2), m.group(3)) == ("502", "localhost"), m.group(0)
    assert m.group(4) is not None, m.group(0)  # the time waited on the script (the backend)
    assert (m.group(5), m.group(6)) == ("GET", "/fail.cgi?x=1"), m.group(0)
    # the access log's line of the same request names the same ID; the others none when Off
    ids = [ln.split()[0] for ln in lines]
    assert ids[2] == m.group(1), lines
    if request_id == "Off":
        assert ids[:2] == ["-", "-"], lines
    else:
        assert GEN.match(ids[0]) and GEN.match(ids[1]), lines


@pytest.mark.parametrize("request_id", ["On", "Off"])
def test_trusted_client_id_named(make_server, request_id):
    # RequestId On takes the trusted client's ID; Off ignores it and makes one
    srv = fivexx_server(make_server, request_id, RequestIdFrom="127.0.0.1").start()
    r = exchange(srv.port, req("/fail.cgi", [("X-Request-Id", "lb-77")]))
    assert r.startswith(b"HTTP/1.1 502"), r
    (m,) = error_lines(srv, 1)
    if request_id == "On":
        assert m.group(1) == "lb-77", m.group(0)
    else:
        assert GEN.match(m.group(1)), m.group(0)


@pytest.mark.skipif(not PROXY_SO.exists(), reason="built without the proxy plugin")
@pytest.mark.parametrize("request_id", ["On", "Off"])
def test_proxy_dead_upstream(make_server, request_id):
    srv = fivexx_server(make_server, request_id)
    dead = f"127.0.0.1:{free_port()}"
    srv.plugins.append(str(PROXY_SO))
    (srv.conf / "plugins").mkdir(exist_ok=True)
    (srv.conf / "plugins" / "proxy.conf").write_text("[PROXY]\n    MaxFails 1000\n")
    srv.site_extra += f"[PROXY]\n    Pass /app {dead}\n"
    srv.start()
    for _ in range(2):
        r = exchange(srv.port, req("/app/x"))
        assert r.startswith(b"HTTP/1.1 502"), r
    a, b = error_lines(srv, 2)
    assert GEN.match(a.group(1)) and GEN.match(b.group(1)) and a.group(1) != b.group(1)
    for m in (a, b):
        assert (m.group(2), m.group(3), m.group(5), m.group(6)) == \
            ("502", "localhost", "GET", "/app/x"), m.group(0)
        assert m.group(4) is not None and int(m.group(4)) >= 0, m.group(0)  # it waited
    ids = [ln.split()[0] for ln in log(srv, 2)]
    assert ids == [a.group(1), b.group(1)]


@pytest.mark.skipif(not FCGI_SO.exists(), reason="built without the fastcgi plugin")
@pytest.mark.parametrize("request_id", ["On", "Off"])
def test_fastcgi_bad_answer(make_server, tmp_path, request_id):
    sock = tmp_path / "fcgi.sock"
    backend = Responder(sock)
    try:
        srv = fivexx_server(make_server, request_id)
        srv.file("a.php", "")
        srv.plugins.append(str(FCGI_SO))
        (srv.conf / "plugins").mkdir(exist_ok=True)
        (srv.conf / "plugins" / "fastcgi.conf").write_text("[FASTCGI]\n")
        srv.site_extra += f"[FASTCGI]\n    Backend unix:{sock}\n    Match \\.php$\n"
        srv.start()
        assert exchange(srv.port, req("/a.php")).startswith(b"HTTP/1.1 200")
        r = exchange(srv.port, req("/a.php?mode=garbage"))
        assert r.startswith(b"HTTP/1.1 502"), r
        (m,) = error_lines(srv, 1)  # the 200 wrote none
        assert GEN.match(m.group(1)), m.group(0)
        assert (m.group(2), m.group(3), m.group(5), m.group(6)) == \
            ("502", "localhost", "GET", "/a.php?mode=garbage"), m.group(0)
        assert m.group(4) is not None, m.group(0)  # it waited on the backend
        ids = [ln.split()[0] for ln in log(srv, 2)]
        assert ids[1] == m.group(1), ids
        assert (ids[0] == "-") == (request_id == "Off"), ids
    finally:
        backend.stop()


@pytest.mark.parametrize("request_id", ["On", "Off"])
def test_server_error(make_server, request_id):
    srv = fivexx_server(make_server, request_id).start()
    r = exchange(srv.port, b"POST /upload HTTP/1.1\r\nHost: localhost\r\n"
                           b"Transfer-Encoding: gzip, chunked\r\n\r\n")
    assert r.startswith(b"HTTP/1.1 501"), r
    (m,) = error_lines(srv, 1)
    assert GEN.match(m.group(1)), m.group(0)
    assert (m.group(2), m.group(5), m.group(6)) == ("501", "POST", "/upload"), m.group(0)
    assert m.group(4) is None, m.group(0)  # no upstream
