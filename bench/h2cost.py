#!/usr/bin/env python3
"""HTTP/2 cost per request, in figures that do not depend on the machine's
load: instructions (callgrind) and system calls (strace -c) per request of
one server worker, for monkey and h2o, over h2c and TLS, with the files of
the h2_13 and h2_200k scenarios (bench.py's configurations, certificate
and files).

Instructions: the server runs under `valgrind --tool=callgrind` (1 worker),
`h2load -c10 -m10 -n N` and then `-n 2N` are run against a fresh start
each, and (Ir(2N) - Ir(N)) / N is the cost of a request, start-up and
shutdown cancelled out. System calls: the server runs alone (1 worker),
`strace -c -f` is attached for one `h2load -c10 -m10 -n N` run, and the
calls are divided by N.

    python3 bench/h2cost.py                      # monkey and h2o, h2c and TLS, both files
    python3 bench/h2cost.py --servers monkey --modes h2c --files hello.txt
    python3 bench/h2cost.py --monkey /path/to/other/build/bin/monkey
    python3 bench/h2cost.py --servers monkey --modes h2c --files hello.txt --requests 4000 --browser-fields

The servers' worker threads are what is measured: h2load runs outside.
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as B  # noqa: E402
from procs import stop  # noqa: E402

FILES = {"hello.txt": 10000, "file200k.bin": 2000}  # file: requests N under callgrind

# --browser-fields: request fields a browser sends, added to h2load's own
BROWSER_FIELDS = [
    "accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "accept-encoding: gzip, deflate, br", "accept-language: en-US,en;q=0.5",
    "user-agent: Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0",
    "referer: http://127.0.0.1/index.html", "sec-fetch-dest: document",
    "sec-fetch-mode: navigate", "sec-fetch-site: same-origin", "upgrade-insecure-requests: 1",
    "cookie: session=abcdef0123456789; theme=dark", "cache-control: no-cache",
    "pragma: no-cache"]
H2LOAD_EXTRA = []  # h2load arguments added to every load run


def log(text):
    print(text, file=sys.stderr, flush=True)


def setup(wd, tls):
    docroot = os.path.join(wd, "htdocs")
    os.makedirs(docroot, exist_ok=True)
    B.write(os.path.join(docroot, "hello.txt"), "Hello World!\n")
    with open(os.path.join(docroot, "file200k.bin"), "wb") as f:
        f.write(os.urandom(200 * 1024))
    if not tls:
        return docroot, None
    crt, key = os.path.join(wd, "h2cost.crt"), os.path.join(wd, "h2cost.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                    "/CN=localhost", "-keyout", key, "-out", crt], check=True,
                   capture_output=True)
    return docroot, (crt, key)


def server_argv(name, d, docroot, port, tls, monkey):
    os.makedirs(d, exist_ok=True)
    if name == "monkey":
        argv = B.config_monkey(d, docroot, port, 1, tls=tls, h2=not tls)
        argv[0] = monkey
        if tls:
            plugin = os.path.join(os.path.dirname(os.path.dirname(monkey)), "plugins",
                                  "monkey-tls.so")
            B.write(os.path.join(d, "monkey", "plugins.load"), "[PLUGINS]\n    Load %s\n" % plugin)
        return argv
    return B.config_h2o(d, docroot, port, 1, single=True, tls=tls, h2=True)


def h2load(url, n):
    p = subprocess.run(["h2load", "-c10", "-m10", "-n", str(n), *H2LOAD_EXTRA, url],
                       capture_output=True, text=True, timeout=600)
    m = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded", p.stdout)
    return int(m.group(1)) if m else 0


def wait_ready(url, proc, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited: %s" % proc.returncode)
        if h2load_one(url):
            return
        time.sleep(0.3)
    raise RuntimeError("the server did not answer over HTTP/2 in %d s" % seconds)


def h2load_one(url):
    p = subprocess.run(["h2load", "-n1", "-c1", url], capture_output=True, text=True,
                       timeout=60)
    return " 1 succeeded" in p.stdout


def start(argv, wrapper, d):
    logf = open(os.path.join(d, "server.log"), "w")
    return subprocess.Popen(wrapper + argv, stdout=logf, stderr=subprocess.STDOUT,
                            start_new_session=True)


def instructions(name, mode, path, n, wd, docroot, tls, monkey):
    totals = []
    for k in (n, 2 * n):
        d = os.path.join(wd, "%s-%s-%s-cg-%d" % (name, mode, path, k))
        port = B.free_port(21000)
        argv = server_argv(name, d, docroot, port, tls, monkey)
        out = os.path.join(d, "callgrind.out")
        proc = start(argv, ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out + ".%p"],
                     d)
        url = "%s://127.0.0.1:%d/%s" % ("https" if tls else "http", port, path)
        try:
            wait_ready(url, proc, 120)
            done = h2load(url, k)
        finally:
            stop(proc, 60)
        if done != k:
            raise RuntimeError("%s: %d of %d requests succeeded" % (name, done, k))
        files = [f for f in os.listdir(d) if f.startswith("callgrind.out.")]
        totals.append(sum(B.callgrind_totals(os.path.join(d, f))[1] or 0 for f in files))
    return (totals[1] - totals[0]) / n


def syscalls(name, mode, path, n, wd, docroot, tls, monkey):
    d = os.path.join(wd, "%s-%s-%s-strace" % (name, mode, path))
    port = B.free_port(21000)
    argv = server_argv(name, d, docroot, port, tls, monkey)
    proc = start(argv, [], d)
    url = "%s://127.0.0.1:%d/%s" % ("https" if tls else "http", port, path)
    sf = os.path.join(d, "strace.txt")
    try:
        wait_ready(url, proc, 30)
        st = subprocess.Popen(["strace", "-c", "-f", "-o", sf, "-p", str(proc.pid)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
        done = h2load(url, n)
        time.sleep(0.2)
        stop(st, 30, signal.SIGINT)
    finally:
        stop(proc, 60)
    if done != n:
        raise RuntimeError("%s: %d of %d requests succeeded" % (name, done, n))
    calls = {}
    with open(sf) as f:
        for line in f:
            v = line.split()
            if len(v) >= 5 and v[0][0].isdigit() and v[-1] != "total":
                calls[v[-1]] = int(v[3])
    return sum(calls.values()) / n, {k: c / n for k, c in calls.items() if c / n >= 0.05}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", default="monkey,h2o")
    ap.add_argument("--modes", default="h2c,tls")
    ap.add_argument("--files", default=",".join(FILES))
    ap.add_argument("--monkey", default=os.path.join(B.ROOT, "build", "bin", "monkey"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--requests", type=int, default=0,
                    help="N for every file (default: 10000 for hello.txt, 2000 for 200 KB)")
    ap.add_argument("--browser-fields", action="store_true",
                    help="add twelve request fields a browser sends to h2load's")
    args = ap.parse_args()
    if args.requests:
        for f in FILES:
            FILES[f] = args.requests
    if args.browser_fields:
        for field in BROWSER_FIELDS:
            H2LOAD_EXTRA.extend(["-H", field])
    for tool in ("h2load", "valgrind", "strace", "openssl"):
        if not shutil.which(tool):
            sys.exit("h2cost.py needs %s" % tool)
    wd = tempfile.mkdtemp(prefix="mk-h2cost-")
    print("| server | mode | file | Ir/request | syscalls/request | main calls |")
    print("|---|---|---|---|---|---|")
    try:
        for mode in args.modes.split(","):
            tls = mode == "tls"
            docroot, cert = setup(os.path.join(wd, mode), tls)
            for path in args.files.split(","):
                for name in args.servers.split(","):
                    log("h2cost: %s %s %s" % (name, mode, path))
                    ir = instructions(name, mode, path, FILES[path], wd, docroot, cert,
                                      args.monkey)
                    total, per = syscalls(name, mode, path, 5 * FILES[path], wd, docroot, cert,
                                          args.monkey)
                    main_calls = ", ".join("%s %.2f" % kv for kv in
                                           sorted(per.items(), key=lambda kv: -kv[1]))
                    print("| %s | %s | %s | %.0f | %.2f | %s |" % (name, mode, path, ir, total,
                                                                   main_calls), flush=True)
    finally:
        if args.keep:
            log("h2cost: kept %s" % wd)
        else:
            shutil.rmtree(wd, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
