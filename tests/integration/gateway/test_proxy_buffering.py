"""The proxy's response buffer (Buffering on, plugins/proxy/px_buf.c): a
client slower than the upstream no longer holds the upstream back; the
answer is kept in memory (BufferSize) then in a temporary file without a
name (BufferMaxTemp, BufferDir), the upstream's connection goes back to
the pool as soon as the upstream finished, and the client gets every byte
intact afterwards, HTTP/1.1 and HTTP/2 alike, from a plain or a tls://
upstream. Memory-only (BufferMaxTemp 0) and Buffering off hold the
upstream back as before; a temporary file that cannot be made, or a
full disk (a tmpfs of 1 MiB, ENOSPC), falls back to back-pressure,
logged, the bytes intact; monkey -t refuses bad values and a BufferDir
where no file can be made; a reload and a stop with answers buffered free
everything. The upstreams are proxy_upstream.py processes started by each
test and stopped by PID."""

import hashlib
import json
import os
import shutil
import socket
import subprocess
import time

import pytest

from conftest import SANITIZED, SLOW, vm_rss_kb
from h2util import H2Client, skip_without_h2
from conftest import BUILD
from test_proxy import PROXY_SO, proxy_server, upstreams  # noqa: F401 (a fixture)

from conftest import built_without, needs_dlopen
from test_proxy_tls import conf_for, pki, tls_stats, tls_upstream  # noqa: F401 (a fixture)

pytestmark = [needs_dlopen,
              pytest.mark.skipif(not PROXY_SO.exists(), reason="built without the proxy plugin")]

N = 20 * 1024 * 1024
CHUNK = bytes(range(256)) * 256


def expected_sha(n):
    h = hashlib.sha256()
    left = n
    while left > 0:
        k = min(left, len(CHUNK))
        h.update(CHUNK[:k])
        left -= k
    return h.hexdigest()


def buffered_server(make_server, tmp_path, u, extra="", h2c=False):
    bdir = tmp_path / "pxbuf"
    bdir.mkdir(exist_ok=True)
    conf = f"    Buffering on\n    BufferDir {bdir}\n" + extra
    srv = proxy_server(make_server, conf=conf, site=f"    Pass / {u.addr}\n", h2c=h2c)
    srv.set(GracefulTimeout="2")  # a stop does not wait for the clients that read nothing
    return srv, bdir


