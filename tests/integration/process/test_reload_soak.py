"""Tier 6b: reloads while requests are held open, the short soak of the
lifetime rules (docs/ARCHITECTURE.md, "Lifetimes across reloads").

One server with everything that can outlive a configuration: Duda
WebSockets (taken-over connections), CGI scripts streaming their output,
FastCGI requests waiting for php-fpm, requests held past the server's
Timeout (given up, their plugins told), and HTTP/2 streams; a reload every
300 ms meanwhile. Every answer must be one of those the request can get,
and the server must stay up with nothing reported by the sanitizers (the
harness checks its log at the stop): under ASan this is the run that
found the use-after-frees after a reload.
"""

import contextlib
import os
import random
import shutil
import signal
import socket
import threading
import time

import hpack
import pytest

from conftest import BUILD, EMULATED, ROOT, SLOW, STATIC
from gwutil import CgiConn
from h2util import H2_MARKS, PREFACE, frame

pytest.importorskip("websockets.sync.client", reason="Python's websockets (tools/deps.sh test)")
from websockets.sync.client import connect  # noqa: E402

PACKAGES = BUILD / "duda-packages"
PHP_FPM = shutil.which("php-fpm8.2") or (
    "/usr/sbin/php-fpm8.2" if os.path.exists("/usr/sbin/php-fpm8.2") else None)

pytestmark = [
    pytest.mark.skipif(STATIC, reason="static binary: no shared objects"),
    pytest.mark.skipif(EMULATED, reason="cross-test: services are built for the host"),
    pytest.mark.skipif(not (PACKAGES / "websocket.dpkg").exists(),
                       reason="websocket package not built (libssl-dev, zlib1g-dev)"),
    pytest.mark.skipif(PHP_FPM is None, reason="php-fpm is not installed (tools/deps.sh test)"),
] + H2_MARKS

SOAK_SECONDS = 10


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    from test_duda import build
    return build(ROOT / "tests" / "duda" / "wstest", tmp_path_factory.mktemp("services"))


def soak_server(make_server, services, fpm_sock):
    from test_duda import web_service
    srv = make_server()
    srv.set(Listen=f"127.0.0.1:{srv.port} h2c", Workers=2, Timeout="2")
    srv.plugins = [str(BUILD / "plugins" / f"monkey-{p}.so") for p in ("duda", "cgi", "fastcgi")]
    plugins = srv.conf / "plugins"
    plugins.mkdir(exist_ok=True)
    (plugins / "duda.conf").write_text(
        f"[DUDA]\n    ServicesRoot {services}\n    PackagesRoot {PACKAGES}\n")
    (plugins / "cgi.conf").write_text("[CGI]\n    Timeout 10\n    KillGrace 300ms\n")
    (plugins / "fastcgi.conf").write_text("[FASTCGI]\n    Timeout 30\n")
    bindir = srv.dir / "cgi-bin"
    bindir.mkdir()
    (bindir / "drip.sh").write_text('#!/bin/sh\nprintf "Content-Type: text/plain\\r\\n\\r\\n"\n'
                                    "for i in 1 2 3 4 5; do echo piece$i; sleep 0.1; done\n")
    (bindir / "silent.sh").write_text("#!/bin/sh\nsleep 30\n")
    for f in bindir.iterdir():
        f.chmod(0o755)
    srv.file("hello.txt", "Hello World!\n")
    srv.file("slow.php", '<?php usleep((int) ($_GET["ms"] ?? 100) * 1000); echo "slept\\n";')
    srv.site_extra = (f"[CGI]\n    ScriptAlias /cgi-bin/ {bindir}\n"
                      f"[FASTCGI]\n    Backend unix:{fpm_sock}\n    Match \\.php$\n"
                      + web_service("wstest"))
    return srv


