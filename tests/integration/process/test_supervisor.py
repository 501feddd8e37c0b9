"""The supervisor (Supervisor On, monkey -S; server/process/supervisor.c).

The supervisor binds the listening sockets and runs the server as its child.
These tests crash the child (SIGSEGV, SIGKILL) under load, from Python
clients and from wrk, and count refused connections, run a
child that faults at every start into the crash-loop limit, reload through
the supervisor, read the restarts from the control status, and check that
readiness and the PidFile name the supervisor.

A sanitizer build catches SIGSEGV itself and exits with a report; the tests
turn that off (handle_segv=0) so that the signal ends the child as it would
a normal build. Core dumps are turned off for the children.
"""

import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import BUILD, SLOW, delay_start, needs_dlopen, needs_part, wait_port
from h2util import needs_tool
from test_control import CONTROL_SO, ctl, make_control, wait_socket
from test_systemd import messages, notify_socket

CRASH_SO = BUILD / "tests" / "plugins" / "monkey-crash.so"

pytestmark = needs_part("supervisor", "the supervisor (MK_SUPERVISOR=OFF)")


@pytest.fixture(autouse=True)
def crash_env(monkeypatch):
    """Children die from the signal itself (no sanitizer report, no core file)."""
    asan = os.environ.get("ASAN_OPTIONS", "")
    monkeypatch.setenv("ASAN_OPTIONS", (asan + ":" if asan else "") + "handle_segv=0")
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
    yield
    resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))


def child_of(pid, timeout=5.0):
    """The one child process of `pid`, once there is one."""
    deadline = time.monotonic() + timeout * SLOW
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(c) for c in f.read().split()]
        if kids:
            assert len(kids) == 1, kids
            return kids[0]
        time.sleep(0.01)
    raise AssertionError(f"process {pid} has no child")


def new_child_of(pid, old, timeout=5.0):
    deadline = time.monotonic() + timeout * SLOW
    while time.monotonic() < deadline:
        kid = child_of(pid, timeout)
        if kid != old:
            return kid
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not start a new child")


def wait_log(srv, pattern, timeout=10.0):
    deadline = time.monotonic() + timeout * SLOW
    while time.monotonic() < deadline:
        m = re.search(pattern, srv.stderr_text())
        if m:
            return m
        time.sleep(0.02)
    raise AssertionError(f"no {pattern!r} in:\n{srv.stderr_text()}")


class Load:
    """Client threads that connect, send one GET and read the answer, in a
    loop: refused connects, resets of requests in flight and answers are
    counted, with the time of each answer."""

    def __init__(self, port, threads=2):
        self.port = port
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.refused = 0
        self.reset = 0
        self.answers = []  # monotonic times of 200 answers
        self.threads = [threading.Thread(target=self.run) for _ in range(threads)]

    def one(self):
        with socket.create_connection(("127.0.0.1", self.port), timeout=5 * SLOW) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        return data.startswith(b"HTTP/1.1 200 ")

    def run(self):
        while not self.stop.is_set():
            try:
                ok = self.one()
            except ConnectionRefusedError:
                with self.lock:
                    self.refused += 1
                continue
            except OSError:  # reset or cut short: the request was in flight
                ok = False
            with self.lock:
                if ok:
                    self.answers.append(time.monotonic())
                else:
                    self.reset += 1

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join()

    def answered_after(self, t):
        with self.lock:
            return [a for a in self.answers if a > t]


