#!/usr/bin/env python3
"""The Duda benchmark: the hello service against node.js and a static file.

    python3 bench/duda.py [--seconds 10] [--rounds 3] [--warmup 3] [--idle 10000]
                          [--workers 2] [--quick]
                          [--pin [--server-cpus LIST] [--client-cpus LIST]]

Three targets, each answering the same 13 bytes (`Hello World!\\n`):
  duda    build/bin/monkey with examples/hello loaded, GET /hello/hello
  static  build/bin/monkey serving hello.txt from a document root
  node    bench/node/hello.js (the bench.py node scenario's server), a
          cluster of --workers processes
Each runs `wrk -t2 -c100 -d<seconds>s` with keep-alive, --rounds times,
each time on a fresh server after an unmeasured wrk run of --warmup seconds
(node's JIT compiler would otherwise count its start against node);
the report gives requests/s and the server's CPU time per request (user
and system time of the server's processes over the run, divided by the
requests wrk completed; wrk's own CPU is not counted). Then memory per
idle keep-alive connection: --idle connections to the duda service, each
with one request answered, and the server's resident memory before and
after. Needs wrk and node (bench/run.sh installs them); Python 3 standard
library only. Prints a Markdown report. --quick (2 s, 1 round, 1 s of
warm-up, 1,000 idle connections) only checks that it runs.

Placement: by default (unpinned) the servers and the clients share every
CPU, so on a small machine the client may bound requests/s. --pin runs
every server (all its processes and threads) under `taskset -c SERVER` and
every client (wrk, and this script, whose own sockets are the idle client)
under `taskset -c CLIENT`: by default the server gets the highest CPU this
process may use and the clients the others (on 2 CPUs: server 1, client 0).
--server-cpus and --client-cpus choose other lists (and imply --pin). Each
run also reports how busy each side was (CPU time over wall time, in CPUs):
the side that used all of its CPUs is the one that bounded the run.

This module also holds what bench/websocket.py and bench/duda_packages.py
share: the placement, the server processes and their CPU time.
"""

import argparse
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.path.join(ROOT, os.environ.get("MK_BUILD", "build"))
HELLO = b"Hello World!\n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def tree(pid):
    """pid and its descendants (node's cluster workers)."""
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == p:
                            todo.append(int(d))
                except OSError:
                    pass
    return pids


