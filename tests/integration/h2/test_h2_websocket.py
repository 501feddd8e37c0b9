"""WebSocket over HTTP/2 (RFC 8441; server/proto/h2_tunnel.c): a client on
Python's h2 sends an extended CONNECT (:protocol websocket) to the Duda
websocket package's test service (tests/duda/wstest) and speaks WebSocket
frames in the stream's DATA. The SETTINGS value, the 200 without an accept
key, echo of text, binary and large messages, ping and pong both ways, the
close handshake both ways, several tunnels on one connection between
ordinary requests, RST_STREAM and the client's END_STREAM mid-tunnel, the
idle timeout, a slow reader held by flow control (and its memory), and the
answers that are no tunnel: a plain CONNECT, a 2xx nobody takes over (501),
another :protocol. Over h2c and over TLS (h2 by ALPN)."""

import contextlib
import os
import struct
import threading
import time

import pytest

from conftest import BUILD, EMULATED, ROOT, SANITIZED, SLOW, STATIC, vm_rss_kb
from h2util import H2_MARKS, H2Client, H2WebSocket, ws_client_frame
from test_duda import build, duda_server, web_service

try:
    from h2.settings import SettingCodes
except ImportError:  # H2_MARKS skips
    SettingCodes = None

PACKAGES = BUILD / "duda-packages"

pytestmark = H2_MARKS + [
    pytest.mark.skipif(STATIC, reason="static binary: no shared objects"),
    pytest.mark.skipif(EMULATED, reason="cross-test: services are built for the host"),
    pytest.mark.skipif(not (PACKAGES / "websocket.dpkg").exists(),
                       reason="websocket package not built (libssl-dev, zlib1g-dev)"),
]

ENABLE_CONNECT_PROTOCOL = 0x8
TEXT, BINARY, CLOSE, PING, PONG = 1, 2, 8, 9, 10


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    out = tmp_path_factory.mktemp("services")
    return build(ROOT / "tests" / "duda" / "wstest", out)


def duda_conf(srv, services):
    (srv.conf / "plugins").mkdir(exist_ok=True)
    (srv.conf / "plugins" / "duda.conf").write_text(
        f"[DUDA]\n    ServicesRoot {services}\n    PackagesRoot {PACKAGES}\n")


def h2c_ws_server(make_server, services):
    srv = duda_server(make_server, services, [web_service("wstest")], workers=1)
    srv.set(Listen=f"127.0.0.1:{srv.port} h2c")
    duda_conf(srv, services)
    srv.tls = False
    return srv


def tls_ws_server(make_server, services):
    from tlsutil import TLS_SO, tls_server
    if not TLS_SO.exists():
        pytest.skip("built without OpenSSL (MK_TLS off)")
    srv = tls_server(make_server, plugins=[str(BUILD / "plugins" / "monkey-duda.so")])
    duda_conf(srv, services)
    srv.site_extra += "\n" + web_service("wstest")
    srv.file("site.txt", "the site's own file\n")
    srv.tls = True
    return srv


@pytest.fixture(params=["h2c", "tls"])
def srv(request, make_server, services):
    s = (tls_ws_server if request.param == "tls" else h2c_ws_server)(make_server, services)
    s.start()
    return s


@pytest.fixture
def h2c_srv(make_server, services):
    return h2c_ws_server(make_server, services).start()


def client(srv, **kw):
    sock = None
    if srv.tls:
        from tlsutil import tls_connect
        sock = tls_connect(srv.port, sni="localhost", alpn=["h2"])
        assert sock.selected_alpn_protocol() == "h2"
    c = H2Client(srv.port, sock=sock, **kw)
    # the connection's window wide open: a tunnel's own window is what holds it
    c.conn.increment_flow_control_window(1 << 24)
    c.flush()
    return c


class WS(H2WebSocket):
    """One WebSocket on a stream of c, opened with an extended CONNECT (to
    the echo service unless told)."""

    def __init__(self, c, path="/wstest/echo", protocol="websocket", headers=()):
        super().__init__(c, path, protocol, headers)


