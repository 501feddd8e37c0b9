"""HTTP/2 scheduling on one connection (server/h2.c, nghttp2): a stream
whose window the client keeps shut never holds up the others."""

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
