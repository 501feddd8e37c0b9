#!/usr/bin/env python3
"""One connection at a time: Monkey against h2o (and against another
Monkey build) with h2load, the servers measured in alternation, round
after round, so that a change of the machine's load hits them alike; the
medians of the rounds, and the median of each round's ratio to h2o.

A one-connection load makes no server wait for a CPU its own workers hold,
and the figures that count work (TCP segments per request, CPU time per
request) move less with the load than requests per second do.

    python3 bench/h2single.py                                   # h2c, TLS, HTTP/1.1 and HTTPS, 200 KB
    python3 bench/h2single.py --modes h2c,tls --load "-c1 -m10 -n500" --rounds 12
    python3 bench/h2single.py --baseline /path/to/old/build/bin/monkey --packets --rt

Per server and round: requests/s from h2load; the CPU time of the server's process tree (schedstat) and of
h2load (rusage) per request; with --packets, the packets sent in the
server's context and in h2load's (perf, tracepoint net:net_dev_xmit: on
loopback a segment is sent in the context of whichever process pushes it,
the server when it writes, the client when its acknowledgement lets a
queued segment go). --rt runs h2load and every thread of the servers
under SCHED_FIFO 10, so that other processes do not take their CPUs
during a run (it needs root, and starves the rest of the machine while a
run lasts: keep the loads short).
"""

import argparse
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as B  # noqa: E402
from procs import run_ns, tree  # noqa: E402
import h2cost as H  # noqa: E402

MODES = {  # scheme, HTTP/1.1 instead of HTTP/2
    "h2c": ("http", False), "tls": ("https", False), "h1": ("http", True),
    "h1tls": ("https", True),
}


def log(text):
    print(text, file=sys.stderr, flush=True)


def set_rt(pid, on):
    for t in os.listdir("/proc/%d/task" % pid):
        subprocess.run(["chrt"] + (["-f", "-p", "10"] if on else ["-o", "-p", "0"]) + [t],
                       check=True, capture_output=True)


class Target:
    def __init__(self, label, name, binary, port, proc, url):
        self.label, self.name, self.binary, self.port, self.proc = label, name, binary, port, proc
        self.url = url
        self.rounds = []


def start(label, name, binary, wd, docroot, cert, mode, file):
    scheme, h1 = MODES[mode]
    cert = cert if scheme == "https" else None
    d = os.path.join(wd, "%s-%s-%s" % (label, mode, file))
    port = B.free_port(22000)
    argv = H.server_argv(name, d, docroot, port, cert, binary)
    proc = H.start(argv, [], d)
    url = "%s://127.0.0.1:%d/%s" % (scheme, port, file)
    deadline = time.monotonic() + 30
    while not port_answers(url, h1):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("%s did not answer on %s" % (label, url))
        time.sleep(0.3)
    return Target(label, name, binary, port, proc, url)


def port_answers(url, h1):
    p = subprocess.run(["h2load", "-n1", "-c1"] + (["--h1"] if h1 else []) + [url],
                       capture_output=True, text=True, timeout=60)
    return " 1 succeeded" in p.stdout


