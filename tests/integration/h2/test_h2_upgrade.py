"""`Upgrade: h2c` from HTTP/1.1 on h2c listeners (RFC 7540 section 3.2): the
first request asks, gets 101 and its answer on stream 1 over HTTP/2; a request
with a body, or on a listener without h2c, is answered over HTTP/1.1."""

import hashlib
import os
import socket
import subprocess

import hpack

from conftest import SLOW
from h2util import H2_MARKS, h2c_server, needs_tool
from test_h2 import frame
from test_h2_reload import Frames

pytestmark = H2_MARKS

MIB = 1 << 20
# SETTINGS_MAX_CONCURRENT_STREAMS 100, SETTINGS_INITIAL_WINDOW_SIZE 65535
UPGRADE = (b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
           b"HTTP2-Settings: AAMAAABkAAQAAP__\r\n")


def read_http1_head(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = s.recv(65536)
        assert data, buf
        buf += data
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head.decode(), rest


def read_streams(frames, sids, dec):
    """{sid: (headers, body)} of streams sids, each read to END_STREAM; the
    header blocks decoded in order with the connection's decoder dec."""
    got = {sid: [None, b""] for sid in sids}
    ended = set()
    while ended != set(sids):
        f = frames.next()
        assert f is not None, "closed before streams %s ended" % (set(sids) - ended)
        ftype, flags, sid, payload = f
        if ftype == 1:
            headers = dict(dec.decode(payload, raw=True))
            if sid in got:
                got[sid][0] = headers
        elif ftype == 0 and sid in got:
            got[sid][1] += payload
        if ftype in (0, 1) and flags & 1 and sid in got:
            ended.add(sid)
    return {sid: tuple(v) for sid, v in got.items()}


@needs_tool("curl")
def test_curl_http2_upgrades_and_gets_the_files_byte_for_byte(make_server):
    srv = h2c_server(make_server)
    big = os.urandom(MIB)
    srv.file("big.bin", big)
    srv.start()
    base = "http://127.0.0.1:%d" % srv.port
    p = subprocess.run(["curl", "-sS", "-v", "--http2", "--max-time", str(int(20 * SLOW)),
                        "-o", "-", base + "/hello.txt"], capture_output=True, timeout=30 * SLOW)
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"Hello World!\n"
    assert b"< HTTP/1.1 101 Switching Protocols" in p.stderr
    assert b"< HTTP/2 200" in p.stderr
    p = subprocess.run(["curl", "-sS", "--http2", "--max-time", str(int(20 * SLOW)),
                        "-w", "%{http_version}", "-o", str(srv.dir / "got.bin"), base + "/big.bin"],
                       capture_output=True, timeout=30 * SLOW)
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"2"
    assert hashlib.sha256((srv.dir / "got.bin").read_bytes()).digest() == \
        hashlib.sha256(big).digest()


def test_raw_upgrade_then_more_streams_on_the_connection(make_server):
    srv = h2c_server(make_server).start()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10 * SLOW)
    s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\nAccept: text/plain\r\n" + UPGRADE +
              b"\r\n")
    head, rest = read_http1_head(s)
    lines = head.split("\r\n")
    assert lines[0] == "HTTP/1.1 101 Switching Protocols"
    assert "upgrade: h2c" in [ln.lower() for ln in lines[1:]]
    # the client's preface, then its request on stream 3
    block = hpack.Encoder().encode([(":method", "GET"), (":scheme", "http"),
                                    (":authority", "localhost"), (":path", "/nope")])
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0) + frame(1, 0x5, 3, block))
    frames = Frames(s)
    frames.buf = rest
    dec = hpack.Decoder()
    first = frames.next()
    assert first[0] == 4 and not first[1] & 1  # the server's SETTINGS come first
    got = read_streams(frames, [1, 3], dec)
    assert got[1][0][b":status"] == b"200"
    assert got[1][1] == b"Hello World!\n"
    assert got[3][0][b":status"] == b"404"
    s.close()


def test_upgrade_of_a_head_request(make_server):
    srv = h2c_server(make_server).start()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10 * SLOW)
    s.sendall(b"HEAD /hello.txt HTTP/1.1\r\nHost: localhost\r\n" + UPGRADE + b"\r\n")
    head, rest = read_http1_head(s)
    assert head.startswith("HTTP/1.1 101 ")
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0))
    frames = Frames(s)
    frames.buf = rest
    dec = hpack.Decoder()
    headers, body = read_streams(frames, [1], dec)[1]
    assert headers[b":status"] == b"200" and headers[b"content-length"] == b"13"
    assert body == b""
    s.close()


def raw_http1(srv, data):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10 * SLOW)
    s.sendall(data)
    head, rest = read_http1_head(s)
    s.close()
    return head.split("\r\n")[0]


def test_request_with_a_body_is_answered_over_http1(make_server):
    srv = h2c_server(make_server).start()
    status = raw_http1(srv, b"POST /hello.txt HTTP/1.1\r\nHost: localhost\r\n"
                            b"Content-Length: 5\r\n" + UPGRADE + b"\r\nhello")
    assert status.startswith("HTTP/1.1 ") and not status.startswith("HTTP/1.1 101")


def test_no_upgrade_without_h2c_or_with_bad_settings(make_server):
    srv = make_server()
    srv.file("hello.txt", "Hello World!\n")
    srv.start()
    assert raw_http1(srv, b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\n" + UPGRADE +
                     b"\r\n") == "HTTP/1.1 200 OK"
    srv.stop()
    srv = h2c_server(make_server).start()
    bad = UPGRADE.replace(b"AAMAAABkAAQAAP__", b"AAMA*ABk")
    assert raw_http1(srv, b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\n" + bad +
                     b"\r\n") == "HTTP/1.1 200 OK"
