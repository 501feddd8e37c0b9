"""mk-watch, the resource watcher (tools/watch/): its command line, its
measurements of a real server under load, and the processes it must stop.

The binary comes from $MK_BUILD (default: build/) and is not built here. Every
process a test starts is stopped by its PID in a `finally` block, and so is
anything mk-watch left behind if it had to be killed.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import free_port

ROOT = Path(__file__).resolve().parents[3]
WATCH = Path(os.environ.get("MK_BUILD", "build") + "/bin/mk-watch")
if not WATCH.is_absolute():
    WATCH = ROOT / WATCH
SLOW = 3.0 if "asan" in str(WATCH) else 1.0


def accepts(port):
    with socket.socket() as s:
        s.settimeout(0.5)
        try:
            s.connect(("127.0.0.1", port))
            return True
        except OSError:
            return False


def parent_of(pid):
    """The parent PID from /proc/<pid>/stat, or None if the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text.rsplit(")", 1)[1].split()[1])


def descendants(root):
    """PIDs of every live descendant of root (a /proc scan)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            ppid = parent_of(int(entry))
            if ppid is not None:
                parents[int(entry)] = ppid
    found, todo = [], [root]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        found += kids
        todo += kids
    return found


def pid_exists(pid):
    """True while pid runs (a zombie does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def kill_pids(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_watch(args, timeout=60):
    """Run mk-watch to its end; returns (returncode, stdout, stderr).

    If it overruns, it is asked to stop (SIGTERM, on which it stops the server
    it started), and whatever it leaves behind is killed by PID.
    """
    proc = subprocess.Popen([str(WATCH)] + [str(a) for a in args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout * SLOW)
        return proc.returncode, out, err
    finally:
        if proc.poll() is None:
            left = descendants(proc.pid)
            proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
            kill_pids(left)


def http_server_cmd(port, tmp_path):
    docroot = tmp_path / "htdocs"
    docroot.mkdir(exist_ok=True)
    (docroot / "index.html").write_text("<h1>watched</h1>\n")
    # exec: the shell becomes the server, so the watched PID is the server's.
    return (f"exec {sys.executable} -m http.server --bind 127.0.0.1 "
            f"--directory {docroot} {port}")


def watch_server(tmp_path, load, extra=()):
    """mk-watch --run an http.server under load; returns (rc, stdout, stderr, summary, port)."""
    port = free_port()
    summary = tmp_path / "summary.json"
    args = ["--run", http_server_cmd(port, tmp_path), "--ready-port", port,
            "--server-log", tmp_path / "server.log", "--summary-json", summary,
            "--interval", 50, *extra, "--", *[str(a).replace("{port}", str(port)) for a in load]]
    rc, out, err = run_watch(args)
    data = json.loads(summary.read_text()) if summary.exists() else None
    return rc, out, err, data, port


def assert_server_stopped(data, port):
    assert data["pid"] > 0
    assert not pid_exists(data["pid"]), "the server outlived mk-watch"
    assert not accepts(port)


def assert_measured(data):
    assert data["samples"] > 0
    assert data["rss_peak_kb"] > 0
    assert data["pss_peak_kb"] > 0
    assert data["rss_avg_kb"] > 0
    assert data["cpu_user_s"] >= 0 and data["cpu_system_s"] >= 0
    assert data["cpu_total_s"] >= 0
    assert data["threads_peak"] >= 1 and data["fds_peak"] >= 3
    assert data["processes_peak"] == 1
    assert data["server_exited_early"] is False


PY_LOAD = """
import sys, urllib.request
n, port = int(sys.argv[1]), sys.argv[2]
for _ in range(n):
    urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html").read()
print(f"load done: {n} requests")
"""


def test_help_and_version():
    p = subprocess.run([str(WATCH), "--help"], capture_output=True, text=True)
    assert p.returncode == 0
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "OUTPUT", "EXAMPLES",
                    "EXIT STATUS"):
        assert re.search(rf"^{section}$", p.stdout, re.M), section
    for opt in ("--pid", "--run", "--ready-port", "--interval", "--duration", "--csv", "--json",
                "--summary-json", "--grace", "--requests"):
        assert opt in p.stdout
    p = subprocess.run([str(WATCH), "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("mk-watch 0.")


@pytest.mark.parametrize("args", [
    [],
    ["--pid", "1", "--run", "true"],
    ["--pid", "abc"],
    ["--pid", "1", "--interval", "0"],
    ["--pid", "1", "--duration", "-1"],
    ["--pid", "1", "--ready-port", "80"],
    ["--run", "true", "--ready-port", "http"],
    ["--no-such-option"],
])
def test_bad_usage_exits_2(args):
    p = subprocess.run([str(WATCH)] + args, capture_output=True, text=True, timeout=10)
    assert p.returncode == 2, (args, p.stderr)
    assert "mk-watch:" in p.stderr


def test_errors_exit_1(tmp_path):
    # A PID that does not exist (pid_max is at most 2^22).
    p = subprocess.run([str(WATCH), "--pid", "2147483647"], capture_output=True, text=True)
    assert p.returncode == 1 and "no process" in p.stderr
    # A server that exits before it accepts connections.
    rc, _, err = run_watch(["--run", "exit 3", "--ready-port", free_port()])
    assert rc == 1 and "exited before accepting" in err
    # An output file that cannot be written: nothing is started.
    rc, _, err = run_watch(["--run", "sleep 30", "--csv", tmp_path / "no" / "such.csv"])
    assert rc == 1 and "cannot write" in err


def test_run_python_server_under_python_load(tmp_path):
    n = 25
    rc, out, err, data, port = watch_server(
        tmp_path, [sys.executable, "-c", PY_LOAD, n, "{port}"],
        extra=["--requests", n, "--csv", tmp_path / "s.csv", "--json", tmp_path / "s.json"])
    assert rc == 0, err
    assert data is not None, err
    assert f"load done: {n} requests" in out  # the load's output is passed through
    assert "us CPU per request" in out  # the text summary
    assert_measured(data)
    assert data["requests"] == n and data["requests_source"] == "option"
    assert data["cpu_us_per_request"] is not None and data["cpu_us_per_request"] >= 0
    assert data["load_exit_status"] == 0
    assert data["load_command"][0] == sys.executable
    assert_server_stopped(data, port)

    rows = (tmp_path / "s.csv").read_text().splitlines()
    assert rows[0].startswith("time_s,processes,threads,fds,rss_kb,pss_kb,cpu_user_s")
    assert len(rows) - 1 == data["samples"]
    samples = json.loads((tmp_path / "s.json").read_text())["samples"]
    assert len(samples) == data["samples"]
    assert all(s["rss_kb"] > 0 for s in samples)
    times = [s["t"] for s in samples]
    assert times == sorted(times)
    cpu = [s["cpu_user_s"] + s["cpu_system_s"] for s in samples]
    assert cpu == sorted(cpu), "cumulative CPU went backwards"


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_run_python_server_under_curl_loop(tmp_path):
    n = 10
    loop = (f"for i in $(seq {n}); do curl -fsS -o /dev/null "
            "http://127.0.0.1:{port}/index.html || exit 1; done")
    rc, _, err, data, port = watch_server(tmp_path, ["sh", "-c", loop], extra=["-n", n])
    assert rc == 0, err
    assert_measured(data)
    assert data["requests"] == n
    assert_server_stopped(data, port)


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed")
def test_request_count_from_wrk(tmp_path):
    load_out = tmp_path / "wrk.txt"
    rc, _, err, data, port = watch_server(
        tmp_path, ["wrk", "-t1", "-c2", "-d1s", "http://127.0.0.1:{port}/index.html"],
        extra=["--load-output", load_out])
    assert rc == 0, err
    text = load_out.read_text()
    count = int(re.search(r"^\s*(\d+) requests in ", text, re.M).group(1))
    rate = float(re.search(r"^Requests/sec:\s*([\d.]+)", text, re.M).group(1))
    assert count > 0
    assert data["requests"] == count and data["requests_source"] == "wrk"
    assert data["requests_per_s"] == pytest.approx(rate, abs=0.01)
    assert data["cpu_us_per_request"] > 0
    assert_measured(data)
    assert_server_stopped(data, port)


@pytest.mark.skipif(shutil.which("ab") is None, reason="ab is not installed")
def test_request_count_from_ab(tmp_path):
    rc, _, err, data, port = watch_server(
        tmp_path, ["ab", "-q", "-n", 40, "-c", 2, "http://127.0.0.1:{port}/index.html"])
    assert rc == 0, err
    assert data["requests"] == 40 and data["requests_source"] == "ab"
    assert data["requests_per_s"] > 0
    assert_server_stopped(data, port)


@pytest.mark.skipif(shutil.which("h2load") is None, reason="h2load is not installed")
def test_request_count_from_h2load(tmp_path):
    rc, _, err, data, port = watch_server(
        tmp_path, ["h2load", "--h1", "-n", 40, "-c", 2, "http://127.0.0.1:{port}/index.html"])
    assert rc == 0, err
    assert data["requests"] == 40 and data["requests_source"] == "h2load"
    assert data["requests_per_s"] > 0
    assert_server_stopped(data, port)


CANNED = {
    "wrk": ("Running 1s test @ http://x/\n  2 threads and 10 connections\n"
            "  123456 requests in 10.00s, 1.23MB read\nRequests/sec:  12345.60\n",
            123456, 12345.6),
    "ab": ("Concurrency Level:      4\nComplete requests:      777\nFailed requests:        0\n"
           "Requests per second:    1554.20 [#/sec] (mean)\n", 777, 1554.2),
    "h2load": ("finished in 1.23s, 812.34 req/s, 1.20MB/s\nrequests: 1000 total, 1000 started, "
               "1000 done, 998 succeeded, 2 failed, 0 errored, 0 timeout\n", 998, 812.34),
}


@pytest.mark.parametrize("tool", sorted(CANNED))
def test_recognises_load_tool_output(tmp_path, tool):
    """What each tool prints, replayed by a stand-in load command."""
    text, requests, rate = CANNED[tool]
    summary = tmp_path / "summary.json"
    rc, out, err = run_watch(["--run", "exec sleep 30", "--summary-json", summary, "--",
                              sys.executable, "-c", f"import sys; sys.stdout.write({text!r})"])
    assert rc == 0, err
    assert text in out
    data = json.loads(summary.read_text())
    assert data["requests"] == requests
    assert data["requests_source"] == tool
    assert data["requests_per_s"] == pytest.approx(rate)
    assert not pid_exists(data["pid"])


def test_load_exit_status_is_passed_on(tmp_path):
    summary = tmp_path / "summary.json"
    rc, _, err = run_watch(["--run", "exec sleep 30", "-q", "-s", summary, "--",
                            "sh", "-c", "sleep 0.2; exit 3"])
    assert rc == 3, err
    data = json.loads(summary.read_text())
    assert data["load_exit_status"] == 3
    assert data["requests"] is None
    assert not pid_exists(data["pid"])
    rc, _, _ = run_watch(["--run", "exec sleep 30", "-q", "--", "/no/such/load-tool"])
    assert rc == 127


def test_server_that_ignores_sigterm_is_killed(tmp_path):
    summary, pids = tmp_path / "summary.json", tmp_path / "pids"
    # The sleeps inherit the ignored SIGTERM: only SIGKILL stops the tree.
    server = f"trap '' TERM; sleep 60 & echo $! >> {pids}; sleep 60 & echo $! >> {pids}; wait"
    started = time.monotonic()
    sleeps = []
    try:
        rc, _, err = run_watch(["--run", server, "--duration", 0.5, "--grace", 0.5, "-q",
                                "-s", summary])
        sleeps = [int(p) for p in pids.read_text().split()]
        assert rc == 0, err
        assert "SIGKILL" in err
        assert time.monotonic() - started < 20 * SLOW
        data = json.loads(summary.read_text())
        assert data["processes_peak"] == 3  # the shell and both sleeps
        assert not pid_exists(data["pid"])
        # SIGKILL is sent when mk-watch returns; a loaded machine may run the
        # sleeps' exit a moment later.
        assert len(sleeps) == 2
        deadline = time.monotonic() + 5 * SLOW
        while any(pid_exists(p) for p in sleeps) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not any(pid_exists(p) for p in sleeps), sleeps
    finally:
        kill_pids([p for p in sleeps if pid_exists(p)])


def test_server_exiting_early_is_an_error(tmp_path):
    rc, _, err = run_watch(["--run", "sleep 0.3", "--duration", 2, "-q"])
    assert rc == 1
    assert "exited before the end" in err


def test_pid_mode_counts_the_whole_tree(tmp_path):
    """A shell with two sleeping children: three processes, one thread each."""
    shell = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60 & wait"])
    children = []
    try:
        deadline = time.monotonic() + 10
        while len(children) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
            children = descendants(shell.pid)
        assert len(children) == 2, "the shell did not start its children"
        summary = tmp_path / "summary.json"
        rc, _, err = run_watch(["--pid", shell.pid, "--duration", 1, "--interval", 50, "-q",
                                "--summary-json", summary])
        assert rc == 0, err
        data = json.loads(summary.read_text())
        assert data["pid"] == shell.pid
        assert data["processes_peak"] == 3
        assert data["threads_peak"] == 3
        assert data["samples"] >= 5
        assert data["server_command"] is None and data["load_command"] is None
        # --pid never signals what it watches.
        assert shell.poll() is None and all(pid_exists(c) for c in children)
    finally:
        kill_pids(children + descendants(shell.pid) + [shell.pid])
        shell.wait(timeout=10)
