"""HTTP/2 timeouts are per stream (server/proto/h2.c): a stream that waits too long
for its client or its handler is answered or reset alone, whatever its
siblings do, and the connection goes on. Only what stalls the whole
connection ends it: a client that keeps the connection's window shut (or
reads nothing), an incomplete preface or header block."""

import os
import time

import pytest

from conftest import BUILD, SLOW, needs_dlopen, small_window
from test_timeouts import server_closed
from h2util import H2_MARKS, H2Client, h2, h2c_server

pytestmark = H2_MARKS

MIB = 1 << 20
UPLOAD_SO = BUILD / "tests" / "plugins" / "monkey-upload.so"
CGI_SO = BUILD / "plugins" / "monkey-cgi.so"
HOLD_SO = BUILD / "tests" / "plugins" / "monkey-hold.so"

NO_ERROR, INTERNAL_ERROR, CANCEL = 0x0, 0x2, 0x8


def read_some(c):
    """Read what comes within the socket's timeout; false when nothing came."""
    try:
        assert c.read_once(), "the connection was closed"
    except AssertionError as e:
        if "timed out" not in str(e):
            raise
        return False
    return True


def settle(c, sid, busy, limit, windows=False):
    """Read until stream sid ends or is reset, within `limit` seconds (times
    SLOW). With `busy`, the client meanwhile fetches /hello.txt on the same
    connection every 100 ms, each answered in full: the connection is never
    quiet for long. With `windows` (a client whose streams start with a
    window of 0), each of those gets its window opened, and the
    connection's, as it is sent. Returns the seconds it took."""
    t0 = time.monotonic()
    st = c.streams[sid]
    c.sock.settimeout(0.1)
    try:
        while not (st["ended"] or st["reset"] is not None):
            assert time.monotonic() - t0 < limit * SLOW, f"stream {sid} not answered: {st}"
            if busy:
                other = c.request("/hello.txt")
                if windows:
                    c.conn.increment_flow_control_window(1000, stream_id=other)
                    c.conn.increment_flow_control_window(1000)
                    c.flush()
                deadline = time.monotonic() + 5 * SLOW
                while not c.streams[other]["ended"]:
                    assert time.monotonic() < deadline, "a sibling was not served"
                    read_some(c)
                assert c.streams[other]["data"] == b"Hello World!\n"
                time.sleep(0.1)
            else:
                read_some(c)
    finally:
        c.sock.settimeout(10 * SLOW)
    return time.monotonic() - t0


def still_served(c):
    """The connection goes on: no GOAWAY, a new stream is answered."""
    st = c.get("/hello.txt")
    assert st["headers"][":status"] == "200" and st["data"] == b"Hello World!\n"
    assert c.goaway is None and not c.closed


def drain(c, seconds):
    """Read whatever comes for a while (a RST_STREAM that follows an answer)."""
    c.sock.settimeout(0.1)
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            read_some(c)
    finally:
        c.sock.settimeout(10 * SLOW)


@needs_dlopen
@pytest.mark.parametrize("busy", [False, True])
def test_a_stream_waiting_for_its_body_gets_408_alone(make_server, busy):
    """A POST whose body stops coming gets 408 on its stream after Timeout
    (1 s), whether the connection is quiet or its other streams keep it busy;
    the stream is then reset with NO_ERROR (the client need not send the
    rest), and the connection goes on."""
    srv = h2c_server(make_server, Timeout="1")
    srv.plugins = [str(UPLOAD_SO)]
    srv.start()
    c = H2Client(srv.port)
    sid = c.request("/upload", method="POST", headers=[("content-length", "100000")],
                    body=b"x" * 1000, end=False)
    took = settle(c, sid, busy, 6)
    st = c.streams[sid]
    assert st["headers"].get(":status") == "408", st
    assert took >= 0.8
    drain(c, 0.3)
    assert st["reset"] == NO_ERROR or st["ended"]
    still_served(c)
    c.close()


@needs_dlopen
@pytest.mark.parametrize("busy", [False, True])
def test_a_stream_held_by_a_plugin_gets_503_alone(make_server, busy):
    """A request a plugin holds (suspended) past Timeout (1 s) gets 503 on
    its stream, as over HTTP/1, and the connection goes on."""
    srv = h2c_server(make_server, Timeout="1")
    srv.plugins = [str(HOLD_SO)]
    srv.start()
    c = H2Client(srv.port)
    sid = c.request("/hold/x")
    took = settle(c, sid, busy, 6)
    assert c.streams[sid]["headers"].get(":status") == "503", c.streams[sid]
    assert took >= 0.8
    still_served(c)
    # the plugin gives its handle back (a late resume of a request gone)
    assert c.get("/release")["data"] == b"released 1\n"
    c.close()