# ---- the handshake ------------------------------------------------------------------------


def test_settings_enable_connect_protocol(srv):
    import h2.events
    c = client(srv)
    while not any(isinstance(ev, h2.events.RemoteSettingsChanged) for ev in c.events):
        assert c.read_once()
    ev = next(ev for ev in c.events if isinstance(ev, h2.events.RemoteSettingsChanged))
    assert ev.changed_settings[SettingCodes.ENABLE_CONNECT_PROTOCOL].new_value == 1
    assert c.conn.remote_settings[SettingCodes.ENABLE_CONNECT_PROTOCOL] == 1
    c.close()


def test_handshake_answers_200_without_accept_key(srv):
    c = client(srv)
    ws = WS(c)
    assert ws.status == "200", ws.st
    headers = ws.st["headers"]
    for name in ("sec-websocket-accept", "upgrade", "connection", "content-length"):
        assert name not in headers, headers
    assert not ws.gone()
    c.close()


def test_not_a_tunnel(srv):
    c = client(srv)
    # a 2xx that nobody takes over (a static file) would promise a tunnel: 501
    ws = WS(c, path="/site.txt")
    assert ws.status == "501", ws.st
    ws.wait_gone()
    # another :protocol on the websocket route: the package refuses it
    ws = WS(c, protocol="chat")
    assert ws.status == "400", ws.st
    ws.wait_gone()
    # :protocol with another method is malformed (RFC 8441 section 4)
    sid = c.request("/wstest/echo", headers=[(":protocol", "websocket")])
    c.wait([sid])
    assert c.streams[sid]["reset"] == 1  # PROTOCOL_ERROR
    # an extended CONNECT without :path is malformed too
    sid = c.conn.get_next_available_stream_id()
    c.conn.send_headers(sid, [(":method", "CONNECT"), (":protocol", "websocket"),
                              (":scheme", c.scheme), (":authority", "localhost")])
    c.streams[sid] = {"headers": {}, "data": b"", "ended": False, "reset": None}
    c.flush()
    c.wait([sid])
    assert c.streams[sid]["reset"] == 1
    # a plain CONNECT (no :protocol) keeps its answer: no proxy here
    sid = c.conn.get_next_available_stream_id()
    c.conn.send_headers(sid, [(":method", "CONNECT"), (":authority", "example.com:443")])
    c.streams[sid] = {"headers": {}, "data": b"", "ended": False, "reset": None}
    c.flush()
    c.wait([sid])
    assert c.streams[sid]["headers"].get(":status") == "405", c.streams[sid]
    # and the connection still serves
    assert c.get("/site.txt")["data"] == b"the site's own file\n"
    c.close()


def test_service_sees_version_and_protocol(srv):
    c = client(srv)
    assert c.get("/wstest/info")["data"] == b"version 20 protocol -\n"
    ws = WS(c, path="/wstest/info")
    assert ws.status == "400", ws.st
    ws.wait_gone()
    assert ws.st["data"] == b"version 20 protocol websocket\n"
    c.close()
    if not srv.tls:
        assert srv.get("/wstest/info").body == b"version 11 protocol -\n"


# ---- messages -----------------------------------------------------------------------------


def test_echo_text_and_binary(srv):
    c = client(srv)
    ws = WS(c)
    ws.send(TEXT, "héllo".encode())
    assert ws.read() == (TEXT, "héllo".encode())
    blob = bytes(range(256)) * 4
    ws.send(BINARY, blob)
    assert ws.read() == (BINARY, blob)
    # a message in fragments, a ping between them
    ws.send(TEXT, b"frag", fin=False)
    ws.send(PING, b"p1")
    ws.send(0, b"ments")
    assert ws.read() == (PONG, b"p1")
    assert ws.read() == (TEXT, b"fragments")
    c.close()


