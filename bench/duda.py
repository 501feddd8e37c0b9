#!/usr/bin/env python3
"""The Duda benchmark: the hello service against node.js and a static file.

    python3 bench/duda.py [--seconds 10] [--rounds 3] [--idle 10000] [--workers 2]

Three targets, each answering the same 13 bytes (`Hello World!\\n`):
  duda    build/bin/monkey with examples/hello loaded, GET /hello/hello
  static  build/bin/monkey serving hello.txt from a document root
  node    bench/node/hello.js (the bench.py node scenario's server), a
          cluster of --workers processes
Each runs `wrk -t2 -c100 -d<seconds>s` with keep-alive, --rounds times;
the report gives requests/s and the server's CPU time per request (user
and system time of the server's processes over the run, divided by the
requests wrk completed; wrk's own CPU is not counted). Then memory per
idle keep-alive connection: --idle connections to the duda service, each
with one request answered, and the server's resident memory before and
after. Needs wrk and node (bench/run.sh installs them); Python 3 standard
library only. Prints a Markdown report.
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


def cpu_seconds(pids):
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except OSError:
            pass
    return total / tick


def rss_kb(pids):
    total = 0
    for p in pids:
        with open(f"/proc/{p}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


class Target:
    def __init__(self, name, cmd, path, tmp):
        self.name, self.cmd, self.path = name, cmd, path
        self.log = open(os.path.join(tmp, name + ".log"), "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)

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


def wrk(port, path, seconds):
    out = subprocess.run(["wrk", "-t2", "-c100", f"-d{seconds}s", f"http://127.0.0.1:{port}{path}"],
                         capture_output=True, text=True, timeout=seconds + 60).stdout
    reqs = int(re.search(r"(\d+) requests in", out).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return reqs, rps, int(errors.group(1)) if errors else 0


def measure(target, port, seconds):
    pids = tree(target.proc.pid)
    c0 = cpu_seconds(pids)
    reqs, rps, errors = wrk(port, target.path, seconds)
    used = cpu_seconds(pids) - c0
    return rps, used / reqs * 1e6 if reqs else None, errors


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
    ap.add_argument("--idle", type=int, default=10000)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
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
            t = Target(name, cmd, path, tmp)
            try:
                if not wait_port(port):
                    sys.exit(f"duda.py: {name} did not start (log in {tmp})")
                time.sleep(0.3)
                results.setdefault(name, []).append(measure(t, port, args.seconds))
            finally:
                t.stop()
    print(f"# Duda hello vs node.js vs a static file\n\n`wrk -t2 -c100 -d{args.seconds}s`, "
          f"keep-alive, {args.rounds} round(s), medians; {args.workers} workers each; "
          f"{os.cpu_count()} CPUs shared by wrk and the server.\n")
    print("| target | requests/s | CPU µs/request | non-2xx |")
    print("|---|---|---|---|")
    med = {}
    for name, runs in results.items():
        rps = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        med[name] = (rps, cpu)
        print(f"| {name} | {rps:.0f} | {cpu:.1f} | {sum(r[2] for r in runs)} |")
    d, s, n = med["duda"], med["static"], med["node"]
    print(f"\nduda/node requests/s: {d[0] / n[0]:.2f}x (bar: >= 3x); duda/node CPU per request: "
          f"{d[1] / n[1]:.2f} (bar: <= 0.33); duda/static requests/s: {d[0] / s[0]:.2f} "
          f"(bar: >= 0.8)")
    # Idle keep-alive connections to the service.
    port = free_port()
    conf = monkey_conf(os.path.join(tmp, "idle"), port, args.workers, services)
    t = Target("idle", [monkey, "-c", conf], "/hello/hello", tmp)
    try:
        wait_port(port)
        time.sleep(0.3)
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
