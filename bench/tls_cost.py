#!/usr/bin/env python3
"""Deterministic TLS figures: user-space instructions and system calls per
request of Monkey, nginx and h2o, for the four timed TLS scenarios.

    python3 bench/tls_cost.py [--servers monkey,nginx,h2o]
                              [--scenarios ka13,1m,full,resume] [--no-strace]
                              [--no-callgrind] [--n-ka13 N] [--n-1m N]
                              [--n-full N] [--n-resume N] [--keep]

Each server runs with one worker and the configuration bench.py gives it for
the TLS scenarios (the same certificate, the clients offering only TLS 1.3
with TLS_AES_128_GCM_SHA256). The client is this script, one request after
the other, so that what the server does per request does not depend on the
machine's load:

  ka13    one connection, N keep-alive `GET /hello.txt` (13 bytes); its
          one full handshake is counted too (about 1,300 instructions a
          request at N = 2000, the same for every server)
  1m      one connection, N keep-alive `GET /file1m.bin` (1 MiB), read whole
  full    N connections, each a full handshake and one `GET /hello.txt`
          with `Connection: close`
  resume  the same, every connection offering the session (a TLS 1.3
          ticket) of a first one, which is not counted

Instructions: the server under `valgrind --tool=callgrind --instr-atstart=no`,
instrumentation switched on just before the client's run and dumped after it
(libssl and libcrypto included; the kernel is not). System calls: `strace -c
-f` attached to the server's process tree for the client's run. Prints a
markdown table and writes it (tls_cost.md) with every figure (tls_cost.json)
into --out (default /tmp/tls_cost; the committed ones are in bench/results).
"""

import argparse
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (the harness: configurations, Server, parsers)

SCENARIOS = ["ka13", "1m", "full", "resume"]
PATHS = {"ka13": "/hello.txt", "1m": "/file1m.bin", "full": "/hello.txt",
         "resume": "/hello.txt"}


def read_answer(s, buf):
    """One HTTP/1.1 answer with a Content-Length from TLS socket s; returns
    (status line, body length, the bytes after it)."""
    while True:
        head, sep, rest = buf.partition(b"\r\n\r\n")
        if sep:
            break
        chunk = s.recv(262144)
        if not chunk:
            raise OSError("closed before the head")
        buf += chunk
    m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
    if not m:
        raise OSError("no Content-Length in %r" % head[:200])
    need = int(m.group(1))
    got = len(rest)
    while got < need:
        chunk = s.recv(262144)
        if not chunk:
            raise OSError("closed in the body")
        got += len(chunk)
        rest = chunk if got > need else b""
    extra = rest[len(rest) - (got - need):] if got > need else b""
    return head.split(b"\r\n", 1)[0], need, extra


def client(port, scenario, n):
    """Run the scenario's fixed load; returns the requests answered 200."""
    ctx = bench.insecure_context()
    path = PATHS[scenario]
    ok = 0
    if scenario in ("ka13", "1m"):
        req = ("GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n" % path).encode()
        raw = socket.create_connection(("127.0.0.1", port), timeout=60)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            buf = b""
            for _ in range(n):
                s.sendall(req)
                status, _, buf = read_answer(s, buf)
                ok += status.startswith(b"HTTP/1.1 200")
        return ok
    req = ("GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n" % path).encode()

    def one(session):
        raw = socket.create_connection(("127.0.0.1", port), timeout=60)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with ctx.wrap_socket(raw, server_hostname="localhost", session=session) as s:
            s.sendall(req)
            status, _, _ = read_answer(s, b"")
            return status.startswith(b"HTTP/1.1 200"), s.session, s.session_reused

    session = one(None)[1] if scenario == "resume" else None
    for _ in range(n):
        good, _, reused = one(session)
        if reused != (scenario == "resume"):
            raise RuntimeError("%s: a handshake was %s" % (
                scenario, "resumed" if reused else "full"))
        ok += good
    return ok


def client_env(b):
    """Run client() in a child with the harness's OPENSSL_CONF (TLS 1.3,
    one suite): Python reads it when ssl is imported."""
    return b.tls_env


def run_client(b, scenario, n):
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--client", str(b.port),
                        scenario, str(n)], env=client_env(b), capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("client %s failed: %s" % (scenario, p.stderr[-1500:]))
    ok = int(p.stdout.split()[-1])
    if ok != n:
        raise RuntimeError("client %s: %d of %d answered 200" % (scenario, ok, n))


