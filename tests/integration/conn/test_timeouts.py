"""Tier 5: timeouts and the connection limit (short, sub-second configured timeouts)."""

import os
import re
import resource
import socket
import time

import pytest

from conftest import BALANCINGS, SLOW, needs_part, small_window


@pytest.fixture
def srv(make_server):
    s = make_server()
    s.file("a.txt", "AAAA\n")
    s.file("big.bin", b"b" * (64 * 1024 * 1024))
    return s


def elapsed_until_closed(c, limit):
    start = time.monotonic()
    assert c.closed(limit), "the server did not close the connection"
    return time.monotonic() - start


def test_header_timeout_sends_408(srv):
    srv.set(Timeout="300ms")
    srv.start()
    c = srv.conn()
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n")  # never finished
    t = elapsed_until_closed(c, 3)
    assert 0.2 <= t <= 1.2 * SLOW
    assert c.buf.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert b"Connection: close" in c.buf


def test_header_timeout_is_not_extended_by_trickling(srv):
    """Slowloris: one byte at a time does not keep a connection forever."""
    srv.set(Timeout="500ms")
    srv.start()
    c = srv.conn()
    req = b"GET /a.txt HTTP/1.1\r\nX-Slow: " + b"a" * 100
    # A byte every 100 ms: each one well within Timeout of the previous.
    t = trickle(c, [req[i:i + 1] for i in range(len(req))], 0.1, 8 * SLOW)
    assert t is not None, "a trickled head held the connection open"
    assert t <= 2 * SLOW
    assert c.buf.startswith(b"HTTP/1.1 408 Request Timeout\r\n")


def test_silent_connection_times_out(srv):
    srv.set(Timeout="300ms", DeferAccept="Off")  # with DeferAccept the kernel holds it first
    srv.start()
    c = srv.conn()
    t = elapsed_until_closed(c, 3)
    assert 0.2 <= t <= 1.2 * SLOW
    assert c.buf == b""  # nothing was asked: nothing is answered


def test_silent_connection_with_defer_accept(srv):
    """The kernel holds a silent connection about a second, then Timeout applies."""
    srv.set(Timeout="300ms", DeferAccept="On")
    srv.start()
    c = srv.conn()
    t = elapsed_until_closed(c, 10)
    assert t <= 6 * SLOW
    assert c.buf == b""


def test_keepalive_timeout(srv):
    srv.set(KeepAliveTimeout="300ms", Timeout=10)
    srv.start()
    c = srv.conn()
    assert c.request("GET", "/a.txt").status == 200
    t = elapsed_until_closed(c, 3)
    assert 0.2 <= t <= 1.2 * SLOW
    assert c.buf == b""


def test_keepalive_connection_used_before_timeout_survives(srv):
    srv.set(KeepAliveTimeout="600ms")
    srv.start()
    c = srv.conn()
    for _ in range(4):
        assert c.request("GET", "/a.txt").status == 200
        time.sleep(0.3)
    c.close()


def test_send_timeout_closes_stalled_reader(srv):
    srv.set(SendTimeout="300ms")
    srv.start()
    s = small_window(srv.port, 4096)
    s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(1.2 * SLOW)  # read nothing: the server cannot make progress
    s.settimeout(5)
    got = 0
    ended = None
    try:
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                ended = "eof"
                break
            got += len(chunk)
    except ConnectionResetError:
        ended = "reset"
    except socket.timeout:
        ended = "timeout"  # still open: the response was not abandoned
    s.close()
    # What was queued in the socket buffers before the server gave up, then the end.
    assert ended in ("eof", "reset"), f"{ended} after {got} bytes"
    assert got < 64 * 1024 * 1024, "the stalled response should have been abandoned"
    assert srv.get("/a.txt").status == 200


