"""HTTP/2 scheduling on one connection (server/proto/h2.c, nghttp2): a stream
whose window the client keeps shut never holds up the others, and RFC 9218
priorities sent as PRIORITY_UPDATE frames decide which stream sends first,
as the `priority` header does (h2/test_h2.py)."""

import os

from h2util import H2_MARKS, H2Client, frame, h2, h2c_server

pytestmark = H2_MARKS

MIB = 1 << 20


def test_a_stream_with_a_shut_window_does_not_block_the_others(make_server):
    """Every stream starts with a window of 0 (SETTINGS_INITIAL_WINDOW_SIZE);
    the client opens the connection's window wide and the windows of all
    streams but the first, which it never opens. The first stream gets
    nothing and stays open, the others complete; once its window opens it
    completes too."""
    srv = h2c_server(make_server)
    files = {f"f{i}.bin": os.urandom(MIB if i < 4 else 5000 + i) for i in range(8)}
    for name, content in files.items():
        srv.file(name, content)
    srv.start()
    c = H2Client(srv.port, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0},
                 auto_ack=False)
    sids = {c.request("/" + name): name for name in files}
    slow, others = min(sids), sorted(sids)[1:]
    c.conn.increment_flow_control_window(64 * MIB)  # the connection's window
    for sid in others:
        c.conn.increment_flow_control_window(8 * MIB, stream_id=sid)
    c.flush()
    c.wait(others)
    for sid in others:
        st = c.streams[sid]
        assert st["headers"][":status"] == "200"
        assert st["data"] == files[sids[sid]], sids[sid]
    # The slow stream's response has begun (its head is not flow-controlled)
    # and has no byte yet; it is neither finished nor reset.
    st = c.streams[slow]
    assert st["headers"][":status"] == "200"
    assert st["data"] == b"" and not st["ended"] and st["reset"] is None
    assert c.goaway is None
    c.conn.increment_flow_control_window(8 * MIB, stream_id=slow)
    c.flush()
    c.wait([slow])
    assert c.streams[slow]["data"] == files[sids[slow]]
    c.close()


def test_a_stream_stalled_halfway_does_not_block_the_others(make_server):
    """The same with a stream that got part of its body (a 16 KiB window),
    then no more: streams opened after it still complete."""
    srv = h2c_server(make_server)
    big = os.urandom(2 * MIB)
    srv.file("big.bin", big)
    srv.file("small.bin", os.urandom(100000))
    srv.start()
    c = H2Client(srv.port, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 16384},
                 auto_ack=False)
    c.conn.increment_flow_control_window(64 * MIB)
    stalled = c.request("/big.bin")
    while len(c.streams[stalled]["data"]) < 16384:
        assert c.read_once()
    later = [c.request("/small.bin") for _ in range(4)] + [c.request("/big.bin")]
    for sid in later:
        c.conn.increment_flow_control_window(8 * MIB, stream_id=sid)
    c.flush()
    c.wait(later)
    assert all(c.streams[sid]["ended"] for sid in later)
    assert c.streams[later[-1]]["data"] == big
    assert len(c.streams[stalled]["data"]) == 16384 and not c.streams[stalled]["ended"]
    c.close()


def priority_update(sid, value):
    """A PRIORITY_UPDATE frame (type 0x10, RFC 9218 section 7.1) on stream 0."""
    return frame(0x10, 0, 0, sid.to_bytes(4, "big") + value.encode())


def order_of_ends(c, sids):
    c.wait(sids)
    return [ev.stream_id for ev in c.events
            if isinstance(ev, h2.events.StreamEnded) and ev.stream_id in sids]


def two_large_files(make_server):
    srv = h2c_server(make_server)
    srv.file("a.bin", os.urandom(4 * MIB))
    srv.file("b.bin", os.urandom(4 * MIB))
    return srv.start()


def test_without_priorities_the_first_stream_sends_first(make_server):
    """The control: two streams of one urgency (3, the default), not
    incremental, are sent in the order they were opened."""
    srv = two_large_files(make_server)
    c = H2Client(srv.port)
    first, second = c.request("/a.bin"), c.request("/b.bin")
    assert order_of_ends(c, [first, second]) == [first, second]
    c.close()


def test_priority_update_after_the_request_decides_which_stream_sends_first(make_server):
    srv = two_large_files(make_server)
    c = H2Client(srv.port)
    first, second = c.request("/a.bin"), c.request("/b.bin")
    # In the same write as the requests: the second becomes urgent, the first not.
    c.sock.sendall(priority_update(second, "u=0") + priority_update(first, "u=7"))
    assert order_of_ends(c, [first, second]) == [second, first]
    c.close()


def test_priority_update_overrides_the_priority_header(make_server):
    """The header says the first is urgent; a PRIORITY_UPDATE sent after it
    says otherwise, and the frame wins (RFC 9218 section 7)."""
    srv = two_large_files(make_server)
    c = H2Client(srv.port)
    first = c.request("/a.bin", headers=[("priority", "u=0")])
    second = c.request("/b.bin", headers=[("priority", "u=5")])
    c.sock.sendall(priority_update(first, "u=7"))
    assert order_of_ends(c, [first, second]) == [second, first]
    c.close()


def test_priority_update_before_the_stream_opens(make_server):
    """A PRIORITY_UPDATE may name a stream not opened yet (RFC 9218 section
    7.1): it applies when its HEADERS come."""
    srv = two_large_files(make_server)
    c = H2Client(srv.port)
    c.sock.sendall(priority_update(3, "u=0"))
    first, second = c.request("/a.bin"), c.request("/b.bin")
    assert second == 3
    assert order_of_ends(c, [first, second]) == [second, first]
    c.close()
