"""HTTP/2 (server/proto/h2.c): negotiation, streams as requests, bodies, flow control.

Cleartext HTTP/2 by prior knowledge on an h2c listener, h2 by ALPN over TLS
(with the tls plugin), checked with Python's h2, curl and nghttp.
"""

import hashlib
import os
import subprocess
import zlib

import pytest

from conftest import BUILD, SLOW, needs_dlopen
from h2util import (H2_MARKS, H2Client, frame, h2, h2c_server, needs_tool, raw_h2,
                    read_goaway)
from rangeutil import check_parts
from tlsutil import TLS_MARKS, tls_connect, tls_server

pytestmark = H2_MARKS

MIB = 1 << 20
UPLOAD_SO = BUILD / "tests" / "plugins" / "monkey-upload.so"
STREAM_SO = BUILD / "tests" / "plugins" / "monkey-stream.so"


def curl(*args):
    p = subprocess.run(["curl", "-s", "-S", "--max-time", str(int(20 * SLOW)), *args],
                       capture_output=True, timeout=30 * SLOW)
    assert p.returncode == 0, p.stderr
    return p.stdout


# ---- negotiation -----------------------------------------------------------


@needs_tool("curl")
def test_h2c_prior_knowledge_and_http1_on_the_same_listener(make_server):
    srv = h2c_server(make_server).start()
    out = curl("--http2-prior-knowledge", "-D", "-", f"http://127.0.0.1:{srv.port}/hello.txt")
    head, body = out.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/2 200")
    assert b"content-length: 13" in head and b"server: Monkey" in head
    assert body == b"Hello World!\n"
    # HTTP/1.1 is still served there.
    r = srv.get("/hello.txt")
    assert r.status == 200 and r.body == b"Hello World!\n"


