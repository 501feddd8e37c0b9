"""What the HTTP/2 tests share: whether the server was built with HTTP/2, a
server with an h2c (and optionally a TLS) listener, a small blocking
client on Python's `h2` that can also misbehave on purpose, a WebSocket
on one of its streams (RFC 8441), and raw frames for what no client
library would send."""

import os
import shutil
import socket
import ssl
import struct

import pytest

from conftest import BUILD, SLOW

try:
    import h2.config
    import h2.connection
    import h2.events
    import h2.settings
except ImportError:  # tools/deps.sh test installs it
    h2 = None


def built_with_h2():
    cache = BUILD / "CMakeCache.txt"
    if not cache.exists():
        return False
    text = cache.read_text()
    return "MK_H2:BOOL=ON" in text and "NGHTTP2_FOUND:INTERNAL=1" in text


H2_MARKS = [
    pytest.mark.skipif(not built_with_h2(), reason="built without HTTP/2 (MK_H2 off)"),
    pytest.mark.skipif(h2 is None, reason="no Python h2 module"),
]


def skip_without_h2():
    """Inside a test: skip it where H2_MARKS would (no HTTP/2 in the build, no h2 module)."""
    for mark in H2_MARKS:
        if mark.args[0]:
            pytest.skip(mark.kwargs["reason"])


def needs_tool(name):
    return pytest.mark.skipif(shutil.which(name) is None, reason=f"no {name}")


def h2c_server(make_server, **conf):
    """A server whose listener also speaks cleartext HTTP/2 (prior knowledge)."""
    srv = make_server()
    srv.set(Listen=f"127.0.0.1:{srv.port} h2c", Workers=1, **conf)
    srv.file("hello.txt", "Hello World!\n")
    return srv


class H2Client:
    """One HTTP/2 connection. Responses are collected per stream in
    self.streams[id] = {"headers": dict, "data": bytes, "ended": bool,
    "reset": error code or None}; connection-level events in self.events.
    `preamble`: bytes sent before the connection preface (a PROXY protocol
    header, as a load balancer sends it)."""

    def __init__(self, port, sock=None, settings=None, auto_ack=True, timeout=10.0,
                 preamble=b""):
        self.sock = sock or socket.create_connection(("127.0.0.1", port), timeout=timeout * SLOW)
        self.scheme = "https" if isinstance(self.sock, ssl.SSLSocket) else "http"
        self.sock.settimeout(timeout * SLOW)
        cfg = h2.config.H2Configuration(client_side=True, header_encoding="utf-8",
                                        validate_outbound_headers=False,
                                        validate_inbound_headers=False,
                                        normalize_outbound_headers=False)
        self.conn = h2.connection.H2Connection(config=cfg)
        self.conn.initiate_connection()
        if settings:
            self.conn.update_settings(settings)
        self.auto_ack = auto_ack
        self.streams = {}
        self.events = []
        self.goaway = None
        self.closed = False
        if preamble:
            self.sock.sendall(preamble)
        self.flush()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def request(self, path, method="GET", headers=None, body=None, end=True,
                authority="localhost"):
        sid = self.conn.get_next_available_stream_id()
        hdrs = [(":method", method), (":scheme", self.scheme), (":authority", authority),
                (":path", path)] + list(headers or [])
        self.conn.send_headers(sid, hdrs, end_stream=end and body is None)
        self.streams[sid] = {"headers": {}, "data": b"", "ended": False, "reset": None}
        if body is not None:
            self.send_body(sid, body, end=end)
        self.flush()
        return sid

    def send_body(self, sid, body, end=True):
        """Send as much of body as the windows allow; wait for window updates."""
        view = memoryview(body)
        while view:
            window = min(self.conn.local_flow_control_window(sid),
                         self.conn.max_outbound_frame_size)
            if window <= 0:
                self.read_once()
                continue
            n = min(window, len(view))
            self.conn.send_data(sid, view[:n].tobytes())
            view = view[n:]
            self.flush()
        if end:
            self.conn.end_stream(sid)
            self.flush()

    def read_once(self):
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            raise AssertionError("timed out waiting for the server")
        if not data:
            self.closed = True
            return False
        for ev in self.conn.receive_data(data):
            self.handle(ev)
        self.flush()
        return True

    def handle(self, ev):
        self.events.append(ev)
        if isinstance(ev, h2.events.ResponseReceived):
            self.streams[ev.stream_id]["headers"] = dict(ev.headers)
        elif isinstance(ev, h2.events.InformationalResponseReceived):
            self.streams[ev.stream_id].setdefault("informational", []).append(dict(ev.headers))
        elif isinstance(ev, h2.events.TrailersReceived):
            self.streams[ev.stream_id]["trailers"] = dict(ev.headers)
        elif isinstance(ev, h2.events.DataReceived):
            st = self.streams[ev.stream_id]
            st["data"] += ev.data
            if self.auto_ack and ev.flow_controlled_length:
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            self.streams[ev.stream_id]["ended"] = True
        elif isinstance(ev, h2.events.StreamReset):
            if ev.stream_id in self.streams:
                self.streams[ev.stream_id]["reset"] = ev.error_code
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.goaway = ev

    def wait(self, sids, allow_close=False):
        """Read until every stream of sids ended or was reset."""
        def done():
            return all(self.streams[s]["ended"] or self.streams[s]["reset"] is not None
                       for s in sids)
        while not done():
            if not self.read_once():
                if allow_close:
                    return
                raise AssertionError(f"connection closed; streams {self.streams}")

    def get(self, path, headers=None):
        sid = self.request(path, headers=headers)
        self.wait([sid])
        return self.streams[sid]

    def read_until_closed(self):
        try:
            while self.read_once():
                pass
        except (ConnectionResetError, AssertionError):
            self.closed = True

    def close(self):
        self.sock.close()


