"""The Duda websocket and broadcaster packages (duda/packages/websocket,
duda/packages/broadcaster) through the test service tests/duda/wstest, with
Python's `websockets` as the client and raw frames where a well-behaved
client cannot misbehave: echo, fragments, ping, close codes, limits,
permessage-deflate, 1,000 clients on a channel across two workers, a slow
reader dropped. Over TLS (the tls plugin): the echo, the close codes, the
16 MB message refused, the 1,000 clients broadcasting across two workers
and the slow reader dropped."""

import asyncio
import base64
import contextlib
import hashlib
import os
import socket
import struct
import threading
import time

import pytest

from conftest import BUILD, EMULATED, ROOT, SLOW, STATIC, Strace, small_window
from h2util import needs_tool
from test_duda import build, duda_server, web_service

pytest.importorskip("websockets.asyncio.client", reason="Python's websockets 13 or later (tools/deps.sh test)")
pytest.importorskip("websockets.sync.client", reason="Python's websockets 13 or later (tools/deps.sh test)")
from websockets.asyncio.client import connect as aconnect  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

PACKAGES = BUILD / "duda-packages"

pytestmark = [
    pytest.mark.skipif(STATIC, reason="static binary: no shared objects"),
    pytest.mark.skipif(EMULATED, reason="cross-test: services are built for the host"),
    pytest.mark.skipif(not (PACKAGES / "websocket.dpkg").exists(),
                       reason="websocket package not built (libssl-dev, zlib1g-dev)"),
]

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    out = tmp_path_factory.mktemp("services")
    return build(ROOT / "tests" / "duda" / "wstest", out)


def ws_server(make_server, services, workers=2):
    srv = duda_server(make_server, services, [web_service("wstest")], workers=workers)
    (srv.conf / "plugins" / "duda.conf").write_text(
        f"[DUDA]\n    ServicesRoot {services}\n    PackagesRoot {PACKAGES}\n")
    return srv


@pytest.fixture
def srv(make_server, services):
    s = ws_server(make_server, services)
    s.start()
    return s


def tls_ws_server(make_server, services):
    """The same service behind a TLS listener, 2 workers; skips without the tls plugin."""
    from tlsutil import TLS_SO, client_context, tls_server
    if not TLS_SO.exists():
        pytest.skip("built without OpenSSL (MK_TLS off)")
    srv = tls_server(make_server, plugins=[str(BUILD / "plugins" / "monkey-duda.so")])
    srv.set(Workers=2)
    (srv.conf / "plugins").mkdir(exist_ok=True)
    (srv.conf / "plugins" / "duda.conf").write_text(
        f"[DUDA]\n    ServicesRoot {services}\n    PackagesRoot {PACKAGES}\n")
    srv.site_extra += "\n" + web_service("wstest")
    srv.ws_ssl = client_context()
    return srv


@pytest.fixture(params=["plain", "tls"])
def any_srv(request, make_server, services):
    """The service over plain TCP, then over TLS: srv.ws_ssl is the client's context or None."""
    if request.param == "tls":
        s = tls_ws_server(make_server, services)
    else:
        s = ws_server(make_server, services)
        s.ws_ssl = None
    s.start()
    return s


def url(srv, path="echo"):
    scheme = "wss" if getattr(srv, "ws_ssl", None) else "ws"
    return f"{scheme}://127.0.0.1:{srv.port}/wstest/{path}"


def tls_kw(srv):
    """connect()'s ssl argument for srv, when it is TLS."""
    ctx = getattr(srv, "ws_ssl", None)
    return {"ssl": ctx} if ctx else {}


# ---- raw frames ---------------------------------------------------------------------------