def cpu_of(pid):
    """User + system CPU seconds of process pid (all its threads, live or
    exited), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def cpu_seconds(pids):
    return sum(c for c in map(cpu_of, pids) if c is not None)


class CpuMeter:
    """The CPU time a server's whole process tree uses between start and
    stop: every process of the tree at either moment (a process started in
    between, such as a late node cluster worker, counts from zero), each with
    all its threads."""

    def __init__(self, pid):
        self.pid = pid
        self.t0 = time.monotonic()
        self.start = {p: cpu_of(p) for p in tree(pid)}

    def stop(self):
        """(CPU seconds, wall seconds, the processes counted)."""
        wall = time.monotonic() - self.t0
        end = {p: cpu_of(p) for p in tree(self.pid)}
        used = 0.0
        for p, c in end.items():
            if c is not None:
                used += c - (self.start.get(p) or 0.0)
        return used, wall, len(end)


def children_cpu():
    """CPU seconds of this process's reaped children (the load tools)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def self_cpu():
    """CPU seconds of this process (a client written in Python)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def parse_cpus(text):
    """A CPU list as taskset takes it ("0", "0,2", "1-3") as a sorted list."""
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return sorted(cpus)


def cpu_list(cpus):
    return ",".join(str(c) for c in cpus)


def add_pin_args(ap):
    ap.add_argument("--pin", action="store_true",
                    help="servers under taskset -c SERVER, clients under taskset -c CLIENT")
    ap.add_argument("--server-cpus", metavar="LIST",
                    help="the servers' CPUs (implies --pin; default: the highest CPU)")
    ap.add_argument("--client-cpus", metavar="LIST",
                    help="the clients' CPUs (implies --pin; default: the other CPUs)")


class Placement:
    """Where the servers and the clients run. Unpinned: nothing is changed,
    both share every CPU. Pinned: server commands are prefixed with
    `taskset -c SERVER` (taskset execs the server, so its PID and its whole
    tree keep the mask), client commands with `taskset -c CLIENT`, and this
    process moves to the client CPUs (its own sockets are clients too)."""

    def __init__(self, args):
        allowed = sorted(os.sched_getaffinity(0))
        self.pinned = bool(args.pin or args.server_cpus or args.client_cpus)
        self.allowed = allowed
        self.server = self.client = None
        if not self.pinned:
            return
        if not shutil.which("taskset"):
            sys.exit("--pin needs taskset (util-linux)")
        self.server = parse_cpus(args.server_cpus) if args.server_cpus else [allowed[-1]]
        self.client = (parse_cpus(args.client_cpus) if args.client_cpus
                       else [c for c in allowed if c not in self.server])
        if not self.client:
            sys.exit(f"--pin: no CPU left for the clients (this process may use "
                     f"{cpu_list(allowed)})")
        if set(self.server) & set(self.client):
            sys.exit(f"--pin: the server CPUs {cpu_list(self.server)} and the client CPUs "
                     f"{cpu_list(self.client)} overlap")
        if not set(self.server + self.client) <= set(allowed):
            sys.exit(f"--pin: this process may only use CPUs {cpu_list(allowed)}")
        os.sched_setaffinity(0, self.client)

    def server_cmd(self, cmd):
        return ["taskset", "-c", cpu_list(self.server)] + cmd if self.pinned else cmd

    def client_cmd(self, cmd):
        return ["taskset", "-c", cpu_list(self.client)] + cmd if self.pinned else cmd

    def server_cpus(self):
        return len(self.server) if self.pinned else len(self.allowed)

    def client_cpus(self):
        return len(self.client) if self.pinned else len(self.allowed)

    def describe(self):
        if not self.pinned:
            return (f"unpinned: the servers and the clients share {len(self.allowed)} CPU(s) "
                    f"({cpu_list(self.allowed)})")
        return (f"pinned: every server process on CPU(s) {cpu_list(self.server)} "
                f"(`taskset -c {cpu_list(self.server)}`), every client on CPU(s) "
                f"{cpu_list(self.client)} (`taskset -c {cpu_list(self.client)}`)")

    def verify(self, pid):
        """Check that every thread of every process of the server's tree may
        run only on the server CPUs (a server that set its own affinity would
        break the placement): exits if one may not."""
        if not self.pinned:
            return
        for p in tree(pid):
            try:
                tids = [int(t) for t in os.listdir(f"/proc/{p}/task")]
            except OSError:
                continue
            for t in tids:
                try:
                    mask = sorted(os.sched_getaffinity(t))
                except OSError:
                    continue
                if mask != self.server:
                    sys.exit(f"--pin: thread {t} of server process {p} may run on CPU(s) "
                             f"{cpu_list(mask)}, not only {cpu_list(self.server)}")


def rss_kb(pids):
    total = 0
    for p in pids:
        with open(f"/proc/{p}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


class Target:
    """A server under test, started with the placement's server prefix; its
    PID is the server's own (taskset execs it)."""

    def __init__(self, name, cmd, path, tmp, placement):
        self.name, self.path, self.placement = name, path, placement
        self.cmd = placement.server_cmd(cmd)
        self.log = open(os.path.join(tmp, name + ".log"), "w")
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT)

    def settle(self, timeout=10.0):
        """Wait until the server has started: the same processes, using less
        than 20 ms of CPU in 0.25 s (node's cluster workers may still be
        starting when the first one listens), so that no measure counts the
        start-up."""
        deadline = time.monotonic() + timeout
        pids, cpu = sorted(tree(self.proc.pid)), None
        while time.monotonic() < deadline:
            time.sleep(0.25)
            now_pids = sorted(tree(self.proc.pid))
            now_cpu = cpu_seconds(now_pids)
            if now_pids == pids and cpu is not None and now_cpu - cpu < 0.02:
                return
            pids, cpu = now_pids, now_cpu

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def monkey_conf(tmp, port, workers, service):
    conf = os.path.join(tmp, "conf-" + ("duda" if service else "static"))
    os.makedirs(os.path.join(conf, "sites"))
    os.makedirs(os.path.join(conf, "plugins"))
    docroot = os.path.join(tmp, "htdocs")
    os.makedirs(docroot, exist_ok=True)
    with open(os.path.join(docroot, "hello.txt"), "wb") as f:
        f.write(HELLO)
    with open(os.path.join(conf, "monkey.conf"), "w") as f:
        f.write(f"[SERVER]\n    Listen 127.0.0.1:{port}\n    Workers {workers}\n"
                "    KeepAliveTimeout 60\n    MaxKeepAliveRequests 100000\n"
                "    MaxConnections 20000\n    Backlog 4096\n")
    site = f"[HOST]\n    ServerName localhost\n    DocumentRoot {docroot}\n"
    if service:
        site += "\n[WEB_SERVICE]\n    Name hello\n"
        with open(os.path.join(conf, "plugins.load"), "w") as f:
            f.write(f"[PLUGINS]\n    Load {os.path.join(BUILD, 'plugins', 'monkey-duda.so')}\n")
        with open(os.path.join(conf, "plugins", "duda.conf"), "w") as f:
            f.write(f"[DUDA]\n    ServicesRoot {service}\n")
    with open(os.path.join(conf, "sites", "default"), "w") as f:
        f.write(site)
    return conf


