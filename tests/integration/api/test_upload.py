"""Streamed request bodies (api->body_stream), through the upload test plugin.

The plugin answers "bytes=N crc32=X max_held=H" for POST /upload and keeps
counters at GET /upload/stats (see tests/plugins/upload.c).
"""

import os
import socket
import threading
import time
import zlib

import pytest

from conftest import BUILD, SANITIZED, SLOW, needs_dlopen, read_head, vm_rss_kb

UPLOAD_SO = BUILD / "tests" / "plugins" / "monkey-upload.so"
MIB = 1 << 20
PIECE = 4096  # the most a piece can pass the window by: one input buffer

pytestmark = needs_dlopen


@pytest.fixture
def uploader(make_server):
    def start(**conf):
        srv = make_server()
        srv.plugins = [str(UPLOAD_SO)]
        srv.set(**{"Workers": 1, "MaxRequestBody": "2G", **conf})
        srv.start()
        return srv

    return start


def connect(srv, timeout=10):
    return socket.create_connection(("127.0.0.1", srv.port), timeout=timeout * SLOW)


def read_response(s):
    """Read one response with a Content-Length body: (status line, headers, body)."""
    f = s.makefile("rb")
    status, headers = read_head(f)
    body = f.read(int(headers.get("content-length", "0")))
    return status, headers, body


def parse_answer(body):
    return dict(kv.split("=") for kv in body.decode().split())


def stats(srv):
    r = srv.get("/upload/stats")
    assert r.status == 200
    return {k: int(v) for k, v in parse_answer(r.body).items()}


class RssPeak:
    """Sample the server's VmRSS every 20 ms while a block runs."""

    def __init__(self, pid):
        self.pid, self.peak, self.stop = pid, vm_rss_kb(pid), threading.Event()

    def __enter__(self):
        def run():
            while not self.stop.wait(0.02):
                self.peak = max(self.peak, vm_rss_kb(self.pid))

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def upload(srv, total, block, chunked=False, query=""):
    """POST `total` bytes (`block` repeated); return (parsed answer, expected crc)."""
    s = connect(srv, timeout=60)
    framing = ("Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}")
    s.sendall(f"POST /upload{query} HTTP/1.1\r\nHost: localhost\r\n{framing}\r\n\r\n".encode())
    crc, left = 0, total
    while left:
        piece = block if left >= len(block) else block[:left]
        s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
        crc = zlib.crc32(piece, crc)
        left -= len(piece)
    if chunked:
        s.sendall(b"0\r\n\r\n")
    status, _, body = read_response(s)
    s.close()
    assert status.startswith("HTTP/1.1 200"), status
    return parse_answer(body), crc


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_large_upload_has_bounded_memory(uploader, chunked, record_property):
    # 1 GiB with Content-Length, 256 MiB chunked (less under the sanitizers).
    total = (1024 if not chunked else 256) * MIB // (8 if SANITIZED else 1)
    srv = uploader()
    block = os.urandom(MIB)
    upload(srv, 4 * MIB, block, chunked)  # warm up: pools and caches in place
    with RssPeak(srv.proc.pid) as rss:
        before = rss.peak
        answer, crc = upload(srv, total, block, chunked)
    growth_kb = rss.peak - before
    record_property("rss_growth_kb", growth_kb)
    print(f"\n{'chunked' if chunked else 'content-length'} upload of {total >> 20} MiB: "
          f"VmRSS {before} kB -> peak {rss.peak} kB (+{growth_kb} kB)")
    assert int(answer["bytes"]) == total
    assert answer["crc32"] == f"{crc:08x}"
    if not SANITIZED:
        assert growth_kb < 16 * 1024


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_slow_consumer_sees_the_whole_body_within_its_window(uploader, chunked):
    srv = uploader()
    block = os.urandom(64 * 1024 + 7)
    answer, crc = upload(srv, 2 * MIB, block, chunked, "?window=16384&slow=2")
    assert int(answer["bytes"]) == 2 * MIB
    assert answer["crc32"] == f"{crc:08x}"
    # Pieces stop once 16 KiB are held; the last one may pass it by a buffer.
    assert 16384 <= int(answer["max_held"]) < 16384 + PIECE


