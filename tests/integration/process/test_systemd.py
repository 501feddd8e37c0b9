"""systemd conventions without systemd (docs/packaging.md): readiness
notifications on $NOTIFY_SOCKET, and socket activation ($LISTEN_FDS).

The notifications are read from a datagram socket the test binds; activation
goes through a small wrapper that moves a bound listening socket to
descriptor 3, sets LISTEN_FDS and LISTEN_PID to its own pid and execs the
server (the pid stays the same across exec).
"""

import re
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

from conftest import MONKEY, SLOW, Conn, check_sanitizers, free_port, needs_part, wait_port

needs_systemd = needs_part("systemd", "systemd support (MK_SYSTEMD=OFF)")


def notify_socket(tmp_path, abstract):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if abstract:
        name = "@monkey-test-" + uuid.uuid4().hex
        s.bind("\0" + name[1:])
    else:
        name = str(tmp_path / "notify.sock")
        s.bind(name)
    s.settimeout(10 * SLOW)
    return s, name


def messages(sock, n):
    """The next n datagrams, each as a dict of its KEY=VALUE lines."""
    out = []
    for _ in range(n):
        text = sock.recv(4096).decode()
        out.append(dict(line.split("=", 1) for line in text.split("\n") if line))
    return out


@needs_systemd
@pytest.mark.parametrize("abstract", [False, True], ids=["path", "abstract"])
def test_ready_reloading_stopping(make_server, monkeypatch, tmp_path, abstract):
    sock, name = notify_socket(tmp_path, abstract)
    monkeypatch.setenv("NOTIFY_SOCKET", name)
    srv = make_server()
    srv.file("index.html", "hi\n")
    srv.start()
    [ready] = messages(sock, 1)
    assert ready == {"READY": "1", "MAINPID": str(srv.proc.pid)}
    assert srv.get("/").status == 200

    srv.signal(signal.SIGHUP)
    reloading, again = messages(sock, 2)
    assert reloading["RELOADING"] == "1"
    usec = int(reloading["MONOTONIC_USEC"])
    assert abs(usec - int(1e6 * time.monotonic())) < 60_000_000
    assert again == {"READY": "1"}

    srv.signal(signal.SIGTERM)
    assert messages(sock, 1) == [{"STOPPING": "1"}]
    srv.proc.wait(timeout=15 * SLOW)  # no second TERM: that one would stop at once
    assert srv.stop() == 0
    sock.close()


def test_no_notify_socket_sends_nothing(make_server, monkeypatch, tmp_path):
    sock, name = notify_socket(tmp_path, False)
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    srv = make_server()
    srv.start()
    srv.signal(signal.SIGHUP)
    assert srv.stop() == 0
    sock.settimeout(0.2)
    with pytest.raises(socket.timeout):
        sock.recv(4096)
    sock.close()


WRAPPER = """
import os, sys
fd, pid_override = int(sys.argv[1]), sys.argv[2]
os.dup2(fd, 3)
if fd != 3:
    os.close(fd)
os.environ["LISTEN_FDS"] = "1"
os.environ["LISTEN_PID"] = pid_override or str(os.getpid())
os.execv(sys.argv[3], sys.argv[3:])
"""


def activated(srv, listener, pid_override=""):
    """Start srv through the wrapper with `listener` as descriptor 3."""
    srv.write_conf()
    srv.stderr = open(srv.stderr_path, "w")
    cmd = [sys.executable, "-c", WRAPPER, str(listener.fileno()), pid_override, str(MONKEY),
           "-c", str(srv.conf)]
    srv.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=srv.stderr,
                                pass_fds=[listener.fileno()])
    return srv


@needs_systemd
def test_socket_activation_adopts_the_passed_socket(make_server):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    other = free_port()
    srv = make_server()
    srv.file("index.html", "activated\n")
    srv.port = port
    # The first Listen is the passed socket; the second is bound as usual.
    srv.set(Listen=[f"127.0.0.1:{port}", f"127.0.0.1:{other}"])
    activated(srv, listener)
    # Our copy stays open: the server could not bind the port itself
    # (no SO_REUSEPORT on it), so serving proves it adopted the socket.
    assert wait_port(other, proc=srv.proc), srv.stderr_text()
    for p in (port, other):
        c = Conn(p)
        r = c.request("GET", "/")
        c.close()
        assert r.status == 200 and r.body == b"activated\n"
    # Reload keeps serving on the passed socket.
    srv.signal(signal.SIGHUP)
    c = Conn(port)
    assert c.request("GET", "/").status == 200
    c.close()
    assert srv.stop() == 0
    assert "socket activation: 1 socket passed" in srv.stderr_text()
    listener.close()


def test_socket_activation_for_another_pid_is_ignored(make_server):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    srv = make_server()
    srv.set(Listen=f"127.0.0.1:{port}")
    activated(srv, listener, pid_override="1")
    rc = srv.proc.wait(timeout=10 * SLOW)
    srv.proc = None
    srv.stderr.close()
    assert rc == 1
    text = srv.stderr_text()
    # EADDRINUSE: "Address already in use" (glibc), "Address in use" (musl)
    assert re.search(rf"monkey.conf:2: Listen 127.0.0.1:{port}: Address (already )?in use", text)
    check_sanitizers(text)
    listener.close()
