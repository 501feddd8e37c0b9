"""Tier 12: the control plugin (plugins/control) and its client monkey-ctl.

The plugin is loaded as a shared object; monkey-ctl is the built binary. Every
query goes through the real unix socket; the HTTP status path through a real
TCP client.
"""

import json
import os
import re
import socket
import stat
import subprocess
import time

import pytest

from conftest import BUILD, SLOW, built_without, delay_start, needs_dlopen
from h2util import needs_tool

pytestmark = needs_dlopen

CONTROL_SO = BUILD / "plugins" / "monkey-control.so"
HOLD_SO = BUILD / "tests" / "plugins" / "monkey-hold.so"
CTL = BUILD / "bin" / "monkey-ctl"


def ctl(*args, timeout=20):
    """Run monkey-ctl; return the CompletedProcess (text)."""
    return subprocess.run([str(CTL), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout * SLOW)


def control_conf(srv, body="    Socket ctl.sock\n", section="[CONTROL]\n"):
    (srv.conf / "plugins").mkdir(exist_ok=True)
    path = srv.conf / "plugins" / "control.conf"
    path.write_text(section + body)
    return path


def make_control(make_server, body="    Socket ctl.sock\n", start=True, sock=None, **server_keys):
    srv = make_server()
    srv.file("index.html", "<h1>index</h1>\n")
    srv.file("hello.txt", "Hello World!\n")
    srv.plugins = [str(CONTROL_SO)]
    srv.set(**server_keys)
    srv.control_conf = control_conf(srv, body)
    m = re.search(r"^\s+Socket\s+(\S+)", body, re.M)
    srv.sock = sock or srv.conf / (m.group(1) if m else "monkey.sock")
    if start:
        srv.start()
        wait_socket(srv.sock)
    return srv


def unix_connect(path, timeout=5.0):
    """A connected AF_UNIX socket; long paths go through the directory's descriptor."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout * SLOW)
    path = str(path)
    if len(path) < 100:
        try:
            s.connect(path)
            return s
        except OSError:
            s.close()
            raise
    dirfd = os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY)
    try:
        s.connect(f"/proc/self/fd/{dirfd}/{os.path.basename(path)}")
        return s
    except OSError:
        s.close()
        raise
    finally:
        os.close(dirfd)


def wait_socket(path, timeout=10.0):
    """Wait until the control socket accepts connections.

    The server's TCP port opens before plugins start, so the socket may come
    a moment after the port."""
    deadline = time.monotonic() + timeout * SLOW
    while True:
        try:
            unix_connect(path).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"no control socket at {path}"
            time.sleep(0.01)


def status_json(srv, command="status"):
    p = ctl("-s", srv.sock, "--json", command)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def raw_exchange(path, data, timeout=5.0):
    """Send bytes on the control socket, return everything until EOF."""
    with unix_connect(path, timeout) as s:
        s.sendall(data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


@pytest.fixture
def ctlsrv(make_server):
    return make_control(make_server, Workers=3)


# ---- status ---------------------------------------------------------------------


def test_status_text(ctlsrv):
    p = ctl("-s", ctlsrv.sock, "status")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert int(re.search(r"^workers\s+(\d+)$", out, re.M).group(1)) == 3
    assert int(re.search(r"^uptime\s+(\d+) s", out, re.M).group(1)) >= 0
    assert int(re.search(r"^pid\s+(\d+)$", out, re.M).group(1)) == ctlsrv.proc.pid
    rows = re.findall(r"^(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", out, re.M)
    assert [int(r[0]) for r in rows] == [0, 1, 2]
    before = int(re.search(r"^requests\s+(\d+)$", out, re.M).group(1))
    for _ in range(4):
        assert ctlsrv.get("/hello.txt").status == 200
    out = ctl("-s", ctlsrv.sock, "status").stdout
    assert int(re.search(r"^requests\s+(\d+)$", out, re.M).group(1)) >= before + 4


def test_status_json_fields_and_growth(ctlsrv):
    doc = status_json(ctlsrv)
    for key in ("pid", "started", "uptime", "workers", "connections", "requests", "bytes_sent",
                "per_worker"):
        assert key in doc, key
    assert doc["uptime"] >= 0
    assert doc["started"] <= time.time() + 1
    assert doc["workers"] == 3
    assert [w["id"] for w in doc["per_worker"]] == [0, 1, 2]
    for w in doc["per_worker"]:
        assert set(w) == {"id", "connections", "requests", "bytes_sent"}

    body = ctlsrv.file("big.bin", os.urandom(50000))
    r0, b0 = doc["requests"], doc["bytes_sent"]
    for _ in range(3):
        assert ctlsrv.get("/big.bin").body == body.read_bytes()
    doc = status_json(ctlsrv)
    assert doc["requests"] >= r0 + 3
    assert doc["bytes_sent"] >= b0 + 3 * 50000
    assert sum(w["requests"] for w in doc["per_worker"]) == doc["requests"]
    assert sum(w["bytes_sent"] for w in doc["per_worker"]) == doc["bytes_sent"]


def test_connection_counts_per_worker(ctlsrv):
    assert status_json(ctlsrv)["connections"] == 0
    conns = [ctlsrv.conn() for _ in range(5)]
    try:
        for c in conns:
            assert c.request("GET", "/hello.txt").status == 200  # open and registered
        doc = status_json(ctlsrv)
        assert doc["connections"] == 5
        assert sum(w["connections"] for w in doc["per_worker"]) == 5
        workers = status_json(ctlsrv, "workers")["workers"]
        assert len(workers) == 3 and sum(w["connections"] for w in workers) == 5
    finally:
        for c in conns:
            c.close()
    deadline = time.monotonic() + 5 * SLOW
    while status_json(ctlsrv)["connections"] != 0:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_workers_text(ctlsrv):
    p = ctl("-s", ctlsrv.sock, "workers")
    assert p.returncode == 0
    lines = p.stdout.splitlines()
    assert lines[0].split()[:2] == ["worker", "connections"]
    assert len(lines) == 4


# ---- sites, plugins, config ---------------------------------------------------------


def test_sites_and_plugins(make_server, tmp_path):
    odd = tmp_path / 'we"ird \\dir é'
    odd.mkdir()
    srv = make_control(make_server, start=False)
    srv.extra_sites = {"other": f"[HOST]\n    ServerName other.test www.other.test\n"
                                f"    DocumentRoot {odd}\n"}
    srv.start()
    wait_socket(srv.sock)
    sites = status_json(srv, "sites")["sites"]
    assert len(sites) == 2
    by_name = {s["names"][0]: s for s in sites}
    assert by_name["localhost"]["document_root"] == str(srv.docroot)
    assert by_name["localhost"]["file"] == str(srv.conf / "sites" / "default")
    assert by_name["other.test"]["names"] == ["other.test", "www.other.test"]
    assert by_name["other.test"]["document_root"] == str(odd)  # escaped, valid JSON
    text = ctl("-s", srv.sock, "sites").stdout
    assert "site other.test www.other.test" in text
    assert f"document root  {odd}" in text

    plugins = status_json(srv, "plugins")["plugins"]
    assert [p["name"] for p in plugins] == ["control"]
    assert plugins[0]["version"] and plugins[0]["description"]
    assert ctl("-s", srv.sock, "plugins").stdout.startswith("control ")


def test_config_in_force(make_server):
    srv = make_control(make_server, Workers=3, KeepAliveTimeout=7)
    cfg = status_json(srv, "config")["config"]
    assert cfg["Workers"] == ["3"]
    assert cfg["KeepAliveTimeout"] == ["7"]
    assert cfg["Listen"] == [f"127.0.0.1:{srv.port}"]
    assert cfg["Timeout"] == ["5"]
    assert cfg["SendTimeout"] == ["30"]  # a default, in force too
    text = ctl("-s", srv.sock, "config").stdout
    assert text.startswith("[SERVER]\n")
    assert "    Workers 3\n" in text and "    KeepAliveTimeout 7\n" in text


# ---- commands ------------------------------------------------------------------------


def test_reload_applies_changed_site(make_server, tmp_path):
    root1, root2 = tmp_path / "one", tmp_path / "two"
    root1.mkdir()
    root2.mkdir()
    (root1 / "page.txt").write_text("first\n")
    (root2 / "page.txt").write_text("second\n")
    srv = make_control(make_server, start=False)
    srv.extra_sites = {"other": f"[HOST]\n    ServerName other.test\n    DocumentRoot {root1}\n"}
    srv.start()
    wait_socket(srv.sock)
    host = {"Host": "other.test"}
    assert srv.get("/page.txt", headers=host).body == b"first\n"
    (srv.conf / "sites" / "other").write_text(
        f"[HOST]\n    ServerName other.test\n    DocumentRoot {root2}\n")
    p = ctl("-s", srv.sock, "reload")
    assert p.returncode == 0, p.stderr
    assert "reloaded" in p.stdout
    assert srv.get("/page.txt", headers=host).body == b"second\n"
    roots = [s["document_root"] for s in status_json(srv, "sites")["sites"]]
    assert str(root2) in roots and str(root1) not in roots


@needs_tool("strace")
def test_a_command_right_after_the_start_is_carried_out(make_server):
    """A server that start() returned takes control commands: start() waits
    until the server runs its main loop (it says READY=1), not only until
    its port and its control socket are open. Here the loop starts a second
    late (strace delays its first call, signalfd4), as under emulation or on
    a loaded machine: a command sent earlier is refused ("does not run its
    control loop")."""
    srv = make_control(make_server, start=False)
    delay_start(srv, "signalfd4")
    srv.start()
    wait_socket(srv.sock)
    p = ctl("-s", srv.sock, "reload")
    assert p.returncode == 0, p.stderr
    assert srv.stop() == 0


@needs_tool("strace")
def test_a_command_during_the_start_waits_for_the_loop(make_server):
    """The server side of the same race: a command that reaches the control
    socket while the server still starts (its loop a second late) waits for
    the loop and is carried out, instead of being refused as if the server
    ran in library mode."""
    srv = make_control(make_server, start=False)
    delay_start(srv, "signalfd4")
    srv.start(ready=False)  # the port is open, the loop not yet
    wait_socket(srv.sock)
    p = ctl("-s", srv.sock, "reload")
    assert p.returncode == 0, p.stderr
    assert "library mode" not in p.stderr
    assert srv.stop() == 0


def test_reload_broken_configuration_refused(make_server):
    srv = make_control(make_server)
    broken = srv.conf / "sites" / "broken"
    broken.write_text("[HOST]\n    ServerName broken.test\n    Colour blue\n")
    p = ctl("-s", srv.sock, "reload")
    assert p.returncode == 1
    assert f"{broken}:3:" in p.stderr
    assert p.stderr.startswith("monkey-ctl: reload refused")
    # JSON mode: the same reason, as a document.
    p = ctl("-s", srv.sock, "--json", "reload")
    assert p.returncode == 1
    doc = json.loads(p.stdout)
    assert doc["ok"] is False and f"{broken}:3:" in doc["error"]
    # The server keeps running with the old configuration.
    assert srv.get("/hello.txt").status == 200
    names = [s["names"] for s in status_json(srv, "sites")["sites"]]
    assert names == [["localhost"]]


def test_reopen_logs(make_server):
    srv = make_control(make_server, start=False)
    log = srv.dir / "error.log"
    srv.set(Log=str(log))
    srv.start()
    wait_socket(srv.sock)
    assert log.exists()
    rotated = srv.dir / "error.log.1"
    log.rename(rotated)
    p = ctl("-s", srv.sock, "reopen")
    assert p.returncode == 0, p.stderr
    assert "reopened" in p.stdout
    assert log.exists()  # reopened: a new file
    assert ctl("-s", srv.sock, "reload").returncode == 0
    deadline = time.monotonic() + 5 * SLOW
    while "reload requested" not in log.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert "reload requested" not in rotated.read_text()


def test_stop_exits_zero(ctlsrv):
    assert ctlsrv.sock.exists()
    p = ctl("-s", ctlsrv.sock, "--json", "stop")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {"ok": True, "command": "stop", "message": "server stopped"}
    # monkey-ctl returns once the server is done: the socket is gone by then.
    assert not ctlsrv.sock.exists()
    assert ctlsrv.proc.wait(timeout=10 * SLOW) == 0
    assert "stop requested by uid" in ctlsrv.stderr_text()


# ---- the socket file ------------------------------------------------------------------


def test_socket_mode_default_and_configured(make_server):
    srv = make_control(make_server)
    st = os.stat(srv.sock)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600
    srv2 = make_control(make_server, body="    Socket ctl.sock\n    Mode 0660\n")
    assert stat.S_IMODE(os.stat(srv2.sock).st_mode) == 0o660
    srv3 = make_control(make_server, body="    Socket ctl.sock\n    Mode 644\n")
    assert stat.S_IMODE(os.stat(srv3.sock).st_mode) == 0o644


def test_stale_socket_replaced(make_server):
    srv = make_control(make_server, start=False)
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(srv.sock))  # closed without unlinking: a crashed server's socket
    assert srv.sock.exists()
    srv.start()
    wait_socket(srv.sock)
    assert ctl("-s", srv.sock, "status").returncode == 0
    assert "replaced the stale socket" in srv.stderr_text()


def test_second_server_on_same_socket_refused(make_server, tmp_path):
    shared = tmp_path / "shared.sock"
    first = make_control(make_server, body=f"    Socket {shared}\n", sock=shared)
    second = make_control(make_server, body=f"    Mode 0600\n    Socket {shared}\n", start=False)
    err = second.run_expect_failure()
    assert f"{second.control_conf}:3:" in err
    assert "another server answers" in err
    assert "plugins.load:2:" in err
    # The first one still answers on its socket.
    assert shared.exists()
    assert status_json(first)["pid"] == first.proc.pid


def test_path_that_is_not_a_socket_refused(make_server):
    srv = make_control(make_server, start=False)
    srv.sock.write_text("not a socket")
    err = srv.run_expect_failure()
    assert f"{srv.control_conf}:2:" in err and "not a socket" in err
    assert srv.sock.read_text() == "not a socket"  # left alone


def test_missing_directory_refused(make_server, tmp_path):
    missing = tmp_path / "no" / "such" / "dir" / "ctl.sock"
    srv = make_control(make_server, body=f"    Mode 0600\n    Socket {missing}\n", start=False)
    err = srv.run_expect_failure()
    assert f"{srv.control_conf}:3:" in err
    assert "No such file or directory" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write to any directory")
def test_unwritable_directory_refused(make_server, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    srv = make_control(make_server, body=f"    Socket {locked}/ctl.sock\n", start=False)
    try:
        err = srv.run_expect_failure()
    finally:
        locked.chmod(0o700)
    assert f"{srv.control_conf}:2:" in err and "not writable" in err


def test_long_socket_path(make_server, tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    sock = deep / "control.sock"
    assert len(str(sock)) > 108  # beyond sun_path
    srv = make_control(make_server, body=f"    Socket {sock}\n", sock=sock)
    assert status_json(srv)["workers"] == 2
    assert ctl("-s", sock, "stop").returncode == 0
    assert srv.proc.wait(timeout=10 * SLOW) == 0
    assert not sock.exists()


def test_default_socket_and_confdir_lookup(make_server):
    # No control.conf at all: CONFDIR/monkey.sock, found by monkey-ctl -c.
    srv = make_server()
    srv.plugins = [str(CONTROL_SO)]
    srv.start()
    wait_socket(srv.conf / "monkey.sock")
    p = ctl("-c", srv.conf, "--json", "status")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["pid"] == srv.proc.pid
    # With a Socket line, -c follows it.
    srv2 = make_control(make_server, body="    Socket sub.sock   # a comment\n")
    assert ctl("-c", srv2.conf, "status").returncode == 0


def test_check_mode_creates_nothing(make_server):
    srv = make_control(make_server, start=False)
    srv.write_conf()
    p = subprocess.run([str(BUILD / "bin" / "monkey"), "-c", str(srv.conf), "-t"],
                       capture_output=True, text=True, timeout=10 * SLOW)
    assert p.returncode == 0, p.stderr
    assert not srv.sock.exists()
    # The check also validates control.conf.
    control_conf(srv, "    Socket ctl.sock\n    Mode 9\n")
    p = subprocess.run([str(BUILD / "bin" / "monkey"), "-c", str(srv.conf), "-t"],
                       capture_output=True, text=True, timeout=10 * SLOW)
    assert p.returncode == 1 and f"{srv.control_conf}:3:" in p.stderr


@pytest.mark.parametrize("body,line,reason", [
    ("    Socket ctl.sock\n    Mode 0999\n", 3, "Mode"),
    ("    Mode rw-------\n", 2, "Mode"),
    ("    Socket ctl.sock\n    Colour blue\n", 3, "unknown key"),
    ("    Socket a.sock\n    Socket b.sock\n", 3, "twice"),
    ("    HttpPath server-status\n", 2, "HttpPath"),
    ("    HttpPath /a//b\n", 2, "HttpPath"),
    ("    HttpPath /a/../b\n", 2, "HttpPath"),
    ("    HttpPath /status/*\n", 2, "HttpPath"),
    ("    HttpPath /users/:id\n", 2, "HttpPath"),
    ("    HttpPath /s\n    HttpAllow 127.0.0.1 300.1.1.1\n", 3, "300.1.1.1"),
    ("    HttpPath /s\n    HttpAllow 10.0.0.0/33\n", 3, "10.0.0.0/33"),
    ("    HttpAllow 127.0.0.1\n", 2, "without HttpPath"),
    ("    Socket dir/\n", 2, "Socket"),
])
def test_bad_configuration_refused(make_server, body, line, reason):
    srv = make_control(make_server, body=body, start=False)
    err = srv.run_expect_failure()
    assert f"{srv.control_conf}:{line}:" in err
    assert reason in err
    assert "plugins.load:2:" in err


@pytest.mark.skipif(not built_without("metrics"), reason="built with the metrics")
def test_metrics_path_refused_without_metrics(make_server):
    """A build without MK_METRICS refuses MetricsPath with its line
    (tests/integration/plugins/test_metrics.py tests it where it is built)."""
    srv = make_control(make_server, body="    Socket ctl.sock\n    MetricsPath /metrics\n",
                       start=False)
    err = srv.run_expect_failure()
    assert f"{srv.control_conf}:3:" in err and "built without metrics" in err, err


def test_unknown_section_refused(make_server):
    srv = make_control(make_server, start=False)
    control_conf(srv, "    Socket x.sock\n", section="[CONTROLS]\n")
    err = srv.run_expect_failure()
    assert f"{srv.control_conf}:1: unknown section [CONTROLS]" in err  # the header line


# ---- the HTTP status path ----------------------------------------------------------------


def test_http_status_json(make_server):
    srv = make_control(make_server, body="    Socket ctl.sock\n    HttpPath /server-status\n")
    r = srv.get("/server-status")
    assert r.status == 200
    assert r.header("content-type") == "application/json"
    assert r.header("cache-control") == "no-store"
    doc = json.loads(r.body)
    assert doc["workers"] == 2 and len(doc["per_worker"]) == 2
    assert doc["connections"] >= 1  # this one
    assert doc["pid"] == srv.proc.pid
    assert srv.request("HEAD", "/server-status").status == 200
    r = srv.request("POST", "/server-status", body=b"x")
    assert r.status == 405
    assert len(r.headers["allow"]) == 1
    assert r.header("allow") == "GET, HEAD, OPTIONS"
    r = srv.request("OPTIONS", "/server-status")
    assert r.status == 204 and r.header("allow") == "GET, HEAD, OPTIONS"
    assert srv.get("/server-status/x").status == 404
    assert srv.get("/hello.txt").body == b"Hello World!\n"


def test_http_status_forbidden_outside_allow(make_server):
    body = "    Socket ctl.sock\n    HttpPath /server-status\n    HttpAllow 10.0.0.0/8\n"
    srv = make_control(make_server, body=body)
    assert srv.get("/server-status").status == 403
    # Reload applies a new allow list.
    control_conf(srv, "    Socket ctl.sock\n    HttpPath /server-status\n"
                      "    HttpAllow 10.0.0.0/8, 127.0.0.1/32\n")
    assert ctl("-s", srv.sock, "reload").returncode == 0
    assert srv.get("/server-status").status == 200


def test_refused_reload_keeps_http_allow(make_server):
    """A reload is all or nothing: a good control.conf narrowing HttpAllow
    does not go in force when another file (a bad [ACCESS] rule) refuses
    the reload."""
    body = "    Socket ctl.sock\n    HttpPath /server-status\n"
    srv = make_control(make_server, body=body, start=False)
    srv.plugins.append(str(BUILD / "plugins" / "monkey-access.so"))
    srv.start()
    wait_socket(srv.sock)
    assert srv.get("/server-status").status == 200  # loopback is allowed by default
    control_conf(srv, body + "    HttpAllow 10.0.0.0/8\n")
    site = srv.conf / "sites" / "default"
    good = site.read_text()
    site.write_text(good + "[ACCESS]\n    Deny 10.0.0.0/40\n")
    p = ctl("-s", srv.sock, "reload")
    assert p.returncode == 1
    assert f"{site}:5:" in p.stderr and "10.0.0.0/40" in p.stderr, p.stderr
    assert srv.get("/server-status").status == 200
    # With the rule fixed the same control.conf goes in force.
    site.write_text(good + "[ACCESS]\n    Deny 10.0.0.0/8\n")
    p = ctl("-s", srv.sock, "reload")
    assert p.returncode == 0, p.stderr
    assert srv.get("/server-status").status == 403


def test_request_keeps_http_settings_of_its_configuration(make_server):
    """HttpPath and HttpAllow come from the request's configuration: a
    request held across a reload that moves the path is still answered
    as the configuration it arrived in says."""
    body = "    Socket ctl.sock\n    HttpPath /hold/status\n"
    srv = make_control(make_server, body=body, start=False)
    srv.plugins.insert(0, str(HOLD_SO))  # hold runs first, control after it
    srv.start()
    wait_socket(srv.sock)
    assert ctl("-s", srv.sock, "status").returncode == 0  # the server has started
    held = srv.conn()
    held.send(b"GET /hold/status HTTP/1.1\r\nHost: localhost\r\n\r\n")
    deadline = time.monotonic() + 5 * SLOW
    while srv.get("/held").body != b"held 1\n":
        assert time.monotonic() < deadline, "the request was not held"
        time.sleep(0.02)
    control_conf(srv, "    Socket ctl.sock\n    HttpPath /elsewhere\n")
    p = ctl("-s", srv.sock, "reload")
    assert p.returncode == 0, p.stderr
    assert srv.get("/release").body == b"released 1\n"
    r = held.read_response()
    assert r.status == 200
    assert json.loads(r.body)["workers"] == 2
    assert srv.get("/elsewhere").status == 200  # new requests have the new path


def test_bad_control_conf_refuses_the_whole_reload(make_server, tmp_path):
    body = "    Socket ctl.sock\n    HttpPath /server-status\n"
    srv = make_control(make_server, body=body)
    control_conf(srv, body + "    HttpAllow 10.0.0.0/33\n")
    (srv.conf / "sites" / "other").write_text(
        f"[HOST]\n    ServerName other.test\n    DocumentRoot {srv.docroot}\n")
    p = ctl("-s", srv.sock, "reload")
    assert p.returncode == 1
    assert f"{srv.control_conf}:4:" in p.stderr and "10.0.0.0/33" in p.stderr, p.stderr
    # Nothing of that reload is in force: not the new site, not the plugin file.
    names = [s["names"] for s in status_json(srv, "sites")["sites"]]
    assert names == [["localhost"]]
    assert srv.get("/server-status").status == 200


def test_http_status_off_by_default(ctlsrv):
    assert ctlsrv.get("/server-status").status == 404


# ---- the protocol and hostile clients ----------------------------------------------------


def test_raw_protocol(ctlsrv):
    out = raw_exchange(ctlsrv.sock, b"status json\n")
    head, body = out.split(b"\n", 1)
    assert head == b"OK"
    assert json.loads(body)["workers"] == 3
    assert raw_exchange(ctlsrv.sock, b"STATUS\r\n").startswith(b"OK\npid")
    assert raw_exchange(ctlsrv.sock, b"\n").startswith(b"ERR empty request")
    assert raw_exchange(ctlsrv.sock, b"frobnicate\n").startswith(b"ERR unknown command")
    assert raw_exchange(ctlsrv.sock, b"status yaml\n").startswith(b"ERR unknown format")
    assert raw_exchange(ctlsrv.sock, b"\x00\xff\xfe\n").startswith(b"ERR malformed")
    assert raw_exchange(ctlsrv.sock, b"status\x00json\n").startswith(b"ERR malformed")
    assert raw_exchange(ctlsrv.sock, b"a" * 5000).startswith(b"ERR request line too long")
    # A client that leaves at once (a liveness probe) harms nothing.
    for _ in range(3):
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(ctlsrv.sock))
    assert ctl("-s", ctlsrv.sock, "status").returncode == 0


def test_silent_clients_do_not_block_others(ctlsrv):
    silent = []
    for _ in range(5):
        s = socket.socket(socket.AF_UNIX)
        s.connect(str(ctlsrv.sock))
        s.sendall(b"sta")  # never finishes its line
        silent.append(s)
    try:
        t0 = time.monotonic()
        assert ctl("-s", ctlsrv.sock, "status").returncode == 0
        assert time.monotonic() - t0 < 1.5 * SLOW
        # Each silent client is cut off after the exchange timeout (3 s).
        for s in silent:
            s.settimeout(8)
            assert s.recv(100) == b""
        assert time.monotonic() - t0 >= 2.5
    finally:
        for s in silent:
            s.close()
    assert ctl("-s", ctlsrv.sock, "status").returncode == 0


# ---- monkey-ctl ----------------------------------------------------------------------------


def test_ctl_unreachable(tmp_path):
    missing = tmp_path / "nothing.sock"
    p = ctl("-s", missing, "status")
    assert p.returncode == 1
    assert p.stderr == f"monkey-ctl: cannot connect to {missing}: No such file or directory\n"
    # A socket file nobody answers on.
    stale = tmp_path / "stale.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(stale))
    p = ctl("-s", stale, "--json", "status")
    assert p.returncode == 1 and "Connection refused" in p.stderr
    # A confdir without a server.
    p = ctl("-c", tmp_path, "reload")
    assert p.returncode == 1 and f"{tmp_path}/monkey.sock" in p.stderr


def test_ctl_options_after_the_command(ctlsrv):
    """Options may follow COMMAND, as with every GNU tool (getopt permutes)."""
    for args in (["status", "--json", "-s", ctlsrv.sock], ["status", "-j", "-s", ctlsrv.sock],
                 ["-s", ctlsrv.sock, "status", "--json"],
                 ["status", f"--socket={ctlsrv.sock}", "--json", "-t", "5"]):
        p = ctl(*args)
        assert p.returncode == 0, (args, p.stderr)
        assert json.loads(p.stdout)["workers"] == 3, args
    p = ctl("workers", "-s", ctlsrv.sock)
    assert p.returncode == 0, p.stderr
    assert not p.stdout.startswith("{")
    # "--" ends the options: what follows is an argument, here a second COMMAND.
    p = ctl("-s", ctlsrv.sock, "--", "status", "--json")
    assert p.returncode == 2 and "one COMMAND only" in p.stderr


@pytest.mark.parametrize("args", [
    [],
    ["frobnicate"],
    ["status", "extra"],
    ["status", "extra", "--json"],
    ["--bogus", "status"],
    ["status", "--bogus"],
    ["status", "-s"],
    ["-s"],
    ["-s", "/x.sock", "-c", "/etc", "status"],
    ["-t", "0", "status"],
    ["-t", "soon", "status"],
])
def test_ctl_bad_usage(args):
    p = ctl(*args)
    assert p.returncode == 2, (args, p.stderr)
    assert p.stderr.startswith("monkey-ctl: ") and "usage: monkey-ctl" in p.stderr
    assert p.stdout == ""


def test_ctl_help_and_version():
    p = ctl("--help")
    assert p.returncode == 0
    for section in ("NAME", "SYNOPSIS", "COMMANDS", "OPTIONS", "FILES", "EXIT STATUS"):
        assert f"\n{section}\n" in "\n" + p.stdout, section
    for command in ("status", "workers", "sites", "plugins", "config", "reload", "reopen", "stop"):
        assert f"    {command} " in p.stdout
    p = ctl("-V")
    assert p.returncode == 0 and p.stdout.startswith("monkey-ctl ")



def test_shipped_configuration_is_valid(make_server):
    from conftest import ROOT
    shipped = (ROOT / "conf" / "plugins" / "control.conf").read_text()
    srv = make_control(make_server, body="", start=False)
    srv.control_conf.write_text(shipped)
    srv.sock = srv.conf / "monkey.sock"
    srv.start()
    wait_socket(srv.sock)
    assert stat.S_IMODE(os.stat(srv.sock).st_mode) == 0o600
    assert status_json(srv)["workers"] == 2
    assert srv.get("/server-status").status == 404  # HttpPath is commented out
