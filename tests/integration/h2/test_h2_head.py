"""HTTP/2 request heads (server/proto/h2.c, mk_http_head_build in http_parser.c):
built from the header block without HTTP/1 text, and held to the rules of
an HTTP/1.1 head; frame checks that still hold when a client batches many
frames into one write (only the frames the check could refuse are split
off before nghttp2 sees them)."""

import hpack

from h2util import H2_MARKS, H2Client, frame, h2c_server, read_frames
from h2util import raw_h2 as open_raw

pytestmark = H2_MARKS


def get_headers(enc, path="/hello.txt"):
    """A HEADERS frame payload (END_STREAM | END_HEADERS is the caller's)."""
    return enc.encode([(":method", "GET"), (":scheme", "http"), (":authority", "localhost"),
                       (":path", path)])


def goaway_code(s):
    f = read_frames(s, lambda t, fl, sid, p: t == 7)
    return None if f is None else int.from_bytes(f[3][4:8], "big")


def status_of(c, path, headers=None, authority="localhost"):
    sid = c.request(path, headers=headers, authority=authority)
    c.wait([sid])
    return c.streams[sid]["headers"].get(":status")


def test_request_fields_are_held_to_the_http1_rules(make_server):
    srv = h2c_server(make_server).start()
    c = H2Client(srv.port)
    # what nghttp2 lets through but an HTTP/1 head may not hold
    assert status_of(c, "/hello.txt", authority="user@localhost") == "400"
    assert status_of(c, "/hello.txt", authority="localhost:99999") == "400"
    assert status_of(c, "/a#b") == "400"
    assert status_of(c, "/a\x80b") == "400"
    assert status_of(c, "/hello.txt", headers=[("expect", "something")]) == "417"
    assert status_of(c, "/../hello.txt") == "400"
    # :authority wins over a Host field, which is then not read at all
    assert status_of(c, "/hello.txt", headers=[("host", "user@elsewhere")]) == "200"
    sid = c.request("/hello.txt?x=1", headers=[("user-agent", "test")])
    c.wait([sid])
    assert c.streams[sid]["headers"][":status"] == "200"
    assert c.streams[sid]["data"] == b"Hello World!\n"
    c.close()


def test_a_lower_stream_id_batched_after_a_request_is_refused(make_server):
    srv = h2c_server(make_server).start()
    s = open_raw(srv)
    enc = hpack.Encoder()
    # one write: a request on stream 5, then HEADERS on stream 3 (below one already used)
    s.sendall(frame(1, 0x5, 5, get_headers(enc)) + frame(1, 0x5, 3, get_headers(enc)))
    assert goaway_code(s) == 0x1  # PROTOCOL_ERROR
    s.close()


def test_data_on_a_closed_stream_batched_after_a_request_is_refused(make_server):
    srv = h2c_server(make_server).start()
    s = open_raw(srv)
    enc = hpack.Encoder()
    s.sendall(frame(1, 0x5, 1, get_headers(enc)))
    # stream 1 is closed both ways once its response ended
    assert read_frames(s, lambda t, fl, sid, p: sid == 1 and fl & 0x1) is not None
    # one write: a new request, a PING, then DATA on the closed stream 1
    s.sendall(frame(1, 0x5, 3, get_headers(enc)) + frame(6, 0, 0, b"12345678") +
              frame(0, 0, 1, b"x"))
    assert goaway_code(s) == 0x5  # STREAM_CLOSED
    s.close()


def test_a_batch_of_requests_in_one_write_is_served(make_server):
    srv = h2c_server(make_server).start()
    s = open_raw(srv)
    enc = hpack.Encoder()
    s.sendall(b"".join(frame(1, 0x5, sid, get_headers(enc)) for sid in range(1, 40, 2)))
    ended = set()

    def done(t, fl, sid, p):
        if t == 0 and fl & 0x1:
            ended.add(sid)
        return len(ended) == 20
    assert read_frames(s, done) is not None
    assert ended == set(range(1, 40, 2))
    s.close()


def test_response_fields_go_out_lower_case(make_server):
    srv = h2c_server(make_server)
    srv.file("d/x.txt", "x\n")
    srv.start()
    c = H2Client(srv.port)
    st = c.get("/hello.txt")
    h = st["headers"]
    assert h[":status"] == "200" and h["accept-ranges"] == "bytes"
    assert h["etag"].startswith('"') and h["last-modified"].endswith("GMT")
    assert h["content-length"] == "13" and h["content-type"].startswith("text/plain")
    st = c.get("/d")
    assert st["headers"][":status"] == "301"
    assert st["headers"]["location"].endswith("/d/")
    assert all(name == name.lower() for name in st["headers"])
    c.close()
