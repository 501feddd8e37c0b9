"""h2spec (the HTTP/2 conformance suite, installed by tools/deps.sh test with
`go install`) in strict mode against an h2c listener and a TLS listener."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import SLOW
from h2util import H2_MARKS, h2c_server
from tlsutil import TLS_MARKS, tls_server

pytestmark = H2_MARKS


def find_h2spec():
    found = shutil.which("h2spec")
    if found:
        return found
    try:
        gopath = subprocess.run(["go", "env", "GOPATH"], capture_output=True, text=True,
                                timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    path = Path(gopath or os.path.expanduser("~/go")) / "bin" / "h2spec"
    return str(path) if path.exists() else None


H2SPEC = find_h2spec()
needs_h2spec = pytest.mark.skipif(H2SPEC is None, reason="no h2spec (tools/deps.sh test)")


def run_h2spec(port, *extra):
    p = subprocess.run([H2SPEC, "-S", "-h", "127.0.0.1", "-p", str(port),
                        "-o", str(int(3 * SLOW)), *extra],
                       capture_output=True, text=True, timeout=300 * SLOW)
    m = re.search(r"(\d+) tests, (\d+) passed, (\d+) skipped, (\d+) failed", p.stdout)
    assert m, p.stdout[-2000:] + p.stderr
    failures = p.stdout[p.stdout.find("Failures:"):] if "Failures:" in p.stdout else ""
    return int(m.group(1)), int(m.group(4)), failures


@needs_h2spec
def test_h2spec_strict_over_h2c(make_server):
    srv = h2c_server(make_server)
    srv.file("index.html", "<h1>index</h1>\n")
    srv.start()
    total, failed, failures = run_h2spec(srv.port)
    assert total >= 146 and failed == 0, failures


@needs_h2spec
def test_h2spec_strict_over_tls(make_server):
    for m in TLS_MARKS:
        if m.args[0]:
            pytest.skip(m.kwargs["reason"])
    srv = tls_server(make_server)
    srv.file("index.html", "<h1>index</h1>\n")
    srv.start()
    total, failed, failures = run_h2spec(srv.port, "-t", "-k")
    assert total >= 146 and failed == 0, failures
