#!/usr/bin/env python3
"""Monkey's gateways against nginx and lighttpd: FastCGI to one php-fpm pool,
and CGI against lighttpd's mod_cgi. A module of its own, beside bench.py.

    python3 bench/gateway.py [--duration 10] [--connections 32] [--out FILE]

Scenarios (each server in turn, the same php-fpm pool for all, started here):
  php_hello_ka     GET /hello.php (13 bytes), keep-alive
  php_hello_close  the same, a new connection per request
  php_100k_ka      GET /page100k.php (100 KB made with echo), keep-alive
  php_100k_close   the same, a new connection per request
  cgi_hello_ka     GET /cgi-bin/hello.sh (a shell script), keep-alive:
                   Monkey's cgi plugin against lighttpd's mod_cgi
  cgi_100k_ka      GET /cgi-bin/page100k.sh (100 KB from head -c), keep-alive

Servers: monkey (build/bin/monkey with the fastcgi and cgi plugins, Workers
2), nginx (2 worker processes, fastcgi_keep_conn with an upstream keepalive
pool), lighttpd (one process, mod_fastcgi with its own connection handling,
mod_cgi). Load: wrk, 2 threads. For each run: requests/s and the CPU time of
the server's processes only (utime + stime from /proc of the server and its
children, never php-fpm's), per request in microseconds. The bar of the
issue: Monkey's requests/s at least the best peer's, its CPU per request at
most the best peer's.

Needs wrk, nginx, lighttpd (tools/deps.sh bench) and php-fpm (tools/deps.sh
test). As root, the servers and the pool run as root (this is a loopback
benchmark in a scratch folder).
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("MK_BUILD", os.path.join(ROOT, "build"))
MONKEY = os.path.join(BUILD, "bin", "monkey")
PLUGINS = os.path.join(BUILD, "plugins")
PHP_FPM = shutil.which("php-fpm8.2") or "/usr/sbin/php-fpm8.2"

SCENARIOS = {
    "php_hello_ka": ("/hello.php", True),
    "php_hello_close": ("/hello.php", False),
    "php_100k_ka": ("/page100k.php", True),
    "php_100k_close": ("/page100k.php", False),
    "cgi_hello_ka": ("/cgi-bin/hello.sh", True),
    "cgi_100k_ka": ("/cgi-bin/page100k.sh", True),
}
CGI_SERVERS = ["monkey", "lighttpd"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def cpu_ticks(pid):
    """utime + stime of pid and every descendant, in clock ticks."""
    total, todo = 0, [pid]
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                children.setdefault(int(fields[1]), []).append((int(d), fields))
            except OSError:
                pass
    seen = set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
        todo += [c for c, _ in children.get(p, [])]
    return total


def make_site(base):
    root = os.path.join(base, "htdocs")
    os.makedirs(os.path.join(root, "cgi-bin"))
    with open(os.path.join(root, "hello.php"), "w") as f:
        f.write('<?php echo "Hello World!\\n";')
    with open(os.path.join(root, "page100k.php"), "w") as f:
        f.write('<?php for ($i = 0; $i < 1024; $i++) { echo str_repeat("x", 99), "\\n"; }')
    cgi = os.path.join(root, "cgi-bin", "hello.sh")
    with open(cgi, "w") as f:
        f.write('#!/bin/sh\nprintf "Content-Type: text/plain\\r\\n\\r\\nHello World!\\n"\n')
    os.chmod(cgi, 0o755)
    big = os.path.join(root, "cgi-bin", "page100k.sh")
    with open(big, "w") as f:
        f.write('#!/bin/sh\nprintf "Content-Type: text/plain\\r\\n\\r\\n"\n'
                'head -c 102400 /dev/zero | tr "\\0" x\n')
    os.chmod(big, 0o755)
    return root


def start_fpm(base, children):
    sock = os.path.join(base, "fpm.sock")
    conf = os.path.join(base, "fpm.conf")
    with open(conf, "w") as f:
        f.write(f"[global]\nerror_log = {base}/fpm.log\ndaemonize = no\n[pool]\n"
                f"listen = {sock}\nlisten.mode = 0666\npm = static\n"
                f"pm.max_children = {children}\n")
    args = [PHP_FPM, "-F", "-y", conf, "-p", base] + (["-R"] if os.geteuid() == 0 else [])
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 10
    while not os.path.exists(sock) and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc, sock


def conf_monkey(base, root, port, sock, pool):
    conf = os.path.join(base, "monkey")
    os.makedirs(os.path.join(conf, "sites"))
    os.makedirs(os.path.join(conf, "plugins"))
    with open(os.path.join(conf, "monkey.conf"), "w") as f:
        f.write(f"[SERVER]\n    Listen 127.0.0.1:{port}\n    Workers 2\n"
                "    KeepAliveTimeout 60\n    MaxKeepAliveRequests 100000\n"
                "    MaxConnections 20000\n    IndexFiles index.php index.html\n")
    with open(os.path.join(conf, "sites", "default"), "w") as f:
        f.write(f"[HOST]\n    ServerName localhost\n    DocumentRoot {root}\n"
                f"[FASTCGI]\n    Backend unix:{sock}\n    Match \\.php$\n"
                f"[CGI]\n    ScriptAlias /cgi-bin/ {root}/cgi-bin\n")
    with open(os.path.join(conf, "plugins", "fastcgi.conf"), "w") as f:
        f.write(f"[FASTCGI]\n    MaxConnections {max(1, pool // 2)}\n")
    with open(os.path.join(conf, "plugins", "cgi.conf"), "w") as f:
        f.write("[CGI]\n    MaxScripts 256\n")
    with open(os.path.join(conf, "plugins.load"), "w") as f:
        f.write(f"[PLUGINS]\n    Load {PLUGINS}/monkey-fastcgi.so\n"
                f"    Load {PLUGINS}/monkey-cgi.so\n")
    return [MONKEY, "-c", conf]


def conf_nginx(base, root, port, sock, pool):
    path = os.path.join(base, "nginx.conf")
    user = "user root;\n" if os.geteuid() == 0 else ""
    with open(path, "w") as f:
        f.write(f"""{user}worker_processes 2;
