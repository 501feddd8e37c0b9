"""Tier 6: configuration errors, reload, graceful stop, logs, daemon mode."""

import os
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import (BALANCINGS, MONKEY, SLOW, Conn, check_sanitizers, free_port, small_window,
                      wait_port)


# ---- configuration errors name the file and the line ----------------------------

SERVER_ERRORS = [
    ("unknown key", "    Listen {port}\n    Wrokers 2\n", 3, "unknown key 'Wrokers'"),
    ("bad number", "    Listen {port}\n    Workers many\n", 3, "Workers"),
    ("out of range", "    Listen {port}\n    Timeout 0\n", 3, "out of range"),
    ("bad bool", "    Listen {port}\n    KeepAlive perhaps\n", 3, "expected On or Off"),
    ("bad size", "    Listen {port}\n    MaxRequestSize 12Q\n", 3, "MaxRequestSize"),
    ("bad port", "    Listen 127.0.0.1:99999\n", 2, "port"),
    ("bad address", "    Listen 300.1.1.1:80\n", 2, "not a numeric"),
    ("duplicate key", "    Listen {port}\n    Workers 1\n    Workers 2\n", 4, "given twice"),
    ("duplicate listen", "    Listen {port}\n    Listen {port}\n", 3, "given twice"),
    ("no value", "    Listen {port}\n    Workers\n", 3, "has no value"),
    ("not indented", "    Listen {port}\nWorkers 2\n", 3, "indented"),
    ("bad balancing", "    Listen {port}\n    Balancing random\n", 3, "reuseport or fair"),
    ("unknown transport", "    Listen {port} tls\n", 2, "transport 'tls'"),
]


@pytest.mark.parametrize("name,body,line,text", SERVER_ERRORS, ids=[e[0] for e in SERVER_ERRORS])
def test_bad_server_config(make_server, name, body, line, text):
    srv = make_server()
    srv.raw_conf = "[SERVER]\n" + body.format(port=f"127.0.0.1:{srv.port}")
    err = srv.run_expect_failure()
    assert f"{srv.conf}/monkey.conf:{line}:" in err, err
    assert text in err, err


def test_unknown_section(make_server):
    srv = make_server()
    srv.raw_conf = f"[SERVER]\n    Listen 127.0.0.1:{srv.port}\n[SERVR]\n    A b\n"
    err = srv.run_expect_failure()
    assert f"monkey.conf:3:" in err and "SERVR" in err


SITE_ERRORS = [
    ("unknown key", "[HOST]\n    DocumentRoot {root}\n    Docroot x\n", 3, "unknown key"),
    ("missing root", "[HOST]\n    DocumentRoot {root}/nope\n", 2, "No such file"),
    ("no docroot", "[HOST]\n    ServerName a\n", 1, "no DocumentRoot"),
    ("bad name", "[HOST]\n    ServerName a/b\n    DocumentRoot {root}\n", 2, "not a host name"),
    ("bad section", "[HOST]\n    DocumentRoot {root}\n[PAGES]\n", 3, "unknown section"),
    ("error page outside", "[HOST]\n    DocumentRoot {root}\n[ERROR_PAGES]\n    404 ../x\n", 4,
     "inside the document root"),
    ("error page missing", "[HOST]\n    DocumentRoot {root}\n[ERROR_PAGES]\n    404 nope.html\n",
     4, "nope.html"),
    ("error page status", "[HOST]\n    DocumentRoot {root}\n[ERROR_PAGES]\n    200 a.txt\n", 4,
     "not an error status"),
    # No [HOST]: the line of the section meant to be it, else the first one, else line 1.
    ("host typo", "# the site\n[HOSTS]\n    DocumentRoot {root}\n", 2,
     "unknown section [HOSTS]: did you mean [HOST]?"),
    ("host typo after", "[LOGGER]\n    AccessLog x\n[Hsot]\n    DocumentRoot {root}\n", 3,
     "unknown section [Hsot]: did you mean [HOST]?"),
    ("no host", "# the site\n\n[TLS]\n    Certificate x\n", 3,
     "missing [HOST] section: the file has [TLS]"),
    ("empty site file", "# nothing yet\n", 1, "missing [HOST] section: the file has no section"),
]


