"""HTTP/2 defences (server/proto/h2.c) against clients that cost the server more
than they cost themselves: streams that end unanswered however they end
(the rapid-reset variants of CVE-2023-44487 that send no RST_STREAM, or
only some), HPACK bombs, and SETTINGS, PING and empty DATA floods. Each
abuser gets GOAWAY (ENHANCE_YOUR_CALM) or its documented answer while
another client on the same server is still served."""

import os
import subprocess
import threading

import hpack
import pytest

from conftest import SLOW, small_window
from h2util import H2_MARKS, H2Client, frame, h2, h2c_server, needs_tool, raw_h2, read_frames
from h2util import PREFACE, read_goaway

pytestmark = H2_MARKS

CALM = 0xb  # ENHANCE_YOUR_CALM
END_STREAM, END_HEADERS = 0x1, 0x4


def request_block(enc, path="/hello.txt", extra=()):
    return enc.encode([(":method", "GET"), (":scheme", "http"), (":authority", "localhost"),
                       (":path", path), *extra])


def send_quietly(s, data):
    """Send what the server may refuse halfway (it closes after its GOAWAY)."""
    try:
        s.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass


def others_are_served(srv):
    c = H2Client(srv.port)
    st = c.get("/hello.txt")
    c.close()
    return st["headers"][":status"] == "200" and st["data"] == b"Hello World!\n"


def resets_sent(s, until_sid):
    """Read until the server reset stream until_sid: {stream: error code}."""
    codes = {}

    def seen(ftype, flags, sid, payload):
        if ftype == 3:
            codes[sid] = int.from_bytes(payload, "big")
        return ftype == 3 and sid == until_sid

    assert read_frames(s, seen) is not None, codes
    return codes


# ---- streams that end unanswered ---------------------------------------------------


def test_streams_the_server_resets_for_bad_headers_are_counted(make_server):
    """A header block nghttp2 refuses (a connection-specific field) is a
    stream error: the server resets the stream, the client sends no
    RST_STREAM, and the stream's slot is free at once. Counted all the same."""
    srv = h2c_server(make_server).start()
    s = raw_h2(srv)
    enc = hpack.Encoder()
    bad = request_block(enc, extra=[("connection", "close")])
    # First a few, each reset with PROTOCOL_ERROR: a stream error, not the connection's.
    send_quietly(s, b"".join(frame(1, END_STREAM | END_HEADERS, sid, bad)
                             for sid in range(1, 20, 2)))
    assert set(resets_sent(s, 19).values()) == {0x1}
    # Then many more: GOAWAY once the budget of unanswered streams is spent.
    send_quietly(s, b"".join(frame(1, END_STREAM | END_HEADERS, sid, bad)
                             for sid in range(21, 4001, 2)))
    assert read_goaway(s) == CALM
    s.close()
    assert others_are_served(srv)
    assert "HTTP/2 client over a limit" in srv.stderr_text()


def test_streams_refused_over_the_concurrency_limit_are_counted(make_server):
    """Streams beyond MaxConcurrentStreams are refused (RST_STREAM
    REFUSED_STREAM, sent by the server): the client never resets any."""
    srv = h2c_server(make_server, MaxConcurrentStreams=2).start()
    s = raw_h2(srv)
    enc = hpack.Encoder()
    # Two streams held open: no END_STREAM, so each waits for its body.
    send_quietly(s, frame(1, END_HEADERS, 1, request_block(enc, "/a", [("content-length", "5")]))
                 + frame(1, END_HEADERS, 3, request_block(enc, "/b", [("content-length", "5")])))
    block = request_block(enc)
    send_quietly(s, b"".join(frame(1, END_STREAM | END_HEADERS, sid, block)
                             for sid in range(5, 15, 2)))
    assert set(resets_sent(s, 13).values()) == {0x7}  # REFUSED_STREAM
    send_quietly(s, b"".join(frame(1, END_STREAM | END_HEADERS, sid, block)
                             for sid in range(15, 4001, 2)))
    assert read_goaway(s) == CALM
    s.close()
    assert others_are_served(srv)


