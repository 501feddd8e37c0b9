#!/usr/bin/env python3
"""Proxied WebSocket: Monkey's proxy plugin against nginx and HAProxy in
front of one WebSocket echo upstream. A companion of bench/proxy.py, whose
helpers (start, configurations, log) it shares.

    python3 bench/proxy_ws.py [--servers monkey,nginx,haproxy] [--idle 2000]
                              [--n 2000] [--warmup 200] [--conns 64]
                              [--duration 5] [--no-callgrind] [--out DIR] [--keep]

The upstream is build/bin/mk-wsfloor (bench/ws_floor.c): one thread, epoll,
the RFC 6455 handshake (Sec-WebSocket-Accept from libcrypto), every data
frame echoed. The client is build/bin/mk-wsload (bench/wsload.c): one
thread, epoll, 32-byte text frames masked with a fresh key, the upstream's
Sec-WebSocket-Accept checked, every echo compared with what was sent. Each
proxy passes every path to the upstream and tunnels the upgrade after its
101; one worker (process, thread) each:

  monkey   plugins/proxy, `Pass / 127.0.0.1:UP` (the Upgrade is passed
           without a setting)
  nginx    proxy_pass http://127.0.0.1:UP, proxy_http_version 1.1,
           proxy_set_header Upgrade $http_upgrade,
           proxy_set_header Connection "upgrade"
  haproxy  mode http (it tunnels a 101 by itself), timeout tunnel 60s

Measures, each on a fresh start of the proxy:
  memory   --idle idle WebSockets opened through the proxy (mk-wsload -w:
           every handshake done, no message) in two halves by two clients,
           each held 1 s: the growth of the resident memory (VmRSS) and of
           the proportional set size (Pss of smaps_rollup) of the proxy's
           processes, / --idle; the same over the second half alone (what
           the heap grows once left out); the proxy's descriptors per
           WebSocket (2: the client's socket and the upstream's); then one
           echo on each WebSocket, and the growth again (the buffers a
           tunnel keeps once it has carried a message), / --idle
  echo     --conns connections, one 32-byte message outstanding on each,
           for --duration s after 1 s of the same load unmeasured: round
           trips per second and the CPU time of the proxy's threads per
           round trip (schedstat), the client's and the upstream's; also
           the upstream alone ("direct") for reference. One run, noisy
  syscalls `strace -c -f` on the proxy's processes over N echoes on one
           connection (mk-wsload -c1 -r N, one message at a time), the
           handshake not traced (mk-wsload -w), / N
  Ir       user-space instructions under callgrind (--instr-atstart=no):
           instrumentation on after --warmup echoes, one dump after a whole
           mk-wsload -c1 -r N (handshake, N echoes, close), one after a
           whole -r 2N; (Ir(2N) - Ir(N)) / N, the handshake, the tunnel's
           setup and its close cancelling out

Writes DIR/proxy_ws.md and DIR/proxy_ws.json (default bench/results).
Needs nginx, haproxy, strace and valgrind (tools/deps.sh bench) and a build
with the proxy plugin, mk-wsload and mk-wsfloor (built with the tests).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import procs  # noqa: E402
import proxy  # noqa: E402
import runs  # noqa: E402  (the run's record, strace and callgrind)
from procs import cpu_of, free_port, run_ns  # noqa: E402

HERE, ROOT, BUILD = proxy.HERE, proxy.ROOT, proxy.BUILD
WSLOAD = os.path.join(BUILD, "bin", "mk-wsload")
FLOOR = os.path.join(BUILD, "bin", "mk-wsfloor")
SERVERS = ["monkey", "nginx", "haproxy"]
PATH = "/echo"


# ----------------------------------------------------------- configurations

def conf_nginx(d, port, up, workers, h2=False):
    tmp = os.path.join(d, "tmp")
    os.makedirs(tmp, exist_ok=True)
    conf = os.path.join(d, "nginx.conf")
    bench.write(conf, f"""daemon off;
