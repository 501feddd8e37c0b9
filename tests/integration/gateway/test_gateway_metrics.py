"""The metrics the gateways declare through the plugin API (ABI 3.20:
api->metric_family and what follows), as the control plugin's MetricsPath
shows them: the proxy's per upstream server (requests, failures by kind,
time to first byte, up, connections open and idle), FastCGI's per backend
(requests, failures by kind, duration). Each test sends a known mix to
backends it starts (proxy_upstream.py, fcgi_responder.py; stopped by PID),
including a dead upstream, one that hangs past Timeout, one that closes,
and checks the counters exactly, against the plugin's JSON status too (the
same counters), and the exposition with `promtool check metrics`."""

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import SLOW, free_port, needs_dlopen, needs_part
from gwutil import get, plugin_status
from test_cgi import cgi  # noqa: F401 (a fixture)
from test_fastcgi import make_php_server
from test_fastcgi_backends import Responder
from test_proxy import PROXY_SO, Upstream, proxy_server

pytestmark = [needs_dlopen, needs_part("metrics", "the metrics (MK_METRICS)"),
              pytest.mark.skipif(not PROXY_SO.exists(), reason="built without the proxy plugin")]

# the sample parser of the server's own metrics' tests
from test_metrics import parse, value  # noqa: E402


def with_metrics(srv):
    """The control plugin's JSON status at /server-status and its metrics at /metrics."""
    (srv.conf / "plugins" / "control.conf").write_text(
        f"[CONTROL]\n    Socket {srv.dir}/ctl.sock\n    HttpPath /server-status\n"
        "    MetricsPath /metrics\n")
    return srv


def documented(prefix):
    """The plugins' families of docs/observability.md whose names start with prefix."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "observability.md").read_text()
    start = text.index("| plugin metric | type | labels | meaning |")
    table = text[start:text.index("\n\n", start)]
    names = re.findall(r"^\| `([a-z0-9_]+)` \|", table, re.M)
    return [n for n in names if n.startswith(prefix)]


def served_as_documented(text, prefix):
    """Every family of the table with that prefix is served, and no other of the prefix."""
    names = documented(prefix)
    assert len(names) >= 3, names
    served = {re.sub(r"_(bucket|sum|count)$", "", m) for m in
              re.findall(r"^([a-z0-9_]+)[{ ]", text.decode(), re.M) if m.startswith(prefix)}
    assert served == set(names), (served, names)


def scrape(srv):
    r = get(srv, "/metrics")
    assert r.status == 200, r
    return r.body, parse(r.body.decode())


def scrape_until(srv, check, timeout=5.0):
    """Scrape until check(samples) holds (a request is counted at its end, a moment after
    the client has its answer); the last scrape's (text, samples)."""
    deadline = time.monotonic() + timeout * SLOW
    while True:
        text, samples = scrape(srv)
        if check(samples) or time.monotonic() > deadline:
            return text, samples
        time.sleep(0.05)


def promtool_ok(text):
    if shutil.which("promtool") is None:
        return
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       timeout=30)
    assert p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(), \
        (p.stdout, p.stderr)


@pytest.fixture
def started():
    procs = []
    yield procs
    for p in procs:
        p.stop()


