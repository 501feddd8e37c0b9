#!/usr/bin/env python3
"""The Duda packages benchmark: the json_api example against node.js.

    python3 bench/duda_packages.py [--seconds 10] [--rounds 3] [--warmup 3] [--workers 2]
                                   [--syscalls 2000] [--idle 10000] [--quick]
                                   [--pin [--server-cpus LIST] [--client-cpus LIST]]

GET of one note as JSON (`/json_api/notes/1`), from a SQLite database of
1,000 notes:
  duda  build/bin/monkey with examples/json_api (the json and sqlite
        packages: the query runs on a task thread, the answer is written by
        the sqlite package's respond_json)
  node  bench/node/notes.js: http + better-sqlite3 (synchronous, on the
        event loop), a cluster of --workers processes
Both answer the same bytes for the same row (checked first). Each runs
`wrk -t2 -c100 -d<seconds>s` with keep-alive, --rounds times, each on a
fresh server after an unmeasured wrk run of --warmup seconds: requests/s
and the server's CPU time per request (user + system of the server's
processes over the run, divided by the requests). Then, independent of the
machine's load, system calls per request: --syscalls sequential keep-alive
requests on one connection with `strace -c -f` attached to the server.
And memory per connection: on a fresh server (after 20 requests to warm
it), --idle keep-alive connections each with one GET answered and left
open; the resident memory of the server's processes (node's cluster
together) before and after, divided by the connections.
--quick: 2 s, 1 round, 1 s of warm-up, 200 requests under strace, 1,000
idle connections
(checks that it runs).
--pin, --server-cpus, --client-cpus: the placement of bench/duda.py (the
servers under `taskset -c SERVER`, wrk, strace and this script under
`taskset -c CLIENT`); each run reports how busy each side was.
Needs wrk, node with better-sqlite3 (tools/deps.sh bench) and strace;
Python 3 standard library only. Prints a Markdown report.
"""

import argparse
import http.client
import os
import re
import resource
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

from duda import (BUILD, HERE, ROOT, Placement, Target, add_pin_args, free_port, load_columns,
                  measure, rss_kb, tree, wait_port, wrk)

NOTES = 1000
PATH = "/json_api/notes/1"
SCHEMA = ("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY AUTOINCREMENT,"
          " title TEXT NOT NULL, body TEXT NOT NULL DEFAULT '',"
          " created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),"
          " updated TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')))")


