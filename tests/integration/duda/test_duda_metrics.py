"""Duda's requests per service in the control plugin's MetricsPath, declared
through the plugin API (ABI 3.20): monkey_duda_service_requests_total by site
and service, exact after a known number of requests, the same figure as the
service's dashboard shows, and `promtool check metrics` clean."""

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BUILD, SLOW, needs_dlopen, needs_part
from test_duda import duda_server, example, services  # noqa: F401 (services: a fixture)

CONTROL_SO = BUILD / "plugins" / "monkey-control.so"

pytestmark = [needs_dlopen, needs_part("metrics", "the metrics (MK_METRICS)")]

SAMPLE = re.compile(r'^monkey_duda_service_requests_total\{site="([^"]*)",service="([^"]*)"\} (\d+)$',
                    re.M)


def test_requests_per_service(make_server, services):  # noqa: F811
    srv = duda_server(make_server, services, [example("hello"), example("query_string")])
    srv.plugins.append(str(CONTROL_SO))
    (srv.conf / "plugins" / "control.conf").write_text(
        f"[CONTROL]\n    Socket {srv.dir}/ctl.sock\n    MetricsPath /metrics\n")
    srv.start()
    for _ in range(3):
        assert srv.get("/hello/hello").status == 200
    assert srv.get("/hello/users/7").status == 200
    assert srv.get("/query_string/").status == 400  # a route of the service: "give ?name="
    assert srv.get("/site.txt").status == 200  # the site's own file: no service's

    def counts():
        text = srv.get("/metrics").body.decode()
        return text, {svc: int(n) for site, svc, n in SAMPLE.findall(text) if site}

    deadline = time.monotonic() + 5 * SLOW
    text, got = counts()
    while got.get("hello") != 4 and time.monotonic() < deadline:
        time.sleep(0.05)
        text, got = counts()
    assert got["hello"] == 4, text
    assert got["query_string"] == 1, text
    assert "# TYPE monkey_duda_service_requests_total counter" in text
    doc = (Path(__file__).resolve().parents[3] / "docs" / "observability.md").read_text()
    assert "| `monkey_duda_service_requests_total` | counter |" in doc
    # the dashboard reads the same counter (its own request counted too)
    body = srv.get("/hello/dashboard").body.decode()
    assert re.search(r"requests: 5\b", body), body
    if shutil.which("promtool"):
        p = subprocess.run(["promtool", "check", "metrics"], input=text.encode(),
                           capture_output=True, timeout=30)
        assert p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(), p
