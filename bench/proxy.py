#!/usr/bin/env python3
"""The reverse proxy: Monkey's proxy plugin against nginx, HAProxy, h2o and
lighttpd in front of the same upstream. A module of its own, beside
bench.py, gateway.py and tls_cost.py.

    python3 bench/proxy.py [--servers monkey,nginx,haproxy,h2o,lighttpd]
                           [--n 2000] [--warmup 200] [--duration 5]
                           [--no-deterministic] [--no-callgrind] [--no-wall]
                           [--pool 32] [--out DIR] [--keep]

The upstream is mk-pxupstream (bench/upstream.c, built here with cc -O2):
one thread, epoll, HTTP/1.1 keep-alive, GET /13 (13 bytes) and GET /100k
(102400 bytes) from memory; it counts the connections it accepts
(GET /stats). Each proxy passes every path to it over HTTP/1.1 with a pool
of kept-alive connections where it has one:

  monkey    plugins/proxy, `Pass / 127.0.0.1:UP`, proxy.conf `KeepAlive 32`
            (--pool)
  nginx     proxy_pass to an `upstream { keepalive 32; }` (--pool),
            proxy_http_version 1.1, proxy_set_header Connection ""
  haproxy   mode http, http-reuse always
  h2o       proxy.reverse.url
  lighttpd  mod_proxy (no pool of its own: a connection per request)

Deterministic figures, one worker (thread, process) per proxy, one client
connection at a time (`h2load --h1 -c1`: a request, its answer, the next),
after --warmup requests on a connection of their own that are not counted:
  syscalls   `strace -c -f` attached to the proxy's process tree for N
             requests of /13, divided by N (the measured client
             connection's accept and close are in it: a few calls per N)
  Ir         user-space instructions under `valgrind --tool=callgrind
             --instr-atstart=no`: instrumentation switched on after the
             warm-up, one dump after N requests and one after 2N more on a
             new client connection, (Ir(2N) - Ir(N)) / N, so that what a run
             costs once (its client connection, the toggling) cancels out
  accepts    the upstream's accepted connections during the strace run,
             per 10,000 requests

Wall clock, two workers per proxy, a fresh start for each load, 1 s of the
same load unmeasured first: `wrk -t2 -c100 -dD` of /13 and of /100k, and
`h2load -t2 -c100 -m10 -D D` of /13 over h2c (prior knowledge) for the
proxies that speak HTTP/2 in cleartext. Requests/s and the CPU time of the
proxy's processes per request (schedstat of every thread), as ratios to
the best proxy; the CPU per request of the client (its rusage) and of the
upstream, and the upstream's accepts per 10,000 requests.

Writes DIR/proxy.md and DIR/proxy.json (default bench/results). Needs
nginx, lighttpd, h2o, haproxy, wrk, h2load, strace and valgrind
(tools/deps.sh bench) and a build of Monkey with the proxy plugin.
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (Server, parsers)
import procs  # noqa: E402
import runs  # noqa: E402  (the run's record, strace and callgrind)
from procs import free_port, run_ns  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("MK_BUILD", os.path.join(ROOT, "build"))
MONKEY = os.path.join(BUILD, "bin", "monkey")
PROXY_SO = os.path.join(BUILD, "plugins", "monkey-proxy.so")
SERVERS = ["monkey", "nginx", "haproxy", "h2o", "lighttpd"]
HELLO = b"Hello World!\n"
BIG = 102400
POOL = 32  # kept-alive upstream connections per worker, where it is a setting
WALL_LOADS = [("wrk_13", "/13", "wrk"), ("wrk_100k", "/100k", "wrk"),
              ("h2c_13", "/13", "h2load")]


# ----------------------------------------------------------- configurations

def conf_monkey(d, port, up, workers, h2=False):
    os.makedirs(os.path.join(d, "sites"), exist_ok=True)
    os.makedirs(os.path.join(d, "plugins"), exist_ok=True)
    os.makedirs(os.path.join(d, "htdocs"), exist_ok=True)
    bench.write(os.path.join(d, "monkey.conf"), f"""[SERVER]
    Listen 127.0.0.1:{port}{" h2c" if h2 else ""}
    Workers {workers}
    KeepAlive On
    KeepAliveTimeout 60
    MaxKeepAliveRequests 100000
    MaxConnections {min(20000, bench.nofile_limit() // 2 - 200)}
    Backlog 4096
    GracefulTimeout 1
    LogLevel warn
""")
    bench.write(os.path.join(d, "sites", "default"), f"""[HOST]
    ServerName 127.0.0.1 localhost
    DocumentRoot {d}/htdocs
[PROXY]
    Pass / 127.0.0.1:{up}
""")
    bench.write(os.path.join(d, "plugins", "proxy.conf"),
                f"[PROXY]\n    KeepAlive {POOL}\n    KeepAliveTimeout 60\n")
    bench.write(os.path.join(d, "plugins.load"), f"[PLUGINS]\n    Load {PROXY_SO}\n")
    return [MONKEY, "-c", d]


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
    keepalive_timeout 60s;
    keepalive_requests 100000;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    upstream up {{
        server 127.0.0.1:{up};
        keepalive {POOL};
        keepalive_requests 100000;
        keepalive_timeout 60s;
    }}
    server {{
        listen 127.0.0.1:{port}{" http2" if h2 else ""} backlog=4096;
        location / {{
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
}}
""")
    return ["nginx", "-p", d, "-c", conf, "-e", os.path.join(d, "nginx-error.log")]


def conf_haproxy(d, port, up, workers, h2=False):
    conf = os.path.join(d, "haproxy.cfg")
    # HAProxy wants two descriptors per connection and refuses to start if
    # the limit (20000 here, not raisable) cannot hold maxconn of them.
    maxconn = min(20000, bench.nofile_limit() // 2 - 100)
    bench.write(conf, f"""global
    nbthread {workers}
    maxconn {maxconn}
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s
    http-reuse always
frontend fe
    bind 127.0.0.1:{port}{" proto h2" if h2 else ""}
    default_backend be
backend be
    server s1 127.0.0.1:{up}
""")
    return ["haproxy", "-db", "-f", conf]


def conf_h2o(d, port, up, workers, h2=False):
    conf = os.path.join(d, "h2o.conf")
    user = "user: root\n" if os.geteuid() == 0 else ""
    bench.write(conf, f"""{user}listen:
  host: 127.0.0.1
  port: {port}
num-threads: {workers}
max-connections: 20000
http1-request-timeout: 60
http2-idle-timeout: 60
error-log: {d}/h2o-error.log
proxy.timeout.keepalive: 60000
hosts:
  default:
    paths:
      /:
        proxy.reverse.url: http://127.0.0.1:{up}/
""")
    return ["h2o", "-m", "worker", "-c", conf]


def conf_lighttpd(d, port, up, workers, h2=False):
    conf = os.path.join(d, "lighttpd.conf")
    os.makedirs(os.path.join(d, "htdocs"), exist_ok=True)
    worker_line = f"server.max-worker = {workers}\n" if workers > 1 else ""
    bench.write(conf, f"""server.modules = ("mod_proxy")
server.document-root = "{d}/htdocs"
server.bind = "127.0.0.1"
server.port = {port}
server.errorlog = "{d}/lighttpd-error.log"
{worker_line}server.max-keep-alive-requests = 100000
server.max-keep-alive-idle = 60
server.max-fds = {min(40000, bench.nofile_limit())}
server.max-connections = {min(20000, bench.nofile_limit() // 2)}
server.listen-backlog = 4096
proxy.server = ("" => (("host" => "127.0.0.1", "port" => {up})))
""")
    return ["lighttpd", "-D", "-f", conf]


CONFS = {"monkey": conf_monkey, "nginx": conf_nginx, "haproxy": conf_haproxy,
         "h2o": conf_h2o, "lighttpd": conf_lighttpd}
H2C = {"monkey", "nginx", "haproxy", "h2o", "lighttpd"}  # checked at each start


# ------------------------------------------------------------------ helpers

class Upstream(procs.Upstream):
    """mk-pxupstream, which counts what it accepts and answers."""

    def __init__(self, binary, wd):
        super().__init__(binary, wd)
        self.asked = 0

    def stats(self):
        """(accepts, requests) so far; the connections of these questions
        (this one included) are not counted."""
        self.asked += 1
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            s.sendall(b"GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                got = s.recv(4096)
                if not got:
                    break
                data += got
        doc = json.loads(data.split(b"\r\n\r\n", 1)[1])
        return doc["accepts"] - self.asked, doc["requests"]


def build_upstream(wd):
    out = os.path.join(wd, "mk-pxupstream")
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-Wall", "-Wextra", "-std=gnu11", "-o",
                    out, os.path.join(HERE, "upstream.c")], check=True)
    return out


def start(name, wd, tag, up, workers, h2=False, wrapper=None, ready_timeout=15.0):
    d = os.path.join(wd, "%s-%s" % (name, tag))
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o755)
    port = free_port()
    argv = CONFS[name](d, port, up.port, workers, h2)
    return bench.Server(name, (wrapper or []) + argv, port, d, "server.log",
                        ready_timeout=ready_timeout)


