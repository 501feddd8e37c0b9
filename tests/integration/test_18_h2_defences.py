"""HTTP/2 defences (server/h2.c) against clients that cost the server more
than they cost themselves: streams that end unanswered however they end
(the rapid-reset variants of CVE-2023-44487 that send no RST_STREAM, or
only some), HPACK bombs, and SETTINGS, PING and empty DATA floods. Each
abuser gets GOAWAY (ENHANCE_YOUR_CALM) or its documented answer while
another client on the same server is still served."""

import os
import subprocess

import hpack
import pytest

from conftest import SLOW
from h2util import H2_MARKS, H2Client, frame, h2, h2c_server, needs_tool, raw_h2, read_frames
from h2util import read_goaway

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
