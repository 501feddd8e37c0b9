"""Integration test harness: start the real `monkey` binary on a loopback port.

Every server is started from a configuration generated in a temporary folder
and stopped by its PID when the test ends (SIGTERM, then SIGKILL if it hangs,
which fails the test). Its standard error is checked for sanitizer reports.

The binary comes from $MK_BUILD (default: build/), so the same tests run
against the normal and the sanitizer builds.
"""

import contextlib
import errno
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / os.environ.get("MK_BUILD", "build")
MONKEY = BUILD / "bin" / "monkey"
SANITIZED = "asan" in BUILD.name
# A static binary (make static) cannot load shared-object plugins.
STATIC = os.environ.get("MK_STATIC") == "1"
needs_dlopen = pytest.mark.skipif(STATIC, reason="static binary: no shared-object plugins")


def _features():
    """BUILD/features.txt (cmake/auto.cmake) as {name: state}; {} without one."""
    path = BUILD / "features.txt"
    lines = path.read_text().splitlines() if path.exists() else []
    return dict(line.split("\t")[:2] for line in lines if line and not line.startswith("#"))


FEATURES = _features()


def built_without(part):
    """Whether the build left a part out (cmake/profile.cmake): supervisor,
    systemd, compress, fair, libmonkey, h2, ..."""
    return FEATURES.get(part) == "off"


def needs_part(part, what):
    """Skip a test of a part the build left out; `what` names it ("the supervisor")."""
    return pytest.mark.skipif(built_without(part), reason=f"built without {what}")


# The Balancing modes a test runs with: fair only where the build has it.
BALANCINGS = ["reuseport",
              pytest.param("fair", marks=needs_part("fair", "the fair balancing mode"))]
# The server of an ARM cross build runs under qemu-user-static (make
# cross-test: tools/cross.sh runs the suite with MK_EMULATED=1).
EMULATED = os.environ.get("MK_EMULATED") == "1"
# qemu-user runs a thread of its own (RCU) in every emulated process.
EMULATOR_THREADS = 1 if EMULATED else 0
# Sanitizer builds are several times slower to start and to serve, and so is
# an emulated server.
SLOW = 3.0 if SANITIZED else 4.0 if EMULATED else 1.0

SANITIZER_MARKS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")


def _port_pool():
    """The ports free_port() hands out: below the kernel's ephemeral range, so
    that no client socket of this lane or of the one beside it takes one as
    its local port (an open connection, or its TIME_WAIT, on a server's port
    makes that server's bind fail with "Address already in use"), and split
    between the lanes of make test (MK_PORT_LANE=i/n), so that two lanes never
    pick the same one."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    if low - 1024 >= 4096:
        first, last = max(1024, low - 16384), low - 1
    else:  # an ephemeral range that starts low: the ports above it
        first, last = high + 1, 65535
    lane, lanes = 0, 1
    spec = os.environ.get("MK_PORT_LANE", "")
    if spec:
        lane, lanes = (int(x) for x in spec.split("/"))
    size = (last - first + 1) // lanes
    return first + lane * size, size


_PORT_FIRST, _PORT_COUNT = _port_pool()
_port_next = [os.getpid() % _PORT_COUNT]


def _bindable(port):
    """Nobody holds `port` on the loopback or the wildcard addresses."""
    hosts = [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET, "0.0.0.0")]
    if socket.has_ipv6:
        hosts.append((socket.AF_INET6, "::"))
    for family, host in hosts:
        try:
            with socket.socket(family) as s:
                s.bind((host, port))
        except OSError as e:
            if family == socket.AF_INET6 and e.errno == errno.EADDRNOTAVAIL:
                continue  # no IPv6 here
            return False
    return True


def free_port():
    """A TCP port for a server of the tests, never handed out twice in a run
    (a port a previous test's server used may still have connections in
    TIME_WAIT)."""
    for _ in range(_PORT_COUNT):
        port = _PORT_FIRST + _port_next[0]
        _port_next[0] = (_port_next[0] + 1) % _PORT_COUNT
        if _bindable(port):
            return port
    raise RuntimeError("no free port left in the tests' range")


def can_bind(host):
    """Whether a socket can bind host on this machine ("::1", "127.0.0.2")."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            s.bind((host, 0))
        return True
    except OSError:
        return False


HAS_IPV6 = can_bind("::1")
needs_ipv6 = pytest.mark.skipif(not HAS_IPV6, reason="no IPv6 loopback (::1)")


