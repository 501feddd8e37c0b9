#!/usr/bin/env python3
"""What the metrics cost a request, in instructions (docs/observability.md):
the same tree built with metrics (MK_METRICS=ON, the default) and without
(-DMK_METRICS=OFF), each run alone with one worker under
`valgrind --tool=callgrind`, on three loads of the 13-byte hello.txt:

- `h1 keep-alive`: `ab -k -c1 -n N` (one keep-alive connection);
- `h1 close`: `ab -c1 -n N` (a connection per request, `Connection: close`
  answered by the server's close: the close path);
- `h2c`: `h2load -c10 -m10 -n N` over cleartext HTTP/2.

Each load is run against a fresh start with N and then 2N requests, and
(Ir(2N) - Ir(N)) / N is the cost of one request, start-up and shutdown
cancelled out (as bench/h2cost.py does). Two figures: the request path
(the inclusive Ir of mk_event_dispatch and mk_worker_recycle: the events'
work, the accepts and closes included, without the loop's own turns),
which is deterministic to a few instructions; and the whole process, loop
turns included, which moves by up to a few percent from run to run with
how the requests fall into turns (more so for the keep-alive load, whose
client waits for each answer). --runs repeats each measure and the table
gives the medians.

    cmake -S . -B build-nometrics -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMK_METRICS=OFF
    ninja -C build-nometrics bin/monkey
    python3 bench/metrics_cost.py --on build/bin/monkey --off build-nometrics/bin/monkey

Not part of `make test` (it takes minutes: each figure is two server runs
under callgrind). Needs valgrind, ab (apache2-utils) and h2load
(nghttp2-client).
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as B  # noqa: E402
import h2cost as H  # noqa: E402
from procs import stop  # noqa: E402

LOADS = ("h1 keep-alive", "h1 close", "h2c")
# The request path: what the worker's loop does with its events (reads,
# parsing, responses, accepts, closes) and the recycling of closed
# connections, without the loop's own turns (epoll_wait, the clock, the
# once-a-second tick), whose number depends on timing, not on the requests.
PATH_FUNCTIONS = ("mk_event_dispatch", "mk_worker_recycle", "mk_worker_run_turns")
ANNOTATE_LINE = re.compile(r"^\s*([\d,]+) \([ \d.]+%\)\s+\S+:(\w+)(?: \[.*\])?$")


def log(text):
    print(text, file=sys.stderr, flush=True)


def wait_http1(url, proc, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited: %s" % proc.returncode)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError("the server did not answer in %d s" % seconds)


def run_load(load, url, n):
    """Run n requests of `load`; the number that succeeded."""
    if load == "h2c":
        return H.h2load(url, n)
    argv = ["ab", "-q", "-c1", "-n", str(n)] + (["-k"] if load == "h1 keep-alive" else []) + [url]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    a = B.parse_ab(p.stdout, n)
    return n - a["errors"] if a["requests"] else 0


def path_ir(dump):
    """The inclusive Ir of PATH_FUNCTIONS in a callgrind dump (their lines
    in every file: code inlined from headers is listed under its header)."""
    # run away from the source tree: there, it lists a function found by its
    # relative path a second time
    p = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", "--auto=no",
                        dump], capture_output=True, text=True, timeout=600,
                       cwd=os.path.dirname(dump))
    total = 0
    for line in p.stdout.splitlines():
        m = ANNOTATE_LINE.match(line)
        if m and m.group(2) in PATH_FUNCTIONS:
            total += int(m.group(1).replace(",", ""))
    return total


def total_ir(binary, load, n, wd, docroot):
    """(Ir of the whole process, Ir of the request path) of one server run
    under callgrind that served n requests of `load`."""
    d = tempfile.mkdtemp(prefix="run-", dir=wd)
    port = B.free_port(21000)
    argv = B.config_monkey(d, docroot, port, 1, h2=load == "h2c")
    argv[0] = binary
    out = os.path.join(d, "callgrind.out")
    proc = H.start(argv, ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out + ".%p"],
                   d)
    url = "http://127.0.0.1:%d/hello.txt" % port
    try:
        if load == "h2c":
            H.wait_ready(url, proc, 120)
        else:
            wait_http1(url, proc, 120)
        done = run_load(load, url, n)
    finally:
        stop(proc, 60)
    if done != n:
        raise RuntimeError("%s %s: %d of %d requests succeeded" % (binary, load, done, n))
    files = [os.path.join(d, f) for f in os.listdir(d) if f.startswith("callgrind.out.")]
    return (sum(B.callgrind_totals(f)[1] or 0 for f in files), sum(path_ir(f) for f in files))


def per_request(binary, load, n, wd, docroot):
    """(whole, path) Ir per request: (Ir(2n) - Ir(n)) / n."""
    a = total_ir(binary, load, n, wd, docroot)
    b = total_ir(binary, load, 2 * n, wd, docroot)
    return (b[0] - a[0]) / n, (b[1] - a[1]) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--on", default=os.path.join(B.ROOT, "build", "bin", "monkey"),
                    help="the monkey built with metrics (default build/bin/monkey)")
    ap.add_argument("--off", default=os.path.join(B.ROOT, "build-nometrics", "bin", "monkey"),
                    help="the monkey built with -DMK_METRICS=OFF")
    ap.add_argument("--loads", default=",".join(LOADS),
                    help="some of: " + ", ".join(LOADS))
    ap.add_argument("--requests", type=int, default=5000,
                    help="N of the keep-alive and h2c loads (default 5000)")
    ap.add_argument("--close", type=int, default=1000,
                    help="N of the close load (default 1000)")
    ap.add_argument("--runs", type=int, default=3, help="measures of each figure (median)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()
    for tool in ("valgrind", "ab", "h2load"):
        if not shutil.which(tool):
            sys.exit("metrics_cost.py needs %s" % tool)
    for b in (args.on, args.off):
        if not os.access(b, os.X_OK):
            sys.exit("no monkey binary at %s" % b)
    wd = tempfile.mkdtemp(prefix="mk-metrics-cost-")
    docroot, _ = H.setup(wd, False)
    print("| load | figure | metrics off, Ir/request | metrics on, Ir/request | difference |")
    print("|---|---|---|---|---|")
    try:
        for load in args.loads.split(","):
            n = args.close if load == "h1 close" else args.requests
            fig = {}
            for side, binary in (("off", args.off), ("on", args.on)):
                runs = []
                for i in range(args.runs):
                    runs.append(per_request(binary, load, n, wd, docroot))
                    log("metrics_cost: %s, metrics %s, run %d: %.1f Ir/request, "
                        "request path %.1f" % (load, side, i + 1, runs[-1][0], runs[-1][1]))
                fig[side] = (statistics.median(r[0] for r in runs),
                             statistics.median(r[1] for r in runs))
            for k, what in ((1, "request path"), (0, "whole process")):
                off, on = fig["off"][k], fig["on"][k]
                print("| %s | %s | %.0f | %.0f | %+.0f (%+.1f %%) |" % (
                    load, what, off, on, on - off, 100.0 * (on - off) / off), flush=True)
    finally:
        if args.keep:
            log("metrics_cost: kept %s" % wd)
        else:
            shutil.rmtree(wd, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