def supervised(make_server, args=("-S",), **keys):
    srv = make_server()
    srv.file("index.html", "<h1>index</h1>\n")
    srv.set(**keys)
    srv.start(list(args))
    child_of(srv.proc.pid)
    assert srv.get("/").status == 200
    return srv


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL], ids=["SIGSEGV", "SIGKILL"])
def test_crash_under_load_refuses_nothing(make_server, sig):
    srv = supervised(make_server)
    sup = srv.proc.pid
    first = child_of(sup)
    with Load(srv.port) as load:
        deadline = time.monotonic() + 5 * SLOW
        while len(load.answered_after(0)) < 20:  # the load runs
            assert time.monotonic() < deadline, "no answers under load"
            time.sleep(0.01)
        killed_at = time.monotonic()
        os.kill(first, sig)
        deadline = killed_at + 5 * SLOW
        while not load.answered_after(killed_at + 0.05):
            assert time.monotonic() < deadline, "no answer after the crash"
            time.sleep(0.005)
        back = load.answered_after(killed_at + 0.05)[0] - killed_at
        time.sleep(0.3)  # more load on the new child
    assert back < 1.0 * SLOW, f"answering again after {back:.3f} s"
    assert load.refused == 0, f"{load.refused} connects refused during the restart"
    assert len(load.answered_after(killed_at + 0.05)) > 10
    second = child_of(sup)
    assert second != first
    name = signal.Signals(sig).name
    wait_log(srv, rf"the server \(pid {first}\) crashed: signal {int(sig)} \({name}\); "
                  r"starting it again")
    assert srv.stop() == 0


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL], ids=["SIGSEGV", "SIGKILL"])
def test_crash_under_wrk(make_server, sig):
    """wrk's keep-alive connections are reset by the crash and connect again:
    none of those connects is refused (wrk counts them: "Socket errors:
    connect N"), every answer is a 200. wrk is a test dependency
    (tools/deps.sh test): missing, the test fails rather than skips."""
    assert shutil.which("wrk"), "wrk is not installed (tools/deps.sh test installs it)"
    srv = supervised(make_server)
    sup = srv.proc.pid
    first = child_of(sup)
    wrk = subprocess.Popen(["wrk", "-t2", "-c8", "-d2s", f"http://127.0.0.1:{srv.port}/"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(0.5)
    os.kill(first, sig)
    t0 = time.monotonic()
    second = new_child_of(sup, first)
    assert srv.get("/").status == 200
    back = time.monotonic() - t0
    out, _ = wrk.communicate(timeout=30 * SLOW)
    assert wrk.returncode == 0, out
    assert back < 1.0 * SLOW, f"answering again after {back:.3f} s"
    m = re.search(r"Socket errors: connect (\d+)", out)
    assert m is None or m.group(1) == "0", out
    assert "Non-2xx" not in out, out
    assert int(re.search(r"(\d+) requests in", out).group(1)) > 100, out
    name = signal.Signals(sig).name
    wait_log(srv, rf"the server \(pid {first}\) crashed: signal {int(sig)} \({name}\); "
                  r"starting it again")
    # and no further crash under the load that followed
    assert child_of(sup) == second
    assert srv.stop() == 0


@needs_dlopen
def test_crash_loop_gives_up(make_server):
    srv = make_server()
    srv.plugins = [str(CRASH_SO)]
    srv.set(Supervisor="On", SupervisorCrashLimit=3, SupervisorCrashWindow="1m")
    srv.start(wait=False)
    t0 = time.monotonic()
    rc = srv.proc.wait(timeout=20 * SLOW)
    took = time.monotonic() - t0
    srv.proc = None
    srv.stderr.close()
    err = srv.stderr_text()
    assert rc == 1, err
    crashes = re.findall(r"the server \(pid \d+\) crashed: signal 11 \(SIGSEGV\)", err)
    assert len(crashes) == 3, err
    assert "giving up after 3 crashes within 60 s (SupervisorCrashLimit, SupervisorCrashWindow)" \
        in err
    # the back-off: the second start at once, the third after 100 ms
    assert "starting it again in 100 ms" in err
    assert took >= 0.1


def wait_text(path, needle, timeout=10.0):
    """The text of `path` once it holds `needle`."""
    deadline = time.monotonic() + timeout * SLOW
    while True:
        text = path.read_text() if path.exists() else ""
        if needle in text:
            return text
        assert time.monotonic() < deadline, f"no {needle!r} in:\n{text}"
        time.sleep(0.02)


def test_failed_restart_is_retried_until_the_files_are_back(make_server):
    """A crash, then a restart whose configuration check fails (the
    DocumentRoot was removed since the start): the supervisor does not give
    up. It logs why the child could not start to the Log (the child's
    standard error may go nowhere), keeps the sockets, tries again with a
    back-off, and serves again once the directory is back."""
    srv = make_server()
    log = srv.dir / "error.log"
    srv.file("index.html", "back\n")
    srv.set(Log=str(log))
    srv.start(["-S"])
    sup = srv.proc.pid
    first = child_of(sup)
    wait_text(log, "is ready")
    away = srv.dir / "htdocs.away"
    srv.docroot.rename(away)
    os.kill(first, signal.SIGKILL)
    text = wait_text(log, "trying again in 200 ms")  # the second failed start
    m = re.search(r"supervisor: the server \(pid \d+\) could not start again \(exit status 1\): "
                  r"(.*); trying again in 100 ms", text)
    assert m, text
    assert "DocumentRoot" in m.group(1) and str(srv.docroot) in m.group(1), text
    assert srv.proc.poll() is None, srv.stderr_text()  # still there, holding the sockets
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW):
        pass  # connections are queued, not refused
    away.rename(srv.docroot)
    text = wait_text(log, "is ready again, after", timeout=20)
    assert re.search(r"is ready again, after \d+ failed starts", text), text
    assert srv.get("/").body == b"back\n"
    assert "giving up" not in text
    assert srv.stop() == 0


def test_hup_reloads_through_supervisor(make_server):
    srv = supervised(make_server, args=(), Supervisor="On")
    child = child_of(srv.proc.pid)
    other = srv.dir / "other"
    other.mkdir()
    (other / "index.html").write_text("other root\n")
    srv.site_conf["DocumentRoot"] = str(other)
    srv.write_conf()
    srv.signal(signal.SIGHUP)
    wait_log(srv, r"configuration reloaded")
    assert srv.get("/").body == b"other root\n"
    assert child_of(srv.proc.pid) == child  # reloaded, not restarted
    assert srv.stop() == 0


def test_usr1_reopens_both_logs(make_server):
    srv = make_server()
    log = srv.dir / "error.log"
    srv.file("index.html", "x\n")
    srv.set(Log=str(log))
    srv.start(["-S"])
    sup = srv.proc.pid
    child = child_of(sup)
    deadline = time.monotonic() + 10 * SLOW
    while "is ready" not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    log.rename(srv.dir / "error.log.1")  # logrotate
    srv.signal(signal.SIGUSR1)
    deadline = time.monotonic() + 10 * SLOW
    while not log.exists():
        assert time.monotonic() < deadline, "no log reopened"
        time.sleep(0.02)
    time.sleep(0.2)  # the child's reopen, after the supervisor's

    def wait_text(needle):
        deadline = time.monotonic() + 10 * SLOW
        while needle not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.02)

    srv.signal(signal.SIGHUP)
    wait_text("configuration reloaded")  # the child writes to its reopened log
    os.kill(child, signal.SIGKILL)
    wait_text("crashed: signal 9 (SIGKILL)")  # and the supervisor to its own
    new_child_of(sup, child)
    assert srv.stop() == 0


