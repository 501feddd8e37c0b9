"""WebSocket (and any other Upgrade) through the reverse proxy plugin: the
client's Upgrade passed upstream, the upstream's 101 answered to the client
and both connections joined as a tunnel (plugins/proxy/README.md, "Upgrades
and WebSocket"). The upstream is a real WebSocket server (ws_upstream.py,
Python's websockets), or a raw one that answers 101 to anything, started
on a temporary port by each test and stopped by its PID."""

import base64
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import BUILD, SLOW, free_port, needs_dlopen, vm_rss_kb, wait_port
from gwutil import plugin_status, with_control
from h2util import H2Client, H2WebSocket

pytest.importorskip("websockets.sync.client", reason="Python's websockets 13 or later (tools/deps.sh test)")
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

UPSTREAM = Path(__file__).parent / "ws_upstream.py"
PROXY_SO = BUILD / "plugins" / "monkey-proxy.so"

pytestmark = [needs_dlopen,
              pytest.mark.skipif(not PROXY_SO.exists(), reason="built without the proxy plugin")]


class WsUpstream:
    def __init__(self, flags=()):
        self.port = free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([sys.executable, str(UPSTREAM), str(self.port)] + list(flags),
                                     start_new_session=True)
        if not wait_port(self.port, proc=self.proc):
            self.stop()
            raise RuntimeError("the WebSocket upstream did not start")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def upstream():
    started = []

    def start(flags=()):
        u = WsUpstream(flags)
        started.append(u)
        return u

    yield start
    for u in started:
        u.stop()


def configure(srv, addr, timeout=30, conf=""):
    (srv.conf / "plugins").mkdir(exist_ok=True)
    (srv.conf / "plugins" / "proxy.conf").write_text(f"[PROXY]\n    Timeout {timeout}\n" + conf)
    srv.site_extra += f"\n[PROXY]\n    Pass /ws {addr}\n"
    return srv


def ws_server(make_server, addr, timeout=30, control=False):
    srv = make_server()
    srv.plugins = [str(PROXY_SO)]
    srv.set(Workers=1)
    srv.site_extra = ""
    if control:
        with_control(srv)
    return configure(srv, addr, timeout).start()


def url(srv, path, tls=False):
    return f"{'wss' if tls else 'ws'}://127.0.0.1:{srv.port}/ws{path}"


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def wait_fds(pid, want, secs=5):
    deadline = time.monotonic() + secs * SLOW
    while open_fds(pid) > want and time.monotonic() < deadline:
        time.sleep(0.05)
    return open_fds(pid)


def upgrade_head(path, key=None):
    key = key or base64.b64encode(os.urandom(16)).decode()
    return (f"GET /ws{path} HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive, Upgrade\r\n"
            f"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\n"
            "\r\n").encode()


def read_head(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        got = sock.recv(65536)
        assert got, data
        data += got
    head, rest = data.split(b"\r\n\r\n", 1)
    return head.decode(), rest


def test_echo_text_and_binary(make_server, upstream):
    u = upstream()
    srv = ws_server(make_server, u.addr)
    with connect(url(srv, "/echo"), max_size=None) as ws:
        ws.send("hello through the proxy")
        assert ws.recv(timeout=5 * SLOW) == "hello through the proxy"
        blob = bytes(range(256)) * 40
        ws.send(blob)
        assert ws.recv(timeout=5 * SLOW) == blob
        for i in range(50):
            ws.send(f"m{i}")
        assert [ws.recv(timeout=5 * SLOW) for _ in range(50)] == [f"m{i}" for i in range(50)]
    # the site's other paths still work, and the proxy's ordinary requests too
    assert srv.get("/").status in (200, 403, 404)


def test_101_head_and_early_bytes(make_server, upstream):
    """The 101's end-to-end fields, Upgrade and Connection: upgrade reach the
    client; bytes the upstream sent with its 101 are the tunnel's first."""
    u = upstream(["--raw101"])
    srv = ws_server(make_server, u.addr)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW)
    s.sendall(upgrade_head("/raw"))
    head, rest = read_head(s)
    lines = head.split("\r\n")
    assert lines[0].startswith("HTTP/1.1 101"), head
    fields = {ln.split(":", 1)[0].lower(): ln.split(":", 1)[1].strip() for ln in lines[1:]}
    assert fields["upgrade"] == "websocket"
    assert fields["connection"].lower() == "upgrade"
    assert fields["x-up"] == "raw"
    while len(rest) < len(b"early-bytes"):
        rest += s.recv(65536)
    assert rest == b"early-bytes"
    s.sendall(b"any bytes, not websocket")
    got = b""
    while len(got) < 24:
        got += s.recv(65536)
    assert got == b"any bytes, not websocket"
    s.close()