def test_frames_sent_with_the_connect(srv):
    """The client does not wait for the 200: its first frames ride with the HEADERS."""
    c = client(srv)
    sid = c.conn.get_next_available_stream_id()
    c.conn.send_headers(sid, [(":method", "CONNECT"), (":protocol", "websocket"),
                              (":scheme", c.scheme), (":path", "/wstest/echo"),
                              (":authority", "localhost"), ("sec-websocket-version", "13")])
    c.conn.send_data(sid, ws_client_frame(TEXT, b"early") + ws_client_frame(BINARY, b"\x00\x01"))
    c.streams[sid] = {"headers": {}, "data": b"", "ended": False, "reset": None}
    c.flush()
    ws = WS.__new__(WS)
    ws.c, ws.sid, ws.off = c, sid, 0
    assert ws.read() == (TEXT, b"early")
    assert ws.read() == (BINARY, b"\x00\x01")
    assert ws.status == "200"
    c.close()


def test_large_message(srv):
    c = client(srv)
    ws = WS(c)
    big = os.urandom(900 * 1024)  # under the route's 1 MiB limits, many windows of the stream
    ws.send(BINARY, big)
    op, payload = ws.read()
    assert op == BINARY and payload == big
    # one over the limit is refused with 1009, then the tunnel ends
    ws.send(BINARY, b"x" * ((1 << 20) + 1))
    op, payload = ws.read()
    assert op == CLOSE and struct.unpack("!H", payload[:2])[0] == 1009
    ws.send(CLOSE, struct.pack("!H", 1009))
    ws.wait_gone()
    c.close()


def test_ping_pong_both_ways(srv):
    c = client(srv)
    ws = WS(c, path="/wstest/cmd")
    ws.send(PING, b"client ping")
    assert ws.read() == (PONG, b"client ping")
    ws.send(TEXT, b"ping")
    assert ws.read() == (PING, b"are you there")
    ws.send(PONG, b"are you there")
    assert ws.read() == (TEXT, b"pong: are you there")
    c.close()


# ---- the end of a tunnel --------------------------------------------------------------------


def test_close_handshake_by_the_client(srv):
    c = client(srv)
    ws = WS(c)
    ws.send(CLOSE, struct.pack("!H", 1000) + b"bye")
    op, payload = ws.read()
    assert op == CLOSE and struct.unpack("!H", payload[:2])[0] == 1000
    ws.wait_gone()
    assert ws.st["ended"] and ws.st["reset"] is None  # END_STREAM, not a reset
    c.conn.end_stream(ws.sid)
    c.flush()
    assert c.get("/site.txt")["data"] == b"the site's own file\n"
    c.close()


def test_close_handshake_by_the_server(srv):
    c = client(srv)
    ws = WS(c, path="/wstest/cmd")
    ws.send(TEXT, b"close 4001")
    op, payload = ws.read()
    assert op == CLOSE and struct.unpack("!H", payload[:2])[0] == 4001
    ws.send(CLOSE, payload[:2])
    ws.wait_gone()
    assert ws.st["ended"], ws.st
    c.close()


def test_close_timeout_ends_the_stream_from_a_timer(srv):
    """The client never answers the server's close frame: the package's close
    timer (300 ms) closes the socket from outside any event of the stream."""
    c = client(srv)
    ws = WS(c, path="/wstest/cmd")
    ws.send(TEXT, b"close 4002")
    op, payload = ws.read()
    assert op == CLOSE and struct.unpack("!H", payload[:2])[0] == 4002
    start = time.monotonic()
    ws.wait_gone()
    assert ws.st["ended"] and ws.st["reset"] is None, ws.st
    assert 0.2 < time.monotonic() - start < 3 * SLOW
    c.close()


def test_end_stream_and_reset_mid_tunnel(srv):
    c = client(srv)
    # the client ends its side without a close frame: the tunnel ends cleanly
    ws = WS(c)
    ws.send(TEXT, b"one")
    assert ws.read() == (TEXT, b"one")
    c.conn.end_stream(ws.sid)
    c.flush()
    ws.wait_gone()
    assert ws.st["ended"], ws.st
    # RST_STREAM mid-tunnel, a message in flight
    ws = WS(c)
    ws.send(TEXT, b"two")
    assert ws.read() == (TEXT, b"two")
    ws.send(BINARY, os.urandom(50000))
    c.conn.reset_stream(ws.sid, error_code=8)  # CANCEL
    c.flush()
    # the connection goes on: a request and a new tunnel
    assert c.get("/site.txt")["data"] == b"the site's own file\n"
    ws = WS(c)
    ws.send(TEXT, b"three")
    assert ws.read() == (TEXT, b"three")
    c.close()