daemon off;
pid {base}/nginx.pid;
error_log {base}/nginx.err;
events {{ worker_connections 20000; }}
http {{
    access_log off;
    keepalive_timeout 60;
    keepalive_requests 100000;
    client_body_temp_path {base}/nginx-body;
    fastcgi_temp_path {base}/nginx-fastcgi;
    upstream php {{ server unix:{sock}; keepalive {max(1, pool // 2)}; }}
    server {{
        listen 127.0.0.1:{port};
        root {root};
        index index.php;
        location ~ \\.php$ {{
            fastcgi_pass php;
            fastcgi_keep_conn on;
            fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name;
            fastcgi_param SCRIPT_NAME $fastcgi_script_name;
            fastcgi_param REQUEST_METHOD $request_method;
            fastcgi_param QUERY_STRING $query_string;
            fastcgi_param REQUEST_URI $request_uri;
            fastcgi_param DOCUMENT_ROOT $document_root;
            fastcgi_param SERVER_PROTOCOL $server_protocol;
            fastcgi_param GATEWAY_INTERFACE CGI/1.1;
            fastcgi_param REMOTE_ADDR $remote_addr;
            fastcgi_param SERVER_NAME $server_name;
            fastcgi_param SERVER_PORT $server_port;
            fastcgi_param CONTENT_TYPE $content_type;
            fastcgi_param CONTENT_LENGTH $content_length;
        }}
    }}
}}
""")
    return ["nginx", "-c", path, "-p", base]


def conf_lighttpd(base, root, port, sock, pool):
    path = os.path.join(base, "lighttpd.conf")
    user = ""
    with open(path, "w") as f:
        f.write(f"""server.modules = ("mod_fastcgi", "mod_cgi", "mod_alias")
server.document-root = "{root}"
server.bind = "127.0.0.1"
server.port = {port}
server.max-keep-alive-requests = 100000
server.max-keep-alive-idle = 60
server.max-connections = 20000
server.errorlog = "{base}/lighttpd.err"
{user}index-file.names = ("index.php")
fastcgi.server = (".php" => (("socket" => "{sock}", "check-local" => "disable",
                               "max-procs" => 1)))
$HTTP["url"] =~ "^/cgi-bin/" {{ cgi.assign = (".sh" => "") }}
""")
    return ["lighttpd", "-D", "-f", path]


SERVERS = {"monkey": conf_monkey, "nginx": conf_nginx, "lighttpd": conf_lighttpd}


def wrk(port, path, keepalive, duration, connections):
    args = ["wrk", "-t2", f"-c{connections}", f"-d{duration}s", "--latency"]
    if not keepalive:
        args += ["-H", "Connection: close"]
    run = subprocess.run(args + [f"http://127.0.0.1:{port}{path}"], capture_output=True,
                         text=True, timeout=duration + 60)
    out = run.stdout + run.stderr + f"(exit status {run.returncode})"
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not m:
        raise RuntimeError(f"wrk {path}: no result:\n{out}")
    rps = float(m.group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock_err = re.search(r"Socket errors: (.*)", out)
    return rps, total, int(errors.group(1)) if errors else 0, sock_err.group(1) if sock_err else ""


def run_server(name, base, root, sock, pool, scenarios, args):
    port = free_port()
    os.makedirs(os.path.join(base, name), exist_ok=True)
    cmd = SERVERS[name](os.path.join(base, name), root, port, sock, pool)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    results = {}
    try:
        if not wait_port(port):
            raise RuntimeError(f"{name} did not start")
        hz = os.sysconf("SC_CLK_TCK")
        for sc in scenarios:
            path, keepalive = SCENARIOS[sc]
            if sc.startswith("cgi") and name not in CGI_SERVERS:
                continue
            wrk(port, path, keepalive, 1, args.connections)  # warm-up
            t0 = cpu_ticks(proc.pid)
            rps, total, errors, sock_err = wrk(port, path, keepalive, args.duration,
                                               args.connections)
            ticks = cpu_ticks(proc.pid) - t0
            us = ticks / hz * 1e6 / max(total, 1)
            results[sc] = {"rps": rps, "requests": total, "non_2xx": errors,
                           "socket_errors": sock_err, "cpu_us_per_request": round(us, 1)}
            print(f"{sc:16} {name:9} {rps:10.0f} req/s  {us:7.1f} us CPU/request"
                  f"{'  non-2xx ' + str(errors) if errors else ''}", flush=True)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return results


def callgrind_total(path):
    """The total instructions (Ir) of a callgrind output file."""
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    return 0


def h2load_h1(port, path, n):
    """n HTTP/1.1 requests on one kept-alive connection: how many succeeded."""
    run = subprocess.run(["h2load", "--h1", "-c1", "-n", str(n), f"http://127.0.0.1:{port}{path}"],
                         capture_output=True, text=True, timeout=900)
    m = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded", run.stdout)
    return int(m.group(1)) if m else 0


def instructions(name, base, root, sock, pool, path, n):
    """Instructions per request of the server's processes (never php-fpm's):
    the server under callgrind, a fresh start for n and for 2n keep-alive
    requests, (Ir(2n) - Ir(n)) / n, so that start and stop cancel out."""
    totals = []
    for k in (n, 2 * n):
        d = os.path.join(base, f"{name}-cg-{os.path.basename(path)}-{k}")
        os.makedirs(d)
        port = free_port()
        cmd = SERVERS[name](d, root, port, sock, pool)
        out = os.path.join(d, "callgrind.out")
        proc = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}.%p"]
                                + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            if not wait_port(port, 120):
                raise RuntimeError(f"{name} did not start under callgrind")
            done = h2load_h1(port, path, k)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if done != k:
            raise RuntimeError(f"{name} {path}: {done} of {k} requests succeeded")
        time.sleep(1)  # forked processes (nginx's workers) write their files last
        totals.append(sum(callgrind_total(os.path.join(d, f)) for f in os.listdir(d)
                          if f.startswith("callgrind.out.")))
    return (totals[1] - totals[0]) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=int, default=10, help="seconds per run (default 10)")
    ap.add_argument("--connections", type=int, default=32, help="wrk connections (default 32)")
    ap.add_argument("--pool", type=int, default=8, help="php-fpm children (default 8)")
    ap.add_argument("--servers", default="monkey,nginx,lighttpd")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--out", help="write the results as JSON to this file")
    ap.add_argument("--callgrind", type=int, metavar="N",
                    help="instead of wrk: instructions per request under callgrind, N and 2N "
                    "keep-alive requests (h2load --h1) per server and php keep-alive scenario")
    args = ap.parse_args()
    servers = [s for s in args.servers.split(",") if s]
    scenarios = [s for s in args.scenarios.split(",") if s]
    tools = ["valgrind", "h2load"] if args.callgrind else ["wrk"]
    missing = [t for t in tools + [s for s in servers if s != "monkey"] if not shutil.which(t)]
    if missing or not os.path.exists(PHP_FPM) or not os.path.exists(MONKEY):
        sys.exit(f"gateway.py: missing {missing or ''} {PHP_FPM} {MONKEY}: "
                 "run tools/deps.sh bench and tools/deps.sh test, and make")
    base = tempfile.mkdtemp(prefix="mk-gw-bench-")
    os.chmod(base, 0o755)
    root = make_site(base)
    fpm, sock = start_fpm(base, args.pool)
    results = {}
    try:
        for name in servers:
            if not args.callgrind:
                results[name] = run_server(name, base, root, sock, args.pool, scenarios, args)
                continue
            results[name] = {}
            for sc in scenarios:
                path, keepalive = SCENARIOS[sc]
                if not keepalive or sc.startswith("cgi"):
                    continue  # valgrind 3.19 lacks pidfd_open: the cgi plugin answers 500 under it
                ir = instructions(name, base, root, sock, args.pool, path, args.callgrind)
                results[name][sc] = {"instructions_per_request": round(ir)}
                print(f"{sc:16} {name:9} {ir:10.0f} instructions/request", flush=True)
    finally:
        os.killpg(fpm.pid, signal.SIGTERM)
        fpm.wait()
        shutil.rmtree(base, ignore_errors=True)
    doc = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "duration": args.duration,
           "connections": args.connections, "pool": args.pool, "cpus": os.cpu_count(),
           "results": results}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
