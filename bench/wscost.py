#!/usr/bin/env python3
"""WebSocket cost per message, in figures that do not depend on the machine's
load: system calls (strace -c and perf stat) and user-space instructions
(callgrind) per echo round trip and per fan-out delivery, of three servers
loaded by the same client (build/bin/mk-wsload):

  monkey  build/bin/monkey with the wstest service (the websocket and
          broadcaster packages), --workers workers (default 2)
  floor   build/bin/mk-wsfloor (bench/ws_floor.c): one thread, one read and
          one write per event, nothing else; the least a server can do
  node    bench/node/ws.js (node's ws package), --workers processes

    python3 bench/wscost.py                          # every server, every tool
    python3 bench/wscost.py --servers monkey,floor --tools callgrind --keep /tmp/cg
    python3 bench/wscost.py --monkey /other/build/bin/monkey --servers monkey

Loads: echo, --conns connections (64) each with one 32-byte message
outstanding until --rounds echoes (20,000) have come back (mk-wsload -r);
fan-out, --clients connections (1,000) in the room and --fanouts messages
(20) each delivered to all of them (20,000 deliveries). The connections are
opened and upgraded before the measure starts (mk-wsload -w), so the
handshakes are not counted.

Tools (--tools, default all three):
  strace     `strace -c -f` attached to every process of the server: calls
             per round trip or delivery, by name, and the calls that failed
             (EAGAIN). The tracer stops the server at every call, which
             changes how much work each event finds.
  perf       `perf stat` on the kernel's system-call tracepoints: the same
             counts without a tracer, the server at its own speed; and its
             task-clock (CPU time, which depends on the machine's load: an
             indication only).
  callgrind  `valgrind --tool=callgrind --instr-atstart=no`, instrumentation
             switched on once the connections are open (callgrind_control)
             and dumped after the load: user-space instructions (Ir) per
             round trip or delivery, every thread together. The kernel's
             work (TCP on loopback, most of a message's cost) is not in it.
             node is left out (its JIT makes the count mean little).
  profile    (not in the default list) `perf record -e cpu-clock -g` of the
             server, sampling only while the load runs (perf's control
             FIFO): the share of its CPU time spent in the kernel, and under
             the TCP send, the TCP receive, epoll_wait and the scheduler.
             Sampled, so a few percent either way, but a share hardly
             depends on the machine's load.

--warmup runs each load once, unmeasured, before strace and perf measure
it (node's JIT compiler would otherwise count against node).

Placement: with 2 or more CPUs the server runs under `taskset -c` on the
highest one and the client on the others, as `websocket.py --pin`.
Prints a Markdown report.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as B  # noqa: E402
from duda import BUILD, HERE, ROOT, monkey_conf  # noqa: E402
from procs import free_port, stop, tree, wait_port  # noqa: E402

WSLOAD = os.path.join(BUILD, "bin", "mk-wsload")
FLOOR = os.path.join(BUILD, "bin", "mk-wsfloor")
PATHS = {"echo": "/wstest/echo", "fanout": "/wstest/room"}


def log(text):
    print(text, file=sys.stderr, flush=True)


class Pin:
    def __init__(self):
        cpus = sorted(os.sched_getaffinity(0))
        self.server = self.client = None
        if len(cpus) >= 2 and shutil.which("taskset"):
            self.server, self.client = str(cpus[-1]), ",".join(str(c) for c in cpus[:-1])

    def server_cmd(self, cmd):
        return ["taskset", "-c", self.server] + cmd if self.server else cmd

    def client_cmd(self, cmd):
        return ["taskset", "-c", self.client] + cmd if self.client else cmd


def server_argv(name, args, wd, port):
    if name == "floor":
        return [FLOOR, "-p", str(port)]
    if name == "node":
        return ["node", os.path.join(HERE, "node", "ws.js"), str(port), str(args.workers)]
    services = os.path.join(wd, "services")
    if not os.path.isdir(services):
        subprocess.run([os.path.join(BUILD, "bin", "duda"), "build",
                        os.path.join(ROOT, "tests", "duda", "wstest"), "-o", services],
                       check=True, stdout=subprocess.DEVNULL)
    conf = monkey_conf(tempfile.mkdtemp(prefix="conf-", dir=wd) + "/conf", port, args.workers,
                       services, site="[WEB_SERVICE]\n    Name wstest\n")
    return [args.monkey, "-c", conf]


def start(name, args, wd, pin, wrapper=(), timeout=30):
    port = free_port()
    argv = pin.server_cmd(list(wrapper) + server_argv(name, args, wd, port))
    logf = open(os.path.join(wd, name + ".log"), "a")
    proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
    if not wait_port(port, timeout):
        stop(proc, 20)
        raise RuntimeError(f"{name} did not start (see {wd}/{name}.log)")
    time.sleep(1.0 if name == "node" else 0.2)  # node's cluster workers
    return proc, port


class Load:
    """mk-wsload -w: open() upgrades the connections, go() runs the load and
    returns its JSON result, close() closes them."""

    def __init__(self, port, mode, args, pin):
        n = args.rounds if mode == "echo" else args.fanouts
        conns = args.conns if mode == "echo" else args.clients
        cmd = [WSLOAD, "-p", str(port), "-u", PATHS[mode], "-m", mode, "-c", str(conns), "-w",
               "-r" if mode == "echo" else "-n", str(n)]
        self.proc = subprocess.Popen(pin.client_cmd(cmd), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "open":
            raise RuntimeError(f"mk-wsload did not open its connections ({' '.join(cmd)})")

    def go(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        r = json.loads(self.proc.stdout.readline())
        if r["errors"] or r["failed"]:
            raise RuntimeError(f"mk-wsload: {r}")
        return r["round_trips"] if "round_trips" in r else r["deliveries"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(60)


def warm_up(port, mode, args, pin):
    """With --warmup, the same load once, unmeasured (node's JIT compiler)."""
    if args.warmup:
        load = Load(port, mode, args, pin)
        load.go()
        load.close()


def each_mode(name, args, wd, pin, measure):
    """Start the server once and, for each mode, warm it up, open the load's
    connections and call measure(proc, load, path) with a file name of
    wd's to trace into; measure runs the load and returns that mode's
    figures: {mode: figures}."""
    out = {}
    proc, port = start(name, args, wd, pin)
    try:
        for mode in args.modes:
            warm_up(port, mode, args, pin)
            load = Load(port, mode, args, pin)
            out[mode] = measure(proc, load, os.path.join(wd, f"{measure.__name__}-{name}-{mode}.txt"))
    finally:
        stop(proc, 20)
    return out


def strace_run(name, args, wd, pin):
    def strace(proc, load, sf):
        argv = ["strace", "-c", "-f", "-o", sf]
        for p in tree(proc.pid):
            argv += ["-p", str(p)]
        st = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        B.wait_traced(tree(proc.pid), 10)
        ops = load.go()
        time.sleep(0.2)
        stop(st, 30, signal.SIGINT)
        load.close()
        calls, errors, per = B.parse_strace(sf)
        return {"ops": ops, "calls": calls / ops, "errors": (errors or 0) / ops,
                "by": {k: v / ops for k, v in per.items() if v / ops >= 0.005},
                "failed": strace_errors(sf, ops)}
    return each_mode(name, args, wd, pin, strace)


def strace_errors(path, ops):
    """{syscall: failed calls per op} from strace -c's errors column."""
    failed = {}
    with open(path) as f:
        for line in f:
            v = line.split()
            if len(v) == 6 and v[0][0].isdigit() and v[-1] != "total":
                failed[v[-1]] = int(v[4]) / ops
    return failed


def perf_run(name, args, wd, pin):
    names = [n for n in B.PERF_SYSCALLS if os.path.isdir(
        "/sys/kernel/tracing/events/syscalls/sys_enter_" + n) or os.path.isdir(
        "/sys/kernel/debug/tracing/events/syscalls/sys_enter_" + n)]
    events = ["task-clock", "context-switches", "raw_syscalls:sys_enter"] + ["syscalls:sys_enter_" + n for n in names]

    def perf(proc, load, pf):
        st = subprocess.Popen(["perf", "stat", "-x,", "-o", pf, "-e", ",".join(events), "-p",
                               ",".join(str(p) for p in tree(proc.pid))],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        ops = load.go()
        stop(st, 30, signal.SIGINT)
        load.close()
        counts = B.parse_perf_stat(pf)
        clock = counts.pop("task-clock", None)
        switches = counts.pop("context-switches", None)
        total = counts.pop("raw_syscalls:sys_enter", None)
        per = {k.rsplit("sys_enter_", 1)[-1]: v / ops for k, v in counts.items() if v}
        return {"ops": ops, "calls": total / ops if total else None, "by": per,
                "cpu_us": clock * 1e3 / ops if clock else None,
                "switches": switches / ops if switches is not None else None}
    return each_mode(name, args, wd, pin, perf)


def callgrind_run(name, args, wd, pin):
    cgdir = os.path.join(wd, "callgrind-" + name)
    os.makedirs(cgdir, exist_ok=True)
    wrapper = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--trace-children=no",
               "--callgrind-out-file=" + os.path.join(cgdir, "callgrind.out.%p")]
    out = {}
    proc, port = start(name, args, wd, pin, wrapper, timeout=120)
    cc = ["callgrind_control"]
    try:
        for mode in args.modes:
            load = Load(port, mode, args, pin)
            subprocess.run(cc + ["-i", "on", str(proc.pid)], capture_output=True, timeout=60)
            ops = load.go()
            subprocess.run(cc + ["--dump=" + mode, str(proc.pid)], capture_output=True, timeout=60)
            subprocess.run(cc + ["-i", "off", str(proc.pid)], capture_output=True, timeout=60)
            load.close()
            out[mode] = {"ops": ops}
    finally:
        stop(proc, 60)
    for fn in sorted(os.listdir(cgdir)):
        trig, total = B.callgrind_totals(os.path.join(cgdir, fn))
        for mode in out:
            if trig and trig.endswith(mode) and total is not None:
                out[mode]["ir"] = total / out[mode]["ops"]
                out[mode]["file"] = os.path.join(cgdir, fn)
    return out


class PerfControl:
    """perf record's control FIFOs: enable() and disable() the sampling."""

    def __init__(self, wd, name):
        self.ctl, self.ack = os.path.join(wd, name + ".ctl"), os.path.join(wd, name + ".ack")
        for f in (self.ctl, self.ack):
            os.mkfifo(f)
        self.fc = os.open(self.ctl, os.O_RDWR)
        self.fa = os.open(self.ack, os.O_RDWR)

    def arg(self):
        return f"--control=fifo:{self.ctl},{self.ack}"

    def send(self, what):
        os.write(self.fc, (what + "\n").encode())
        os.read(self.fa, 16)  # "ack"

    def close(self):
        os.close(self.fc)
        os.close(self.fa)


def profile_run(name, args, wd, pin):
    """perf record -e cpu-clock -g of the server's processes, sampling only
    while the load runs: the share of its CPU time in the kernel, and under
    each system call's entry point (children included)."""
    out = {}
    for mode in args.modes:
        ctl = PerfControl(wd, f"perf-{name}-{mode}")
        data = os.path.join(wd, f"profile-{name}-{mode}.data")
        wrapper = ["perf", "record", "-q", "-e", "cpu-clock", "-F", "4000", "-g", ctl.arg(), "-o",
                   data, "--"]
        proc, port = start(name, args, wd, pin, wrapper)
        try:
            ctl.send("disable")
            warm_up(port, mode, args, pin)
            load = Load(port, mode, args, pin)
            ctl.send("enable")
            ops = load.go()
            ctl.send("disable")
            load.close()
        finally:
            for p in [p for p in tree(proc.pid) if p != proc.pid]:  # the server, then perf
                try:
                    os.kill(p, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            stop(proc, 60, signal.SIGINT)
            ctl.close()
        out[mode] = dict(perf_shares(data), ops=ops)
    return out


# The kernel's work of a message, by where it starts (children included).
PROFILE_PATHS = {"send": "tcp_sendmsg", "receive": "tcp_recvmsg", "epoll": "do_epoll_wait",
                 "switch": "schedule"}


def perf_shares(data):
    """{"kernel": %, "paths": {path: %}} of a perf record file: the kernel's
    share of the samples, and the share under each of PROFILE_PATHS."""
    rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "dso",
                          "-g", "none"], capture_output=True, text=True).stdout
    kernel = sum(float(v.split()[0].rstrip("%")) for v in rep.splitlines()
                 if "%" in v and "[kernel" in v)
    rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--children", "--sort", "sym",
                          "-g", "none"], capture_output=True, text=True).stdout
    by_sym = {}
    for line in rep.splitlines():
        v = line.split()
        if len(v) >= 4 and v[0].endswith("%") and v[2] == "[k]":
            by_sym[v[3]] = float(v[0].rstrip("%"))
    return {"kernel": kernel, "paths": {k: by_sym.get(f, 0.0) for k, f in PROFILE_PATHS.items()}}