master_process {"on" if workers > 1 else "off"};
worker_processes {workers};
worker_rlimit_nofile {bench.nofile_limit()};
pid {d}/nginx.pid;
error_log {d}/nginx-error.log warn;
events {{ worker_connections 20000; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{
            proxy_pass http://127.0.0.1:{up};
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection "upgrade";
            proxy_read_timeout 60s;
        }}
    }}
}}
""")
    return ["nginx", "-p", d, "-c", conf, "-e", os.path.join(d, "nginx-error.log")]


def conf_haproxy(d, port, up, workers, h2=False):
    argv = proxy.conf_haproxy(d, port, up, workers, h2)
    path = os.path.join(d, "haproxy.cfg")
    with open(path) as f:
        text = f.read()
    bench.write(path, text.replace("    http-reuse always\n",
                                   "    http-reuse always\n    timeout tunnel 60s\n"))
    return argv


CONFS = {"monkey": proxy.conf_monkey, "nginx": conf_nginx, "haproxy": conf_haproxy}


def start(name, wd, tag, up, wrapper=None, ready_timeout=15.0):
    d = os.path.join(wd, "%s-%s" % (name, tag))
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o755)
    port = free_port()
    argv = CONFS[name](d, port, up.port, 1)
    return bench.Server(name, (wrapper or []) + argv, port, d, "server.log",
                        ready_timeout=ready_timeout)


def log(msg):
    bench.log("proxy_ws: " + msg)


# ------------------------------------------------------------------- client

class Load:
    """mk-wsload -w through port: the constructor opens (and upgrades) the
    connections, go() runs the load and returns its JSON result while they
    are still open, close() lets it close them and exit."""

    def __init__(self, port, conns, extra):
        self.cmd = [WSLOAD, "-p", str(port), "-u", PATH, "-m", "echo", "-c", str(conns),
                    "-w"] + extra
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        if self.proc.stdout.readline().strip() != "open":
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("mk-wsload did not open its %d connections through port %d"
                               % (conns, port))

    def cpu(self):
        return cpu_of(self.proc.pid) or 0.0

    def go(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("mk-wsload ended without a result (exit %s)" % self.proc.wait())
        r = json.loads(line)
        if r["errors"] or r["failed"] or not r["round_trips"]:
            raise RuntimeError("mk-wsload: %s" % r)
        return r

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(60)


def echo_once(port, rounds, conns=1):
    """A whole mk-wsload run of rounds echoes (handshakes, echoes, closes)."""
    p = subprocess.run([WSLOAD, "-p", str(port), "-u", PATH, "-m", "echo", "-c", str(conns),
                        "-r", str(rounds)], capture_output=True, text=True, timeout=600)
    if p.returncode != 0 or not p.stdout.strip():
        raise RuntimeError("mk-wsload -r %d: exit %d %s" % (rounds, p.returncode,
                                                             p.stderr[-400:]))
    r = json.loads(p.stdout.strip().splitlines()[-1])
    if r["errors"] or r["failed"] or r["round_trips"] < rounds:
        raise RuntimeError("mk-wsload -r %d: %s" % (rounds, r))
    return r


# ------------------------------------------------------------------ measures

def mem_kb(pids):
    """(VmRSS, Pss) in kB of the processes pids."""
    rss = pss = 0
    for p in pids:
        with open("/proc/%d/status" % p) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss += int(line.split()[1])
        with open("/proc/%d/smaps_rollup" % p) as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss += int(line.split()[1])
    return rss, pss


def fds(pids):
    return sum(len(os.listdir("/proc/%d/fd" % p)) for p in pids)


def measure_memory(name, wd, up, idle):
    """idle WebSockets in two halves, two mk-wsload processes: the growth
    over all of them, and over the second half alone (what the first
    connections cost once, the heap's own growth, left out)."""
    half = idle // 2
    srv = start(name, wd, "memory", up)
    loads = []
    try:
        echo_once(srv.port, 10)  # the route works; the first connection's allocations
        time.sleep(0.3)
        rss0, pss0 = mem_kb(srv.tree())
        f0 = fds(srv.tree())
        t0 = time.monotonic()
        loads.append(Load(srv.port, half, ["-r", str(half)]))
        time.sleep(1.0)
        rss1, pss1 = mem_kb(srv.tree())
        loads.append(Load(srv.port, idle - half, ["-r", str(idle - half)]))
        opened = time.monotonic() - t0 - 1.0
        time.sleep(1.0)
        rss2, pss2 = mem_kb(srv.tree())
        f2 = fds(srv.tree())
        for load in loads:  # one echo on each WebSocket, which stays open
            load.go()
        time.sleep(1.0)
        rss3, pss3 = mem_kb(srv.tree())
    finally:
        for load in loads:
            load.close()
        srv.stop()
    return {"idle": idle, "rss_kb_before": rss0, "rss_kb_half": rss1, "rss_kb_after": rss2,
            "pss_kb_before": pss0, "pss_kb_half": pss1, "pss_kb_after": pss2,
            "rss_kib_per_ws": (rss2 - rss0) / idle, "pss_kib_per_ws": (pss2 - pss0) / idle,
            "rss_kib_per_ws_second_half": (rss2 - rss1) / (idle - half),
            "pss_kib_per_ws_second_half": (pss2 - pss1) / (idle - half),
            "rss_kb_after_echo": rss3, "pss_kb_after_echo": pss3,
            "rss_kib_per_ws_after_echo": (rss3 - rss0) / idle,
            "pss_kib_per_ws_after_echo": (pss3 - pss0) / idle,
            "fds_per_ws": (f2 - f0) / idle, "open_seconds": round(opened, 2)}


def measure_echo(name, wd, up, conns, duration):
    """name None: the upstream alone."""
    srv = start(name, wd, "echo", up) if name else None
    port = srv.port if srv else up.port
    try:
        echo_once(port, 2000, conns)  # unmeasured warm-up
        warm = Load(port, conns, ["-d", "1"])
        warm.go()
        warm.close()
        load = Load(port, conns, ["-d", str(duration)])
        s0 = run_ns(srv.tree()) if srv else 0
        u0, c0 = up.cpu_ns(), load.cpu()
        r = load.go()
        s1 = run_ns(srv.tree()) if srv else 0
        u1, c1 = up.cpu_ns(), load.cpu()
        load.close()
    finally:
        if srv:
            srv.stop()
    n = r["round_trips"]
    return {"conns": conns, "round_trips": n, "seconds": r["seconds"],
            "rps": n / r["seconds"], "errors": r["errors"],
            "proxy_us_per_rt": (s1 - s0) / 1e3 / n if srv else None,
            "upstream_us_per_rt": (u1 - u0) / 1e3 / n,
            "client_us_per_rt": (c1 - c0) * 1e6 / n,
            "command": " ".join(load.cmd).replace(str(port), "PORT").replace(
                os.path.dirname(WSLOAD) + "/", "build/bin/")}


def measure_strace(name, wd, up, n, warmup):
    srv = start(name, wd, "strace", up)
    sf = os.path.join(wd, "strace-%s.txt" % name)
    try:
        echo_once(srv.port, warmup)
        load = Load(srv.port, 1, ["-r", str(n)])
        st = runs.strace_start(srv.tree(), sf)
        r = load.go()
        calls, errs, by = runs.strace_end(st, sf, name, r["round_trips"])
        load.close()
    finally:
        srv.stop()
    return {"n": r["round_trips"], "syscalls_per_message": calls,
            "syscall_errors_per_message": errs, "by_syscall": by}


def measure_callgrind(name, wd, up, n, warmup):
    cgdir = os.path.join(wd, "cg-%s" % name)
    srv = start(name, wd, "callgrind", up, wrapper=runs.callgrind_wrapper(cgdir),
                ready_timeout=120)
    try:
        echo_once(srv.port, warmup)
        time.sleep(1.0)
        runs.callgrind(srv.pid, "-i", "on")
        echo_once(srv.port, n)
        time.sleep(1.0)  # the tunnel's close reaches the proxy before the dump
        runs.callgrind(srv.pid, "--dump=n1")
        echo_once(srv.port, 2 * n)
        time.sleep(1.0)
        runs.callgrind(srv.pid, "--dump=n2")
        runs.callgrind(srv.pid, "-i", "off")
    finally:
        srv.stop(timeout=30)
    n1, n2 = runs.callgrind_ir(cgdir, name)
    return {"n": n, "ir_n": n1, "ir_2n": n2, "ir_per_message": (n2 - n1) / n,
            "ir_per_message_run_n": n1 / n}


# ------------------------------------------------------------------ report

def cell(v, f):
    return f % v if v is not None else "-"


def report(doc):
    ver = doc["versions"]
    lines = ["# Proxied WebSocket (bench/proxy_ws.py)", ""] + runs.header(doc, seconds=True) + [
             "- versions: " + ", ".join("%s %s" % (k, ver[k]) for k in sorted(ver)
                                        if k not in ("monkey_commit", "h2o", "lighttpd", "wrk",
                                                     "h2load")),
             "- upstream: mk-wsfloor (bench/ws_floor.c, one thread, echoes every frame); "
             "client: mk-wsload (bench/wsload.c), 32-byte text frames; one worker per proxy; "
             "monkey `Pass / 127.0.0.1:UP`, nginx `proxy_http_version 1.1` + `Upgrade "
             "$http_upgrade` + `Connection \"upgrade\"`, HAProxy `mode http`", ""]
    res = doc["results"]
    lines += ["## Memory per idle proxied WebSocket", "",
              "%d WebSockets opened through the proxy (every 101 received, no message), "
              "in two halves by two clients, each held 1 s: the growth of the proxy's VmRSS "
              "and Pss / %d; the same over the second half alone (the heap's first growth "
              "left out); the proxy's open descriptors per WebSocket (the client's and the "
              "upstream's sockets); then one echo on each, the WebSockets still open, and "
              "the growth / %d again. Bar: monkey at most nginx's." % (
                  doc["idle"], doc["idle"], doc["idle"]),
              "", "| proxy | RSS KiB / WebSocket | PSS KiB / WebSocket | RSS KiB, second half "
              "| PSS KiB, second half | RSS before → after (KiB) | descriptors / WebSocket "
              "| opening s | RSS KiB after one echo each | PSS KiB after one echo each |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in res.items():
        m = r.get("memory")
        if not m or "error" in m:
            lines.append("| %s | failed: %s | | | | | | | | |" % (
                name, runs.one_line((m or {}).get("error"))))
            continue
        lines.append("| %s | %.2f | %.2f | %.2f | %.2f | %d → %d | %.2f | %.1f | %.2f | %.2f |"
                     % (name, m["rss_kib_per_ws"], m["pss_kib_per_ws"],
                        m["rss_kib_per_ws_second_half"], m["pss_kib_per_ws_second_half"],
                        m["rss_kb_before"], m["rss_kb_after"], m["fds_per_ws"],
                        m["open_seconds"], m["rss_kib_per_ws_after_echo"],
                        m["pss_kib_per_ws_after_echo"]))
    mm, mn = res.get("monkey", {}).get("memory", {}), res.get("nginx", {}).get("memory", {})
    if "rss_kib_per_ws" in mm and "rss_kib_per_ws" in mn and mn["rss_kib_per_ws"] > 0:
        lines += ["", "monkey / nginx: RSS %.2fx, PSS %.2fx (bar: <= 1x): %s" % (
            mm["rss_kib_per_ws"] / mn["rss_kib_per_ws"],
            mm["pss_kib_per_ws"] / mn["pss_kib_per_ws"] if mn["pss_kib_per_ws"] else 0,
            "met" if mm["rss_kib_per_ws"] <= mn["rss_kib_per_ws"] else "not met")]
    lines += ["", "## Deterministic: per echoed message of 32 bytes", "",
              "One connection, one message at a time. System calls: `strace -c -f` on the "
              "proxy over N = %d echoes after %d of warm-up, the handshake untraced. Ir: "
              "callgrind, (Ir(2N) - Ir(N)) / N of two whole client runs (handshake, echoes, "
              "close)." % (doc["n"], doc["warmup"]), "",
              "| proxy | system calls / message | failed | Ir / message | Ir(N) / N | "
              "system calls by name / message |", "|---|---|---|---|---|---|"]
    for name, r in res.items():
        s, c = r.get("strace", {}), r.get("callgrind", {})
        if "error" in s or "error" in c:
            lines.append("| %s | failed: %s | | | | |" % (
                name, runs.one_line(s.get("error") or c.get("error"))))
            if "error" in s:
                continue
        top = ", ".join("%s %.2f" % kv for kv in s.get("by_syscall", {}).items() if kv[1] >= 0.01)
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            name, cell(s.get("syscalls_per_message"), "%.2f"),
            cell(s.get("syscall_errors_per_message"), "%.2f"),
            "{:,.0f}".format(c["ir_per_message"]) if "ir_per_message" in c else "-",
            "{:,.0f}".format(c["ir_per_message_run_n"]) if "ir_per_message_run_n" in c else "-",
            top))
    cmd = next((r["echo"]["command"] for r in res.values() if "command" in r.get("echo", {})),
               "")
    lines += ["", "## Echo round trips: one run of %d s (noisy: a shared 2-CPU machine)"
              % doc["duration"], "",
              "`%s` after 1 s of the same load unmeasured; CPU per round trip in µs: the "
              "proxy's threads (schedstat), the upstream's, the client's (its /proc stat, "
              "10 ms ticks). direct: the client on the upstream, no proxy." % cmd, "",
              "| proxy | round trips/s | proxy µs / round trip | upstream µs | client µs |",
              "|---|---|---|---|---|"]
    rows = list(res.items()) + [("direct", {"echo": doc.get("direct", {})})]
    for name, r in rows:
        e = r.get("echo", {})
        if "rps" not in e:
            lines.append("| %s | failed: %s | | | |" % (name, runs.one_line(e.get("error"))))
            continue
        lines.append("| %s | %.0f | %s | %.1f | %.1f |" % (
            name, e["rps"], cell(e["proxy_us_per_rt"], "%.1f"), e["upstream_us_per_rt"],
            e["client_us_per_rt"]))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--idle", type=int, default=2000, help="idle WebSockets of the memory")
    ap.add_argument("--n", type=int, default=2000, help="echoes of the deterministic runs")
    ap.add_argument("--warmup", type=int, default=200, help="echoes before them, not counted")
    ap.add_argument("--conns", type=int, default=64, help="connections of the echo run")
    ap.add_argument("--duration", type=int, default=5, help="seconds of the echo run")
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    a = ap.parse_args()
    servers = [s for s in a.servers.split(",") if s]
    unknown = [s for s in servers if s not in CONFS]
    if unknown:
        sys.exit("proxy_ws.py: unknown servers %s" % unknown)
    missing = [t for t in ["strace", "valgrind", "callgrind_control"] +
               [s for s in servers if s != "monkey"] if not shutil.which(t)]
    missing += [f for f in (proxy.MONKEY, proxy.PROXY_SO) if not os.path.exists(f)]
    missing += [f for f in (WSLOAD, FLOOR) if not os.access(f, os.X_OK)]
    if missing:
        sys.exit("proxy_ws.py: missing %s: run tools/deps.sh bench, and build Monkey with "
                 "the tests" % missing)
    bench.raise_nofile()
    wd = tempfile.mkdtemp(prefix="mk-pxws-bench-")
    os.chmod(wd, 0o755)
    t_start = time.time()
    doc = runs.record("proxy_ws.py", versions=proxy.versions(), idle=a.idle, n=a.n,
                      warmup=a.warmup, conns=a.conns, duration=a.duration, results={})
    up = procs.Upstream(FLOOR, wd)
    steps = [("memory", lambda name: measure_memory(name, wd, up, a.idle)),
             ("strace", lambda name: measure_strace(name, wd, up, a.n, a.warmup)),
             ("echo", lambda name: measure_echo(name, wd, up, a.conns, a.duration))]
    if not a.no_callgrind:
        steps.append(("callgrind", lambda name: measure_callgrind(name, wd, up, a.n, a.warmup)))
    try:
        for name in servers:
            r = doc["results"].setdefault(name, {})
            for what, fn in steps:
                try:  # one proxy or one measure failing does not stop the others
                    r[what] = fn(name)
                except Exception as e:
                    r[what] = {"error": str(e)[:600]}
                log("%s %s: %s" % (name, what, {k: v for k, v in r[what].items()
                                                 if k != "by_syscall"}))
        try:
            doc["direct"] = measure_echo(None, wd, up, a.conns, a.duration)
        except Exception as e:
            doc["direct"] = {"error": str(e)[:600]}
        log("direct echo: %s" % doc["direct"])
    finally:
        up.stop()
        if not a.keep:
            shutil.rmtree(wd, ignore_errors=True)
        else:
            log("kept " + wd)
    runs.write(a.out, "proxy_ws", doc, report, t_start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