class Worker(threading.Thread):
    """Runs `job` until `stop`; keeps the first failure for the test."""

    def __init__(self, name, job, stop):
        super().__init__(name=name, daemon=True)
        self.job, self.stop, self.failure, self.rounds = job, stop, None, 0

    def run(self):
        try:
            while not self.stop.is_set():
                self.job()
                self.rounds += 1
        except Exception as e:  # noqa: BLE001 (reported by the test)
            self.failure = f"{self.name}: {e!r}"


def test_reloads_while_requests_are_held(make_server, services, tmp_path):
    from test_fastcgi import PhpFpm
    fpm = PhpFpm(tmp_path / "fpm", children=4)
    try:
        srv = soak_server(make_server, services, fpm.sock)
        srv.start()
        port = srv.port
        stop = threading.Event()

        def websocket():
            # open across reloads, closed by the client or left to the server's stop
            with connect(f"ws://127.0.0.1:{port}/wstest/echo", open_timeout=10 * SLOW) as ws:
                for i in range(5):
                    ws.send(f"m{i}")
                    assert ws.recv(timeout=10 * SLOW) == f"m{i}"
                    time.sleep(0.1)

        def cgi_stream():
            c = CgiConn(port, timeout=10 * SLOW)
            if random.random() < 0.3:  # leave in the middle
                c.send("GET /cgi-bin/drip.sh HTTP/1.1\r\nHost: localhost\r\n\r\n")
                c.sock.recv(64)
            else:
                r = c.request("GET", "/cgi-bin/drip.sh")
                assert r.status == 200 and b"piece5" in r.body, r
            c.close()

        def held():
            # past the server's Timeout (2 s): answered for the plugin, which lets go
            c = CgiConn(port, timeout=10 * SLOW)
            path = random.choice(["/cgi-bin/silent.sh", "/slow.php?ms=20000"])
            r = c.request("GET", path)
            # 504: the gateway waited for its backend; 503: the request still
            # waited for a connection, every php-fpm child being busy
            assert r.status == 504 or (r.status == 503 and path.endswith("20000")), (path, r)
            c.close()

        def fastcgi():
            c = CgiConn(port, timeout=10 * SLOW)
            for _ in range(3):
                r = c.request("GET", "/slow.php?ms=50")
                # 503: the server's Timeout while php-fpm's children were all busy
                assert r.status in (200, 503, 504), r
                if r.status != 200:
                    break
            c.close()

        def h2_streams():
            s = socket.create_connection(("127.0.0.1", port), timeout=10 * SLOW)
            s.sendall(PREFACE + frame(4, 0, 0))
            enc = hpack.Encoder()
            for sid in (1, 3, 5, 7):
                s.sendall(frame(1, 0x5, sid, enc.encode([
                    (":method", "GET"), (":scheme", "http"), (":authority", "localhost"),
                    (":path", "/hello.txt" if sid != 5 else "/cgi-bin/drip.sh")])))
            time.sleep(0.05)
            s.close()  # mid-flight: every stream is given up

        jobs = {"websocket": websocket, "cgi_stream": cgi_stream, "held": held,
                "fastcgi": fastcgi, "h2": h2_streams}
        workers = [Worker(f"{name}{i}", job, stop) for name, job in jobs.items() for i in range(2)]
        for w in workers:
            w.start()
        t0 = time.monotonic()
        reloads = 0
        while time.monotonic() - t0 < SOAK_SECONDS:
            time.sleep(0.3)
            srv.signal(signal.SIGHUP)
            reloads += 1
        stop.set()
        for w in workers:
            w.join(timeout=40 * SLOW)
        failures = [w.failure for w in workers if w.failure]
        assert not failures, failures
        assert all(w.rounds > 0 for w in workers), [(w.name, w.rounds) for w in workers]
        assert srv.proc.poll() is None, srv.stderr_text()
        assert srv.stderr_text().count("configuration reloaded") > 5
        with contextlib.closing(CgiConn(port, timeout=10 * SLOW)) as c:
            assert c.request("GET", "/hello.txt").status == 200
        assert srv.stop() == 0  # sanitizer reports fail here
    finally:
        fpm.stop()