def test_101_to_a_request_without_upgrade_is_502(make_server, upstream):
    u = upstream(["--raw101"])
    srv = ws_server(make_server, u.addr)
    assert srv.get("/ws/plain").status == 502
    # Upgrade without Connection: upgrade asks for nothing either
    r = srv.get("/ws/plain", headers={"Upgrade": "websocket"})
    assert r.status == 502
    assert "101 to a request that asked for no upgrade" in srv.stderr_text()


@pytest.mark.parametrize("code", [200, 400])
def test_upgrade_answered_without_101(make_server, upstream, code):
    """An upgrade request the upstream answers otherwise: an ordinary response."""
    u = upstream()
    srv = ws_server(make_server, u.addr)
    c = srv.conn()
    r = c.request("GET", f"/ws/status/{code}", headers={
        "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode()})
    assert r.status == code
    assert r.body == f"plain {code}".encode()
    assert r.header("upgrade") is None
    # the client's connection goes on as HTTP
    assert c.request("GET", "/ws/status/200").status == 200
    c.close()
    if code == 400:
        with pytest.raises(InvalidStatus):
            connect(url(srv, "/status/400"))


def test_large_message(make_server, upstream):
    u = upstream()
    srv = ws_server(make_server, u.addr)
    blob = os.urandom(6 << 20)
    with connect(url(srv, "/echo"), max_size=None) as ws:
        ws.send(blob)
        assert ws.recv(timeout=30 * SLOW) == blob
        ws.send("after")
        assert ws.recv(timeout=5 * SLOW) == "after"


def test_slow_reader_bounds_memory(make_server, upstream):
    """A client that does not read: the proxy stops reading the upstream,
    the server's memory stays bounded, and every byte arrives later."""
    u = upstream()
    srv = ws_server(make_server, u.addr)
    n, size = 48, 1 << 20
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    s.settimeout(30 * SLOW)
    s.connect(("127.0.0.1", srv.port))
    rss0 = vm_rss_kb(srv.proc.pid)
    s.sendall(upgrade_head(f"/flood?n={n}&size={size}"))
    head, rest = read_head(s)
    assert head.startswith("HTTP/1.1 101"), head
    peak = 0
    for _ in range(10):
        time.sleep(0.2)
        peak = max(peak, vm_rss_kb(srv.proc.pid))
    # 48 MiB were offered; the tunnel holds a queue's mark and a read
    assert peak - rss0 < 12 * 1024, (rss0, peak)
    total = len(rest)
    while True:
        got = s.recv(1 << 20)
        if not got:
            break
        total += len(got)
        if total >= n * (size + 10) + 2:
            break
    assert total >= n * (size + 10), total
    s.close()


def test_upstream_that_does_not_read_holds_the_client(make_server, upstream):
    """An upstream that stops reading: the proxy stops taking the client's
    bytes (the client's sends block), and its memory stays bounded."""
    u = upstream(["--raw101"])
    srv = ws_server(make_server, u.addr)
    s = socket.socket()
    s.settimeout(5 * SLOW)
    s.connect(("127.0.0.1", srv.port))
    s.sendall(upgrade_head("/sink"))
    head, rest = read_head(s)
    assert head.startswith("HTTP/1.1 101"), head
    rss0 = vm_rss_kb(srv.proc.pid)
    s.setblocking(False)
    chunk, sent, stalled_since = b"z" * 65536, 0, None
    deadline = time.monotonic() + 20 * SLOW
    while time.monotonic() < deadline and sent < (256 << 20):
        try:
            sent += s.send(chunk)
            stalled_since = None
        except BlockingIOError:
            stalled_since = stalled_since or time.monotonic()
            if time.monotonic() - stalled_since > 1.0:
                break  # nobody takes more
            time.sleep(0.01)
    # held: what the sockets' buffers and the proxy's one read hold, not 256 MiB
    assert sent < (64 << 20), sent
    assert stalled_since is not None
    assert vm_rss_kb(srv.proc.pid) - rss0 < 12 * 1024
    s.close()


def test_close_from_the_client(make_server, upstream):
    u = upstream()
    srv = ws_server(make_server, u.addr, control=True)
    plugin_status(srv, "proxy")  # the server's own descriptors settle first
    fds = open_fds(srv.proc.pid)
    with connect(url(srv, "/echo")) as ws:
        ws.send("x")
        assert ws.recv(timeout=5 * SLOW) == "x"
        st = plugin_status(srv, "proxy")
        assert (st["tunnels"], st["tunnels_open"], st["server0_active"]) == (1, 1, 1)
        ws.close()
        rcvd = ws.protocol.close_rcvd
        assert rcvd is not None and rcvd.code == 1000  # the upstream's answer came through
    # both connections closed: the client's and the upstream one (never pooled)
    assert wait_fds(srv.proc.pid, fds) <= fds
    st = plugin_status(srv, "proxy")
    assert (st["tunnels"], st["tunnels_open"], st["server0_active"]) == (1, 0, 0)


def test_close_from_the_upstream(make_server, upstream):
    u = upstream()
    srv = ws_server(make_server, u.addr)
    srv.get("/")
    fds = open_fds(srv.proc.pid)
    with connect(url(srv, "/close")) as ws:
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=5 * SLOW)
        rcvd = ws.protocol.close_rcvd
        assert rcvd is not None and (rcvd.code, rcvd.reason) == (4001, "bye")
    assert wait_fds(srv.proc.pid, fds) <= fds


def test_idle_timeout(make_server, upstream):
    u = upstream()
    srv = ws_server(make_server, u.addr, timeout=2)
    with connect(url(srv, "/echo"), ping_interval=None) as ws:
        # traffic keeps it open past the Timeout
        for i in range(4):
            time.sleep(1)
            ws.send(f"k{i}")
            assert ws.recv(timeout=5 * SLOW) == f"k{i}"
        t0 = time.monotonic()
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=10 * SLOW)
        waited = time.monotonic() - t0
        assert 1.5 <= waited <= 6 * SLOW, waited