def test_idle_timeout_resets_the_stream(h2c_srv):
    c = client(h2c_srv)
    ws = WS(c, path="/wstest/idle")  # 600 ms
    start = time.monotonic()
    ws.wait_gone()
    assert ws.st["reset"] == 8, ws.st  # CANCEL
    assert 0.4 < time.monotonic() - start < 5 * SLOW
    assert c.get("/site.txt")["data"] == b"the site's own file\n"
    c.close()


def test_connection_close_ends_every_tunnel(h2c_srv):
    for _ in range(3):
        c = client(h2c_srv)
        tunnels = [WS(c) for _ in range(3)]
        for i, ws in enumerate(tunnels):
            ws.send(TEXT, f"t{i}".encode())
        for i, ws in enumerate(tunnels):
            assert ws.read() == (TEXT, f"t{i}".encode())
        tunnels[0].send(BINARY, os.urandom(100000))  # an echo under way
        c.close()
    c = client(h2c_srv)
    ws = WS(c)
    ws.send(TEXT, b"after")
    assert ws.read() == (TEXT, b"after")
    c.close()


def test_server_stop_ends_tunnels(make_server, services):
    srv = h2c_ws_server(make_server, services).start()
    c = client(srv)
    ws = WS(c)
    ws.send(TEXT, b"x")
    assert ws.read() == (TEXT, b"x")
    reset_at = []

    def reader():  # answers the drain's PING, notes when the tunnel is reset
        with contextlib.suppress(AssertionError, OSError):
            while ws.st["reset"] is None and c.read_once():
                pass
            reset_at.append(time.monotonic())
            c.read_until_closed()

    th = threading.Thread(target=reader)
    th.start()
    t = time.monotonic()
    assert srv.stop() == 0
    th.join(10 * SLOW)
    # CANCEL at once: the tunnel does not wait for the graceful timeout
    assert ws.st["reset"] == 8, ws.st
    assert reset_at and reset_at[0] - t < 1.0 * SLOW


# ---- several tunnels, ordinary requests between -------------------------------------------


def test_several_tunnels_and_requests_on_one_connection(srv):
    c = client(srv)
    tunnels = []
    for i in range(4):
        tunnels.append(WS(c, path="/wstest/echo" if i % 2 == 0 else "/wstest/cmd"))
        assert c.get("/site.txt")["data"] == b"the site's own file\n"
    assert len({ws.sid for ws in tunnels}) == 4
    for rnd in range(3):
        for i, ws in enumerate(tunnels):
            if i % 2 == 0:
                ws.send(TEXT, f"stream {ws.sid} round {rnd}".encode())
            else:
                ws.send(PING, f"{ws.sid}/{rnd}".encode())
        sid = c.request("/site.txt")
        for i, ws in enumerate(tunnels):
            if i % 2 == 0:
                assert ws.read() == (TEXT, f"stream {ws.sid} round {rnd}".encode())
            else:
                assert ws.read() == (PONG, f"{ws.sid}/{rnd}".encode())
        c.wait([sid])
        assert c.streams[sid]["data"] == b"the site's own file\n"
    for ws in tunnels:
        ws.send(CLOSE, struct.pack("!H", 1000))
    for ws in tunnels:
        assert ws.read()[0] == CLOSE
        ws.wait_gone()
    c.close()


