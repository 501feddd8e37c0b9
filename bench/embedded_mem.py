#!/usr/bin/env python3
"""The memory of the embedded profile: idle PSS and peak RSS under load.

    bench/embedded_mem.py BUILD [--emulator qemu-arm-static] [--seconds 10]

Starts BUILD/bin/monkey with 2 workers and the plugins of the embedded
profile loaded (logger, with an access log; access; dirlisting; control,
with its socket), serving a small site on a free loopback port; fetches a
page, waits a second and reads the idle process's /proc/PID/smaps_rollup
(Pss, Rss); then runs `wrk -c100 -t2` for --seconds on a 1 KB file and
reads VmHWM (peak RSS) of /proc/PID/status. Prints one Markdown row.

--emulator runs the server under qemu-user (an ARM cross build): the
process measured is then the emulator's, with its own code, its RCU
thread and the translated code, so its figures are not the server's.
The emulator is given a guest base (-B): every mapping of the emulated
program (its binary, its C library, its heap and stacks) lies in the
guest's span from there (GUEST_SPAN), and the script also sums the PSS and
RSS of those mappings alone: what the program itself maps and touches, as it
would on the board, give or take the pages qemu reads or writes for it.
"""

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

GUEST_BASE = 0x4000000000  # -B: the guest's addresses start here
# How far the guest's mappings reach: a 32-bit guest's 4 GiB; a 64-bit guest
# (aarch64) is loaded at 0x55... and maps below that: 1 TiB holds it all,
# far below the emulator's own mappings (0x7f...).
GUEST_SPAN = {"qemu-arm-static": 1 << 32, "qemu-aarch64-static": 1 << 40}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def conf_dir(root, port):
    conf, site = root / "conf", root / "htdocs"
    (conf / "sites").mkdir(parents=True)
    (conf / "plugins").mkdir()
    site.mkdir()
    (site / "index.html").write_text("<html><body>hello</body></html>\n")
    (site / "file.txt").write_text("x" * 1024)
    (conf / "monkey.conf").write_text(f"[SERVER]\n    Listen 127.0.0.1:{port}\n    Workers 2\n")
    (conf / "sites" / "default").write_text(
        f"[HOST]\n    ServerName localhost\n    DocumentRoot {site}\n")
    (conf / "plugins.load").write_text(
        "[PLUGINS]\n    Load logger\n    Load access\n    Load dirlisting\n    Load control\n")
    (conf / "plugins" / "logger.conf").write_text(
        f"[LOGGER]\n    AccessLog {root}/access.log\n    ErrorLog {root}/error.log\n")
    (conf / "plugins" / "control.conf").write_text(f"[CONTROL]\n    Socket {root}/ctl.sock\n")
    return conf


def smaps(pid, lo=None, hi=None):
    """(Pss, Rss) in KiB of the mappings of pid, or of those within [lo, hi)."""
    pss = rss = 0
    inside = lo is None
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) ", line)
        if m:
            start = int(m.group(1), 16)
            inside = lo is None or lo <= start < hi
            continue
        if inside and line.startswith("Pss:"):
            pss += int(line.split()[1])
        elif inside and line.startswith("Rss:"):
            rss += int(line.split()[1])
    return pss, rss


def status(pid, key):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--emulator", help="qemu-arm-static or qemu-aarch64-static")
    ap.add_argument("--seconds", type=int, default=10)
    a = ap.parse_args()
    if not shutil.which("wrk"):
        sys.exit("embedded_mem.py: needs wrk (tools/deps.sh test installs it)")
    monkey = Path(a.build).resolve() / "bin" / "monkey"
    port = free_port()
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        conf = conf_dir(root, port)
        cmd = [str(monkey), "-c", str(conf)]
        if a.emulator:
            cmd = [a.emulator, "-B", hex(GUEST_BASE)] + cmd
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(root / "err", "w"))
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        sys.exit("the server did not start: " + (root / "err").read_text())
                    time.sleep(0.1)
            time.sleep(1)
            pid = proc.pid
            pss, rss = smaps(pid)
            span = GUEST_SPAN.get(os.path.basename(a.emulator or ""), 1 << 32)
            guest = smaps(pid, GUEST_BASE, GUEST_BASE + span) if a.emulator else None
            threads = len(os.listdir(f"/proc/{pid}/task"))
            w = subprocess.run(["wrk", "-c100", "-t2", f"-d{a.seconds}s",
                                f"http://127.0.0.1:{port}/file.txt"], capture_output=True,
                               text=True)
            rate = re.search(r"Requests/sec:\s+([\d.]+)", w.stdout)
            hwm = status(pid, "VmHWM")
            after = smaps(pid, GUEST_BASE, GUEST_BASE + span) if a.emulator else None
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    print("| build | idle PSS | idle RSS | threads | peak RSS under wrk -c100 | requests/s |"
          + (" guest idle PSS / RSS | guest RSS after the load |" if a.emulator else ""))
    print("|---|---|---|---|---|---|" + ("---|---|" if a.emulator else ""))
    row = (f"| {a.build}{' under ' + a.emulator if a.emulator else ''} | {pss} KiB | {rss} KiB "
           f"| {threads} | {hwm} KiB | {rate.group(1) if rate else '?'} |")
    if a.emulator:
        row += f" {guest[0]} KiB / {guest[1]} KiB | {after[1]} KiB |"
    print(row)


if __name__ == "__main__":
    main()
