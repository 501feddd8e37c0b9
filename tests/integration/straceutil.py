"""strace attached to a running server, and readers of what it recorded."""

import re
import signal
import subprocess
import time

from conftest import SLOW


class Strace:
    """strace -f on a running process, the system calls of `calls` only."""

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


def count(lines, name):
    return sum(1 for line in lines if line.split(" ", 1)[-1].lstrip().startswith(name + "("))


CORK = re.compile(r"setsockopt\((\d+), SOL_TCP, TCP_CORK, \[(\d)\]")
CALL = re.compile(r"(\w+)\((\d+)?")
WRITES = ("write", "writev", "sendmsg", "sendto", "sendfile")


def corked_writes(lines):
    """Follow TCP_CORK per thread in `strace -f` lines (setsockopt,
    epoll_wait and the writes traced): (writes made on a corked socket,
    writes on the same sockets uncorked, epoll_wait calls begun while a
    socket of the thread was corked)."""
    corked = {}  # thread: the descriptor it corked
    fds = set()
    inside = outside = waits = 0
    pending = []
    for line in lines:
        tid, _, call = line.partition(" ")
        call = call.lstrip()
        m = CORK.match(call)
        if m:
            fds.add(m.group(1))
            if m.group(2) == "1":
                corked[tid] = m.group(1)
            else:
                corked.pop(tid, None)
            continue
        m = CALL.match(call)
        if not m:
            continue  # "<... resumed>": the call was counted where it began
        if m.group(1).startswith("epoll_"):
            waits += tid in corked
        elif m.group(1) in WRITES:
            pending.append((m.group(2), corked.get(tid) == m.group(2)))
    for fd, is_corked in pending:
        if fd in fds:
            inside += is_corked
            outside += not is_corked
    return inside, outside, waits