@needs_dlopen
def test_an_answered_stream_whose_body_never_ends_is_reset_with_no_error(make_server):
    """A request refused before its body (403, its window left shut): the
    client never ends the stream; Timeout later the server resets it with
    NO_ERROR (RFC 9113 section 8.1) and the connection goes on."""
    srv = h2c_server(make_server, Timeout="1")
    srv.plugins = [str(UPLOAD_SO)]
    srv.start()
    c = H2Client(srv.port)
    sid = c.request("/upload?reject=1", method="POST", headers=[("content-length", "100000")],
                    body=b"x" * 1000, end=False)
    while not c.streams[sid]["headers"]:
        assert c.read_once()
    assert c.streams[sid]["headers"][":status"] == "403"
    c.sock.settimeout(0.1)
    t0 = time.monotonic()
    while c.streams[sid]["reset"] is None:
        assert time.monotonic() - t0 < 6 * SLOW, "the stream was never reset"
        read_some(c)
    c.sock.settimeout(10 * SLOW)
    assert c.streams[sid]["reset"] == NO_ERROR
    still_served(c)
    c.close()


@needs_dlopen
@pytest.mark.parametrize("busy", [False, True])
def test_a_silent_handler_gets_its_stream_reset_alone(make_server, busy):
    """A CGI script prints its header block, then nothing: SendTimeout (1 s)
    later its stream alone is reset (INTERNAL_ERROR: the server could not
    finish the response) and the script is stopped; the others go on."""
    srv = h2c_server(make_server, SendTimeout="1")
    srv.plugins = [str(CGI_SO)]
    srv.file("quiet.cgi", '#!/bin/sh\necho $$ > "$DOCUMENT_ROOT/quiet.pid"\n'
             'printf "Content-Type: text/plain\\r\\n\\r\\n"\nexec sleep 30\n', mode=0o755)
    srv.site_extra += "[CGI]\n    Match \\.cgi$\n"
    srv.start()
    c = H2Client(srv.port)
    sid = c.request("/quiet.cgi")
    took = settle(c, sid, busy, 6)
    st = c.streams[sid]
    assert st["headers"][":status"] == "200" and st["data"] == b""
    assert st["reset"] == INTERNAL_ERROR, st
    assert took >= 0.8
    pid = int((srv.docroot / "quiet.pid").read_text())
    end = time.monotonic() + 5 * SLOW
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < end:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}"), "the script still runs"
    still_served(c)
    c.close()


@needs_dlopen
@pytest.mark.parametrize("kind", ["silent", "held"])
def test_streams_the_server_fails_do_not_count_against_the_client(make_server, kind):
    """Four streams at once that the server fails by its own fault: CGI
    scripts silent past SendTimeout (reset INTERNAL_ERROR), or requests a
    plugin holds past Timeout (503). With a budget of one unanswered stream
    (Http2UnansweredBurst 1, refilled once a second) none of them costs the
    client its connection."""
    srv = h2c_server(make_server, Timeout="1", SendTimeout="1", Http2UnansweredBurst=1,
                     Http2UnansweredRate=1)
    if kind == "silent":
        srv.plugins = [str(CGI_SO)]
        srv.file("quiet.cgi", '#!/bin/sh\nprintf "Content-Type: text/plain\\r\\n\\r\\n"\n'
                 'exec sleep 30\n', mode=0o755)
        srv.site_extra += "[CGI]\n    Match \\.cgi$\n"
        paths = [f"/quiet.cgi?{i}" for i in range(4)]
    else:
        srv.plugins = [str(HOLD_SO)]
        paths = [f"/hold/{i}" for i in range(4)]
    srv.start()
    c = H2Client(srv.port)
    sids = [c.request(p) for p in paths]
    for sid in sids:
        settle(c, sid, False, 6)
    for sid in sids:
        st = c.streams[sid]
        if kind == "silent":
            assert st["headers"].get(":status") == "200" and st["reset"] == INTERNAL_ERROR, st
        else:
            assert st["headers"].get(":status") == "503" and st["ended"], st
    drain(c, 0.3)
    still_served(c)
    if kind == "held":
        assert c.get("/release")["data"] == b"released 4\n"
    c.close()
    assert "HTTP/2 client over a limit" not in srv.stderr_text()


@pytest.mark.parametrize("busy", [False, True])
def test_a_stream_with_a_shut_window_is_cancelled_alone(make_server, busy):
    """A stream whose window the client keeps at zero is reset (CANCEL)
    SendTimeout (1 s) after its last byte, while the connection and the
    other streams go on; the connection is not closed for it."""
    srv = h2c_server(make_server, SendTimeout="1")
    srv.file("big.bin", os.urandom(MIB))
    srv.start()
    c = H2Client(srv.port, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0},
                 auto_ack=False)
    sid = c.request("/big.bin")
    took = settle(c, sid, busy, 6, windows=True)
    st = c.streams[sid]
    assert st["headers"][":status"] == "200" and st["data"] == b""
    assert st["reset"] == CANCEL, st
    assert took >= 0.8
    other = c.request("/big.bin")
    c.conn.increment_flow_control_window(2 * MIB, stream_id=other)
    c.conn.increment_flow_control_window(4 * MIB)
    c.flush()
    c.wait([other])
    assert len(c.streams[other]["data"]) == MIB
    assert c.goaway is None and not c.closed
    c.close()