def frame(opcode, payload=b"", fin=True, mask=True, rsv1=False):
    b0 = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", b0, (0x80 if mask else 0) | n)
    elif n < 65536:
        head = struct.pack("!BBH", b0, (0x80 if mask else 0) | 126, n)
    else:
        head = struct.pack("!BBQ", b0, (0x80 if mask else 0) | 127, n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(c ^ key[i & 3] for i, c in enumerate(payload))


class Raw:
    """A client speaking frames by hand over a plain socket, or TLS when srv is."""

    def __init__(self, srv, path="echo", headers=""):
        self.s = socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW)
        if getattr(srv, "ws_ssl", None):
            self.s = srv.ws_ssl.wrap_socket(self.s, server_hostname="localhost")
        self.key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall((f"GET /wstest/{path} HTTP/1.1\r\nHost: localhost\r\n"
                        f"Upgrade: websocket\r\nConnection: Upgrade\r\n"
                        f"Sec-WebSocket-Key: {self.key}\r\nSec-WebSocket-Version: 13\r\n"
                        f"{headers}\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.s.recv(4096)
            assert chunk, self.buf
            self.buf += chunk
        self.head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        self.head = self.head.decode()

    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("closed")
            self.buf += chunk

    def read(self):
        """(fin, opcode, payload) of the next frame."""
        self._need(2)
        b0, b1 = self.buf[0], self.buf[1]
        assert not b1 & 0x80, "a server frame is never masked"
        n, off = b1 & 0x7f, 2
        if n == 126:
            self._need(4)
            n, off = struct.unpack("!H", self.buf[2:4])[0], 4
        elif n == 127:
            self._need(10)
            n, off = struct.unpack("!Q", self.buf[2:10])[0], 10
        self._need(off + n)
        payload, self.buf = self.buf[off:off + n], self.buf[off + n:]
        return bool(b0 & 0x80), b0 & 0x0f, payload

    def send(self, data):
        self.s.sendall(data)

    def close_code(self):
        """Read until the server's close frame: its code (None without one). Answer it as a
        client does (a server that failed the connection has closed already), then EOF."""
        while True:
            fin, op, payload = self.read()
            if op == 8:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                try:
                    self.send(frame(8, payload[:2]))
                except OSError:
                    pass
                self.s.settimeout(3 * SLOW)
                try:
                    assert self.s.recv(1) == b"", "the server closes after its close frame"
                except ConnectionResetError:
                    pass
                return code


# ---- handshake --------------------------------------------------------------------------


def test_handshake_answers_101_with_the_accept_key(srv):
    raw = Raw(srv)
    assert raw.head.startswith("HTTP/1.1 101"), raw.head
    lines = {k.lower(): v.strip() for k, v in
             (line.split(":", 1) for line in raw.head.split("\r\n")[1:])}
    want = base64.b64encode(hashlib.sha1(raw.key.encode() + GUID).digest()).decode()
    assert lines["sec-websocket-accept"] == want
    assert lines["upgrade"].lower() == "websocket"
    assert "content-length" not in lines
    assert "sec-websocket-extensions" not in lines  # deflate is off by default


def test_handshake_refused(srv):
    base = ("GET /wstest/echo HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\n")
    r = srv.raw((base + "Sec-WebSocket-Version: 13\r\nConnection: close\r\n\r\n").encode())
    assert r.startswith(b"HTTP/1.1 400"), r
    assert b"Sec-WebSocket-Key" in r
    r = srv.raw((base + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                 "Sec-WebSocket-Version: 8\r\nConnection: close\r\n\r\n").encode())
    assert r.startswith(b"HTTP/1.1 426"), r
    assert b"Sec-WebSocket-Version: 13" in r
    r = srv.get("/wstest/echo")
    assert r.status == 400


# ---- messages -----------------------------------------------------------------------------


def echo_checks(uri, **kw):
    with connect(uri, max_size=None, **kw) as ws:
        ws.send("héllo")
        assert ws.recv() == "héllo"
        ws.send(b"\x00\x01\xff")
        assert ws.recv() == b"\x00\x01\xff"
        ws.send("")
        assert ws.recv() == ""
        big = os.urandom(300_000)
        ws.send(big)
        assert ws.recv() == big
        # A fragmented message comes back whole.
        ws.send(["frag", "men", "ted"])
        assert ws.recv() == "fragmented"
        ws.ping(b"p1").wait(5 * SLOW)
        ws.close(4000, "done")
        assert ws.close_code == 4000  # the server echoes the client's code


def test_echo(srv):
    echo_checks(url(srv))


@needs_tool("strace")
def test_an_echo_costs_one_read(any_srv, tmp_path):
    # A read shorter than the server's buffer took what the socket had: the
    # loop is level triggered, so the server does not read again only to be
    # told EAGAIN. A message over several buffers is still read whole.
    raw = Raw(any_srv)
    raw.send(frame(1, b"first"))
    assert raw.read() == (True, 1, b"first")
    tracer = Strace(any_srv.proc.pid, ["read"], tmp_path / "strace.out")
    try:
        for i in range(32):
            msg = b"message %02d" % i
            raw.send(frame(1, msg))
            assert raw.read() == (True, 1, msg)
    finally:
        lines = tracer.stop()
    eagain = [line for line in lines if "EAGAIN" in line]
    assert len([line for line in lines if "read(" in line]) >= 32, lines
    assert len(eagain) <= 1, lines
    big = bytes(range(256)) * 160
    raw.send(frame(2, big))
    assert raw.read() == (True, 2, big)


def test_fragments_with_a_ping_between(srv):
    raw = Raw(srv)
    raw.send(frame(1, b"one ", fin=False) + frame(9, b"ping!") + frame(0, b"two ", fin=False)
             + frame(0, b"three"))
    assert raw.read() == (True, 10, b"ping!")  # the pong comes first
    assert raw.read() == (True, 1, b"one two three")
    raw.send(frame(8, struct.pack("!H", 1000)))
    assert raw.close_code() == 1000


def test_server_ping_and_close(srv):
    raw = Raw(srv, "cmd")
    raw.send(frame(1, b"ping"))
    fin, op, payload = raw.read()
    assert (op, payload) == (9, b"are you there")
    raw.send(frame(10, payload))
    assert raw.read() == (True, 1, b"pong: are you there")
    raw.send(frame(1, b"close 4002"))
    fin, op, payload = raw.read()
    assert op == 8 and payload == struct.pack("!H", 4002) + b"asked to"
    raw.send(frame(8, struct.pack("!H", 4002)))  # the client answers: the server closes
    raw.s.settimeout(5 * SLOW)
    assert raw.s.recv(1) == b""


def test_close_and_idle_timeouts(srv):
    # The client never answers the server's close frame: closed after close_timeout_ms (300).
    raw = Raw(srv, "cmd")
    raw.send(frame(1, b"close 4003"))
    fin, op, payload = raw.read()
    assert op == 8 and payload[:2] == struct.pack("!H", 4003)
    t0 = time.monotonic()
    raw.s.settimeout(5 * SLOW)
    assert raw.s.recv(1) == b""
    assert time.monotonic() - t0 < 5  # not the idle timeout (10 s)
    # Silence: closed after idle_timeout_ms (600).
    raw = Raw(srv, "idle")
    t0 = time.monotonic()
    raw.s.settimeout(5 * SLOW)
    assert raw.s.recv(1) == b""
    assert 0.5 < time.monotonic() - t0 < 4 * SLOW


@pytest.mark.parametrize("frames,code", [
    (frame(1, b"hi", mask=False), 1002),                 # unmasked
    (frame(1, b"\xff\xfe"), 1007),                       # not UTF-8
    (frame(1, b"ok \xe2\x82", fin=False) + frame(0, b"\x00"), 1007),  # cut sequence
    (frame(3, b"x"), 1002),                              # reserved opcode
    (frame(0, b"x"), 1002),                              # continuation with nothing open
    (frame(1, b"a", fin=False) + frame(1, b"b"), 1002),  # a new message inside a fragmented one
    (frame(9, b"x" * 126), 1002),                        # control frame too long
    (frame(9, b"x", fin=False), 1002),                   # fragmented control frame
    (frame(1, b"x", rsv1=True), 1002),                   # RSV1 without permessage-deflate
    (frame(8, b"\x03"), 1002),                           # close payload of one byte
    (frame(8, struct.pack("!H", 1005)), 1002),           # a code that may not be sent
    (frame(8, struct.pack("!H", 1000) + b"\xff"), 1007),  # reason not UTF-8
])
def test_protocol_errors_close_with_the_right_code(any_srv, frames, code):
    raw = Raw(any_srv)
    raw.send(frames)
    assert raw.close_code() == code


def test_close_without_code(srv):
    raw = Raw(srv)
    raw.send(frame(8))
    assert raw.close_code() is None  # an empty close is answered with an empty close


def test_16mb_message_refused_1009(any_srv):
    srv = any_srv
    with connect(url(srv), max_size=None, **tls_kw(srv)) as ws:
        with pytest.raises(ConnectionClosed):
            ws.send(b"x" * (16 << 20))
            ws.recv(timeout=5 * SLOW)
        assert ws.close_code == 1009
    # Frames under the frame limit that add up past the message limit: 1009 too.
    raw = Raw(srv)
    piece = b"y" * (400 << 10)
    raw.send(frame(2, piece, fin=False) + frame(0, piece, fin=False) + frame(0, piece))
    assert raw.close_code() == 1009


def test_permessage_deflate(srv):
    text = "compress me " * 20000
    with connect(url(srv, "echoz"), max_size=None) as ws:
        assert "permessage-deflate" in ws.response.headers["Sec-WebSocket-Extensions"]
        for _ in range(3):  # context takeover on both sides
            ws.send(text)
            assert ws.recv() == text
        ws.send(b"\x01\x02" * 1000)
        assert ws.recv() == b"\x01\x02" * 1000
    with connect(url(srv, "echo")) as ws:  # offered, but off on this route
        assert "Sec-WebSocket-Extensions" not in ws.response.headers
        ws.send(text)
        assert ws.recv() == text
    # An inflated message past the limit (1 MiB) is refused though small on the wire.
    with connect(url(srv, "echoz"), max_size=None) as ws:
        with pytest.raises(ConnectionClosed):
            ws.send("z" * (2 << 20))
            ws.recv(timeout=5 * SLOW)
        assert ws.close_code == 1009


# ---- broadcaster ------------------------------------------------------------------------


def broadcast_check(srv, clients, senders=4, per_sender=10):
    """`clients` members of one channel, on both workers; `senders` of them send `per_sender`
    messages each: every member gets every message once, each sender's in its order."""

    async def run():
        conns = []
        for i in range(0, clients, 100):
            conns += await asyncio.gather(*(aconnect(url(srv, "room"), compression=None,
                                                     open_timeout=30 * SLOW, **tls_kw(srv))
                                            for _ in range(min(100, clients - i))))
        await asyncio.sleep(0.3 * SLOW)  # every on_open has joined

        async def receive(ws):
            got = []
            while len(got) < senders * per_sender:
                got.append(await ws.recv())
            return got

        readers = [asyncio.create_task(receive(ws)) for ws in conns]
        for j in range(per_sender):
            for s in range(senders):
                await conns[s * (clients // senders)].send(f"s{s}-{j:03d}")
        results = await asyncio.wait_for(asyncio.gather(*readers), 60 * SLOW)
        # Nothing more arrives: no duplicate after the expected count.
        extra = await asyncio.gather(*(asyncio.wait_for(ws.recv(), 0.3) for ws in conns[:20]),
                                     return_exceptions=True)
        for ws in conns:
            await ws.close()
        return results, extra

    results, extra = asyncio.run(run())
    assert len(results) == clients
    want = {f"s{s}-{j:03d}" for s in range(senders) for j in range(per_sender)}
    for got in results:
        assert len(got) == len(want) and set(got) == want
        for s in range(senders):  # each sender's messages in its order
            mine = [m for m in got if m.startswith(f"s{s}-")]
            assert mine == sorted(mine)
    assert all(isinstance(e, asyncio.TimeoutError) for e in extra), extra


def test_1000_clients_broadcast_across_two_workers(srv):
    broadcast_check(srv, 1000)


def test_1000_clients_broadcast_across_two_workers_over_tls(make_server, services):
    srv = tls_ws_server(make_server, services)
    srv.start()
    broadcast_check(srv, 1000)


def test_slow_reader_dropped(any_srv):
    srv = any_srv
    slow_sock = small_window(srv.port, 4096)
    got = []

    def read_all(ws):
        try:
            while True:
                got.append(ws.recv())
        except ConnectionClosed:
            pass

    with connect(url(srv, "slow"), sock=slow_sock, max_size=None, compression=None,
                 **tls_kw(srv)) as slow, \
            connect(url(srv, "flood"), max_size=None, compression=None, **tls_kw(srv)) as fast:
        reader = threading.Thread(target=read_all, args=(fast,), daemon=True)
        reader.start()
        msg, count = b"m" * 65536, 300
        deadline = time.time() + 30 * SLOW
        with connect(url(srv, "shout"), compression=None, **tls_kw(srv)) as shout:
            for i in range(count):
                shout.send(msg)
                # In step with the member that reads, so that only the other one lags.
                while len(got) <= i and time.time() < deadline:
                    time.sleep(0.001)
        assert len(got) == count  # the member that reads gets everything
        received = 0
        with pytest.raises(ConnectionClosed):
            while True:
                slow.recv(timeout=5 * SLOW)
                received += 1
        assert slow.close_code == 1008
        assert received < count
    assert "send queue over 131072 bytes (slow reader)" in srv.stderr_text()


@pytest.mark.parametrize("alone", [False, True], ids=["with-a-reader", "alone"])
def test_member_dropped_leaves_in_on_error(make_server, services, alone):
    """A slow member whose on_error leaves its channel, during the delivery that drops it: on
    one worker, joined before the member that reads (which would take its slot and miss that
    message), or alone in the channel (which goes with it while the delivery runs)."""
    srv = ws_server(make_server, services, workers=1)
    srv.start()
    slow_sock = small_window(srv.port, 4096)
    got = []

    def read_all(ws):
        try:
            while True:
                got.append(ws.recv())
        except ConnectionClosed:
            pass

    msg, count = b"m" * 65536, 300
    with contextlib.ExitStack() as stack:
        slow = stack.enter_context(connect(url(srv, "leaver"), sock=slow_sock, max_size=None,
                                           compression=None))
        fast = None
        if not alone:
            fast = stack.enter_context(connect(url(srv, "flood"), max_size=None,
                                               compression=None))
            threading.Thread(target=read_all, args=(fast,), daemon=True).start()
        deadline = time.time() + 30 * SLOW
        with connect(url(srv, "shout"), compression=None) as shout:
            for i in range(count):
                shout.send(msg)
                # In step with the member that reads, so that only the other one lags.
                while fast and len(got) <= i and time.time() < deadline:
                    time.sleep(0.001)
        with pytest.raises(ConnectionClosed):
            while True:
                slow.recv(timeout=5 * SLOW)
        assert slow.close_code == 1008
        assert len(got) == (0 if alone else count)  # none lost when the slow member left
    assert "send queue over 131072 bytes (slow reader)" in srv.stderr_text()
    # The worker goes on: a new member of the channel gets what is sent to it.
    with connect(url(srv, "flood"), compression=None) as member, \
            connect(url(srv, "shout"), compression=None) as shout:
        time.sleep(0.2 * SLOW)  # its on_open has joined
        shout.send("still here")
        assert member.recv(timeout=5 * SLOW) == "still here"


# ---- TLS ------------------------------------------------------------------------------------


def test_echo_over_tls(make_server, services):
    srv = tls_ws_server(make_server, services)
    srv.start()
    echo_checks(url(srv), ssl=srv.ws_ssl)
    with connect(url(srv, "echoz"), ssl=srv.ws_ssl, max_size=None) as ws:
        ws.send("tls " * 50000)
        assert ws.recv() == "tls " * 50000


# ---- reloads ------------------------------------------------------------------------------


def test_websockets_outlive_a_reload(srv):
    # A taken-over connection holds the configuration of the request that
    # asked for it: a reload frees neither the service nor its routes while
    # WebSockets opened before it are open (heap-use-after-free in
    # duda_tk_close under ASan before). Several reloads, then the old
    # sockets echo and close, by the client or by the server; a socket
    # opened after the reloads works too.
    with contextlib.ExitStack() as stack:
        old = [stack.enter_context(connect(url(srv), max_size=None)) for _ in range(3)]
        raw = Raw(srv, "cmd")
        for ws in old:
            ws.send("before")
            assert ws.recv() == "before"
        for _ in range(3):
            srv.reload()
        for i, ws in enumerate(old):
            ws.send(f"after {i}")
            assert ws.recv() == f"after {i}"
        with connect(url(srv), max_size=None) as fresh:
            fresh.send("new")
            assert fresh.recv() == "new"
        old[0].close()  # the client closes
        raw.send(frame(1, b"close 4002"))  # the server closes
        assert raw.read()[1] == 8
        raw.send(frame(8, struct.pack("!H", 4002)))
        raw.s.settimeout(5 * SLOW)
        assert raw.s.recv(1) == b""
    time.sleep(0.3)  # every on_close has run on the retired configurations
    srv.reload()
    assert srv.get("/wstest/echo").status == 400  # a plain GET: still served
    assert srv.proc.poll() is None