# ---- WebSocket over a stream (RFC 8441) ---------------------------------------------

def ws_client_frame(opcode, payload=b"", fin=True):
    """A client's WebSocket frame: masked, as RFC 6455 5.3 asks (RFC 8441 keeps the framing)."""
    n = len(payload)
    b0 = (0x80 if fin else 0) | opcode
    if n < 126:
        head = struct.pack("!BB", b0, 0x80 | n)
    elif n < 65536:
        head = struct.pack("!BBH", b0, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", b0, 0x80 | 127, n)
    key = os.urandom(4)
    mask = (key * (n // 4 + 1))[:n]
    return head + key + (int.from_bytes(payload, "big") ^ int.from_bytes(mask, "big")).to_bytes(
        n, "big") if n else head + key


class H2WebSocket:
    """A WebSocket on a stream of c (an H2Client), opened with an extended
    CONNECT to path; the constructor returns once the answer's head came
    (status) or the stream ended."""

    def __init__(self, c, path, protocol="websocket", headers=()):
        self.c = c
        self.sid = c.conn.get_next_available_stream_id()
        hdrs = [(":method", "CONNECT"), (":protocol", protocol), (":scheme", c.scheme),
                (":path", path), (":authority", "localhost"),
                ("sec-websocket-version", "13")] + list(headers)
        c.conn.send_headers(self.sid, hdrs)
        c.streams[self.sid] = {"headers": {}, "data": b"", "ended": False, "reset": None}
        c.flush()
        self.off = 0
        while not self.st["headers"] and not self.gone():
            assert c.read_once(), "connection closed"

    @property
    def st(self):
        return self.c.streams[self.sid]

    @property
    def status(self):
        return self.st["headers"].get(":status")

    def gone(self):
        return self.st["ended"] or self.st["reset"] is not None

    def send(self, opcode, payload=b"", fin=True):
        self.c.send_body(self.sid, ws_client_frame(opcode, payload, fin), end=False)

    def _need(self, n):
        while len(self.st["data"]) - self.off < n:
            if self.gone():
                raise EOFError(f"stream over: {self.st['reset']}")
            assert self.c.read_once(), "connection closed"

    def read(self):
        """(opcode, payload) of the peer's next frame (never masked)."""
        self._need(2)
        d = self.st["data"]
        b0, b1 = d[self.off], d[self.off + 1]
        assert not b1 & 0x80, "the peer masked a frame"
        n, hl = b1 & 0x7F, 2
        if n == 126:
            self._need(4)
            n, hl = struct.unpack("!H", self.st["data"][self.off + 2:self.off + 4])[0], 4
        elif n == 127:
            self._need(10)
            n, hl = struct.unpack("!Q", self.st["data"][self.off + 2:self.off + 10])[0], 10
        self._need(hl + n)
        payload = self.st["data"][self.off + hl:self.off + hl + n]
        self.off += hl + n
        if self.off > 1 << 20:  # what the client keeps stays bounded
            self.st["data"] = self.st["data"][self.off:]
            self.off = 0
        return b0 & 0x0F, payload

    def wait_gone(self):
        while not self.gone():
            assert self.c.read_once(), "connection closed"


# ---- raw frames -------------------------------------------------------------------

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(ftype, flags, sid, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + sid.to_bytes(4, "big") + \
        payload


def raw_h2(srv, port=None):
    """A connection that sent the preface and an empty SETTINGS frame."""
    s = socket.create_connection(("127.0.0.1", port or srv.port), timeout=10 * SLOW)
    s.sendall(PREFACE + frame(4, 0, 0))
    return s


def read_frames(s, until):
    """Read frames until until(type, flags, sid, payload) is true: that
    frame, or None at the close (or a reset, or the socket's timeout)."""
    buf = b""
    while True:
        try:
            data = s.recv(65536)
        except (ConnectionResetError, TimeoutError):
            return None
        if not data:
            return None
        buf += data
        while len(buf) >= 9:
            n = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + n:
                break
            f = (buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7fffffff, buf[9:9 + n])
            buf = buf[9 + n:]
            if until(*f):
                return f


def read_goaway(s):
    """Read frames until GOAWAY or the close: its error code, or None."""
    f = read_frames(s, lambda t, fl, sid, p: t == 7)
    return None if f is None else int.from_bytes(f[3][4:8], "big")