def test_broadcast_between_http2_tunnels_and_an_http1_websocket(h2c_srv):
    """Members of one channel on two tunnels of one HTTP/2 connection and on an
    HTTP/1.1 connection: a message of any reaches all, so tunnels are written
    from another connection's callback too (outside any event of their own)."""
    ws_sync = pytest.importorskip("websockets.sync.client")
    c = client(h2c_srv)
    a, b = WS(c, path="/wstest/room"), WS(c, path="/wstest/room")
    with ws_sync.connect(f"ws://127.0.0.1:{h2c_srv.port}/wstest/room") as h1:
        time.sleep(0.2 * SLOW)  # joined on open
        h1.send("from http/1.1")
        assert a.read() == (TEXT, b"from http/1.1")
        assert b.read() == (TEXT, b"from http/1.1")
        assert h1.recv(timeout=5 * SLOW) == "from http/1.1"
        a.send(TEXT, b"from a tunnel")
        assert h1.recv(timeout=5 * SLOW) == "from a tunnel"
        assert a.read() == (TEXT, b"from a tunnel")
        assert b.read() == (TEXT, b"from a tunnel")
    c.close()


# ---- back-pressure --------------------------------------------------------------------------


def test_slow_reader_is_held_by_flow_control(srv):
    """The client reads none of the echoes (no WINDOW_UPDATE for the stream):
    the server's window for the stream shuts, its queue stops the echo, and
    the client's own sends stop once the server gives no window back. Then
    the client reads, and every echo arrives, in order."""
    c = client(srv, auto_ack=False)
    ws = WS(c)
    msg = 16000
    sent = 0
    base = vm_rss_kb(srv.proc.pid)
    deadline = time.monotonic() + 20 * SLOW
    c.sock.settimeout(0.3)
    stalled_since = None
    while time.monotonic() < deadline:
        if c.conn.local_flow_control_window(ws.sid) >= msg + 14:
            ws.send(BINARY, sent.to_bytes(4, "big") * (msg // 4))
            sent += 1
            stalled_since = None
            continue
        stalled_since = stalled_since or time.monotonic()
        if time.monotonic() - stalled_since > 1.0 * SLOW:
            break  # no window came back for a second: the server stopped reading
        try:
            c.read_once()
        except AssertionError:
            pass  # timed out: nothing came
    else:
        raise AssertionError(f"the server kept reading: {sent} messages")
    assert not ws.gone(), ws.st
    # about a window kept, our queue's 64 KiB, the package's few messages: not megabytes
    assert sent * msg < 1 << 20, sent
    grown = vm_rss_kb(srv.proc.pid) - base
    assert grown < (32 << 10 if SANITIZED else 8 << 10), f"{grown} KiB"
    # now the client reads: everything comes back, in order
    c.sock.settimeout(10 * SLOW)
    c.auto_ack = True
    got = len(ws.st["data"])
    if got:
        c.conn.acknowledge_received_data(got, ws.sid)
        c.flush()
    for i in range(sent):
        op, payload = ws.read()
        assert op == BINARY and payload[:4] == i.to_bytes(4, "big"), i
    ws.send(TEXT, b"still here")
    assert ws.read() == (TEXT, b"still here")
    c.close()


def test_many_tunnels_come_and_go(h2c_srv):
    """Tunnels opened and ended every way, many times: nothing kept (the ASan
    build checks the frees at the stop)."""
    base = None
    for rnd in range(4):
        c = client(h2c_srv)
        for i in range(20):
            ws = WS(c)
            ws.send(TEXT, b"m" * 100)
            assert ws.read() == (TEXT, b"m" * 100)
            way = i % 3
            if way == 0:
                ws.send(CLOSE, struct.pack("!H", 1000))
                assert ws.read()[0] == CLOSE
                ws.wait_gone()
                c.conn.end_stream(ws.sid)
            elif way == 1:
                c.conn.reset_stream(ws.sid, error_code=8)
            else:
                c.conn.end_stream(ws.sid)
                c.flush()
                ws.wait_gone()
            c.flush()
        assert c.get("/site.txt")["data"] == b"the site's own file\n"
        c.close()
        time.sleep(0.1)
        if rnd == 1:
            base = vm_rss_kb(h2c_srv.proc.pid)
    assert vm_rss_kb(h2c_srv.proc.pid) - base < (16 << 10 if SANITIZED else 4 << 10)