@pytest.mark.parametrize("name,text,line,msg", SITE_ERRORS, ids=[e[0] for e in SITE_ERRORS])
def test_bad_site_config(make_server, name, text, line, msg):
    srv = make_server()
    srv.file("a.txt", "a")
    srv.write_conf()
    site = srv.conf / "sites" / "default"
    site.write_text(text.format(root=srv.docroot))
    p = subprocess.run([str(MONKEY), "-c", str(srv.conf)], capture_output=True, text=True,
                       timeout=10 * SLOW)
    assert p.returncode == 1
    assert f"{site}:{line}:" in p.stderr, p.stderr
    assert msg in p.stderr, p.stderr
    check_sanitizers(p.stderr)


def test_duplicate_server_name_across_sites(make_server):
    srv = make_server()
    srv.extra_sites["other"] = f"[HOST]\n    ServerName localhost\n    DocumentRoot {srv.docroot}\n"
    err = srv.run_expect_failure()
    assert "ServerName 'localhost'" in err


def test_unreadable_log_path(make_server):
    srv = make_server()
    srv.set(Log="/nonexistent-dir/monkey.log")
    err = srv.run_expect_failure()
    assert f"{srv.conf}/monkey.conf:5: Log /nonexistent-dir/monkey.log: directory " in err, err


# ---- monkey -t refuses what a start would refuse, with the file and the line ------

def check_t(srv):
    """Run monkey -t on srv's configuration; return the completed process."""
    srv.write_conf()
    p = subprocess.run([str(MONKEY), "-t", "-c", str(srv.conf)], capture_output=True, text=True,
                       timeout=10 * SLOW)
    check_sanitizers(p.stderr)
    return p


def unwritable_dir(tmp_path):
    """A directory this process cannot create files in, and the User to set
    for that (root writes anywhere: the PidFile is written as User)."""
    d = tmp_path / "locked"
    d.mkdir()
    if os.geteuid() != 0:
        d.chmod(0o555)
        return d, None
    import pwd
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody' to drop to")
    d.chmod(0o755)  # root's: 'nobody' cannot create files in it
    return d, "nobody"


def bad_user(srv, tmp_path):
    srv.set(User="mk-no-such-user")
    return "monkey.conf", 5, "User: no such user 'mk-no-such-user'"


def log_in_missing_dir(srv, tmp_path):
    srv.set(Log=str(tmp_path / "no-dir" / "error.log"))
    return "monkey.conf", 5, f"Log {tmp_path}/no-dir/error.log: directory {tmp_path}/no-dir:"


def pidfile_in_missing_dir(srv, tmp_path):
    srv.set(PidFile=str(tmp_path / "no-dir" / "monkey.pid"))
    return "monkey.conf", 5, f"PidFile {tmp_path}/no-dir/monkey.pid:"


def pidfile_unwritable(srv, tmp_path):
    d, user = unwritable_dir(tmp_path)
    if user:
        srv.set(User=user)
    srv.set(PidFile=str(d / "monkey.pid"))
    return "monkey.conf", 6 if user else 5, f"PidFile {d}/monkey.pid:"


def pidfile_dir_not_roots(srv, tmp_path):
    """Root writes this PidFile (no User): a directory another user may
    write to is refused, since that user could replace the file."""
    if os.geteuid() != 0:
        pytest.skip("only a PidFile written as root is held to this")
    d = tmp_path / "theirs"
    d.mkdir()
    os.chown(d, 65534, 65534)
    srv.set(PidFile=str(d / "monkey.pid"))
    return "monkey.conf", 5, f"directory {d} may be written by its owner, not only by root"


def mime_duplicate(srv, tmp_path):
    (srv.conf / "monkey.mime").write_text(
        "[MIMETYPES]\n    html text/html\n    txt text/plain\n    HTML text/x-other\n")
    return "monkey.mime", 4, "extension 'html' is listed twice (first at line 2)"


def error_page_symlink_out(srv, tmp_path):
    (tmp_path / "secret.html").write_text("outside\n")
    (srv.docroot / "404.html").symlink_to(tmp_path / "secret.html")
    srv.error_pages = {"404": "404.html"}
    return "sites/default", 5, "'404.html' is or passes through a symbolic link"


def error_page_symlink_out_followed(srv, tmp_path):
    (tmp_path / "secret.html").write_text("outside\n")
    (srv.docroot / "404.html").symlink_to(tmp_path / "secret.html")
    srv.site_conf["Symlinks"] = "On"
    srv.error_pages = {"404": "404.html"}
    return "sites/default", 6, "'404.html' leads out of the document root"