def measure_callgrind(b, name, scenario, n):
    cgdir = os.path.join(b.wd, "cg-%s-%s" % (name, scenario))
    os.makedirs(cgdir, exist_ok=True)
    wrapper = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--trace-children=no",
               "--callgrind-out-file=" + os.path.join(cgdir, "callgrind.out.%p")]
    srv = b.start(name, single=True, wrapper=wrapper, ready_timeout=120, tls=True)
    cc = ["callgrind_control"]
    try:
        if scenario == "resume":
            run_client(b, "full", 1)  # the session cache or ticket key is warm
        subprocess.run(cc + ["-i", "on", str(srv.pid)], capture_output=True, timeout=60)
        run_client(b, scenario, n)
        subprocess.run(cc + ["--dump=run", str(srv.pid)], capture_output=True, timeout=60)
        subprocess.run(cc + ["-i", "off", str(srv.pid)], capture_output=True, timeout=60)
    finally:
        srv.stop(timeout=20)
    for fn in sorted(os.listdir(cgdir)):
        trig, total = bench.callgrind_totals(os.path.join(cgdir, fn))
        if trig and "run" in trig and total is not None:
            return total / n
    raise RuntimeError("%s %s: no callgrind dump in %s" % (name, scenario, cgdir))


def measure_strace(b, name, scenario, n):
    srv = b.start(name, single=True, tls=True)
    sf = os.path.join(b.wd, "strace-%s-%s.txt" % (name, scenario))
    try:
        if scenario == "resume":
            run_client(b, "full", 1)
        argv = ["strace", "-c", "-f", "-o", sf]
        for p in srv.tree():
            argv += ["-p", str(p)]
        st = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        bench.wait_traced(srv.tree(), 10)
        run_client(b, scenario, n)
        time.sleep(0.2)
        st.send_signal(2)
        st.wait(30)
    finally:
        srv.stop()
    calls, errs, per = bench.parse_strace(sf)
    return calls / n, {k: round(v / n, 3) for k, v in sorted(per.items(), key=lambda kv: -kv[1])}


def main():
    if sys.argv[1:2] == ["--client"]:
        print(client(int(sys.argv[2]), sys.argv[3], int(sys.argv[4])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--servers", default="monkey,nginx,h2o")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--n-ka13", type=int, default=2000)
    ap.add_argument("--n-1m", type=int, default=40)
    ap.add_argument("--n-full", type=int, default=200)
    ap.add_argument("--n-resume", type=int, default=200)
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--no-strace", action="store_true")
    ap.add_argument("--port", type=int, default=18443)
    ap.add_argument("--out", default=None)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    args = argparse.Namespace(mode="quick", port=a.port, workers=1,
                              servers=a.servers.split(","))
    b = bench.Bench(args)
    b.tls_setup()
    counts = {"ka13": a.n_ka13, "1m": a.n_1m, "full": a.n_full, "resume": a.n_resume}
    res = {}
    for sc in a.scenarios.split(","):
        for name in args.servers:
            r = res.setdefault(sc, {}).setdefault(name, {"n": counts[sc]})
            if not a.no_callgrind:
                r["ir_per_request"] = measure_callgrind(b, name, sc, counts[sc])
            if not a.no_strace:
                r["syscalls_per_request"], r["by_syscall"] = measure_strace(
                    b, name, sc, counts[sc])
            bench.log("tls_cost: %s %s: %s" % (sc, name, {k: v for k, v in r.items()
                                                       if k != "by_syscall"}))
    out = a.out or os.path.join(bench.tempfile.gettempdir(), "tls_cost")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tls_cost.json"), "w") as f:
        json.dump(res, f, indent=1)
    lines = ["| scenario | server | Ir/request | syscalls/request | top system calls/request |",
             "|---|---|---|---|---|"]
    for sc, per in res.items():
        for name, r in per.items():
            top = ", ".join("%s %.2f" % kv for kv in list(r.get("by_syscall", {}).items())[:5])
            lines.append("| %s | %s | %s | %s | %s |" % (
                sc, name, "%.0f" % r["ir_per_request"] if "ir_per_request" in r else "",
                "%.2f" % r["syscalls_per_request"] if "syscalls_per_request" in r else "", top))
    commit = subprocess.run(["git", "-C", bench.ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    head = ["# Deterministic TLS figures (bench/tls_cost.py)", "",
            "- date: %s UTC; monkey commit %s; one worker per server; requests per scenario: %s"
            % (time.strftime("%Y-%m-%d %H:%M", time.gmtime()), commit or "?",
               ", ".join("%s %d" % (sc, counts[sc]) for sc in res)),
            "- Ir: user-space instructions under callgrind (libssl and libcrypto included, "
            "the kernel not); h2o's ECDSA signatures run in its neverbleed process, which "
            "callgrind does not follow (strace does)", ""]
    with open(os.path.join(out, "tls_cost.md"), "w") as f:
        f.write("\n".join(head + lines) + "\n")
    print("\n".join(lines))
    print("(details in %s)" % os.path.join(out, "tls_cost.json"))
    if not a.keep:
        subprocess.run(["rm", "-rf", b.wd])
    return 0


if __name__ == "__main__":
    sys.exit(main())
