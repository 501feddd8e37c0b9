"""The reverse proxy plugin (plugins/proxy): requests through to HTTP/1.1
upstreams and back, framing decided by the proxy, hop-by-hop fields,
X-Forwarded-*, the balancing modes, passive health, timeouts, retries,
the keep-alive pool, HTTP/2 clients, a large download with bounded
memory, and a smuggling attempt. The upstreams are proxy_upstream.py
processes started by each test on temporary ports and stopped by PID."""

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import BUILD, MONKEY, SANITIZED, SLOW, free_port, needs_dlopen, vm_rss_kb, wait_port
from gwutil import FIGURES, figures, plugin_status, with_control
from h2util import H2Client, skip_without_h2

UPSTREAM = Path(__file__).parent / "proxy_upstream.py"
PROXY_SO = BUILD / "plugins" / "monkey-proxy.so"

pytestmark = [needs_dlopen,
              pytest.mark.skipif(not PROXY_SO.exists(), reason="built without the proxy plugin")]


class Upstream:
    def __init__(self, name, flags=(), port=None):
        self.name = name
        self.port = port or free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([sys.executable, str(UPSTREAM), str(self.port), name]
                                     + list(flags), start_new_session=True)
        if not wait_port(self.port, proc=self.proc):
            self.stop()
            raise RuntimeError(f"upstream {name} did not start")

    def stats(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        s.sendall(b"GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data or not data.endswith(b"}"):
            got = s.recv(65536)
            if not got:
                break
            data += got
        s.close()
        return json.loads(data.split(b"\r\n\r\n", 1)[1])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def upstreams():
    started = []

    def start(name, flags=(), port=None):
        u = Upstream(name, flags, port)
        started.append(u)
        return u

    yield start
    for u in started:
        u.stop()


def proxy_server(make_server, conf="", site="", control=False, h2c=False):
    srv = make_server()
    srv.plugins = [str(PROXY_SO)]
    srv.set(Workers=1)
    if h2c:
        srv.set(Listen=f"127.0.0.1:{srv.port} h2c")
    (srv.conf / "plugins").mkdir(exist_ok=True)
    (srv.conf / "plugins" / "proxy.conf").write_text("[PROXY]\n" + conf)
    srv.site_extra = "[PROXY]\n" + site
    srv.file("local.txt", "served locally\n")
    return with_control(srv) if control else srv


def h2c_proxy(make_server, upstreams, flags=()):
    """A proxy that passes every path to a new upstream "a" (started with
    flags), and an HTTP/2 (h2c) client of it: (srv, client, upstream).
    Skips the test where the build or Python has no HTTP/2."""
    skip_without_h2()
    a = upstreams("a", flags=list(flags))
    srv = proxy_server(make_server, site=f"    Pass / {a.addr}\n", h2c=True).start()
    return srv, H2Client(srv.port), a


def check_conf(srv):
    """monkey -t of srv's configuration (written first) must pass."""
    srv.write_conf()
    p = subprocess.run([str(MONKEY), "-c", str(srv.conf), "-t"], capture_output=True, text=True,
                       timeout=10 * SLOW)
    assert p.returncode == 0, p.stderr


def echo(srv, path="/echo", method="GET", headers=None, body=b"", conn=None):
    c = conn or srv.conn()
    try:
        r = c.request(method, path, headers=headers, body=body)
    finally:
        if conn is None:
            c.close()
    return r


def read_to_close(sock):
    """What comes on sock up to its close (or its reset: a response cut short)."""
    data = b""
    while True:
        try:
            got = sock.recv(1 << 20)
        except ConnectionResetError:
            return data
        if not got:
            return data
        data += got


def doc_of(r):
    assert r.status == 200, (r.status, r.body)
    return json.loads(r.body)


def fields(doc):
    return {k.lower(): v for k, v in doc["fields"]}


def test_get_post_through(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=f"    Pass /app {u.addr}\n").start()
    d = doc_of(echo(srv, "/app/x?q=1"))
    assert (d["method"], d["target"], d["version"]) == ("GET", "/app/x?q=1", "HTTP/1.1")
    f = fields(d)
    assert f["host"] == "localhost"
    assert f["x-forwarded-for"] == "127.0.0.1"
    assert f["x-forwarded-proto"] == "http"
    assert f["x-forwarded-host"] == "localhost"
    r = echo(srv, "/app/post", "POST", headers={"Content-Type": "text/plain"}, body=b"hello body")
    d = doc_of(r)
    assert d["body"] == "hello body"
    assert fields(d)["content-length"] == "10"
    # not under the prefix: the site's own file
    assert srv.get("/local.txt").body == b"served locally\n"
    assert srv.get("/apple").status == 404  # /app is a whole segment


def test_match_routes_in_order(make_server, upstreams):
    a, b = upstreams("a"), upstreams("b")
    site = f"    Match \\.php$ {a.addr}\n    Pass / {b.addr}\n"
    srv = proxy_server(make_server, site=site).start()
    assert doc_of(echo(srv, "/x/index.php?q"))["name"] == "a"
    assert doc_of(echo(srv, "/x/index.html"))["name"] == "b"


def test_passive_health(make_server, upstreams):
    a = upstreams("a")
    port = free_port()
    conf = (f"    MaxFails 2\n    FailTimeout 1\n    Upstream app\n"
            f"    Server 127.0.0.1:{port}\n    Server {a.addr}\n")
    srv = proxy_server(make_server, conf=conf, site="    Pass / app\n", control=True).start()
    assert set(distribution(srv, 4)) == {"a"}  # the dead one refused twice: out
    s = plugin_status(srv, "proxy")
    assert s["server0_up"] == 0
    figures(s, server0_failures=2)
    b = upstreams("b", port=port)
    time.sleep(1.2)  # FailTimeout over: tried again
    assert set(distribution(srv, 4)) == {"a", "b"}
    assert plugin_status(srv, "proxy")["server0_up"] == 1
    b.stop()


def test_chunked_both_ways(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=f"    Pass / {u.addr}\n").start()
    r = srv.get("/chunked?n=5")
    assert r.status == 200
    assert r.body == b"".join(b"piece %d;" % i for i in range(5))
    # a chunked request body streams to the upstream chunked again, by the proxy's framing
    # (its own chunk sizes, no extension, no trailer)
    body = b"5;ext=x\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n"
    c = srv.conn()
    c.send(b"POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n" + body)
    d = doc_of(c.read_response())
    c.close()
    f = fields(d)
    assert d["body"] == "hello world"
    assert f["transfer-encoding"] == "chunked" and "content-length" not in f
    assert "x-t" not in f
    # a large one, with back-pressure through the window; its answer streams back with the
    # upstream's Content-Length
    big = bytes(range(256)) * 4096
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=20 * SLOW)
    s.sendall(b"POST /echo HTTP/1.1\r\nHost: h\r\nConnection: close\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
    for k in range(0, len(big), 100000):
        piece = big[k:k + 100000]
        s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
    s.sendall(b"0\r\n\r\n")
    head, body = read_to_close(s).split(b"\r\n\r\n", 1)
    s.close()
    assert b"Content-Length: %d\r\n" % len(body) in head and b"Transfer-Encoding" not in head
    assert json.loads(body)["body"].encode("latin-1") == big


def test_head_204_304_and_interim(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=f"    Pass / {u.addr}\n").start()
    c = srv.conn()
    r = c.request("HEAD", "/echo")
    assert r.status == 200 and r.body == b""
    r = c.request("GET", "/status/204")
    assert r.status == 204 and r.body == b""
    r = c.request("GET", "/status/304")
    assert r.status == 304 and r.body == b""
    r = c.request("GET", "/status/404")
    assert r.status == 404 and r.body == b"ok"
    r = c.request("GET", "/continue")  # the 100 is not passed on, the 103 is
    assert r.status == 103 and r.headers["link"] == ["</a.css>"]
    r = c.read_response()
    assert r.status == 200 and r.body == b"done"
    r = c.request("GET", "/bad")  # Content-Length with Transfer-Encoding
    assert r.status == 502
    c.close()


def test_hop_by_hop_removed(make_server, upstreams):
    u = upstreams("a")
    srv = proxy_server(make_server, site=f"    Pass / {u.addr}\n").start()
    d = doc_of(echo(srv, headers={"Connection": "X-Mine", "X-Mine": "1", "Keep-Alive": "300",
                                  "TE": "deflate, trailers", "Upgrade": "websocket",
                                  "Proxy-Authorization": "Basic eA==", "X-Other": "2",
                                  "X-Forwarded-For": "10.0.0.1", "Cookie": "a=1"}))
    f = fields(d)
    for name in ("connection", "x-mine", "keep-alive", "upgrade", "proxy-authorization",
                 "transfer-encoding"):
        assert name not in f, name
    assert f["te"] == "trailers"  # the proxy's own: the client takes trailers
    assert f["x-other"] == "2"
    assert f["cookie"] == "a=1"
    assert f["x-forwarded-for"] == "10.0.0.1, 127.0.0.1"
    r = srv.get("/hop")
    assert r.status == 200 and r.body == b"ok"
    for name in ("x-secret", "keep-alive", "proxy-authenticate", "upgrade"):
        assert r.header(name) is None, name
    assert r.header("x-kept") == "k"


def test_bytes_after_an_answer_never_answer_the_next(make_server, upstreams):
    a = upstreams("a")
    srv = proxy_server(make_server, site=f"    Pass / {a.addr}\n").start()
    c = srv.conn()
    for _ in range(3):
        r = c.request("GET", "/extra")
        assert (r.status, r.body) == (200, b"ok")
        time.sleep(0.1)
        assert doc_of(c.request("GET", "/echo"))["name"] == "a"
    c.close()


def distribution(srv, n, path="/echo", headers=None):
    c = srv.conn()
    names = [doc_of(c.request("GET", path, headers=headers))["name"] for _ in range(n)]
    c.close()
    return names


def test_weighted_round_robin(make_server, upstreams):
    a, b = upstreams("a"), upstreams("b")
    conf = f"    Upstream app\n    Server {a.addr} weight=3\n    Server {b.addr}\n"
    srv = proxy_server(make_server, conf=conf, site="    Pass / app\n").start()
    names = distribution(srv, 40)
    assert names.count("a") == 30 and names.count("b") == 10


def test_backup_and_all_down(make_server, upstreams):
    a, bk = upstreams("a"), upstreams("backup")
    conf = (f"    MaxFails 1\n    FailTimeout 30\n    Upstream app\n    Server {a.addr}\n"
            f"    Server {bk.addr} backup\n")
    srv = proxy_server(make_server, conf=conf, site="    Pass / app\n").start()
    assert set(distribution(srv, 4)) == {"a"}
    a.stop()
    assert set(distribution(srv, 4)) == {"backup"}  # a refused: retried on the backup
    bk.stop()
    t = time.monotonic()
    for _ in range(3):
        assert echo(srv).status == 502
    assert time.monotonic() - t < 1.0 * SLOW  # no server up: 502 at once
    assert "no server of the group is up" in srv.stderr_text()


def test_refused_connect_retried(make_server, upstreams):
    a = upstreams("a")
    dead = f"127.0.0.1:{free_port()}"
    conf = f"    Upstream app\n    Server {dead}\n    Server {a.addr}\n"
    srv = proxy_server(make_server, conf=conf, site="    Pass / app\n").start()
    assert set(distribution(srv, 6)) == {"a"}
    assert dead in srv.stderr_text()


def test_least_connections(make_server, upstreams):
    a, b = upstreams("a"), upstreams("b")
    conf = (f"    Upstream app\n    Balance leastconn\n    Server {a.addr}\n"
            f"    Server {b.addr}\n")
    srv = proxy_server(make_server, conf=conf, site="    Pass / app\n").start()
    # one slow download holds a server: the next requests go to the other
    slow = srv.conn()
    slow.send(b"GET /big?n=50000000 HTTP/1.1\r\nHost: h\r\n\r\n")
    time.sleep(0.3 * SLOW)
    busy = "a" if a.stats()["requests"] >= 1 else "b"
    names = distribution(srv, 6)
    assert set(names) == {"b" if busy == "a" else "a"}
    slow.close()


def test_hash_sticky_when_a_server_goes(make_server, upstreams):
    ups = [upstreams(n) for n in "abcd"]

    def conf(servers):
        return ("    Upstream app\n    Balance hash header X-User\n"
                + "".join(f"    Server {u.addr}\n" for u in servers))

    srv = proxy_server(make_server, conf=conf(ups), site="    Pass / app\n").start()
    users = [f"user{i}" for i in range(100)]
    c = srv.conn()
    before = {u: doc_of(c.request("GET", "/echo", headers={"X-User": u}))["name"] for u in users}
    again = {u: doc_of(c.request("GET", "/echo", headers={"X-User": u}))["name"] for u in users}
    c.close()
    assert before == again
    assert len(set(before.values())) == 4
    (srv.conf / "plugins" / "proxy.conf").write_text("[PROXY]\n" + conf(ups[:2] + ups[3:]))
    srv.reload()
    c = srv.conn()
    after = {u: doc_of(c.request("GET", "/echo", headers={"X-User": u}))["name"] for u in users}
    c.close()
    for u in users:
        if before[u] != "c":
            assert after[u] == before[u], u  # only c's share moved
        else:
            assert after[u] != "c"


def test_blackholed_server_times_out(make_server, upstreams):
    hole = upstreams("hole", flags=["--blackhole"])
    srv = proxy_server(make_server, conf="    Timeout 1\n",
                       site=f"    Pass / {hole.addr}\n").start()
    t = time.monotonic()
    r = echo(srv)
    took = time.monotonic() - t
    assert r.status == 504
    assert 0.9 < took < 3.0 * SLOW
    assert hole.addr in srv.stderr_text()


def test_upload_to_a_server_that_never_reads(make_server, upstreams):
    hole = upstreams("hole", flags=["--blackhole"])
    srv = proxy_server(make_server, conf="    Timeout 1\n", site=f"    Pass / {hole.addr}\n")
    srv.set(MaxRequestBody="200M").start()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10 * SLOW)
    n = 50 * 1024 * 1024
    s.sendall(b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n" % n)
    s.setblocking(False)
    sent, t = 0, time.monotonic()
    piece = b"x" * 65536
    answer = b""
    while time.monotonic() - t < 5 * SLOW and b"\r\n\r\n" not in answer:
        try:
            sent += s.send(piece)
        except BlockingIOError:
            time.sleep(0.01)
        try:
            answer += s.recv(65536)
        except BlockingIOError:
            pass
    s.close()
    assert answer.startswith(b"HTTP/1.1 504"), answer[:100]
    assert sent < n  # the client was held back, not buffered


def test_keepalive_reuse(make_server, upstreams):
    a = upstreams("a")
    srv = proxy_server(make_server, site=f"    Pass / {a.addr}\n", control=True).start()
    before = a.stats()["connections"]  # wait_port's and this one
    conns = set()
    for _ in range(5):
        c = srv.conn()
        for _ in range(4):
            conns.add(doc_of(c.request("GET", "/echo"))["conn"])
        c.close()
    st = a.stats()
    assert st["requests"] == 22  # 20, this one and the first
    assert st["connections"] == before + 2  # the proxy's one, and this
    assert len(conns) == 1
    s = plugin_status(srv, "proxy")
    assert (s["server0_connects"], s["server0_reuses"]) == (1, 19)


def test_keepalive_bounds(make_server, upstreams):
    a = upstreams("a")
    srv = proxy_server(make_server, conf="    KeepAliveTimeout 1\n",
                       site=f"    Pass / {a.addr}\n").start()
    first = doc_of(echo(srv))["conn"]
    assert doc_of(echo(srv))["conn"] == first
    time.sleep(1.6)  # idle past KeepAliveTimeout: closed, a new one
    assert doc_of(echo(srv))["conn"] != first
    b = upstreams("b")
    srv2 = proxy_server(make_server, conf="    KeepAlive 0\n", site=f"    Pass / {b.addr}\n")
    srv2.start()
    conns = {doc_of(echo(srv2))["conn"] for _ in range(3)}
    assert len(conns) == 3  # none kept


@pytest.mark.parametrize("dummy", [0], ids=["h2c"])
def test_http2_client_many_streams(make_server, upstreams, dummy):
    srv, h, a = h2c_proxy(make_server, upstreams)
    sids = [h.request(f"/big?n={1000 + 997 * i}") for i in range(100)]
    sids.append(h.request("/echo", headers=[("cookie", "a=1"), ("cookie", "b=2")]))
    h.wait(sids)
    chunk = bytes(range(256)) * 256
    for i, sid in enumerate(sids[:-1]):
        st = h.streams[sid]
        assert st["headers"][":status"] == "200"
        n = 1000 + 997 * i
        assert st["data"] == (chunk * (n // len(chunk) + 1))[:n], i
    d = json.loads(h.streams[sids[-1]]["data"])
    f = fields(d)
    assert f["cookie"] == "a=1; b=2"
    assert f["host"] == "localhost"
    assert d["version"] == "HTTP/1.1"
    # a body without content-length: chunked upstream
    sid = h.request("/echo", method="POST", body=b"x" * 100000)
    h.wait([sid])
    d = json.loads(h.streams[sid]["data"])
    assert d["body"] == "x" * 100000
    assert fields(d)["transfer-encoding"] == "chunked" and "content-length" not in fields(d)
    h.close()


def test_large_download_bounded_memory(make_server, upstreams):
    a = upstreams("a")
    srv = proxy_server(make_server, site=f"    Pass / {a.addr}\n").start()
    rss0 = vm_rss_kb(srv.proc.pid)
    n = 100 * 1024 * 1024
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10 * SLOW)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    # HTTP/1.0: the body ends with the connection, no chunked coding to count
    s.sendall(b"GET /big?n=%d HTTP/1.0\r\nHost: h\r\n\r\n" % n)
    got = 0
    peak = rss0
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(65536)
    head, rest = head.split(b"\r\n\r\n", 1)
    assert b" 200 " in head.split(b"\r\n")[0], head
    got = len(rest)
    slow_until = time.monotonic() + 1.0
    while got < n:
        data = s.recv(1 << 20)
        assert data, got
        got += len(data)
        if time.monotonic() < slow_until:
            time.sleep(0.05)  # a slow client: the upstream waits, memory does not grow
        if got % (8 << 20) < len(data):
            peak = max(peak, vm_rss_kb(srv.proc.pid))
    s.close()
    assert got == n
    print(f"rss before {rss0} KiB, peak {peak} KiB")
    if not SANITIZED:  # ASan's quarantine keeps freed memory: only the plain build's RSS tells
        assert peak - rss0 < 16 * 1024, (rss0, peak)


SMUGGLE = {
    "cl_te": b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\n"
             b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n",
    "te_cl": b"POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
             b"Content-Length: 4\r\n\r\n2c\r\nGET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n\r\n0\r\n\r\n",
    "te_obs": b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\nX: a\r\n"
              b" Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n",
    "te_space": b"POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding : chunked\r\n"
                b"Content-Length: 6\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n",
}


@pytest.mark.parametrize("kind", sorted(SMUGGLE))
def test_smuggling_never_two_requests(make_server, upstreams, tmp_path, kind):
    raw = tmp_path / "raw.bin"
    a = upstreams("a", flags=["--raw", str(raw)])
    srv = proxy_server(make_server, site=f"    Pass / {a.addr}\n").start()
    srv.raw(SMUGGLE[kind], timeout=3)
    time.sleep(0.2)
    seen = raw.read_bytes() if raw.exists() else b""
    assert b"/smuggled" not in seen.split(b"\r\n\r\n", 1)[0]  # never a request line
    assert seen.count(b"HTTP/1.1\r\n") <= 1, seen


def test_h2_field_with_line_break_not_forwarded(make_server, upstreams, tmp_path):
    raw = tmp_path / "raw.bin"
    srv, h, a = h2c_proxy(make_server, upstreams, flags=["--raw", str(raw)])
    sid = h.request("/echo", headers=[("x-evil", "a\r\nGET /smuggled HTTP/1.1")])
    h.wait([sid], allow_close=True)
    st = h.streams[sid]
    assert st["reset"] is not None or st["headers"].get(":status") in ("400", None)
    h.close()
    time.sleep(0.2)
    assert b"/smuggled" not in (raw.read_bytes() if raw.exists() else b"")


def test_monkey_t_errors(make_server, upstreams):
    srv = proxy_server(make_server, site="    Pass / nosuch\n")
    err = srv.run_expect_failure(["-t"])
    assert "unknown upstream group 'nosuch'" in err and "sites/default:" in err
    srv = proxy_server(make_server, site="    Pass / 127.0.0.1:99999\n")
    err = srv.run_expect_failure(["-t"])
    assert "bad port" in err and "sites/default:" in err
    srv = proxy_server(make_server, conf="    Server 127.0.0.1:80\n", site="")
    err = srv.run_expect_failure(["-t"])
    assert "needs an Upstream line" in err and "proxy.conf:2" in err
    srv = proxy_server(make_server, conf="    Upstream a\n    Server 127.0.0.1:80 wieght=2\n")
    err = srv.run_expect_failure(["-t"])
    assert "unknown server parameter" in err and "proxy.conf:3" in err
    srv = proxy_server(make_server, conf="    Upstream a\n    Balance random\n")
    err = srv.run_expect_failure(["-t"])
    assert "proxy.conf:3" in err
    srv = proxy_server(make_server, conf="    HealthCheck /ping\n")
    err = srv.run_expect_failure(["-t"])
    assert "unknown key 'HealthCheck'" in err


# Numbers of the Server lines and addresses (px_number in px_conf.c): each
# bound refused one past it, with the file and line, and accepted at it.
OUT_OF_RANGE = [
    ("    Server 127.0.0.1:80 weight=0\n", "a weight is 1 to 100"),
    ("    Server 127.0.0.1:80 weight=101\n", "a weight is 1 to 100"),
    ("    Server 127.0.0.1:80 weight=-1\n", "a weight is 1 to 100"),
    ("    Server 127.0.0.1:80 weight=2x\n", "a weight is 1 to 100"),
    ("    Server 127.0.0.1:80 weight=\n", "a weight is 1 to 100"),
    ("    Server 127.0.0.1:80 weight=99999999999999999999999\n", "a weight is 1 to 100"),
    ("    Server 127.0.0.1:80 max=0\n", "a max is 1 to 65535"),
    ("    Server 127.0.0.1:80 max=65536\n", "a max is 1 to 65535"),
    ("    Server 127.0.0.1:80 max=+5\n", "a max is 1 to 65535"),
    ("    Server 127.0.0.1:0\n", "bad port"),
    ("    Server 127.0.0.1:65536\n", "bad port"),
    ("    Server [::1]:-80\n", "bad port"),
    ("    Server 127.0.0.1: 80\n", "bad port"),
]


@pytest.mark.parametrize("line,why", OUT_OF_RANGE, ids=[c[0].split(None, 2)[-1].strip()
                                                        for c in OUT_OF_RANGE])
def test_monkey_t_numbers_out_of_range(make_server, line, why):
    srv = proxy_server(make_server, conf="    Upstream a\n" + line, site="")
    err = srv.run_expect_failure(["-t"])
    assert why in err and "proxy.conf:3" in err, err


def test_monkey_t_numbers_at_their_bounds(make_server):
    conf = ("    Upstream a\n    Server 127.0.0.1:65535 weight=100 max=65535\n"
            "    Server 127.0.0.1:1 weight=1 max=1\n")
    srv = proxy_server(make_server, conf=conf, site="    Pass /x a\n")
    check_conf(srv)


def test_unix_and_ipv6_addresses_accepted(make_server, upstreams):
    conf = ("    Upstream app\n    Server unix:/run/app.sock\n    Server [::1]:3001 backup\n"
            "    Server 127.0.0.1:3000 weight=2\n")
    srv = proxy_server(make_server, conf=conf, site="    Pass /x app\n")
    check_conf(srv)


def test_time_to_first_byte_per_server(make_server, upstreams):
    a, b = upstreams("a"), upstreams("b")
    srv = proxy_server(make_server, site=f"    Match ^/sleep {a.addr}\n    Match ^/hints {b.addr}\n",
                       control=True).start()
    c = srv.conn()
    for _ in range(2):
        r = c.request("GET", "/sleep?s=0.4")
        assert r.status == 200
    r = c.request("GET", "/hints?s=0.6")  # the 103's first byte is the answer's
    assert r.status == 103
    assert c.read_response().status == 200
    c.close()
    s = plugin_status(srv, "proxy")
    if not FIGURES:
        figures(s)  # none without the metrics
        return
    by_count = {s[f"server{i}_ttfb_count"]: i for i in range(2)}
    assert sorted(by_count) == [1, 2], s
    slow, hinted = by_count[2], by_count[1]
    assert 800 <= s[f"server{slow}_ttfb_ms"] < 800 + 1000 * SLOW, s
    assert s[f"server{hinted}_ttfb_ms"] < 400, s