def test_over_tls(make_server, upstream):
    from tlsutil import TLS_SO, client_context, tls_server
    if not TLS_SO.exists():
        pytest.skip("built without OpenSSL (MK_TLS off)")
    u = upstream()
    srv = tls_server(make_server, plugins=[str(PROXY_SO)])
    configure(srv, u.addr).start()
    with connect(url(srv, "/echo", tls=True), ssl=client_context(), max_size=None) as ws:
        ws.send("over tls")
        assert ws.recv(timeout=5 * SLOW) == "over tls"
        ws.send(b"\x00\x01binary")
        assert ws.recv(timeout=5 * SLOW) == b"\x00\x01binary"
        blob = os.urandom(3 << 20)
        ws.send(blob)
        assert ws.recv(timeout=30 * SLOW) == blob


def test_tls_upstream(make_server, upstream, tmp_path):
    """A tls:// upstream: the tunnel's bytes through the proxy's TLS, what
    it decrypted ahead read without an event."""
    from tlsutil import TLS_SO, make_cert
    if not TLS_SO.exists():
        pytest.skip("built without OpenSSL (MK_TLS off)")
    crt, key = make_cert(tmp_path / "up", "upstream")
    u = upstream(["--tls", str(crt), str(key)])
    srv = make_server()
    srv.plugins = [str(PROXY_SO)]
    srv.set(Workers=1)
    srv.site_extra = ""
    configure(srv, f"tls://{u.addr}", conf="    TLSVerify off\n").start()
    with connect(url(srv, "/echo"), max_size=None) as ws:
        ws.send("to a tls upstream")
        assert ws.recv(timeout=5 * SLOW) == "to a tls upstream"
        blob = os.urandom(4 << 20)
        ws.send(blob)
        assert ws.recv(timeout=30 * SLOW) == blob
        msgs = [os.urandom(i % 3000 + 1) for i in range(500)]
        for m in msgs:
            ws.send(m)
        for m in msgs:
            assert ws.recv(timeout=10 * SLOW) == m