def fmt(v, digits=2):
    return "-" if v is None else f"{v:,.{digits}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--servers", default="monkey,floor,node")
    ap.add_argument("--tools", default="strace,perf,callgrind")
    ap.add_argument("--modes", default="echo,fanout")
    ap.add_argument("--rounds", type=int, default=20000)
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--fanouts", type=int, default=20)
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--monkey", default=os.path.join(BUILD, "bin", "monkey"))
    ap.add_argument("--warmup", action="store_true",
                    help="run each load once, unmeasured, before strace and perf measure it")
    ap.add_argument("--keep", metavar="DIR", help="keep the traces and callgrind files in DIR")
    args = ap.parse_args()
    args.modes = args.modes.split(",")
    for tool in (WSLOAD, FLOOR):
        if not os.access(tool, os.X_OK):
            sys.exit(f"wscost.py: {tool} is not built (make, with the tests)")
    wd = args.keep or tempfile.mkdtemp(prefix="wscost-")
    os.makedirs(wd, exist_ok=True)
    pin = Pin()
    runs = {"strace": strace_run, "perf": perf_run, "callgrind": callgrind_run,
            "profile": profile_run}
    results = {}
    for name in args.servers.split(","):
        if name == "node" and not os.path.isdir(os.path.join(HERE, "node", "node_modules", "ws")):
            log("node's ws package is missing (tools/deps.sh bench): node left out")
            continue
        for tool in args.tools.split(","):
            if tool == "callgrind" and name == "node":
                continue
            log(f"wscost: {name} under {tool}")
            results.setdefault(name, {})[tool] = runs[tool](name, args, wd, pin)
    if not args.keep:
        shutil.rmtree(wd, ignore_errors=True)

    print(f"## WebSocket cost per message: echo {args.rounds} round trips on {args.conns} "
          f"connections, fan-out {args.fanouts} x {args.clients} deliveries; "
          f"{args.workers} workers (monkey, node)\n")
    print("| server | mode | syscalls (strace) | failed (strace) | syscalls (perf) "
          "| context switches (perf) | Ir (callgrind) | CPU µs (perf task-clock, load-dependent) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        for mode in args.modes:
            s = r.get("strace", {}).get(mode, {})
            p = r.get("perf", {}).get(mode, {})
            c = r.get("callgrind", {}).get(mode, {})
            print(f"| {name} | {mode} | {fmt(s.get('calls'))} | {fmt(s.get('errors'))} "
                  f"| {fmt(p.get('calls'))} | {fmt(p.get('switches'), 3)} | {fmt(c.get('ir'), 0)} "
                  f"| {fmt(p.get('cpu_us'))} |")
    if any("profile" in r for r in results.values()):
        print("\nWhere the server's CPU time goes (perf record -e cpu-clock, sampled during the "
              "load): the kernel's share, and the share under the TCP send (with the "
              "receiving side's input it runs on loopback), the TCP receive, epoll_wait and "
              "the scheduler:\n")
        for name, r in results.items():
            for mode in args.modes:
                p = r.get("profile", {}).get(mode)
                if p:
                    print(f"- {name} {mode}: kernel {p['kernel']:.1f}%, user "
                          f"{100 - p['kernel']:.1f}%; "
                          + ", ".join(f"{k} {v:.1f}%" for k, v in p["paths"].items()))
    print("\nSystem calls per round trip or delivery, by name (strace / perf):\n")
    for name, r in results.items():
        for mode in args.modes:
            s = r.get("strace", {}).get(mode, {})
            p = r.get("perf", {}).get(mode, {})
            keys = sorted(set(s.get("by", {})) | {k for k, v in p.get("by", {}).items()
                                                 if v >= 0.005})
            parts = []
            for k in keys:
                fail = s.get("failed", {}).get(k)
                parts.append(f"{k} {fmt(s.get('by', {}).get(k))}"
                             + (f" ({fmt(fail)} failed)" if fail else "")
                             + f" / {fmt(p.get('by', {}).get(k))}")
            print(f"- {name} {mode}: " + ", ".join(parts))


if __name__ == "__main__":
    main()
