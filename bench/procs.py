"""Ports and processes, for the benchmark scripts of bench/ (bench.py and the
scripts that import it, duda.py and the scripts that import it, gateway.py):
a free loopback port, waiting for a server to listen on one, stopping a
process this script started, a benchmark's upstream process, a server's
process tree and its CPU time, from /proc. Python 3 standard library only."""

import os
import signal
import socket
import subprocess
import time


def free_port():
    """A loopback port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port, timeout=0.2):
    """Whether something accepts connections on 127.0.0.1:port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_port(port, timeout=10.0):
    """Wait up to timeout seconds for 127.0.0.1:port to accept; whether it did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_open(port, 0.5):
            return True
        time.sleep(0.05)
    return False


def stop(proc, timeout=10.0, sig=signal.SIGTERM, group=False):
    """Send sig to proc, a subprocess.Popen of this script (with group, to
    its whole process group: one started with start_new_session), wait up
    to timeout seconds for it, then SIGKILL it (or its group); reaped."""
    def send(s):
        try:
            if group:
                os.killpg(proc.pid, s)
            else:
                proc.send_signal(s)
        except ProcessLookupError:
            pass
    send(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        send(signal.SIGKILL)
        proc.wait()


class Upstream:
    """A benchmark's upstream: `BINARY -p PORT` on a free loopback port, its
    stderr appended to WD/upstream.log, started in a session of its own and
    stopped by its PID (bench/proxy.py's mk-pxupstream, bench/proxy_ws.py's
    mk-wsfloor)."""

    def __init__(self, binary, wd):
        self.port = free_port()
        with open(os.path.join(wd, "upstream.log"), "ab") as err:
            self.proc = subprocess.Popen([binary, "-p", str(self.port)],
                                         stdout=subprocess.DEVNULL, stderr=err,
                                         start_new_session=True)
        if not wait_port(self.port):
            self.stop()
            raise RuntimeError("%s did not start" % os.path.basename(binary))

    def cpu_ns(self):
        """Its CPU time so far, in ns (run_ns)."""
        return run_ns([self.proc.pid])

    def stop(self):
        stop(self.proc, 5)


def descendants(pid):
    """Every descendant PID of pid (processes, not threads)."""
    parents = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        ppid = int(st[st.rindex(")") + 2:].split()[1])
        parents.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in parents.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def tree(pid):
    """pid and its descendants (a server's workers, node's cluster)."""
    return [pid] + descendants(pid)


def cpu_of(pid):
    """User + system CPU seconds of process pid (all its threads, live or
    exited), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def run_ns(pids):
    """The CPU time of every thread of the processes pids, in ns, from
    /proc/PID/task/*/schedstat (finer than cpu_of's clock ticks); threads
    and processes that ended meanwhile count for nothing."""
    total = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except OSError:
                pass
    return total


def cpu_seconds(pids):
    """The CPU seconds of the processes pids (those still there)."""
    return sum(c for c in map(cpu_of, pids) if c is not None)