def wrk(port, path, seconds, placement):
    cmd = placement.client_cmd(["wrk", "-t2", "-c100", f"-d{seconds}s",
                                f"http://127.0.0.1:{port}{path}"])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60).stdout
    reqs = int(re.search(r"(\d+) requests in", out).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return reqs, rps, int(errors.group(1)) if errors else 0


def measure(target, port, seconds):
    """One wrk run against target: a dict of requests/s, the server's CPU
    µs per request, the non-2xx answers, and how busy the server and wrk
    were (CPU seconds over wall seconds, in CPUs)."""
    meter = CpuMeter(target.proc.pid)
    w0 = children_cpu()
    reqs, rps, errors = wrk(port, target.path, seconds, target.placement)
    client = children_cpu() - w0
    used, wall, _ = meter.stop()
    target.placement.verify(target.proc.pid)
    return {"rps": rps, "cpu_us": used / reqs * 1e6 if reqs else None, "errors": errors,
            "server_load": used / wall, "client_load": client / wall}


def load_columns(runs):
    """The median server and client CPU loads of runs, as table cells."""
    return (f"{statistics.median(r['server_load'] for r in runs):.2f} | "
            f"{statistics.median(r['client_load'] for r in runs):.2f}")


def idle(port, path, n):
    socks = []
    req = f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(req)
        socks.append(s)
    for s in socks:
        got = b""
        while not got.endswith(HELLO):
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    return socks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--idle", type=int, default=10000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    add_pin_args(ap)
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.rounds, args.warmup, args.idle = 2, 1, 1, 1000
    placement = Placement(args)
    for tool in ("wrk", "node"):
        if not shutil.which(tool):
            sys.exit(f"duda.py: {tool} is not installed (bench/run.sh installs it)")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
    tmp = tempfile.mkdtemp(prefix="duda-bench-")
    services = os.path.join(tmp, "services")
    subprocess.run([os.path.join(BUILD, "bin", "duda"), "build",
                    os.path.join(ROOT, "examples", "hello"), "-o", services],
                   check=True, stdout=subprocess.DEVNULL)
    monkey = os.path.join(BUILD, "bin", "monkey")
    results = {}
    ports = {}
    for rnd in range(args.rounds):
        for name in ("duda", "static", "node"):
            port = free_port()
            ports[name] = port
            if name == "node":
                cmd = ["node", os.path.join(HERE, "node", "hello.js"), str(port), str(args.workers)]
                path = "/"
            else:
                conf = monkey_conf(os.path.join(tmp, f"r{rnd}"), port, args.workers,
                                   services if name == "duda" else None)
                cmd, path = [monkey, "-c", conf], "/hello/hello" if name == "duda" else "/hello.txt"
            t = Target(name, cmd, path, tmp, placement)
            try:
                if not wait_port(port):
                    sys.exit(f"duda.py: {name} did not start (log in {tmp})")
                t.settle()
                if args.warmup:
                    wrk(port, path, args.warmup, placement)
                results.setdefault(name, []).append(measure(t, port, args.seconds))
            finally:
                t.stop()
    print(f"# Duda hello vs node.js vs a static file\n\n`wrk -t2 -c100 -d{args.seconds}s`, "
          f"keep-alive, {args.rounds} round(s) after {args.warmup} s of warm-up, medians; "
          f"{args.workers} workers each; "
          f"{placement.describe()}.\n")
    print(f"Server and client load: CPU time over wall time, in CPUs (the server has "
          f"{placement.server_cpus()}, the client {placement.client_cpus()}).\n")
    print("| target | requests/s | CPU µs/request | non-2xx | server load | client load |")
    print("|---|---|---|---|---|---|")
    med = {}
    for name, runs in results.items():
        rps = statistics.median(r["rps"] for r in runs)
        cpu = statistics.median(r["cpu_us"] for r in runs)
        med[name] = (rps, cpu)
        print(f"| {name} | {rps:.0f} | {cpu:.1f} | {sum(r['errors'] for r in runs)} | "
              f"{load_columns(runs)} |")
    d, s, n = med["duda"], med["static"], med["node"]
    print(f"\nduda/node requests/s: {d[0] / n[0]:.2f}x (bar: >= 3x); duda/node CPU per request: "
          f"{d[1] / n[1]:.2f} (bar: <= 0.33); duda/static requests/s: {d[0] / s[0]:.2f} "
          f"(bar: >= 0.8)")
    # Idle keep-alive connections to the service.
    port = free_port()
    conf = monkey_conf(os.path.join(tmp, "idle"), port, args.workers, services)
    t = Target("idle", [monkey, "-c", conf], "/hello/hello", tmp, placement)
    try:
        wait_port(port)
        t.settle()
        before = rss_kb([t.proc.pid])
        socks = idle(port, "/hello/hello", args.idle)
        time.sleep(1.0)
        after = rss_kb([t.proc.pid])
        print(f"\n{args.idle} idle keep-alive connections to the service (one request each): "
              f"RSS {before} -> {after} KiB, {(after - before) / args.idle:.2f} KiB per "
              f"connection, {(after - before) / 1024:.1f} MiB per 10,000")
        for s in socks:
            s.close()
    finally:
        t.stop()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
