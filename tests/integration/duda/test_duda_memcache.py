"""Duda and memcached: the memcache package (duda/packages/memcache) against
Debian's memcached, started here on a free port and stopped by PID."""

import math
import os
import shutil
import socket
import subprocess
import threading
import time

import pytest

from conftest import BUILD, EMULATED, ROOT, SLOW, STATIC, free_port, wait_port
from test_duda import build, duda_server, web_service

PACKAGES = BUILD / "duda-packages"
MEMCACHED = shutil.which("memcached") or shutil.which("/usr/bin/memcached")

pytestmark = [
    pytest.mark.skipif(STATIC, reason="static binary: no shared objects"),
    pytest.mark.skipif(EMULATED, reason="cross-test: packages are built for the host"),
    pytest.mark.skipif(not (PACKAGES / "memcache.dpkg").exists(),
                       reason="built without libmemcached (libmemcached-dev): no memcache package"),
    pytest.mark.skipif(MEMCACHED is None, reason="no memcached (tools/deps.sh test installs it)"),
]


@pytest.fixture
def memcached():
    port = free_port()
    user = ["-u", "root"] if os.geteuid() == 0 else []  # memcached refuses root without it
    proc = subprocess.Popen([MEMCACHED, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "16",
                             *user], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert wait_port(port, proc=proc), "memcached did not start"
    yield port
    proc.kill()
    proc.wait()


def mc_get(port, key):
    """The value memcached holds for key, or None (its text protocol)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"get %s\r\n" % key.encode())
        data = b""
        while not data.endswith(b"END\r\n"):
            chunk = s.recv(4096)
            assert chunk
            data += chunk
    if data == b"END\r\n":
        return None
    return data.split(b"\r\n")[1]


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    out = tmp_path_factory.mktemp("services")
    build(ROOT / "tests" / "duda" / "mcuser", out)
    return out


def mc_server(make_server, services, tmp_path, servers):
    confdir = tmp_path / "svcconf"
    confdir.mkdir(exist_ok=True)
    (confdir / "memcache.conf").write_text(f"[MEMCACHE]\n    Servers {servers}\n")
    srv = duda_server(make_server, services, [web_service("mcuser", ConfDir=confdir)])
    (srv.conf / "plugins" / "duda.conf").write_text(
        f"[DUDA]\n    ServicesRoot {services}\n    PackagesRoot {PACKAGES}\n")
    return srv


def test_get_set_delete_incr(make_server, services, memcached, tmp_path):
    srv = mc_server(make_server, services, tmp_path, f"127.0.0.1:{memcached}").start()
    assert srv.get("/mcuser/get/colour").status == 404
    r = srv.get("/mcuser/set/colour/blue")
    assert (r.status, r.body) == (200, b"stored\n")
    assert mc_get(memcached, "colour") == b"blue"
    r = srv.get("/mcuser/get/colour")
    assert (r.status, r.body) == (200, b"blue\n")
    assert srv.get("/mcuser/del/colour").body == b"deleted\n"
    assert mc_get(memcached, "colour") is None
    assert srv.get("/mcuser/del/colour").status == 404
    # incr: a missing key starts at 0.
    assert srv.get("/mcuser/incr/n?by=5").body == b"5\n"
    assert srv.get("/mcuser/incr/n").body == b"6\n"
    assert srv.get("/mcuser/incr/n?by=10").body == b"16\n"
    assert mc_get(memcached, "n") == b"16"
    # A key memcached cannot take is refused before any work is queued.
    assert srv.get("/mcuser/get/" + "k" * 251).status == 400
    assert srv.stop() == 0


def test_expiry(make_server, services, memcached, tmp_path):
    srv = mc_server(make_server, services, tmp_path, f"127.0.0.1:{memcached}").start()
    # memcached counts whole seconds on a clock of its own: an item of ttl
    # seconds lives about ttl - 1 to ttl + 1 s. Polled until gone, within a
    # bound; it must be there at first and not go before half its ttl.
    ttl = 2 + math.ceil(SLOW)
    t0 = time.monotonic()
    assert srv.get(f"/mcuser/set/short/lived?ttl={ttl}").status == 200
    assert srv.get("/mcuser/set/long/lived?ttl=100").status == 200
    assert srv.get(f"/mcuser/incr/count?ttl={ttl}").body == b"1\n"

    def gone(key):
        polls = 0
        while True:
            r = srv.get(f"/mcuser/get/{key}")
            if r.status == 404:
                return polls
            assert r.status == 200, (r.status, r.body)
            polls += 1
            assert time.monotonic() - t0 < ttl + 1 + 2 * SLOW, f"{key} outlived its ttl"
            time.sleep(0.05)

    assert gone("short") > 0, "short was gone at once"
    assert time.monotonic() - t0 >= ttl / 2, "short expired before half its ttl"
    gone("count")
    assert srv.get("/mcuser/get/long").body == b"lived\n"
    assert srv.get("/mcuser/incr/count").body == b"1\n"  # expired: starts again
    assert srv.stop() == 0


def test_silent_server_fails_without_blocking_the_worker(make_server, services, tmp_path):
    # A socket that takes connections (the kernel's backlog) and never answers.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    srv = mc_server(make_server, services, tmp_path, f"127.0.0.1:{silent.getsockname()[1]}")
    srv.file("static.txt", "static\n")
    srv.set(Workers=1).start()
    result = {}

    def slow():
        c = srv.conn(timeout=10 * SLOW)
        result["r"] = c.request("GET", "/mcuser/get/x")
        c.close()

    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.2)  # the get is waiting on a task thread for memcached's answer
    started = time.monotonic()
    assert srv.get("/static.txt").body == b"static\n"
    elapsed = time.monotonic() - started
    t.join()
    silent.close()
    assert result["r"].status == 502, result["r"]
    assert b"A TIMEOUT OCCURRED" in result["r"].body, result["r"]
    # The worker served the static file while the memcache get waited (about 1 s).
    assert elapsed < 0.5 * SLOW, elapsed
    assert srv.stop() == 0