def test_usr1_reopens_for_the_user_and_follows_no_link(make_server, nobody_dir, tmp_path):
    """Started as root with User, the supervisor (root) and its child (the
    User) share the Log, in a directory of the User's. At a reopen after a
    rotation the supervisor creates the new file and gives it to the User,
    so that the child can open it too; a symbolic link planted at the path
    is not followed by either (the file of root's it names stays as it
    was), and both keep the file they had."""
    logs, pw = nobody_dir
    log = logs / "error.log"
    srv = make_server()
    srv.file("index.html", "x\n")
    srv.set(Log=str(log), User="nobody")
    srv.start(["-S"])
    sup = srv.proc.pid
    child = child_of(sup)
    wait_text(log, "is ready")
    assert log.stat().st_uid == pw.pw_uid
    log.rename(logs / "error.log.1")
    srv.signal(signal.SIGUSR1)
    wait_text(log, "")  # the supervisor's new file
    time.sleep(0.3 * SLOW)  # the child's reopen, after the supervisor's
    assert log.stat().st_uid == pw.pw_uid
    srv.signal(signal.SIGHUP)  # the child writes to the new file (reloaded or not)
    wait_text(log, "reload")
    os.kill(child, signal.SIGKILL)
    wait_text(log, "crashed: signal 9 (SIGKILL)")  # and the supervisor does
    new_child_of(sup, child)
    wait_text(log, "listening on")  # the new child serves
    secret = tmp_path / "secret"
    secret.write_text("root only\n")
    secret.chmod(0o600)
    log.rename(logs / "error.log.2")
    log.symlink_to(secret)
    srv.signal(signal.SIGUSR1)
    refused = "cannot reopen the log: Too many levels of symbolic links"
    deadline = time.monotonic() + 10 * SLOW
    while (text := (logs / "error.log.2").read_text()).count(refused) < 2:
        assert time.monotonic() < deadline, text  # the supervisor's line, then the child's
        time.sleep(0.02)
    assert "supervisor: " + refused in text, text
    assert secret.read_text() == "root only\n"
    old = (logs / "error.log.1").read_text() + text
    assert not re.search(r"cannot reopen[^\n]*Permission denied", old), old
    assert srv.stop() == 0