def test_client_resets_count_as_unanswered_streams_too(make_server):
    """With a generous RST_STREAM budget, the budget of unanswered streams
    (Http2UnansweredBurst) still ends a client that opens and cancels."""
    srv = h2c_server(make_server, Http2ResetBurst=100000, Http2ResetRate=100000,
                     Http2UnansweredBurst=30, Http2UnansweredRate=1)
    srv.file("big.bin", os.urandom(1 << 20))
    srv.start()
    s = raw_h2(srv)
    enc = hpack.Encoder()
    block = request_block(enc, "/big.bin")
    rst = (8).to_bytes(4, "big")  # CANCEL
    send_quietly(s, b"".join(frame(1, END_STREAM | END_HEADERS, sid, block) + frame(3, 0, sid, rst)
                             for sid in range(1, 201, 2)))
    assert read_goaway(s) == CALM
    s.close()
    assert others_are_served(srv)


def test_answered_streams_are_never_counted(make_server):
    """However fast streams are opened, those the server answers in full
    give their token back: 2,000 requests in rounds of 100 on one
    connection with a budget of one unanswered stream."""
    srv = h2c_server(make_server, Http2UnansweredBurst=1, Http2UnansweredRate=1).start()
    c = H2Client(srv.port)
    for _ in range(20):
        sids = [c.request(f"/hello.txt?{i}") for i in range(100)]
        c.wait(sids)
        assert all(c.streams[sid]["data"] == b"Hello World!\n" for sid in sids)
    # 404s and 400s are answers too.
    sids = [c.request("/missing") for _ in range(50)] + [c.request("/../x") for _ in range(50)]
    c.wait(sids)
    assert {c.streams[sid]["headers"][":status"] for sid in sids} == {"404", "400"}
    assert c.goaway is None
    c.close()


@needs_tool("h2load")
def test_h2load_with_100_streams_is_never_troubled(make_server):
    srv = h2c_server(make_server, Http2UnansweredBurst=1, Http2UnansweredRate=1).start()
    p = subprocess.run(["h2load", "-c2", "-m100", "-n20000", f"http://127.0.0.1:{srv.port}/hello.txt"],
                       capture_output=True, text=True, timeout=120 * SLOW)
    assert "20000 succeeded, 0 failed, 0 errored" in p.stdout, p.stdout + p.stderr
    assert "HTTP/2 client over a limit" not in srv.stderr_text()


# ---- HPACK bombs and floods --------------------------------------------------------


def test_hpack_bomb_gets_goaway(make_server):
    """One 4,000-byte field put into the dynamic table, then referenced
    again by its index (one byte each) 1,000 times: a block of 5 KB that
    decodes to 4 MB. The decoded list is bounded, not just the block."""
    srv = h2c_server(make_server).start()
    good = H2Client(srv.port)
    s = raw_h2(srv)
    enc = hpack.Encoder()
    bomb = ("x-bomb", "b" * 4000)
    block = request_block(enc, extra=[bomb] * 1000)
    assert len(block) < 6000 and block.endswith(b"\xbe" * 999)  # index 62, the newest entry
    send_quietly(s, frame(1, END_STREAM | END_HEADERS, 1, block))
    assert read_goaway(s) == CALM
    s.close()
    assert good.get("/hello.txt")["data"] == b"Hello World!\n"
    good.close()
    assert others_are_served(srv)


def test_a_large_header_list_within_the_bomb_bound_gets_431(make_server):
    """The same field referenced 10 times (40 KB decoded) is over
    MaxRequestSize but under four times it: 431 on the stream, and the
    connection goes on."""
    srv = h2c_server(make_server).start()
    c = H2Client(srv.port)
    st = c.get("/hello.txt", headers=[("x-big", "b" * 4000)] * 10)
    assert st["headers"][":status"] == "431"
    assert c.get("/hello.txt")["data"] == b"Hello World!\n"
    c.close()


def flood(srv, frames):
    """Send `frames` in one write without reading, then read until GOAWAY:
    its error code. Another client, connected before, is served after."""
    good = H2Client(srv.port)
    s = raw_h2(srv)
    send_quietly(s, frames)
    code = read_goaway(s)
    s.close()
    assert good.get("/hello.txt")["data"] == b"Hello World!\n"
    good.close()
    assert others_are_served(srv)
    return code


