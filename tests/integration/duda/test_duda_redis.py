"""Duda and Redis: the redis package (duda/packages/redis) and the Redis
session store ([DUDA] SessionStore redis://...), against Debian's
redis-server started here on a free port and stopped by PID."""

import contextlib
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import BUILD, EMULATED, ROOT, SANITIZED, SLOW, STATIC, Conn, free_port, wait_port
from test_duda import build, duda_server, example, web_service

PACKAGES = BUILD / "duda-packages"
REDIS_SERVER = shutil.which("redis-server") or (
    "/usr/bin/redis-server" if shutil.which("/usr/bin/redis-server") else None)

pytestmark = [
    pytest.mark.skipif(STATIC, reason="static binary: no shared objects"),
    pytest.mark.skipif(EMULATED, reason="cross-test: packages are built for the host"),
    pytest.mark.skipif(not (PACKAGES / "redis.dpkg").exists(),
                       reason="built without hiredis (libhiredis-dev): no redis package"),
    pytest.mark.skipif(REDIS_SERVER is None,
                       reason="no redis-server (tools/deps.sh test installs it)"),
]


class Redis:
    """A redis-server of our own on `port`; stop() kills it by PID. `durable`:
    every write in its append-only file at once, so that it comes back whole
    after a kill."""

    def __init__(self, tmp_path, port=None, durable=False):
        self.port = port or free_port()
        self.dir = tmp_path
        self.proc = None
        self.durable = durable

    def start(self):
        aof = ["--appendonly", "yes", "--appendfsync", "always"] if self.durable else \
            ["--appendonly", "no"]
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             *aof, "--dir", str(self.dir), "--logfile", ""],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert wait_port(self.port, proc=self.proc), "redis-server did not start"
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def call(self, *args):
        """One command over RESP; the reply as Python values."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            f = s.makefile("rb")
            out = b"*%d\r\n" % len(args)
            for a in args:
                a = a if isinstance(a, bytes) else str(a).encode()
                out += b"$%d\r\n%s\r\n" % (len(a), a)
            s.sendall(out)
            return resp_read(f)

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"


def resp_read(f):
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind in (b"+", b"-"):
        return rest.decode()
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data
    if kind == b"*":
        return [resp_read(f) for _ in range(int(rest))]
    raise AssertionError(f"bad RESP line {line!r}")


@pytest.fixture
def redis(tmp_path):
    r = Redis(tmp_path).start()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    out = tmp_path_factory.mktemp("services")
    build(ROOT / "tests" / "duda" / "redisuser", out)
    build(ROOT / "examples" / "cookies_sessions", out)
    build(ROOT / "examples" / "redis_counter", out)
    return out


def redis_server(make_server, services, redis, tmp_path, workers=2, name=None):
    confdir = tmp_path / (name or "svcconf")
    confdir.mkdir(exist_ok=True)
    (confdir / "redis.conf").write_text(f"[REDIS]\n    Url {redis.url}\n")
    srv = duda_server(make_server, services, [web_service("redisuser", ConfDir=confdir)],
                      workers=workers)
    srv.set(GracefulTimeout="1s")  # event streams whose clients left end at the stop
    srv.set(Balancing="fair")  # open streams spread evenly: clients on every worker
    (srv.conf / "plugins" / "duda.conf").write_text(
        f"[DUDA]\n    ServicesRoot {services}\n    PackagesRoot {PACKAGES}\n")
    return srv


def test_commands_and_pipelining(make_server, services, redis, tmp_path):
    srv = redis_server(make_server, services, redis, tmp_path).start()
    r = srv.get("/redisuser/set/greeting/hello")
    assert (r.status, r.body) == (200, b"OK\n")
    assert redis.call("GET", "greeting") == b"hello"
    r = srv.get("/redisuser/get/greeting")
    assert (r.status, r.body) == (200, b"hello\n")
    assert srv.get("/redisuser/get/nosuchkey").status == 404
    for n in (1, 2, 3):
        r = srv.get("/redisuser/incr/hits")
        assert (r.status, r.body) == (200, b"%d\n" % n)
    # Four commands sent together, four answers in order on one connection.
    r = srv.get("/redisuser/pipeline/list")
    assert (r.status, r.body) == (200, b"0 1 2 a,b\n")
    r = srv.get("/redisuser/bad")
    assert r.status == 502 and b"unknown command" in r.body.lower()
    # One connection per worker (2 workers) for commands, not one per request.
    for _ in range(20):
        assert srv.get("/redisuser/incr/many").status == 200
    clients = redis.call("CLIENT", "LIST").decode().strip().splitlines()
    commands = [c for c in clients if " sub=0 " in c and "cmd=client|list" not in c]
    # At most one per worker (two), however many requests (30 here); the others are pub/sub.
    assert 1 <= len(commands) <= 2, clients
    assert srv.stop() == 0


def sse_client(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW)
    s.sendall(b"GET /redisuser/events HTTP/1.1\r\nHost: localhost\r\n\r\n")
    return s


def sse_read_until(s, want, buf, timeout):
    """Read from s into buf until the predicate want(buf) holds."""
    deadline = time.time() + timeout
    while not want(buf) and time.time() < deadline:
        s.settimeout(max(0.05, deadline - time.time()))
        try:
            data = s.recv(65536)
        except socket.timeout:
            break
        if not data:
            break
        buf.extend(data)
    return want(buf)


def events(buf):
    return re.findall(rb"data: ([^\n]*)\n\n", bytes(buf))


def test_pubsub_fan_out_to_clients_on_every_worker(make_server, services, redis, tmp_path):
    srv = redis_server(make_server, services, redis, tmp_path).start()
    clients, bufs = [], []
    for _ in range(6):  # one after the other: the least loaded worker takes the next
        clients.append(sse_client(srv.port))
        bufs.append(bytearray())
        assert sse_read_until(clients[-1], lambda b: b": subscribed" in b, bufs[-1], 5 * SLOW)
    # The workers subscribe as they serve their first request: wait until they all listen.
    deadline = time.time() + 5 * SLOW
    while time.time() < deadline:
        if redis.call("PUBSUB", "NUMSUB", "news")[1] == 2:
            break
        time.sleep(0.02)
    assert redis.call("PUBSUB", "NUMSUB", "news")[1] == 2
    # Published from outside Monkey and through the service: every client gets each once, in order.
    sent = [b"m%d" % i for i in range(20)]
    for i, m in enumerate(sent):
        if i % 2:
            assert redis.call("PUBLISH", "news", m) == 2
        else:
            assert srv.get("/redisuser/publish/news/" + m.decode()).body == b"2\n"
    for s, b in zip(clients, bufs):
        assert sse_read_until(s, lambda b: len(events(b)) >= len(sent), b, 5 * SLOW), bytes(b)
        assert events(b) == sent
        s.close()
    assert srv.stop() == 0


def test_reconnect_after_a_redis_restart(make_server, services, redis, tmp_path):
    srv = redis_server(make_server, services, redis, tmp_path, workers=1).start()
    assert srv.get("/redisuser/set/k/before").status == 200
    sse = sse_client(srv.port)
    buf = bytearray()
    assert sse_read_until(sse, lambda b: b": subscribed" in b, buf, 5 * SLOW)
    redis.stop()  # killed by PID: the connections drop
    deadline = time.time() + 5 * SLOW
    while time.time() < deadline and srv.get("/redisuser/up").body != b"0\n":
        time.sleep(0.05)
    assert srv.get("/redisuser/up").body == b"0\n"
    r = srv.get("/redisuser/get/k")
    assert r.status == 503, r
    redis.start()  # the same port again; the fixture stops it by PID
    deadline = time.time() + 10 * SLOW
    while time.time() < deadline and srv.get("/redisuser/up").body != b"1\n":
        time.sleep(0.05)
    assert srv.get("/redisuser/up").body == b"1\n"
    r = srv.get("/redisuser/set/k/after")
    assert (r.status, r.body) == (200, b"OK\n")
    assert redis.call("GET", "k") == b"after"
    # The worker subscribed again: the client that stayed connected gets new messages.
    deadline = time.time() + 5 * SLOW
    while time.time() < deadline and redis.call("PUBSUB", "NUMSUB", "news")[1] != 1:
        time.sleep(0.02)
    assert redis.call("PUBLISH", "news", "again") == 1
    assert sse_read_until(sse, lambda b: b"data: again" in b, buf, 5 * SLOW), bytes(buf)
    sse.close()
    log = srv.stderr_text()
    assert re.search(r"redis 127\.0\.0\.1:\d+ \(redis package\): .*attempt 1, next in 100 ms",
                     log), log
    assert "connected after" in log
    assert srv.stop() == 0


def sessions_server(make_server, services, store):
    srv = duda_server(make_server, services, [example("cookies_sessions")])
    text = f"[DUDA]\n    ServicesRoot {services}\n"
    if store:
        text += f"    SessionStore {store}\n"
    (srv.conf / "plugins" / "duda.conf").write_text(text)
    return srv


def sid_of(r):
    m = re.match(r"sid=([0-9a-f]{32});", r.header("Set-Cookie") or "")
    assert m, r
    return m.group(1)


def test_two_servers_share_sessions_through_redis(make_server, services, redis):
    a = sessions_server(make_server, services, redis.url + "/3").start()
    b = sessions_server(make_server, services, redis.url + "/3").start()
    r = a.request("POST", "/cookies_sessions/login?user=alice&ttl=60")
    assert r.status == 200, r
    sid = sid_of(r)
    # Stored in db 3 with its lifetime before the answer left the first server.
    key = f"duda:session:cookies_sessions/sid:{sid}"
    assert redis.call("SELECT", 3) == "OK"
    assert redis.call("EXISTS", key) == 0  # each call is a new connection, on db 0
    with socket.create_connection(("127.0.0.1", redis.port), timeout=5) as s:
        f = s.makefile("rb")
        s.sendall(b"*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n*2\r\n$3\r\nTTL\r\n$%d\r\n%s\r\n"
                  % (len(key), key.encode()))
        assert resp_read(f) == "OK"
        assert 0 < resp_read(f) <= 60
    cookie = {"Cookie": f"theme=dark; sid={sid}"}
    for srv in (b, a, b):
        r = srv.get("/cookies_sessions/me", headers=cookie)
        assert (r.status, r.body) == (200, b"alice\n")
    # the session cookie in a Cookie field of its own, after another one
    # (HTTP/2's crumbs, repeated lines): looked up all the same
    c = Conn(b.port)
    c.send(f"GET /cookies_sessions/me HTTP/1.1\r\nHost: x\r\nCookie: theme=dark\r\n"
           f"Cookie: sid={sid}\r\n\r\n".encode())
    r = c.read_response()
    assert (r.status, r.body) == (200, b"alice\n")
    c.close()
    assert b.get("/cookies_sessions/me", headers={"Cookie": "sid=" + "0" * 32}).status == 401
    # Logged out on one server: gone on both.
    assert b.request("POST", "/cookies_sessions/logout", headers=cookie).status == 200
    assert a.get("/cookies_sessions/me", headers=cookie).status == 401
    assert b.request("POST", "/cookies_sessions/logout", headers=cookie).status == 404
    assert a.stop() == 0 and b.stop() == 0


def test_memory_store_is_per_process(make_server, services, redis):
    a = sessions_server(make_server, services, None).start()
    b = sessions_server(make_server, services, "memory").start()
    sid = sid_of(a.request("POST", "/cookies_sessions/login?user=bob"))
    cookie = {"Cookie": f"sid={sid}"}
    assert a.get("/cookies_sessions/me", headers=cookie).body == b"bob\n"
    assert b.get("/cookies_sessions/me", headers=cookie).status == 401
    assert redis.call("DBSIZE") == 0
    assert a.stop() == 0 and b.stop() == 0


def test_session_store_unreachable(make_server, services, tmp_path):
    port = free_port()  # nothing listens there
    srv = sessions_server(make_server, services, f"redis://127.0.0.1:{port}").start()
    r = srv.request("POST", "/cookies_sessions/login?user=carol")
    assert r.status == 503, r
    # a session cookie that cannot be looked up is no logout: 503, not 401
    r = srv.get("/cookies_sessions/me", headers={"Cookie": "sid=" + "a" * 32})
    assert r.status == 503, r
    assert srv.get("/cookies_sessions/me").status == 401  # no session cookie: not logged in
    assert srv.stop() == 0
    assert f"redis 127.0.0.1:{port} (session store): " in srv.stderr_text()


def test_session_store_outage_is_503_not_a_logout(make_server, services, tmp_path):
    # Redis stopped by PID while a client is logged in: its session cannot be
    # looked up, which is 503 ("try again"), never 401 ("logged out"), and
    # the store's reconnects are logged at the redis package's level (info).
    # Redis back (its append-only file kept the session): the same cookie
    # works again, on every worker.
    redis = Redis(tmp_path, durable=True).start()
    try:
        srv = sessions_server(make_server, services, redis.url).start()
        r = srv.request("POST", "/cookies_sessions/login?user=dora")
        assert r.status == 200, r
        cookie = {"Cookie": f"theme=dark; sid={sid_of(r)}"}
        assert srv.get("/cookies_sessions/me", headers=cookie).body == b"dora\n"
        redis.stop()
        for _ in range(6):  # both workers: the first lookups find the link dropping, then down
            r = srv.get("/cookies_sessions/me", headers=cookie)
            assert r.status == 503, r
            assert r.body == b"the session store is unavailable\n"
        assert srv.request("POST", "/cookies_sessions/logout", headers=cookie).status == 503
        assert srv.get("/cookies_sessions/me").status == 401
        log = srv.stderr_text()
        port = redis.port
        assert re.search(rf"\[info\] duda: redis 127\.0\.0\.1:{port} \(session store\): .*"
                         r"attempt 1, next in 100 ms", log), log
        assert not re.search(r"\[error\] duda: redis .*\(session store\)", log), log
        redis.start()  # the same port
        deadline = time.time() + 10 * SLOW
        while time.time() < deadline:
            if all(srv.get("/cookies_sessions/me", headers=cookie).status == 200 for _ in range(4)):
                break
            time.sleep(0.1)
        for _ in range(4):
            r = srv.get("/cookies_sessions/me", headers=cookie)
            assert (r.status, r.body) == (200, b"dora\n")
        assert re.search(rf"\[info\] duda: redis 127\.0\.0\.1:{port} \(session store\): "
                         r"connected after \d+ failed attempts", srv.stderr_text())
        assert srv.stop() == 0
    finally:
        redis.stop()


@pytest.mark.parametrize("value, reason", [
    ("redis:/nohost", "is not a redis://host[:port][/db] address"),
    ("redis://host:0", "the port is not a number from 1 to 65535"),
    ("redis://host:6379/x", "the database is not a number from 0"),
    ("disk", "is not a redis://host[:port][/db] address"),
])
def test_session_store_bad_value(make_server, services, value, reason):
    srv = sessions_server(make_server, services, value)
    err = srv.run_expect_failure(["-t"])
    assert re.search(r"plugins/duda\.conf:3: .*SessionStore", err), err
    assert reason in err, err


def test_redis_counter_example(make_server, services, redis, tmp_path):
    ws_client = pytest.importorskip("websockets.sync.client",
                                    reason="no Python websockets (tools/deps.sh test installs it)")
    if not (PACKAGES / "websocket.dpkg").exists():
        pytest.skip("built without the websocket package (libssl-dev, zlib1g-dev)")
    confdir = tmp_path / "rcconf"
    confdir.mkdir()
    (confdir / "redis.conf").write_text(f"[REDIS]\n    Url {redis.url}\n    Channel rc\n")
    html = ROOT / "examples" / "redis_counter" / "html"
    srv = duda_server(make_server, services, [
        web_service("redis_counter", DocumentRoot=html, ConfDir=confdir)])
    (srv.conf / "plugins" / "duda.conf").write_text(
        f"[DUDA]\n    ServicesRoot {services}\n    PackagesRoot {PACKAGES}\n")
    srv.set(GracefulTimeout="1s", Balancing="fair").start()
    r = srv.get("/redis_counter/")
    assert r.status == 200 and b'"/redis_counter/ws"' in r.body
    for n in (1, 2, 3):
        r = srv.get("/redis_counter/hit")
        assert (r.status, r.body) == (200, b'{"hits":%d}\n' % n)
    assert redis.call("GET", "redis_counter:hits") == b"3"
    # WebSocket clients and one event-stream client, one after the other: on both workers.
    stack = contextlib.ExitStack()
    sockets = [stack.enter_context(ws_client.connect(f"ws://127.0.0.1:{srv.port}/redis_counter/ws",
                                                     open_timeout=5 * SLOW)) for _ in range(4)]
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW)
    s.sendall(b"GET /redis_counter/events HTTP/1.1\r\nHost: localhost\r\n\r\n")
    buf = bytearray()
    assert sse_read_until(s, lambda b: b": listening to rc" in b, buf, 5 * SLOW)
    deadline = time.time() + 5 * SLOW
    while time.time() < deadline and redis.call("PUBSUB", "NUMSUB", "rc")[1] != 2:
        time.sleep(0.02)
    assert redis.call("PUBSUB", "NUMSUB", "rc")[1] == 2
    # From the form's route, from Redis itself, and from one of the sockets: every client,
    # in order, once.
    r = srv.request("POST", "/redis_counter/publish", body=b"hello everyone")
    assert (r.status, r.body) == (200, b'{"receivers":2}\n')
    assert redis.call("PUBLISH", "rc", "from redis-cli") == 2
    want = ["hello everyone", "from redis-cli"]
    for ws in sockets:
        assert [ws.recv(timeout=5 * SLOW) for _ in want] == want
    sockets[0].send("from a socket")
    want.append("from a socket")
    for ws in sockets:
        assert ws.recv(timeout=5 * SLOW) == "from a socket"
    stack.close()
    assert sse_read_until(s, lambda b: len(events(b)) == 3, buf, 5 * SLOW), bytes(buf)
    assert events(buf) == [m.encode() for m in want]
    s.close()
    # Closed sockets left their worker's list: a message reaches nobody and breaks nothing.
    assert redis.call("PUBLISH", "rc", "after") == 2
    assert srv.request("POST", "/redis_counter/publish", body=b"two\nlines").status == 400
    assert srv.get("/redis_counter/hit").body == b'{"hits":4}\n'
    assert srv.stop() == 0


@pytest.mark.skipif(SANITIZED, reason="a reload keeps the old copy of the service and its packages "
                    "mapped while its connections' watches live (duda/packages/redis/README.md): "
                    "LeakSanitizer reports what the old copy held")
def test_reload_keeps_serving(make_server, services, redis, tmp_path):
    srv = redis_server(make_server, services, redis, tmp_path).start()
    assert srv.get("/redisuser/incr/r").body == b"1\n"
    srv.signal(signal.SIGHUP)  # the service is loaded again: new connections, the old let go
    deadline = time.time() + 10 * SLOW
    while "reload" not in srv.stderr_text().lower() and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    for n in (2, 3, 4):
        assert srv.get("/redisuser/incr/r").body == b"%d\n" % n
    assert srv.stop() == 0