def test_quit_stops_gracefully(make_server):
    srv = supervised(make_server)
    c = srv.conn()
    c.send("GET / HTTP/1.1\r\nHost: localhost\r\n")  # a request in progress
    time.sleep(0.1)
    srv.signal(signal.SIGQUIT)
    wait_log(srv, r"stopping: finishing the responses in progress")
    c.send("\r\n")
    assert c.read_response().status == 200  # finished, not cut
    c.close()
    assert srv.proc.wait(timeout=15 * SLOW) == 0
    assert "stopping now" not in srv.stderr_text()
    assert "supervisor: stopped (status 0)" in srv.stderr_text()
    assert srv.stop() == 0


def test_term_while_the_child_starts(make_server):
    """A stop passed on while the new child starts waits for its loop: the
    child stops cleanly (status 0), it is not killed by the signal."""
    srv = supervised(make_server)
    sup = srv.proc.pid
    first = child_of(sup)
    os.kill(first, signal.SIGKILL)
    new_child_of(sup, first)
    srv.signal(signal.SIGTERM)  # the child is still starting
    assert srv.proc.wait(timeout=15 * SLOW) == 0, srv.stderr_text()
    assert "ended while stopping" not in srv.stderr_text()
    assert srv.stop() == 0


@needs_dlopen
def test_status_pidfile_and_ctl_through_restarts(make_server):
    srv = make_control(make_server, start=False, PidFile="monkey.pid")
    srv.start(["-S"])
    wait_socket(srv.sock)
    sup = srv.proc.pid
    doc = json.loads(ctl("-s", srv.sock, "--json", "status").stdout)
    assert doc["supervisor"] == {"pid": sup, "restarts": 0, "last_crash": 0,
                                 "last_crash_utc": "", "last_crash_reason": ""}
    first = doc["pid"]
    assert first == child_of(sup)
    assert (srv.conf / "monkey.pid").read_text() == f"{sup}\n"

    os.kill(first, signal.SIGKILL)
    second = new_child_of(sup, first)
    deadline = time.monotonic() + 5 * SLOW
    while True:  # monkey-ctl reaches the new child on the same socket path
        p = ctl("-s", srv.sock, "--json", "status")
        if p.returncode == 0 and json.loads(p.stdout)["pid"] == second:
            break
        assert time.monotonic() < deadline, p.stderr
        time.sleep(0.02)
    doc = json.loads(p.stdout)["supervisor"]
    assert doc["pid"] == sup and doc["restarts"] == 1
    assert doc["last_crash_reason"] == "signal 9 (SIGKILL)"
    assert abs(doc["last_crash"] - time.time()) < 30
    text = ctl("-s", srv.sock, "status").stdout
    assert re.search(rf"^supervisor   pid {sup}, 1 restart, last crash \S+Z: signal 9 \(SIGKILL\)$",
                     text, re.M), text
    assert (srv.conf / "monkey.pid").read_text() == f"{sup}\n"
    # a stop asked of the child ends the supervisor too, with the child's status
    assert ctl("-s", srv.sock, "stop").returncode == 0
    assert srv.proc.wait(timeout=15 * SLOW) == 0
    assert f"supervisor: the server (pid {second}) exited" in srv.stderr_text()
    assert srv.stop() == 0
    assert not (srv.conf / "monkey.pid").exists()


def test_pidfile_link_planted_before_readiness_is_not_followed(make_server, tmp_path):
    """The supervisor, root, writes the PidFile when its child is ready,
    well after the start checked the path: a symbolic link planted there
    meanwhile is replaced by the new file, never written through (the file
    it names, root's alone, stays as it was)."""
    secret = tmp_path / "secret"
    secret.write_text("root only\n")
    secret.chmod(0o600)
    run = tmp_path / "run"
    run.mkdir()
    pidfile = run / "monkey.pid"
    srv = make_server()
    srv.file("index.html", "x\n")
    srv.set(PidFile=str(pidfile))
    srv.start(["-S"], wait=False)
    pidfile.symlink_to(secret)  # as the child starts, before it is ready
    assert wait_port(srv.port, proc=srv.proc), srv.stderr_text()
    deadline = time.monotonic() + 10 * SLOW
    while pidfile.is_symlink():
        assert time.monotonic() < deadline, srv.stderr_text()
        time.sleep(0.02)
    assert secret.read_text() == "root only\n"
    assert pidfile.read_text() == f"{srv.proc.pid}\n"
    assert pidfile.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in run.iterdir()) == ["monkey.pid"]
    assert srv.stop() == 0
    assert not pidfile.exists()
    assert secret.read_text() == "root only\n"