def test_a_client_that_keeps_the_connection_window_shut_is_closed(make_server):
    """The connection's own window at zero stalls every stream: SendTimeout
    (1 s) later the connection is closed, and never holds a worker: another
    client is served meanwhile."""
    srv = h2c_server(make_server, SendTimeout="1")
    srv.file("big.bin", os.urandom(MIB))
    srv.start()
    stalled = H2Client(srv.port, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: MIB * 4},
                       auto_ack=False)
    sid = stalled.request("/big.bin")
    other = H2Client(srv.port)
    assert len(other.get("/big.bin")["data"]) == MIB
    other.close()
    t0 = time.monotonic()
    stalled.read_until_closed()
    assert stalled.closed
    assert time.monotonic() - t0 < 6 * SLOW
    # the connection's first window (65535 bytes), then nothing
    assert len(stalled.streams[sid]["data"]) == 65535
    stalled.close()


# ---- SendMinRate -------------------------------------------------------------------

def trickle_window(c, sid, step, every, limit):
    """Open stream sid's window by `step` bytes every `every` seconds (the
    connection's is open) until the stream ends or is reset, or `limit`
    seconds pass; the seconds it took, or None."""
    t0 = time.monotonic()
    st = c.streams[sid]
    c.sock.settimeout(every)
    while time.monotonic() - t0 < limit * SLOW:
        if st["ended"] or st["reset"] is not None:
            return time.monotonic() - t0
        c.conn.increment_flow_control_window(step, stream_id=sid)
        c.flush()
        deadline = time.monotonic() + every
        while time.monotonic() < deadline and read_some(c):
            pass
    return None


@pytest.mark.parametrize("step, dropped", [(1000, True), (128 * 1024, False)],
                         ids=["below", "above"])
def test_a_stream_trickled_below_send_min_rate_is_cancelled(make_server, step, dropped):
    """A client that keeps a stream's window shut and opens it a little at
    a time, often enough for SendTimeout (every 100 ms), must still take
    the response at SendMinRate: 1000 bytes a step (10 KB a second) is
    reset (CANCEL) at the end of a SendTimeout window, alone; 128 KiB a
    step (1.3 MB a second) gets the whole response."""
    srv = h2c_server(make_server, SendTimeout="1", SendMinRate="64K")
    srv.file("big.bin", os.urandom(2 * MIB))
    srv.start()
    c = H2Client(srv.port, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0},
                 auto_ack=False)
    c.conn.increment_flow_control_window(16 * MIB)  # the connection's: only the stream's is shut
    sid = c.request("/big.bin")
    took = trickle_window(c, sid, step, 0.1, 10)
    st = c.streams[sid]
    assert took is not None, f"stream still open after {len(st['data'])} bytes"
    if dropped:
        assert st["reset"] == CANCEL, st["reset"]
        assert took >= 1.0, took  # not before a whole window
        # within a few windows: what the client took tells, not the clock of a
        # loaded machine (10 KB a second: the whole file would take 200 s)
        assert len(st["data"]) < 100 * 1000
    else:
        assert st["ended"] and st["reset"] is None
        assert len(st["data"]) == 2 * MIB
        assert took > 1.0  # over more than one window
    # the connection goes on
    c.sock.settimeout(5 * SLOW)
    other = c.request("/hello.txt")
    c.conn.increment_flow_control_window(1000, stream_id=other)
    c.flush()
    c.wait([other])
    assert c.streams[other]["data"] == b"Hello World!\n"
    assert c.goaway is None and not c.closed
    c.close()


def test_a_connection_read_below_send_min_rate_is_closed(make_server):
    """A client that reads the connection too slowly, though often enough
    for SendTimeout, while the server has a large response for it: the
    output stalls, and at the end of a SendTimeout window below
    SendMinRate the connection is closed (GOAWAY). As over HTTP/1, the
    server sees progress only each time its send buffer has half drained,
    so the reader is fast (64 KiB every 10 ms, a few MiB a second) and the
    rate higher (32M), for that progress to come well within SendTimeout."""
    srv = h2c_server(make_server, SendTimeout="3", SendMinRate="32M")
    srv.file("big.bin", os.urandom(96 * MIB))
    srv.start()
    sock = small_window(srv.port, 65536, timeout=10)
    c = H2Client(srv.port, sock=sock,
                 settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: (1 << 31) - 1})
    c.conn.increment_flow_control_window((1 << 31) - 1 - 65535)
    c.flush()
    sid = c.request("/big.bin")
    client = sock.getsockname()
    t0 = time.monotonic()
    took = None
    while time.monotonic() - t0 < 12 * SLOW:
        if server_closed(srv.port, client):
            took = time.monotonic() - t0
            break
        try:
            data = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not data:
            took = time.monotonic() - t0
            break
        for ev in c.conn.receive_data(data):
            c.handle(ev)
        c.flush()
        time.sleep(0.01)
    assert took is not None, f"still open after {len(c.streams[sid]['data'])} bytes"
    assert 3.0 <= took < 6 * SLOW, took
    c.close()
    assert H2Client(srv.port).get("/hello.txt")["data"] == b"Hello World!\n"
