"""Streaming responses (api->stream_*), through the stream test plugin."""

import socket
import time

import pytest

from conftest import BUILD, SANITIZED, Conn, needs_dlopen, read_head, vm_rss_kb

STREAM_SO = BUILD / "tests" / "plugins" / "monkey-stream.so"

pytestmark = needs_dlopen


@pytest.fixture
def streamer(make_server):
    srv = make_server()
    srv.plugins = [str(STREAM_SO)]
    srv.set(Workers=1)
    srv.start()
    return srv


def open_stream(srv, query, version="HTTP/1.1", rcvbuf=None):
    """Send GET /stream?query; return (socket, buffered reader, status line, headers)."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.sendall(f"GET /stream?{query} {version}\r\nHost: localhost\r\n\r\n".encode())
    f = s.makefile("rb")
    status, headers = read_head(f)
    return s, f, status, headers


def read_chunks(f, piece, on_chunk=None):
    """Decode a chunked body, checking that chunk k is piece bytes of 'a' + k % 26."""
    total, k = 0, 0
    while True:
        size = int(f.readline().split(b";")[0], 16)
        if size == 0:
            break
        data = f.read(size)
        assert len(data) == size
        assert data == bytes([97 + k % 26]) * size, f"chunk {k} corrupt"
        assert f.read(2) == b"\r\n"
        total += size
        k += 1
        if on_chunk:
            on_chunk(k)
    trailers = []
    while True:
        line = f.readline()
        if line == b"\r\n":
            return total, trailers
        trailers.append(line.decode().strip())


def test_stream_chunked_with_trailer(streamer):
    s, f, status, headers = open_stream(streamer, "bytes=100000&piece=1000&trailer=1")
    assert status.startswith("HTTP/1.1 200")
    assert headers["transfer-encoding"] == "chunked"
    assert "content-length" not in headers
    total, trailers = read_chunks(f, 1000)
    assert total == 100000
    assert trailers == ["X-Stream-Bytes: 100000"]
    # keep-alive: the connection serves another request
    assert get_small(f, s, "bytes=5") == 5
    s.close()


def test_stream_http10_is_close_delimited(streamer):
    s, f, status, headers = open_stream(streamer, "bytes=70000&piece=7000", version="HTTP/1.0")
    assert status.startswith("HTTP/1.1 200")
    assert "transfer-encoding" not in headers and "content-length" not in headers
    assert headers["connection"] == "close"
    body = f.read()  # until the server closes
    assert len(body) == 70000
    assert body == b"".join(bytes([97 + k % 26]) * 7000 for k in range(10))
    s.close()


def test_stream_async_pieces_wake_the_connection(streamer):
    s, f, status, headers = open_stream(streamer, "bytes=50000&piece=5000&async=1")
    assert status.startswith("HTTP/1.1 200")
    assert read_chunks(f, 5000) == (50000, [])
    s.close()


@pytest.mark.parametrize("query,piece", [
    ("bytes=100000&piece=1000&trailer=1", 1000),  # many pieces under the mark
    ("bytes=1000000&piece=40000", 40000),         # the mark reached: proceed
    ("bytes=50000&piece=5000&async=1", 5000),     # from later events
])
def test_stream_buffer_and_commit(streamer, query, piece):
    # the pieces are filled in buffers of the queue (api->stream_buffer)
    # and queued as they are (api->stream_commit); the plugin checks the
    # contract on the way (a commit without a buffer or past it, a buffer
    # replaced, released unused, none over the mark) and ends short if broken
    s, f, status, headers = open_stream(streamer, query + "&buffer=1")
    assert status.startswith("HTTP/1.1 200")
    total, trailers = read_chunks(f, piece)
    assert total == int(query.split("&")[0].split("=")[1])
    assert trailers == (["X-Stream-Bytes: 100000"] if "trailer" in query else [])
    assert get_small(f, s, "bytes=5&buffer=1") == 5  # the connection goes on
    s.close()
    assert "buffer contract" not in streamer.stderr_text()


def get_small(f, s, query):
    """GET /stream?query on an open connection; return the decoded body size."""
    s.sendall(f"GET /stream?{query} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    assert f.readline().startswith(b"HTTP/1.1 200")
    while f.readline() != b"\r\n":
        pass
    return read_chunks(f, 16384)[0]


def test_stream_head_sends_no_body(streamer):
    c = Conn(streamer.port)
    c.send(b"HEAD /stream?bytes=1000 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    r = c.read_response(head_request=True)
    assert r.status == 200
    assert r.header("Transfer-Encoding") == "chunked"
    # No body bytes follow: the next response starts right after the head.
    c.send(b"GET /a-missing-file HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert c.read_response().status == 404
    c.close()


@pytest.mark.parametrize("version", ["HTTP/1.1", "HTTP/1.0"])
def test_stream_of_known_length(streamer, version):
    # api->stream_length: Content-Length instead of chunked or the close, the
    # connection kept (an HTTP/1.0 client that asks for it too), a byte past
    # the length refused (the plugin checks it and logs "length contract")
    c = Conn(streamer.port)
    keep = "Connection: keep-alive\r\n" if version == "HTTP/1.0" else ""
    for _ in range(2):
        c.send(f"GET /stream?bytes=300000&piece=7000&length=1 {version}\r\nHost: localhost\r\n"
               f"{keep}\r\n".encode())
        r = c.read_response()
        assert r.status == 200
        assert r.header("Content-Length") == "300000"
        assert r.header("Transfer-Encoding") is None and r.header("Connection") != "close"
        assert r.body == b"".join(bytes([97 + k % 26]) * 7000 for k in range(43))[:300000]
    c.send(b"HEAD /stream?bytes=300000&length=1 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    r = c.read_response(head_request=True)
    assert r.status == 200 and r.header("Content-Length") == "300000"
    c.send(b"GET /a-missing-file HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert c.read_response().status == 404  # no body bytes followed the HEAD's head
    c.close()
    assert "length contract" not in streamer.stderr_text()


def test_stream_client_gone_mid_body(streamer):
    s, f, status, _ = open_stream(streamer, "bytes=100000000")
    assert status.startswith("HTTP/1.1 200")
    f.read(100000)
    s.close()
    time.sleep(0.2)
    # The server released the stream (proceed(NULL)) and still serves.
    s = socket.create_connection(("127.0.0.1", streamer.port), timeout=10)
    assert get_small(s.makefile("rb"), s, "bytes=10") == 10
    s.close()


def test_stream_to_slow_reader_keeps_memory_bounded(streamer):
    """1 GiB through a chunked stream to a reader slower than the server:
    the queue stays under its high-water mark, so RSS must not grow with the
    body."""
    size = 1 << 30
    pid = streamer.proc.pid
    s, f, status, _ = open_stream(streamer, f"bytes={size}&piece=16384", rcvbuf=65536)
    assert status.startswith("HTTP/1.1 200")
    time.sleep(0.2)  # let the socket buffers fill
    base = vm_rss_kb(pid)
    peak = [base]

    def slow(k):
        if k % 64 == 0:  # every MiB: a pause, and a look at the server
            peak[0] = max(peak[0], vm_rss_kb(pid))
            time.sleep(0.001)

    total, _ = read_chunks(f, 16384, slow)
    s.close()
    assert total == size
    growth_kb = peak[0] - base
    print(f"VmRSS at start {base} KiB, peak {peak[0]} KiB, growth {growth_kb} KiB")
    # ASan keeps freed blocks in its quarantine (256 MiB by default), so
    # there RSS measures the sanitizer, not the server: check the bytes only.
    if not SANITIZED:
        assert growth_kb < 16 * 1024


HINT1 = b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
HINT2 = b"HTTP/1.1 103 Early Hints\r\nLink: </b.js>; rel=preload\r\nX-Hint: 2\r\n\r\n"


@pytest.mark.parametrize("version", ["HTTP/1.1", "HTTP/1.0"])
def test_interim_answers_before_the_head(streamer, version):
    # api->interim: bad statuses and fields refused, two 103s before the
    # head over HTTP/1.1, none (MK_DECLINED) to HTTP/1.0, and MK_ERR once the
    # head is out (the plugin checks each and logs "interim contract")
    c = Conn(streamer.port)
    c.send(f"GET /stream?bytes=5&hints=1 {version}\r\nHost: localhost\r\n"
           f"Connection: close\r\n\r\n".encode())
    data = b""
    while True:
        got = c.sock.recv(65536)
        if not got:
            break
        data += got
    c.close()
    if version == "HTTP/1.1":
        assert data.startswith(HINT1 + HINT2 + b"HTTP/1.1 200 OK\r\n"), data
    else:
        assert data.startswith(b"HTTP/1.1 200 OK\r\n") and b" 103 " not in data, data
    assert data.endswith(b"aaaaa" if version == "HTTP/1.0" else b"5\r\naaaaa\r\n0\r\n\r\n")
    assert "interim contract" not in streamer.stderr_text()


def test_interim_answers_over_http2(make_server):
    from h2util import H2_MARKS, H2Client, h2c_server
    for mark in H2_MARKS:
        if mark.args[0]:
            pytest.skip(mark.kwargs["reason"])
    srv = h2c_server(make_server)
    srv.plugins = [str(STREAM_SO)]
    srv.start()
    h = H2Client(srv.port)
    sids = [h.request("/stream?bytes=5&hints=1") for _ in range(3)]
    h.wait(sids)
    for sid in sids:
        st = h.streams[sid]
        assert st["informational"] == [{":status": "103", "link": "</a.css>; rel=preload"},
                                       {":status": "103", "link": "</b.js>; rel=preload",
                                        "x-hint": "2"}]
        assert st["headers"][":status"] == "200" and st["data"] == b"aaaaa"
    h.close()
    assert "interim contract" not in srv.stderr_text()