CHECK_T = [bad_user, log_in_missing_dir, pidfile_in_missing_dir, pidfile_unwritable,
           pidfile_dir_not_roots, mime_duplicate, error_page_symlink_out, error_page_symlink_out_followed]


@pytest.mark.parametrize("setup", CHECK_T, ids=[f.__name__ for f in CHECK_T])
def test_check_mode_refuses_what_start_refuses(make_server, tmp_path, setup):
    srv = make_server()
    file, line, text = setup(srv, tmp_path)
    p = check_t(srv)
    assert p.returncode == 1, p.stdout
    assert "valid" not in p.stdout
    assert f"{srv.conf}/{file}:{line}: " in p.stderr, p.stderr
    assert text in p.stderr, p.stderr
    # A start refuses it the same way, before serving anything.
    err = srv.run_expect_failure()
    assert f"{srv.conf}/{file}:{line}: " in err and text in err, err


def test_check_mode_accepts_writable_files(make_server, tmp_path):
    srv = make_server()
    (tmp_path / "run").mkdir()
    srv.set(Log=str(tmp_path / "run" / "error.log"), PidFile=str(tmp_path / "run" / "m.pid"))
    p = check_t(srv)
    assert p.returncode == 0, p.stderr
    assert "valid" in p.stdout
    assert not (tmp_path / "run" / "error.log").exists()  # checking creates nothing
    assert not (tmp_path / "run" / "m.pid").exists()


def test_port_in_use(make_server):
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    port = blocker.getsockname()[1]
    srv = make_server()
    srv.set(Listen=f"127.0.0.1:{port}")
    err = srv.run_expect_failure()
    assert "monkey.conf:2:" in err and "in use" in err
    blocker.close()


# ---- virtual hosts -----------------------------------------------------------------

def test_virtual_hosts(make_server, tmp_path):
    srv = make_server()
    srv.file("who.txt", "default\n")
    other = tmp_path / "other"
    other.mkdir()
    (other / "who.txt").write_text("other\n")
    wild = tmp_path / "wild"
    wild.mkdir()
    (wild / "who.txt").write_text("wild\n")
    srv.extra_sites["other"] = (f"[HOST]\n    ServerName other.test www.other.test\n"
                                f"    DocumentRoot {other}\n")
    srv.extra_sites["wild"] = f"[HOST]\n    ServerName *.wild.test\n    DocumentRoot {wild}\n"
    srv.start()
    def who(host):
        return srv.get("/who.txt", headers={"Host": host}).body
    assert who("other.test") == b"other\n"
    assert who("WWW.Other.Test:8080") == b"other\n"
    assert who("other.test.") == b"other\n"
    assert who("a.b.wild.test") == b"wild\n"
    assert who("wild.test") == b"default\n"
    assert who("unknown.test") == b"default\n"
    assert who("localhost") == b"default\n"
    assert srv.get("http://other.test/who.txt", headers={"Host": "localhost"}).body == b"other\n"


# ---- reload --------------------------------------------------------------------------

def test_reload_applies_new_configuration(make_server, tmp_path):
    srv = make_server()
    srv.file("a.txt", "old\n")
    srv.start()
    keep = srv.conn()
    assert keep.request("GET", "/a.txt").body == b"old\n"

    newroot = tmp_path / "newroot"
    newroot.mkdir()
    (newroot / "a.txt").write_text("new\n")
    second = free_port()
    srv.site_conf["DocumentRoot"] = str(newroot)
    srv.set(Listen=[f"127.0.0.1:{srv.port}", f"127.0.0.1:{second}"])
    srv.write_conf()
    srv.reload()  # every worker, the one holding `keep` too, has the new root
    assert wait_port(second)
    assert srv.get("/a.txt").body == b"new\n"
    assert Conn(second).request("GET", "/a.txt").body == b"new\n"
    # The connection opened before the reload still works.
    assert keep.request("GET", "/a.txt").body == b"new\n"
    keep.close()
    # Remove the second port again.
    srv.set(Listen=f"127.0.0.1:{srv.port}")
    srv.write_conf()
    srv.signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while True:
        try:
            socket.create_connection(("127.0.0.1", second), timeout=1).close()
        except OSError:
            break
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert "configuration reloaded" in srv.stderr_text()