def test_proxy_upstream_counters(make_server, started):
    a = Upstream("a")
    hang = Upstream("hang", ["--hang"])
    close = Upstream("close", ["--close"])
    started += [a, hang, close]
    dead = f"127.0.0.1:{free_port()}"
    conf = (f"    Timeout 1\n    MaxFails 1000\n    Upstream app\n    Server {a.addr}\n"
            f"    Upstream gone\n    Server {dead}\n")
    site = (f"    Pass /dead gone\n    Pass /slow {hang.addr}\n    Pass /close {close.addr}\n"
            "    Pass / app\n")
    srv = with_metrics(proxy_server(make_server, conf=conf, site=site, control=True)).start()

    assert get(srv, "/bad").status == 502  # Content-Length and Transfer-Encoding: bad response
    c = srv.conn()
    for _ in range(4):
        assert c.request("GET", "/echo").status == 200
    c.close()
    for _ in range(3):
        assert get(srv, "/dead/x").status == 502
    assert get(srv, "/slow/x").status == 504
    for _ in range(2):
        assert get(srv, "/close/x").status == 502

    req = "monkey_proxy_upstream_requests_total"
    fail = "monkey_proxy_upstream_failures_total"
    ttfb = "monkey_proxy_upstream_time_to_first_byte_seconds"
    want = {
        (req, "app", a.addr): 5, (req, "gone", dead): 3,
        (req, hang.addr, hang.addr): 1, (req, close.addr, close.addr): 2,
    }
    want_fail = {
        ("app", a.addr, "bad_response"): 1, ("gone", dead, "connect"): 3,
        (hang.addr, hang.addr, "timeout"): 1, (close.addr, close.addr, "reset"): 2,
    }

    def done(s):
        return all(value(s, n, upstream=u, server=v) == k for (n, u, v), k in want.items()) and \
            value(s, ttfb + "_count", upstream="app", server=a.addr) == 5

    text, s = scrape_until(srv, done)
    for (n, u, v), k in want.items():
        assert value(s, n, upstream=u, server=v) == k, (n, u, v, s)
    # every failure by its kind, and no other
    for (u, v, kind), k in want_fail.items():
        assert value(s, fail, upstream=u, server=v, kind=kind) == k, (u, v, kind)
        assert value(s, fail, upstream=u, server=v) == k, (u, v)
    # five answers' first bytes from a (the bad one's too), none from the others
    assert value(s, ttfb + "_count", upstream="app", server=a.addr) == 5
    assert value(s, ttfb + "_bucket", upstream="app", server=a.addr, le="+Inf") == 5
    assert value(s, ttfb + "_count", upstream="gone", server=dead) == 0
    # a's connection: kept alive in the worker's pool, open and idle
    conns = "monkey_proxy_upstream_connections"
    assert value(s, conns, server=a.addr, state="open") == 1
    assert value(s, conns, server=a.addr, state="idle") == 1
    assert value(s, conns, server=dead, state="open") == 0
    assert value(s, "monkey_proxy_upstream_up", server=a.addr) == 1
    promtool_ok(text)
    served_as_documented(text, "monkey_proxy_")

    # the JSON status reads the same counters
    st = plugin_status(srv, "proxy")
    for i, addr in enumerate([dead, hang.addr, close.addr, a.addr]):  # in the routes' order
        assert st[f"server{i}_requests"] == value(s, req, server=addr), (i, st)
        assert st[f"server{i}_failures"] == value(s, fail, server=addr), (i, st)
        assert st[f"server{i}_ttfb_count"] == value(s, ttfb + "_count", server=addr)