def one_run(t, load, h1, rt, packets, wd):
    argv = ["h2load"] + load.split() + (["--h1"] if h1 else []) + [t.url]
    if rt:
        argv = ["chrt", "-f", "10"] + argv
    perf_srv = None
    if packets:
        cli_out, srv_out = os.path.join(wd, "perf.cli"), os.path.join(wd, "perf.srv")
        perf_srv = subprocess.Popen(["perf", "stat", "-x,", "-e", "net:net_dev_xmit", "-p",
                                     str(t.proc.pid), "-o", srv_out],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        argv = ["perf", "stat", "-x,", "-e", "net:net_dev_xmit,task-clock", "-o", cli_out,
                "--"] + argv
    cpu0, ru0 = run_ns(tree(t.proc.pid)), resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    cpu1, ru1 = run_ns(tree(t.proc.pid)), resource.getrusage(resource.RUSAGE_CHILDREN)
    m = re.search(r"(\d+) succeeded", p.stdout)
    n = int(m.group(1)) if m else 0
    if n == 0:
        raise RuntimeError("%s: no request succeeded:\n%s" % (t.label, p.stdout + p.stderr))
    rps = float(re.search(r"([0-9.]+) req/s", p.stdout).group(1))
    row = {"rps": rps, "srv_us": (cpu1 - cpu0) / 1000 / n,
           "cli_us": (ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime) * 1e6 / n}
    if packets:
        perf_srv.send_signal(signal.SIGINT)
        perf_srv.wait(30)
        row["srv_pkts"] = perf_count(srv_out, "net_dev_xmit") / n
        row["cli_pkts"] = perf_count(cli_out, "net_dev_xmit") / n
        row["cli_us"] = perf_count(cli_out, "task-clock") * 1000 / n  # perf's own time left out
    return row


def perf_count(path, event):
    with open(path) as f:
        for line in f:
            if event in line and line[0].isdigit():
                return float(line.split(",")[0])
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--monkey", default=os.path.join(B.ROOT, "build", "bin", "monkey"))
    ap.add_argument("--baseline", help="another Monkey build, measured as monkey-base")
    ap.add_argument("--servers", default="monkey,h2o")
    ap.add_argument("--modes", default="h2c,tls,h1,h1tls")
    ap.add_argument("--files", default="file200k.bin")
    ap.add_argument("--load", default="-c1 -m1 -n300", help="h2load's options")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--rt", action="store_true", help="SCHED_FIFO for h2load and the servers")
    ap.add_argument("--packets", action="store_true", help="packets per request (perf)")
    args = ap.parse_args()
    for tool in ["h2load", "openssl"] + (["perf"] if args.packets else []) + \
            (["chrt"] if args.rt else []):
        if not shutil.which(tool):
            sys.exit("h2single.py needs %s" % tool)
    wd = tempfile.mkdtemp(prefix="mk-h2single-")
    docroot, cert = H.setup(wd, True)
    with open(os.path.join(docroot, "file1m.bin"), "wb") as f:
        f.write(os.urandom(1 << 20))
    servers = [(s, s, args.monkey if s == "monkey" else None) for s in args.servers.split(",")]
    if args.baseline:
        servers.insert(1, ("monkey-base", "monkey", args.baseline))
    cols = ["req/s", "ratio to %s" % servers[-1][0], "server CPU µs/req",
            "h2load CPU µs/req"] + (["server pkts/req", "h2load pkts/req"] if args.packets
                                    else [])
    print("`h2load %s`, %d rounds%s\n" % (args.load, args.rounds,
                                          ", SCHED_FIFO" if args.rt else ""))
    print("| mode | file | server | " + " | ".join(cols) + " |")
    print("|---" * (3 + len(cols)) + "|")
    try:
        for mode in args.modes.split(","):
            h1 = MODES[mode][1]
            for file in args.files.split(","):
                targets = []
                try:
                    for label, name, binary in servers:
                        targets.append(start(label, name, binary, wd, docroot, cert, mode, file))
                    if args.rt:
                        for t in targets:
                            set_rt(t.proc.pid, True)
                    log("h2single: %s %s" % (mode, file))
                    for _ in range(args.rounds):
                        for t in targets:
                            t.rounds.append(one_run(t, args.load, h1, args.rt, args.packets, wd))
                finally:
                    for t in targets:
                        H.stop(t.proc)
                ref = targets[-1]
                for t in targets:
                    med = lambda k: statistics.median(r[k] for r in t.rounds)  # noqa: E731
                    ratio = statistics.median(a["rps"] / b["rps"]
                                              for a, b in zip(t.rounds, ref.rounds))
                    cells = ["%.0f" % med("rps"), "%.2f" % ratio, "%.0f" % med("srv_us"),
                             "%.0f" % med("cli_us")]
                    if args.packets:
                        cells += ["%.1f" % med("srv_pkts"), "%.1f" % med("cli_pkts")]
                    print("| %s | %s | %s | %s |" % (mode, file, t.label, " | ".join(cells)),
                          flush=True)
    finally:
        shutil.rmtree(wd, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