def test_pidfile_in_a_directory_others_write_is_refused(make_server, tmp_path):
    """The supervisor keeps root's identity and writes the PidFile as root:
    a directory another user may write to (the User's, say) is refused at
    start, even with a User, since that user could replace the file."""
    if os.geteuid() != 0:
        pytest.skip("only a PidFile written as root is held to this")
    d = tmp_path / "theirs"
    d.mkdir()
    os.chown(d, 65534, 65534)
    srv = make_server()
    srv.set(PidFile=str(d / "monkey.pid"), User="nobody")
    err = srv.run_expect_failure(["-S"])
    assert f"directory {d} may be written by its owner, not only by root" in err, err
    assert not (d / "monkey.pid").exists()


@needs_tool("strace")
def test_started_once_the_child_has_read_the_configuration(make_server, tmp_path):
    """start() of a supervised server returns once its child is ready, not
    once the supervisor's sockets listen: the child reads the configuration
    after that (here a second late, strace delaying its first open of
    monkey.conf, as a child under emulation starts late), so a
    configuration written next is for a reload, not for the child's start."""
    srv = make_server()
    srv.file("who.txt", "old\n")
    delay_start(srv, "openat", path=srv.conf / "monkey.conf")
    srv.start(["-S"])
    newroot = tmp_path / "newroot"
    newroot.mkdir()
    (newroot / "who.txt").write_text("new\n")
    srv.site_conf["DocumentRoot"] = str(newroot)
    srv.write_conf()
    assert srv.get("/who.txt").body == b"old\n"
    srv.reload()
    assert srv.get("/who.txt").body == b"new\n"
    assert srv.stop() == 0


def test_readiness_from_the_supervisor(make_server, monkeypatch, tmp_path):
    sock, name = notify_socket(tmp_path, True)
    monkeypatch.setenv("NOTIFY_SOCKET", name)
    srv = supervised(make_server)
    sup = srv.proc.pid
    [ready] = messages(sock, 1)
    assert ready == {"READY": "1", "MAINPID": str(sup)}
    os.kill(child_of(sup), signal.SIGKILL)
    [again] = messages(sock, 1)  # the new child's, still naming the supervisor
    assert again == {"READY": "1", "MAINPID": str(sup)}
    srv.signal(signal.SIGTERM)
    assert messages(sock, 1) == [{"STOPPING": "1"}]
    assert srv.proc.wait(timeout=15 * SLOW) == 0
    assert srv.stop() == 0
    sock.close()


def test_reuseport_sockets_belong_to_the_supervisor(make_server):
    srv = supervised(make_server, Workers=3)
    sup = srv.proc.pid
    child = child_of(sup)

    def listening(pid):
        inodes = set()
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
        return inodes

    from conftest import listening_inodes
    ports = listening_inodes(srv.port)
    assert len(ports) == 3  # one SO_REUSEPORT socket per worker
    assert ports <= listening(sup)  # all held by the supervisor
    assert ports <= listening(child)  # and passed to the child
    assert srv.stop() == 0


def test_bad_configuration_with_flag(make_server):
    srv = make_server()
    srv.set(Workers="many")
    err = srv.run_expect_failure(["-S"])
    assert "Workers" in err and "monkey.conf" in err


@needs_dlopen
def test_child_exit_status_ends_the_supervisor(make_server):
    """A child that exits (here: a plugin refused at load) is not restarted:
    the supervisor ends with its status, and its message reaches stderr."""
    srv = make_server()
    srv.plugins = [str(BUILD / "tests" / "plugins" / "monkey-badabi.so")]
    srv.set(Supervisor="On")
    err = srv.run_expect_failure()
    assert "was built for plugin ABI" in err
    # the supervisor logs the child's reason too (its Log may be a file)
    assert re.search(r"supervisor: the server \(pid \d+\) exited with status 1: .*was built for "
                     r"plugin ABI", err), err
    assert "crashed" not in err