def slow_client(srv, path):
    """A client that asked for path and reads nothing (a small receive buffer)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    s.settimeout(30 * SLOW)
    s.connect(("127.0.0.1", srv.port))
    s.sendall(b"GET %s HTTP/1.1\r\nHost: h\r\n\r\n" % path.encode())
    return s


def read_response(s, n):
    """The head and the body of a Content-Length answer of n bytes: (head, sha256, length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        got = s.recv(65536)
        assert got, data
        data += got
    head, rest = data.split(b"\r\n\r\n", 1)
    h = hashlib.sha256(rest)
    got_n = len(rest)
    while got_n < n:
        got = s.recv(1 << 20)
        assert got, got_n
        h.update(got)
        got_n += len(got)
    return head, h.hexdigest(), got_n


def wait_answered(u, want, seconds, stats=None):
    """Whether the upstream answered `want` requests whole within seconds."""
    stats = stats or u.stats
    until = time.monotonic() + seconds * SLOW
    while time.monotonic() < until:
        if stats()["answered"] >= want:
            return True
        time.sleep(0.05)
    return stats()["answered"] >= want


def wait_for(cond, seconds):
    until = time.monotonic() + seconds * SLOW
    while not cond() and time.monotonic() < until:
        time.sleep(0.05)
    return cond()


def files_into(pid, d):
    """The server's open files under directory d (an unlinked one reads '... (deleted)')."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(d) + "/"):
            out.append(target)
    return out


def test_slow_client_frees_the_upstream(make_server, upstreams, tmp_path):
    u = upstreams("a")
    srv, bdir = buffered_server(make_server, tmp_path, u)
    srv.start()
    rss0 = vm_rss_kb(srv.proc.pid)
    s = slow_client(srv, f"/big?n={N}")
    # the upstream finishes while the client has read nothing
    assert wait_answered(u, 1, 20), u.stats()
    # the body is in a file without a name: open, deleted, nothing in the directory
    assert wait_for(lambda: files_into(srv.proc.pid, bdir), 10)
    time.sleep(1.0 * SLOW)  # the proxy reads what the upstream's socket still holds
    rss = vm_rss_kb(srv.proc.pid)
    held = files_into(srv.proc.pid, bdir)
    assert held and all(t.endswith("(deleted)") for t in held), held
    assert os.listdir(bdir) == []
    # its connection is back in the pool: the next request goes on it
    before = u.stats()["connections"]  # this one's included: a new connection is before + 1
    c = srv.conn()
    r = c.request("GET", "/echo")
    c.close()
    assert r.status == 200
    assert json.loads(r.body)["conn"] <= before, (before, r.body)
    head, sha, got = read_response(s, N)
    s.close()
    assert b" 200 " in head.split(b"\r\n")[0], head
    assert got == N and sha == expected_sha(N)
    print(f"rss before {rss0} KiB, with the answer buffered {rss} KiB")
    if not SANITIZED:  # ASan's quarantine keeps freed memory: only the plain build's RSS tells
        assert rss - rss0 < 8 * 1024, (rss0, rss)
    # the file is gone with the request
    time.sleep(0.2 * SLOW)
    assert files_into(srv.proc.pid, bdir) == []


def test_upstream_ms_is_the_upstreams_time(make_server, upstreams, tmp_path):
    """%{upstream_ms}n ends with the upstream's answer, not with the slow client's last byte."""
    u = upstreams("a")
    srv, bdir = buffered_server(make_server, tmp_path, u)
    srv.plugins.insert(0, str(BUILD / "plugins" / "monkey-logger.so"))
    log = srv.dir / "access.log"
    srv.site_extra += f"[LOGGER]\n    AccessLog {log}\n    Format custom %U %s %{{upstream_ms}}n\n"
    srv.start()
    t0 = time.monotonic()
    s = slow_client(srv, f"/big?n={N}")
    assert wait_answered(u, 1, 20), u.stats()
    assert wait_for(lambda: files_into(srv.proc.pid, bdir), 10)
    upstream_s = time.monotonic() - t0
    time.sleep(2.0)  # the client is slow: not the upstream's time
    head, sha, got = read_response(s, N)
    s.close()
    assert got == N and sha == expected_sha(N)
    assert wait_for(lambda: log.exists() and log.read_text().count("\n") >= 1, 5)
    path, status, ms = log.read_text().splitlines()[0].split()
    assert (path, status) == ("/big", "200")
    assert int(ms) < (upstream_s + 1.0) * 1000, (ms, upstream_s)


def test_memory_only_holds_the_upstream_past_buffer_size(make_server, upstreams, tmp_path):
    u = upstreams("a")
    srv, bdir = buffered_server(make_server, tmp_path, u,
                                "    BufferSize 64K\n    BufferMaxTemp 0\n")
    srv.start()
    s = slow_client(srv, f"/big?n={N}")
    assert not wait_answered(u, 1, 2), u.stats()
    assert files_into(srv.proc.pid, bdir) == []
    head, sha, got = read_response(s, N)
    s.close()
    assert got == N and sha == expected_sha(N)
    assert wait_answered(u, 1, 5)


def test_buffering_off_holds_the_upstream(make_server, upstreams, tmp_path):
    u = upstreams("a")
    srv = proxy_server(make_server, site=f"    Pass / {u.addr}\n")
    srv.set(GracefulTimeout="2")
    srv.start()
    s = slow_client(srv, f"/big?n={N}")
    assert not wait_answered(u, 1, 2), u.stats()
    head, sha, got = read_response(s, N)
    s.close()
    assert got == N and sha == expected_sha(N)


def test_chunked_answer_buffered(make_server, upstreams, tmp_path):
    u = upstreams("a")
    srv, bdir = buffered_server(make_server, tmp_path, u, "    BufferSize 4K\n")
    srv.start()
    s = slow_client(srv, "/chunked?n=20000")
    assert wait_answered(u, 1, 10), u.stats()
    data = b""
    while not data.endswith(b"0\r\n\r\n"):
        got = s.recv(65536)
        assert got, data[-200:]
        data += got
    s.close()
    head, body = data.split(b"\r\n\r\n", 1)
    assert b"transfer-encoding: chunked" in head.lower()
    out, rest = b"", body
    while True:
        size, rest = rest.split(b"\r\n", 1)
        k = int(size, 16)
        if k == 0:
            break
        out += rest[:k]
        rest = rest[k + 2:]
    assert out == b"".join(b"piece %d;" % i for i in range(20000))


def test_http2_client(make_server, upstreams, tmp_path):
    skip_without_h2()
    u = upstreams("a")
    srv, bdir = buffered_server(make_server, tmp_path, u, h2c=True)
    srv.start()
    h = H2Client(srv.port, timeout=30)
    sid = h.request(f"/big?n={N}")
    assert wait_answered(u, 1, 20), u.stats()
    assert os.listdir(bdir) == []
    h.wait([sid])
    st = h.streams[sid]
    assert st["headers"][":status"] == "200"
    assert len(st["data"]) == N
    assert hashlib.sha256(st["data"]).hexdigest() == expected_sha(N)
    h.close()


def test_upstream_silence_counts_while_buffering(make_server, upstreams, tmp_path):
    """Reading into the buffer, the upstream's silence is its own: Timeout cuts the response,
    though the client reads nothing."""
    u = upstreams("a")
    srv, bdir = buffered_server(make_server, tmp_path, u, "    Timeout 1\n")
    srv.start()
    s = slow_client(srv, f"/stall?n={N}")
    assert wait_for(lambda: "within Timeout" in srv.stderr_text(), 5), srv.stderr_text()
    s.settimeout(10 * SLOW)
    got = b""
    while True:
        try:
            data = s.recv(1 << 20)
        except ConnectionResetError:
            break
        if not data:
            break
        got += data
    s.close()
    assert len(got) < 2 * N  # cut short, never complete-looking
    assert b" 200 " in got.split(b"\r\n")[0]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl tool")
@pytest.mark.skipif(built_without("tls"), reason="built without OpenSSL: no tls:// upstreams")
def test_tls_upstream(make_server, upstreams, pki, tmp_path):
    u = tls_upstream(upstreams, pki)
    bdir = tmp_path / "pxbuf"
    bdir.mkdir()
    conf = conf_for(u, pki, extra=f"    Buffering on\n    BufferDir {bdir}\n")
    srv = proxy_server(make_server, conf=conf, site="    Pass / app\n")
    srv.set(GracefulTimeout="2")
    srv.start()
    s = slow_client(srv, f"/big?n={N}")
    assert wait_answered(u, 1, 20, lambda: tls_stats(u)), tls_stats(u)
    head, sha, got = read_response(s, N)
    s.close()
    assert b" 200 " in head.split(b"\r\n")[0], head
    assert got == N and sha == expected_sha(N)


def test_no_temporary_file_falls_back_to_back_pressure(make_server, upstreams, tmp_path):
    u = upstreams("a")
    srv, bdir = buffered_server(make_server, tmp_path, u, "    BufferSize 64K\n")
    srv.start()
    bdir.rmdir()  # checked at the start; gone now: no file can be made
    s = slow_client(srv, f"/big?n={N}")
    assert not wait_answered(u, 1, 2), u.stats()
    head, sha, got = read_response(s, N)
    s.close()
    assert got == N and sha == expected_sha(N)
    err = srv.stderr_text()
    assert "temporary file: memory only from here" in err, err


@pytest.fixture
def small_fs(tmp_path):
    """A file system of 1 MiB (tmpfs) to fill: ENOSPC. Skipped where nothing may be mounted."""
    d = tmp_path / "small"
    d.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(d)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {p.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)


def test_a_full_disk_falls_back_to_back_pressure(make_server, upstreams, small_fs):
    """ENOSPC: what the file took comes back intact, then the upstream is held back."""
    u = upstreams("a")
    conf = f"    Buffering on\n    BufferDir {small_fs}\n    BufferSize 64K\n"
    srv = proxy_server(make_server, conf=conf, site=f"    Pass / {u.addr}\n")
    srv.set(GracefulTimeout="2")
    srv.start()
    s = slow_client(srv, f"/big?n={N}")
    assert wait_for(lambda: "No space left on device" in srv.stderr_text(), 10), \
        srv.stderr_text()
    assert "temporary file: memory only from here" in srv.stderr_text()
    assert not wait_answered(u, 1, 1), u.stats()
    head, sha, got = read_response(s, N)
    s.close()
    assert got == N and sha == expected_sha(N)
    assert wait_answered(u, 1, 5)
    srv.stop()


def test_site_buffering_in_place_of_the_plugins(make_server, upstreams, tmp_path):
    """A site's Buffering on buffers its routes with proxy.conf's Buffering off (its
    BufferDir and bounds), and a site's Buffering off holds the upstream back though
    proxy.conf says on; a site without the line keeps proxy.conf's."""
    u = upstreams("a")
    bdir = tmp_path / "pxbuf"
    bdir.mkdir()
    srv = proxy_server(make_server, conf=f"    BufferDir {bdir}\n",
                       site=f"    Buffering on\n    Pass / {u.addr}\n")
    srv.set(GracefulTimeout="2")
    srv.start()
    s = slow_client(srv, f"/big?n={N}")
    assert wait_answered(u, 1, 20), u.stats()  # freed though the client read nothing
    assert wait_for(lambda: files_into(srv.proc.pid, bdir), 10)
    head, sha, got = read_response(s, N)
    s.close()
    assert got == N and sha == expected_sha(N)
    srv.stop()

    u = upstreams("b")
    srv, bdir = buffered_server(make_server, tmp_path, u)
    srv.site_extra = f"[PROXY]\n    Buffering off\n    Pass / {u.addr}\n"
    srv.start()
    s = slow_client(srv, f"/big?n={N}")
    assert not wait_answered(u, 1, 2), u.stats()  # held back: the site's off
    assert files_into(srv.proc.pid, bdir) == []
    head, sha, got = read_response(s, N)
    s.close()
    assert got == N and sha == expected_sha(N)


def test_site_buffering_monkey_t(make_server, tmp_path):
    srv = proxy_server(make_server, site="    Buffering maybe\n    Pass / 127.0.0.1:9\n")
    err = srv.run_expect_failure(["-t"])
    assert "sites/default:5: Buffering: expected on or off, got 'maybe'" in err, err
    # a site that turns buffering on needs proxy.conf's BufferDir to take files
    srv = proxy_server(make_server, conf="    BufferDir /nonexistent/pxbuf\n",
                       site="    Pass / 127.0.0.1:9\n    Buffering on\n")
    err = srv.run_expect_failure(["-t"])
    assert "sites/default:6: Buffering on: cannot make a temporary file in /nonexistent/pxbuf" \
        in err, err
    srv = proxy_server(make_server, conf="    BufferDir /nonexistent/pxbuf\n    BufferMaxTemp 0\n",
                       site="    Pass / 127.0.0.1:9\n    Buffering on\n")
    srv.start()
    srv.stop()


def test_monkey_t_errors(make_server, tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    cases = [
        ("    Buffering maybe\n", "proxy.conf:2"),
        ("    BufferSize 100\n", "proxy.conf:2"),
        ("    BufferSize 1T\n", "proxy.conf:2"),
        ("    BufferMaxTemp lots\n", "proxy.conf:2"),
        ("    Buffering on\n    BufferDir /nonexistent/pxbuf\n", "proxy.conf:3"),
        (f"    Buffering on\n    BufferDir {a_file}\n", "proxy.conf:3"),
    ]
    for conf, where in cases:
        srv = proxy_server(make_server, conf=conf, site="    Pass / 127.0.0.1:9\n")
        err = srv.run_expect_failure(["-t"])
        assert where in err, (conf, err)
    srv = proxy_server(make_server, conf="    Buffering on\n    BufferDir /nonexistent/pxbuf\n")
    err = srv.run_expect_failure(["-t"])
    assert "cannot make a temporary file in /nonexistent/pxbuf" in err, err
    # memory only needs no directory
    srv = proxy_server(make_server, conf="    Buffering on\n    BufferMaxTemp 0\n"
                                         "    BufferDir /nonexistent/pxbuf\n")
    srv.start()
    srv.stop()


def test_reload_and_stop_with_buffered_answers(make_server, upstreams, tmp_path):
    u = upstreams("a")
    srv, bdir = buffered_server(make_server, tmp_path, u)
    srv.start()
    socks = [slow_client(srv, f"/big?n={N // 4}") for _ in range(3)]
    assert wait_answered(u, 3, 20), u.stats()
    # what the upstream's sockets still hold is read into the files meanwhile
    assert wait_for(lambda: len(files_into(srv.proc.pid, bdir)) == 3, 10), \
        files_into(srv.proc.pid, bdir)
    srv.reload()
    head, sha, got = read_response(socks[0], N // 4)
    assert got == N // 4 and sha == expected_sha(N // 4)
    # the others are still held when the server stops: everything freed (ASan's leak check)
    assert srv.stop() == 0
    for s in socks:
        s.close()