def test_proxy_down_and_openmetrics(make_server, started):
    """MaxFails 1: the dead server is out (up 0) after its first failure; the
    OpenMetrics form carries the same families and ends with # EOF."""
    a = Upstream("a")
    started.append(a)
    dead = f"127.0.0.1:{free_port()}"
    conf = f"    MaxFails 1\n    FailTimeout 60\n    Upstream app\n    Server {dead}\n"
    srv = with_metrics(proxy_server(make_server, conf=conf, site="    Pass / app\n",
                                    control=True)).start()
    assert get(srv, "/echo").status == 502
    text, s = scrape(srv)
    assert value(s, "monkey_proxy_upstream_up", server=dead) == 0
    assert value(s, "monkey_proxy_upstream_failures_total", server=dead, kind="connect") == 1
    r = get(srv, "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    body = r.body.decode()
    assert "# TYPE monkey_proxy_upstream_requests counter\n" in body
    assert "# TYPE monkey_proxy_upstream_up gauge\n" in body
    assert body.endswith("# EOF\n")


def test_fastcgi_backend_counters(make_server, tmp_path, started):
    sock = tmp_path / "fcgi.sock"
    started.append(Responder(sock))
    srv = make_php_server(make_server, sock, conf="    Timeout 1\n", control=True)
    srv.file("a.php", "")
    srv = with_metrics(srv).start()
    for _ in range(5):
        assert get(srv, "/a.php").status == 200
    assert get(srv, "/a.php?mode=garbage").status == 502
    assert get(srv, f"/a.php?mode=hold&until={tmp_path}/never").status == 504

    backend = f"unix:{sock}"
    req = "monkey_fastcgi_backend_requests_total"
    fail = "monkey_fastcgi_backend_failures_total"
    dur = "monkey_fastcgi_backend_duration_seconds"
    text, s = scrape_until(srv, lambda s: value(s, dur + "_count", backend=backend) == 7)
    assert value(s, req, backend=backend) == 7
    assert value(s, fail, backend=backend, kind="bad_gateway") == 1
    assert value(s, fail, backend=backend, kind="timeout") == 1
    assert value(s, fail, backend=backend, kind="connect") == 0
    assert value(s, dur + "_count", backend=backend) == 7
    # the one held past Timeout took a second at least
    assert value(s, dur + "_sum", backend=backend) >= 1.0
    promtool_ok(text)
    served_as_documented(text, "monkey_fastcgi_")
    st = plugin_status(srv, "fastcgi")
    assert st["backend0_requests"] == 7 and st["backend0_failures"] == 1
    assert st["backend0_timeouts"] == 1
    # health and connections, read at the scrape from what the status shows
    conns = "monkey_fastcgi_backend_connections"
    assert get(srv, "/a.php").status == 200  # a connection kept for the next one
    _, s = scrape_until(srv, lambda s: value(s, conns, backend=backend, state="idle") == 1)
    assert value(s, "monkey_fastcgi_backend_up", backend=backend) == 1
    assert value(s, conns, backend=backend, state="open") == 1
    assert value(s, conns, backend=backend, state="idle") == 1
    st = plugin_status(srv, "fastcgi")
    assert (st["backend0_up"], st["backend0_active"], st["backend0_idle"]) == (1, 1, 1), st


def test_fastcgi_dead_backend(make_server, tmp_path):
    """A backend nobody listens on: each request's connect fails, counted by kind."""
    sock = tmp_path / "none.sock"
    srv = make_php_server(make_server, sock, control=True)
    srv.file("a.php", "")
    srv = with_metrics(srv).start()
    assert get(srv, "/a.php").status in (502, 503)
    _, s = scrape(srv)
    assert value(s, "monkey_fastcgi_backend_failures_total", backend=f"unix:{sock}",
                 kind="connect") == 1
    assert value(s, "monkey_fastcgi_backend_up", backend=f"unix:{sock}") == 0  # marked down
    assert value(s, "monkey_fastcgi_backend_connections", backend=f"unix:{sock}",
                 state="open") == 0
    assert Path(sock).exists() is False


def test_cgi_backend_counters(cgi):  # noqa: F811 (the fixture)
    """Per interpreter (or (exec) for scripts run themselves): scripts started, a bad header
    block (502), one silent past Timeout (504)."""
    (cgi.conf / "plugins" / "control.conf").write_text(
        f"[CONTROL]\n    Socket {cgi.dir}/ctl.sock\n    HttpPath /server-status\n"
        "    MetricsPath /metrics\n")
    cgi.plugins.append(str(PROXY_SO.parent / "monkey-control.so"))
    cgi.start()
    for _ in range(3):
        assert get(cgi, "/cgi-bin/env.sh").status == 200
    assert get(cgi, "/cgi-bin/closein.py").status == 200
    assert get(cgi, "/cgi-bin/bad.sh").status == 502
    assert get(cgi, "/cgi-bin/silent.sh").status == 504
    req = "monkey_cgi_backend_requests_total"
    fail = "monkey_cgi_backend_failures_total"
    dur = "monkey_cgi_backend_duration_seconds"
    text, s = scrape_until(cgi, lambda s: value(s, dur + "_count") == 6)
    assert value(s, req, backend="(exec)") == 5
    assert value(s, req, backend="/usr/bin/python3") == 1
    assert value(s, fail, backend="(exec)", kind="bad_gateway") == 1
    assert value(s, fail, backend="(exec)", kind="timeout") == 1
    assert value(s, fail, backend="(exec)") == 2
    assert value(s, fail, backend="/usr/bin/python3") == 0
    assert value(s, dur + "_count", backend="(exec)") == 5
    assert value(s, dur + "_count", backend="/usr/bin/python3") == 1
    promtool_ok(text)
    served_as_documented(text, "monkey_cgi_")
    st = plugin_status(cgi, "cgi")
    assert (st["backend0_requests"], st["backend0_failures"]) == (5, 2), st  # (exec)
    assert (st["backend1_requests"], st["backend1_failures"]) == (1, 0), st  # python3
