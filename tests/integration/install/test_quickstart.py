"""The quick start: the bundled conf/ as `make run` serves it, with its
relative paths into htdocs/ and the build (plugins, the localhost
certificate, build/log/), answering HTTP and HTTPS and logging both."""

import os
import shutil
import socket
import ssl
import subprocess
import time

import pytest

from conftest import (BUILD, MONKEY, ROOT, SLOW, Conn, Readiness, free_port, needs_dlopen,
                      wait_port)

pytestmark = [
    needs_dlopen,
    pytest.mark.skipif(not (BUILD / "plugins" / "monkey-tls.so").exists(),
                       reason="built without OpenSSL (MK_TLS off)"),
]


@pytest.fixture
def bundled(tmp_path):
    """conf/ copied beside links to htdocs/ and the build's plugins and
    certificate, so its "../" paths resolve as in the tree, with free ports
    on its two Listen lines and a build/log/ of its own."""
    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", conf, ignore=shutil.ignore_patterns("*.sock"))
    (tmp_path / "htdocs").symlink_to(ROOT / "htdocs")
    build = tmp_path / "build"
    build.mkdir()
    for d in ("plugins", "tls"):
        (build / d).symlink_to(BUILD / d)
    (build / "log").mkdir()
    http_port, https_port = free_port(), free_port()
    text = (conf / "monkey.conf").read_text()
    assert "    Listen 2001\n" in text and "    Listen 2443 tls\n" in text
    text = text.replace("    Listen 2001\n", f"    Listen 127.0.0.1:{http_port}\n")
    text = text.replace("    Listen 2443 tls\n", f"    Listen 127.0.0.1:{https_port} tls\n")
    (conf / "monkey.conf").write_text(text)
    # Ready (READY=1) once its main loop runs: the control socket is open then.
    notify = Readiness()
    proc = subprocess.Popen([str(MONKEY), "-c", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE,
                            env={**os.environ, "NOTIFY_SOCKET": notify.name})
    notify.follow(proc)
    try:
        assert wait_port(http_port, proc=proc) and wait_port(https_port, proc=proc)
        assert notify.wait(proc), "the server did not get ready"
        yield http_port, https_port, build / "log", conf
    finally:
        proc.terminate()
        proc.wait(timeout=15 * SLOW)


def test_bundled_configuration_serves_http_and_https_and_logs(bundled):
    http_port, https_port, logs, _ = bundled
    index = (ROOT / "htdocs" / "index.html").read_bytes()
    c = Conn(http_port)
    r = c.request("GET", "/", headers={"Host": "localhost"})
    c.close()
    assert r.status == 200 and r.body == index
    ctx = ssl.create_default_context(cafile=str(BUILD / "tls" / "localhost.crt"))
    with ctx.wrap_socket(socket.create_connection(("127.0.0.1", https_port), timeout=5 * SLOW),
                         server_hostname="localhost") as s:  # the certificate verifies
        s.sendall(b"GET /no-such-page HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    assert data.startswith(b"HTTP/1.1 404 ")
    deadline = time.monotonic() + 5 * SLOW
    lines = []
    while time.monotonic() < deadline and len(lines) < 2:
        time.sleep(0.05)
        access = logs / "access.log"
        lines = access.read_text().splitlines() if access.exists() else []
    assert len(lines) == 2, lines
    assert '"GET / HTTP/1.1" 200 ' in lines[0] and '"GET /no-such-page HTTP/1.1" 404 ' in lines[1]
    assert (logs / "error.log").exists()


def test_bundled_configuration_answers_monkey_ctl(bundled):
    _, _, _, conf = bundled
    p = subprocess.run([str(BUILD / "bin" / "monkey-ctl"), "-c", str(conf), "status"],
                       capture_output=True, text=True, timeout=10 * SLOW)
    assert p.returncode == 0, p.stderr
    assert "plugin tls" in p.stdout
