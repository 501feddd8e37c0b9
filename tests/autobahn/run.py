#!/usr/bin/env python3
"""The Autobahn TestSuite's fuzzing client against the Duda websocket package.

    python3 tests/autobahn/run.py [--build build] [--cases 1-7,9,10,12,13]

`make autobahn` runs it (outside `make test`: sections 12 and 13 alone take
minutes). It starts build/bin/monkey with the test service tests/duda/wstest
and runs `wstest -m fuzzingclient` against /wstest/big (echo, permessage-
deflate accepted, 64 MiB limits); every case must end OK, NON-STRICT or
INFORMATIONAL, none FAILED or UNIMPLEMENTED. The HTML report is written to
BUILD/autobahn/reports/index.html.

The suite (PyPI autobahntestsuite 0.8.2) runs on Python 2.7 only: the
interpreter is $AUTOBAHN_PYTHON2, else python2.7 or python2 on PATH, else
a pyenv 2.7 version. It is installed once with that interpreter's pip
into BUILD/autobahn/lib (pip --target); without Python 2.7 or without the
package index the run is skipped with the reason (exit status 77).
"""

import argparse
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP = 77
SECTIONS = {"1", "2", "3", "4", "5", "6", "7", "9", "10", "12", "13"}


def python2():
    """A Python 2.7 interpreter as a command list, or None."""
    if os.environ.get("AUTOBAHN_PYTHON2"):
        return [os.environ["AUTOBAHN_PYTHON2"]]
    for name in ("python2.7", "python2"):
        path = shutil.which(name)
        if path and subprocess.run([path, "-c", "import sys; assert sys.version_info[:2] == (2, 7)"],
                                   capture_output=True).returncode == 0:
            return [path]
    pyenv = shutil.which("pyenv")
    if pyenv:
        versions = subprocess.run([pyenv, "versions", "--bare"], capture_output=True,
                                  text=True).stdout.split()
        for v in versions:
            if v.startswith("2.7"):
                root = subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip()
                return [os.path.join(root, "versions", v, "bin", "python2.7")]
    return None


def install(py, lib):
    if os.path.exists(os.path.join(lib, "bin", "wstest")):
        return True
    p = subprocess.run(py + ["-m", "pip", "install", "-q", "--target", lib,
                             "autobahntestsuite==0.8.2"], capture_output=True, text=True)
    if p.returncode != 0:
        print(f"autobahn: pip install autobahntestsuite failed:\n{p.stderr[-2000:]}",
              file=sys.stderr)
        return False
    # zope.interface is a namespace package that pip --target leaves without its __init__.
    open(os.path.join(lib, "zope", "__init__.py"), "a").close()
    return True


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_monkey(build, tmp):
    services = os.path.join(tmp, "services")
    subprocess.run([os.path.join(build, "bin", "duda"), "build",
                    os.path.join(ROOT, "tests", "duda", "wstest"), "-o", services],
                   check=True, stdout=subprocess.DEVNULL)
    port = free_port()
    conf = os.path.join(tmp, "conf")
    os.makedirs(os.path.join(conf, "sites"))
    os.makedirs(os.path.join(conf, "plugins"))
    with open(os.path.join(conf, "monkey.conf"), "w") as f:
        f.write(f"[SERVER]\n    Listen 127.0.0.1:{port}\n    Workers 2\n")
    with open(os.path.join(conf, "sites", "default"), "w") as f:
        f.write(f"[HOST]\n    ServerName localhost\n    DocumentRoot {tmp}\n\n"
                "[WEB_SERVICE]\n    Name wstest\n")
    with open(os.path.join(conf, "plugins.load"), "w") as f:
        f.write(f"[PLUGINS]\n    Load {os.path.join(build, 'plugins', 'monkey-duda.so')}\n")
    with open(os.path.join(conf, "plugins", "duda.conf"), "w") as f:
        f.write(f"[DUDA]\n    ServicesRoot {services}\n"
                f"    PackagesRoot {os.path.join(build, 'duda-packages')}\n")
    log = open(os.path.join(tmp, "monkey.log"), "w")
    proc = subprocess.Popen([os.path.join(build, "bin", "monkey"), "-c", conf], stdout=log,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit(f"autobahn: monkey did not start (see {tmp}/monkey.log)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("MK_BUILD", "build"))
    ap.add_argument("--cases", default="1-7,9,10,12,13",
                    help="sections (numbers and ranges), groups (12.1) or cases (12.1.1); "
                         "default 1-7,9,10,12,13")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    sections = []
    for part in args.cases.split(","):
        if "." in part:  # one case or group: 12.1.1, 12.1
            sections.append(part)
            continue
        lo, _, hi = part.partition("-")
        sections += [str(n) for n in range(int(lo), int(hi or lo) + 1) if str(n) in SECTIONS]
    if not os.path.exists(os.path.join(build, "duda-packages", "websocket.dpkg")):
        print("autobahn: skipped: the websocket package is not built", file=sys.stderr)
        return SKIP
    py = python2()
    if not py:
        print("autobahn: skipped: the suite needs Python 2.7 (set AUTOBAHN_PYTHON2)", file=sys.stderr)
        return SKIP
    lib = os.path.join(build, "autobahn", "lib")
    if not install(py, lib):
        print("autobahn: skipped: autobahntestsuite could not be installed", file=sys.stderr)
        return SKIP
    reports = os.path.join(build, "autobahn", "reports")
    shutil.rmtree(reports, ignore_errors=True)
    tmp = tempfile.mkdtemp(prefix="autobahn-")
    proc, port = start_monkey(build, tmp)
    try:
        spec = os.path.join(tmp, "fuzzingclient.json")
        with open(spec, "w") as f:
            json.dump({"outdir": reports,
                       "servers": [{"agent": "monkey",
                                    "url": f"ws://127.0.0.1:{port}/wstest/big"}],
                       "cases": [s if s.count(".") == 2 else f"{s}.*" for s in sections],
                       "exclude-cases": [],
                       "exclude-agent-cases": {}}, f)
        env = dict(os.environ, PYTHONPATH=lib)
        t0 = time.monotonic()
        with open(os.path.join(tmp, "wstest.log"), "w") as log:
            rc = subprocess.run(py + [os.path.join(lib, "bin", "wstest"), "-m", "fuzzingclient",
                                      "-s", spec], env=env, stdout=log, stderr=subprocess.STDOUT,
                                cwd=tmp).returncode
        if rc != 0:
            print(f"autobahn: wstest failed ({rc}); see {tmp}/wstest.log", file=sys.stderr)
            return 1
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    counts, bad = {}, []
    for path in glob.glob(os.path.join(reports, "monkey_case_*.json")):
        with open(path) as f:
            case = json.load(f)
        counts[case["behavior"]] = counts.get(case["behavior"], 0) + 1
        if case["behavior"] not in ("OK", "NON-STRICT", "INFORMATIONAL") or \
                case["behaviorClose"] not in ("OK", "INFORMATIONAL"):
            bad.append(f"{case['id']}: {case['behavior']}/{case['behaviorClose']}: "
                       f"{case.get('result', '')}")
    total = sum(counts.values())
    print(f"autobahn: sections {','.join(sections)}: {total} cases in "
          f"{time.monotonic() - t0:.0f} s: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
          + f"; report {reports}/index.html")
    for line in sorted(bad):
        print("  " + line)
    return 1 if bad or total == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
