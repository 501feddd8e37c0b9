"""Readers of what conftest's Strace recorded: TCP_CORK around writes."""

import re

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
