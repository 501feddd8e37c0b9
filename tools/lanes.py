#!/usr/bin/env python3
"""Run shell commands in parallel lanes, each lane's output kept apart.

    tools/lanes.py LOGDIR NAME=COMMAND [NAME=COMMAND ...]

`make test` runs its integration passes this way: most of a pass is spent
waiting (on timeouts, on clients, on servers starting), so two passes on
two CPUs take little more than the longer one. Each COMMAND runs under
`sh -c` with the caller's environment; its standard output and error go to
LOGDIR/NAME.log, printed whole when the lane ends, so that passes do not
interleave their lines. With SEQUENTIAL=1 in the environment, or a single
usable CPU, the lanes run one after the other instead.

The exit status is 0 when every lane succeeded, else 1; a summary line per
lane names its status and duration.
"""

import os
import subprocess
import sys
import time
from pathlib import Path


def parse(argv):
    if len(argv) < 3:
        sys.exit(__doc__.strip())
    lanes = []
    for arg in argv[2:]:
        name, sep, cmd = arg.partition("=")
        if not sep or not name or not cmd.strip():
            sys.exit(f"lanes.py: expected NAME=COMMAND, got {arg!r}")
        lanes.append((name, cmd))
    return Path(argv[1]), lanes


def report(name, log, rc, seconds):
    sys.stdout.write(f"\n==== lane {name}: {log}\n")
    sys.stdout.write(log.read_text(errors="replace"))
    sys.stdout.write(f"==== lane {name}: {'ok' if rc == 0 else f'FAILED (exit {rc})'}"
                     f" in {seconds / 60:.1f} min\n")
    sys.stdout.flush()


def main():
    logdir, lanes = parse(sys.argv)
    logdir.mkdir(parents=True, exist_ok=True)
    sequential = os.environ.get("SEQUENTIAL") == "1" or len(os.sched_getaffinity(0)) < 2
    results = []
    running = []
    for name, cmd in lanes:
        log = logdir / f"{name}.log"
        print(f"==== lane {name} starts: {cmd}", flush=True)
        with open(log, "wb") as out:
            proc = subprocess.Popen(["sh", "-c", cmd], stdout=out, stderr=subprocess.STDOUT)
        running.append((name, log, proc, time.monotonic()))
        if sequential:
            proc.wait()
    for name, log, proc, start in running:  # report in order, each as soon as it can
        rc = proc.wait()
        report(name, log, rc, time.monotonic() - start)
        results.append((name, rc))
    print()
    for name, rc in results:
        print(f"lane {name}: {'ok' if rc == 0 else 'FAILED'}")
    return 0 if all(rc == 0 for _, rc in results) else 1


if __name__ == "__main__":
    sys.exit(main())