def test_reload_with_bad_config_keeps_running(make_server):
    srv = make_server()
    srv.file("a.txt", "a\n")
    srv.start()
    (srv.conf / "monkey.conf").write_text("[SERVER]\n    Nonsense 1\n")
    srv.signal(signal.SIGHUP)
    time.sleep(0.3 * SLOW)
    assert srv.get("/a.txt").status == 200
    assert "reload failed" in srv.stderr_text()
    assert "monkey.conf:2:" in srv.stderr_text()


def test_reload_refuses_a_log_it_cannot_write(make_server, tmp_path):
    srv = make_server()
    srv.file("a.txt", "a")
    srv.start()
    assert srv.get("/a.txt").header("server").startswith("Monkey/")
    srv.set(Log=str(tmp_path / "no-dir" / "error.log"), HideVersion="On")
    srv.write_conf()
    srv.signal(signal.SIGHUP)
    deadline = time.monotonic() + 5 * SLOW
    while "reload failed" not in srv.stderr_text():
        assert time.monotonic() < deadline, srv.stderr_text()
        time.sleep(0.05)
    assert f"{srv.conf}/monkey.conf:5: Log {tmp_path}/no-dir/error.log:" in srv.stderr_text()
    assert srv.get("/a.txt").header("server").startswith("Monkey/")  # nothing changed


@pytest.mark.parametrize("balancing", BALANCINGS)
def test_reload_refuses_no_connection(make_server, balancing):
    srv = make_server()
    srv.file("a.txt", "a\n")
    srv.set(Balancing=balancing)
    srv.start()
    failures, done = [], threading.Event()
    count = [0]

    def client():
        while not done.is_set():
            try:
                r = Conn(srv.port).request("GET", "/a.txt", headers={"Connection": "close"})
                if r.status != 200:
                    failures.append(r.status)
                count[0] += 1
            except OSError as e:
                failures.append(repr(e))

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    for _ in range(8):
        time.sleep(0.1)
        srv.signal(signal.SIGHUP)
    time.sleep(0.3)
    done.set()
    for t in threads:
        t.join()
    assert failures == []
    assert count[0] > 20


# ---- stopping ----------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_graceful_stop_finishes_responses(make_server, sig):
    srv = make_server()
    data = os.urandom(16 * 1024 * 1024)
    srv.file("big.bin", data)
    srv.start()
    s = small_window(srv.port, 65536)
    s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    first = s.recv(65536)
    srv.signal(sig)
    time.sleep(0.3)
    # No new connections once stopping.
    with pytest.raises(OSError):
        Conn(srv.port, timeout=1).request("GET", "/big.bin")
    buf = first
    s.settimeout(10)
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        buf += chunk
    head, body = buf.split(b"\r\n\r\n", 1)
    assert b"Connection: close" not in head  # the response started before the stop
    assert body == data
    assert srv.proc.wait(timeout=10 * SLOW) == 0
    assert "stopped" in srv.stderr_text()


def test_stop_closes_idle_connections(make_server):
    srv = make_server()
    srv.file("a.txt", "a")
    # Accepted at once, so that the silent ones are the server's to close
    # (with DeferAccept the kernel would still hold them).
    srv.set(DeferAccept="Off")
    srv.start()
    idle = [srv.conn() for _ in range(5)]
    for c in idle[:3]:
        c.request("GET", "/a.txt")
    t = time.monotonic()
    srv.signal(signal.SIGTERM)
    assert srv.proc.wait(timeout=5 * SLOW) == 0
    assert time.monotonic() - t < 2 * SLOW
    for c in idle:
        assert c.closed(2)


def test_second_signal_stops_at_once(make_server):
    srv = make_server()
    srv.file("big.bin", b"x" * (32 * 1024 * 1024))
    srv.set(GracefulTimeout=60)
    srv.start()
    s = small_window(srv.port, 4096)
    s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    s.recv(100)
    srv.signal(signal.SIGTERM)
    time.sleep(0.5)
    assert srv.proc.poll() is None  # still sending to the slow client
    srv.signal(signal.SIGTERM)
    assert srv.proc.wait(timeout=5 * SLOW) == 0
    s.close()


