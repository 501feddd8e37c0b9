"""h2spec (the HTTP/2 conformance suite, built by tools/deps.sh test from
tools/h2spec/go.mod) in strict mode against an h2c listener and a TLS
listener.

Without h2spec the tests are skipped, except where make test runs them
(MK_TEST_DEPS=1: tools/deps.sh test has run, and fails when it cannot build
h2spec): there a missing h2spec is a failure, so that the conformance suite
is never silently left out of a build with HTTP/2."""

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
    first = gopath.split(os.pathsep)[0] if gopath else os.path.expanduser("~/go")
    path = Path(first) / "bin" / "h2spec"
    return str(path) if path.exists() else None


H2SPEC = find_h2spec()
# make test sets it after tools/deps.sh test, which builds h2spec or fails
DEPS_INSTALLED = os.environ.get("MK_TEST_DEPS") == "1"


def require_h2spec():
    """Skip without h2spec, or fail where tools/deps.sh test should have built it."""
    if H2SPEC is not None:
        return
    why = "no h2spec in PATH or in $(go env GOPATH)/bin"
    if DEPS_INSTALLED:
        pytest.fail(f"{why}, though tools/deps.sh test ran (MK_TEST_DEPS=1)")
    pytest.skip(f"{why} (tools/deps.sh test builds it)")


def run_h2spec(port, *extra):
    p = subprocess.run([H2SPEC, "-S", "-h", "127.0.0.1", "-p", str(port),
                        "-o", str(int(3 * SLOW)), *extra],
                       capture_output=True, text=True, timeout=300 * SLOW)
    m = re.search(r"(\d+) tests, (\d+) passed, (\d+) skipped, (\d+) failed", p.stdout)
    assert m, p.stdout[-2000:] + p.stderr
    failures = p.stdout[p.stdout.find("Failures:"):] if "Failures:" in p.stdout else ""
    return int(m.group(1)), int(m.group(4)), failures


def test_h2spec_strict_over_h2c(make_server):
    require_h2spec()
    srv = h2c_server(make_server)
    srv.file("index.html", "<h1>index</h1>\n")
    srv.start()
    total, failed, failures = run_h2spec(srv.port)
    assert total >= 146 and failed == 0, failures


def test_h2spec_strict_over_tls(make_server):
    for m in TLS_MARKS:
        if m.args[0]:
            pytest.skip(m.kwargs["reason"])
    require_h2spec()
    srv = tls_server(make_server)
    srv.file("index.html", "<h1>index</h1>\n")
    srv.start()
    total, failed, failures = run_h2spec(srv.port, "-t", "-k")
    assert total >= 146 and failed == 0, failures