def flood_unread(srv, unit, limit=32 << 20):
    """A client that sends `unit` over and over (up to `limit` bytes) and
    reads nothing, from a socket with a small receive buffer, so that the
    server's answers pile up. Then it reads: GOAWAY's error code, or None
    when the server closed without one reaching the client (it kept
    sending, and the server's lingering close gave up on it)."""
    s = small_window(srv.port, 4096, timeout=10)
    s.sendall(PREFACE + frame(4, 0, 0))
    chunk = unit * (65536 // len(unit))

    def send():
        sent = 0
        try:
            while sent < limit:
                s.sendall(chunk)
                sent += len(chunk)
        except OSError:
            pass  # the server closed, or stopped reading (timeout)

    sender = threading.Thread(target=send)
    sender.start()
    sender.join(60 * SLOW)
    assert not sender.is_alive()
    code = read_goaway(s)
    s.close()
    return code


@pytest.mark.parametrize("kind", ["settings", "ping"])
def test_settings_and_ping_floods_end_the_connection(make_server, kind):
    """Each SETTINGS and PING frame asks for an acknowledgement: a client
    that sends them faster than it reads the answers gets GOAWAY once more
    than 1,000 are queued (nghttp2's bound), and its connection is closed."""
    srv = h2c_server(make_server).start()
    good = H2Client(srv.port)
    one = frame(4, 0, 0, (4).to_bytes(2, "big") + (65535).to_bytes(4, "big")) \
        if kind == "settings" else frame(6, 0, 0, b"12345678")
    assert flood_unread(srv, one) in (CALM, None)
    assert "HTTP/2 client over a limit" in srv.stderr_text()
    assert good.get("/hello.txt")["data"] == b"Hello World!\n"
    good.close()
    assert others_are_served(srv)


def test_settings_flood_in_one_write_gets_goaway(make_server):
    """5,000 SETTINGS frames at once: more than 1,000 acknowledgements are
    queued while the server reads one batch, and the client, which reads
    once it has sent them, gets the GOAWAY."""
    srv = h2c_server(make_server).start()
    one = frame(4, 0, 0, (4).to_bytes(2, "big") + (65535).to_bytes(4, "big"))
    assert flood(srv, one * 5000) == CALM


def test_settings_frame_with_too_many_entries_gets_goaway(make_server):
    srv = h2c_server(make_server).start()
    entry = (4).to_bytes(2, "big") + (65535).to_bytes(4, "big")
    assert flood(srv, frame(4, 0, 0, entry * 33)) == CALM  # at most 32 a frame


def test_a_few_pings_are_answered(make_server):
    srv = h2c_server(make_server).start()
    s = raw_h2(srv)
    s.sendall(b"".join(frame(6, 0, 0, i.to_bytes(8, "big")) for i in range(50)))
    acks = []

    def ack(ftype, flags, sid, payload):
        if ftype == 6 and flags & 1:
            acks.append(int.from_bytes(payload, "big"))
        return len(acks) == 50

    assert read_frames(s, ack) is not None
    assert acks == list(range(50))
    s.close()


def test_empty_data_frame_flood_gets_goaway(make_server):
    """DATA frames without a byte nor END_STREAM cost the server a frame
    each and move nothing: at most 100 a connection."""
    srv = h2c_server(make_server).start()
    enc = hpack.Encoder()
    head = frame(1, END_HEADERS, 1, enc.encode([(":method", "POST"), (":scheme", "http"),
                                                (":authority", "localhost"),
                                                (":path", "/hello.txt")]))
    assert flood(srv, head + frame(0, 0, 1) * 1000) == CALM


def test_a_few_empty_data_frames_pass(make_server):
    srv = h2c_server(make_server).start()
    c = H2Client(srv.port)
    sid = c.request("/hello.txt", method="POST", end=False)
    for _ in range(20):
        c.conn.send_data(sid, b"")
    c.conn.send_data(sid, b"abc", end_stream=True)
    c.flush()
    c.wait([sid])
    assert c.streams[sid]["headers"][":status"] == "405", c.streams[sid]  # a file takes no POST
    assert c.goaway is None
    c.close()
