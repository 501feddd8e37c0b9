#!/usr/bin/env python3
"""The cost of a scrape of the control plugin's MetricsPath on a server with
many sites (docs/observability.md): Monkey with N sites (default 100), U
upstreams of the proxy plugin (default 10: groups of one server each,
passed from the default site, all answered by one small upstream process
this script starts on U ports and stops by its PID) and 2 workers, each
site and upstream given a few requests so that its series exist, then K
scrapes (default 200) over one keep-alive connection; prints the size of a
scrape (bytes, lines, series) and the time per scrape (median and 90th
percentile, wall clock of the client, so it moves with the machine's load).

    python3 bench/metrics_scrape.py [--build build] [--sites 100] [--upstreams 10] [--scrapes 200]

Python 3 standard library only; the server is the build's bin/monkey with
its plugins/monkey-control.so (and monkey-proxy.so for the upstreams).
"""

import argparse
import http.client
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import procs  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# The upstreams: one process answering 200 "ok" with a Content-Length on each port.
UPSTREAM = """
import http.server, socketserver, sys, threading
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\\n")
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
servers = [S(("127.0.0.1", int(p)), H) for p in sys.argv[1:]]
for s in servers[1:]:
    threading.Thread(target=s.serve_forever, daemon=True).start()
servers[0].serve_forever()
"""


def write_conf(wd, build, port, sites, upstreams=()):
    conf = os.path.join(wd, "conf")
    os.makedirs(os.path.join(conf, "sites"))
    os.makedirs(os.path.join(conf, "plugins"))
    docroot = os.path.join(wd, "htdocs")
    os.makedirs(docroot)
    with open(os.path.join(docroot, "hello.txt"), "w") as f:
        f.write("Hello World!\n")
    with open(os.path.join(conf, "monkey.conf"), "w") as f:
        f.write(f"[SERVER]\n    Listen 127.0.0.1:{port}\n    Workers 2\n")
    with open(os.path.join(conf, "plugins.load"), "w") as f:
        f.write(f"[PLUGINS]\n    Load {os.path.join(build, 'plugins', 'monkey-control.so')}\n")
        if upstreams:
            f.write(f"    Load {os.path.join(build, 'plugins', 'monkey-proxy.so')}\n")
    with open(os.path.join(conf, "plugins", "proxy.conf"), "w") as f:
        f.write("[PROXY]\n" + "".join(f"    Upstream u{i}\n    Server 127.0.0.1:{p}\n"
                                       for i, p in enumerate(upstreams)))
    with open(os.path.join(conf, "plugins", "control.conf"), "w") as f:
        f.write("[CONTROL]\n    Socket ctl.sock\n    MetricsPath /metrics\n")
    with open(os.path.join(conf, "sites", "default"), "w") as f:
        f.write(f"[HOST]\n    ServerName localhost\n    DocumentRoot {docroot}\n")
        if upstreams:
            f.write("[PROXY]\n" + "".join(f"    Pass /u{i} u{i}\n" for i in range(len(upstreams))))
    for i in range(sites):
        with open(os.path.join(conf, "sites", f"s{i:04d}"), "w") as f:
            f.write(f"[HOST]\n    ServerName site{i}.test\n    DocumentRoot {docroot}\n")
    return conf


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--sites", type=int, default=100)
    ap.add_argument("--upstreams", type=int, default=10)
    ap.add_argument("--scrapes", type=int, default=200)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    wd = tempfile.mkdtemp(prefix="mk-scrape-")
    port = procs.free_port()
    ports = []
    while len(ports) < args.upstreams:
        p = procs.free_port()
        if p != port and p not in ports:
            ports.append(p)
    conf = write_conf(wd, build, port, args.sites, ports)
    up = None
    if ports:
        script = os.path.join(wd, "upstream.py")
        with open(script, "w") as f:
            f.write(UPSTREAM)
        up = subprocess.Popen([sys.executable, script] + [str(p) for p in ports])
    proc = subprocess.Popen([os.path.join(build, "bin", "monkey"), "-c", conf],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not procs.wait_port(port) or not all(procs.wait_port(p) for p in ports):
            sys.exit("metrics_scrape: the server or the upstreams did not start")
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        for i in range(args.sites):
            for path in ("/hello.txt", "/missing"):
                c.request("GET", path, headers={"Host": f"site{i}.test"})
                c.getresponse().read()
        for i in range(len(ports)):
            for _ in range(2):
                c.request("GET", f"/u{i}/x", headers={"Host": "localhost"})
                r = c.getresponse()
                r.read()
                if r.status != 200:
                    sys.exit(f"metrics_scrape: upstream u{i} answered {r.status}")
        times = []
        body = b""
        for _ in range(args.scrapes):
            t = time.perf_counter()
            c.request("GET", "/metrics")
            body = c.getresponse().read()
            times.append(time.perf_counter() - t)
        c.close()
    finally:
        procs.stop(proc)
        if up:
            procs.stop(up)
        shutil.rmtree(wd, ignore_errors=True)
    lines = body.decode().splitlines()
    series = sum(1 for line in lines if line and not line.startswith("#"))
    times.sort()
    print(f"{args.sites} sites, {args.upstreams} upstreams, 2 workers, "
          f"{args.scrapes} scrapes over one connection")
    print(f"scrape: {len(body)} bytes, {len(lines)} lines, {series} series")
    print(f"time per scrape: median {statistics.median(times) * 1e3:.2f} ms, "
          f"90th percentile {times[int(len(times) * 0.9)] * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