def check(srv):
    """/13 and /100k must come back whole with 200 through the proxy."""
    for path, size in (("/13", len(HELLO)), ("/100k", BIG)):
        status, body = bench.http_get(srv.port, path, timeout=60)
        if status != 200 or len(body) != size or (path == "/13" and body != HELLO):
            raise RuntimeError("%s: GET %s gave %d with %d bytes" % (srv.name, path, status,
                                                                   len(body)))


def h2load_h1(port, path, n):
    """n HTTP/1.1 requests, one after the other on one connection: how many
    were answered 2xx."""
    p = subprocess.run(["h2load", "--h1", "-c1", "-n", str(n),
                        "http://127.0.0.1:%d%s" % (port, path)],
                       capture_output=True, text=True, timeout=1800)
    r = bench.parse_h2load(p.stdout)
    if r["requests"] != n or r["errors"]:
        raise RuntimeError("h2load --h1 -n %d %s: %s" % (n, path, p.stdout[-800:]))
    return r["requests"]


def timed(argv):
    """Run a load tool (it stops by itself: -d, -D); (its output, its user +
    system CPU seconds, its descendants' included)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.read()
    proc.stdout.close()
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return out.decode(errors="replace"), ru.ru_utime + ru.ru_stime


def log(msg):
    bench.log("proxy: " + msg)


# ------------------------------------------------------------ deterministic

def measure_strace(name, wd, up, n, warmup):
    srv = start(name, wd, "strace", up, 1)
    try:
        check(srv)
        h2load_h1(srv.port, "/13", warmup)
        a0, r0 = up.stats()
        sf = os.path.join(wd, "strace-%s.txt" % name)
        st = runs.strace_start(srv.tree(), sf)
        h2load_h1(srv.port, "/13", n)
        calls, errs, by = runs.strace_end(st, sf, name, n)
        a1, r1 = up.stats()
    finally:
        srv.stop()
    if r1 - r0 != n:
        raise RuntimeError("%s: the upstream answered %d requests of %d" % (name, r1 - r0, n))
    return {"n": n, "syscalls_per_request": calls, "syscall_errors_per_request": errs,
            "by_syscall": by, "upstream_accepts": a1 - a0,
            "upstream_accepts_per_10k": (a1 - a0) * 1e4 / n}


def measure_callgrind(name, wd, up, n, warmup):
    cgdir = os.path.join(wd, "cg-%s" % name)
    srv = start(name, wd, "callgrind", up, 1, wrapper=runs.callgrind_wrapper(cgdir),
                ready_timeout=120)
    try:
        check(srv)
        h2load_h1(srv.port, "/13", warmup)
        runs.callgrind(srv.pid, "-i", "on")
        h2load_h1(srv.port, "/13", n)
        runs.callgrind(srv.pid, "--dump=n1")
        h2load_h1(srv.port, "/13", 2 * n)
        runs.callgrind(srv.pid, "--dump=n2")
        runs.callgrind(srv.pid, "-i", "off")
    finally:
        srv.stop(timeout=30)
    n1, n2 = runs.callgrind_ir(cgdir, name)
    return {"n": n, "ir_n": n1, "ir_2n": n2, "ir_per_request": (n2 - n1) / n,
            "ir_per_request_run_n": n1 / n}


# --------------------------------------------------------------- wall clock

def wall_one(name, wd, up, load, path, tool, duration):
    h2 = tool == "h2load"
    srv = start(name, wd, "wall-" + load, up, 2, h2=h2)
    url = "http://127.0.0.1:%d%s" % (srv.port, path)
    def argv(seconds):
        if h2:
            return ["h2load", "-t2", "-c100", "-m10", "-D", str(seconds), url]
        return ["wrk", "-t2", "-c100", "-d%ds" % seconds, "--timeout", "10s", url]

    try:
        if h2:
            bench.check_h2(srv, url, None)
        else:
            check(srv)
        timed(argv(1))  # warm-up: the pools fill, nothing is counted
        a0, r0 = up.stats()
        s0, u0 = run_ns(srv.tree()), up.cpu_ns()
        out, client_s = timed(argv(duration))
        s1, u1 = run_ns(srv.tree()), up.cpu_ns()
        a1, r1 = up.stats()
    finally:
        srv.stop()
    r = bench.parse_h2load(out) if h2 else bench.parse_wrk(out)
    n = r.get("requests") or 0
    if not n or not r.get("rps"):
        raise RuntimeError("%s %s: no result:\n%s" % (name, load, out[-1500:]))
    return {"rps": r["rps"], "requests": n, "errors": r.get("errors"),
            "server_us_per_request": (s1 - s0) / 1e3 / n,
            "upstream_us_per_request": (u1 - u0) / 1e3 / n,
            "client_us_per_request": client_s * 1e6 / n,
            "upstream_requests": r1 - r0,
            "upstream_accepts_per_10k": (a1 - a0) * 1e4 / max(r1 - r0, 1),
            "command": " ".join(argv(duration)).replace(str(srv.port), "PORT")}


# ------------------------------------------------------------------ report

one_line = runs.one_line


def ratio(v, best):
    return "%.2fx" % (v / best) if v is not None and best else "-"


def versions():
    v = bench.versions()
    for name, argv, rx in (("haproxy", ["haproxy", "-v"], r"version (\S+)"),
                           ("h2load", ["h2load", "--version"], r"nghttp2/(\S+)"),
                           ("strace", ["strace", "-V"], r"version (\S+)")):
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            m = re.search(rx, p.stdout + p.stderr)
            v[name] = m.group(1) if m else "?"
        except OSError:
            v[name] = "missing"
    v.pop("node", None)
    v.pop("ab", None)
    v.pop("openssl", None)
    return v


def report(doc):
    det, wall = doc["deterministic"], doc["wall"]
    ver = doc["versions"]
    lines = ["# The reverse proxy (bench/proxy.py)", ""] + runs.header(doc) + [
             "- versions: " + ", ".join("%s %s" % (k, ver[k]) for k in sorted(ver)
                                        if k != "monkey_commit"),
             "- upstream: mk-pxupstream (bench/upstream.c, cc -O2, one thread); "
             "pool of kept-alive upstream connections: %d per worker for monkey "
             "(`KeepAlive`) and nginx (`keepalive`), HAProxy's `http-reuse always` and "
             "h2o's own (neither has a cap), none in lighttpd's mod_proxy (a connection "
             "per request)" % doc["pool"], ""]
    if det:
        n, w = doc["n"], doc["warmup"]
        lines += ["## Deterministic: per proxied keep-alive request of 13 bytes", "",
                  "One worker per proxy; `h2load --h1 -c1` (one request at a time on one "
                  "connection); %d requests of warm-up on a connection of their own, not "
                  "counted. System calls: `strace -c -f` on the proxy's processes over N = %d "
                  "requests, / N. Ir: user-space instructions under callgrind, "
                  "(Ir(2N) - Ir(N)) / N from two dumps of one run (instrumentation on after "
                  "the warm-up), so that a run's own fixed cost cancels out. Upstream "
                  "connections: the upstream's accepts during the strace run, per 10,000 "
                  "requests. Ratios against the lowest." % (w, n), ""]
        lines += ["| proxy | system calls / request | ratio | Ir / request | ratio | upstream "
                  "connections / 10k requests | top system calls / request |",
                  "|---|---|---|---|---|---|---|"]
        best_sc = min((r["syscalls_per_request"] for r in det.values()
                       if "syscalls_per_request" in r), default=None)
        best_ir = min((r["ir_per_request"] for r in det.values() if "ir_per_request" in r),
                      default=None)
        for name, r in det.items():
            if "error" in r and len(r) == 1:
                lines.append("| %s | failed: %s | | | | | |" % (name, one_line(r["error"])))
                continue
            top = ", ".join("%s %.2f" % kv for kv in list(r.get("by_syscall", {}).items())[:6])
            sc, ir = r.get("syscalls_per_request"), r.get("ir_per_request")
            lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                name, "%.2f" % sc if sc is not None else "-", ratio(sc, best_sc),
                "{:,.0f}".format(ir) if ir is not None else "-", ratio(ir, best_ir),
                "%.0f" % r["upstream_accepts_per_10k"] if "upstream_accepts_per_10k" in r
                else "-", top))
        errs = [(k, r["error"]) for k, r in det.items() if "error" in r and len(r) > 1]
        for k, e in errs:
            lines.append("")
            lines.append("- %s: %s" % (k, one_line(e)))
        lines.append("")
    if wall:
        lines += ["## Wall clock: one run of %d s per load (noisy: a shared 2-CPU machine)"
                  % doc["duration"], "",
                  "Two workers per proxy, a fresh start per load and 1 s of the same load "
                  "first, not counted. Proxy CPU: every thread of the proxy's processes "
                  "(schedstat); client: the load tool's rusage; upstream: mk-pxupstream's "
                  "schedstat; all per request, in µs. Ratios: requests/s to the highest, "
                  "proxy CPU to the lowest. Upstream connections per 10,000 of the "
                  "requests it answered.", ""]
        for load, path, tool in WALL_LOADS:
            rows = [(name, r[load]) for name, r in wall.items() if load in r]
            if not rows:
                continue
            cmd = next((x["command"] for _, x in rows if "command" in x), "")
            lines += ["### %s: `%s`" % (load, cmd), "",
                      "| proxy | requests/s | ratio | proxy µs CPU / request | ratio | "
                      "client µs / request | upstream µs / request | upstream connections / "
                      "10k | errors |", "|---|---|---|---|---|---|---|---|---|"]
            ok = [x for _, x in rows if "rps" in x]
            best_rps = max((x["rps"] for x in ok), default=None)
            best_cpu = min((x["server_us_per_request"] for x in ok), default=None)
            for name, x in rows:
                if "rps" not in x:
                    lines.append("| %s | failed: %s | | | | | | | |" % (
                        name, one_line(x.get("error"))))
                    continue
                lines.append("| %s | %.0f | %s | %.1f | %s | %.1f | %.1f | %.0f | %s |" % (
                    name, x["rps"], ratio(x["rps"], best_rps), x["server_us_per_request"],
                    ratio(x["server_us_per_request"], best_cpu), x["client_us_per_request"],
                    x["upstream_us_per_request"], x["upstream_accepts_per_10k"], x["errors"]))
            skipped = [name for name in wall if load not in wall[name]]
            if skipped:
                lines.append("")
                lines.append("Not run: " + ", ".join(skipped))
            lines.append("")
    return "\n".join(lines) + "\n"


def main():
    global POOL
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--n", type=int, default=2000, help="requests of the deterministic runs")
    ap.add_argument("--warmup", type=int, default=200, help="requests before them, not counted")
    ap.add_argument("--duration", type=int, default=5, help="seconds of each wall-clock load")
    ap.add_argument("--no-deterministic", action="store_true")
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--no-wall", action="store_true")
    ap.add_argument("--pool", type=int, default=POOL,
                    help="kept-alive upstream connections per worker of monkey and nginx "
                    "(default %d)" % POOL)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    a = ap.parse_args()
    POOL = a.pool
    servers = [s for s in a.servers.split(",") if s]
    unknown = [s for s in servers if s not in CONFS]
    if unknown:
        sys.exit("proxy.py: unknown servers %s" % unknown)
    tools = ["wrk", "h2load", "strace", "valgrind", "callgrind_control"]
    missing = [t for t in tools + [s for s in servers if s != "monkey"] if not shutil.which(t)]
    if missing or not os.path.exists(MONKEY) or not os.path.exists(PROXY_SO):
        sys.exit("proxy.py: missing %s %s %s: run tools/deps.sh bench, and build Monkey"
                 % (missing, MONKEY, PROXY_SO))
    bench.raise_nofile()
    wd = tempfile.mkdtemp(prefix="mk-px-bench-")
    os.chmod(wd, 0o755)
    t_start = time.time()
    doc = runs.record("proxy.py", versions=versions(), n=a.n, warmup=a.warmup,
                      duration=a.duration, pool=POOL, deterministic={}, wall={})
    up = Upstream(build_upstream(wd), wd)
    try:
        if not a.no_deterministic:
            for name in servers:
                r = doc["deterministic"].setdefault(name, {})
                try:
                    r.update(measure_strace(name, wd, up, a.n, a.warmup))
                    if not a.no_callgrind:
                        r.update(measure_callgrind(name, wd, up, a.n, a.warmup))
                except Exception as e:  # one proxy failing does not stop the others
                    r["error"] = str(e)[:600]
                log("%s: %s" % (name, {k: v for k, v in r.items() if k != "by_syscall"}))
        if not a.no_wall:
            for name in servers:
                w = doc["wall"].setdefault(name, {})
                for load, path, tool in WALL_LOADS:
                    if tool == "h2load" and name not in H2C:
                        continue
                    try:
                        w[load] = wall_one(name, wd, up, load, path, tool, a.duration)
                    except Exception as e:
                        w[load] = {"error": str(e)[:600]}
                    log("%s %s: %s" % (name, load, w[load]))
    finally:
        up.stop()
        if not a.keep:
            shutil.rmtree(wd, ignore_errors=True)
        else:
            log("kept " + wd)
    runs.write(a.out, "proxy", doc, report, t_start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