def test_window_stops_reading_the_socket(uploader):
    """A handler that keeps everything: the server reads no further than its
    window while megabytes wait in the socket, and Timeout ends the request
    (the handler is told)."""
    srv = uploader(Timeout="1500ms")
    total = 64 * MIB
    s = connect(srv)
    s.sendall(f"POST /upload?window=32768&hold=1 HTTP/1.1\r\nHost: localhost\r\n"
              f"Content-Length: {total}\r\n\r\n".encode())
    s.setblocking(False)
    block, sent, idle_since = bytes(MIB), 0, None
    while sent < total:
        try:
            sent += s.send(block[: min(MIB, total - sent)])
            idle_since = None
        except BlockingIOError:
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since > 0.3:
                break  # the socket stays full: the server stopped reading
            time.sleep(0.01)
    assert sent < total, "the whole body went in: nothing held the client back"
    st = stats(srv)
    assert 32768 <= st["delivered"] < 32768 + PIECE, (sent, st)
    deadline = time.monotonic() + 10 * SLOW
    while stats(srv)["aborts"] != 1:
        assert time.monotonic() < deadline, "the handler was not told"
        time.sleep(0.05)
    s.setblocking(True)
    s.settimeout(5)
    try:
        assert s.recv(1) == b""  # closed by the server
    except ConnectionResetError:
        pass
    s.close()


@pytest.mark.parametrize("how", ["timeout", "hangup"])
def test_client_stopping_mid_body_tells_the_handler(uploader, how):
    srv = uploader(Timeout="500ms")
    s = connect(srv)
    s.sendall(b"POST /upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000\r\n\r\n"
              + b"x" * 30000)
    deadline = time.monotonic() + 5 * SLOW
    while stats(srv)["delivered"] != 30000:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert stats(srv)["aborts"] == 0
    if how == "hangup":
        s.close()
    else:
        s.settimeout(5 * SLOW)
        assert s.recv(1) == b""  # the server gave up after Timeout
        s.close()
    deadline = time.monotonic() + 5 * SLOW
    while stats(srv)["aborts"] != 1:
        assert time.monotonic() < deadline, "the handler was not told"
        time.sleep(0.02)


def test_continue_is_sent_when_the_handler_asks(uploader):
    srv = uploader()
    s = connect(srv)
    start = time.monotonic()
    s.sendall(b"POST /upload?defer=300 HTTP/1.1\r\nHost: localhost\r\n"
              b"Content-Length: 5\r\nExpect: 100-continue\r\n\r\n")
    f = s.makefile("rb")
    assert f.readline() == b"HTTP/1.1 100 Continue\r\n"
    assert f.readline() == b"\r\n"
    # The handler asked for the body 300 ms after its hook ran; timers never fire early.
    assert time.monotonic() - start >= 0.3
    s.sendall(b"hello")
    status, _, body = read_response(s)
    assert status.startswith("HTTP/1.1 200")
    assert parse_answer(body)["bytes"] == "5"
    assert parse_answer(body)["crc32"] == f"{zlib.crc32(b'hello'):08x}"
    s.close()


def test_no_continue_when_the_handler_answers_without_the_body(uploader):
    srv = uploader()
    s = connect(srv)
    s.sendall(b"POST /upload?reject=1 HTTP/1.1\r\nHost: localhost\r\n"
              b"Content-Length: 5\r\nExpect: 100-continue\r\n\r\n")
    status, headers, _ = read_response(s)
    assert status.startswith("HTTP/1.1 403")
    assert headers["connection"] == "close"  # the body's fate is unknown
    s.close()


def test_body_over_max_request_body_is_413(uploader):
    srv = uploader(MaxRequestBody="1M")
    # Announced too large: refused before any handler asks.
    s = connect(srv)
    s.sendall(b"POST /upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2000000\r\n\r\n")
    status, _, _ = read_response(s)
    assert status.startswith("HTTP/1.1 413")
    s.close()
    assert stats(srv) == {"aborts": 0, "delivered": 0, "max_held": 0}
    # Chunked: found out while streaming; the handler is told.
    s = connect(srv)
    s.sendall(b"POST /upload HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n%s\r\n" % (256 * 1024, b"y" * 256 * 1024)
    try:
        for _ in range(5):
            s.sendall(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass
    status, headers, _ = read_response(s)
    assert status.startswith("HTTP/1.1 413")
    assert headers["connection"] == "close"
    s.close()
    st = stats(srv)
    assert st["aborts"] == 1
    assert st["delivered"] <= MIB


def test_handler_stopping_mid_body_answers_and_closes(uploader):
    srv = uploader()
    s = connect(srv)
    s.sendall(b"POST /upload?stop=10000 HTTP/1.1\r\nHost: localhost\r\n"
              b"Content-Length: 50000\r\n\r\n" + b"z" * 20000)
    status, headers, _ = read_response(s)
    assert status.startswith("HTTP/1.1 403")
    assert headers["connection"] == "close"
    s.close()
    assert stats(srv)["aborts"] == 0  # it answered itself: no abort follows