def test_second_signal_drops_queued_tasks(make_server):
    srv = make_server()
    srv.plugins = ["skeleton"]
    srv.set(GracefulTimeout=60)
    srv.start()
    # 32 tasks of 1 s for 2 task threads: 16 s of queue. 8 per address,
    # within TaskQueuePerClient.
    conns = [srv.conn(source=f"127.0.0.{1 + i % 4}") for i in range(32)]
    for c in conns:
        c.send(b"GET /skeleton/slow?ms=1000 HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.3 * SLOW)  # the requests are read and their tasks queued
    srv.signal(signal.SIGTERM)
    time.sleep(0.3 * SLOW)
    assert srv.proc.poll() is None  # waiting for the requests in progress
    t = time.monotonic()
    srv.signal(signal.SIGTERM)
    # Only the tasks already running (1 s at most) are waited for.
    assert srv.proc.wait(timeout=5 * SLOW) == 0
    assert time.monotonic() - t < 2.5 * SLOW
    for c in conns:
        assert c.closed(2)
        c.close()


def test_graceful_timeout_bounds_the_stop(make_server):
    srv = make_server()
    srv.file("big.bin", b"x" * (32 * 1024 * 1024))
    srv.set(GracefulTimeout="300ms", SendTimeout=60)
    srv.start()
    s = small_window(srv.port, 4096)
    s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    s.recv(100)
    t = time.monotonic()
    srv.signal(signal.SIGTERM)
    assert srv.proc.wait(timeout=10 * SLOW) == 0
    assert time.monotonic() - t < 1.5 * SLOW
    s.close()


# ---- logs and daemon mode --------------------------------------------------------------

def test_log_file_and_reopen(make_server):
    srv = make_server()
    log = srv.dir / "error.log"
    srv.set(Log=str(log), LogLevel="info")
    srv.start()
    deadline = time.monotonic() + 5 * SLOW  # the port opens just before the line is written
    while "listening on" not in log.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    rotated = srv.dir / "error.log.1"
    log.rename(rotated)
    srv.signal(signal.SIGUSR1)
    deadline = time.monotonic() + 5
    while not log.exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    srv.signal(signal.SIGHUP)  # produces a line in the new file
    deadline = time.monotonic() + 5
    while "reloaded" not in log.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert "reloaded" not in rotated.read_text()


def test_daemon_mode_and_pidfile(make_server):
    srv = make_server()
    srv.file("a.txt", "daemon\n")
    pidfile = srv.dir / "monkey.pid"
    log = srv.dir / "daemon.log"
    srv.set(PidFile=str(pidfile), Log=str(log))
    srv.write_conf()
    p = subprocess.run([str(MONKEY), "-D", "-c", str(srv.conf)], capture_output=True, text=True,
                       timeout=10 * SLOW)
    assert p.returncode == 0, p.stderr
    pid = int(pidfile.read_text())
    try:
        assert wait_port(srv.port)
        assert Conn(srv.port).request("GET", "/a.txt").body == b"daemon\n"
        assert os.getsid(pid) == pid  # a session of its own
    finally:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10 * SLOW
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}")
    assert not pidfile.exists()
    check_sanitizers(log.read_text())


def test_pidfile_replaces_a_planted_link(make_server, tmp_path):
    """The PidFile is written into a new file beside it and renamed over
    it: a symbolic link found at its path is replaced, and the file it
    named (root's alone) is not written through it."""
    secret = tmp_path / "secret"
    secret.write_text("root only\n")
    secret.chmod(0o600)
    run = tmp_path / "run"
    run.mkdir()
    pidfile = run / "monkey.pid"
    pidfile.symlink_to(secret)
    srv = make_server()
    srv.file("a.txt", "a\n")
    srv.set(PidFile=str(pidfile))
    srv.start()
    assert secret.read_text() == "root only\n"
    assert not pidfile.is_symlink()
    assert pidfile.read_text() == f"{srv.proc.pid}\n"
    assert pidfile.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in run.iterdir()) == ["monkey.pid"]  # no temporary file left
    assert srv.stop() == 0
    assert not pidfile.exists()
    assert secret.read_text() == "root only\n"


def test_daemon_mode_reports_errors(make_server):
    srv = make_server()
    srv.set(Workers="nope")
    srv.write_conf()
    p = subprocess.run([str(MONKEY), "-D", "-c", str(srv.conf)], capture_output=True, text=True,
                       timeout=10 * SLOW)
    assert p.returncode == 1
    assert "monkey.conf:3:" in p.stderr