def make_db(path):
    """The notes both servers read: the json_api example's table, NOTES rows."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(SCHEMA)
    db.executemany("INSERT INTO notes (title, body, created, updated) VALUES (?, ?, ?, ?)",
                   [(f"note {i}", f"the body of note {i}, with \"quotes\"",
                     "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z") for i in range(NOTES)])
    db.commit()
    db.close()


def monkey_conf(tmp, port, workers, services, data):
    conf = os.path.join(tmp, "conf")
    os.makedirs(os.path.join(conf, "sites"))
    os.makedirs(os.path.join(conf, "plugins"))
    docroot = os.path.join(tmp, "htdocs")
    os.makedirs(docroot, exist_ok=True)
    # Every wrk connection comes from 127.0.0.1: the per-client task bound must hold them all.
    with open(os.path.join(conf, "monkey.conf"), "w") as f:
        f.write(f"[SERVER]\n    Listen 127.0.0.1:{port}\n    Workers {workers}\n"
                "    KeepAliveTimeout 60\n    MaxKeepAliveRequests 100000\n"
                "    MaxConnections 20000\n    Backlog 4096\n"
                "    TaskQueuePerPlugin 4096\n    TaskQueuePerClient 4096\n")
    with open(os.path.join(conf, "plugins.load"), "w") as f:
        f.write(f"[PLUGINS]\n    Load {os.path.join(BUILD, 'plugins', 'monkey-duda.so')}\n")
    with open(os.path.join(conf, "plugins", "duda.conf"), "w") as f:
        f.write(f"[DUDA]\n    ServicesRoot {services}\n"
                f"    PackagesRoot {os.path.join(BUILD, 'duda-packages')}\n")
    with open(os.path.join(conf, "sites", "default"), "w") as f:
        f.write(f"[HOST]\n    ServerName localhost\n    DocumentRoot {docroot}\n\n"
                f"[WEB_SERVICE]\n    Name json_api\n    DataDir {data}\n")
    return conf


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", path)
    r = c.getresponse()
    return r.status, r.getheader("Content-Type"), r.read()


def syscalls(target, port, n, tmp):
    """System calls per request: n keep-alive GETs on one connection under strace -c -f."""
    out = os.path.join(tmp, f"strace-{target.name}.txt")
    argv = ["strace", "-c", "-f", "-o", out]
    for p in tree(target.proc.pid):
        argv += ["-p", str(p)]
    st = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached to every thread
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for _ in range(n):
        c.request("GET", PATH)
        c.getresponse().read()
    c.close()
    time.sleep(0.3)
    st.send_signal(signal.SIGINT)
    st.wait(30)
    with open(out) as f:
        m = re.search(r"^\s*100\.00\s+\S+\s+\S+\s+(\d+)", f.read(), re.M)
    return int(m.group(1)) / n if m else None


def read_response(s, buf=b""):
    """Read one whole response (a Content-Length body) from s: its status line."""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError("closed before a response")
        buf += chunk
    head, body = buf.split(b"\r\n\r\n", 1)
    m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    want = int(m.group(1)) if m else 0
    while len(body) < want:
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError("closed in a body")
        body += chunk
    return head.split(b"\r\n", 1)[0]


def idle_memory(target, port, n):
    """Bytes of resident memory per idle keep-alive connection: n connections, each with one
    GET answered, left open; the server's processes (node's cluster too) before and after."""
    for _ in range(20):
        get(port, PATH)
    time.sleep(0.3)
    before = rss_kb(tree(target.proc.pid))
    req = f"GET {PATH} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
    socks = []
    try:
        for i in range(0, n, 500):  # in batches: the listen backlogs stay short
            batch = [socket.create_connection(("127.0.0.1", port), timeout=30)
                     for _ in range(min(500, n - i))]
            for s in batch:
                s.sendall(req)
            for s in batch:
                status = read_response(s)
                if not status.startswith(b"HTTP/1.1 200"):
                    raise RuntimeError(f"idle connection answered {status!r}")
            socks += batch
        time.sleep(1.0)
        after = rss_kb(tree(target.proc.pid))
    finally:
        for s in socks:
            s.close()
    return (after - before) * 1024 / n


def start(name, tmp, port, args, services, db, placement):
    if name == "node":
        cmd = ["node", os.path.join(HERE, "node", "notes.js"), str(port), str(args.workers), db]
    else:
        conf = monkey_conf(os.path.join(tmp, f"m{port}"), port, args.workers, services,
                           os.path.dirname(db))
        cmd = [os.path.join(BUILD, "bin", "monkey"), "-c", conf]
    t = Target(name, cmd, PATH, tmp, placement)
    if not wait_port(port):
        t.stop()
        sys.exit(f"duda_packages.py: {name} did not start (log in {tmp})")
    t.settle()
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--syscalls", type=int, default=2000)
    ap.add_argument("--idle", type=int, default=10000)
    ap.add_argument("--quick", action="store_true")
    add_pin_args(ap)
    args = ap.parse_args()
    placement = Placement(args)
    if args.quick:
        args.seconds, args.rounds, args.warmup, args.syscalls, args.idle = 2, 1, 1, 200, 1000
    for tool in ("wrk", "node", "strace"):
        if not shutil.which(tool):
            sys.exit(f"duda_packages.py: {tool} is not installed (tools/deps.sh bench)")
    if not os.path.isdir(os.path.join(HERE, "node", "node_modules", "better-sqlite3")):
        sys.exit("duda_packages.py: better-sqlite3 is not installed in bench/node "
                 "(tools/deps.sh bench)")
    for pkg in ("json", "sqlite"):
        if not os.path.exists(os.path.join(BUILD, "duda-packages", pkg + ".dpkg")):
            sys.exit(f"duda_packages.py: no {pkg} package in {BUILD}/duda-packages "
                     "(libcjson-dev, libsqlite3-dev, then make)")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
    tmp = tempfile.mkdtemp(prefix="duda-packages-bench-")
    services = os.path.join(tmp, "services")
    subprocess.run([os.path.join(BUILD, "bin", "duda"), "build",
                    os.path.join(ROOT, "examples", "json_api"), "-o", services],
                   check=True, stdout=subprocess.DEVNULL)
    dbs = {}
    for name in ("duda", "node"):  # a database each: the same rows
        os.makedirs(os.path.join(tmp, "data-" + name))
        dbs[name] = os.path.join(tmp, "data-" + name, "notes.db")
        make_db(dbs[name])

    # The same answer from both.
    answers = {}
    for name in ("duda", "node"):
        port = free_port()
        t = start(name, tmp, port, args, services, dbs[name], placement)
        try:
            answers[name] = get(port, PATH)
        finally:
            t.stop()
    if answers["duda"] != answers["node"]:
        sys.exit(f"duda_packages.py: the answers differ: {answers}")

    results, calls, memory = {}, {}, {}
    for name in ("duda", "node"):  # first, on fresh servers
        port = free_port()
        t = start(name, tmp, port, args, services, dbs[name], placement)
        try:
            memory[name] = idle_memory(t, port, args.idle)
        finally:
            t.stop()
    for _ in range(args.rounds):
        for name in ("duda", "node"):
            port = free_port()
            t = start(name, tmp, port, args, services, dbs[name], placement)
            try:
                if args.warmup:
                    wrk(port, PATH, args.warmup, placement)
                results.setdefault(name, []).append(measure(t, port, args.seconds))
            finally:
                t.stop()
    for name in ("duda", "node"):
        port = free_port()
        t = start(name, tmp, port, args, services, dbs[name], placement)
        try:
            calls[name] = syscalls(t, port, args.syscalls, tmp)
        finally:
            t.stop()

    print(f"# Duda json_api vs node.js (http + better-sqlite3): GET one note\n\n"
          f"`GET {PATH}` ({len(answers['duda'][2])} bytes of JSON, the same from both), "
          f"`wrk -t2 -c100 -d{args.seconds}s`, keep-alive, {args.rounds} round(s) after "
          f"{args.warmup} s of warm-up, medians; "
          f"{args.workers} workers each; {placement.describe()}.\n")
    print(f"Server and client load: CPU time over wall time under wrk, in CPUs (the server has "
          f"{placement.server_cpus()}, the client {placement.client_cpus()}).\n")
    print("| target | requests/s | CPU µs/request | non-2xx | server load | client load | "
          "system calls/request | memory/idle connection |")
    print("|---|---|---|---|---|---|---|---|")
    med = {}
    for name, runs in results.items():
        rps = statistics.median(r["rps"] for r in runs)
        cpu = statistics.median(r["cpu_us"] for r in runs)
        med[name] = (rps, cpu)
        sc = f"{calls[name]:.1f}" if calls.get(name) is not None else "?"
        print(f"| {name} | {rps:.0f} | {cpu:.1f} | {sum(r['errors'] for r in runs)} | "
              f"{load_columns(runs)} | {sc} | {memory[name] / 1024:.2f} KiB |")
    d, n = med["duda"], med["node"]
    print(f"\nduda/node requests/s: {d[0] / n[0]:.2f}x (bar: >= 3x); CPU per request "
          f"{d[1] / n[1]:.2f}x; system calls per request ({args.syscalls} sequential "
          f"keep-alive requests under `strace -c -f`): "
          + (f"{calls['duda'] / calls['node']:.2f}x" if calls.get("duda") and calls.get("node")
             else "?"))
    ratio = f"{memory['duda'] / memory['node']:.2f}x" if memory["node"] > 0 else "?"
    print(f"\nMemory per idle keep-alive connection ({args.idle} connections, one GET answered "
          f"on each, resident memory of the server's processes): duda "
          f"{memory['duda'] / 1024:.2f} KiB, node {memory['node'] / 1024:.2f} KiB, duda/node "
          f"{ratio} (bar: < 1x); {memory['duda'] * 10000 / 1024 / 1024:.1f} MiB per 10,000 for "
          f"duda.")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
