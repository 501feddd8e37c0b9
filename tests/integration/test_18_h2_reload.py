"""HTTP/2 and a reload (SIGHUP): GOAWAY with the last stream id, the streams in
flight finish, and new connections take the new configuration."""

import hashlib
import os
import signal
import time

import hpack

from conftest import SLOW
from h2util import H2_MARKS, H2Client, h2c_server
from test_18_h2 import frame, raw_h2

pytestmark = H2_MARKS

MIB = 1 << 20


def reload(srv, **site):
    """Rewrite the configuration with `site` changes, SIGHUP, wait for the log line."""
    before = srv.stderr_text().count("configuration reloaded")
    srv.site_conf.update(site)
    srv.write_conf()
    srv.signal(signal.SIGHUP)
    deadline = time.monotonic() + 10 * SLOW
    while srv.stderr_text().count("configuration reloaded") == before:
        assert time.monotonic() < deadline, srv.stderr_text()
        time.sleep(0.02)


class Frames:
    """Frames read from a raw socket: (type, flags, stream, payload)."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def next(self):
        while len(self.buf) < 9 or len(self.buf) < 9 + int.from_bytes(self.buf[:3], "big"):
            data = self.sock.recv(65536)
            if not data:
                return None
            self.buf += data
        n = int.from_bytes(self.buf[:3], "big")
        f = (self.buf[3], self.buf[4], int.from_bytes(self.buf[5:9], "big"), self.buf[9:9 + n])
        self.buf = self.buf[9 + n:]
        return f


def other_root(srv, text):
    root = srv.dir / "htdocs2"
    root.mkdir(exist_ok=True)
    (root / "hello.txt").write_text(text)
    return str(root)


def test_reload_sends_goaway_and_the_stream_in_flight_finishes(make_server):
    srv = h2c_server(make_server)
    big = os.urandom(2 * MIB)
    srv.file("big.bin", big)
    srv.start()
    s = raw_h2(srv)
    block = hpack.Encoder().encode([(":method", "GET"), (":scheme", "http"),
                                    (":authority", "localhost"), (":path", "/big.bin")])
    s.sendall(frame(1, 0x5, 1, block))  # END_STREAM | END_HEADERS
    frames = Frames(s)
    body, goaway, ended = b"", None, False
    # the stream's initial window (65535 bytes) goes out, then the server waits
    while len(body) < 65535:
        ftype, flags, sid, payload = frames.next()
        if ftype == 0:
            body += payload
    reload(srv, DocumentRoot=other_root(srv, "new configuration\n"))
    while goaway is None:
        f = frames.next()
        assert f is not None, "closed without GOAWAY"
        if f[0] == 7:
            goaway = (int.from_bytes(f[3][:4], "big"), int.from_bytes(f[3][4:8], "big"))
    assert goaway == (1, 0)  # last stream 1, NO_ERROR
    inc = (4 * MIB).to_bytes(4, "big")
    s.sendall(frame(8, 0, 1, inc) + frame(8, 0, 0, inc))
    while not ended:
        f = frames.next()
        assert f is not None, "closed before the stream ended"
        if f[0] == 0 and f[2] == 1:
            body += f[3]
            ended = bool(f[1] & 1)
    assert hashlib.sha256(body).digest() == hashlib.sha256(big).digest()
    # its last stream done, the old connection closes
    while frames.next() is not None:
        pass
    s.close()
    c = H2Client(srv.port)
    assert c.get("/hello.txt")["data"] == b"new configuration\n"
    c.close()
    assert srv.proc.poll() is None


def test_reload_closes_an_idle_h2_connection_with_goaway(make_server):
    srv = h2c_server(make_server).start()
    c = H2Client(srv.port)
    assert c.get("/hello.txt")["data"] == b"Hello World!\n"
    reload(srv, DocumentRoot=other_root(srv, "reloaded\n"))
    c.read_until_closed()
    assert c.goaway is not None
    assert c.goaway.error_code == 0 and c.goaway.last_stream_id == 1
    c.close()
    c = H2Client(srv.port)
    assert c.get("/hello.txt")["data"] == b"reloaded\n"
    c.close()


def test_reload_keeps_http1_keepalive_connections_on_an_h2c_listener(make_server):
    srv = h2c_server(make_server).start()
    c = srv.conn()
    assert c.request("GET", "/hello.txt").body == b"Hello World!\n"
    reload(srv, DocumentRoot=other_root(srv, "reloaded\n"))
    assert c.request("GET", "/hello.txt").body == b"reloaded\n"
    c.close()