def test_plain_listener_without_h2c_does_not_speak_http2(make_server):
    srv = make_server()
    srv.file("hello.txt", "x")
    srv.start()
    data = srv.raw(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 505 ") or data.startswith(b"HTTP/1.1 400 ")


def test_listen_h2c_options_are_checked(make_server):
    srv = make_server()
    srv.set(Listen=f"127.0.0.1:{srv.port} plain h2c extra")
    err = srv.run_expect_failure(["-t"])
    assert "monkey.conf:2: Listen: the transport 'plain' takes no options (except h2c)" in err
    srv.set(Listen=f"127.0.0.1:{srv.port} plain h2c")
    srv.write_conf()
    p = subprocess.run([str(BUILD / "bin" / "monkey"), "-t", "-c", str(srv.conf)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("mark", [0])
def test_h2_over_tls_by_alpn(make_server, mark):
    for m in TLS_MARKS:
        if m.args[0]:
            pytest.skip(m.kwargs["reason"])
    srv = tls_server(make_server).start()
    s = tls_connect(srv.port, sni="localhost", alpn=["h2", "http/1.1"])
    assert s.selected_alpn_protocol() == "h2"
    c = H2Client(srv.port, sock=s)
    st = c.get("/hello.txt")
    assert st["headers"][":status"] == "200"
    assert st["data"] == b"Hello World!\n"
    c.close()
    # A client that offers only http/1.1 gets HTTP/1.1.
    s = tls_connect(srv.port, sni="localhost", alpn=["http/1.1"])
    assert s.selected_alpn_protocol() == "http/1.1"
    s.close()


# ---- streams as requests ----------------------------------------------------


def test_hundred_concurrent_streams_small_and_large_files(make_server):
    srv = h2c_server(make_server)
    big = os.urandom(MIB)
    srv.file("big.bin", big)
    small = {f"s{i}.txt": f"small file {i}\n".encode() * (i + 1) for i in range(10)}
    for name, content in small.items():
        srv.file(name, content)
    srv.start()
    c = H2Client(srv.port)
    want = {}
    for i in range(100):
        name = "big.bin" if i % 10 == 0 else f"s{i % 10}.txt"
        want[c.request("/" + name)] = big if name == "big.bin" else small[name]
    c.wait(list(want))
    for sid, content in want.items():
        st = c.streams[sid]
        assert st["headers"][":status"] == "200", st["headers"]
        assert int(st["headers"]["content-length"]) == len(content)
        assert st["data"] == content, f"stream {sid}: {len(st['data'])} of {len(content)} bytes"
    c.close()


@needs_tool("nghttp")
def test_nghttp_fetches_many_files_over_one_connection(make_server):
    srv = h2c_server(make_server)
    big = os.urandom(MIB)
    srv.file("big.bin", big)
    srv.start()
    urls = [f"http://127.0.0.1:{srv.port}/big.bin?{i}" for i in range(4)] + \
        [f"http://127.0.0.1:{srv.port}/hello.txt?{i}" for i in range(20)]
    p = subprocess.run(["nghttp", "-n", "-s", *urls], capture_output=True, text=True,
                       timeout=30 * SLOW)
    assert p.returncode == 0, p.stderr
    # one line per response in the statistics: all 24 answered 200
    assert p.stdout.count(" 200 ") == 24, p.stdout


def test_ranges_and_conditionals(make_server):
    srv = h2c_server(make_server)
    data = bytes(range(256)) * 40
    srv.file("r.bin", data)
    srv.start()
    c = H2Client(srv.port)
    st = c.get("/r.bin", headers=[("range", "bytes=100-199")])
    assert st["headers"][":status"] == "206"
    assert st["headers"]["content-range"] == f"bytes 100-199/{len(data)}"
    assert st["data"] == data[100:200]
    etag = c.get("/r.bin")["headers"]["etag"]
    st = c.get("/r.bin", headers=[("if-none-match", etag)])
    assert st["headers"][":status"] == "304" and st["data"] == b""
    st = c.get("/missing")
    assert st["headers"][":status"] == "404"
    # HEAD: the length, no body
    sid = c.request("/r.bin", method="HEAD")
    c.wait([sid])
    assert c.streams[sid]["headers"]["content-length"] == str(len(data))
    assert c.streams[sid]["data"] == b""
    c.close()


@pytest.mark.parametrize("transport", ["h2c", "tls"])
def test_several_ranges_are_a_multipart_answer(make_server, transport):
    """206 multipart/byteranges over HTTP/2: a small body read into the
    frames, a large one's parts queued as file ranges (h2c: sendfile; TLS:
    read into whole records), under a small window that cuts the frames
    anywhere, beside other streams; Content-Length exact; HEAD and the
    sets answered whole as over HTTP/1.1."""
    if transport == "tls":
        for m in TLS_MARKS:
            if m.args[0]:
                pytest.skip(m.kwargs["reason"])
        srv = tls_server(make_server)
        srv.site_extra += "    KTLS off\n"  # frames read into whole records
    else:
        srv = h2c_server(make_server)
    big = os.urandom(MIB)
    small = b"0123456789"
    srv.file("big.bin", big)
    srv.file("digits.txt", small)
    srv.start()

    def client(**kw):
        if transport == "tls":
            s = tls_connect(srv.port, sni="localhost", alpn=["h2"])
            return H2Client(srv.port, sock=s, **kw)
        return H2Client(srv.port, **kw)

    big_ranges = [(0, 99), (5000, 300000), (300002, 300002), (MIB - 40000, MIB - 1)]
    big_spec = "bytes=0-99,5000-300000,300002-300002,-40000"
    for settings in (None, {h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 777}):
        c = client(settings=settings)
        sids = {c.request("/digits.txt", headers=[("range", "bytes=0-1,3-4,-2")]):
                (small, [(0, 1), (3, 4), (8, 9)], "text/plain; charset=utf-8"),
                c.request("/big.bin", headers=[("range", big_spec)]):
                (big, big_ranges, "application/octet-stream"),
                c.request("/big.bin"): (big, None, None),
                c.request("/big.bin", headers=[("range", "bytes=10-19,30-39")]):
                (big, [(10, 19), (30, 39)], "application/octet-stream")}
        c.wait(list(sids))
        for sid, (data, ranges, ptype) in sids.items():
            st = c.streams[sid]
            assert int(st["headers"]["content-length"]) == len(st["data"])
            if ranges is None:
                assert st["headers"][":status"] == "200" and st["data"] == data
                continue
            assert st["headers"][":status"] == "206", st["headers"]
            assert "content-range" not in st["headers"]
            check_parts(st["headers"]["content-type"], st["data"], data, ranges, ptype)
        c.close()
    c = client()
    etag = c.get("/digits.txt")["headers"]["etag"]
    st = c.get("/digits.txt", headers=[("range", "bytes=0-1,3-4"), ("if-range", etag)])
    assert st["headers"][":status"] == "206"
    check_parts(st["headers"]["content-type"], st["data"], small, [(0, 1), (3, 4)],
                "text/plain; charset=utf-8")
    for headers in ([("range", "bytes=0-1,3-4"), ("if-range", '"stale"')],
                    [("range", "bytes=3-4,0-1")], [("range", "bytes=0-4,2-3")]):
        st = c.get("/digits.txt", headers=headers)
        assert st["headers"][":status"] == "200" and st["data"] == small, headers
    st = c.get("/digits.txt", headers=[("range", "bytes=20-,30-40")])
    assert st["headers"][":status"] == "416"
    assert st["headers"]["content-range"] == "bytes */10"
    sid = c.request("/big.bin", method="HEAD", headers=[("range", big_spec)])
    c.wait([sid])
    assert c.streams[sid]["headers"][":status"] == "200"
    assert c.streams[sid]["headers"]["content-length"] == str(MIB)
    assert c.streams[sid]["data"] == b""
    c.close()


def test_bad_request_head_is_answered_on_its_stream(make_server):
    srv = h2c_server(make_server).start()
    c = H2Client(srv.port)
    sid = c.request("/../../etc/passwd")
    c.wait([sid])
    assert c.streams[sid]["headers"][":status"] == "400"
    # the connection goes on
    assert c.get("/hello.txt")["data"] == b"Hello World!\n"
    c.close()


def raw_request(c, hdrs, end=True):
    """A request with exactly these fields (no :authority added)."""
    sid = c.conn.get_next_available_stream_id()
    c.conn.send_headers(sid, hdrs, end_stream=end)
    c.streams[sid] = {"headers": {}, "data": b"", "ended": False, "reset": None}
    c.flush()
    return sid


def test_malformed_requests_are_reset_and_the_connection_goes_on(make_server):
    """RFC 9113 section 8.1.1: h2.c checks what nghttp2's HTTP checks (off)
    used to: each of these requests is reset with PROTOCOL_ERROR (1)."""
    srv = h2c_server(make_server).start()
    c = H2Client(srv.port)
    base = [(":method", "GET"), (":scheme", "http"), (":path", "/hello.txt")]
    auth = [(":authority", "localhost")]
    malformed = [
        base,  # neither :authority nor Host
        [(":method", "GET"), (":scheme", "http")] + auth,  # no :path
        [(":method", "GET"), (":path", "/hello.txt")] + auth,  # no :scheme
        [(":scheme", "http"), (":path", "/hello.txt")] + auth,  # no :method
        base + auth + [(":method", "GET")],  # a pseudo-header twice, after the others
        base + [("user-agent", "t"), (":authority", "localhost")],  # pseudo after regular
        base + auth + [(":protocol", "websocket")],  # extended CONNECT is not offered
        base + auth + [(":status", "200")],  # a response pseudo-header
        [(":method", "GET"), (":scheme", "http"), (":path", "")] + auth,  # empty :path
        [(":method", "GET"), (":scheme", "http"), (":path", "hello.txt")] + auth,
        [(":method", "GET"), (":scheme", "1x"), (":path", "/hello.txt")] + auth,
        base + auth + [("User-Agent", "t")],  # upper case in a name
        base + auth + [("connection", "keep-alive")],
        base + auth + [("keep-alive", "5")],
        base + auth + [("proxy-connection", "x")],
        base + auth + [("transfer-encoding", "chunked")],
        base + auth + [("upgrade", "h2c")],
        base + auth + [("te", "gzip")],
        base + auth + [("content-length", "1"), ("content-length", "1")],
        base + auth + [("content-length", "5")],  # END_STREAM: no body can follow
    ]
    sids = [raw_request(c, h) for h in malformed]
    c.wait(sids)
    for sid, h in zip(sids, malformed):
        assert c.streams[sid]["reset"] == 1, (h, c.streams[sid])
    # a body longer or shorter than its Content-Length
    # (each request's HEADERS and DATA in one write: the static handler
    # answers a POST with 405 at once, and a body that came after the
    # answer was complete would be left unchecked)
    post = [(":method", "POST"), (":scheme", "http"), (":path", "/hello.txt")] + auth

    def with_body(hdrs, body):
        sid = c.conn.get_next_available_stream_id()
        c.conn.send_headers(sid, hdrs)
        c.conn.send_data(sid, body, end_stream=True)
        c.streams[sid] = {"headers": {}, "data": b"", "ended": False, "reset": None}
        c.flush()
        return sid

    longer = with_body(post + [("content-length", "3")], b"12345")
    shorter = with_body(post + [("content-length", "9")], b"12345")
    c.wait([longer, shorter])
    assert c.streams[longer]["reset"] == 1 and c.streams[shorter]["reset"] == 1
    # well-formed: Host instead of :authority, TE: trailers, OPTIONS *
    ok = [raw_request(c, base + [("host", "localhost"), ("te", "trailers")]),
          raw_request(c, [(":method", "OPTIONS"), (":scheme", "http"), (":path", "*")] + auth),
          raw_request(c, base + auth + [("content-length", "0")])]
    c.wait(ok)
    assert [c.streams[s]["headers"].get(":status") for s in ok] == ["200", "200", "200"]
    assert c.streams[ok[0]]["data"] == b"Hello World!\n"
    assert c.get("/hello.txt")["data"] == b"Hello World!\n"
    c.close()


def test_too_many_header_bytes_get_431(make_server):
    srv = h2c_server(make_server, MaxRequestSize="1K").start()
    c = H2Client(srv.port)
    sid = c.request("/hello.txt", headers=[("x-big", "a" * 1500)])
    c.wait([sid])
    assert c.streams[sid]["headers"][":status"] == "431"
    assert c.get("/hello.txt")["headers"][":status"] == "200"
    c.close()


def test_stream_reset_mid_download(make_server):
    srv = h2c_server(make_server)
    big = os.urandom(4 * MIB)
    srv.file("big.bin", big)
    srv.start()
    c = H2Client(srv.port)
    sid = c.request("/big.bin")
    while len(c.streams[sid]["data"]) < 100000:
        assert c.read_once()
    c.conn.reset_stream(sid)
    c.flush()
    # another stream on the same connection gets its whole file
    st = c.get("/big.bin")
    assert st["data"] == big
    c.close()


@needs_dlopen
def test_post_body_larger_than_the_initial_window(make_server):
    srv = h2c_server(make_server, MaxRequestBody="64M")
    srv.plugins = [str(UPLOAD_SO)]
    srv.start()
    body = os.urandom(3 * MIB + 12345)
    c = H2Client(srv.port)
    sid = c.request("/upload?slow=1", method="POST", body=body,
                    headers=[("content-length", str(len(body)))])
    c.wait([sid])
    st = c.streams[sid]
    assert st["headers"][":status"] == "200"
    assert st["data"].startswith(f"bytes={len(body)} crc32={zlib.crc32(body):08x}".encode())
    # the handler's window held the client back: it never had more than it asked for
    held = int(st["data"].split(b"max_held=")[1])
    assert held <= 65536 + 16384
    c.close()


@needs_dlopen
def test_streamed_response_with_trailers(make_server):
    srv = h2c_server(make_server)
    srv.plugins = [str(STREAM_SO)]
    srv.start()
    c = H2Client(srv.port)
    a = c.request("/stream?bytes=300000&piece=1000&trailer=1")
    b = c.request("/stream?bytes=50000&piece=7000&async=1")
    c.wait([a, b])
    sa, sb = c.streams[a], c.streams[b]
    assert sa["headers"][":status"] == "200" and "content-length" not in sa["headers"]
    assert len(sa["data"]) == 300000
    assert sa["data"][:1000] == b"a" * 1000 and sa["data"][1000:2000] == b"b" * 1000
    assert sa["trailers"] == {"x-stream-bytes": "300000"}
    assert len(sb["data"]) == 50000
    c.close()


@needs_tool("curl")
def test_curl_upload_and_logger_writes_http2(make_server):
    logger = BUILD / "plugins" / "monkey-logger.so"
    if not logger.exists():
        pytest.skip("no logger plugin")
    srv = h2c_server(make_server)
    srv.plugins = [str(logger)]
    log = srv.dir / "access.log"
    srv.site_extra = f"[LOGGER]\n    AccessLog {log}\n"
    srv.start()
    curl("--http2-prior-knowledge", f"http://127.0.0.1:{srv.port}/hello.txt")
    srv.stop()
    text = log.read_text()
    assert '"GET /hello.txt HTTP/2.0" 200 13' in text, text


# ---- flow control and defences -------------------------------------------------


def test_zero_window_client_gets_its_stream_cancelled_by_send_timeout(make_server):
    # A stream whose window stays shut is reset (CANCEL) at SendTimeout, the
    # connection is kept; one whose connection window stays shut is closed
    # (h2/test_h2_timeouts.py has both, with busy siblings).
    srv = h2c_server(make_server, SendTimeout="1")
    srv.file("big.bin", os.urandom(MIB))
    srv.start()
    stalled = H2Client(srv.port, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0},
                       auto_ack=False)
    sid = stalled.request("/big.bin")
    # Another client is served meanwhile.
    other = H2Client(srv.port)
    assert len(other.get("/big.bin")["data"]) == MIB
    other.close()
    stalled.wait([sid])
    assert stalled.streams[sid]["reset"] == 0x8  # CANCEL
    assert stalled.streams[sid]["data"] == b""
    assert stalled.goaway is None
    stalled.close()


def test_rapid_reset_gets_goaway_while_others_are_served(make_server):
    srv = h2c_server(make_server)
    srv.start()
    bad = H2Client(srv.port)
    good = H2Client(srv.port)
    for _ in range(1000):
        sid = bad.conn.get_next_available_stream_id()
        bad.conn.send_headers(sid, [(":method", "GET"), (":scheme", "http"),
                                    (":authority", "localhost"), (":path", "/hello.txt")],
                              end_stream=True)
        bad.conn.reset_stream(sid)
    try:
        bad.flush()
    except (BrokenPipeError, ConnectionResetError):
        pass
    bad.read_until_closed()
    assert bad.goaway is not None
    assert bad.goaway.error_code == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM
    assert good.get("/hello.txt")["data"] == b"Hello World!\n"
    good.close()
    bad.close()


def test_continuation_flood_gets_goaway(make_server):
    srv = h2c_server(make_server).start()
    s = raw_h2(srv)
    # HEADERS without END_HEADERS (":method GET" indexed), then endless CONTINUATIONs
    # of literal headers: one header budget for the whole block.
    s.sendall(frame(1, 0x1, 1, b"\x82"))
    field = b"\x00\x01x\x64" + b"y" * 100  # a literal field, new name "x", 100-byte value
    try:
        for _ in range(200):
            s.sendall(frame(9, 0, 1, field * 40))
    except (BrokenPipeError, ConnectionResetError):
        pass
    code = read_goaway(s)
    assert code in (0xb, 0x1), code  # ENHANCE_YOUR_CALM (or PROTOCOL_ERROR from nghttp2)
    s.close()
    c = H2Client(srv.port)
    assert c.get("/hello.txt")["headers"][":status"] == "200"
    c.close()


def test_empty_continuation_frames_get_goaway(make_server):
    srv = h2c_server(make_server).start()
    s = raw_h2(srv)
    s.sendall(frame(1, 0x1, 1, b"\x82"))
    try:
        for _ in range(1000):
            s.sendall(frame(9, 0, 1))
    except (BrokenPipeError, ConnectionResetError):
        pass
    assert read_goaway(s) is not None
    s.close()


def test_max_concurrent_streams_is_advertised(make_server):
    srv = h2c_server(make_server, MaxConcurrentStreams=7).start()
    c = H2Client(srv.port)
    c.get("/hello.txt")
    assert c.conn.remote_settings.max_concurrent_streams == 7
    c.close()


def test_idle_connection_gets_goaway(make_server):
    srv = h2c_server(make_server, Http2IdleTimeout="300ms").start()
    c = H2Client(srv.port)
    c.get("/hello.txt")
    c.read_until_closed()
    assert c.goaway is not None and c.goaway.error_code == 0
    c.close()


def test_goaway_on_stop_lets_streams_in_flight_finish(make_server):
    import hpack
    srv = h2c_server(make_server)
    big = os.urandom(2 * MIB)
    srv.file("big.bin", big)
    srv.start()
    # Raw frames: a client library stops reading DATA once it saw GOAWAY.
    s = raw_h2(srv)
    block = hpack.Encoder().encode([(":method", "GET"), (":scheme", "http"),
                                    (":authority", "localhost"), (":path", "/big.bin")])
    s.sendall(frame(1, 0x5, 1, block))  # END_STREAM | END_HEADERS
    buf, body, ended = b"", b"", False
    stopped = False
    while not ended:
        data = s.recv(65536)
        assert data, "closed before the stream ended"
        buf += data
        while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
            n, ftype, flags = int.from_bytes(buf[:3], "big"), buf[3], buf[4]
            payload, buf = buf[9:9 + n], buf[9 + n:]
            if ftype == 0:
                body += payload
                ended = bool(flags & 1)
        if len(body) >= 65535 and not stopped:
            # the stream's window is spent: stop the server, then let the body go on
            srv.signal(15)
            goaways = []
            # the shutdown notice (2^31-1), then, this client not answering
            # the PING, the final GOAWAY a second later
            while len(goaways) < 2:
                data = s.recv(65536)
                assert data
                buf += data
                while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
                    n, ftype = int.from_bytes(buf[:3], "big"), buf[3]
                    payload, buf = buf[9:9 + n], buf[9 + n:]
                    if ftype == 7:
                        goaways.append((int.from_bytes(payload[:4], "big"),
                                        int.from_bytes(payload[4:8], "big")))
            assert goaways == [(2**31 - 1, 0), (1, 0)]  # then last stream 1, NO_ERROR
            stopped = True
            inc = (4 * MIB).to_bytes(4, "big")
            s.sendall(frame(8, 0, 1, inc) + frame(8, 0, 0, inc))
    assert stopped
    assert hashlib.sha256(body).digest() == hashlib.sha256(big).digest()
    assert srv.proc.wait(timeout=10 * SLOW) == 0
    srv.stop()
    s.close()


# ---- control --------------------------------------------------------------------


@needs_dlopen
def test_control_status_counts_h2_connections_and_streams(make_server):
    from test_control import ctl, make_control, status_json
    srv = make_control(make_server, start=False, Workers=1)
    srv.set(Listen=f"127.0.0.1:{srv.port} h2c")
    srv.file("big.bin", os.urandom(MIB))
    srv.start()
    from test_control import wait_socket
    wait_socket(srv.sock)
    doc = status_json(srv)
    assert (doc["h2_connections"], doc["h2_streams"]) == (0, 0)
    # Two streams the client keeps open (its side never ends), one that ends.
    c = H2Client(srv.port)
    a, b = c.request("/hello.txt", end=False), c.request("/hello.txt", end=False)
    c.get("/hello.txt")
    doc = status_json(srv)
    assert doc["h2_connections"] == 1
    assert doc["h2_streams"] == 2
    assert doc["h2_streams_total"] == 3
    assert "http2        1 connection, 2 streams (3 since start)" in \
        ctl("-s", srv.sock, "status").stdout
    c.close()


@needs_dlopen
def test_plugins_over_h2_routes_buffered_body_and_tasks(make_server):
    srv = h2c_server(make_server)
    srv.plugins = [str(BUILD / "tests" / "plugins" / "monkey-routes.so")]
    srv.start()
    c = H2Client(srv.port)
    body = os.urandom(200000)  # more than the stream's initial window
    echo = c.request("/r/echo", method="POST", body=body)
    hello = c.request("/r/users/7/posts/9")
    task = c.request("/r/task")
    c.wait([echo, hello, task])
    assert c.streams[echo]["headers"][":status"] == "200"
    assert c.streams[echo]["data"] == body
    assert c.streams[hello]["data"] == b"user=7 post=9\n"
    assert c.streams[task]["data"] == b"task done\n"
    # 405 with Allow from the route table
    st = c.get("/r/write")
    assert st["headers"][":status"] == "405" and "POST" in st["headers"]["allow"]
    c.close()


@pytest.mark.parametrize("value,urgent", [
    ("u=0", True),
    ("i, u=0", True),
    ('x="a, b", u=0;p=1, i=?0', True),
    ("u=0, y=(a b), z=:AAA=:", True),
    ("u=9", False),      # out of range: the field is ignored (urgency 3)
    ("u=0, i=5", False),  # i is not a boolean: ignored
    ("u=0 u=1", False),  # not a dictionary: ignored
    ("i", False),        # no u: urgency 3, not 0
    ("u=0, u", False),   # u is the boolean true: ignored
    ("u=0, x=@", False),  # not a dictionary: ignored
    ("u=07", False),     # an integer 7
    (["u=0", "i"], True),  # two lines: what "u=0, i" gives
    (["u=0", "x=@"], False),  # a bad line: both ignored
])
def test_rfc9218_priority_field_is_parsed(make_server, value, urgent):
    """h2.c parses the priority field (nghttp2's HTTP checks are off): a
    stream sent with `value` (a list: one field line each) goes before or
    after one sent with u=2."""
    srv = h2c_server(make_server)
    srv.file("a.bin", os.urandom(4 * MIB))
    srv.file("b.bin", os.urandom(4 * MIB))
    srv.start()
    c = H2Client(srv.port)
    ref = c.request("/a.bin", headers=[("priority", "u=2")])
    lines = value if isinstance(value, list) else [value]
    tried = c.request("/b.bin", headers=[("priority", v) for v in lines])
    c.wait([ref, tried])
    ended = [ev.stream_id for ev in c.events if isinstance(ev, h2.events.StreamEnded)]
    assert ended == ([tried, ref] if urgent else [ref, tried])
    c.close()


def test_rfc9218_urgency_decides_which_stream_sends_first(make_server):
    srv = h2c_server(make_server)
    srv.file("a.bin", os.urandom(4 * MIB))
    srv.file("b.bin", os.urandom(4 * MIB))
    srv.start()
    c = H2Client(srv.port)
    low = c.request("/a.bin", headers=[("priority", "u=7")])
    high = c.request("/b.bin", headers=[("priority", "u=0")])
    c.wait([low, high])
    ended = [ev.stream_id for ev in c.events if isinstance(ev, h2.events.StreamEnded)]
    assert ended == [high, low]
    c.close()