def listening_inodes(port):
    """Socket inodes listening on TCP `port` (any address), from /proc/net."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                found.add(f[9])
    return found


def owns_listener(proc, port):
    """Whether `proc` itself listens on `port`: another program (a test run
    beside this one) may have taken a port free_port() gave out."""
    inodes = listening_inodes(port)
    pids, seen = [proc.pid], set()
    while pids:  # the process and its descendants (a wrapper's child listens)
        pid = pids.pop()
        seen.add(pid)
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    pids += [int(c) for c in f.read().split() if int(c) not in seen]
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:[") and link[8:-1] in inodes:
                return True
    return False


def wait_port(port, host="127.0.0.1", timeout=10.0, proc=None):
    """Wait until `port` accepts connections (and, given `proc`, until that
    process is the one listening on it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    deadline = time.monotonic() + timeout * SLOW
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            with socket.socket(family) as s:
                s.settimeout(0.5)
                s.connect((host, port))
            if proc is None or owns_listener(proc, port):
                return True
        except OSError:
            pass
        time.sleep(0.02)
    return False


def small_window(port, rcvbuf, timeout=None):
    """A TCP socket connected to 127.0.0.1:port whose receive buffer is set
    to `rcvbuf` bytes before the connect (the window the server sees is
    fixed at the handshake): a slow reader, once the test stops reading.
    `timeout` in seconds (times SLOW), or none."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    if timeout is not None:
        s.settimeout(timeout * SLOW)
    s.connect(("127.0.0.1", port))
    return s


def wait_for(cond, timeout=5.0):
    """Poll cond() every 20 ms for up to timeout seconds (times SLOW);
    whether it came true (assert it)."""
    deadline = time.monotonic() + timeout * SLOW
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return bool(cond())


@contextlib.contextmanager
def serving(argv, port, log, timeout=10.0, ready=False, **popen):
    """Run argv, a server of its own that listens on 127.0.0.1:port, with its
    standard output and error in the file `log`; yield the process once it
    listens (the test fails with the log if it does not), and with `ready`
    (a monkey) once it says READY=1 too (Server.start). Unless the block
    waited for it itself, SIGTERM stops it at the end of the block; it must
    exit with status 0, and it never outlives the test."""
    notify = Readiness() if ready else None
    if notify:
        popen["env"] = {**popen.get("env", os.environ), "NOTIFY_SOCKET": notify.name}
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, **popen)
        if notify:
            notify.follow(proc)
        try:
            assert wait_port(port, proc=proc, timeout=timeout), Path(log).read_text()
            assert notify is None or notify.wait(proc, timeout), Path(log).read_text()
            yield proc
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15 * SLOW) == 0, Path(log).read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


class Strace:
    """strace -f attached to the running process pid (its threads too), the
    system calls of `calls` only (["all"]: every one), written to the file
    out; stop() detaches and returns the lines of the calls."""

    def __init__(self, pid, calls, out):
        self.out = out
        self.proc = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=" + ",".join(calls),
                                      "-o", str(out), "-p", str(pid)],
                                     stderr=subprocess.PIPE)
        # strace attaches every thread before it reports anything: wait for
        # the attach by checking the tracer pid of the process.
        deadline = time.monotonic() + 10 * SLOW
        while time.monotonic() < deadline:
            with open(f"/proc/{pid}/status") as st:
                if any(line.startswith("TracerPid:") and line.split()[1] != "0" for line in st):
                    break
            time.sleep(0.02)
        time.sleep(0.2 * SLOW)  # the worker threads are attached after the main one

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=10 * SLOW)
        return [line for line in self.out.read_text().splitlines() if "(" in line]


class GuestStrace:
    """The system calls an emulated server makes, as qemu-user's -strace
    logs them (QEMU_STRACE, into the file QEMU_LOG_FILENAME): each call of
    the program, as the emulator carries it out, and none of the emulator's
    own, which strace -p sees too (the futex of qemu's RCU thread, blocked
    when strace attaches, say). Made before the server starts (it sets
    srv.env); start() and stop() cut what came between, as lines in
    Strace's form ("PID name(args) = result"): the calls of several threads
    share lines in qemu's log (a call blocks between its name and its
    result), and are cut apart at each "PID name(". The calls in progress
    at start() are not there: they began before it. Left out: the clock
    calls, which the kernel's vDSO answers without a system call on the
    real machine, as on x86-64; qemu-user 7.2 gives the program no vDSO, so
    each is a system call there."""

    CALL = re.compile(r"(?:^|(?<=[\s)]))(\d+) ([a-z_0-9]+)\(", re.M)
    VDSO = ("clock_gettime", "clock_gettime64", "clock_getres", "clock_getres_time64",
            "gettimeofday", "time", "getcpu")

    def __init__(self, srv, out):
        self.out = out
        srv.env.update(QEMU_STRACE="1", QEMU_LOG_FILENAME=str(out))

    def _size(self):
        return self.out.stat().st_size if self.out.exists() else 0

    def start(self):
        self.offset = self._size()
        return self

    def stop(self):
        time.sleep(0.1 * SLOW)  # the last calls' results
        with open(self.out, "rb") as f:
            f.seek(self.offset)
            text = f.read().decode(errors="replace")
        calls = list(self.CALL.finditer(text))
        ends = [m.start() for m in calls[1:]] + [len(text)]
        return [text[m.start():end].strip() for m, end in zip(calls, ends)
                if m.group(2) not in self.VDSO]


def delay_start(srv, call, path=None, seconds=1.0):
    """Run srv under strace, which delays by `seconds` the first `call` of
    each of its processes (the first on `path`, given one): a server slow
    to start, as one under emulation or on a loaded machine is. strace runs
    detached (-D), so the server is the process started, and it stays
    attached to the end: a sanitizer's leak check, which cannot run under
    ptrace, is off."""
    srv.prefix = ["strace", "-D", "-qq", "-f", "-o", "/dev/null", "-e", f"trace={call}",
                  "-e", f"inject={call}:delay_enter={int(seconds * 1e6)}:when=1"] + (
                      ["-P", str(path)] if path else [])
    asan = srv.env.get("ASAN_OPTIONS", os.environ.get("ASAN_OPTIONS", ""))
    srv.env["ASAN_OPTIONS"] = (asan + ":" if asan else "") + "detect_leaks=0"


def strace_count(lines, name):
    """How many of the Strace lines are calls of `name`."""
    return sum(1 for line in lines if line.split(" ", 1)[-1].lstrip().startswith(name + "("))


class Readiness:
    """A server's readiness as a service manager learns it (sd_notify(3)):
    READY=1 on $NOTIFY_SOCKET, sent once the server runs its main loop, or
    by a supervisor once its first child does. A datagram socket at an
    abstract name, read by a thread until the server has exited: the
    server's later messages (reloads, restarts, the stop) must not fill it,
    or the server would block sending them."""

    def __init__(self):
        self.name = "@monkey-harness-" + uuid.uuid4().hex
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + self.name[1:])
        self.sock.settimeout(0.1)
        self.ready = threading.Event()

    def follow(self, proc):
        """Read the messages of the started process `proc`."""
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc):
        try:
            while True:
                try:
                    msg = self.sock.recv(4096)
                except socket.timeout:
                    if proc.poll() is not None:
                        return
                    continue
                if "READY=1" in msg.decode(errors="replace").split("\n"):
                    self.ready.set()
        finally:
            self.sock.close()

    def wait(self, proc, timeout=10.0):
        """Whether `proc` got ready within timeout seconds (times SLOW)."""
        deadline = time.monotonic() + timeout * SLOW
        while not self.ready.wait(0.02):
            if proc.poll() is not None or time.monotonic() > deadline:
                return False
        return True


class Response:
    def __init__(self, status, reason, headers, body, raw_head):
        self.status = status
        self.reason = reason
        self.headers = headers  # lower-case name -> list of values
        self.body = body
        self.raw_head = raw_head

    def header(self, name, default=None):
        values = self.headers.get(name.lower())
        return values[0] if values else default

    def __repr__(self):
        return f"<Response {self.status} {self.headers} {self.body[:60]!r}>"


class Conn:
    """A raw client connection that reads responses exactly as framed."""

    def __init__(self, port, host="127.0.0.1", timeout=5.0, source=None):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family)
        self.sock.settimeout(timeout * SLOW)
        if source:  # another client address, such as 127.0.0.2
            self.sock.bind((source, 0))
        self.sock.connect((host, port))
        self.buf = b""

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("connection closed by the server")
        self.buf += chunk

    def read_response(self, head_request=False):
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        version, status, reason = (lines[0].split(" ", 2) + [""])[:3]
        assert version == "HTTP/1.1", lines[0]
        headers = {}
        for line in lines[1:]:
            name, value = line.split(":", 1)
            headers.setdefault(name.strip().lower(), []).append(value.strip())
        status = int(status)
        body = b""
        if status == 100:
            return Response(status, reason, headers, body, head)
        if not head_request and status not in (204, 304) and "content-length" in headers:
            n = int(headers["content-length"][0])
            while len(self.buf) < n:
                self._fill()
            body, self.buf = self.buf[:n], self.buf[n:]
        elif (not head_request and status not in (204, 304)
              and "chunked" in ",".join(headers.get("transfer-encoding", [])).lower()):
            body = self._chunked()
        return Response(status, reason, headers, body, head)

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _chunked(self):
        """A chunked body, decoded (its trailer fields read and dropped)."""
        body = b""
        while True:
            size = int(self._line().split(b";")[0], 16)
            if size == 0:
                while self._line():
                    pass
                return body
            while len(self.buf) < size + 2:
                self._fill()
            assert self.buf[size:size + 2] == b"\r\n", "a chunk without its CRLF"
            body, self.buf = body + self.buf[:size], self.buf[size + 2:]

    def request(self, method="GET", path="/", headers=None, body=b"", version="HTTP/1.1"):
        hdrs = {"Host": "localhost"}
        if headers:
            hdrs.update(headers)
        if body and "Content-Length" not in hdrs and "Transfer-Encoding" not in hdrs:
            hdrs["Content-Length"] = str(len(body))
        text = f"{method} {path} {version}\r\n"
        text += "".join(f"{k}: {v}\r\n" for k, v in hdrs.items() if v is not None)
        self.send(text.encode() + b"\r\n" + body)
        return self.read_response(head_request=(method == "HEAD"))

    def closed(self, timeout=2.0):
        """True if the server closes the connection (EOF or reset) in time."""
        self.sock.settimeout(timeout * SLOW)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self.buf += chunk
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True

    def close(self):
        self.sock.close()


class Server:
    """A monkey process with a generated configuration directory."""

    def __init__(self, tmp_path, name="srv"):
        self.dir = tmp_path / name
        self.conf = self.dir / "conf"
        self.docroot = self.dir / "htdocs"
        (self.conf / "sites").mkdir(parents=True)
        self.docroot.mkdir(parents=True)
        self.port = free_port()
        self.proc = None
        self.stderr_path = self.dir / "stderr.log"
        self.server_conf = {
            "Listen": f"127.0.0.1:{self.port}",
            "Workers": "2",
            "Timeout": "5",
        }
        self.site_conf = {"ServerName": "localhost", "DocumentRoot": str(self.docroot)}
        self.error_pages = {}
        self.site_extra = ""  # text appended to the default site file
        self.plugins = []
        self.extra_sites = {}
        self.raw_conf = None
        self.env = {}  # variables added to the server's environment
        self.prefix = []  # a command the server runs under (delay_start())

    # -- configuration ----------------------------------------------------
    def set(self, **kw):
        self.server_conf.update({k: v if isinstance(v, list) else str(v) for k, v in kw.items()})
        return self

    def file(self, rel, content=b"", mode=None):
        path = self.docroot / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        if mode is not None:
            path.chmod(mode)
        return path

    def write_conf(self):
        if self.raw_conf is not None:
            (self.conf / "monkey.conf").write_text(self.raw_conf)
        else:
            lines = ["[SERVER]"]
            for k, v in self.server_conf.items():
                for value in v if isinstance(v, list) else [v]:
                    lines.append(f"    {k} {value}")
            (self.conf / "monkey.conf").write_text("\n".join(lines) + "\n")
        site = ["[HOST]"] + [f"    {k} {v}" for k, v in self.site_conf.items()]
        if self.error_pages:
            site.append("[ERROR_PAGES]")
            site += [f"    {k} {v}" for k, v in self.error_pages.items()]
        (self.conf / "sites" / "default").write_text("\n".join(site) + "\n" + self.site_extra)
        for name, text in self.extra_sites.items():
            (self.conf / "sites" / name).write_text(text)
        if self.plugins:
            text = "[PLUGINS]\n" + "".join(f"    Load {p}\n" for p in self.plugins)
            (self.conf / "plugins.load").write_text(text)
        elif (self.conf / "plugins.load").exists():
            (self.conf / "plugins.load").unlink()

    # -- process ------------------------------------------------------------
    def start(self, args=None, wait=True, ready=None, **popen):
        """Start the server; with `wait`, return once it listens on its port,
        and with `ready` once it runs its main loop too (it said READY=1).
        `ready` is the default for a server with the control plugin, whose
        commands the server refuses before its loop runs ("does not run
        its control loop"), and for a supervised one (-S, Supervisor On),
        whose supervisor listens before the child has read the
        configuration (one the test writes next would be read by a slow
        child's start, not by its reload). A test that set NOTIFY_SOCKET
        reads the messages itself: then only the port. `popen`: more
        arguments for subprocess.Popen, such as a preexec_fn that lowers a
        resource limit."""
        self.write_conf()
        cmd = self.prefix + [str(MONKEY), "-c", str(self.conf)] + (args or [])
        if ready is None:
            ready = ("-S" in (args or []) or self.server_conf.get("Supervisor") == "On" or
                     any(Path(p).name == "monkey-control.so" for p in self.plugins))
        env = {**os.environ, **self.env}
        notify = Readiness() if wait and ready and "NOTIFY_SOCKET" not in env else None
        if notify:
            env["NOTIFY_SOCKET"] = notify.name
        self.stderr = open(self.stderr_path, "w")
        try:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.stderr,
                                         env=env, **popen)
        except OSError:
            if notify:
                notify.sock.close()
            raise
        if notify:
            notify.follow(self.proc)
        if wait and not (wait_port(self.port, proc=self.proc) and
                         (notify is None or notify.wait(self.proc))):
            out = self.stderr_text()
            self.kill()
            raise RuntimeError(f"server did not start: {out}")
        return self

    def run_expect_failure(self, args=None, timeout=10):
        """Start with a configuration expected to be refused; return stderr."""
        self.write_conf()
        cmd = [str(MONKEY), "-c", str(self.conf)] + (args or [])
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout * SLOW)
        assert p.returncode == 1, (p.returncode, p.stderr)
        check_sanitizers(p.stderr)
        return p.stderr

    def stderr_text(self):
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def signal(self, sig):
        self.proc.send_signal(sig)

    def reload(self, timeout=10):
        """SIGHUP, then wait until the server reports the reload done or
        refused. "configuration reloaded" is logged once every worker has
        switched to the new configuration, so what follows meets no worker
        still on the old one."""
        def done():
            text = self.stderr_text()
            return text.count("configuration reloaded") + text.count("reload failed")
        before = done()
        self.signal(signal.SIGHUP)
        deadline = time.monotonic() + timeout * SLOW
        while done() == before:
            assert time.monotonic() < deadline, "the reload was not reported: " + self.stderr_text()
            time.sleep(0.02)

    def stop(self, timeout=15):
        """Graceful stop; returns the exit status. Fails on sanitizer reports."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout * SLOW)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("server did not stop on SIGTERM")
        self.stderr.close()
        self.proc = None
        check_sanitizers(self.stderr_text())
        return rc

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def conn(self, **kw):
        return Conn(self.port, **kw)

    def get(self, path="/", **kw):
        c = self.conn()
        try:
            return c.request("GET", path, **kw)
        finally:
            c.close()

    def request(self, method, path="/", **kw):
        c = self.conn()
        try:
            return c.request(method, path, **kw)
        finally:
            c.close()

    def raw(self, data, timeout=5.0):
        """Send raw bytes, return everything received until the server closes."""
        c = self.conn(timeout=timeout)
        try:
            c.send(data)
            c.closed(timeout)
            return c.buf
        finally:
            c.close()


def read_head(f):
    """Read a response head from a buffered binary reader: (status line, headers
    with lower-case names)."""
    status = f.readline().decode()
    headers = {}
    while True:
        line = f.readline().decode()
        if line in ("\r\n", ""):
            break
        k, v = line.split(":", 1)
        headers[k.strip().lower()] = v.strip()
    return status, headers


def vm_rss_kb(pid):
    """The resident memory of process `pid` in KiB (VmRSS of /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as st:
        for line in st:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def check_sanitizers(text):
    for mark in SANITIZER_MARKS:
        assert mark not in text, f"sanitizer report:\n{text}"


@pytest.fixture
def make_server(tmp_path):
    """Factory: make_server() returns a configured, not yet started Server."""
    servers = []

    def factory(name=None):
        srv = Server(tmp_path, name or f"srv{len(servers)}")
        servers.append(srv)
        return srv

    yield factory
    for srv in servers:
        if srv.proc is not None:
            rc = srv.stop()
            assert rc == 0, f"server exited with {rc}: {srv.stderr_text()}"


@pytest.fixture
def server(make_server):
    """A started server with a small site."""
    srv = make_server()
    srv.file("index.html", "<h1>index</h1>\n")
    srv.file("hello.txt", "Hello World!\n")
    srv.start()
    return srv


@pytest.fixture
def nobody_dir():
    """A folder of user nobody's under /tmp, for a server started as root
    that switches to `User nobody` (as the packages give /var/log/monkey to
    the User): the test's own folders are root's alone, so nobody could not
    reach them. Yields (path, nobody's passwd entry); skipped unless run as
    root with a user nobody."""
    if os.geteuid() != 0:
        pytest.skip("starting as root with a User needs root")
    try:
        pw = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody' to switch to")
    d = Path(tempfile.mkdtemp(prefix="mk-nobody-", dir="/tmp"))
    d.chmod(0o755)
    os.chown(d, pw.pw_uid, pw.pw_gid)
    yield d, pw
    shutil.rmtree(d)