def test_slow_but_steady_reader_is_not_cut(srv):
    srv.set(SendTimeout="1s")
    srv.file("mid.bin", b"m" * (4 * 1024 * 1024))
    srv.start()
    s = small_window(srv.port, 65536)
    s.sendall(b"GET /mid.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    s.settimeout(10)
    got = 0
    start = time.monotonic()
    while got < 4 * 1024 * 1024 + 100:
        chunk = s.recv(256 * 1024)
        if not chunk:
            break
        got += len(chunk)
        time.sleep(0.05)
    s.close()
    assert got > 4 * 1024 * 1024
    assert time.monotonic() - start > 0.5  # it really was slow


def server_closed(port, client):
    """Whether the server has closed its end of the connection from the
    client address `client` to `port` (its socket left ESTABLISHED: what
    it queued may still be on its way to the client)."""
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        f = line.split()
        local, remote, state = f[1], f[2], f[3]
        if int(local.split(":")[1], 16) == port and int(remote.split(":")[1], 16) == client[1]:
            return state != "01"
    return True


def read_slowly(s, port, chunk, every, limit):
    """Read `chunk` bytes every `every` seconds until the server closes its
    end or `limit` seconds pass; (bytes read, seconds until the close, or
    None when it did not close)."""
    start = time.monotonic()
    got = 0
    client = s.getsockname()
    s.settimeout(5 * SLOW)
    while time.monotonic() - start < limit:
        if server_closed(port, client):
            return got, time.monotonic() - start
        try:
            data = s.recv(chunk)
        except ConnectionResetError:
            return got, time.monotonic() - start
        if not data:
            return got, time.monotonic() - start
        got += len(data)
        time.sleep(every)
    return got, None


def test_send_min_rate_drops_a_slow_reader(srv):
    """A client that takes a response below SendMinRate, though often
    enough for SendTimeout, is dropped at the end of a SendTimeout window.
    The server sees progress each time the kernel's send buffer (a few MiB
    here) has half drained, so the reader must be fast enough for that to
    come well within SendTimeout (3 s) to tell the two apart: 64 KiB every
    10 ms, a few MiB a second, under a SendMinRate of 32M."""
    srv.set(SendTimeout="3s", SendMinRate="32M")
    srv.start()
    s = small_window(srv.port, 65536)
    s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    got, took = read_slowly(s, srv.port, 65536, 0.01, 12 * SLOW)
    s.close()
    assert took is not None, f"still sending after {got} bytes"
    assert 3.0 <= took < 6 * SLOW, took
    assert got < 60 * 1024 * 1024
    assert srv.get("/a.txt").status == 200


def test_send_min_rate_keeps_a_reader_above_it(srv):
    """A reader that keeps up SendMinRate (64 KiB every 10 ms, a few MiB a
    second, far over 64K) over several SendTimeout windows gets the whole
    file, more than the socket buffers hold, and the connection stays. The
    server sees the reader's progress only when the kernel's send buffer
    (a few MiB) has half drained, so SendTimeout is 3 s: a reader slowed
    by a busy machine to a third of its pace still shows progress in each
    window, as it would with the default 30 s."""
    size = 32 * 1024 * 1024
    srv.set(SendTimeout="3s", SendMinRate="64K")
    srv.file("mid.bin", b"m" * size)
    srv.start()
    s = small_window(srv.port, 65536)
    s.sendall(b"GET /mid.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    client = s.getsockname()
    s.settimeout(5 * SLOW)
    got, start, n = 0, time.monotonic(), 0
    while got < size:
        n += 1
        if n % 16 == 0:  # /proc/net/tcp is slow to read on a busy machine
            assert not server_closed(srv.port, client), f"dropped after {got} bytes"
        data = s.recv(65536)
        assert data, f"closed after {got} bytes"
        got += len(data)
        time.sleep(0.01)
    assert time.monotonic() - start > 4.5  # it waited for the client over windows
    assert not server_closed(srv.port, client)
    s.close()


def trickle(c, data, every, limit):
    """Send `data` one piece at a time; seconds until the server closed, or None."""
    start = time.monotonic()
    for piece in data:
        try:
            c.send(piece)
        except (BrokenPipeError, ConnectionResetError):
            return time.monotonic() - start
        if c.closed(every / SLOW):
            return time.monotonic() - start
        if time.monotonic() - start > limit:
            return None
    return None


@pytest.mark.parametrize("key", ["Timeout", "KeepAliveTimeout"])
def test_lowered_timeout_applies_after_reload(srv, key):
    """A connection armed with the old, longer timeout does not shield new ones."""
    srv.set(Workers=1, **{key: 20})
    srv.start()

    def wait_on_timer(c):
        if key == "Timeout":
            c.send(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n")  # a head never finished
        else:
            assert c.request("GET", "/a.txt").status == 200  # then idle

    old = srv.conn()
    wait_on_timer(old)
    time.sleep(0.3 * SLOW)  # accepted and armed by the worker before the reload
    srv.set(**{key: "300ms"})
    srv.write_conf()
    srv.reload()
    new = srv.conn()
    wait_on_timer(new)
    t = elapsed_until_closed(new, 3)
    assert t <= 1.2 * SLOW
    if key == "Timeout":
        assert new.buf.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    # The old connection keeps the timeout it was given.
    assert not old.closed(0.5)
    old.close()


def test_discarded_body_has_a_deadline(srv):
    """After the response, a body trickled one byte at a time is not waited for."""
    srv.set(Timeout="1s")
    srv.start()
    c = srv.conn()
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nx")
    r = c.read_response()
    assert r.status == 200 and r.body == b"AAAA\n"
    # A byte every 300 ms: each one arrives well within Timeout of the previous.
    t = trickle(c, [b"x"] * 30, 0.3, 8 * SLOW)
    assert t is not None, "the connection was held open by a trickled body"
    assert t <= 2.5 * SLOW
    assert c.buf == b""  # nothing more was answered


def skeleton_server(srv, **kw):
    srv.plugins = ["skeleton"]
    (srv.conf / "plugins").mkdir()
    (srv.conf / "plugins" / "skeleton.conf").write_text("[SKELETON]\n    Path /skel\n")
    srv.set(Timeout="1s", **kw)
    srv.start()


def test_slow_body_below_min_rate_gets_408(srv):
    skeleton_server(srv, BodyMinRate=100)
    c = srv.conn()
    c.send(b"POST /skel/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
    # 10 bytes every 250 ms: 40 bytes/s, each piece well within Timeout.
    t = trickle(c, [b"y" * 10] * 40, 0.25, 8 * SLOW)
    assert t is not None, "a body far below BodyMinRate was waited for"
    assert t <= 3.5 * SLOW
    assert c.buf.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert b"Connection: close" in c.buf


def test_slow_body_above_min_rate_is_read(srv):
    skeleton_server(srv, BodyMinRate=100)
    c = srv.conn()
    body = b"z" * 900
    c.send(b"POST /skel/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 900\r\n\r\n")
    # 100 bytes every 250 ms (400 bytes/s) for 2.25 s: longer than Timeout.
    assert trickle(c, [body[i:i + 100] for i in range(0, 900, 100)], 0.25, 10 * SLOW) is None
    r = c.read_response()
    assert r.status == 200 and r.body == body
    assert c.request("GET", "/a.txt").body == b"AAAA\n"


def test_min_rate_off(srv):
    skeleton_server(srv, BodyMinRate=0)
    c = srv.conn()
    body = b"w" * 40
    c.send(b"POST /skel/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n")
    # 10 bytes every 500 ms for 2 s: below any rate, but each piece within Timeout.
    assert trickle(c, [body[i:i + 10] for i in range(0, 40, 10)], 0.5, 10 * SLOW) is None
    r = c.read_response()
    assert r.status == 200 and r.body == body


def test_connection_limit_answers_503(srv):
    srv.set(MaxConnections=3, Workers=1)
    srv.start()
    time.sleep(0.3)  # let the start-up probe connection close
    held = [srv.conn() for _ in range(3)]
    for c in held:
        assert c.request("GET", "/a.txt").status == 200
    extra = srv.conn()
    extra.send(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    r = extra.read_response()
    assert r.status == 503
    assert r.header("retry-after") == "1"
    assert r.header("connection") == "close"
    assert extra.closed()
    # A refused client that has not closed its end does not take a place.
    held[0].close()
    deadline = time.monotonic() + 5 * SLOW
    while True:  # once the server has seen the close
        c = srv.conn()
        r = c.request("GET", "/a.txt")
        if r.status == 200 or time.monotonic() > deadline:
            break
        c.close()
        time.sleep(0.05)
    assert r.status == 200
    for c2 in held[1:] + [c]:
        c2.close()


@needs_part("fair", "the fair balancing mode")
def test_connection_limit_with_fair_balancing(srv):
    srv.set(MaxConnections=2, Balancing="fair", Workers=2)
    srv.start()
    time.sleep(0.3)  # let the start-up probe connection close
    held = [srv.conn() for _ in range(2)]
    for c in held:
        assert c.request("GET", "/a.txt").status == 200
    extra = srv.conn()
    extra.send(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    assert extra.read_response().status == 503
    for c in held:
        c.close()


# ---- out of descriptors -------------------------------------------------------------

def cpu_seconds(pid):
    """User and system CPU time of process `pid`, all its threads, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ask(port, timeout):
    """Connect, send a GET and read until the server closes: "503", "200"...,
    "closed" (nothing, or a reset) or "hung" (nothing within timeout)."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError:
        return "refused"
    try:
        s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        return "hung"
    except OSError:
        return "closed" if not data else data[9:12].decode()
    finally:
        s.close()
    return data[9:12].decode() if data.startswith(b"HTTP/1.1 ") else "closed"


def check_no_spin(srv, seconds=2.0):
    """Over `seconds`, the server uses little CPU and logs little."""
    before = cpu_seconds(srv.proc.pid)
    lines_before = srv.stderr_text().count("\n")
    time.sleep(seconds)
    used = cpu_seconds(srv.proc.pid) - before
    logged = srv.stderr_text().count("\n") - lines_before
    assert used < 0.3 * seconds * SLOW, f"{used:.2f} s of CPU in {seconds} s: spinning"
    assert logged <= seconds + 2, f"{logged} lines in {seconds} s:\n{srv.stderr_text()[-2000:]}"


def test_max_connections_beyond_the_descriptor_limit(srv):
    """MaxConnections above what the open files limit holds is clamped to
    what it holds, loudly: the clients beyond it get a 503 or are closed,
    the server neither spins nor floods its log, and it serves again once
    connections are released."""
    srv.set(MaxConnections=1000, DeferAccept="Off")
    srv.start(preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)))
    time.sleep(0.3 * SLOW)  # the start-up probe connection closes
    held = []
    for _ in range(100):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        held.append(s)
    check_no_spin(srv)
    assert re.search(r"MaxConnections 1000 exceeds what 64 descriptors allow: (\d+) connections "
                     r"at most", srv.stderr_text()), srv.stderr_text()
    extra = [ask(srv.port, 5 * SLOW) for _ in range(5)]
    assert all(a in ("503", "closed") for a in extra), extra
    for s in held:
        s.close()
    deadline = time.monotonic() + 10 * SLOW
    while ask(srv.port, 5 * SLOW) != "200":
        assert time.monotonic() < deadline, "not serving again: " + srv.stderr_text()[-2000:]
        time.sleep(0.1)
    assert "Too many open files" not in srv.stderr_text()


@pytest.mark.parametrize("balancing", BALANCINGS)
def test_out_of_descriptors_backs_off(srv, balancing):
    """The open files limit reached (lowered under the running server, as
    descriptors taken by files, plugins and backends would): accepting
    pauses instead of spinning on EMFILE, the warning comes at most once a
    second, the clients waiting get a 503 (answered with a reserve
    descriptor) or a clean close rather than hanging, and once descriptors
    are free again new clients are served."""
    srv.set(DeferAccept="Off", Balancing=balancing)
    srv.start()
    time.sleep(0.3 * SLOW)
    pid = srv.proc.pid
    top = max(int(fd) for fd in os.listdir(f"/proc/{pid}/fd"))
    hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)[1]
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (top + 6, hard))
    held = []
    for _ in range(60):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        held.append(s)
    check_no_spin(srv)
    text = srv.stderr_text()
    # EMFILE: "Too many open files" (glibc), "No file descriptors available" (musl)
    assert re.search(r"accept: (Too many open files|No file descriptors available): "
                     r"accepting paused for 100 ms", text), text[-2000:]
    answers = []
    for s in held:
        s.settimeout(5 * SLOW)
        try:
            data = s.recv(4096)
            answers.append(data[9:12].decode() if data else "closed")
        except socket.timeout:
            answers.append("hung")
        except OSError:
            answers.append("closed")
    assert "hung" not in answers, answers
    assert answers.count("503") >= 10, answers
    extra = [ask(srv.port, 5 * SLOW) for _ in range(3)]
    assert all(a in ("503", "closed") for a in extra), extra
    for s in held:
        s.close()
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (hard, hard))
    deadline = time.monotonic() + 10 * SLOW
    while ask(srv.port, 5 * SLOW) != "200":
        assert time.monotonic() < deadline, "not serving again: " + srv.stderr_text()[-2000:]
        time.sleep(0.1)
    assert len(re.findall(r"accept: Too many open files", srv.stderr_text())) <= 20
