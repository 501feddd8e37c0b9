"""What the benchmark scripts that compare proxies share (bench/proxy.py,
bench/proxy_ws.py): a run's record (when, on what machine, at which commit,
by which command) and its two output files, NAME.json and NAME.md; and the
deterministic measures, `strace -c -f` attached to a server's processes and
callgrind's two dumps N and 2N requests apart. Built on bench.py's parsers
(parse_strace, callgrind_totals, wait_traced)."""

import json
import os
import platform
import signal
import subprocess
import sys
import time

import bench
from procs import stop

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def record(script, **fields):
    """The record of a run of bench/SCRIPT that starts now, with fields."""
    doc = {"when": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "cpu": bench.cpu_model(),
           "cpus": os.cpu_count(), "kernel": platform.release(),
           "load_start": "%.2f" % os.getloadavg()[0],
           "commit": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True).stdout.strip(),
           "command": " ".join(["python3", "bench/" + script] + sys.argv[1:])}
    doc.update(fields)
    return doc


def header(doc, seconds=False):
    """The report's first lines of a record that write() finished: the run
    (with its length when seconds), the commit and the command."""
    run = ("- when: %s UTC; machine: %s, %d CPUs, Linux %s; load average %s at the start, "
           "%s at the end" % (doc["when"], doc["cpu"], doc["cpus"], doc["kernel"],
                              doc["load_start"], doc["load_end"]))
    if seconds:
        run += "; %d s" % doc["seconds"]
    return [run, "- commit: %s; command: `%s`" % (doc["commit"], doc["command"])]


def write(out, name, doc, report, started):
    """End the record (the load average now, the seconds since started, a
    time.time()), write it to OUT/NAME.json and report(doc) to OUT/NAME.md,
    and print the report."""
    doc["load_end"] = "%.2f" % os.getloadavg()[0]
    doc["seconds"] = round(time.time() - started)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(doc, f, indent=1)
    text = report(doc)
    with open(os.path.join(out, name + ".md"), "w") as f:
        f.write(text)
    print(text)


def one_line(text):
    """text as one cell of a markdown table."""
    return str(text).replace("\n", " ").replace("|", "/")


def strace_start(pids, path):
    """`strace -c -f` attached to the processes pids, its summary to path:
    the strace process, once every thread of theirs is traced."""
    argv = ["strace", "-c", "-f", "-o", path]
    for p in pids:
        argv += ["-p", str(p)]
    st = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    bench.wait_traced(pids, 10)
    return st


def strace_end(st, path, name, n):
    """Detach strace_start's strace and read its summary: (system calls,
    failed ones, {call: count}, the counts by name highest first), each
    divided by n (requests, messages). RuntimeError without a summary."""
    time.sleep(0.3)
    stop(st, 30, signal.SIGINT)
    calls, errs, per = bench.parse_strace(path)
    if calls is None:
        raise RuntimeError("%s: no strace summary in %s" % (name, path))
    by = {k: round(v / n, 3) for k, v in sorted(per.items(), key=lambda kv: -kv[1])}
    return calls / n, (errs or 0) / n, by


def callgrind_wrapper(cgdir):
    """The argv prefix that runs a server under callgrind, instrumentation
    off until callgrind("-i", "on"), its dumps into cgdir (made)."""
    os.makedirs(cgdir, exist_ok=True)
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--trace-children=no",
            "--callgrind-out-file=" + os.path.join(cgdir, "callgrind.out.%p")]


def callgrind(pid, *args):
    """callgrind_control ARGS PID: "-i", "on"; "--dump=NAME"."""
    subprocess.run(["callgrind_control", *args, str(pid)], capture_output=True, timeout=60)


def callgrind_ir(cgdir, name):
    """(Ir at the dump "n1", Ir at the dump "n2"): the totals of the dumps in
    cgdir so named, over every process. RuntimeError when one is missing."""
    ir = {}
    for fn in sorted(os.listdir(cgdir)):
        trig, total = bench.callgrind_totals(os.path.join(cgdir, fn))
        for k in ("n1", "n2"):
            if trig and trig.endswith(k) and total is not None:
                ir[k] = ir.get(k, 0) + total
    if "n1" not in ir or "n2" not in ir:
        raise RuntimeError("%s: callgrind dumps missing in %s" % (name, cgdir))
    return ir["n1"], ir["n2"]