def test_many_frames_both_ways(make_server, upstream):
    """Small frames pipelined in both directions: nothing lost or reordered."""
    u = upstream()
    srv = ws_server(make_server, u.addr)
    with connect(url(srv, "/echo")) as ws:
        msgs = [struct.pack("!I", i) * (i % 50 + 1) for i in range(2000)]
        for m in msgs:
            ws.send(m)
        for m in msgs:
            assert ws.recv(timeout=10 * SLOW) == m


# ---- HTTP/2 clients (RFC 8441) ---------------------------------------------------------------

TEXT, BINARY, CLOSE = 1, 2, 8


def h2_client(srv):
    c = H2Client(srv.port)
    c.conn.increment_flow_control_window(1 << 24)
    c.flush()
    return c


def h2_ws_server(make_server, addr, timeout=30):
    pytest.importorskip("h2", reason="Python's h2 (tools/deps.sh test)")
    from tlsutil import TLS_SO
    if not TLS_SO.exists():
        pytest.skip("built without OpenSSL: the proxy has no SHA-1 for Sec-WebSocket-Accept")
    srv = make_server()
    srv.plugins = [str(PROXY_SO)]
    srv.set(Workers=1, Listen=f"127.0.0.1:{srv.port} h2c")
    srv.site_extra = ""
    return configure(srv, addr, timeout).start()


def test_h2_extended_connect_echo(make_server, upstream):
    """RFC 8441 from the client, an HTTP/1.1 WebSocket handshake upstream (the
    proxy's own key, its accept checked), the stream's 200, frames both ways."""
    u = upstream()
    srv = h2_ws_server(make_server, u.addr)
    c = h2_client(srv)
    ws = H2WebSocket(c, "/ws/echo")
    assert ws.st["headers"].get(":status") == "200", ws.st
    assert "sec-websocket-accept" not in ws.st["headers"]
    ws.send(TEXT, b"hello over h2")
    assert ws.read() == (TEXT, b"hello over h2")
    blob = os.urandom(300000)
    ws.send(BINARY, blob)
    assert ws.read() == (BINARY, blob)
    ws.send(CLOSE, struct.pack("!H", 1000))
    op, payload = ws.read()
    assert op == CLOSE and payload[:2] == struct.pack("!H", 1000)
    c.close()


def test_h2_extended_connect_bad_accept_is_502(make_server, upstream):
    """An upstream whose 101 does not answer the proxy's key: 502."""
    u = upstream(["--raw101"])
    srv = h2_ws_server(make_server, u.addr)
    c = h2_client(srv)
    ws = H2WebSocket(c, "/ws/raw")
    assert ws.st["headers"].get(":status") == "502", ws.st
    c.close()
    assert "Sec-WebSocket-Accept" in srv.stderr_text()


def test_h2_slow_reader_bounds_memory(make_server, upstream):
    """An h2 client that does not read its tunnel: the stream's window and
    the takeover's queue stop the proxy reading the upstream."""
    u = upstream()
    srv = h2_ws_server(make_server, u.addr)
    c = h2_client(srv)
    rss0 = vm_rss_kb(srv.proc.pid)
    n, size = 32, 1 << 20
    ws = H2WebSocket(c, f"/ws/flood?n={n}&size={size}")
    assert ws.st["headers"].get(":status") == "200", ws.st
    peak = 0
    for _ in range(10):
        time.sleep(0.2)
        peak = max(peak, vm_rss_kb(srv.proc.pid))
    assert peak - rss0 < 12 * 1024, (rss0, peak)
    for _ in range(n):
        op, payload = ws.read()
        assert op == BINARY and len(payload) == size
    c.close()


def test_h2_idle_timeout_and_close_from_the_upstream(make_server, upstream):
    """The proxy's Timeout ends a silent h2 tunnel (its stream reset); the
    upstream's close ends another with the upstream's close frame."""
    u = upstream()
    srv = h2_ws_server(make_server, u.addr, timeout=2)
    c = h2_client(srv)
    idle = H2WebSocket(c, "/ws/echo")
    assert idle.st["headers"].get(":status") == "200", idle.st
    closing = H2WebSocket(c, "/ws/close")
    assert closing.read() == (CLOSE, struct.pack("!H", 4001) + b"bye")
    t0 = time.monotonic()
    with pytest.raises(EOFError):
        idle.read()
    assert 1.0 <= time.monotonic() - t0 <= 8 * SLOW
    assert idle.st["reset"] is not None  # the stream reset, not ended
    c.close()
